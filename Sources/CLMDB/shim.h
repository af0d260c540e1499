#ifndef LEDGER_CLMDB_SHIM_H
#define LEDGER_CLMDB_SHIM_H
#include <lmdb.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, length): allocates the file's blocks up to `length`
   without changing its size. Called through syscall(2), which Swift cannot call (it is
   variadic), and because Swift's Glibc module is built without _GNU_SOURCE, which hides
   fallocate and its flags. -1 with errno on failure. */
static inline int ledger_reserve_keeping_size(int fd, long long length) {
    return (int)syscall(SYS_fallocate, fd, 1 /* FALLOC_FL_KEEP_SIZE */, (long long)0, length);
}

/* renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE): renames unless `to` exists
   (EEXIST then). EINVAL where the file system cannot do it. */
static inline int ledger_rename_no_replace(const char *from, const char *to) {
    return (int)syscall(SYS_renameat2, AT_FDCWD, from, AT_FDCWD, to, 1u /* RENAME_NOREPLACE */);
}
#endif
