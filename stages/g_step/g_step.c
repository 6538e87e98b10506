/* g_step: owns the generator G, its optimiser, and a read-only replica of
 * the discriminator D.
 *
 * Each iteration: take D's weights (d_weights, from d_step) into the
 * replica; draw noise (and labels for a conditional G); run G; hand the
 * fakes to d_step; run the replica on the fakes (batch statistics, dropout,
 * running statistics frozen) and back-propagate the G loss through it for
 * the input gradient only; back-propagate through G for G's weight
 * gradients; clip; update G.
 *
 * Synchronous mode (default): every iteration waits for D's weights of the
 * matching version (the version check makes every G step use the current
 * D), like a PyTorch loop that alternates G and D steps on the same fakes.
 * Asynchronous mode (ParaGAN): G never waits once it has some weights; it
 * takes the newest that arrived, and d_step bounds the staleness.
 *
 * d_step tells G how many fake batches it consumes per G step (D steps per
 * G step x D's accumulation) in a scalar of its weights messages; G pushes
 * exactly that many per iteration, the first from its own training
 * forward passes, further ones from extra forward passes.
 *
 * Data parallel (docs/dist.md): with its `grads` / `reduced` ports joined
 * to an `exchange` stage, G's gradients are all-reduced in buckets while
 * the backward pass goes on (or reduce-scattered for ZeRO-1, or the
 * parameters gossiped), and each rank draws its slice of one world-sized
 * noise draw, so N ranks with batch B train like one process with batch
 * N B. Unconnected, nothing changes. `lr_warmup` ramps the learning rate
 * linearly over the first steps (the scaling manager's warm-up).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/dist.h>
#include <ganflow/err.h>
#include <ganflow/nn.h>
#include <ganflow/dataset.h>
#include <ganflow/stage.h>
#include <ganflow/train.h>

enum { IN_DW, IN_REDUCED };
enum { OUT_FAKES, OUT_WEIGHTS, OUT_METRICS, OUT_STATE, OUT_GRADS };

typedef struct gstep {
	gf_backend *be;
	gf_net *g, *d;          /* G and the replica of D */
	gf_optim *opt;
	gf_dist_step *dist;     /* the exchange protocol (no-op without one) */
	float base_lr;
	int64_t warmup;         /* lr_warmup steps, 0 = none */
	gf_rng noise;           /* z and labels */
	gf_state *state;
	gf_ctx *ctx;            /* during run() */
	gf_loss_kind loss;      /* G's loss on D's output */
	int async;
	int batch, zdim, classes, acc;
	int cls;                /* class of a per-class pair, or -1 */
	float clip;
	int64_t publish_every;
	int64_t ckpt_every;
	int64_t step;           /* G updates done */
	int64_t dver;           /* version of the replica's weights, -1 = none yet */
	int64_t fakes_per_step; /* what d_step consumes per G step */
	int64_t last_state;     /* step of the last state pushed */
	double *cdf;            /* (classes) label distribution, NULL = uniform */
	float *z;               /* (batch, zdim) */
	int32_t *labels;        /* (batch) */
	float *u;               /* (batch) label uniforms of a data-parallel rank */
	float *dpred;           /* (batch, outputs of D) */
	char table_text[65536]; /* G's layer table as Lua text, for checkpoints */
} gstep;

/* ---- setup ---- */

static int loss_for_g(const char *name, gf_loss_kind *k)
{
	if (!strcmp(name, "bce"))
		*k = GF_LOSS_NONSAT;
	else if (!strcmp(name, "bce_logits"))
		*k = GF_LOSS_NONSAT_LOGITS;
	else if (!strcmp(name, "hinge"))
		*k = GF_LOSS_HINGE_G;
	else if (!strcmp(name, "ls"))
		*k = GF_LOSS_LS;
	else
		return GF_EPARAM;
	return 0;
}

