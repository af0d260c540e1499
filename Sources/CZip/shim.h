#ifndef LEDGER_CZIP_SHIM_H
#define LEDGER_CZIP_SHIM_H
#include <zip.h>

/* libzip is not linked: `import` opens it with dlopen (LazyLibrary) when it reads a zip.
 * These are the types of the functions it looks up, from libzip's own declarations. */
typedef __typeof__(&zip_open) ledger_zip_open_fn;
typedef __typeof__(&zip_fdopen) ledger_zip_fdopen_fn;
typedef __typeof__(&zip_get_num_entries) ledger_zip_get_num_entries_fn;
typedef __typeof__(&zip_get_name) ledger_zip_get_name_fn;
typedef __typeof__(&zip_stat_init) ledger_zip_stat_init_fn;
typedef __typeof__(&zip_stat_index) ledger_zip_stat_index_fn;
typedef __typeof__(&zip_fopen_index) ledger_zip_fopen_index_fn;
typedef __typeof__(&zip_fread) ledger_zip_fread_fn;
typedef __typeof__(&zip_fclose) ledger_zip_fclose_fn;
typedef __typeof__(&zip_close) ledger_zip_close_fn;
typedef __typeof__(&zip_file_strerror) ledger_zip_file_strerror_fn;
typedef __typeof__(&zip_error_init_with_code) ledger_zip_error_init_with_code_fn;
typedef __typeof__(&zip_error_strerror) ledger_zip_error_strerror_fn;
typedef __typeof__(&zip_error_fini) ledger_zip_error_fini_fn;
#endif
