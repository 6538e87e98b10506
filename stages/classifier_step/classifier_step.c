/* classifier_step: trains a classifier (softmax cross-entropy) on labelled
 * batches: the feature extractor of the evaluator (FID, IS, KID).
 *
 * When the run ends it measures the accuracy on a test split (decoded with
 * the same transform as the training data: size, channels, resize) and
 * writes the classifier to `export` as a safetensors checkpoint the
 * evaluator reads: tensors "<name>.net.*", metadata "<name>.role" =
 * "classifier", "<name>.table", "<name>.size", "<name>.channels",
 * "<name>.resize", "<name>.test_accuracy".
 *
 * Its step (forward, cross-entropy, backward, update) runs through the
 * step driver (gf_stepdrv): on a GPU one captured graph per batch size, on
 * the batch copied into fixed device buffers; unlike the GAN steps it
 * reads its loss and logits (the training accuracy) back after every
 * step, so it waits for each step it queues.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/decode.h>
#include <ganflow/err.h>
#include <ganflow/log.h>
#include <ganflow/nn.h>
#include <ganflow/dataset.h>
#include <ganflow/params.h>
#include <ganflow/stage.h>
#include <ganflow/train.h>

enum { IN_BATCH };
enum { OUT_METRICS, OUT_STATE };
enum { V_LOSS, V_SUMSQ, NVALS }; /* the step's value slots */

typedef struct clf {
	gf_trainer *tr;         /* the classifier, its optimiser, update, state */
	gf_net *net;            /* the trainer's */
	gf_backend *be;         /* the trainer's */
	int max_batch, classes, size, channels;
	int64_t step, ckpt_every;
	float *dlogits;         /* (max_batch, classes) device */
	float *logits;          /* (max_batch, classes) host */
	float *logits_dev;      /* (max_batch, classes) device: the step's logits, kept past its backward */
	float *x_dev;           /* (max_batch, channels, size, size) the step's input, device */
	int32_t *lab_dev;       /* (max_batch) its labels, device */
	gf_tensor xin;          /* the classifier's input shape */
	gf_stepdrv *drv;
	struct {                /* the step's record (one: read at once) */
		double loss;
		int64_t ok, n;
	} rec;
	const char *test, *export_path, *resize; /* parameters (valid until destroy) */
	double test_acc;
} clf;

static int fold(void *self, gf_ctx *ctx, int ri, const gf_stepdrv_entry *e, const double *val);
static int finish(void *self, gf_ctx *ctx, int ri, int64_t step);

static int clf_create(gf_ctx *ctx, const gf_value *p, void **self)
{
	const gf_run_info *run = gf_ctx_run(ctx);
	clf *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	*self = s;
	s->max_batch = (int)gf_param_int(p, "max_batch");
	s->size = (int)gf_param_int(p, "size");
	s->channels = (int)gf_param_int(p, "channels");
	s->resize = gf_param_str(p, "resize");
	s->test = gf_param_str(p, "test");
	s->export_path = gf_param_str(p, "export");
	s->ckpt_every = run->checkpoint_every;
	s->test_acc = NAN;
	gf_trainer_conf tc = { .what = "classifier", .tag = "c", .role = "classifier", .unit = "step",
	                       .max_batch = s->max_batch, .grads_port = -1, .reduced_port = -1,
	                       .state_port = OUT_STATE, .cls = -1 };
	gf_optim_defaults(&tc.opt, GF_OPT_ADAM);
	int rc = gf_trainer_create(&s->tr, ctx, p, &tc);
	if (rc)
		return rc;
	s->net = gf_trainer_net(s->tr);
	s->be = gf_trainer_backend(s->tr);
	gf_tensor in, out;
	gf_net_shapes(s->net, &in, &out);
	if (in.ndim != 4 || out.ndim != 2)
		return gf_fail(ctx, "the classifier (net) must map images to class scores");
	if (in.shape[1] != s->channels || in.shape[2] != s->size || in.shape[3] != s->size)
		return gf_fail(ctx, "the classifier takes %lldx%lldx%lld images but size = %d, channels = %d",
		               (long long)in.shape[1], (long long)in.shape[2], (long long)in.shape[3], s->size,
		               s->channels);
	s->classes = (int)out.shape[1];
	s->xin = in;
	size_t n = (size_t)s->max_batch * (size_t)s->classes, nx = (size_t)s->max_batch * (size_t)(gf_tensor_numel(&in) / in.shape[0]);
	gf_backend *be = s->be;
	s->logits = malloc(n * sizeof(float));
	if (!s->logits || be->ops->alloc(be, (void **)&s->dlogits, n * sizeof(float)) ||
	    be->ops->alloc(be, (void **)&s->logits_dev, n * sizeof(float)) ||
	    be->ops->alloc(be, (void **)&s->x_dev, nx * sizeof(float)) ||
	    be->ops->alloc(be, (void **)&s->lab_dev, (size_t)s->max_batch * sizeof(int32_t)))
		return gf_fail(ctx, "out of memory");
	gf_stepdrv_conf dc = { .what = "classifier step", .unit = "step", .nvals = NVALS, .max_lag = 0,
	                       .graphs = gf_param_bool(p, "graphs"), .self = s, .fold = fold, .finish = finish };
	if (gf_stepdrv_create(&s->drv, be, &dc))
		return gf_fail(ctx, "%s", gf_errmsg());
	return gf_trainer_resume(s->tr, &s->step);
}

