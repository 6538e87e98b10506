/* CPU backend ops other than convolution and batchnorm: GEMM, fills,
 * pointwise activations, upsampling, dropout, pooling, softmax, embedding,
 * losses, optimiser updates, reductions and random fills.
 *
 * Parallel loops split over independent output elements only; every sum
 * runs in a fixed order inside one part, so results do not depend on the
 * thread count. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include <cblas.h>

#include <ganflow/err.h>

#include "../nn_internal.h"
#include "cpu.h"

#define GRAIN (1u << 15)   /* elements per part for streaming ops */

/* ---- GEMM ----
 *
 * OpenBLAS runs single-threaded (see backend_cpu.c) and the team splits
 * each GEMM into one call per thread over column (or row) blocks: no
 * second set of threads spinning against the team's, and each element of
 * C is still computed by one call over the whole K. */

struct gemm_args {
	int ta, tb, m, n, k, lda, ldb, ldc, split_n, blk;
	float alpha, beta;
	const float *a, *b;
	float *c;
};

static void gemm_part(void *p, size_t b, size_t e)
{
	struct gemm_args *g = p;
	int lo = (int)b * g->blk, hi = (int)e * g->blk;
	int lim = g->split_n ? g->n : g->m;
	if (hi > lim)
		hi = lim;
	if (hi <= lo)
		return;
	if (g->split_n) {
		const float *bp = g->tb ? g->b + (size_t)lo * g->ldb : g->b + lo;
		cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans, g->tb ? CblasTrans : CblasNoTrans, g->m,
		            hi - lo, g->k, g->alpha, g->a, g->lda, bp, g->ldb, g->beta, g->c + lo, g->ldc);
	} else {
		const float *ap = g->ta ? g->a + lo : g->a + (size_t)lo * g->lda;
		cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans, g->tb ? CblasTrans : CblasNoTrans,
		            hi - lo, g->n, g->k, g->alpha, ap, g->lda, g->b, g->ldb, g->beta, g->c + (size_t)lo * g->ldc,
		            g->ldc);
	}
}

