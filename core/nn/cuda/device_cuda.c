/* The CUDA backend's instance underneath its ops: errors, the current
 * device, device memory (gf_cu_malloc), scratch and the cuDNN workspace,
 * the status the kernels write, and host -> device copies through pinned
 * staging. The op files (ops_cuda.c, conv_cuda.c, bn_cuda.c, ...) and the
 * captured steps (graph_cuda.c) stand on this file; backend_cuda.c, the
 * vtable, stands on all of them. Uses only the instance (cuda.h), base
 * (<ganflow/err.h>, <ganflow/log.h>) and the CUDA libraries. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>
#include <ganflow/log.h>

#include "cuda.h"

/* ---- errors ---- */

int gf_cu_fail(cudaError_t e, const char *what, const char *file, int line)
{
	const char *base = strrchr(file, '/');
	base = base ? base + 1 : file;
	int rc = e == cudaErrorMemoryAllocation ? -ENOMEM : e == cudaErrorNotSupported ? GF_EUNSUPPORTED : -EIO;
	cudaGetLastError();   /* clear a sticky launch error so the next op reports its own */
	return gf_seterr(rc, "cuda backend: %s: %s (%s, %s:%d)", what, cudaGetErrorString(e), cudaGetErrorName(e), base,
	                 line);
}

int gf_cu_fail_dnn(cudnnStatus_t s, const char *what, const char *file, int line)
{
	const char *base = strrchr(file, '/');
	base = base ? base + 1 : file;
	int rc = s == CUDNN_STATUS_ALLOC_FAILED ? -ENOMEM : s == CUDNN_STATUS_NOT_SUPPORTED ? GF_EUNSUPPORTED : -EIO;
	return gf_seterr(rc, "cuda backend: %s: cuDNN %s (%s:%d)", what, cudnnGetErrorString(s), base, line);
}

int gf_cu_fail_blas(cublasStatus_t s, const char *what, const char *file, int line)
{
	const char *base = strrchr(file, '/');
	base = base ? base + 1 : file;
	int rc = s == CUBLAS_STATUS_ALLOC_FAILED ? -ENOMEM : s == CUBLAS_STATUS_NOT_SUPPORTED ? GF_EUNSUPPORTED : -EIO;
	return gf_seterr(rc, "cuda backend: %s: cuBLAS %s (%s:%d)", what, cublasGetStatusString(s), base, line);
}

/* ---- device and scratch ---- */

int gf_cu_enter(gf_cuda *c)
{
	int cur = -1;
	if (cudaGetDevice(&cur) != cudaSuccess || cur != c->dev)
		CU_CHECK(cudaSetDevice(c->dev));
	return 0;
}

cudaError_t gf_cu_malloc(gf_cuda *c, void **p, size_t n)
{
	enum cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
	if (c->gmode == GF_CU_CAPTURE)
		cudaThreadExchangeStreamCaptureMode(&m);
	cudaError_t e = cudaMalloc(p, n ? n : 256);
	if (c->gmode == GF_CU_CAPTURE)
		cudaThreadExchangeStreamCaptureMode(&m);
	return e;
}

static int retire(gf_cuda *c, void *p)
{
	if (c->nretired == c->cap_retired) {
		size_t cap = c->cap_retired ? 2 * c->cap_retired : 8;
		void **r = realloc(c->retired, cap * sizeof(*r));
		if (!r)
			return gf_seterr(-ENOMEM, "cuda backend: out of memory");
		c->retired = r;
		c->cap_retired = cap;
	}
	c->retired[c->nretired++] = p;
	return 0;
}

/* Replaces buffer *buf (*size bytes) with one of at least `bytes`. The old
 * one is freed once the stream is idle, or kept until destroy while a
 * graph may still use it. */
static void *grow(gf_cuda *c, void **buf, size_t *size, size_t bytes, const char *what)
{
	if (bytes <= *size && *buf)
		return *buf;
	size_t n = *size + *size / 2;
	if (n < bytes)
		n = bytes;
	n = (n + ((size_t)2 << 20) - 1) & ~(((size_t)2 << 20) - 1);   /* 2 MiB granules */
	void *p = NULL;
	cudaError_t e = gf_cu_malloc(c, &p, n);
	if (e != cudaSuccess) {
		gf_cu_fail(e, what, __FILE__, __LINE__);
		return NULL;
	}
	if (*buf) {
		if (c->gmode != GF_CU_EAGER || c->graphs_alive) {
			if (retire(c, *buf)) {
				cudaFree(p);
				return NULL;
			}
		} else {
			cudaStreamSynchronize(c->stream);
			cudaFree(*buf);
		}
	}
	*buf = p;
	*size = n;
	return p;
}

