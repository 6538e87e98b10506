/* StyleGAN2-ADA's augmentation on the CPU (<ganflow/backend.h>, ada_params
 * / ada_forward / ada_backward; the layer is layers/ada.c): the per-sample
 * transforms from their uniforms (../ada_params.h, shared with the CUDA
 * kernels), one bilinear resampling with reflection for the geometric map
 * and the colour matrix, and the transpose of their linear part.
 * The forward runs one sample per task of the thread team; the backward
 * scatters each output pixel's gradient onto its four bilinear taps, one
 * (sample, channel) plane per task in a fixed pixel order, so results do
 * not depend on the thread count. The CUDA version (cuda/ada.cu) gathers
 * instead, one input pixel per thread. */
#include <math.h>
#include <string.h>

#include <ganflow/err.h>

#include "../ada_params.h"
#include "cpu.h"
#include "team.h"

struct ada_job {
	float *out;
	const float *in, *m;
	int c, h, w;
	int affine;
};

static int check(const char *op, int n, int c, int h, int w)
{
	if (n < 1 || c < 1 || h < 1 || w < 1)
		return gf_seterr(GF_EPARAM, "%s: empty tensor (%d, %d, %d, %d)", op, n, c, h, w);
	if (h < 2 || w < 2)
		return gf_seterr(GF_EPARAM, "%s: images of %dx%d: reflection needs 2 pixels or more per side", op, h, w);
	return 0;
}

static void fwd_task(void *arg, size_t begin, size_t end)
{
	const struct ada_job *j = arg;
	const int c = j->c, h = j->h, w = j->w;
	const size_t hw = (size_t)h * w, chw = hw * c;
	for (size_t i = begin; i < end; i++) {
		const float *x = j->in + i * chw, *m = j->m + i * GF_ADA_M, *cm = m + ADA_M_COLOR;
		float *y = j->out + i * chw;
		int geom = m[ADA_M_GEOM_ON] != 0.0f, color = m[ADA_M_COLOR_ON] != 0.0f && (c == 1 || c == 3);
		for (int r = 0; r < h; r++)
			for (int col = 0; col < w; col++) {
				size_t q = (size_t)r * w + col;
				int at[4] = { 0, 0, 0, 0 };
				float wt[4] = { 0, 0, 0, 0 }, v[3] = { 0, 0, 0 };
				if (geom)
					gf_ada_taps(m, r, col, h, w, at, wt);
				for (int ch = 0; ch < c; ch++) {
					const float *xp = x + ch * hw;
					float s = geom ? wt[0] * xp[at[0]] + wt[1] * xp[at[1]] + wt[2] * xp[at[2]] + wt[3] * xp[at[3]]
					               : xp[q];
					if (!color)
						y[ch * hw + q] = s;
					else if (ch < 3)
						v[ch] = s;
				}
				if (!color)
					continue;
				if (c == 1) {
					y[q] = cm[0] * v[0] + (j->affine ? cm[3] : 0.0f);
					continue;
				}
				for (int k = 0; k < 3; k++)
					y[k * hw + q] = cm[k * 4] * v[0] + cm[k * 4 + 1] * v[1] + cm[k * 4 + 2] * v[2] +
					                (j->affine ? cm[k * 4 + 3] : 0.0f);
			}
	}
}

/* One (sample, channel) plane per index: the colour matrix's transpose,
 * then each output pixel's value scattered onto its taps. */
static void bwd_task(void *arg, size_t begin, size_t end)
{
	const struct ada_job *j = arg;
	const int c = j->c, h = j->h, w = j->w;
	const size_t hw = (size_t)h * w, chw = hw * c;
	for (size_t e = begin; e < end; e++) {
		size_t i = e / c;
		int ch = (int)(e % c);
		const float *dy = j->in + i * chw, *m = j->m + i * GF_ADA_M, *cm = m + ADA_M_COLOR;
		float *dx = j->out + i * chw + ch * hw;
		int geom = m[ADA_M_GEOM_ON] != 0.0f, color = m[ADA_M_COLOR_ON] != 0.0f && (c == 1 || c == 3);
		if (geom)
			memset(dx, 0, hw * sizeof(float));
		for (int r = 0; r < h; r++)
			for (int col = 0; col < w; col++) {
				size_t q = (size_t)r * w + col;
				int at[4];
				float g;
				if (!color)
					g = dy[ch * hw + q];
				else if (c == 1)
					g = cm[0] * dy[q];
				else
					g = cm[ch] * dy[q] + cm[4 + ch] * dy[hw + q] + cm[8 + ch] * dy[2 * hw + q];
				if (!geom) {
					dx[q] = g;
					continue;
				}
				float wt[4];
				gf_ada_taps(m, r, col, h, w, at, wt);
				for (int t = 0; t < 4; t++)
					dx[at[t]] += wt[t] * g;
			}
	}
}

struct params_job {
	float *m;
	const float *u;
	float p;
	int c, h, w;
	unsigned what;
};

static void params_task(void *arg, size_t begin, size_t end)
{
	const struct params_job *j = arg;
	for (size_t i = begin; i < end; i++) {
		gf_ada_draw d;
		gf_ada_draw_of(&d, j->u + i * GF_ADA_U, j->p, j->h, j->w, j->what);
		gf_ada_matrix(j->m + i * GF_ADA_M, &d, j->c, j->h, j->w);
	}
}

int gf_cpu_ada_params(gf_backend *be, float *m, const float *u, const float *p, int n, int c, int h, int w,
                      unsigned what)
{
	int rc = check("ada_params", n, c, h, w);
	if (rc)
		return rc;
	if ((what & GF_ADA_COLOR) && c != 1 && c != 3)
		return gf_seterr(GF_EPARAM, "ada_params: colour transforms need 1 or 3 channels, not %d", c);
	struct params_job j = { m, u, *p, c, h, w, what };
	gf_team_for(gf_cpu_of(be)->team, (size_t)n, 16, params_task, &j);
	return 0;
}

int gf_cpu_ada_forward(gf_backend *be, float *y, const float *x, const float *m, int n, int c, int h, int w,
                       int affine)
{
	int rc = check("ada_forward", n, c, h, w);
	if (rc)
		return rc;
	struct ada_job j = { y, x, m, c, h, w, affine };
	gf_team_for(gf_cpu_of(be)->team, (size_t)n, 1, fwd_task, &j);
	return 0;
}

int gf_cpu_ada_backward(gf_backend *be, float *dx, const float *dy, const float *m, int n, int c, int h, int w)
{
	int rc = check("ada_backward", n, c, h, w);
	if (rc)
		return rc;
	struct ada_job j = { dx, dy, m, c, h, w, 0 };
	gf_team_for(gf_cpu_of(be)->team, (size_t)n * c, 1, bwd_task, &j);
	return 0;
}
