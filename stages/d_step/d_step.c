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
 *    E(|grad D(x^)| - 1)^2 on x^ = e x + (1 - e) G(z), e ~ U(0, 1) per
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
 * interval is checkpointed as "<instance>.ada".
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

enum { IN_REAL, IN_FAKES, IN_REDUCED };
enum { OUT_WEIGHTS, OUT_METRICS, OUT_STATE, OUT_GRADS };

typedef struct dstep {
	gf_trainer *tr;         /* D, its optimiser, update, state */
	gf_net *d;              /* the trainer's */
	gf_backend *be;         /* the trainer's */
	gf_gan_loss loss;
	int async;
	int64_t staleness;      /* async bound, and the weights interval */
	int d_steps, acc, max_batch, cls;
	int64_t ckpt_every;
	int64_t v;              /* iterations done (version of D's weights) */
	int64_t data_pos[2];    /* epoch, position of the last real batch used */
	int64_t stale_max;
	int64_t gseen;          /* async: G updates behind the newest fakes used */
	int64_t ckpt_basis;     /* async: gseen at the last state pushed */
	int checked;            /* real batch shape checked against D */
	float *dpred;           /* (max_batch, D outputs) device */
	float *out_host;        /* (max_batch, D outputs) */
	gf_fake_cache *cache;   /* async: recent fakes */
	const char *reader;     /* the lmdb_reader feeding `real`, NULL = none (valid while the graph is) */
	gf_lecam lecam;         /* lambda 0 = none */
	float *reg_host;        /* LeCam: (max_batch, D outputs) gradient, host */
	float *reg_dev;         /* and device */
	gf_msg *next_real;      /* sync: the next iteration's first real batch, taken before the weights
	                           that let G start that iteration are pushed (see take_next_real) */
	/* gradient penalties */
	float r1, gp;           /* gamma, lambda; 0 = none */
	int r1_every;           /* 1: in the D step; k > 1: lazy, a step of its own every k D steps */
	gf_penalty *pen;        /* r1 or gp */
	gf_rng gp_rng;          /* gp: the interpolation weights */
	float *xhat;            /* gp: (max_batch, D input) host interpolates */
	float *eps;             /* gp: (max_batch) their weights */
	size_t nin;             /* D's input values per sample */
	/* ADA */
	float *ada_p;           /* the ada layer's buffer "p" (device), NULL: D has no ada layer */
	float p;                /* its value */
	gf_ada ada;
} dstep;

/* ---- setup ---- */

/* ADA: the ada layer of D, its p, the controller's options and state.
 * The options' ranges are checked by the runtime (the table below). */
static int ada_setup(dstep *s, gf_ctx *ctx, const gf_value *p)
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

/* The penalty's buffers and generator, once D exists. */
static int penalty_setup(dstep *s, gf_ctx *ctx)
{
	if (s->r1 <= 0 && s->gp <= 0)
		return 0;
	if (gf_penalty_create(&s->pen, s->d, s->max_batch))
		return gf_fail(ctx, "parameter '%s': D (net): %s", s->r1 > 0 ? "r1" : "gp", gf_errmsg());
	gf_tensor din;
	gf_net_shapes(s->d, &din, NULL);
	s->nin = (size_t)gf_tensor_numel(&din) / (size_t)din.shape[0];
	if (s->gp > 0) {
		if (!(s->xhat = malloc((size_t)s->max_batch * s->nin * sizeof(float))) ||
		    !(s->eps = malloc((size_t)s->max_batch * sizeof(float))))
			return gf_fail(ctx, "out of memory");
		gf_rng_init(&s->gp_rng, gf_ctx_run(ctx)->seed, gf_train_stream(ctx, "gp"));
		return gf_train_resume_rng(ctx, "gp_rng", &s->gp_rng);
	}
	return 0;
}