void *gf_cu_scratch(gf_cuda *c, size_t bytes)
{
	return grow(c, &c->scratch, &c->scratch_size, bytes, "scratch cudaMalloc");
}

void *gf_cu_workspace(gf_cuda *c, size_t bytes)
{
	return grow(c, &c->ws, &c->ws_size, bytes ? bytes : 1, "cuDNN workspace cudaMalloc");
}

/* ---- status ---- */

static const char *err_what(unsigned code)
{
	switch (code) {
	case GF_CU_ERR_BCE_NAN: return "bce loss: the input of element %llu is NaN";
	case GF_CU_ERR_BCE_RANGE: return "bce loss: the input of element %llu is not a probability (outside [0, 1])";
	case GF_CU_ERR_CE_LABEL: return "cross-entropy: the label of sample %llu is out of range";
	case GF_CU_ERR_EMB_LABEL: return "embedding: the label of sample %llu is out of range";
	default: return "cuda backend: device error at element %llu";
	}
}

int gf_cu_sync_status(gf_cuda *c)
{
	c->waits++;
	CU_CHECK(cudaMemcpyAsync(c->st_host, c->st_dev, sizeof(*c->st_dev), cudaMemcpyDeviceToHost, c->stream));
	CU_CHECK(cudaStreamSynchronize(c->stream));
	gf_cu_status *st = c->st_host;
	if (c->prec == GF_PREC_FP16 && st->skipped > c->skipped_logged) {
		gf_log(GF_LOG_WARN, "cuda backend: fp16 gradients overflowed: %lld optimiser update%s skipped so far "
		                    "(%lld applied), loss scale now %g",
		       st->skipped, st->skipped == 1 ? "" : "s", st->applied, (double)st->scale);
		c->skipped_logged = st->skipped;
	}
	if (st->err != ~0ull) {
		unsigned code = (unsigned)(st->err & 0xff);
		unsigned long long elem = st->err >> 8;
		CU_CHECK(cudaMemsetAsync(&c->st_dev->err, 0xff, sizeof(c->st_dev->err), c->stream));
		st->err = ~0ull;
		char msg[160];
		snprintf(msg, sizeof(msg), err_what(code), elem);
		return gf_seterr(code == GF_CU_ERR_BCE_NAN ? GF_ENONFINITE : GF_EPARAM, "%s", msg);
	}
	return 0;
}

/* ---- copies ---- */

/* Host -> device through a pinned staging buffer: the source is copied
 * on the host (so the caller may reuse it when this returns) and the DMA
 * runs asynchronously on the stream. A staging buffer is reused once the
 * event recorded after its DMA has completed. */
int gf_cu_h2d(gf_cuda *c, void *dst, const void *src, size_t bytes)
{
	int k = c->stage_next;
	c->stage_next = (k + 1) % GF_CU_STAGES;
	if (c->stage[k].used)
		CU_CHECK(cudaEventSynchronize(c->stage[k].ev));
	if (c->stage[k].n < bytes) {
		if (c->stage[k].p)
			CU_CHECK(cudaFreeHost(c->stage[k].p));
		c->stage[k].p = NULL;
		c->stage[k].n = 0;
		size_t n = bytes < ((size_t)1 << 20) ? ((size_t)1 << 20) : bytes;
		CU_CHECK(cudaHostAlloc(&c->stage[k].p, n, cudaHostAllocPortable));
		c->stage[k].n = n;
	}
	memcpy(c->stage[k].p, src, bytes);
	CU_CHECK(cudaMemcpyAsync(dst, c->stage[k].p, bytes, cudaMemcpyHostToDevice, c->stream));
	CU_CHECK(cudaEventRecord(c->stage[k].ev, c->stream));
	c->stage[k].used = 1;
	return 0;
}
