/* The recipe ops of the CUDA backend (<ganflow/backend.h>, docs/cuda.md
 * "Nothing eager"): gradient clipping by a norm on the device, LeCam, ADA's
 * controller, a gradient penalty's per-sample factors. Their state is a
 * few doubles in device memory, so none of them waits for the host and a
 * step that uses them is captured like any other; the scalars a schedule
 * may move (LeCam's and a penalty's weight and scale, ADA's per-step
 * images) are per-step slots of a captured graph (gf_cu_dyn). Kernels:
 * recipe.cu. */
#include <string.h>

#include "cuda.h"

#define ENTER(c)                                       \
	do {                                           \
		int rc_ = gf_cu_enter(c);              \
		if (rc_)                               \
			return rc_;                    \
	} while (0)

static uint64_t dbits(double d)
{
	uint64_t u;
	memcpy(&u, &d, sizeof(u));
	return u;
}

int gf_cu_clip_dev(gf_backend *be, float *g, size_t n, const double *sumsq, float max_norm)
{
	gf_cuda *c = gf_cu(be);
	ENTER(c);
	int rc = GF_CU_SIG(c, GF_CU_OP_CLIP_DEV, GF_CU_P(g), n, GF_CU_P(sumsq), gf_cu_fbits(max_norm));
	if (rc)
		return rc == GF_CU_SKIP ? 0 : rc;
	CU_LAUNCH(gf_cu_clip_launch(c->stream, g, n, sumsq, max_norm));
	return 0;
}

int gf_cu_lecam_dev(gf_backend *be, float *dy, double *value, double *st, const float *out, size_t n, int fake,
                    float lambda, float scale, int acc)
{
	gf_cuda *c = gf_cu(be);
	ENTER(c);
	int rc = GF_CU_SIG(c, GF_CU_OP_LECAM_DEV, GF_CU_P(dy), GF_CU_P(value), GF_CU_P(st), GF_CU_P(out), n,
	                   (uint64_t)fake, (uint64_t)acc);
	if (rc < 0)
		return rc;
	gf_cu_dyn v;
	memset(&v, 0, sizeof(v));
	v.lecam.lambda = lambda;
	v.lecam.scale = scale;
	const gf_cu_dyn *dp;
	TRY(gf_cu_dyn_slot(c, &v, &dp));
	if (rc == GF_CU_SKIP)
		return 0;
	CU_LAUNCH(gf_cu_lecam_launch(c->stream, dy, value, st, out, n, fake, lambda, scale, acc, dp));
	return 0;
}

int gf_cu_lecam_avg(gf_backend *be, double *st, float decay, int last)
{
	gf_cuda *c = gf_cu(be);
	ENTER(c);
	int rc = GF_CU_SIG(c, GF_CU_OP_LECAM_AVG, GF_CU_P(st), gf_cu_fbits(decay), (uint64_t)last);
	if (rc)
		return rc == GF_CU_SKIP ? 0 : rc;
	CU_LAUNCH(gf_cu_lecam_avg_launch(c->stream, st, decay, last));
	return 0;
}

int gf_cu_ada_signs(gf_backend *be, double *st, const float *out, size_t n, float mid)
{
	gf_cuda *c = gf_cu(be);
	ENTER(c);
	int rc = GF_CU_SIG(c, GF_CU_OP_ADA_SIGNS, GF_CU_P(st), GF_CU_P(out), n, gf_cu_fbits(mid));
	if (rc)
		return rc == GF_CU_SKIP ? 0 : rc;
	CU_LAUNCH(gf_cu_ada_signs_launch(c->stream, st, out, n, mid));
	return 0;
}

int gf_cu_ada_update(gf_backend *be, float *p, double *st, double *out, double images, int interval, double target,
                     double kimg)
{
	gf_cuda *c = gf_cu(be);
	ENTER(c);
	int rc = GF_CU_SIG(c, GF_CU_OP_ADA_UPDATE, GF_CU_P(p), GF_CU_P(st), GF_CU_P(out), (uint64_t)interval,
	                   dbits(target), dbits(kimg));
	if (rc < 0)
		return rc;
	gf_cu_dyn v;
	memset(&v, 0, sizeof(v));
	v.ada.images = images;
	const gf_cu_dyn *dp;
	TRY(gf_cu_dyn_slot(c, &v, &dp));
	if (rc == GF_CU_SKIP)
		return 0;
	CU_LAUNCH(gf_cu_ada_update_launch(c->stream, p, st, out, images, interval, target, kimg, dp));
	return 0;
}

int gf_cu_penalty_factors(gf_backend *be, float *f, double *out, double *center_st, const float *sq, int b,
                          int max_batch, int npts, const gf_penalty_desc *d)
{
	gf_cuda *c = gf_cu(be);
	ENTER(c);
	int rc = GF_CU_SIG(c, GF_CU_OP_PENALTY_FACTORS, GF_CU_P(f), GF_CU_P(out), GF_CU_P(center_st), GF_CU_P(sq),
	                   (uint64_t)b, (uint64_t)max_batch, (uint64_t)npts, (uint64_t)d->distance, dbits(d->center),
	                   dbits(d->decay), (uint64_t)d->split);
	if (rc < 0)
		return rc;
	gf_cu_dyn v;
	memset(&v, 0, sizeof(v));
	v.pen.weight = d->weight;
	v.pen.scale = d->scale;
	v.pen.weight2 = d->weight2;
	const gf_cu_dyn *dp;
	TRY(gf_cu_dyn_slot(c, &v, &dp));
	if (rc == GF_CU_SKIP)
		return 0;
	CU_LAUNCH(gf_cu_penalty_launch(c->stream, f, out, center_st, sq, b, max_batch, npts, d->distance, d->weight,
	                               d->center, d->decay, d->scale, d->split, d->weight2, dp));
	return 0;
}
