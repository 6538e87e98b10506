/* evaluator: FID, IS, KID (and optionally precision/recall and per-class
 * FID) of G while it trains.
 *
 * Takes G's weights from g_step (every publish_every steps; several g_steps
 * in per-class training, each weights message carrying its class as the
 * label) into its own copy of G, and every `every` steps generates n
 * images, extracts the classifier's features and compares them with the
 * real split's cached statistics (<ganflow/evaluate.h>). The figures go out
 * as a metrics message (into metrics.jsonl) and onto the live progress
 * line. It runs on its own thread: training does not stop while it works
 * (it does share the CPU).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>
#include <ganflow/evaluate.h>
#include <ganflow/log.h>
#include <ganflow/params.h>
#include <ganflow/stage.h>
#include <ganflow/train.h>

enum { IN_WEIGHTS };
enum { OUT_METRICS };

#define MAX_G 256

typedef struct evalst {
	gf_backend *be;
	gf_generators *gs;
	gf_evaluator *ev;
	const gf_value *table;
	int nproducers, ngen;
	int64_t step[MAX_G];     /* step of the weights each G holds, -1 = none */
	int64_t every, n, last;
	int batch;
	unsigned mode;
	float *images;
	int32_t *labels;
	double *per_class;
	gf_rng rng;
	gf_evaluator_opts o;
	char classifier[4096], real[4096];
	int fid;   /* features = inception: any G size, pytorch-fid's resize */
} evalst;

static int ev_create(gf_ctx *ctx, const gf_value *p, void **self)
{
	const gf_run_info *run = gf_ctx_run(ctx);
	evalst *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	*self = s;
	s->table = gf_param(p, "net");
	s->every = gf_param_int(p, "every");
	s->n = gf_param_int(p, "n");
	s->batch = (int)gf_param_int(p, "batch");
	s->mode = !strcmp(gf_param_str(p, "bn"), "eval") ? GF_EVAL : GF_TRAIN | GF_FREEZE_STATS;
	snprintf(s->classifier, sizeof(s->classifier), "%s", gf_param_str(p, "classifier"));
	int inception = !strcmp(gf_param_str(p, "features"), "inception");
	if (inception && !gf_param_str(p, "weights")[0])
		return gf_fail(ctx, "features = inception needs weights = FILE (ganflow weights import, docs/eval.md)");
	if (!inception && gf_param_str(p, "weights")[0])
		return gf_fail(ctx, "weights = %s goes with features = inception", gf_param_str(p, "weights"));
	if (inception)
		snprintf(s->classifier, sizeof(s->classifier), "%s", gf_param_str(p, "weights"));
	snprintf(s->real, sizeof(s->real), "%s", gf_param_str(p, "real"));
	s->o = gf_evaluator_defaults();
	s->o.classifier = s->classifier;
	s->o.real = s->real;
	s->o.real_n = gf_param_int(p, "real_n");
	s->o.threads = (int)gf_param_int(p, "threads");
	s->o.batch = s->batch;
	if (!gf_param_bool(p, "kid"))
		s->o.stats.kid_subsets = 0;
	if (!gf_param_bool(p, "pr"))
		s->o.stats.pr_k = 0;
	s->o.other_what = "evaluator images (parameter n)"; /* checked before the real split is read */
	s->o.other_n = s->n;
	/* the classifier and the real statistics now, so a mistake shows before training starts */
	int rc = gf_evaluator_open(&s->ev, &s->o);
	if (rc)
		return gf_fail(ctx, "%s", gf_errmsg());
	s->fid = gf_evaluator_fid(s->ev);
	if (inception && !s->fid)
		return gf_fail(ctx, "weights = %s is not an FID Inception file (write one with ganflow weights import)",
		                s->classifier);
	if ((rc = gf_train_backend(ctx, p, &s->be)))
		return rc;
	gf_rng_init(&s->rng, run->seed, gf_train_stream(ctx, "noise"));
	s->last = -1;
	return 0;
}

/* The generators, built when the first weights arrive (their number is the
 * number of g_steps connected). */