/* Label distribution proportional to the class counts of a dataset. */
static int load_cdf(gstep *s, gf_ctx *ctx, const char *path)
{
	gf_dataset *ds;
	int rc = gf_dataset_open(path, &ds);
	if (rc)
		return gf_fail(ctx, "labels = \"data\": cannot open dataset '%s': %s", path, gf_errmsg());
	const gf_dataset_meta *m = gf_dataset_metadata(ds);
	if ((int)m->nclasses != s->classes) {
		gf_dataset_close(ds);
		return gf_fail(ctx, "labels = \"data\": dataset '%s' has %u classes, G has %d", path, m->nclasses,
		               s->classes);
	}
	s->cdf = calloc((size_t)s->classes, sizeof(double));
	if (!s->cdf) {
		gf_dataset_close(ds);
		return -ENOMEM;
	}
	double total = 0;
	for (int c = 0; c < s->classes; c++)
		total += (double)m->class_count[c];
	double acc = 0;
	for (int c = 0; c < s->classes; c++) {
		acc += (double)m->class_count[c] / (total > 0 ? total : 1);
		s->cdf[c] = acc;
	}
	gf_dataset_close(ds);
	return 0;
}

static int gstep_create(gf_ctx *ctx, const gf_value *p, void **self)
{
	const gf_run_info *run = gf_ctx_run(ctx);
	gstep *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	*self = s;
	s->batch = (int)gf_value_as_int(gf_value_get(p, "batch"), 64, NULL);
	s->acc = (int)gf_value_as_int(gf_value_get(p, "accumulate"), 1, NULL);
	s->clip = (float)gf_value_as_num(gf_value_get(p, "clip"), 0, NULL);
	s->cls = (int)gf_value_as_int(gf_value_get(p, "class"), -1, NULL);
	s->publish_every = gf_value_as_int(gf_value_get(p, "publish_every"), 100, NULL);
	s->warmup = gf_value_as_int(gf_value_get(p, "lr_warmup"), 0, NULL);
	s->ckpt_every = run->checkpoint_every;
	const char *mode = gf_value_as_str(gf_value_get(p, "mode"), "sync", NULL);
	const char *loss = gf_value_as_str(gf_value_get(p, "loss"), "bce", NULL);
	const char *labels = gf_value_as_str(gf_value_get(p, "labels"), "uniform", NULL);
	if (s->batch < 1)
		return gf_fail(ctx, "parameter 'batch' must be >= 1, got %d", s->batch);
	if (s->acc < 1)
		return gf_fail(ctx, "parameter 'accumulate' must be >= 1, got %d", s->acc);
	if (s->warmup < 0)
		return gf_fail(ctx, "parameter 'lr_warmup' must be >= 0, got %lld", (long long)s->warmup);
	if (strcmp(mode, "sync") && strcmp(mode, "async"))
		return gf_fail(ctx, "parameter 'mode' must be \"sync\" or \"async\", got \"%s\"", mode);
	s->async = !strcmp(mode, "async");
	if (loss_for_g(loss, &s->loss))
		return gf_fail(ctx, "parameter 'loss' must be \"bce\", \"bce_logits\", \"hinge\" or \"ls\", got \"%s\"",
		               loss);
	if (strcmp(labels, "uniform") && strcmp(labels, "data"))
		return gf_fail(ctx, "parameter 'labels' must be \"uniform\" or \"data\", got \"%s\"", labels);

	int rc = gf_train_backend(ctx, p, &s->be);
	if (rc)
		return rc;
	const gf_value *gt = gf_value_get(p, "net"), *dt = gf_value_get(p, "d_net");
	if ((rc = gf_train_net(ctx, s->be, gt, s->batch, "G (net)", run->seed, gf_train_stream(ctx, "init"), &s->g)) ||
	    (rc = gf_train_net(ctx, s->be, dt, s->batch, "D replica (d_net)", run->seed, gf_train_stream(ctx, "replica"),
	                       &s->d)))
		return rc;
	gf_value_format(gt, s->table_text, sizeof(s->table_text));

	/* G's output must be what D takes. */
	gf_tensor gin, gout, din, dout;
	gf_net_shapes(s->g, &gin, &gout);
	gf_net_shapes(s->d, &din, &dout);
	if (gin.ndim != 2)
		return gf_fail(ctx, "G (net) must take noise vectors (input_shape = {z}), its input is %dd", gin.ndim - 1);
	s->zdim = (int)gin.shape[1];
	if (!gf_tensor_same_shape(&gout, &din)) {
		char a[96], b[96];
		return gf_fail(ctx, "G's output %s does not match D's input %s (d_net)", gf_tensor_shape_str(&gout, a, 96),
		               gf_tensor_shape_str(&din, b, 96));
	}
	s->classes = gf_net_classes(s->g);
	if (gf_net_classes(s->d) != s->classes)
		return gf_fail(ctx, "G is conditioned on %d classes but D (d_net) on %d", s->classes,
		               gf_net_classes(s->d));
	if (s->classes && !strcmp(labels, "data")) {
		const char *ds = gf_value_as_str(gf_value_get(p, "dataset"), "", NULL);
		if (!ds[0])
			return gf_fail(ctx, "labels = \"data\" needs the dataset path in parameter 'dataset'");
		if ((rc = load_cdf(s, ctx, ds)))
			return rc;
	}

	gf_optim_conf oc;
	gf_optim_defaults(&oc, GF_OPT_ADAM);
	oc.lr = 2e-4f;
	oc.beta1 = 0.5f;
	const gf_value *ov = gf_value_get(p, "opt");
	if (ov && ov->type != GF_VNIL && gf_optim_conf_parse(&oc, ov))
		return gf_fail(ctx, "parameter 'opt': %s", gf_errmsg());
	if ((rc = gf_optim_create(&s->opt, s->g, &oc)))
		return gf_fail(ctx, "G optimiser: %s", gf_errmsg());
	s->base_lr = oc.lr;
	gf_rng_init(&s->noise, run->seed, gf_train_stream(ctx, "noise"));

	size_t nd = (size_t)gf_tensor_numel(&dout);
	s->z = malloc((size_t)s->batch * (size_t)s->zdim * sizeof(float));
	s->labels = malloc((size_t)s->batch * sizeof(int32_t));
	s->u = malloc((size_t)s->batch * sizeof(float));
	s->dpred = NULL;
	if ((rc = s->be->ops->alloc(s->be, (void **)&s->dpred, nd * sizeof(float))))
		return gf_fail(ctx, "out of memory");
	if (!s->z || !s->labels || !s->u || (rc = gf_state_create(&s->state)))
		return gf_fail(ctx, "out of memory");
	s->dver = -1;
	s->fakes_per_step = 1;
	s->last_state = -1;

	if ((rc = gf_train_resume(ctx, s->g, s->opt, &s->step)) ||
	    (rc = gf_train_resume_rng(ctx, "noise_rng", &s->noise)) ||
	    (rc = gf_train_resume_rng(ctx, "replica_rng", gf_net_rng(s->d))))
		return rc;
	if (run->resume)
		s->last_state = s->step;
	return gf_dist_step_create(&s->dist, ctx, OUT_GRADS, IN_REDUCED, s->g, &s->opt, "G");
}

