/* Classifier features for evaluation (gf_evaluator): the features and
 * class probabilities of generated images, and the cached statistics of a
 * real split they are compared with. See <ganflow/evaluate.h>; the scores
 * themselves are <ganflow/evalstats.h>'s (scores.c). Not to be confused
 * with the evaluator stage, which drives this during training. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ganflow/dataset.h>
#include <ganflow/decode.h>
#include <ganflow/ckpt.h>
#include <ganflow/err.h>
#include <ganflow/evaluate.h>
#include <ganflow/log.h>
#include <ganflow/safetensors.h>
#include <ganflow/train.h>

#include "folder.h"

/* Images per forward of the FID Inception (~150 MB of activations each). */
#define FID_BATCH 16

struct gf_evaluator {
	gf_evaluator_opts o;
	gf_backend *be;
	gf_net *clf;
	int c, h, w;           /* classifier input */
	int d, classes;
	gf_resize_mode resize; /* the transform of the classifier's training data */
	gf_feat_stats real;    /* with real.feats */
	gf_feat_stats *real_class; /* (classes) or NULL */
	int32_t *real_labels;  /* (real.n) */
	float kid_scale;       /* KID features are divided by it (see kid_rescale) */
	float *real_kid;       /* (real.n, d) real features / kid_scale */
	float *fake_kid;       /* (cap, d) scratch */
	int cached;
	uint64_t real_bad;     /* bad records of the real split, skipped */
	float *feats;          /* (cap, d) added images */
	float *probs;          /* (cap, classes) */
	int32_t *labels;       /* (cap) */
	int64_t n, cap;
	int labelled;
	double feat_sec;
	int fid;               /* the FID Inception (metadata input = fid): images of any
	                        * size in, resized to (c, h, w) by gf_fid_resize */
	int net_batch;         /* images per classifier forward */
	float *fidbuf;         /* (net_batch, c, h, w) resized images (fid) */
	float *native;         /* one decoded image at its own size (fid) */
	size_t native_cap;
	uint64_t clf_hash;     /* gf_hash64 of the classifier file */
};

/* A set of images: a ganflow dataset or a folder of image files. */
struct src {
	gf_dataset *ds;
	gf_folder *dir;
	uint64_t count;
};

static int src_open(struct src *s, const char *path)
{
	memset(s, 0, sizeof(*s));
	int rc = gf_folder_is(path) ? gf_folder_open(&s->dir, path) : gf_dataset_open(path, &s->ds);
	if (!rc)
		s->count = s->ds ? gf_dataset_metadata(s->ds)->count : gf_folder_count(s->dir);
	return rc;
}

static void src_close(struct src *s)
{
	if (s->ds)
		gf_dataset_close(s->ds);
	gf_folder_close(s->dir);
}

static int src_get(struct src *s, gf_decoder *dec, uint64_t pos, gf_record *r)
{
	/* records' payload checksums too, as the training data path checks them */
	return s->ds ? gf_dataset_get_checked(s->ds, pos, r) : gf_folder_get(s->dir, dec, pos, r);
}

gf_evaluator_opts gf_evaluator_defaults(void)
{
	gf_evaluator_opts o = { .batch = 256, .use_cache = 1, .per_class = 1, .max_bad_fraction = 0.01,
		                    .stats = gf_eval_opts_default() };
	return o;
}

/* ---- the classifier ---- */