static int dstep_create(gf_ctx *ctx, const gf_value *p, void **self)
{
	const gf_run_info *run = gf_ctx_run(ctx);
	dstep *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	int rc;
	*self = s;
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
	if ((rc = penalty_conf(s, ctx, p)))
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
	gf_tensor din, dout;
	gf_net_shapes(s->d, &din, &dout);
	size_t nout = (size_t)gf_tensor_numel(&dout);
	s->out_host = malloc(nout * sizeof(float));
	if (s->lecam.lambda > 0 && (!(s->reg_host = malloc(nout * sizeof(float))) ||
	                     s->be->ops->alloc(s->be, (void **)&s->reg_dev, nout * sizeof(float))))
		return gf_fail(ctx, "out of memory");
	if (!s->out_host || s->be->ops->alloc(s->be, (void **)&s->dpred, nout * sizeof(float)) ||
	    (s->async && gf_fake_cache_create(&s->cache, (int)gf_param_int(p, "cache"), (int)gf_param_int(p, "reuse"),
	                                      s->staleness)))
		return gf_fail(ctx, "out of memory");
	if ((rc = penalty_setup(s, ctx)))
		return rc;
	s->data_pos[0] = s->data_pos[1] = -1;
	if ((rc = gf_trainer_resume(s->tr, &s->v)) || (rc = gf_train_resume_i64(ctx, "data_pos", s->data_pos, 2)))
		return rc;
	int64_t lc[3] = { 0, 0, 0 };
	if (s->lecam.lambda > 0 && (rc = gf_train_resume_i64(ctx, "lecam", lc, 3)))
		return rc;
	if ((rc = ada_setup(s, ctx, p)))
		return rc;
	s->lecam.set = (int)lc[0];
	memcpy(s->lecam.ema, lc + 1, sizeof(s->lecam.ema));
	return 0;
}

/* ---- fakes ---- */

/* The fakes of this D micro-step. Sync: the next message, of version v.
 * Async: the newest cached fakes whose D weights are at most `staleness`
 * iterations old, waiting for fresher ones only when none is. The returned
 * message is borrowed (async: owned by the cache) or owned (sync). */
static int get_fakes(dstep *s, gf_ctx *ctx, gf_msg **out, int64_t *stale)
{
	int rc;
	gf_msg *m;
	if (!s->async) {
		if ((rc = gf_pop(ctx, IN_FAKES, &m)))
			return rc;
		if (m->version != s->v) {
			long long got = (long long)m->version;
			gf_msg_release(m);
			return gf_fail(ctx, "synchronous mode: D iteration %lld received fakes made with D weights of "
			                    "version %lld (are g_step and d_step both in mode \"sync\"?)",
			               (long long)s->v, got);
		}
		*out = m;
		*stale = 0;
		return 0;
	}
	while ((rc = gf_try_pop(ctx, IN_FAKES, &m)) == 0)
		gf_fake_cache_add(s->cache, m);
	if (rc != -EAGAIN)
		return rc; /* GF_EEOF: G has finished, so does D */
	while (!(m = gf_fake_cache_pick(s->cache, s->v))) {
		if ((rc = gf_pop(ctx, IN_FAKES, &m)))
			return rc;
		gf_fake_cache_add(s->cache, m);
	}
	*out = m;
	*stale = s->v - m->version;
	return 0;
}

/* ---- the loop ---- */

static int push_weights(dstep *s, gf_ctx *ctx)
{
	gf_msg *m;
	int rc = gf_trainer_weights(s->tr, OUT_WEIGHTS, s->v, &m);
	if (rc)
		return rc;
	gf_msg_set_scalar(m, "fakes_per_step", (double)s->d_steps * s->acc);
	return gf_push(ctx, OUT_WEIGHTS, m);
}

static int push_state(dstep *s, gf_ctx *ctx)
{
	gf_state *st;
	char k[160];
	int rc = gf_trainer_state_begin(s->tr, s->v, &st);
	if (rc || !st)
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
	/* async: filed under G's step, so it joins G's part of the checkpoint */
	return gf_trainer_state_push(s->tr, rc, s->async ? s->gseen : s->v);
}

/* LeCam's term for one half-step's outputs (host), scaled like its loss:
 * its value added to *reg, its gradient added to dpred. */
static int lecam_add(dstep *s, int fake, size_t n, float scale, double *reg)
{
	*reg += gf_lecam_grad(&s->lecam, s->out_host, n, fake, scale, s->reg_host);
	const gf_backend_ops *o = s->be->ops;
	int rc = o->copy(s->be, s->reg_dev, s->reg_host, n * sizeof(float), GF_COPY_H2D);
	return rc ? rc : o->axpy(s->be, s->dpred, s->reg_dev, n, 1.0f);
}

