/* tests/bench/run backbone_step: full GAN iterations of the ResNet
 * backbones (n_dis D steps on a real and a fake batch, then one G step
 * through D; hinge loss; Adam) on the nn engine's CPU backend, against the
 * same networks written layer by layer in PyTorch 1.13 CPU
 * (tests/bench/torch_backbones.py) in the same run:
 *
 *   sngan        SNGAN 32x32x1, G ch 32 / D ch 32, n_dis 5 (sngan_fashion's CPU config)
 *   sngan_cond   the same with cBN in G and the projection D (classes = 10)
 *   biggan       BigGAN 32x32x1, ch 8, classes 10, n_dis 4 (biggan_fashion's CPU config)
 *   stylegan2    StyleGAN2 32x32x1 (stylegan2_fashion's CPU width: ch 32, z = w = 64, mapping 2, mbstd 4),
 *                n_dis 1 (the networks of StyleGAN2-ADA's training loop, not its losses: hinge here too)
 *   stylegan2_cond  the same with classes = 10 (label embedding in the mapping, cmap in D)
 *   pix2pix      U-Net G (ngf 32) and PatchGAN D (ndf 32) at 32x32x1 (pix2pix_edges's config),
 *                batch 16: D on (A, B) and (A, G(A)), G's loss BCE + 100 L1
 *   r3gan        R3GAN 32x32x1 at CPU width (widths 64 at every stage, cardinality 8: 16 channels
 *                a group as the paper's, 1 block per stage, z 64), n_dis 1 (the networks, not
 *                R3GAN's loss: hinge here too)
 *   r3gan_cond   the same with the class embedding in G and the projection in D (classes = 10)
 *
 * batch 64 (pix2pix 16), 2 threads (the peer with OMP_NUM_THREADS and torch threads
 * equal). Prints images/s of each side (the best of `repeat` timings of
 * `iters` iterations), the FLOPs one iteration executes, the achieved
 * GFLOP/s and OpenBLAS's SGEMM GFLOP/s (1024^3, same threads) measured in
 * the same run; last line "backbone_step: worst_ratio=X target=1.3".
 *
 * usage: bench_backbone_step [batch=64] [iters=3] [repeat=2] [threads=2]
 *        [rows=sngan,sngan_cond,biggan,stylegan2,stylegan2_cond,pix2pix,r3gan,r3gan_cond] [peer=1]
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
	const char *name, *what, *g, *d;
	int z, classes, n_dis;   /* z = 0: pix2pix (G maps A to B) */
};

static const struct row rows[] = {
	{ "sngan", "SNGAN 32x32x1 ch 32/32, n_dis 5", "return require('backbones.sngan').G{ ch = 32, channels = 1 }",
	  "return require('backbones.sngan').D{ ch = 32, channels = 1 }", 128, 0, 5 },
	{ "sngan_cond", "SNGAN + cBN/projection, 10 classes",
	  "return require('backbones.sngan').G{ ch = 32, channels = 1, classes = 10 }",
	  "return require('backbones.sngan').D{ ch = 32, channels = 1, classes = 10 }", 128, 10, 5 },
	{ "biggan", "BigGAN 32x32x1 ch 8, n_dis 4",
	  "return require('backbones.biggan').G{ ch = 8, channels = 1, classes = 10 }",
	  "return require('backbones.biggan').D{ ch = 8, channels = 1, classes = 10 }", 128, 10, 4 },
	{ "stylegan2", "StyleGAN2 32x32x1 ch 32, z = w = 64, n_dis 1",
	  "return require('backbones.stylegan2').G{ ch = 32, z = 64, w = 64, channels = 1 }",
	  "return require('backbones.stylegan2').D{ ch = 32, channels = 1, mbstd = 4 }", 64, 0, 1 },
	{ "stylegan2_cond", "StyleGAN2 + label mapping/cmap, 10 classes",
	  "return require('backbones.stylegan2').G{ ch = 32, z = 64, w = 64, channels = 1, classes = 10 }",
	  "return require('backbones.stylegan2').D{ ch = 32, channels = 1, classes = 10, mbstd = 4 }", 64, 10, 1 },
	{ "pix2pix", "pix2pix 32x32x1 ngf/ndf 32, batch 16",
	  "return require('backbones.pix2pix').G{ size = 32, channels = 1, ngf = 32 }",
	  "return require('backbones.pix2pix').D{ size = 32, channels = 1, ndf = 32 }", 0, 0, 1 },
	{ "r3gan", "R3GAN 32x32x1 widths 64, card 8, 1 block/stage",
	  "return require('backbones.r3gan').G{ channels = 1, widths = 64, cardinality = 8, blocks = 1 }",
	  "return require('backbones.r3gan').D{ channels = 1, widths = 64, cardinality = 8, blocks = 1 }", 64, 0, 1 },
	{ "r3gan_cond", "R3GAN + class embedding/projection, 10 classes",
	  "return require('backbones.r3gan').G{ channels = 1, widths = 64, cardinality = 8, blocks = 1, classes = 10 }",
	  "return require('backbones.r3gan').D{ channels = 1, widths = 64, cardinality = 8, blocks = 1, classes = 10 }", 64,
	  10, 1 },
};

