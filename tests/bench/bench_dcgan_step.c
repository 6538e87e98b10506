/* bench_dcgan_step: full GAN iterations of the seed DC-GAN (tables 1-2 of
 * "Scalable Balanced Training of Conditional GANs") on the nn engine,
 * against ../shared/peers/torch_dcgan.py run in the same command.
 *
 * One iteration is what the peer does: z ~ N(0, 1); fake = G(z); G step
 * with BCE(D(fake), 1) back-propagated through D (D in train mode, dropout
 * on) into G, Adam on G; D step with (BCE(D(real), 1) + BCE(D(fake), 0)) / 2,
 * Adam on D. Both optimisers Adam(2e-4, 0.5, 0.999).
 *
 *   bench_dcgan_step [backend=cpu] [batch=64] [iters=20] [size=32]
 *                    [channels=1] [threads=2] [precision=fp32] [repeat=2]
 *                    [peer=1] [fuse=1]
 *
 * Prints images/s, the FLOPs of what the peer computes and of what this
 * engine executes (after its fusions) with the achieved GFLOP/s of each,
 * OpenBLAS's SGEMM GFLOP/s on GEMMs of the convolutions' shapes measured in
 * the same run (the ceiling), the peer's images/s, and as the last line
 * "dcgan_step: speedup_vs_torch=X.XX target=1.30". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include <ganflow/err.h>
#include <ganflow/log.h>
#include <ganflow/lua.h>
#include <ganflow/nn.h>

struct conf {
	const char *backend;
	int batch, iters, size, channels, threads, repeat, peer, fuse;
	const char *precision;
};

struct gan {
	gf_backend *be;
	gf_net *g, *d;
	gf_optim *og, *od;
	float *z, *real, *dpred;   /* device buffers */
	gf_rng noise;
	int B, Z;
};

static void die(const char *what, int rc)
{
	fprintf(stderr, "bench_dcgan_step: %s: %s (%s)\n", what, gf_errmsg(), gf_strerror(rc));
	exit(1);
}

#define CHECK(what, call)              \
	do {                           \
		int rc_ = (call);      \
		if (rc_)               \
			die(what, rc_); \
	} while (0)

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* CPU seconds of the whole process (all threads): steadier than the wall
 * clock on a shared machine, shown next to it. */
static double cpu_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- setup ---- */

static gf_net *build(gf_backend *be, const char *fn, const struct conf *c)
{
	char code[256];
	snprintf(code, sizeof(code), "return require('backbones.dcgan').%s{ size = %d, channels = %d }", fn, c->size,
	         c->channels);
	gf_value table;
	CHECK(code, gf_lua_eval(code, &table));
	gf_net_opts o = { .max_batch = c->batch, .flags = c->fuse ? 0 : GF_NET_NOFUSE };
	gf_net *net;
	CHECK(fn, gf_net_create(&net, be, &table, &o));
	gf_value_free(&table);
	return net;
}

static float *dalloc(gf_backend *be, size_t n)
{
	void *p;
	CHECK("alloc", be->ops->alloc(be, &p, n * sizeof(float)));
	return p;
}

static void setup(struct gan *s, const struct conf *c)
{
	gf_backend_opts bo = { .threads = c->threads };
	memset(s, 0, sizeof(*s));
	CHECK(c->backend, gf_backend_open(c->backend, &bo, &s->be));
	s->g = build(s->be, "G", c);
	s->d = build(s->be, "D", c);
	gf_rng init;
	gf_rng_init(&init, 1234, 0);
	CHECK("init G", gf_net_init(s->g, &init));
	CHECK("init D", gf_net_init(s->d, &init));
	gf_rng_init(gf_net_rng(s->d), 1234, 1);
	gf_rng_init(&s->noise, 1234, 2);
	gf_optim_conf oc;
	gf_optim_defaults(&oc, GF_OPT_ADAM);
	oc.lr = 2e-4f;
	oc.beta1 = 0.5f;
	oc.beta2 = 0.999f;
	CHECK("optimiser G", gf_optim_create(&s->og, s->g, &oc));
	CHECK("optimiser D", gf_optim_create(&s->od, s->d, &oc));
	gf_tensor in;
	gf_net_shapes(s->g, &in, NULL);
	s->B = c->batch;
	s->Z = (int)in.shape[1];
	s->z = dalloc(s->be, (size_t)s->B * s->Z);
	size_t img = (size_t)s->B * c->channels * c->size * c->size;
	s->real = dalloc(s->be, img);
	s->dpred = dalloc(s->be, (size_t)s->B);
	gf_rng r;
	gf_rng_init(&r, 99, 0);
	CHECK("real", s->be->ops->rng_uniform(s->be, s->real, img, -1.0f, 1.0f, &r));
}

