/* g_step's path-length penalty (StyleGAN2, `pl` = w; docs/train.md
 * "Gradient penalties"): on a batch of max(1, batch / 2) fresh z, the
 * lengths L_i = |J_z^T y_i| of G's input gradient for y ~ N(0, I) /
 * sqrt(H W) (the engine's double backward, gf_penalty), or for a G whose
 * table names penalty points (StyleGAN2's: its ws) the RMS over the ws of
 * the gradients there, sqrt(mean_k |J_wk^T y_i|^2) as StyleGAN2-ADA's
 * loss.py; their mean folded into an exponential moving average a (decay
 * pl_decay, checkpointed as "<instance>.pl_mean") and the penalty
 * w mean (L_i - a)^2. z, labels and y come from the noise generator. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/dist.h>
#include <ganflow/err.h>
#include <ganflow/params.h>

#include "g_step.h"

/* pl, pl_every, pl_decay: the penalty's buffers and its mean, once G exists. */
int g_pl_setup(gstep *s, gf_ctx *ctx, const gf_value *p)
{
	s->pl = (float)gf_param_num(p, "pl");
	s->pl_every = (int)gf_param_int(p, "pl_every");
	s->pl_decay = (float)gf_param_num(p, "pl_decay");
	if (s->pl <= 0)
		return 0;
	if (s->paired)
		return gf_fail(ctx, "parameter 'pl': the path length is a penalty on G's Jacobian with respect to its noise (or "
		                    "its ws); "
		                    "a paired (pix2pix) G takes images");
	s->pl_batch = s->batch / 2 > 0 ? s->batch / 2 : 1;
	if (gf_penalty_create(&s->pen, s->g, s->batch))
		return gf_fail(ctx, "parameter 'pl': G (net): %s", gf_errmsg());
	gf_tensor out;
	gf_net_shapes(s->g, NULL, &out);
	s->pl_n = (size_t)gf_tensor_numel(&out) / (size_t)out.shape[0];
	double hw = out.ndim == 4 ? (double)out.shape[2] * (double)out.shape[3] : (double)s->pl_n;
	s->pl_scale = (float)(1.0 / sqrt(hw));
	size_t n = (size_t)s->pl_batch * s->pl_n;
	if (!(s->pl_y = malloc(n * sizeof(float))) || s->be->ops->alloc(s->be, (void **)&s->pl_dev, n * sizeof(float)))
		return gf_fail(ctx, "out of memory");
	int64_t bits = 0;
	int rc = gf_train_resume_i64(ctx, "pl_mean", &bits, 1);
	memcpy(&s->pl_mean, &bits, sizeof(bits)); /* 0.0 on a fresh run */
	return rc;
}

/* The path-length penalty on a batch of its own (pl_batch fresh z, drawn
 * on the host from the noise generator), times gain, into G's gradients
 * (written: the caller adds the adversarial ones after it, or updates with
 * it alone). */
int g_pl_step(gstep *s, gf_ctx *ctx, double gain, double *value)
{
	int n = s->pl_batch;
	size_t nz = (size_t)n * (size_t)s->zdim, ny = (size_t)n * s->pl_n;
	const gf_run_info *run = gf_ctx_run(ctx);
	int sliced = gf_trainer_sliced(s->tr), rank = sliced ? run->rank : 0, world = sliced ? run->world : 1;
	if (sliced)
		gf_dist_normal_slice(&s->noise, s->z, nz, rank, world);
	else
		gf_rng_normal(&s->noise, s->z, nz, 0.0f, 1.0f);
	gf_labels_draw(s->draw, &s->noise, s->labels, n, rank, world);
	gf_rng_normal(&s->noise, s->pl_y, ny, 0.0f, s->pl_scale);
	gf_backend *be = s->be;
	int64_t zs[2] = { n, s->zdim };
	gf_tensor z = gf_tensor_make(s->z_dev, GF_F32, 2, zs), lab = g_lab_tensor(s, n);
	z.device = be->device;
	z.device_index = be->device_index;
	double mean;
	int rc = be->ops->copy(be, s->z_dev, s->z, nz * sizeof(float), GF_COPY_H2D);
	if (!rc && s->classes)
		rc = be->ops->copy(be, s->lab_dev, s->labels, (size_t)n * sizeof(int32_t), GF_COPY_H2D);
	if (!rc)
		rc = be->ops->copy(be, s->pl_dev, s->pl_y, ny * sizeof(float), GF_COPY_H2D);
	if (!rc)
		rc = gf_net_forward(s->g, &z, s->classes ? &lab : NULL, GF_TRAIN);
	if (!rc)
		rc = gf_penalty_lengths(s->pen, s->pl_dev, &mean);
	if (rc)
		return gf_fail(ctx, "step %lld: path length: %s", (long long)s->step, gf_errmsg());
	/* StyleGAN2: the mean moves first, the penalty is around the new mean */
	s->pl_mean += s->pl_decay * (mean - s->pl_mean);
	rc = gf_penalty_apply(s->pen, GF_PENALTY_DISTANCE, s->pl, s->pl_mean, gain, NULL, GF_NEED_DW, value);
	if (rc == GF_ESTOP || rc == GF_EFAIL)
		return rc;
	if (rc)
		return gf_fail(ctx, "step %lld: path length: %s", (long long)s->step, gf_errmsg());
	if (!isfinite(*value))
		return gf_fail(ctx, "step %lld: the path-length penalty is %g (non-finite); the last good checkpoint is kept",
		               (long long)s->step, *value);
	return 0;
}
