/* The CUDA backend's double-backward ops and minibatch standard deviation
 * against the CPU backend's: act_backward2 (tanh, sigmoid), bn_backward2
 * (with and without gamma, fused ReLU/LeakyReLU, 1d and 2d shapes),
 * pooling_gather, augment_linear and mbstd_forward/backward/backward2 on
 * random inputs; then whole double backwards (gf_net_backward2: DC-GAN D,
 * SNGAN D with projection and DiffAugment, a D with mbstd, DC-GAN G) with
 * the same parameters, inputs and generator on both backends: dP/dw and
 * dP/dx. fp32; every case runs and reports before the test fails (CHECK).
 * Exits 77 without a CUDA device. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "test_cuda_util.h"

static gf_backend *cpu, *gpu;

static int setup(void **state)
{
	(void)state;
	cpu = cpu_open();
	gpu = cuda_open(GF_PREC_FP32, GF_LAYOUT_NCHW);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	gf_backend_close(gpu);
	gf_backend_close(cpu);
	return 0;
}

/* ---- ops ---- */

static void test_act_backward2(void **state)
{
	(void)state;
	size_t n = 70001;
	float *t = host_rand(n, 1, -1, 1), *dy = host_rand(n, 2, -1, 1), *y = host_rand(n, 3, -0.99f, 0.99f);
	float *want = malloc(n * sizeof(float));
	float *dt = dev_from(gpu, t, n), *ddy = dev_from(gpu, dy, n), *dyv = dev_from(gpu, y, n), *out = dev_alloc(gpu, n);
	gf_act acts[] = { GF_ACT_TANH, GF_ACT_SIGMOID, GF_ACT_LRELU };
	for (int a = 0; a < 3; a++) {
		NN_OK(cpu->ops->act_backward2(cpu, want, t, dy, y, n, acts[a], 0.2f));
		NN_OK(gpu->ops->act_backward2(gpu, out, dt, ddy, dyv, n, acts[a], 0.2f));
		char what[64];
		snprintf(what, sizeof(what), "act_backward2 act %d", (int)acts[a]);
		CHECK(dev_close(what, gpu, out, want, n, TOL_FP32));
	}
	gpu->ops->free(gpu, dt), gpu->ops->free(gpu, ddy), gpu->ops->free(gpu, dyv), gpu->ops->free(gpu, out);
	free(t), free(dy), free(y), free(want);
	checks_done();
}

