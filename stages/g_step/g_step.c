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
 * Path length (StyleGAN2, `pl` = w; docs/train.md "Gradient penalties"):
 * on a batch of max(1, batch / 2) fresh z, the lengths L_i = |J_z^T y_i|
 * of G's input gradient for y ~ N(0, I) / sqrt(H W) (the engine's double
 * backward, gf_penalty), their mean folded into an exponential moving
 * average a (decay pl_decay, checkpointed as "<instance>.pl_mean") and the
 * penalty w mean (L_i - a)^2. pl_every = k > 1: a step of its own after
 * every k-th G step, the penalty times k, Adam adjusted as for d_step's
 * lazy R1; pl_every = 1: in every G step. z, labels and y come from the
 * noise generator.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/dist.h>
#include <ganflow/err.h>
#include <ganflow/nn.h>
#include <ganflow/params.h>
#include <ganflow/stage.h>
#include <ganflow/train.h>

enum { IN_DW, IN_REDUCED, IN_REAL };
enum { OUT_FAKES, OUT_WEIGHTS, OUT_METRICS, OUT_STATE, OUT_GRADS };

typedef struct gstep {
	gf_trainer *tr;         /* G, its optimiser, update, state */
	gf_net *g, *d;          /* G (the trainer's) and the replica of D */
	gf_backend *be;         /* the trainer's */
	gf_rng noise;           /* z and labels */
	gf_ctx *ctx;            /* during run() */
	gf_loss_kind loss;      /* G's loss on D's output */
	int async;
	int batch, zdim, classes, acc;
	int cls;                /* class of a per-class pair, or -1 */
	int64_t publish_every;
	int64_t ckpt_every;
	int64_t step;           /* G updates done */
	int64_t dver;           /* version of the replica's weights, -1 = none yet */
	int64_t fakes_per_step; /* what d_step consumes per G step */
	gf_labels *draw;        /* labels of the fakes */
	float *z;               /* (batch, zdim) */
	int32_t *labels;        /* (batch) */
	float *dpred;           /* (batch, outputs of D) device */
	/* paired (pix2pix) */
	int paired;
	float l1;               /* weight of the L1 term */
	int ca, cb;             /* channels of A and of B (= G's output) */
	int64_t plane;          /* H x W */
	gf_tensor gout;         /* G's output shape (batch = max), for the device of our tensors */
	float *real_dev;        /* (batch, ca + cb, H, W) the (A, B) batch, device */
	float *a_dev, *b_dev;   /* (batch, ca, H, W), (batch, cb, H, W) device */
	float *fake_dev;        /* (batch, ca + cb, H, W) (A, G(A)) device */
	float *dga;             /* (batch, cb, H, W) G's output gradient, device */
	int32_t *real_labels;   /* (batch) labels of the last (A, B) batch */
	int nreal;              /* samples in it */
	double l1_sum;          /* mean L1 of this step's micro-batches */
	/* path length */
	float pl, pl_decay;     /* weight (0 = none), decay of its mean */
	int pl_every, pl_batch;
	double pl_mean;         /* the moving average of the lengths */
	gf_penalty *pen;
	float *pl_y;            /* (pl_batch, G output) host noise */
	float *pl_dev;          /* and device */
	size_t pl_n;            /* G output values per sample */
	float pl_scale;         /* 1 / sqrt(H W) */
} gstep;

/* ---- setup ---- */

/* pix2pix: G takes A (ca, H, W) and gives B (cb, H, W); D takes (A, B)
 * concatenated (ca + cb, H, W). Allocates the device buffers. */
