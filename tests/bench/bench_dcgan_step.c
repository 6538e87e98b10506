/* bench_dcgan_step: full GAN iterations of the seed DC-GAN (tables 1-2 of
 * "Scalable Balanced Training of Conditional GANs") on the nn engine,
 * against tests/bench/torch_dcgan.py (PyTorch) run in the same command.
 *
 * One iteration is what the peer does: z ~ N(0, 1); fake = G(z); G step
 * with BCE(D(fake), 1) back-propagated through D (D in train mode, dropout
 * on) into G, Adam on G; D step with (BCE(D(real), 1) + BCE(D(fake), 0)) / 2,
 * Adam on D. Both optimisers Adam(2e-4, 0.5, 0.999).
 *
 * CPU (the default):
 *   bench_dcgan_step [backend=cpu] [batch=64] [iters=20] [size=32]
 *                    [channels=1] [threads=2] [precision=fp32] [repeat=2]
 *                    [peer=1] [fuse=1]
 * Prints images/s, the FLOPs of what the peer computes and of what this
 * engine executes (after its fusions) with the achieved GFLOP/s of each,
 * OpenBLAS's SGEMM GFLOP/s on GEMMs of the convolutions' shapes measured in
 * the same run (the ceiling), the peer's images/s, and as the last line
 * "dcgan_step: speedup_vs_torch=X.XX target=1.30".
 *
 * CUDA:
 *   bench_dcgan_step backend=cuda [batches=64,256,1024]
 *                    [precision=fp32,tf32,bf16] [graphs=both|0|1]
 *                    [iters=200] [repeat=2] [layout=auto] [up2=subpixel]
 *                    [deterministic=1] [size=32] [channels=1] [peer=1]
 *                    [device=0]
 * For each batch and precision (tf32 = fp32 tensors with TF32
 * convolutions and GEMMs, PyTorch's allow_tf32 for both; fp16 also accepted):
 * images/s and achieved TFLOP/s (the model's FLOPs as PyTorch computes
 * them, gf_net_flops), eagerly and with the G step and the D step each
 * captured once as a CUDA graph and replayed; the peer on the same GPU at
 * each batch (python3 torch_dcgan.py B ITERS SIZE CHANNELS; GF_PYTHON
 * overrides the interpreter). Ratio lines for the targets, the last
 * "dcgan_step: speedup_vs_torch_b64=X target=2.0". Without a usable GPU it
 * prints "dcgan_step: no CUDA device (...) — GPU figures not measured" and
 * exits 0. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"

#include <ganflow/err.h>
#include <ganflow/log.h>
#include <ganflow/lua.h>
#include <ganflow/nn.h>

struct conf {
	const char *backend;
	int batch, iters, size, channels, threads, repeat, peer, fuse;
	const char *precision;
	/* CUDA */
	const char *batches, *graphs, *layout, *up2;
	int device, iters_set, det;
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
	double t0 = bench_now(), t;
	do {
		be->ops->gemm(be, 0, 0, m, n, k, 1.0f, a, k, b, n, 0.0f, cc, n);
		be->ops->sync(be);
		it++;
		t = bench_now() - t0;
	} while (t < 0.4);
	be->ops->free(be, a);
	be->ops->free(be, b);
	be->ops->free(be, cc);
	return 2.0 * m * n * k * it / t * 1e-9;
}

/* ---- the peer ---- */

static double run_peer_with(const struct conf *c, const char *python, int cuda, char *line, size_t size);

static double run_peer(const struct conf *c, char *line, size_t size)
{
	return run_peer_with(c, "/usr/bin/python3", 0, line, size);
}

/* Runs the peer with `python`; with cuda, the line must say it ran on the
 * GPU (torch's "cuda" device), else 0 is returned with the reason. */
