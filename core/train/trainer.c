/* core/train, the training skeleton the step stages share: the trainer
 * (this file), backends, networks and messages of a step (train.c),
 * checkpoints and resume (ckpt.c), the exchange client of data-parallel
 * runs (exchange_client.c), labels, the fake cache, LeCam and the
 * gradient penalties (penalty.c). It uses
 * core/base, core/runtime (the stage API), core/data, core/nn and
 * core/dist; core/eval, core/lua (resume) and the stages use it.
 *
 * The trainer: the one skeleton under every step stage (g_step, d_step,
 * classifier_step). It owns a network, its backend and optimiser, the
 * update step (warm-up, clipping, the exchange hand-off of data-parallel
 * runs), the stage's part of checkpoints and its resume, so that a step
 * stage is its ports, its parameters and its run loop. See
 * <ganflow/train.h>.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>
#include <ganflow/train.h>

#include "exchange_client.h"

struct gf_trainer {
	gf_ctx *ctx;
	gf_trainer_conf conf;
	gf_backend *be;
	gf_net *net;
	gf_optim *opt;          /* the exchange client may replace it (ZeRO-1) */
	gf_exchange_client *xc; /* no-op without an exchange stage */
	gf_state *state;
	char *table;            /* the layer table as JSON, for checkpoints */
	float base_lr, clip;
	float ortho;            /* orthogonal regularisation beta, 0 = none */
	char *ortho_skip;       /* layers it leaves alone (comma separated), NULL = none */
	gf_net *ema;            /* exponential moving average of the network, NULL = none */
	float ema_decay;
	int64_t ema_start;      /* updates before which the average is a copy */
	double ema_kimg;        /* > 0: StyleGAN2's half-life in thousands of images (decay per update) */
	double ema_rampup;      /* > 0: the half-life at most this fraction of the images seen */
	int64_t warmup;         /* lr_warmup updates, 0 = none */
	struct {
		char name[32];
		gf_schedule s;
	} sched[12];            /* parameter `schedule` */
	int nsched;
	int64_t last_state;     /* step of the last part pushed, -1 = none */
	int64_t begun;          /* step of the part being built */
	gf_precision prec;      /* of the backend */
	gf_net *counted[4];     /* the networks whose FLOPs it reports: its own, then gf_trainer_count_net's */
	int ncounted;
	double flops_seen;      /* their FLOPs at the last report */
};

/* ---- FLOPs and the device's peak (the run's MFU, <ganflow/stage.h>) ---- */

/* The backend's peak to the runtime: one figure per device ("cuda:0",
 * "cpu"), however many stages share it. */
static void report_peak(gf_trainer *t)
{
	gf_backend *be = t->be;
	char dev[32], what[256] = "";
	double peak = 0;
	if (be->device == GF_CPU)
		snprintf(dev, sizeof(dev), "cpu");
	else
		snprintf(dev, sizeof(dev), "%s:%d", be->ops->name, be->device_index);
	if (!GF_BACKEND_HAS(be, peak_flops))
		snprintf(what, sizeof(what), "the %s backend reports no peak", be->ops->name);
	else if (be->ops->peak_flops(be, &peak, what, sizeof(what))) {
		peak = 0;
		snprintf(what, sizeof(what), "%s", gf_errmsg());
	}
	gf_report_peak(t->ctx, dev, peak, what);
}

/* What its networks ran since the last report (the engine counts as it
 * runs, replays of captured steps included). */
static void report_flops(gf_trainer *t)
{
	double sum = 0, v;
	for (int i = 0; i < t->ncounted; i++) {
		gf_net_flops_done(t->counted[i], &v, NULL);
		sum += v;
	}
	gf_report_flops(t->ctx, sum - t->flops_seen);
	t->flops_seen = sum;
}

int gf_trainer_count_net(gf_trainer *t, gf_net *net)
{
	if (t->ncounted == (int)(sizeof(t->counted) / sizeof(t->counted[0])))
		return gf_fail(t->ctx, "%s: more networks to count FLOPs of than the trainer holds", t->conf.what);
	double v;
	gf_net_flops_done(net, &v, NULL);
	t->counted[t->ncounted++] = net;
	t->flops_seen += v;   /* from now on */
	return 0;
}

/* ---- set-up ---- */

