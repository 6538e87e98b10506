/* d_step: owns the discriminator D and its optimiser.
 *
 * Each D step takes a batch of real images (from the data path) and a batch
 * of fakes (from g_step), runs D on each (separate batch statistics, as a
 * PyTorch loop that calls D twice), sums the gradients of
 * (loss(D(x), real) + loss(D(G(z)), fake)) / 2, clips and updates D. After
 * d_steps D steps (one G step's worth) it sends its weights to g_step.
 *
 * Synchronous mode: the fakes of D iteration v must come from a G that used
 * D's weights of version v (checked), and D sends its weights after every
 * iteration: the alternating G/D schedule of the seed papers, with G's
 * backward and D's step running at the same time on different threads.
 * Asynchronous mode (ParaGAN): D keeps a cache of recent fakes and reuses
 * them instead of waiting for G, sends its weights every `staleness`
 * iterations, and never trains on fakes made with D weights older than
 * `staleness` iterations: the staleness it actually used is recorded.
 *
 * d_step drives the run's progress: it reports its iterations as steps and
 * the real images it consumed; its checkpoint part records the data
 * position of the last real batch it used, so a resumed reader continues
 * exactly there.
 *
 * Data parallel (docs/dist.md): with its `grads` / `reduced` ports joined
 * to an `exchange` stage, D's gradients are all-reduced in buckets during
 * the backward pass of the last fake half-step (or reduce-scattered for
 * ZeRO-1, or the parameters gossiped after the update); every rank reads
 * its own part of the data. Unconnected, nothing changes. `lr_warmup`
 * ramps the learning rate linearly over the first iterations.
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
 * On a GPU (docs/cuda.md, "Step stages"): each micro-step (both halves and,
 * in the last one, the update) is one CUDA graph per kind of step, replayed
 * after one eager warm-up and one capture (graphs = false: eagerly); the
 * real batches arrive in pinned memory and are copied to the device on a
 * second stream while the previous step runs; fakes from g_step and the
 * weights sent back stay in device memory, ordered by events; losses and
 * D's mean outputs stay on the device and are read a step later, when
 * that step's metrics are pushed, so the host never waits for the step it
 * has just queued. LeCam, clipping and a data-parallel exchange need the
 * host inside the step: with them the step runs eagerly and its results
 * are read at once. So do the gradient penalties (the per-sample gradient
 * lengths come to the host): R1 in the step (r1_every = 1) and WGAN-GP
 * make every step eager; the lazy R1 step runs eagerly after the graph of
 * every r1_every-th D step, and the D steps themselves stay captured.
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
#include <ganflow/nn.h>
#include <ganflow/params.h>
#include <ganflow/stage.h>
#include <ganflow/train.h>

#include "d_step.h"

/* ---- setup ---- */

static int dev_buffers(dstep *s, gf_ctx *ctx)
{
	gf_backend *be = s->be;
	size_t xb = (size_t)s->max_batch * s->in_numel * sizeof(float), lb = (size_t)s->max_batch * sizeof(int32_t);
	if (be->ops->alloc(be, (void **)&s->real_dev, xb) || be->ops->alloc(be, (void **)&s->fake_dev, xb) ||
	    be->ops->alloc(be, (void **)&s->rlab_dev, lb) || be->ops->alloc(be, (void **)&s->flab_dev, lb))
		return gf_fail(ctx, "out of memory for D's input buffers: %s", gf_errmsg());
	if (!s->cbe)
		return 0;
	for (int i = 0; i < 2; i++) {
		const gf_backend_ops *o = s->cbe->ops;
		if (o->alloc(s->cbe, (void **)&s->st[i].x, xb) || o->alloc(s->cbe, (void **)&s->st[i].l, lb) ||
		    o->event_create(s->cbe, &s->st[i].dma) || be->ops->event_create(be, &s->st[i].used))
			return gf_fail(ctx, "real batch staging: %s", gf_errmsg());
	}
	return 0;
}

/* ADA: the ada layer of D, its p, the controller's options and state.
 * The options' ranges are checked by the runtime (the table below). */
static int ada_setup(dstep *s, gf_ctx *ctx, const gf_value *p, size_t nout)
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
static int ada_after_step(dstep *s, gf_ctx *ctx, double images)
{
	if (!s->ada_p || !gf_ada_step(&s->ada, (int64_t)images, &s->p))
		return 0;
	int rc = s->be->ops->copy(s->be, s->ada_p, &s->p, sizeof(float), GF_COPY_H2D);
	return rc ? gf_fail(ctx, "iteration %lld: ada: %s", (long long)s->v, gf_errmsg()) : 0;
}

/* r1, r1_every, gp: what they may be combined with. */
static int penalty_conf(dstep *s, gf_ctx *ctx, const gf_value *p)
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
static int penalty_setup(dstep *s, gf_ctx *ctx)
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

