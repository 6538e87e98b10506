/* CPU batch normalisation (1d and 2d), with ReLU/LeakyReLU optionally
 * fused after the affine step: one pass for the statistics, one for the
 * variance, one that normalises and activates; backward one pass for the
 * two sums and one for dx. Work is split over channels, and each channel's
 * sums run in a fixed order, so results do not depend on the thread count. */
#include <math.h>

#include <ganflow/err.h>

#include "cpu.h"

struct bn_args {
	const gf_bn_desc *d;
	float *y, *mean, *rstd, *run_mean, *run_var;
	const float *x, *gamma, *beta;
	float *dx, *dgamma, *dbeta;
	const float *dy, *cy, *cmean, *crstd;
	int acc;
};

/* Sum of x[i] - m over a row: 16 float lanes, then double. */
static inline double row_sum_shift(const float *restrict x, int n, float m)
{
	float acc[16] = { 0 };
	int i = 0;
	for (; i + 16 <= n; i += 16)
		for (int l = 0; l < 16; l++)
			acc[l] += x[i + l] - m;
	double s = 0;
	for (int l = 0; l < 16; l++)
		s += acc[l];
	for (; i < n; i++)
		s += x[i] - m;
	return s;
}

static inline double row_sumsq_shift(const float *restrict x, int n, float m)
{
	float acc[16] = { 0 };
	int i = 0;
	for (; i + 16 <= n; i += 16)
		for (int l = 0; l < 16; l++)
			acc[l] += (x[i + l] - m) * (x[i + l] - m);
	double s = 0;
	for (int l = 0; l < 16; l++)
		s += acc[l];
	for (; i < n; i++)
		s += (double)(x[i] - m) * (x[i] - m);
	return s;
}

/* y = act((x - m) * k + beta) */
static inline void row_norm(float *restrict y, const float *restrict x, int n, float m, float k, float beta,
                               gf_act act, float slope)
{
	if (act == GF_ACT_NONE) {
		for (int i = 0; i < n; i++)
			y[i] = (x[i] - m) * k + beta;
	} else {
		float s = act == GF_ACT_RELU ? 0.0f : slope;
		for (int i = 0; i < n; i++) {
			float v = (x[i] - m) * k + beta;
			y[i] = v > 0.0f ? v : v * s;
		}
	}
}

GF_CLONES static void fwd_train_part(void *p, size_t b, size_t e)
{
	struct bn_args *a = p;
	const gf_bn_desc *d = a->d;
	double cnt = (double)d->n * d->hw;
	for (size_t ch = b; ch < e; ch++) {
		/* mean, then the variance around it (two passes: accurate) */
		double s = 0;
		for (int n = 0; n < d->n; n++)
			s += row_sum_shift(a->x + ((size_t)n * d->c + ch) * d->hw, d->hw, 0.0f);
		float mean = (float)(s / cnt);
		double ss = 0;
		for (int n = 0; n < d->n; n++)
			ss += row_sumsq_shift(a->x + ((size_t)n * d->c + ch) * d->hw, d->hw, mean);
		double var = ss / cnt;
		float rstd = (float)(1.0 / sqrt(var + d->eps));
		float g = a->gamma ? a->gamma[ch] : 1.0f, bt = a->beta ? a->beta[ch] : 0.0f;
		for (int n = 0; n < d->n; n++) {
			size_t off = ((size_t)n * d->c + ch) * d->hw;
			row_norm(a->y + off, a->x + off, d->hw, mean, g * rstd, bt, d->act, d->slope);
		}
		a->mean[ch] = mean;
		a->rstd[ch] = rstd;
		if (a->run_mean && a->run_var) {
			double unbiased = cnt > 1 ? ss / (cnt - 1) : var;
			a->run_mean[ch] = (1.0f - d->momentum) * a->run_mean[ch] + d->momentum * mean;
			a->run_var[ch] = (1.0f - d->momentum) * a->run_var[ch] + d->momentum * (float)unbiased;
		}
	}
}

static int check(const gf_bn_desc *d)
{
	if (d->dtype != GF_F32 || d->layout != GF_NCHW)
		return gf_seterr(GF_EUNSUPPORTED, "cpu batchnorm: only f32 NCHW");
	if (d->act != GF_ACT_NONE && d->act != GF_ACT_RELU && d->act != GF_ACT_LRELU)
		return gf_seterr(GF_EUNSUPPORTED, "cpu batchnorm: fused activation %d", (int)d->act);
	return 0;
}

