#ifndef LEDGER_CCRYPTO_SHIM_H
#define LEDGER_CCRYPTO_SHIM_H
// OpenSSL's libcrypto (Debian's libssl-dev): SHA-256 through the SHA256_* calls, which use
// the CPU's SHA extensions where it has them, without EVP's per-call fetch. OpenSSL 3 marks
// them deprecated in favour of EVP; they remain supported, so the warnings are silenced here.
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include <openssl/sha.h>
#include <openssl/crypto.h>
// Random bytes come from the kernel (getrandom(2)), not OpenSSL's DRBG, which would link most
// of libcrypto for one call.
#include <sys/random.h>
#endif