/* ---- the loop ---- */

static void draw_labels(gstep *s, int n)
{
	if (!s->classes) {
		for (int i = 0; i < n; i++)
			s->labels[i] = s->cls;
		return;
	}
	if (gf_dist_step_sliced(s->dist)) {
		/* this rank's slice of one world-sized draw */
		const gf_run_info *run = gf_ctx_run(s->ctx);
		gf_dist_uniform_slice(&s->noise, s->u, (size_t)n, run->rank, run->world);
		for (int j = 0; j < n; j++) {
			int c = (int)(s->u[j] * (float)s->classes);
			if (s->cdf) {
				c = 0;
				while (c < s->classes - 1 && (double)s->u[j] >= s->cdf[c])
					c++;
			}
			s->labels[j] = c < s->classes ? c : s->classes - 1;
		}
		return;
	}
	float u[64];
	for (int i = 0; i < n; i += 64) {
		int m = n - i < 64 ? n - i : 64;
		gf_rng_uniform(&s->noise, u, (size_t)m, 0.0f, 1.0f);
		for (int j = 0; j < m; j++) {
			int c = (int)(u[j] * (float)s->classes);
			if (s->cdf) {
				c = 0;
				while (c < s->classes - 1 && (double)u[j] >= s->cdf[c])
					c++;
			}
			s->labels[i + j] = c < s->classes ? c : s->classes - 1;
		}
	}
}

