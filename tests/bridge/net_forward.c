/* net_forward CHECKPOINT PART OUT.safetensors [n=8] [seed=1]: ganflow's
 * side of the PyTorch bridge test for networks that are not generators.
 * net_forward --make TABLE.json CHECKPOINT: a checkpoint of one part "t"
 * (role "test") holding the network of a JSON layer table, initialised
 * and run 3 times in training mode (running statistics that are not
 * 0 and 1), for the layer kinds no backbone uses. --make-perturbed: the
 * same with 0.3 N(0, 1) added to every parameter first (StyleGAN2's
 * kinds start with zero biases and noise strengths).
 *
 * Rebuilds part PART (an instance name) of a training checkpoint with
 * gf_ckpt_net, feeds it n inputs drawn U(-1, 1) from Philox(seed) (and
 * labels i % classes when the network takes them), runs the forward in
 * eval mode and writes the tensors "x", "labels" (when any), "y" (the
 * output) and "features" (when a layer has that name) to OUT. The test
 * feeds the same x to ganflow.torch.load(CHECKPOINT, PART) and compares. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/ckpt.h>
#include <ganflow/value.h>
#include <ganflow/err.h>
#include <ganflow/rng.h>
#include <ganflow/safetensors.h>

/* A node of the network copied to host memory (malloc'd into *host). */
static int to_host(gf_backend *be, const gf_tensor *t, float **host)
{
	size_t n = gf_tensor_numel(t);
	*host = malloc(n * sizeof(float));
	if (!*host)
		return -1;
	return be->ops->copy(be, *host, t->data, n * sizeof(float), GF_COPY_D2H);
}

/* Random inputs for a network: x (n, input shape) U(-1, 1) and labels
 * i % classes; both malloc'd. */
static int inputs(gf_net *net, int n, uint64_t seed, float **x, int32_t **labels, gf_tensor *xt, gf_tensor *lt,
                  int64_t *ls)
{
	gf_tensor in, o;
	gf_net_shapes(net, &in, &o);
	in.shape[0] = n;
	size_t numel = (size_t)gf_tensor_numel(&in);
	*x = malloc(numel * sizeof(float));
	*labels = malloc((size_t)n * sizeof(int32_t));
	if (!*x || !*labels)
		return -1;
	gf_rng r;
	gf_rng_init(&r, seed, 0x6272696467ull);
	gf_rng_uniform(&r, *x, numel, -1.0f, 1.0f);
	int classes = gf_net_classes(net);
	for (int i = 0; i < n; i++)
		(*labels)[i] = classes ? i % classes : 0;
	ls[0] = n;
	*xt = gf_tensor_make(*x, GF_F32, in.ndim, in.shape);
	*lt = gf_tensor_make(*labels, GF_I32, 1, ls);
	return 0;
}

static int make(const char *table_path, const char *out, int perturb)
{
	FILE *f = fopen(table_path, "rb");
	char text[1 << 16];
	size_t len = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
	if (f)
		fclose(f);
	if (!len) {
		fprintf(stderr, "net_forward: cannot read %s\n", table_path);
		return 1;
	}
	text[len] = '\0';
	gf_value table;
	gf_backend *be = NULL;
	gf_net *net = NULL;
	float *x = NULL;
	int32_t *labels = NULL;
	int status = 1;
	if (gf_value_from_json(text, &table))
		goto fail;
	if (gf_backend_open("cpu", NULL, &be) || gf_net_create(&net, be, &table, &(gf_net_opts){ .max_batch = 16 }))
		goto fail;
	gf_rng init = { 7, 0, 0 };
	if (gf_net_init(net, &init))
		goto fail;
	if (perturb) {
		size_t np;
		gf_net_block(net, GF_PARAMS, &np);
		float *p = malloc(np * sizeof(float)), *e = malloc(np * sizeof(float));
		int bad = !p || !e || gf_net_read(net, GF_PARAMS, p);
		if (!bad) {
			gf_rng_normal(&init, e, np, 0.0f, 0.3f);
			for (size_t i = 0; i < np; i++)
				p[i] += e[i];
			bad = gf_net_write(net, GF_PARAMS, p);
		}
		free(p);
		free(e);
		if (bad)
			goto fail;
	}
	for (int step = 0; step < 3; step++) {
		gf_tensor xt, lt;
		int64_t ls[1];
		free(x);
		free(labels);
		if (inputs(net, 16, 100 + (uint64_t)step, &x, &labels, &xt, &lt, ls) ||
		    gf_net_forward(net, &xt, gf_net_classes(net) ? &lt : NULL, GF_TRAIN))
			goto fail;
	}
	const char *meta[] = { "t.role", "test", "t.table", text, "t.class", "-1", NULL };
	gf_ckpt_part part = { "t.net", net, NULL };
	if (gf_ckpt_save(out, &part, 1, 3, NULL, meta))
		goto fail;
	status = 0;
	goto out;
fail:
	fprintf(stderr, "net_forward: %s: %s\n", table_path, gf_errmsg());
out:
	gf_net_destroy(net);
	gf_backend_close(be);
	gf_value_free(&table);
	free(x);
	free(labels);
	return status;
}