static int load_classifier(gf_evaluator *e, const char *path)
{
	gf_ckpt *c;
	int rc = gf_ckpt_open(&c, path);
	if (rc)
		return rc;
	int i = gf_ckpt_find(c, "classifier");
	if (i < 0) {
		gf_ckpt_close(c);
		return gf_seterr(GF_ENOTFOUND, "%s is not a classifier checkpoint (no '<stage>.role = classifier' "
		                               "metadata; train one with pipelines/classifier_fashion.lua)", path);
	}
	const char *resize = gf_ckpt_part_meta(c, i, "resize"), *input = gf_ckpt_part_meta(c, i, "input");
	e->resize = resize && !strcmp(resize, "area") ? GF_RESIZE_AREA : GF_RESIZE_BILINEAR;
	e->fid = input && !strcmp(input, "fid");
	if (e->o.clean_resize && !e->fid) {
		gf_ckpt_close(c);
		return gf_seterr(GF_EPARAM, "%s: clean-fid's resize is for the FID Inception (features=inception), "
		                            "not a classifier with its own transform", path);
	}
	e->net_batch = e->fid && e->o.batch > FID_BATCH ? FID_BATCH : e->o.batch;
	rc = gf_ckpt_net(c, i, e->be, e->net_batch, &e->clf);
	gf_ckpt_close(c);
	if (rc)
		return gf_seterr(rc, "classifier checkpoint %s: %s", rc == GF_ENONFINITE ? "is not finite" :
		                 "does not match its backbone", gf_errmsg());
	gf_tensor in, out, feat;
	gf_net_shapes(e->clf, &in, &out);
	if (in.ndim != 4 || out.ndim != 2)
		return gf_seterr(GF_ESHAPE, "%s: the classifier must map images to class scores", path);
	e->c = (int)in.shape[1], e->h = (int)in.shape[2], e->w = (int)in.shape[3];
	e->classes = (int)out.shape[1];
	/* the feature dimension: one forward of a blank image */
	float *blank = calloc((size_t)e->c * e->h * e->w, sizeof(float));
	if (!blank)
		return -ENOMEM;
	int64_t shape[4] = { 1, e->c, e->h, e->w };
	gf_tensor x = gf_tensor_make(blank, GF_F32, 4, shape);
	rc = gf_net_forward(e->clf, &x, NULL, GF_EVAL);
	free(blank);
	if (rc || (rc = gf_net_node(e->clf, "features", &feat)))
		return gf_seterr(rc, "%s: the classifier has no layer named \"features\" (%s)", path, gf_errmsg());
	e->d = (int)(gf_tensor_numel(&feat) / feat.shape[0]);
	if (e->fid && !(e->fidbuf = malloc((size_t)e->net_batch * e->c * e->h * e->w * sizeof(float))))
		return -ENOMEM;
	return gf_hash64_file(path, GF_HASH64_INIT, &e->clf_hash);
}

/* Runs the classifier on n images (n <= net_batch) and stores features (n, d)
 * and probabilities (n, classes) at feats/probs. */
static int classify_chunk(gf_evaluator *e, const float *images, int n, float *feats, float *probs)
{
	int64_t shape[4] = { n, e->c, e->h, e->w };
	gf_tensor x = gf_tensor_make((void *)images, GF_F32, 4, shape), f, o;
	int rc = gf_net_forward(e->clf, &x, NULL, GF_EVAL);
	if (rc || (rc = gf_net_node(e->clf, "features", &f)) || (rc = gf_net_output(e->clf, &o)))
		return gf_seterr(rc, "classifier: %s", gf_errmsg());
	gf_backend *be = e->be;
	size_t nf = (size_t)n * (size_t)e->d, np = (size_t)n * (size_t)e->classes;
	if ((rc = be->ops->copy(be, feats, f.data, nf * sizeof(float), GF_COPY_D2H)) ||
	    (rc = be->ops->copy(be, probs, o.data, np * sizeof(float), GF_COPY_D2H)))
		return rc;
	/* softmax of the logits, in double */
	for (int i = 0; i < n; i++) {
		float *p = probs + (size_t)i * e->classes;
		double m = p[0], sum = 0;
		for (int k = 1; k < e->classes; k++)
			m = p[k] > m ? p[k] : m;
		for (int k = 0; k < e->classes; k++)
			sum += exp((double)p[k] - m);
		for (int k = 0; k < e->classes; k++)
			p[k] = (float)(exp((double)p[k] - m) / sum);
	}
	return 0;
}

/* classify_chunk over any n, net_batch images at a time. */
static int classify(gf_evaluator *e, const float *images, int n, float *feats, float *probs)
{
	size_t per = (size_t)e->c * e->h * e->w;
	for (int i = 0; i < n; i += e->net_batch) {
		int b = n - i < e->net_batch ? n - i : e->net_batch;
		int rc = classify_chunk(e, images + (size_t)i * per, b, feats + (size_t)i * e->d,
		                        probs + (size_t)i * e->classes);
		if (rc)
			return rc;
	}
	return 0;
}

/* The FID Inception's resize the run asked for (pytorch-fid's or
 * clean-fid's), [-1, 1] in and out. */