/* Correct predictions among n rows of host logits. */
static int64_t correct(const clf *s, const float *logits, const int32_t *labels, int n)
{
	int64_t ok = 0;
	for (int i = 0; i < n; i++) {
		const float *l = logits + (size_t)i * s->classes;
		int best = 0;
		for (int k = 1; k < s->classes; k++)
			best = l[k] > l[best] ? k : best;
		ok += best == labels[i];
	}
	return ok;
}

static int push_state(clf *s, gf_ctx *ctx)
{
	gf_state *st;
	char k[160], v[64];
	int rc = gf_trainer_state_begin(s->tr, s->step, &st);
	if (rc || !st)
		return rc;
	rc = gf_state_meta(st, gf_train_key(ctx, "resize", k, sizeof(k)), s->resize);
	snprintf(v, sizeof(v), "%.6f", s->test_acc);
	if (!rc && !isnan(s->test_acc))
		rc = gf_state_meta(st, gf_train_key(ctx, "test_accuracy", k, sizeof(k)), v);
	return gf_trainer_state_push(s->tr, rc, s->step);
}

/* A device tensor over the step's input buffers: n images or labels. */
static gf_tensor dev_tensor(const clf *s, int labels, int64_t n)
{
	gf_tensor t;
	if (labels) {
		t = gf_tensor_make(s->lab_dev, GF_I32, 1, &n);
	} else {
		t = s->xin;
		t.shape[0] = n;
		t.data = s->x_dev;
	}
	t.device = s->be->device;
	t.device_index = s->be->device_index;
	return t;
}

/* The ops of a step on the n samples in the input buffers: forward, loss
 * (into the value slot), the logits kept, backward, update. */
static int step_ops(void *self, gf_ctx *ctx, void *arg)
{
	clf *s = self;
	int64_t n = *(const int64_t *)arg;
	gf_tensor x = dev_tensor(s, 0, n), lab = dev_tensor(s, 1, n), logits;
	int rc;
	if ((rc = gf_net_forward(s->net, &x, NULL, GF_TRAIN)) || (rc = gf_net_output(s->net, &logits)))
		return gf_fail(ctx, "step %lld: %s", (long long)s->step, gf_errmsg());
	if ((rc = gf_trainer_loss_dev(s->tr, s->step, GF_LOSS_CE, &logits, &lab, 0.0f, 1.0f, s->dlogits,
	                              (float *)(void *)(gf_stepdrv_slots(s->drv) + V_LOSS))))
		return rc;
	if ((rc = s->be->ops->copy(s->be, s->logits_dev, logits.data, gf_tensor_bytes(&logits), GF_COPY_D2D)) ||
	    (rc = gf_net_backward(s->net, s->dlogits, GF_NEED_DW)))
		return rc == GF_ESTOP || rc == GF_EFAIL ? rc : gf_fail(ctx, "step %lld: %s", (long long)s->step, gf_errmsg());
	if (!gf_trainer_update_on_device(s->tr))
		return gf_trainer_update(s->tr, s->step, NULL);
	return gf_trainer_update_dev(s->tr, s->step, gf_stepdrv_slots(s->drv) + V_SUMSQ);
}