static size_t grain(const gf_bn_desc *d)
{
	size_t per = (size_t)d->n * d->hw;
	return per >= 8192 ? 1 : 8192 / per + 1;
}

int gf_cpu_bn_forward_train(gf_backend *be, float *y, float *mean, float *rstd, float *run_mean,
                            float *run_var, const float *x, const float *gamma, const float *beta,
                            const gf_bn_desc *d)
{
	int rc = check(d);
	if (rc)
		return rc;
	if ((double)d->n * d->hw < 2 && run_var)
		return gf_seterr(GF_ESHAPE, "batchnorm: needs more than one value per channel in training, got %d",
		                 d->n * d->hw);
	struct bn_args a = { .d = d, .y = y, .mean = mean, .rstd = rstd, .run_mean = run_mean,
	                     .run_var = run_var, .x = x, .gamma = gamma, .beta = beta };
	gf_team_for(gf_cpu_of(be)->team, (size_t)d->c, grain(d), fwd_train_part, &a);
	return 0;
}

GF_CLONES static void fwd_eval_part(void *p, size_t b, size_t e)
{
	struct bn_args *a = p;
	const gf_bn_desc *d = a->d;
	for (size_t ch = b; ch < e; ch++) {
		float rstd = 1.0f / sqrtf(a->crstd[ch] + d->eps);   /* cmean, crstd: running mean, var */
		float g = a->gamma ? a->gamma[ch] : 1.0f, bt = a->beta ? a->beta[ch] : 0.0f;
		for (int n = 0; n < d->n; n++) {
			size_t off = ((size_t)n * d->c + ch) * d->hw;
			row_norm(a->y + off, a->x + off, d->hw, a->cmean[ch], g * rstd, bt, d->act, d->slope);
		}
	}
}

int gf_cpu_bn_forward_eval(gf_backend *be, float *y, const float *x, const float *gamma,
                           const float *beta, const float *run_mean, const float *run_var,
                           const gf_bn_desc *d)
{
	int rc = check(d);
	if (rc)
		return rc;
	struct bn_args a = { .d = d, .y = y, .x = x, .gamma = gamma, .beta = beta, .cmean = run_mean,
	                     .crstd = run_var };
	gf_team_for(gf_cpu_of(be)->team, (size_t)d->c, grain(d), fwd_eval_part, &a);
	return 0;
}

/* Sums of dz and dz * (x - m) over a row, dz = dy masked by the fused
 * activation's derivative (read from the output y). */
static inline void row_bwd_sums(const float *restrict dy, const float *restrict y, const float *restrict x,
                                   int n, float m, gf_act act, float slope, double *sdz, double *sdzx)
{
	float a1[16] = { 0 }, a2[16] = { 0 };
	float s = act == GF_ACT_RELU ? 0.0f : slope;
	int i = 0;
	if (act == GF_ACT_NONE) {
		for (; i + 16 <= n; i += 16)
			for (int l = 0; l < 16; l++) {
				a1[l] += dy[i + l];
				a2[l] += dy[i + l] * (x[i + l] - m);
			}
	} else {
		for (; i + 16 <= n; i += 16)
			for (int l = 0; l < 16; l++) {
				float dz = y[i + l] > 0.0f ? dy[i + l] : dy[i + l] * s;
				a1[l] += dz;
				a2[l] += dz * (x[i + l] - m);
			}
	}
	double r1 = 0, r2 = 0;
	for (int l = 0; l < 16; l++) {
		r1 += a1[l];
		r2 += a2[l];
	}
	for (; i < n; i++) {
		float dz = act == GF_ACT_NONE || y[i] > 0.0f ? dy[i] : dy[i] * s;
		r1 += dz;
		r2 += (double)dz * (x[i] - m);
	}
	*sdz += r1;
	*sdzx += r2;
}

/* dx = k1 * dz + k2 * (x - m) + k3 */
static inline void row_bwd_dx(float *restrict dx, const float *restrict dy, const float *restrict y,
                                 const float *restrict x, int n, float m, float k1, float k2, float k3,
                                 gf_act act, float slope)
{
	if (act == GF_ACT_NONE) {
		for (int i = 0; i < n; i++)
			dx[i] = k1 * dy[i] + k2 * (x[i] - m) + k3;
	} else {
		float s = act == GF_ACT_RELU ? 0.0f : slope;
		for (int i = 0; i < n; i++) {
			float dz = y[i] > 0.0f ? dy[i] : dy[i] * s;
			dx[i] = k1 * dz + k2 * (x[i] - m) + k3;
		}
	}
}

