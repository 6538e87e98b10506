/* d_step's regularisers (see d_step.c for the step they join).
 *
 * Regularisers: `ortho` (the trainer's), and LeCam (Tseng et al. 2021,
 * `lecam` = lambda): lambda (mean relu(D(x) - a_fake)^2 + mean relu(a_real
 * - D(G(z)))^2) with a_real, a_fake exponential moving averages (decay
 * `lecam_decay`) of D's mean outputs over the previous D steps (the first
 * step sets them and adds nothing), scaled like the two halves of D's loss
 * (1/2 each) and checkpointed as "<instance>.lecam".
 *
 * Gradient penalties (docs/train.md "Gradient penalties"), through the nn
 * engine's double backward (gf_penalty, gf_net_backward2), each weighted
 * like the halves of D's loss (1/2 each), so gamma and lambda mean what
 * they mean in their papers relative to D's adversarial loss:
 *  - `r1` = gamma: gamma/2 E|grad_x D(x)|^2 on the real batches (Mescheder
 *    et al. 2018). r1_every = 1: in every D step, in the real half-step's
 *    own backward. r1_every = k > 1: StyleGAN2's lazy regularisation, a
 *    step of its own (a second forward of the step's real batch, the
 *    penalty times k, an optimiser update) after every k-th D step, with
 *    Adam's lr and betas adjusted (gf_penalty_adam_ratio).
 *  - `gp` = lambda (WGAN-GP, Gulrajani et al. 2017, loss = "wgan"): lambda
 *    E(|grad D(x^)| - 1)^2 on x^ = x_f + e (x - x_f), e ~ U(0, 1) per
 *    sample from the stage's own generator (checkpointed as
 *    "<instance>.gp_rng"), in every D step; a conditional D sees the real
 *    batch's labels.
 *  - `r2` = gamma: gamma/2 E|grad_x D(G(z))|^2 on the fakes, in every D
 *    step, in the fake half-step's backward (Mescheder et al.'s R2).
 *  - loss = "rpgan" (R3GAN, Huang et al. 2024): the real and the fake batch
 *    go through D as one pair batch [x; G(z)] (D must have no batch
 *    statistics: R3GAN's has none), the relativistic loss scores the pairs
 *    (mean softplus(-(D(x_i) - D(G(z_i))))), and R1 on the reals and R2
 *    on the fakes (R3GAN's gamma/2 (R1 + R2) with r1 = r2 = gamma) are one
 *    walk of the double backward, weighted 1 (the pair loss is not split
 *    into halves).
 * Their values go to the metrics as r1, r2 and gp.
 *
 * ADA (StyleGAN2-ADA, docs/train.md "ADA"): when D's table holds an `ada`
 * layer (its augmentation of every image D sees), d_step adjusts that
 * layer's probability p (its buffer "p", which travels to g_step's
 * replica with D's weights and is checkpointed with D) from the signs of
 * D's outputs on the real batches (gf_ada: ada_target, ada_interval,
 * ada_kimg). ada_p and ada_rt go to the metrics; the controller's partial
 * interval is checkpointed as "<instance>.ada".
 *
 * On a GPU all of it stays inside the captured steps (docs/cuda.md
 * "Nothing eager"): LeCam's averages, ADA's sign sums and counts live in a
 * few device doubles (rst) that backend ops update (lecam_dev, lecam_avg,
 * ada_signs, ada_update), the penalties' per-sample factors come from a
 * kernel (gf_penalty, penalty_factors) and land their values in the step's
 * result slots, WGAN-GP's interpolation weights are drawn on the device,
 * and the lazy R1 step is a captured step of its own. The host reads p,
 * r_t and the penalties a step later with the losses, for the metrics, and
 * the state at checkpoints (read points).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>
#include <ganflow/params.h>

#include "d_step.h"

/* ADA: the ada layer of D, its p, the controller's options, its state
 * (restored) into the device doubles. The options' ranges are checked by
 * the runtime (d_step.c's table). */
