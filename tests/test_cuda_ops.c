/* Every op of the CUDA backend against the CPU backend on random data:
 * GEMM (all transposes, alpha/beta, k = 0), vector ops, bias, convolutions
 * (strides, paddings, kernel sizes, 1x1, one output channel, the fused
 * upsample x2 in both forms; forward, backward-data, backward-filter,
 * accumulation) in fp32 NCHW and NHWC, bf16 and fp16; batchnorm 1d/2d with
 * fused activations, train/eval/backward; activations; upsampling;
 * dropout (masks bit for bit); pooling; softmax; embedding; every loss
 * (values, gradients, input errors, the deferred loss_dev); Adam, AdamW,
 * L2, optimistic Adam, SGD with momentum/nesterov (fp16: through the loss
 * scale); sums of squares; random fills (uniforms bit for bit); the
 * strided batched GEMM and the attention layer built on it.
 * Tolerances: test_cuda_cmp.h (bf16/fp16: bounds derived from the
 * format); the GEMM and convolution cases are test_cuda_cases.h's, which
 * the CPU test test_cuda_cmp runs on an emulated bf16/fp16 backend. Every
 * case runs and reports before a test fails (CHECK). Exits 77 without a
 * CUDA device. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "test_cuda_util.h"
#include "test_cuda_cases.h"

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

/* The configurations every op runs in. */
struct config {
	gf_precision prec;
	gf_layout_choice layout;
	const char *up2;
};

static const struct config configs[] = {
	{ GF_PREC_FP32, GF_LAYOUT_AUTO, "subpixel" },
	{ GF_PREC_FP32, GF_LAYOUT_NHWC, "subpixel" },
	{ GF_PREC_FP32, GF_LAYOUT_AUTO, "upsample" },
	{ GF_PREC_BF16, GF_LAYOUT_AUTO, "subpixel" },
	{ GF_PREC_BF16, GF_LAYOUT_NCHW, "upsample" },
	{ GF_PREC_FP16, GF_LAYOUT_AUTO, "subpixel" },
};
#define NCONFIGS (sizeof(configs) / sizeof(configs[0]))

static gf_backend *open_config(const struct config *k)
{
	gf_backend *g = cuda_open(k->prec, k->layout);
	NN_OK(g->ops->set_option(g, "up2", k->up2));
	return g;
}

/* ---- GEMM ---- */

static void test_gemm(void **state)
{
	(void)state;
	for (size_t i = 0; i < NCONFIGS; i++) {
		if (configs[i].layout == GF_LAYOUT_NHWC || strcmp(configs[i].up2, "subpixel"))
			continue;   /* layout and up2 do not touch GEMMs */
		gf_backend *g = open_config(&configs[i]);
		gemm_cases(cpu, g, configs[i].prec);
		gf_backend_close(g);
	}
	checks_done();
}

/* ---- fills, vector ops, bias ---- */

static void test_vector_ops(void **state)
{
	(void)state;
	gf_backend *g = cuda_open(GF_PREC_FP32, GF_LAYOUT_AUTO);
	size_t n = 100003;
	float *x = host_rand(n, 4, -2, 2), *y = host_rand(n, 5, -2, 2);
	float *dx = dev_from(g, x, n), *dy = dev_from(g, y, n);
	/* axpy and scale round like the CPU (no fused multiply-add): exact */
	NN_OK(cpu->ops->axpy(cpu, y, x, n, 0.3f));
	NN_OK(g->ops->axpy(g, dy, dx, n, 0.3f));
	CHECK(dev_equal("axpy 0.3", g, dy, y, n));
	NN_OK(cpu->ops->axpy(cpu, y, x, n, 1.0f));
	NN_OK(g->ops->axpy(g, dy, dx, n, 1.0f));
	CHECK(dev_equal("axpy 1", g, dy, y, n));
	NN_OK(cpu->ops->scale(cpu, y, n, -1.7f));
	NN_OK(g->ops->scale(g, dy, n, -1.7f));
	CHECK(dev_equal("scale", g, dy, y, n));
	NN_OK(cpu->ops->fill(cpu, y, n, 0.25f));
	NN_OK(g->ops->fill(g, dy, n, 0.25f));
	CHECK(dev_equal("fill", g, dy, y, n));
	NN_OK(cpu->ops->fill(cpu, y, 1000, 0.0f));
	NN_OK(g->ops->fill(g, dy, 1000, 0.0f));
	CHECK(dev_equal("fill 0", g, dy, y, n));
	/* copy2d: a (rows, cols) block between leading dimensions, and += */
	for (int acc = 0; acc < 2; acc++) {
		NN_OK(cpu->ops->copy2d(cpu, y + 3, 301, x + 7, 257, 200, 250, acc));
		NN_OK(g->ops->copy2d(g, dy + 3, 301, dx + 7, 257, 200, 250, acc));
		CHECK(dev_equal(acc ? "copy2d acc" : "copy2d", g, dy, y, n));
	}
	/* copy D2D */
	NN_OK(cpu->ops->copy(cpu, y, x, 5000 * sizeof(float), GF_COPY_D2D));
	NN_OK(g->ops->copy(g, dy, dx, 5000 * sizeof(float), GF_COPY_D2D));
	CHECK(dev_equal("copy", g, dy, y, n));
	/* bias over (n, c, hw) and its gradient */
	int shapes[3][3] = { { 7, 13, 1 }, { 5, 6, 49 }, { 3, 4, 1000 } };
	for (int s = 0; s < 3; s++) {
		int bn = shapes[s][0], bc = shapes[s][1], bhw = shapes[s][2];
		float *b = host_rand((size_t)bc, 6, -1, 1), *db = dev_from(g, b, (size_t)bc);
		NN_OK(cpu->ops->bias_add(cpu, y, b, bn, bc, bhw));
		NN_OK(g->ops->bias_add(g, dy, db, bn, bc, bhw));
		CHECK(dev_equal("bias_add", g, dy, y, n));
		for (int acc = 0; acc < 2; acc++) {
			NN_OK(cpu->ops->bias_grad(cpu, b, x, bn, bc, bhw, acc));
			NN_OK(g->ops->bias_grad(g, db, dx, bn, bc, bhw, acc));
			CHECK(dev_close("bias_grad", g, db, b, (size_t)bc, TOL_FP32));
		}
		g->ops->free(g, db);
		free(b);
	}
	g->ops->free(g, dx);
	g->ops->free(g, dy);
	free(x);
	free(y);
	gf_backend_close(g);
	checks_done();
}

/* ---- convolutions ---- */

static void test_conv(void **state)
{
	(void)state;
	for (size_t i = 0; i < NCONFIGS; i++) {
		gf_backend *g = open_config(&configs[i]);
		char cfg[64];
		snprintf(cfg, sizeof(cfg), "%s/%s/%s", prec_name(configs[i].prec),
		         configs[i].layout == GF_LAYOUT_NHWC ? "nhwc" : configs[i].layout == GF_LAYOUT_NCHW ? "nchw" : "auto",
		         configs[i].up2);
		conv_cases(cpu, g, configs[i].prec, cfg);
		gf_backend_close(g);
	}
	checks_done();
}