static int fid_resize(gf_evaluator *e, float *dst, const float *src, int n, int c, int h, int w)
{
	return (e->o.clean_resize ? gf_fid_resize_clean : gf_fid_resize)(dst, src, n, c, h, w, e->h, e->w, 1.0f, 0.0f);
}

/* fid: one record decoded at its own size and channels, then resized as
 * pytorch-fid does, into out (c, h, w). */
static int decode_fid(gf_evaluator *e, gf_decoder *dec, const gf_transform *t, const gf_record *r, float *out)
{
	gf_transform nt = *t;
	nt.height = nt.width = nt.channels = 0;
	nt.crop = GF_CROP_NONE;
	int c, h, w, rc = gf_transform_shape(&nt, &r->h, &c, &h, &w);
	if (rc)
		return rc;
	size_t need = (size_t)c * h * w;
	if (need > e->native_cap) {
		float *p = realloc(e->native, need * sizeof(float));
		if (!p)
			return -ENOMEM;
		e->native = p;
		e->native_cap = need;
	}
	if ((rc = gf_decode_record(dec, &nt, &r->h, r->payload, 0, e->native, need)))
		return rc;
	return fid_resize(e, out, e->native, 1, c, h, w);
}

/* ---- real statistics ---- */

/* ---- reading a dataset split ---- */

/* What read_split hands each batch of decoded images (b of them) to. */
typedef int (*batch_fn)(gf_evaluator *e, const float *img, const int32_t *labels, int b, void *ud);

/* Reads n records of s evenly spaced over it through t (fid: at their own
 * size, then decode_fid), in batches of e->o.batch (fid: net_batch) handed
 * to fn. A bad record (GF_ECORRUPT from the dataset or
 * the decoder) is skipped with a warning and counted in *bad, as the
 * training data path does (lmdb_reader, jpeg_decode): more than
 * max_bad_fraction of the records seen (judged after 100, and at the end)
 * fails naming the last one. *used receives the images handed on. */
static int read_split(gf_evaluator *e, struct src *s, const char *path, const gf_transform *t, int64_t n,
                      const char *bar, batch_fn fn, void *ud, int64_t *used, uint64_t *bad)
{
	uint64_t count = s->count;
	int bs = e->fid ? e->net_batch : e->o.batch;
	*used = 0;
	*bad = 0;
	gf_decoder *dec;
	int rc = gf_decoder_create(&dec);
	if (rc)
		return rc;
	size_t per = (size_t)t->channels * t->height * t->width;
	float *img = malloc((size_t)bs * per * sizeof(float));
	int32_t *lab = malloc((size_t)bs * sizeof(int32_t));
	if (!img || !lab) {
		rc = -ENOMEM;
		goto out;
	}
	double start = gf_now();
	char last[512] = "";
	int b = 0;
	for (int64_t i = 0; i < n; i++) {
		gf_record r;
		uint64_t pos = (uint64_t)(i * (int64_t)count / n); /* evenly spaced over the split */
		rc = src_get(s, dec, pos, &r);
		if (!rc && (rc = e->fid ? decode_fid(e, dec, t, &r, img + (size_t)b * per)
		                        : gf_decode_record(dec, t, &r.h, r.payload, 0, img + (size_t)b * per, per)))
			rc = gf_seterr(rc, "key %" PRIu64 ": %s", r.key, gf_errmsg());
		if (rc == GF_ECORRUPT) {
			snprintf(last, sizeof(last), "%s", gf_errmsg());
			if (++*bad <= 20)
				gf_log(GF_LOG_WARN, "%s: skipping bad record (%" PRIu64 " so far): %s", path, *bad, last);
			if (gf_bad_exceeded(*bad, (uint64_t)(i + 1), e->o.max_bad_fraction, 100, i + 1 == n)) {
				rc = gf_seterr(GF_ECORRUPT, "%s: %" PRIu64 " of %" PRId64 " records read are bad (more than "
				                            "max_bad_fraction = %g); last: %s",
				               path, *bad, i + 1, e->o.max_bad_fraction, last);
				goto out;
			}
		} else if (rc) {
			rc = gf_seterr(rc, "%s: record at %" PRIu64 ": %s", path, pos, gf_errmsg());
			goto out;
		} else {
			lab[b++] = r.h.label;
		}
		rc = 0;
		if (b > 0 && (b == bs || i + 1 == n)) {
			if ((rc = fn(e, img, lab, b, ud)))
				goto out;
			*used += b;
			b = 0;
			gf_progress_bar(bar, (uint64_t)(i + 1), (uint64_t)n, start);
		}
	}
out:
	free(img);
	free(lab);
	gf_decoder_destroy(dec);
	return rc;
}

