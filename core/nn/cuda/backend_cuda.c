/* The CUDA backend: backend_cuda.so, loaded by gf_backend_open("cuda") or
 * "auto" (core/nn/backend.c) with dlopen, so that libganflow and the
 * `ganflow` command never link CUDA. This file creates an instance (its
 * device, its stream, its cuDNN and cuBLAS handles), owns the memory the
 * vtable hands out, copies, synchronisation, events, pinned memory,
 * options and statistics, and fills the vtable (<ganflow/backend.h>) from
 * the op files of this folder: ops_cuda.c (GEMM and everything
 * pointwise), conv_cuda.c (cuDNN convolutions), bn_cuda.c (batchnorm),
 * graph_cuda.c (captured steps). It is the top of the folder: the op files
 * and graph_cuda.c stand on device_cuda.c (errors, scratch, status,
 * staging) and never call back into this file. The CPU backend it mirrors
 * is core/nn/cpu/backend_cpu.c.
 *
 * One instance per stage thread: every op of an instance is ordered on
 * the instance's own stream, so "each stage runs on its own CUDA stream"
 * holds by construction; messages between stages carry events
 * (event_record / event_wait). docs/cuda.md is the user's guide. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <ganflow/err.h>
#include <ganflow/log.h>

#include "cuda.h"
#include "peak_cuda.h"
#include "ada.h"
#include "dbwd.h"
#include "sg2.h"

/* ---- memory ---- */

static int cu_alloc(gf_backend *be, void **ptr, size_t bytes)
{
	gf_cuda *c = gf_cu(be);
	*ptr = NULL;
	TRY(gf_cu_enter(c));
	if (c->nallocs == c->cap_allocs) {
		size_t cap = c->cap_allocs ? 2 * c->cap_allocs : 32;
		gf_cu_alloc *a = realloc(c->allocs, cap * sizeof(*a));
		if (!a)
			return gf_seterr(-ENOMEM, "cuda backend: out of memory");
		c->allocs = a;
		c->cap_allocs = cap;
	}
	cudaError_t e = gf_cu_malloc(c, ptr, bytes);
	if (e != cudaSuccess) {
		*ptr = NULL;
		gf_cu_fail(e, "cudaMalloc", __FILE__, __LINE__);
		return gf_seterr(e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO,
		                 "cuda backend: cannot allocate %zu bytes on device %d (%s): %s", bytes, c->dev, c->name,
		                 cudaGetErrorString(e));
	}
	c->allocs[c->nallocs].p = *ptr;
	c->allocs[c->nallocs].n = bytes;
	c->nallocs++;
	c->device_bytes += bytes;
	return 0;
}

static void cu_free(gf_backend *be, void *ptr)
{
	gf_cuda *c = gf_cu(be);
	if (!ptr)
		return;
	gf_cu_enter(c);
	for (size_t i = 0; i < c->nallocs; i++) {
		if (c->allocs[i].p == ptr) {
			c->device_bytes -= c->allocs[i].n;
			c->allocs[i] = c->allocs[--c->nallocs];
			break;
		}
	}
	/* the stream may still use it: cudaFree waits for the device anyway,
	 * but say so plainly */
	cudaStreamSynchronize(c->stream);
	enum cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
	if (c->gmode == GF_CU_CAPTURE)
		cudaThreadExchangeStreamCaptureMode(&m);
	cudaFree(ptr);
	if (c->gmode == GF_CU_CAPTURE)
		cudaThreadExchangeStreamCaptureMode(&m);
}