/* ---- batchnorm ---- */

static void bn_case(gf_backend *g, int n, int c, int hw, float eps, gf_act act)
{
	gf_bn_desc d;
	memset(&d, 0, sizeof(d));
	d.n = n;
	d.c = c;
	d.hw = hw;
	d.eps = eps;
	d.momentum = 0.1f;
	d.act = act;
	d.slope = 0.2f;
	d.dtype = GF_F32;
	d.layout = GF_NCHW;
	size_t nx = (size_t)n * c * hw;
	float *x = host_rand(nx, 21, -1, 3), *gm = host_rand((size_t)c, 22, 0.5f, 1.5f), *bt = host_rand((size_t)c, 23, -1, 1);
	float *dyv = host_rand(nx, 24, -1, 1), *rm = host_rand((size_t)c, 25, -1, 1), *rv = host_rand((size_t)c, 26, 0.5f, 2);
	float *y = calloc(nx, 4), *mean = calloc((size_t)c, 4), *rstd = calloc((size_t)c, 4), *dx = calloc(nx, 4);
	float *dg = host_rand((size_t)c, 27, -1, 1), *dbt = host_rand((size_t)c, 28, -1, 1);
	float *Gx = dev_from(g, x, nx), *Gg = dev_from(g, gm, (size_t)c), *Gb = dev_from(g, bt, (size_t)c);
	float *Gdy = dev_from(g, dyv, nx), *Grm = dev_from(g, rm, (size_t)c), *Grv = dev_from(g, rv, (size_t)c);
	float *Gy = dev_alloc(g, nx), *Gm = dev_alloc(g, (size_t)c), *Gr = dev_alloc(g, (size_t)c), *Gdx = dev_alloc(g, nx);
	float *Gdg = dev_from(g, dg, (size_t)c), *Gdbt = dev_from(g, dbt, (size_t)c);
	char what[96];
	snprintf(what, sizeof(what), "bn n%d c%d hw%d eps%g act%d", n, c, hw, (double)eps, (int)act);

	NN_OK(cpu->ops->bn_forward_train(cpu, y, mean, rstd, rm, rv, x, gm, bt, &d));
	NN_OK(g->ops->bn_forward_train(g, Gy, Gm, Gr, Grm, Grv, Gx, Gg, Gb, &d));
	CHECK(dev_close(what, g, Gy, y, nx, TOL_FP32));
	CHECK(dev_close("bn mean", g, Gm, mean, (size_t)c, TOL_FP32));
	CHECK(dev_close("bn rstd", g, Gr, rstd, (size_t)c, TOL_FP32));
	CHECK(dev_close("bn running mean", g, Grm, rm, (size_t)c, TOL_FP32));
	CHECK(dev_close("bn running var", g, Grv, rv, (size_t)c, TOL_FP32));
	for (int acc = 0; acc < 2; acc++) {
		NN_OK(cpu->ops->bn_backward(cpu, dx, dg, dbt, dyv, y, x, gm, mean, rstd, &d, acc));
		NN_OK(g->ops->bn_backward(g, Gdx, Gdg, Gdbt, Gdy, Gy, Gx, Gg, Gm, Gr, &d, acc));
		CHECK(dev_close("bn dx", g, Gdx, dx, nx, TOL_FP32));
		CHECK(dev_close("bn dgamma", g, Gdg, dg, (size_t)c, TOL_FP32));
		CHECK(dev_close("bn dbeta", g, Gdbt, dbt, (size_t)c, TOL_FP32));
	}
	/* no affine step, frozen statistics (the G step's D replica) */
	NN_OK(cpu->ops->bn_forward_train(cpu, y, mean, rstd, NULL, NULL, x, NULL, NULL, &d));
	NN_OK(g->ops->bn_forward_train(g, Gy, Gm, Gr, NULL, NULL, Gx, NULL, NULL, &d));
	CHECK(dev_close("bn no affine", g, Gy, y, nx, TOL_FP32));
	NN_OK(cpu->ops->bn_forward_eval(cpu, y, x, gm, bt, rm, rv, &d));
	NN_OK(g->ops->bn_forward_eval(g, Gy, Gx, Gg, Gb, Grm, Grv, &d));
	CHECK(dev_close("bn eval", g, Gy, y, nx, TOL_FP32));

	float *gp[] = { Gx, Gg, Gb, Gdy, Grm, Grv, Gy, Gm, Gr, Gdx, Gdg, Gdbt };
	for (size_t i = 0; i < sizeof(gp) / sizeof(gp[0]); i++)
		g->ops->free(g, gp[i]);
	float *hp[] = { x, gm, bt, dyv, rm, rv, y, mean, rstd, dx, dg, dbt };
	for (size_t i = 0; i < sizeof(hp) / sizeof(hp[0]); i++)
		free(hp[i]);
}

static void test_bn(void **state)
{
	(void)state;
	gf_backend *g = cuda_open(GF_PREC_FP32, GF_LAYOUT_AUTO);
	for (int act = GF_ACT_NONE; act <= GF_ACT_LRELU; act++) {
		bn_case(g, 4, 6, 25, 1e-5f, (gf_act)act);
		bn_case(g, 3, 5, 64, 0.8f, (gf_act)act);
	}
	bn_case(g, 16, 10, 1, 1e-5f, GF_ACT_NONE);      /* 1d */
	bn_case(g, 8, 3, 3000, 1e-5f, GF_ACT_LRELU);    /* several chunks per channel */
	gf_backend_close(g);
	checks_done();
}

/* ---- pointwise ---- */

