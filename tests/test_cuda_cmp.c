/* The CUDA tests' comparisons, checked on the CPU: no GPU needed, runs
 * everywhere (also where the CUDA backend is not built).
 *
 * - bf16/fp16 rounding in software (round to nearest even, fp16
 *   subnormals and overflow) against the bit trick and the compiler's
 *   _Float16;
 * - the bf16/fp16 bounds of test_cuda_cmp.h hold for GEMMs over many
 *   random reduction lengths and operand scales, and for test_cuda_ops's
 *   own GEMM and convolution cases, computed with the operands rounded as
 *   the CUDA backend rounds them; they are tight at small k (more than
 *   half of the bound is reached) and fail a computation that lost a bit;
 * - the two bf16 failures of the GPU run of 2026-11-26 (GEMM k = 29:
 *   "relative error 0.0868"; the 3x3 convolution: 0.0675) are exactly
 *   that rounding, reproduced bit for bit here, and inside the bound; the
 *   zero gradients test_cuda_net failed on pass with the layer's floor;
 * - grads_close: rounding noise on a zero gradient inside a layer passes,
 *   a wrong gradient fails;
 * - soft checks count and go on;
 * - every network the CUDA tests build (test_cuda_nets.h) builds on the
 *   CPU backend, runs forward and backward, and has a gradient in every
 *   layer;
 * - the CUDA tests' network passes, run on a CPU backend that rounds like
 *   the CUDA backend in bf16 and fp16 (and fp32 with 22-bit noise), stay
 *   within the network tolerances (bf16/fp16: within half); with a
 *   bias-gradient bug planted they fail; with fp32-size noise the floor
 *   from a tensor's own largest value fails, as on the GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "test_cuda_cases.h"
#include "test_cuda_emul.h"

static gf_backend *cpu;

static int setup(void **state)
{
	(void)state;
	cpu = cpu_open();
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	gf_backend_close(cpu);
	return 0;
}

/* ---- rounding to bf16 / fp16 (test_cuda_emul.h) ---- */

static void test_round_formats(void **state)
{
	(void)state;
	/* ties to even, overflow, subnormals */
	CHECK(round_bits(1.0f + 0x1p-8f, 8, &BF16) == 1.0f);
	CHECK(round_bits(1.0f + 0x1p-7f + 0x1p-8f, 8, &BF16) == 1.0f + 0x1p-6f);
	CHECK(round_bits(1.0f + 0x1p-8f + 0x1p-12f, 8, &BF16) == 1.0f + 0x1p-7f);
	CHECK(isinf(round_bits(FLT_MAX, 8, &BF16)));
	CHECK(round_bits(1.0f + 0x1p-11f, 11, &FP16) == 1.0f);
	CHECK(round_bits(65519.0f, 11, &FP16) == 65504.0f);
	CHECK(isinf(round_bits(65520.0f, 11, &FP16)) && round_bits(-65520.0f, 11, &FP16) < 0);
	CHECK(round_bits(0x1p-24f, 11, &FP16) == 0x1p-24f);     /* smallest subnormal */
	CHECK(round_bits(0x1p-25f, 11, &FP16) == 0.0f);         /* tie: to the even 0 */
	CHECK(round_bits(0x1.8p-25f, 11, &FP16) == 0x1p-24f);
	CHECK(round_bits(0x1.7p-14f, 11, &FP16) == 0x1.7p-14f); /* a normal with 11 bits */
	CHECK(round_bits(0x1.0018p-15f, 11, &FP16) == 0x1p-15f);   /* subnormal spacing 2^-24 */

	/* random bit patterns (every exponent) against the bit trick and the
	 * compiler's binary16 conversion */
	gf_rng r;
	gf_rng_init(&r, 2026, 11);
	size_t bad_bf = 0, bad_fp = 0, n = 200000;
	for (size_t i = 0; i < n; i++) {
		uint32_t u = (uint32_t)gf_rng_u64(&r);
		float x = float_of(u);
		if (!isfinite(x))
			continue;
		bad_bf += memcmp(&(float){ round_bits(x, 8, &BF16) }, &(float){ bf16_bits(x) }, 4) != 0;
#ifdef __FLT16_MAX__
		/* exponents near fp16's range: scale into [2^-30, 2^20) */
		float y = ldexpf(frexpf(x, &(int){ 0 }), (int)(u % 50) - 30);
		bad_fp += memcmp(&(float){ round_bits(y, 11, &FP16) }, &(float){ (float)(_Float16)y }, 4) != 0;
#endif
	}
	CHECK_EQ(bad_bf, 0);
	CHECK_EQ(bad_fp, 0);
	checks_done();
}

