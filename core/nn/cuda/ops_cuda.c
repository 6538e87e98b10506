/* CUDA backend ops other than convolution and batchnorm (the vtable side;
 * kernels and launchers are in ops.cu): GEMM through cuBLAS (tensor cores
 * in bf16/fp16), fills, vector ops, bias, activations, upsampling, dropout,
 * pooling, softmax, embedding, losses, optimiser updates with fp16 loss
 * scaling, sums of squares, random fills. The CPU versions are
 * core/nn/cpu/ops_cpu.c.
 *
 * Each op: checks its arguments the way the CPU op does, makes the
 * instance's device current, adds itself to the graph signature (and
 * returns there when a captured step is being replayed, see graph_cuda.c),
 * then launches on the instance's stream without waiting. Only loss with a
 * host value and sumsq wait, because they return host numbers. */
#include <errno.h>
#include <string.h>

#include <ganflow/err.h>

#include "cuda.h"

#define ENTER(c)                                       \
	do {                                           \
		int rc_ = gf_cu_enter(c);              \
		if (rc_)                               \
			return rc_;                    \
	} while (0)

/* Adds the op to the graph signature; returns from the op when replaying. */
#define SIG(c, op, ...)                                         \
	do {                                                    \
		int rc_ = GF_CU_SIG((c), (op), __VA_ARGS__);    \
		if (rc_)                                        \
			return rc_ == GF_CU_SKIP ? 0 : rc_;     \
	} while (0)

/* ---- GEMM ---- */