#define CHECK(what, call)                                                                     \
	do {                                                                                      \
		int rc_ = (call);                                                                     \
		if (rc_) {                                                                            \
			fprintf(stderr, "bench_backbone_step: %s: %s (%d)\n", what, gf_errmsg(), rc_);    \
			exit(1);                                                                          \
		}                                                                                     \
	} while (0)

static gf_net *build(gf_backend *be, const char *code, int batch, uint64_t seed)
{
	gf_value t;
	CHECK(code, gf_lua_eval(code, &t));
	gf_net_opts o = { .max_batch = batch };
	gf_net *net;
	CHECK(code, gf_net_create(&net, be, &t, &o));
	gf_value_free(&t);
	gf_rng r;
	gf_rng_init(&r, seed, 0);
	CHECK("init", gf_net_init(net, &r));
	return net;
}

struct gan {
	gf_backend *be;
	gf_net *g, *d;
	gf_optim *og, *od;
	const struct row *r;
	int batch;
	float *z, *real, *dpred;
	float *pa, *pb, *pair, *dfake; /* pix2pix: A, B, (A, B') per sample, G's output gradient */
	int32_t *labels;
	gf_rng noise;
};

static void d_half(struct gan *s, const gf_tensor *x, const gf_tensor *lab, float target, unsigned acc)
{
	gf_tensor out;
	float l;
	CHECK("D forward", gf_net_forward(s->d, x, lab, GF_TRAIN));
	gf_net_output(s->d, &out);
	CHECK("D loss", gf_loss(s->be, GF_LOSS_HINGE_D, &l, s->dpred, &out, NULL, target, 0.5f));
	CHECK("D backward", gf_net_backward(s->d, s->dpred, GF_NEED_DW | acc));
}

/* (A, X) per sample into s->pair: A's channel, then X's. */
static void pair_up(struct gan *s, const float *x)
{
	for (int i = 0; i < s->batch; i++) {
		memcpy(s->pair + (size_t)i * 2048, s->pa + (size_t)i * 1024, 1024 * sizeof(float));
		memcpy(s->pair + (size_t)i * 2048 + 1024, x + (size_t)i * 1024, 1024 * sizeof(float));
	}
}

/* pix2pix: D on (A, B) and (A, G(A)) (BCE on logits), then G through D
 * plus 100 mean |G(A) - B|. The CPU backend's device memory is the host's. */