static int fold(void *self, gf_ctx *ctx, int ri, const gf_stepdrv_entry *e, const double *val)
{
	(void)ctx;
	(void)ri;
	clf *s = self;
	float loss;
	memcpy(&loss, val + V_LOSS, sizeof(loss));
	s->rec.loss = loss;
	int rc = gf_trainer_check_loss(s->tr, e->step, loss);
	if (rc || !(e->flags & 1))
		return rc;
	return gf_trainer_check_norm(s->tr, e->step, val[V_SUMSQ], NULL);
}

static int finish(void *self, gf_ctx *ctx, int ri, int64_t step)
{
	(void)ri;
	(void)step;
	clf *s = self;
	gf_msg *m;
	int rc = gf_trainer_metrics(s->tr, OUT_METRICS, s->step, &m);
	if (rc || !m)
		return rc;
	gf_msg_set_scalar(m, "loss_c", s->rec.loss);
	gf_msg_set_scalar(m, "train_acc", (double)s->rec.ok / (double)s->rec.n);
	gf_msg_set_scalar(m, "images", (double)s->rec.n);
	return gf_push(ctx, OUT_METRICS, m);
}

/* One step on batch m (released here): the batch into the input buffers,
 * the step, its loss and logits read back. */
static int step(clf *s, gf_ctx *ctx, gf_msg *m)
{
	int rc = gf_trainer_check_batch(s->tr, m, "batches", 1);
	if (rc) {
		gf_msg_release(m);
		return rc;
	}
	int64_t n = m->t[0].shape[0];
	gf_backend *be = s->be;
	int32_t *labels = m->t[1].data;
	rc = be->ops->copy(be, s->x_dev, m->t[0].data, gf_tensor_bytes(&m->t[0]), GF_COPY_H2D);
	if (!rc)
		rc = be->ops->copy(be, s->lab_dev, labels, (size_t)n * sizeof(int32_t), GF_COPY_H2D);
	if (rc) {
		gf_msg_release(m);
		return gf_fail(ctx, "step %lld: the batch to the device: %s", (long long)s->step, gf_errmsg());
	}
	int host_update = !gf_trainer_update_on_device(s->tr), ri;
	gf_stepdrv_entry e = { .step = s->step, .flags = host_update ? 0 : 1, .n = { n } };
	if ((rc = gf_stepdrv_open(s->drv, ctx, s->step, 1, &ri)) || (rc = gf_stepdrv_begin(s->drv, ctx)) ||
	    (rc = gf_stepdrv_run(s->drv, ctx, s->step, NULL, (uint64_t)n, host_update, step_ops, &n)) ||
	    (rc = gf_stepdrv_push(s->drv, ctx, &e)) ||
	    (rc = be->ops->copy(be, s->logits, s->logits_dev, (size_t)n * s->classes * sizeof(float), GF_COPY_D2H))) {
		gf_msg_release(m);
		return rc == GF_EFAIL || rc == GF_ESTOP ? rc : gf_fail(ctx, "step %lld: %s", (long long)s->step, gf_errmsg());
	}
	s->rec.ok = correct(s, s->logits, labels, (int)n);
	s->rec.n = n;
	gf_msg_release(m);
	s->step++;
	gf_report_step(ctx, s->step, n);
	return gf_stepdrv_close(s->drv, ctx, s->step - 1);
}

static int clf_loop(clf *s, gf_ctx *ctx)
{
	while (!gf_should_stop(ctx) && !(gf_ctx_steps(ctx) > 0 && s->step >= gf_ctx_steps(ctx))) {
		gf_msg *m;
		int rc = gf_pop(ctx, IN_BATCH, &m);
		if (rc)
			return rc == GF_EEOF || rc == GF_ESTOP ? 0 : rc;
		if ((rc = step(s, ctx, m)))
			return rc == GF_ESTOP ? 0 : rc;
		if (s->ckpt_every > 0 && s->step % s->ckpt_every == 0 && (rc = push_state(s, ctx)))
			return rc;
	}
	return 0;
}