static int cu_copy(gf_backend *be, void *dst, const void *src, size_t bytes, gf_copy_kind kind)
{
	gf_cuda *c = gf_cu(be);
	if (!bytes || dst == src)
		return 0;
	TRY(gf_cu_enter(c));
	switch (kind) {
	case GF_COPY_D2D: {
		int rc = GF_CU_SIG(c, GF_CU_OP_COPY, GF_CU_P(dst), GF_CU_P(src), bytes);
		if (rc)
			return rc == GF_CU_SKIP ? 0 : rc;
		CU_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->stream));
		return 0;
	}
	case GF_COPY_H2D:
		TRY(gf_cu_no_graph(c, "a copy from host memory (upload inputs before graph_begin)"));
		return gf_cu_h2d(c, dst, src, bytes);
	case GF_COPY_D2H:
		TRY(gf_cu_no_graph(c, "a copy to host memory"));
		c->waits++;
		CU_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream));
		CU_CHECK(cudaStreamSynchronize(c->stream));
		return 0;
	case GF_COPY_H2H:
		memmove(dst, src, bytes);
		return 0;
	}
	return gf_seterr(GF_EPARAM, "cuda backend: unknown copy kind %d", (int)kind);
}

static int cu_copy_async(gf_backend *be, void *dst, const void *src, size_t bytes, gf_copy_kind kind)
{
	gf_cuda *c = gf_cu(be);
	if (!bytes || dst == src)
		return 0;
	TRY(gf_cu_enter(c));
	if (kind == GF_COPY_D2D)
		return cu_copy(be, dst, src, bytes, kind);
	TRY(gf_cu_no_graph(c, "an asynchronous host copy"));
	static const enum cudaMemcpyKind k[] = { cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
	                                         cudaMemcpyDeviceToDevice };
	if ((int)kind < 0 || kind > GF_COPY_D2D)
		return gf_seterr(GF_EPARAM, "cuda backend: unknown copy kind %d", (int)kind);
	CU_CHECK(cudaMemcpyAsync(dst, src, bytes, k[kind], c->stream));
	return 0;
}

static int cu_sync(gf_backend *be)
{
	gf_cuda *c = gf_cu(be);
	TRY(gf_cu_enter(c));
	TRY(gf_cu_no_graph(c, "sync"));
	return gf_cu_sync_status(c);
}

/* ---- streams, events, pinned memory ---- */

static void *cu_stream(gf_backend *be)
{
	return gf_cu(be)->stream;
}

static void *cu_pinned_alloc(void *ud, size_t bytes)
{
	gf_cuda *c = ud;
	void *p = NULL;
	if (c && gf_cu_enter(c))
		return NULL;
	if (cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable) != cudaSuccess) {
		cudaGetLastError();
		return NULL;
	}
	return p;
}

static void cu_pinned_free(void *ud, void *p)
{
	(void)ud;
	if (p)
		cudaFreeHost(p);
}

/* Device memory for message buffers: cudaMalloc'ed for the process, so
 * that a pool may free it after the instance is closed (UVA: cudaFree
 * finds the buffer's device itself). */
static void *cu_device_alloc(void *ud, size_t bytes)
{
	gf_cuda *c = ud;
	void *p = NULL;
	if (c && gf_cu_enter(c))
		return NULL;
	if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
		cudaGetLastError();
		return NULL;
	}
	return p;
}

static void cu_device_free(void *ud, void *p)
{
	(void)ud;
	if (p)
		cudaFree(p);
}

static int cu_event_create_timed(gf_backend *be, void **event)
{
	gf_cuda *c = gf_cu(be);
	*event = NULL;
	TRY(gf_cu_enter(c));
	cudaEvent_t ev;
	CU_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDefault));
	*event = ev;
	return 0;
}

static int cu_event_elapsed(gf_backend *be, void *start, void *end, float *ms)
{
	gf_cuda *c = gf_cu(be);
	TRY(gf_cu_enter(c));
	TRY(gf_cu_no_graph(c, "event_elapsed"));
	cudaError_t e = cudaEventElapsedTime(ms, (cudaEvent_t)start, (cudaEvent_t)end);
	if (e != cudaSuccess) {
		cudaGetLastError();
		return gf_seterr(GF_EPARAM, "cuda backend: event_elapsed: %s (both events timed, recorded and completed?)",
		                 cudaGetErrorString(e));
	}
	return 0;
}

static int cu_event_create(gf_backend *be, void **event)
{
	gf_cuda *c = gf_cu(be);
	*event = NULL;
	TRY(gf_cu_enter(c));
	cudaEvent_t ev;
	CU_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
	*event = ev;
	return 0;
}