/* Parameter `schedule`: { option = gf.cosine{...}, ... }, each option one
 * the trainer applies (lr, beta2, ema_kimg) or the stage declared. */
static int parse_schedules(gf_trainer *t, const gf_value *v)
{
	if (!v || v->type == GF_VNIL)
		return 0;
	if (v->type != GF_VMAP)
		return gf_fail(t->ctx, "parameter 'schedule': expected a table { option = gf.cosine{...} }, got a %s",
		               gf_vtype_name(v->type));
	char known[256] = "lr, beta2, ema_kimg";
	for (int j = 0; t->conf.schedules && t->conf.schedules[j]; j++)
		snprintf(known + strlen(known), sizeof(known) - strlen(known), ", %s", t->conf.schedules[j]);
	for (size_t i = 0; i < v->u.c.len; i++) {
		const char *k = v->u.c.keys[i];
		int ok = !strcmp(k, "lr") || !strcmp(k, "beta2") || !strcmp(k, "ema_kimg");
		for (int j = 0; !ok && t->conf.schedules && t->conf.schedules[j]; j++)
			ok = !strcmp(k, t->conf.schedules[j]);
		if (!ok)
			return gf_fail(t->ctx, "parameter 'schedule': %s has no option '%s' to schedule (%s)",
			               gf_ctx_name(t->ctx), k, known);
		if (t->nsched >= (int)(sizeof(t->sched) / sizeof(t->sched[0])) || strlen(k) >= sizeof(t->sched[0].name))
			return gf_fail(t->ctx, "parameter 'schedule': too many schedules");
		snprintf(t->sched[t->nsched].name, sizeof(t->sched[0].name), "%s", k);
		if (gf_schedule_parse(&v->u.c.items[i], k, &t->sched[t->nsched].s))
			return gf_fail(t->ctx, "parameter 'schedule': %s", gf_errmsg());
		t->nsched++;
	}
	return 0;
}

const char *const gf_train_d_schedules[] = { "r1", "r2", "gp", "lecam", "ada_p", NULL };
const char *const gf_train_g_schedules[] = { "pl", NULL };

static int listed(const char *const *list, const char *s, size_t n)
{
	for (int i = 0; list[i]; i++)
		if (strlen(list[i]) == n && !strncmp(list[i], s, n))
			return 1;
	return 0;
}

int gf_train_schedule_metric(const char *name)
{
	static const char *const own[] = { "lr", "beta2", "ema_kimg", NULL }; /* schedules() applies them */
	static const char *const tags[] = { "g", "d", "c", NULL };           /* the step stages' conf.tag */
	const char *u = strrchr(name, '_');
	if (!u || !listed(tags, u + 1, strlen(u + 1)))
		return 0;
	size_t n = (size_t)(u - name);
	return listed(own, name, n) || listed(gf_train_d_schedules, name, n) || listed(gf_train_g_schedules, name, n);
}

const gf_schedule *gf_trainer_schedule(const gf_trainer *t, const char *name)
{
	for (int i = 0; i < t->nsched; i++)
		if (!strcmp(t->sched[i].name, name))
			return &t->sched[i].s;
	return NULL;
}

int gf_trainer_schedule_on(const gf_trainer *t, const char *name, int on)
{
	if (on || !gf_trainer_schedule(t, name))
		return 0;
	return gf_fail(t->ctx, "parameter 'schedule': %s is scheduled but off (%s = 0): set %s > 0 to turn it on", name,
	               name, name);
}

double gf_trainer_images(const gf_trainer *t, int64_t step)
{
	return (double)step * (double)(t->conf.images > 0 ? t->conf.images : t->conf.max_batch);
}