/* The real split's batches: features, probabilities (discarded) and
 * labels, packed one after the other. */
typedef struct real_out {
	float *feats;    /* (n, d) */
	int32_t *labels; /* (n) */
	float *probs;    /* (batch, classes) scratch */
	int64_t at;
} real_out;

static int real_batch(gf_evaluator *e, const float *img, const int32_t *labels, int b, void *ud)
{
	real_out *o = ud;
	int rc = classify(e, img, b, o->feats + (size_t)o->at * e->d, o->probs);
	if (rc)
		return rc;
	memcpy(o->labels + o->at, labels, (size_t)b * sizeof(int32_t));
	o->at += b;
	return 0;
}

/* KID's cubic kernel k(x, y) = (x.y / d + 1)^3 assumes features whose
 * products x.y / d are of order 1, as Inception's pool3 features are. A
 * classifier's ReLU features can be far larger (norms of ~40 for 128
 * values), which makes the kernel's values, and KID's variance, explode.
 * KID is therefore computed on features divided by one fixed scale, the
 * real features' RMS value: s^2 = mean over real x of |x|^2 / d. The same
 * scale applies to both sides, so KID stays an unbiased MMD^2 estimate;
 * FID and precision/recall use the features as they are. */
static int kid_rescale(gf_evaluator *e)
{
	size_t nd = (size_t)e->real.n * (size_t)e->d;
	double ss = 0;
	for (size_t i = 0; i < nd; i++)
		ss += (double)e->real.feats[i] * e->real.feats[i];
	/* the FID Inception's pool3 features are what the kernel was made for:
	 * KID as torch-fidelity computes it, on the raw features */
	e->kid_scale = !e->fid && nd && ss > 0 ? (float)sqrt(ss / (double)nd) : 1.0f;
	e->real_kid = malloc(nd * sizeof(float));
	if (!e->real_kid)
		return -ENOMEM;
	for (size_t i = 0; i < nd; i++)
		e->real_kid[i] = e->real.feats[i] / e->kid_scale;
	return 0;
}

