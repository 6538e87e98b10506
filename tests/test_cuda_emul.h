/* A CPU backend that rounds like the CUDA backend, for test_cuda_cmp:
 * GEMM and convolution operands rounded to bf16 or fp16 in software
 * (round to nearest even, fp16's subnormals and range), products summed in
 * f32, a convolution's result rounded to the format before its f32 bias;
 * fp16's loss scale. Also fp32 with 22-bit operands (noise of the GPU's
 * sums in other orders), one bit short (a broken cast), and planted
 * bias-gradient bugs. It swaps the ops table of a CPU backend of its own.
 * Header-only. */
#ifndef GF_TEST_CUDA_EMUL_H
#define GF_TEST_CUDA_EMUL_H

#include <float.h>

#include "test_cuda_cmp.h"

/* ---- rounding to bf16 / fp16 in software ---- */

/* A binary format: significant bits, exponent of the smallest normal,
 * largest finite value. */
struct fmt {
	int bits, emin;
	double max;
};

static const struct fmt BF16 = { 8, -126, 0x1.fep127 }, FP16 = { 11, -14, 65504.0 };
/* fp32 with two bits fewer: rounding noise on an otherwise fp32
 * computation, as the GPU's sums in other orders give */
static const struct fmt F22 = { 22, -126, FLT_MAX };

/* x rounded to nearest (ties to even) in a format of `bits` significant
 * bits with f's exponent range: subnormals below 2^emin keep the spacing
 * of the smallest binade, values beyond the largest finite become +-inf
 * as IEEE rounding does. */
static inline float round_bits(float x, int bits, const struct fmt *f)
{
	if (!isfinite(x) || x == 0.0f)
		return x;
	int e;
	frexp((double)x, &e);   /* |x| in [2^(e-1), 2^e) */
	int lead = e - 1 < f->emin ? f->emin : e - 1;
	double q = ldexp(1.0, lead - (bits - 1));   /* the spacing there */
	double r = nearbyint((double)x / q) * q;    /* exact: q is a power of two */
	if (fabs(r) > f->max)
		return copysignf(INFINITY, x);
	return (float)r;
}

/* bf16 the usual way, on the bits (an independent check of round_bits). */
static inline float bf16_bits(float x)
{
	uint32_t u;
	memcpy(&u, &x, 4);
	u += 0x7fffu + ((u >> 16) & 1u);
	u &= 0xffff0000u;
	memcpy(&x, &u, 4);
	return x;
}

static inline float float_of(uint32_t u)
{
	float x;
	memcpy(&x, &u, 4);
	return x;
}

/* ---- a CPU backend that rounds like the CUDA backend ---- */

/* Bias-gradient bugs planted to show that the network comparisons catch
 * them: every bias gradient 1 % too large; summed over all samples but the
 * last (an off-by-one). */
enum { BUG_NONE = 0, BUG_DB_SCALE, BUG_DB_DROP_LAST };

/* The CPU backend with the CUDA backend's bf16/fp16 roundings: GEMM and
 * convolution operands rounded to the format, products summed in f32, a
 * convolution's result rounded to the format before the bias (f32) is
 * added; everything else f32 as on the GPU. fp16: a loss scale (stats)
 * and grad_unscale as the CUDA backend's, the format's range and
 * subnormals included. fp32: the CPU backend itself (plus a planted bug). */
struct emul {
	gf_backend *be;   /* a CPU backend of its own whose ops table is ops */
	gf_backend_ops ops;
	const gf_backend_ops *cpu;   /* the CPU backend's table */
	gf_precision prec;
	int round;       /* 0: fp32, the CPU's own arithmetic */
	const struct fmt *f;
	int bits;        /* significant bits kept (one fewer: a backend that lost a bit) */
	int bug;
	float loss_scale;
};

/* The open emulated backends: the ops find theirs by the backend pointer
 * (the CPU ops need the CPU backend's own instance, so the emulation swaps
 * the table of a real one). */
static struct emul *emuls[8];

static inline struct emul *emul_of(gf_backend *be)
{
	for (size_t i = 0; i < sizeof(emuls) / sizeof(emuls[0]); i++)
		if (emuls[i] && emuls[i]->be == be)
			return emuls[i];
	abort();
}

static inline void round_in(struct emul *e, float *x, size_t n)
{
	if (!e->round)
		return;
	for (size_t i = 0; i < n; i++)
		x[i] = round_bits(x[i], e->bits, e->f);
}

static inline float *rounded(struct emul *e, const float *x, size_t n)
{
	float *r = malloc((n ? n : 1) * sizeof(float));
	memcpy(r, x, n * sizeof(float));
	round_in(e, r, n);
	return r;
}

