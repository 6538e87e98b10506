/* The CPU backend's StyleGAN2 ops (<ganflow/backend.h> "StyleGAN2"): bias
 * + activation with gain and clamping (layer bias_act), the
 * demodulation's reciprocal square root (layer modconv) and FIR
 * resampling, upfirdn2d (layer fir), and style mixing's row pick (layer
 * style_w). Split over the thread team by
 * elements or planes; every output is computed from its own inputs in a
 * fixed order (no reductions across threads). The CUDA versions are
 * core/nn/cuda/sg2.cu. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>

#include "../style_mix_row.h"
#include "cpu.h"

#define GRAIN (1u << 15)

struct ba_args {
	float *y;
	const float *x, *b, *dy;
	gf_bias_act_desc d;
};

static inline float ba_act(float v, const gf_bias_act_desc *d)
{
	if (d->act == GF_ACT_RELU)
		v = v > 0.0f ? v : 0.0f;
	else if (d->act == GF_ACT_LRELU)
		v = v > 0.0f ? v : v * d->alpha;
	v *= d->gain;
	if (d->clamp > 0.0f)
		v = v < -d->clamp ? -d->clamp : v > d->clamp ? d->clamp : v;
	return v;
}

/* parts are whole (sample, channel) planes */
GF_CLONES static void ba_fwd_part(void *p, size_t b, size_t e)
{
	struct ba_args *a = p;
	size_t hw = (size_t)a->d.hw;
	for (size_t r = b; r < e; r++) {
		float bias = a->b ? a->d.bgain * a->b[r % (size_t)a->d.c] : 0.0f;
		const float *x = a->x + r * hw;
		float *y = a->y + r * hw;
		for (size_t i = 0; i < hw; i++)
			y[i] = ba_act(x[i] + bias, &a->d);
	}
}

GF_CLONES static void ba_bwd_part(void *p, size_t b, size_t e)
{
	struct ba_args *a = p;
	const gf_bias_act_desc *d = &a->d;
	float lo = d->act == GF_ACT_RELU ? 0.0f : d->act == GF_ACT_LRELU ? d->alpha * d->gain : d->gain;
	for (size_t i = b; i < e; i++) {
		float v = a->x[i], g = (d->act == GF_ACT_NONE || v > 0.0f) ? d->gain : lo;
		if (d->clamp > 0.0f && !(fabsf(v) < d->clamp))
			g = 0.0f;
		a->y[i] = a->dy[i] * g;
	}
}

static int ba_check(const gf_bias_act_desc *d, const char *what)
{
	if (d->n < 0 || d->c < 0 || d->hw < 0)
		return gf_seterr(GF_EPARAM, "%s: negative size (%d, %d, %d)", what, d->n, d->c, d->hw);
	if (d->act != GF_ACT_NONE && d->act != GF_ACT_RELU && d->act != GF_ACT_LRELU)
		return gf_seterr(GF_EUNSUPPORTED, "%s: activation %d (none, relu and lrelu are)", what, (int)d->act);
	return 0;
}

int gf_cpu_bias_act_forward(gf_backend *be, float *y, const float *x, const float *b, const gf_bias_act_desc *d)
{
	int rc = ba_check(d, "bias_act_forward");
	if (rc)
		return rc;
	struct ba_args a = { .y = y, .x = x, .b = b, .d = *d };
	gf_team_for(gf_cpu_of(be)->team, (size_t)d->n * (size_t)d->c, GRAIN / ((size_t)d->hw + 1) + 1, ba_fwd_part, &a);
	return 0;
}

int gf_cpu_bias_act_backward(gf_backend *be, float *dx, const float *dy, const float *y, const gf_bias_act_desc *d)
{
	int rc = ba_check(d, "bias_act_backward");
	if (rc)
		return rc;
	struct ba_args a = { .y = dx, .x = y, .dy = dy, .d = *d };
	gf_team_for(gf_cpu_of(be)->team, (size_t)d->n * (size_t)d->c * (size_t)d->hw, GRAIN, ba_bwd_part, &a);
	return 0;
}

struct rsqrt_args {
	float *y;
	const float *x;
	float eps;
};

GF_CLONES static void rsqrt_part(void *p, size_t b, size_t e)
{
	struct rsqrt_args *a = p;
	for (size_t i = b; i < e; i++)
		a->y[i] = (float)(1.0 / sqrt((double)a->x[i] + (double)a->eps));
}

int gf_cpu_rsqrt_eps(gf_backend *be, float *y, const float *x, size_t n, float eps)
{
	struct rsqrt_args a = { .y = y, .x = x, .eps = eps };
	gf_team_for(gf_cpu_of(be)->team, n, GRAIN, rsqrt_part, &a);
	return 0;
}

/* ---- FIR resampling (upfirdn2d) ----
 * Separable: each output row (column) reads at most 4 input rows
 * (columns) of the upsampled, padded plane, listed once per call with
 * their taps (fir_taps): output o reads padded position o down + k, input
 * pixel (o down + k - p0) / up when that divides and lies inside. Then per
 * plane a horizontal pass (every input row, filtered to the output's
 * columns) and a vertical one. The adjoint is the same two passes with
 * the transposed tables: input i sits at padded position i up + p0 and is
 * read by output (i up + p0 - k) / down. Sums in tap order (ky outer, kx
 * inner), as the CUDA kernels'. */
struct fir_tap {
	int cnt;
	int idx[4];
	float f[4];
};