static double run_peer_with(const struct conf *c, const char *python, int cuda, char *line, size_t size)
{
	const char *src = getenv("GF_SOURCE_DIR");
	const char *peer_dir = getenv("GF_PEER_DIR");
	char script[1024], cmd[4096];
	if (peer_dir)
		snprintf(script, sizeof(script), "%s/torch_dcgan.py", peer_dir);
	else
		snprintf(script, sizeof(script), "%s/tests/bench/torch_dcgan.py", src ? src : ".");
	FILE *f = fopen(script, "r");
	if (!f) {
		snprintf(line, size, "peer script %.900s not found", script);
		return 0;
	}
	fclose(f);
	snprintf(cmd, sizeof(cmd),
	         "cd /tmp && OMP_NUM_THREADS=%d %s -c 'import torch' 2>/dev/null && "
	         "OMP_NUM_THREADS=%d %s %s %d %d %d %d 2>&1",
	         c->threads, python, c->threads, python, script, c->batch, c->iters, c->size, c->channels);
	FILE *p = popen(cmd, "r");
	if (!p) {
		snprintf(line, size, "cannot run the peer");
		return 0;
	}
	double ips = 0;
	char buf[1024];
	snprintf(line, size, "torch not available to %s (apt-get install python3-torch)", python);
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
	if (cuda && ips > 0 && !strstr(line, " cuda ")) {
		char ran[600];
		snprintf(ran, sizeof(ran), "%.500s", line);
		snprintf(line, size, "the peer did not run on the GPU (torch without CUDA?): %s", ran);
		return 0;
	}
	return ips;
}

/* ---- FLOPs ---- */

/* FLOPs per iteration: the peer computes D's weight gradients in the G
 * step too (they are zeroed afterwards); this engine skips them. */
static void iter_flops(const gf_net *g, const gf_net *d, int batch, double *peer, double *exec)
{
	double gf_m, gf_e, gb_m, gb_e, df, dbx, dbw, dbxw;
	gf_net_flops(g, batch, 0, &gf_m, &gf_e);
	gf_net_flops(g, batch, GF_NEED_DW, &gb_m, &gb_e);
	gf_net_flops(d, batch, 0, &df, NULL);
	gf_net_flops(d, batch, GF_NEED_DX, &dbx, NULL);
	gf_net_flops(d, batch, GF_NEED_DW, &dbw, NULL);
	gf_net_flops(d, batch, GF_NEED_DX | GF_NEED_DW, &dbxw, NULL);
	*peer = gf_m + gb_m + 3 * df + dbxw + 2 * dbw;
	*exec = gf_e + gb_e + 3 * df + dbx + 2 * dbw;
}

/* ==== CUDA ====
 *
 * The same iteration, written so that nothing in it waits for the host:
 * the noise is drawn on the device, the losses go to device scalars
 * (loss_dev) read once after the timed loop, and the real batch sits in
 * device memory as the peer's does. The G step and the D step are each
 * bracketed by graph_begin/graph_end when graphs are on: the first
 * iteration captures them (and runs them), later ones replay; the code of
 * the steps is the same either way. */

struct cu_gan {
	gf_backend *be;
	gf_net *g, *d;
	gf_optim *og, *od;
	float *z, *real, *dp, *loss;   /* device: (B, Z), (B, C, S, S), (B), (3) */
	gf_rng noise;
	int B, Z, graphs;
	gf_graph *gg, *gd;
	gf_tensor zt, rt;
};

static int cu_bce(struct cu_gan *s, const gf_tensor *pred, float target, float scale, int slot)
{
	gf_loss_desc d = { GF_LOSS_BCE, (int)pred->shape[0], (int)(gf_tensor_numel(pred) / pred->shape[0]), target,
	                   scale };
	return s->be->ops->loss_dev(s->be, s->loss + slot, s->dp, pred->data, NULL, NULL, &d);
}