int main(int argc, char **argv)
{
	if (argc == 4 && (!strcmp(argv[1], "--make") || !strcmp(argv[1], "--make-perturbed")))
		return make(argv[2], argv[3], !strcmp(argv[1], "--make-perturbed"));
	if (argc < 4) {
		fprintf(stderr, "usage: net_forward CHECKPOINT PART OUT.safetensors [n=8] [seed=1]\n");
		return 2;
	}
	int n = argc > 4 ? atoi(argv[4]) : 8, seed = argc > 5 ? atoi(argv[5]) : 1;
	if (n < 1 || n > 4096) {
		fprintf(stderr, "net_forward: n = %d outside 1..4096\n", n);
		return 2;
	}
	gf_ckpt *c = NULL;
	gf_backend *be = NULL;
	gf_net *net = NULL;
	float *x = NULL, *y = NULL, *feat = NULL;
	int32_t *labels = NULL;
	int status = 1, part = -1;
	if (gf_ckpt_open(&c, argv[1]) || gf_backend_open("cpu", NULL, &be))
		goto fail;
	for (int i = 0; i < gf_ckpt_nparts(c); i++)
		if (!strcmp(gf_ckpt_part_name(c, i), argv[2]))
			part = i;
	if (part < 0) {
		fprintf(stderr, "net_forward: %s has no part '%s'\n", argv[1], argv[2]);
		goto out;
	}
	if (gf_ckpt_net(c, part, be, n, &net))
		goto fail;

	gf_tensor xt, lt;
	int64_t ls[1];
	if (inputs(net, n, (uint64_t)seed, &x, &labels, &xt, &lt, ls))
		goto fail;
	int classes = gf_net_classes(net);
	if (gf_net_forward(net, &xt, classes ? &lt : NULL, GF_EVAL))
		goto fail;

	gf_st_entry e[4];
	size_t ne = 0;
	e[ne++] = (gf_st_entry){ "x", xt };
	if (classes)
		e[ne++] = (gf_st_entry){ "labels", lt };
	gf_tensor t;
	if (gf_net_output(net, &t) || to_host(be, &t, &y))
		goto fail;
	e[ne++] = (gf_st_entry){ "y", gf_tensor_make(y, GF_F32, t.ndim, t.shape) };
	if (!gf_net_node(net, "features", &t)) {
		if (to_host(be, &t, &feat))
			goto fail;
		e[ne++] = (gf_st_entry){ "features", gf_tensor_make(feat, GF_F32, t.ndim, t.shape) };
	}
	if (gf_st_write(argv[3], e, ne, NULL))
		goto fail;
	status = 0;
	goto out;
fail:
	fprintf(stderr, "net_forward: %s\n", gf_errmsg());
out:
	gf_net_destroy(net);
	gf_backend_close(be);
	gf_ckpt_close(c);
	free(x);
	free(y);
	free(feat);
	free(labels);
	return status;
}
