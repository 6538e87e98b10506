/* The CPU backend's double-backward ops (<ganflow/backend.h> "double
 * backward"): the second derivative of the pointwise activations, the
 * double backward of batch normalisation, max pooling's forward-mode
 * product, and the minibatch standard deviation layer (its forward,
 * backward and double backward). The CUDA versions are
 * core/nn/cuda/dbwd.cu.
 *
 * As the other kernels: work is split over independent outputs (elements,
 * channels, pooling planes, minibatch groups) and every reduction runs in
 * one thread in a fixed order, in double, so the results do not depend on
 * the thread count. */
#include <math.h>
#include <string.h>

#include <ganflow/err.h>

#include "cpu.h"

#define GRAIN (1u << 15)

/* ---- activations ---- */

struct act2_args {
	float *dx;
	const float *t, *dy, *y;
	gf_act act;
};

GF_CLONES static void act2_part(void *p, size_t b, size_t e)
{
	struct act2_args *a = p;
	float *dx = a->dx;
	const float *t = a->t, *dy = a->dy, *y = a->y;
	switch (a->act) {
	case GF_ACT_TANH: /* f' = 1 - y^2, f'' = -2 y f' */
		for (size_t i = b; i < e; i++)
			dx[i] = t[i] * dy[i] * (-2.0f * y[i] * (1.0f - y[i] * y[i]));
		break;
	case GF_ACT_SIGMOID: /* f' = y (1 - y), f'' = f' (1 - 2 y) */
		for (size_t i = b; i < e; i++)
			dx[i] = t[i] * dy[i] * (y[i] * (1.0f - y[i]) * (1.0f - 2.0f * y[i]));
		break;
	default: /* piecewise linear: no curvature */
		for (size_t i = b; i < e; i++)
			dx[i] = 0.0f;
		break;
	}
}

int gf_cpu_act_backward2(gf_backend *be, float *dx, const float *t, const float *dy, const float *y, size_t n,
                         gf_act act, float param)
{
	(void)param;
	struct act2_args a = { dx, t, dy, y, act };
	gf_team_for(gf_cpu_of(be)->team, n, GRAIN, act2_part, &a);
	return 0;
}

/* ---- batch normalisation ----
 * Per channel, over its N = n hw values, with xh = (x - mean) rstd, dz =
 * dy times the fused activation's derivative m (from y) and g = gamma:
 * the backward is dx = g rstd (dz - mean(dz) - xh mean(dz xh)), the
 * product of the symmetric Jacobian of xh with g dz. Hence, with sums St,
 * Sd of t and dz, Pt, Pd of t xh and dz xh, Std of t dz:
 *   J t (= the tangent of y) = m g rstd (t - St/N - xh Pt/N)
 *   dS/dgamma = rstd (Std - St Sd/N - Pt Pd/N)
 *   dS/dx     = g rstd^2 / N (xh (3 Pt Pd/N - Std + St Sd/N)
 *                             - Pd (t - St/N) - Pt (dz - Sd/N))
 * (S = <t, dx>; the last from d rstd/dx = -rstd^2 xh / N and d xh_i/dx_j =
 * rstd (delta_ij - 1/N - xh_i xh_j / N)). */

struct bn2_args {
	const gf_bn_desc *d;
	float *ty, *dx, *dgamma;
	const float *t, *dy, *y, *x, *gamma, *mean, *rstd;
	int acc;
};

static inline float bn2_mask(const gf_bn_desc *d, float y)
{
	return d->act == GF_ACT_NONE || y > 0.0f ? 1.0f : d->act == GF_ACT_RELU ? 0.0f : d->slope;
}

