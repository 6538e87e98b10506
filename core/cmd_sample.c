/* `ganflow sample CHECKPOINT [n=64] [out=grid.png] [class=k] [cols=8] [seed=1]
 *  [bn=eval|batch] [npy=PREFIX] [ema=0|1] [truncation=T]`: images from the
 *  generators of a training checkpoint.
 *
 * One G: n images (a conditional G draws row r with label r, or every
 * image with label k when class=k). Per-class generators: with class=k the
 * images come from G_k; without, the grid shows the mixture of the
 * per-class generators stratified by class: row r from G_r (equal
 * weights, the mixture of classes the seed paper samples from).
 *
 * npy=PREFIX also writes what was generated as NumPy files: PREFIX.z.npy
 * (n, z) f32 noise, PREFIX.images.npy (n, c, h, w) f32 and, with labels,
 * PREFIX.labels.npy (n) i32 (the PyTorch bridge's tests compare with them).
 *
 * A checkpoint of a g_step with `ema` holds G's moving average: it is used
 * unless ema=0 (ema=1 requires it). truncation=T redraws every noise value
 * of magnitude above T (the truncation trick of BigGAN). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>
#include <ganflow/evaluate.h>
#include <ganflow/image.h>

#include "cmd.h"

static int usage(void)
{
	fprintf(stderr, "usage: ganflow sample CHECKPOINT [n=64] [out=grid.png] [class=k] [cols=8] [seed=1] [bn=eval|batch] [npy=PREFIX]\n"
	                "       [ema=0|1] [truncation=T]\n"
	                "  generates n images from the generator(s) of a training checkpoint into a PNG grid\n"
	                "  (ema: G's moving average, used by default when the checkpoint has one; truncation:\n"
	                "  noise values beyond +-T redrawn)\n");
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

/* The noise gf_generators_sample drew (truncated or not), the images and
 * the labels, as PREFIX.*.npy. */
static int write_npys(const char *prefix, gf_generators *gs, long n, const float *images,
                      const int32_t *labels)
{
	gf_tensor in, o;
	gf_net_shapes(gf_generators_net(gs, 0), &in, &o);
	long zs[2] = { n, (long)in.shape[1] }, is[4] = { n, (long)o.shape[1], (long)o.shape[2], (long)o.shape[3] };
	float *z = malloc((size_t)n * (size_t)zs[1] * sizeof(float));
	if (!z) {
		fprintf(stderr, "ganflow sample: out of memory\n");
		return 1;
	}
	memcpy(z, gf_generators_noise(gs), (size_t)n * (size_t)zs[1] * sizeof(float));
	int rc = write_npy(prefix, "z", "<f4", 2, zs, z) || write_npy(prefix, "images", "<f4", 4, is, images) ||
	         (gf_generators_classes(gs) && write_npy(prefix, "labels", "<i4", 1, &n, labels));
	free(z);
	return rc;
}

int gf_cmd_sample(int argc, char **argv)
{
	if (argc < 2 || argv[1][0] == '-')
		return usage();
	const char *path = argv[1], *out = "grid.png", *bn = "eval", *npy = NULL;
	long n = 64, cls = -1, cols = 8, seed = 1, ema = -1;
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
			fprintf(stderr, "ganflow sample: unknown key '%s' (n, out, class, cols, seed, bn, npy, ema, truncation)\n",
			        k);
			return 2;
		}
		if (rc)
			return rc;
	}
	if (n < 1 || n > 65536) {
		fprintf(stderr, "ganflow sample: n=%ld: need 1 <= n <= 65536\n", n);
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

	int status = 1;
	gf_backend *be = NULL;
	gf_generators *gs = NULL;
	float *images = NULL;
	int32_t *labels = NULL;
	uint8_t *png = NULL;
	if (gf_backend_open("cpu", NULL, &be) || gf_generators_open_with(&gs, path, be, (int)n,
	                                                       &(gf_generators_opts){ (int)ema, (float)trunc })) {
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
	images = malloc((size_t)n * (size_t)(c * h * w) * sizeof(float));
	labels = malloc((size_t)n * sizeof(int32_t));
	if (!images || !labels)
		goto oom;
	if (classes && cls < 0)
		cols = (n + classes - 1) / classes; /* one row per class */
	for (long i = 0; i < n; i++)
		labels[i] = cls >= 0 ? (int32_t)cls : classes ? (int32_t)((i / cols) % classes) : 0;
	gf_rng r;
	gf_rng_init(&r, (uint64_t)seed, 0x73616d706c65ull);
	if (gf_generators_sample(gs, &r, classes ? labels : NULL, (int)n,
	                         !strcmp(bn, "eval") ? GF_EVAL : GF_TRAIN | GF_FREEZE_STATS, images)) {
		fprintf(stderr, "ganflow sample: %s\n", gf_errmsg());
		goto out;
	}
	if (npy && write_npys(npy, gs, n, images, labels))
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
	int ng = gf_generators_count(gs);
	printf("%s: %ld images %dx%dx%d from %d generator%s%s", out, n, c, h, w, ng, ng > 1 ? "s (per-class mixture)" : "",
	       gf_generators_ema(gs) ? ", moving-average weights" : "");
	if (trunc > 0)
		printf(", truncation %g", trunc);
	printf("\n");
	status = 0;
	goto out;
oom:
	fprintf(stderr, "ganflow sample: out of memory\n");
out:
	gf_generators_close(gs);
	gf_backend_close(be);
	free(images);
	free(labels);
	free(png);
	return status;
}