/* ---- gradient penalties ---- */

/* The penalty of D's last forward, weighted like a half of D's loss (1/2,
 * over the micro-batches) times gain, its gradient added to D's (or
 * written: accumulate 0), with dy (may be NULL) walked in the same pass. */
static int penalty(dstep *s, gf_ctx *ctx, gf_penalty_kind kind, float weight, double gain, const float *dy,
                   unsigned accumulate, double *value)
{
	double mean;
	int rc = gf_penalty_lengths(s->pen, NULL, &mean);
	if (!rc)
		rc = gf_penalty_apply(s->pen, kind, weight, 1.0, 0.5 * gain / s->acc, dy, GF_NEED_DW | accumulate, value);
	if (rc == GF_ESTOP || rc == GF_EFAIL)
		return rc;
	if (rc)
		return gf_fail(ctx, "iteration %lld: %s penalty: %s", (long long)s->v, kind == GF_PENALTY_SQUARE ? "R1" : "gradient",
		               gf_errmsg());
	if (!isfinite(*value))
		return gf_fail(ctx, "iteration %lld: the %s penalty is %g (non-finite); the last good checkpoint is kept",
		               (long long)s->v, kind == GF_PENALTY_SQUARE ? "R1" : "gradient", *value);
	return 0;
}

/* WGAN-GP on one micro-batch: x^ = e x + (1 - e) G(z) per sample, D's
 * gradient norm there pulled to 1. */
static int gp_step(dstep *s, gf_ctx *ctx, const gf_msg *real, const gf_msg *fake, double *value)
{
	const gf_tensor *x = &real->t[0], *f = &fake->t[0];
	int64_t n = x->shape[0] < f->shape[0] ? x->shape[0] : f->shape[0];
	const float *xr = x->data, *xf = f->data;
	gf_rng_uniform(&s->gp_rng, s->eps, (size_t)n, 0.0f, 1.0f);
	for (int64_t i = 0; i < n; i++)
		for (size_t j = 0; j < s->nin; j++) {
			size_t at = (size_t)i * s->nin + j;
			s->xhat[at] = s->eps[i] * xr[at] + (1.0f - s->eps[i]) * xf[at];
		}
	gf_tensor xh = *x, lab = real->ntensors > 1 ? real->t[1] : *x;
	xh.data = s->xhat;
	xh.shape[0] = n;
	lab.shape[0] = n;
	int rc = gf_net_forward(s->d, &xh, gf_net_classes(s->d) ? &lab : NULL, GF_TRAIN);
	if (rc)
		return gf_fail(ctx, "iteration %lld: D forward on the interpolates: %s", (long long)s->v, gf_errmsg());
	double v;
	if ((rc = penalty(s, ctx, GF_PENALTY_DISTANCE, s->gp, 1.0, NULL, GF_ACCUMULATE, &v)))
		return rc;
	*value += v / s->acc;
	return 0;
}

/* StyleGAN2's lazy R1: after D step `step` (counted over the run) when
 * step % r1_every == 0, a step of its own on that step's real batch: the
 * penalty times r1_every, an optimiser update. */
static int r1_lazy(dstep *s, gf_ctx *ctx, const gf_msg *real, double *value)
{
	int rc = gf_net_forward(s->d, &real->t[0], gf_net_classes(s->d) && real->ntensors > 1 ? &real->t[1] : NULL, GF_TRAIN);
	if (rc)
		return gf_fail(ctx, "iteration %lld: D forward (R1): %s", (long long)s->v, gf_errmsg());
	gf_trainer_arm(s->tr, s->v); /* data parallel: buckets leave during the double backward's walk */
	double v;
	if ((rc = penalty(s, ctx, GF_PENALTY_SQUARE, s->r1, s->r1_every, NULL, 0, &v)))
		return rc;
	*value += v;
	return gf_trainer_update(s->tr, s->v, NULL);
}

/* D forward + loss + backward on one batch; adds the mean output to *mean.
 * The real half-step with r1 and r1_every = 1 adds R1 in the same walk. */