int gf_trainer_create(gf_trainer **out, gf_ctx *ctx, const gf_value *p, const gf_trainer_conf *conf)
{
	const gf_run_info *run = gf_ctx_run(ctx);
	gf_trainer *t = calloc(1, sizeof(*t));
	*out = t;
	if (!t)
		return gf_fail(ctx, "out of memory");
	t->ctx = ctx;
	t->conf = *conf;
	t->last_state = -1;
	/* optional switches: a stage that does not declare them has none */
	t->clip = (float)gf_value_as_num(gf_value_get(p, "clip"), 0, NULL);
	t->warmup = gf_value_as_int(gf_value_get(p, "lr_warmup"), 0, NULL);
	t->ortho = (float)gf_value_as_num(gf_value_get(p, "ortho"), 0, NULL);
	const char *skip = gf_value_as_str(gf_value_get(p, "ortho_skip"), "", NULL);
	if (*skip && !(t->ortho_skip = strdup(skip)))
		return gf_fail(ctx, "out of memory");

	int rc = gf_train_backend(ctx, p, &t->be);
	if (rc)
		return rc;
	if (gf_precision_parse(gf_value_as_str(gf_value_get(p, "precision"), "fp32", NULL), &t->prec))
		t->prec = GF_PREC_FP32;
	const gf_value *table = gf_value_get(p, "net");
	char what[64];
	snprintf(what, sizeof(what), "%s (net)", conf->what);
	if ((rc = gf_train_net(ctx, t->be, table, conf->net_batch > 0 ? conf->net_batch : conf->max_batch, what, run->seed,
	                       gf_train_stream(ctx, "init"),
	                       &t->net)))
		return rc;
	if ((rc = gf_value_to_json(table, &t->table)))
		return gf_fail(ctx, "%s (net): the layer table has no JSON form: %s", conf->what, gf_errmsg());
	if ((rc = gf_state_create(&t->state)))
		return gf_fail(ctx, "out of memory");

	if ((rc = parse_schedules(t, gf_value_get(p, "schedule"))))
		return rc;
	gf_optim_conf oc = conf->opt;
	const gf_value *ov = gf_value_get(p, "opt");
	if (ov && ov->type != GF_VNIL && gf_optim_conf_parse(&oc, ov))
		return gf_fail(ctx, "parameter 'opt': %s", gf_errmsg());
	gf_penalty_adam_ratio(&oc, conf->reg_every);
	if ((rc = gf_optim_create(&t->opt, t->net, &oc)))
		return gf_fail(ctx, "%s optimiser: %s", conf->what, gf_errmsg());
	t->ema_decay = (float)gf_value_as_num(gf_value_get(p, "ema"), 0, NULL);
	t->ema_start = gf_value_as_int(gf_value_get(p, "ema_start"), 0, NULL);
	t->ema_kimg = gf_value_as_num(gf_value_get(p, "ema_kimg"), 0, NULL);
	t->ema_rampup = gf_value_as_num(gf_value_get(p, "ema_rampup"), 0, NULL);
	if (t->ema_decay > 0 || t->ema_kimg > 0 || gf_trainer_schedule(t, "ema_kimg")) {
		/* parameters and buffers only: a batch of 1 for its activations */
		snprintf(what, sizeof(what), "%s (ema)", conf->what);
		if ((rc = gf_train_net(ctx, t->be, table, 1, what, run->seed, gf_train_stream(ctx, "init"), &t->ema)))
			return rc;
		if (gf_net_copy(t->ema, t->net, GF_PARAMS) || gf_net_copy(t->ema, t->net, GF_BUFFERS))
			return gf_fail(ctx, "%s (ema): %s", conf->what, gf_errmsg());
	}
	t->base_lr = oc.lr;
	t->counted[t->ncounted++] = t->net;
	report_peak(t);
	return gf_exchange_client_create(&t->xc, ctx, conf->grads_port, conf->reduced_port, t->net, &t->opt,
	                                 conf->what);
}

void gf_trainer_destroy(gf_trainer *t)
{
	if (!t)
		return;
	gf_exchange_client_destroy(t->xc);
	gf_state_destroy(t->state);
	gf_optim_destroy(t->opt);
	gf_net_destroy(t->net);
	gf_net_destroy(t->ema);
	if (t->be)
		gf_backend_close(t->be);
	free(t->table);
	free(t->ortho_skip);
	free(t);
}

gf_net *gf_trainer_net(const gf_trainer *t)
{
	return t->net;
}

gf_backend *gf_trainer_backend(const gf_trainer *t)
{
	return t->be;
}

gf_optim *gf_trainer_optim(const gf_trainer *t)
{
	return t->opt;
}

const char *gf_trainer_table(const gf_trainer *t)
{
	return t->table;
}

/* The average from the checkpoint; one written without it (ema turned on
 * in a resumed run) starts the average from the restored network. */
