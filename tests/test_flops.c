/* FLOPs and the peaks behind a run's MFU.
 *
 * Convention (docs/train.md "FLOPs and MFU"): a multiply-add is 2 FLOPs;
 * a convolution counts 2 Cin Cout k^2 Hout Wout per sample (at its output
 * resolution: a stride-2 conv at the smaller map, a conv after a nearest x2
 * upsample at the larger one), a linear layer 2 in out, BigGAN's attention
 * its four 1x1 convolutions and its two products; a cbn conditioned on a
 * vector its two projections (2 C dim each). Activations, normalisations,
 * poolings, embeddings and losses count 0. A backward costs the forward's
 * count once per gradient it computes (the input's, the weights'), a double
 * backward once per output tangent and per weight term; an update its
 * optimiser's arithmetic per parameter (Adam 13).
 *
 *  - the DC-GAN of pipelines/dcgan_fashion.lua and BigGAN-128 at ch 96
 *    (pipelines/biggan_imagenet.lua): gf_net_flops per image against the
 *    counts below, written layer by layer;
 *  - gf_net_flops_done, the engine's running count the step stages report:
 *    a D half-step, a G step and Adam's update on the DC-GAN, R1 and the
 *    lazy R1 step (double backward, with and without the second-order
 *    walk) on small networks, each against its hand count;
 *  - the CPU backend's peak (its SGEMM, measured once and cached): a
 *    measurement under a second, a cache that is believed, and damaged,
 *    foreign and busy-core caches measured again;
 *  - the CUDA backend's table of datasheet peaks (core/nn/cuda/peak_cuda.c,
 *    compiled in here: no GPU needed) against docs/cuda.md's table and the
 *    names CUDA gives devices. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <ganflow/crc32c.h>
#include <ganflow/train.h>

#include "../core/nn/cuda/peak_cuda.h"
#include "test_nn_util.h"

static gf_backend *be;

static int setup(void **state)
{
	(void)state;
	be = nn_cpu(2);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	gf_backend_close(be);
	return 0;
}

/* ---- hand counts (FLOPs per sample) ---- */

/* a k x k convolution producing an r x r map */
static double conv(double cin, double cout, double k, double r)
{
	return 2 * cin * cout * k * k * r * r;
}

static double linear(double in, double out)
{
	return 2 * in * out;
}

/* BigGAN's attention on a C x r x r map: theta (C/8), phi (C/8), g (C/2)
 * 1x1 convs at r x r, theta^T phi over the n x n/4 positions (phi pooled),
 * g beta^T, and the C/2 -> C output 1x1 conv. */
static double attention(double c, double r)
{
	double n = r * r, p = n / 4;
	return conv(c, c / 8 + c / 8 + c / 2, 1, r) + 2 * n * p * (c / 8) + 2 * (c / 2) * n * p + conv(c / 2, c, 1, r);
}

/* cbn conditioned on a vector of `dim`: gain and bias projections */
static double cbn(double c, double dim)
{
	return 2 * linear(dim, c);
}

/* pipelines/dcgan_fashion.lua: G{z = 100, size = 32, channels = 1} */
static const double dcgan_g_lin = 2.0 * 100 * 128 * 8 * 8;   /* linear 100 -> 128x8x8 */
static double dcgan_g(void)
{
	return dcgan_g_lin                 /* linear 100 -> 8192 */
	       + conv(128, 128, 3, 16)     /* upsample to 16, conv 128 -> 128 */
	       + conv(128, 64, 3, 32)      /* upsample to 32, conv 128 -> 64 */
	       + conv(64, 1, 3, 32);       /* conv 64 -> 1, tanh */
}

/* D{size = 32, channels = 1}: four stride-2 3x3 convs, the linear head */
static const double dcgan_d_c1 = 2.0 * 1 * 16 * 9 * 16 * 16;
static double dcgan_d(void)
{
	return dcgan_d_c1                  /* 1 -> 16 at 16x16 */
	       + conv(16, 32, 3, 8) + conv(32, 64, 3, 4) + conv(64, 128, 3, 2)
	       + linear(128 * 2 * 2, 1);
}