/* G forward on fresh noise (training mode). */
static int generate(gstep *s, gf_ctx *ctx)
{
	int64_t zs[2] = { s->batch, s->zdim }, ls[1] = { s->batch };
	if (gf_dist_step_sliced(s->dist)) {
		const gf_run_info *run = gf_ctx_run(ctx);
		gf_dist_normal_slice(&s->noise, s->z, (size_t)s->batch * (size_t)s->zdim, run->rank, run->world);
	} else {
		gf_rng_normal(&s->noise, s->z, (size_t)s->batch * (size_t)s->zdim, 0.0f, 1.0f);
	}
	draw_labels(s, s->batch);
	gf_tensor z = gf_tensor_make(s->z, GF_F32, 2, zs);
	gf_tensor lab = gf_tensor_make(s->labels, GF_I32, 1, ls);
	int rc = gf_net_forward(s->g, &z, s->classes ? &lab : NULL, GF_TRAIN);
	if (rc)
		return gf_fail(ctx, "step %lld: G forward: %s", (long long)s->step, gf_errmsg());
	return 0;
}

/* Pushes G's current output as a fakes message. */
static int push_fakes(gstep *s, gf_ctx *ctx)
{
	gf_tensor out;
	gf_net_output(s->g, &out);
	gf_msg *m;
	int rc = gf_msg_get(ctx, OUT_FAKES, &m);
	if (rc)
		return rc;
	int64_t ls[1] = { s->batch };
	float *x = gf_msg_tensor(m, 0, GF_F32, out.ndim, out.shape);
	int32_t *lab = gf_msg_tensor(m, 1, GF_I32, 1, ls);
	if (!x || !lab) {
		gf_msg_release(m);
		return gf_fail(ctx, "out of memory");
	}
	if ((rc = s->be->ops->copy(s->be, x, out.data, gf_tensor_bytes(&out), GF_COPY_D2H))) {
		gf_msg_release(m);
		return gf_fail(ctx, "copying fakes: %s", gf_errmsg());
	}
	memcpy(lab, s->labels, (size_t)s->batch * sizeof(int32_t));
	m->version = s->dver;
	m->step = s->step;
	m->label = s->cls;
	return gf_push(ctx, OUT_FAKES, m);
}

/* Takes D's weights: in sync mode exactly the version of this step, in
 * async mode the newest available (waiting only for the very first). */
static int take_weights(gstep *s, gf_ctx *ctx)
{
	gf_msg *m = NULL, *next;
	int rc;
	if (!s->async || s->dver < 0) {
		if ((rc = gf_pop(ctx, IN_DW, &m)))
			return rc;
	}
	if (s->async)
		while (gf_try_pop(ctx, IN_DW, &next) == 0) {
			gf_msg_release(m);
			m = next;
		}
	if (!m)
		return 0;
	if (!s->async && m->version != s->step) {
		long long v = (long long)m->version;
		gf_msg_release(m);
		return gf_fail(ctx, "synchronous mode: G step %lld received D weights of version %lld "
		                    "(are g_step and d_step both in mode \"sync\", resumed from the same checkpoint?)",
		               (long long)s->step, v);
	}
	rc = gf_weights_unpack(s->d, m);
	if (rc) {
		gf_msg_release(m);
		return gf_fail(ctx, "D weights: %s", gf_errmsg());
	}
	s->dver = m->version;
	s->fakes_per_step = (int64_t)gf_msg_scalar(m, "fakes_per_step", 1);
	gf_msg_release(m);
	return 0;
}