static void test_act_upsample(void **state)
{
	(void)state;
	gf_backend *g = cuda_open(GF_PREC_FP32, GF_LAYOUT_AUTO);
	size_t n = 4099;
	float *x = host_rand(n, 31, -4, 4), *dyv = host_rand(n, 32, -1, 1), *y = calloc(n, 4), *dx = calloc(n, 4);
	float *Gx = dev_from(g, x, n), *Gdy = dev_from(g, dyv, n), *Gy = dev_alloc(g, n), *Gdx = dev_alloc(g, n);
	for (int a = GF_ACT_NONE; a <= GF_ACT_SIGMOID; a++) {
		NN_OK(cpu->ops->act_forward(cpu, y, x, n, (gf_act)a, 0.2f));
		NN_OK(g->ops->act_forward(g, Gy, Gx, n, (gf_act)a, 0.2f));
		CHECK(dev_close("act forward", g, Gy, y, n, 1e-6));
		/* the backward reads the CPU's output on both sides */
		float *Gyc = dev_from(g, y, n);
		NN_OK(cpu->ops->act_backward(cpu, dx, dyv, y, n, (gf_act)a, 0.2f));
		NN_OK(g->ops->act_backward(g, Gdx, Gdy, Gyc, n, (gf_act)a, 0.2f));
		CHECK(dev_equal("act backward", g, Gdx, dx, n));
		g->ops->free(g, Gyc);
	}
	for (int s = 2; s <= 3; s++) {
		int planes = 6, h = 5, w = 4;
		size_t ni = (size_t)planes * h * w, no = ni * s * s;
		float *ux = host_rand(ni, 33, -1, 1), *udy = host_rand(no, 34, -1, 1), *uy = calloc(no, 4), *udx = calloc(ni, 4);
		float *Gux = dev_from(g, ux, ni), *Gudy = dev_from(g, udy, no), *Guy = dev_alloc(g, no), *Gudx = dev_alloc(g, ni);
		NN_OK(cpu->ops->upsample_forward(cpu, uy, ux, planes, h, w, s));
		NN_OK(g->ops->upsample_forward(g, Guy, Gux, planes, h, w, s));
		CHECK(dev_equal("upsample forward", g, Guy, uy, no));
		NN_OK(cpu->ops->upsample_backward(cpu, udx, udy, planes, h, w, s));
		NN_OK(g->ops->upsample_backward(g, Gudx, Gudy, planes, h, w, s));
		CHECK(dev_equal("upsample backward", g, Gudx, udx, ni));
		g->ops->free(g, Gux);
		g->ops->free(g, Gudy);
		g->ops->free(g, Guy);
		g->ops->free(g, Gudx);
		free(ux);
		free(udy);
		free(uy);
		free(udx);
	}
	g->ops->free(g, Gx);
	g->ops->free(g, Gdy);
	g->ops->free(g, Gy);
	g->ops->free(g, Gdx);
	free(x);
	free(dyv);
	free(y);
	free(dx);
	gf_backend_close(g);
	checks_done();
}

/* Dropout masks come from the same Philox words: bit for bit. */
static void test_dropout(void **state)
{
	(void)state;
	gf_backend *g = cuda_open(GF_PREC_FP32, GF_LAYOUT_AUTO);
	size_t shapes[2][2] = { { 1001, 1 }, { 24, 25 } };   /* dropout, dropout2d */
	for (int s = 0; s < 2; s++) {
		size_t groups = shapes[s][0], group = shapes[s][1], n = groups * group;
		gf_rng r = { 5, 3, 17 };
		float *x = host_rand(n, 41, -1, 1), *y = calloc(n, 4), *m = calloc(groups, 4), *dx = calloc(n, 4);
		float *Gx = dev_from(g, x, n), *Gy = dev_alloc(g, n), *Gm = dev_alloc(g, groups), *Gdx = dev_alloc(g, n);
		NN_OK(cpu->ops->dropout_forward(cpu, y, m, x, groups, group, 0.3f, &r));
		NN_OK(g->ops->dropout_forward(g, Gy, Gm, Gx, groups, group, 0.3f, &r));
		CHECK(dev_equal("dropout mask", g, Gm, m, groups));
		CHECK(dev_equal("dropout y", g, Gy, y, n));
		NN_OK(cpu->ops->dropout_backward(cpu, dx, x, m, groups, group));
		NN_OK(g->ops->dropout_backward(g, Gdx, Gx, Gm, groups, group));
		CHECK(dev_equal("dropout dx", g, Gdx, dx, n));
		CHECK_EQ(g->ops->dropout_forward(g, Gy, Gm, Gx, groups, group, 1.0f, &r), GF_EPARAM);
		g->ops->free(g, Gx);
		g->ops->free(g, Gy);
		g->ops->free(g, Gm);
		g->ops->free(g, Gdx);
		free(x);
		free(y);
		free(m);
		free(dx);
	}
	gf_backend_close(g);
	checks_done();
}

static void test_pooling(void **state)
{
	(void)state;
	gf_backend *g = cuda_open(GF_PREC_FP32, GF_LAYOUT_AUTO);
	/* k, s, p, max, exclude_pad */
	int cases[6][5] = { { 2, 2, 0, 1, 0 }, { 3, 2, 1, 1, 0 }, { 3, 1, 1, 0, 0 },
		                { 2, 2, 0, 0, 0 }, { 3, 1, 1, 0, 1 }, { 3, 2, 1, 0, 1 } };
	for (int i = 0; i < 6; i++) {
		gf_pooling_desc d = { 2, 3, 9, 8, 0, 0, cases[i][0], cases[i][0], cases[i][1], cases[i][1], cases[i][2],
		                   cases[i][2], cases[i][3], cases[i][4] };
		d.hout = (d.h + 2 * d.ph - d.kh) / d.sh + 1;
		d.wout = (d.w + 2 * d.pw - d.kw) / d.sw + 1;
		size_t ni = (size_t)d.n * d.c * d.h * d.w, no = (size_t)d.n * d.c * d.hout * d.wout;
		float *x = host_rand(ni, 51, -1, 1), *dyv = host_rand(no, 52, -1, 1), *y = calloc(no, 4), *dx = calloc(ni, 4);
		int32_t *idx = calloc(no, 4), *gidx = calloc(no, 4);
		float *Gx = dev_from(g, x, ni), *Gdy = dev_from(g, dyv, no), *Gy = dev_alloc(g, no), *Gdx = dev_alloc(g, ni);
		int32_t *Gi = (int32_t *)dev_alloc(g, no);
		NN_OK(cpu->ops->pooling_forward(cpu, y, idx, x, &d));
		NN_OK(g->ops->pooling_forward(g, Gy, Gi, Gx, &d));
		if (d.max) {
			CHECK(dev_equal("maxpool y", g, Gy, y, no));
			NN_OK(g->ops->copy(g, gidx, Gi, no * 4, GF_COPY_D2H));
			CHECK_MEM(gidx, idx, no * 4);
		} else {
			CHECK(dev_close("avgpool y", g, Gy, y, no, 1e-6));
		}
		NN_OK(cpu->ops->pooling_backward(cpu, dx, dyv, idx, &d));
		NN_OK(g->ops->pooling_backward(g, Gdx, Gdy, Gi, &d));
		CHECK(dev_equal("pooling backward", g, Gdx, dx, ni));
		g->ops->free(g, Gx);
		g->ops->free(g, Gdy);
		g->ops->free(g, Gy);
		g->ops->free(g, Gdx);
		g->ops->free(g, Gi);
		free(x);
		free(dyv);
		free(y);
		free(dx);
		free(idx);
		free(gidx);
	}
	gf_backend_close(g);
	checks_done();
}