static int half_step(dstep *s, gf_ctx *ctx, const gf_tensor *x, const gf_tensor *labels, int fake,
                     unsigned accumulate, double *loss, double *mean, double *reg, double *r1)
{
	int rc = gf_net_forward(s->d, x, gf_net_classes(s->d) ? labels : NULL, GF_TRAIN);
	if (rc)
		return gf_fail(ctx, "iteration %lld: D forward: %s", (long long)s->v, gf_errmsg());
	gf_tensor out;
	gf_net_output(s->d, &out);
	float l;
	if ((rc = gf_trainer_loss(s->tr, s->v, s->loss.d, &out, NULL, fake ? s->loss.fake : s->loss.real, 0.5f / (float)s->acc, s->dpred, &l)))
		return rc;
	*loss += l;
	size_t n = (size_t)gf_tensor_numel(&out);
	if ((rc = s->be->ops->copy(s->be, s->out_host, out.data, n * sizeof(float), GF_COPY_D2H)))
		return gf_fail(ctx, "%s", gf_errmsg());
	double sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += s->out_host[i];
	*mean += sum / (double)n / s->acc;
	if (!fake && s->ada_p)
		gf_ada_observe(&s->ada, s->out_host, n, s->loss.d == GF_LOSS_BCE);
	if (s->lecam.lambda > 0 && s->lecam.set && (rc = lecam_add(s, fake, n, 0.5f / (float)s->acc, reg)))
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

/* What one D iteration adds up for its metrics line. */
typedef struct sums {
	double loss, dreal, dfake, images, stale, lecam;
	double r1, gp;  /* penalties: sums over the D steps that computed them */
	int nr1;        /* D steps that computed R1 */
} sums;

static int push_metrics(dstep *s, gf_ctx *ctx, const sums *t)
{
	gf_msg *m;
	int rc = gf_trainer_metrics(s->tr, OUT_METRICS, s->async ? s->gseen : s->v, &m);
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
		gf_msg_set_scalar(m, "staleness_max", (double)s->stale_max);
	}
	return gf_push(ctx, OUT_METRICS, m);
}

/* One micro-batch: a real and a fake batch, D's loss on both (and the
 * gradient penalty), gradients summed into D's. pos receives the real
 * batch's data position; keep (may be NULL) the real batch, which the
 * caller then releases (the lazy R1 step's). */