static int push_metrics(gstep *s, gf_ctx *ctx, double loss, double gnorm)
{
	if (!gf_port_edges(ctx, 1, OUT_METRICS))
		return 0;
	gf_msg *m;
	int rc = gf_msg_get(ctx, OUT_METRICS, &m);
	if (rc)
		return rc;
	m->step = s->step;
	m->source = gf_ctx_name(ctx);
	gf_msg_set_scalar(m, "loss_g", loss);
	gf_msg_set_scalar(m, "grad_norm_g", gnorm);
	if (gf_dist_step_mode(s->dist) != GF_DIST_NONE) {
		gf_msg_set_scalar(m, "comm_wait_g", gf_dist_step_wait(s->dist));
		gf_msg_set_scalar(m, "comm_busy_g", gf_dist_step_busy(s->dist));
	}
	return gf_push(ctx, OUT_METRICS, m);
}

static int push_weights(gstep *s, gf_ctx *ctx)
{
	if (!gf_port_edges(ctx, 1, OUT_WEIGHTS))
		return 0;
	gf_msg *m;
	int rc = gf_msg_get(ctx, OUT_WEIGHTS, &m);
	if (rc)
		return rc;
	if ((rc = gf_weights_pack(m, s->g, s->step))) {
		gf_msg_release(m);
		return gf_fail(ctx, "G weights: %s", gf_errmsg());
	}
	m->step = s->step;
	m->label = s->cls;
	return gf_push(ctx, OUT_WEIGHTS, m);
}

static int push_state(gstep *s, gf_ctx *ctx)
{
	/* ZeRO-1 checkpoints gather the optimiser shards: every rank takes
	 * part, also those that save nothing */
	int save = gf_port_edges(ctx, 1, OUT_STATE) > 0;
	if ((!save && gf_dist_step_mode(s->dist) != GF_DIST_ZERO1) || s->last_state == s->step)
		return 0;
	char name[160];
	int rc = gf_dist_step_state(s->dist, save ? s->state : NULL, gf_train_key(ctx, "net", name, sizeof(name)));
	if (rc == GF_EFAIL || rc == GF_ESTOP)
		return rc;
	if (!save) {
		s->last_state = s->step;
		return rc;
	}
	if (!rc)
		rc = gf_state_add_i64(s->state, gf_train_key(ctx, "step", name, sizeof(name)), &s->step, 1);
	if (!rc)
		rc = gf_state_add_rng(s->state, gf_train_key(ctx, "noise_rng", name, sizeof(name)), &s->noise);
	if (!rc)
		rc = gf_state_add_rng(s->state, gf_train_key(ctx, "replica_rng", name, sizeof(name)), gf_net_rng(s->d));
	if (!rc)
		rc = gf_state_describe(s->state, ctx, "generator", s->table_text, s->cls);
	if (rc) {
		gf_state_clear(s->state);
		return gf_fail(ctx, "checkpoint state: %s", gf_errmsg());
	}
	s->last_state = s->step;
	return gf_state_push(s->state, ctx, OUT_STATE, s->step);
}

