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
 *
 * pix2pix (paired = true, docs/train.md): G maps an image A to an image B
 * instead of noise to an image. Its `real` input takes the same (A, B)
 * batches d_step gets (the batch stage's output connected to both, a
 * batch (N, CA + CB, H, W) from jpeg_decode paired = true); each G forward
 * runs on a batch's A, the fakes d_step gets are (A, G(A)) concatenated
 * along the channels (what D compares with the real (A, B)), and G's loss
 * is the adversarial loss of the replica on (A, G(A)) plus
 * l1 x mean |G(A) - B|. In sync mode G step v and D iteration v see the
 * same batch, so a resumed run continues exactly from d_step's data
 * position. G's dropout is its noise (no z).
 *
 * Path length (StyleGAN2, `pl` = w; g_pl.c): pl_every = k > 1: a step
 * of its own after every k-th G step, the penalty times k, Adam adjusted
 * as for d_step's lazy R1; pl_every = 1: in every G step.
 *
 * On a GPU (docs/cuda.md, "Step stages"): the noise is drawn on the
 * device and G's forward is one CUDA graph, the rest of the step (the
 * replica, G's backward, the update, the EMA) another, each captured
 * once per kind of step after an eager warm-up and replayed (graphs =
 * false: eagerly); D's weights arrive and the fakes leave in device
 * memory, ordered by events, and the fakes leave between the two graphs,
 * so D's step starts while G's backward runs; G's loss and gradient norm
 * stay on the device and are read a step later, when that step's metrics
 * are pushed (the step driver, gf_stepdrv). What still needs the host
 * inside a step, and so steps eagerly: docs/cuda.md's table.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/dist.h>
#include <ganflow/err.h>
#include <ganflow/nn.h>
#include <ganflow/params.h>
#include <ganflow/stage.h>
#include <ganflow/train.h>

#include "g_step.h"

/* ---- setup ---- */

static int fold(void *self, gf_ctx *ctx, int ri, const gf_stepdrv_entry *e, const double *val);
static int finish(void *self, gf_ctx *ctx, int ri, int64_t step0);