static void test_softmax_embedding(void **state)
{
	(void)state;
	gf_backend *g = cuda_open(GF_PREC_FP32, GF_LAYOUT_AUTO);
	int rows = 7, cols = 13;
	size_t n = (size_t)rows * cols;
	float *x = host_rand(n, 61, -3, 3), *dyv = host_rand(n, 62, -1, 1), *y = calloc(n, 4), *dx = calloc(n, 4);
	float *Gx = dev_from(g, x, n), *Gdy = dev_from(g, dyv, n), *Gy = dev_alloc(g, n), *Gdx = dev_alloc(g, n);
	NN_OK(cpu->ops->softmax_forward(cpu, y, x, rows, cols));
	NN_OK(g->ops->softmax_forward(g, Gy, Gx, rows, cols));
	CHECK(dev_close("softmax", g, Gy, y, n, 1e-5));
	NN_OK(cpu->ops->softmax_backward(cpu, dx, dyv, y, rows, cols));
	float *Gyc = dev_from(g, y, n);
	NN_OK(g->ops->softmax_backward(g, Gdx, Gdy, Gyc, rows, cols));
	CHECK(dev_close("softmax backward", g, Gdx, dx, n, 1e-5));

	int en = 9, dim = 6, num = 4;
	int32_t idx[9] = { 3, 0, 1, 3, 2, 2, 0, 3, 1 };
	float *table = host_rand((size_t)num * dim, 63, -1, 1), *ey = calloc((size_t)en * dim, 4);
	float *edy = host_rand((size_t)en * dim, 64, -1, 1), *dt = host_rand((size_t)num * dim, 65, -1, 1);
	float *Gt = dev_from(g, table, (size_t)num * dim), *Gey = dev_alloc(g, (size_t)en * dim);
	float *Gedy = dev_from(g, edy, (size_t)en * dim), *Gdt = dev_from(g, dt, (size_t)num * dim);
	int32_t *Gidx = (int32_t *)dev_alloc(g, (size_t)en);
	NN_OK(g->ops->copy(g, Gidx, idx, sizeof(idx), GF_COPY_H2D));
	NN_OK(cpu->ops->embedding_forward(cpu, ey, table, idx, en, dim, num));
	NN_OK(g->ops->embedding_forward(g, Gey, Gt, Gidx, en, dim, num));
	CHECK(dev_equal("embedding", g, Gey, ey, (size_t)en * dim));
	for (int acc = 0; acc < 2; acc++) {
		NN_OK(cpu->ops->embedding_backward(cpu, dt, edy, idx, en, dim, num, acc));
		NN_OK(g->ops->embedding_backward(g, Gdt, Gedy, Gidx, en, dim, num, acc));
		CHECK(dev_equal("embedding backward", g, Gdt, dt, (size_t)num * dim));
	}
	/* an index out of range is reported by the next sync, naming the sample */
	int32_t bad[9] = { 0, 1, 2, 3, 4, 0, 1, 2, 3 };
	NN_OK(g->ops->copy(g, Gidx, bad, sizeof(bad), GF_COPY_H2D));
	NN_OK(g->ops->embedding_forward(g, Gey, Gt, Gidx, en, dim, num));
	CHECK_EQ(g->ops->sync(g), GF_EPARAM);
	CHECK(strstr(gf_errmsg(), "sample 4") != NULL);
	NN_OK(g->ops->sync(g));   /* reported once */

	float *gp[] = { Gx, Gdy, Gy, Gdx, Gyc, Gt, Gey, Gedy, Gdt, (float *)Gidx };
	for (size_t i = 0; i < sizeof(gp) / sizeof(gp[0]); i++)
		g->ops->free(g, gp[i]);
	float *hp[] = { x, dyv, y, dx, table, ey, edy, dt };
	for (size_t i = 0; i < sizeof(hp) / sizeof(hp[0]); i++)
		free(hp[i]);
	gf_backend_close(g);
	checks_done();
}

/* ---- spectral norm ---- */

/* spectral norm: one power iteration + sigma + w / sigma, eval (no
 * iteration), and the gradient through sigma, against the CPU's; both
 * layouts (a = 1: dim 0; a = 3: a transposed conv's dim 1) */
static void sn_case(gf_backend *g, int a, int m, int k)
{
	size_t n = (size_t)a * k, total = n * (size_t)m;
	float *w = host_rand(total, 71, -1, 1), *u = host_rand((size_t)m, 72, -1, 1), *v = host_rand(n, 73, -1, 1);
	float *gr = host_rand(total, 74, -1, 1), *dw = host_rand(total, 75, -1, 1), *wsn = calloc(total, 4), sigma;
	float *Gw = dev_from(g, w, total), *Gu = dev_from(g, u, (size_t)m), *Gv = dev_from(g, v, n);
	float *Gg = dev_from(g, gr, total), *Gdw = dev_from(g, dw, total), *Gwsn = dev_alloc(g, total);
	float *Gs = dev_alloc(g, 1);
	for (int it = 1; it >= 0; it--) {
		NN_OK(cpu->ops->sn_forward(cpu, wsn, &sigma, u, v, w, a, m, k, 1e-12f, it));
		NN_OK(g->ops->sn_forward(g, Gwsn, Gs, Gu, Gv, Gw, a, m, k, 1e-12f, it));
		CHECK(dev_close("sn u", g, Gu, u, (size_t)m, 1e-5));
		CHECK(dev_close("sn v", g, Gv, v, n, 1e-5));
		CHECK(dev_close("sn sigma", g, Gs, &sigma, 1, 1e-5));
		CHECK(dev_close("sn w / sigma", g, Gwsn, wsn, total, 1e-5));
	}
	for (int acc = 0; acc < 2; acc++) {
		NN_OK(cpu->ops->sn_backward(cpu, dw, gr, w, &sigma, u, v, a, m, k, acc));
		NN_OK(g->ops->sn_backward(g, Gdw, Gg, Gw, Gs, Gu, Gv, a, m, k, acc));
		CHECK(dev_close("sn backward", g, Gdw, dw, total, 1e-5));
	}
	float *gp[] = { Gw, Gu, Gv, Gg, Gdw, Gwsn, Gs };
	for (size_t i = 0; i < sizeof(gp) / sizeof(gp[0]); i++)
		g->ops->free(g, gp[i]);
	float *hp[] = { w, u, v, gr, dw, wsn };
	for (size_t i = 0; i < sizeof(hp) / sizeof(hp[0]); i++)
		free(hp[i]);
}

static void test_sn(void **state)
{
	(void)state;
	gf_backend *g = cuda_open(GF_PREC_FP32, GF_LAYOUT_AUTO);
	assert_true(GF_BACKEND_HAS(g, sn_forward) && GF_BACKEND_HAS(g, sn_backward));
	sn_case(g, 1, 5, 7);
	sn_case(g, 1, 64, 32 * 9);
	sn_case(g, 3, 4, 9);
	gf_backend_close(g);
	checks_done();
}

/* ---- conditional batchnorm and the projection head's row ops ---- */

