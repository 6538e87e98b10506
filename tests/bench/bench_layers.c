/* tests/bench/run layers: forward + backward (input and parameter
 * gradients, training mode) of the layers modern GAN backbones are made
 * of, on the nn engine's CPU backend and in PyTorch 1.13 CPU
 * (tests/bench/torch_layers.py, the same modules) in the same run:
 *
 *   upblock    SN-ResNet up-block: bn, relu, nearest x2, SN conv 3x3, bn,
 *              relu, SN conv 3x3, plus shortcut x2 + SN conv 1x1 (8x8 -> 16x16)
 *   cbn        conditional batch norm from a 10-class embedding
 *   attention  SAGAN/BigGAN self-attention, SN on its four 1x1 convs
 *
 * at batch 64, 128 channels, 16x16 outputs, 2 threads (the peer with
 * OMP_NUM_THREADS and torch.set_num_threads equal). Each side reports the
 * best of `repeat` timings of `iters` iterations after two warm-up ones.
 *
 * usage: bench_layers [batch=64] [iters=10] [repeat=3] [threads=2] [rows=upblock,cbn,attention]
 * Last line: "layers: worst_ratio=X target=1.2" (ratio = PyTorch's time /
 * the engine's, so > 1 is faster than PyTorch).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ganflow/err.h>
#include <ganflow/lua.h>
#include <ganflow/nn.h>

#include "bench_util.h"

struct row {
	const char *name, *what, *code;
	int c, h, w, classes;
};

static const struct row rows[] = {
	{ "upblock", "SN-ResNet up-block 8x8 -> 16x16",
	  "return { input_shape = {128, 8, 8},"
	  " {'bn', 128}, {'relu'}, {'upsample', 2}, {'conv', 128, 128, 3, 1, 1, sn = true}, {'bn', 128}, {'relu'},"
	  " {'conv', 128, 128, 3, 1, 1, sn = true, name = 'main'},"
	  " {'upsample', 2, input = 'x'}, {'conv', 128, 128, 1, sn = true, name = 'sc'},"
	  " {'add', input = 'main', with = 'sc'} }",
	  128, 8, 8, 0 },
	{ "cbn", "conditional BN (10 classes)",
	  "return { input_shape = {128, 16, 16}, classes = 10, {'cbn', 128, classes = 10} }", 128, 16, 16, 10 },
	{ "attention", "self-attention, SN",
	  "return { input_shape = {128, 16, 16}, {'attention', 128, sn = true} }", 128, 16, 16, 0 },
};

#define CHECK(what, call)                                                                  \
	do {                                                                                   \
		int rc_ = (call);                                                                  \
		if (rc_) {                                                                         \
			fprintf(stderr, "bench_layers: %s: %s (%d)\n", what, gf_errmsg(), rc_);        \
			exit(1);                                                                       \
		}                                                                                  \
	} while (0)

/* The engine's best ms per iteration. */
static double engine(gf_backend *be, const struct row *r, int batch, int iters, int repeat)
{
	gf_value table;
	CHECK(r->name, gf_lua_eval(r->code, &table));
	gf_net_opts o = { .max_batch = batch };
	gf_net *net;
	CHECK(r->name, gf_net_create(&net, be, &table, &o));
	gf_value_free(&table);
	gf_rng rng;
	gf_rng_init(&rng, 1, 0);
	CHECK("init", gf_net_init(net, &rng));
	gf_tensor in, out;
	gf_net_shapes(net, &in, &out);
	size_t nx = (size_t)batch * r->c * r->h * r->w, ny = (size_t)gf_tensor_numel(&out) / (size_t)out.shape[0] * batch;
	float *x = malloc(nx * sizeof(float)), *dy = malloc(ny * sizeof(float));
	int32_t *y = malloc((size_t)batch * sizeof(int32_t));
	gf_rng_normal(&rng, x, nx, 0, 1);
	gf_rng_normal(&rng, dy, ny, 0, 1);
	for (int i = 0; i < batch; i++)
		y[i] = i % (r->classes > 0 ? r->classes : 1);
	int64_t xs[4] = { batch, r->c, r->h, r->w }, ys[1] = { batch };
	gf_tensor tx = { .dtype = GF_F32, .ndim = 4, .data = x }, ty = { .dtype = GF_I32, .ndim = 1, .data = y };
	memcpy(tx.shape, xs, sizeof(xs));
	memcpy(ty.shape, ys, sizeof(ys));
	double best = 1e30;
	for (int rep = -1; rep < repeat; rep++) {
		int n = rep < 0 ? 2 : iters; /* rep -1: warm-up */
		double t0 = bench_now();
		for (int i = 0; i < n; i++) {
			CHECK("forward", gf_net_forward(net, &tx, r->classes ? &ty : NULL, GF_TRAIN));
			CHECK("backward", gf_net_backward(net, dy, GF_NEED_DX | GF_NEED_DW));
		}
		CHECK("sync", be->ops->sync(be));
		double t = (bench_now() - t0) / n;
		if (rep >= 0 && t < best)
			best = t;
	}
	free(x);
	free(dy);
	free(y);
	gf_net_destroy(net);
	return best * 1e3;
}