static int gstep_run(void *self, gf_ctx *ctx)
{
	gstep *s = self;
	const gf_run_info *run = gf_ctx_run(ctx);
	gf_tensor fake, dout;
	int rc;
	s->ctx = ctx;
	if ((rc = gf_dist_step_start(s->dist)))
		return rc;
	if (s->async && gf_dist_step_sliced(s->dist))
		return gf_fail(ctx, "mode = \"async\" with a data-parallel exchange is not supported (use mode = \"sync\")");
	if (gf_dist_step_sliced(s->dist)) /* the replica's dropout masks differ across ranks too */
		gf_net_rng(s->d)->stream ^= (uint64_t)run->rank * 0x9e3779b97f4a7c15ull;
	while (!gf_should_stop(ctx) && !(run->steps > 0 && s->step >= run->steps)) {
		if ((rc = take_weights(s, ctx)))
			return rc;
		/* a stop may have been decided while we waited */
		if (gf_should_stop(ctx))
			break;
		double loss_sum = 0;
		int64_t pushed = 0;
		for (int micro = 0; micro < s->acc; micro++) {
			if ((rc = generate(s, ctx)))
				return rc;
			if (pushed < s->fakes_per_step) {
				if ((rc = push_fakes(s, ctx)))
					return rc;
				pushed++;
			}
			int64_t ls[1] = { s->batch };
			gf_tensor lab = gf_tensor_make(s->labels, GF_I32, 1, ls);
			gf_net_output(s->g, &fake);
			if ((rc = gf_net_forward(s->d, &fake, s->classes ? &lab : NULL, GF_TRAIN | GF_FREEZE_STATS)))
				return gf_fail(ctx, "step %lld: D replica forward: %s", (long long)s->step, gf_errmsg());
			gf_net_output(s->d, &dout);
			float l;
			if ((rc = gf_loss(s->be, s->loss, &l, s->dpred, &dout, NULL, 1.0f, 1.0f / (float)s->acc)) ==
			    GF_ENONFINITE)
				return gf_fail(ctx, "step %lld: the G loss is non-finite in network G (%s); the last good "
				                    "checkpoint is kept",
				               (long long)s->step, gf_errmsg());
			if (rc)
				return gf_fail(ctx, "step %lld: G loss: %s", (long long)s->step, gf_errmsg());
			if (!isfinite(l))
				return gf_fail(ctx, "step %lld: the G loss is %g (non-finite) in network G; the last good "
				                    "checkpoint is kept",
				               (long long)s->step, (double)l);
			loss_sum += l;
			if ((rc = gf_net_backward(s->d, s->dpred, GF_NEED_DX)))
				return gf_fail(ctx, "step %lld: D replica backward: %s", (long long)s->step, gf_errmsg());
			gf_tensor dfake;
			gf_net_dx(s->d, &dfake);
			if (micro == s->acc - 1)
				gf_dist_step_arm(s->dist, s->step); /* buckets leave during this backward */
			if ((rc = gf_net_backward(s->g, dfake.data, GF_NEED_DW | (micro ? GF_ACCUMULATE : 0))))
				return rc == GF_ESTOP || rc == GF_EFAIL
				           ? rc
				           : gf_fail(ctx, "step %lld: G backward: %s", (long long)s->step, gf_errmsg());
		}
		while (pushed < s->fakes_per_step) {
			if ((rc = generate(s, ctx)) || (rc = push_fakes(s, ctx)))
				return rc;
			pushed++;
		}
		if ((rc = gf_dist_step_reduce(s->dist)))
			return rc;
		if (s->warmup > 0)
			gf_optim_set_lr(s->opt, s->base_lr * (float)fmin(1.0, (double)(s->step + 1) / (double)s->warmup));
		float gnorm;
		rc = gf_dist_step_update(s->dist, s->clip, &gnorm);
		if (rc == GF_ENONFINITE)
			return gf_fail(ctx, "step %lld: a gradient of network G is non-finite; the last good checkpoint is kept",
			               (long long)s->step);
		if (rc == GF_ESTOP || rc == GF_EFAIL)
			return rc;
		if (rc)
			return gf_fail(ctx, "step %lld: G update: %s", (long long)s->step, gf_errmsg());
		s->step++;
		if (s->async)
			gf_report_step(ctx, s->step, 0); /* async: G's updates are the run's steps */
		if ((rc = push_metrics(s, ctx, loss_sum, gnorm)))
			return rc;
		if (s->publish_every > 0 && s->step % s->publish_every == 0 && (rc = push_weights(s, ctx)))
			return rc;
		if (s->ckpt_every > 0 && s->step % s->ckpt_every == 0 && (rc = push_state(s, ctx)))
			return rc;
	}
	return 0;
}

/* Final G weights and state, so the last sample grid and checkpoint show
 * the network as it ended. */
static int gstep_flush(void *self, gf_ctx *ctx)
{
	gstep *s = self;
	int rc = push_weights(s, ctx);
	if (rc == 0)
		rc = push_state(s, ctx);
	return rc == GF_ESTOP ? 0 : rc;
}

static void gstep_destroy(void *self)
{
	gstep *s = self;
	gf_dist_step_destroy(s->dist);
	gf_state_destroy(s->state);
	gf_optim_destroy(s->opt);
	gf_net_destroy(s->g);
	gf_net_destroy(s->d);
	if (s->be) {
		if (s->dpred)
			s->be->ops->free(s->be, s->dpred);
		gf_backend_close(s->be);
	}
	free(s->cdf);
	free(s->z);
	free(s->labels);
	free(s->u);
	free(s);
}