static int gstep_create(gf_ctx *ctx, const gf_value *p, void **self)
{
	const gf_run_info *run = gf_ctx_run(ctx);
	gstep *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	*self = s;
	s->batch = (int)gf_param_int(p, "batch");
	s->acc = (int)gf_param_int(p, "accumulate");
	s->cls = (int)gf_param_int(p, "class");
	s->publish_every = gf_param_int(p, "publish_every");
	s->ckpt_every = run->checkpoint_every;
	s->async = !strcmp(gf_param_str(p, "mode"), "async");
	gf_gan_loss gl;
	if (gf_gan_loss_parse(gf_param_str(p, "loss"), &gl))
		return gf_fail(ctx, "parameter 'loss': %s", gf_errmsg());
	s->loss = gl.g;
	s->rp = gl.g == GF_LOSS_RELATIVISTIC;

	gf_trainer_conf tc = { .what = "G", .tag = "g", .role = "generator", .unit = "step", .max_batch = s->batch,
	                       .grads_port = OUT_GRADS, .reduced_port = IN_REDUCED, .state_port = OUT_STATE,
	                       .cls = s->cls,
	                       .reg_every = gf_param_num(p, "pl") > 0 ? (int)gf_param_int(p, "pl_every") : 0,
	                       .images = s->batch * s->acc, .schedules = gf_train_g_schedules };
	gf_gan_optim_defaults(&tc.opt);
	int rc = gf_trainer_create(&s->tr, ctx, p, &tc);
	if (rc)
		return rc;
	s->g = gf_trainer_net(s->tr);
	s->be = gf_trainer_backend(s->tr);
	if ((rc = gf_train_net(ctx, s->be, gf_param(p, "d_net"), s->rp ? 2 * s->batch : s->batch, "D replica (d_net)",
	                       run->seed,
	                       gf_train_stream(ctx, "replica"), &s->d)) ||
	    (rc = gf_trainer_count_net(s->tr, s->d))) /* its FLOPs are the G step's too */
		return rc;

	/* G's output must be what D takes. */
	gf_tensor gin, gout, din, dout;
	gf_net_shapes(s->g, &gin, &gout);
	gf_net_shapes(s->d, &din, &dout);
	s->paired = gf_param_bool(p, "paired");
	s->l1 = (float)gf_param_num(p, "l1");
	if (s->paired) {
		if ((rc = g_paired_setup(s, ctx, &gin, &gout, &din)))
			return rc;
	} else if (gf_port_edges(ctx, 0, IN_REAL) && !s->rp) {
		return gf_fail(ctx, "input 'real' is connected but paired = false: only a pix2pix G (paired = true) or "
		                    "loss = \"rpgan\" takes real batches");
	} else if (s->rp && (rc = g_rp_setup(s, ctx, &gout))) {
		return rc;
	} else if (gin.ndim != 2)
		return gf_fail(ctx, "G (net) must take noise vectors (input_shape = {z}), its input is %dd", gin.ndim - 1);
	s->zdim = s->paired ? 0 : (int)gin.shape[1];
	gf_tensor din1 = din; /* per sample: the replica may run pairs (2 batch) */
	din1.shape[0] = gout.shape[0];
	if (!s->paired && !gf_tensor_same_shape(&gout, &din1)) {
		char a[96], b[96];
		return gf_fail(ctx, "G's output %s does not match D's input %s (d_net)", gf_tensor_shape_str(&gout, a, 96),
		               gf_tensor_shape_str(&din, b, 96));
	}
	s->classes = gf_net_classes(s->g);
	if (gf_net_classes(s->d) != s->classes)
		return gf_fail(ctx, "G is conditioned on %d classes but D (d_net) on %d", s->classes,
		               gf_net_classes(s->d));
	const char *ds = gf_param_str(p, "dataset");
	if (s->classes && !strcmp(gf_param_str(p, "labels"), "data") && !ds[0])
		return gf_fail(ctx, "labels = \"data\" needs the dataset path in parameter 'dataset'");
	if ((rc = gf_labels_create(&s->draw, s->classes, s->cls, s->batch,
	                           strcmp(gf_param_str(p, "labels"), "data") ? NULL : ds)))
		return gf_fail(ctx, "labels = \"data\": %s", gf_errmsg());
	gf_rng_init(&s->noise, run->seed, gf_train_stream(ctx, "noise"));

	size_t nd = (size_t)gf_tensor_numel(&dout), nz = (size_t)s->batch * (size_t)(s->zdim ? s->zdim : 1);
	s->z = malloc(nz * sizeof(float));
	s->labels = malloc((size_t)s->batch * sizeof(int32_t));
	if (!s->z || !s->labels || s->be->ops->alloc(s->be, (void **)&s->dpred, nd * sizeof(float)) ||
	    s->be->ops->alloc(s->be, (void **)&s->z_dev, nz * sizeof(float)) ||
	    s->be->ops->alloc(s->be, (void **)&s->lab_dev, (size_t)s->batch * sizeof(int32_t)))
		return gf_fail(ctx, "out of memory");
	/* a GPU: D's weights accepted in device memory; pix2pix's (A, B)
	 * batches in pinned memory */
	if (gf_train_async(s->be)) {
		gf_allocator pinned;
		gf_port_accept_device(ctx, IN_DW, s->be->device, s->be->device_index);
		if ((s->paired || s->rp) && !gf_train_pinned_allocator(s->be, &pinned) &&
		    gf_port_set_allocator(ctx, 0, IN_REAL, &pinned))
			gf_info(ctx, "real batches stay in pageable memory: %s", gf_errmsg());
	}
	gf_stepdrv_conf dc = { .what = "G step", .unit = "step", .nvals = NVALS,
	                       .max_lag = s->acc + 1 > MAX_LAG ? MAX_LAG : s->acc + 1, .graphs = gf_param_bool(p, "graphs"),
	                       .self = s, .fold = fold, .finish = finish };
	if (gf_stepdrv_create(&s->drv, s->be, &dc) || gf_devmsg_create(&s->dm, s->be))
		return gf_fail(ctx, "%s", gf_errmsg());
	if ((rc = g_pl_setup(s, ctx, p)) || (rc = gf_trainer_schedule_on(s->tr, "pl", s->pl > 0)))
		return rc;
	s->dver = -1;
	s->fakes_per_step = 1;
	if ((rc = gf_trainer_resume(s->tr, &s->step)) || (rc = gf_train_resume_rng(ctx, "noise_rng", &s->noise)) ||
	    (rc = gf_train_resume_rng(ctx, "replica_rng", gf_net_rng(s->d))))
		return rc;
	return 0;
}

