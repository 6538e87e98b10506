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
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/dist.h>
#include <ganflow/err.h>
#include <ganflow/nn.h>
#include <ganflow/stage.h>
#include <ganflow/train.h>

enum { IN_REAL, IN_FAKES, IN_REDUCED };
enum { OUT_WEIGHTS, OUT_METRICS, OUT_STATE, OUT_GRADS };

#define MAX_CACHE 64

typedef struct dstep {
	gf_backend *be;
	gf_net *d;
	gf_optim *opt;
	gf_dist_step *dist;     /* the exchange protocol (no-op without one) */
	float base_lr;
	int64_t warmup;         /* lr_warmup iterations, 0 = none */
	gf_state *state;
	gf_loss_kind loss;
	float t_real, t_fake;   /* loss targets */
	int async;
	int64_t staleness;      /* async bound, and the weights interval */
	int d_steps, acc, max_batch, ncache_max, cls;
	float clip;
	int64_t ckpt_every;
	int64_t v;              /* iterations done (version of D's weights) */
	int64_t last_state;
	int64_t data_pos[2];    /* epoch, position of the last real batch used */
	int64_t stale_max;
	int64_t gseen;          /* async: G updates behind the newest fakes used */
	int64_t ckpt_basis;     /* async: gseen at the last state pushed */
	int checked;            /* real batch shape checked against D */
	float *dpred;           /* (max_batch, D outputs) device */
	float *out_host;        /* (max_batch, D outputs) */
	int reuse;              /* async: D steps one fake batch may serve */
	int ncache;
	gf_msg *cache[MAX_CACHE]; /* async: fakes, oldest first */
	int uses[MAX_CACHE];      /* D steps each cached batch served */
	char reader[64];
	char table_text[65536];
} dstep;

/* ---- setup ---- */

static int loss_for_d(const char *name, gf_loss_kind *k, float *treal, float *tfake)
{
	*treal = 1.0f;
	*tfake = 0.0f;
	if (!strcmp(name, "bce"))
		*k = GF_LOSS_BCE;
	else if (!strcmp(name, "bce_logits"))
		*k = GF_LOSS_BCE_LOGITS;
	else if (!strcmp(name, "hinge"))
		*k = GF_LOSS_HINGE_D, *tfake = -1.0f;
	else if (!strcmp(name, "ls"))
		*k = GF_LOSS_LS;
	else
		return GF_EPARAM;
	return 0;
}

