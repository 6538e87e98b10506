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
 * ZeRO-1, or the parameters gossiped after the update), inside the step;
 * every rank reads its own part of the data. Unconnected, nothing changes.
 *
 * Regularisers and R3GAN's pairs (d_reg.c): `ortho` (the trainer's), LeCam,
 * ADA's p, R1 (in the step or lazy), R2, WGAN-GP; loss = "rpgan".
 *
 * On a GPU (docs/cuda.md, "Step stages"): each micro-step (both halves and,
 * in the last one, the update) is one captured step of the step driver
 * (gf_stepdrv: eager warm-up, capture, replay; graphs = false: eagerly);
 * the real batches arrive in pinned memory and are copied to the device on
 * a second stream while the previous step runs (d_msgs.c); fakes from
 * g_step and the weights sent back stay in device memory, ordered by
 * events; losses and D's mean outputs stay on the device and are read a
 * step later, when that step's metrics are pushed.
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

static int fold(void *self, gf_ctx *ctx, int ri, const gf_stepdrv_entry *e, const double *val);
static int finish(void *self, gf_ctx *ctx, int ri, int64_t v);

static int dstep_create(gf_ctx *ctx, const gf_value *p, void **self)
{
	const gf_run_info *run = gf_ctx_run(ctx);
	dstep *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	*self = s;
	s->ahead = -1;
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
	int rc = d_penalty_conf(s, ctx, p);
	if (rc)
		return rc;
	s->lecam.lambda = (float)gf_param_num(p, "lecam");
	s->lecam.decay = (float)gf_param_num(p, "lecam_decay");
	s->lecam_on = s->lecam.lambda > 0;

	gf_trainer_conf tc = { .what = "D", .tag = "d", .role = "discriminator", .unit = "iteration",
	                       .max_batch = s->max_batch, .grads_port = OUT_GRADS, .reduced_port = IN_REDUCED,
	                       .state_port = OUT_STATE, .cls = s->cls, .reg_every = s->r1_on ? s->r1_every : 0,
	                       .net_batch = s->pair ? 2 * s->max_batch : 0,
	                       .images = s->max_batch * s->d_steps * s->acc, .schedules = gf_train_d_schedules };
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
	if (s->be->ops->alloc(s->be, (void **)&s->dpred, nout * sizeof(float)) ||
	    (s->async && gf_fake_cache_create(&s->cache, (int)gf_param_int(p, "cache"), (int)gf_param_int(p, "reuse"),
	                                      s->staleness)))
		return gf_fail(ctx, "out of memory");
	/* a GPU: batches in pinned memory, copied on a stream of their own;
	 * fakes accepted in device memory */
	gf_backend *cbe = NULL;
	if (gf_train_async(s->be)) {
		gf_allocator pinned;
		if ((rc = gf_train_copy_backend(ctx, p, &cbe)))
			return rc;
		if (!gf_train_pinned_allocator(s->be, &pinned) && gf_port_set_allocator(ctx, 0, IN_REAL, &pinned))
			gf_info(ctx, "real batches stay in pageable memory: %s", gf_errmsg());
		gf_port_accept_device(ctx, IN_FAKES, s->be->device, s->be->device_index);
	}
	if ((rc = d_dev_buffers(s, ctx, cbe)) || (rc = d_penalty_setup(s, ctx)))
		return rc;
	int ev = s->d_steps * s->acc;
	gf_stepdrv_conf dc = { .what = "D step", .unit = "iteration", .nvals = NVALS,
	                       .max_lag = ev > MAX_LAG ? MAX_LAG : ev, .graphs = gf_param_bool(p, "graphs"), .self = s,
	                       .fold = fold, .finish = finish };
	if (gf_stepdrv_create(&s->drv, s->be, &dc) || gf_devmsg_create(&s->dm, s->be))
		return gf_fail(ctx, "%s", gf_errmsg());
	s->data_pos[0] = s->data_pos[1] = -1;
	if ((rc = gf_trainer_resume(s->tr, &s->v)) || (rc = gf_train_resume_i64(ctx, "data_pos", s->data_pos, 2)))
		return rc;
	int64_t lc[3] = { 0, 0, 0 };
	if (s->lecam_on && (rc = gf_train_resume_i64(ctx, "lecam", lc, 3)))
		return rc;
	s->lecam.set = (int)lc[0];
	memcpy(s->lecam.ema, lc + 1, sizeof(s->lecam.ema));
	if ((rc = d_ada_setup(s, ctx, p)) || (rc = d_setup_check(s, ctx)))
		return rc;
	return d_reg_state(s, ctx, 1);
}