/* ---- the loop ---- */


/* G forward's host side: a data-parallel slice drawn on the host, or the
 * generator the device draws from (gf_stepdrv_run's arg). */
struct gen {
	int sliced;
	const gf_rng *z_rng;
};

/* The ops of G's forward on fresh noise (training mode): the noise drawn
 * on the device (data parallel: this rank's slice, drawn on the host and
 * copied in before); pix2pix's on its (A, B) batch. */
static int generate_ops(void *self, gf_ctx *ctx, void *arg)
{
	gstep *s = self;
	const struct gen *a = arg;
	if (s->paired)
		return g_generate_paired_ops(s, ctx);
	int sliced = a->sliced;
	const gf_rng *z_rng = a->z_rng;
	size_t nz = (size_t)s->batch * (size_t)s->zdim;
	int64_t zs[2] = { s->batch, s->zdim };
	int rc = sliced ? 0 : s->be->ops->rng_normal(s->be, s->z_dev, nz, 0.0f, 1.0f, z_rng);
	if (rc)
		return gf_fail(ctx, "step %lld: noise: %s", (long long)s->step, gf_errmsg());
	gf_tensor z = gf_tensor_make(s->z_dev, GF_F32, 2, zs), lab = g_lab_tensor(s, s->batch);
	z.device = s->be->device;
	z.device_index = s->be->device_index;
	if ((rc = gf_net_forward(s->g, &z, s->classes ? &lab : NULL, GF_TRAIN)))
		return gf_fail(ctx, "step %lld: G forward: %s", (long long)s->step, gf_errmsg());
	return 0;
}

/* G forward: the host part (the noise's generator, the labels, a
 * data-parallel slice) then the ops, as one captured step of their own. */
static int generate(gstep *s, gf_ctx *ctx)
{
	int rc;
	uint64_t key;
	gf_rng z_rng = s->noise;
	int sliced = 0;
	if (s->paired) {
		if ((rc = g_take_paired(s, ctx)))
			return rc;
		key = (uint64_t)s->nreal;
	} else {
		const gf_run_info *run = gf_ctx_run(ctx);
		size_t nz = (size_t)s->batch * (size_t)s->zdim;
		sliced = gf_trainer_sliced(s->tr);
		int rank = sliced ? run->rank : 0, world = sliced ? run->world : 1;
		if (sliced)
			gf_dist_normal_slice(&s->noise, s->z, nz, rank, world);
		else
			s->noise.offset += gf_rng_blocks(nz); /* drawn by the step's rng_normal from z_rng */
		if (s->rp && (rc = g_rp_take(s, ctx))) /* a conditional G: the real batch's labels */
			return rc;
		if (!(s->rp && s->classes))
			gf_labels_draw(s->draw, &s->noise, s->labels, s->batch, rank, world);
		gf_backend *be = s->be;
		rc = sliced ? be->ops->copy(be, s->z_dev, s->z, nz * sizeof(float), GF_COPY_H2D) : 0;
		if (!rc && (s->classes || s->dev_fakes))
			rc = be->ops->copy(be, s->lab_dev, s->labels, (size_t)s->batch * sizeof(int32_t), GF_COPY_H2D);
		if (rc)
			return gf_fail(ctx, "step %lld: noise to the device: %s", (long long)s->step, gf_errmsg());
		key = (uint64_t)s->batch | (uint64_t)sliced << 32;
	}
	struct gen a = { sliced, &z_rng };
	return gf_stepdrv_run(s->drv, ctx, s->step, "G forward", key | (uint64_t)1 << 40, 0, generate_ops, &a);
}