static int load_real(gf_evaluator *e)
{
	struct src ds;
	int rc = src_open(&ds, e->o.real);
	if (rc)
		return gf_seterr(rc, "real data: %s", gf_errmsg());
	uint64_t count = ds.count;
	int64_t n = e->o.real_n > 0 && (uint64_t)e->o.real_n < count ? e->o.real_n : (int64_t)count;
	char real[PATH_MAX], cache[PATH_MAX + 64], split[64];
	if (!realpath(e->o.real, real))
		snprintf(real, sizeof(real), "%s", e->o.real);
	/* key: the split (its path, size and how much of it), the input
	 * pipeline (size, resize; 2, 3 = the FID Inception's, pytorch-fid's or
	 * clean-fid's resize) and the classifier's
	 * (feature network's) bytes */
	uint64_t key = gf_hash64(real, strlen(real), GF_HASH64_INIT);
	int64_t id[5] = { (int64_t)count, n, e->h, e->w, e->fid ? 2 + !!e->o.clean_resize : e->resize };
	key = gf_hash64(id, sizeof(id), key);
	if ((rc = gf_hash64_file(e->o.classifier, key, &key)))
		goto out;
	snprintf(cache, sizeof(cache), "%s/.ganflow-fid-%016" PRIx64 ".stats", e->o.real, key);
	const char *base = strrchr(real, '/');
	snprintf(split, sizeof(split), "%.63s", base ? base + 1 : real);
	e->real_labels = malloc((size_t)n * sizeof(int32_t));
	if (!e->real_labels) {
		rc = -ENOMEM;
		goto out;
	}
	char what[128];
	snprintf(what, sizeof(what), "real split '%s' (real=%s)", split, e->o.real);
	if ((rc = gf_evalstats_check_n(n, e->d, what)))
		goto out; /* before any work, and before anything is cached */
	if (e->o.use_cache && gf_feat_stats_load(cache, key, split, &e->real) == 0 && e->real.feats &&
	    e->real.n == n && e->real.d == e->d) {
		e->cached = 1;
		for (int64_t i = 0; i < n; i++) {
			gf_record r;
			if (ds.ds && (rc = gf_dataset_get(ds.ds, (uint64_t)(i * (int64_t)count / n), &r)))
				goto out;
			e->real_labels[i] = ds.ds ? r.h.label : -1;
		}
	} else {
		gf_feat_stats_free(&e->real);
		float *feats = malloc((size_t)n * (size_t)e->d * sizeof(float));
		if (!feats) {
			rc = -ENOMEM;
			goto out;
		}
		float *probs = malloc((size_t)e->o.batch * (size_t)e->classes * sizeof(float));
		real_out ro = { feats, e->real_labels, probs, 0 };
		gf_transform t = { .height = e->h, .width = e->w, .channels = e->c, .resize = e->resize,
		                   .crop = GF_CROP_CENTER };
		int64_t used = 0;
		uint64_t bad = 0;
		rc = probs ? read_split(e, &ds, e->o.real, &t, n, "real features", real_batch, &ro, &used, &bad) : -ENOMEM;
		free(probs);
		if (!rc && bad)
			rc = gf_evalstats_check_n(used, e->d, what);
		if (rc || (rc = gf_feat_stats_compute(feats, used, e->d, &e->real))) {
			free(feats);
			goto out;
		}
		e->real.feats = feats;
		e->real.key = key;
		e->real_bad = bad;
		n = used;
		snprintf(e->real.split, sizeof(e->real.split), "%s", split);
		/* a split read with bad records skipped is not cached: its key
		 * says which records were meant, not which were used */
		if (bad)
			gf_log(GF_LOG_WARN, "%s: %" PRIu64 " bad records skipped; its statistics are not cached", e->o.real, bad);
		else if (e->o.use_cache && gf_feat_stats_save(cache, &e->real, feats))
			gf_log(GF_LOG_WARN, "cannot cache the real statistics: %s", gf_errmsg());
	}
	/* per-class FID needs the classifier's classes to be the dataset's:
	 * not the Inception's 1008 (and 1008 covariances of 2048^2 would not fit) */
	if (e->o.per_class && e->classes > 0 && !e->fid) {
		e->real_class = calloc((size_t)e->classes, sizeof(*e->real_class));
		if (!e->real_class) {
			rc = -ENOMEM;
			goto out;
		}
		for (int k = 0; k < e->classes; k++)
			gf_feat_stats_compute_label(e->real.feats, e->real_labels, n, e->d, k, &e->real_class[k]);
	}
	rc = kid_rescale(e);
out:
	src_close(&ds);
	return rc;
}

/* ---- the public face ---- */

int gf_evaluator_open(gf_evaluator **out, const gf_evaluator_opts *o)
{
	*out = NULL;
	if (!o || !o->classifier)
		return gf_seterr(GF_EPARAM, "evaluator: a classifier checkpoint is needed");
	gf_evaluator *e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->o = *o;
	if (e->o.batch < 1)
		e->o.batch = 256;
	gf_backend_opts bo = { .threads = o->threads };
	int rc = gf_backend_open("cpu", &bo, &e->be);
	if (!rc)
		rc = load_classifier(e, o->classifier);
	/* the other side's count too, before any feature of the real split */
	if (!rc && o->other_what)
		rc = gf_evalstats_check_n(o->other_n, e->d, o->other_what);
	if (!rc && o->real)
		rc = load_real(e);
	if (rc) {
		gf_evaluator_close(e);
		return rc;
	}
	*out = e;
	return 0;
}

int gf_evaluator_count(const char *path, uint64_t *count)
{
	struct src s;
	int rc = src_open(&s, path);
	*count = rc ? 0 : s.count;
	if (!rc)
		src_close(&s);
	return rc;
}

void gf_evaluator_close(gf_evaluator *e)
{
	if (!e)
		return;
	gf_feat_stats_free(&e->real);
	for (int k = 0; e->real_class && k < e->classes; k++)
		gf_feat_stats_free(&e->real_class[k]);
	free(e->real_class);
	free(e->real_labels);
	free(e->real_kid);
	free(e->fake_kid);
	free(e->feats);
	free(e->probs);
	free(e->labels);
	free(e->fidbuf);
	free(e->native);
	gf_net_destroy(e->clf);
	gf_backend_close(e->be);
	free(e);
}