static int dstep_create(gf_ctx *ctx, const gf_value *p, void **self)
{
	const gf_run_info *run = gf_ctx_run(ctx);
	dstep *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	*self = s;
	const char *mode = gf_value_as_str(gf_value_get(p, "mode"), "sync", NULL);
	const char *loss = gf_value_as_str(gf_value_get(p, "loss"), "bce", NULL);
	s->staleness = gf_value_as_int(gf_value_get(p, "staleness"), 4, NULL);
	s->d_steps = (int)gf_value_as_int(gf_value_get(p, "d_steps"), 1, NULL);
	s->acc = (int)gf_value_as_int(gf_value_get(p, "accumulate"), 1, NULL);
	s->max_batch = (int)gf_value_as_int(gf_value_get(p, "max_batch"), 256, NULL);
	s->ncache_max = (int)gf_value_as_int(gf_value_get(p, "cache"), 8, NULL);
	s->reuse = (int)gf_value_as_int(gf_value_get(p, "reuse"), 2, NULL);
	s->clip = (float)gf_value_as_num(gf_value_get(p, "clip"), 0, NULL);
	s->cls = (int)gf_value_as_int(gf_value_get(p, "class"), -1, NULL);
	s->warmup = gf_value_as_int(gf_value_get(p, "lr_warmup"), 0, NULL);
	s->ckpt_every = run->checkpoint_every;
	snprintf(s->reader, sizeof(s->reader), "%s", gf_value_as_str(gf_value_get(p, "reader"), "reader", NULL));
	if (strcmp(mode, "sync") && strcmp(mode, "async"))
		return gf_fail(ctx, "parameter 'mode' must be \"sync\" or \"async\", got \"%s\"", mode);
	s->async = !strcmp(mode, "async");
	if (loss_for_d(loss, &s->loss, &s->t_real, &s->t_fake))
		return gf_fail(ctx, "parameter 'loss' must be \"bce\", \"bce_logits\", \"hinge\" or \"ls\", got \"%s\"",
		               loss);
	if (s->d_steps < 1 || s->acc < 1 || s->max_batch < 1)
		return gf_fail(ctx, "parameters 'd_steps', 'accumulate' and 'max_batch' must be >= 1");
	if (s->warmup < 0)
		return gf_fail(ctx, "parameter 'lr_warmup' must be >= 0, got %lld", (long long)s->warmup);
	if (s->async && (s->staleness < 1 || s->reuse < 1 || s->ncache_max < 1 || s->ncache_max > MAX_CACHE))
		return gf_fail(ctx, "async mode needs staleness >= 1, reuse >= 1 and 1 <= cache <= %d", MAX_CACHE);

	int rc = gf_train_backend(ctx, p, &s->be);
	if (rc)
		return rc;
	const gf_value *dt = gf_value_get(p, "net");
	if ((rc = gf_train_net(ctx, s->be, dt, s->max_batch, "D (net)", run->seed, gf_train_stream(ctx, "init"), &s->d)))
		return rc;
	gf_value_format(dt, s->table_text, sizeof(s->table_text));
	gf_optim_conf oc;
	gf_optim_defaults(&oc, GF_OPT_ADAM);
	oc.lr = 2e-4f;
	oc.beta1 = 0.5f;
	const gf_value *ov = gf_value_get(p, "opt");
	if (ov && ov->type != GF_VNIL && gf_optim_conf_parse(&oc, ov))
		return gf_fail(ctx, "parameter 'opt': %s", gf_errmsg());
	if ((rc = gf_optim_create(&s->opt, s->d, &oc)))
		return gf_fail(ctx, "D optimiser: %s", gf_errmsg());
	s->base_lr = oc.lr;
	gf_tensor din, dout;
	gf_net_shapes(s->d, &din, &dout);
	size_t nout = (size_t)gf_tensor_numel(&dout);
	if ((rc = s->be->ops->alloc(s->be, (void **)&s->dpred, nout * sizeof(float))))
		return gf_fail(ctx, "out of memory");
	s->out_host = malloc(nout * sizeof(float));
	if (!s->out_host || (rc = gf_state_create(&s->state)))
		return gf_fail(ctx, "out of memory");
	s->data_pos[0] = s->data_pos[1] = -1;
	s->last_state = -1;
	if ((rc = gf_train_resume(ctx, s->d, s->opt, &s->v)) || (rc = gf_train_resume_i64(ctx, "data_pos", s->data_pos, 2)))
		return rc;
	if (run->resume)
		s->last_state = s->v;
	return gf_dist_step_create(&s->dist, ctx, OUT_GRADS, IN_REDUCED, s->d, &s->opt, "D");
}

/* ---- fakes ---- */

static void cache_add(dstep *s, gf_msg *m)
{
	if (s->ncache == s->ncache_max) {
		gf_msg_release(s->cache[0]);
		memmove(s->cache, s->cache + 1, (size_t)(s->ncache - 1) * sizeof(s->cache[0]));
		memmove(s->uses, s->uses + 1, (size_t)(s->ncache - 1) * sizeof(s->uses[0]));
		s->ncache--;
	}
	s->uses[s->ncache] = 0;
	s->cache[s->ncache++] = m;
}

/* Newest cached fakes that may still serve a D step: used fewer than
 * `reuse` times and made with D weights at most `staleness` iterations
 * old. -1 when none. */