/* PyTorch's best ms per iteration, or a negative value with why in line. */
static double peer(const struct row *r, int batch, int iters, int repeat, int threads, char *line, size_t size)
{
	const char *src = getenv("GF_SOURCE_DIR");
	char cmd[2048];
	snprintf(cmd, sizeof(cmd), "OMP_NUM_THREADS=%d /usr/bin/python3 %s/tests/bench/torch_layers.py %s %d %d %d %d 2>&1",
	         threads, src ? src : ".", r->name, batch, iters, repeat, threads);
	FILE *p = popen(cmd, "r");
	if (!p) {
		snprintf(line, size, "cannot run the peer");
		return -1;
	}
	double ms = -1;
	line[0] = 0;
	char buf[1024];
	while (fgets(buf, sizeof(buf), p)) {
		if (sscanf(buf, "ms_per_iter=%lf", &ms) != 1)
			snprintf(line, size, "%s", buf);
	}
	pclose(p);
	return ms;
}

int main(int argc, char **argv)
{
	int batch = 64, iters = 10, repeat = 3, threads = 2;
	const char *want = "upblock,cbn,attention";
	for (int i = 1; i < argc; i++) {
		const char *v;
		if (bench_arg(argv[i], "batch", &v)) batch = atoi(v);
		else if (bench_arg(argv[i], "iters", &v)) iters = atoi(v);
		else if (bench_arg(argv[i], "repeat", &v)) repeat = atoi(v);
		else if (bench_arg(argv[i], "threads", &v)) threads = atoi(v);
		else if (bench_arg(argv[i], "rows", &v)) want = v;
		else {
			fprintf(stderr, "usage: bench_layers [batch=64] [iters=10] [repeat=3] [threads=2] "
			                "[rows=upblock,cbn,attention]\n");
			return 2;
		}
	}
	if (batch < 1 || iters < 1 || repeat < 1 || threads < 1) {
		fprintf(stderr, "bench_layers: batch, iters, repeat and threads must be >= 1\n");
		return 2;
	}
	gf_backend_opts bo = { .threads = threads };
	gf_backend *be;
	CHECK("cpu backend", gf_backend_open("cpu", &bo, &be));
	printf("forward + backward, training mode, batch %d, %d threads (best of %d x %d iterations)\n", batch, threads,
	       repeat, iters);
	printf("%-10s %-34s %12s %12s %8s\n", "row", "module", "ganflow ms", "torch ms", "ratio");
	double worst = 1e30;
	int measured = 0;
	for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++) {
		const struct row *r = &rows[k];
		const char *at = strstr(want, r->name);
		size_t n = strlen(r->name);
		if (!at || (at != want && at[-1] != ',') || (at[n] && at[n] != ','))
			continue;
		double ours = engine(be, r, batch, iters, repeat);
		char why[1024];
		double theirs = peer(r, batch, iters, repeat, threads, why, sizeof(why));
		if (theirs <= 0) {
			printf("%-10s %-34s %12.2f %12s %8s  (%s)\n", r->name, r->what, ours, "-", "-", why);
			continue;
		}
		double ratio = theirs / ours;
		printf("%-10s %-34s %12.2f %12.2f %7.2fx\n", r->name, r->what, ours, theirs, ratio);
		if (ratio < worst)
			worst = ratio;
		measured++;
	}
	gf_backend_close(be);
	if (!measured) {
		printf("layers: worst_ratio=nan target=1.2 (no PyTorch figure: apt-get install python3-torch)\n");
		return 1;
	}
	printf("layers: worst_ratio=%.2f target=1.2\n", worst);
	return 0;
}