static int cu_g_step(struct cu_gan *s)
{
	gf_backend *be = s->be;
	gf_tensor fake, pred, dx;
	int rc = be->ops->rng_normal(be, s->z, (size_t)s->B * s->Z, 0.0f, 1.0f, &s->noise);
	if (rc)
		return rc;
	s->noise.offset += gf_rng_blocks((size_t)s->B * s->Z);
	if ((rc = gf_net_forward(s->g, &s->zt, NULL, GF_TRAIN)) || (rc = gf_net_output(s->g, &fake)) ||
	    (rc = gf_net_forward(s->d, &fake, NULL, GF_TRAIN)) || (rc = gf_net_output(s->d, &pred)) ||
	    (rc = cu_bce(s, &pred, 1.0f, 1.0f, 0)) || (rc = gf_net_backward(s->d, s->dp, GF_NEED_DX)) ||
	    (rc = gf_net_dx(s->d, &dx)) || (rc = gf_net_backward(s->g, dx.data, GF_NEED_DW)))
		return rc;
	return gf_optim_step(s->og);
}

static int cu_d_step(struct cu_gan *s)
{
	gf_tensor fake, pred;
	int rc;
	if ((rc = gf_net_output(s->g, &fake)) || (rc = gf_net_forward(s->d, &s->rt, NULL, GF_TRAIN)) ||
	    (rc = gf_net_output(s->d, &pred)) || (rc = cu_bce(s, &pred, 1.0f, 0.5f, 1)) ||
	    (rc = gf_net_backward(s->d, s->dp, GF_NEED_DW)) || (rc = gf_net_forward(s->d, &fake, NULL, GF_TRAIN)) ||
	    (rc = gf_net_output(s->d, &pred)) || (rc = cu_bce(s, &pred, 0.0f, 0.5f, 2)) ||
	    (rc = gf_net_backward(s->d, s->dp, GF_NEED_DW | GF_ACCUMULATE)))
		return rc;
	return gf_optim_step(s->od);
}

static void cu_iteration(struct cu_gan *s)
{
	gf_backend *be = s->be;
	if (!s->graphs) {
		CHECK("G step", cu_g_step(s));
		CHECK("D step", cu_d_step(s));
		return;
	}
	CHECK("graph_begin (G step)", be->ops->graph_begin(be, &s->gg));
	CHECK("G step", cu_g_step(s));
	CHECK("graph_end (G step)", be->ops->graph_end(be, s->gg));
	CHECK("graph_begin (D step)", be->ops->graph_begin(be, &s->gd));
	CHECK("D step", cu_d_step(s));
	CHECK("graph_end (D step)", be->ops->graph_end(be, s->gd));
}

static gf_net *cu_build(gf_backend *be, const char *fn, const struct conf *c, int batch)
{
	char code[256];
	snprintf(code, sizeof(code), "return require('backbones.dcgan').%s{ size = %d, channels = %d }", fn, c->size,
	         c->channels);
	gf_value table;
	CHECK(code, gf_lua_eval(code, &table));
	gf_net_opts o = { .max_batch = batch, .flags = c->fuse ? 0 : GF_NET_NOFUSE };
	gf_net *net;
	CHECK(fn, gf_net_create(&net, be, &table, &o));
	gf_value_free(&table);
	return net;
}

/* A backend for one precision: "fp32", "tf32" (f32 tensors, TF32
 * convolutions and GEMMs: the precision g_step / d_step's precision =
 * "tf32" opens), "bf16", "fp16". */
static int cu_open(const struct conf *c, const char *prec, gf_backend **be)
{
	gf_backend_opts bo = { .threads = 1, .device_index = c->device };
	int rc = gf_precision_parse(prec, &bo.precision);
	if (!rc)
		rc = gf_layout_parse(c->layout, &bo.layout);
	if (!rc)
		rc = gf_backend_open("cuda", &bo, be);
	if (rc)
		return rc;
	if (!GF_BACKEND_HAS(*be, graph_begin) || !GF_BACKEND_HAS(*be, loss_dev)) {
		gf_backend_close(*be);
		return gf_seterr(GF_EABI, "backend_cuda.so predates graphs and loss_dev");
	}
	if ((rc = (*be)->ops->set_option(*be, "tf32", strcmp(prec, "tf32") == 0 ? "1" : "0")) ||
	    (rc = (*be)->ops->set_option(*be, "up2", c->up2)) ||
	    (rc = (*be)->ops->set_option(*be, "deterministic", c->det ? "1" : "0"))) {
		gf_backend_close(*be);
		return rc;
	}
	return 0;
}