static void iteration_paired(struct gan *s)
{
	int B = s->batch;
	int64_t as[4] = { B, 1, 32, 32 }, ps[4] = { B, 2, 32, 32 };
	gf_tensor a = gf_tensor_make(s->pa, GF_F32, 4, as), pr = gf_tensor_make(s->pair, GF_F32, 4, ps), fake, out, dx;
	float l;
	CHECK("G forward", gf_net_forward(s->g, &a, NULL, GF_TRAIN));
	gf_net_output(s->g, &fake);
	pair_up(s, s->pb);
	CHECK("D forward", gf_net_forward(s->d, &pr, NULL, GF_TRAIN));
	gf_net_output(s->d, &out);
	CHECK("D loss", gf_loss(s->be, GF_LOSS_BCE_LOGITS, &l, s->dpred, &out, NULL, 1.0f, 0.5f));
	CHECK("D backward", gf_net_backward(s->d, s->dpred, GF_NEED_DW));
	pair_up(s, fake.data);
	CHECK("D forward", gf_net_forward(s->d, &pr, NULL, GF_TRAIN));
	gf_net_output(s->d, &out);
	CHECK("D loss", gf_loss(s->be, GF_LOSS_BCE_LOGITS, &l, s->dpred, &out, NULL, 0.0f, 0.5f));
	CHECK("D backward", gf_net_backward(s->d, s->dpred, GF_NEED_DW | GF_ACCUMULATE));
	CHECK("D step", gf_optim_step(s->od));
	CHECK("D forward (G step)", gf_net_forward(s->d, &pr, NULL, GF_TRAIN | GF_FREEZE_STATS));
	gf_net_output(s->d, &out);
	CHECK("G loss", gf_loss(s->be, GF_LOSS_BCE_LOGITS, &l, s->dpred, &out, NULL, 1.0f, 1.0f));
	CHECK("D backward (G step)", gf_net_backward(s->d, s->dpred, GF_NEED_DX));
	gf_net_dx(s->d, &dx);
	const float *g = fake.data, *dd = dx.data;
	float c = 100.0f / (float)(B * 1024);
	for (int i = 0; i < B; i++)
		for (int e = 0; e < 1024; e++) {
			size_t k = (size_t)i * 1024 + e;
			float diff = g[k] - s->pb[k];
			s->dfake[k] = dd[(size_t)i * 2048 + 1024 + e] + (diff > 0 ? c : diff < 0 ? -c : 0.0f);
		}
	CHECK("G backward", gf_net_backward(s->g, s->dfake, GF_NEED_DW));
	CHECK("G step", gf_optim_step(s->og));
}

static void iteration(struct gan *s)
{
	if (!s->r->z) {
		iteration_paired(s);
		return;
	}
	int B = s->batch;
	int64_t zs[2] = { B, s->r->z }, ls[1] = { B }, xs[4] = { B, 1, 32, 32 };
	gf_tensor z = gf_tensor_make(s->z, GF_F32, 2, zs), lab = gf_tensor_make(s->labels, GF_I32, 1, ls);
	gf_tensor real = gf_tensor_make(s->real, GF_F32, 4, xs), fake, out, dfake;
	const gf_tensor *l = s->r->classes ? &lab : NULL;
	for (int k = 0; k < s->r->n_dis; k++) {
		gf_rng_normal(&s->noise, s->z, (size_t)B * s->r->z, 0, 1);
		CHECK("G forward", gf_net_forward(s->g, &z, l, GF_TRAIN));
		gf_net_output(s->g, &fake);
		d_half(s, &real, l, 1.0f, 0);
		d_half(s, &fake, l, -1.0f, GF_ACCUMULATE);
		CHECK("D step", gf_optim_step(s->od));
	}
	gf_rng_normal(&s->noise, s->z, (size_t)B * s->r->z, 0, 1);
	CHECK("G forward", gf_net_forward(s->g, &z, l, GF_TRAIN));
	gf_net_output(s->g, &fake);
	CHECK("D forward (G step)", gf_net_forward(s->d, &fake, l, GF_TRAIN | GF_FREEZE_STATS));
	gf_net_output(s->d, &out);
	float loss;
	CHECK("G loss", gf_loss(s->be, GF_LOSS_HINGE_G, &loss, s->dpred, &out, NULL, 1.0f, 1.0f));
	CHECK("D backward (G step)", gf_net_backward(s->d, s->dpred, GF_NEED_DX));
	gf_net_dx(s->d, &dfake);
	CHECK("G backward", gf_net_backward(s->g, dfake.data, GF_NEED_DW));
	CHECK("G step", gf_optim_step(s->og));
	CHECK("sync", s->be->ops->sync(s->be));
}

