/* `ganflow dataset`: convert, inspect, verify and export datasets.
 *
 *   ganflow dataset fashion-mnist [out=data/fashion-mnist] [force=1]
 *   ganflow dataset idx IMAGES LABELS OUT [options]
 *   ganflow dataset folder DIR OUT [options]
 *   ganflow dataset stylegan SRC OUT [classes=N] [options]
 *   ganflow dataset paired SRC OUT [direction=AtoB|BtoA] [options]
 *   ganflow dataset edges2fashion [out=data/edges2fashion] [force=1]
 *   ganflow dataset synth OUT count=N [width= height= quality= classes= seed= order=shuffled|class
 *                          encoding=jpeg|raw]
 *   ganflow dataset info PATH
 *   ganflow dataset verify PATH [workers=N]
 *   ganflow dataset export PATH DIR [limit=N] [format=auto|png|jpg]
 *
 * Arguments are positional or key=value, like the rest of ganflow; an
 * unknown key is an error. Exit status: 0 success, 1 failure (the message
 * names the file or key at fault), 2 usage.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ganflow/dataset.h>
#include <ganflow/decode.h>
#include <ganflow/err.h>
#include <ganflow/log.h>

#include "../core/cli/cmd.h"
#include "convert.h"

#define FMNIST_SRC "/usr/share/datasets/fashion-mnist"
#define FMNIST_PKG "dataset-fashion-mnist"

static const char *const fmnist_classes[10] = { "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot" };

/* ---- arguments ---- */

#define MAX_ARGS 32

typedef struct args {
	const char *sub;
	int npos;
	const char *pos[MAX_ARGS];
	int nkv;
	const char *key[MAX_ARGS];
	const char *val[MAX_ARGS];
	int used[MAX_ARGS];
} args;

static int parse_args(args *a, const char *sub, int argc, char **argv)
{
	memset(a, 0, sizeof(*a));
	a->sub = sub;
	for (int i = 0; i < argc; i++) {
		char *eq = strchr(argv[i], '=');
		if (eq && eq != argv[i]) {
			if (a->nkv == MAX_ARGS)
				goto many;
			*eq = '\0';
			a->key[a->nkv] = argv[i];
			a->val[a->nkv++] = eq + 1;
		} else {
			if (a->npos == MAX_ARGS)
				goto many;
			a->pos[a->npos++] = argv[i];
		}
	}
	return 0;
many:
	gf_log(GF_LOG_ERROR, "dataset %s: too many arguments", sub);
	return -1;
}

static const char *opt(args *a, const char *key, const char *def)
{
	for (int i = 0; i < a->nkv; i++)
		if (!strcmp(a->key[i], key)) {
			a->used[i] = 1;
			return a->val[i];
		}
	return def;
}

/* Reads an unsigned number with an optional K/M/G (1024-based) suffix. */
static int num_opt(args *a, const char *key, uint64_t def, uint64_t *out)
{
	const char *v = opt(a, key, NULL);
	if (!v) {
		*out = def;
		return 0;
	}
	char *end;
	errno = 0;
	unsigned long long x = strtoull(v, &end, 10);
	uint64_t mul = 1;
	if (*end == 'K' || *end == 'k')
		mul = 1ull << 10, end++;
	else if (*end == 'M' || *end == 'm')
		mul = 1ull << 20, end++;
	else if (*end == 'G' || *end == 'g')
		mul = 1ull << 30, end++;
	if (errno || end == v || *end || v[0] == '-') {
		gf_log(GF_LOG_ERROR, "dataset %s: %s=%s: expected a non-negative number", a->sub, key, v);
		return -1;
	}
	*out = x * mul;
	return 0;
}

static int int_opt(args *a, const char *key, int def, int lo, int hi, int *out)
{
	const char *s = opt(a, key, NULL);
	if (!s) {
		*out = def;
		return 0;
	}
	char *end;
	errno = 0;
	long x = strtol(s, &end, 10);
	if (errno || end == s || *end || x < lo || x > hi) {
		gf_log(GF_LOG_ERROR, "dataset %s: %s=%s: expected an integer in %d..%d", a->sub, key, s, lo, hi);
		return -1;
	}
	*out = (int)x;
	return 0;
}

static int bool_opt(args *a, const char *key, int def, int *out)
{
	const char *s = opt(a, key, NULL);
	if (!s) {
		*out = def;
		return 0;
	}
	if (!strcmp(s, "1") || !strcmp(s, "true") || !strcmp(s, "yes")) {
		*out = 1;
		return 0;
	}
	if (!strcmp(s, "0") || !strcmp(s, "false") || !strcmp(s, "no")) {
		*out = 0;
		return 0;
	}
	gf_log(GF_LOG_ERROR, "dataset %s: %s=%s: expected 1/0, true/false or yes/no", a->sub, key, s);
	return -1;
}

/* Every key=value must have been read by the subcommand. */
static int check_unused(args *a, const char *known)
{
	for (int i = 0; i < a->nkv; i++)
		if (!a->used[i]) {
			gf_log(GF_LOG_ERROR, "dataset %s: unknown option '%s' (options: %s)", a->sub, a->key[i], known);
			return -1;
		}
	return 0;
}

static int fail(const char *sub, int rc)
{
	const char *m = gf_errmsg();
	gf_log(GF_LOG_ERROR, "dataset %s: %s", sub, m[0] ? m : gf_strerror(rc));
	return 1;
}

#define CONVERT_KEYS \
	"encoding=raw|jpeg quality=1..100 subsamp=420|422|444 resize=N|WxH filter=area|bilinear channels=1|3 " \
	"shard_records=N shard_bytes=N[K|M|G] workers=N force=1 limit=N shuffle=1|0 seed=N"

