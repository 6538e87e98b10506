/* bench_attention: forward + backward (input and weight gradients) of one
 * self-attention layer (core/nn/layers/attention.c) on the CPU backend, the
 * row "attention" of the layer benchmark: batch 64, (128, 16, 16),
 * 2 threads by default. Prints milliseconds per step (best of `repeat`
 * runs of `iters` steps) for sn = false and sn = true, one line each:
 *   attention sn=0 ms=12.3
 * Arguments: batch=, channels=, size=, threads=, iters=, repeat=.
 * tests/bench/attention.sh runs it next to the PyTorch module. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ganflow/err.h>
#include <ganflow/lua.h>
#include <ganflow/nn.h>

#include "bench_util.h"

#define CHECK(call)                                                                         \
	do {                                                                                \
		int rc_ = (call);                                                           \
		if (rc_) {                                                                  \
			fprintf(stderr, "%s: %s: %s\n", #call, gf_strerror(rc_), gf_errmsg()); \
			exit(1);                                                            \
		}                                                                           \
	} while (0)

int main(int argc, char **argv)
{
	int batch = 64, ch = 128, size = 16, threads = 2, iters = 10, repeat = 5;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *eq = strchr(a, '=');
		if (!eq) {
			fprintf(stderr, "bench_attention: argument '%s' is not key=value\n", a);
			return 2;
		}
		int v = atoi(eq + 1);
		if (!strncmp(a, "batch=", 6))
			batch = v;
		else if (!strncmp(a, "channels=", 9))
			ch = v;
		else if (!strncmp(a, "size=", 5))
			size = v;
		else if (!strncmp(a, "threads=", 8))
			threads = v;
		else if (!strncmp(a, "iters=", 6))
			iters = v;
		else if (!strncmp(a, "repeat=", 7))
			repeat = v;
		else {
			fprintf(stderr, "bench_attention: unknown argument '%s'\n", a);
			return 2;
		}
	}
	gf_backend *be;
	CHECK(gf_backend_open("cpu", &(gf_backend_opts){ .threads = threads }, &be));
	size_t nx = (size_t)batch * ch * size * size;
	float *x = malloc(nx * sizeof(float)), *dy = malloc(nx * sizeof(float));
	gf_rng r = { 1, 0, 0 };
	gf_rng_normal(&r, x, nx, 0.0f, 1.0f);
	gf_rng_normal(&r, dy, nx, 0.0f, 1.0f);
	for (int sn = 0; sn < 2; sn++) {
		char code[256];
		snprintf(code, sizeof(code), "return { {'attention', %d, sn = %s}, input_shape = {%d, %d, %d} }", ch,
		         sn ? "true" : "false", ch, size, size);
		gf_value t;
		CHECK(gf_lua_eval(code, &t));
		gf_net *net;
		CHECK(gf_net_create(&net, be, &t, &(gf_net_opts){ .max_batch = batch }));
		gf_value_free(&t);
		gf_rng init = { 2, 0, 0 };
		CHECK(gf_net_init(net, &init));
		/* gamma != 0, as after some training (the work is the same) */
		size_t np, nv;
		float *p = gf_net_block(net, GF_PARAMS, &np);
		const gf_view *v = gf_net_views(net, GF_PARAMS, &nv);
		p[v[nv - 1].offset] = 0.5f;
		gf_tensor in = gf_tensor_make(x, GF_F32, 4, (int64_t[]){ batch, ch, size, size });
		double best = 1e30;
		for (int rep = 0; rep < repeat + 1; rep++) {
			double t0 = bench_now();
			for (int i = 0; i < iters; i++) {
				CHECK(gf_net_forward(net, &in, NULL, GF_TRAIN));
				CHECK(gf_net_backward(net, dy, GF_NEED_DX | GF_NEED_DW));
			}
			double ms = (bench_now() - t0) * 1e3 / iters;
			if (rep && ms < best)   /* the first run warms up */
				best = ms;
		}
		printf("attention sn=%d ms=%.3f\n", sn, best);
		gf_net_destroy(net);
	}
	free(x);
	free(dy);
	gf_backend_close(be);
	return 0;
}
