/* `ganflow sample CHECKPOINT [n=64] [out=grid.png|DIR/] [class=k] [cols=8] [seed=1]
 *  [bn=eval|batch] [npy=PREFIX] [force=1] [ema=0|1] [truncation=T]`: images from the
 *  generators of a training checkpoint.
 *
 * One G: n images (a conditional G draws row r with label r, or every
 * image with label k when class=k). Per-class generators: with class=k the
 * images come from G_k; without, the grid shows the mixture of the
 * per-class generators stratified by class: row r from G_r (equal
 * weights, the mixture of classes the seed paper samples from).
 *
 * out=DIR/ (a trailing slash, or an existing directory) writes one PNG per
 * image instead of a grid: DIR/<class>/NNNNNN.png with classes in turn
 * (conditional and per-class checkpoints; class=k: only k), or
 * DIR/unlabelled/NNNNNN.png: the image-folder layout torchvision's
 * ImageFolder and `ganflow dataset folder` read. Images are made in
 * batches of 256 with a progress bar when there is more than one.
 *
 * npy=PREFIX also writes what was generated as NumPy files: PREFIX.z.npy
 * (n, z) f32 noise, PREFIX.images.npy (n, c, h, w) f32 and, with labels,
 * PREFIX.labels.npy (n) i32 (the PyTorch bridge's tests compare with them).
 *
 * A checkpoint of a g_step with `ema` holds G's moving average: it is used
 * unless ema=0 (ema=1 requires it). truncation=T redraws every noise value
 * of magnitude above T (the truncation trick of BigGAN); for a StyleGAN2 G
 * (w_avg layers) it is psi in w-space instead: w -> w_avg + T (w - w_avg). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <ganflow/err.h>
#include <ganflow/evaluate.h>
#include <ganflow/image.h>
#include <ganflow/log.h>

#include "cmd.h"

static int usage(void)
{
	fprintf(stderr, "usage: ganflow sample CHECKPOINT [n=64] [out=grid.png|DIR/] [class=k] [cols=8] [seed=1] "
	                "[bn=eval|batch] [npy=PREFIX] [force=1]\n"
	                "  generates n images from the generator(s) of a training checkpoint into a PNG grid,\n"
	                "  or with out=DIR/ into one PNG per image (DIR/<class>/NNNNNN.png, an image folder)\n"
	                "  [ema=0|1] [truncation=T]: G's moving average (used by default when the checkpoint has\n"
	                "  one), and the truncation trick (noise values beyond +-T redrawn; for a StyleGAN2 G,\n"
	                "  w -> w_avg + T (w - w_avg) with the tracked mean of w)\n");
	return 2;
}

/* key=value with an integer value; returns 0, or prints why and returns 2. */
static int int_arg(const char *key, const char *v, long *out)
{
	char *end;
	*out = strtol(v, &end, 10);
	if (*end || end == v) {
		fprintf(stderr, "ganflow: %s=%s is not an integer\n", key, v);
		return 2;
	}
	return 0;
}

/* ---- npy=PREFIX ---- */

/* PREFIX.what.npy: an NPY 1.0 file of n little-endian values of 4 bytes
 * (descr "<f4" or "<i4"). Returns 0, or prints why and returns 1. */
static int write_npy(const char *prefix, const char *what, const char *descr, int ndim, const long *shape,
                     const void *data)
{
	char path[4096], hdr[256];   /* the dict, padded: < 200 bytes */
	snprintf(path, sizeof(path), "%s.%s.npy", prefix, what);
	size_t n = 1;
	int len = snprintf(hdr, sizeof(hdr), "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
	for (int i = 0; i < ndim; i++) {
		len += snprintf(hdr + len, sizeof(hdr) - (size_t)len, "%ld,%s", shape[i], i + 1 < ndim ? " " : "");
		n *= (size_t)shape[i];
	}
	len += snprintf(hdr + len, sizeof(hdr) - (size_t)len, "), }");
	while ((10 + len + 1) % 64)   /* magic, version, length, dict, '\n': 64-byte aligned */
		hdr[len++] = ' ';
	hdr[len++] = '\n';
	FILE *f = fopen(path, "wb");
	uint8_t pre[10] = { 0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)(len & 0xff), (uint8_t)(len >> 8) };
	int ok = f && fwrite(pre, 1, 10, f) == 10 && fwrite(hdr, 1, (size_t)len, f) == (size_t)len &&
	         fwrite(data, 4, n, f) == n;
	if ((f && fclose(f)) || !ok) {
		fprintf(stderr, "ganflow sample: cannot write %s\n", path);
		return 1;
	}
	return 0;
}

