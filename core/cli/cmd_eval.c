/* `ganflow eval CHECKPOINT|DATASET|DIR [REAL] [n=10000] [classifier=PATH]
 *  [features=classifier|inception] [weights=PATH] [resize=bilinear|clean] [real=PATH]
 *  [real_n=0] [batch=500] [seed=1] [kid=true] [pr=true] [json=PATH]
 *  [threads=0] [cache=true] [max_bad_fraction=0.01] [ema=0|1] [per_class=true]`
 *
 * REAL (the second positional argument) is real=; DIR is a folder of PNG /
 * JPEG images (`ganflow eval DIR DIR` as `python -m pytorch_fid DIR DIR`).
 * features=inception weights=FILE measures with the FID Inception
 * (FILE from `ganflow weights import`, docs/eval.md) instead of the
 * dataset's classifier; resize=clean feeds it through clean-fid's resize
 * (PIL bicubic, antialiased) instead of pytorch-fid's bilinear one.
 *
 * FID, IS, KID, precision/recall (and per-class FID for conditional and
 * per-class models) of n images from the generators of a training
 * checkpoint, or of the images of a dataset (e.g. the test split: FID of
 * real data against real data), measured with the classifier's features
 * against the real split's statistics (cached beside the dataset). Bad
 * records of a dataset are skipped and counted as in training, up to
 * max_bad_fraction. A checkpoint of a g_step with `ema` is measured on G's
 * moving average unless ema=0 (ema=1 requires it), as `ganflow sample`. A
 * conditional G generates the classes its training data held (as the
 * checkpoint records them), and per-class FID needs real images of each:
 * a real split without one is refused before any work (per_class=false
 * skips per-class FID). */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <ganflow/dataset.h>
#include <ganflow/decode.h>
#include <ganflow/err.h>
#include <ganflow/evaluate.h>
#include <ganflow/log.h>
#include <ganflow/train.h>

#include "cmd.h"

#define DEFAULT_CLASSIFIER "data/fashion-mnist/classifier.safetensors"
#define DEFAULT_REAL "data/fashion-mnist/train"

static int usage(void)
{
	fprintf(stderr,
	        "usage: ganflow eval CHECKPOINT|DATASET|DIR [REAL] [n=10000] [classifier=" DEFAULT_CLASSIFIER "]\n"
	        "                    [features=classifier|inception weights=INCEPTION.safetensors resize=bilinear|clean]\n"
	        "                    [real=" DEFAULT_REAL "] [real_n=0] [batch=500] [seed=1] [kid=true]\n"
	        "                    [pr=true] [json=PATH] [threads=0] [cache=true] [max_bad_fraction=0.01]\n"
	        "                    [ema=0|1] [per_class=true]\n"
	        "  FID, IS, KID, precision/recall of n generated (or dataset) images against the real split;\n"
	        "  a checkpoint with G's moving average is measured on it unless ema=0\n");
	return 2;
}

/* 1 when the directory holds a .png, .jpg or .jpeg file, in it or in its
 * subfolders (as deep as the folder reader looks: core/eval/folder.c). */
static int has_images(const char *path, int depth)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int found = 0;
	while (d && !found && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		const char *dot = strrchr(e->d_name, '.');
		char sub[4200];
		struct stat st;
		if (dot && (!strcasecmp(dot, ".png") || !strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg")))
			found = 1;
		else if (depth < 8 && snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name) < (int)sizeof(sub) &&
		         !stat(sub, &st) && S_ISDIR(st.st_mode))
			found = has_images(sub, depth + 1);
	}
	if (d)
		closedir(d);
	return found;
}

/* What a path to evaluate holds, decided by its contents: a dataset (data.mdb
 * or shard-00000) or a folder of images anywhere below it (what `ganflow
 * sample out=DIR/` writes: DIR/<class>/NNNNNN.png) is read as images (1); a
 * checkpoint file, a run directory or a checkpoints folder (checkpoints/ or
 * latest) as a checkpoint (0); a directory holding none of these is -1. */