static int paired_setup(gstep *s, gf_ctx *ctx, const gf_tensor *gin, const gf_tensor *gout, const gf_tensor *din)
{
	char a[96], b[96], c[96];
	if (!gf_port_edges(ctx, 0, IN_REAL))
		return gf_fail(ctx, "paired = true needs input 'real' connected to the (A, B) batches d_step gets "
		                    "(gf.connect(batch.batch, g.real))");
	if (gin->ndim != 4 || gout->ndim != 4 || din->ndim != 4 || gin->shape[2] != gout->shape[2] ||
	    gin->shape[3] != gout->shape[3] || din->shape[1] != gin->shape[1] + gout->shape[1] ||
	    din->shape[2] != gin->shape[2] || din->shape[3] != gin->shape[3])
		return gf_fail(ctx, "paired = true: G must map an image A (C, H, W) to an image B of the same size and D "
		                    "take (A, B) concatenated; G takes %s and gives %s, D takes %s",
		               gf_tensor_shape_str(gin, a, 96), gf_tensor_shape_str(gout, b, 96),
		               gf_tensor_shape_str(din, c, 96));
	if (gf_net_classes(s->g))
		return gf_fail(ctx, "paired = true: G must not take labels");
	s->ca = (int)gin->shape[1];
	s->cb = (int)gout->shape[1];
	s->plane = gin->shape[2] * gin->shape[3];
	s->gout = *gout;
	size_t n = (size_t)s->batch * (size_t)s->plane * sizeof(float);
	gf_backend *be = s->be;
	if (be->ops->alloc(be, (void **)&s->real_dev, n * (size_t)(s->ca + s->cb)) ||
	    be->ops->alloc(be, (void **)&s->a_dev, n * (size_t)s->ca) ||
	    be->ops->alloc(be, (void **)&s->b_dev, n * (size_t)s->cb) ||
	    be->ops->alloc(be, (void **)&s->fake_dev, n * (size_t)(s->ca + s->cb)) ||
	    be->ops->alloc(be, (void **)&s->dga, n * (size_t)s->cb) ||
	    !(s->real_labels = malloc((size_t)s->batch * sizeof(int32_t))))
		return gf_fail(ctx, "out of memory");
	return 0;
}

/* pl, pl_every, pl_decay: the penalty's buffers and its mean, once G exists. */
static int pl_setup(gstep *s, gf_ctx *ctx, const gf_value *p)
{
	s->pl = (float)gf_param_num(p, "pl");
	s->pl_every = (int)gf_param_int(p, "pl_every");
	s->pl_decay = (float)gf_param_num(p, "pl_decay");
	if (s->pl <= 0)
		return 0;
	if (s->paired)
		return gf_fail(ctx, "parameter 'pl': the path length is a penalty on G's Jacobian with respect to its noise; "
		                    "a paired (pix2pix) G takes images");
	s->pl_batch = s->batch / 2 > 0 ? s->batch / 2 : 1;
	if (gf_penalty_create(&s->pen, s->g, s->batch))
		return gf_fail(ctx, "parameter 'pl': G (net): %s", gf_errmsg());
	gf_tensor out;
	gf_net_shapes(s->g, NULL, &out);
	s->pl_n = (size_t)gf_tensor_numel(&out) / (size_t)out.shape[0];
	double hw = out.ndim == 4 ? (double)out.shape[2] * (double)out.shape[3] : (double)s->pl_n;
	s->pl_scale = (float)(1.0 / sqrt(hw));
	size_t n = (size_t)s->pl_batch * s->pl_n;
	if (!(s->pl_y = malloc(n * sizeof(float))) || s->be->ops->alloc(s->be, (void **)&s->pl_dev, n * sizeof(float)))
		return gf_fail(ctx, "out of memory");
	int64_t bits = 0;
	int rc = gf_train_resume_i64(ctx, "pl_mean", &bits, 1);
	memcpy(&s->pl_mean, &bits, sizeof(bits));   /* 0.0 on a fresh run */
	return rc;
}

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

	gf_trainer_conf tc = { .what = "G", .tag = "g", .role = "generator", .unit = "step", .max_batch = s->batch,
	                       .grads_port = OUT_GRADS, .reduced_port = IN_REDUCED, .state_port = OUT_STATE,
	                       .cls = s->cls,
	                       .reg_every = gf_param_num(p, "pl") > 0 ? (int)gf_param_int(p, "pl_every") : 0 };
	gf_gan_optim_defaults(&tc.opt);
	int rc = gf_trainer_create(&s->tr, ctx, p, &tc);
	if (rc)
		return rc;
	s->g = gf_trainer_net(s->tr);
	s->be = gf_trainer_backend(s->tr);
	if ((rc = gf_train_net(ctx, s->be, gf_param(p, "d_net"), s->batch, "D replica (d_net)", run->seed,
	                       gf_train_stream(ctx, "replica"), &s->d)))
		return rc;

	/* G's output must be what D takes. */
	gf_tensor gin, gout, din, dout;
	gf_net_shapes(s->g, &gin, &gout);
	gf_net_shapes(s->d, &din, &dout);
	s->paired = gf_param_bool(p, "paired");
	s->l1 = (float)gf_param_num(p, "l1");
	if (s->paired) {
		if ((rc = paired_setup(s, ctx, &gin, &gout, &din)))
			return rc;
	} else if (gf_port_edges(ctx, 0, IN_REAL)) {
		return gf_fail(ctx, "input 'real' is connected but paired = false: only a pix2pix G (paired = true) takes "
		                    "real batches");
	} else if (gin.ndim != 2)
		return gf_fail(ctx, "G (net) must take noise vectors (input_shape = {z}), its input is %dd", gin.ndim - 1);
	s->zdim = s->paired ? 0 : (int)gin.shape[1];
	if (!s->paired && !gf_tensor_same_shape(&gout, &din)) {
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

	size_t nd = (size_t)gf_tensor_numel(&dout);
	s->z = malloc((size_t)s->batch * (size_t)(s->zdim ? s->zdim : 1) * sizeof(float));
	s->labels = malloc((size_t)s->batch * sizeof(int32_t));
	if (!s->z || !s->labels || s->be->ops->alloc(s->be, (void **)&s->dpred, nd * sizeof(float)))
		return gf_fail(ctx, "out of memory");
	if ((rc = pl_setup(s, ctx, p)))
		return rc;
	s->dver = -1;
	s->fakes_per_step = 1;
	if ((rc = gf_trainer_resume(s->tr, &s->step)) || (rc = gf_train_resume_rng(ctx, "noise_rng", &s->noise)) ||
	    (rc = gf_train_resume_rng(ctx, "replica_rng", gf_net_rng(s->d))))
		return rc;
	return 0;
}