/* A micro-step's ops and what they report (gf_stepdrv_run's arg):
 * micro >= 0 a micro-batch after G's forward, micro < 0 the update alone. */
struct micro {
	int micro, update, host_update;
	gf_stepdrv_entry *e;
	rec *r;
};

/* The update, in the last micro-step's graph or in one of its own. */
static int update_ops(gstep *s, const struct micro *m)
{
	if (m->host_update)
		return gf_trainer_update(s->tr, s->step, &m->r->gnorm);
	m->e->flags |= F_NORM;
	return gf_trainer_update_dev(s->tr, s->step, gf_stepdrv_slots(s->drv) + V_SUMSQ);
}

/* The ops of one micro-batch after G's forward: the replica on the fakes,
 * G's loss, the replica's input gradient and G's backward into G's
 * gradients, and the update when `update` (the last micro-batch, unless
 * extra fakes are made before the update). */
static int train_ops(void *self, gf_ctx *ctx, void *arg)
{
	gstep *s = self;
	struct micro *m = arg;
	if (m->micro < 0)
		return update_ops(s, m);
	double *slot = gf_stepdrv_slots(s->drv);
	gf_tensor lab = g_lab_tensor(s, s->batch), fake, dout, dfake;
	gf_net_output(s->g, &fake);
	if (s->paired)
		fake = g_dev_tensor(s, s->fake_dev, s->nreal, s->ca + s->cb);
	int rc = s->rp ? g_rp_pair(s, ctx, &fake, &lab) : 0; /* the replica on [G(z); x] */
	if (rc)
		return rc;
	rc = gf_net_forward(s->d, &fake, s->classes ? &lab : NULL, GF_TRAIN | GF_FREEZE_STATS);
	if (rc)
		return gf_fail(ctx, "step %lld: D replica forward: %s", (long long)s->step, gf_errmsg());
	gf_net_output(s->d, &dout);
	if ((rc = gf_trainer_loss_dev(s->tr, s->step, s->loss, &dout, NULL, 1.0f, 1.0f / (float)s->acc, s->dpred,
	                              (float *)(void *)(slot + V_LOSS))))
		return rc;
	if ((rc = gf_net_backward(s->d, s->dpred, GF_NEED_DX)))
		return gf_fail(ctx, "step %lld: D replica backward: %s", (long long)s->step, gf_errmsg());
	gf_net_dx(s->d, &dfake);
	if (s->paired && (rc = g_paired_grad(s, ctx, &dfake, (float *)(void *)(slot + V_L1))))
		return rc;
	int last = m->micro == s->acc - 1;
	if (last && m->update)
		gf_trainer_arm(s->tr, s->step); /* buckets leave during this backward, waited for in this step */
	unsigned acc = m->micro || s->pl_acc ? GF_ACCUMULATE : 0; /* pl_every = 1: onto the path length's gradient */
	if ((rc = gf_net_backward(s->g, s->paired ? s->dga : dfake.data, GF_NEED_DW | acc)))
		return rc == GF_ESTOP || rc == GF_EFAIL
		           ? rc
		           : gf_fail(ctx, "step %lld: G backward: %s", (long long)s->step, gf_errmsg());
	m->e->flags |= F_LOSS;
	return m->update ? update_ops(s, m) : 0;
}