static void teardown(struct gan *s)
{
	s->be->ops->free(s->be, s->z);
	s->be->ops->free(s->be, s->real);
	s->be->ops->free(s->be, s->dpred);
	gf_optim_destroy(s->og);
	gf_optim_destroy(s->od);
	gf_net_destroy(s->g);
	gf_net_destroy(s->d);
	gf_backend_close(s->be);
}

/* ---- one GAN iteration ---- */

static void iteration(struct gan *s, const struct conf *c, float *lg, float *ld)
{
	gf_backend *be = s->be;
	gf_tensor zt, fake, pred, dx, real;
	int64_t zs[2] = { s->B, s->Z };
	int64_t is[4] = { s->B, c->channels, c->size, c->size };
	zt = gf_tensor_make(s->z, GF_F32, 2, zs);
	real = gf_tensor_make(s->real, GF_F32, 4, is);
	zt.device = real.device = be->device;

	CHECK("noise", be->ops->rng_normal(be, s->z, (size_t)s->B * s->Z, 0.0f, 1.0f, &s->noise));
	s->noise.offset += gf_rng_blocks((size_t)s->B * s->Z);

	/* G step: BCE(D(G(z)), 1) through D (input gradient only) into G */
	CHECK("G forward", gf_net_forward(s->g, &zt, NULL, GF_TRAIN));
	CHECK("G output", gf_net_output(s->g, &fake));
	CHECK("D forward (fake, G step)", gf_net_forward(s->d, &fake, NULL, GF_TRAIN));
	CHECK("D output", gf_net_output(s->d, &pred));
	CHECK("G loss", gf_loss(be, GF_LOSS_BCE, lg, s->dpred, &pred, NULL, 1.0f, 1.0f));
	CHECK("D backward (dx)", gf_net_backward(s->d, s->dpred, GF_NEED_DX));
	CHECK("D dx", gf_net_dx(s->d, &dx));
	CHECK("G backward", gf_net_backward(s->g, dx.data, GF_NEED_DW));
	CHECK("G step", gf_optim_step(s->og));

	/* D step: (BCE(D(real), 1) + BCE(D(fake), 0)) / 2 */
	float l1, l2;
	CHECK("D forward (real)", gf_net_forward(s->d, &real, NULL, GF_TRAIN));
	CHECK("D output", gf_net_output(s->d, &pred));
	CHECK("D loss real", gf_loss(be, GF_LOSS_BCE, &l1, s->dpred, &pred, NULL, 1.0f, 0.5f));
	CHECK("D backward (real)", gf_net_backward(s->d, s->dpred, GF_NEED_DW));
	CHECK("D forward (fake)", gf_net_forward(s->d, &fake, NULL, GF_TRAIN));
	CHECK("D output", gf_net_output(s->d, &pred));
	CHECK("D loss fake", gf_loss(be, GF_LOSS_BCE, &l2, s->dpred, &pred, NULL, 0.0f, 0.5f));
	CHECK("D backward (fake)", gf_net_backward(s->d, s->dpred, GF_NEED_DW | GF_ACCUMULATE));
	CHECK("D step", gf_optim_step(s->od));
	CHECK("sync", be->ops->sync(be));
	*ld = l1 + l2;
}

/* ---- the SGEMM ceiling ---- */

static double sgemm_gflops(gf_backend *be, int m, int n, int k)
{
	float *a = dalloc(be, (size_t)m * k), *b = dalloc(be, (size_t)k * n), *cc = dalloc(be, (size_t)m * n);
	gf_rng r;
	gf_rng_init(&r, 7, 0);
	be->ops->rng_uniform(be, a, (size_t)m * k, -1, 1, &r);
	be->ops->rng_uniform(be, b, (size_t)k * n, -1, 1, &r);
	be->ops->gemm(be, 0, 0, m, n, k, 1.0f, a, k, b, n, 0.0f, cc, n);
	int it = 0;
	double t0 = now(), t;
	do {
		be->ops->gemm(be, 0, 0, m, n, k, 1.0f, a, k, b, n, 0.0f, cc, n);
		be->ops->sync(be);
		it++;
		t = now() - t0;
	} while (t < 0.4);
	be->ops->free(be, a);
	be->ops->free(be, b);
	be->ops->free(be, cc);
	return 2.0 * m * n * k * it / t * 1e-9;
}

/* OpenBLAS on its own (its threads, its splitting): the ceiling the
 * engine's split GEMMs are measured against. Call after the backend is
 * closed; it changes OpenBLAS's process-wide thread count. */