static int clf_run(void *self, gf_ctx *ctx)
{
	clf *s = self;
	int rc = clf_loop(s, ctx);
	gf_stepdrv_summary(s->drv, ctx, NULL);
	return rc;
}

/* Accuracy on the test split, decoded as the training data was. */
static int test_accuracy(clf *s, gf_ctx *ctx)
{
	gf_dataset *ds;
	gf_decoder *dec = NULL;
	int rc = gf_dataset_open(s->test, &ds);
	if (rc)
		return gf_fail(ctx, "test split: %s", gf_errmsg());
	uint64_t count = gf_dataset_metadata(ds)->count;
	size_t per = (size_t)s->channels * s->size * s->size;
	int b = s->max_batch;
	float *img = malloc((size_t)b * per * sizeof(float));
	int32_t *lab = malloc((size_t)b * sizeof(int32_t));
	int64_t ok = 0;
	if (!img || !lab || (rc = gf_decoder_create(&dec))) {
		rc = gf_fail(ctx, "out of memory");
		goto out;
	}
	gf_transform t = { .height = s->size, .width = s->size, .channels = s->channels,
	                   .resize = strcmp(s->resize, "area") ? GF_RESIZE_BILINEAR : GF_RESIZE_AREA };
	for (uint64_t i = 0; i < count; i += (uint64_t)b) {
		int n = (int)(count - i < (uint64_t)b ? count - i : (uint64_t)b);
		for (int j = 0; j < n; j++) {
			gf_record r;
			if ((rc = gf_dataset_get_checked(ds, i + (uint64_t)j, &r)) ||
			    (rc = gf_decode_record(dec, &t, &r.h, r.payload, 0, img + (size_t)j * per, per))) {
				rc = gf_fail(ctx, "test split %s: %s", s->test, gf_errmsg());
				goto out;
			}
			lab[j] = r.h.label;
		}
		int64_t shape[4] = { n, s->channels, s->size, s->size };
		gf_tensor x = gf_tensor_make(img, GF_F32, 4, shape), logits;
		if ((rc = gf_net_forward(s->net, &x, NULL, GF_EVAL)) || (rc = gf_net_output(s->net, &logits)) ||
		    (rc = s->be->ops->copy(s->be, s->logits, logits.data, (size_t)n * s->classes * sizeof(float),
		                           GF_COPY_D2H))) {
			rc = gf_fail(ctx, "test forward: %s", gf_errmsg());
			goto out;
		}
		ok += correct(s, s->logits, lab, n);
	}
	s->test_acc = count ? (double)ok / (double)count : NAN;
	gf_info(ctx, "test accuracy %.2f%% (%" PRIu64 " images of %s) after %lld steps", 100.0 * s->test_acc, count,
	        s->test, (long long)s->step);
out:
	free(img);
	free(lab);
	gf_decoder_destroy(dec);
	gf_dataset_close(ds);
	return rc;
}

static int export_classifier(clf *s, gf_ctx *ctx)
{
	const char *me = gf_ctx_name(ctx);
	char prefix[160], kr[160], kt[160], ks[160], kc[160], kz[160], ka[160], size[16], ch[16], acc[32];
	snprintf(prefix, sizeof(prefix), "%s.net", me);
	snprintf(kr, sizeof(kr), "%s.role", me);
	snprintf(kt, sizeof(kt), "%s.table", me);
	snprintf(ks, sizeof(ks), "%s.size", me);
	snprintf(kc, sizeof(kc), "%s.channels", me);
	snprintf(kz, sizeof(kz), "%s.resize", me);
	snprintf(ka, sizeof(ka), "%s.test_accuracy", me);
	snprintf(size, sizeof(size), "%d", s->size);
	snprintf(ch, sizeof(ch), "%d", s->channels);
	snprintf(acc, sizeof(acc), "%.6f", s->test_acc);
	const char *meta[] = { kr, "classifier", kt, gf_trainer_table(s->tr), ks, size, kc, ch, kz, s->resize, ka, acc, NULL };
	gf_ckpt_part part = { prefix, s->net, NULL };
	int rc = gf_ckpt_save(s->export_path, &part, 1, s->step, NULL, meta);
	if (rc)
		return gf_fail(ctx, "export: %s", gf_errmsg());
	gf_info(ctx, "classifier written to %s", s->export_path);
	return 0;
}