int gf_evaluator_dim(const gf_evaluator *e) { return e->d; }
int gf_evaluator_classes(const gf_evaluator *e) { return e->classes; }
const gf_feat_stats *gf_evaluator_real(const gf_evaluator *e) { return &e->real; }
int gf_evaluator_real_cached(const gf_evaluator *e) { return e->cached; }
double gf_evaluator_feature_seconds(const gf_evaluator *e) { return e->feat_sec; }

int gf_evaluator_fid(const gf_evaluator *e) { return e->fid; }

const float *gf_evaluator_features(const gf_evaluator *e, int64_t *n)
{
	*n = e->n;
	return e->feats;
}
uint64_t gf_evaluator_features_hash(const gf_evaluator *e) { return e->clf_hash; }

void gf_evaluator_shape(const gf_evaluator *e, int *c, int *h, int *w)
{
	*c = e->c, *h = e->h, *w = e->w;
}

void gf_evaluator_reset(gf_evaluator *e)
{
	e->n = 0;
	e->labelled = 1;
}

static int reserve(gf_evaluator *e, int64_t n)
{
	if (e->n + n <= e->cap)
		return 0;
	int64_t cap = e->cap ? e->cap : 1024;
	while (cap < e->n + n)
		cap *= 2;
	float *f = realloc(e->feats, (size_t)cap * (size_t)e->d * sizeof(float));
	if (f)
		e->feats = f;
	float *p = realloc(e->probs, (size_t)cap * (size_t)e->classes * sizeof(float));
	if (p)
		e->probs = p;
	int32_t *l = realloc(e->labels, (size_t)cap * sizeof(int32_t));
	if (l)
		e->labels = l;
	float *k = realloc(e->fake_kid, (size_t)cap * (size_t)e->d * sizeof(float));
	if (k)
		e->fake_kid = k;
	if (!f || !p || !l || !k)
		return -ENOMEM;
	e->cap = cap;
	return 0;
}

/* Features and probabilities of n images already at the classifier's shape. */
static int add_ready(gf_evaluator *e, const float *images, const int32_t *labels, int64_t n)
{
	if (e->n == 0)
		e->labelled = 1;
	int rc = reserve(e, n);
	if (rc)
		return rc;
	double t0 = gf_now();
	size_t per = (size_t)e->c * e->h * e->w;
	for (int64_t i = 0; i < n; i += e->o.batch) {
		int b = (int)(n - i < e->o.batch ? n - i : e->o.batch);
		rc = classify(e, images + (size_t)i * per, b, e->feats + (size_t)(e->n + i) * e->d,
		              e->probs + (size_t)(e->n + i) * e->classes);
		if (rc)
			return rc;
	}
	for (int64_t i = 0; i < n; i++)
		e->labels[e->n + i] = labels ? labels[i] : -1;
	e->labelled &= labels != NULL;
	e->n += n;
	e->feat_sec += gf_now() - t0;
	return 0;
}

int gf_evaluator_add(gf_evaluator *e, const float *images, const int32_t *labels, int64_t n, int c, int h, int w)
{
	if (e->fid) {
		/* any size: pytorch-fid's resize, net_batch images at a time */
		if (c != 1 && c != 3)
			return gf_seterr(GF_ESHAPE, "images of %d channels cannot be evaluated with the FID Inception (1 or 3)", c);
		size_t per = (size_t)c * h * w;
		for (int64_t i = 0; i < n; i += e->net_batch) {
			int b = (int)(n - i < e->net_batch ? n - i : e->net_batch);
			int rc = fid_resize(e, e->fidbuf, images + (size_t)i * per, b, c, h, w);
			if (rc || (rc = add_ready(e, e->fidbuf, labels ? labels + i : NULL, b)))
				return rc;
		}
		return 0;
	}
	if (c != e->c || h != e->h || w != e->w)
		return gf_seterr(GF_ESHAPE, "images of %dx%dx%d (channels x height x width) cannot be evaluated: the "
		                            "classifier takes %dx%dx%d (train a classifier at the generator's size)",
		                 c, h, w, e->c, e->h, e->w);
	return add_ready(e, images, labels, n);
}

