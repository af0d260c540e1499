import Foundation
import LedgerCore

// Placeholder so the target builds; the generator is written below in GeneratorMain.