int d_ada_setup(dstep *s, gf_ctx *ctx, const gf_value *p)
{
	char key[64], view[96];
	int n = gf_net_count_type(s->d, "ada", key, sizeof(key));
	if (n == 0) /* ada_* unused, as r1_every without r1 */
		return 0;
	if (n > 1)
		return gf_fail(ctx, "parameter 'net': D has %d ada layers; d_step adjusts the p of one", n);
	s->ada.target = gf_param_num(p, "ada_target");
	s->ada.interval = (int)gf_param_int(p, "ada_interval");
	s->ada.kimg = gf_param_num(p, "ada_kimg");
	s->ada.rt = NAN;
	snprintf(view, sizeof(view), "%s.p", key);
	size_t nv;
	const gf_view *v = gf_net_views(s->d, GF_BUFFERS, &nv);
	for (size_t i = 0; i < nv && !s->ada_p; i++)
		if (!strcmp(v[i].name, view))
			s->ada_p = gf_net_block(s->d, GF_BUFFERS, NULL) + v[i].offset;
	if (!s->ada_p)
		return gf_fail(ctx, "parameter 'net': D's ada layer has no buffer '%s'", view);
	int64_t st[5];
	gf_ada_save(&s->ada, st);
	int rc = gf_train_resume_i64(ctx, "ada", st, 5); /* after gf_trainer_resume: p is D's, restored */
	if (rc)
		return rc;
	gf_ada_load(&s->ada, st);
	return 0;
}

/* The state of LeCam and ADA between the host structures (checkpoints,
 * resume) and the device doubles the steps update: to the device
 * (to_dev), or back (a read point: nothing of the step is in flight). */
int d_reg_state(dstep *s, gf_ctx *ctx, int to_dev)
{
	double st[RST_N];
	const gf_backend_ops *o = s->be->ops;
	int rc;
	if (!to_dev) {
		if ((rc = o->copy(s->be, st, s->rst, sizeof(st), GF_COPY_D2H)))
			return gf_fail(ctx, "iteration %lld: LeCam/ADA state: %s", (long long)s->v, gf_errmsg());
		s->lecam.set = st[RST_LECAM] != 0;
		s->lecam.ema[0] = st[RST_LECAM + 1];
		s->lecam.ema[1] = st[RST_LECAM + 2];
		s->ada.signs = (int64_t)st[RST_ADA];
		s->ada.count = (int64_t)st[RST_ADA + 1];
		s->ada.images = (int64_t)st[RST_ADA + 2];
		s->ada.steps = (int64_t)st[RST_ADA + 3];
		s->ada.rt = st[RST_ADA + 4];
		return 0;
	}
	memset(st, 0, sizeof(st));
	st[RST_LECAM] = s->lecam.set;
	st[RST_LECAM + 1] = s->lecam.ema[0];
	st[RST_LECAM + 2] = s->lecam.ema[1];
	st[RST_ADA] = (double)s->ada.signs;
	st[RST_ADA + 1] = (double)s->ada.count;
	st[RST_ADA + 2] = (double)s->ada.images;
	st[RST_ADA + 3] = (double)s->ada.steps;
	st[RST_ADA + 4] = s->ada.rt;
	if ((rc = o->copy(s->be, s->rst, st, sizeof(st), GF_COPY_H2D)))
		return gf_fail(ctx, "LeCam/ADA state: %s", gf_errmsg());
	return 0;
}

/* The ops that end a D step, in the last captured step of it (its last
 * micro-step's, or the lazy R1 step's): ADA's p moves every ada_interval
 * steps (its value and r_t into the step's slots), LeCam's averages take
 * the step's means (the iteration's last D step: their sums restart). */
int d_step_tail(dstep *s, gf_ctx *ctx, double images, int last_of_iter, gf_stepdrv_entry *e)
{
	const gf_backend_ops *o = s->be->ops;
	double *slot = gf_stepdrv_slots(s->drv);
	int rc = 0;
	if (s->ada_p) {
		rc = o->ada_update(s->be, s->ada_p, s->rst + RST_ADA, slot + V_ADA_P, images, s->ada.interval, s->ada.target,
		                   s->ada.kimg);
		e->flags |= F_ADA;
	}
	if (!rc && s->lecam_on)
		rc = o->lecam_avg(s->be, s->rst + RST_LECAM, s->lecam.decay, last_of_iter);
	return rc ? gf_fail(ctx, "iteration %lld: LeCam/ADA: %s", (long long)s->v, gf_errmsg()) : 0;
}