int gf_cu_gemm(gf_backend *be, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
               const float *b, int ldb, float beta, float *c_, int ldc)
{
	gf_cuda *c = gf_cu(be);
	if (m <= 0 || n <= 0)
		return 0;
	ENTER(c);
	SIG(c, GF_CU_OP_GEMM, (uint64_t)ta, (uint64_t)tb, (uint64_t)m, (uint64_t)n, (uint64_t)k, gf_cu_fbits(alpha),
	    GF_CU_P(a), (uint64_t)lda, GF_CU_P(b), (uint64_t)ldb, gf_cu_fbits(beta), GF_CU_P(c_), (uint64_t)ldc);
	/* row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T */
	cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
	if (k <= 0) {
		/* C = beta C, and 0 (not beta * NaN) when beta is 0, as the CPU */
		if (beta == 0.0f) {
			CU_CHECK(cudaMemset2DAsync(c_, (size_t)ldc * sizeof(float), 0, (size_t)n * sizeof(float), (size_t)m,
			                           c->stream));
			return 0;
		}
		float zero = 0.0f;
		BLAS_CHECK(cublasSgeam(c->cublas, CUBLAS_OP_N, CUBLAS_OP_N, n, m, &beta, c_, ldc, &zero, c_, ldc, c_, ldc));
		return 0;
	}
	if (c->prec == GF_PREC_FP32) {
		BLAS_CHECK(cublasSgemm(c->cublas, ob, oa, n, m, k, &alpha, b, ldb, a, lda, &beta, c_, ldc));
		return 0;
	}
	/* bf16 / fp16: the operands cast to contiguous half-precision copies,
	 * f32 accumulation and f32 C (tensor cores) */
	int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
	gf_cu_dtype dt = c->prec == GF_PREC_BF16 ? GF_CU_BF16 : GF_CU_F16;
	cudaDataType_t cdt = c->prec == GF_PREC_BF16 ? CUDA_R_16BF : CUDA_R_16F;
	size_t asz = gf_cu_round((size_t)ar * ac * 2), bsz = gf_cu_round((size_t)br * bc * 2);
	char *s = gf_cu_scratch(c, asz + bsz);
	if (!s)
		return -ENOMEM;
	void *ah = s, *bh = s + asz;
	CU_LAUNCH(gf_cu_cast2d_launch(c->stream, ah, dt, a, ar, ac, lda));
	CU_LAUNCH(gf_cu_cast2d_launch(c->stream, bh, dt, b, br, bc, ldb));
	BLAS_CHECK(cublasGemmEx(c->cublas, ob, oa, n, m, k, &alpha, bh, cdt, bc, ah, cdt, ac, &beta, c_, CUDA_R_32F, ldc,
	                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
	return 0;
}

/* ---- fills and vector ops ---- */

int gf_cu_fill_op(gf_backend *be, float *x, size_t n, float value)
{
	gf_cuda *c = gf_cu(be);
	if (!n)
		return 0;
	ENTER(c);
	SIG(c, GF_CU_OP_FILL, GF_CU_P(x), n, gf_cu_fbits(value));
	CU_LAUNCH(gf_cu_fill(c->stream, x, n, value));
	return 0;
}

int gf_cu_axpy(gf_backend *be, float *y, const float *x, size_t n, float alpha)
{
	gf_cuda *c = gf_cu(be);
	if (!n)
		return 0;
	ENTER(c);
	SIG(c, GF_CU_OP_AXPY, GF_CU_P(y), GF_CU_P(x), n, gf_cu_fbits(alpha));
	CU_LAUNCH(gf_cu_axpy_launch(c->stream, y, x, n, alpha));
	return 0;
}

int gf_cu_scale(gf_backend *be, float *x, size_t n, float s)
{
	gf_cuda *c = gf_cu(be);
	if (!n)
		return 0;
	ENTER(c);
	SIG(c, GF_CU_OP_SCALE, GF_CU_P(x), n, gf_cu_fbits(s));
	CU_LAUNCH(gf_cu_scale_launch(c->stream, x, n, s));
	return 0;
}

/* The trainer's average, its decay a per-step scalar: StyleGAN2's ramp
 * changes it at every update, and a captured step replays with the decay
 * of its own step (scale + axpy would bake the first one in). */
int gf_cu_ema(gf_backend *be, float *avg, const float *w, size_t n, float decay)
{
	gf_cuda *c = gf_cu(be);
	if (!n)
		return 0;
	ENTER(c);
	int rc = GF_CU_SIG(c, GF_CU_OP_EMA, GF_CU_P(avg), GF_CU_P(w), n);
	if (rc < 0)
		return rc;
	gf_cu_dyn v;
	memset(&v, 0, sizeof(v));
	v.ema.decay = decay;
	v.ema.rest = 1.0f - decay;   /* the host's rounding, as the trainer's axpy had it */
	const gf_cu_dyn *dp;
	TRY(gf_cu_dyn_slot(c, &v, &dp));
	if (rc == GF_CU_SKIP)
		return 0;
	CU_LAUNCH(gf_cu_ema_launch(c->stream, avg, w, n, v.ema.decay, v.ema.rest, dp));
	return 0;
}

int gf_cu_copy2d(gf_backend *be, float *dst, size_t ldd, const float *src, size_t lds, size_t rows, size_t cols,
                 int accumulate)
{
	gf_cuda *c = gf_cu(be);
	if (!rows || !cols)
		return 0;
	ENTER(c);
	SIG(c, GF_CU_OP_COPY2D, GF_CU_P(dst), ldd, GF_CU_P(src), lds, rows, cols, (uint64_t)accumulate);
	CU_LAUNCH(gf_cu_copy2d_launch(c->stream, dst, ldd, src, lds, rows, cols, accumulate));
	return 0;
}

/* ---- bias ---- */

int gf_cu_bias_add(gf_backend *be, float *y, const float *b, int n, int ch, int hw)
{
	gf_cuda *c = gf_cu(be);
	ENTER(c);
	SIG(c, GF_CU_OP_BIAS_ADD, GF_CU_P(y), GF_CU_P(b), (uint64_t)n, (uint64_t)ch, (uint64_t)hw);
	CU_LAUNCH(gf_cu_bias_add_launch(c->stream, y, b, n, ch, hw));
	return 0;
}

int gf_cu_bias_grad(gf_backend *be, float *db, const float *dy, int n, int ch, int hw, int accumulate)
{
	gf_cuda *c = gf_cu(be);
	ENTER(c);
	SIG(c, GF_CU_OP_BIAS_GRAD, GF_CU_P(db), GF_CU_P(dy), (uint64_t)n, (uint64_t)ch, (uint64_t)hw,
	    (uint64_t)accumulate);
	double *part = gf_cu_scratch(c, (size_t)ch * gf_cu_chunks((size_t)n * hw) * sizeof(double));
	if (!part)
		return -ENOMEM;
	CU_LAUNCH(gf_cu_channel_sum(c->stream, db, part, dy, n, ch, hw, accumulate));
	return 0;
}

/* ---- activations, upsampling ---- */

int gf_cu_act_forward(gf_backend *be, float *y, const float *x, size_t n, gf_act act, float param)
{
	gf_cuda *c = gf_cu(be);
	ENTER(c);
	SIG(c, GF_CU_OP_ACT_FWD, GF_CU_P(y), GF_CU_P(x), n, (uint64_t)act, gf_cu_fbits(param));
	CU_LAUNCH(gf_cu_act_fwd_launch(c->stream, y, x, n, (int)act, param));
	return 0;
}

int gf_cu_act_backward(gf_backend *be, float *dx, const float *dy, const float *y, size_t n, gf_act act, float param)
{
	gf_cuda *c = gf_cu(be);
	ENTER(c);
	SIG(c, GF_CU_OP_ACT_BWD, GF_CU_P(dx), GF_CU_P(dy), GF_CU_P(y), n, (uint64_t)act, gf_cu_fbits(param));
	CU_LAUNCH(gf_cu_act_bwd_launch(c->stream, dx, dy, y, n, (int)act, param));
	return 0;
}

int gf_cu_upsample_forward(gf_backend *be, float *y, const float *x, int planes, int h, int w, int s)
{
	gf_cuda *c = gf_cu(be);
	if (s < 1)
		return gf_seterr(GF_EPARAM, "upsample: factor %d", s);
	ENTER(c);
	SIG(c, GF_CU_OP_UP_FWD, GF_CU_P(y), GF_CU_P(x), (uint64_t)planes, (uint64_t)h, (uint64_t)w, (uint64_t)s);
	CU_LAUNCH(gf_cu_up_fwd_launch(c->stream, y, x, planes, h, w, s));
	return 0;
}

int gf_cu_upsample_backward(gf_backend *be, float *dx, const float *dy, int planes, int h, int w, int s)
{
	gf_cuda *c = gf_cu(be);
	if (s < 1)
		return gf_seterr(GF_EPARAM, "upsample: factor %d", s);
	ENTER(c);
	SIG(c, GF_CU_OP_UP_BWD, GF_CU_P(dx), GF_CU_P(dy), (uint64_t)planes, (uint64_t)h, (uint64_t)w, (uint64_t)s);
	CU_LAUNCH(gf_cu_up_bwd_launch(c->stream, dx, dy, planes, h, w, s));
	return 0;
}

/* ---- dropout ---- */

int gf_cu_dropout_forward(gf_backend *be, float *y, float *mask, const float *x, size_t groups, size_t group,
                          float p, const gf_rng *rng)
{
	gf_cuda *c = gf_cu(be);
	if (!(p >= 0.0f && p < 1.0f))
		return gf_seterr(GF_EPARAM, "dropout: probability %g not in [0, 1)", (double)p);
	ENTER(c);
	float keep = 1.0f / (1.0f - p);   /* the CPU's scale, computed on the host as there */
	int rc = GF_CU_SIG(c, GF_CU_OP_DROP_FWD, GF_CU_P(y), GF_CU_P(mask), GF_CU_P(x), groups, group, gf_cu_fbits(p));
	if (rc < 0)
		return rc;
	gf_cu_dyn v;
	memset(&v, 0, sizeof(v));
	v.rng = *rng;
	const gf_cu_dyn *dp;
	TRY(gf_cu_dyn_slot(c, &v, &dp));
	if (rc == GF_CU_SKIP)
		return 0;
	CU_LAUNCH(gf_cu_drop_fwd_launch(c->stream, y, mask, x, groups, group, p, keep, *rng, dp));
	return 0;
}

int gf_cu_dropout_backward(gf_backend *be, float *dx, const float *dy, const float *mask, size_t groups, size_t group)
{
	gf_cuda *c = gf_cu(be);
	ENTER(c);
	SIG(c, GF_CU_OP_DROP_BWD, GF_CU_P(dx), GF_CU_P(dy), GF_CU_P(mask), groups, group);
	CU_LAUNCH(gf_cu_drop_bwd_launch(c->stream, dx, dy, mask, groups, group));
	return 0;
}

/* ---- pooling, softmax, embedding ---- */

int gf_cu_pooling_forward(gf_backend *be, float *y, int32_t *idx, const float *x, const gf_pooling_desc *d)
{
	gf_cuda *c = gf_cu(be);
	if (d->max && !idx)
		return gf_seterr(GF_EPARAM, "max pooling needs an index buffer");
	ENTER(c);
	int rc = GF_CU_SIG(c, GF_CU_OP_POOLING_FWD, GF_CU_P(y), GF_CU_P(idx), GF_CU_P(x));
	gf_cu_sig_bytes(c, d, sizeof(*d));
	if (rc)
		return rc == GF_CU_SKIP ? 0 : rc;
	CU_LAUNCH(gf_cu_pooling_fwd_launch(c->stream, y, idx, x, *d));
	return 0;
}

int gf_cu_pooling_backward(gf_backend *be, float *dx, const float *dy, const int32_t *idx, const gf_pooling_desc *d)
{
	gf_cuda *c = gf_cu(be);
	ENTER(c);
	int rc = GF_CU_SIG(c, GF_CU_OP_POOLING_BWD, GF_CU_P(dx), GF_CU_P(dy), GF_CU_P(idx));
	gf_cu_sig_bytes(c, d, sizeof(*d));
	if (rc)
		return rc == GF_CU_SKIP ? 0 : rc;
	CU_LAUNCH(gf_cu_pooling_bwd_launch(c->stream, dx, dy, idx, *d));
	return 0;
}

int gf_cu_softmax_forward(gf_backend *be, float *y, const float *x, int rows, int cols)
{
	gf_cuda *c = gf_cu(be);
	ENTER(c);
	SIG(c, GF_CU_OP_SOFTMAX_FWD, GF_CU_P(y), GF_CU_P(x), (uint64_t)rows, (uint64_t)cols);
	CU_LAUNCH(gf_cu_softmax_fwd_launch(c->stream, y, x, rows, cols));
	return 0;
}

int gf_cu_softmax_backward(gf_backend *be, float *dx, const float *dy, const float *y, int rows, int cols)
{
	gf_cuda *c = gf_cu(be);
	ENTER(c);
	SIG(c, GF_CU_OP_SOFTMAX_BWD, GF_CU_P(dx), GF_CU_P(dy), GF_CU_P(y), (uint64_t)rows, (uint64_t)cols);
	CU_LAUNCH(gf_cu_softmax_bwd_launch(c->stream, dx, dy, y, rows, cols));
	return 0;
}

/* The indices live on the device: one out of range is reported by the next
 * sync (or loss with a host value), and its row is zero meanwhile. */
int gf_cu_embedding_forward(gf_backend *be, float *y, const float *table, const int32_t *idx, int n, int dim, int num)
{
	gf_cuda *c = gf_cu(be);
	ENTER(c);
	SIG(c, GF_CU_OP_EMB_FWD, GF_CU_P(y), GF_CU_P(table), GF_CU_P(idx), (uint64_t)n, (uint64_t)dim, (uint64_t)num);
	CU_LAUNCH(gf_cu_emb_fwd_launch(c->stream, y, table, idx, n, dim, num, c->st_dev));
	return 0;
}

int gf_cu_embedding_backward(gf_backend *be, float *dtable, const float *dy, const int32_t *idx, int n, int dim,
                             int num, int accumulate)
{
	gf_cuda *c = gf_cu(be);
	ENTER(c);
	SIG(c, GF_CU_OP_EMB_BWD, GF_CU_P(dtable), GF_CU_P(dy), GF_CU_P(idx), (uint64_t)n, (uint64_t)dim, (uint64_t)num,
	    (uint64_t)accumulate);
	CU_LAUNCH(gf_cu_emb_bwd_launch(c->stream, dtable, dy, idx, n, dim, num, accumulate));
	return 0;
}

/* ---- losses ---- */

static int check_loss(const gf_loss_desc *d, const int32_t *labels)
{
	if ((int)d->kind < 0 || d->kind >= GF_LOSS_COUNT)
		return gf_seterr(GF_EPARAM, "unknown loss kind %d", (int)d->kind);
	if (d->kind == GF_LOSS_CE && !labels)
		return gf_seterr(GF_EPARAM, "cross-entropy loss needs labels");
	if (d->n < 1 || d->k < 1)
		return gf_seterr(GF_EPARAM, "loss: empty input (%d x %d)", d->n, d->k);
	return 0;
}

/* 1 when p is host memory the device cannot read safely (pageable, or
 * pinned memory the caller may rewrite once the op returns). */
static int on_host(const void *p)
{
	struct cudaPointerAttributes a;
	if (!p)
		return 0;
	if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
		cudaGetLastError();
		return 1;
	}
	return a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged;
}

/* Launches the loss into *out (device). In fp16 the gradient carries the
 * dynamic loss scale (optim_step takes it off again). Targets or labels in
 * host memory (a stage passing a message's tensor) are copied in first. */
static int loss_launch(gf_cuda *c, float *out, float *dx, const float *x, const float *target, const int32_t *labels,
                       const gf_loss_desc *d)
{
	int rc = GF_CU_SIG(c, GF_CU_OP_LOSS, GF_CU_P(out), GF_CU_P(dx), GF_CU_P(x), GF_CU_P(target), GF_CU_P(labels),
	                   (uint64_t)d->kind, (uint64_t)d->n, (uint64_t)d->k);
	if (rc < 0)
		return rc;
	gf_cu_dyn v;
	memset(&v, 0, sizeof(v));
	v.loss.target = d->target;
	v.loss.scale = d->scale;
	const gf_cu_dyn *dp;
	TRY(gf_cu_dyn_slot(c, &v, &dp));
	if (rc == GF_CU_SKIP)
		return 0;
	size_t tb = (size_t)d->n * d->k * sizeof(float), lb = (size_t)d->n * sizeof(int32_t);
	int host_t = d->kind != GF_LOSS_CE && on_host(target), host_l = d->kind == GF_LOSS_CE && on_host(labels);
	if ((host_t || host_l) && c->gmode != GF_CU_EAGER) {
		gf_cu_no_graph(c, "a loss target in host memory");
		return GF_EUNSUPPORTED;
	}
	size_t pb = gf_cu_round(gf_cu_loss_parts(d) * sizeof(double));
	char *scr = gf_cu_scratch(c, pb + (host_t ? gf_cu_round(tb) : 0) + (host_l ? gf_cu_round(lb) : 0));
	if (!scr)
		return -ENOMEM;
	double *part = (double *)(void *)scr;
	scr += pb;
	if (host_t) {
		TRY(gf_cu_h2d(c, scr, target, tb));
		target = (const float *)(void *)scr;
	}
	if (host_l) {
		TRY(gf_cu_h2d(c, scr, labels, lb));
		labels = (const int32_t *)(void *)scr;
	}
	CU_LAUNCH(gf_cu_loss_launch(c->stream, out, dx, part, x, target, labels, *d, dp, c->st_dev,
	                            c->prec == GF_PREC_FP16));
	return 0;
}

int gf_cu_loss(gf_backend *be, float *loss_host, float *dx, const float *x, const float *target,
               const int32_t *labels, const gf_loss_desc *d)
{
	gf_cuda *c = gf_cu(be);
	TRY(check_loss(d, labels));
	ENTER(c);
	if (loss_host)
		TRY(gf_cu_no_graph(c, "loss with a host value (use loss_dev)"));
	TRY(loss_launch(c, &c->st_dev->loss, dx, x, target, labels, d));
	if (!loss_host)
		return 0;
	/* the value is wanted now: wait, and report input errors as the CPU does */
	TRY(gf_cu_sync_status(c));
	*loss_host = c->st_host->loss;
	return 0;
}

int gf_cu_loss_dev(gf_backend *be, float *loss_dev, float *dx, const float *x, const float *target,
                   const int32_t *labels, const gf_loss_desc *d)
{
	gf_cuda *c = gf_cu(be);
	TRY(check_loss(d, labels));
	ENTER(c);
	return loss_launch(c, loss_dev ? loss_dev : &c->st_dev->loss, dx, x, target, labels, d);
}

/* ---- optimisers ---- */

int gf_cu_optim_step(gf_backend *be, float *p, const float *g, float *state, size_t n, const gf_optim_args *a)
{
	gf_cuda *c = gf_cu(be);
	if (a->kind != GF_OPT_ADAM && a->kind != GF_OPT_OADAM && a->kind != GF_OPT_SGD)
		return gf_seterr(GF_EPARAM, "unknown optimiser kind %d", (int)a->kind);
	ENTER(c);
	int fp16 = c->prec == GF_PREC_FP16;
	/* grad_unscale already took the scale off (and checked) these gradients */
	int pre = fp16 && c->unscaled_pending && c->unscaled_ptr == g && c->unscaled_n == n;
	int rc = GF_CU_SIG(c, GF_CU_OP_OPTIM, GF_CU_P(p), GF_CU_P(g), GF_CU_P(state), n, (uint64_t)a->kind,
	                   (uint64_t)fp16, (uint64_t)pre);
	if (rc < 0)
		return rc;
	gf_cu_dyn v;
	memset(&v, 0, sizeof(v));
	v.optim = *a;
	const gf_cu_dyn *dp;
	TRY(gf_cu_dyn_slot(c, &v, &dp));
	c->optim_calls++;
	c->unscaled_pending = 0;
	if (rc == GF_CU_SKIP)
		return 0;
	if (fp16) {
		/* GradScaler.step: all-or-nothing on a device-side overflow test,
		 * then the scale's backoff or growth; nothing waits for the host */
		if (!pre)
			CU_LAUNCH(gf_cu_check_inf_launch(c->stream, (float *)(uintptr_t)g, n, c->st_dev, 0));
		CU_LAUNCH(gf_cu_optim_launch(c->stream, p, g, state, n, *a, dp, c->st_dev, !pre));
		CU_LAUNCH(gf_cu_scaler_update_launch(c->stream, c->st_dev));
		return 0;
	}
	CU_LAUNCH(gf_cu_optim_launch(c->stream, p, g, state, n, *a, dp, NULL, 0));
	return 0;
}

int gf_cu_grad_unscale(gf_backend *be, float *g, size_t n)
{
	gf_cuda *c = gf_cu(be);
	if (c->prec != GF_PREC_FP16)
		return 0;
	ENTER(c);
	c->unscaled_pending = 1;
	c->unscaled_ptr = g;
	c->unscaled_n = n;
	SIG(c, GF_CU_OP_UNSCALE, GF_CU_P(g), n);
	CU_LAUNCH(gf_cu_check_inf_launch(c->stream, g, n, c->st_dev, 1));
	return 0;
}

/* ---- reductions, randomness ---- */

int gf_cu_sumsq(gf_backend *be, double *out, const float *x, size_t n)
{
	gf_cuda *c = gf_cu(be);
	ENTER(c);
	TRY(gf_cu_no_graph(c, "sumsq (it returns a host value)"));
	double *part = gf_cu_scratch(c, gf_cu_sumsq_parts(n) * sizeof(double));
	if (!part)
		return -ENOMEM;
	CU_LAUNCH(gf_cu_sumsq_launch(c->stream, &c->st_dev->sumsq, part, x, n));
	TRY(gf_cu_sync_status(c));
	*out = c->st_host->sumsq;
	return 0;
}

int gf_cu_reduce_dev(gf_backend *be, double *out, const float *x, size_t n, int squares)
{
	gf_cuda *c = gf_cu(be);
	ENTER(c);
	SIG(c, GF_CU_OP_REDUCE, GF_CU_P(out), GF_CU_P(x), n, (uint64_t)(squares != 0));
	double *part = gf_cu_scratch(c, gf_cu_sumsq_parts(n) * sizeof(double));
	if (!part)
		return -ENOMEM;
	CU_LAUNCH(gf_cu_reduce_launch(c->stream, out, part, x, n, squares != 0));
	return 0;
}

static int rng_op(gf_backend *be, int op, float *out, size_t n, float a, float b, const gf_rng *rng)
{
	gf_cuda *c = gf_cu(be);
	if (!n)
		return 0;
	ENTER(c);
	int rc = GF_CU_SIG(c, op, GF_CU_P(out), n, gf_cu_fbits(a), gf_cu_fbits(b));
	if (rc < 0)
		return rc;
	gf_cu_dyn v;
	memset(&v, 0, sizeof(v));
	v.rng = *rng;
	const gf_cu_dyn *dp;
	TRY(gf_cu_dyn_slot(c, &v, &dp));
	if (rc == GF_CU_SKIP)
		return 0;
	CU_LAUNCH(gf_cu_rng_launch(c->stream, out, n, a, b, op == GF_CU_OP_RNG_NORMAL, *rng, dp));
	return 0;
}

int gf_cu_rng_uniform(gf_backend *be, float *out, size_t n, float lo, float hi, const gf_rng *rng)
{
	return rng_op(be, GF_CU_OP_RNG_UNIFORM, out, n, lo, hi, rng);
}

int gf_cu_rng_normal(gf_backend *be, float *out, size_t n, float mean, float std, const gf_rng *rng)
{
	return rng_op(be, GF_CU_OP_RNG_NORMAL, out, n, mean, std, rng);
}

/* ---- rows (the projection head) ---- */

int gf_cu_row_dot(gf_backend *be, float *out, const float *a, const float *b, int n, int k, int accumulate)
{
	gf_cuda *c = gf_cu(be);
	if (n < 0 || k < 0)
		return gf_seterr(GF_EPARAM, "row_dot: negative size (%d, %d)", n, k);
	ENTER(c);
	SIG(c, GF_CU_OP_ROW_DOT, GF_CU_P(out), GF_CU_P(a), GF_CU_P(b), (uint64_t)n, (uint64_t)k, (uint64_t)accumulate);
	CU_LAUNCH(gf_cu_row_dot_launch(c->stream, out, a, b, n, k, accumulate));
	return 0;
}

int gf_cu_row_scale(gf_backend *be, float *y, const float *s, const float *x, int n, int k, int accumulate)
{
	gf_cuda *c = gf_cu(be);
	if (n < 0 || k < 0)
		return gf_seterr(GF_EPARAM, "row_scale: negative size (%d, %d)", n, k);
	ENTER(c);
	SIG(c, GF_CU_OP_ROW_SCALE, GF_CU_P(y), GF_CU_P(s), GF_CU_P(x), (uint64_t)n, (uint64_t)k, (uint64_t)accumulate);
	CU_LAUNCH(gf_cu_row_scale_launch(c->stream, y, s, x, n, k, accumulate));
	return 0;
}