/* FLOPs of one iteration as executed: n_dis (G forward + 2 D forward and
 * weight-gradient backward) + G forward + D forward and input backward +
 * G backward. */
static double iter_flops(const struct gan *s)
{
	double gf, gb, df, dbw, dbx;
	int B = s->batch;
	gf_net_flops(s->g, B, 0, NULL, &gf);
	gf_net_flops(s->g, B, GF_NEED_DW, NULL, &gb);
	gf_net_flops(s->d, B, 0, NULL, &df);
	gf_net_flops(s->d, B, GF_NEED_DW, NULL, &dbw);
	gf_net_flops(s->d, B, GF_NEED_DX, NULL, &dbx);
	if (!s->r->z) /* pix2pix: one G forward serves D and G */
		return gf + 2 * (df + dbw) + df + dbx + gb;
	return s->r->n_dis * (gf + 2 * (df + dbw)) + gf + df + dbx + gb;
}

static double engine(gf_backend *be, const struct row *r, int batch, int iters, int repeat, double *flops)
{
	struct gan s = { .be = be, .r = r, .batch = batch };
	s.g = build(be, r->g, batch, 1);
	s.d = build(be, r->d, batch, 2);
	gf_optim_conf oc;
	gf_optim_defaults(&oc, GF_OPT_ADAM);
	oc.lr = 2e-4f, oc.beta1 = r->z ? 0.0f : 0.5f, oc.beta2 = r->z ? 0.9f : 0.999f;
	CHECK("optim", gf_optim_create(&s.og, s.g, &oc));
	CHECK("optim", gf_optim_create(&s.od, s.d, &oc));
	s.z = malloc((size_t)batch * (r->z ? r->z : 1) * sizeof(float));
	gf_tensor din, dout;
	gf_net_shapes(s.d, &din, &dout);
	size_t nd = (size_t)gf_tensor_numel(&dout) / (size_t)dout.shape[0] * (size_t)batch;
	s.real = malloc((size_t)batch * 1024 * sizeof(float));
	s.labels = malloc((size_t)batch * sizeof(int32_t));
	CHECK("alloc", be->ops->alloc(be, (void **)&s.dpred, nd * sizeof(float)));
	gf_rng_init(&s.noise, 3, 0);
	gf_rng_uniform(&s.noise, s.real, (size_t)batch * 1024, -1, 1);
	if (!r->z) {
		s.pa = malloc((size_t)batch * 1024 * sizeof(float));
		s.pb = s.real;
		s.pair = malloc((size_t)batch * 2048 * sizeof(float));
		s.dfake = malloc((size_t)batch * 1024 * sizeof(float));
		gf_rng_uniform(&s.noise, s.pa, (size_t)batch * 1024, -1, 1);
	}
	for (int i = 0; i < batch; i++)
		s.labels[i] = r->classes ? i % r->classes : 0;
	*flops = iter_flops(&s);
	iteration(&s); /* warm-up */
	double best = 0;
	for (int k = 0; k < repeat; k++) {
		double t0 = bench_now();
		for (int i = 0; i < iters; i++)
			iteration(&s);
		double ips = (double)iters * batch / (bench_now() - t0);
		if (ips > best)
			best = ips;
	}
	be->ops->free(be, s.dpred);
	free(s.z), free(s.real), free(s.labels), free(s.pa), free(s.pair), free(s.dfake);
	gf_optim_destroy(s.og), gf_optim_destroy(s.od);
	gf_net_destroy(s.g), gf_net_destroy(s.d);
	return best;
}

static double peer(const struct row *r, int batch, int iters, int repeat, int threads, char *why, size_t size)
{
	const char *src = getenv("GF_SOURCE_DIR");
	char cmd[2048], buf[1024];
	snprintf(cmd, sizeof(cmd),
	         "OMP_NUM_THREADS=%d /usr/bin/python3 %s/tests/bench/torch_backbones.py step %s %d %d %d %d 2>&1", threads,
	         src ? src : ".", r->name, batch, iters, repeat, threads);
	FILE *p = popen(cmd, "r");
	double ips = -1;
	why[0] = 0;
	if (!p) {
		snprintf(why, size, "cannot run the peer");
		return -1;
	}
	while (fgets(buf, sizeof(buf), p))
		if (sscanf(buf, "images_per_s=%lf", &ips) != 1)
			snprintf(why, size, "%s", buf);
	pclose(p);
	return ips;
}