/* ---- the bf16/fp16 bounds ---- */

/* Worst |got - want| / bound over n (INFINITY where the bound is 0 and
 * they differ). */
static double worst_ratio(const float *got, const float *want, const double *bound, size_t n)
{
	double w = 0;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)got[i] - (double)want[i]);
		double r = d == 0 ? 0 : bound[i] > 0 ? d / bound[i] : INFINITY;
		w = isnan(d) ? INFINITY : fmax(w, r);
	}
	return w;
}

/* One random GEMM on an emulated backend g against the CPU: the worst
 * ratio of its error to the bound. */
static double gemm_ratio(gf_backend *g, gf_precision prec, gf_rng *r, int k, float scale)
{
	int ta = (int)(gf_rng_u64(r) & 1), tb = (int)(gf_rng_u64(r) & 1);
	int m = 3 + (int)(gf_rng_u64(r) % 6), n = 2 + (int)(gf_rng_u64(r) % 7);
	float alphas[3] = { 1.0f, 0.7f, -1.5f }, betas[2] = { 0.0f, 1.3f };
	float alpha = alphas[gf_rng_u64(r) % 3], beta = betas[gf_rng_u64(r) % 2];
	int lda = (ta ? m : k) + 1, ldb = (tb ? k : n) + 2, ldc = n + 3;
	size_t na = (size_t)(ta ? k : m) * lda, nb = (size_t)(tb ? n : k) * ldb, nc = (size_t)m * ldc;
	float *a = malloc(na * 4), *b = malloc(nb * 4), *c = malloc(nc * 4), *c2 = malloc(nc * 4);
	gf_rng_uniform(r, a, na, -scale, scale);
	gf_rng_uniform(r, b, nb, -1.0f, 1.0f);
	gf_rng_uniform(r, c, nc, -1.0f, 1.0f);
	memcpy(c2, c, nc * 4);
	double *bound = gemm_bounds(cpu, prec, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
	NN_OK(cpu->ops->gemm(cpu, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc));
	NN_OK(g->ops->gemm(g, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c2, ldc));
	double w = worst_ratio(c2, c, bound, nc);
	free(a);
	free(b);
	free(c);
	free(c2);
	free(bound);
	return w;
}

/* The bound holds over reduction lengths 1..600 and operand scales from
 * fp16's subnormals (2^-20) to 300; at k <= 4 the error reaches more than
 * half of it (it is not loose); a computation with one bit fewer exceeds
 * it. */
static void test_gemm_bound(void **state)
{
	(void)state;
	const float scales[4] = { 1.0f, 1e-3f, 0x1p-20f, 300.0f };
	gf_precision precs[2] = { GF_PREC_BF16, GF_PREC_FP16 };
	for (int pi = 0; pi < 2; pi++) {
		struct emul e, e1;
		gf_backend *g = emul_open(&e, precs[pi], 0, BUG_NONE), *g1 = emul_open(&e1, precs[pi], 1, BUG_NONE);
		gf_rng r;
		gf_rng_init(&r, 27, (uint64_t)pi);
		double worst = 0, small = 0, lost = 0;
		int worst_k = 0;
		for (int trial = 0; trial < 300; trial++) {
			int k = trial < 60 ? 1 + trial % 4 : 1 + (int)(gf_rng_u64(&r) % 600);
			float scale = scales[trial % 4];
			gf_rng r1 = r;   /* the same case for the one-bit-short backend */
			double w = gemm_ratio(g, precs[pi], &r, k, scale);
			double w1 = gemm_ratio(g1, precs[pi], &r1, k, scale);
			if (w > worst) {
				worst = w;
				worst_k = k;
			}
			if (k <= 4)
				small = fmax(small, w);
			lost = fmax(lost, w1);
		}
		print_message("gemm %s: worst error / bound %.3f (k = %d), at k <= 4 %.3f; one bit short %.3f\n",
		              prec_name(precs[pi]), worst, worst_k, small, lost);
		CHECK(worst <= 1.0);
		CHECK(small > 0.5);
		CHECK(lost > 1.0);
		emul_close(&e);
		emul_close(&e1);
	}
	checks_done();
}

/* A 1x1 convolution of one input channel (k = 1) on an emulated backend:
 * the worst error / bound of y. */
static double conv_k1_ratio(gf_backend *g, gf_precision prec, uint64_t seed)
{
	gf_conv_desc d;
	memset(&d, 0, sizeof(d));
	d.n = 4;
	d.cin = 1;
	d.h = d.w = d.hout = d.wout = 16;
	d.cout = 8;
	d.kh = d.kw = d.sh = d.sw = d.up = 1;
	d.dtype = GF_F32;
	d.layout = GF_NCHW;
	size_t nx = 4 * 256, ny = 4 * 8 * 256;
	float *x = host_rand(nx, seed, -1, 1), *w = host_rand(8, seed + 1, -1, 1), *b = host_rand(8, seed + 2, -1, 1);
	float *y = malloc(ny * 4), *y2 = malloc(ny * 4);
	double *bound = conv_bounds_y(cpu, prec, &d, x, w, b);
	NN_OK(cpu->ops->conv2d_forward(cpu, y, x, w, b, &d));
	NN_OK(g->ops->conv2d_forward(g, y2, x, w, b, &d));
	double r = worst_ratio(y2, y, bound, ny);
	free(x);
	free(w);
	free(b);
	free(y);
	free(y2);
	free(bound);
	return r;
}

/* test_cuda_ops's GEMM and convolution cases, every configuration's
 * precision, on the emulated backends: inside their bounds. The three
 * roundings of a convolution are tight at k = 1 and a lost bit shows. */
static void test_ops_cases(void **state)
{
	(void)state;
	gf_precision precs[2] = { GF_PREC_BF16, GF_PREC_FP16 };
	for (int pi = 0; pi < 2; pi++) {
		struct emul e, e1;
		gf_backend *g = emul_open(&e, precs[pi], 0, BUG_NONE), *g1 = emul_open(&e1, precs[pi], 1, BUG_NONE);
		gemm_cases(cpu, g, precs[pi]);
		char cfg[32];
		snprintf(cfg, sizeof(cfg), "%s (emulated)", prec_name(precs[pi]));
		conv_cases(cpu, g, precs[pi], cfg);
		double w = conv_k1_ratio(g, precs[pi], 51), w1 = conv_k1_ratio(g1, precs[pi], 51);
		print_message("conv %s k = 1: worst error / bound %.3f; one bit short %.3f\n", prec_name(precs[pi]), w, w1);
		CHECK(w <= 1.0 && w > 0.5);
		CHECK(w1 > 1.0);
		emul_close(&e);
		emul_close(&e1);
	}
	checks_done();
}

/* The GPU run of 2026-11-26 (t_ops.txt): in bf16, test_gemm's first case
 *   gemm ta=0 tb=0 k=29 beta=0: relative error 0.0868 > 0.03 at 1085:
 *   got 0.0701556206, want 0.0832617879
 * and test_conv's first
 *   conv bf16/auto/subpixel n3 c5 9x7 -> 6 k3 s1 p1 up1: y: relative error
 *   0.0675 > 0.03 at 941: got 0.076420188, want 0.0853358358
 * (a plain 3x3 convolution, in the configuration whose up2 option is
 * subpixel). The same inputs here, rounded to bf16 as the backend rounds
 * them, give the GPU's values bit for bit: the error is the format's. Both
 * are inside the bound (at 0.22 and 0.15 of it). */
static void test_logged_cases(void **state)
{
	(void)state;
	struct emul e;
	gf_backend *g = emul_open(&e, GF_PREC_BF16, 0, BUG_NONE);

	int m = 37, n = 53, k = 29, lda = k + 3, ldb = n + 2, ldc = n + 1;
	size_t na = (size_t)m * lda, nb = (size_t)k * ldb, nc = (size_t)m * ldc, at = 1085;
	float *a = host_rand(na, 1, -1, 1), *b = host_rand(nb, 2, -1, 1), *c = host_rand(nc, 3, -1, 1);
	double *bound = gemm_bounds(cpu, GF_PREC_BF16, 0, 0, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
	NN_OK(g->ops->gemm(g, 0, 0, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc));
	float got = 0.0701556206f, want = 0.0832617879f;
	CHECK(c[at] == got);
	double ratio = fabs((double)got - want) / bound[at];
	print_message("gemm k = 29, element %zu: |0.0701556206 - 0.0832617879| = %.4f, bound %.4f (%.2f of it)\n", at,
	              fabs((double)got - want), bound[at], ratio);
	CHECK(ratio <= 1.0);
	free(a);
	free(b);
	free(c);
	free(bound);

	gf_conv_desc d;
	memset(&d, 0, sizeof(d));
	d.n = 3;
	d.cin = 5;
	d.h = d.hout = 9;
	d.w = d.wout = 7;
	d.cout = 6;
	d.kh = d.kw = 3;
	d.sh = d.sw = d.ph = d.pw = d.up = 1;
	d.dtype = GF_F32;
	d.layout = GF_NCHW;
	size_t nx = 3 * 5 * 63, nw = 6 * 5 * 9, ny = 3 * 6 * 63;
	at = 941;
	float *x = host_rand(nx, 11, -1, 1), *wt = host_rand(nw, 12, -0.5f, 0.5f), *bias = host_rand(6, 13, -1, 1);
	float *y = malloc(ny * 4);
	double *by = conv_bounds_y(cpu, GF_PREC_BF16, &d, x, wt, bias);
	NN_OK(g->ops->conv2d_forward(g, y, x, wt, bias, &d));
	got = 0.076420188f;
	want = 0.0853358358f;
	CHECK(y[at] == got);
	ratio = fabs((double)got - want) / by[at];
	print_message("conv 3x3, element %zu: |0.076420188 - 0.0853358358| = %.4f, bound %.4f (%.2f of it)\n", at,
	              fabs((double)got - want), by[at], ratio);
	CHECK(ratio <= 1.0);
	free(x);
	free(wt);
	free(bias);
	free(y);
	free(by);
	emul_close(&e);
	checks_done();
}

/* ---- gradient blocks ---- */

/* A synthetic gradient block of two layers: layer 0 with weights of order
 * 1 and a bias that a batchnorm follows (zero: rounding noise of 1e-11 on
 * each side), layer 1 with small gradients (1e-3). */
static const gf_view grad_views[4] = {
	{ .name = "0.weight", .offset = 0, .numel = 64 },
	{ .name = "0.bias", .offset = 64, .numel = 16 },
	{ .name = "1.weight", .offset = 80, .numel = 32 },
	{ .name = "1.bias", .offset = 112, .numel = 8 },
};
#define NGRAD 120

static void grad_block(float *want, float *got)
{
	gf_rng r;
	gf_rng_init(&r, 31, 0);
	float noise[NGRAD];
	gf_rng_uniform(&r, want, NGRAD, -1, 1);
	gf_rng_uniform(&r, noise, NGRAD, -1, 1);
	for (int i = 0; i < NGRAD; i++) {
		if (i >= 64 && i < 80) {   /* 0.bias: noise on both sides, unrelated */
			want[i] *= 1e-11f;
			got[i] = 1e-11f * noise[i];
		} else {
			if (i >= 80)
				want[i] *= 1e-3f;
			got[i] = want[i] * (1.0f + 1e-6f * noise[i]);   /* another summation order */
		}
	}
}

static void test_grads_close(void **state)
{
	(void)state;
	float want[NGRAD], got[NGRAD];
	grad_block(want, got);
	print_message("the comparisons print the failures they are expected to find below\n");
	/* noise on the zero gradient passes with the layer's floor, and failed
	 * with the tensor's own (what test_cuda_net did on 2026-11-26) */
	CHECK(grads_close("noise", got, want, grad_views, 4, 1e-3));
	CHECK(!nn_close("noise, tensor floor", got + 64, want + 64, 16, 1e-3));
	/* a zero gradient that is not zero: 1e-4 where the layer is of order 1 */
	grad_block(want, got);
	got[70] = 1e-4f;
	CHECK(!grads_close("bias not zero", got, want, grad_views, 4, 1e-3));
	/* a nonzero bias gradient 1 % off */
	grad_block(want, got);
	for (int i = 112; i < 120; i++)
		got[i] = want[i] * 1.01f;
	CHECK(!grads_close("bias 1% off", got, want, grad_views, 4, 1e-3));
	/* a small layer is checked at its own scale: 5 % off on gradients of
	 * 1e-3 fails at tol 1e-2, where a floor from the whole block (1e-2 of
	 * its largest, ~1) would let it through */
	grad_block(want, got);
	for (int i = 80; i < 112; i++)
		got[i] = want[i] * 1.05f;
	CHECK(!grads_close("small layer 5% off", got, want, grad_views, 4, 1e-2));
	double blockmax = 0, worst = 0;
	for (int i = 0; i < NGRAD; i++)
		blockmax = fmax(blockmax, fabs(want[i]));
	for (int i = 80; i < 112; i++)
		worst = fmax(worst, fabs((double)got[i] - want[i]) / (fabs(want[i]) + 1e-2 * blockmax));
	CHECK(worst < 1e-2);
	/* NaN fails */
	grad_block(want, got);
	got[3] = NAN;
	CHECK(!grads_close("NaN", got, want, grad_views, 4, 1e-3));
	checks_done();
}

/* G's gradients on the CPU as gan_pass computes them (train mode, D on
 * G's output, BCE towards 1 through D into G). A new host copy; *v gets
 * the views (valid while the returned net lives: *net, destroy it). */
static float *gan_pass_g_grads(const char *gcode, const char *dcode, int B, int zdim, int classes, gf_net **net,
                               const gf_view **v, size_t *nv)
{
	gf_net *G = net_build_ok(cpu, gcode, B), *D = net_build_ok(cpu, dcode, B);
	gf_rng r = { 42, 0, 0 };
	NN_OK(gf_net_init(G, &r));
	NN_OK(gf_net_init(D, &r));
	gf_rng_init(gf_net_rng(D), 7, 1);
	float *z = host_rand((size_t)B * zdim, 3, -1, 1);
	int32_t lab[64];
	for (int i = 0; i < B; i++)
		lab[i] = classes ? i % classes : 0;
	gf_tensor zt = nn_tensor(z, 2, B, zdim), lt = gf_tensor_make(lab, GF_I32, 1, (int64_t[]){ B }), f, p, dx;
	const gf_tensor *labels = classes ? &lt : NULL;
	NN_OK(gf_net_forward(G, &zt, labels, GF_TRAIN));
	NN_OK(gf_net_output(G, &f));
	NN_OK(gf_net_forward(D, &f, labels, GF_TRAIN));
	NN_OK(gf_net_output(D, &p));
	float *dp = calloc((size_t)B, 4), l;
	NN_OK(gf_loss(cpu, GF_LOSS_BCE, &l, dp, &p, NULL, 1.0f, 1.0f));
	NN_OK(gf_net_backward(D, dp, GF_NEED_DX | GF_NEED_DW));
	NN_OK(gf_net_dx(D, &dx));
	NN_OK(gf_net_backward(G, dx.data, GF_NEED_DW));
	size_t n;
	const float *g = gf_net_block(G, GF_GRADS, &n);
	float *h = malloc(n * 4);
	memcpy(h, g, n * 4);
	*v = gf_net_views(G, GF_GRADS, nv);
	*net = G;
	gf_net_destroy(D);
	free(z);
	free(dp);
	return h;
}

/* A gradient the GPU logged, put into the CPU's block in place of the
 * CPU's own value: the layer's floor accepts it at tol, the tensor's own
 * floor (the rule that failed) does not. */
static int logged_grad(const char *what, const float *want, const gf_view *v, size_t nv, const char *view, size_t at,
                       float gpu, double tol)
{
	size_t i = 0, n = v[nv - 1].offset + v[nv - 1].numel, w;
	while (i < nv && strcmp(v[i].name, view))
		i++;
	assert_true(i < nv && at < v[i].numel);
	float *got = malloc(n * 4);
	memcpy(got, want, n * 4);
	got[v[i].offset + at] = gpu;
	int ok = grads_close(what, got, want, v, nv, tol);
	double own = nn_relerr(got + v[i].offset, want + v[i].offset, v[i].numel, 1e-2, &w);
	double lmax = 0;
	for (size_t j = 0; j < nv; j++)
		if (layer_part(v[j].name) == layer_part(view) && !strncmp(v[j].name, view, layer_part(view)))
			for (size_t e = 0; e < v[j].numel; e++)
				lmax = fmax(lmax, fabs(want[v[j].offset + e]));
	double err = fabs((double)gpu - want[v[i].offset + at]) / (fabs(want[v[i].offset + at]) + 1e-2 * lmax);
	print_message("%s %s[%zu]: GPU %.3g, CPU here %.3g: %.2g of the tolerance with the layer's floor, %.3g with "
	              "the tensor's own\n",
	              what, view, at, (double)gpu, (double)want[v[i].offset + at], err / tol, own / tol);
	free(got);
	return ok && own > tol;
}

/* The zero gradients test_cuda_net failed on (t_net.txt, fp32, net
 * tolerance 1e-3), each the GPU's logged value against this CPU's
 * gradients of the same pass: inside the tolerance with the layer's floor
 * (and far outside with the tensor's own). The all-layers net's 0.bias is
 * not here: the net has changed (tanh after its batchnorm). */
static void test_logged_grads(void **state)
{
	(void)state;
	gf_net *G;
	const gf_view *v;
	size_t nv;
	float *g = gan_pass_g_grads(NET_DCGAN_G, NET_DCGAN_D, 16, 100, 0, &G, &v, &nv);
	CHECK(logged_grad("fp32: G grads", g, v, nv, "4.bias", 50, 1.55875313e-11f, 1e-3));
	CHECK(logged_grad("fp32: G grads", g, v, nv, "8.bias", 32, 2.59139377e-11f, 1e-3));
	gf_net_destroy(G);
	free(g);
	g = gan_pass_g_grads(NET_DCGAN_CG, NET_DCGAN_CD, 10, 20, 10, &G, &v, &nv);
	CHECK(logged_grad("cgan: G grads", g, v, nv, "6.bias", 34, -2.27695467e-14f, 1e-3));
	CHECK(logged_grad("cgan: G grads", g, v, nv, "10.bias", 20, 1.35259859e-13f, 1e-3));
	gf_net_destroy(G);
	free(g);

	/* net_pass's CPU side for the cbn + proj net, fp32 */
	int B = 6;
	gf_net *a = net_build_ok(cpu, NET_CBN_PROJ, B);
	gf_rng r = { 8, 0, 0 };
	NN_OK(gf_net_init(a, &r));
	gf_rng_init(gf_net_rng(a), 4, 4);
	float *x = host_rand((size_t)B * 12, 17, -1, 1), *t = host_rand((size_t)B * 10, 18, 0, 0.2f);
	int32_t lab[6];
	for (int i = 0; i < B; i++)
		lab[i] = (i * 3 + 1) % 5;
	gf_tensor xt = nn_tensor(x, 2, B, 12), lt = gf_tensor_make(lab, GF_I32, 1, (int64_t[]){ B }), o;
	gf_tensor tt = nn_tensor(t, 2, B, 10);
	NN_OK(gf_net_forward(a, &xt, &lt, GF_TRAIN));
	NN_OK(gf_net_output(a, &o));
	float *d = calloc((size_t)B * 10, 4);
	NN_OK(gf_loss(cpu, GF_LOSS_LS, NULL, d, &o, &tt, 0, 1));
	NN_OK(gf_net_backward(a, d, GF_NEED_DW | GF_NEED_DX));
	v = gf_net_views(a, GF_GRADS, &nv);
	CHECK(logged_grad("cbn + proj: grads", gf_net_block(a, GF_GRADS, NULL), v, nv, "6.bias", 2, -2.25007534e-06f, 1e-3));
	gf_net_destroy(a);
	free(x);
	free(t);
	free(d);
	checks_done();
}

/* ---- soft checks ---- */

static void test_soft_checks(void **state)
{
	(void)state;
	print_message("two failed checks expected below\n");
	assert_int_equal(CHECK(1 + 1 == 2), 1);
	assert_int_equal(CHECK(1 + 1 == 3), 0);   /* prints, counts, goes on */
	assert_int_equal(CHECK_EQ(2, 3), 0);
	assert_int_equal(CHECK_MEM("ab", "ab", 2), 1);
	assert_int_equal(checks_run, 4);
	assert_int_equal(checks_failed, 2);
	checks_reset(NULL);
	assert_int_equal(checks_failed, 0);
	checks_done();   /* nothing failed: passes */
}

/* ---- the networks the CUDA tests build ---- */

/* Each builds on the CPU at its batch and runs forward (train) and
 * backward: the output has the batch's rows, outputs and every gradient
 * are finite, and every layer with parameters has a gradient above
 * 1e-4 of the block's largest. */
static void test_nets_build(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_TEST_NETS; i++) {
		const struct test_net *t = &test_nets[i];
		gf_net *net = NULL;
		int rc = nn_build(&net, cpu, t->code, t->batch, 0);
		if (rc) {
			fprintf(stderr, "%s does not build: %s\n", t->name, gf_errmsg());
			CHECK(rc == 0);
			continue;
		}
		gf_rng r = { 9, 0, 0 };
		NN_OK(gf_net_init(net, &r));
		gf_tensor in, out, y, dx;
		gf_net_shapes(net, &in, &out);
		in.shape[0] = t->batch;
		size_t nx = (size_t)gf_tensor_numel(&in);
		float *x = malloc(nx * 4);
		gf_rng_normal(&r, x, nx, 0, 1);
		in.data = x;
		int32_t lab[64];
		for (int j = 0; j < t->batch; j++)
			lab[j] = j % (t->classes ? t->classes : 1);
		gf_tensor lt = gf_tensor_make(lab, GF_I32, 1, (int64_t[]){ t->batch });
		NN_OK(gf_net_forward(net, &in, t->classes ? &lt : NULL, GF_TRAIN));
		NN_OK(gf_net_output(net, &y));
		size_t ny = (size_t)gf_tensor_numel(&y);
		CHECK_EQ(y.shape[0], t->batch);
		size_t bad = 0;
		for (size_t j = 0; j < ny; j++)
			bad += !isfinite(((float *)y.data)[j]);
		float *dy = malloc(ny * 4);
		gf_rng_normal(&r, dy, ny, 0, 1);
		NN_OK(gf_net_backward(net, dy, GF_NEED_DX | GF_NEED_DW));
		NN_OK(gf_net_dx(net, &dx));
		for (size_t j = 0; j < nx; j++)
			bad += !isfinite(((float *)dx.data)[j]);
		size_t ng;
		const float *gr = gf_net_block(net, GF_GRADS, &ng);
		double norm = 0;
		for (size_t j = 0; j < ng; j++) {
			bad += !isfinite(gr[j]);
			norm += (double)gr[j] * gr[j];
		}
		if (bad || !(norm > 0))
			fprintf(stderr, "%s: %zu non-finite values, gradient norm %g\n", t->name, bad, sqrt(norm));
		CHECK(bad == 0 && norm > 0);
		/* every layer with parameters reaches the output: its largest
		 * gradient is not rounding noise (a net whose layers sit behind a
		 * constant, as test_resnet_kinds's did, compares noise with noise) */
		size_t nv;
		const gf_view *v = gf_net_views(net, GF_GRADS, &nv);
		double bmax = 0;
		for (size_t j = 0; j < ng; j++)
			bmax = fmax(bmax, fabs(gr[j]));
		for (size_t j = 0; j < nv; j++) {
			size_t len = layer_part(v[j].name);
			if (j && layer_part(v[j - 1].name) == len && !strncmp(v[j - 1].name, v[j].name, len))
				continue;   /* the layer was checked at its first tensor */
			double lmax = 0;
			for (size_t q = 0; q < nv; q++)
				if (layer_part(v[q].name) == len && !strncmp(v[q].name, v[j].name, len))
					for (size_t e = 0; e < v[q].numel; e++)
						lmax = fmax(lmax, fabs(gr[v[q].offset + e]));
			if (getenv("GF_CMP_VERBOSE"))
				fprintf(stderr, "%s: layer %.*s: largest gradient %.3g of the block's\n", t->name, (int)len, v[j].name,
				        lmax / bmax);
			if (!(lmax > 1e-4 * bmax))
				fprintf(stderr, "%s: layer %.*s has no gradient (%.3g, the block's largest %.3g)\n", t->name,
				        (int)len, v[j].name, lmax, bmax);
			CHECK(lmax > 1e-4 * bmax);
		}
		free(x);
		free(dy);
		gf_net_destroy(net);
	}
	checks_done();
}

/* The passes test_cuda_net runs, in the precisions it runs them, against
 * an emulated backend. fp32 with 22-bit operands and results (noise on
 * the zero gradients, what failed on the GPU on 2026-11-26) within the
 * fp32 tolerance; the GPU's own fp32 noise of that run sits at 1 % of it
 * (test_logged_grads). bf16 and fp16 (the operands' rounding alone, as on
 * the GPU) within half their tolerances (net_tol_margin), so that the
 * GPU, whose rounding is another sample of the same noise, has room. */
static void test_nets_emulated(void **state)
{
	(void)state;
	gf_precision precs[3] = { GF_PREC_FP32, GF_PREC_BF16, GF_PREC_FP16 };
	for (int pi = 0; pi < 3; pi++) {
		net_tol_margin = precs[pi] == GF_PREC_FP32 ? 1.0 : 0.5;
		struct emul e;
		gf_backend *g = precs[pi] == GF_PREC_FP32 ? emul_open_f22(&e, BUG_NONE) : emul_open(&e, precs[pi], 0, BUG_NONE);
		char cfg[40];
		snprintf(cfg, sizeof(cfg), "%s (emulated)", precs[pi] == GF_PREC_FP32 ? "fp32, 22 bits" : prec_name(precs[pi]));
		gan_pass(cpu, g, precs[pi], cfg, NET_DCGAN_G, NET_DCGAN_D, 16, 100, 0);   /* test_dcgan */
		if (precs[pi] == GF_PREC_FP32) {                                           /* test_cgan_classifier */
			gan_pass(cpu, g, precs[pi], "cgan (emulated)", NET_DCGAN_CG, NET_DCGAN_CD, 10, 20, 10);
			classifier_pass(cpu, g, precs[pi]);
		}
		if (precs[pi] != GF_PREC_FP16) {   /* test_all_layers, test_resnet_kinds, test_cbn_proj */
			net_pass(cpu, g, precs[pi], "all layers (emulated)", NET_ALL_LAYERS, 0);
			net_pass(cpu, g, precs[pi], "resnet kinds (emulated)", NET_RESNET_KINDS, 0);
			net_pass(cpu, g, precs[pi], "cbn + proj (emulated)", NET_CBN_PROJ, 5);
		}
		emul_close(&e);
	}
	net_tol_margin = 1.0;
	checks_done();
}

/* G's gradients from the same output gradient on the CPU and on an
 * emulated backend e; *own_floor_fails: how many tensors fail the fp32
 * tolerance with a floor from their own largest value. Returns
 * grads_close's verdict (the layer's floor). */
static int g_grads(struct emul *e, int *own_floor_fails)
{
	int B = 16;
	gf_net *a = net_build_ok(cpu, NET_DCGAN_G, B), *b = net_build_ok(e->be, NET_DCGAN_G, B);
	gf_rng r = { 42, 0, 0 };
	NN_OK(gf_net_init(a, &r));
	copy_net(b, a);
	float *z = host_rand((size_t)B * 100, 3, -1, 1);
	gf_tensor zt = nn_tensor(z, 2, B, 100), ya;
	NN_OK(gf_net_forward(a, &zt, NULL, GF_TRAIN));
	NN_OK(gf_net_forward(b, &zt, NULL, GF_TRAIN));
	NN_OK(gf_net_output(a, &ya));
	size_t ny = (size_t)gf_tensor_numel(&ya), nv;
	float *dy = host_rand(ny, 4, -1, 1);
	NN_OK(gf_net_backward(a, dy, GF_NEED_DW));
	NN_OK(gf_net_backward(b, dy, GF_NEED_DW));
	const float *ga = gf_net_block(a, GF_GRADS, NULL), *gb = gf_net_block(b, GF_GRADS, NULL);
	const gf_view *v = gf_net_views(a, GF_GRADS, &nv);
	int ok = grads_close("G grads (fp32 with 22 bits)", gb, ga, v, nv, net_tol(GF_PREC_FP32));
	*own_floor_fails = 0;
	for (size_t i = 0; i < nv; i++) {
		size_t w;
		*own_floor_fails += nn_relerr(gb + v[i].offset, ga + v[i].offset, v[i].numel, 1e-2, &w) > net_tol(GF_PREC_FP32);
	}
	free(z);
	free(dy);
	gf_net_destroy(a);
	gf_net_destroy(b);
	return ok;
}

/* The same passes catch a bias-gradient bug (fp32, where the emulated
 * backend is otherwise the CPU): a 1 % error on the gradients that are
 * not zero (D's biases), and an off-by-one over the batch (which makes
 * the zero gradients of biases before a batchnorm nonzero). And with
 * rounding noise of the GPU's fp32 size (22 bits), the floor from a
 * tensor's own largest value fails on the biases before a batchnorm, as
 * test_cuda_net did on 2026-11-26, where the layer's floor passes. */
static void test_nets_catch(void **state)
{
	(void)state;
	int bugs[2] = { BUG_DB_SCALE, BUG_DB_DROP_LAST };
	for (int b = 0; b < 2; b++) {
		struct emul e;
		gf_backend *g = emul_open(&e, GF_PREC_FP32, 0, bugs[b]);
		int before = checks_failed;
		print_message("bias-gradient bug %d planted: failures expected below\n", bugs[b]);
		gan_pass(cpu, g, GF_PREC_FP32, "planted bug", NET_DCGAN_G, NET_DCGAN_D, 16, 100, 0);
		int caught = checks_failed - before;
		checks_failed = before;   /* expected */
		CHECK(caught > 0);
		emul_close(&e);
	}

	struct emul e;
	emul_open_f22(&e, BUG_NONE);
	int own = 0;
	CHECK(g_grads(&e, &own));
	print_message("G grads, fp32 with 22 bits: %d tensors fail with a floor from their own largest value\n", own);
	CHECK(own > 0);
	emul_close(&e);
	checks_done();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CHECKED_TEST(test_round_formats), CHECKED_TEST(test_gemm_bound),    CHECKED_TEST(test_ops_cases),
		CHECKED_TEST(test_logged_cases),  CHECKED_TEST(test_logged_grads),  CHECKED_TEST(test_grads_close),
		CHECKED_TEST(test_soft_checks),   CHECKED_TEST(test_nets_build),    CHECKED_TEST(test_nets_emulated),
		CHECKED_TEST(test_nets_catch),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
