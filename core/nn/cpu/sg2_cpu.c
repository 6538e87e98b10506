/* The CPU backend's StyleGAN2 ops (<ganflow/backend.h> "StyleGAN2"): bias
 * + activation with gain and clamping (layer bias_act) and the
 * demodulation's reciprocal square root (layer modconv). Element-wise,
 * split over the thread team; no reductions. The CUDA versions are
 * core/nn/cuda/sg2.cu. */
#include <math.h>

#include <ganflow/err.h>

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
