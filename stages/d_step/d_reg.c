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
 * Their values go to the metrics as r1 and gp.
 *
 * ADA (StyleGAN2-ADA, docs/train.md "ADA"): when D's table holds an `ada`
 * layer (its augmentation of every image D sees), d_step adjusts that
 * layer's probability p (its buffer "p", which travels to g_step's
 * replica with D's weights and is checkpointed with D) from the signs of
 * D's outputs on the real batches (gf_ada: ada_target, ada_interval,
 * ada_kimg). ada_p and ada_rt go to the metrics; the controller's partial
 * interval is checkpointed as "<instance>.ada". The signs are read on the
 * host as each real half-step ends, so a D with an ada layer steps eagerly
 * (as with LeCam).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>
#include <ganflow/params.h>

#include "d_step.h"

/* ADA: the ada layer of D, its p, the controller's options and state.
 * The options' ranges are checked by the runtime (the table below). */
int d_ada_setup(dstep *s, gf_ctx *ctx, const gf_value *p, size_t nout)
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
	if (!s->out_host && !(s->out_host = malloc(nout * sizeof(float))))
		return gf_fail(ctx, "out of memory");
	int64_t st[5];
	gf_ada_save(&s->ada, st);
	int rc = gf_train_resume_i64(ctx, "ada", st, 5); /* after gf_trainer_resume: p is D's, restored */
	if (rc)
		return rc;
	gf_ada_load(&s->ada, st);
	if ((rc = s->be->ops->copy(s->be, &s->p, s->ada_p, sizeof(float), GF_COPY_D2H)))
		return gf_fail(ctx, "ada: %s", gf_errmsg());
	return 0;
}

/* After a D step that used `images` real images: p moves every
 * ada_interval steps. */
int d_ada_after_step(dstep *s, gf_ctx *ctx, double images)
{
	if (!s->ada_p || !gf_ada_step(&s->ada, (int64_t)images, &s->p))
		return 0;
	int rc = s->be->ops->copy(s->be, s->ada_p, &s->p, sizeof(float), GF_COPY_H2D);
	return rc ? gf_fail(ctx, "iteration %lld: ada: %s", (long long)s->v, gf_errmsg()) : 0;
}

/* r1, r1_every, gp: what they may be combined with. */
int d_penalty_conf(dstep *s, gf_ctx *ctx, const gf_value *p)
{
	s->r1 = (float)gf_param_num(p, "r1");
	s->r1_every = (int)gf_param_int(p, "r1_every");
	s->gp = (float)gf_param_num(p, "gp");
	if (s->gp > 0 && s->loss.d != GF_LOSS_WGAN)
		return gf_fail(ctx, "parameter 'gp': WGAN-GP's penalty pulls the critic's gradient norm to 1, which belongs "
		                    "with loss = \"wgan\" (the critic's unbounded output); loss = \"%s\" here: use r1 = "
		                    "gamma for it",
		               gf_param_str(p, "loss"));
	if (s->r1 > 0 && s->r1_every > 1 && s->acc > 1)
		return gf_fail(ctx, "parameter 'r1_every': the lazy R1 step (r1_every = %d) reuses the D step's real batch, "
		                    "one of accumulate = %d micro-batches; use r1_every = 1 with accumulate",
		               s->r1_every, s->acc);
	return 0;
}

/* The penalty's buffers and generator, once D and its input buffers exist. */
int d_penalty_setup(dstep *s, gf_ctx *ctx)
{
	if (s->r1 <= 0 && s->gp <= 0)
		return 0;
	if (gf_penalty_create(&s->pen, s->d, s->max_batch))
		return gf_fail(ctx, "parameter '%s': D (net): %s", s->r1 > 0 ? "r1" : "gp", gf_errmsg());
	if (s->gp <= 0)
		return 0;
	gf_backend *be = s->be;
	if (!(s->eps_host = malloc((size_t)s->max_batch * sizeof(float))) ||
	    be->ops->alloc(be, (void **)&s->eps_dev, (size_t)s->max_batch * sizeof(float)) ||
	    be->ops->alloc(be, (void **)&s->xhat_dev, (size_t)s->max_batch * s->in_numel * sizeof(float)))
		return gf_fail(ctx, "out of memory for WGAN-GP's interpolates");
	gf_rng_init(&s->gp_rng, gf_ctx_run(ctx)->seed, gf_train_stream(ctx, "gp"));
	return gf_train_resume_rng(ctx, "gp_rng", &s->gp_rng);
}

