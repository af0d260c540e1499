#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A C library opened with `dlopen` the first time a command needs it, rather than linked.
///
/// Every process pays for the libraries it links at start-up, before `main`: the dynamic
/// loader maps them and their own dependencies and runs their initialisers. libxml2 (with
/// ICU), libzip and libmicrohttpd (with GnuTLS) cost about half of a short command's time,
/// and only `import` and `serve` use them. So those commands load them here, and every other
/// command starts without them (see README, Performance).
public struct LazyLibrary: @unchecked Sendable {
    // @unchecked: the handle is only passed to dlsym, which is thread-safe.
    private let handle: UnsafeMutableRawPointer
    public let name: String

    /// Why a library could not be loaded, said so a user knows what to install.
    public struct LoadError: Error, CustomStringConvertible, Equatable {
        public var description: String
    }

    /// Opens the first of `sonames` that loads. The unversioned name (present with the -dev
    /// package the build used) comes first, so the library matches the headers compiled in.
    public init(_ name: String, sonames: [String], package: String) throws(LoadError) {
        self.name = name
        var reasons: [String] = []
        for soname in sonames {
            if let handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL) {
                self.handle = handle
                return
            }
            if let reason = dlerror() { reasons.append(String(cString: reason)) }
        }
        throw LoadError(description: "\(name) is not installed (\(reasons.last ?? "no library found")); install the Debian package \(package), or run Tools/deps.sh")
    }

    /// The function `symbol`, typed as `T` (a `@convention(c)` function type whose C typedef
    /// the module's shim takes from the library's own declaration with `__typeof__`).
    public func function<T>(_ symbol: String, as type: T.Type) throws(LoadError) -> T {
        guard let pointer = dlsym(handle, symbol) else {
            throw LoadError(description: "\(name) has no function \(symbol): is the installed version too old?")
        }
        return unsafeBitCast(pointer, to: T.self)
    }
}
