/* The CPU backend's instance underneath its ops: the scratch buffer the
 * op files carve their temporaries from, and its memory and copies (the
 * counterpart of core/nn/cuda/device_cuda.c). backend_cpu.c, the vtable,
 * graph_cpu.c and the op files stand on it; it uses only base
 * (<ganflow/err.h>). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>

#include "cpu.h"

float *gf_cpu_scratch(gf_cpu *c, size_t n)
{
	if (n <= c->scratch_size)
		return c->scratch;
	free(c->scratch);
	c->scratch = NULL;
	c->scratch_size = 0;
	void *p = NULL;
	if (posix_memalign(&p, 64, n * sizeof(float))) {
		gf_seterr(-ENOMEM, "cpu backend: out of memory for %zu floats of scratch", n);
		return NULL;
	}
	c->scratch = p;
	c->scratch_size = n;
	return c->scratch;
}

/* ---- memory: host memory is the CPU backend's device memory ---- */

int gf_cpu_alloc_plain(gf_backend *be, void **ptr, size_t bytes)
{
	(void)be;
	*ptr = NULL;
	if (posix_memalign(ptr, 64, bytes ? (bytes + 63) / 64 * 64 : 64))
		return gf_seterr(-ENOMEM, "cpu backend: out of memory allocating %zu bytes", bytes);
	return 0;
}

void gf_cpu_free_plain(gf_backend *be, void *ptr)
{
	(void)be;
	free(ptr);
}

int gf_cpu_copy_plain(gf_backend *be, void *dst, const void *src, size_t bytes, gf_copy_kind kind)
{
	(void)be;
	(void)kind;   /* all kinds are host copies here */
	if (bytes && dst != src)
		memmove(dst, src, bytes);
	return 0;
}
