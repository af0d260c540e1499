import LedgerCLI

// The static `ledger`: every command, `serve` and `import` by running `ledger-dynamic` in its
// place (Package.swift, `staticExecutable`).
LedgerCommandLine.main(companion: LedgerCommandLine.companionName)