static void bn2_case(int n, int c, int hw, gf_act act, int affine)
{
	size_t total = (size_t)n * c * hw;
	gf_bn_desc d = { .n = n, .c = c, .hw = hw, .eps = 0.8f, .momentum = 0.1f, .act = act, .slope = 0.2f,
	                 .dtype = GF_F32, .layout = GF_NCHW };
	float *x = host_rand(total, 10, -2, 2), *t = host_rand(total, 11, -1, 1), *dy = host_rand(total, 12, -1, 1);
	float *gamma = host_rand((size_t)c, 13, 0.5f, 1.5f), *beta = host_rand((size_t)c, 14, -0.5f, 0.5f);
	float *y = malloc(total * sizeof(float)), *mean = malloc((size_t)c * sizeof(float)), *rstd = malloc((size_t)c * sizeof(float));
	float *ty = malloc(total * sizeof(float)), *dx = malloc(total * sizeof(float)), *dg = host_rand((size_t)c, 15, -1, 1);
	float *dg0 = malloc((size_t)c * sizeof(float));
	memcpy(dg0, dg, (size_t)c * sizeof(float));
	NN_OK(cpu->ops->bn_forward_train(cpu, y, mean, rstd, NULL, NULL, x, affine ? gamma : NULL, affine ? beta : NULL, &d));
	NN_OK(cpu->ops->bn_backward2(cpu, ty, dx, affine ? dg : NULL, t, dy, y, x, affine ? gamma : NULL, mean, rstd, &d, 1));
	float *gx = dev_from(gpu, x, total), *gt = dev_from(gpu, t, total), *gdy = dev_from(gpu, dy, total);
	float *gg = dev_from(gpu, gamma, (size_t)c), *gb = dev_from(gpu, beta, (size_t)c), *gy = dev_alloc(gpu, total);
	float *gm = dev_alloc(gpu, (size_t)c), *gr = dev_alloc(gpu, (size_t)c), *gty = dev_alloc(gpu, total);
	float *gdx = dev_alloc(gpu, total), *gdg = dev_from(gpu, dg0, (size_t)c);
	NN_OK(gpu->ops->bn_forward_train(gpu, gy, gm, gr, NULL, NULL, gx, affine ? gg : NULL, affine ? gb : NULL, &d));
	NN_OK(gpu->ops->bn_backward2(gpu, gty, gdx, affine ? gdg : NULL, gt, gdy, gy, gx, affine ? gg : NULL, gm, gr, &d, 1));
	char what[96];
	snprintf(what, sizeof(what), "bn_backward2 (%d, %d, %d) act %d affine %d: ty", n, c, hw, (int)act, affine);
	CHECK(dev_close(what, gpu, gty, ty, total, TOL_FP32));
	snprintf(what, sizeof(what), "bn_backward2 (%d, %d, %d) act %d affine %d: dx", n, c, hw, (int)act, affine);
	CHECK(dev_close(what, gpu, gdx, dx, total, 1e-3));
	if (affine) {
		snprintf(what, sizeof(what), "bn_backward2 (%d, %d, %d) act %d: dgamma", n, c, hw, (int)act);
		CHECK(dev_close(what, gpu, gdg, dg, (size_t)c, 1e-3));
	}
	float *dev[] = { gx, gt, gdy, gg, gb, gy, gm, gr, gty, gdx, gdg };
	for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
		gpu->ops->free(gpu, dev[i]);
	free(x), free(t), free(dy), free(gamma), free(beta), free(y), free(mean), free(rstd), free(ty), free(dx);
	free(dg), free(dg0);
}

static void test_bn_backward2(void **state)
{
	(void)state;
	bn2_case(8, 16, 64, GF_ACT_NONE, 1);
	bn2_case(8, 16, 64, GF_ACT_LRELU, 1);
	bn2_case(5, 7, 9, GF_ACT_RELU, 1);
	bn2_case(64, 32, 1, GF_ACT_NONE, 0);   /* bn1d */
	bn2_case(1, 24, 25, GF_ACT_NONE, 0);   /* instancenorm's view */
	checks_done();
}

static void test_pooling_gather(void **state)
{
	(void)state;
	gf_pooling_desc d = { 4, 6, 9, 9, 5, 5, 3, 3, 2, 2, 1, 1, 1, 0 };
	size_t nin = 4 * 6 * 81, nout = 4 * 6 * 25;
	float *x = host_rand(nin, 20, -1, 1), *t = host_rand(nin, 21, -1, 1), *y = malloc(nout * sizeof(float));
	float *want = malloc(nout * sizeof(float));
	int32_t *idx = malloc(nout * sizeof(int32_t));
	NN_OK(cpu->ops->pooling_forward(cpu, y, idx, x, &d));
	NN_OK(cpu->ops->pooling_gather(cpu, want, t, idx, &d));
	void *gidx;
	NN_OK(gpu->ops->alloc(gpu, &gidx, nout * sizeof(int32_t)));
	NN_OK(gpu->ops->copy(gpu, gidx, idx, nout * sizeof(int32_t), GF_COPY_H2D));
	float *gt = dev_from(gpu, t, nin), *gy = dev_alloc(gpu, nout);
	NN_OK(gpu->ops->pooling_gather(gpu, gy, gt, gidx, &d));
	CHECK(dev_equal("pooling_gather", gpu, gy, want, nout));
	gpu->ops->free(gpu, gidx), gpu->ops->free(gpu, gt), gpu->ops->free(gpu, gy);
	free(x), free(t), free(y), free(want), free(idx);
	checks_done();
}