static void cu_event_destroy(gf_backend *be, void *event)
{
	if (!event)
		return;
	gf_cu_enter(gf_cu(be));
	cudaEventDestroy((cudaEvent_t)event);
}

static int cu_event_record(gf_backend *be, void *event)
{
	gf_cuda *c = gf_cu(be);
	TRY(gf_cu_enter(c));
	TRY(gf_cu_no_graph(c, "event_record"));
	CU_CHECK(cudaEventRecord((cudaEvent_t)event, c->stream));
	return 0;
}

static int cu_event_wait(gf_backend *be, void *event)
{
	gf_cuda *c = gf_cu(be);
	TRY(gf_cu_enter(c));
	TRY(gf_cu_no_graph(c, "event_wait"));
	CU_CHECK(cudaStreamWaitEvent(c->stream, (cudaEvent_t)event, 0));
	return 0;
}

static int cu_event_sync(gf_backend *be, void *event)
{
	gf_cuda *c = gf_cu(be);
	TRY(gf_cu_enter(c));
	TRY(gf_cu_no_graph(c, "event_sync"));
	c->waits++;
	CU_CHECK(cudaEventSynchronize((cudaEvent_t)event));
	return 0;
}

static int64_t cu_host_waits(gf_backend *be)
{
	return gf_cu(be)->waits;
}

/* ---- options ---- */

static int parse_bool(const char *key, const char *v, int *out)
{
	if (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "on") || !strcasecmp(v, "yes"))
		*out = 1;
	else if (!strcmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "off") || !strcasecmp(v, "no"))
		*out = 0;
	else
		return gf_seterr(GF_EPARAM, "cuda backend: option %s must be 0 or 1, not \"%s\"", key, v);
	return 0;
}

static void resolve_layout(gf_cuda *c)
{
	/* auto: NHWC with padded channels where tensor cores run (bf16/fp16);
	 * NCHW for fp32, whose FMA (or TF32) kernels gain nothing from it and
	 * would pay the transposes */
	if (c->layout_opt == GF_LAYOUT_NHWC)
		c->nhwc = 1;
	else if (c->layout_opt == GF_LAYOUT_NCHW)
		c->nhwc = 0;
	else
		c->nhwc = c->prec != GF_PREC_FP32;
}

static int cu_set_option(gf_backend *be, const char *key, const char *value)
{
	gf_cuda *c = gf_cu(be);
	if (!key || !value)
		return gf_seterr(GF_EPARAM, "cuda backend: option needs a key and a value");
	TRY(gf_cu_no_graph(c, "set_option"));
	if (!strcmp(key, "deterministic"))
		return parse_bool(key, value, &c->deterministic);
	if (!strcmp(key, "benchmark"))
		return parse_bool(key, value, &c->benchmark);
	if (!strcmp(key, "tf32"))
		return parse_bool(key, value, &c->tf32);
	if (!strcmp(key, "up2")) {
		if (!strcmp(value, "subpixel"))
			c->up2_upsample = 0;
		else if (!strcmp(value, "upsample"))
			c->up2_upsample = 1;
		else
			return gf_seterr(GF_EPARAM, "cuda backend: up2 must be \"subpixel\" or \"upsample\", not \"%s\"", value);
		return 0;
	}
	if (!strcmp(key, "layout")) {
		TRY(gf_layout_parse(value, &c->layout_opt));
		resolve_layout(c);
		return 0;
	}
	if (!strcmp(key, "loss_scale") || !strcmp(key, "growth_interval")) {
		char *end;
		double v = strtod(value, &end);
		if (*end || !(v > 0) || v > 3.0e38)
			return gf_seterr(GF_EPARAM, "cuda backend: %s must be a positive number, not \"%s\"", key, value);
		TRY(gf_cu_enter(c));
		TRY(gf_cu_sync_status(c));
		if (!strcmp(key, "loss_scale"))
			c->st_host->scale = (float)v;
		else
			c->st_host->growth_interval = v > 2e9 ? 2000000000 : (int)v;
		c->st_host->good = 0;
		CU_CHECK(cudaMemcpy(c->st_dev, c->st_host, sizeof(*c->st_dev), cudaMemcpyHostToDevice));
		return 0;
	}
	return gf_seterr(GF_EPARAM, "cuda backend: unknown option '%s' (deterministic, benchmark, tf32, up2, layout, "
	                 "loss_scale, growth_interval)", key);
}