static int dstep_create(gf_ctx *ctx, const gf_value *p, void **self)
{
	const gf_run_info *run = gf_ctx_run(ctx);
	dstep *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	*self = s;
	s->ahead = -1;
	for (int i = 0; i < RECS; i++)
		s->recs[i].v = -1;
	s->async = !strcmp(gf_param_str(p, "mode"), "async");
	s->staleness = gf_param_int(p, "staleness");
	s->d_steps = (int)gf_param_int(p, "d_steps");
	s->acc = (int)gf_param_int(p, "accumulate");
	s->max_batch = (int)gf_param_int(p, "max_batch");
	s->cls = (int)gf_param_int(p, "class");
	s->reader = gf_param_given(p, "reader") ? gf_param_str(p, "reader")
	                                        : gf_port_upstream(ctx, IN_REAL, "lmdb_reader");
	s->ckpt_every = run->checkpoint_every;
	if (gf_gan_loss_parse(gf_param_str(p, "loss"), &s->loss))
		return gf_fail(ctx, "parameter 'loss': %s", gf_errmsg());
	int rc = penalty_conf(s, ctx, p);
	if (rc)
		return rc;
	s->lecam.lambda = (float)gf_param_num(p, "lecam");
	s->lecam.decay = (float)gf_param_num(p, "lecam_decay");

	gf_trainer_conf tc = { .what = "D", .tag = "d", .role = "discriminator", .unit = "iteration",
	                       .max_batch = s->max_batch, .grads_port = OUT_GRADS, .reduced_port = IN_REDUCED,
	                       .state_port = OUT_STATE, .cls = s->cls, .reg_every = s->r1 > 0 ? s->r1_every : 0 };
	gf_gan_optim_defaults(&tc.opt);
	rc = gf_trainer_create(&s->tr, ctx, p, &tc);
	if (rc)
		return rc;
	s->d = gf_trainer_net(s->tr);
	s->be = gf_trainer_backend(s->tr);
	/* data that cannot serve a conditional D: said now, not after training */
	if ((rc = gf_data_classes(ctx, IN_REAL, gf_net_classes(s->d), "D", s->data_classes, sizeof(s->data_classes))))
		return rc;
	gf_tensor dout;
	gf_net_shapes(s->d, &s->din, &dout);
	s->in_numel = (size_t)(gf_tensor_numel(&s->din) / s->din.shape[0]);
	s->classes = gf_net_classes(s->d) > 0;
	size_t nout = (size_t)gf_tensor_numel(&dout);
	if (s->lecam.lambda > 0 &&
	    (!(s->out_host = malloc(nout * sizeof(float))) || !(s->reg_host = malloc(nout * sizeof(float))) ||
	     s->be->ops->alloc(s->be, (void **)&s->reg_dev, nout * sizeof(float))))
		return gf_fail(ctx, "out of memory");
	if (s->be->ops->alloc(s->be, (void **)&s->dpred, nout * sizeof(float)) ||
	    (s->async && gf_fake_cache_create(&s->cache, (int)gf_param_int(p, "cache"), (int)gf_param_int(p, "reuse"),
	                                      s->staleness)))
		return gf_fail(ctx, "out of memory");
	/* a GPU: batches in pinned memory, copied on a stream of their own;
	 * fakes accepted in device memory */
	if (gf_train_async(s->be)) {
		gf_allocator pinned;
		if ((rc = gf_train_copy_backend(ctx, p, &s->cbe)))
			return rc;
		if (!gf_train_pinned_allocator(s->be, &pinned) && gf_port_set_allocator(ctx, 0, IN_REAL, &pinned))
			gf_info(ctx, "real batches stay in pageable memory: %s", gf_errmsg());
		gf_port_accept_device(ctx, IN_FAKES, s->be->device, s->be->device_index);
	}
	if ((rc = dev_buffers(s, ctx)) || (rc = penalty_setup(s, ctx)))
		return rc;
	int ev = s->d_steps * s->acc;
	if (gf_stepgraph_create(&s->sg, s->be, gf_param_bool(p, "graphs"), "D step") ||
	    gf_readback_create(&s->rb, s->be, NVALS, ev > MAX_LAG ? MAX_LAG + 1 : ev + 1) ||
	    gf_devmsg_create(&s->dm, s->be))
		return gf_fail(ctx, "%s", gf_errmsg());
	s->data_pos[0] = s->data_pos[1] = -1;
	if ((rc = gf_trainer_resume(s->tr, &s->v)) || (rc = gf_train_resume_i64(ctx, "data_pos", s->data_pos, 2)))
		return rc;
	int64_t lc[3] = { 0, 0, 0 };
	if (s->lecam.lambda > 0 && (rc = gf_train_resume_i64(ctx, "lecam", lc, 3)))
		return rc;
	s->lecam.set = (int)lc[0];
	memcpy(s->lecam.ema, lc + 1, sizeof(s->lecam.ema));
	return ada_setup(s, ctx, p, nout);
}

/* ---- the loop ---- */