static int is_dataset(const char *path)
{
	struct stat st;
	char p[4200];
	if (stat(path, &st) || !S_ISDIR(st.st_mode))
		return 0;
	snprintf(p, sizeof(p), "%s/data.mdb", path);
	if (!stat(p, &st))
		return 1;
	snprintf(p, sizeof(p), "%s/shard-00000", path);
	if (!stat(p, &st))
		return 1;
	snprintf(p, sizeof(p), "%s/checkpoints", path);
	int run = !stat(p, &st);
	snprintf(p, sizeof(p), "%s/latest", path);
	run |= !stat(p, &st);
	return run ? 0 : has_images(path, 0) ? 1 : -1;
}

/* Generates n images from the checkpoint's generators gs (opened from path)
 * into e: conditional and per-class ones balanced over the classes they
 * draw (a conditional G: those its training data held). */
static int add_generated(gf_evaluator *e, gf_generators *gs, const char *path, int64_t n, int batch, uint64_t seed,
                         double *gen_sec)
{
	int rc = 0;
	int c, h, w, classes = gf_generators_classes(gs);
	gf_generators_shape(gs, &c, &h, &w);
	int ec, eh, ew;
	gf_evaluator_shape(e, &ec, &eh, &ew);
	if (c != ec || h != eh || w != ew)
		return gf_seterr(GF_ESHAPE, "%s makes %dx%dx%d images, the classifier takes %dx%dx%d: train a classifier at "
		                            "the generator's size",
		                 path, c, h, w, ec, eh, ew);
	int *use = malloc((size_t)(classes ? classes : 1) * sizeof(int)), nuse = 0;
	if (!use)
		return -ENOMEM;
	for (int k = 0; k < classes; k++)
		if (gf_generators_seen(gs, k))
			use[nuse++] = k;
	float *img = malloc((size_t)batch * (size_t)(c * h * w) * sizeof(float));
	int32_t *lab = malloc((size_t)batch * sizeof(int32_t));
	if (!img || !lab) {
		free(img);
		free(lab);
		rc = -ENOMEM;
		goto out;
	}
	gf_rng r;
	gf_rng_init(&r, seed, 0x6576616cull);
	double start = gf_now();
	for (int64_t i = 0; i < n && !rc; i += batch) {
		int b = (int)(n - i < batch ? n - i : batch);
		for (int j = 0; j < b; j++)
			lab[j] = classes ? (int32_t)use[(i + j) % nuse] : -1; /* balanced classes */
		double t0 = gf_now();
		rc = gf_generators_sample(gs, &r, classes ? lab : NULL, b, GF_EVAL, img);
		*gen_sec += gf_now() - t0;
		if (!rc)
			rc = gf_evaluator_add(e, img, classes ? lab : NULL, b, c, h, w);
		gf_progress_bar("generate + features", (uint64_t)(i + b), (uint64_t)n, start);
	}
	free(img);
	free(lab);
out:
	free(use);
	return rc;
}

/* Per-class FID needs real images of every class generated: 0, or a
 * message (and 1) naming the first class the real split holds none of. */
static int check_real_classes(gf_generators *gs, const char *real)
{
	int classes = gf_generators_classes(gs);
	gf_dataset *ds;
	if (!classes || !is_dataset(real) || gf_dataset_open(real, &ds))
		return 0; /* unconditional, an image folder (no labels), or reported when read */
	const gf_dataset_meta *m = gf_dataset_metadata(ds);
	int bad = -1;
	for (int k = 0; k < classes && bad < 0 && m->nclasses; k++)
		if (gf_generators_seen(gs, k) && ((uint32_t)k >= m->nclasses || m->class_count[k] == 0))
			bad = k;
	if (bad >= 0) {
		unsigned char *has = calloc(m->nclasses, 1);
		char list[256] = "?";
		if (has) {
			for (uint32_t c = 0; c < m->nclasses; c++)
				has[c] = m->class_count[c] > 0;
			gf_data_classes_format(has, (int)m->nclasses, list, sizeof(list));
		}
		free(has);
		fprintf(stderr, "ganflow eval: per-class FID of class %d: the real split '%s' holds no image of it (it holds "
		                "classes %s): give a real split with every class the generator draws, or per_class=false\n",
		        bad, real, list);
	}
	gf_dataset_close(ds);
	return bad >= 0;
}

static int parse_bool(const char *v, int *out)
{
	if (!strcmp(v, "true") || !strcmp(v, "1"))
		*out = 1;
	else if (!strcmp(v, "false") || !strcmp(v, "0"))
		*out = 0;
	else
		return -1;
	return 0;
}