/* The noise z (n, zdim) gf_generators_sample drew (truncated or not), the
 * images and the labels, as PREFIX.*.npy. */
static int write_npys(const char *prefix, gf_generators *gs, long n, const float *z, const float *images,
                      const int32_t *labels)
{
	gf_tensor in, o;
	gf_net_shapes(gf_generators_net(gs, 0), &in, &o);
	long zs[2] = { n, (long)in.shape[1] }, is[4] = { n, (long)o.shape[1], (long)o.shape[2], (long)o.shape[3] };
	return write_npy(prefix, "z", "<f4", 2, zs, z) || write_npy(prefix, "images", "<f4", 4, is, images) ||
	       (gf_generators_classes(gs) && write_npy(prefix, "labels", "<i4", 1, &n, labels));
}

/* ", moving-average weights, truncation 0.5" for the closing line. */
static const char *weights_note(const gf_generators *gs, double trunc, char *buf, size_t size)
{
	int k = snprintf(buf, size, "%s", gf_generators_ema(gs) ? ", moving-average weights" : "");
	if (trunc > 0 && k >= 0 && (size_t)k < size)
		snprintf(buf + k, size - (size_t)k, ", truncation %g%s", trunc,
		         gf_generators_wspace(gs) ? " in w-space (psi)" : "");
	return buf;
}

/* ---- out=DIR/: one PNG per image ---- */

/* Folder mode: out names a directory (a trailing '/', or one that exists). */
static int is_folder(const char *out)
{
	struct stat st;
	size_t l = strlen(out);
	return (l && out[l - 1] == '/') || (stat(out, &st) == 0 && S_ISDIR(st.st_mode));
}

/* Creates DIR (its parent must exist); refuses one that holds anything
 * unless force. Returns 0 or prints why and returns 1. */
static int make_dir(const char *dir, int force)
{
	if (mkdir(dir, 0777) == 0)
		return 0;
	if (errno != EEXIST) {
		fprintf(stderr, "ganflow sample: cannot create the directory %s: %s\n", dir, strerror(errno));
		return 1;
	}
	DIR *d = opendir(dir);
	if (!d) {
		fprintf(stderr, "ganflow sample: %s: %s\n", dir, strerror(errno));
		return 1;
	}
	struct dirent *e;
	int empty = 1;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			empty = 0;
	closedir(d);
	if (!empty && !force) {
		fprintf(stderr, "ganflow sample: %s is not empty (force=1 writes into it)\n", dir);
		return 1;
	}
	return 0;
}

/* Folder of image i: DIR/<class>/ for a conditional or per-class
 * checkpoint (class numbers zero-padded, so byte order is label order as
 * ImageFolder and `ganflow dataset folder` sort them), DIR/unlabelled/
 * otherwise (the name `ganflow dataset export` uses). */
static void class_dir(char *buf, size_t n, const char *dir, int classes, int32_t label)
{
	size_t l = strlen(dir);
	const char *sep = l && dir[l - 1] == '/' ? "" : "/";
	if (!classes) {
		snprintf(buf, n, "%s%sunlabelled", dir, sep);
		return;
	}
	int digits = 1;
	for (int c = classes - 1; c >= 10; c /= 10)
		digits++;
	if (snprintf(buf, n, "%s%s%0*d", dir, sep, digits, (int)label) >= (int)n)
		buf[n - 1] = '\0'; /* a path longer than PATH_MAX fails at mkdir, naming it */
}

/* Writes images [first, first + b) as DIR/<class>/NNNNNN.png. */
static int write_files(const char *dir, int classes, long first, int b, long n, const float *images,
                       const int32_t *labels, int c, int h, int w, uint8_t *pix)
{
	int digits = 6;
	for (long k = n - 1; k >= 1000000; k /= 10)
		digits++;
	for (int j = 0; j < b; j++) {
		char folder[4096], path[4200];
		class_dir(folder, sizeof(folder), dir, classes, labels[j]);
		if (snprintf(path, sizeof(path), "%s/%0*ld.png", folder, digits, first + j) >= (int)sizeof(path)) {
			gf_progress_done(NULL);
			fprintf(stderr, "ganflow sample: %s/...: path too long\n", folder);
			return 1;
		}
		gf_grid_tile(pix, images + (size_t)j * (size_t)(c * h * w), 1, c, h, w, 1, 0);
		if (gf_png_write(path, pix, w, h, c, 0)) {
			gf_progress_done(NULL);
			fprintf(stderr, "ganflow sample: %s\n", gf_errmsg());
			return 1;
		}
	}
	return 0;
}

