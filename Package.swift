// swift-tools-version:6.0
import PackageDescription

// Layering, bottom to top:
//   C modules (CLMDB, CCrypto, CJansson) — one Swift module imports each.
//   LedgerCore   — events, validation, JSON, time; no storage.
//   Projections  — pure folds over events (Projections/); no I/O.
//   LedgerStore  — the LMDB environment and the append-only event log.
//   LedgerBus    — the observer bus: "the head moved", and subscriptions that read the log.
//   LedgerServer — the HTTP API and SSE streams on libmicrohttpd.
//   LedgerImport — Apple Health exports (libxml2's SAX parser, libzip) turned into events.
//   LedgerCLI    — the `ledger` commands, testable in process.
//   ledger       — the executable, static; main.swift only calls LedgerCLI.
//   ledger-dynamic — the same, linked dynamically: `ledger` runs `serve` and `import` in it.

// libxml2, libzip and libmicrohttpd are opened with dlopen by the commands that use them
// (LazyLibrary), so that every other command starts without loading them and what they pull
// in (ICU, GnuTLS): their system-library targets name no library to link.
// libxml2's headers live in their own directory (Debian's, as `pkg-config --cflags
// libxml-2.0` prints it); LedgerImport and every module that imports it see them: clang
// rebuilds the CLibXML2 module for an importer when the headers change (an upgrade of
// libxml2-dev), and an importer without them failed to build until LedgerImport was rebuilt.
let libxml2Headers: [SwiftSetting] = [.unsafeFlags(["-Xcc", "-I/usr/include/libxml2"])]

// The `ledger` binary allocates with jemalloc (Debian's libjemalloc-dev), which replaces glibc's
// malloc for the whole process, the dlopen'ed libraries included. Side by side with the same code
// on glibc's allocator (three runs each), an import took 5-10 % less time and a rebuild about
// 13 % less CPU: the reading and appending threads hand each other every event's buffers, and
// glibc's frees across threads contend (README, Performance). In a dynamically linked program
// its archive's symbols are hidden by Swift's static link (`--exclude-libs ALL`), so libc's own
// allocations would be freed by the wrong allocator: `ledger-dynamic` links the shared library,
// which costs no measurable start-up time, and so does the benchmark, whose in-process figures
// then match the binaries'. The static `ledger` gets the archive from the same flag (`-l` finds
// only archives in a static link), and there glibc's own calls to malloc are bound to it at
// link time: glibc's allocator is not in the binary at all. A test checks both binaries.
let jemalloc: [LinkerSetting] = [
    .unsafeFlags(["-Xlinker", "--push-state", "-Xlinker", "--no-as-needed", "-Xlinker", "-ljemalloc", "-Xlinker", "--pop-state"]),
]

// `ledger` is a static position-independent executable: Swift's runtime, Foundation, glibc,
// jemalloc and the archives below are all in it, so a command starts with no dynamic loader,
// no shared library to load and no symbol to bind, and its address is still randomised. A short
// command (`project daily-steps` of a year) took 5.3 and 7.1 ms as a process linked dynamically
// and 4.2 and 5.7 ms linked so, on two ledgers (README, Performance). `Tools/ld-static-pie` is its linker: clang's
// `-static-pie` with LLVM's lld, less the library path SwiftPM adds, which a static PIE must not
// have. A static program cannot open shared libraries safely (the one it opened would bring a
// second libc), so the commands that do (`serve`: libmicrohttpd; `import`: libxml2, libzip) run
// in `ledger-dynamic`, the same program linked as before, which `ledger` executes in its place
// (`LedgerCommandLine.main`). Nor may it look up user or group names (Foundation's file
// attributes do): glibc then loads an NSS module, with the same second libc (README, Quick
// start). `ledger` depends on `ledger-dynamic` so that building it
// (`--product ledger`, `swift run ledger`) builds its companion from the same sources: an
// out-of-date one would run the old code's `import`. Nothing of it is linked into `ledger`.
let staticExecutable: [LinkerSetting] = [
    // `-z relro`: the pointers relocated at start (Swift's metadata, vtables, the GOT) are made
    // read-only once relocated, as in the dynamically linked build. lld does it by default; the
    // flag says so here, since the first static build, through GNU ld, left them writable
    // (`Tools/ld-static-pie`), and a test requires the segment.
    .unsafeFlags(["-static-executable", "-Xclang-linker", "-static-pie",
                  "-ld-path=\(Context.packageDirectory)/Tools/ld-static-pie",
                  "-Xlinker", "-z", "-Xlinker", "relro"]),
    // The archives Foundation's own need. A build with `--static-swift-stdlib` names them; a
    // plain `swift build` (the tests') compiles against the shared Foundation, whose modules do
    // not, and the link failed without them.
    .unsafeFlags(["-Xlinker", "--start-group", "-lCoreFoundation", "-l_FoundationICU", "-l_FoundationCShims",
                  "-l_FoundationCollections", "-lFoundation", "-lFoundationEssentials",
                  "-lFoundationInternationalization", "-lstdc++", "-Xlinker", "--end-group"]),
]