static void fir_taps(struct fir_tap *t, int n, int n_src, const gf_fir_desc *d, int adjoint)
{
	for (int o = 0; o < n; o++) {
		t[o].cnt = 0;
		for (int k = 0; k < 4; k++) {
			int p = adjoint ? o * d->up + d->p0 - k : o * d->down + k - d->p0;
			int st = adjoint ? d->down : d->up;
			if (p < 0 || p % st || p / st >= n_src)
				continue;
			t[o].idx[t[o].cnt] = p / st;
			t[o].f[t[o].cnt++] = d->f[k];
		}
	}
}

struct fir_args {
	float *y;
	const float *x;
	int hi, wi, ho, wo;                /* source and destination planes */
	const struct fir_tap *ty, *tx;     /* (ho), (wo) */
	float gain;
	int fail;
};

GF_CLONES static void fir_part(void *pa, size_t b, size_t e)
{
	struct fir_args *a = pa;
	float *tmp = malloc((size_t)a->hi * a->wo * sizeof(float));   /* source rows filtered to the destination's columns */
	if (!tmp) {
		a->fail = 1;
		return;
	}
	for (size_t pl = b; pl < e; pl++) {
		const float *x = a->x + pl * (size_t)a->hi * a->wi;
		float *y = a->y + pl * (size_t)a->ho * a->wo;
		for (int r = 0; r < a->hi; r++) {
			const float *xr = x + (size_t)r * a->wi;
			float *tr = tmp + (size_t)r * a->wo;
			for (int o = 0; o < a->wo; o++) {
				const struct fir_tap *t = &a->tx[o];
				float v = 0.0f;
				for (int k = 0; k < t->cnt; k++)
					v += t->f[k] * xr[t->idx[k]];
				tr[o] = v;
			}
		}
		for (int o = 0; o < a->ho; o++) {
			const struct fir_tap *t = &a->ty[o];
			float *yr = y + (size_t)o * a->wo;
			for (int c = 0; c < a->wo; c++)
				yr[c] = 0.0f;
			for (int k = 0; k < t->cnt; k++) {
				const float *tr = tmp + (size_t)t->idx[k] * a->wo;
				float f = t->f[k];
				for (int c = 0; c < a->wo; c++)
					yr[c] += f * tr[c];
			}
			for (int c = 0; c < a->wo; c++)
				yr[c] *= a->gain;
		}
	}
	free(tmp);
}

static int fir_check(const gf_fir_desc *d, const char *what)
{
	if (d->n < 0 || d->h < 1 || d->w < 1 || d->hout < 1 || d->wout < 1 || d->p0 < 0)
		return gf_seterr(GF_EPARAM, "%s: bad sizes (%d planes, %dx%d -> %dx%d, pad %d)", what, d->n, d->h, d->w, d->hout,
		                 d->wout, d->p0);
	if (d->up < 1 || d->up > 2 || d->down < 1 || d->down > 2)
		return gf_seterr(GF_EUNSUPPORTED, "%s: up = %d, down = %d (1 or 2)", what, d->up, d->down);
	return 0;
}

static int fir_run(gf_backend *be, float *y, const float *x, const gf_fir_desc *d, int adjoint, const char *what)
{
	int rc = fir_check(d, what);
	if (rc)
		return rc;
	int hi = adjoint ? d->hout : d->h, wi = adjoint ? d->wout : d->w, ho = adjoint ? d->h : d->hout,
	    wo = adjoint ? d->w : d->wout;
	struct fir_tap *ty = malloc(((size_t)ho + wo) * sizeof(*ty));
	if (!ty)
		return gf_seterr(-ENOMEM, "%s: out of memory", what);
	fir_taps(ty, ho, hi, d, adjoint);
	fir_taps(ty + ho, wo, wi, d, adjoint);
	struct fir_args a = { .y = y, .x = x, .hi = hi, .wi = wi, .ho = ho, .wo = wo, .ty = ty, .tx = ty + ho, .gain = d->gain };
	gf_team_for(gf_cpu_of(be)->team, (size_t)d->n, GRAIN / ((size_t)ho * wo * 8 + 1) + 1, fir_part, &a);
	free(ty);
	return a.fail ? gf_seterr(-ENOMEM, "%s: out of memory", what) : 0;
}

int gf_cpu_fir_forward(gf_backend *be, float *y, const float *x, const gf_fir_desc *d)
{
	return fir_run(be, y, x, d, 0, "fir_forward");
}

int gf_cpu_fir_backward(gf_backend *be, float *dx, const float *dy, const gf_fir_desc *d)
{
	return fir_run(be, dx, dy, d, 1, "fir_backward");
}

/* ---- style mixing (layer style_w) ----
 * One row of two per sample: a strided copy, and its adjoint with the
 * other row zeroed. u is read here, when the op runs (a captured step
 * replays with each step's draw). */
int gf_cpu_style_mix(gf_backend *be, float *y, const float *x, const float *u, int n, int c, int index, int num_ws,
                     float prob, int adjoint)
{
	(void)be;
	if (n < 0 || c < 1 || num_ws < 2 || index < 0 || index >= num_ws)
		return gf_seterr(GF_EPARAM, "style_mix: bad sizes (n %d, c %d, index %d of %d)", n, c, index, num_ws);
	size_t row = (size_t)gf_style_mix_row(u, index, num_ws, prob), C = (size_t)c;
	for (size_t b = 0; b < (size_t)n; b++) {
		if (!adjoint) {
			memcpy(y + b * C, x + (2 * b + row) * C, C * sizeof(float));
			continue;
		}
		memcpy(y + (2 * b + row) * C, x + b * C, C * sizeof(float));
		memset(y + (2 * b + 1 - row) * C, 0, C * sizeof(float));
	}
	return 0;
}