/* ---- the loop ---- */

/* ---- the step ---- */

/* D forward + loss + backward on one batch; the loss, the sum of D's
 * outputs and LeCam's term stay in the step's slots; *nout: D's outputs.
 * The real half-step counts ADA's signs and, with r1 and r1_every = 1,
 * adds R1 in the same walk. */
static int half_step(dstep *s, gf_ctx *ctx, const gf_tensor *x, const gf_tensor *labels, int fake,
                     unsigned accumulate, size_t *nout)
{
	double *slot = gf_stepdrv_slots(s->drv);
	float *loss = (float *)(void *)(slot + (fake ? V_LOSS_FAKE : V_LOSS_REAL));
	double *sum = slot + (fake ? V_SUM_FAKE : V_SUM_REAL);
	const gf_backend_ops *o = s->be->ops;
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
	if ((rc = o->reduce_dev(s->be, sum, out.data, n, 0)))
		return gf_fail(ctx, "iteration %lld: D's mean output: %s", (long long)s->v, gf_errmsg());
	if (!fake && s->ada_p && (rc = o->ada_signs(s->be, s->rst + RST_ADA, out.data, n,
	                                            s->loss.d == GF_LOSS_BCE ? 0.5f : 0.0f)))
		return gf_fail(ctx, "iteration %lld: ada: %s", (long long)s->v, gf_errmsg());
	if (s->lecam_on && (rc = o->lecam_dev(s->be, s->dpred, slot + (fake ? V_LECAM_FAKE : V_LECAM_REAL),
	                                              s->rst + RST_LECAM, out.data, n, fake, s->lecam.lambda,
	                                              0.5f / (float)s->acc, s->acc)))
		return gf_fail(ctx, "iteration %lld: LeCam: %s", (long long)s->v, gf_errmsg());
	if (!fake && s->r1_on && s->r1_every == 1)
		return d_penalty(s, ctx, GF_PENALTY_SQUARE, s->r1, 1.0, s->dpred, accumulate, slot + V_R1);
	if (fake && s->r2_on)
		return d_penalty(s, ctx, GF_PENALTY_SQUARE, s->r2, 1.0, s->dpred, accumulate, slot + V_R2);
	if ((rc = gf_net_backward(s->d, s->dpred, GF_NEED_DW | accumulate)))
		return rc == GF_ESTOP || rc == GF_EFAIL
		           ? rc
		           : gf_fail(ctx, "iteration %lld: D backward: %s", (long long)s->v, gf_errmsg());
	return 0;
}

/* A micro-step's ops and what they report (gf_stepdrv_run's arg). */
struct micro {
	int micro, host_update;
	int64_t nr, nf;
	gf_stepdrv_entry *e;
	int tail;               /* it ends the D step (no lazy R1 step follows) */
	int last_of_iter;       /* ... the iteration's last */
	double images;          /* the D step's real images */
};

/* The update in the last micro-step of a D step, and the D step's tail. */
static int update_tail(dstep *s, gf_ctx *ctx, struct micro *m)
{
	int rc;
	if (m->host_update) {
		rc = gf_trainer_update(s->tr, s->v, NULL);
	} else {
		m->e->flags |= F_NORM;
		rc = gf_trainer_update_dev(s->tr, s->v, gf_stepdrv_slots(s->drv) + V_SUMSQ);
	}
	return rc || !m->tail ? rc : d_step_tail(s, ctx, m->images, m->last_of_iter, m->e);
}

