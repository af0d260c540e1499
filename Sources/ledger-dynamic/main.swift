import LedgerCLI

// `ledger` linked dynamically, which can open shared libraries: the static `ledger` runs
// `serve` and `import` in it. It runs every command, as `ledger` does.
LedgerCommandLine.main(companion: nil)