/* Pushes a step's metrics once all its results are read back. */
static int finish(void *self, gf_ctx *ctx, int ri, int64_t step0)
{
	gstep *s = self;
	const rec *r = &s->recs[ri];
	int64_t step = step0 + 1; /* metrics name a step by the updates done */
	gf_msg *m;
	int rc = gf_trainer_metrics(s->tr, OUT_METRICS, step, &m);
	if (rc || !m)
		return rc;
	gf_msg_set_scalar(m, "loss_g", r->loss);
	gf_msg_set_scalar(m, "grad_norm_g", r->gnorm);
	if (s->paired && s->l1 > 0)
		gf_msg_set_scalar(m, "l1_g", r->l1_sum); /* mean |G(A) - B|, the adversarial part is loss_g */
	if (r->pl_ran) {
		gf_msg_set_scalar(m, "pl", r->pl);
		gf_msg_set_scalar(m, "pl_mean", r->pl_mean);
	}
	return gf_push(ctx, OUT_METRICS, m);
}

/* One entry's values, read back: G's loss checked and summed, the L1
 * term, the update's norm. */
static int fold(void *self, gf_ctx *ctx, int ri, const gf_stepdrv_entry *e, const double *val)
{
	(void)ctx;
	gstep *s = self;
	rec *r = &s->recs[ri];
	float l, l1;
	memcpy(&l, val + V_LOSS, sizeof(l));
	memcpy(&l1, val + V_L1, sizeof(l1));
	int rc;
	if ((e->flags & F_LOSS) && (rc = gf_trainer_check_loss(s->tr, e->step, l)))
		return rc;
	if (e->flags & F_LOSS)
		r->loss += l;
	if ((e->flags & F_LOSS) && s->paired && s->l1 > 0) {
		if ((rc = gf_trainer_check_loss(s->tr, e->step, l1)))
			return rc;
		r->l1_sum += (double)l1 / s->l1; /* l1 carries the weight l1 / accumulate */
	}
	if ((e->flags & F_NORM) && (rc = gf_trainer_check_norm(s->tr, e->step, val[V_SUMSQ], &r->gnorm)))
		return rc;
	if (e->flags & F_PL) {
		if (!isfinite(val[V_PL]))
			return gf_fail(ctx, "step %lld: the path-length penalty is %g (non-finite); the last good checkpoint is "
			                    "kept", (long long)e->step, val[V_PL]);
		r->pl = val[V_PL];
		r->pl_mean = val[V_PL_MEAN];
		r->pl_ran = 1;
	}
	return 0;
}

/* One micro-batch after G's forward (micro >= 0), or the update alone
 * (micro < 0), as a captured step of its own; its results become an
 * entry of the step's record. */
static int micro_step(gstep *s, gf_ctx *ctx, int micro, int update, rec *r)
{
	int host_update = update && !gf_trainer_update_on_device(s->tr);
	int n = s->paired ? s->nreal : s->batch;
	gf_stepdrv_entry e = { .step = s->step };
	struct micro m = { micro, update, host_update, &e, r };
	uint64_t key = (uint64_t)n | (uint64_t)(micro == 0) << 32 | (uint64_t)update << 33 |
	               (update ? gf_trainer_update_key(s->tr, s->step) : 0) << 34 | (uint64_t)(micro < 0 ? 3 : 2) << 40;
	int rc = gf_stepdrv_run(s->drv, ctx, s->step, NULL, key, host_update, train_ops, &m);
	return rc ? rc : gf_stepdrv_push(s->drv, ctx, &e);
}

/* What the step can do without the host, decided once the exchange
 * handshake is done. */