GF_CLONES static void bn2_part(void *p, size_t b, size_t e)
{
	struct bn2_args *a = p;
	const gf_bn_desc *d = a->d;
	double cnt = (double)d->n * d->hw;
	for (size_t ch = b; ch < e; ch++) {
		float m = a->mean[ch];
		double rs = a->rstd[ch], g = a->gamma ? a->gamma[ch] : 1.0;
		double st = 0, sd = 0, stx = 0, sdx = 0, std = 0;
		for (int n = 0; n < d->n; n++) {
			size_t off = ((size_t)n * d->c + ch) * d->hw;
			const float *t = a->t + off, *dy = a->dy + off, *y = a->y ? a->y + off : NULL, *x = a->x + off;
			float f[5][16] = { { 0 } };
			int i = 0;
			for (; i + 16 <= d->hw; i += 16)
				for (int l = 0; l < 16; l++) {
					float dz = dy[i + l] * (y ? bn2_mask(d, y[i + l]) : 1.0f), xc = x[i + l] - m;
					f[0][l] += t[i + l];
					f[1][l] += dz;
					f[2][l] += t[i + l] * xc;
					f[3][l] += dz * xc;
					f[4][l] += t[i + l] * dz;
				}
			for (int l = 0; l < 16; l++) {
				st += f[0][l];
				sd += f[1][l];
				stx += f[2][l];
				sdx += f[3][l];
				std += f[4][l];
			}
			for (; i < d->hw; i++) {
				double dz = dy[i] * (y ? bn2_mask(d, y[i]) : 1.0f), xc = x[i] - m;
				st += t[i];
				sd += dz;
				stx += t[i] * xc;
				sdx += dz * xc;
				std += t[i] * dz;
			}
		}
		double pt = stx * rs, pd = sdx * rs;
		if (a->dgamma) {
			float v = (float)(rs * (std - st * sd / cnt - pt * pd / cnt));
			a->dgamma[ch] = a->acc ? a->dgamma[ch] + v : v;
		}
		/* ty = m (b1 t + b2 (x - mean) + b3); dx = a1 (x - mean) + a2 t + a3 dz + a4 */
		float b1 = (float)(g * rs), b2 = (float)(-g * rs * rs * pt / cnt), b3 = (float)(-g * rs * st / cnt);
		double k = g * rs * rs / cnt;
		float a1 = (float)(k * rs * (3.0 * pt * pd / cnt - std + st * sd / cnt)), a2 = (float)(-k * pd),
		      a3 = (float)(-k * pt), a4 = (float)(k * (pd * st + pt * sd) / cnt);
		for (int n = 0; n < d->n; n++) {
			size_t off = ((size_t)n * d->c + ch) * d->hw;
			const float *t = a->t + off, *dy = a->dy + off, *y = a->y ? a->y + off : NULL, *x = a->x + off;
			if (a->ty) {
				float *ty = a->ty + off;
				for (int i = 0; i < d->hw; i++)
					ty[i] = (y ? bn2_mask(d, y[i]) : 1.0f) * (b1 * t[i] + b2 * (x[i] - m) + b3);
			}
			if (a->dx) {
				float *dx = a->dx + off;
				for (int i = 0; i < d->hw; i++) {
					float dz = dy[i] * (y ? bn2_mask(d, y[i]) : 1.0f);
					dx[i] = a1 * (x[i] - m) + a2 * t[i] + a3 * dz + a4;
				}
			}
		}
	}
}

int gf_cpu_bn_backward2(gf_backend *be, float *ty, float *dx, float *dgamma, const float *t, const float *dy,
                        const float *y, const float *x, const float *gamma, const float *mean, const float *rstd,
                        const gf_bn_desc *d, int accumulate)
{
	if (d->dtype != GF_F32 || d->layout != GF_NCHW)
		return gf_seterr(GF_EUNSUPPORTED, "cpu batchnorm double backward: only f32 NCHW");
	if (d->act != GF_ACT_NONE && d->act != GF_ACT_RELU && d->act != GF_ACT_LRELU)
		return gf_seterr(GF_EUNSUPPORTED, "cpu batchnorm double backward: fused activation %d", (int)d->act);
	if (d->act != GF_ACT_NONE && !y)
		return gf_seterr(GF_EPARAM, "batchnorm double backward: the fused activation needs the output");
	struct bn2_args a = { .d = d, .ty = ty, .dx = dx, .dgamma = dgamma, .t = t, .dy = dy,
	                      .y = d->act == GF_ACT_NONE ? NULL : y, .x = x, .gamma = gamma, .mean = mean,
	                      .rstd = rstd, .acc = accumulate };
	size_t per = (size_t)d->n * d->hw;
	gf_team_for(gf_cpu_of(be)->team, (size_t)d->c, per >= 4096 ? 1 : 4096 / per + 1, bn2_part, &a);
	return 0;
}