static double openblas_gflops(int threads, int m, int n, int k)
{
	float *a = malloc(sizeof(float) * (size_t)m * k), *b = malloc(sizeof(float) * (size_t)k * n);
	float *cc = malloc(sizeof(float) * (size_t)m * n);
	gf_rng r;
	gf_rng_init(&r, 7, 1);
	gf_rng_uniform(&r, a, (size_t)m * k, -1, 1);
	gf_rng_uniform(&r, b, (size_t)k * n, -1, 1);
	openblas_set_num_threads(threads);
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, cc, n);
	int it = 0;
	double t0 = now(), t;
	do {
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, cc, n);
		it++;
		t = now() - t0;
	} while (t < 0.4);
	free(a);
	free(b);
	free(cc);
	return 2.0 * m * n * k * it / t * 1e-9;
}

/* ---- the peer ---- */

static double run_peer(const struct conf *c, char *line, size_t size)
{
	const char *src = getenv("GF_SOURCE_DIR");
	const char *peer_dir = getenv("GF_PEER_DIR");
	char script[1024], cmd[4096];
	if (peer_dir)
		snprintf(script, sizeof(script), "%s/torch_dcgan.py", peer_dir);
	else
		snprintf(script, sizeof(script), "%s/../shared/peers/torch_dcgan.py", src ? src : ".");
	FILE *f = fopen(script, "r");
	if (!f) {
		snprintf(line, size, "peer script %.900s not found", script);
		return 0;
	}
	fclose(f);
	snprintf(cmd, sizeof(cmd),
	         "cd /tmp && OMP_NUM_THREADS=%d /usr/bin/python3 -c 'import torch' 2>/dev/null && "
	         "OMP_NUM_THREADS=%d /usr/bin/python3 %s %d %d %d %d 2>&1",
	         c->threads, c->threads, script, c->batch, c->iters, c->size, c->channels);
	FILE *p = popen(cmd, "r");
	if (!p) {
		snprintf(line, size, "cannot run the peer");
		return 0;
	}
	double ips = 0;
	char buf[1024];
	snprintf(line, size, "torch not available to /usr/bin/python3 (apt-get install python3-torch)");
	while (fgets(buf, sizeof(buf), p)) {
		char *at = strstr(buf, " images/s");
		if (strncmp(buf, "torch ", 6) == 0 && at) {
			char *q = at;
			while (q > buf && q[-1] != ' ')
				q--;
			ips = atof(q);
			buf[strcspn(buf, "\n")] = '\0';
			snprintf(line, size, "%s", buf);
		}
	}
	pclose(p);
	return ips;
}

/* ---- main ---- */