static int micro_step(dstep *s, gf_ctx *ctx, int micro, sums *t, int64_t pos[2], gf_msg **keep)
{
	gf_msg *real = s->next_real, *fake = NULL;
	int64_t stale = 0;
	int rc = 0;
	s->next_real = NULL;
	if (!real && (rc = gf_pop(ctx, IN_REAL, &real)))
		return rc;
	if (!s->checked && (rc = gf_trainer_check_batch(s->tr, real, "real batches", 0))) {
		gf_msg_release(real);
		return rc;
	}
	s->checked = 1;
	if ((rc = get_fakes(s, ctx, &fake, &stale))) {
		gf_msg_release(real);
		return rc;
	}
	if (fake->t[0].shape[0] > s->max_batch) {
		gf_msg_release(real);
		return gf_fail(ctx, "fake batch of %lld exceeds max_batch = %d", (long long)fake->t[0].shape[0],
		               s->max_batch);
	}
	if (stale > s->stale_max)
		s->stale_max = stale;
	if (fake->step + 1 > s->gseen)
		s->gseen = fake->step + 1;
	t->stale += (double)stale;
	unsigned a = micro ? GF_ACCUMULATE : 0;
	if (!(rc = half_step(s, ctx, &real->t[0], &real->t[1], 0, a, &t->loss, &t->dreal, &t->lecam, &t->r1))) {
		/* WGAN-GP first: the exchange's buckets leave during the last
		 * backward of the D step, the fake half-step's */
		if (s->gp > 0)
			rc = gp_step(s, ctx, real, fake, &t->gp);
		if (!rc && micro == s->acc - 1)
			gf_trainer_arm(s->tr, s->v); /* buckets leave during this backward */
		if (!rc)
			rc = half_step(s, ctx, &fake->t[0], &fake->t[1], 1, GF_ACCUMULATE, &t->loss, &t->dfake, &t->lecam,
			               NULL);
	}
	t->images += (double)real->t[0].shape[0];
	pos[0] = real->epoch;
	pos[1] = (int64_t)real->pos;
	if (keep && !rc)
		*keep = real;
	else
		gf_msg_release(real);
	if (!s->async)
		gf_msg_release(fake);
	return rc;
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

/* Sync: D takes the next iteration's first real batch before it pushes
 * the weights G waits for. G runs one iteration ahead of D (its step k + 1
 * overlaps D's), so when the real data stops (a stall, the end of a
 * graceful stop) after G had been let into a step D cannot finish, the
 * final checkpoint would hold G at k + 1 and D at k, which no resume can
 * continue exactly. Holding the weights until D has its batch keeps them
 * at the same step; when the batch is already queued, as it is while data
 * flows, this costs nothing. 0, or GF_EEOF / GF_ESTOP (end of the run) or
 * an error from gf_pop. */
static int take_next_real(dstep *s, gf_ctx *ctx)
{
	if (s->async || s->next_real)
		return 0;
	return gf_pop(ctx, IN_REAL, &s->next_real);
}

static int dstep_loop(dstep *s, gf_ctx *ctx);

static int dstep_run(void *self, gf_ctx *ctx)
{
	dstep *s = self;
	int rc = dstep_loop(s, ctx);
	if (s->next_real) {
		gf_msg_release(s->next_real);
		s->next_real = NULL;
	}
	return rc;
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
	if ((rc = take_next_real(s, ctx)))
		return rc == GF_EEOF || rc == GF_ESTOP ? 0 : rc;
	if ((rc = push_weights(s, ctx)))
		return rc;
	while (!(!s->async && gf_ctx_steps(ctx) > 0 && s->v >= gf_ctx_steps(ctx)) && !(s->async && gf_should_stop(ctx))) {
		sums t = { 0 };
		int64_t pos[2] = { s->data_pos[0], s->data_pos[1] };
		for (int k = 0; k < s->d_steps; k++) {
			double real0 = t.dreal, fake0 = t.dfake, images0 = t.images;
			/* lazy R1 after every r1_every-th D step of the run */
			int lazy = s->r1 > 0 && s->r1_every > 1 && (s->v * s->d_steps + k) % s->r1_every == 0;
			gf_msg *keep = NULL;
			for (int micro = 0; micro < s->acc; micro++)
				if ((rc = micro_step(s, ctx, micro, &t, pos, lazy ? &keep : NULL)))
					return rc == GF_EEOF || rc == GF_ESTOP ? 0 : rc;
			rc = gf_trainer_update(s->tr, s->v, NULL);
			if (!rc && lazy)
				rc = r1_lazy(s, ctx, keep, &t.r1);
			if (keep)
				gf_msg_release(keep);
			if (!rc)
				rc = ada_after_step(s, ctx, t.images - images0);
			if (rc)
				return rc == GF_ESTOP ? 0 : rc;
			t.nr1 += s->r1 > 0 && (lazy || s->r1_every == 1);
			if (s->lecam.lambda > 0)
				gf_lecam_average(&s->lecam, t.dreal - real0, t.dfake - fake0);
		}
		s->v++;
		s->data_pos[0] = pos[0];
		s->data_pos[1] = pos[1];
		/* sync: D's iterations are the run's steps; async: G's updates are
		 * (g_step reports them), D only adds the images it consumed */
		gf_report_step(ctx, s->async ? -1 : s->v, (int64_t)t.images);
		if ((rc = push_metrics(s, ctx, &t)) || (rc = maybe_state(s, ctx)))
			return rc;
		int last = !s->async && gf_ctx_steps(ctx) > 0 && s->v >= gf_ctx_steps(ctx);
		if (s->async ? s->v % s->staleness == 0 && !last : !last && !gf_should_stop(ctx)) {
			if ((rc = take_next_real(s, ctx)))
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
	gf_fake_cache_destroy(s->cache);
	gf_penalty_destroy(s->pen);
	free(s->xhat);
	free(s->eps);
	if (s->dpred)
		s->be->ops->free(s->be, s->dpred);
	if (s->reg_dev)
		s->be->ops->free(s->be, s->reg_dev);
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