int d_schedules(dstep *s, gf_ctx *ctx)
{
	double nimg = gf_trainer_images(s->tr, s->v);
	float *w[] = { &s->r1, &s->r2, &s->gp, &s->lecam.lambda }; /* gf_train_d_schedules' order */
	for (int i = 0; i < 4; i++) {
		const gf_schedule *x = gf_trainer_schedule(s->tr, gf_train_d_schedules[i]);
		if (x)
			*w[i] = (float)gf_schedule_at(x, nimg);
	}
	const gf_schedule *x = gf_trainer_schedule(s->tr, "ada_p");
	if (!x)
		return 0;
	float p = (float)gf_schedule_at(x, nimg);
	p = p < 0 ? 0 : p > 1 ? 1 : p;
	int rc = s->be->ops->copy(s->be, s->ada_p, &p, sizeof(p), GF_COPY_H2D);
	return rc ? gf_fail(ctx, "iteration %lld: ada_p: %s", (long long)s->v, gf_errmsg()) : 0;
}

/* After set-up: a scheduled option must be on (its switch, the plain
 * parameter, > 0); R3GAN's pairs share a label. */
int d_setup_check(dstep *s, gf_ctx *ctx)
{
	if (s->pair && s->async && s->classes) /* cached fakes carry another real batch's labels */
		return gf_fail(ctx, "loss = \"rpgan\" with mode = \"async\" and a conditional D: a pair must share its "
		                    "label, and async D steps pair real batches with cached fakes made for other ones; "
		                    "use mode = \"sync\"");
	const int on[] = { s->r1_on, s->r2_on, s->gp_on, s->lecam_on };
	for (int i = 0; i < 4; i++) {
		int rc = gf_trainer_schedule_on(s->tr, gf_train_d_schedules[i], on[i]);
		if (rc)
			return rc;
	}
	if (gf_trainer_schedule(s->tr, "ada_p")) {
		if (!s->ada_p)
			return gf_fail(ctx, "parameter 'schedule': ada_p is scheduled but D has no ada layer");
		s->ada.kimg = 0; /* the schedule moves p, not the controller (r_t is still measured) */
	}
	return 0;
}

/* r1, r1_every, gp: what they may be combined with. */
int d_penalty_conf(dstep *s, gf_ctx *ctx, const gf_value *p)
{
	s->r1 = (float)gf_param_num(p, "r1");
	s->r2 = (float)gf_param_num(p, "r2");
	s->r1_every = (int)gf_param_int(p, "r1_every");
	s->gp = (float)gf_param_num(p, "gp");
	s->r1_on = s->r1 > 0;
	s->r2_on = s->r2 > 0;
	s->gp_on = s->gp > 0;
	s->pair = s->loss.d == GF_LOSS_RELATIVISTIC;
	if (s->pair) /* R3GAN: R1 and R2 in every D step, on the pair batch */
		s->r1_every = 1;
	if (s->pair && gf_param_num(p, "lecam") > 0)
		return gf_fail(ctx, "parameter 'lecam': LeCam's averages are of D's real and fake outputs apart; loss = "
		                    "\"rpgan\" scores pairs (R3GAN has no LeCam term)");
	if (s->gp_on && s->loss.d != GF_LOSS_WGAN)
		return gf_fail(ctx, "parameter 'gp': WGAN-GP's penalty pulls the critic's gradient norm to 1, which belongs "
		                    "with loss = \"wgan\" (the critic's unbounded output); loss = \"%s\" here: use r1 = "
		                    "gamma for it",
		               gf_param_str(p, "loss"));
	if (s->r1_on && s->r1_every > 1 && s->acc > 1)
		return gf_fail(ctx, "parameter 'r1_every': the lazy R1 step (r1_every = %d) reuses the D step's real batch, "
		                    "one of accumulate = %d micro-batches; use r1_every = 1 with accumulate",
		               s->r1_every, s->acc);
	return 0;
}