static int cache_pick(const dstep *s)
{
	for (int i = s->ncache - 1; i >= 0; i--)
		if (s->uses[i] < s->reuse && s->v - s->cache[i]->version <= s->staleness)
			return i;
	return -1;
}

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
		cache_add(s, m);
	if (rc != -EAGAIN && rc != GF_EEOF)
		return rc;
	if (rc == GF_EEOF)
		return GF_EEOF; /* G has finished: so does D */
	int i;
	while ((i = cache_pick(s)) < 0) {
		if ((rc = gf_pop(ctx, IN_FAKES, &m)))
			return rc;
		cache_add(s, m);
	}
	s->uses[i]++;
	*out = s->cache[i];
	*stale = s->v - (*out)->version;
	return 0;
}

/* ---- the loop ---- */

static int push_weights(dstep *s, gf_ctx *ctx)
{
	gf_msg *m;
	int rc = gf_msg_get(ctx, OUT_WEIGHTS, &m);
	if (rc)
		return rc;
	if ((rc = gf_weights_pack(m, s->d, s->v))) {
		gf_msg_release(m);
		return gf_fail(ctx, "D weights: %s", gf_errmsg());
	}
	m->step = s->v;
	m->label = s->cls;
	gf_msg_set_scalar(m, "fakes_per_step", (double)s->d_steps * s->acc);
	return gf_push(ctx, OUT_WEIGHTS, m);
}

static int push_state(dstep *s, gf_ctx *ctx)
{
	/* ZeRO-1 checkpoints gather the optimiser shards: every rank takes
	 * part, also those that save nothing */
	int save = gf_port_edges(ctx, 1, OUT_STATE) > 0;
	if ((!save && gf_dist_step_mode(s->dist) != GF_DIST_ZERO1) || s->last_state == s->v)
		return 0;
	char name[160];
	int rc = gf_dist_step_state(s->dist, save ? s->state : NULL, gf_train_key(ctx, "net", name, sizeof(name)));
	if (rc == GF_EFAIL || rc == GF_ESTOP)
		return rc;
	if (!save) {
		s->last_state = s->v;
		return rc;
	}
	if (!rc)
		rc = gf_state_add_i64(s->state, gf_train_key(ctx, "step", name, sizeof(name)), &s->v, 1);
	if (!rc)
		rc = gf_state_add_i64(s->state, gf_train_key(ctx, "data_pos", name, sizeof(name)), s->data_pos, 2);
	if (!rc)
		rc = gf_state_meta(s->state, gf_train_key(ctx, "reader", name, sizeof(name)), s->reader);
	if (!rc)
		rc = gf_state_describe(s->state, ctx, "discriminator", s->table_text, s->cls);
	if (rc) {
		gf_state_clear(s->state);
		return gf_fail(ctx, "checkpoint state: %s", gf_errmsg());
	}
	s->last_state = s->v;
	/* async: filed under G's step, so it joins G's part of the checkpoint */
	return gf_state_push(s->state, ctx, OUT_STATE, s->async ? s->gseen : s->v);
}

/* The real batch must be what D takes: the data's size and channels. */
static int check_real(dstep *s, gf_ctx *ctx, const gf_msg *m)
{
	gf_tensor din, dout;
	gf_net_shapes(s->d, &din, &dout);
	const gf_tensor *x = &m->t[0];
	int ok = m->ntensors >= 1 && x->dtype == GF_F32 && x->ndim == din.ndim;
	for (int i = 1; ok && i < din.ndim; i++)
		ok = x->shape[i] == din.shape[i];
	if (!ok) {
		char a[96], b[96];
		return gf_fail(ctx, "the real batches are %s but D (net) takes %s: make the data's size and channels "
		                    "match the backbone (jpeg_decode size/channels, backbone size/channels)",
		               gf_tensor_shape_str(x, a, 96), gf_tensor_shape_str(&din, b, 96));
	}
	if (x->shape[0] > s->max_batch)
		return gf_fail(ctx, "real batch of %lld exceeds max_batch = %d", (long long)x->shape[0], s->max_batch);
	if (gf_net_classes(s->d) && (m->ntensors < 2 || m->t[1].dtype != GF_I32))
		return gf_fail(ctx, "D is conditional but the real batches carry no labels");
	s->checked = 1;
	return 0;
}