/* ---- max pooling's forward-mode product ---- */

struct gather_args {
	float *y;
	const float *x;
	const int32_t *idx;
	const gf_pooling_desc *d;
};

static void gather_part(void *p, size_t b, size_t e)
{
	struct gather_args *a = p;
	size_t in = (size_t)a->d->h * a->d->w, out = (size_t)a->d->hout * a->d->wout;
	for (size_t pl = b; pl < e; pl++) {
		const float *x = a->x + pl * in;
		const int32_t *idx = a->idx + pl * out;
		float *y = a->y + pl * out;
		for (size_t o = 0; o < out; o++)
			y[o] = idx[o] >= 0 ? x[idx[o]] : 0.0f;
	}
}

int gf_cpu_pooling_gather(gf_backend *be, float *y, const float *x, const int32_t *idx, const gf_pooling_desc *d)
{
	if (!idx)
		return gf_seterr(GF_EPARAM, "max pooling gather: no index buffer");
	struct gather_args a = { y, x, idx, d };
	gf_team_for(gf_cpu_of(be)->team, (size_t)d->n * d->c, 16, gather_part, &a);
	return 0;
}

/* ---- minibatch standard deviation ----
 * One task per (group, statistics channel): groups are m = n / G, sample
 * i = g m + k belongs to group k; the slice is channels [f cs, (f + 1) cs)
 * with cs = c / F. At each position e of the slice (cs h w of them) the G
 * members' values x_g have the mean mu, d_g = x_g - mu and s = sqrt(mean
 * d_g^2 + eps); the statistic is the mean of s over the slice.
 *   backward:  dx_g = dy_g + ds d_g / (G s L), ds the sum of dy over the
 *              group's statistics planes, L = cs h w
 *   J t:       the statistic's tangent is mean over e of sum_g d_g t_g / (G s)
 *   dS/dx_j:   K ((t_j - mean t) / s - (sum_g t_g d_g) d_j / (G s^3)), K = ds / (G L) */

struct mbstd_args {
	const gf_mbstd_desc *d;
	float *y, *dx;
	const float *x, *dy, *t;
	int op;   /* 0 forward, 1 backward, 2 double backward */
};

static int mbstd_check(const gf_mbstd_desc *d)
{
	if (d->n < 1 || d->c < 1 || d->h < 1 || d->w < 1 || d->group < 1 || d->f < 1 || d->n % d->group ||
	    d->c % d->f)
		return gf_seterr(GF_EPARAM, "minibatch stddev: batch %d is not a multiple of the group %d, or channels %d "
		                            "of the statistics channels %d",
		                 d->n, d->group, d->c, d->f);
	return 0;
}

/* The sum of dy over group k's statistics plane f. */
static double mbstd_ds(const gf_mbstd_desc *d, const float *dy, int k, int f)
{
	int G = d->group, m = d->n / G;
	size_t hw = (size_t)d->h * d->w, co = (size_t)(d->c + d->f) * hw;
	double ds = 0;
	for (int g = 0; g < G; g++) {
		const float *p = dy + (size_t)(g * m + k) * co + (size_t)(d->c + f) * hw;
		for (size_t q = 0; q < hw; q++)
			ds += p[q];
	}
	return ds;
}