static void cbn_case(gf_backend *g, int n, int c, int hw, gf_act act)
{
	gf_bn_desc d;
	memset(&d, 0, sizeof(d));
	d.n = n;
	d.c = c;
	d.hw = hw;
	d.eps = 1e-5f;
	d.momentum = 0.1f;
	d.act = act;
	d.slope = 0.2f;
	d.dtype = GF_F32;
	d.layout = GF_NCHW;
	size_t nx = (size_t)n * c * hw, np = (size_t)n * c;
	float *x = host_rand(nx, 31, -1, 3), *gm = host_rand(np, 32, 0.5f, 1.5f), *bt = host_rand(np, 33, -1, 1);
	float *dyv = host_rand(nx, 34, -1, 1), *rm = host_rand((size_t)c, 35, -1, 1), *rv = host_rand((size_t)c, 36, 0.5f, 2);
	float *y = calloc(nx, 4), *mean = calloc((size_t)c, 4), *rstd = calloc((size_t)c, 4), *dx = calloc(nx, 4);
	float *dg = calloc(np, 4), *dbt = calloc(np, 4);
	float *Gx = dev_from(g, x, nx), *Gg = dev_from(g, gm, np), *Gb = dev_from(g, bt, np);
	float *Gdy = dev_from(g, dyv, nx), *Grm = dev_from(g, rm, (size_t)c), *Grv = dev_from(g, rv, (size_t)c);
	float *Gy = dev_alloc(g, nx), *Gm = dev_alloc(g, (size_t)c), *Gr = dev_alloc(g, (size_t)c), *Gdx = dev_alloc(g, nx);
	float *Gdg = dev_alloc(g, np), *Gdbt = dev_alloc(g, np);
	char what[96];
	snprintf(what, sizeof(what), "cbn n%d c%d hw%d act%d", n, c, hw, (int)act);

	NN_OK(cpu->ops->cbn_forward(cpu, y, mean, rstd, rm, rv, x, gm, bt, &d, 1));
	NN_OK(g->ops->cbn_forward(g, Gy, Gm, Gr, Grm, Grv, Gx, Gg, Gb, &d, 1));
	CHECK(dev_close(what, g, Gy, y, nx, TOL_FP32));
	CHECK(dev_close("cbn mean", g, Gm, mean, (size_t)c, TOL_FP32));
	CHECK(dev_close("cbn rstd", g, Gr, rstd, (size_t)c, TOL_FP32));
	CHECK(dev_close("cbn running mean", g, Grm, rm, (size_t)c, TOL_FP32));
	CHECK(dev_close("cbn running var", g, Grv, rv, (size_t)c, TOL_FP32));
	NN_OK(cpu->ops->cbn_backward(cpu, dx, dg, dbt, dyv, y, x, gm, mean, rstd, &d));
	NN_OK(g->ops->cbn_backward(g, Gdx, Gdg, Gdbt, Gdy, Gy, Gx, Gg, Gm, Gr, &d));
	CHECK(dev_close("cbn dx", g, Gdx, dx, nx, TOL_FP32));
	CHECK(dev_close("cbn dgamma", g, Gdg, dg, np, TOL_FP32));
	CHECK(dev_close("cbn dbeta", g, Gdbt, dbt, np, TOL_FP32));
	NN_OK(cpu->ops->cbn_backward(cpu, NULL, dg, dbt, dyv, y, x, gm, mean, rstd, &d));
	NN_OK(g->ops->cbn_backward(g, NULL, Gdg, Gdbt, Gdy, Gy, Gx, Gg, Gm, Gr, &d));
	CHECK(dev_close("cbn dgamma (no dx)", g, Gdg, dg, np, TOL_FP32));
	NN_OK(cpu->ops->cbn_forward(cpu, y, NULL, NULL, rm, rv, x, gm, bt, &d, 0));
	NN_OK(g->ops->cbn_forward(g, Gy, NULL, NULL, Grm, Grv, Gx, Gg, Gb, &d, 0));
	CHECK(dev_close("cbn eval", g, Gy, y, nx, TOL_FP32));

	float *gp[] = { Gx, Gg, Gb, Gdy, Grm, Grv, Gy, Gm, Gr, Gdx, Gdg, Gdbt };
	for (size_t i = 0; i < sizeof(gp) / sizeof(gp[0]); i++)
		g->ops->free(g, gp[i]);
	float *hp[] = { x, gm, bt, dyv, rm, rv, y, mean, rstd, dx, dg, dbt };
	for (size_t i = 0; i < sizeof(hp) / sizeof(hp[0]); i++)
		free(hp[i]);
}

static void test_cbn_rows(void **state)
{
	(void)state;
	gf_backend *g = cuda_open(GF_PREC_FP32, GF_LAYOUT_AUTO);
	assert_true(GF_BACKEND_HAS(g, cbn_forward) && GF_BACKEND_HAS(g, cbn_backward));
	for (int act = GF_ACT_NONE; act <= GF_ACT_LRELU; act++)
		cbn_case(g, 4, 6, 25, (gf_act)act);
	cbn_case(g, 16, 10, 1, GF_ACT_NONE);       /* flat (C) */
	cbn_case(g, 8, 16, 1024, GF_ACT_RELU);     /* several chunks per channel in the statistics */

	int n = 9, k = 300;
	float *a = host_rand((size_t)n * k, 41, -1, 1), *b = host_rand((size_t)n * k, 42, -1, 1);
	float *sv = host_rand((size_t)n, 43, -2, 2), *out = host_rand((size_t)n, 44, -1, 1), *y = host_rand((size_t)n * k, 45, -1, 1);
	float *Ga = dev_from(g, a, (size_t)n * k), *Gb = dev_from(g, b, (size_t)n * k), *Gs = dev_from(g, sv, (size_t)n);
	float *Gout = dev_from(g, out, (size_t)n), *Gy = dev_from(g, y, (size_t)n * k);
	for (int acc = 0; acc < 2; acc++) {
		NN_OK(cpu->ops->row_dot(cpu, out, a, b, n, k, acc));
		NN_OK(g->ops->row_dot(g, Gout, Ga, Gb, n, k, acc));
		CHECK(dev_close("row_dot", g, Gout, out, (size_t)n, 1e-5));
		NN_OK(cpu->ops->row_scale(cpu, y, sv, a, n, k, acc));
		NN_OK(g->ops->row_scale(g, Gy, Gs, Ga, n, k, acc));
		CHECK(dev_close("row_scale", g, Gy, y, (size_t)n * k, 1e-6));
	}
	float *gp[] = { Ga, Gb, Gs, Gout, Gy };
	for (size_t i = 0; i < sizeof(gp) / sizeof(gp[0]); i++)
		g->ops->free(g, gp[i]);
	free(a);
	free(b);
	free(sv);
	free(out);
	free(y);
	gf_backend_close(g);
	checks_done();
}

/* DiffAugment on the GPU against the CPU, every policy, on uniforms the
 * CPU backend draws. */