GF_CLONES static void bwd_part(void *p, size_t b, size_t e)
{
	struct bn_args *a = p;
	const gf_bn_desc *d = a->d;
	double cnt = (double)d->n * d->hw;
	for (size_t ch = b; ch < e; ch++) {
		float m = a->cmean[ch], rstd = a->crstd[ch];
		double sdz = 0, sdzx = 0;
		for (int n = 0; n < d->n; n++) {
			size_t off = ((size_t)n * d->c + ch) * d->hw;
			row_bwd_sums(a->dy + off, a->cy ? a->cy + off : NULL, a->x + off, d->hw, m, d->act, d->slope,
			             &sdz, &sdzx);
		}
		if (a->dgamma) {
			float v = (float)(sdzx * rstd);
			a->dgamma[ch] = a->acc ? a->dgamma[ch] + v : v;
		}
		if (a->dbeta)
			a->dbeta[ch] = a->acc ? a->dbeta[ch] + (float)sdz : (float)sdz;
		if (!a->dx)
			continue;
		float g = a->gamma ? a->gamma[ch] : 1.0f;
		float k1 = g * rstd;
		float k2 = (float)(-(double)g * rstd * rstd * rstd * sdzx / cnt);
		float k3 = (float)(-(double)g * rstd * sdz / cnt);
		for (int n = 0; n < d->n; n++) {
			size_t off = ((size_t)n * d->c + ch) * d->hw;
			row_bwd_dx(a->dx + off, a->dy + off, a->cy ? a->cy + off : NULL, a->x + off, d->hw, m, k1, k2, k3,
			           d->act, d->slope);
		}
	}
}

int gf_cpu_bn_backward(gf_backend *be, float *dx, float *dgamma, float *dbeta, const float *dy,
                       const float *y, const float *x, const float *gamma, const float *mean,
                       const float *rstd, const gf_bn_desc *d, int accumulate)
{
	int rc = check(d);
	if (rc)
		return rc;
	if (d->act != GF_ACT_NONE && !y)
		return gf_seterr(GF_EPARAM, "batchnorm backward: the fused activation needs the output");
	struct bn_args a = { .d = d, .x = x, .gamma = gamma, .dx = dx, .dgamma = dgamma, .dbeta = dbeta,
	                     .dy = dy, .cy = y, .cmean = mean, .crstd = rstd, .acc = accumulate };
	gf_team_for(gf_cpu_of(be)->team, (size_t)d->c, grain(d), bwd_part, &a);
	return 0;
}

/* ---- conditional batchnorm (layer cbn) ----
 * The same passes with the gain and bias of each (sample, channel) row:
 * y = act(gamma[n][ch] * (x - mean) * rstd + beta[n][ch]). Backward: per
 * row, the sums of dz and dz (x - mean) give dbeta and dgamma of that row;
 * their gamma-weighted totals over the batch give the channel's two
 * batch-statistics terms of dx. */

struct cbn_args {
	const gf_bn_desc *d;
	float *y, *mean, *rstd, *run_mean, *run_var;
	const float *x, *gamma, *beta;
	float *dx, *dgamma, *dbeta;
	const float *dy, *cy, *cmean, *crstd;
	int train;
};

GF_CLONES static void cbn_fwd_part(void *p, size_t b, size_t e)
{
	struct cbn_args *a = p;
	const gf_bn_desc *d = a->d;
	double cnt = (double)d->n * d->hw;
	for (size_t ch = b; ch < e; ch++) {
		float mean, rstd;
		if (a->train) {
			double s = 0;
			for (int n = 0; n < d->n; n++)
				s += row_sum_shift(a->x + ((size_t)n * d->c + ch) * d->hw, d->hw, 0.0f);
			mean = (float)(s / cnt);
			double ss = 0;
			for (int n = 0; n < d->n; n++)
				ss += row_sumsq_shift(a->x + ((size_t)n * d->c + ch) * d->hw, d->hw, mean);
			double var = ss / cnt;
			rstd = (float)(1.0 / sqrt(var + d->eps));
			a->mean[ch] = mean;
			a->rstd[ch] = rstd;
			if (a->run_mean && a->run_var) {
				double unbiased = cnt > 1 ? ss / (cnt - 1) : var;
				a->run_mean[ch] = (1.0f - d->momentum) * a->run_mean[ch] + d->momentum * mean;
				a->run_var[ch] = (1.0f - d->momentum) * a->run_var[ch] + d->momentum * (float)unbiased;
			}
		} else {
			mean = a->run_mean[ch];
			rstd = 1.0f / sqrtf(a->run_var[ch] + d->eps);
		}
		for (int n = 0; n < d->n; n++) {
			size_t row = (size_t)n * d->c + ch, off = row * d->hw;
			row_norm(a->y + off, a->x + off, d->hw, mean, a->gamma[row] * rstd, a->beta[row], d->act, d->slope);
		}
	}
}