static void test_augment_linear(void **state)
{
	(void)state;
	int n = 5, c = 3, h = 12, w = 10;
	size_t total = (size_t)n * c * h * w;
	float *x = host_rand(total, 30, -1, 1), *u = host_rand((size_t)n * 7, 31, 0, 1), *want = malloc(total * sizeof(float));
	NN_OK(cpu->ops->augment_linear(cpu, want, x, u, n, c, h, w, 7));
	float *gx = dev_from(gpu, x, total), *gu = dev_from(gpu, u, (size_t)n * 7), *gy = dev_alloc(gpu, total);
	NN_OK(gpu->ops->augment_linear(gpu, gy, gx, gu, n, c, h, w, 7));
	CHECK(dev_close("augment_linear", gpu, gy, want, total, TOL_FP32));
	gpu->ops->free(gpu, gx), gpu->ops->free(gpu, gu), gpu->ops->free(gpu, gy);
	free(x), free(u), free(want);
	checks_done();
}

static void test_mbstd(void **state)
{
	(void)state;
	gf_mbstd_desc d = { .n = 8, .c = 6, .h = 5, .w = 4, .group = 4, .f = 2, .eps = 1e-8f };
	size_t nin = 8 * 6 * 20, nout = 8 * 8 * 20;
	float *x = host_rand(nin, 40, -1, 1), *t = host_rand(nin, 41, -1, 1), *dy = host_rand(nout, 42, -1, 1);
	float *y = malloc(nout * sizeof(float)), *dx = malloc(nin * sizeof(float)), *ty = malloc(nout * sizeof(float));
	float *r = malloc(nin * sizeof(float));
	NN_OK(cpu->ops->mbstd_forward(cpu, y, x, &d));
	NN_OK(cpu->ops->mbstd_backward(cpu, dx, dy, x, &d));
	NN_OK(cpu->ops->mbstd_backward2(cpu, ty, r, t, dy, x, &d));
	float *gx = dev_from(gpu, x, nin), *gt = dev_from(gpu, t, nin), *gdy = dev_from(gpu, dy, nout);
	float *gy = dev_alloc(gpu, nout), *gdx = dev_alloc(gpu, nin), *gty = dev_alloc(gpu, nout), *gr = dev_alloc(gpu, nin);
	NN_OK(gpu->ops->mbstd_forward(gpu, gy, gx, &d));
	NN_OK(gpu->ops->mbstd_backward(gpu, gdx, gdy, gx, &d));
	NN_OK(gpu->ops->mbstd_backward2(gpu, gty, gr, gt, gdy, gx, &d));
	CHECK(dev_close("mbstd_forward", gpu, gy, y, nout, TOL_FP32));
	CHECK(dev_close("mbstd_backward", gpu, gdx, dx, nin, TOL_FP32));
	CHECK(dev_close("mbstd_backward2: ty", gpu, gty, ty, nout, TOL_FP32));
	CHECK(dev_close("mbstd_backward2: dx", gpu, gr, r, nin, TOL_FP32));
	float *dev[] = { gx, gt, gdy, gy, gdx, gty, gr };
	for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
		gpu->ops->free(gpu, dev[i]);
	free(x), free(t), free(dy), free(y), free(dx), free(ty), free(r);
	checks_done();
}

/* ---- whole double backwards ---- */