/* The penalty's buffers and generator, once D and its input buffers
 * exist; the device doubles of LeCam and ADA. */
int d_penalty_setup(dstep *s, gf_ctx *ctx)
{
	gf_backend *be = s->be;
	if (be->ops->alloc(be, (void **)&s->rst, RST_N * sizeof(double)) ||
	    be->ops->fill(be, (float *)(void *)s->rst, 2 * RST_N, 0.0f))
		return gf_fail(ctx, "out of memory");
	if (s->pair) { /* [x; G(z)] in one buffer, labels too */
		size_t n = 2 * (size_t)s->max_batch;
		if (be->ops->alloc(be, (void **)&s->pair_dev, n * s->in_numel * sizeof(float)) ||
		    be->ops->alloc(be, (void **)&s->pair_lab, n * sizeof(int32_t)))
			return gf_fail(ctx, "out of memory for the pair batch");
	}
	if (!s->r1_on && !s->r2_on && !s->gp_on)
		return 0;
	if (gf_penalty_create(&s->pen, s->d, s->pair ? 2 * s->max_batch : s->max_batch))
		return gf_fail(ctx, "parameter '%s': D (net): %s", s->r1_on ? "r1" : s->r2_on ? "r2" : "gp", gf_errmsg());
	if (!s->gp_on)
		return 0;
	if (be->ops->alloc(be, (void **)&s->eps_dev, (size_t)s->max_batch * sizeof(float)) ||
	    be->ops->alloc(be, (void **)&s->xhat_dev, (size_t)s->max_batch * s->in_numel * sizeof(float)))
		return gf_fail(ctx, "out of memory for WGAN-GP's interpolates");
	gf_rng_init(&s->gp_rng, gf_ctx_run(ctx)->seed, gf_train_stream(ctx, "gp"));
	return gf_train_resume_rng(ctx, "gp_rng", &s->gp_rng);
}

/* The penalty of D's last forward, weighted like a half of D's loss (1/2,
 * over the micro-batches) times gain, its gradient added to D's (or
 * written: accumulate 0), with dy (may be NULL) walked in the same pass;
 * its value and mean length into out (2 device doubles: result slots). */
int d_penalty(dstep *s, gf_ctx *ctx, int distance, float weight, double gain, const float *dy, unsigned accumulate,
              double *out)
{
	gf_penalty_desc d = { .distance = distance, .weight = weight, .center = 1.0, .scale = 0.5 * gain / s->acc };
	int rc = gf_penalty_lengths(s->pen, NULL);
	if (!rc)
		rc = gf_penalty_apply(s->pen, &d, NULL, out, dy, GF_NEED_DW | accumulate);
	if (rc == GF_ESTOP || rc == GF_EFAIL)
		return rc;
	return rc ? gf_fail(ctx, "iteration %lld: %s penalty: %s", (long long)s->v, distance ? "gradient" : "R1",
	                    gf_errmsg())
	          : 0;
}

int d_pair_penalty(dstep *s, gf_ctx *ctx, int64_t n, const float *dy, unsigned accumulate)
{
	gf_penalty_desc d = { .distance = GF_PENALTY_SQUARE, .weight = s->r1, .scale = 1.0 / s->acc, .split = (int)n,
	                      .weight2 = s->r2 };
	int rc = gf_penalty_lengths(s->pen, NULL);
	if (!rc)
		rc = gf_penalty_apply(s->pen, &d, NULL, gf_stepdrv_slots(s->drv) + V_R1, dy, GF_NEED_DW | accumulate);
	if (rc == GF_ESTOP || rc == GF_EFAIL)
		return rc;
	return rc ? gf_fail(ctx, "iteration %lld: R1 + R2 penalty: %s", (long long)s->v, gf_errmsg()) : 0;
}