static int setup(evalst *s, gf_ctx *ctx)
{
	s->ngen = s->nproducers > 1 ? s->nproducers : 1;
	if (s->ngen > MAX_G)
		return gf_fail(ctx, "more than %d generators", MAX_G);
	int rc = gf_generators_create(&s->gs, s->table, s->ngen, s->be, s->batch);
	if (rc)
		return gf_fail(ctx, "G (net): %s", gf_errmsg());
	int c, h, w, ec, eh, ew;
	gf_generators_shape(s->gs, &c, &h, &w);
	gf_evaluator_shape(s->ev, &ec, &eh, &ew);
	if (!s->fid && (c != ec || h != eh || w != ew))
		return gf_fail(ctx, "G makes %dx%dx%d images but the classifier %s takes %dx%dx%d", c, h, w, s->classifier,
		               ec, eh, ew);
	int classes = gf_evaluator_classes(s->ev);
	s->images = malloc((size_t)s->batch * (size_t)(c * h * w) * sizeof(float));
	s->labels = malloc((size_t)s->batch * sizeof(int32_t));
	s->per_class = calloc((size_t)classes, sizeof(double));
	for (int i = 0; i < MAX_G; i++)
		s->step[i] = -1;
	return s->images && s->labels && s->per_class ? 0 : gf_fail(ctx, "out of memory");
}

static int evaluate(evalst *s, gf_ctx *ctx, int64_t step)
{
	int c, h, w, classes = gf_generators_classes(s->gs);
	gf_generators_shape(s->gs, &c, &h, &w);
	gf_evaluator_reset(s->ev);
	double t0 = gf_now();
	for (int64_t i = 0; i < s->n; i += s->batch) {
		int b = (int)(s->n - i < s->batch ? s->n - i : s->batch);
		for (int j = 0; j < b; j++)
			s->labels[j] = classes ? (int32_t)((i + j) % classes) : -1;
		int rc = gf_generators_sample(s->gs, &s->rng, classes ? s->labels : NULL, b, s->mode, s->images);
		if (!rc)
			rc = gf_evaluator_add(s->ev, s->images, classes ? s->labels : NULL, b, c, h, w);
		if (rc)
			return gf_fail(ctx, "step %lld: %s", (long long)step, gf_errmsg());
	}
	gf_eval_result r;
	int rc = gf_evaluator_compute(s->ev, &r, s->per_class);
	if (rc)
		return gf_fail(ctx, "step %lld: %s", (long long)step, gf_errmsg());
	gf_info(ctx, "step %lld: FID %.3f  IS %.3f  KID %.5f (%lld images, %.1f s)", (long long)step, r.fid, r.is_mean,
	        r.kid_mean, (long long)r.n, gf_now() - t0);
	gf_report_value(ctx, "fid", r.fid);
	if (!gf_port_edges(ctx, 1, OUT_METRICS))
		return 0;
	gf_msg *m;
	if ((rc = gf_msg_get(ctx, OUT_METRICS, &m)))
		return rc;
	m->step = step;
	m->source = gf_ctx_name(ctx);
	gf_msg_set_scalar(m, "fid", r.fid);
	gf_msg_set_scalar(m, "is", r.is_mean);
	gf_msg_set_scalar(m, "is_std", r.is_std);
	gf_msg_set_scalar(m, "eval_n", (double)r.n);
	if (!isnan(r.kid_mean)) {
		gf_msg_set_scalar(m, "kid", r.kid_mean);
		gf_msg_set_scalar(m, "kid_std", r.kid_std);
	}
	if (!isnan(r.precision)) {
		gf_msg_set_scalar(m, "precision", r.precision);
		gf_msg_set_scalar(m, "recall", r.recall);
	}
	for (int k = 0; k < classes && k < 10; k++) {
		char name[GF_MSG_SCALAR_NAME];
		snprintf(name, sizeof(name), "fid_class%d", k);
		if (!isnan(s->per_class[k]))
			gf_msg_set_scalar(m, name, s->per_class[k]);
	}
	return gf_push(ctx, OUT_METRICS, m);
}

static int all_at(const evalst *s, int64_t step)
{
	for (int i = 0; i < s->ngen; i++)
		if (s->step[i] != step)
			return 0;
	return 1;
}

