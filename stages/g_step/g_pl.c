/* g_step's path-length penalty (StyleGAN2, `pl` = w; docs/train.md
 * "Gradient penalties"): on a batch of max(1, batch / 2) fresh z, the
 * lengths L_i = |J_z^T y_i| of G's input gradient for y ~ N(0, I) /
 * sqrt(H W) (the engine's double backward, gf_penalty), or for a G whose
 * table names penalty points (StyleGAN2's: its ws) the RMS over the ws of
 * the gradients there, sqrt(mean_k |J_wk^T y_i|^2) as StyleGAN2-ADA's
 * loss.py; their mean folded into an exponential moving average a (decay
 * pl_decay, checkpointed as "<instance>.pl_mean") and the penalty
 * w mean (L_i - a)^2. z, labels and y come from the noise generator.
 *
 * All of it is one captured step (docs/cuda.md "Nothing eager"): z and y
 * drawn on the device from copies of the generator (the host's draws, made
 * there), the lengths, their mean and the moving mean a (a device double)
 * and the factors by the backend's penalty_factors; the penalty, the batch
 * mean and a land in the step's slots, read with its results. */
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
		                    "its ws); a paired (pix2pix) G takes images");
	s->pl_batch = s->batch / 2 > 0 ? s->batch / 2 : 1;
	if (gf_penalty_create(&s->pen, s->g, s->batch))
		return gf_fail(ctx, "parameter 'pl': G (net): %s", gf_errmsg());
	gf_tensor out;
	gf_net_shapes(s->g, NULL, &out);
	s->pl_n = (size_t)gf_tensor_numel(&out) / (size_t)out.shape[0];
	double hw = out.ndim == 4 ? (double)out.shape[2] * (double)out.shape[3] : (double)s->pl_n;
	s->pl_scale = (float)(1.0 / sqrt(hw));
	size_t n = (size_t)s->pl_batch * s->pl_n;
	gf_backend *be = s->be;
	if (be->ops->alloc(be, (void **)&s->pl_dev, n * sizeof(float)) ||
	    be->ops->alloc(be, (void **)&s->pl_mean_dev, sizeof(double)))
		return gf_fail(ctx, "out of memory");
	int64_t bits = 0;
	int rc = gf_train_resume_i64(ctx, "pl_mean", &bits, 1);
	double mean;
	memcpy(&mean, &bits, sizeof(bits)); /* 0.0 on a fresh run */
	if (!rc && (rc = be->ops->copy(be, s->pl_mean_dev, &mean, sizeof(mean), GF_COPY_H2D)))
		return gf_fail(ctx, "parameter 'pl': %s", gf_errmsg());
	return rc;
}

/* The moving mean's bits, for a checkpoint (a read point). */
int g_pl_mean(gstep *s, gf_ctx *ctx, int64_t *bits)
{
	double mean = 0;
	int rc = s->be->ops->copy(s->be, &mean, s->pl_mean_dev, sizeof(mean), GF_COPY_D2H);
	memcpy(bits, &mean, sizeof(mean));
	return rc ? gf_fail(ctx, "step %lld: path length: %s", (long long)s->step, gf_errmsg()) : 0;
}

/* What the captured path-length step needs from the host. */
struct pl {
	int n, sliced, update;
	double gain;
	gf_rng z_rng, y_rng;
	gf_stepdrv_entry *e;
};

/* The ops: z (unless sliced: uploaded) and y drawn, G forward, the
 * penalty and its gradient (written), and for a step of its own the
 * update. */