/* Options shared by the converters. */
static int convert_opts(args *a, gf_convert_opts *o)
{
	gf_convert_defaults(o);
	const char *enc = opt(a, "encoding", "raw");
	if (!strcmp(enc, "raw"))
		o->encoding = GF_ENC_RAW;
	else if (!strcmp(enc, "jpeg") || !strcmp(enc, "jpg"))
		o->encoding = GF_ENC_JPEG;
	else {
		gf_log(GF_LOG_ERROR, "dataset %s: encoding=%s: expected raw or jpeg", a->sub, enc);
		return -1;
	}
	const char *ss = opt(a, "subsamp", "420");
	if (!strcmp(ss, "420"))
		o->subsamp = GF_SUBSAMP_420;
	else if (!strcmp(ss, "422"))
		o->subsamp = GF_SUBSAMP_422;
	else if (!strcmp(ss, "444"))
		o->subsamp = GF_SUBSAMP_444;
	else {
		gf_log(GF_LOG_ERROR, "dataset %s: subsamp=%s: expected 420, 422 or 444", a->sub, ss);
		return -1;
	}
	const char *rs = opt(a, "resize", NULL);
	if (rs) {
		int w = 0, h = 0, used = 0;
		if (sscanf(rs, "%dx%d%n", &w, &h, &used) == 2 && !rs[used]) {
		} else if (sscanf(rs, "%d%n", &w, &used) == 1 && !rs[used]) {
			h = w;
		} else {
			w = 0;
		}
		if (w <= 0 || h <= 0 || w > 65535 || h > 65535) {
			gf_log(GF_LOG_ERROR, "dataset %s: resize=%s: expected N or WxH", a->sub, rs);
			return -1;
		}
		o->resize_w = w;
		o->resize_h = h;
	}
	const char *f = opt(a, "filter", "area");
	if (!strcmp(f, "area"))
		o->resize_mode = GF_RESIZE_AREA;
	else if (!strcmp(f, "bilinear"))
		o->resize_mode = GF_RESIZE_BILINEAR;
	else {
		gf_log(GF_LOG_ERROR, "dataset %s: filter=%s: expected area or bilinear", a->sub, f);
		return -1;
	}
	int ch, q, workers, force;
	uint64_t limit;
	if (int_opt(a, "quality", 0, 1, 100, &q) || int_opt(a, "channels", 0, 1, 3, &ch) ||
	    int_opt(a, "workers", 0, 1, 64, &workers) || bool_opt(a, "force", 0, &force) ||
	    num_opt(a, "shard_records", 0, &o->shard_records) || num_opt(a, "shard_bytes", 0, &o->shard_bytes) ||
	    num_opt(a, "limit", 0, &limit) || bool_opt(a, "shuffle", 1, &o->shuffle) || num_opt(a, "seed", 1, &o->seed))
		return -1;
	if (ch == 2) {
		gf_log(GF_LOG_ERROR, "dataset %s: channels=2: expected 1 or 3", a->sub);
		return -1;
	}
	if (q && o->encoding != GF_ENC_JPEG) {
		gf_log(GF_LOG_ERROR, "dataset %s: quality= needs encoding=jpeg", a->sub);
		return -1;
	}
	o->quality = q;
	o->channels = ch;
	o->workers = workers;
	o->overwrite = force;
	o->limit = limit;
	return 0;
}