static void plan(gstep *s, gf_ctx *ctx)
{
	gf_stepdrv_plan(s->drv, !gf_trainer_update_on_device(s->tr));
	gf_allocator dev;
	s->dev_fakes = gf_train_async(s->be) && !gf_train_device_allocator(s->be, &dev) &&
	               gf_port_device_ok(ctx, OUT_FAKES, s->be->device, s->be->device_index) &&
	               !gf_port_set_allocator(ctx, 1, OUT_FAKES, &dev);
}

static int gstep_loop(gstep *s, gf_ctx *ctx)
{
	const gf_run_info *run = gf_ctx_run(ctx);
	int rc;
	if ((rc = gf_trainer_start(s->tr)))
		return rc;
	if (s->async && gf_trainer_sliced(s->tr))
		return gf_fail(ctx, "mode = \"async\" with a data-parallel exchange is not supported (use mode = \"sync\")");
	if (gf_trainer_sliced(s->tr)) /* the replica's dropout masks differ across ranks too */
		gf_net_rng(s->d)->stream ^= (uint64_t)run->rank * 0x9e3779b97f4a7c15ull;
	plan(s, ctx);
	if (s->async) /* resumed: the progress line starts at the restored step */
		gf_report_resume(ctx, s->step);
	while (!gf_should_stop(ctx) && !(gf_ctx_steps(ctx) > 0 && s->step >= gf_ctx_steps(ctx))) {
		if ((rc = g_take_weights(s, ctx)))
			return rc;
		/* a stop may have been decided while we waited */
		if (gf_should_stop(ctx))
			break;
		/* the step begins: an agreed stop ends the run before it, or lets it run */
		if ((rc = gf_step_begin(ctx, s->step + 1))) {
			if (rc == GF_ESTOP)
				break;
			return rc;
		}
		/* D consumes more fake batches than G's micro-batches make: the
		 * extra ones come from G before its update, so the update runs
		 * apart */
		int apart = s->fakes_per_step > s->acc, ri;
		/* path length: in this step (pl_every = 1, before its micro-batches),
		 * or a step of its own after its update: an entry either way */
		const gf_schedule *pls = gf_trainer_schedule(s->tr, "pl");
		if (pls)
			s->pl = (float)gf_schedule_at(pls, gf_trainer_images(s->tr, s->step));
		int pl_now = s->pen && s->step % s->pl_every == 0;
		if ((rc = gf_stepdrv_open(s->drv, ctx, s->step, s->acc + apart + pl_now, &ri)))
			return rc;
		rec *r = &s->recs[ri];
		memset(r, 0, sizeof(*r));
		int64_t pushed = 0;
		s->pl_acc = pl_now && s->pl_every == 1;
		if (s->pl_acc && (rc = g_pl_step(s, ctx, 1.0, 0)))
			return rc;
		for (int micro = 0; micro < s->acc; micro++) {
			if ((rc = gf_stepdrv_begin(s->drv, ctx)) || (rc = generate(s, ctx)))
				return rc;
			/* the fakes leave before G's backward: D's step overlaps it */
			if (pushed < s->fakes_per_step) {
				if ((rc = g_push_fakes(s, ctx)))
					return rc;
				pushed++;
			}
			if ((rc = micro_step(s, ctx, micro, micro == s->acc - 1 && !apart, r)))
				return rc;
		}
		if (apart && (rc = gf_stepdrv_begin(s->drv, ctx)))
			return rc;
		for (; pushed < s->fakes_per_step; pushed++)
			if ((rc = generate(s, ctx)) || (rc = g_push_fakes(s, ctx)))
				return rc;
		if (apart && (rc = micro_step(s, ctx, -1, 1, r)))
			return rc;
		if (pl_now && !s->pl_acc && (rc = g_pl_step(s, ctx, s->pl_every, 1)))
			return rc;
		s->step++;
		if (s->async)
			gf_report_step(ctx, s->step, 0); /* async: G's updates are the run's steps */
		if ((rc = gf_stepdrv_close(s->drv, ctx, s->step - 1)))
			return rc;
		if (s->publish_every > 0 && s->step % s->publish_every == 0 && (rc = g_push_weights(s, ctx)))
			return rc;
		if (s->ckpt_every > 0 && s->step % s->ckpt_every == 0 && (rc = g_push_state(s, ctx)))
			return rc;
	}
	return 0;
}