static void cu_setup(struct cu_gan *s, const struct conf *c, const char *prec, int batch, int graphs)
{
	memset(s, 0, sizeof(*s));
	CHECK(prec, cu_open(c, prec, &s->be));
	gf_backend *be = s->be;
	s->g = cu_build(be, "G", c, batch);
	s->d = cu_build(be, "D", c, batch);
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
	s->B = batch;
	s->Z = (int)in.shape[1];
	s->graphs = graphs;
	s->z = dalloc(be, (size_t)s->B * s->Z);
	size_t img = (size_t)s->B * c->channels * c->size * c->size;
	s->real = dalloc(be, img);
	s->dp = dalloc(be, (size_t)s->B);
	s->loss = dalloc(be, 3);
	gf_rng r;
	gf_rng_init(&r, 99, 0);
	CHECK("real", be->ops->rng_uniform(be, s->real, img, -1.0f, 1.0f, &r));
	int64_t zs[2] = { s->B, s->Z }, is[4] = { s->B, c->channels, c->size, c->size };
	s->zt = gf_tensor_make(s->z, GF_F32, 2, zs);
	s->rt = gf_tensor_make(s->real, GF_F32, 4, is);
	s->zt.device = s->rt.device = be->device;
}

static void cu_teardown(struct cu_gan *s)
{
	gf_backend *be = s->be;
	be->ops->graph_destroy(be, s->gg);
	be->ops->graph_destroy(be, s->gd);
	be->ops->free(be, s->z);
	be->ops->free(be, s->real);
	be->ops->free(be, s->dp);
	be->ops->free(be, s->loss);
	gf_optim_destroy(s->og);
	gf_optim_destroy(s->od);
	gf_net_destroy(s->g);
	gf_net_destroy(s->d);
	gf_backend_close(be);
}

struct cu_result {
	int batch;
	char prec[8];
	int graphs;
	double ips, tflops;
	char layout[8];
	int ok;
};

/* Best images/s of `repeat` timed runs of `iters` iterations, after a
 * warm-up (cuDNN's algorithm search, the graph captures). */
static double cu_measure(const struct conf *c, const char *prec, int batch, int graphs, double *flops, char *layout)
{
	struct cu_gan s;
	cu_setup(&s, c, prec, batch, graphs);
	double exec;
	iter_flops(s.g, s.d, batch, flops, &exec);
	for (int i = 0; i < 5; i++)
		cu_iteration(&s);
	CHECK("sync", s.be->ops->sync(s.be));
	double best = 0;
	for (int r = 0; r < c->repeat; r++) {
		double t0 = bench_now();
		for (int i = 0; i < c->iters; i++)
			cu_iteration(&s);
		CHECK("sync", s.be->ops->sync(s.be));
		double ips = (double)c->iters * batch / (bench_now() - t0);
		best = ips > best ? ips : best;
	}
	float l[3];
	CHECK("losses", s.be->ops->copy(s.be, l, s.loss, sizeof(l), GF_COPY_D2H));
	if (!isfinite(l[0]) || !isfinite(l[1] + l[2]))
		die("training (non-finite loss)", GF_ENONFINITE);
	gf_backend_stats st;
	CHECK("stats", s.be->ops->stats(s.be, &st));
	snprintf(layout, 8, "%s", st.layout == GF_LAYOUT_NHWC ? "nhwc" : "nchw");
	printf("  batch %4d %-4s %-6s graphs=%d: %10.1f images/s  %8.3f ms/iter  loss G %.4f D %.4f%s\n", batch, prec,
	       layout, graphs, best, 1e3 * batch / best, l[0], l[1] + l[2],
	       st.skipped_steps ? "  (fp16: skipped updates)" : "");
	fflush(stdout);
	cu_teardown(&s);
	return best;
}

