#ifndef LEDGER_CSODIUM_SHIM_H
#define LEDGER_CSODIUM_SHIM_H
#include <sodium.h>
#endif
