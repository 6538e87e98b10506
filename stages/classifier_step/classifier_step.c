/* classifier_step: trains a classifier (softmax cross-entropy) on labelled
 * batches: the feature extractor of the evaluator (FID, IS, KID).
 *
 * When the run ends it measures the accuracy on a test split (decoded with
 * the same transform as the training data: size, channels, resize) and
 * writes the classifier to `export` as a safetensors checkpoint the
 * evaluator reads: tensors "<name>.net.*", metadata "<name>.role" =
 * "classifier", "<name>.table", "<name>.size", "<name>.channels",
 * "<name>.resize", "<name>.test_accuracy".
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

typedef struct clf {
	gf_trainer *tr;         /* the classifier, its optimiser, update, state */
	gf_net *net;            /* the trainer's */
	gf_backend *be;         /* the trainer's */
	int max_batch, classes, size, channels;
	int64_t step, ckpt_every;
	float *dlogits;         /* (max_batch, classes) device */
	float *logits;          /* (max_batch, classes) host */
	const char *test, *export_path, *resize; /* parameters (valid until destroy) */
	double test_acc;
} clf;

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
	size_t n = (size_t)s->max_batch * (size_t)s->classes;
	s->logits = malloc(n * sizeof(float));
	if (!s->logits || s->be->ops->alloc(s->be, (void **)&s->dlogits, n * sizeof(float)))
		return gf_fail(ctx, "out of memory");
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

static int clf_run(void *self, gf_ctx *ctx)
{
	clf *s = self;
	while (!gf_should_stop(ctx) && !(gf_ctx_steps(ctx) > 0 && s->step >= gf_ctx_steps(ctx))) {
		gf_msg *m;
		int rc = gf_pop(ctx, IN_BATCH, &m);
		if (rc)
			return rc == GF_EEOF || rc == GF_ESTOP ? 0 : rc;
		const gf_tensor *x = &m->t[0];
		if ((rc = gf_trainer_check_batch(s->tr, m, "batches", 1))) {
			gf_msg_release(m);
			return rc;
		}
		int n = (int)x->shape[0];
		gf_tensor logits;
		float loss;
		if ((rc = gf_net_forward(s->net, x, NULL, GF_TRAIN)) || (rc = gf_net_output(s->net, &logits))) {
			gf_msg_release(m);
			return gf_fail(ctx, "step %lld: %s", (long long)s->step, gf_errmsg());
		}
		if ((rc = gf_trainer_loss(s->tr, s->step, GF_LOSS_CE, &logits, &m->t[1], 0.0f, 1.0f, s->dlogits, &loss))) {
			gf_msg_release(m);
			return rc;
		}
		rc = s->be->ops->copy(s->be, s->logits, logits.data, (size_t)n * s->classes * sizeof(float), GF_COPY_D2H);
		int64_t ok = rc ? 0 : correct(s, s->logits, m->t[1].data, n);
		gf_msg_release(m);
		if (rc || (rc = gf_net_backward(s->net, s->dlogits, GF_NEED_DW)))
			return gf_fail(ctx, "step %lld: %s", (long long)s->step, gf_errmsg());
		if ((rc = gf_trainer_update(s->tr, s->step, NULL)))
			return rc == GF_ESTOP ? 0 : rc;
		s->step++;
		gf_report_step(ctx, s->step, n);
		if ((rc = gf_trainer_metrics(s->tr, OUT_METRICS, s->step, &m)))
			return rc;
		if (m) {
			gf_msg_set_scalar(m, "loss_c", loss);
			gf_msg_set_scalar(m, "train_acc", (double)ok / n);
			gf_msg_set_scalar(m, "images", n);
			if ((rc = gf_push(ctx, OUT_METRICS, m)))
				return rc;
		}
		if (s->ckpt_every > 0 && s->step % s->ckpt_every == 0 && (rc = push_state(s, ctx)))
			return rc;
	}
	return 0;
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
	if (s->dlogits)
		s->be->ops->free(s->be, s->dlogits);
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