/* Splits a comma list into at most max items (pointers into buf). */
static int split(char *buf, char **items, int max)
{
	int n = 0;
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t && n < max; t = strtok_r(NULL, ",", &save))
		items[n++] = t;
	return n;
}

static int main_cuda(struct conf *c)
{
	/* is there a GPU at all? */
	gf_backend *probe = NULL;
	gf_backend_opts bo = { .threads = 1, .device_index = c->device };
	int rc = gf_backend_open("cuda", &bo, &probe);
	if (rc) {
		printf("dcgan_step: no CUDA device (%s) — GPU figures not measured\n", gf_errmsg());
		return 0;
	}
	gf_backend_stats st;
	char devname[64] = "?";
	if (GF_BACKEND_HAS(probe, stats) && probe->ops->stats(probe, &st) == 0)
		snprintf(devname, sizeof(devname), "%s", st.device_name);
	gf_backend_close(probe);

	char bbuf[256], pbuf[256];
	snprintf(bbuf, sizeof(bbuf), "%s", c->batches);
	snprintf(pbuf, sizeof(pbuf), "%s", c->precision);
	char *bl[16], *pl[8];
	int nb = split(bbuf, bl, 16), np = split(pbuf, pl, 8);
	int gmodes[2], ng = 0;
	if (!strcmp(c->graphs, "both") || !strcmp(c->graphs, "0"))
		gmodes[ng++] = 0;
	if (!strcmp(c->graphs, "both") || !strcmp(c->graphs, "1"))
		gmodes[ng++] = 1;
	if (!nb || !np || !ng) {
		fprintf(stderr, "bench_dcgan_step: empty batches=, precision= or bad graphs= (both, 0, 1)\n");
		return 2;
	}
	for (int i = 0; i < np; i++) {
		if (strcmp(pl[i], "fp32") && strcmp(pl[i], "tf32") && strcmp(pl[i], "bf16") && strcmp(pl[i], "fp16")) {
			fprintf(stderr, "bench_dcgan_step: precision %s (fp32, tf32, bf16, fp16)\n", pl[i]);
			return 2;
		}
	}
	printf("dcgan_step: backend=cuda device=%s img=%dx%dx%d iters=%d repeat=%d layout=%s up2=%s fuse=%d "
	       "deterministic=%d\n",
	       devname, c->size, c->size, c->channels, c->iters, c->repeat, c->layout, c->up2, c->fuse, c->det);
	printf("(tf32 = fp32 tensors with TF32 tensor-core convolutions and GEMMs: precision = \"tf32\" of the step stages)\n");

	struct cu_result res[16 * 8 * 2];
	int nres = 0;
	double torch_ips[16] = { 0 }, batch_flops[16] = { 0 };
	char torch_line[16][1024];
	const char *python = getenv("GF_PYTHON") ? getenv("GF_PYTHON") : "python3";
	for (int bi = 0; bi < nb; bi++) {
		int batch = atoi(bl[bi]);
		if (batch < 1) {
			fprintf(stderr, "bench_dcgan_step: batch %s\n", bl[bi]);
			return 2;
		}
		for (int pi = 0; pi < np; pi++) {
			for (int gi = 0; gi < ng; gi++) {
				struct cu_result *r = &res[nres++];
				double flops;
				r->batch = batch;
				snprintf(r->prec, sizeof(r->prec), "%s", pl[pi]);
				r->graphs = gmodes[gi];
				r->ips = cu_measure(c, pl[pi], batch, gmodes[gi], &flops, r->layout);
				r->tflops = flops * r->ips / batch * 1e-12;
				batch_flops[bi] = flops;
				r->ok = 1;
			}
		}
		snprintf(torch_line[bi], sizeof(torch_line[bi]), "peer not run (peer=0)");
		if (c->peer) {
			struct conf pc = *c;
			pc.batch = batch;
			for (int r = 0; r < c->repeat; r++) {
				char line[1024];
				double p = run_peer_with(&pc, python, 1, line, sizeof(line));
				if (p > torch_ips[bi] || r == 0) {
					torch_ips[bi] = p > torch_ips[bi] ? p : torch_ips[bi];
					snprintf(torch_line[bi], sizeof(torch_line[bi]), "%s", line);
				}
			}
			printf("  batch %4d torch: %s\n", batch, torch_line[bi]);
			fflush(stdout);
		}
	}

	/* the table */
	printf("\n%6s  %-9s %-6s %-6s %12s %10s %9s %9s\n", "batch", "precision", "layout", "graphs", "images/s", "ms/iter",
	       "TFLOP/s", "vs torch");
	for (int bi = 0; bi < nb; bi++) {
		int batch = atoi(bl[bi]);
		for (int i = 0; i < nres; i++) {
			if (res[i].batch != batch)
				continue;
			char vs[32] = "n/a";
			if (torch_ips[bi] > 0)
				snprintf(vs, sizeof(vs), "%.2fx", res[i].ips / torch_ips[bi]);
			printf("%6d  %-9s %-6s %-6s %12.1f %10.3f %9.2f %9s\n", batch, res[i].prec, res[i].layout,
			       res[i].graphs ? "yes" : "no", res[i].ips, 1e3 * batch / res[i].ips, res[i].tflops, vs);
		}
		if (torch_ips[bi] > 0)
			printf("%6d  %-9s %-6s %-6s %12.1f %10.3f %9.2f %9s\n", batch, "torch", "nchw", "eager", torch_ips[bi],
			       1e3 * batch / torch_ips[bi], batch_flops[bi] * torch_ips[bi] / batch * 1e-12, "1.00x");
	}

	/* the targets: best of a precision at a batch, against torch or fp32 */
	double b64_fp32 = 0, b1024_fp32 = 0, b1024_tf32 = 0, b1024_bf16 = 0, t64 = 0, t1024 = 0;
	for (int i = 0; i < nres; i++) {
		double *slot = NULL;
		if (res[i].batch == 64 && !strcmp(res[i].prec, "fp32"))
			slot = &b64_fp32;
		else if (res[i].batch == 1024 && !strcmp(res[i].prec, "fp32"))
			slot = &b1024_fp32;
		else if (res[i].batch == 1024 && !strcmp(res[i].prec, "tf32"))
			slot = &b1024_tf32;
		else if (res[i].batch == 1024 && !strcmp(res[i].prec, "bf16"))
			slot = &b1024_bf16;
		if (slot && res[i].ips > *slot)
			*slot = res[i].ips;
	}
	for (int bi = 0; bi < nb; bi++) {
		if (atoi(bl[bi]) == 64)
			t64 = torch_ips[bi];
		if (atoi(bl[bi]) == 1024)
			t1024 = torch_ips[bi];
	}
	printf("\n");
	if (b1024_fp32 > 0 && t1024 > 0)
		printf("dcgan_step: speedup_vs_torch_b1024_fp32=%.2f target=1.2\n", b1024_fp32 / t1024);
	if (b1024_tf32 > 0 && t1024 > 0)
		printf("dcgan_step: speedup_vs_torch_b1024_tf32=%.2f target=1.2   (same convolution math as torch's fp32)\n",
		       b1024_tf32 / t1024);
	if (b1024_bf16 > 0 && t1024 > 0)
		printf("dcgan_step: speedup_vs_torch_b1024_bf16=%.2f\n", b1024_bf16 / t1024);
	if (b1024_bf16 > 0 && b1024_fp32 > 0)
		printf("dcgan_step: bf16_vs_fp32_b1024=%.2f target=1.5\n", b1024_bf16 / b1024_fp32);
	if (b64_fp32 > 0 && t64 > 0)
		printf("dcgan_step: speedup_vs_torch_b64=%.2f target=2.0\n", b64_fp32 / t64);
	else
		printf("dcgan_step: speedup_vs_torch_b64=n/a target=2.0 (%s)\n",
		       t64 > 0 ? "batch 64 in fp32 not run" : "no torch figure at batch 64");
	return 0;
}