static int gstep_run(void *self, gf_ctx *ctx)
{
	gstep *s = self;
	s->ctx = ctx;
	int rc = gstep_loop(s, ctx);
	if (rc == 0) /* the results still in flight: the last metrics */
		rc = gf_stepdrv_settle(s->drv, ctx, 0);
	gf_devmsg_release(s->dm, 0);
	char extra[96];
	snprintf(extra, sizeof(extra), "%s%s", s->dev_fakes ? "; fakes in device memory" : "",
	         s->dev_weights ? "; D weights in device memory" : "");
	gf_stepdrv_summary(s->drv, ctx, extra);
	return rc == GF_ESTOP ? 0 : rc;
}

/* Final G weights and state, so the last sample grid and checkpoint show
 * the network as it ended. */
static int gstep_flush(void *self, gf_ctx *ctx)
{
	gstep *s = self;
	int rc = g_push_weights(s, ctx);
	if (rc == 0)
		rc = g_push_state(s, ctx);
	return rc == GF_ESTOP ? 0 : rc;
}

static void gstep_destroy(void *self)
{
	gstep *s = self;
	gf_stepdrv_destroy(s->drv); /* waits for what is in flight */
	gf_devmsg_destroy(s->dm);
	float *dev[] = { s->dpred, s->rp_pair, (float *)(void *)s->rp_lab, s->real_dev, s->a_dev, s->b_dev, s->fake_dev,
	                 s->dga, s->z_dev,
	                 (float *)(void *)s->lab_dev, s->pl_dev, (float *)(void *)s->pl_mean_dev };
	for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
		if (dev[i])
			s->be->ops->free(s->be, dev[i]);
	free(s->real_labels);
	gf_penalty_destroy(s->pen);
	gf_net_destroy(s->d);
	gf_trainer_destroy(s->tr);
	gf_labels_destroy(s->draw);
	free(s->z);
	free(s->labels);
	free(s);
}

static const gf_port_desc inputs[] = {
	{ "d_weights", "d_weights", 0, "D's weights from d_step, for the replica" },
	{ "reduced", "grads", GF_PORT_OPTIONAL, "data parallel: the exchange stage's communicator (its handshake answer)" },
	{ "real", "batch", GF_PORT_OPTIONAL, "paired = true: the (A, B) batches d_step gets (pix2pix)" },
};

static const gf_port_desc outputs[] = {
	{ "fakes", "fakes", 0, "generated images (and their labels) for d_step; paired: (A, G(A))" },
	{ "weights", "g_weights", GF_PORT_OPTIONAL, "G's weights every publish_every steps and at the end" },
	{ "metrics", "metrics", GF_PORT_OPTIONAL, "loss_g and the gradient norm every step; pl and pl_mean when run" },
	{ "state", "state", GF_PORT_OPTIONAL, "checkpoint part every checkpoint_every steps and at the end" },
	{ "grads", "grads", GF_PORT_OPTIONAL, "data parallel: the handshake with an exchange stage (G's size and device)" },
};