/* LeCam's term for one half-step's outputs (copied to the host: LeCam
 * runs eagerly), scaled like its loss: its value added to *reg, its
 * gradient added to dpred. */
int d_lecam_add(dstep *s, const gf_tensor *out, int fake, size_t n, float scale, double *reg)
{
	const gf_backend_ops *o = s->be->ops;
	int rc = o->copy(s->be, s->out_host, out->data, n * sizeof(float), GF_COPY_D2H);
	if (rc)
		return rc;
	*reg += gf_lecam_grad(&s->lecam, s->out_host, n, fake, scale, s->reg_host);
	rc = o->copy(s->be, s->reg_dev, s->reg_host, n * sizeof(float), GF_COPY_H2D);
	return rc ? rc : o->axpy(s->be, s->dpred, s->reg_dev, n, 1.0f);
}

/* The penalty of D's last forward, weighted like a half of D's loss (1/2,
 * over the micro-batches) times gain, its gradient added to D's (or
 * written: accumulate 0), with dy (may be NULL) walked in the same pass. */
int d_penalty(dstep *s, gf_ctx *ctx, gf_penalty_kind kind, float weight, double gain, const float *dy,
                   unsigned accumulate, double *value)
{
	double mean;
	const char *what = kind == GF_PENALTY_SQUARE ? "R1" : "gradient";
	int rc = gf_penalty_lengths(s->pen, NULL, &mean);
	if (!rc)
		rc = gf_penalty_apply(s->pen, kind, weight, 1.0, 0.5 * gain / s->acc, dy, GF_NEED_DW | accumulate, value);
	if (rc == GF_ESTOP || rc == GF_EFAIL)
		return rc;
	if (rc)
		return gf_fail(ctx, "iteration %lld: %s penalty: %s", (long long)s->v, what, gf_errmsg());
	if (!isfinite(*value))
		return gf_fail(ctx, "iteration %lld: the %s penalty is %g (non-finite); the last good checkpoint is kept",
		               (long long)s->v, what, *value);
	return 0;
}

/* WGAN-GP on one micro-batch, on the device: x^ = x_f + e (x - x_f) per
 * sample (e from the stage's generator, on the host), D's gradient norm
 * there pulled to 1. */
int d_gp_step(dstep *s, gf_ctx *ctx, const gf_tensor *xr, const gf_tensor *lr, const gf_tensor *xf,
                   double *value)
{
	int64_t n = xr->shape[0] < xf->shape[0] ? xr->shape[0] : xf->shape[0];
	size_t k = s->in_numel, all = (size_t)n * k;
	const gf_backend_ops *o = s->be->ops;
	gf_rng_uniform(&s->gp_rng, s->eps_host, (size_t)n, 0.0f, 1.0f);
	int rc = o->copy(s->be, s->eps_dev, s->eps_host, (size_t)n * sizeof(float), GF_COPY_H2D);
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
	double v;
	if ((rc = d_penalty(s, ctx, GF_PENALTY_DISTANCE, s->gp, 1.0, NULL, GF_ACCUMULATE, &v)))
		return rc;
	*value += v / s->acc;
	return 0;
}

/* StyleGAN2's lazy R1: after D step `step` (counted over the run) when
 * step % r1_every == 0, a step of its own on that step's real batch (still
 * in real_dev): the penalty times r1_every, an optimiser update; eager,
 * between the graph steps. */
int d_r1_lazy(dstep *s, gf_ctx *ctx, double *value)
{
	gf_tensor x = d_dev_tensor(s, s->real_dev, 0, s->r1_n), lab = d_dev_tensor(s, s->rlab_dev, 1, s->r1_n);
	int rc = gf_net_forward(s->d, &x, s->classes ? &lab : NULL, GF_TRAIN);
	if (rc)
		return gf_fail(ctx, "iteration %lld: D forward (R1): %s", (long long)s->v, gf_errmsg());
	gf_trainer_arm(s->tr, s->v); /* data parallel: buckets leave during the double backward's walk */
	double v;
	if ((rc = d_penalty(s, ctx, GF_PENALTY_SQUARE, s->r1, s->r1_every, NULL, 0, &v)))
		return rc;
	*value += v;
	return gf_trainer_update(s->tr, s->v, NULL);
}