/* WGAN-GP on one micro-batch, on the device: x^ = x_f + e (x - x_f) per
 * sample (e drawn on the device from the stage's generator), D's gradient
 * norm there pulled to 1; its value into the GP slots. */
int d_gp_step(dstep *s, gf_ctx *ctx, const gf_tensor *xr, const gf_tensor *lr, const gf_tensor *xf)
{
	int64_t n = xr->shape[0] < xf->shape[0] ? xr->shape[0] : xf->shape[0];
	size_t k = s->in_numel, all = (size_t)n * k;
	const gf_backend_ops *o = s->be->ops;
	gf_rng eps = s->gp_rng;
	s->gp_rng.offset += gf_rng_blocks((size_t)n); /* the host's draw, made by the device */
	int rc = o->rng_uniform(s->be, s->eps_dev, (size_t)n, 0.0f, 1.0f, &eps);
	if (!rc)
		rc = o->copy(s->be, s->xhat_dev, xr->data, all * sizeof(float), GF_COPY_D2D);
	if (!rc)
		rc = o->axpy(s->be, s->xhat_dev, xf->data, all, -1.0f);
	if (!rc)
		rc = o->row_scale(s->be, s->xhat_dev, s->eps_dev, s->xhat_dev, (int)n, (int)k, 0);
	if (!rc)
		rc = o->axpy(s->be, s->xhat_dev, xf->data, all, 1.0f);
	if (rc)
		return gf_fail(ctx, "iteration %lld: WGAN-GP's interpolates: %s", (long long)s->v, gf_errmsg());
	gf_tensor xh = *xr, lab = *lr;
	xh.data = s->xhat_dev;
	xh.shape[0] = n;
	lab.shape[0] = n;
	if ((rc = gf_net_forward(s->d, &xh, s->classes ? &lab : NULL, GF_TRAIN)))
		return gf_fail(ctx, "iteration %lld: D forward on the interpolates: %s", (long long)s->v, gf_errmsg());
	return d_penalty(s, ctx, GF_PENALTY_DISTANCE, s->gp, 1.0, NULL, GF_ACCUMULATE, gf_stepdrv_slots(s->drv) + V_GP);
}

/* StyleGAN2's lazy R1 (gf_stepdrv_run's ops, a captured step of its own):
 * after D step `step` (counted over the run) when step % r1_every == 0, on
 * that step's real batch (still in real_dev): the penalty times r1_every
 * (its value into the R1 slots), an optimiser update (its norm too); and
 * the D step's tail when it ends the D step. */
int d_r1_lazy_ops(void *self, gf_ctx *ctx, void *arg)
{
	dstep *s = self;
	d_lazy *a = arg;
	double *slot = gf_stepdrv_slots(s->drv);
	gf_tensor x = d_dev_tensor(s, s->real_dev, 0, s->r1_n), lab = d_dev_tensor(s, s->rlab_dev, 1, s->r1_n);
	int rc = gf_net_forward(s->d, &x, s->classes ? &lab : NULL, GF_TRAIN);
	if (rc)
		return gf_fail(ctx, "iteration %lld: D forward (R1): %s", (long long)s->v, gf_errmsg());
	gf_trainer_arm(s->tr, s->v); /* data parallel: buckets leave during the double backward's walk */
	if ((rc = d_penalty(s, ctx, GF_PENALTY_SQUARE, s->r1, s->r1_every, NULL, 0, slot + V_R1)))
		return rc;
	a->e->flags |= F_LAZY;
	if (a->host_update) {
		rc = gf_trainer_update(s->tr, s->v, NULL);
	} else {
		a->e->flags |= F_NORM;
		rc = gf_trainer_update_dev(s->tr, s->v, slot + V_SUMSQ);
	}
	return rc ? rc : d_step_tail(s, ctx, a->images, a->last_of_iter, a->e);
}

/* The lazy R1 step after a D step , captured as
 * a step of its own; it ends the D step (ADA, LeCam). */