int gf_cpu_gemm(gf_backend *be, int ta, int tb, int m, int n, int k, float alpha,
                const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
	if (m <= 0 || n <= 0)
		return 0;
	if (k <= 0) {
		/* C = beta C; BLAS would do the same, but say it plainly */
		for (int i = 0; i < m; i++)
			for (int j = 0; j < n; j++)
				c[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[(size_t)i * ldc + j];
		return 0;
	}
	struct gemm_args g = { ta, tb, m, n, k, lda, ldb, ldc, n >= m, 32, alpha, beta, a, b, c };
	int dim = g.split_n ? n : m;
	size_t blocks = ((size_t)dim + (size_t)g.blk - 1) / (size_t)g.blk;
	/* parts of at least ~4 MFLOP: smaller GEMMs run on one thread */
	double flops = 2.0 * m * n * k;
	size_t per_block = (size_t)(flops / (double)blocks) + 1;
	size_t grain = (size_t)(4e6 / (double)per_block) + 1;
	gf_team_for(gf_cpu_of(be)->team, blocks, grain, gemm_part, &g);
	return 0;
}

/* ---- fills and vector ops ---- */

struct vec_args {
	float *y;
	const float *x;
	float a;
};

static void fill_part(void *p, size_t b, size_t e)
{
	struct vec_args *v = p;
	for (size_t i = b; i < e; i++)
		v->y[i] = v->a;
}

int gf_cpu_fill(gf_backend *be, float *x, size_t n, float value)
{
	struct vec_args v = { x, NULL, value };
	if (value == 0.0f) {
		memset(x, 0, n * sizeof(float));
		return 0;
	}
	gf_team_for(gf_cpu_of(be)->team, n, GRAIN, fill_part, &v);
	return 0;
}

GF_CLONES static void axpy_part(void *p, size_t b, size_t e)
{
	struct vec_args *v = p;
	float *restrict y = v->y;
	const float *restrict x = v->x;
	float a = v->a;
	if (a == 1.0f) {
		for (size_t i = b; i < e; i++)
			y[i] += x[i];
	} else {
		for (size_t i = b; i < e; i++)
			y[i] += a * x[i];
	}
}

int gf_cpu_axpy(gf_backend *be, float *y, const float *x, size_t n, float alpha)
{
	struct vec_args v = { y, x, alpha };
	gf_team_for(gf_cpu_of(be)->team, n, GRAIN, axpy_part, &v);
	return 0;
}

GF_CLONES static void scale_part(void *p, size_t b, size_t e)
{
	struct vec_args *v = p;
	for (size_t i = b; i < e; i++)
		v->y[i] *= v->a;
}

int gf_cpu_scale(gf_backend *be, float *x, size_t n, float s)
{
	struct vec_args v = { x, NULL, s };
	gf_team_for(gf_cpu_of(be)->team, n, GRAIN, scale_part, &v);
	return 0;
}

/* The two passes the trainer made before this op existed, so that every
 * checkpoint with an average keeps its bits. */
int gf_cpu_ema(gf_backend *be, float *avg, const float *w, size_t n, float decay)
{
	gf_cpu_scale(be, avg, n, decay);
	return gf_cpu_axpy(be, avg, w, n, 1.0f - decay);
}

struct copy2d_args {
	float *dst;
	size_t ldd;
	const float *src;
	size_t lds, cols;
	int acc;
};

GF_CLONES static void copy2d_part(void *p, size_t b, size_t e)
{
	struct copy2d_args *a = p;
	for (size_t r = b; r < e; r++) {
		float *restrict d = a->dst + r * a->ldd;
		const float *restrict s = a->src + r * a->lds;
		if (a->acc) {
			for (size_t j = 0; j < a->cols; j++)
				d[j] += s[j];
		} else {
			memcpy(d, s, a->cols * sizeof(float));
		}
	}
}

int gf_cpu_copy2d(gf_backend *be, float *dst, size_t ldd, const float *src, size_t lds,
                  size_t rows, size_t cols, int accumulate)
{
	struct copy2d_args a = { dst, ldd, src, lds, cols, accumulate };
	gf_team_for(gf_cpu_of(be)->team, rows, cols ? GRAIN / cols + 1 : rows, copy2d_part, &a);
	return 0;
}

/* ---- bias ---- */

struct bias_args {
	float *y;
	const float *b;
	const float *dy;
	int n, c, hw, acc;
};

GF_CLONES static void bias_add_part(void *p, size_t b, size_t e)
{
	struct bias_args *a = p;
	for (size_t r = b; r < e; r++) {   /* r = sample * c + channel */
		float v = a->b[r % (size_t)a->c];
		float *y = a->y + r * (size_t)a->hw;
		for (int i = 0; i < a->hw; i++)
			y[i] += v;
	}
}

int gf_cpu_bias_add(gf_backend *be, float *y, const float *b, int n, int c, int hw)
{
	struct bias_args a = { y, b, NULL, n, c, hw, 0 };
	if (hw == 1) {
		/* (n, c) rows: add the vector to each row */
		for (int i = 0; i < n; i++)
			for (int j = 0; j < c; j++)
				y[(size_t)i * c + j] += b[j];
		return 0;
	}
	gf_team_for(gf_cpu_of(be)->team, (size_t)n * c, GRAIN / (size_t)hw + 1, bias_add_part, &a);
	return 0;
}

/* Sum of a row in a fixed order: 16 float lanes, then the lanes in double. */
static inline double row_sum(const float *x, int n)
{
	float acc[16] = { 0 };
	int i = 0;
	for (; i + 16 <= n; i += 16)
		for (int l = 0; l < 16; l++)
			acc[l] += x[i + l];
	double s = 0;
	for (int l = 0; l < 16; l++)
		s += acc[l];
	for (; i < n; i++)
		s += x[i];
	return s;
}

GF_CLONES static void bias_grad_part(void *p, size_t b, size_t e)
{
	struct bias_args *a = p;
	for (size_t ch = b; ch < e; ch++) {
		double s = 0;
		for (int i = 0; i < a->n; i++)
			s += row_sum(a->dy + ((size_t)i * a->c + ch) * a->hw, a->hw);
		a->y[ch] = a->acc ? a->y[ch] + (float)s : (float)s;
	}
}

int gf_cpu_bias_grad(gf_backend *be, float *db, const float *dy, int n, int c, int hw, int accumulate)
{
	struct bias_args a = { db, NULL, dy, n, c, hw, accumulate };
	size_t work = (size_t)n * hw;
	gf_team_for(gf_cpu_of(be)->team, (size_t)c, GRAIN / (work + 1) + 1, bias_grad_part, &a);
	return 0;
}

/* ---- activations ---- */

struct act_args {
	float *y;
	const float *x;
	const float *dy;
	gf_act act;
	float param;
};

GF_CLONES static void act_fwd_part(void *p, size_t b, size_t e)
{
	struct act_args *a = p;
	float *restrict y = a->y;
	const float *x = a->x;
	float s = a->param;
	switch (a->act) {
	case GF_ACT_NONE:
		if (y != x)
			memcpy(y + b, x + b, (e - b) * sizeof(float));
		break;
	case GF_ACT_RELU:
		for (size_t i = b; i < e; i++)
			y[i] = x[i] > 0.0f ? x[i] : 0.0f;
		break;
	case GF_ACT_LRELU:
		for (size_t i = b; i < e; i++)
			y[i] = x[i] > 0.0f ? x[i] : x[i] * s;
		break;
	case GF_ACT_TANH:
		for (size_t i = b; i < e; i++)
			y[i] = tanhf(x[i]);
		break;
	case GF_ACT_SIGMOID:
		for (size_t i = b; i < e; i++)
			y[i] = 1.0f / (1.0f + expf(-x[i]));
		break;
	}
}

int gf_cpu_act_forward(gf_backend *be, float *y, const float *x, size_t n, gf_act act, float param)
{
	struct act_args a = { y, x, NULL, act, param };
	gf_team_for(gf_cpu_of(be)->team, n, act == GF_ACT_TANH || act == GF_ACT_SIGMOID ? GRAIN / 8 : GRAIN,
	            act_fwd_part, &a);
	return 0;
}

GF_CLONES static void act_bwd_part(void *p, size_t b, size_t e)
{
	struct act_args *a = p;
	float *dx = a->y;
	const float *y = a->x, *dy = a->dy;
	float s = a->param;
	switch (a->act) {
	case GF_ACT_NONE:
		if (dx != dy)
			memcpy(dx + b, dy + b, (e - b) * sizeof(float));
		break;
	case GF_ACT_RELU:
		for (size_t i = b; i < e; i++)
			dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
		break;
	case GF_ACT_LRELU:
		for (size_t i = b; i < e; i++)
			dx[i] = y[i] > 0.0f ? dy[i] : dy[i] * s;
		break;
	case GF_ACT_TANH:
		for (size_t i = b; i < e; i++)
			dx[i] = dy[i] * (1.0f - y[i] * y[i]);
		break;
	case GF_ACT_SIGMOID:
		for (size_t i = b; i < e; i++)
			dx[i] = dy[i] * y[i] * (1.0f - y[i]);
		break;
	}
}

int gf_cpu_act_backward(gf_backend *be, float *dx, const float *dy, const float *y, size_t n,
                        gf_act act, float param)
{
	struct act_args a = { dx, y, dy, act, param };
	gf_team_for(gf_cpu_of(be)->team, n, GRAIN, act_bwd_part, &a);
	return 0;
}

/* ---- nearest upsampling ---- */

struct up_args {
	float *out;
	const float *in;
	int h, w, s;
};

static void up_fwd_part(void *p, size_t b, size_t e)
{
	struct up_args *a = p;
	int W = a->w * a->s;
	for (size_t pl = b; pl < e; pl++) {
		const float *x = a->in + pl * (size_t)a->h * a->w;
		float *y = a->out + pl * (size_t)a->h * a->w * a->s * a->s;
		for (int i = 0; i < a->h; i++) {
			float *row = y + (size_t)i * a->s * W;
			for (int j = 0; j < a->w; j++)
				for (int k = 0; k < a->s; k++)
					row[j * a->s + k] = x[i * a->w + j];
			for (int k = 1; k < a->s; k++)
				memcpy(row + (size_t)k * W, row, (size_t)W * sizeof(float));
		}
	}
}

int gf_cpu_upsample_forward(gf_backend *be, float *y, const float *x, int planes, int h, int w, int s)
{
	struct up_args a = { y, x, h, w, s };
	gf_team_for(gf_cpu_of(be)->team, (size_t)planes, GRAIN / ((size_t)h * w * s * s + 1) + 1, up_fwd_part, &a);
	return 0;
}

static void up_bwd_part(void *p, size_t b, size_t e)
{
	struct up_args *a = p;
	int W = a->w * a->s;
	for (size_t pl = b; pl < e; pl++) {
		float *dx = a->out + pl * (size_t)a->h * a->w;
		const float *dy = a->in + pl * (size_t)a->h * a->w * a->s * a->s;
		for (int i = 0; i < a->h; i++) {
			for (int j = 0; j < a->w; j++) {
				float s = 0;
				for (int ki = 0; ki < a->s; ki++)
					for (int kj = 0; kj < a->s; kj++)
						s += dy[(size_t)(i * a->s + ki) * W + j * a->s + kj];
				dx[i * a->w + j] = s;
			}
		}
	}
}

int gf_cpu_upsample_backward(gf_backend *be, float *dx, const float *dy, int planes, int h, int w, int s)
{
	struct up_args a = { dx, dy, h, w, s };
	gf_team_for(gf_cpu_of(be)->team, (size_t)planes, GRAIN / ((size_t)h * w * s * s + 1) + 1, up_bwd_part, &a);
	return 0;
}

/* ---- dropout ---- */

struct drop_args {
	float *y, *mask;
	const float *x;
	size_t group;
	float p, keep_scale;
	gf_rng rng;
};

static void drop_fwd_part(void *p, size_t b, size_t e)
{
	struct drop_args *a = p;
	uint32_t w[4];
	uint64_t cur = UINT64_MAX;
	for (size_t g = b; g < e; g++) {
		uint64_t blk = a->rng.offset + g / 4;
		if (blk != cur) {
			gf_rng_block(w, a->rng.seed, a->rng.stream, blk);
			cur = blk;
		}
		float m = gf_rng_u01(w[g % 4]) >= a->p ? a->keep_scale : 0.0f;
		a->mask[g] = m;
		const float *x = a->x + g * a->group;
		float *y = a->y + g * a->group;
		for (size_t k = 0; k < a->group; k++)
			y[k] = x[k] * m;
	}
}

int gf_cpu_dropout_forward(gf_backend *be, float *y, float *mask, const float *x, size_t groups,
                           size_t group, float p, const gf_rng *rng)
{
	if (!(p >= 0.0f && p < 1.0f))
		return gf_seterr(GF_EPARAM, "dropout: probability %g not in [0, 1)", (double)p);
	struct drop_args a = { y, mask, x, group, p, 1.0f / (1.0f - p), *rng };
	gf_team_for(gf_cpu_of(be)->team, groups, GRAIN / (group + 1) + 1, drop_fwd_part, &a);
	return 0;
}

static void drop_bwd_part(void *p, size_t b, size_t e)
{
	struct drop_args *a = p;
	for (size_t g = b; g < e; g++) {
		float m = a->mask[g];
		const float *dy = a->x + g * a->group;
		float *dx = a->y + g * a->group;
		for (size_t k = 0; k < a->group; k++)
			dx[k] = dy[k] * m;
	}
}

int gf_cpu_dropout_backward(gf_backend *be, float *dx, const float *dy, const float *mask,
                            size_t groups, size_t group)
{
	struct drop_args a = { dx, (float *)mask, dy, group, 0, 0, { 0, 0, 0 } };
	gf_team_for(gf_cpu_of(be)->team, groups, GRAIN / (group + 1) + 1, drop_bwd_part, &a);
	return 0;
}

/* ---- pooling ---- */

struct pooling_args {
	float *y;
	int32_t *idx;
	const float *x;
	const int32_t *cidx;
	const gf_pooling_desc *d;
};

/* 2x2 stride-2 max pooling without padding (the classifier's, attention's):
 * the general loop's rule (the first maximum in window order; a NaN wins)
 * without its bounds tests. */
GF_CLONES static void maxpool2_plane(float *restrict y, int32_t *restrict idx, const float *restrict x,
                                     const gf_pooling_desc *d)
{
	for (int oy = 0; oy < d->hout; oy++) {
		const float *r0 = x + (size_t)(2 * oy) * d->w, *r1 = r0 + d->w;
		float *yr = y + (size_t)oy * d->wout;
		int32_t *ir = idx + (size_t)oy * d->wout, base = 2 * oy * d->w;
		for (int ox = 0; ox < d->wout; ox++) {
			float v[4] = { r0[2 * ox], r0[2 * ox + 1], r1[2 * ox], r1[2 * ox + 1] };
			int32_t at[4] = { base + 2 * ox, base + 2 * ox + 1, base + d->w + 2 * ox, base + d->w + 2 * ox + 1 };
			float best = v[0];
			int32_t arg = at[0];
			for (int k = 1; k < 4; k++) {
				int take = v[k] > best || isnan(v[k]);
				best = take ? v[k] : best;
				arg = take ? at[k] : arg;
			}
			yr[ox] = best;
			ir[ox] = arg;
		}
	}
}

/* 2x2 stride-2 average pooling without padding (the ResNet discriminators'
 * downsampling): the general loop's sum order, without its bounds tests. */
static int avgpool2(const gf_pooling_desc *d)
{
	return !d->max && d->kh == 2 && d->kw == 2 && d->sh == 2 && d->sw == 2 && d->ph == 0 && d->pw == 0;
}

GF_CLONES static void avgpool2_plane(float *restrict y, const float *restrict x, const gf_pooling_desc *d)
{
	for (int oy = 0; oy < d->hout; oy++) {
		const float *r0 = x + (size_t)(2 * oy) * d->w, *r1 = r0 + d->w;
		float *yr = y + (size_t)oy * d->wout;
		for (int ox = 0; ox < d->wout; ox++)
			yr[ox] = (r0[2 * ox] + r0[2 * ox + 1] + r1[2 * ox] + r1[2 * ox + 1]) / 4.0f;
	}
}

GF_CLONES static void avgpool2_bwd_plane(float *restrict dx, const float *restrict dy, const gf_pooling_desc *d)
{
	if ((d->h | d->w) & 1)   /* an odd last row or column gets nothing */
		memset(dx, 0, (size_t)d->h * d->w * sizeof(float));
	for (int oy = 0; oy < d->hout; oy++) {
		float *r0 = dx + (size_t)(2 * oy) * d->w, *r1 = r0 + d->w;
		const float *g = dy + (size_t)oy * d->wout;
		for (int ox = 0; ox < d->wout; ox++) {
			float v = g[ox] * 0.25f;
			r0[2 * ox] = r0[2 * ox + 1] = r1[2 * ox] = r1[2 * ox + 1] = v;
		}
	}
}

/* One output of the general window: max with the first maximum in window
 * order (PyTorch's rule: a NaN wins and propagates), or the mean over the
 * window (count_include_pad) or over its positions inside the input. */
static inline void pool_pixel(float *y, int32_t *idx, const float *x, const gf_pooling_desc *d, int oy, int ox)
{
	float best = -INFINITY, sum = 0;
	int32_t arg = -1;
	int cnt = 0;
	for (int ky = 0; ky < d->kh; ky++) {
		int iy = oy * d->sh - d->ph + ky;
		if (iy < 0 || iy >= d->h)
			continue;
		for (int kx = 0; kx < d->kw; kx++) {
			int ix = ox * d->sw - d->pw + kx;
			if (ix < 0 || ix >= d->w)
				continue;
			float v = x[iy * d->w + ix];
			sum += v;
			cnt++;
			if (arg < 0 || v > best || isnan(v)) {
				best = v;
				arg = iy * d->w + ix;
			}
		}
	}
	if (d->max) {
		y[oy * d->wout + ox] = best;
		idx[oy * d->wout + ox] = arg;
	} else {
		y[oy * d->wout + ox] = sum / (float)(d->exclude_pad ? cnt : d->kh * d->kw);
	}
}

/* One plane: pool_pixel at the borders; where the whole window lies inside
 * the input (most outputs of Inception's 3x3 poolings) the same sums and
 * comparisons in the same order, one tap at a time across the row. */
GF_CLONES static void pool_plane(float *restrict y, int32_t *restrict idx, const float *restrict x,
                                 const gf_pooling_desc *d)
{
	int lo = (d->pw + d->sw - 1) / d->sw;   /* first ox whose window starts inside */
	int hi = d->w + d->pw - d->kw >= 0 ? (d->w + d->pw - d->kw) / d->sw + 1 : 0;   /* past the last ending inside */
	hi = hi < d->wout ? hi : d->wout;
	lo = lo < hi ? lo : hi;
	for (int oy = 0; oy < d->hout; oy++) {
		int iy0 = oy * d->sh - d->ph;
		if (iy0 < 0 || iy0 + d->kh > d->h || hi <= lo) {
			for (int ox = 0; ox < d->wout; ox++)
				pool_pixel(y, idx, x, d, oy, ox);
			continue;
		}
		for (int ox = 0; ox < lo; ox++)
			pool_pixel(y, idx, x, d, oy, ox);
		for (int ox = hi; ox < d->wout; ox++)
			pool_pixel(y, idx, x, d, oy, ox);
		float *yr = y + (size_t)oy * d->wout;
		int sw = d->sw;
		if (!d->max) {
			for (int ox = lo; ox < hi; ox++)
				yr[ox] = 0.0f;
			for (int ky = 0; ky < d->kh; ky++)
				for (int kx = 0; kx < d->kw; kx++) {
					const float *src = x + (size_t)(iy0 + ky) * d->w - d->pw + kx;
					for (int ox = lo; ox < hi; ox++)
						yr[ox] += src[ox * sw];
				}
			float div = (float)(d->kh * d->kw);
			for (int ox = lo; ox < hi; ox++)
				yr[ox] /= div;
			continue;
		}
		int32_t *ir = idx + (size_t)oy * d->wout;
		for (int ky = 0; ky < d->kh; ky++)
			for (int kx = 0; kx < d->kw; kx++) {
				int32_t off = (iy0 + ky) * d->w - d->pw + kx;
				const float *src = x + off;
				if (ky == 0 && kx == 0) {
					for (int ox = lo; ox < hi; ox++) {
						yr[ox] = src[ox * sw];
						ir[ox] = off + ox * sw;
					}
					continue;
				}
				for (int ox = lo; ox < hi; ox++) {
					float v = src[ox * sw];
					int take = v > yr[ox] || isnan(v);
					yr[ox] = take ? v : yr[ox];
					ir[ox] = take ? off + ox * sw : ir[ox];
				}
			}
	}
}

static void pooling_fwd_part(void *p, size_t b, size_t e)
{
	struct pooling_args *a = p;
	const gf_pooling_desc *d = a->d;
	if (avgpool2(d)) {
		for (size_t pl = b; pl < e; pl++)
			avgpool2_plane(a->y + pl * (size_t)d->hout * d->wout, a->x + pl * (size_t)d->h * d->w, d);
		return;
	}
	if (d->max && d->kh == 2 && d->kw == 2 && d->sh == 2 && d->sw == 2 && d->ph == 0 && d->pw == 0) {
		for (size_t pl = b; pl < e; pl++)
			maxpool2_plane(a->y + pl * (size_t)d->hout * d->wout, a->idx + pl * (size_t)d->hout * d->wout,
			               a->x + pl * (size_t)d->h * d->w, d);
		return;
	}
	for (size_t pl = b; pl < e; pl++) {
		size_t po = pl * (size_t)d->hout * d->wout;
		pool_plane(a->y + po, a->idx ? a->idx + po : NULL, a->x + pl * (size_t)d->h * d->w, d);
	}
}

int gf_cpu_pooling_forward(gf_backend *be, float *y, int32_t *idx, const float *x, const gf_pooling_desc *d)
{
	if (d->max && !idx)
		return gf_seterr(GF_EPARAM, "max pooling needs an index buffer");
	struct pooling_args a = { y, idx, x, NULL, d };
	gf_team_for(gf_cpu_of(be)->team, (size_t)d->n * d->c, 1, pooling_fwd_part, &a);
	return 0;
}

/* Window positions of output (oy, ox) inside the input (count_include_pad = False). */
static int pool_count(const gf_pooling_desc *d, int oy, int ox)
{
	int y0 = oy * d->sh - d->ph, x0 = ox * d->sw - d->pw;
	int y1 = y0 + d->kh < d->h ? y0 + d->kh : d->h, x1 = x0 + d->kw < d->w ? x0 + d->kw : d->w;
	y0 = y0 < 0 ? 0 : y0;
	x0 = x0 < 0 ? 0 : x0;
	return (y1 - y0) * (x1 - x0);
}

static void pooling_bwd_part(void *p, size_t b, size_t e)
{
	struct pooling_args *a = p;
	const gf_pooling_desc *d = a->d;
	if (avgpool2(d)) {
		for (size_t pl = b; pl < e; pl++)
			avgpool2_bwd_plane(a->y + pl * (size_t)d->h * d->w, a->x + pl * (size_t)d->hout * d->wout, d);
		return;
	}
	for (size_t pl = b; pl < e; pl++) {
		float *dx = a->y + pl * (size_t)d->h * d->w;
		const float *dy = a->x + pl * (size_t)d->hout * d->wout;
		memset(dx, 0, (size_t)d->h * d->w * sizeof(float));
		if (d->max) {
			const int32_t *idx = a->cidx + pl * (size_t)d->hout * d->wout;
			for (int o = 0; o < d->hout * d->wout; o++)
				if (idx[o] >= 0)
					dx[idx[o]] += dy[o];
			continue;
		}
		float inv = 1.0f / (float)(d->kh * d->kw);
		for (int oy = 0; oy < d->hout; oy++) {
			for (int ox = 0; ox < d->wout; ox++) {
				float g = dy[oy * d->wout + ox] * (d->exclude_pad ? 1.0f / (float)pool_count(d, oy, ox) : inv);
				for (int ky = 0; ky < d->kh; ky++) {
					int iy = oy * d->sh - d->ph + ky;
					if (iy < 0 || iy >= d->h)
						continue;
					for (int kx = 0; kx < d->kw; kx++) {
						int ix = ox * d->sw - d->pw + kx;
						if (ix >= 0 && ix < d->w)
							dx[iy * d->w + ix] += g;
					}
				}
			}
		}
	}
}

int gf_cpu_pooling_backward(gf_backend *be, float *dx, const float *dy, const int32_t *idx,
                         const gf_pooling_desc *d)
{
	struct pooling_args a = { dx, NULL, dy, idx, d };
	gf_team_for(gf_cpu_of(be)->team, (size_t)d->n * d->c, 1, pooling_bwd_part, &a);
	return 0;
}

/* ---- softmax ---- */

struct softmax_args {
	float *out;
	const float *in, *y;
	int cols;
};

static void softmax_fwd_part(void *p, size_t b, size_t e)
{
	struct softmax_args *a = p;
	for (size_t r = b; r < e; r++) {
		const float *x = a->in + r * (size_t)a->cols;
		float *y = a->out + r * (size_t)a->cols;
		float m = -INFINITY;
		for (int j = 0; j < a->cols; j++)
			m = x[j] > m ? x[j] : m;
		double s = 0;
		for (int j = 0; j < a->cols; j++) {
			y[j] = expf(x[j] - m);
			s += y[j];
		}
		float inv = (float)(1.0 / s);
		for (int j = 0; j < a->cols; j++)
			y[j] *= inv;
	}
}

int gf_cpu_softmax_forward(gf_backend *be, float *y, const float *x, int rows, int cols)
{
	struct softmax_args a = { y, x, NULL, cols };
	gf_team_for(gf_cpu_of(be)->team, (size_t)rows, GRAIN / ((size_t)cols * 8) + 1, softmax_fwd_part, &a);
	return 0;
}

static void softmax_bwd_part(void *p, size_t b, size_t e)
{
	struct softmax_args *a = p;
	for (size_t r = b; r < e; r++) {
		const float *dy = a->in + r * (size_t)a->cols;
		const float *y = a->y + r * (size_t)a->cols;
		float *dx = a->out + r * (size_t)a->cols;
		double s = 0;
		for (int j = 0; j < a->cols; j++)
			s += (double)dy[j] * y[j];
		for (int j = 0; j < a->cols; j++)
			dx[j] = y[j] * (dy[j] - (float)s);
	}
}

int gf_cpu_softmax_backward(gf_backend *be, float *dx, const float *dy, const float *y, int rows, int cols)
{
	struct softmax_args a = { dx, dy, y, cols };
	gf_team_for(gf_cpu_of(be)->team, (size_t)rows, GRAIN / ((size_t)cols * 4) + 1, softmax_bwd_part, &a);
	return 0;
}

/* ---- embedding ---- */

int gf_cpu_embedding_forward(gf_backend *be, float *y, const float *table, const int32_t *idx,
                             int n, int dim, int num)
{
	(void)be;
	for (int i = 0; i < n; i++) {
		if (idx[i] < 0 || idx[i] >= num)
			return gf_seterr(GF_EPARAM, "embedding: label %d of sample %d not in [0, %d)", idx[i], i, num);
		memcpy(y + (size_t)i * dim, table + (size_t)idx[i] * dim, (size_t)dim * sizeof(float));
	}
	return 0;
}

struct emb_args {
	float *dt;
	const float *dy;
	const int32_t *idx;
	int n, dim;
};

static void emb_bwd_part(void *p, size_t b, size_t e)
{
	struct emb_args *a = p;
	for (int i = 0; i < a->n; i++) {   /* index order: deterministic */
		float *d = a->dt + (size_t)a->idx[i] * a->dim;
		const float *g = a->dy + (size_t)i * a->dim;
		for (size_t j = b; j < e; j++)
			d[j] += g[j];
	}
}

int gf_cpu_embedding_backward(gf_backend *be, float *dtable, const float *dy, const int32_t *idx,
                              int n, int dim, int num, int accumulate)
{
	for (int i = 0; i < n; i++)
		if (idx[i] < 0 || idx[i] >= num)
			return gf_seterr(GF_EPARAM, "embedding: label %d of sample %d not in [0, %d)", idx[i], i, num);
	if (!accumulate)
		memset(dtable, 0, (size_t)num * dim * sizeof(float));
	struct emb_args a = { dtable, dy, idx, n, dim };
	gf_team_for(gf_cpu_of(be)->team, (size_t)dim, 64, emb_bwd_part, &a);
	return 0;
}

/* ---- losses ---- */

static float clamp_log(float v)
{
	float l = logf(v);
	return l < -100.0f ? -100.0f : l;
}

int gf_cpu_loss(gf_backend *be, float *loss_host, float *dx, const float *x, const float *target,
                const int32_t *labels, const gf_loss_desc *d)
{
	(void)be;
	size_t n = (size_t)d->n * (size_t)d->k;
	double sum = 0;
	float s = d->scale;

	if (d->kind == GF_LOSS_CE) {
		if (!labels)
			return gf_seterr(GF_EPARAM, "cross-entropy loss needs labels");
		float inv = s / (float)d->n;
		for (int i = 0; i < d->n; i++) {
			const float *r = x + (size_t)i * d->k;
			int y = labels[i];
			if (y < 0 || y >= d->k)
				return gf_seterr(GF_EPARAM, "cross-entropy: label %d of sample %d not in [0, %d)", y, i, d->k);
			float m = -INFINITY;
			for (int j = 0; j < d->k; j++)
				m = r[j] > m ? r[j] : m;
			double z = 0;
			for (int j = 0; j < d->k; j++)
				z += exp((double)r[j] - m);
			double lse = m + log(z);
			sum += lse - r[y];
			if (dx) {
				for (int j = 0; j < d->k; j++) {
					float sm = (float)exp((double)r[j] - lse);
					dx[(size_t)i * d->k + j] = (sm - (j == y ? 1.0f : 0.0f)) * inv;
				}
			}
		}
		if (loss_host)
			*loss_host = (float)(sum / d->n) * s;
		return 0;
	}

	if (d->kind == GF_LOSS_RELATIVISTIC) {
		/* pairs (a, b) = (x_i, x_{i + n/2}): d = t (a - b), softplus(-d),
		 * d/da = -t sigmoid(-d), d/db = t sigmoid(-d) */
		size_t h = n / 2;
		float inv = s / (float)h;
		for (size_t i = 0; i < h; i++) {
			float z = -d->target * (x[i] - x[i + h]);
			sum += (z > 0 ? z : 0.0) + log1p(exp(-fabs((double)z)));
			if (dx) {
				float sg = 1.0f / (1.0f + expf(-z)); /* sigmoid(-d) */
				dx[i] = -d->target * sg * inv;
				dx[i + h] = d->target * sg * inv;
			}
		}
		if (loss_host)
			*loss_host = (float)(sum / (double)h) * s;
		return 0;
	}

	float inv = s / (float)n;
	for (size_t i = 0; i < n; i++) {
		float v = x[i];
		float t = target ? target[i] : d->target;
		double l = 0;
		float g = 0;
		switch (d->kind) {
		case GF_LOSS_NONSAT:
			t = 1.0f;
			/* fall through */
		case GF_LOSS_BCE:
			if (isnan(v))
				return gf_seterr(GF_ENONFINITE, "bce loss: input of element %zu is NaN", i);
			if (!(v >= 0.0f && v <= 1.0f))
				return gf_seterr(GF_EPARAM, "bce loss: input %g of element %zu is not a probability",
				                 (double)v, i);
			l = -((double)t * clamp_log(v) + (1.0 - t) * clamp_log(1.0f - v));
			{
				float den = (1.0f - v) * v;
				g = (v - t) / (den > 1e-12f ? den : 1e-12f);
			}
			break;
		case GF_LOSS_NONSAT_LOGITS:
			t = 1.0f;
			/* fall through */
		case GF_LOSS_BCE_LOGITS: {
			float mx = v < 0.0f ? -v : 0.0f;   /* max(-x, 0) */
			l = (1.0 - t) * v + mx + log(exp(-mx) + exp(-v - mx));
			g = 1.0f / (1.0f + expf(-v)) - t;
			break;
		}
		case GF_LOSS_HINGE_D: {
			float m = 1.0f - t * v;
			l = m > 0.0f ? m : 0.0f;
			g = m > 0.0f ? -t : 0.0f;
			break;
		}
		case GF_LOSS_HINGE_G:
			l = -v;
			g = -1.0f;
			break;
		case GF_LOSS_WGAN:
			l = -t * v;
			g = -t;
			break;
		case GF_LOSS_LS:
			l = (double)(v - t) * (v - t);
			g = 2.0f * (v - t);
			break;
		case GF_LOSS_L1:
			l = fabsf(v - t);
			g = v > t ? 1.0f : v < t ? -1.0f : 0.0f;
			break;
		default:
			return gf_seterr(GF_EPARAM, "unknown loss kind %d", (int)d->kind);
		}
		sum += l;
		if (dx)
			dx[i] = g * inv;
	}
	if (loss_host)
		*loss_host = (float)(sum / (double)n) * s;
	return 0;
}

/* ---- optimisers ---- */

struct optim_args {
	float *p;
	const float *g;
	float *state;
	size_t n;
	const gf_optim_args *a;
};

GF_CLONES static void adam_part(void *p, size_t b, size_t e)
{
	struct optim_args *o = p;
	const gf_optim_args *a = o->a;
	float *restrict w = o->p;
	const float *restrict g = o->g;
	float *restrict m = o->state, *restrict v = o->state + o->n;
	float *restrict gp = a->kind == GF_OPT_OADAM ? o->state + 2 * o->n : NULL;
	float b1 = a->beta1, b2 = a->beta2, c1 = 1.0f - b1, c2 = 1.0f - b2;
	float step = a->step_size, bc2s = a->bc2_sqrt, eps = a->eps, wd = a->weight_decay;
	float decay = a->decoupled ? 1.0f - a->lr * wd : 1.0f;
	for (size_t i = b; i < e; i++) {
		float gi = g[i];
		if (gp) {
			float cur = gi;
			gi = 2.0f * cur - gp[i];
			gp[i] = cur;
		}
		if (wd != 0.0f) {
			if (a->decoupled)
				w[i] *= decay;
			else
				gi += wd * w[i];
		}
		m[i] = m[i] * b1 + c1 * gi;
		v[i] = v[i] * b2 + c2 * gi * gi;
		float den = sqrtf(v[i]) / bc2s + eps;
		w[i] -= step * (m[i] / den);
	}
}

static void sgd_part(void *p, size_t b, size_t e)
{
	struct optim_args *o = p;
	const gf_optim_args *a = o->a;
	float *w = o->p, *buf = o->state;
	const float *g = o->g;
	for (size_t i = b; i < e; i++) {
		float d = g[i];
		if (a->weight_decay != 0.0f)
			d += a->weight_decay * w[i];
		if (a->momentum != 0.0f) {
			buf[i] = a->step <= 1 ? d : a->momentum * buf[i] + (1.0f - a->dampening) * d;
			d = a->nesterov ? d + a->momentum * buf[i] : buf[i];
		}
		w[i] -= a->lr * d;
	}
}

int gf_cpu_optim_step(gf_backend *be, float *p, const float *g, float *state, size_t n,
                      const gf_optim_args *a)
{
	struct optim_args o = { p, g, state, n, a };
	switch (a->kind) {
	case GF_OPT_ADAM:
	case GF_OPT_OADAM:
		gf_team_for(gf_cpu_of(be)->team, n, GRAIN, adam_part, &o);
		return 0;
	case GF_OPT_SGD:
		gf_team_for(gf_cpu_of(be)->team, n, GRAIN, sgd_part, &o);
		return 0;
	}
	return gf_seterr(GF_EPARAM, "unknown optimiser kind %d", (int)a->kind);
}

/* ---- reductions ---- */

#define SUMSQ_BLOCK 8192

struct sumsq_args {
	const float *x;
	size_t n;
	double *part;
};

GF_CLONES static void sumsq_part(void *p, size_t b, size_t e)
{
	struct sumsq_args *a = p;
	for (size_t blk = b; blk < e; blk++) {
		size_t i0 = blk * SUMSQ_BLOCK, i1 = i0 + SUMSQ_BLOCK < a->n ? i0 + SUMSQ_BLOCK : a->n;
		double acc[8] = { 0 };
		size_t i = i0;
		for (; i + 8 <= i1; i += 8)
			for (int l = 0; l < 8; l++)
				acc[l] += (double)a->x[i + l] * a->x[i + l];
		for (; i < i1; i++)
			acc[0] += (double)a->x[i] * a->x[i];
		double s = 0;
		for (int l = 0; l < 8; l++)
			s += acc[l];
		a->part[blk] = s;
	}
}

int gf_cpu_sumsq(gf_backend *be, double *out, const float *x, size_t n)
{
	gf_cpu *c = gf_cpu_of(be);
	size_t blocks = (n + SUMSQ_BLOCK - 1) / SUMSQ_BLOCK;
	float *scratch = gf_cpu_scratch(c, blocks * 2 + 2);
	if (!scratch)
		return -ENOMEM;
	struct sumsq_args a = { x, n, (double *)(void *)scratch };
	gf_team_for(c->team, blocks, 4, sumsq_part, &a);
	double s = 0;
	for (size_t i = 0; i < blocks; i++)
		s += a.part[i];
	*out = s;
	return 0;
}

/* ---- results that stay in "device" memory (one code path with the GPU) ---- */

int gf_cpu_loss_dev(gf_backend *be, float *loss_dev, float *dx, const float *x, const float *target,
                    const int32_t *labels, const gf_loss_desc *d)
{
	float l = 0.0f;
	int rc = gf_cpu_loss(be, &l, dx, x, target, labels, d);
	if (!rc && loss_dev)
		*loss_dev = l;
	return rc;
}

int gf_cpu_reduce_dev(gf_backend *be, double *out, const float *x, size_t n, int squares)
{
	if (squares)
		return gf_cpu_sumsq(be, out, x, n);
	/* in index order: the mean a stage used to take of a host copy */
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += x[i];
	*out = s;
	return 0;
}

/* ---- collectives (a data-parallel exchange inside a step) ---- */

int gf_cpu_collective(gf_backend *be, const gf_comm *comm, gf_coll_op op, void *x, size_t n)
{
	(void)be;
	if (op == GF_COLL_WAIT)
		return 0; /* each collective is done when run returns */
	if (!comm || !comm->run)
		return gf_seterr(GF_EPARAM, "cpu backend: a collective without a communicator");
	return comm->run(comm, op, x, n, GF_CPU, NULL);
}

/* ---- random fills ---- */

struct rng_args {
	float *out;
	float a, b;
	gf_rng rng;
	int normal;
};

static void rng_part(void *p, size_t b, size_t e)
{
	struct rng_args *a = p;
	/* parts start on block boundaries except the first, which is harmless:
	 * an element's value never depends on where its part starts */
	if (a->normal)
		gf_rng_fill_normal(a->out, b, e, a->a, a->b, a->rng.seed, a->rng.stream, a->rng.offset);
	else
		gf_rng_fill_uniform(a->out, b, e, a->a, a->b, a->rng.seed, a->rng.stream, a->rng.offset);
}

int gf_cpu_rng_uniform(gf_backend *be, float *out, size_t n, float lo, float hi, const gf_rng *rng)
{
	struct rng_args a = { out, lo, hi, *rng, 0 };
	gf_team_for(gf_cpu_of(be)->team, n, GRAIN / 4, rng_part, &a);
	return 0;
}

int gf_cpu_rng_normal(gf_backend *be, float *out, size_t n, float mean, float std, const gf_rng *rng)
{
	struct rng_args a = { out, mean, std, *rng, 1 };
	gf_team_for(gf_cpu_of(be)->team, n, GRAIN / 16, rng_part, &a);
	return 0;
}

/* ---- rows (the projection head) ---- */

struct row_args {
	float *out;
	const float *a, *b, *s;
	int k, acc;
};

GF_CLONES static void row_dot_part(void *p, size_t b, size_t e)
{
	struct row_args *r = p;
	for (size_t i = b; i < e; i++) {
		const float *x = r->a + i * (size_t)r->k, *y = r->b + i * (size_t)r->k;
		float acc[16] = { 0 };
		int j = 0;
		for (; j + 16 <= r->k; j += 16)
			for (int l = 0; l < 16; l++)
				acc[l] += x[j + l] * y[j + l];
		double s = 0;
		for (int l = 0; l < 16; l++)
			s += acc[l];
		for (; j < r->k; j++)
			s += (double)x[j] * y[j];
		r->out[i] = r->acc ? r->out[i] + (float)s : (float)s;
	}
}

int gf_cpu_row_dot(gf_backend *be, float *out, const float *a, const float *b, int n, int k, int accumulate)
{
	if (n < 0 || k < 0)
		return gf_seterr(GF_EPARAM, "row_dot: negative size (%d, %d)", n, k);
	struct row_args r = { .out = out, .a = a, .b = b, .k = k, .acc = accumulate };
	gf_team_for(gf_cpu_of(be)->team, (size_t)n, GRAIN / ((size_t)k * 2 + 1) + 1, row_dot_part, &r);
	return 0;
}

GF_CLONES static void row_scale_part(void *p, size_t b, size_t e)
{
	struct row_args *r = p;
	for (size_t i = b; i < e; i++) {
		float *y = r->out + i * (size_t)r->k;
		const float *x = r->a + i * (size_t)r->k;
		float s = r->s[i];
		if (r->acc)
			for (int j = 0; j < r->k; j++)
				y[j] += s * x[j];
		else
			for (int j = 0; j < r->k; j++)
				y[j] = s * x[j];
	}
}

int gf_cpu_row_scale(gf_backend *be, float *y, const float *s, const float *x, int n, int k, int accumulate)
{
	if (n < 0 || k < 0)
		return gf_seterr(GF_EPARAM, "row_scale: negative size (%d, %d)", n, k);
	struct row_args r = { .out = y, .a = x, .s = s, .k = k, .acc = accumulate };
	gf_team_for(gf_cpu_of(be)->team, (size_t)n, GRAIN / ((size_t)k * 2 + 1) + 1, row_scale_part, &r);
	return 0;
}