/* The ops of one micro-step, graph-captured or not: both halves on the
 * step's input buffers and, in the last micro-step of a D step, the
 * update. */
static int step_ops(void *self, gf_ctx *ctx, void *arg)
{
	dstep *s = self;
	struct micro *m = arg;
	gf_tensor xr = d_dev_tensor(s, s->real_dev, 0, m->nr), lr = d_dev_tensor(s, s->rlab_dev, 1, m->nr);
	gf_tensor xf = d_dev_tensor(s, s->fake_dev, 0, m->nf), lf = d_dev_tensor(s, s->flab_dev, 1, m->nf);
	unsigned a = m->micro ? GF_ACCUMULATE : 0;
	int last = m->micro == s->acc - 1;
	size_t nout = 0;
	m->e->flags |= F_HALVES | (s->r1_on && s->r1_every == 1 ? F_R1 : 0) | (s->r2_on ? F_R2 : 0) |
	               (s->gp_on ? F_GP : 0) | (s->pair ? F_PAIR : 0);
	if (s->pair) {
		if (last)
			gf_trainer_arm(s->tr, s->v); /* buckets leave during this backward */
		int rc = d_pair_step(s, ctx, m->nr, a, &nout);
		m->e->n[0] = m->e->n[1] = (int64_t)nout;
		if (rc || !last)
			return rc;
		return update_tail(s, ctx, m);
	}
	int rc = half_step(s, ctx, &xr, &lr, 0, a, &nout);
	if (rc)
		return rc;
	m->e->n[0] = (int64_t)nout;
	/* WGAN-GP before the fake half: the exchange's buckets leave during
	 * the last backward of the D step, the fake half-step's */
	if (s->gp_on && (rc = d_gp_step(s, ctx, &xr, &lr, &xf)))
		return rc;
	if (last)
		gf_trainer_arm(s->tr, s->v); /* buckets leave during this backward */
	if ((rc = half_step(s, ctx, &xf, &lf, 1, GF_ACCUMULATE, &nout)))
		return rc;
	m->e->n[1] = (int64_t)nout;
	return last ? update_tail(s, ctx, m) : 0;
}

/* A penalty's value, checked. */
static int penalty_value(gf_ctx *ctx, int64_t v, const char *what, double x)
{
	if (isfinite(x))
		return 0;
	return gf_fail(ctx, "iteration %lld: the %s penalty is %g (non-finite); the last good checkpoint is kept",
	               (long long)v, what, x);
}

/* One entry's values, read back: the losses checked and summed, D's mean
 * outputs, LeCam's terms, the penalties, the update's norm, ADA's p and
 * r_t, in the order an eager step adds them up. */
