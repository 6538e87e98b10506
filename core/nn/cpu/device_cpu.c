/* The CPU backend's instance underneath its ops: the scratch buffer the
 * op files carve their temporaries from (the counterpart of
 * core/nn/cuda/device_cuda.c). backend_cpu.c, the vtable, and the op
 * files stand on it; it uses only base (<ganflow/err.h>). */
#include <errno.h>
#include <stdlib.h>

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