static int resume_ema(gf_trainer *t, const char *from)
{
	char prefix[160], key[200];
	int64_t rng[3];
	gf_train_key(t->ctx, "ema", prefix, sizeof(prefix));
	snprintf(key, sizeof(key), "%s.rng", prefix);
	if (gf_state_read_i64(from, key, rng, 3)) {
		gf_info(t->ctx, "resume: %s has no %s weights; the average starts from the restored %s", from,
		       prefix, t->conf.what);
		if (gf_net_copy(t->ema, t->net, GF_PARAMS) || gf_net_copy(t->ema, t->net, GF_BUFFERS))
			return gf_fail(t->ctx, "%s (ema): %s", t->conf.what, gf_errmsg());
		return 0;
	}
	if (gf_state_load_net(from, prefix, t->ema, NULL))
		return gf_fail(t->ctx, "resume from %s: %s", from, gf_errmsg());
	if (gf_train_check_net(t->ema, prefix))
		return gf_fail(t->ctx, "resume from %s: %s", from, gf_errmsg());
	return 0;
}

int gf_trainer_resume(gf_trainer *t, int64_t *step)
{
	int rc = gf_train_resume(t->ctx, t->net, t->opt, step);
	if (rc)
		return rc;
	const char *from = gf_ctx_run(t->ctx)->resume;
	if (!from)
		return 0;
	char prefix[160];
	if ((rc = gf_train_check_net(t->net, gf_train_key(t->ctx, "net", prefix, sizeof(prefix)))))
		return gf_fail(t->ctx, "resume from %s: %s%s", from, gf_errmsg(),
		               rc == GF_ENONFINITE ? " (resume from an earlier checkpoint)" : "");
	if (t->ema && (rc = resume_ema(t, from)))
		return rc;
	t->last_state = *step; /* that part is the checkpoint we came from */
	return 0;
}

int gf_trainer_check_batch(gf_trainer *t, const gf_msg *m, const char *what, int labels)
{
	gf_tensor in, out;
	gf_net_shapes(t->net, &in, &out);
	const gf_tensor *x = &m->t[0];
	int ok = m->ntensors >= 1 && x->dtype == GF_F32 && x->ndim == in.ndim;
	for (int i = 1; ok && i < in.ndim; i++)
		ok = x->shape[i] == in.shape[i];
	if (!ok) {
		char a[96], b[96];
		return gf_fail(t->ctx, "the %s are %s but %s (net) takes %s: make the data's size and channels match the "
		                       "backbone (jpeg_decode size/channels, backbone size/channels)",
		               what, m->ntensors ? gf_tensor_shape_str(x, a, 96) : "empty", t->conf.what,
		               gf_tensor_shape_str(&in, b, 96));
	}
	if (x->shape[0] > t->conf.max_batch)
		return gf_fail(t->ctx, "%s of %lld exceed max_batch = %d", what, (long long)x->shape[0], t->conf.max_batch);
	if ((labels || gf_net_classes(t->net)) && (m->ntensors < 2 || m->t[1].dtype != GF_I32))
		return gf_fail(t->ctx, "%s (net) needs labels but the %s carry none", t->conf.what, what);
	return 0;
}

/* ---- the update ---- */

int gf_trainer_start(gf_trainer *t)
{
	return gf_exchange_client_start(t->xc);
}

int gf_trainer_exchanging(const gf_trainer *t)
{
	return gf_exchange_client_mode(t->xc) != GF_DIST_NONE;
}

int gf_trainer_sliced(const gf_trainer *t)
{
	return gf_exchange_client_sliced(t->xc);
}

void gf_trainer_arm(gf_trainer *t, int64_t step)
{
	gf_exchange_client_arm(t->xc, step);
}

/* Orthogonal regularisation's gradient added to the (reduced) gradients:
 * after the exchange, as every rank holds the same weights, so that it is
 * added once and not averaged. fp16 gradients still carry the loss scale
 * the optimiser step takes off, so the term is scaled likewise. */
static int ortho(gf_trainer *t, int64_t step)
{
	if (t->ortho == 0.0f)
		return 0;
	float beta = t->ortho;
	gf_backend_stats st; /* fp16 only: stats waits for the device */
	if (t->prec == GF_PREC_FP16 && GF_BACKEND_HAS(t->be, stats) && t->be->ops->stats(t->be, &st) == 0 &&
	    st.precision == GF_PREC_FP16)
		beta *= st.loss_scale;
	if (gf_net_ortho_grad(t->net, beta, t->ortho_skip))
		return gf_fail(t->ctx, "%s %lld: %s: %s", t->conf.unit, (long long)step, t->conf.what, gf_errmsg());
	return 0;
}