int gf_cmd_eval(int argc, char **argv)
{
	if (argc < 2 || argv[1][0] == '-')
		return usage();
	const char *what = argv[1], *classifier = DEFAULT_CLASSIFIER, *real = DEFAULT_REAL, *json = NULL;
	const char *features = "classifier", *weights = NULL, *resize = "bilinear";
	int first = 2;
	if (argc > 2 && !strchr(argv[2], '='))
		real = argv[first++];   /* ganflow eval A B */
	long long n = 10000, real_n = 0, batch = 500, seed = 1, threads = 0, ema = -1;
	double max_bad = 0.01;
	int kid = 1, pr = 1, cache = 1, per_class = 1;
	for (int i = first; i < argc; i++) {
		char *v = strchr(argv[i], '=');
		if (!v) {
			fprintf(stderr, "ganflow eval: expected key=value, got '%s'\n", argv[i]);
			return usage();
		}
		*v++ = '\0';
		const char *k = argv[i];
		char *end = NULL;
		int bad = 0;
		if (!strcmp(k, "classifier"))
			classifier = v;
		else if (!strcmp(k, "features"))
			features = v;
		else if (!strcmp(k, "weights"))
			weights = v;
		else if (!strcmp(k, "resize")) {
			resize = v;
			bad = strcmp(v, "bilinear") && strcmp(v, "clean");
		}
		else if (!strcmp(k, "real"))
			real = v;
		else if (!strcmp(k, "json"))
			json = v;
		else if (!strcmp(k, "kid"))
			bad = parse_bool(v, &kid);
		else if (!strcmp(k, "pr"))
			bad = parse_bool(v, &pr);
		else if (!strcmp(k, "cache"))
			bad = parse_bool(v, &cache);
		else if (!strcmp(k, "per_class"))
			bad = parse_bool(v, &per_class);
		else if (!strcmp(k, "n"))
			n = strtoll(v, &end, 10);
		else if (!strcmp(k, "real_n"))
			real_n = strtoll(v, &end, 10);
		else if (!strcmp(k, "batch"))
			batch = strtoll(v, &end, 10);
		else if (!strcmp(k, "seed"))
			seed = strtoll(v, &end, 10);
		else if (!strcmp(k, "threads"))
			threads = strtoll(v, &end, 10);
		else if (!strcmp(k, "ema")) {
			ema = strtoll(v, &end, 10);
			bad = ema != 0 && ema != 1;
		} else if (!strcmp(k, "max_bad_fraction")) {
			max_bad = strtod(v, &end);
			bad = !(max_bad >= 0 && max_bad <= 1);
		} else {
			fprintf(stderr, "ganflow eval: unknown key '%s' (n, classifier, features, weights, resize, real, real_n, "
			                "batch, seed, kid, pr, json, threads, cache, max_bad_fraction, ema, per_class)\n", k);
			return 2;
		}
		if (bad || (end && (*end || end == v))) {
			fprintf(stderr, "ganflow eval: bad value %s=%s\n", k, v);
			return 2;
		}
	}
	int images = is_dataset(what);   /* a dataset or image folder, not a checkpoint */
	if (images < 0) {
		fprintf(stderr, "ganflow eval: '%s' is a directory without checkpoints/latest, a ganflow dataset or .png/.jpg "
		                "images in it or its subfolders: give a checkpoint, a run directory, a dataset or an image "
		                "folder\n", what);
		return 1;
	}
	if (ema != -1 && images) {
		fprintf(stderr, "ganflow eval: ema=%lld: %s is images, not a checkpoint with a generator\n", ema, what);
		return 2;
	}
	if (n < 0 || batch < 1 || batch > 65536) {
		fprintf(stderr, "ganflow eval: need n >= 0 and 1 <= batch <= 65536\n");
		return 2;
	}
	if (!strcmp(features, "inception")) {
		if (!weights) {
			fprintf(stderr, "ganflow eval: features=inception needs weights=FILE: convert pytorch-fid's "
			                "pt_inception-2015-12-05-6726825d.pth with\n"
			                "  ganflow weights import pt_inception-2015-12-05-6726825d.pth inception.safetensors\n"
			                "(docs/eval.md; ganflow never downloads weights)\n");
			return 2;
		}
		classifier = weights;
	} else if (strcmp(features, "classifier") || weights) {
		fprintf(stderr, "ganflow eval: features must be classifier or inception (weights=FILE goes with "
		                "features=inception)\n");
		return 2;
	} else if (!strcmp(resize, "clean")) {
		fprintf(stderr, "ganflow eval: resize=clean goes with features=inception (the classifier has its own "
		                "transform)\n");
		return 2;
	}
	/* before the real statistics: the generators (a checkpoint that cannot be
	 * read fails at once), and the classes they draw against the real split's */
	gf_backend *gbe = NULL;
	gf_generators *gs = NULL;
	gf_generators_opts go = { .ema = (int)ema };
	if (!images && (gf_backend_open("cpu", NULL, &gbe) || gf_generators_open_with(&gs, what, gbe, (int)batch, &go))) {
		fprintf(stderr, "ganflow eval: %s\n", gf_errmsg());
		gf_backend_close(gbe);
		return 1;
	}
	if (gs && gf_generators_ema(gs))
		fprintf(stderr, "ganflow eval: %s: generating with G's moving-average weights (g_step ema)\n", what);
	if (gs && gf_generators_seen_text(gs)) {
		int classes = gf_generators_classes(gs), nseen = 0;
		for (int k = 0; k < classes; k++)
			nseen += gf_generators_seen(gs, k);
		if (nseen < classes)
			fprintf(stderr, "ganflow eval: %s: G is conditional on %d classes, its training data held images of %s "
			                "only: generating those\n", what, classes, gf_generators_seen_text(gs));
	}
	int status = 1;
	gf_evaluator *e = NULL;
	double *per = NULL;
	if (gs && per_class && strcmp(features, "inception") && check_real_classes(gs, real))
		goto done;
	struct stat st;
	if (stat(classifier, &st)) {
		fprintf(stderr, "ganflow eval: no classifier at %s (%s): train one with\n"
		                "  ./build/ganflow run pipelines/classifier_fashion.lua   (writes %s)\n"
		                "or give classifier=PATH\n", classifier, strerror(errno), DEFAULT_CLASSIFIER);
		goto done;
	}

	gf_evaluator_opts o = gf_evaluator_defaults();
	o.classifier = classifier;
	o.real = real;
	o.real_n = real_n;
	o.threads = (int)threads;
	o.stats_threads = threads > 0 ? (int)threads : 0;
	o.use_cache = cache;
	o.max_bad_fraction = max_bad;
	o.batch = (int)batch;
	o.stats.kid_subsets = kid ? o.stats.kid_subsets : 0;
	o.stats.pr_k = pr ? o.stats.pr_k : 0;
	o.clean_resize = !strcmp(resize, "clean");
	o.per_class = per_class;
	/* both sides' counts before either side's features (minutes with the
	 * Inception); n=0 of a generator would reach the statistics empty */
	uint64_t have = 0;
	if (images && gf_evaluator_count(what, &have)) {
		fprintf(stderr, "ganflow eval: %s\n", gf_errmsg());
		goto done;
	}
	o.other_n = images ? (n <= 0 || (uint64_t)n > have ? (int64_t)have : n) : n;
	o.other_what = images ? what : "generated images";
	double t0 = gf_now();
	if (gf_evaluator_open(&e, &o)) {
		fprintf(stderr, "ganflow eval: %s\n", gf_errmsg());
		goto done;
	}
	if (!strcmp(features, "inception") && !gf_evaluator_fid(e)) {
		fprintf(stderr, "ganflow eval: %s is not an FID Inception file (write one with ganflow weights import)\n",
		        weights);
		goto done;
	}
	const char *net_name = gf_evaluator_fid(e) ? "inception-pool3" : "classifier";
	const char *resizer = !gf_evaluator_fid(e) ? "classifier transform"
	                      : o.clean_resize   ? "clean-299 (clean-fid: PIL bicubic, antialiased, clipped)"
	                                         : "bilinear-299 (pytorch-fid: F.interpolate, align_corners=False)";
	char net_hash[17];
	snprintf(net_hash, sizeof(net_hash), "%016llx", (unsigned long long)gf_evaluator_features_hash(e));
	double real_sec = gf_now() - t0, gen_sec = 0;
	int64_t count = n;
	uint64_t bad = 0;
	int rc = images ? gf_evaluator_add_dataset(e, what, n, &count, &bad)
	                : add_generated(e, gs, what, n, (int)batch, (uint64_t)seed, &gen_sec);
	if (rc) {
		fprintf(stderr, "ganflow eval: %s\n", gf_errmsg());
		goto done;
	}
	int classes = gf_evaluator_classes(e);
	per = calloc((size_t)(classes ? classes : 1), sizeof(double));
	gf_eval_result res;
	if (!per || gf_evaluator_compute(e, &res, per)) {
		fprintf(stderr, "ganflow eval: %s\n", per ? gf_errmsg() : "out of memory");
		goto done;
	}
	const gf_feat_stats *rs = gf_evaluator_real(e);
	double stats_sec = res.sec_stats + res.sec_fid + res.sec_is + res.sec_kid;
	printf("%s: %lld images vs real split '%s' (%lld images, %s), classifier %s, %d features\n", what,
	       (long long)res.n, real, (long long)rs->n, gf_evaluator_real_cached(e) ? "cached statistics" : "statistics computed",
	       classifier, gf_evaluator_dim(e));
	printf("  features   %s, %s (hash %s), resize %s\n", net_name, classifier, net_hash, resizer);
	if (bad || gf_evaluator_real_bad(e))
		printf("  bad records skipped: %llu of %s, %llu of the real split\n", (unsigned long long)bad, what,
		       (unsigned long long)gf_evaluator_real_bad(e));
	printf("  FID        %.4f\n", res.fid);
	printf("  IS         %.4f +- %.4f\n", res.is_mean, res.is_std);
	if (!isnan(res.kid_mean))
		printf("  KID        %.6f +- %.6f\n", res.kid_mean, res.kid_std);
	if (!isnan(res.precision))
		printf("  precision  %.4f   recall %.4f\n", res.precision, res.recall);
	int any = 0;
	for (int k = 0; k < classes; k++)
		any |= !isnan(per[k]);
	if (any) {
		printf("  per-class FID:");
		for (int k = 0; k < classes; k++)
			printf(" %d:%.2f", k, per[k]);
		printf("\n");
	}
	printf("  seconds: real statistics %.2f, generation %.2f, features %.2f, statistics %.2f (FID+IS+KID), "
	       "precision/recall %.2f\n",
	       real_sec, gen_sec, gf_evaluator_feature_seconds(e), stats_sec, res.sec_pr);
	status = 0;
	if (json) {
		FILE *f = fopen(json, "w");
		if (!f) {
			fprintf(stderr, "ganflow eval: %s: %s\n", json, strerror(errno));
			status = 1;
		} else {
			fprintf(f, "{\"features\":\"%s\",\"features_file\":\"%s\",\"features_hash\":\"%s\",\"resize\":\"%s\",",
			        net_name, classifier, net_hash, gf_evaluator_fid(e) ? "bilinear-299" : "classifier");
			fprintf(f, "\"source\":\"%s\",\"n\":%lld,\"real\":\"%s\",\"n_real\":%lld,\"fid\":%.9g,\"is\":%.9g,"
			           "\"is_std\":%.9g,\"kid\":%.9g,\"kid_std\":%.9g,\"precision\":%.9g,\"recall\":%.9g,"
			           "\"sec_generation\":%.4f,\"sec_features\":%.4f,\"sec_statistics\":%.4f,\"fid_class\":[",
			        what, (long long)res.n, real, (long long)rs->n, res.fid, res.is_mean, res.is_std,
			        isnan(res.kid_mean) ? -1 : res.kid_mean, isnan(res.kid_std) ? -1 : res.kid_std,
			        isnan(res.precision) ? -1 : res.precision, isnan(res.recall) ? -1 : res.recall, gen_sec,
			        gf_evaluator_feature_seconds(e), stats_sec);
			for (int k = 0; k < classes; k++)
				fprintf(f, "%s%.9g", k ? "," : "", isnan(per[k]) ? -1 : per[k]);
			fprintf(f, "]}\n");
			if (fclose(f))
				status = 1;
		}
	}
done:
	free(per);
	gf_evaluator_close(e);
	gf_generators_close(gs);
	gf_backend_close(gbe);
	return status;
}