static void test_augment(void **state)
{
	(void)state;
	gf_backend *g = cuda_open(GF_PREC_FP32, GF_LAYOUT_AUTO);
	assert_true(GF_BACKEND_HAS(g, augment_forward) && GF_BACKEND_HAS(g, augment_backward));
	int n = 5, c = 3, h = 11, w = 9;
	size_t nx = (size_t)n * c * h * w;
	float *x = host_rand(nx, 81, -1, 1), *dy = host_rand(nx, 82, -1, 1), *u = host_rand((size_t)n * 7, 83, 0, 1);
	float *y = malloc(nx * 4), *Gx = dev_from(g, x, nx), *Gdy = dev_from(g, dy, nx), *Gu = dev_from(g, u, (size_t)n * 7);
	float *Gy = dev_alloc(g, nx);
	for (unsigned what = 1; what < 8; what++) {
		char name[64];
		NN_OK(cpu->ops->augment_forward(cpu, y, x, u, n, c, h, w, what));
		NN_OK(g->ops->augment_forward(g, Gy, Gx, Gu, n, c, h, w, what));
		snprintf(name, sizeof(name), "augment forward %u", what);
		CHECK(dev_close(name, g, Gy, y, nx, TOL_FP32));
		NN_OK(cpu->ops->augment_backward(cpu, y, dy, u, n, c, h, w, what));
		NN_OK(g->ops->augment_backward(g, Gy, Gdy, Gu, n, c, h, w, what));
		snprintf(name, sizeof(name), "augment backward %u", what);
		CHECK(dev_close(name, g, Gy, y, nx, TOL_FP32));
	}
	g->ops->free(g, Gx), g->ops->free(g, Gdy), g->ops->free(g, Gu), g->ops->free(g, Gy);
	free(x), free(dy), free(u), free(y);
	gf_backend_close(g);
	checks_done();
}

/* ---- strided batched GEMM and the attention layer ---- */

static void bgemm_case(gf_backend *g, int ta, int tb, int m, int n, int k, int share_a, int sum, float beta, int batch)
{
	int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 1, ldc = n + 2;
	int64_t sa = share_a ? 0 : (int64_t)(ta ? k : m) * lda + 5, sb = (int64_t)(tb ? n : k) * ldb + 7;
	int64_t sc = sum ? 0 : (int64_t)m * ldc + 3;
	size_t na = (size_t)(share_a ? 0 : batch - 1) * (size_t)sa + (size_t)(ta ? k : m) * lda;
	size_t nb = (size_t)(batch - 1) * (size_t)sb + (size_t)(tb ? n : k) * ldb;
	size_t nc = (size_t)(sum ? 0 : batch - 1) * (size_t)sc + (size_t)m * ldc;
	float *a = host_rand(na, 81, -1, 1), *b = host_rand(nb, 82, -1, 1), *c = host_rand(nc, 83, -1, 1);
	float *da = dev_from(g, a, na), *db = dev_from(g, b, nb), *dc = dev_from(g, c, nc);
	NN_OK(cpu->ops->gemm_batched(cpu, ta, tb, m, n, k, 0.75f, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch));
	NN_OK(g->ops->gemm_batched(g, ta, tb, m, n, k, 0.75f, da, lda, sa, db, ldb, sb, beta, dc, ldc, sc, batch));
	char what[128];
	snprintf(what, sizeof(what), "gemm_batched ta=%d tb=%d %dx%dx%d share_a=%d sum=%d beta=%g batch %d", ta, tb, m,
	         n, k, share_a, sum, (double)beta, batch);
	CHECK(dev_close(what, g, dc, c, nc, TOL_FP32));
	g->ops->free(g, da);
	g->ops->free(g, db);
	g->ops->free(g, dc);
	free(a);
	free(b);
	free(c);
}

/* gemm_batched in f32 whatever the instance's precision: every transpose,
 * a shared A, the batch sum with and without beta, k = 0. */
static void test_gemm_batched(void **state)
{
	(void)state;
	gf_precision precs[] = { GF_PREC_FP32, GF_PREC_BF16 };
	for (int pi = 0; pi < 2; pi++) {
		gf_backend *g = cuda_open(precs[pi], GF_LAYOUT_AUTO);
		assert_true(GF_BACKEND_HAS(g, gemm_batched));
		for (int t = 0; t < 4; t++) {
			bgemm_case(g, t & 1, t >> 1, 7, 9, 5, 0, 0, 0.0f, 4);
			bgemm_case(g, t & 1, t >> 1, 16, 33, 20, 1, 0, 0.5f, 3);
			bgemm_case(g, t & 1, t >> 1, 12, 6, 40, 0, 1, 0.0f, 5);
			bgemm_case(g, t & 1, t >> 1, 6, 12, 17, 1, 1, 1.0f, 6);
		}
		bgemm_case(g, 0, 0, 4, 5, 0, 0, 0, 0.5f, 3);
		bgemm_case(g, 0, 0, 4, 5, 0, 0, 1, 0.0f, 3);
		gf_backend_close(g);
	}
	checks_done();
}

/* The attention layer on the GPU (fp32) against the CPU, with and without
 * sn: output, dx, every parameter gradient and (sn) the updated u, v, with
 * gamma = 0.6 so that every branch has a gradient. */
static void test_attention(void **state)
{
	(void)state;
	gf_backend *g = cuda_open(GF_PREC_FP32, GF_LAYOUT_AUTO);
	enum { NB = 4, C = 32, S = 8 };
	size_t nx = (size_t)NB * C * S * S;
	float *x = host_rand(nx, 91, -2, 2), *dy = host_rand(nx, 92, -1, 1);
	float *gdy = dev_from(g, dy, nx);
	for (int sn = 0; sn < 2; sn++) {
		const char *code = sn ? NET_ATTENTION_SN : NET_ATTENTION;   /* C channels, S x S */
		gf_net *a, *b;
		NN_OK(nn_build(&a, cpu, code, NB, 0));
		NN_OK(nn_build(&b, g, code, NB, 0));
		gf_rng r = { 3, 0, 0 };
		NN_OK(gf_net_init(a, &r));
		size_t np, nbuf, nv, nbv;
		float *pa = gf_net_block(a, GF_PARAMS, &np);
		const gf_view *v = gf_net_views(a, GF_PARAMS, &nv);
		const gf_view *bv = gf_net_views(a, GF_BUFFERS, &nbv);
		pa[v[nv - 1].offset] = 0.6f;
		gf_net_block(a, GF_BUFFERS, &nbuf);
		float *h = malloc((np + nbuf + 1) * 4), *hb = malloc((np + nbuf + 1) * 4);
		NN_OK(gf_net_read(a, GF_PARAMS, h));
		NN_OK(gf_net_write(b, GF_PARAMS, h));
		NN_OK(gf_net_read(a, GF_BUFFERS, h));
		NN_OK(gf_net_write(b, GF_BUFFERS, h));
		gf_tensor xt = nn_tensor(x, 4, NB, C, S, S), oa, ob, dxa, dxb;
		for (int step = 0; step < 2; step++) {
			char what[96];
			NN_OK(gf_net_forward(a, &xt, NULL, GF_TRAIN));
			NN_OK(gf_net_forward(b, &xt, NULL, GF_TRAIN));
			NN_OK(gf_net_output(a, &oa));
			NN_OK(gf_net_output(b, &ob));
			snprintf(what, sizeof(what), "attention sn=%d step %d: y", sn, step);
			CHECK(dev_close(what, g, ob.data, oa.data, nx, 1e-4));
			NN_OK(gf_net_backward(a, dy, GF_NEED_DX | GF_NEED_DW | (step ? GF_ACCUMULATE : 0)));
			NN_OK(gf_net_backward(b, gdy, GF_NEED_DX | GF_NEED_DW | (step ? GF_ACCUMULATE : 0)));
			NN_OK(gf_net_dx(a, &dxa));
			NN_OK(gf_net_dx(b, &dxb));
			snprintf(what, sizeof(what), "attention sn=%d step %d: dx", sn, step);
			CHECK(dev_close(what, g, dxb.data, dxa.data, nx, 1e-4));
			NN_OK(gf_net_read(a, GF_GRADS, h));
			NN_OK(gf_net_read(b, GF_GRADS, hb));
			for (size_t i = 0; i < nv; i++) {
				snprintf(what, sizeof(what), "attention sn=%d step %d: d%s", sn, step, v[i].name);
				CHECK(nn_close(what, hb + v[i].offset, h + v[i].offset, v[i].numel, 1e-4));
			}
			NN_OK(gf_net_read(a, GF_BUFFERS, h));
			NN_OK(gf_net_read(b, GF_BUFFERS, hb));
			for (size_t i = 0; i < nbv; i++) {
				snprintf(what, sizeof(what), "attention sn=%d step %d: %s", sn, step, bv[i].name);
				CHECK(nn_close(what, hb + bv[i].offset, h + bv[i].offset, bv[i].numel, 1e-4));
			}
		}
		free(h);
		free(hb);
		gf_net_destroy(a);
		gf_net_destroy(b);
	}
	g->ops->free(g, gdy);
	free(x);
	free(dy);
	gf_backend_close(g);
	checks_done();
}