int gf_cmd_sample(int argc, char **argv)
{
	if (argc < 2 || argv[1][0] == '-')
		return usage();
	const char *path = argv[1], *out = "grid.png", *bn = "eval", *npy = NULL;
	long n = 64, cls = -1, cols = 8, seed = 1, force = 0, ema = -1;
	double trunc = 0;
	for (int i = 2; i < argc; i++) {
		char *v = strchr(argv[i], '=');
		if (!v) {
			fprintf(stderr, "ganflow sample: expected key=value, got '%s'\n", argv[i]);
			return usage();
		}
		*v++ = '\0';
		const char *k = argv[i];
		int rc = 0;
		if (!strcmp(k, "out"))
			out = v;
		else if (!strcmp(k, "bn"))
			bn = v;
		else if (!strcmp(k, "npy"))
			npy = v;
		else if (!strcmp(k, "n"))
			rc = int_arg(k, v, &n);
		else if (!strcmp(k, "class"))
			rc = int_arg(k, v, &cls);
		else if (!strcmp(k, "cols"))
			rc = int_arg(k, v, &cols);
		else if (!strcmp(k, "seed"))
			rc = int_arg(k, v, &seed);
		else if (!strcmp(k, "force"))
			rc = int_arg(k, v, &force);
		else if (!strcmp(k, "ema"))
			rc = int_arg(k, v, &ema);
		else if (!strcmp(k, "truncation")) {
			char *end;
			trunc = strtod(v, &end);
			if (*end || end == v || !(trunc >= 0.01)) {
				fprintf(stderr, "ganflow sample: truncation=%s: need a number >= 0.01\n", v);
				return 2;
			}
		} else {
			fprintf(stderr, "ganflow sample: unknown key '%s' (n, out, class, cols, seed, bn, npy, force, ema, "
			                "truncation)\n",
			        k);
			return 2;
		}
		if (rc)
			return rc;
	}
	int folder = is_folder(out);
	long max_n = folder ? 10000000 : 65536;
	if (n < 1 || n > max_n) {
		fprintf(stderr, "ganflow sample: n=%ld: need 1 <= n <= %ld%s\n", n, max_n,
		        folder ? "" : " for a grid (out=DIR/ writes more, one PNG each)");
		return 2;
	}
	if (cols < 1) {
		fprintf(stderr, "ganflow sample: cols=%ld: need cols >= 1\n", cols);
		return 2;
	}
	if (ema != 0 && ema != 1 && ema != -1) {
		fprintf(stderr, "ganflow sample: ema=%ld: need ema=0 or ema=1\n", ema);
		return 2;
	}
	if (strcmp(bn, "eval") && strcmp(bn, "batch")) {
		fprintf(stderr, "ganflow sample: bn=%s: need bn=eval or bn=batch\n", bn);
		return 2;
	}
	if (folder && npy) {
		fprintf(stderr, "ganflow sample: npy= goes with a grid (out=FILE.png), not with out=DIR/\n");
		return 2;
	}
	/* Batches of 256: the noise is drawn in the same order whatever the
	 * batch (256 z vectors are a whole number of the generator's 4-value
	 * blocks), so images do not depend on it; bn=batch normalises over all
	 * n at once, so it stays one batch. A grid or npy= needs every image. */
	long chunk = !strcmp(bn, "batch") ? n : n < 256 ? n : 256;
	if (chunk > 65536) {
		fprintf(stderr, "ganflow sample: bn=batch takes n <= 65536 (one batch)\n");
		return 2;
	}
	int keep_all = !folder;

	int status = 1;
	gf_backend *be = NULL;
	gf_generators *gs = NULL;
	float *images = NULL;
	int32_t *labels = NULL;
	uint8_t *png = NULL;
	float *zall = NULL;
	int *use = NULL;
	char note[96];
	if (gf_backend_open("cpu", NULL, &be) ||
	    gf_generators_open_with(&gs, path, be, (int)chunk, &(gf_generators_opts){ (int)ema, (float)trunc })) {
		fprintf(stderr, "ganflow sample: %s\n", gf_errmsg());
		goto out;
	}
	int c, h, w, classes = gf_generators_classes(gs);
	gf_generators_shape(gs, &c, &h, &w);
	if (cls >= 0 && cls >= classes) {
		fprintf(stderr, "ganflow sample: class=%ld, but %s\n", cls,
		        classes ? "the checkpoint has fewer classes" : "the generator is not conditional");
		goto out;
	}
	/* a conditional G draws only the classes its training data held */
	const char *seen = gf_generators_seen_text(gs);
	if (cls >= 0 && !gf_generators_seen(gs, (int)cls)) {
		fprintf(stderr, "ganflow sample: class=%ld: %s never saw a real image of class %ld: its training data held "
		                "class%s %s only\n", cls, path, cls, strpbrk(seen, ",-") ? "es" : "", seen);
		goto out;
	}
	int nuse = 0; /* the classes drawn, in turn */
	if (!(use = malloc((size_t)(classes ? classes : 1) * sizeof(int))))
		goto oom;
	for (int k = 0; k < classes; k++)
		if (gf_generators_seen(gs, k))
			use[nuse++] = k;
	if (cls < 0 && classes && nuse < classes)
		fprintf(stderr, "ganflow sample: %s: G is conditional on %d classes, its training data held images of %s "
		                "only: drawing those\n", path, classes, seen);
	long held = keep_all ? n : chunk;
	gf_tensor zin, zout;
	gf_net_shapes(gf_generators_net(gs, 0), &zin, &zout);
	size_t zdim = (size_t)zin.shape[1];
	images = malloc((size_t)held * (size_t)(c * h * w) * sizeof(float));
	labels = malloc((size_t)n * sizeof(int32_t));
	if (!images || !labels || (npy && !(zall = malloc((size_t)n * zdim * sizeof(float)))))
		goto oom;
	if (classes && cls < 0 && !folder)
		cols = (n + nuse - 1) / nuse; /* one row per class */
	for (long i = 0; i < n; i++) /* a folder: classes in turn, balanced */
		labels[i] = cls >= 0 ? (int32_t)cls
		            : !classes ? 0
		            : folder   ? (int32_t)use[i % nuse]
		                       : (int32_t)use[(i / cols) % nuse];
	if (folder) {
		if (make_dir(out, (int)force))
			goto out;
		for (int k = 0; k < (classes ? classes : 1); k++) {
			char d[4096];
			if (classes && ((cls >= 0 && k != cls) || !gf_generators_seen(gs, k)))
				continue;
			class_dir(d, sizeof(d), out, classes, k);
			if (mkdir(d, 0777) && errno != EEXIST) {
				fprintf(stderr, "ganflow sample: cannot create %s: %s\n", d, strerror(errno));
				goto out;
			}
		}
		if (!(png = malloc((size_t)(c * h * w))))
			goto oom;
	}
	gf_rng r;
	gf_rng_init(&r, (uint64_t)seed, 0x73616d706c65ull);
	double start = gf_now();
	for (long i = 0; i < n; i += chunk) {
		int b = (int)(n - i < chunk ? n - i : chunk);
		float *dst = keep_all ? images + (size_t)i * (size_t)(c * h * w) : images;
		if (gf_generators_sample(gs, &r, classes ? labels + i : NULL, b,
		                         !strcmp(bn, "eval") ? GF_EVAL : GF_TRAIN | GF_FREEZE_STATS, dst)) {
			gf_progress_done(NULL);
			fprintf(stderr, "ganflow sample: %s\n", gf_errmsg());
			goto out;
		}
		if (zall)
			memcpy(zall + (size_t)i * zdim, gf_generators_noise(gs), (size_t)b * zdim * sizeof(float));
		if (folder && write_files(out, classes, i, b, n, dst, labels + i, c, h, w, png))
			goto out;
		if (chunk < n) /* more than one batch: show how far it is */
			gf_progress_bar(folder ? "sample (PNG files)" : "sample", (uint64_t)(i + b), (uint64_t)n, start);
	}
	int ng = gf_generators_count(gs);
	if (folder) {
		printf("%s: %ld PNG files %dx%dx%d from %d generator%s, %s%s\n", out, n, c, h, w, ng,
		       ng > 1 ? "s (per-class mixture)" : "", classes ? "one folder per class" : "in unlabelled/",
		       weights_note(gs, trunc, note, sizeof(note)));
		status = 0;
		goto out;
	}
	if (npy && write_npys(npy, gs, n, zall, images, labels))
		goto out;
	int gw, gh;
	gf_grid_size((int)n, (int)cols, h, w, 2, &gw, &gh);
	png = malloc((size_t)gw * (size_t)gh * (size_t)c);
	if (!png)
		goto oom;
	gf_grid_tile(png, images, (int)n, c, h, w, (int)cols, 2);
	if (gf_png_write(out, png, gw, gh, c, 0)) {
		fprintf(stderr, "ganflow sample: %s\n", gf_errmsg());
		goto out;
	}
	printf("%s: %ld images %dx%dx%d from %d generator%s%s\n", out, n, c, h, w, ng, ng > 1 ? "s (per-class mixture)" : "",
	       weights_note(gs, trunc, note, sizeof(note)));
	status = 0;
	goto out;
oom:
	fprintf(stderr, "ganflow sample: out of memory\n");
out:
	gf_generators_close(gs);
	gf_backend_close(be);
	free(images);
	free(labels);
	free(use);
	free(png);
	free(zall);
	return status;
}