static int fold(void *self, gf_ctx *ctx, int ri, const gf_stepdrv_entry *e, const double *val)
{
	dstep *s = self;
	rec *r = &s->recs[ri];
	int rc;
	if (e->flags & F_HALVES) {
		float lr, lf;
		memcpy(&lr, val + V_LOSS_REAL, sizeof(lr));
		memcpy(&lf, val + V_LOSS_FAKE, sizeof(lf));
		if ((rc = gf_trainer_check_loss(s->tr, e->step, lr)) ||
		    (!(e->flags & F_PAIR) && (rc = gf_trainer_check_loss(s->tr, e->step, lf))))
			return rc;
		if ((e->flags & F_R1) && (rc = penalty_value(ctx, e->step, "R1", val[V_R1])))
			return rc;
		if ((e->flags & F_GP) && (rc = penalty_value(ctx, e->step, "gradient", val[V_GP])))
			return rc;
		if ((e->flags & F_R2) && (rc = penalty_value(ctx, e->step, "R2", val[V_R2])))
			return rc;
		r->t.loss += lr;
		r->t.dreal += val[V_SUM_REAL] / (double)e->n[0] / s->acc;
		if (!(e->flags & F_PAIR))
			r->t.loss += lf;
		r->t.dfake += val[V_SUM_FAKE] / (double)e->n[1] / s->acc;
		if (s->lecam_on) {
			r->t.lecam += val[V_LECAM_REAL];
			r->t.lecam += val[V_LECAM_FAKE];
		}
		if (e->flags & F_R1)
			r->t.r1 += val[V_R1] / s->acc;
		if (e->flags & F_R2)
			r->t.r2 += val[V_R2] / s->acc;
		if (e->flags & F_GP)
			r->t.gp += val[V_GP] / s->acc;
	}
	if (e->flags & F_LAZY) {
		if ((rc = penalty_value(ctx, e->step, "R1", val[V_R1])))
			return rc;
		r->t.r1 += val[V_R1];
	}
	if ((e->flags & F_NORM) && (rc = gf_trainer_check_norm(s->tr, e->step, val[V_SUMSQ], NULL)))
		return rc;
	if (e->flags & F_ADA) {
		r->ada_p = val[V_ADA_P];
		r->ada_rt = val[V_ADA_RT];
	}
	return 0;
}

/* Pushes an iteration's metrics once all its results are read back. */
static int finish(void *self, gf_ctx *ctx, int ri, int64_t v)
{
	(void)v;
	dstep *s = self;
	const rec *r = &s->recs[ri];
	const sums *t = &r->t;
	gf_msg *m;
	int rc = gf_trainer_metrics(s->tr, OUT_METRICS, r->mstep, &m);
	if (rc || !m)
		return rc;
	gf_msg_set_scalar(m, "loss_d", t->loss / s->d_steps);
	gf_msg_set_scalar(m, "d_real", t->dreal / s->d_steps);
	gf_msg_set_scalar(m, "d_fake", t->dfake / s->d_steps);
	gf_msg_set_scalar(m, "images", t->images);
	if (s->lecam_on)
		gf_msg_set_scalar(m, "lecam", t->lecam / s->d_steps);
	if (t->nr1) /* lazy R1: only the iterations that ran it */
		gf_msg_set_scalar(m, "r1", t->r1 / t->nr1);
	if (s->r2_on)
		gf_msg_set_scalar(m, "r2", t->r2 / s->d_steps);
	if (s->gp_on)
		gf_msg_set_scalar(m, "gp", t->gp / s->d_steps);
	if (s->ada_p) {
		gf_msg_set_scalar(m, "ada_p", r->ada_p);
		if (!isnan(r->ada_rt))
			gf_msg_set_scalar(m, "ada_rt", r->ada_rt);
	}
	if (s->async) {
		gf_msg_set_scalar(m, "staleness", t->stale / (s->d_steps * s->acc));
		gf_msg_set_scalar(m, "staleness_max", (double)r->stale_max);
	}
	return gf_push(ctx, OUT_METRICS, m);
}

/* One micro-batch: a real and a fake batch, D's loss on both, gradients
 * summed into D's (and the update in the last micro-batch of a D step).
 * pos receives the real batch's data position. */