/* After update `step` (0-based): avg = decay avg + (1 - decay) w over the
 * parameters and the buffers (BN running statistics, SN's u and v), as
 * BigGAN-PyTorch's ema does over G's state_dict; a copy until ema_start
 * updates are done. Then one power iteration of each spectral norm on the
 * averaged weight: the average of u vectors that turned during training
 * is short and off the average weight's singular direction, and sigma =
 * u^T W v of such vectors (what an eval forward computes, as PyTorch's
 * spectral_norm) fell to a tenth of the true norm in BigGAN's G after
 * 2000 steps, saturating the averaged G's images (BigGAN-PyTorch's own
 * SN iterates in eval too, so it never meets this). The blend is the
 * backend's ema op, whose decay is a per-step scalar: a captured update
 * replays with its own step's decay (the ramp below changes it at every
 * update); scale + axpy only for a backend without the op. */
/* The decay of update `step`: ema, or with ema_kimg StyleGAN2's schedule
 * 0.5^(batch / h), h = ema_kimg * 1000 images, with ema_rampup at most
 * ema_rampup * the images seen before this update (h = 0 at the first:
 * a copy), batch = the stage's batch. */
static float ema_decay(const gf_trainer *t, int64_t step)
{
	if (!(t->ema_kimg > 0))
		return t->ema_decay;
	double batch = (double)t->conf.max_batch, h = t->ema_kimg * 1000.0;
	if (t->ema_rampup > 0)
		h = fmin(h, (double)step * batch * t->ema_rampup);
	return (float)pow(0.5, batch / fmax(h, 1e-8));
}

static int ema_update(gf_trainer *t, int64_t step)
{
	const gf_backend_ops *o = t->be->ops;
	int copy = step + 1 <= t->ema_start;
	float decay = ema_decay(t, step);
	static const gf_block blocks[] = { GF_PARAMS, GF_BUFFERS };
	for (int i = 0; i < 2; i++) {
		gf_block b = blocks[i];
		size_t n;
		float *avg = gf_net_block(t->ema, b, &n), *w = gf_net_block(t->net, b, &n);
		if (!n)
			continue;
		int rc;
		if (copy)
			rc = o->copy(t->be, avg, w, n * sizeof(float), GF_COPY_D2D);
		else if (GF_BACKEND_HAS(t->be, ema))   /* decay a per-step scalar of a captured step */
			rc = o->ema(t->be, avg, w, n, decay);
		else if (!(rc = o->scale(t->be, avg, n, decay)))
			rc = o->axpy(t->be, avg, w, n, 1.0f - decay);
		if (rc)
			return gf_fail(t->ctx, "%s %lld: %s (ema): %s", t->conf.unit, (long long)step, t->conf.what,
			               gf_errmsg());
	}
	if (!copy && gf_net_sn_iterate(t->ema))
		return gf_fail(t->ctx, "%s %lld: %s (ema): %s", t->conf.unit, (long long)step, t->conf.what, gf_errmsg());
	return 0;
}

/* The optimiser's lr (warm-up, schedule), beta2 and the average's
 * half-life for update `step`: per-step scalars of the ops that use them. */
static void schedules(gf_trainer *t, int64_t step)
{
	const gf_schedule *lr = gf_trainer_schedule(t, "lr"), *b2 = gf_trainer_schedule(t, "beta2"),
	                  *ek = gf_trainer_schedule(t, "ema_kimg");
	double nimg = gf_trainer_images(t, step);
	if (t->warmup > 0 || lr) {
		float base = lr ? (float)gf_schedule_at(lr, nimg) : t->base_lr;
		gf_optim_set_lr(t->opt, t->warmup > 0 ? base * (float)fmin(1.0, (double)(step + 1) / (double)t->warmup) : base);
	}
	if (b2)
		gf_optim_set_beta2(t->opt, (float)gf_schedule_at(b2, nimg));
	if (ek)
		t->ema_kimg = gf_schedule_at(ek, nimg);
}