static void test_loss(void **state)
{
	(void)state;
	gf_backend *g = cuda_open(GF_PREC_FP32, GF_LAYOUT_AUTO);
	int n = 16, k = 3;
	size_t nn = (size_t)n * k;
	float *p = host_rand(nn, 71, 0.01f, 0.99f), *l = host_rand(nn, 72, -3, 3), *t = host_rand(nn, 73, 0, 1);
	float *Gp = dev_from(g, p, nn), *Gl = dev_from(g, l, nn), *Gt = dev_from(g, t, nn);
	float *dx = calloc(nn, 4), *Gdx = dev_alloc(g, nn), *Gval = dev_alloc(g, 1);
	for (int kind = 0; kind < GF_LOSS_CE; kind++) {
		int probs = kind == GF_LOSS_BCE || kind == GF_LOSS_NONSAT;
		for (int withT = 0; withT < 2; withT++) {
			gf_loss_desc d = { (gf_loss_kind)kind, n, k, kind == GF_LOSS_HINGE_D ? -1.0f : 1.0f, 0.5f };
			float lc = 0, lg = 0, ld = 0;
			NN_OK(cpu->ops->loss(cpu, &lc, dx, probs ? p : l, withT ? t : NULL, NULL, &d));
			NN_OK(g->ops->loss(g, &lg, Gdx, probs ? Gp : Gl, withT ? Gt : NULL, NULL, &d));
			char what[64];
			snprintf(what, sizeof(what), "loss %s%s", gf_loss_name((gf_loss_kind)kind), withT ? " (targets)" : "");
			CHECK(nn_close(what, &lg, &lc, 1, 1e-5));
			CHECK(dev_close(what, g, Gdx, dx, nn, TOL_FP32));
			/* the deferred form gives the same value, read later */
			NN_OK(g->ops->loss_dev(g, Gval, NULL, probs ? Gp : Gl, withT ? Gt : NULL, NULL, &d));
			NN_OK(g->ops->sync(g));
			NN_OK(g->ops->copy(g, &ld, Gval, 4, GF_COPY_D2H));
			CHECK_MEM(&ld, &lg, 4);
		}
	}
	/* cross-entropy with labels */
	int32_t lab[16], *Glab = (int32_t *)dev_alloc(g, 16);
	for (int i = 0; i < n; i++)
		lab[i] = (i * 7) % k;
	NN_OK(g->ops->copy(g, Glab, lab, sizeof(lab), GF_COPY_H2D));
	gf_loss_desc ce = { GF_LOSS_CE, n, k, 0, 1.0f };
	float lc = 0, lg = 0;
	NN_OK(cpu->ops->loss(cpu, &lc, dx, l, NULL, lab, &ce));
	NN_OK(g->ops->loss(g, &lg, Gdx, Gl, NULL, Glab, &ce));
	CHECK(nn_close("loss ce", &lg, &lc, 1, 1e-5));
	CHECK(dev_close("loss ce dx", g, Gdx, dx, nn, TOL_FP32));
	/* labels and targets straight from host memory (a stage's message) are copied in */
	float lh = 0;
	NN_OK(g->ops->loss(g, &lh, Gdx, Gl, NULL, lab, &ce));
	CHECK_MEM(&lh, &lg, 4);
	gf_loss_desc ls = { GF_LOSS_L1, n, k, 0, 1.0f };
	NN_OK(cpu->ops->loss(cpu, &lc, dx, l, t, NULL, &ls));
	NN_OK(g->ops->loss(g, &lh, Gdx, Gl, t, NULL, &ls));
	CHECK(nn_close("loss l1 (host targets)", &lh, &lc, 1, 1e-5));
	CHECK(dev_close("loss l1 dx (host targets)", g, Gdx, dx, nn, TOL_FP32));
	/* input errors: reported as the CPU reports them, then cleared */
	gf_loss_desc bce = { GF_LOSS_BCE, n, k, 1.0f, 1.0f };
	CHECK_EQ(g->ops->loss(g, &lg, Gdx, Gl, NULL, NULL, &bce), GF_EPARAM);
	CHECK(strstr(gf_errmsg(), "probability") != NULL);
	float nanv = NAN;
	NN_OK(g->ops->copy(g, Gp + 5, &nanv, 4, GF_COPY_H2D));
	CHECK_EQ(g->ops->loss(g, &lg, Gdx, Gp, NULL, NULL, &bce), GF_ENONFINITE);
	CHECK(strstr(gf_errmsg(), "element 5") != NULL);
	NN_OK(g->ops->sync(g));
	lab[3] = k;
	NN_OK(g->ops->copy(g, Glab, lab, sizeof(lab), GF_COPY_H2D));
	CHECK_EQ(g->ops->loss(g, &lg, Gdx, Gl, NULL, Glab, &ce), GF_EPARAM);

	float *gp[] = { Gp, Gl, Gt, Gdx, Gval, (float *)Glab };
	for (size_t i = 0; i < sizeof(gp) / sizeof(gp[0]); i++)
		g->ops->free(g, gp[i]);
	free(p);
	free(l);
	free(t);
	free(dx);
	gf_backend_close(g);
	checks_done();
}

/* ---- optimisers ---- */