/* biggan.G{size = 128, ch = 96, z = 120, shared = 128, classes = 1000,
 * attention = 64}: z in 6 chunks of 20, each block's cbn on c = [shared
 * (128), its chunk (20)]; blocks 16 -> 16 -> 8 -> 4 -> 2 -> 1 x ch from 4x4
 * to 128x128 (bn, relu, up, conv 3x3, bn, relu, conv 3x3; shortcut up,
 * conv 1x1), attention at 64x64 after the fourth. */
static double biggan_g(void)
{
	const double ch = 96, cdim = 128 + 20;
	static const double m[] = { 16, 16, 8, 4, 2, 1 };
	double f = linear(20, 16 * ch * 4 * 4), r = 4;
	for (int i = 0; i < 5; i++) {
		double cin = m[i] * ch, cout = m[i + 1] * ch;
		r *= 2;
		f += cbn(cin, cdim) + conv(cin, cout, 3, r) + cbn(cout, cdim) + conv(cout, cout, 3, r) + conv(cin, cout, 1, r);
		if (r == 64)
			f += attention(cout, r);
	}
	return f + conv(ch, 3, 3, 128);   /* bn, relu, conv 96 -> 3, tanh */
}

/* biggan.D{size = 128, ch = 96, classes = 1000, attention = 64}: blocks
 * 3 -> 1, 2, 4, 8, 16, 16 x ch, the first five down-sampling (their convs
 * at the input resolution, then avgpool), attention at 64x64 after the
 * first; the first block's shortcut pools, then its 1x1 conv; the last
 * (16 -> 16, no pooling) has none. Head: relu, sum pooling, linear 1536 ->
 * 1 and the projection (an embedding's dot product: 0). */
static double biggan_d(void)
{
	const double ch = 96;
	double f = conv(3, ch, 3, 128) + conv(ch, ch, 3, 128) + conv(3, ch, 1, 64) + attention(ch, 64);
	static const double m[] = { 1, 2, 4, 8, 16 };
	double r = 64;
	for (int i = 0; i < 4; i++) {
		double cin = m[i] * ch, cout = m[i + 1] * ch;
		f += conv(cin, cout, 3, r) + conv(cout, cout, 3, r) + conv(cin, cout, 1, r);
		r /= 2;
	}
	f += conv(16 * ch, 16 * ch, 3, 4) + conv(16 * ch, 16 * ch, 3, 4);
	return f + linear(16 * ch, 1);
}

static gf_net *build(const char *code, int batch)
{
	gf_net *net;
	NN_OK(nn_build(&net, be, code, batch, 0));
	return net;
}

#define DCGAN_G "return require('backbones.dcgan').G{ z = 100, size = 32, channels = 1 }"
#define DCGAN_D "return require('backbones.dcgan').D{ size = 32, channels = 1 }"

static double flops(const gf_net *net, int batch, unsigned flags)
{
	double m;
	gf_net_flops(net, batch, flags, &m, NULL);
	return m;
}

static double done(const gf_net *net)
{
	double m;
	gf_net_flops_done(net, &m, NULL);
	return m;
}

/* ---- per image ---- */

static void test_dcgan_per_image(void **state)
{
	(void)state;
	gf_net *g = build(DCGAN_G, 1), *d = build(DCGAN_D, 1);
	assert_true(dcgan_g() == 229310464.0);   /* the sum of the four lines above, once by hand */
	assert_true(flops(g, 1, 0) == dcgan_g());
	assert_true(flops(d, 1, 0) == dcgan_d());
	assert_true(flops(g, 64, 0) == 64 * dcgan_g());
	/* a backward: a forward's count per gradient; G's first layer (z) and
	 * D's first conv (the image) have no input gradient with weights only */
	assert_true(flops(g, 1, GF_NEED_DW) == 2 * dcgan_g() - dcgan_g_lin);
	assert_true(flops(d, 1, GF_NEED_DW) == 2 * dcgan_d() - dcgan_d_c1);
	assert_true(flops(d, 1, GF_NEED_DX) == dcgan_d());
	gf_net_destroy(g);
	gf_net_destroy(d);
}

