/* DiffAugment on the CPU: colour (brightness, saturation, contrast),
 * translation and cutout of Zhao et al. 2020, and the transpose of that
 * affine map for the backward pass (<ganflow/backend.h>, augment_forward),
 * and its linear part (augment_linear, for the double backward).
 * One sample per task of the thread team; per-sample means in double in a
 * fixed order, so results do not depend on the thread count. The CUDA
 * version is core/nn/cuda/augment.cu, with the same parameter formulas
 * (gf_aug_params in augment_params.h). */
#include <errno.h>
#include <stdlib.h>

#include <ganflow/err.h>

#include "../augment_params.h"
#include "cpu.h"
#include "team.h"

struct aug_job {
	float *out;
	const float *in, *u;
	int c, h, w;
	unsigned what;
	int failed;      /* a part could not get its per-pixel buffer */
	int linear;      /* augment_linear: without the brightness shift */
};

static int check(int n, int c, int h, int w)
{
	if (n < 1 || c < 1 || h < 1 || w < 1)
		return gf_seterr(GF_EPARAM, "augment: empty tensor (%d, %d, %d, %d)", n, c, h, w);
	return 0;
}

/* y = cutout(translate(color(x))) for sample i. */
static void fwd_sample(const struct aug_job *j, int i, double *pix)
{
	size_t hw = (size_t)j->h * j->w, chw = hw * j->c;
	const float *x = j->in + i * chw;
	float *y = j->out + i * chw;
	gf_aug_params p;
	gf_aug_params_of(&p, j->u + 7 * (size_t)i, j->h, j->w, j->what);
	if (j->linear)
		p.bright = 0.0f;
	/* colour: y0 = (x + b - m_pix) s + m_pix, m_pix = channel mean of x + b;
	 * then (y0 - M) c + M with M = sample mean of y0 = sample mean of x + b */
	double total = 0;
	for (size_t q = 0; q < hw; q++) {
		double s = 0;
		for (int ch = 0; ch < j->c; ch++)
			s += x[ch * hw + q];
		pix[q] = s / j->c;
		total += s;
	}
	double mean = total / (double)chw + p.bright;
	for (int ch = 0; ch < j->c; ch++)
		for (int r = 0; r < j->h; r++)
			for (int col = 0; col < j->w; col++) {
				float v = 0;
				int sr = r + p.tx, sc = col + p.ty;
				if (sr >= 0 && sr < j->h && sc >= 0 && sc < j->w && !gf_aug_cut(&p, r, col)) {
					size_t q = (size_t)sr * j->w + sc;
					double t = x[ch * hw + q] + p.bright, m = pix[q] + p.bright;
					t = (t - m) * p.sat + m;
					v = (float)((t - mean) * p.con + mean);
				}
				y[ch * hw + (size_t)r * j->w + col] = v;
			}
}

/* dx = the map's transpose applied to dy, for sample i: g = dy masked by
 * the cutout and shifted back; contrast's transpose c g + (1 - c) mean(g);
 * saturation's s g + (1 - s) channel mean(g); brightness passes g. */
static void bwd_sample(const struct aug_job *j, int i, double *pix)
{
	size_t hw = (size_t)j->h * j->w, chw = hw * j->c;
	const float *dy = j->in + i * chw;
	float *dx = j->out + i * chw;
	gf_aug_params p;
	gf_aug_params_of(&p, j->u + 7 * (size_t)i, j->h, j->w, j->what);
	double total = 0;
	for (int ch = 0; ch < j->c; ch++)
		for (int r = 0; r < j->h; r++)
			for (int col = 0; col < j->w; col++) {
				/* output (r, col) read source (r + tx, col + ty) */
				int orow = r - p.tx, ocol = col - p.ty;
				float g = 0;
				if (orow >= 0 && orow < j->h && ocol >= 0 && ocol < j->w && !gf_aug_cut(&p, orow, ocol))
					g = dy[ch * hw + (size_t)orow * j->w + ocol];
				dx[ch * hw + (size_t)r * j->w + col] = g;
				total += g;
			}
	double gm = total / (double)chw;
	for (size_t q = 0; q < hw; q++) {
		double s = 0;
		for (int ch = 0; ch < j->c; ch++) {
			double d = p.con * dx[ch * hw + q] + (1 - p.con) * gm;
			dx[ch * hw + q] = (float)d;
			s += d;
		}
		pix[q] = s / j->c;
	}
	for (int ch = 0; ch < j->c; ch++)
		for (size_t q = 0; q < hw; q++)
			dx[ch * hw + q] = (float)(p.sat * dx[ch * hw + q] + (1 - p.sat) * pix[q]);
}

/* Samples [begin, end) with one per-pixel buffer. */
static void parts(struct aug_job *j, size_t begin, size_t end, void (*one)(const struct aug_job *, int, double *))
{
	double *pix = malloc((size_t)j->h * (size_t)j->w * sizeof(double));
	if (!pix) {
		j->failed = 1; /* distinct parts write the same value: no race worth a lock */
		return;
	}
	for (size_t i = begin; i < end; i++)
		one(j, (int)i, pix);
	free(pix);
}

static void fwd_task(void *arg, size_t begin, size_t end)
{
	parts(arg, begin, end, fwd_sample);
}

static void bwd_task(void *arg, size_t begin, size_t end)
{
	parts(arg, begin, end, bwd_sample);
}

static int run(gf_backend *be, float *out, const float *in, const float *u, int n, int c, int h, int w,
               unsigned what, gf_team_fn task, int linear)
{
	int rc = check(n, c, h, w);
	if (rc)
		return rc;
	struct aug_job j = { out, in, u, c, h, w, what, 0, linear };
	gf_team_for(gf_cpu_of(be)->team, (size_t)n, 1, task, &j);
	return j.failed ? gf_seterr(-ENOMEM, "augment: out of memory") : 0;
}

int gf_cpu_augment_forward(gf_backend *be, float *y, const float *x, const float *u, int n, int c, int h, int w,
                           unsigned what)
{
	return run(be, y, x, u, n, c, h, w, what, fwd_task, 0);
}

int gf_cpu_augment_backward(gf_backend *be, float *dx, const float *dy, const float *u, int n, int c, int h, int w,
                            unsigned what)
{
	return run(be, dx, dy, u, n, c, h, w, what, bwd_task, 0);
}

/* The map without the brightness shift: its linear part, the Jacobian
 * product of the diffaugment layer (its double backward). */
int gf_cpu_augment_linear(gf_backend *be, float *y, const float *x, const float *u, int n, int c, int h, int w,
                          unsigned what)
{
	return run(be, y, x, u, n, c, h, w, what, fwd_task, 1);
}
