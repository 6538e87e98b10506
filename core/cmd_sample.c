/* `ganflow sample CHECKPOINT [n=64] [out=grid.png] [class=k] [cols=8] [seed=1]
 *  [bn=eval|batch]`: images from the generators of a training checkpoint.
 *
 * One G: n images (a conditional G draws row r with label r, or every
 * image with label k when class=k). Per-class generators: with class=k the
 * images come from G_k; without, the grid shows the mixture of the
 * per-class generators stratified by class: row r from G_r (equal
 * weights, the mixture of classes the seed paper samples from). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>
#include <ganflow/evaluate.h>
#include <ganflow/image.h>

#include "cmd.h"

static int usage(void)
{
	fprintf(stderr, "usage: ganflow sample CHECKPOINT [n=64] [out=grid.png] [class=k] [cols=8] [seed=1] [bn=eval|batch]\n"
	                "  generates n images from the generator(s) of a training checkpoint into a PNG grid\n");
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

int gf_cmd_sample(int argc, char **argv)
{
	if (argc < 2 || argv[1][0] == '-')
		return usage();
	const char *path = argv[1], *out = "grid.png", *bn = "eval";
	long n = 64, cls = -1, cols = 8, seed = 1;
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
		else if (!strcmp(k, "n"))
			rc = int_arg(k, v, &n);
		else if (!strcmp(k, "class"))
			rc = int_arg(k, v, &cls);
		else if (!strcmp(k, "cols"))
			rc = int_arg(k, v, &cols);
		else if (!strcmp(k, "seed"))
			rc = int_arg(k, v, &seed);
		else {
			fprintf(stderr, "ganflow sample: unknown key '%s' (n, out, class, cols, seed, bn)\n", k);
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
	if (gf_backend_open("cpu", NULL, &be) || gf_generators_open(&gs, path, be, (int)n)) {
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
	printf("%s: %ld images %dx%dx%d from %d generator%s\n", out, n, c, h, w, ng, ng > 1 ? "s (per-class mixture)" : "");
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