int gf_trainer_update(gf_trainer *t, int64_t step, float *norm)
{
	const gf_trainer_conf *c = &t->conf;
	int rc = gf_exchange_client_reduce(t->xc, step);
	if (rc || (rc = ortho(t, step)))
		return rc;
	schedules(t, step);
	float n = 0;
	rc = gf_exchange_client_update(t->xc, t->clip, &n);
	if (norm)
		*norm = n;
	if (rc == GF_ENONFINITE)
		return gf_fail(t->ctx, "%s %lld: a gradient of network %s is non-finite; the last good checkpoint is kept",
		               c->unit, (long long)step, c->what);
	if (rc == GF_ESTOP || rc == GF_EFAIL)
		return rc;
	if (rc)
		return gf_fail(t->ctx, "%s %lld: %s update: %s", c->unit, (long long)step, c->what, gf_errmsg());
	report_flops(t);
	return t->ema ? ema_update(t, step) : 0;
}

int gf_trainer_update_on_device(const gf_trainer *t)
{
	return (t->clip == 0.0f || GF_BACKEND_HAS(t->be, clip_dev)) && !(t->ortho != 0.0f && t->prec == GF_PREC_FP16) &&
	       GF_BACKEND_HAS(t->be, reduce_dev);
}

gf_precision gf_trainer_precision(const gf_trainer *t)
{
	return t->prec;
}

uint64_t gf_trainer_update_key(const gf_trainer *t, int64_t step)
{
	return t->ema && step + 1 <= t->ema_start ? 1u : 0u;
}

int gf_trainer_update_dev(gf_trainer *t, int64_t step, double *sumsq)
{
	const gf_trainer_conf *c = &t->conf;
	if (!gf_trainer_update_on_device(t))
		return gf_seterr(GF_EUNSUPPORTED, "%s update: needs the host (fp16 ortho)", c->what);
	/* the exchange's collectives are device ops too: reduced in the step */
	int rc = gf_exchange_client_reduce(t->xc, step);
	if (rc || (rc = ortho(t, step)))
		return rc;
	schedules(t, step);
	size_t off, n;
	gf_exchange_client_range(t->xc, &off, &n); /* the block, or this rank's ZeRO-1 shard */
	float *g = gf_net_block(t->net, GF_GRADS, NULL) + off;
	/* the norm before the update, as gf_net_clip_grad_norm measures it
	 * (sumsq's bits; ZeRO-1: the shards' sums summed), left on the device;
	 * clipping scales by it there */
	if ((rc = t->be->ops->reduce_dev(t->be, sumsq, g, n, 1)) || (rc = gf_exchange_client_sumsq(t->xc, sumsq)) ||
	    (t->clip > 0 && (rc = t->be->ops->clip_dev(t->be, g, n, sumsq, t->clip))) || (rc = gf_optim_step(t->opt)) ||
	    (rc = gf_exchange_client_after(t->xc)))
		return rc == GF_EFAIL || rc == GF_ESTOP
		           ? rc
		           : gf_fail(t->ctx, "%s %lld: %s update: %s", c->unit, (long long)step, c->what, gf_errmsg());
	report_flops(t);
	return t->ema ? ema_update(t, step) : 0;
}

int gf_trainer_check_loss(gf_trainer *t, int64_t step, double loss)
{
	const gf_trainer_conf *c = &t->conf;
	if (isfinite(loss))
		return 0;
	return gf_fail(t->ctx, "%s %lld: the %s loss is %g (non-finite) in network %s; the last good checkpoint is kept",
	               c->unit, (long long)step, c->what, loss, c->what);
}

int gf_trainer_check_norm(gf_trainer *t, int64_t step, double sumsq, float *norm)
{
	const gf_trainer_conf *c = &t->conf;
	double total = sqrt(sumsq);
	if (norm)
		*norm = (float)total;
	if (isfinite(total) || t->prec == GF_PREC_FP16) /* fp16: an overflow the optimiser skipped */
		return 0;
	return gf_fail(t->ctx, "%s %lld: a gradient of network %s is non-finite; the last good checkpoint is kept",
	               c->unit, (long long)step, c->what);
}

/* The failure of gf_loss / gf_loss_dev (rc != 0), named. */
static int loss_failed(gf_trainer *t, int64_t step, int rc)
{
	const gf_trainer_conf *c = &t->conf;
	if (rc == GF_ENONFINITE)
		return gf_fail(t->ctx, "%s %lld: the %s loss is non-finite in network %s (%s); the last good checkpoint "
		                       "is kept",
		               c->unit, (long long)step, c->what, c->what, gf_errmsg());
	return gf_fail(t->ctx, "%s %lld: %s loss: %s", c->unit, (long long)step, c->what, gf_errmsg());
}