static const gf_param_desc params[] = {
	{ "net", GF_PARAM_TABLE, NULL, "G's layer table (a backbone such as dcgan.G{})", NULL },
	{ "d_net", GF_PARAM_TABLE, NULL, "D's layer table, for the replica (the same table d_step trains)", NULL },
	{ "batch", GF_PARAM_INT, "64", "noise vectors per G step (per micro-batch with accumulate)", "1..1048576" },
	{ "opt", GF_PARAM_TABLE, "nil", "optimiser, e.g. gf.adam{lr = 2e-4, betas = {0.5, 0.999}} (that is the default)",
	  NULL },
	{ "loss", GF_PARAM_STR, "bce", "bce (non-saturating), bce_logits, hinge, ls or wgan; as d_step's",
	  GF_GAN_LOSSES },
	{ "mode", GF_PARAM_STR, "sync", "sync: every G step uses the current D; async: the newest D weights that arrived",
	  "sync|async" },
	{ "accumulate", GF_PARAM_INT, "1", "micro-batches whose gradients are summed per G step", "1..65536" },
	{ "clip", GF_PARAM_NUM, "0", "clip G's gradient to this global L2 norm (0 = no clipping)", "0.." },
	{ "labels", GF_PARAM_STR, "uniform", "conditional G: labels drawn uniformly or by the data's class histogram",
	  "uniform|data" },
	{ "dataset", GF_PARAM_STR, "", "dataset whose class histogram labels = \"data\" follows", NULL },
	{ "class", GF_PARAM_INT, "-1", "per-class training: the class this G/D pair learns (labels its outputs)", "-1.." },
	{ "publish_every", GF_PARAM_INT, "100", "push G's weights (sample grids, evaluator) every this many steps (0: "
	                                         "only at the end)", "0.." },
	{ "lr_warmup", GF_PARAM_INT, "0", "steps over which the learning rate ramps linearly up to opt.lr (0: none)",
	  "0.." },
	{ "paired", GF_PARAM_BOOL, "false", "pix2pix: G maps A to B, taken from the (A, B) batches of input 'real'; "
	                                    "fakes are (A, G(A))", NULL },
	{ "l1", GF_PARAM_NUM, "100", "paired: weight of mean |G(A) - B| added to G's adversarial loss (0: none)",
	  "0.." },
	{ "ema", GF_PARAM_NUM, "0", "decay of an exponential moving average of G's weights (BigGAN: 0.9999; 0 = none): "
	                            "checkpointed, and what sample grids, the evaluator and ganflow sample use", "0..1" },
	{ "ema_start", GF_PARAM_INT, "0", "G steps before which the average is a plain copy of G", "0.." },
	{ "ema_kimg", GF_PARAM_NUM, "0", "StyleGAN2's average instead of ema: half-life in thousands of images, decay "
	                                 "0.5^(batch / (1000 ema_kimg)) per step (StyleGAN2-ADA: batch x 10/32, CIFAR 500; 0 = ema)", "0.." },
	{ "ema_rampup", GF_PARAM_NUM, "0", "with ema_kimg: the half-life at most this fraction of the images seen so far "
	                                   "(StyleGAN2: 0.05; 0 = none)", "0..1" },
	{ "pl", GF_PARAM_NUM, "0", "path-length penalty weight (StyleGAN2: 2): w E(|J_z^T y| - a)^2, y ~ N(0, I)/sqrt(HW), "
	                           "a the lengths' moving mean; J w.r.t. G's penalty_at (StyleGAN2: the ws, RMS over them) "
	                           "where its table has one (0 = none)", "0.." },
	{ "pl_every", GF_PARAM_INT, "4", "path length: 1 = in every G step; k > 1 = a step of its own every k G steps "
	                                 "(penalty x k, Adam's lr x r and betas ^ r, r = k/(k+1))", "1..1000000" },
	{ "pl_decay", GF_PARAM_NUM, "0.01", "path length: the mean moves this fraction of the way to each batch's mean",
	  "0..1" },
	GF_TRAIN_SCHEDULE_PARAMS,
	{ "graphs", GF_PARAM_BOOL, "true", "capture each kind of G step as a graph and replay it where the backend has "
	                                  "graphs (CUDA); false: every step eager", NULL },
	GF_TRAIN_ORTHO_PARAMS,
	GF_TRAIN_BACKEND_PARAMS,
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
