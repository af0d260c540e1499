#ifndef LEDGER_CZIP_SHIM_H
#define LEDGER_CZIP_SHIM_H
#include <zip.h>
#endif