static const gf_port_desc inputs[] = {
	{ "d_weights", "d_weights", 0, "D's weights from d_step, for the replica" },
	{ "reduced", "grads", GF_PORT_OPTIONAL, "data parallel: acknowledgements of the exchange stage" },
};

static const gf_port_desc outputs[] = {
	{ "fakes", "fakes", 0, "generated images (and their labels) for d_step" },
	{ "weights", "g_weights", GF_PORT_OPTIONAL, "G's weights every publish_every steps and at the end" },
	{ "metrics", "metrics", GF_PORT_OPTIONAL, "loss_g and the gradient norm every step" },
	{ "state", "state", GF_PORT_OPTIONAL, "checkpoint part every checkpoint_every steps and at the end" },
	{ "grads", "grads", GF_PORT_OPTIONAL, "data parallel: G's gradient buckets / parameters to an exchange stage" },
};

static const gf_param_desc params[] = {
	{ "net", GF_PARAM_TABLE, NULL, "G's layer table (a backbone such as dcgan.G{})", NULL },
	{ "d_net", GF_PARAM_TABLE, NULL, "D's layer table, for the replica (the same table d_step trains)", NULL },
	{ "batch", GF_PARAM_INT, "64", "noise vectors per G step (per micro-batch with accumulate)", NULL },
	{ "opt", GF_PARAM_TABLE, "nil", "optimiser, e.g. gf.adam{lr = 2e-4, betas = {0.5, 0.999}} (that is the default)", NULL },
	{ "loss", GF_PARAM_STR, "bce", "bce (non-saturating), bce_logits, hinge or ls; as d_step's", NULL },
	{ "mode", GF_PARAM_STR, "sync", "sync: every G step uses the current D; async: the newest D weights that arrived", NULL },
	{ "accumulate", GF_PARAM_INT, "1", "micro-batches whose gradients are summed per G step", NULL },
	{ "clip", GF_PARAM_NUM, "0", "clip G's gradient to this global L2 norm (0 = no clipping)", NULL },
	{ "labels", GF_PARAM_STR, "uniform", "conditional G: labels drawn uniformly or by the data's class histogram", NULL },
	{ "dataset", GF_PARAM_STR, "", "dataset whose class histogram labels = \"data\" follows", NULL },
	{ "class", GF_PARAM_INT, "-1", "per-class training: the class this G/D pair learns (labels its outputs)", NULL },
	{ "publish_every", GF_PARAM_INT, "100", "push G's weights (sample grids, evaluator) every this many steps", NULL },
	{ "lr_warmup", GF_PARAM_INT, "0", "steps over which the learning rate ramps linearly up to opt.lr (0: none)", NULL },
	{ "backend", GF_PARAM_STR, "", "cpu, cuda or auto (default: the run's backend)", NULL },
	{ "threads", GF_PARAM_INT, "0", "compute threads (default: the run's threads setting)", NULL },
	{ "precision", GF_PARAM_STR, "fp32", "fp32, or bf16 / fp16 mixed precision with f32 master weights (cuda)", NULL },
	{ "layout", GF_PARAM_STR, "auto", "activation layout on the GPU: auto, nchw or nhwc (cuda)", NULL },
};

GF_STAGE_EXPORT const gf_stage_desc ganflow_stage = {
	.abi = GF_STAGE_ABI,
	.size = sizeof(gf_stage_desc),
	.name = "g_step",
	.doc = "trains the generator G through a read-only replica of D; fakes flow to d_step, D weights flow back",
	.inputs = inputs,
	.ninputs = sizeof(inputs) / sizeof(inputs[0]),
	.outputs = outputs,
	.noutputs = sizeof(outputs) / sizeof(outputs[0]),
	.params = params,
	.nparams = sizeof(params) / sizeof(params[0]),
	.create = gstep_create,
	.run = gstep_run,
	.flush = gstep_flush,
	.destroy = gstep_destroy,
};