static void human_bytes(char *buf, size_t n, double b)
{
	const char *u[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	int i = 0;
	while (b >= 1024 && i < 4)
		b /= 1024, i++;
	snprintf(buf, n, i ? "%.1f %s" : "%.0f %s", b, u[i]);
}

static void print_summary(const char *out, const gf_convert_stats *st)
{
	char b[32];
	human_bytes(b, sizeof(b), (double)st->payload_bytes);
	printf("%s: %" PRIu64 " records in %u shard%s, %s of payload, %.1f s", out, st->records, st->shards,
	       st->shards == 1 ? "" : "s", b, st->seconds);
	if (st->skipped && !(st->bad_size + st->bad_missing + st->bad_unreadable))
		printf(", %" PRIu64 " unreadable inputs skipped", st->skipped);
	if (st->ignored)
		printf(", %" PRIu64 " non-image files ignored", st->ignored);
	printf("\n");
	if (st->bad_size + st->bad_missing + st->bad_unreadable)
		printf("%s: %" PRIu64 " bad pairs skipped (named above): %" PRIu64 " size mismatch, %" PRIu64
		       " missing partner, %" PRIu64 " unreadable\n",
		       out, st->bad_size + st->bad_missing + st->bad_unreadable, st->bad_size, st->bad_missing,
		       st->bad_unreadable);
}

/* ---- idx / folder / synth ---- */

static int cmd_idx(args *a)
{
	gf_convert_opts o;
	if (convert_opts(a, &o))
		return 2;
	const char *classes = opt(a, "classes", NULL);
	if (check_unused(a, CONVERT_KEYS " classes=name,name,..."))
		return 2;
	if (a->npos != 3) {
		fprintf(stderr, "usage: ganflow dataset idx IMAGES LABELS OUT [%s classes=...]\n", CONVERT_KEYS);
		return 2;
	}
	char **names = NULL, *copy = NULL;
	uint32_t n = 0;
	if (classes) {
		copy = strdup(classes);
		names = calloc(strlen(classes) + 1, sizeof(char *));
		if (!copy || !names) {
			free(copy);
			free(names);
			return fail(a->sub, -ENOMEM);
		}
		for (char *tok = strtok(copy, ","); tok; tok = strtok(NULL, ","))
			names[n++] = tok;
	}
	gf_convert_stats st;
	int rc = gf_convert_idx(a->pos[0], a->pos[1], a->pos[2], &o, classes ? (const char *const *)names : NULL, n, &st);
	free(copy);
	free(names);
	if (rc)
		return fail(a->sub, rc);
	print_summary(a->pos[2], &st);
	return 0;
}

static int cmd_folder(args *a)
{
	gf_convert_opts o;
	if (convert_opts(a, &o) || check_unused(a, CONVERT_KEYS))
		return 2;
	if (a->npos != 2) {
		fprintf(stderr, "usage: ganflow dataset folder DIR OUT [%s]\n", CONVERT_KEYS);
		return 2;
	}
	struct stat sb;
	if (stat(a->pos[0], &sb) == 0 && S_ISREG(sb.st_mode)) {
		gf_log(GF_LOG_ERROR, "dataset folder: %s is a file, not a folder (a zip of StyleGAN2-ADA's or R3GAN's "
		       "dataset_tool.py: ganflow dataset stylegan %s %s)", a->pos[0], a->pos[0], a->pos[1]);
		return 1;
	}
	gf_convert_stats st;
	int rc = gf_convert_folder(a->pos[0], a->pos[1], &o, &st);
	if (rc)
		return fail(a->sub, rc);
	print_summary(a->pos[1], &st);
	return 0;
}

static int cmd_stylegan(args *a)
{
	gf_convert_opts o;
	int classes;
	if (convert_opts(a, &o) || int_opt(a, "classes", 0, 1, 100000, &classes) ||
	    check_unused(a, CONVERT_KEYS " classes=N"))
		return 2;
	if (a->npos != 2) {
		fprintf(stderr, "usage: ganflow dataset stylegan SRC OUT [%s classes=N]\n"
		                "  SRC: a zip (or folder) of dataset_tool.py (StyleGAN2-ADA, R3GAN): images, labels in "
		                "dataset.json\n", CONVERT_KEYS);
		return 2;
	}
	gf_convert_stats st;
	int rc = gf_convert_dstool(a->pos[0], a->pos[1], &o, (uint32_t)classes, &st);
	if (rc)
		return fail(a->sub, rc);
	print_summary(a->pos[1], &st);
	return 0;
}

static int cmd_paired(args *a)
{
	gf_convert_opts o;
	if (convert_opts(a, &o))
		return 2;
	const char *dir = opt(a, "direction", "AtoB");
	if (check_unused(a, CONVERT_KEYS " direction=AtoB|BtoA"))
		return 2;
	if (strcmp(dir, "AtoB") && strcmp(dir, "BtoA")) {
		gf_log(GF_LOG_ERROR, "dataset paired: direction=%s: expected AtoB (A is the left half / folder A) or BtoA",
		       dir);
		return 2;
	}
	if (a->npos != 2) {
		fprintf(stderr, "usage: ganflow dataset paired SRC OUT [direction=AtoB|BtoA] [%s]\n"
		                "  SRC: a folder of AB images (A left, B right), or a folder with A/ and B/ sub-folders "
		                "(images matched by name)\n",
		        CONVERT_KEYS);
		return 2;
	}
	gf_convert_stats st;
	int rc = gf_convert_paired(a->pos[0], a->pos[1], &o, !strcmp(dir, "BtoA"), &st);
	if (rc)
		return fail(a->sub, rc);
	print_summary(a->pos[1], &st);
	return 0;
}

#define SYNTH_KEYS \
	"count=N width=500 height=375 quality=90 classes=10 seed=1 order=shuffled|class (shuffle=1|0) encoding=jpeg|raw " \
	"workers=N "                                                                                                     \
	"force=1 shard_records=N shard_bytes=N"

static int cmd_synth(args *a)
{
	gf_convert_opts o;
	gf_convert_defaults(&o);
	gf_synth_opts so = { .width = 500, .height = 375, .quality = 90, .classes = 10, .seed = 1 };
	int cls, force, workers, shuffle;
	const char *order = opt(a, "order", NULL), *enc = opt(a, "encoding", "jpeg"), *sh = opt(a, "shuffle", NULL);
	if (num_opt(a, "count", 0, &so.count) || int_opt(a, "width", 500, 1, 65535, &so.width) ||
	    int_opt(a, "height", 375, 1, 65535, &so.height) || int_opt(a, "quality", 90, 1, 100, &so.quality) ||
	    int_opt(a, "classes", 10, 1, 100000, &cls) || num_opt(a, "seed", 1, &so.seed) ||
	    int_opt(a, "workers", 0, 1, 64, &workers) || bool_opt(a, "force", 0, &force) ||
	    num_opt(a, "shard_records", 0, &o.shard_records) || num_opt(a, "shard_bytes", 0, &o.shard_bytes) ||
	    bool_opt(a, "shuffle", 1, &shuffle))
		return 2;
	if (check_unused(a, SYNTH_KEYS))
		return 2;
	if (!order)
		order = shuffle ? "shuffled" : "class";
	if (strcmp(order, "shuffled") && strcmp(order, "class")) {
		gf_log(GF_LOG_ERROR, "dataset synth: order=%s: expected shuffled (records in a seeded random order) or "
		                     "class (class by class, as a folder import without shuffle)", order);
		return 2;
	}
	if (sh && (strcmp(order, "shuffled") == 0) != shuffle) {
		gf_log(GF_LOG_ERROR, "dataset synth: order=%s contradicts shuffle=%d", order, shuffle);
		return 2;
	}
	if (strcmp(enc, "jpeg") && strcmp(enc, "raw")) {
		gf_log(GF_LOG_ERROR, "dataset synth: encoding=%s: expected jpeg or raw", enc);
		return 2;
	}
	if (a->npos != 1 || !so.count) {
		fprintf(stderr, "usage: ganflow dataset synth OUT count=N [%s]\n", SYNTH_KEYS);
		return 2;
	}
	so.classes = (uint32_t)cls;
	o.workers = workers;
	o.overwrite = force;
	o.encoding = strcmp(enc, "raw") ? GF_ENC_JPEG : GF_ENC_RAW;
	o.shuffle = !strcmp(order, "shuffled");
	o.seed = so.seed;
	gf_convert_stats st;
	int rc = gf_convert_synth(a->pos[0], &so, &o, &st);
	if (rc)
		return fail(a->sub, rc);
	print_summary(a->pos[0], &st);
	return 0;
}

/* ---- fashion-mnist ---- */

/* Finds NAME.gz or NAME in src. */
static char *find_src(const char *src, const char *name)
{
	char buf[4096];
	snprintf(buf, sizeof(buf), "%s/%s.gz", src, name);
	if (access(buf, R_OK) == 0)
		return strdup(buf);
	snprintf(buf, sizeof(buf), "%s/%s", src, name);
	if (access(buf, R_OK) == 0)
		return strdup(buf);
	return NULL;
}

/* 1 when OUT is a complete Fashion-MNIST split of n records. */
static int split_ok(const char *out, uint64_t n)
{
	gf_dataset *ds;
	if (gf_dataset_open(out, &ds))
		return 0;
	const gf_dataset_meta *m = gf_dataset_metadata(ds);
	int ok = m->count == n && m->nclasses == 10 && m->enc_count[GF_ENC_RAW] == n && m->max_height == 28 &&
	         m->min_height == 28 && m->max_width == 28 && m->min_width == 28;
	for (int c = 0; ok && c < 10; c++)
		ok = !strcmp(m->class_names[c], fmnist_classes[c]);
	gf_dataset_close(ds);
	gf_clearerr();
	return ok;
}

static int cmd_fmnist(args *a)
{
	const char *out = opt(a, "out", a->npos ? a->pos[0] : "data/fashion-mnist");
	const char *src = opt(a, "src", FMNIST_SRC);
	int force, workers;
	if (bool_opt(a, "force", 0, &force) || int_opt(a, "workers", 0, 1, 64, &workers))
		return 2;
	if (check_unused(a, "out=data/fashion-mnist src=" FMNIST_SRC " force=1 workers=N"))
		return 2;
	if (a->npos > 1) {
		fprintf(stderr, "usage: ganflow dataset fashion-mnist [out=data/fashion-mnist] [force=1]\n");
		return 2;
	}
	static const struct {
		const char *split, *images, *labels;
		uint64_t n;
	} splits[2] = {
		{ "train", "train-images-idx3-ubyte", "train-labels-idx1-ubyte", 60000 },
		{ "test", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", 10000 },
	};
	char *files[4] = { 0 };
	int missing = 0, rc = 0;
	for (int i = 0; i < 2; i++) {
		files[2 * i] = find_src(src, splits[i].images);
		files[2 * i + 1] = find_src(src, splits[i].labels);
		for (int k = 0; k < 2; k++)
			if (!files[2 * i + k]) {
				gf_log(GF_LOG_ERROR, "dataset fashion-mnist: %s/%s.gz is missing", src,
				       k ? splits[i].labels : splits[i].images);
				missing = 1;
			}
	}
	if (missing) {
		if (!strcmp(src, FMNIST_SRC))
			gf_log(GF_LOG_ERROR, "dataset fashion-mnist: install the Debian package %s "
			                     "(apt-get install %s), or give src=DIR holding the IDX files",
			       FMNIST_PKG, FMNIST_PKG);
		rc = 1;
		goto out;
	}
	for (int i = 0; i < 2; i++) {
		char dir[4096];
		snprintf(dir, sizeof(dir), "%s/%s", out, splits[i].split);
		if (!force && split_ok(dir, splits[i].n)) {
			printf("%s: up to date (%" PRIu64 " records; force=1 rebuilds)\n", dir, splits[i].n);
			continue;
		}
		gf_convert_opts o;
		gf_convert_defaults(&o);
		o.overwrite = 1;
		o.workers = workers;
		o.what = splits[i].split;
		o.shuffle = 0; /* the IDX files' own order (already mixed): the same bytes as ever */
		gf_convert_stats st;
		if ((rc = gf_convert_idx(files[2 * i], files[2 * i + 1], dir, &o, fmnist_classes, 10, &st))) {
			rc = fail(a->sub, rc);
			goto out;
		}
		print_summary(dir, &st);
	}
out:
	for (int i = 0; i < 4; i++)
		free(files[i]);
	return rc;
}

/* ---- edges2fashion ---- */

/* 1 when OUT is a complete edges2fashion split of n pairs. */
static int edges_ok(const char *out, uint64_t n)
{
	gf_dataset *ds;
	if (gf_dataset_open(out, &ds))
		return 0;
	const gf_dataset_meta *m = gf_dataset_metadata(ds);
	gf_record r;
	int ok = m->count == n && m->nclasses == 10 && m->min_height == 28 && m->max_height == 28 && m->min_width == 56 &&
	         m->max_width == 56 && gf_dataset_get(ds, 0, &r) == 0 && (r.h.flags & GF_RECORD_PAIR);
	gf_dataset_close(ds);
	gf_clearerr();
	return ok;
}

static int cmd_edges(args *a)
{
	const char *out = opt(a, "out", a->npos ? a->pos[0] : "data/edges2fashion");
	const char *src = opt(a, "src", FMNIST_SRC);
	int force;
	if (bool_opt(a, "force", 0, &force) || check_unused(a, "out=data/edges2fashion src=" FMNIST_SRC " force=1"))
		return 2;
	if (a->npos > 1) {
		fprintf(stderr, "usage: ganflow dataset edges2fashion [out=data/edges2fashion] [src=DIR] [force=1]\n");
		return 2;
	}
	static const struct {
		const char *split, *images, *labels;
		uint64_t n;
	} splits[2] = {
		{ "train", "train-images-idx3-ubyte", "train-labels-idx1-ubyte", 60000 },
		{ "test", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", 10000 },
	};
	int rc = 0;
	for (int i = 0; i < 2 && !rc; i++) {
		char *img = find_src(src, splits[i].images), *lab = find_src(src, splits[i].labels), dir[4096];
		snprintf(dir, sizeof(dir), "%s/%s", out, splits[i].split);
		if (!img || !lab) {
			gf_log(GF_LOG_ERROR, "dataset edges2fashion: %s/%s.gz is missing%s", src,
			       img ? splits[i].labels : splits[i].images,
			       strcmp(src, FMNIST_SRC) ? "" : " (apt-get install " FMNIST_PKG ", or give src=DIR)");
			rc = 1;
		} else if (!force && edges_ok(dir, splits[i].n)) {
			printf("%s: up to date (%" PRIu64 " pairs; force=1 rebuilds)\n", dir, splits[i].n);
		} else {
			gf_convert_opts o;
			gf_convert_defaults(&o);
			o.overwrite = 1;
			o.what = splits[i].split;
			o.shuffle = 0; /* Fashion-MNIST's own order, as the fashion-mnist dataset */
			gf_convert_stats st;
			if ((rc = gf_convert_edges(img, lab, dir, &o, fmnist_classes, 10, &st)))
				rc = fail(a->sub, rc);
			else
				print_summary(dir, &st);
		}
		free(img);
		free(lab);
	}
	return rc;
}

/* ---- info ---- */

static int cmd_info(args *a)
{
	if (check_unused(a, "(none)"))
		return 2;
	if (a->npos != 1) {
		fprintf(stderr, "usage: ganflow dataset info PATH\n");
		return 2;
	}
	gf_dataset *ds;
	int rc = gf_dataset_open(a->pos[0], &ds);
	if (rc)
		return fail(a->sub, rc);
	const gf_dataset_meta *m = gf_dataset_metadata(ds);
	/* what the files take on disk (st_blocks): an LMDB file may be sparse,
	 * its length the map size it was written with */
	uint64_t disk = 0, length = 0;
	for (uint32_t i = 0; i < m->nshards; i++) {
		disk += gf_dataset_shard(ds, i)->disk_bytes;
		length += gf_dataset_shard(ds, i)->file_size;
	}
	char b1[32], b2[32], b3[32];
	human_bytes(b1, sizeof(b1), (double)disk);
	human_bytes(b3, sizeof(b3), (double)length);
	human_bytes(b2, sizeof(b2), (double)m->payload_bytes);
	int caffe = gf_dataset_format_of(ds) == GF_FORMAT_CAFFE;
	printf("dataset    %s\n", a->pos[0]);
	printf("format     %s\n", caffe ? "caffe (an LMDB of caffe.Datum values; positions follow its keys in LMDB "
	                                   "order, classes are the Datum labels)"
	                                 : "ganflow");
	printf("records    %" PRIu64, m->count);
	if (m->count != m->total)
		printf(" (one shard of a dataset of %" PRIu64 ")", m->total);
	printf(" in %u shard%s, %s on disk", m->nshards, m->nshards == 1 ? "" : "s", b1);
	if (length > disk + disk / 8 + (1u << 20))
		printf(" (files %s long, sparse)", b3);
	printf("\n");
	printf("encodings ");
	for (int e = 0; e < GF_ENC_COUNT; e++)
		if (m->enc_count[e])
			printf(" %s %" PRIu64, gf_encoding_name((uint32_t)e), m->enc_count[e]);
	uint64_t parsed = 0;
	for (int e = 0; e < GF_ENC_COUNT; e++)
		parsed += m->enc_count[e];
	if (m->count > parsed)
		printf(" %s %" PRIu64, caffe ? "unreadable" : "unparsed", m->count - parsed);
	printf("\n");
	printf("payload    %s, %.0f B per record\n", b2, m->count ? (double)m->payload_bytes / m->count : 0.0);
	printf("size       height %u..%u, width %u..%u, channels %u..%u\n", m->min_height, m->max_height, m->min_width,
	       m->max_width, m->min_channels, m->max_channels);
	/* checksums: judged by the first record (a converter writes them on
	 * every record or none); verify checks them all */
	gf_record first;
	printf("checksums  %s\n", caffe ? "none (Caffe Datum values carry none)"
	                          : m->count == 0 || gf_dataset_get(ds, 0, &first)
	                              ? "-"
	                              : first.h.flags & GF_RECORD_CRC32C
	                                    ? "CRC-32C of every payload (checked by lmdb_reader and verify)"
	                                    : "none (written before records carried a CRC-32C; they still read)");
	if (m->count && gf_dataset_get(ds, 0, &first) == 0 && (first.h.flags & GF_RECORD_PAIR))
		printf("pairs      A | B side by side (each half %u pixels wide; jpeg_decode paired = true)\n",
		       first.h.width / 2);
	gf_clearerr();
	printf("classes    %u%s\n", m->nclasses, m->nclasses ? "" : " (unlabelled)");
	if (m->nclasses) {
		printf("  %5s  %-24s %10s %7s\n", "label", "name", "records", "share");
		for (uint32_t c = 0; c < m->nclasses; c++)
			printf("  %5u  %-24s %10" PRIu64 " %6.2f%%\n", c, m->class_names[c], m->class_count[c],
			       m->count ? 100.0 * (double)m->class_count[c] / (double)m->count : 0.0);
		if (m->unlabelled)
			printf("  %5s  %-24s %10" PRIu64 "\n", "-1", "(unlabelled)", m->unlabelled);
	}
	printf("shards\n  %-12s %21s %10s %11s\n", "name", "keys", "records", "on disk");
	for (uint32_t i = 0; i < m->nshards; i++) {
		const gf_shard_info *s = gf_dataset_shard(ds, i);
		const char *name = strrchr(s->path, '/');
		char keys[48];
		if (s->count)
			snprintf(keys, sizeof(keys), "%" PRIu64 "..%" PRIu64, s->first, s->first + s->count - 1);
		else
			snprintf(keys, sizeof(keys), "-");
		human_bytes(b1, sizeof(b1), (double)s->disk_bytes);
		printf("  %-12s %21s %10" PRIu64 " %11s\n", name ? name + 1 : s->path, keys, s->count, b1);
	}
	gf_dataset_close(ds);
	return 0;
}

/* ---- verify ---- */

typedef struct verify_ctx {
	const char *path;
	uint64_t count;
	int workers;
	const int32_t *label_of; /* (count) label from the meta index, -1 unlabelled */
	atomic_uint_fast64_t done, bad, printed;
	atomic_uint_fast64_t next_chunk; /* chunks of VERIFY_CHUNK positions handed out */
	atomic_uint_fast64_t summed;   /* records whose header says they carry a checksum */
	atomic_uint_fast64_t unsummed; /* records whose header says they carry none */
	int caffe;               /* Caffe Datums: no ganflow header */
	atomic_int fatal;
	char fatal_msg[512];
	pthread_mutex_t lock;
} verify_ctx;

typedef struct verify_arg {
	verify_ctx *v;
} verify_arg;

/* Positions a worker takes at a time: consecutive keys lie together in the
 * files, so each worker reads its own stretch of them. */
#define VERIFY_CHUNK 4096

/* Lets go of the map pages of [lo, hi) in a shard once verified (they stay
 * in the page cache): otherwise every worker, with a map of its own, would
 * show the whole dataset resident by the end. */
static void release_range(const gf_shard_info *si, uint64_t lo, uint64_t hi)
{
	uint64_t a = lo & ~(uint64_t)4095, b = (hi + 4095) & ~(uint64_t)4095;
	if (si && b > a && b <= si->map_size)
		madvise((void *)(si->map + a), (size_t)(b - a), MADV_DONTNEED);
}

/* The flags of a record's header (layout in <ganflow/dataset.h>), read
 * from its first 24 bytes alone: a record whose payload was cut short
 * still says what it was written with. -1 when there is no such header. */
static int header_flags(const uint8_t *v, size_t len, uint32_t *flags)
{
	if (len < GF_RECORD_HEADER_SIZE || v[0] != 'G' || v[1] != 'F' || v[2] != GF_RECORD_VERSION)
		return -1;
	*flags = (uint32_t)v[18] | (uint32_t)v[19] << 8;
	return 0;
}

static void *verify_worker(void *p)
{
	verify_arg *va = p;
	verify_ctx *v = va->v;
	gf_dataset *ds = NULL;
	gf_decoder *dec = NULL;
	int rc = gf_dataset_open(v->path, &ds);
	if (!rc)
		rc = gf_decoder_create(&dec);
	if (rc) {
		pthread_mutex_lock(&v->lock);
		v->fatal = 1;
		snprintf(v->fatal_msg, sizeof(v->fatal_msg), "%s", gf_errmsg());
		pthread_mutex_unlock(&v->lock);
		goto out;
	}
	uint64_t pos = 0, end = 0, lo = UINT64_MAX, hi = 0;
	uint32_t shard = 0;
	for (;; pos++) {
		if (pos == end) { /* the next chunk; the pages of this one go */
			release_range(gf_dataset_shard(ds, shard), lo, hi);
			lo = UINT64_MAX, hi = 0;
			pos = atomic_fetch_add(&v->next_chunk, 1) * VERIFY_CHUNK;
			if (pos >= v->count || atomic_load(&v->fatal))
				break;
			end = pos + VERIFY_CHUNK < v->count ? pos + VERIFY_CHUNK : v->count;
		}
		gf_record r;
		char why[600];
		why[0] = '\0';
		rc = gf_dataset_get(ds, pos, &r);
		if (!rc) {
			const uint8_t *pix;
			int w, h;
			rc = gf_record_check(&r.h, r.payload);
			if (!rc)
				rc = gf_decode_pixels(dec, &r.h, r.payload, 0, &pix, &w, &h);
			if (rc)
				snprintf(why, sizeof(why), "shard %s key %" PRIu64 ": %s",
				         gf_dataset_shard(ds, r.shard)->path, r.key, gf_errmsg());
			else if (v->label_of && r.h.label != v->label_of[pos]) {
				rc = GF_ECORRUPT;
				snprintf(why, sizeof(why), "shard %s key %" PRIu64 ": label %d in the header, %d in the meta index",
				         gf_dataset_shard(ds, r.shard)->path, r.key, r.h.label, v->label_of[pos]);
			}
		} else {
			snprintf(why, sizeof(why), "%s", gf_errmsg());
		}
		/* whether it carries a checksum is its header's to say, also when
		 * the record is bad for another reason (a label out of range, a
		 * payload cut short); a missing or empty record cannot say */
		uint32_t flags;
		if (r.value && !v->caffe && header_flags(r.value, r.value_len, &flags) == 0)
			atomic_fetch_add((flags & GF_RECORD_CRC32C) ? &v->summed : &v->unsummed, 1);
		if (r.value) {
			if (r.shard != shard) {
				release_range(gf_dataset_shard(ds, shard), lo, hi);
				lo = UINT64_MAX, hi = 0;
				shard = r.shard;
			}
			lo = r.offset < lo ? r.offset : lo;
			hi = r.offset + r.value_len > hi ? r.offset + r.value_len : hi;
		}
		if (rc) {
			atomic_fetch_add(&v->bad, 1);
			if (atomic_fetch_add(&v->printed, 1) < 100)
				gf_log(GF_LOG_WARN, "bad record: %s", why);
		}
		atomic_fetch_add(&v->done, 1);
	}
out:
	gf_decoder_destroy(dec);
	gf_dataset_close(ds);
	return NULL;
}

static int cmd_verify(args *a)
{
	int workers;
	if (int_opt(a, "workers", 0, 1, 64, &workers) || check_unused(a, "workers=N"))
		return 2;
	if (a->npos != 1) {
		fprintf(stderr, "usage: ganflow dataset verify PATH [workers=N]\n");
		return 2;
	}
	if (!workers) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		workers = n < 1 ? 1 : n > 16 ? 16 : (int)n;
	}
	gf_dataset *ds;
	int rc = gf_dataset_open(a->pos[0], &ds);
	if (rc)
		return fail(a->sub, rc);
	const gf_dataset_meta *m = gf_dataset_metadata(ds);
	verify_ctx v = { .path = a->pos[0], .count = m->count, .workers = workers };
	int32_t *label_of = malloc((m->count ? m->count : 1) * sizeof(int32_t));
	if (!label_of) {
		gf_dataset_close(ds);
		return fail(a->sub, -ENOMEM);
	}
	for (uint64_t i = 0; i < m->count; i++)
		label_of[i] = -1;
	uint64_t most = 0;
	for (uint32_t c = 0; c < m->nclasses; c++)
		most = m->class_count[c] > most ? m->class_count[c] : most;
	uint64_t *pos = malloc((most ? most : 1) * sizeof(uint64_t));
	if (!pos) {
		free(label_of);
		gf_dataset_close(ds);
		return fail(a->sub, -ENOMEM);
	}
	for (uint32_t c = 0; c < m->nclasses; c++) {
		gf_dataset_class_positions(ds, c, pos);
		for (uint64_t j = 0; j < m->class_count[c]; j++)
			label_of[pos[j]] = (int32_t)c;
	}
	free(pos);
	v.label_of = label_of;
	int caffe = gf_dataset_format_of(ds) == GF_FORMAT_CAFFE;
	v.caffe = caffe;
	gf_dataset_close(ds);
	pthread_mutex_init(&v.lock, NULL);
	pthread_t th[64];
	verify_arg va[64];
	int started = 0;
	double t0 = gf_now();
	for (int i = 0; i < workers; i++) {
		va[i].v = &v;
	}
	int inline_from = workers;
	for (int i = 0; i < workers; i++) {
		if (pthread_create(&th[i], NULL, verify_worker, &va[i])) {
			inline_from = i; /* the rest run on this thread below */
			break;
		}
		started++;
	}
	for (int i = inline_from; i < workers; i++)
		verify_worker(&va[i]);
	char what[64];
	snprintf(what, sizeof(what), "verify");
	for (;;) {
		uint64_t d = atomic_load(&v.done);
		if (d >= v.count || v.fatal)
			break;
		gf_progress_bar(what, d, v.count, t0);
		usleep(200000);
	}
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	gf_progress_bar(what, atomic_load(&v.done), v.count, t0);
	free(label_of);
	pthread_mutex_destroy(&v.lock);
	if (v.fatal) {
		gf_log(GF_LOG_ERROR, "dataset verify: %s", v.fatal_msg);
		return 1;
	}
	uint64_t bad = atomic_load(&v.bad), done = atomic_load(&v.done);
	if (bad > 100)
		gf_log(GF_LOG_WARN, "... and %" PRIu64 " more bad records", bad - 100);
	/* a record that is missing or empty (or whose header is damaged) has
	 * no header to say whether it carries a checksum: it counts either way */
	uint64_t summed = atomic_load(&v.summed), unsummed = atomic_load(&v.unsummed);
	uint64_t unknown = done - summed - unsummed;
	char sums[256];
	const char *with = unknown ? " with a readable header" : "";
	if (caffe)
		snprintf(sums, sizeof(sums), "none (Caffe Datum values carry none)");
	else if (summed && unsummed)
		snprintf(sums, sizeof(sums), "some records (%" PRIu64 " carry one, %" PRIu64 " none)", summed, unsummed);
	else if (summed)
		snprintf(sums, sizeof(sums), "every record%s", with);
	else if (unsummed)
		snprintf(sums, sizeof(sums), "none%s (shards written before records carried a CRC-32C)", with);
	else
		snprintf(sums, sizeof(sums), "unknown");
	if (unknown && !caffe)
		snprintf(sums + strlen(sums), sizeof(sums) - strlen(sums),
		         " (%" PRIu64 " bad record%s without one: missing, empty or a damaged header)", unknown,
		         unknown == 1 ? "" : "s");
	printf("%s: %" PRIu64 " records verified, %" PRIu64 " bad; payload checksums: %s\n", a->pos[0], done, bad, sums);
	return bad || done != v.count ? 1 : 0;
}

/* ---- export ---- */

static int mkdir_one(const char *p)
{
	return mkdir(p, 0777) && errno != EEXIST ? -errno : 0;
}

static int cmd_export(args *a)
{
	uint64_t limit;
	int force;
	const char *format = opt(a, "format", "auto");
	if (num_opt(a, "limit", 0, &limit) || bool_opt(a, "force", 0, &force) ||
	    check_unused(a, "limit=N format=auto|png|jpg force=1"))
		return 2;
	if (a->npos != 2 || (strcmp(format, "auto") && strcmp(format, "png") && strcmp(format, "jpg"))) {
		fprintf(stderr, "usage: ganflow dataset export PATH DIR [limit=N] [format=auto|png|jpg] [force=1]\n");
		return 2;
	}
	const char *dir = a->pos[1];
	struct stat st;
	if (!force && stat(dir, &st) == 0) {
		gf_log(GF_LOG_ERROR, "dataset export: %s already exists (force=1 writes into it)", dir);
		return 1;
	}
	gf_dataset *ds;
	gf_decoder *dec = NULL;
	int rc = gf_dataset_open(a->pos[0], &ds);
	if (rc)
		return fail(a->sub, rc);
	const gf_dataset_meta *m = gf_dataset_metadata(ds);
	uint64_t n = limit && limit < m->count ? limit : m->count, bad = 0;
	char path[4096];
	double t0 = gf_now();
	if ((rc = gf_decoder_create(&dec)) || (rc = mkdir_one(dir))) {
		gf_seterr(rc, "%s: %s", dir, strerror(-rc));
		goto fail;
	}
	for (uint32_t c = 0; c < m->nclasses || (c == 0 && m->nclasses == 0); c++) {
		char name[256];
		snprintf(name, sizeof(name), "%s", m->nclasses ? m->class_names[c] : "unlabelled");
		for (char *p = name; *p; p++)
			if (*p == '/')
				*p = '_';
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		if ((rc = mkdir_one(path))) {
			gf_seterr(rc, "%s: %s", path, strerror(-rc));
			goto fail;
		}
	}
	for (uint64_t pos = 0; pos < n; pos++) {
		gf_record r;
		if ((rc = gf_dataset_get(ds, pos, &r))) {
			gf_log(GF_LOG_WARN, "bad record: %s", gf_errmsg());
			bad++;
			continue;
		}
		char name[256];
		snprintf(name, sizeof(name), "%s",
		         r.h.label >= 0 && m->nclasses ? m->class_names[r.h.label] : "unlabelled");
		for (char *p = name; *p; p++)
			if (*p == '/')
				*p = '_';
		int as_jpeg = !strcmp(format, "jpg") || (!strcmp(format, "auto") && r.h.encoding == GF_ENC_JPEG);
		snprintf(path, sizeof(path), "%s/%s/%08" PRIu64 ".%s", dir, name, r.key, as_jpeg ? "jpg" : "png");
		if (as_jpeg && r.h.encoding == GF_ENC_JPEG) {
			FILE *f = fopen(path, "wb");
			if (!f || fwrite(r.payload, 1, r.h.payload, f) != r.h.payload) {
				rc = gf_seterr(-errno, "%s: %s", path, strerror(errno));
				if (f)
					fclose(f);
				goto fail;
			}
			if (fclose(f)) {
				rc = gf_seterr(-errno, "%s: %s", path, strerror(errno));
				goto fail;
			}
		} else {
			const uint8_t *pix;
			int w, h;
			if ((rc = gf_decode_pixels(dec, &r.h, r.payload, 0, &pix, &w, &h))) {
				gf_log(GF_LOG_WARN, "bad record: shard %s key %" PRIu64 ": %s", gf_dataset_shard(ds, r.shard)->path,
				       r.key, gf_errmsg());
				bad++;
				continue;
			}
			if (as_jpeg) {
				const uint8_t *jpg;
				size_t len;
				FILE *f;
				if ((rc = gf_jpeg_encode(dec, pix, w, h, (int)r.h.channels, 95, GF_SUBSAMP_420, &jpg, &len)))
					goto fail;
				if (!(f = fopen(path, "wb")) || fwrite(jpg, 1, len, f) != len || fclose(f)) {
					rc = gf_seterr(-errno, "%s: %s", path, strerror(errno));
					goto fail;
				}
			} else if ((rc = gf_png_save(path, pix, w, h, (int)r.h.channels))) {
				goto fail;
			}
		}
		if ((pos & 255) == 255 || pos + 1 == n)
			gf_progress_bar("export", pos + 1, n, t0);
	}
	printf("%s: %" PRIu64 " images written", dir, n - bad);
	if (bad)
		printf(", %" PRIu64 " bad records skipped", bad);
	printf("\n");
	gf_decoder_destroy(dec);
	gf_dataset_close(ds);
	return 0;
fail:
	gf_progress_done(NULL);
	gf_decoder_destroy(dec);
	gf_dataset_close(ds);
	return fail(a->sub, rc);
}

/* ---- dispatch ---- */

static void usage(FILE *f)
{
	fprintf(f, "usage: ganflow dataset SUBCOMMAND ...\n\n"
	           "  fashion-mnist [out=data/fashion-mnist] [force=1]   convert Debian's Fashion-MNIST (train, test)\n"
	           "  idx IMAGES LABELS OUT [options]                    convert IDX files (MNIST layout, .gz or not)\n"
	           "  folder DIR OUT [options]                           convert DIR/<class>/<image> (JPEG, PNG)\n"
	           "  stylegan SRC OUT [classes=N] [options]             a dataset_tool.py zip or folder (StyleGAN2-ADA, R3GAN)\n"
	           "  paired SRC OUT [direction=AtoB|BtoA] [options]     pix2pix pairs: AB images, or A/ and B/ folders\n"
	           "  edges2fashion [out=data/edges2fashion] [force=1]   (edge map, image) pairs from Fashion-MNIST\n"
	           "  synth OUT count=N [width= height= classes= ...]    ImageNet-like benchmark data (JPEG or raw)\n"
	           "  info PATH                                          counts, classes, encodings, sizes\n"
	           "  verify PATH [workers=N]                            decode every record, report bad ones\n"
	           "  export PATH DIR [limit=N] [format=auto|png|jpg]    write images into DIR/<class>/\n\n"
	           "converter options: %s\n",
	        CONVERT_KEYS);
}

int gf_cmd_dataset(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	static const struct {
		const char *name;
		int (*fn)(args *a);
	} subs[] = {
		{ "fashion-mnist", cmd_fmnist }, { "idx", cmd_idx },       { "folder", cmd_folder }, { "synth", cmd_synth },
		{ "info", cmd_info },            { "verify", cmd_verify }, { "export", cmd_export },
		{ "paired", cmd_paired },        { "edges2fashion", cmd_edges }, { "stylegan", cmd_stylegan },
	};
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
		if (strcmp(argv[1], subs[i].name))
			continue;
		args a;
		if (parse_args(&a, subs[i].name, argc - 2, argv + 2))
			return 2;
		return subs[i].fn(&a);
	}
	fprintf(stderr, "ganflow dataset: unknown subcommand '%s'\n\n", argv[1]);
	usage(stderr);
	return 2;
}