static gf_optim_args optim_args(gf_optim_kind kind, int64_t step, float wd, int decoupled, float mom, float damp,
                                int nesterov)
{
	gf_optim_args a;
	memset(&a, 0, sizeof(a));
	a.kind = kind;
	a.lr = kind == GF_OPT_SGD ? 0.05f : 2e-3f;
	a.beta1 = 0.5f;
	a.beta2 = 0.999f;
	a.eps = 1e-8f;
	a.weight_decay = wd;
	a.decoupled = decoupled;
	a.momentum = mom;
	a.dampening = damp;
	a.nesterov = nesterov;
	a.step = step;
	a.step_size = (float)((double)a.lr / (1.0 - pow((double)a.beta1, (double)step)));
	a.bc2_sqrt = (float)sqrt(1.0 - pow((double)a.beta2, (double)step));
	return a;
}

static void test_optim(void **state)
{
	(void)state;
	struct {
		gf_optim_kind kind;
		float wd;
		int decoupled;
		float mom, damp;
		int nesterov;
	} cases[] = {
		{ GF_OPT_ADAM, 0, 0, 0, 0, 0 },   { GF_OPT_ADAM, 0.01f, 0, 0, 0, 0 }, { GF_OPT_ADAM, 0.01f, 1, 0, 0, 0 },
		{ GF_OPT_OADAM, 0, 0, 0, 0, 0 },  { GF_OPT_SGD, 0, 0, 0, 0, 0 },      { GF_OPT_SGD, 0.001f, 0, 0.9f, 0.1f, 0 },
		{ GF_OPT_SGD, 0, 0, 0.9f, 0, 1 },
	};
	gf_precision precs[] = { GF_PREC_FP32, GF_PREC_BF16, GF_PREC_FP16 };
	for (int pi = 0; pi < 3; pi++) {
		gf_backend *g = cuda_open(precs[pi], GF_LAYOUT_AUTO);
		/* fp16: the gradients arrive multiplied by the loss scale (65536 at
		 * start, a power of two: exact), and optim_step divides it out */
		float gscale = precs[pi] == GF_PREC_FP16 ? 65536.0f : 1.0f;
		for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
			size_t n = 5003;
			int slots = cases[c].kind == GF_OPT_OADAM ? 3 : cases[c].kind == GF_OPT_ADAM ? 2 : 1;
			float *p = host_rand(n, 81, -1, 1), *st = calloc(n * slots, 4);
			float *Gp = dev_from(g, p, n), *Gst = dev_from(g, st, n * slots), *Gg = dev_alloc(g, n);
			for (int step = 1; step <= 3; step++) {
				float *gr = host_rand(n, 90 + (uint64_t)step, -1, 1), *gs = malloc(n * 4);
				for (size_t i = 0; i < n; i++)
					gs[i] = gr[i] * gscale;
				NN_OK(g->ops->copy(g, Gg, gs, n * 4, GF_COPY_H2D));
				gf_optim_args a = optim_args(cases[c].kind, step, cases[c].wd, cases[c].decoupled, cases[c].mom,
				                             cases[c].damp, cases[c].nesterov);
				NN_OK(cpu->ops->optim_step(cpu, p, gr, st, n, &a));
				NN_OK(g->ops->optim_step(g, Gp, Gg, Gst, n, &a));
				free(gr);
				free(gs);
			}
			char what[64];
			snprintf(what, sizeof(what), "optim %s kind %d case %zu", prec_name(precs[pi]), (int)cases[c].kind, c);
			CHECK(dev_close(what, g, Gp, p, n, TOL_FP32));
			CHECK(dev_close("optimiser state", g, Gst, st, n * slots, TOL_FP32));
			g->ops->free(g, Gp);
			g->ops->free(g, Gst);
			g->ops->free(g, Gg);
			free(p);
			free(st);
		}
		gf_backend_stats s;
		NN_OK(g->ops->stats(g, &s));
		CHECK_EQ(s.skipped_steps, 0);
		CHECK_EQ(s.optim_steps, (int64_t)(3 * sizeof(cases) / sizeof(cases[0])));
		gf_backend_close(g);
	}
	checks_done();
}

/* ---- reductions, randomness ---- */

static void test_sumsq_rng(void **state)
{
	(void)state;
	gf_backend *g = cuda_open(GF_PREC_FP32, GF_LAYOUT_AUTO);
	size_t n = 100003;
	float *x = host_rand(n, 101, -2, 2), *Gx = dev_from(g, x, n);
	double sc = 0, sg = 0;
	NN_OK(cpu->ops->sumsq(cpu, &sc, x, n));
	NN_OK(g->ops->sumsq(g, &sg, Gx, n));
	CHECK(fabs(sg - sc) <= 1e-10 * sc);
	NN_OK(g->ops->sumsq(g, &sg, Gx, 0));
	CHECK(sg == 0.0);

	/* uniforms: the same Philox words and the same roundings: exact */
	size_t m = 1001;
	gf_rng r = { 1234, 7, 13 };
	float *u = calloc(m, 4), *Gu = dev_alloc(g, m);
	NN_OK(cpu->ops->rng_uniform(cpu, u, m, -1.5f, 2.5f, &r));
	NN_OK(g->ops->rng_uniform(g, Gu, m, -1.5f, 2.5f, &r));
	CHECK(dev_equal("rng_uniform", g, Gu, u, m));
	/* normals: Box-Muller in double on both sides; the device's log/sin/cos
	 * may differ from glibc's in the last bit of a double, which can move
	 * the float result by one ulp in rare cases */
	NN_OK(cpu->ops->rng_normal(cpu, u, m, 0.5f, 2.0f, &r));
	NN_OK(g->ops->rng_normal(g, Gu, m, 0.5f, 2.0f, &r));
	float *h = host_from(g, Gu, m);
	size_t exact = 0, far = 0;
	for (size_t i = 0; i < m; i++) {
		exact += h[i] == u[i];
		far += !(fabsf(h[i] - u[i]) <= 2.0f * fabsf(nextafterf(u[i], INFINITY) - u[i]));
	}
	CHECK(far == 0);
	CHECK(exact >= m - 2);
	free(h);
	free(u);
	free(x);
	g->ops->free(g, Gx);
	g->ops->free(g, Gu);
	gf_backend_close(g);
	checks_done();
}

int main(void)
{
	cuda_require_device("test_cuda_ops");
	const struct CMUnitTest tests[] = {
		CHECKED_TEST(test_gemm),
		CHECKED_TEST(test_vector_ops),
		CHECKED_TEST(test_conv),
		CHECKED_TEST(test_bn),
		CHECKED_TEST(test_act_upsample),
		CHECKED_TEST(test_dropout),
		CHECKED_TEST(test_pooling),
		CHECKED_TEST(test_softmax_embedding),
		CHECKED_TEST(test_loss),
		CHECKED_TEST(test_optim),
		CHECKED_TEST(test_sumsq_rng),
		CHECKED_TEST(test_sn),
		CHECKED_TEST(test_cbn_rows),
		CHECKED_TEST(test_augment),
		CHECKED_TEST(test_gemm_batched),
		CHECKED_TEST(test_attention),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