/* P = 1/2 |g|^2, g = d<w, net(x)>/dx: dP/dw and dP/dx on both backends. */
static void net_case(const char *name, const char *code, int batch, int classes)
{
	gf_net *nc, *ng;
	NN_OK(nn_build(&nc, cpu, code, batch, 0));
	NN_OK(nn_build(&ng, gpu, code, batch, 0));
	gf_rng init = { 5, 0, 0 };
	NN_OK(gf_net_init(nc, &init));
	size_t np, nb;
	gf_net_block(nc, GF_PARAMS, &np);
	gf_net_block(nc, GF_BUFFERS, &nb);
	float *p = malloc((np ? np : 1) * sizeof(float)), *b = malloc((nb ? nb : 1) * sizeof(float));
	NN_OK(gf_net_read(nc, GF_PARAMS, p));
	NN_OK(gf_net_read(nc, GF_BUFFERS, b));
	NN_OK(gf_net_write(ng, GF_PARAMS, p));
	NN_OK(gf_net_write(ng, GF_BUFFERS, b));
	gf_tensor in, out;
	gf_net_shapes(nc, &in, &out);
	in.shape[0] = batch;
	size_t nx = (size_t)gf_tensor_numel(&in), ny = (size_t)gf_tensor_numel(&out) / (size_t)out.shape[0] * (size_t)batch;
	float *x = host_rand(nx, 50, -1, 1), *w = host_rand(ny, 51, -1, 1);
	in.data = x;
	int32_t lab[64];
	for (int i = 0; i < batch; i++)
		lab[i] = i % (classes ? classes : 1);
	gf_tensor lt = gf_tensor_make(lab, GF_I32, 1, (int64_t[]){ batch });
	float *dwg = dev_from(gpu, w, ny);
	float *grads[2], *dpx[2];
	for (int k = 0; k < 2; k++) {
		gf_net *net = k ? ng : nc;
		gf_backend *be = k ? gpu : cpu;
		gf_rng_init(gf_net_rng(net), 9, 3);
		NN_OK(gf_net_forward(net, &in, classes ? &lt : NULL, GF_TRAIN));
		NN_OK(gf_net_backward(net, k ? dwg : w, GF_NEED_DX));
		gf_tensor dx;
		NN_OK(gf_net_dx(net, &dx));
		float *t = dev_alloc(be, nx);
		NN_OK(be->ops->copy(be, t, dx.data, nx * sizeof(float), GF_COPY_D2D));
		NN_OK(gf_net_backward2(net, t, NULL, GF_NEED_DW | GF_NEED_DX));
		NN_OK(gf_net_dx(net, &dx));
		grads[k] = host_from(be, gf_net_block(net, GF_GRADS, NULL), np);
		dpx[k] = host_from(be, dx.data, nx);
		be->ops->free(be, t);
	}
	char what[160];
	snprintf(what, sizeof(what), "%s: dP/dx", name);
	CHECK(nn_close(what, dpx[1], dpx[0], nx, 1e-3));
	size_t nv;
	const gf_view *v = gf_net_views(nc, GF_PARAMS, &nv);
	for (size_t i = 0; i < nv; i++) {
		snprintf(what, sizeof(what), "%s: dP/d%s", name, v[i].name);
		CHECK(nn_close(what, grads[1] + v[i].offset, grads[0] + v[i].offset, v[i].numel, 1e-3));
	}
	gpu->ops->free(gpu, dwg);
	for (int k = 0; k < 2; k++)
		free(grads[k]), free(dpx[k]);
	free(p), free(b), free(x), free(w);
	gf_net_destroy(nc);
	gf_net_destroy(ng);
}

static void test_nets(void **state)
{
	(void)state;
	net_case("DC-GAN D", "return require('backbones.dcgan').D{ size = 32, channels = 1 }", 8, 0);
	net_case("DC-GAN G", "return require('backbones.dcgan').G{ z = 16, size = 16, channels = 1 }", 6, 0);
	net_case("SNGAN D (projection, DiffAugment)",
	         "return require('backbones.sngan').D{ size = 32, ch = 8, channels = 1, classes = 4,"
	         " augment = 'color,translation,cutout' }",
	         4, 4);
	net_case("mbstd D", "return { {'conv', 2, 8, 3, 1, 1}, {'tanh'}, {'mbstd', 4, 2}, {'conv', 10, 4, 3, 2, 1},"
	                    " {'sigmoid'}, {'maxpool', 2}, {'flatten'}, {'linear', 16, 1}, input_shape = {2, 8, 8} }",
	         8, 0);
	checks_done();
}

int main(void)
{
	cuda_require_device("test_cuda_dbwd");
	const struct CMUnitTest tests[] = {
		CHECKED_TEST(test_act_backward2), CHECKED_TEST(test_bn_backward2), CHECKED_TEST(test_pooling_gather),
		CHECKED_TEST(test_augment_linear), CHECKED_TEST(test_mbstd), CHECKED_TEST(test_nets),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