static inline int emul_gemm(gf_backend *be, int ta, int tb, int m, int n, int k, float alpha, const float *a,
                            int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
	struct emul *e = emul_of(be);
	if (m <= 0 || n <= 0 || k <= 0)
		return e->cpu->gemm(be, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
	size_t na = (size_t)((ta ? k : m) - 1) * lda + (size_t)(ta ? m : k);
	size_t nb = (size_t)((tb ? n : k) - 1) * ldb + (size_t)(tb ? k : n);
	float *ar = rounded(e, a, na), *br = rounded(e, b, nb);
	int rc = e->cpu->gemm(be, ta, tb, m, n, k, alpha, ar, lda, br, ldb, beta, c, ldc);
	free(ar);
	free(br);
	return rc;
}

static inline int emul_conv_forward(gf_backend *be, float *y, const float *x, const float *w, const float *b,
                                    const gf_conv_desc *d)
{
	struct emul *e = emul_of(be);
	size_t nx = (size_t)d->n * d->cin * d->h * d->w, nw = (size_t)d->cout * (d->cin / gf_conv_groups(d)) * d->kh * d->kw;
	size_t hw = (size_t)d->hout * d->wout, ny = (size_t)d->n * d->cout * hw;
	float *xr = rounded(e, x, nx), *wr = rounded(e, w, nw);
	int rc = e->cpu->conv2d_forward(be, y, xr, wr, NULL, d);
	round_in(e, y, ny);
	if (!rc && b)
		rc = e->cpu->bias_add(be, y, b, d->n, d->cout, (int)hw);
	free(xr);
	free(wr);
	return rc;
}

/* A bias gradient as the planted bug computes it: db (c) (+)= sum of dy
 * (n, c, hw). */
static inline int bias_grad_bugged(struct emul *e, gf_backend *be, float *db, const float *dy, int n, int c, int hw,
                                   int acc)
{
	if (e->bug == BUG_DB_DROP_LAST && n > 1)
		n--;
	if (e->bug != BUG_DB_SCALE)
		return e->cpu->bias_grad(be, db, dy, n, c, hw, acc);
	float *t = malloc((size_t)c * sizeof(float));
	int rc = e->cpu->bias_grad(be, t, dy, n, c, hw, 0);
	for (int i = 0; i < c; i++)
		db[i] = (acc ? db[i] : 0.0f) + 1.01f * t[i];
	free(t);
	return rc;
}

static inline int emul_bias_grad(gf_backend *be, float *db, const float *dy, int n, int c, int hw, int acc)
{
	return bias_grad_bugged(emul_of(be), be, db, dy, n, c, hw, acc);
}

static inline int emul_conv_backward(gf_backend *be, float *dx, float *dw, float *db, const float *dy,
                                     const float *x, const float *w, const gf_conv_desc *d, int acc)
{
	struct emul *e = emul_of(be);
	size_t nx = (size_t)d->n * d->cin * d->h * d->w, nw = (size_t)d->cout * (d->cin / gf_conv_groups(d)) * d->kh * d->kw;
	size_t hw = (size_t)d->hout * d->wout, ny = (size_t)d->n * d->cout * hw;
	int rc = 0;
	if (db)   /* an f32 sum of dy on the GPU too */
		rc = bias_grad_bugged(e, be, db, dy, d->n, d->cout, (int)hw, acc);
	float *dyr = rounded(e, dy, ny);
	if (!rc && dx) {
		float *wr = rounded(e, w, nw);
		rc = e->cpu->conv2d_backward(be, dx, NULL, NULL, dyr, NULL, wr, d, 0);
		round_in(e, dx, nx);
		free(wr);
	}
	if (!rc && dw) {
		float *xr = rounded(e, x, nx), *t = malloc(nw * sizeof(float));
		rc = e->cpu->conv2d_backward(be, NULL, t, NULL, dyr, xr, w, d, 0);
		round_in(e, t, nw);
		for (size_t i = 0; i < nw; i++)
			dw[i] = acc ? dw[i] + t[i] : t[i];
		free(xr);
		free(t);
	}
	free(dyr);
	return rc;
}

static inline int emul_stats(gf_backend *be, gf_backend_stats *out)
{
	memset(out, 0, sizeof(*out));
	out->loss_scale = emul_of(be)->loss_scale;
	return 0;
}

static inline int emul_grad_unscale(gf_backend *be, float *g, size_t n)
{
	struct emul *e = emul_of(be);
	return e->cpu->scale(be, g, n, 1.0f / e->loss_scale);
}

/* An emulated backend: a CPU backend of its own with the table above;
 * emul_close closes it. */
static inline gf_backend *emul_open(struct emul *e, gf_precision prec, int lost_bits, int bug)
{
	memset(e, 0, sizeof(*e));
	e->be = cpu_open();
	e->cpu = e->be->ops;
	e->ops = *e->cpu;
	e->ops.gemm = emul_gemm;
	e->ops.conv2d_forward = emul_conv_forward;
	e->ops.conv2d_backward = emul_conv_backward;
	e->ops.bias_grad = emul_bias_grad;
	e->ops.stats = emul_stats;
	e->ops.grad_unscale = emul_grad_unscale;
	e->be->ops = &e->ops;
	e->prec = prec;
	e->round = prec != GF_PREC_FP32;
	e->f = prec == GF_PREC_FP16 ? &FP16 : &BF16;
	e->bits = e->f->bits - lost_bits;
	e->bug = bug;
	e->loss_scale = prec == GF_PREC_FP16 ? 65536.0f : 1.0f;   /* the CUDA backend's initial scale */
	size_t i = 0;
	while (emuls[i])
		i++;
	emuls[i] = e;
	return e->be;
}

static inline void emul_close(struct emul *e)
{
	for (size_t i = 0; i < sizeof(emuls) / sizeof(emuls[0]); i++)
		if (emuls[i] == e)
			emuls[i] = NULL;
	e->be->ops = e->cpu;
	gf_backend_close(e->be);
}

/* An fp32 backend whose GEMM and convolution operands and results are
 * rounded to 22 bits: rounding noise on every result, as the GPU's sums
 * in other orders give, a little larger than fp32's own. */
static inline gf_backend *emul_open_f22(struct emul *e, int bug)
{
	gf_backend *g = emul_open(e, GF_PREC_FP32, 0, bug);
	e->round = 1;
	e->f = &F22;
	e->bits = F22.bits;
	return g;
}

#endif