/* GANFLOW_CUDA_<KEY> environment variables give the defaults. */
static int env_options(gf_cuda *c)
{
	static const char *const keys[] = { "deterministic", "benchmark", "tf32", "up2", "layout", NULL };
	for (int i = 0; keys[i]; i++) {
		char name[64];
		snprintf(name, sizeof(name), "GANFLOW_CUDA_%s", keys[i]);
		for (char *p = name; *p; p++)
			if (*p >= 'a' && *p <= 'z')
				*p = (char)(*p - 'a' + 'A');
		const char *v = getenv(name);
		if (v && *v) {
			int rc = cu_set_option(&c->be, keys[i], v);
			if (rc)
				return gf_seterr(rc, "%s: %s", name, gf_errmsg());
		}
	}
	return 0;
}

static int cu_stats(gf_backend *be, gf_backend_stats *out)
{
	gf_cuda *c = gf_cu(be);
	memset(out, 0, sizeof(*out));
	TRY(gf_cu_enter(c));
	TRY(gf_cu_no_graph(c, "stats"));
	int rc = gf_cu_sync_status(c);
	out->precision = c->prec_asked;
	out->layout = c->nhwc ? GF_LAYOUT_NHWC : GF_LAYOUT_NCHW;
	out->loss_scale = c->prec == GF_PREC_FP16 ? c->st_host->scale : 1.0f;
	out->skipped_steps = c->prec == GF_PREC_FP16 ? c->st_host->skipped : 0;
	out->optim_steps = c->optim_calls - out->skipped_steps;
	out->graphs = c->ngraphs;
	out->replays = c->nreplays;
	out->device_bytes = c->device_bytes;
	out->scratch_bytes = c->scratch_size + c->ws_size + c->cublas_ws_size;
	out->deterministic = c->deterministic;
	out->tf32 = c->tf32;
	out->tf32_gemm = c->tf32_gemm;
	snprintf(out->device_name, sizeof(out->device_name), "%s", c->name);
	return rc;
}

/* The dense peak at the precision the convolutions and GEMMs run in
 * (peak_cuda.c's table of datasheet figures by device name). */
static int cu_peak_flops(gf_backend *be, double *flop_s, char *what, size_t size)
{
	gf_cuda *c = gf_cu(be);
	int sms = 0, major = 0, minor = 0, khz = 0;
	TRY(gf_cu_no_graph(c, "peak_flops"));
	CU_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, c->dev));
	CU_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, c->dev));
	CU_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, c->dev));
	CU_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, c->dev));
	return gf_cu_peak_lookup(c->name, sms, major, minor, khz, c->prec, c->tf32 || c->tf32_gemm, flop_s, what, size);
}

/* ---- create / destroy ---- */

static void cu_destroy(gf_backend *be)
{
	gf_cuda *c = gf_cu(be);
	if (!c)
		return;
	cudaSetDevice(c->dev);
	if (c->gmode == GF_CU_CAPTURE) {
		cudaGraph_t g = NULL;
		cudaStreamEndCapture(c->stream, &g);
		if (g)
			cudaGraphDestroy(g);
	}
	c->gmode = GF_CU_EAGER;
	if (c->stream)
		cudaStreamSynchronize(c->stream);
	gf_cu_graphs_destroy(c);
	gf_cu_coll_destroy(c);
	gf_cu_conv_cache_destroy(c);
	for (int k = 0; k < GF_CU_STAGES; k++) {
		if (c->stage[k].ev)
			cudaEventDestroy(c->stage[k].ev);
		if (c->stage[k].p)
			cudaFreeHost(c->stage[k].p);
	}
	for (size_t i = 0; i < c->nretired; i++)
		cudaFree(c->retired[i]);
	free(c->retired);
	if (c->scratch)
		cudaFree(c->scratch);
	if (c->ws)
		cudaFree(c->ws);
	if (c->cublas_ws)
		cudaFree(c->cublas_ws);
	if (c->st_dev)
		cudaFree(c->st_dev);
	if (c->st_host)
		cudaFreeHost(c->st_host);
	if (c->nallocs)
		gf_log(GF_LOG_DEBUG, "cuda backend: %zu allocation(s) (%zu bytes) not freed at close", c->nallocs,
		       c->device_bytes);
	free(c->allocs);
	if (c->cublas)
		cublasDestroy(c->cublas);
	if (c->cudnn)
		cudnnDestroy(c->cudnn);
	if (c->stream)
		cudaStreamDestroy(c->stream);
	free(c);
}