static int ev_run(void *self, gf_ctx *ctx)
{
	evalst *s = self;
	s->nproducers = gf_port_edges(ctx, 0, IN_WEIGHTS);
	int rc, pending = 0;
	for (;;) {
		gf_msg *m;
		rc = gf_pop(ctx, IN_WEIGHTS, &m);
		if (rc == GF_EEOF)
			break;
		if (rc)
			return rc == GF_ESTOP ? 0 : rc;
		if (!s->gs && (rc = setup(s, ctx))) {
			gf_msg_release(m);
			return rc;
		}
		int i = s->ngen > 1 ? (int)m->label : 0;
		if (i < 0 || i >= s->ngen) {
			gf_msg_release(m);
			return gf_fail(ctx, "weights of class %lld, expected 0..%d", (long long)m->label, s->ngen - 1);
		}
		rc = gf_weights_unpack(gf_generators_net(s->gs, i), m);
		s->step[i] = m->step;
		gf_msg_release(m);
		if (rc)
			return gf_fail(ctx, "G weights: %s", gf_errmsg());
		if (!all_at(s, s->step[i]))
			continue;
		pending = s->step[i] != s->last;
		if (s->step[i] % s->every == 0 && pending) {
			if ((rc = evaluate(s, ctx, s->step[i])))
				return rc;
			s->last = s->step[i];
			pending = 0;
		}
	}
	/* the final weights, when the run did not end on a multiple of every */
	if (s->gs && pending && all_at(s, s->step[0]))
		return evaluate(s, ctx, s->step[0]);
	return 0;
}

static void ev_destroy(void *self)
{
	evalst *s = self;
	gf_generators_close(s->gs);
	gf_evaluator_close(s->ev);
	gf_backend_close(s->be);
	free(s->images);
	free(s->labels);
	free(s->per_class);
	free(s);
}

static const gf_port_desc inputs[] = {
	{ "weights", "g_weights", GF_PORT_MULTI, "G's weights from g_step (one edge per G in per-class training)" },
};

static const gf_port_desc outputs[] = {
	{ "metrics", "metrics", GF_PORT_OPTIONAL, "fid, is, kid (precision, recall, fid_class<k>) per evaluation" },
};

static const gf_param_desc params[] = {
	{ "net", GF_PARAM_TABLE, NULL, "G's layer table (the one g_step trains)", NULL },
	{ "classifier", GF_PARAM_STR, "data/fashion-mnist/classifier.safetensors", "classifier checkpoint (pipelines/classifier_fashion.lua)", NULL },
	{ "features", GF_PARAM_STR, "classifier", "feature network: the classifier, or the FID Inception (weights)", "classifier|inception" },
	{ "weights", GF_PARAM_STR, "", "features = inception: the file of ganflow weights import (docs/eval.md)", NULL },
	{ "real", GF_PARAM_STR, "data/fashion-mnist/train", "real split the statistics come from (cached beside it)", NULL },
	{ "real_n", GF_PARAM_INT, "0", "real images used (0: the whole split)", "0.." },
	{ "n", GF_PARAM_INT, "5000", "generated images per evaluation (more than the feature dimension)", "1.." },
	{ "every", GF_PARAM_INT, "1000", "evaluate every this many steps (and at the end); g_step's publish_every must divide it", "1.." },
	{ "batch", GF_PARAM_INT, "250", "images per generator / classifier forward", "1.." },
	{ "kid", GF_PARAM_BOOL, "true", "compute KID", NULL },
	{ "pr", GF_PARAM_BOOL, "false", "compute precision and recall (k = 3)", NULL },
	{ "bn", GF_PARAM_STR, "eval", "batchnorm in G: eval (running statistics) or batch", "eval|batch" },
	{ "backend", GF_PARAM_STR, "", "cpu, cuda or auto (default: the run's backend)", NULL },
	{ "threads", GF_PARAM_INT, "0", "compute threads (0: the run's threads setting)", "0.." },
};

GF_STAGE_EXPORT const gf_stage_desc ganflow_stage = {
	.abi = GF_STAGE_ABI,
	.size = sizeof(gf_stage_desc),
	.name = "evaluator",
	.doc = "FID, IS, KID of G every N steps while training goes on (figures to metrics.jsonl and the progress line)",
	.inputs = inputs,
	.ninputs = 1,
	.outputs = outputs,
	.noutputs = 1,
	.params = params,
	.nparams = sizeof(params) / sizeof(params[0]),
	.create = ev_create,
	.run = ev_run,
	.destroy = ev_destroy,
};