static void test_biggan128_per_image(void **state)
{
	(void)state;
	gf_net *g = build("return require('backbones.biggan').G{ size = 128, ch = 96, z = 120, shared = 128, "
	                  "channels = 3, classes = 1000, attention = 64 }", 1);
	double fg = flops(g, 1, 0);
	gf_net_destroy(g);
	gf_net *d = build("return require('backbones.biggan').D{ size = 128, ch = 96, channels = 3, classes = 1000, "
	                  "attention = 64 }", 1);
	double fd = flops(d, 1, 0);
	gf_net_destroy(d);
	print_message("BigGAN-128 ch 96 per image: G %.4f GFLOP, D %.4f GFLOP (forward)\n", fg * 1e-9, fd * 1e-9);
	assert_true(fabs(fg - biggan_g()) <= 1e-12 * fg);
	assert_true(fabs(fd - biggan_d()) <= 1e-12 * fd);
}

/* ---- what the engine counts as it runs ---- */

static float *input(const gf_net *net, int batch, gf_tensor *t)
{
	gf_net_shapes(net, t, NULL);
	t->shape[0] = batch;
	float *x = malloc((size_t)gf_tensor_numel(t) * sizeof(float));
	for (int64_t i = 0; i < gf_tensor_numel(t); i++)
		x[i] = (float)((i * 37) % 19) / 19.0f - 0.5f;
	t->data = x;
	return x;
}

/* A D half-step (forward, backward with weight gradients), a G step (G
 * forward, the replica's forward and input-gradient backward, G's backward
 * with weight gradients) and Adam's update, at batch 2. */
static void test_counted_steps(void **state)
{
	(void)state;
	const int B = 2;
	gf_net *g = build(DCGAN_G, B), *d = build(DCGAN_D, B);
	gf_rng r = { 1, 0, 0 };
	NN_OK(gf_net_init(g, &r));
	NN_OK(gf_net_init(d, &r));
	assert_true(done(g) == 0 && done(d) == 0);
	gf_tensor xt, out;
	float *x = input(d, B, &xt), dy[2] = { 0.5f, -0.25f };

	/* D on one half: F + (2F - first conv) */
	NN_OK(gf_net_forward(d, &xt, NULL, GF_TRAIN));
	assert_true(done(d) == B * dcgan_d());
	NN_OK(gf_net_backward(d, dy, GF_NEED_DW));
	assert_true(done(d) == B * (3 * dcgan_d() - dcgan_d_c1));

	/* the G step */
	double d0 = done(d);
	gf_tensor zt;
	float *z = input(g, B, &zt);
	NN_OK(gf_net_forward(g, &zt, NULL, GF_TRAIN));
	NN_OK(gf_net_output(g, &out));
	NN_OK(gf_net_forward(d, &out, NULL, GF_TRAIN | GF_FREEZE_STATS));
	NN_OK(gf_net_backward(d, dy, GF_NEED_DX));
	gf_tensor dfake;
	NN_OK(gf_net_dx(d, &dfake));
	NN_OK(gf_net_backward(g, dfake.data, GF_NEED_DW));
	assert_true(done(d) - d0 == B * 2 * dcgan_d());
	assert_true(done(g) == B * (3 * dcgan_g() - dcgan_g_lin));
	assert_true(done(g) + done(d) - d0 == B * 689981440.0);   /* per image, once by hand */

	/* Adam: 13 per parameter; with weight decay 15 */
	size_t np;
	gf_net_block(g, GF_PARAMS, &np);
	gf_optim *o;
	gf_optim_conf c;
	gf_optim_defaults(&c, GF_OPT_ADAM);
	NN_OK(gf_optim_create(&o, g, &c));
	double g0 = done(g);
	NN_OK(gf_optim_step(o));
	assert_true(done(g) - g0 == 13.0 * (double)np);
	gf_optim_destroy(o);
	c.weight_decay = 0.01f;
	NN_OK(gf_optim_create(&o, g, &c));
	g0 = done(g);
	NN_OK(gf_optim_step(o));
	assert_true(done(g) - g0 == 15.0 * (double)np);
	gf_optim_destroy(o);

	/* the orthogonal regularisation: 4 rows cols min(rows, cols) per
	 * matrix; G's are the linear (8192 x 100) and the three convs */
	g0 = done(g);
	NN_OK(gf_net_ortho_grad(g, 1e-4f, NULL));
	double ortho = 4.0 * 8192 * 100 * 100 + 4.0 * 128 * 1152 * 128 + 4.0 * 64 * 1152 * 64 + 4.0 * 1 * 576 * 1;
	assert_true(done(g) - g0 == ortho);
	free(x);
	free(z);
	gf_net_destroy(g);
	gf_net_destroy(d);
}