int gf_trainer_loss_dev(gf_trainer *t, int64_t step, gf_loss_kind kind, const gf_tensor *pred,
                        const gf_tensor *labels, float target, float scale, float *dpred, float *loss_dev)
{
	int rc = gf_loss_dev(t->be, kind, loss_dev, dpred, pred, labels, target, scale);
	return rc ? loss_failed(t, step, rc) : 0;
}

int gf_trainer_loss(gf_trainer *t, int64_t step, gf_loss_kind kind, const gf_tensor *pred, const gf_tensor *labels,
                    float target, float scale, float *dpred, float *loss)
{
	const gf_trainer_conf *c = &t->conf;
	float l;
	int rc = gf_loss(t->be, kind, &l, dpred, pred, labels, target, scale);
	if (rc == GF_ENONFINITE)
		return gf_fail(t->ctx, "%s %lld: the %s loss is non-finite in network %s (%s); the last good checkpoint "
		                       "is kept",
		               c->unit, (long long)step, c->what, c->what, gf_errmsg());
	if (rc)
		return gf_fail(t->ctx, "%s %lld: %s loss: %s", c->unit, (long long)step, c->what, gf_errmsg());
	if (!isfinite(l))
		return gf_fail(t->ctx, "%s %lld: the %s loss is %g (non-finite) in network %s; the last good checkpoint "
		                       "is kept",
		               c->unit, (long long)step, c->what, (double)l, c->what);
	*loss = l;
	return 0;
}

/* ---- finite checks ---- */

/* Fails the stage for a non-finite network, gf_errmsg() naming the value:
 * "iteration 3: network D is not finite: d.net.6.running_var[0] is inf;
 * ...". */
static int nonfinite(gf_trainer *t, int64_t step)
{
	const gf_trainer_conf *c = &t->conf;
	return gf_fail(t->ctx, "%s %lld: network %s is not finite: %s; no checkpoint is written from it, the last good "
	                       "checkpoint is kept",
	               c->unit, (long long)step, c->what, gf_errmsg());
}

/* The parameter and buffer blocks of a weights message (host copies). */
static int check_weights(gf_trainer *t, const gf_msg *m)
{
	char prefix[160];
	gf_train_key(t->ctx, t->ema ? "ema" : "net", prefix, sizeof(prefix));
	int rc = gf_train_check_block(t->net, GF_PARAMS, m->t[0].data, prefix);
	if (!rc && m->ntensors > 1)
		rc = gf_train_check_block(t->net, GF_BUFFERS, m->t[1].data, prefix);
	return rc;
}

/* ---- messages ---- */

int gf_trainer_weights(gf_trainer *t, int port, int64_t version, gf_msg **out)
{
	gf_msg *m;
	int rc = gf_msg_get(t->ctx, port, &m);
	if (rc)
		return rc;
	if ((rc = gf_weights_pack(m, t->ema ? t->ema : t->net, version))) {
		gf_msg_release(m);
		return gf_fail(t->ctx, "%s weights: %s", t->conf.what, gf_errmsg());
	}
	/* the step's output: a non-finite network goes no further than here */
	if ((rc = check_weights(t, m)) == GF_ENONFINITE) {
		gf_msg_release(m);
		return nonfinite(t, version);
	}
	m->step = version;
	m->label = t->conf.cls;
	*out = m;
	return 0;
}

int gf_trainer_metrics(gf_trainer *t, int port, int64_t step, gf_msg **out)
{
	*out = NULL;
	if (!gf_port_edges(t->ctx, 1, port))
		return 0;
	gf_msg *m;
	int rc = gf_msg_get(t->ctx, port, &m);
	if (rc)
		return rc;
	m->step = step;
	m->source = gf_ctx_name(t->ctx);
	for (int i = 0; i < t->nsched; i++) { /* the value the last update (step - 1) used */
		char k[GF_MSG_SCALAR_NAME];
		snprintf(k, sizeof(k), "%s_%s", t->sched[i].name, t->conf.tag);
		gf_msg_set_scalar(m, k, gf_schedule_at(&t->sched[i].s, gf_trainer_images(t, step > 0 ? step - 1 : 0)));
	}
	if (gf_trainer_exchanging(t)) {
		char k[GF_MSG_SCALAR_NAME];
		snprintf(k, sizeof(k), "comm_wait_%s", t->conf.tag);
		gf_msg_set_scalar(m, k, gf_exchange_client_wait(t->xc));
	}
	*out = m;
	return 0;
}