static int micro_step(dstep *s, gf_ctx *ctx, int micro, rec *r, int64_t pos[2], struct micro *m)
{
	gf_msg *fake = NULL;
	int64_t stale = 0;
	int slot, rc = d_next_real(s, ctx, &slot);
	if (rc)
		return rc;
	const gf_msg *real = gf_staging_msg(s->stg, slot);
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
	if (s->pair && nr != nf)
		return gf_fail(ctx, "iteration %lld: loss = \"rpgan\" pairs each real image with a fake, but the real batch "
		                    "has %lld and the fakes %lld (a short batch at the end of an epoch: batch stage "
		                    "drop_last = true)", (long long)s->v, (long long)nr, (long long)nf);
	int last = micro == s->acc - 1;
	gf_stepdrv_entry e = { .step = s->v };
	m->micro = micro;
	m->host_update = last && !gf_trainer_update_on_device(s->tr);
	m->nr = nr;
	m->nf = nf;
	m->e = &e;
	m->images += (double)nr;
	int tail = last && m->tail && (s->ada_p || s->lecam_on);
	uint64_t key = (uint64_t)nr | (uint64_t)nf << 24 | (uint64_t)(micro == 0) << 48 | (uint64_t)last << 49 |
	               (last ? gf_trainer_update_key(s->tr, s->v) : 0) << 50 | (uint64_t)tail << 51 |
	               (uint64_t)(tail && m->last_of_iter) << 52;
	if ((rc = gf_stepdrv_begin(s->drv, ctx)) ||
	    (rc = gf_stepdrv_run(s->drv, ctx, s->v, NULL, key, m->host_update, step_ops, m)))
		return rc;
	r->t.images += (double)nr;
	s->r1_n = nr;
	pos[0] = real->epoch;
	pos[1] = (int64_t)real->pos;
	return gf_stepdrv_push(s->drv, ctx, &e);
}


/* What the step can do without the host, decided once the exchange
 * handshake is done: graph steps and results read a step later, or an
 * eager step read at once. */
static void plan(dstep *s, gf_ctx *ctx)
{
	gf_stepdrv_plan(s->drv, !gf_trainer_update_on_device(s->tr));
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
		rc = gf_stepdrv_settle(s->drv, ctx, 0);
	gf_devmsg_release(s->dm, 0);
	d_release_staged(s);
	char extra[160];
	snprintf(extra, sizeof(extra), "%s%s%s",
	         gf_staging_copy_stream(s->stg) ? "; real batches copied ahead on a copy stream" : "",
	         s->dev_fakes ? "; fakes in device memory" : "", s->dev_weights ? "; D weights to g in device memory" : "");
	gf_stepdrv_summary(s->drv, ctx, extra);
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
	if ((rc = d_push_weights(s, ctx)))
		return rc;
	while (!(!s->async && gf_ctx_steps(ctx) > 0 && s->v >= gf_ctx_steps(ctx)) && !(s->async && gf_should_stop(ctx))) {
		/* lazy R1 after every r1_every-th D step of the run: an entry of its own */
		int nlazy = 0, ri;
		for (int k = 0; k < s->d_steps; k++)
			nlazy += s->r1_on && s->r1_every > 1 && (s->v * s->d_steps + k) % s->r1_every == 0;
		if ((rc = gf_stepdrv_open(s->drv, ctx, s->v, s->d_steps * s->acc + nlazy, &ri)))
			return rc;
		rec *r = &s->recs[ri];
		memset(r, 0, sizeof(*r));
		if ((rc = d_schedules(s, ctx)))
			return rc;
		int64_t pos[2] = { s->data_pos[0], s->data_pos[1] };
		for (int k = 0; k < s->d_steps; k++) {
			int lazy = s->r1_on && s->r1_every > 1 && (s->v * s->d_steps + k) % s->r1_every == 0;
			struct micro m = { .tail = !lazy, .last_of_iter = k == s->d_steps - 1 };
			for (int micro = 0; micro < s->acc; micro++)
				if ((rc = micro_step(s, ctx, micro, r, pos, &m)))
					return rc == GF_EEOF || rc == GF_ESTOP ? 0 : rc;
			if (lazy && (rc = d_lazy_step(s, ctx, m.last_of_iter, m.images)))
				return rc == GF_ESTOP ? 0 : rc;
			r->t.nr1 += s->r1_on && (lazy || s->r1_every == 1);
		}
		s->v++;
		s->data_pos[0] = pos[0];
		s->data_pos[1] = pos[1];
		/* sync: D's iterations are the run's steps; async: G's updates are
		 * (g_step reports them), D only adds the images it consumed */
		gf_report_step(ctx, s->async ? -1 : s->v, (int64_t)r->t.images);
		r->mstep = s->async ? s->gseen : s->v;
		r->stale_max = s->stale_max;
		if ((rc = gf_stepdrv_close(s->drv, ctx, s->v - 1)) || (rc = d_maybe_state(s, ctx)))
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
			if ((rc = d_push_weights(s, ctx)))
				return rc;
		}
	}
	return 0;
}