static int push_weights(dstep *s, gf_ctx *ctx)
{
	gf_msg *m;
	int rc;
	if (!s->dev_weights) {
		if ((rc = gf_trainer_weights(s->tr, OUT_WEIGHTS, s->v, &m)))
			return rc;
	} else {
		/* on one device: a copy of D's blocks behind an event, no host */
		if ((rc = gf_msg_get(ctx, OUT_WEIGHTS, &m)))
			return rc;
		if ((rc = gf_weights_pack_dev(m, s->d, s->v)) || (rc = gf_devmsg_ready(s->dm, m))) {
			gf_msg_release(m);
			return gf_fail(ctx, "D weights: %s", gf_errmsg());
		}
		m->step = s->v;
		m->label = s->cls;
	}
	gf_msg_set_scalar(m, "fakes_per_step", (double)s->d_steps * s->acc);
	return gf_push(ctx, OUT_WEIGHTS, m);
}

/* LeCam's term for one half-step's outputs (copied to the host: LeCam
 * runs eagerly), scaled like its loss: its value added to *reg, its
 * gradient added to dpred. */
static int lecam_add(dstep *s, const gf_tensor *out, int fake, size_t n, float scale, double *reg)
{
	const gf_backend_ops *o = s->be->ops;
	int rc = o->copy(s->be, s->out_host, out->data, n * sizeof(float), GF_COPY_D2H);
	if (rc)
		return rc;
	*reg += gf_lecam_grad(&s->lecam, s->out_host, n, fake, scale, s->reg_host);
	rc = o->copy(s->be, s->reg_dev, s->reg_host, n * sizeof(float), GF_COPY_H2D);
	return rc ? rc : o->axpy(s->be, s->dpred, s->reg_dev, n, 1.0f);
}

/* ---- gradient penalties (eager: the lengths come to the host) ---- */

/* The penalty of D's last forward, weighted like a half of D's loss (1/2,
 * over the micro-batches) times gain, its gradient added to D's (or
 * written: accumulate 0), with dy (may be NULL) walked in the same pass. */
