#ifndef LEDGER_CJANSSON_SHIM_H
#define LEDGER_CJANSSON_SHIM_H
#include <jansson.h>

/* json_typeof is a macro; Swift cannot call macros. */
static inline json_type ledger_json_type(const json_t *json) { return json_typeof(json); }
/* json_error_code is static inline over a byte of the text buffer; wrapped for clarity. */
static inline int ledger_json_error_code(const json_error_t *e) { return (int)json_error_code(e); }
#endif