static const gf_backend_ops cuda_ops = {
	.abi = GF_BACKEND_ABI,
	.size = sizeof(gf_backend_ops),
	.name = "cuda",
	.destroy = cu_destroy,
	.alloc = cu_alloc,
	.free = cu_free,
	.copy = cu_copy,
	.fill = gf_cu_fill_op,
	.sync = cu_sync,
	.gemm = gf_cu_gemm,
	.bias_add = gf_cu_bias_add,
	.bias_grad = gf_cu_bias_grad,
	.axpy = gf_cu_axpy,
	.scale = gf_cu_scale,
	.copy2d = gf_cu_copy2d,
	.conv2d_forward = gf_cu_conv2d_forward,
	.conv2d_backward = gf_cu_conv2d_backward,
	.bn_forward_train = gf_cu_bn_forward_train,
	.bn_forward_eval = gf_cu_bn_forward_eval,
	.bn_backward = gf_cu_bn_backward,
	.act_forward = gf_cu_act_forward,
	.act_backward = gf_cu_act_backward,
	.upsample_forward = gf_cu_upsample_forward,
	.upsample_backward = gf_cu_upsample_backward,
	.dropout_forward = gf_cu_dropout_forward,
	.dropout_backward = gf_cu_dropout_backward,
	.pooling_forward = gf_cu_pooling_forward,
	.pooling_backward = gf_cu_pooling_backward,
	.softmax_forward = gf_cu_softmax_forward,
	.softmax_backward = gf_cu_softmax_backward,
	.embedding_forward = gf_cu_embedding_forward,
	.embedding_backward = gf_cu_embedding_backward,
	.loss = gf_cu_loss,
	.optim_step = gf_cu_optim_step,
	.sumsq = gf_cu_sumsq,
	.rng_uniform = gf_cu_rng_uniform,
	.rng_normal = gf_cu_rng_normal,
	.set_option = cu_set_option,
	.stats = cu_stats,
	.stream = cu_stream,
	.copy_async = cu_copy_async,
	.pinned_alloc = cu_pinned_alloc,
	.pinned_free = cu_pinned_free,
	.event_create = cu_event_create,
	.event_destroy = cu_event_destroy,
	.event_record = cu_event_record,
	.event_wait = cu_event_wait,
	.event_sync = cu_event_sync,
	.loss_dev = gf_cu_loss_dev,
	.grad_unscale = gf_cu_grad_unscale,
	.graph_begin = gf_cu_graph_begin,
	.graph_end = gf_cu_graph_end,
	.graph_destroy = gf_cu_graph_destroy,
	.sn_forward = gf_cu_sn_forward,
	.sn_backward = gf_cu_sn_backward,
	.row_dot = gf_cu_row_dot,
	.row_scale = gf_cu_row_scale,
	.cbn_forward = gf_cu_cbn_forward,
	.cbn_backward = gf_cu_cbn_backward,
	.augment_forward = gf_cu_augment_forward,
	.augment_backward = gf_cu_augment_backward,
	.gemm_batched = gf_cu_gemm_batched,
	/* dbwd.h */
	.act_backward2 = gf_cu_act_backward2,
	.bn_backward2 = gf_cu_bn_backward2,
	.pooling_gather = gf_cu_pooling_gather,
	.augment_linear = gf_cu_augment_linear,
	.mbstd_forward = gf_cu_mbstd_forward,
	.mbstd_backward = gf_cu_mbstd_backward,
	.mbstd_backward2 = gf_cu_mbstd_backward2,
	.reduce_dev = gf_cu_reduce_dev,
	.device_alloc = cu_device_alloc,
	.device_free = cu_device_free,
	.event_create_timed = cu_event_create_timed,
	.event_elapsed = cu_event_elapsed,
	/* sg2.h */
	.bias_act_forward = gf_cu_bias_act_forward,
	.bias_act_backward = gf_cu_bias_act_backward,
	.rsqrt_eps = gf_cu_rsqrt_eps,
	.fir_forward = gf_cu_fir_forward,
	.fir_backward = gf_cu_fir_backward,
	.ada_params = gf_cu_ada_params,
	.ada_forward = gf_cu_ada_forward,
	.ada_backward = gf_cu_ada_backward,
	.style_mix = gf_cu_style_mix,
	.ema = gf_cu_ema,
	.clip_dev = gf_cu_clip_dev,
	.lecam_dev = gf_cu_lecam_dev,
	.lecam_avg = gf_cu_lecam_avg,
	.ada_signs = gf_cu_ada_signs,
	.ada_update = gf_cu_ada_update,
	.penalty_factors = gf_cu_penalty_factors,
	.host_waits = cu_host_waits,
	.peak_flops = cu_peak_flops,
	.collective = gf_cu_collective,
};