static int pl_ops(void *self, gf_ctx *ctx, void *arg)
{
	gstep *s = self;
	struct pl *a = arg;
	gf_backend *be = s->be;
	double *slot = gf_stepdrv_slots(s->drv);
	size_t nz = (size_t)a->n * (size_t)s->zdim, ny = (size_t)a->n * s->pl_n;
	int64_t zs[2] = { a->n, s->zdim };
	gf_tensor z = gf_tensor_make(s->z_dev, GF_F32, 2, zs), lab = g_lab_tensor(s, a->n);
	z.device = be->device;
	z.device_index = be->device_index;
	/* StyleGAN2: the mean moves first, the penalty is around the new mean */
	gf_penalty_desc d = { .distance = GF_PENALTY_DISTANCE, .weight = s->pl, .decay = s->pl_decay, .scale = a->gain };
	int rc = a->sliced ? 0 : be->ops->rng_normal(be, s->z_dev, nz, 0.0f, 1.0f, &a->z_rng);
	if (!rc)
		rc = be->ops->rng_normal(be, s->pl_dev, ny, 0.0f, s->pl_scale, &a->y_rng);
	if (!rc)
		rc = gf_net_forward(s->g, &z, s->classes ? &lab : NULL, GF_TRAIN);
	if (!rc)
		rc = gf_penalty_lengths(s->pen, s->pl_dev);
	if (!rc)
		rc = gf_penalty_apply(s->pen, &d, s->pl_mean_dev, slot + V_PL, NULL, GF_NEED_DW);
	if (!rc)
		rc = be->ops->copy(be, slot + V_PL_MEAN, s->pl_mean_dev, sizeof(double), GF_COPY_D2D);
	if (rc == GF_ESTOP || rc == GF_EFAIL)
		return rc;
	if (rc)
		return gf_fail(ctx, "step %lld: path length: %s", (long long)s->step, gf_errmsg());
	a->e->flags |= F_PL;
	if (!a->update)
		return 0;
	if (!gf_trainer_update_on_device(s->tr))
		return gf_trainer_update(s->tr, s->step, NULL);
	a->e->flags |= F_NORM;
	return gf_trainer_update_dev(s->tr, s->step, slot + V_SUMSQ);
}

int g_pl_step(gstep *s, gf_ctx *ctx, double gain, int update)
{
	int n = s->pl_batch;
	size_t nz = (size_t)n * (size_t)s->zdim, ny = (size_t)n * s->pl_n;
	const gf_run_info *run = gf_ctx_run(ctx);
	int sliced = gf_trainer_sliced(s->tr), rank = sliced ? run->rank : 0, world = sliced ? run->world : 1;
	gf_stepdrv_entry e = { .step = s->step };
	struct pl a = { n, sliced, update, gain, s->noise, s->noise, &e };
	/* the host's order of draws: z, the labels, y */
	if (sliced)
		gf_dist_normal_slice(&s->noise, s->z, nz, rank, world);
	else
		s->noise.offset += gf_rng_blocks(nz); /* drawn by the step's rng_normal from z_rng */
	gf_labels_draw(s->draw, &s->noise, s->labels, n, rank, world);
	a.y_rng = s->noise;
	s->noise.offset += gf_rng_blocks(ny);
	gf_backend *be = s->be;
	int rc = sliced ? be->ops->copy(be, s->z_dev, s->z, nz * sizeof(float), GF_COPY_H2D) : 0;
	if (!rc && s->classes)
		rc = be->ops->copy(be, s->lab_dev, s->labels, (size_t)n * sizeof(int32_t), GF_COPY_H2D);
	if (rc)
		return gf_fail(ctx, "step %lld: path length: %s", (long long)s->step, gf_errmsg());
	if (update)
		gf_trainer_arm(s->tr, s->step); /* data parallel: buckets leave during the double backward */
	uint64_t key = (uint64_t)n | (uint64_t)sliced << 32 | (uint64_t)update << 33 |
	               (update ? gf_trainer_update_key(s->tr, s->step) : 0) << 34 | (uint64_t)4 << 40;
	if ((rc = gf_stepdrv_begin(s->drv, ctx)) ||
	    (rc = gf_stepdrv_run(s->drv, ctx, s->step, "G step (path length)", key,
	                         update && !gf_trainer_update_on_device(s->tr), pl_ops, &a)))
		return rc;
	return gf_stepdrv_push(s->drv, ctx, &e);
}