/* R1 (gf_penalty: lengths, then the double backward) on linear 4 -> 8,
 * act, linear 8 -> 1: F = 2 (32 + 8) = 80 per sample. The lengths'
 * backward is input gradients only (80); the double backward computes the
 * first layer's output tangent (64; the output layer has none) and both
 * weight terms (64 + 16); in d_step's step (dy given) the walk is a
 * backward with weight gradients (80, and the second layer's input
 * gradient: 16). The lazy step walks only the second-order terms: none
 * through a LeakyReLU, the first linear's weight gradient (64) through a
 * tanh. */
static void test_penalty_flops(void **state)
{
	(void)state;
	const char *acts[] = { "lrelu", "tanh" };
	for (int a = 0; a < 2; a++)
		for (int lazy = 0; lazy < 2; lazy++) {
			char code[256];
			snprintf(code, sizeof(code), "return { {'linear', 4, 8}, {'%s'}, {'linear', 8, 1}, input_shape = {4} }",
			         acts[a]);
			const int B = 3;
			gf_net *d = build(code, B);
			gf_rng r = { 2, 0, 0 };
			NN_OK(gf_net_init(d, &r));
			gf_penalty *p;
			NN_OK(gf_penalty_create(&p, d, B));
			gf_tensor xt;
			float *x = input(d, B, &xt), dy[3] = { 0.5f, -0.25f, 1.0f };
			gf_penalty_desc pd = { .distance = GF_PENALTY_SQUARE, .weight = 10.0, .scale = 1.0 };
			NN_OK(gf_net_forward(d, &xt, NULL, GF_TRAIN));
			NN_OK(gf_penalty_lengths(p, NULL));
			assert_true(done(d) == B * (80 + 80));
			NN_OK(gf_penalty_apply(p, &pd, NULL, NULL, lazy ? NULL : dy, GF_NEED_DW));
			double walk = lazy ? (a == 1 ? 64 : 0) : 80 + 16;
			print_message("R1 %s %s: %g FLOPs per sample\n", acts[a], lazy ? "lazy" : "in the step", done(d) / B);
			assert_true(done(d) == B * (160 + 64 + 64 + 16 + walk));
			gf_penalty_destroy(p);
			free(x);
			gf_net_destroy(d);
		}
}

/* ---- the CPU's peak ---- */