/* The .so stays loaded once an instance was created: pinned buffers given
 * out by pinned_alloc may be freed after their instance is closed, and
 * CUDA's libraries do not take kindly to being unloaded mid-process. */
static void pin_self(void)
{
	Dl_info info;
	if (dladdr((void *)&pin_self, &info) && info.dli_fname)
		dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

#define CREATE_CHECK(call)                                                           \
	do {                                                                         \
		cudaError_t e_ = (call);                                             \
		if (e_ != cudaSuccess) {                                             \
			rc = gf_cu_fail(e_, #call, __FILE__, __LINE__);              \
			goto fail;                                                   \
		}                                                                    \
	} while (0)

static int cuda_create(const gf_backend_opts *opts, gf_backend **out)
{
	*out = NULL;
	int count = 0, rc;
	cudaError_t e = cudaGetDeviceCount(&count);
	if (e != cudaSuccess) {
		cudaGetLastError();
		return gf_seterr(GF_ENOBACKEND, "cuda backend: no CUDA device: %s", cudaGetErrorString(e));
	}
	if (count < 1)
		return gf_seterr(GF_ENOBACKEND, "cuda backend: no CUDA device: none found");
	int dev = opts ? opts->device_index : 0;
	if (dev < 0 || dev >= count)
		return gf_seterr(GF_ENOBACKEND, "cuda backend: device %d requested, %d present", dev, count);
	gf_cuda *c = calloc(1, sizeof(*c));
	if (!c)
		return gf_seterr(-ENOMEM, "cuda backend: out of memory");
	c->dev = dev;
	c->prec = opts ? opts->precision : GF_PREC_FP32;
	c->layout_opt = opts ? opts->layout : GF_LAYOUT_AUTO;
	if ((int)c->prec < GF_PREC_FP32 || c->prec > GF_PREC_TF32) {
		int p = (int)c->prec;
		free(c);
		return gf_seterr(GF_EPARAM, "cuda backend: unknown precision %d", p);
	}
	c->prec_asked = c->prec;
	if (c->prec == GF_PREC_TF32) {
		/* f32 everywhere (layout, casts, loss scaling as fp32), with the
		 * convolutions and GEMMs on TF32 tensor cores: PyTorch's
		 * allow_tf32 for cuDNN and cuBLAS (set_float32_matmul_precision
		 * "high") */
		c->prec = GF_PREC_FP32;
		c->tf32 = 1;
		c->tf32_gemm = 1;
	}
	c->deterministic = 1;
	c->benchmark = 1;
	c->be.ops = &cuda_ops;
	c->be.device = GF_CUDA;
	c->be.device_index = dev;
	c->be.threads = 1;
	c->be.caps = GF_CAP_CONV_UP2 | GF_CAP_CONV_GROUPS;
	c->be.impl = c;

	CREATE_CHECK(cudaSetDevice(dev));
	struct cudaDeviceProp prop;
	CREATE_CHECK(cudaGetDeviceProperties(&prop, dev));
	snprintf(c->name, sizeof(c->name), "%.63s", prop.name);
	if (c->prec == GF_PREC_BF16 && prop.major < 8) {
		rc = gf_seterr(GF_EUNSUPPORTED, "cuda backend: bf16 needs compute capability 8.0 or newer; %s is %d.%d",
		               c->name, prop.major, prop.minor);
		goto fail;
	}
	CREATE_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
	{
		cudnnStatus_t s = cudnnCreate(&c->cudnn);
		if (s != CUDNN_STATUS_SUCCESS) {
			c->cudnn = NULL;
			rc = gf_cu_fail_dnn(s, "cudnnCreate", __FILE__, __LINE__);
			goto fail;
		}
		s = cudnnSetStream(c->cudnn, c->stream);
		if (s != CUDNN_STATUS_SUCCESS) {
			rc = gf_cu_fail_dnn(s, "cudnnSetStream", __FILE__, __LINE__);
			goto fail;
		}
		cublasStatus_t b = cublasCreate(&c->cublas);
		if (b != CUBLAS_STATUS_SUCCESS) {
			c->cublas = NULL;
			rc = gf_cu_fail_blas(b, "cublasCreate", __FILE__, __LINE__);
			goto fail;
		}
		/* a fixed workspace: cuBLAS must not allocate inside a graph capture */
		c->cublas_ws_size = (size_t)32 << 20;
		CREATE_CHECK(cudaMalloc(&c->cublas_ws, c->cublas_ws_size));
		if ((b = cublasSetStream(c->cublas, c->stream)) != CUBLAS_STATUS_SUCCESS ||
		    (b = cublasSetWorkspace(c->cublas, c->cublas_ws, c->cublas_ws_size)) != CUBLAS_STATUS_SUCCESS ||
		    (b = cublasSetMathMode(c->cublas, c->tf32_gemm ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH)) !=
		        CUBLAS_STATUS_SUCCESS) {
			rc = gf_cu_fail_blas(b, "cublasSetStream/Workspace/MathMode", __FILE__, __LINE__);
			goto fail;
		}
	}
	for (int k = 0; k < GF_CU_STAGES; k++)
		CREATE_CHECK(cudaEventCreateWithFlags(&c->stage[k].ev, cudaEventDisableTiming));
	CREATE_CHECK(cudaMalloc((void **)&c->st_dev, sizeof(*c->st_dev)));
	CREATE_CHECK(cudaHostAlloc((void **)&c->st_host, sizeof(*c->st_host), cudaHostAllocPortable));
	memset(c->st_host, 0, sizeof(*c->st_host));
	c->st_host->err = ~0ull;
	c->st_host->scale = c->prec == GF_PREC_FP16 ? 65536.0f : 1.0f;   /* GradScaler's defaults */
	c->st_host->growth_interval = 2000;
	CREATE_CHECK(cudaMemcpy(c->st_dev, c->st_host, sizeof(*c->st_dev), cudaMemcpyHostToDevice));
	if ((rc = env_options(c)))
		goto fail;
	if (c->prec_asked == GF_PREC_TF32)
		c->tf32 = 1;   /* the precision asked for wins over GANFLOW_CUDA_TF32 */
	resolve_layout(c);
	pin_self();
	*out = &c->be;
	return 0;
fail:
	cu_destroy(&c->be);
	return rc;
}

#if defined(__GNUC__)
#define GF_EXPORT __attribute__((visibility("default")))
#else
#define GF_EXPORT
#endif

GF_EXPORT const gf_backend_desc ganflow_backend = {
	.abi = GF_BACKEND_ABI,
	.size = sizeof(gf_backend_desc),
	.name = "cuda",
	.doc = "NVIDIA GPUs: cuDNN convolutions, cuBLAS GEMMs, own kernels; fp32/bf16/fp16, NHWC, CUDA graphs",
	.create = cuda_create,
};