int gf_cpu_cbn_forward(gf_backend *be, float *y, float *mean, float *rstd, float *run_mean, float *run_var,
                       const float *x, const float *gamma, const float *beta, const gf_bn_desc *d, int train)
{
	int rc = check(d);
	if (rc)
		return rc;
	if (!gamma || !beta || (!train && (!run_mean || !run_var)) || (train && (!mean || !rstd)))
		return gf_seterr(GF_EPARAM, "conditional batchnorm: missing gain, bias or statistics");
	if (train && (double)d->n * d->hw < 2 && run_var)
		return gf_seterr(GF_ESHAPE, "batchnorm: needs more than one value per channel in training, got %d",
		                 d->n * d->hw);
	struct cbn_args a = { .d = d, .y = y, .mean = mean, .rstd = rstd, .run_mean = run_mean, .run_var = run_var,
	                      .x = x, .gamma = gamma, .beta = beta, .train = train };
	gf_team_for(gf_cpu_of(be)->team, (size_t)d->c, grain(d), cbn_fwd_part, &a);
	return 0;
}

GF_CLONES static void cbn_bwd_part(void *p, size_t b, size_t e)
{
	struct cbn_args *a = p;
	const gf_bn_desc *d = a->d;
	double cnt = (double)d->n * d->hw;
	for (size_t ch = b; ch < e; ch++) {
		float m = a->cmean[ch], rstd = a->crstd[ch];
		double s1 = 0, s2 = 0;   /* sums over the batch of gamma * sum dz, gamma * sum dz (x - m) */
		for (int n = 0; n < d->n; n++) {
			size_t row = (size_t)n * d->c + ch, off = row * d->hw;
			double sdz = 0, sdzx = 0;
			row_bwd_sums(a->dy + off, a->cy ? a->cy + off : NULL, a->x + off, d->hw, m, d->act, d->slope, &sdz,
			             &sdzx);
			a->dbeta[row] = (float)sdz;
			a->dgamma[row] = (float)(sdzx * rstd);
			s1 += (double)a->gamma[row] * sdz;
			s2 += (double)a->gamma[row] * sdzx;
		}
		if (!a->dx)
			continue;
		float k2 = (float)(-(double)rstd * rstd * rstd * s2 / cnt);
		float k3 = (float)(-(double)rstd * s1 / cnt);
		for (int n = 0; n < d->n; n++) {
			size_t row = (size_t)n * d->c + ch, off = row * d->hw;
			row_bwd_dx(a->dx + off, a->dy + off, a->cy ? a->cy + off : NULL, a->x + off, d->hw, m,
			           a->gamma[row] * rstd, k2, k3, d->act, d->slope);
		}
	}
}

int gf_cpu_cbn_backward(gf_backend *be, float *dx, float *dgamma, float *dbeta, const float *dy, const float *y,
                        const float *x, const float *gamma, const float *mean, const float *rstd,
                        const gf_bn_desc *d)
{
	int rc = check(d);
	if (rc)
		return rc;
	if (d->act != GF_ACT_NONE && !y)
		return gf_seterr(GF_EPARAM, "batchnorm backward: the fused activation needs the output");
	if (!dgamma || !dbeta || !gamma)
		return gf_seterr(GF_EPARAM, "conditional batchnorm backward: needs gamma, dgamma and dbeta");
	struct cbn_args a = { .d = d, .x = x, .gamma = gamma, .dx = dx, .dgamma = dgamma, .dbeta = dbeta, .dy = dy,
	                      .cy = y, .cmean = mean, .crstd = rstd };
	gf_team_for(gf_cpu_of(be)->team, (size_t)d->c, grain(d), cbn_bwd_part, &a);
	return 0;
}