/* ---- the loop ---- */

/* A device tensor of G's output's device over data. */
static gf_tensor dev_tensor(const gstep *s, float *data, int n, int c)
{
	gf_tensor t = s->gout;
	t.shape[0] = n;
	t.shape[1] = c;
	t.data = data;
	return t;
}

/* pix2pix: the next (A, B) batch to the device, G forward on A (training
 * mode: dropout is G's noise), (A, G(A)) into fake_dev. */
static int generate_paired(gstep *s, gf_ctx *ctx)
{
	gf_msg *m;
	int rc = gf_pop(ctx, IN_REAL, &m);
	if (rc)
		return rc;
	const gf_tensor *x = &m->t[0];
	if (m->ntensors < 1 || x->dtype != GF_F32 || x->ndim != 4 || x->shape[0] < 1 || x->shape[0] > s->batch ||
	    x->shape[1] != s->ca + s->cb || x->shape[2] * x->shape[3] != s->plane) {
		char a[96];
		gf_tensor_shape_str(x, a, 96);
		gf_msg_release(m);
		return gf_fail(ctx, "paired = true: real batch %s is not (N <= %d, %d + %d, H, W) as G and D need (is "
		                    "jpeg_decode paired = true?)",
		               a, s->batch, s->ca, s->cb);
	}
	int n = (int)x->shape[0];
	size_t cab = (size_t)(s->ca + s->cb) * (size_t)s->plane, ca = (size_t)s->ca * (size_t)s->plane,
	       cb = (size_t)s->cb * (size_t)s->plane;
	gf_backend *be = s->be;
	rc = be->ops->copy(be, s->real_dev, x->data, (size_t)n * cab * sizeof(float), GF_COPY_H2D);
	for (int i = 0; i < n; i++)
		s->real_labels[i] = m->ntensors > 1 && m->t[1].dtype == GF_I32 ? ((const int32_t *)m->t[1].data)[i] : -1;
	gf_msg_release(m);
	if (!rc)
		rc = be->ops->copy2d(be, s->a_dev, ca, s->real_dev, cab, (size_t)n, ca, 0);
	if (!rc)
		rc = be->ops->copy2d(be, s->b_dev, cb, s->real_dev + ca, cab, (size_t)n, cb, 0);
	if (rc)
		return gf_fail(ctx, "step %lld: (A, B) batch to the device: %s", (long long)s->step, gf_errmsg());
	s->nreal = n;
	gf_tensor a = dev_tensor(s, s->a_dev, n, s->ca), out;
	if ((rc = gf_net_forward(s->g, &a, NULL, GF_TRAIN)))
		return gf_fail(ctx, "step %lld: G forward: %s", (long long)s->step, gf_errmsg());
	gf_net_output(s->g, &out);
	rc = be->ops->copy2d(be, s->fake_dev, cab, s->a_dev, ca, (size_t)n, ca, 0);
	if (!rc)
		rc = be->ops->copy2d(be, s->fake_dev + ca, cab, out.data, cb, (size_t)n, cb, 0);
	return rc ? gf_fail(ctx, "step %lld: (A, G(A)): %s", (long long)s->step, gf_errmsg()) : 0;
}

