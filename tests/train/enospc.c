/* LD_PRELOAD fault injection for the "full disk during a checkpoint" test:
 * write() and pwrite() to a file whose path contains GF_FAULT_ENOSPC (a
 * substring, e.g. "ckpt-00000040") fail with ENOSPC after the first
 * GF_FAULT_ENOSPC_AFTER bytes (default 4096) written to it, as a disk that
 * fills up in the middle of the file would. Everything else passes through.
 * The code under test runs unchanged; only the disk misbehaves. */

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static size_t written[4096];

/* How many more bytes fd may take, or SIZE_MAX when it is not targeted. */
static size_t budget(int fd)
{
	const char *pat = getenv("GF_FAULT_ENOSPC");
	if (!pat || !*pat || fd < 0 || fd >= 4096)
		return SIZE_MAX;
	char link[64], path[PATH_MAX];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, path, sizeof(path) - 1);
	if (n <= 0)
		return SIZE_MAX;
	path[n] = '\0';
	if (!strstr(path, pat))
		return SIZE_MAX;
	const char *a = getenv("GF_FAULT_ENOSPC_AFTER");
	size_t after = a ? strtoul(a, NULL, 10) : 4096;
	return written[fd] >= after ? 0 : after - written[fd];
}

ssize_t write(int fd, const void *buf, size_t n)
{
	if (!real_write)
		real_write = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
	size_t b = budget(fd);
	if (b == 0) {
		errno = ENOSPC;
		return -1;
	}
	ssize_t r = real_write(fd, buf, n < b ? n : b);
	if (r > 0 && b != SIZE_MAX)
		written[fd] += (size_t)r;
	return r;
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
	if (!real_pwrite)
		real_pwrite = (ssize_t(*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
	size_t b = budget(fd);
	if (b == 0) {
		errno = ENOSPC;
		return -1;
	}
	ssize_t r = real_pwrite(fd, buf, n < b ? n : b, off);
	if (r > 0 && b != SIZE_MAX)
		written[fd] += (size_t)r;
	return r;
}