/* ---- main ---- */

int main(int argc, char **argv)
{
	struct conf c = { "cpu", 64, 20, 32, 1, 2, 2, 1, 1, NULL, "64,256,1024", "both", "auto", "subpixel", 0, 0, 1 };
	for (int i = 1; i < argc; i++) {
		const char *v;
		if (bench_arg(argv[i], "backend", &v)) c.backend = v;
		else if (bench_arg(argv[i], "batch", &v)) c.batch = atoi(v), c.batches = v;
		else if (bench_arg(argv[i], "batches", &v)) c.batches = v;
		else if (bench_arg(argv[i], "graphs", &v)) c.graphs = v;
		else if (bench_arg(argv[i], "layout", &v)) c.layout = v;
		else if (bench_arg(argv[i], "up2", &v)) c.up2 = v;
		else if (bench_arg(argv[i], "device", &v)) c.device = atoi(v);
		else if (bench_arg(argv[i], "deterministic", &v)) c.det = atoi(v) != 0;
		else if (bench_arg(argv[i], "iters", &v)) c.iters = atoi(v), c.iters_set = 1;
		else if (bench_arg(argv[i], "size", &v)) c.size = atoi(v);
		else if (bench_arg(argv[i], "channels", &v)) c.channels = atoi(v);
		else if (bench_arg(argv[i], "threads", &v)) c.threads = atoi(v);
		else if (bench_arg(argv[i], "repeat", &v)) c.repeat = atoi(v);
		else if (bench_arg(argv[i], "peer", &v)) c.peer = atoi(v);
		else if (bench_arg(argv[i], "fuse", &v)) c.fuse = atoi(v);
		else if (bench_arg(argv[i], "precision", &v)) c.precision = v;
		else {
			fprintf(stderr, "usage: bench_dcgan_step [backend=cpu] [batch=64] [iters=20] [size=32] [channels=1] "
			                "[threads=2] [precision=fp32] [repeat=2] [peer=1] [fuse=1]\n"
			                "       bench_dcgan_step backend=cuda [batches=64,256,1024] [precision=fp32,tf32,bf16] "
			                "[graphs=both|0|1] [iters=200] [repeat=2] [layout=auto|nchw|nhwc] "
			                "[up2=subpixel|upsample] [deterministic=1] [device=0] [size=32] [channels=1] [peer=1] [fuse=1]\n");
			return 2;
		}
	}
	if (c.iters < 1 || c.repeat < 1 || c.size < 16 || c.channels < 1) {
		fprintf(stderr, "bench_dcgan_step: iters, repeat and channels must be positive, size >= 16\n");
		return 2;
	}
	if (strcmp(c.backend, "cuda") == 0) {
		if (!c.precision)
			c.precision = "fp32,tf32,bf16";
		if (!c.iters_set)
			c.iters = 200;
		return main_cuda(&c);
	}
	if (!c.precision)
		c.precision = "fp32";
	if (strcmp(c.precision, "fp32") != 0) {
		fprintf(stderr, "bench_dcgan_step: precision=%s: the CPU backend computes in fp32 only (bf16/fp16 need backend=cuda)\n", c.precision);
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

	double peer_flops, exec_flops;
	iter_flops(s.g, s.d, c.batch, &peer_flops, &exec_flops);

	float lg = 0, ld = 0;
	for (int i = 0; i < 3; i++)
		iteration(&s, &c, &lg, &ld);
	double best = 0, sum = 0;
	for (int r = 0; r < c.repeat; r++) {
		double t0 = bench_now(), c0 = cpu_now();
		for (int i = 0; i < c.iters; i++)
			iteration(&s, &c, &lg, &ld);
		double ips = (double)c.iters * c.batch / (bench_now() - t0);
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
		ob1 = bench_openblas_gflops(c.threads, 128, 2048, 512);
		ob2 = bench_openblas_gflops(c.threads, 64, 2048, 512);
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