/* D forward + loss + backward on one batch; adds the mean output to *mean. */
static int half_step(dstep *s, gf_ctx *ctx, const gf_tensor *x, const gf_tensor *labels, float target,
                     unsigned accumulate, double *loss, double *mean)
{
	int rc = gf_net_forward(s->d, x, gf_net_classes(s->d) ? labels : NULL, GF_TRAIN);
	if (rc)
		return gf_fail(ctx, "iteration %lld: D forward: %s", (long long)s->v, gf_errmsg());
	gf_tensor out;
	gf_net_output(s->d, &out);
	float l;
	if ((rc = gf_loss(s->be, s->loss, &l, s->dpred, &out, NULL, target, 0.5f / (float)s->acc)) == GF_ENONFINITE)
		return gf_fail(ctx, "iteration %lld: the D loss is non-finite in network D (%s); the last good checkpoint "
		                    "is kept",
		               (long long)s->v, gf_errmsg());
	if (rc)
		return gf_fail(ctx, "iteration %lld: D loss: %s", (long long)s->v, gf_errmsg());
	if (!isfinite(l))
		return gf_fail(ctx, "iteration %lld: the D loss is %g (non-finite) in network D; the last good "
		                    "checkpoint is kept",
		               (long long)s->v, (double)l);
	*loss += l;
	size_t n = (size_t)gf_tensor_numel(&out);
	if ((rc = s->be->ops->copy(s->be, s->out_host, out.data, n * sizeof(float), GF_COPY_D2H)))
		return gf_fail(ctx, "%s", gf_errmsg());
	double sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += s->out_host[i];
	*mean += sum / (double)n / s->acc;
	if ((rc = gf_net_backward(s->d, s->dpred, GF_NEED_DW | accumulate)))
		return rc == GF_ESTOP || rc == GF_EFAIL
		           ? rc
		           : gf_fail(ctx, "iteration %lld: D backward: %s", (long long)s->v, gf_errmsg());
	return 0;
}

static int push_metrics(dstep *s, gf_ctx *ctx, double loss, double dreal, double dfake, double images,
                        double stale_mean)
{
	if (!gf_port_edges(ctx, 1, OUT_METRICS))
		return 0;
	gf_msg *m;
	int rc = gf_msg_get(ctx, OUT_METRICS, &m);
	if (rc)
		return rc;
	m->step = s->async ? s->gseen : s->v;
	m->source = gf_ctx_name(ctx);
	gf_msg_set_scalar(m, "loss_d", loss);
	gf_msg_set_scalar(m, "d_real", dreal);
	gf_msg_set_scalar(m, "d_fake", dfake);
	gf_msg_set_scalar(m, "images", images);
	if (gf_dist_step_mode(s->dist) != GF_DIST_NONE) {
		gf_msg_set_scalar(m, "comm_wait_d", gf_dist_step_wait(s->dist));
		gf_msg_set_scalar(m, "comm_busy_d", gf_dist_step_busy(s->dist));
	}
	if (s->async) {
		gf_msg_set_scalar(m, "staleness", stale_mean);
		gf_msg_set_scalar(m, "staleness_max", (double)s->stale_max);
	}
	return gf_push(ctx, OUT_METRICS, m);
}

