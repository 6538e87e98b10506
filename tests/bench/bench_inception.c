/* tests/bench/run inception [n=1000] [batch=8] [threads=2] [peer=1]
 *
 * The FID Inception's pool3 features (luaconf/backbones/inception.lua,
 * random weights: the speed does not depend on them) for n images of
 * 299x299 on the CPU backend with `threads` threads, against PyTorch 1.13
 * on the CPU with the same thread count, the same network and batch
 * (tests/ref/fid_inception.py bench), measured in the same run. Prints
 * images/s, the GFLOP/s achieved (the network's multiply-adds x 2) beside
 * the backend's SGEMM GFLOP/s on a GEMM of Inception's shapes (the
 * ceiling), and as the last line
 *   inception: speedup_vs_torch=X target=1.00 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ganflow/err.h>
#include <ganflow/lua.h>
#include <ganflow/nn.h>

#include "bench_util.h"

#define CHECK(what, x)                                                          \
	do {                                                                        \
		int rc_ = (x);                                                          \
		if (rc_) {                                                              \
			fprintf(stderr, "bench_inception: %s: %s\n", what, gf_errmsg());   \
			exit(1);                                                            \
		}                                                                       \
	} while (0)

static double sgemm_gflops(gf_backend *be, int m, int n, int k)
{
	float *a = malloc((size_t)m * k * 4), *b = malloc((size_t)k * n * 4), *c = malloc((size_t)m * n * 4);
	for (size_t i = 0; i < (size_t)m * k; i++)
		a[i] = (float)(i % 7) * 0.1f;
	for (size_t i = 0; i < (size_t)k * n; i++)
		b[i] = (float)(i % 5) * 0.1f;
	be->ops->gemm(be, 0, 0, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
	int it = 0;
	double t0 = bench_now(), t;
	do {
		be->ops->gemm(be, 0, 0, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
		it++;
		t = bench_now() - t0;
	} while (t < 0.5);
	free(a);
	free(b);
	free(c);
	return 2.0 * m * n * k * it / t * 1e-9;
}

int main(int argc, char **argv)
{
	int n = 1000, batch = 8, threads = 2, peer = 1;
	for (int i = 1; i < argc; i++) {
		if (!strncmp(argv[i], "n=", 2))
			n = atoi(argv[i] + 2);
		else if (!strncmp(argv[i], "batch=", 6))
			batch = atoi(argv[i] + 6);
		else if (!strncmp(argv[i], "threads=", 8))
			threads = atoi(argv[i] + 8);
		else if (!strncmp(argv[i], "peer=", 5))
			peer = atoi(argv[i] + 5);
		else {
			fprintf(stderr, "usage: tests/bench/run inception [n=1000] [batch=8] [threads=2] [peer=1]\n");
			return 2;
		}
	}
	if (n < 1 || batch < 1 || threads < 1) {
		fprintf(stderr, "bench_inception: n, batch and threads must be positive\n");
		return 2;
	}
	gf_value table;
	gf_backend *be;
	gf_net *net;
	CHECK("backbones/inception.lua", gf_lua_eval("return require('backbones.inception').fid{classes = 0}", &table));
	gf_backend_opts bo = { .threads = threads };
	CHECK("cpu backend", gf_backend_open("cpu", &bo, &be));
	gf_net_opts no = { .max_batch = batch };
	CHECK("network", gf_net_create(&net, be, &table, &no));
	gf_rng r;
	gf_rng_init(&r, 1, 0);
	CHECK("init", gf_net_init(net, &r));
	double model, exec;
	gf_net_flops(net, 1, 0, &model, &exec);
	size_t per = (size_t)3 * 299 * 299;
	float *x = malloc((size_t)batch * per * sizeof(float));
	for (size_t i = 0; i < (size_t)batch * per; i++)
		x[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
	int64_t shape[4] = { batch, 3, 299, 299 };
	gf_tensor in = gf_tensor_make(x, GF_F32, 4, shape), f;
	CHECK("warm-up", gf_net_forward(net, &in, NULL, GF_EVAL));
	double t0 = bench_now();
	for (int done = 0; done < n; done += batch) {
		int b = n - done < batch ? n - done : batch;
		in.shape[0] = b;
		CHECK("forward", gf_net_forward(net, &in, NULL, GF_EVAL));
		CHECK("features", gf_net_node(net, "features", &f));
	}
	double dt = bench_now() - t0, ips = n / dt;
	double gemm = sgemm_gflops(be, 192, 2048, 768);   /* Mixed_6 1x1 convs: cout x (batch x 17x17) x cin */
	printf("inception pool3: n=%d batch=%d threads=%d\n", n, batch, threads);
	printf("%-48s %12.2f\n", "GFLOP per image (2 x multiply-adds)", model * 1e-9);
	printf("%-48s %12.2f\n", "ganflow images/s", ips);
	printf("%-48s %12.1f\n", "ganflow GFLOP/s", ips * model * 1e-9);
	printf("%-48s %12.1f\n", "SGEMM GFLOP/s ceiling (192x2048x768)", gemm);
	double tips = 0;
	if (peer) {
		char cmd[2048];
		const char *src = getenv("GF_SOURCE_DIR");
		snprintf(cmd, sizeof(cmd), "OMP_NUM_THREADS=%d /usr/bin/python3 %s/tests/ref/fid_inception.py bench %d %d %d",
		         threads, src ? src : ".", n, threads, batch);
		FILE *p = popen(cmd, "r");
		char line[512];
		while (p && fgets(line, sizeof(line), p)) {
			const char *s = strstr(line, "images_per_s=");
			if (s)
				tips = atof(s + 13);
		}
		if (p)
			pclose(p);
		printf("%-48s %12.2f\n", "torch 1.13 images/s (same threads, batch)", tips);
		printf("%-48s %12.1f\n", "torch GFLOP/s", tips * model * 1e-9);
	}
	printf("inception: speedup_vs_torch=%.2f target=1.00\n", tips > 0 ? ips / tips : 0.0);
	free(x);
	gf_net_destroy(net);
	gf_backend_close(be);
	gf_value_free(&table);
	return 0;
}