/* The images of a dataset's batches go where generated ones go. */
static int add_batch(gf_evaluator *e, const float *img, const int32_t *labels, int b, void *ud)
{
	(void)ud;
	return add_ready(e, img, labels, b);
}

int gf_evaluator_add_dataset(gf_evaluator *e, const char *path, int64_t n, int64_t *added, uint64_t *bad)
{
	*added = 0;
	*bad = 0;
	struct src ds;
	int rc = src_open(&ds, path);
	if (rc)
		return rc;
	uint64_t count = ds.count;
	if (n <= 0 || (uint64_t)n > count)
		n = (int64_t)count;
	gf_transform t = { .height = e->h, .width = e->w, .channels = e->c, .resize = GF_RESIZE_BILINEAR };
	rc = n > 0 ? read_split(e, &ds, path, &t, n, "features", add_batch, NULL, added, bad)
	           : gf_seterr(GF_EPARAM, "%s holds no records", path);
	src_close(&ds);
	return rc;
}

uint64_t gf_evaluator_real_bad(const gf_evaluator *e)
{
	return e->real_bad;
}

int gf_evaluator_compute(gf_evaluator *e, gf_eval_result *out, double *per_class)
{
	if (!e->o.real)
		return gf_seterr(GF_EPARAM, "evaluator: opened without real data, it has no statistics to compare with");
	int prev = e->o.stats_threads > 0 ? gf_evalstats_threads(e->o.stats_threads) : 0;
	/* FID and IS here; KID and precision/recall below, on their own terms */
	gf_eval_opts fo = e->o.stats;
	fo.kid_subsets = 0;
	fo.pr_k = 0;
	int rc = gf_eval_metrics(&e->real, e->feats, e->n, e->d, e->probs, e->classes, &fo, out);
	if (rc == 0 && e->o.stats.kid_subsets > 0) {
		double t0 = gf_now();
		size_t nd = (size_t)e->n * (size_t)e->d;
		for (size_t i = 0; i < nd; i++)
			e->fake_kid[i] = e->feats[i] / e->kid_scale;
		int64_t m = e->o.stats.kid_subset_size;
		m = m < e->n ? m : e->n;
		m = m < e->real.n ? m : e->real.n;
		rc = gf_kid(e->fake_kid, e->n, e->real_kid, e->real.n, e->d, e->o.stats.kid_subsets, (int)m,
		            e->o.stats.kid_seed, &out->kid_mean, &out->kid_std);
		out->sec_kid = gf_now() - t0;
	}
	if (rc == 0 && e->o.stats.pr_k > 0) {
		/* against as many real images as generated ones (evenly spaced):
		 * the k-NN balls of Kynkaanniemi et al. are sized for equal sets */
		double t0 = gf_now();
		int64_t nr = e->n < e->real.n ? e->n : e->real.n;
		float *sub = malloc((size_t)nr * (size_t)e->d * sizeof(float));
		if (!sub)
			rc = -ENOMEM;
		for (int64_t i = 0; sub && i < nr; i++)
			memcpy(sub + (size_t)i * e->d, e->real.feats + (size_t)(i * e->real.n / nr) * e->d,
			       (size_t)e->d * sizeof(float));
		if (sub)
			rc = gf_precision_recall(sub, nr, e->feats, e->n, e->d, e->o.stats.pr_k, &out->precision,
			                         &out->recall);
		free(sub);
		out->sec_pr = gf_now() - t0;
	}
	for (int k = 0; rc == 0 && per_class && k < e->classes; k++) {
		per_class[k] = NAN;
		int64_t m = 0;
		for (int64_t i = 0; i < e->n; i++)
			m += e->labels[i] == k;
		if (!e->labelled || !e->real_class || m <= e->d || e->real_class[k].n <= e->d)
			continue;
		gf_feat_stats fk = { 0 };
		if (gf_feat_stats_compute_label(e->feats, e->labels, e->n, e->d, k, &fk) == 0)
			gf_fid(&e->real_class[k], &fk, &per_class[k]);
		gf_feat_stats_free(&fk);
	}
	if (prev > 0)
		gf_evalstats_threads(prev);
	return rc;
}
