#ifndef LEDGER_CLMDB_SHIM_H
#define LEDGER_CLMDB_SHIM_H
#include <lmdb.h>
#endif