static int penalty(dstep *s, gf_ctx *ctx, gf_penalty_kind kind, float weight, double gain, const float *dy,
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
static int gp_step(dstep *s, gf_ctx *ctx, const gf_tensor *xr, const gf_tensor *lr, const gf_tensor *xf,
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
	if ((rc = penalty(s, ctx, GF_PENALTY_DISTANCE, s->gp, 1.0, NULL, GF_ACCUMULATE, &v)))
		return rc;
	*value += v / s->acc;
	return 0;
}

/* D forward + loss + backward on one batch; the loss and the sum of D's
 * outputs stay in the device slots loss and sum; *nout: D's outputs. The
 * real half-step with r1 and r1_every = 1 adds R1 (into *r1) in the same
 * walk. */
static int half_step(dstep *s, gf_ctx *ctx, const gf_tensor *x, const gf_tensor *labels, int fake,
                     unsigned accumulate, float *loss, double *sum, size_t *nout, double *reg, double *r1)
{
	int rc = gf_net_forward(s->d, x, s->classes ? labels : NULL, GF_TRAIN);
	if (rc)
		return gf_fail(ctx, "iteration %lld: D forward: %s", (long long)s->v, gf_errmsg());
	gf_tensor out;
	gf_net_output(s->d, &out);
	if ((rc = gf_trainer_loss_dev(s->tr, s->v, s->loss.d, &out, NULL, fake ? s->loss.fake : s->loss.real,
	                              0.5f / (float)s->acc, s->dpred, loss)))
		return rc;
	size_t n = (size_t)gf_tensor_numel(&out);
	*nout = n;
	if ((rc = s->be->ops->reduce_dev(s->be, sum, out.data, n, 0)))
		return gf_fail(ctx, "iteration %lld: D's mean output: %s", (long long)s->v, gf_errmsg());
	if (!fake && s->ada_p) { /* ADA's signs: eager, as LeCam */
		if ((rc = s->be->ops->copy(s->be, s->out_host, out.data, n * sizeof(float), GF_COPY_D2H)))
			return gf_fail(ctx, "iteration %lld: ada: %s", (long long)s->v, gf_errmsg());
		gf_ada_observe(&s->ada, s->out_host, n, s->loss.d == GF_LOSS_BCE);
	}
	if (s->lecam.lambda > 0 && s->lecam.set && (rc = lecam_add(s, &out, fake, n, 0.5f / (float)s->acc, reg)))
		return gf_fail(ctx, "iteration %lld: LeCam: %s", (long long)s->v, gf_errmsg());
	if (!fake && s->r1 > 0 && s->r1_every == 1) {
		double v;
		if ((rc = penalty(s, ctx, GF_PENALTY_SQUARE, s->r1, 1.0, s->dpred, accumulate, &v)))
			return rc;
		*r1 += v / s->acc;
		return 0;
	}
	if ((rc = gf_net_backward(s->d, s->dpred, GF_NEED_DW | accumulate)))
		return rc == GF_ESTOP || rc == GF_EFAIL
		           ? rc
		           : gf_fail(ctx, "iteration %lld: D backward: %s", (long long)s->v, gf_errmsg());
	return 0;
}

/* A device tensor over one of the step's input buffers. */
static gf_tensor dev_tensor(const dstep *s, void *data, int labels, int64_t n)
{
	gf_tensor t;
	if (labels) {
		int64_t sh[1] = { n };
		t = gf_tensor_make(data, GF_I32, 1, sh);
	} else {
		t = s->din;
		t.shape[0] = n;
		t.data = data;
	}
	t.device = s->be->device;
	t.device_index = s->be->device_index;
	return t;
}

/* The ops of one micro-step, graph-captured or not: both halves on the
 * step's input buffers and, in the last micro-step of a D step, the
 * update. */
static int step_ops(dstep *s, gf_ctx *ctx, int micro, int host_update, int64_t nr, int64_t nf, pend *p, rec *r)
{
	double *slot = gf_readback_slots(s->rb);
	gf_tensor xr = dev_tensor(s, s->real_dev, 0, nr), lr = dev_tensor(s, s->rlab_dev, 1, nr);
	gf_tensor xf = dev_tensor(s, s->fake_dev, 0, nf), lf = dev_tensor(s, s->flab_dev, 1, nf);
	unsigned a = micro ? GF_ACCUMULATE : 0;
	int last = micro == s->acc - 1;
	int rc = half_step(s, ctx, &xr, &lr, 0, a, (float *)(void *)(slot + V_LOSS_REAL), slot + V_SUM_REAL, &p->nr,
	                   &r->t.lecam, &r->t.r1);
	if (rc)
		return rc;
	/* WGAN-GP before the fake half: the exchange's buckets leave during
	 * the last backward of the D step, the fake half-step's */
	if (s->gp > 0 && (rc = gp_step(s, ctx, &xr, &lr, &xf, &r->t.gp)))
		return rc;
	if (last)
		gf_trainer_arm(s->tr, s->v); /* buckets leave during this backward */
	if ((rc = half_step(s, ctx, &xf, &lf, 1, GF_ACCUMULATE, (float *)(void *)(slot + V_LOSS_FAKE),
	                    slot + V_SUM_FAKE, &p->nf, &r->t.lecam, NULL)))
		return rc;
	if (!last)
		return 0;
	if (host_update)
		return gf_trainer_update(s->tr, s->v, NULL);
	p->norm = 1;
	return gf_trainer_update_dev(s->tr, s->v, slot + V_SUMSQ);
}

static rec *rec_of(dstep *s, int64_t v)
{
	rec *r = &s->recs[v % RECS];
	return r->v == v ? r : NULL;
}

/* Pushes an iteration's metrics once all its results are read back. */
static int finish(dstep *s, gf_ctx *ctx, rec *r)
{
	if (!r->closed || r->folded < s->d_steps * s->acc)
		return 0;
	const sums *t = &r->t;
	r->v = -1;
	gf_msg *m;
	int rc = gf_trainer_metrics(s->tr, OUT_METRICS, r->mstep, &m);
	if (rc || !m)
		return rc;
	gf_msg_set_scalar(m, "loss_d", t->loss / s->d_steps);
	gf_msg_set_scalar(m, "d_real", t->dreal / s->d_steps);
	gf_msg_set_scalar(m, "d_fake", t->dfake / s->d_steps);
	gf_msg_set_scalar(m, "images", t->images);
	if (s->lecam.lambda > 0)
		gf_msg_set_scalar(m, "lecam", t->lecam / s->d_steps);
	if (t->nr1) /* lazy R1: only the iterations that ran it */
		gf_msg_set_scalar(m, "r1", t->r1 / t->nr1);
	if (s->gp > 0)
		gf_msg_set_scalar(m, "gp", t->gp / s->d_steps);
	if (s->ada_p) {
		gf_msg_set_scalar(m, "ada_p", s->p);
		if (!isnan(s->ada.rt))
			gf_msg_set_scalar(m, "ada_rt", s->ada.rt);
	}
	if (s->async) {
		gf_msg_set_scalar(m, "staleness", t->stale / (s->d_steps * s->acc));
		gf_msg_set_scalar(m, "staleness_max", (double)r->stale_max);
	}
	return gf_push(ctx, OUT_METRICS, m);
}

/* Reads back micro-steps until at most `keep` are in flight: their
 * losses checked and summed, D's mean outputs, the update's norm, in the
 * order an eager step adds them up. */
static int settle(dstep *s, gf_ctx *ctx, int keep)
{
	while (gf_readback_count(s->rb) > keep) {
		int64_t tag;
		const double *val;
		double busy;
		int rc = gf_readback_take(s->rb, &tag, &val, &busy);
		if (rc)
			return gf_fail(ctx, "D step results: %s", gf_errmsg());
		pend p = s->pend[s->pend_head];
		s->pend_head = (s->pend_head + 1) % (MAX_LAG + 1);
		s->npend--;
		rec *r = rec_of(s, p.v);
		if (!r)
			return gf_fail(ctx, "D step results of iteration %lld arrived without their iteration", (long long)p.v);
		float lr, lf;
		memcpy(&lr, val + V_LOSS_REAL, sizeof(lr));
		memcpy(&lf, val + V_LOSS_FAKE, sizeof(lf));
		if ((rc = gf_trainer_check_loss(s->tr, p.v, lr)) || (rc = gf_trainer_check_loss(s->tr, p.v, lf)))
			return rc;
		r->t.loss += lr;
		r->t.dreal += val[V_SUM_REAL] / (double)p.nr / s->acc;
		r->t.loss += lf;
		r->t.dfake += val[V_SUM_FAKE] / (double)p.nf / s->acc;
		if (p.norm && (rc = gf_trainer_check_norm(s->tr, p.v, val[V_SUMSQ], NULL)))
			return rc;
		gf_report_busy(ctx, busy, gf_readback_device_timed(s->rb));
		r->folded++;
		if ((rc = finish(s, ctx, r)))
			return rc;
	}
	return 0;
}

/* One micro-batch: a real and a fake batch, D's loss on both, gradients
 * summed into D's (and the update in the last micro-batch of a D step).
 * pos receives the real batch's data position. */
static int micro_step(dstep *s, gf_ctx *ctx, int micro, rec *r, int64_t pos[2])
{
	gf_msg *fake = NULL;
	int64_t stale = 0;
	int slot, rc = d_next_real(s, ctx, &slot);
	if (rc)
		return rc;
	const gf_msg *real = s->st[slot].m;
	if ((rc = d_get_fakes(s, ctx, &fake, &stale)))
		return rc;
	int64_t nr = real->t[0].shape[0], nf = fake->t[0].shape[0];
	if (stale > s->stale_max)
		s->stale_max = stale;
	if (fake->step + 1 > s->gseen)
		s->gseen = fake->step + 1;
	r->t.stale += (double)stale;
	if ((rc = d_use_real(s, ctx, slot)) || (rc = d_use_fakes(s, ctx, fake))) {
		if (!s->async)
			gf_msg_release(fake);
		return rc;
	}
	int last = micro == s->acc - 1;
	int host_update = last && !gf_trainer_update_on_device(s->tr);
	pend p = { .v = s->v };
	uint64_t key = (uint64_t)nr | (uint64_t)nf << 24 | (uint64_t)(micro == 0) << 48 | (uint64_t)last << 49 |
	               (last ? gf_trainer_update_key(s->tr, s->v) : 0) << 50;
	if ((rc = gf_readback_begin(s->rb)))
		return gf_fail(ctx, "D step: %s", gf_errmsg());
	if (!(rc = gf_stepgraph_begin(s->sg, key, s->eager || host_update))) {
		rc = step_ops(s, ctx, micro, host_update, nr, nf, &p, r);
		if ((rc = gf_stepgraph_end(s->sg, rc)) && rc != GF_EFAIL && rc != GF_ESTOP)
			rc = gf_fail(ctx, "iteration %lld: %s", (long long)s->v, gf_errmsg());
	} else {
		rc = gf_fail(ctx, "iteration %lld: D step: %s", (long long)s->v, gf_errmsg());
	}
	if (rc)
		return rc;
	if ((rc = gf_readback_push(s->rb, s->v)))
		return gf_fail(ctx, "D step: %s", gf_errmsg());
	s->pend[(s->pend_head + s->npend) % (MAX_LAG + 1)] = p;
	s->npend++;
	r->t.images += (double)nr;
	s->r1_n = nr;
	pos[0] = real->epoch;
	pos[1] = (int64_t)real->pos;
	return settle(s, ctx, s->lag);
}

/* StyleGAN2's lazy R1: after D step `step` (counted over the run) when
 * step % r1_every == 0, a step of its own on that step's real batch (still
 * in real_dev): the penalty times r1_every, an optimiser update; eager,
 * between the graph steps. */
static int r1_lazy(dstep *s, gf_ctx *ctx, double *value)
{
	gf_tensor x = dev_tensor(s, s->real_dev, 0, s->r1_n), lab = dev_tensor(s, s->rlab_dev, 1, s->r1_n);
	int rc = gf_net_forward(s->d, &x, s->classes ? &lab : NULL, GF_TRAIN);
	if (rc)
		return gf_fail(ctx, "iteration %lld: D forward (R1): %s", (long long)s->v, gf_errmsg());
	gf_trainer_arm(s->tr, s->v); /* data parallel: buckets leave during the double backward's walk */
	double v;
	if ((rc = penalty(s, ctx, GF_PENALTY_SQUARE, s->r1, s->r1_every, NULL, 0, &v)))
		return rc;
	*value += v;
	return gf_trainer_update(s->tr, s->v, NULL);
}

static int push_state(dstep *s, gf_ctx *ctx)
{
	gf_state *st;
	char k[160];
	/* a checkpoint is a read point: every result in flight is checked first */
	int rc = settle(s, ctx, 0);
	if (rc || (rc = gf_trainer_state_begin(s->tr, s->v, &st)) || !st)
		return rc;
	rc = gf_state_add_i64(st, gf_train_key(ctx, "data_pos", k, sizeof(k)), s->data_pos, 2);
	if (!rc && s->lecam.lambda > 0) { /* the averages' bits, so a resumed run goes on exactly */
		int64_t lc[3] = { s->lecam.set };
		memcpy(lc + 1, s->lecam.ema, sizeof(s->lecam.ema));
		rc = gf_state_add_i64(st, gf_train_key(ctx, "lecam", k, sizeof(k)), lc, 3);
	}
	if (!rc && s->gp > 0)
		rc = gf_state_add_rng(st, gf_train_key(ctx, "gp_rng", k, sizeof(k)), &s->gp_rng);
	if (!rc && s->ada_p) { /* the partial interval; p itself is D's buffer */
		int64_t a[5];
		gf_ada_save(&s->ada, a);
		rc = gf_state_add_i64(st, gf_train_key(ctx, "ada", k, sizeof(k)), a, 5);
	}
	if (!rc && s->reader) /* no reader upstream (test sources): no position to resume */
		rc = gf_state_meta(st, gf_train_key(ctx, "reader", k, sizeof(k)), s->reader);
	if (!rc && s->data_classes[0]) /* what `ganflow sample` and `ganflow eval` generate */
		rc = gf_state_meta(st, gf_train_key(ctx, "data_classes", k, sizeof(k)), s->data_classes);
	/* async: filed under G's step, so it joins G's part of the checkpoint */
	return gf_trainer_state_push(s->tr, rc, s->async ? s->gseen : s->v);
}

/* After iteration v: the checkpoint part when one is due (sync: every
 * checkpoint_every iterations; async: when G crossed a multiple of it). */
static int maybe_state(dstep *s, gf_ctx *ctx)
{
	if (s->ckpt_every <= 0)
		return 0;
	if (!s->async)
		return s->v % s->ckpt_every == 0 ? push_state(s, ctx) : 0;
	if (s->gseen / s->ckpt_every <= s->ckpt_basis / s->ckpt_every)
		return 0;
	int64_t gseen = s->gseen;
	s->gseen = gseen / s->ckpt_every * s->ckpt_every; /* the multiple G just crossed */
	int rc = push_state(s, ctx);
	s->gseen = gseen;
	s->ckpt_basis = gseen;
	return rc;
}

/* What the step can do without the host, decided once the exchange
 * handshake is done: graph steps and results read a step later, or an
 * eager step read at once. */
static void plan(dstep *s, gf_ctx *ctx)
{
	s->eager = s->lecam.lambda > 0 || gf_trainer_exchanging(s->tr) || !gf_trainer_update_on_device(s->tr) ||
	           s->gp > 0 || (s->r1 > 0 && s->r1_every == 1) || s->ada_p;
	int e = s->d_steps * s->acc;
	s->lag = gf_readback_deferred(s->rb) && !s->eager ? (e > MAX_LAG ? MAX_LAG : e) : 0;
	gf_allocator dev;
	s->dev_weights = gf_train_async(s->be) && !gf_train_device_allocator(s->be, &dev) &&
	                 gf_port_device_ok(ctx, OUT_WEIGHTS, s->be->device, s->be->device_index) &&
	                 !gf_port_set_allocator(ctx, 1, OUT_WEIGHTS, &dev);
}

static int dstep_loop(dstep *s, gf_ctx *ctx);

static int dstep_run(void *self, gf_ctx *ctx)
{
	dstep *s = self;
	int rc = dstep_loop(s, ctx);
	if (rc == 0) /* the results still in flight: the last metrics */
		rc = settle(s, ctx, 0);
	gf_devmsg_release(s->dm, 0);
	d_release_staged(s);
	int64_t e, c, r;
	gf_stepgraph_counts(s->sg, &e, &c, &r);
	if (c + r > 0 || s->cbe)
		gf_info(ctx, "D steps: %lld eager, %lld captured, %lld replayed as graphs%s%s%s", (long long)e, (long long)c,
		        (long long)r, s->cbe ? "; real batches copied ahead on a copy stream" : "",
		        s->dev_fakes ? "; fakes in device memory" : "", s->dev_weights ? "; D weights to g in device memory" : "");
	return rc == GF_ESTOP ? 0 : rc;
}

static int dstep_loop(dstep *s, gf_ctx *ctx)
{
	const gf_run_info *run = gf_ctx_run(ctx);
	int rc = gf_trainer_start(s->tr);
	if (rc)
		return rc;
	if (s->async && gf_trainer_exchanging(s->tr) && run->world > 1)
		return gf_fail(ctx, "mode = \"async\" with a data-parallel exchange: an async D runs as many iterations as "
		                    "G's pace allows, which differs across ranks, and every iteration is collective; use "
		                    "mode = \"sync\" for data parallelism (or place G and D on different ranks, as "
		                    "pipelines/async_2rank.lua does)");
	plan(s, ctx);
	if (!s->async) /* resumed: the progress line starts at the restored step */
		gf_report_resume(ctx, s->v);
	if ((rc = d_take_next_real(s, ctx)))
		return rc == GF_EEOF || rc == GF_ESTOP ? 0 : rc;
	if ((rc = push_weights(s, ctx)))
		return rc;
	while (!(!s->async && gf_ctx_steps(ctx) > 0 && s->v >= gf_ctx_steps(ctx)) && !(s->async && gf_should_stop(ctx))) {
		rec *r = &s->recs[s->v % RECS];
		if (r->v >= 0)
			return gf_fail(ctx, "iteration %lld: the results of iteration %lld are still in flight", (long long)s->v,
			               (long long)r->v);
		memset(r, 0, sizeof(*r));
		r->v = s->v;
		int64_t pos[2] = { s->data_pos[0], s->data_pos[1] };
		for (int k = 0; k < s->d_steps; k++) {
			double real0 = r->t.dreal, fake0 = r->t.dfake, images0 = r->t.images;
			for (int micro = 0; micro < s->acc; micro++)
				if ((rc = micro_step(s, ctx, micro, r, pos)))
					return rc == GF_EEOF || rc == GF_ESTOP ? 0 : rc;
			/* lazy R1 after every r1_every-th D step of the run */
			int lazy = s->r1 > 0 && s->r1_every > 1 && (s->v * s->d_steps + k) % s->r1_every == 0;
			if ((lazy && (rc = r1_lazy(s, ctx, &r->t.r1))) || (rc = ada_after_step(s, ctx, r->t.images - images0)))
				return rc == GF_ESTOP ? 0 : rc;
			r->t.nr1 += s->r1 > 0 && (lazy || s->r1_every == 1);
			/* LeCam runs eagerly, its results read at once: the means are in */
			if (s->lecam.lambda > 0)
				gf_lecam_average(&s->lecam, r->t.dreal - real0, r->t.dfake - fake0);
		}
		s->v++;
		s->data_pos[0] = pos[0];
		s->data_pos[1] = pos[1];
		/* sync: D's iterations are the run's steps; async: G's updates are
		 * (g_step reports them), D only adds the images it consumed */
		gf_report_step(ctx, s->async ? -1 : s->v, (int64_t)r->t.images);
		r->mstep = s->async ? s->gseen : s->v;
		r->stale_max = s->stale_max;
		r->closed = 1;
		if ((rc = finish(s, ctx, r)) || (rc = maybe_state(s, ctx)))
			return rc;
		int last = !s->async && gf_ctx_steps(ctx) > 0 && s->v >= gf_ctx_steps(ctx);
		/* sync, stopping: the weights G needs for another step are not
		 * pushed, so no more fakes can come; D ends here, and a G waiting
		 * for those weights sees the end of D's output (D waiting for
		 * fakes instead held both until the grace ran out) */
		if (!s->async && !last && gf_should_stop(ctx))
			break;
		if (s->async ? s->v % s->staleness == 0 && !last : !last) {
			if ((rc = d_take_next_real(s, ctx)))
				return rc == GF_EEOF || rc == GF_ESTOP ? 0 : rc;
			if ((rc = push_weights(s, ctx)))
				return rc;
		}
	}
	return 0;
}

static int dstep_flush(void *self, gf_ctx *ctx)
{
	int rc = push_state(self, ctx);
	return rc == GF_ESTOP ? 0 : rc;
}

static void dstep_destroy(void *self)
{
	dstep *s = self;
	if (s->be && s->rb && gf_readback_deferred(s->rb))
		s->be->ops->sync(s->be); /* nothing of ours in flight any more */
	gf_readback_destroy(s->rb);
	gf_devmsg_destroy(s->dm);
	gf_stepgraph_destroy(s->sg);
	d_release_staged(s);
	gf_fake_cache_destroy(s->cache);
	gf_penalty_destroy(s->pen);
	free(s->eps_host);
	for (int i = 0; i < 2 && s->cbe; i++) {
		if (s->st[i].x)
			s->cbe->ops->free(s->cbe, s->st[i].x);
		if (s->st[i].l)
			s->cbe->ops->free(s->cbe, s->st[i].l);
		if (s->st[i].dma)
			s->cbe->ops->event_destroy(s->cbe, s->st[i].dma);
		if (s->st[i].used)
			s->be->ops->event_destroy(s->be, s->st[i].used);
	}
	if (s->cbe)
		gf_backend_close(s->cbe);
	float *dev[] = { s->dpred, s->reg_dev, s->real_dev, s->fake_dev, (float *)(void *)s->rlab_dev,
	                 (float *)(void *)s->flab_dev, s->eps_dev, s->xhat_dev };
	for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
		if (dev[i])
			s->be->ops->free(s->be, dev[i]);
	free(s->out_host);
	free(s->reg_host);
	gf_trainer_destroy(s->tr);
	free(s);
}

static const gf_port_desc inputs[] = {
	{ "real", "batch", 0, "batches of real images (and labels) from the data path" },
	{ "fakes", "fakes", 0, "generated images from g_step" },
	{ "reduced", "grads", GF_PORT_OPTIONAL, "data parallel: acknowledgements of the exchange stage" },
};

static const gf_port_desc outputs[] = {
	{ "weights", "d_weights", 0, "D's weights for g_step's replica" },
	{ "metrics", "metrics", GF_PORT_OPTIONAL, "loss_d, mean D(x), mean D(G(z)), images, staleness, lecam, r1, gp, ada_p, "
	                                           "ada_rt" },
	{ "state", "state", GF_PORT_OPTIONAL, "checkpoint part every checkpoint_every iterations and at the end" },
	{ "grads", "grads", GF_PORT_OPTIONAL, "data parallel: D's gradient buckets / parameters to an exchange stage" },
};

static const gf_param_desc params[] = {
	{ "net", GF_PARAM_TABLE, NULL, "D's layer table (a backbone such as dcgan.D{})", NULL },
	{ "opt", GF_PARAM_TABLE, "nil", "optimiser, e.g. gf.adam{lr = 2e-4, betas = {0.5, 0.999}} (that is the default)",
	  NULL },
	{ "loss", GF_PARAM_STR, "bce", "bce (D ends in a sigmoid), bce_logits, hinge, ls or wgan; as g_step's",
	  GF_GAN_LOSSES },
	{ "mode", GF_PARAM_STR, "sync", "sync (alternating G/D) or async (fake cache, bounded staleness)", "sync|async" },
	{ "staleness", GF_PARAM_INT, "4", "async: D weights are sent every this many iterations, and no fakes made "
	                                  "with older D weights are used", "1.." },
	{ "cache", GF_PARAM_INT, "8", "async: fake batches kept for reuse", "1..64" },
	{ "reuse", GF_PARAM_INT, "2", "async: D steps one fake batch may serve (1: every D step waits for new fakes)",
	  "1.." },
	{ "d_steps", GF_PARAM_INT, "1", "D steps per G step", "1..1024" },
	{ "accumulate", GF_PARAM_INT, "1", "micro-batches whose gradients are summed per D step", "1..65536" },
	{ "clip", GF_PARAM_NUM, "0", "clip D's gradient to this global L2 norm (0 = no clipping)", "0.." },
	{ "max_batch", GF_PARAM_INT, "256", "largest real or fake batch D will see", "1..1048576" },
	{ "reader", GF_PARAM_STR, "nil", "the lmdb_reader whose position is checkpointed (default: the one the runtime "
	                                "finds upstream of `real`)", NULL },
	{ "class", GF_PARAM_INT, "-1", "per-class training: the class this pair learns", "-1.." },
	{ "lr_warmup", GF_PARAM_INT, "0", "iterations over which the learning rate ramps linearly up to opt.lr (0: none)",
	  "0.." },
	{ "lecam", GF_PARAM_NUM, "0", "LeCam regularisation lambda (Tseng et al. 2021; 0 = none)", "0.." },
	{ "lecam_decay", GF_PARAM_NUM, "0.99", "LeCam: decay of the averages of D's real and fake outputs", "0..1" },
	{ "r1", GF_PARAM_NUM, "0", "R1 penalty gamma: gamma/2 E|grad D(x)|^2 on real batches (0 = none)", "0.." },
	{ "r1_every", GF_PARAM_INT, "16", "R1: 1 = in every D step; k > 1 = StyleGAN2's lazy regularisation, a step of "
	                                  "its own every k D steps (penalty x k, Adam's lr x r and betas ^ r, r = k/(k+1))",
	  "1..1000000" },
	{ "gp", GF_PARAM_NUM, "0", "WGAN-GP lambda: lambda E(|grad D(x^)| - 1)^2 on random interpolates of real and fake "
	                           "(loss = \"wgan\"; 0 = none)", "0.." },
	{ "graphs", GF_PARAM_BOOL, "true", "capture each kind of D step as a graph and replay it where the backend has "
	                                  "graphs (CUDA); false: every step eager", NULL },
	{ "ada_target", GF_PARAM_NUM, "0.6", "ADA (D has an ada layer): the target of r_t = E[sign(D(x_real))], the "
	                                     "overfitting heuristic; p rises while r_t is above it", "0..1" },
	{ "ada_interval", GF_PARAM_INT, "4", "ADA: D steps between adjustments of p", "1..1000000" },
	{ "ada_kimg", GF_PARAM_NUM, "500", "ADA: thousands of real images over which p can go from 0 to 1 (0: p stays "
	                                   "at the layer's p)", "0.." },
	GF_TRAIN_ORTHO_PARAMS,
	GF_TRAIN_BACKEND_PARAMS,
};

GF_STAGE_EXPORT const gf_stage_desc ganflow_stage = {
	.abi = GF_STAGE_ABI,
	.size = sizeof(gf_stage_desc),
	.name = "d_step",
	.doc = "trains the discriminator D on real batches and g_step's fakes; sends D's weights back to g_step",
	.inputs = inputs,
	.ninputs = sizeof(inputs) / sizeof(inputs[0]),
	.outputs = outputs,
	.noutputs = sizeof(outputs) / sizeof(outputs[0]),
	.params = params,
	.nparams = sizeof(params) / sizeof(params[0]),
	.create = dstep_create,
	.run = dstep_run,
	.flush = dstep_flush,
	.destroy = dstep_destroy,
};