int d_lazy_step(dstep *s, gf_ctx *ctx, int last_of_iter, double images)
{
	gf_stepdrv_entry e = { .step = s->v };
	d_lazy a = { !gf_trainer_update_on_device(s->tr), last_of_iter, images, &e };
	int tail = s->ada_p || s->lecam_on;
	uint64_t key = (uint64_t)s->r1_n | (uint64_t)1 << 40 | (uint64_t)tail << 41 | (uint64_t)(tail && a.last_of_iter) << 42 |
	               gf_trainer_update_key(s->tr, s->v) << 43;
	int rc;
	if ((rc = gf_stepdrv_begin(s->drv, ctx)) ||
	    (rc = gf_stepdrv_run(s->drv, ctx, s->v, "D step (lazy R1)", key, a.host_update, d_r1_lazy_ops, &a)))
		return rc;
	return gf_stepdrv_push(s->drv, ctx, &e);
}

/* ---- R3GAN's pair batch ---- */

/* R3GAN's pair batch (loss = "rpgan"): [x; G(z)] through D at once, the
 * relativistic loss on the pairs of its outputs (their sums apart, for
 * d_real and d_fake), ADA's signs on the reals, and R1 + R2 or the plain
 * backward in the same walk. *nout: D's outputs of one half. */
int d_pair_step(dstep *s, gf_ctx *ctx, int64_t n, unsigned accumulate, size_t *nout)
{
	double *slot = gf_stepdrv_slots(s->drv);
	const gf_backend_ops *o = s->be->ops;
	size_t k = s->in_numel * sizeof(float), lb = (size_t)n * sizeof(int32_t);
	int rc = o->copy(s->be, s->pair_dev, s->real_dev, (size_t)n * k, GF_COPY_D2D);
	if (!rc)
		rc = o->copy(s->be, s->pair_dev + (size_t)n * s->in_numel, s->fake_dev, (size_t)n * k, GF_COPY_D2D);
	if (!rc && s->classes && !(rc = o->copy(s->be, s->pair_lab, s->rlab_dev, lb, GF_COPY_D2D)))
		rc = o->copy(s->be, s->pair_lab + n, s->flab_dev, lb, GF_COPY_D2D);
	gf_tensor x = d_dev_tensor(s, s->pair_dev, 0, 2 * n), lab = d_dev_tensor(s, s->pair_lab, 1, 2 * n), out;
	if (!rc)
		rc = gf_net_forward(s->d, &x, s->classes ? &lab : NULL, GF_TRAIN);
	if (rc)
		return gf_fail(ctx, "iteration %lld: D forward on the pairs: %s", (long long)s->v, gf_errmsg());
	gf_net_output(s->d, &out);
	if ((rc = gf_trainer_loss_dev(s->tr, s->v, s->loss.d, &out, NULL, s->loss.real, 1.0f / (float)s->acc, s->dpred,
	                              (float *)(void *)(slot + V_LOSS_REAL))))
		return rc;
	size_t h = (size_t)gf_tensor_numel(&out) / 2;
	*nout = h;
	if ((rc = o->reduce_dev(s->be, slot + V_SUM_REAL, out.data, h, 0)) ||
	    (rc = o->reduce_dev(s->be, slot + V_SUM_FAKE, (float *)out.data + h, h, 0)))
		return gf_fail(ctx, "iteration %lld: D's mean outputs: %s", (long long)s->v, gf_errmsg());
	if (s->ada_p && (rc = o->ada_signs(s->be, s->rst + RST_ADA, out.data, h, 0.0f)))
		return gf_fail(ctx, "iteration %lld: ada: %s", (long long)s->v, gf_errmsg());
	if (s->r1_on || s->r2_on)
		return d_pair_penalty(s, ctx, n, s->dpred, accumulate);
	if ((rc = gf_net_backward(s->d, s->dpred, GF_NEED_DW | accumulate)))
		return rc == GF_ESTOP || rc == GF_EFAIL
		           ? rc
		           : gf_fail(ctx, "iteration %lld: D backward: %s", (long long)s->v, gf_errmsg());
	return 0;
}