static int dstep_flush(void *self, gf_ctx *ctx)
{
	int rc = d_push_state(self, ctx);
	return rc == GF_ESTOP ? 0 : rc;
}

static void dstep_destroy(void *self)
{
	dstep *s = self;
	gf_stepdrv_destroy(s->drv); /* waits for what is in flight */
	gf_devmsg_destroy(s->dm);
	gf_staging_destroy(s->stg);
	gf_fake_cache_destroy(s->cache);
	gf_penalty_destroy(s->pen);
	float *dev[] = { s->dpred, (float *)(void *)s->rst, s->real_dev, s->fake_dev, (float *)(void *)s->rlab_dev,
	                 (float *)(void *)s->flab_dev, s->eps_dev, s->xhat_dev, s->pair_dev,
	                 (float *)(void *)s->pair_lab };
	for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
		if (dev[i])
			s->be->ops->free(s->be, dev[i]);
	gf_trainer_destroy(s->tr);
	free(s);
}

static const gf_port_desc inputs[] = {
	{ "real", "batch", 0, "batches of real images (and labels) from the data path" },
	{ "fakes", "fakes", 0, "generated images from g_step" },
	{ "reduced", "grads", GF_PORT_OPTIONAL, "data parallel: the exchange stage's communicator (its handshake answer)" },
};

static const gf_port_desc outputs[] = {
	{ "weights", "d_weights", 0, "D's weights for g_step's replica" },
	{ "metrics", "metrics", GF_PORT_OPTIONAL, "loss_d, mean D(x), mean D(G(z)), images, staleness, lecam, r1, gp, ada_p, "
	                                           "ada_rt" },
	{ "state", "state", GF_PORT_OPTIONAL, "checkpoint part every checkpoint_every iterations and at the end" },
	{ "grads", "grads", GF_PORT_OPTIONAL, "data parallel: the handshake with an exchange stage (D's size and device)" },
};

static const gf_param_desc params[] = {
	{ "net", GF_PARAM_TABLE, NULL, "D's layer table (a backbone such as dcgan.D{})", NULL },
	{ "opt", GF_PARAM_TABLE, "nil", "optimiser, e.g. gf.adam{lr = 2e-4, betas = {0.5, 0.999}} (that is the default)",
	  NULL },
	{ "loss", GF_PARAM_STR, "bce", "bce (D ends in a sigmoid), bce_logits, hinge, ls, wgan or rpgan (R3GAN's "
	                               "relativistic pairs: D without batch statistics); as g_step's",
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
	{ "r2", GF_PARAM_NUM, "0", "R2 penalty gamma: gamma/2 E|grad D(G(z))|^2 on the fakes, in every D step (0 = none; "
	                           "loss = \"rpgan\" with r1 = r2 = gamma is R3GAN's gamma/2 (R1 + R2))", "0.." },
	{ "r1_every", GF_PARAM_INT, "16", "R1: 1 = in every D step (always with loss = \"rpgan\"); k > 1 = StyleGAN2's "
	                                  "lazy regularisation, a step of "
	                                  "its own every k D steps (penalty x k, Adam's lr x r and betas ^ r, r = k/(k+1))",
	  "1..1000000" },
	{ "gp", GF_PARAM_NUM, "0", "WGAN-GP lambda: lambda E(|grad D(x^)| - 1)^2 on random interpolates of real and fake "
	                           "(loss = \"wgan\"; 0 = none)", "0.." },
	GF_TRAIN_SCHEDULE_PARAMS,
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