/* G forward on n fresh noise vectors (training mode). */
static int generate_n(gstep *s, gf_ctx *ctx, int n)
{
	int64_t zs[2] = { n, s->zdim }, ls[1] = { n };
	const gf_run_info *run = gf_ctx_run(ctx);
	int sliced = gf_trainer_sliced(s->tr), rank = sliced ? run->rank : 0, world = sliced ? run->world : 1;
	if (sliced)
		gf_dist_normal_slice(&s->noise, s->z, (size_t)n * (size_t)s->zdim, rank, world);
	else
		gf_rng_normal(&s->noise, s->z, (size_t)n * (size_t)s->zdim, 0.0f, 1.0f);
	gf_labels_draw(s->draw, &s->noise, s->labels, n, rank, world);
	gf_tensor z = gf_tensor_make(s->z, GF_F32, 2, zs);
	gf_tensor lab = gf_tensor_make(s->labels, GF_I32, 1, ls);
	int rc = gf_net_forward(s->g, &z, s->classes ? &lab : NULL, GF_TRAIN);
	if (rc)
		return gf_fail(ctx, "step %lld: G forward: %s", (long long)s->step, gf_errmsg());
	return 0;
}

/* G forward on fresh noise (training mode). */
static int generate(gstep *s, gf_ctx *ctx)
{
	return s->paired ? generate_paired(s, ctx) : generate_n(s, ctx, s->batch);
}

/* ---- path length ---- */

/* The path-length penalty on a batch of its own, times gain, into G's
 * gradients (written: the caller adds the adversarial ones after it, or
 * updates with it alone). */
static int pl_step(gstep *s, gf_ctx *ctx, double gain, double *value)
{
	int rc = generate_n(s, ctx, s->pl_batch);
	if (rc)
		return rc;
	size_t n = (size_t)s->pl_batch * s->pl_n;
	gf_rng_normal(&s->noise, s->pl_y, n, 0.0f, s->pl_scale);
	double mean;
	if ((rc = s->be->ops->copy(s->be, s->pl_dev, s->pl_y, n * sizeof(float), GF_COPY_H2D)) ||
	    (rc = gf_penalty_lengths(s->pen, s->pl_dev, &mean)))
		return gf_fail(ctx, "step %lld: path length: %s", (long long)s->step, gf_errmsg());
	/* StyleGAN2: the mean moves first, the penalty is around the new mean */
	s->pl_mean += s->pl_decay * (mean - s->pl_mean);
	rc = gf_penalty_apply(s->pen, GF_PENALTY_DISTANCE, s->pl, s->pl_mean, gain, NULL, GF_NEED_DW, value);
	if (rc == GF_ESTOP || rc == GF_EFAIL)
		return rc;
	if (rc)
		return gf_fail(ctx, "step %lld: path length: %s", (long long)s->step, gf_errmsg());
	if (!isfinite(*value))
		return gf_fail(ctx, "step %lld: the path-length penalty is %g (non-finite); the last good checkpoint is kept",
		               (long long)s->step, *value);
	return 0;
}