/* ---- checkpoint parts ---- */

int gf_trainer_state_begin(gf_trainer *t, int64_t step, gf_state **s)
{
	gf_ctx *ctx = t->ctx;
	*s = NULL;
	int save = t->conf.state_port >= 0 && gf_port_edges(ctx, 1, t->conf.state_port) > 0;
	/* ZeRO-1 checkpoints gather the optimiser shards: every rank takes
	 * part, also those that save nothing */
	if ((!save && gf_exchange_client_mode(t->xc) != GF_DIST_ZERO1) || t->last_state == step)
		return 0;
	char name[160];
	int rc = gf_exchange_client_state(t->xc, save ? t->state : NULL, gf_train_key(ctx, "net", name, sizeof(name)));
	if (rc == GF_EFAIL || rc == GF_ESTOP)
		return rc;
	if (!save) {
		t->last_state = step;
		return rc ? gf_fail(ctx, "checkpoint state: %s", gf_errmsg()) : 0;
	}
	if (!rc)
		rc = gf_state_add_i64(t->state, gf_train_key(ctx, "step", name, sizeof(name)), &step, 1);
	if (!rc && t->ema)
		rc = gf_state_add_net(t->state, gf_train_key(ctx, "ema", name, sizeof(name)), t->ema, NULL);
	if (!rc)
		rc = gf_state_describe(t->state, ctx, t->conf.role, t->table, t->conf.cls);
	/* the one place every step stage's part passes: a non-finite network
	 * or optimiser state never reaches a checkpoint (nor `latest`) */
	if (!rc && (rc = gf_state_check_finite(t->state)) == GF_ENONFINITE) {
		gf_state_clear(t->state);
		return nonfinite(t, step);
	}
	if (rc) {
		gf_state_clear(t->state);
		return gf_fail(ctx, "checkpoint state: %s", gf_errmsg());
	}
	t->begun = step;
	*s = t->state;
	return 0;
}

int gf_trainer_state_push(gf_trainer *t, int rc, int64_t filed)
{
	if (rc) {
		gf_state_clear(t->state);
		return gf_fail(t->ctx, "checkpoint state: %s", gf_errmsg());
	}
	t->last_state = t->begun;
	return gf_state_push(t->state, t->ctx, t->conf.state_port, filed);
}

void gf_trainer_state_renew(gf_trainer *t)
{
	t->last_state = -1;
}

/* ---- GANs ---- */

static const struct {
	const char *name, *g, *d; /* pipeline name, G's and D's gf_loss_parse names */
	float fake;               /* D's target for fakes */
} gan_losses[] = {
	{ "bce", "nonsat", "bce", 0.0f },
	{ "bce_logits", "nonsat_logits", "bce_logits", 0.0f },
	{ "hinge", "hinge_g", "hinge_d", -1.0f },
	{ "ls", "ls", "ls", 0.0f },
	{ "wgan", "wgan", "wgan", -1.0f }, /* critic: mean D(G(z)) - mean D(x); G: -mean D(G(z)) */
	/* R3GAN: pairs of (real, fake) for D, (fake, real) for G, target 1 */
	{ "rpgan", "relativistic", "relativistic", 1.0f },
};

void gf_gan_optim_defaults(gf_optim_conf *c)
{
	gf_optim_defaults(c, GF_OPT_ADAM);
	c->lr = 2e-4f;
	c->beta1 = 0.5f;
}

int gf_gan_loss_parse(const char *name, gf_gan_loss *out)
{
	for (size_t i = 0; name && i < sizeof(gan_losses) / sizeof(gan_losses[0]); i++) {
		if (strcmp(name, gan_losses[i].name))
			continue;
		out->real = 1.0f;
		out->fake = gan_losses[i].fake;
		if (gf_loss_parse(gan_losses[i].g, &out->g) || gf_loss_parse(gan_losses[i].d, &out->d))
			return GF_EPARAM;
		return 0;
	}
	return gf_seterr(GF_EPARAM, "unknown GAN loss '%s' (%s)", name ? name : "(null)", GF_GAN_LOSSES);
}