// LMDB, libcrypto and Jansson are linked from Debian's static archives (`-l:libNAME.a`), not as
// shared objects: every command loads them, and loading them was about half of a short
// command's start-up. libcrypto.so alone took about 2.5 ms to load and relocate (thousands of
// symbols, for the two calls the ledger makes), against nothing measurable for the few objects
// of the archive the link keeps; SHA-256 runs at the same speed (the CPU's SHA extensions too).
func staticArchives(_ names: [String]) -> [LinkerSetting] {
    names.map { .linkedLibrary(":lib\($0).a") }
}

// Release builds check exclusive access at compile time only (`-enforce-exclusivity=unchecked`):
// the run-time checks of every class property and global the appending and reading threads touch
// (`swift_beginAccess`, per access) were about 2 % of an import's CPU under `perf`. Debug builds,
// which the tests run, keep them, so an overlapping access still traps there.
let releaseChecks: [SwiftSetting] = [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]

let package = Package(
    name: "ledger",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "ledger", targets: ["ledger"]),
        .executable(name: "ledger-dynamic", targets: ["ledger-dynamic"]),
    ],
    targets: [
        // LMDB, libcrypto and Jansson are linked from their static archives (`staticArchives`).
        .systemLibrary(name: "CLMDB", path: "Sources/CLMDB", providers: [.apt(["liblmdb-dev"])]),
        .systemLibrary(name: "CCrypto", path: "Sources/CCrypto", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CJansson", path: "Sources/CJansson", providers: [.apt(["libjansson-dev"])]),
        // No pkgConfig here: it would link libxml2. Its headers' directory is given to the
        // modules that import it instead (`libxml2Headers`).
        .systemLibrary(name: "CLibXML2", path: "Sources/CLibXML2", providers: [.apt(["libxml2-dev"])]),
        .systemLibrary(name: "CZip", path: "Sources/CZip", providers: [.apt(["libzip-dev"])]),
        .systemLibrary(name: "CMicroHTTPD", path: "Sources/CMicroHTTPD", providers: [.apt(["libmicrohttpd-dev"])]),
        .target(name: "LedgerCore", dependencies: ["CCrypto", "CJansson"],
                path: "Sources/LedgerCore", swiftSettings: releaseChecks, linkerSettings: staticArchives(["crypto", "jansson"])),
        .target(name: "Projections", dependencies: ["LedgerCore"], path: "Projections", swiftSettings: releaseChecks),
        .target(name: "LedgerStore", dependencies: ["CLMDB", "LedgerCore", "Projections"],
                path: "Sources/LedgerStore", swiftSettings: releaseChecks, linkerSettings: staticArchives(["lmdb"])),
        .target(name: "LedgerBus", dependencies: ["LedgerStore", "LedgerCore", "Projections"],
                path: "Sources/LedgerBus", swiftSettings: releaseChecks),
        .target(name: "LedgerServer", dependencies: ["CMicroHTTPD", "LedgerBus", "LedgerStore", "LedgerCore", "Projections"],
                path: "Sources/LedgerServer", swiftSettings: releaseChecks),
        .target(name: "LedgerImport", dependencies: ["CLibXML2", "CZip", "LedgerCore"],
                path: "Sources/LedgerImport", swiftSettings: libxml2Headers + releaseChecks),
        .target(name: "LedgerCLI", dependencies: ["LedgerStore", "LedgerCore", "Projections", "LedgerImport",
                                                   "LedgerServer", "LedgerBus"],
                path: "Sources/LedgerCLI", swiftSettings: libxml2Headers + releaseChecks),
        .executableTarget(name: "ledger", dependencies: ["LedgerCLI", "ledger-dynamic"], path: "Sources/ledger", swiftSettings: releaseChecks,
                          linkerSettings: jemalloc + staticExecutable),
        .executableTarget(name: "ledger-dynamic", dependencies: ["LedgerCLI"], path: "Sources/ledger-dynamic",
                          swiftSettings: releaseChecks, linkerSettings: jemalloc),
        .executableTarget(name: "ledger-gen", dependencies: ["LedgerCore"],
                          path: "Tools/ledger-gen"),
        .target(name: "LedgerTestSupport", dependencies: ["LedgerCore"],
                path: "Tests/LedgerTestSupport"),
        .executableTarget(name: "ledger-bench", dependencies: ["LedgerStore", "LedgerCore", "Projections", "LedgerImport",
                                                              "LedgerTestSupport"],
                          path: "Tools/ledger-bench", swiftSettings: libxml2Headers, linkerSettings: jemalloc),
        .testTarget(name: "LedgerCoreTests", dependencies: ["LedgerCore"],
                    path: "Tests/LedgerCoreTests"),
        .testTarget(name: "ProjectionsTests", dependencies: ["Projections", "LedgerCore", "LedgerTestSupport"],
                    path: "Tests/ProjectionsTests"),
        .testTarget(name: "LedgerBusTests", dependencies: ["LedgerBus", "LedgerStore", "LedgerCore", "LedgerTestSupport"],
                    path: "Tests/LedgerBusTests"),
        .testTarget(name: "LedgerStoreTests", dependencies: ["LedgerStore", "LedgerCore", "Projections", "LedgerTestSupport"],
                    path: "Tests/LedgerStoreTests"),
        .testTarget(name: "LedgerCLITests", dependencies: ["LedgerCLI", "LedgerImport", "LedgerStore", "LedgerCore", "Projections", "LedgerTestSupport"],
                    path: "Tests/LedgerCLITests", swiftSettings: libxml2Headers),
    ],
    swiftLanguageModes: [.v6]
)