static double wall(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static char tmpdir[256];

/* The peak with the cache folder `sub` of the test's folder. */
static double peak_in(const char *sub, char *what, size_t size, double *seconds)
{
	char dir[512];
	snprintf(dir, sizeof(dir), "%s/%s", tmpdir, sub);
	mkdir(dir, 0755);
	setenv("GANFLOW_CACHE", dir, 1);
	double t0 = wall(), v = 0;
	NN_OK(be->ops->peak_flops(be, &v, what, size));
	if (seconds)
		*seconds = wall() - t0;
	return v;
}

static void slurp(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	size_t n = fread(buf, 1, size - 1, f);
	buf[n] = '\0';
	fclose(f);
}

/* Writes `text` (the lines before the CRC) with its CRC line into sub's cache file. */
static void put_cache(const char *sub, const char *text, int fix_crc, const char *crc_line)
{
	char dir[512], path[600];
	snprintf(dir, sizeof(dir), "%s/%s", tmpdir, sub);
	mkdir(dir, 0755);
	snprintf(path, sizeof(path), "%s/sgemm-peak-2t", dir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	if (fix_crc)
		fprintf(f, "crc32c %08x\n", (unsigned)gf_crc32c(0, text, strlen(text)));
	else
		fputs(crc_line, f);
	fclose(f);
}

/* sub's cache was not believed (`why` says so): measured again, and the
 * file rewritten without `gone`. */
static void remeasured(const char *sub, const char *why, const char *gone)
{
	char what[256], path[600], file[1024];
	double v = peak_in(sub, what, sizeof(what), NULL);
	assert_true(v != 1.23456e9 && v > 1e8);
	if (!strstr(what, why))
		fail_msg("%s: \"%s\" does not say %s", sub, what, why);
	snprintf(path, sizeof(path), "%s/%s/sgemm-peak-2t", tmpdir, sub);
	slurp(path, file, sizeof(file));
	assert_null(strstr(file, gone));
}

static void test_cpu_peak(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/gf_test_flops_%ld", (long)getpid());
	mkdir(tmpdir, 0755);
	char what[256], file[1024], path[600];
	double secs;

	/* none cached: measured, quickly, and written down */
	double v = peak_in("a", what, sizeof(what), &secs);
	print_message("SGEMM peak, 2 threads: %.1f GFLOP/s, found in %.3f s (%s)\n", v * 1e-9, secs, what);
	assert_true(v > 1e8 && v < 1e14);
	assert_true(secs < 1.0);
	assert_non_null(strstr(what, "measured now"));
	snprintf(path, sizeof(path), "%s/a/sgemm-peak-2t", tmpdir);
	slurp(path, file, sizeof(file));
	assert_true(!strncmp(file, "ganflow sgemm peak 1\ncpu ", 25));
	assert_non_null(strstr(file, "\nthreads 2\nflop_s "));
	char *crc = strstr(file, "crc32c ");
	assert_non_null(crc);
	char body[1024];
	snprintf(body, sizeof(body), "%.*s", (int)(crc - file), file);
	char *fl = strstr(body, "flop_s "), *sh = strstr(body, "\nshare ");
	assert_true(fabs(strtod(fl + 7, NULL) / v - 1) < 1e-5);
	assert_non_null(sh);
	print_message("the process had %.0f%% of its 2 threads' time while it measured\n", 100 * strtod(sh + 7, NULL));

	/* a whole cache of this CPU, measured on idle cores, is believed */
	snprintf(fl, sizeof(body) - (size_t)(fl - body), "flop_s 1.234560e+09\nshare 0.990\n");
	put_cache("b", body, 1, NULL);
	v = peak_in("b", what, sizeof(what), NULL);
	assert_true(v == 1.23456e9);
	assert_non_null(strstr(what, "measured before"));

	/* one digit changed: its CRC no longer holds, measured again */
	char bad[1024];
	snprintf(bad, sizeof(bad), "%s", body);
	strstr(bad, "flop_s 1.2")[9] = '9';
	char crcline[32];
	snprintf(crcline, sizeof(crcline), "crc32c %08x\n", (unsigned)gf_crc32c(0, body, strlen(body)));
	put_cache("c", bad, 0, crcline);
	remeasured("c", "damaged", "1.934560e+09");

	/* another CPU's (a shared home folder): measured again, rewritten as ours */
	char foreign[1024], *cpu = strstr(body, "\ncpu "), *eol = strchr(cpu + 1, '\n');
	snprintf(foreign, sizeof(foreign), "%.*s\ncpu Imaginary CPU 9000%s", (int)(cpu - body), body, eol);
	put_cache("d", foreign, 1, NULL);
	remeasured("d", "another CPU", "Imaginary");

	/* measured while the cores were busy with other work: measured again,
	 * the higher of the two figures kept (here the file's) */
	char busy[1024];
	snprintf(busy, sizeof(busy), "%s", body);
	memcpy(strstr(busy, "flop_s 1.234560e+09") + 7, "9.990000e+12", 12);
	memcpy(strstr(busy, "share 0.990") + 6, "0.500", 5);
	put_cache("f", busy, 1, NULL);
	v = peak_in("f", what, sizeof(what), NULL);
	assert_true(v == 9.99e12);
	assert_non_null(strstr(what, "measured now"));
	assert_non_null(strstr(what, "measured while the cores were busy"));

	/* a plausible figure of another thread count under this file's name */
	char other[1024];
	snprintf(other, sizeof(other), "%s", body);
	strstr(other, "threads 2")[8] = '3';
	put_cache("e", other, 1, NULL);
	remeasured("e", "damaged", "threads 3");

	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	assert_int_equal(system(cmd), 0);
	unsetenv("GANFLOW_CACHE");
}

/* ---- the CUDA table ---- */

static double cu_peak(const char *name, int sms, int major, int minor, gf_precision prec, int tf32, int *rc)
{
	char what[256];
	double v = 0;
	*rc = gf_cu_peak_lookup(name, sms, major, minor, 1980000, prec, tf32, &v, what, sizeof(what));
	return v;
}

/* docs/cuda.md's table ("| H100 SXM | `NVIDIA H100 80GB HBM3` (132 SMs) | 67 | 494.5 | 989.5 | 989.5 | ...")
 * gives what the lookup gives for each named device. */
static void test_cuda_table(void **state)
{
	(void)state;
	int rc;
	/* names as cudaDeviceProp.name has them */
	assert_true(cu_peak("NVIDIA H100 80GB HBM3", 132, 9, 0, GF_PREC_BF16, 0, &rc) == 989.5e12 && !rc);
	assert_true(cu_peak("NVIDIA H100 80GB HBM3", 132, 9, 0, GF_PREC_FP32, 1, &rc) == 494.5e12 && !rc);
	assert_true(cu_peak("NVIDIA H100 80GB HBM3", 132, 9, 0, GF_PREC_FP32, 0, &rc) == 67e12 && !rc);
	assert_true(cu_peak("NVIDIA H100 PCIe", 114, 9, 0, GF_PREC_FP16, 0, &rc) == 756.5e12 && !rc);
	assert_true(cu_peak("NVIDIA H100", 114, 9, 0, GF_PREC_FP32, 0, &rc) == 51e12 && !rc);   /* told by its SMs */
	assert_true(cu_peak("NVIDIA H100 NVL", 132, 9, 0, GF_PREC_BF16, 0, &rc) == 835.5e12 && !rc);
	assert_true(cu_peak("NVIDIA H200", 132, 9, 0, GF_PREC_BF16, 0, &rc) == 989.5e12 && !rc);
	assert_true(cu_peak("NVIDIA H200 NVL", 132, 9, 0, GF_PREC_FP32, 1, &rc) == 417.5e12 && !rc);
	assert_true(cu_peak("NVIDIA A100-SXM4-80GB", 108, 8, 0, GF_PREC_FP32, 1, &rc) == 156e12 && !rc);
	assert_true(cu_peak("NVIDIA A100 80GB PCIe", 108, 8, 0, GF_PREC_BF16, 0, &rc) == 312e12 && !rc);
	assert_true(cu_peak("Tesla V100-SXM2-16GB", 80, 7, 0, GF_PREC_FP32, 1, &rc) == 15.7e12 && !rc); /* no TF32 */
	cu_peak("Tesla V100-SXM2-16GB", 80, 7, 0, GF_PREC_BF16, 0, &rc);
	assert_int_equal(rc, GF_EUNSUPPORTED);
	/* not in the table: a GH200 is no H200, an RTX A1000 no A100; fp32
	 * from the properties (2 x 20 SMs x 128 lanes x 1.98 GHz), nothing at
	 * a tensor-core precision */
	assert_true(cu_peak("NVIDIA RTX A1000", 20, 8, 6, GF_PREC_FP32, 0, &rc) == 2.0 * 20 * 128 * 1.98e9 && !rc);
	cu_peak("NVIDIA GH200 480GB", 132, 9, 0, GF_PREC_BF16, 0, &rc);
	assert_int_equal(rc, GF_EUNSUPPORTED);
	cu_peak("NVIDIA Future 1", 100, 99, 0, GF_PREC_FP32, 0, &rc);
	assert_int_equal(rc, GF_EUNSUPPORTED);

	/* every row of docs/cuda.md's table */
	const char *src = getenv("GF_SOURCE_DIR");
	if (!src)
		skip();
	char path[512], line[1024];
	snprintf(path, sizeof(path), "%s/docs/cuda.md", src);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	int rows = 0, in = 0;
	while (fgets(line, sizeof(line), f)) {
		if (strstr(line, "<!-- peak table -->"))
			in = 1;
		else if (in && line[0] != '|')
			in = rows == 0;
		if (!in || line[0] != '|')
			continue;
		char *b = strchr(line, '`'), *e = b ? strchr(b + 1, '`') : NULL;
		if (!e)
			continue;
		char name[96];
		snprintf(name, sizeof(name), "%.*s", (int)(e - b - 1), b + 1);
		int sms = 0;
		char *sm = strstr(e, "(");
		if (sm && sscanf(sm, "(%d SMs)", &sms) != 1)
			sms = 0;
		double v[4];
		char *cell = strchr(e, '|');
		int k = 0;
		for (; k < 4 && cell; k++) {
			char *endp;
			v[k] = strtod(cell + 1, &endp);
			if (endp == cell + 1)   /* "-": none */
				v[k] = 0;
			cell = strchr(cell + 1, '|');
		}
		assert_int_equal(k, 4);
		if (!(v[0] > 0))   /* the header */
			continue;
		gf_precision pr[4] = { GF_PREC_FP32, GF_PREC_FP32, GF_PREC_BF16, GF_PREC_FP16 };
		for (int j = 0; j < 4; j++) {
			double got = cu_peak(name, sms ? sms : 1, 9, 0, pr[j], j == 1, &rc);
			if (v[j] == 0 && j == 1)   /* no TF32 tensor cores: the fp32 figure */
				assert_true(!rc && got == v[0] * 1e12);
			else if (v[j] == 0)
				assert_int_equal(rc, GF_EUNSUPPORTED);
			else if (rc || fabs(got - v[j] * 1e12) > 1e-9 * got)
				fail_msg("docs/cuda.md: %s column %d says %g TFLOP/s, the table %g", name, j, v[j], got * 1e-12);
		}
		rows++;
	}
	fclose(f);
	print_message("docs/cuda.md: %d devices agree with peak_cuda.c\n", rows);
	assert_true(rows >= 10);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dcgan_per_image),
		cmocka_unit_test(test_biggan128_per_image),
		cmocka_unit_test(test_counted_steps),
		cmocka_unit_test(test_penalty_flops),
		cmocka_unit_test(test_cpu_peak),
		cmocka_unit_test(test_cuda_table),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