static void mbstd_part(void *p, size_t b, size_t e)
{
	struct mbstd_args *a = p;
	const gf_mbstd_desc *d = a->d;
	int G = d->group, m = d->n / G, cs = d->c / d->f;
	size_t hw = (size_t)d->h * d->w, ci = (size_t)d->c * hw, co = (size_t)(d->c + d->f) * hw, L = (size_t)cs * hw;
	double xs[64], ts[64];
	for (size_t task = b; task < e; task++) {
		int k = (int)(task / (size_t)d->f), f = (int)(task % (size_t)d->f);
		size_t base = (size_t)f * cs * hw;   /* the slice's first value in a sample */
		double ds = a->op ? mbstd_ds(d, a->dy, k, f) : 0, K = ds / ((double)G * (double)L), stat = 0;
		for (size_t q = 0; q < L; q++) {
			double mu = 0, var = 0, tm = 0, at = 0;
			for (int g = 0; g < G; g++) {
				xs[g] = a->x[(size_t)(g * m + k) * ci + base + q];
				mu += xs[g];
			}
			mu /= G;
			for (int g = 0; g < G; g++) {
				xs[g] -= mu;
				var += xs[g] * xs[g];
			}
			double s = sqrt(var / G + d->eps);
			if (a->op == 0) {
				stat += s;
			} else if (a->op == 1) {
				for (int g = 0; g < G; g++) {
					size_t at_i = (size_t)(g * m + k) * ci + base + q;
					size_t at_o = (size_t)(g * m + k) * co + base + q;
					a->dx[at_i] = (float)(a->dy[at_o] + K * xs[g] / s);
				}
			} else {
				for (int g = 0; g < G; g++) {
					ts[g] = a->t[(size_t)(g * m + k) * ci + base + q];
					tm += ts[g];
					at += ts[g] * xs[g];
				}
				tm /= G;
				stat += at / (G * s);
				for (int g = 0; a->dx && g < G; g++)
					a->dx[(size_t)(g * m + k) * ci + base + q] =
						(float)(K * ((ts[g] - tm) / s - at * xs[g] / (G * s * s * s)));
			}
		}
		if (a->op == 1 || !a->y)
			continue;
		/* y (or the tangent): the slice of x (or t) and the statistic's plane */
		float v = (float)(stat / (double)L);
		const float *src = a->op == 0 ? a->x : a->t;
		for (int g = 0; g < G; g++) {
			size_t i = (size_t)(g * m + k);
			memcpy(a->y + i * co + base, src + i * ci + base, L * sizeof(float));
			float *pl = a->y + i * co + (size_t)(d->c + f) * hw;
			for (size_t q = 0; q < hw; q++)
				pl[q] = v;
		}
	}
}

static int mbstd_run(gf_backend *be, struct mbstd_args *a)
{
	int rc = mbstd_check(a->d);
	if (rc)
		return rc;
	if (a->d->group > 64)
		return gf_seterr(GF_EUNSUPPORTED, "minibatch stddev: group %d > 64 on the CPU", a->d->group);
	size_t tasks = (size_t)(a->d->n / a->d->group) * (size_t)a->d->f;
	gf_team_for(gf_cpu_of(be)->team, tasks, 1, mbstd_part, a);
	return 0;
}

int gf_cpu_mbstd_forward(gf_backend *be, float *y, const float *x, const gf_mbstd_desc *d)
{
	struct mbstd_args a = { .d = d, .y = y, .x = x, .op = 0 };
	return mbstd_run(be, &a);
}

int gf_cpu_mbstd_backward(gf_backend *be, float *dx, const float *dy, const float *x, const gf_mbstd_desc *d)
{
	struct mbstd_args a = { .d = d, .dx = dx, .x = x, .dy = dy, .op = 1 };
	return mbstd_run(be, &a);
}

int gf_cpu_mbstd_backward2(gf_backend *be, float *ty, float *dx, const float *t, const float *dy, const float *x,
                           const gf_mbstd_desc *d)
{
	struct mbstd_args a = { .d = d, .y = ty, .dx = dx, .x = x, .dy = dy, .t = t, .op = 2 };
	return mbstd_run(be, &a);
}
