/* `ganflow sample CHECKPOINT [n=64] [out=grid.png] [class=k] [cols=8] [seed=1]
 *  [bn=eval|batch]`: images from the generators of a training checkpoint.
 *
 * The checkpoint names its generators in its metadata ("<g>.role" =
 * "generator") with their layer tables as Lua text ("<g>.table") and the
 * class each one learned ("<g>.class", -1 for a single G). One G: n images
 * (a conditional G draws row r with label r, or every image with label k
 * when class=k). Per-class generators: with class=k the images come from
 * G_k; without, the grid shows the mixture of the per-class generators
 * stratified by class: row r from G_r (equal weights, the mixture of
 * classes the seed paper samples from). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>
#include <ganflow/image.h>
#include <ganflow/lua.h>
#include <ganflow/nn.h>
#include <ganflow/safetensors.h>
#include <ganflow/train.h>

#include "cmd.h"

#define MAX_GEN 256

typedef struct gen {
	char name[96];
	int cls;
	gf_net *net;
} gen;

static int usage(void)
{
	fprintf(stderr, "usage: ganflow sample CHECKPOINT [n=64] [out=grid.png] [class=k] [cols=8] [seed=1] [bn=eval|batch]\n"
	                "  generates n images from the generator(s) of a training checkpoint into a PNG grid\n");
	return 2;
}

/* Builds generator `name` of the checkpoint for batch n and loads its weights. */
static int load_gen(gf_backend *be, const char *path, gf_st_file *f, gen *g, int n)
{
	char key[160];
	snprintf(key, sizeof(key), "%.96s.table", g->name);
	const char *text = gf_st_meta(f, key);
	if (!text)
		return gf_seterr(GF_ENOTFOUND, "%s: no metadata '%s' (layer table of generator '%s')", path, key, g->name);
	size_t len = strlen(text) + 16;
	char *code = malloc(len);
	if (!code)
		return -ENOMEM;
	snprintf(code, len, "return %s", text);
	gf_value table;
	int rc = gf_lua_eval(code, &table);
	free(code);
	if (rc)
		return gf_seterr(rc, "%s: layer table of '%s': %s", path, g->name, gf_errmsg());
	gf_net_opts o = { .max_batch = n };
	rc = gf_net_create(&g->net, be, &table, &o);
	gf_value_free(&table);
	if (rc)
		return gf_seterr(rc, "%s: generator '%s': %s", path, g->name, gf_errmsg());
	snprintf(key, sizeof(key), "%.96s.net", g->name);
	return gf_state_load_net(path, key, g->net, NULL);
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
		char *end = NULL;
		if (!strcmp(argv[i], "out"))
			out = v;
		else if (!strcmp(argv[i], "bn"))
			bn = v;
		else if (!strcmp(argv[i], "n"))
			n = strtol(v, &end, 10);
		else if (!strcmp(argv[i], "class"))
			cls = strtol(v, &end, 10);
		else if (!strcmp(argv[i], "cols"))
			cols = strtol(v, &end, 10);
		else if (!strcmp(argv[i], "seed"))
			seed = strtol(v, &end, 10);
		else {
			fprintf(stderr, "ganflow sample: unknown key '%s' (n, out, class, cols, seed, bn)\n", argv[i]);
			return 2;
		}
		if (end && (*end || end == v)) {
			fprintf(stderr, "ganflow sample: %s=%s is not a number\n", argv[i], v);
			return 2;
		}
	}
	if (n < 1 || n > 65536 || cols < 1 || (strcmp(bn, "eval") && strcmp(bn, "batch"))) {
		fprintf(stderr, "ganflow sample: need 1 <= n <= 65536, cols >= 1, bn = eval or batch\n");
		return 2;
	}

	gf_st_file *f;
	gf_backend *be = NULL;
	gen gens[MAX_GEN];
	int ngen = 0, status = 1;
	float *z = NULL, *img = NULL, *all = NULL;
	int32_t *labels = NULL;
	uint8_t *png = NULL;
	memset(gens, 0, sizeof(gens));
	if (gf_st_open(&f, path)) {
		fprintf(stderr, "ganflow sample: %s\n", gf_errmsg());
		return 1;
	}
	/* the generators of the checkpoint */
	for (size_t i = 0; i < gf_st_meta_count(f) && ngen < MAX_GEN; i++) {
		const char *key = gf_st_meta_key(f, i);
		size_t kl = strlen(key);
		if (kl < 5 || strcmp(key + kl - 5, ".role") || strcmp(gf_st_meta(f, key), "generator"))
			continue;
		gen *g = &gens[ngen++];
		snprintf(g->name, sizeof(g->name), "%.*s", (int)(kl - 5), key);
		char ck[160];
		snprintf(ck, sizeof(ck), "%s.class", g->name);
		const char *c = gf_st_meta(f, ck);
		g->cls = c ? atoi(c) : -1;
	}
	if (!ngen) {
		fprintf(stderr, "ganflow sample: %s holds no generator (no '<stage>.role = generator' metadata): "
		                "is it a ganflow training checkpoint?\n", path);
		goto out;
	}
	if (gf_backend_open("cpu", NULL, &be)) {
		fprintf(stderr, "ganflow sample: %s\n", gf_errmsg());
		goto out;
	}
	for (int i = 0; i < ngen; i++)
		if (load_gen(be, path, f, &gens[i], (int)n)) {
			fprintf(stderr, "ganflow sample: %s\n", gf_errmsg());
			goto out;
		}
	gf_tensor in, shape;
	gf_net_shapes(gens[0].net, &in, &shape);
	int zdim = (int)in.shape[1], classes = gf_net_classes(gens[0].net);
	int c = (int)shape.shape[1], h = (int)shape.shape[2], w = (int)shape.shape[3];
	int perclass = ngen > 1 || gens[0].cls >= 0;
	int nclasses = perclass ? ngen : classes;
	if (cls >= 0 && cls >= (nclasses ? nclasses : 1)) {
		fprintf(stderr, "ganflow sample: class=%ld, but the checkpoint has %d classes\n", cls, nclasses);
		goto out;
	}
	if (cls >= 0 && !nclasses) {
		fprintf(stderr, "ganflow sample: class=%ld, but the generator is not conditional\n", cls);
		goto out;
	}
	size_t per = (size_t)(c * h * w);
	z = malloc((size_t)n * (size_t)zdim * sizeof(float));
	labels = malloc((size_t)n * sizeof(int32_t));
	all = malloc((size_t)n * per * sizeof(float));
	if (!z || !labels || !all) {
		fprintf(stderr, "ganflow sample: out of memory\n");
		goto out;
	}
	gf_rng r;
	gf_rng_init(&r, (uint64_t)seed, 0x73616d706c65ull);
	gf_rng_normal(&r, z, (size_t)n * (size_t)zdim, 0.0f, 1.0f);
	if (nclasses && cls < 0)
		cols = (n + nclasses - 1) / nclasses; /* one row per class */
	for (long i = 0; i < n; i++)
		labels[i] = cls >= 0 ? (int32_t)cls : nclasses ? (int32_t)((i / cols) % nclasses) : 0;
	int64_t zs[2] = { n, zdim }, ls[1] = { n };
	gf_tensor zt = gf_tensor_make(z, GF_F32, 2, zs), lt = gf_tensor_make(labels, GF_I32, 1, ls);
	unsigned mode = !strcmp(bn, "eval") ? GF_EVAL : GF_TRAIN | GF_FREEZE_STATS;
	for (int k = 0; k < ngen; k++) {
		gen *g = &gens[k];
		if (perclass && cls >= 0 && g->cls != cls)
			continue;
		if (gf_net_forward(g->net, &zt, classes ? &lt : NULL, mode)) {
			fprintf(stderr, "ganflow sample: %s: %s\n", g->name, gf_errmsg());
			goto out;
		}
		gf_tensor o;
		gf_net_output(g->net, &o);
		for (long i = 0; i < n; i++)
			if (!perclass || labels[i] == g->cls)
				memcpy(all + (size_t)i * per, (const float *)o.data + (size_t)i * per, per * sizeof(float));
	}
	int gw, gh;
	gf_grid_size((int)n, (int)cols, h, w, 2, &gw, &gh);
	png = malloc((size_t)gw * (size_t)gh * (size_t)c);
	if (!png) {
		fprintf(stderr, "ganflow sample: out of memory\n");
		goto out;
	}
	gf_grid_tile(png, all, (int)n, c, h, w, (int)cols, 2);
	if (gf_png_write(out, png, gw, gh, c, 0)) {
		fprintf(stderr, "ganflow sample: %s\n", gf_errmsg());
		goto out;
	}
	printf("%s: %ld images %dx%dx%d from %d generator%s%s\n", out, n, c, h, w, perclass && cls >= 0 ? 1 : ngen,
	       (perclass && cls >= 0) || ngen == 1 ? "" : "s", perclass && cls < 0 ? " (mixture of per-class generators)" : "");
	status = 0;
out:
	for (int i = 0; i < ngen; i++)
		gf_net_destroy(gens[i].net);
	gf_backend_close(be);
	gf_st_close(f);
	free(z);
	free(img);
	free(all);
	free(labels);
	free(png);
	return status;
}