static int dstep_run(void *self, gf_ctx *ctx)
{
	dstep *s = self;
	const gf_run_info *run = gf_ctx_run(ctx);
	int rc = gf_dist_step_start(s->dist);
	if (rc)
		return rc;
	if (s->async && gf_dist_step_mode(s->dist) != GF_DIST_NONE && run->world > 1)
		return gf_fail(ctx, "mode = \"async\" with a data-parallel exchange: an async D runs as many iterations as "
		                    "G's pace allows, which differs across ranks, and every iteration is collective; use "
		                    "mode = \"sync\" for data parallelism (or place G and D on different ranks, as "
		                    "pipelines/async_2rank.lua does)");
	if ((rc = push_weights(s, ctx)))
		return rc;
	while (!(!s->async && run->steps > 0 && s->v >= run->steps) && !(s->async && gf_should_stop(ctx))) {
		double loss = 0, dreal = 0, dfake = 0, images = 0, stale_sum = 0;
		int64_t epoch = s->data_pos[0], pos = s->data_pos[1];
		for (int k = 0; k < s->d_steps; k++) {
			for (int micro = 0; micro < s->acc; micro++) {
				gf_msg *real, *fake = NULL;
				int64_t stale = 0;
				if ((rc = gf_pop(ctx, IN_REAL, &real)))
					return rc == GF_EEOF || rc == GF_ESTOP ? 0 : rc;
				if (!s->checked && (rc = check_real(s, ctx, real))) {
					gf_msg_release(real);
					return rc;
				}
				if ((rc = get_fakes(s, ctx, &fake, &stale))) {
					gf_msg_release(real);
					return rc == GF_EEOF || rc == GF_ESTOP ? 0 : rc;
				}
				if (fake->t[0].shape[0] > s->max_batch) {
					gf_msg_release(real);
					return gf_fail(ctx, "fake batch of %lld exceeds max_batch = %d",
					               (long long)fake->t[0].shape[0], s->max_batch);
				}
				if (stale > s->stale_max)
					s->stale_max = stale;
				if (fake->step + 1 > s->gseen)
					s->gseen = fake->step + 1;
				stale_sum += (double)stale;
				unsigned a = micro ? GF_ACCUMULATE : 0;
				if (!(rc = half_step(s, ctx, &real->t[0], &real->t[1], s->t_real, a, &loss, &dreal))) {
					if (micro == s->acc - 1)
						gf_dist_step_arm(s->dist, s->v); /* buckets leave during this backward */
					rc = half_step(s, ctx, &fake->t[0], &fake->t[1], s->t_fake, GF_ACCUMULATE, &loss, &dfake);
				}
				images += (double)real->t[0].shape[0];
				epoch = real->epoch;
				pos = (int64_t)real->pos;
				gf_msg_release(real);
				if (!s->async)
					gf_msg_release(fake);
				if (rc)
					return rc;
			}
			if ((rc = gf_dist_step_reduce(s->dist)))
				return rc == GF_ESTOP ? 0 : rc;
			if (s->warmup > 0)
				gf_optim_set_lr(s->opt, s->base_lr * (float)fmin(1.0, (double)(s->v + 1) / (double)s->warmup));
			float norm;
			rc = gf_dist_step_update(s->dist, s->clip, &norm);
			if (rc == GF_ENONFINITE)
				return gf_fail(ctx, "iteration %lld: a gradient of network D is non-finite; the last good "
				                    "checkpoint is kept",
				               (long long)s->v);
			if (rc == GF_ESTOP || rc == GF_EFAIL)
				return rc == GF_ESTOP ? 0 : rc;
			if (rc)
				return gf_fail(ctx, "iteration %lld: D update: %s", (long long)s->v, gf_errmsg());
		}
		s->v++;
		s->data_pos[0] = epoch;
		s->data_pos[1] = pos;
		/* sync: D's iterations are the run's steps; async: G's updates are
		 * (g_step reports them), D only adds the images it consumed */
		gf_report_step(ctx, s->async ? -1 : s->v, (int64_t)images);
		int n = s->d_steps * s->acc;
		if ((rc = push_metrics(s, ctx, loss / s->d_steps, dreal / s->d_steps, dfake / s->d_steps, images,
		                       stale_sum / n)))
			return rc;
		int due = s->ckpt_every > 0 && (s->async ? s->gseen / s->ckpt_every > s->ckpt_basis / s->ckpt_every
		                                         : s->v % s->ckpt_every == 0);
		if (due) {
			int64_t gseen = s->gseen;
			if (s->async) /* the multiple of checkpoint_every G just crossed */
				s->gseen = gseen / s->ckpt_every * s->ckpt_every;
			rc = push_state(s, ctx);
			s->gseen = gseen;
			s->ckpt_basis = gseen;
			if (rc)
				return rc;
		}
		int last = !s->async && run->steps > 0 && s->v >= run->steps;
		if (s->async ? s->v % s->staleness == 0 && !last : !last && !gf_should_stop(ctx)) {
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
	gf_dist_step_destroy(s->dist);
	for (int i = 0; i < s->ncache; i++)
		gf_msg_release(s->cache[i]);
	gf_state_destroy(s->state);
	gf_optim_destroy(s->opt);
	gf_net_destroy(s->d);
	if (s->be) {
		if (s->dpred)
			s->be->ops->free(s->be, s->dpred);
		gf_backend_close(s->be);
	}
	free(s->out_host);
	free(s);
}

static const gf_port_desc inputs[] = {
	{ "real", "batch", 0, "batches of real images (and labels) from the data path" },
	{ "fakes", "fakes", 0, "generated images from g_step" },
	{ "reduced", "grads", GF_PORT_OPTIONAL, "data parallel: acknowledgements of the exchange stage" },
};

static const gf_port_desc outputs[] = {
	{ "weights", "d_weights", 0, "D's weights for g_step's replica" },
	{ "metrics", "metrics", GF_PORT_OPTIONAL, "loss_d, mean D(x), mean D(G(z)), images, staleness" },
	{ "state", "state", GF_PORT_OPTIONAL, "checkpoint part every checkpoint_every iterations and at the end" },
	{ "grads", "grads", GF_PORT_OPTIONAL, "data parallel: D's gradient buckets / parameters to an exchange stage" },
};

static const gf_param_desc params[] = {
	{ "net", GF_PARAM_TABLE, NULL, "D's layer table (a backbone such as dcgan.D{})", NULL },
	{ "opt", GF_PARAM_TABLE, "nil", "optimiser, e.g. gf.adam{lr = 2e-4, betas = {0.5, 0.999}} (that is the default)", NULL },
	{ "loss", GF_PARAM_STR, "bce", "bce (D ends in a sigmoid), bce_logits, hinge or ls; as g_step's", NULL },
	{ "mode", GF_PARAM_STR, "sync", "sync (alternating G/D) or async (fake cache, bounded staleness)", NULL },
	{ "staleness", GF_PARAM_INT, "4", "async: D weights are sent every this many iterations, and no fakes made "
	                                  "with older D weights are used", NULL },
	{ "cache", GF_PARAM_INT, "8", "async: fake batches kept for reuse", NULL },
	{ "reuse", GF_PARAM_INT, "2", "async: D steps one fake batch may serve (1: every D step waits for new fakes)", NULL },
	{ "d_steps", GF_PARAM_INT, "1", "D steps per G step", NULL },
	{ "accumulate", GF_PARAM_INT, "1", "micro-batches whose gradients are summed per D step", NULL },
	{ "clip", GF_PARAM_NUM, "0", "clip D's gradient to this global L2 norm (0 = no clipping)", NULL },
	{ "max_batch", GF_PARAM_INT, "256", "largest real or fake batch D will see", NULL },
	{ "reader", GF_PARAM_STR, "reader", "instance name of the lmdb_reader feeding this D (its position is checkpointed)", NULL },
	{ "class", GF_PARAM_INT, "-1", "per-class training: the class this pair learns", NULL },
	{ "lr_warmup", GF_PARAM_INT, "0", "iterations over which the learning rate ramps linearly up to opt.lr (0: none)", NULL },
	{ "backend", GF_PARAM_STR, "", "cpu, cuda or auto (default: the run's backend)", NULL },
	{ "threads", GF_PARAM_INT, "0", "compute threads (default: the run's threads setting)", NULL },
	{ "precision", GF_PARAM_STR, "fp32", "fp32, or bf16 / fp16 mixed precision with f32 master weights (cuda)", NULL },
	{ "layout", GF_PARAM_STR, "auto", "activation layout on the GPU: auto, nchw or nhwc (cuda)", NULL },
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