static int arg(const char *a, const char *key, const char **val)
{
	size_t n = strlen(key);
	if (strncmp(a, key, n) == 0 && a[n] == '=') {
		*val = a + n + 1;
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct conf c = { "cpu", 64, 20, 32, 1, 2, 2, 1, 1, "fp32" };
	for (int i = 1; i < argc; i++) {
		const char *v;
		if (arg(argv[i], "backend", &v)) c.backend = v;
		else if (arg(argv[i], "batch", &v)) c.batch = atoi(v);
		else if (arg(argv[i], "iters", &v)) c.iters = atoi(v);
		else if (arg(argv[i], "size", &v)) c.size = atoi(v);
		else if (arg(argv[i], "channels", &v)) c.channels = atoi(v);
		else if (arg(argv[i], "threads", &v)) c.threads = atoi(v);
		else if (arg(argv[i], "repeat", &v)) c.repeat = atoi(v);
		else if (arg(argv[i], "peer", &v)) c.peer = atoi(v);
		else if (arg(argv[i], "fuse", &v)) c.fuse = atoi(v);
		else if (arg(argv[i], "precision", &v)) c.precision = v;
		else {
			fprintf(stderr, "usage: bench_dcgan_step [backend=cpu] [batch=64] [iters=20] [size=32] [channels=1] "
			                "[threads=2] [precision=fp32] [repeat=2] [peer=1] [fuse=1]\n");
			return 2;
		}
	}
	if (strcmp(c.precision, "fp32") != 0) {
		fprintf(stderr, "bench_dcgan_step: precision=%s not implemented yet (fp32 only)\n", c.precision);
		return 2;
	}
	if (c.batch < 1 || c.iters < 1 || c.threads < 1 || c.repeat < 1) {
		fprintf(stderr, "bench_dcgan_step: batch, iters, threads and repeat must be positive\n");
		return 2;
	}

	struct gan s;
	setup(&s, &c);
	char summary[4096];
	gf_net_summary(s.g, summary, sizeof(summary));
	printf("dcgan_step: backend=%s threads=%d batch=%d img=%dx%dx%d precision=%s fuse=%d\nG as executed:\n%s",
	       c.backend, s.be->threads, c.batch, c.size, c.size, c.channels, c.precision, c.fuse, summary);

	/* FLOPs per iteration: the peer computes D's weight gradients in the G
	 * step too (they are zeroed afterwards); this engine skips them */
	double gf_m, gf_e, gb_m, gb_e, df, dbx, dbw, dbxw;
	gf_net_flops(s.g, c.batch, 0, &gf_m, &gf_e);
	gf_net_flops(s.g, c.batch, GF_NEED_DW, &gb_m, &gb_e);
	gf_net_flops(s.d, c.batch, 0, &df, NULL);
	gf_net_flops(s.d, c.batch, GF_NEED_DX, &dbx, NULL);
	gf_net_flops(s.d, c.batch, GF_NEED_DW, &dbw, NULL);
	gf_net_flops(s.d, c.batch, GF_NEED_DX | GF_NEED_DW, &dbxw, NULL);
	double peer_flops = gf_m + gb_m + 3 * df + dbxw + 2 * dbw;
	double exec_flops = gf_e + gb_e + 3 * df + dbx + 2 * dbw;

	float lg = 0, ld = 0;
	for (int i = 0; i < 3; i++)
		iteration(&s, &c, &lg, &ld);
	double best = 0, sum = 0;
	for (int r = 0; r < c.repeat; r++) {
		double t0 = now(), c0 = cpu_now();
		for (int i = 0; i < c.iters; i++)
			iteration(&s, &c, &lg, &ld);
		double ips = (double)c.iters * c.batch / (now() - t0);
		double cpu_ms = 1e3 * (cpu_now() - c0) / c.iters;
		printf("  run %d: %.1f images/s (%.2f ms/iter, %.1f CPU ms/iter)  loss G %.4f D %.4f\n", r + 1, ips,
		       1e3 * c.batch / ips, cpu_ms, lg, ld);
		best = ips > best ? ips : best;
		sum += ips;
	}
	if (!isfinite(lg) || !isfinite(ld))
		die("training", GF_ENONFINITE);
	double iter_s = c.batch / best;
	double ceil1 = sgemm_gflops(s.be, 128, 2048, 512), ceil2 = sgemm_gflops(s.be, 64, 2048, 512);
	teardown(&s);
	double ob1 = 0, ob2 = 0;
	if (strcmp(c.backend, "cpu") == 0) {
		ob1 = openblas_gflops(c.threads, 128, 2048, 512);
		ob2 = openblas_gflops(c.threads, 64, 2048, 512);
	}
	double ceiling = ceil1;
	ceiling = ceil2 > ceiling ? ceil2 : ceiling;
	ceiling = ob1 > ceiling ? ob1 : ceiling;
	ceiling = ob2 > ceiling ? ob2 : ceiling;

	double peer = 0;
	char peer_line[1024] = "peer not run (peer=0)";
	if (c.peer && strcmp(c.backend, "cpu") == 0) {
		for (int r = 0; r < c.repeat; r++) {
			char line[1024];
			double p = run_peer(&c, line, sizeof(line));
			if (p > peer || r == 0) {
				peer = p > peer ? p : peer;
				snprintf(peer_line, sizeof(peer_line), "%s", line);
			}
		}
	}

	printf("\n%-52s %12s\n", "dcgan_step", "value");
	printf("%-52s %12.1f\n", "ganflow images/s (best)", best);
	printf("%-52s %12.1f\n", "ganflow images/s (mean of runs)", sum / c.repeat);
	printf("%-52s %12.2f\n", "GFLOP per iteration, as the peer computes", peer_flops * 1e-9);
	printf("%-52s %12.2f\n", "GFLOP per iteration, as ganflow executes", exec_flops * 1e-9);
	printf("%-52s %12.1f\n", "achieved GFLOP/s (peer-equivalent work)", peer_flops / iter_s * 1e-9);
	printf("%-52s %12.1f\n", "achieved GFLOP/s (executed work)", exec_flops / iter_s * 1e-9);
	if (ob1 > 0) {
		printf("%-52s %12.1f\n", "OpenBLAS SGEMM GFLOP/s, its threads (128x2048x512)", ob1);
		printf("%-52s %12.1f\n", "OpenBLAS SGEMM GFLOP/s, its threads (64x2048x512)", ob2);
	}
	printf("%-52s %12.1f\n", "SGEMM GFLOP/s as the engine splits it (128x2048x512)", ceil1);
	printf("%-52s %12.1f\n", "SGEMM GFLOP/s as the engine splits it (64x2048x512)", ceil2);
	printf("%-52s %11.0f%%\n", "executed work / best SGEMM (ceiling)", 100.0 * exec_flops / iter_s * 1e-9 / ceiling);
	if (peer > 0) {
		printf("%-52s %12.1f\n", "torch images/s (best)", peer);
		printf("peer: %s\n", peer_line);
		printf("dcgan_step: speedup_vs_torch=%.2f target=1.30\n", best / peer);
	} else {
		printf("peer: %s\n", peer_line);
		printf("dcgan_step: speedup_vs_torch=n/a target=1.30\n");
	}
	return 0;
}