/* Pushes G's current output as a fakes message. */
static int push_fakes(gstep *s, gf_ctx *ctx)
{
	gf_tensor out;
	gf_net_output(s->g, &out);
	if (s->paired)
		out = dev_tensor(s, s->fake_dev, s->nreal, s->ca + s->cb);
	gf_msg *m;
	int rc = gf_msg_get(ctx, OUT_FAKES, &m);
	if (rc)
		return rc;
	int64_t ls[1] = { out.shape[0] };
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
	memcpy(lab, s->paired ? s->real_labels : s->labels, (size_t)ls[0] * sizeof(int32_t));
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

static int push_weights(gstep *s, gf_ctx *ctx)
{
	gf_msg *m;
	if (!gf_port_edges(ctx, 1, OUT_WEIGHTS))
		return 0;
	int rc = gf_trainer_weights(s->tr, OUT_WEIGHTS, s->step, &m);
	return rc ? rc : gf_push(ctx, OUT_WEIGHTS, m);
}

static int push_state(gstep *s, gf_ctx *ctx)
{
	gf_state *st;
	char k[160];
	int rc = gf_trainer_state_begin(s->tr, s->step, &st);
	if (rc || !st)
		return rc;
	rc = gf_state_add_rng(st, gf_train_key(ctx, "noise_rng", k, sizeof(k)), &s->noise);
	if (!rc)
		rc = gf_state_add_rng(st, gf_train_key(ctx, "replica_rng", k, sizeof(k)), gf_net_rng(s->d));
	if (!rc && s->pl > 0) { /* the mean's bits, so a resumed run goes on exactly */
		int64_t bits;
		memcpy(&bits, &s->pl_mean, sizeof(bits));
		rc = gf_state_add_i64(st, gf_train_key(ctx, "pl_mean", k, sizeof(k)), &bits, 1);
	}
	return gf_trainer_state_push(s->tr, rc, s->step);
}

/* pix2pix: G's output gradient into dga: l1 x d mean|G(A) - B| plus the
 * G(A) channels of the replica's input gradient dfake (N, ca + cb, H, W). */
static int paired_grad(gstep *s, gf_ctx *ctx, const gf_tensor *dfake)
{
	int n = s->nreal, rc = 0;
	size_t cab = (size_t)(s->ca + s->cb) * (size_t)s->plane, ca = (size_t)s->ca * (size_t)s->plane,
	       cb = (size_t)s->cb * (size_t)s->plane;
	if (s->l1 > 0) {
		gf_tensor out, b = dev_tensor(s, s->b_dev, n, s->cb);
		gf_net_output(s->g, &out);
		float l;
		if ((rc = gf_trainer_loss(s->tr, s->step, GF_LOSS_L1, &out, &b, 0.0f, s->l1 / (float)s->acc, s->dga, &l)))
			return rc;
		s->l1_sum += (double)l / s->l1; /* l carries the weight l1 / accumulate */
	}
	rc = s->be->ops->copy2d(s->be, s->dga, cb, (const float *)dfake->data + ca, cab, (size_t)n, cb, s->l1 > 0);
	return rc ? gf_fail(ctx, "step %lld: G's gradient: %s", (long long)s->step, gf_errmsg()) : 0;
}

/* One micro-batch: G forward, the replica on the fakes, G's loss, the
 * replica's input gradient and G's backward into G's gradients (added to
 * them after the first micro-batch, or after a path-length term: acc). */
static int micro_step(gstep *s, gf_ctx *ctx, int micro, int acc, double *loss)
{
	int64_t ls[1] = { s->batch };
	gf_tensor lab = gf_tensor_make(s->labels, GF_I32, 1, ls), fake, dout, dfake;
	gf_net_output(s->g, &fake);
	if (s->paired)
		fake = dev_tensor(s, s->fake_dev, s->nreal, s->ca + s->cb);
	int rc = gf_net_forward(s->d, &fake, s->classes ? &lab : NULL, GF_TRAIN | GF_FREEZE_STATS);
	if (rc)
		return gf_fail(ctx, "step %lld: D replica forward: %s", (long long)s->step, gf_errmsg());
	gf_net_output(s->d, &dout);
	float l;
	if ((rc = gf_trainer_loss(s->tr, s->step, s->loss, &dout, NULL, 1.0f, 1.0f / (float)s->acc, s->dpred, &l)))
		return rc;
	*loss += l;
	if ((rc = gf_net_backward(s->d, s->dpred, GF_NEED_DX)))
		return gf_fail(ctx, "step %lld: D replica backward: %s", (long long)s->step, gf_errmsg());
	gf_net_dx(s->d, &dfake);
	if (s->paired && (rc = paired_grad(s, ctx, &dfake)))
		return rc;
	if (micro == s->acc - 1)
		gf_trainer_arm(s->tr, s->step); /* buckets leave during this backward */
	if ((rc = gf_net_backward(s->g, s->paired ? s->dga : dfake.data, GF_NEED_DW | (micro || acc ? GF_ACCUMULATE : 0))))
		return rc == GF_ESTOP || rc == GF_EFAIL
		           ? rc
		           : gf_fail(ctx, "step %lld: G backward: %s", (long long)s->step, gf_errmsg());
	return 0;
}

static int gstep_run(void *self, gf_ctx *ctx)
{
	gstep *s = self;
	const gf_run_info *run = gf_ctx_run(ctx);
	int rc;
	s->ctx = ctx;
	if ((rc = gf_trainer_start(s->tr)))
		return rc;
	if (s->async && gf_trainer_sliced(s->tr))
		return gf_fail(ctx, "mode = \"async\" with a data-parallel exchange is not supported (use mode = \"sync\")");
	if (gf_trainer_sliced(s->tr)) /* the replica's dropout masks differ across ranks too */
		gf_net_rng(s->d)->stream ^= (uint64_t)run->rank * 0x9e3779b97f4a7c15ull;
	while (!gf_should_stop(ctx) && !(gf_ctx_steps(ctx) > 0 && s->step >= gf_ctx_steps(ctx))) {
		if ((rc = take_weights(s, ctx)))
			return rc;
		/* a stop may have been decided while we waited */
		if (gf_should_stop(ctx))
			break;
		double loss = 0, pl = 0;
		int64_t pushed = 0;
		s->l1_sum = 0;
		/* path length: in this step (pl_every = 1), or a step of its own after it */
		int pl_now = s->pl > 0 && s->step % s->pl_every == 0, pl_first = pl_now && s->pl_every == 1;
		if (pl_first && (rc = pl_step(s, ctx, 1.0, &pl)))
			return rc;
		for (int micro = 0; micro < s->acc; micro++) {
			if ((rc = generate(s, ctx)))
				return rc;
			if (pushed < s->fakes_per_step) {
				if ((rc = push_fakes(s, ctx)))
					return rc;
				pushed++;
			}
			if ((rc = micro_step(s, ctx, micro, pl_first, &loss)))
				return rc;
		}
		for (; pushed < s->fakes_per_step; pushed++)
			if ((rc = generate(s, ctx)) || (rc = push_fakes(s, ctx)))
				return rc;
		float gnorm;
		if ((rc = gf_trainer_update(s->tr, s->step, &gnorm)))
			return rc;
		if (pl_now && !pl_first) {
			gf_trainer_arm(s->tr, s->step); /* data parallel: buckets leave during the double backward */
			if ((rc = pl_step(s, ctx, s->pl_every, &pl)) || (rc = gf_trainer_update(s->tr, s->step, NULL)))
				return rc;
		}
		s->step++;
		if (s->async)
			gf_report_step(ctx, s->step, 0); /* async: G's updates are the run's steps */
		gf_msg *m;
		if ((rc = gf_trainer_metrics(s->tr, OUT_METRICS, s->step, &m)))
			return rc;
		if (m) {
			gf_msg_set_scalar(m, "loss_g", loss);
			gf_msg_set_scalar(m, "grad_norm_g", gnorm);
			if (s->paired && s->l1 > 0)
				gf_msg_set_scalar(m, "l1_g", s->l1_sum); /* mean |G(A) - B|, the adversarial part is loss_g */
			if (pl_now) {
				gf_msg_set_scalar(m, "pl", pl);
				gf_msg_set_scalar(m, "pl_mean", s->pl_mean);
			}
			if ((rc = gf_push(ctx, OUT_METRICS, m)))
				return rc;
		}
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
	float *dev[] = { s->dpred, s->real_dev, s->a_dev, s->b_dev, s->fake_dev, s->dga, s->pl_dev };
	for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
		if (dev[i])
			s->be->ops->free(s->be, dev[i]);
	free(s->real_labels);
	free(s->pl_y);
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
	{ "reduced", "grads", GF_PORT_OPTIONAL, "data parallel: acknowledgements of the exchange stage" },
	{ "real", "batch", GF_PORT_OPTIONAL, "paired = true: the (A, B) batches d_step gets (pix2pix)" },
};

static const gf_port_desc outputs[] = {
	{ "fakes", "fakes", 0, "generated images (and their labels) for d_step; paired: (A, G(A))" },
	{ "weights", "g_weights", GF_PORT_OPTIONAL, "G's weights every publish_every steps and at the end" },
	{ "metrics", "metrics", GF_PORT_OPTIONAL, "loss_g and the gradient norm every step; pl and pl_mean when run" },
	{ "state", "state", GF_PORT_OPTIONAL, "checkpoint part every checkpoint_every steps and at the end" },
	{ "grads", "grads", GF_PORT_OPTIONAL, "data parallel: G's gradient buckets / parameters to an exchange stage" },
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
	                           "a the lengths' moving mean (0 = none)", "0.." },
	{ "pl_every", GF_PARAM_INT, "4", "path length: 1 = in every G step; k > 1 = a step of its own every k G steps "
	                                 "(penalty x k, Adam's lr x r and betas ^ r, r = k/(k+1))", "1..1000000" },
	{ "pl_decay", GF_PARAM_NUM, "0.01", "path length: the mean moves this fraction of the way to each batch's mean",
	  "0..1" },
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