static int clf_flush(void *self, gf_ctx *ctx)
{
	clf *s = self;
	int rc = 0;
	if (s->test[0] && (rc = test_accuracy(s, ctx)))
		return rc;
	if (!isnan(s->test_acc)) {
		gf_msg *m;
		if ((rc = gf_trainer_metrics(s->tr, OUT_METRICS, s->step, &m)) == 0 && m) {
			gf_msg_set_scalar(m, "test_acc", s->test_acc);
			rc = gf_push(ctx, OUT_METRICS, m);
		}
		if (rc && rc != GF_ESTOP)
			return rc;
	}
	gf_report_value(ctx, "test_acc", s->test_acc);
	if (s->export_path[0] && (rc = export_classifier(s, ctx)))
		return rc;
	gf_trainer_state_renew(s->tr); /* the final state carries the test accuracy */
	rc = push_state(s, ctx);
	return rc == GF_ESTOP ? 0 : rc;
}

static void clf_destroy(void *self)
{
	clf *s = self;
	gf_stepdrv_destroy(s->drv);
	float *dev[] = { s->dlogits, s->logits_dev, s->x_dev, (float *)(void *)s->lab_dev };
	for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
		if (dev[i])
			s->be->ops->free(s->be, dev[i]);
	free(s->logits);
	gf_trainer_destroy(s->tr);
	free(s);
}

static const gf_port_desc inputs[] = {
	{ "batch", "batch", 0, "labelled batches (t[0] images, t[1] labels)" },
};

static const gf_port_desc outputs[] = {
	{ "metrics", "metrics", GF_PORT_OPTIONAL, "loss_c, train_acc every step, test_acc at the end" },
	{ "state", "state", GF_PORT_OPTIONAL, "checkpoint part every checkpoint_every steps and at the end" },
};

static const gf_param_desc params[] = {
	{ "net", GF_PARAM_TABLE, NULL, "the classifier's layer table (backbones.classifier), with a \"features\" layer", NULL },
	{ "opt", GF_PARAM_TABLE, "nil", "optimiser (default gf.adam{lr = 1e-3})", NULL },
	{ "max_batch", GF_PARAM_INT, "256", "largest batch", "1..1048576" },
	{ "size", GF_PARAM_INT, "32", "image side of the training data (jpeg_decode size)", "1..65536" },
	{ "channels", GF_PARAM_INT, "1", "image channels of the training data", "1..4" },
	{ "resize", GF_PARAM_STR, "bilinear", "resize filter of the training data (jpeg_decode resize)", "bilinear|area" },
	{ "test", GF_PARAM_STR, "", "test split whose accuracy is measured at the end", NULL },
	{ "export", GF_PARAM_STR, "", "classifier checkpoint written at the end (for ganflow eval / evaluator)", NULL },
	{ "graphs", GF_PARAM_BOOL, "true", "capture each kind of step as a graph and replay it where the backend has "
	                                  "graphs (CUDA); false: every step eager", NULL },
	GF_TRAIN_BACKEND_PARAMS,
};


GF_STAGE_EXPORT const gf_stage_desc ganflow_stage = {
	.abi = GF_STAGE_ABI,
	.size = sizeof(gf_stage_desc),
	.name = "classifier_step",
	.doc = "trains a classifier (the evaluator's feature extractor), measures test accuracy, exports it",
	.inputs = inputs,
	.ninputs = 1,
	.outputs = outputs,
	.noutputs = sizeof(outputs) / sizeof(outputs[0]),
	.params = params,
	.nparams = sizeof(params) / sizeof(params[0]),
	.create = clf_create,
	.run = clf_run,
	.flush = clf_flush,
	.destroy = clf_destroy,
};
