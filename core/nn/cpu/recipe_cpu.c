/* The CPU kernels of the recipe ops that keep a step off the host:
 * gradient clipping from a device norm, LeCam, ADA's controller and the
 * per-sample factors of the gradient penalties (<ganflow/backend.h>,
 * docs/cuda.md "Nothing eager"). Each is the host arithmetic it replaces
 * (gf_net_clip_grad_norm, gf_lecam_grad / gf_lecam_average, gf_ada_step,
 * gf_penalty), operation for operation, so a run that moved it onto the
 * device trains bit for bit as before on the CPU. */
#include <math.h>

#include "cpu.h"

int gf_cpu_clip_dev(gf_backend *be, float *g, size_t n, const double *sumsq, float max_norm)
{
	double total = sqrt(*sumsq);
	if (!isfinite(total) || !(max_norm > 0))
		return 0;
	double coef = (double)max_norm / (total + 1e-6);
	return coef < 1.0 ? gf_cpu_scale(be, g, n, (float)coef) : 0;
}

enum { L_SET, L_REAL, L_FAKE, L_RUN_REAL, L_RUN_FAKE, L_BASE_REAL, L_BASE_FAKE };

int gf_cpu_lecam_dev(gf_backend *be, float *dy, double *value, double *st, const float *out, size_t n, int fake,
                     float lambda, float scale, int acc)
{
	(void)be;
	double s = 0;
	for (size_t i = 0; i < n; i++) /* reduce_dev's sum */
		s += out[i];
	st[fake ? L_RUN_FAKE : L_RUN_REAL] += s / (double)n / acc;
	if (st[L_SET] == 0 || n == 0) {
		*value = 0;
		return 0;
	}
	double sum = 0, c = 2.0 * lambda * scale / (double)n;
	for (size_t i = 0; i < n; i++) {
		/* real outputs above the fake average, fake ones below the real average */
		double r = fake ? st[L_REAL] - out[i] : out[i] - st[L_FAKE];
		r = r > 0 ? r : 0;
		sum += r * r;
		dy[i] += (float)(fake ? -c * r : c * r);
	}
	*value = lambda * scale * sum / (double)n;
	return 0;
}

int gf_cpu_lecam_avg(gf_backend *be, double *st, float decay, int last)
{
	(void)be;
	double real = st[L_RUN_REAL] - st[L_BASE_REAL], fake = st[L_RUN_FAKE] - st[L_BASE_FAKE];
	double d = st[L_SET] != 0 ? decay : 0.0;
	st[L_REAL] = d * st[L_REAL] + (1 - d) * real;
	st[L_FAKE] = d * st[L_FAKE] + (1 - d) * fake;
	st[L_SET] = 1;
	st[L_BASE_REAL] = last ? 0 : st[L_RUN_REAL];
	st[L_BASE_FAKE] = last ? 0 : st[L_RUN_FAKE];
	if (last)
		st[L_RUN_REAL] = st[L_RUN_FAKE] = 0;
	return 0;
}

enum { A_SIGNS, A_COUNT, A_IMAGES, A_STEPS, A_RT };

int gf_cpu_ada_signs(gf_backend *be, double *st, const float *out, size_t n, float mid)
{
	(void)be;
	int64_t s = 0;
	for (size_t i = 0; i < n; i++)
		s += (out[i] > mid) - (out[i] < mid); /* torch.sign: 0 at 0 */
	st[A_SIGNS] += (double)s;
	st[A_COUNT] += (double)n;
	return 0;
}

int gf_cpu_ada_update(gf_backend *be, float *p, double *st, double *out, double images, int interval, double target,
                      double kimg)
{
	(void)be;
	st[A_IMAGES] += images;
	if (++st[A_STEPS] >= interval) {
		st[A_RT] = st[A_COUNT] != 0 ? st[A_SIGNS] / st[A_COUNT] : 0.0;
		if (kimg > 0) {
			double dir = (st[A_RT] > target) - (st[A_RT] < target);
			double v = (double)*p + dir * st[A_IMAGES] / (kimg * 1000.0);
			*p = (float)(v < 0 ? 0 : v > 1 ? 1 : v);
		}
		st[A_SIGNS] = st[A_COUNT] = st[A_IMAGES] = st[A_STEPS] = 0;
	}
	if (out) {
		out[0] = *p;
		out[1] = st[A_RT];
	}
	return 0;
}

int gf_cpu_penalty_factors(gf_backend *be, float *f, double *out, double *center_st, const float *sq, int b,
                           int max_batch, int npts, const gf_penalty_desc *d)
{
	(void)be;
	double s = 0;
	for (int i = 0; i < b; i++) {
		double l = 0;
		for (int k = 0; k < npts; k++)
			l += (double)sq[(size_t)k * (size_t)max_batch + (size_t)i];
		s += sqrt(npts > 1 ? l / npts : l);
	}
	double mean = s / b, c = d->center;
	if (center_st) {
		if (d->decay > 0)
			*center_st += d->decay * (mean - *center_st);
		c = *center_st;
	}
	int part = d->split > 0 && d->split < b && !d->distance ? d->split : b;
	double v = 0, v2 = 0;
	for (int i = 0; i < b; i++) {
		double l = 0;
		for (int k = 0; k < npts; k++)
			l += (double)sq[(size_t)k * (size_t)max_batch + (size_t)i];
		l = sqrt(npts > 1 ? l / npts : l);
		double x;
		if (!d->distance) {
			/* weight / 2 |g|^2: dP/dg = weight g / B (a split: each part its own B) */
			if (i < part) {
				v += 0.5 * l * l;
				x = d->weight / part;
			} else {
				v2 += 0.5 * l * l;
				x = d->weight2 / (b - part);
			}
		} else {
			/* weight (|g| - center)^2: dP/dg = 2 weight (|g| - center) g / (|g| B);
			 * at g = 0 the subgradient 0, as torch's norm */
			v += (l - c) * (l - c);
			x = l > 0 ? 2.0 * d->weight * (l - c) / (l * b) : 0.0;
		}
		if (npts > 1) /* |g| the RMS over the points: d|g|/dg_k = g_k / (K |g|) */
			x /= npts;
		f[i] = (float)(d->scale * x);
	}
	if (out) {
		out[0] = d->weight * v / part;
		out[1] = mean;
		if (part < b)
			out[2] = d->weight2 * v2 / (b - part);
	}
	return 0;
}