int main(int argc, char **argv)
{
	int batch = 64, iters = 3, repeat = 2, threads = 2, use_peer = 1;
	const char *want = "sngan,sngan_cond,biggan,stylegan2,stylegan2_cond,pix2pix,r3gan,r3gan_cond";
	for (int i = 1; i < argc; i++) {
		const char *v;
		if (bench_arg(argv[i], "batch", &v)) batch = atoi(v);
		else if (bench_arg(argv[i], "iters", &v)) iters = atoi(v);
		else if (bench_arg(argv[i], "repeat", &v)) repeat = atoi(v);
		else if (bench_arg(argv[i], "threads", &v)) threads = atoi(v);
		else if (bench_arg(argv[i], "rows", &v)) want = v;
		else if (bench_arg(argv[i], "peer", &v)) use_peer = atoi(v);
		else {
			fprintf(stderr, "usage: bench_backbone_step [batch=64] [iters=3] [repeat=2] [threads=2] "
			                "[rows=sngan,sngan_cond,biggan,stylegan2,stylegan2_cond,pix2pix,r3gan,r3gan_cond] "
			                "[peer=1]\n");
			return 2;
		}
	}
	if (batch < 1 || iters < 1 || repeat < 1 || threads < 1) {
		fprintf(stderr, "bench_backbone_step: batch, iters, repeat and threads must be >= 1\n");
		return 2;
	}
	gf_backend_opts bo = { .threads = threads };
	gf_backend *be;
	CHECK("cpu backend", gf_backend_open("cpu", &bo, &be));
	printf("full GAN iterations (n_dis D steps + 1 G step), batch %d, %d threads, best of %d x %d iterations\n", batch,
	       threads, repeat, iters);
	printf("%-14s %-44s %10s %10s %7s %12s %8s\n", "row", "networks", "ganflow", "torch", "ratio", "GFLOP/iter",
	       "GFLOP/s");
	double worst = 1e30;
	int measured = 0;
	for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++) {
		const struct row *r = &rows[k];
		const char *at = strstr(want, r->name);
		size_t n = strlen(r->name);
		if (!at || (at != want && at[-1] != ',') || (at[n] && at[n] != ','))
			continue;
		int rb = r->z ? batch : (batch + 3) / 4; /* pix2pix: a quarter of the batch (16 of 64) */
		double flops, ours = engine(be, r, rb, iters, repeat, &flops), theirs = -1;
		char why[1024] = "peer=0";
		if (use_peer)
			theirs = peer(r, rb, iters, repeat, threads, why, sizeof(why));
		double gflops = flops * ours / rb * 1e-9;
		if (theirs <= 0) {
			printf("%-14s %-44s %8.1f/s %10s %7s %12.2f %8.1f  (%s)\n", r->name, r->what, ours, "-", "-", flops * 1e-9,
			       gflops, why);
			continue;
		}
		double ratio = ours / theirs;
		printf("%-14s %-44s %8.1f/s %8.1f/s %6.2fx %12.2f %8.1f\n", r->name, r->what, ours, theirs, ratio,
		       flops * 1e-9, gflops);
		if (ratio < worst)
			worst = ratio;
		measured++;
	}
	gf_backend_close(be);
	printf("OpenBLAS SGEMM 1024^3, %d threads: %.1f GFLOP/s (the ceiling)\n", threads, bench_openblas_gflops(threads, 1024, 1024, 1024));
	if (!measured) {
		printf("backbone_step: worst_ratio=nan target=1.3 (no PyTorch figure)\n");
		return use_peer ? 1 : 0;
	}
	printf("backbone_step: worst_ratio=%.2f target=1.3\n", worst);
	return 0;
}
