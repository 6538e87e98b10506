/* The CUDA backend's StyleGAN2 ops and kinds against the CPU backend's:
 * bias_act_forward/_backward (linear, relu, lrelu; with and without bias
 * and clamp), rsqrt_eps and fir_forward/_backward (up, down, blurs,
 * asymmetric pads) on random inputs; then whole networks with the
 * same parameters, buffers, inputs and generator on both backends: a
 * synthesis block (eqlr affines, const, modconv 3x3 and up 2 + fir,
 * random and constant noise, bias_act, a toRGB modconv without
 * demodulation) forward and backward (output, dL/dx, every parameter
 * gradient; the random noise is the generator's on both) and a
 * discriminator block (eqlr convs, fir blur and downsample, bias_act with
 * clamp, residual add), both through the double backward too (dP/dx,
 * dP/dparam: the path length's and R1's), and style mixing (style_mix's
 * draws from the generator on both, the mapping on two rows, style_w's
 * row read on the device).
 * fp32; every case runs and reports before the test fails (CHECK). Exits
 * 77 without a CUDA device. */
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

static void test_ops(void **state)
{
	(void)state;
	int n = 5, c = 37, hw = 301;
	size_t total = (size_t)n * c * hw;
	float *x = host_rand(total, 1, -2, 2), *b = host_rand((size_t)c, 2, -1, 1), *dy = host_rand(total, 3, -1, 1);
	float *y = malloc(total * sizeof(float)), *dx = malloc(total * sizeof(float));
	float *gx = dev_from(gpu, x, total), *gb = dev_from(gpu, b, (size_t)c), *gdy = dev_from(gpu, dy, total);
	float *gy = dev_alloc(gpu, total), *gdx = dev_alloc(gpu, total);
	gf_act acts[] = { GF_ACT_NONE, GF_ACT_RELU, GF_ACT_LRELU };
	for (int a = 0; a < 3; a++)
		for (int k = 0; k < 2; k++) {
			gf_bias_act_desc d = { .n = n, .c = c, .hw = hw, .act = acts[a], .alpha = 0.2f, .gain = 1.41421356f,
				               .clamp = k ? 1.5f : 0.0f, .bgain = k ? 0.01f : 1.0f };
			const float *bias = k ? b : NULL;
			NN_OK(cpu->ops->bias_act_forward(cpu, y, x, bias, &d));
			NN_OK(gpu->ops->bias_act_forward(gpu, gy, gx, k ? gb : NULL, &d));
			NN_OK(cpu->ops->bias_act_backward(cpu, dx, dy, y, &d));
			NN_OK(gpu->ops->bias_act_backward(gpu, gdx, gdy, gy, &d));
			char what[80];
			snprintf(what, sizeof(what), "bias_act_forward act %d clamp %d", (int)acts[a], k);
			CHECK(dev_close(what, gpu, gy, y, total, TOL_FP32));
			snprintf(what, sizeof(what), "bias_act_backward act %d clamp %d", (int)acts[a], k);
			CHECK(dev_close(what, gpu, gdx, dx, total, TOL_FP32));
		}
	float *pos = host_rand(total, 4, 0, 3);
	float *gpos = dev_from(gpu, pos, total);
	NN_OK(cpu->ops->rsqrt_eps(cpu, y, pos, total, 1e-8f));
	NN_OK(gpu->ops->rsqrt_eps(gpu, gy, gpos, total, 1e-8f));
	CHECK(dev_close("rsqrt_eps", gpu, gy, y, total, TOL_FP32));
	/* fir: upsample2d, downsample2d, the two blurs, asymmetric pads with up and down together */
	const int cfg[][4] = { { 2, 1, 2, 1 }, { 1, 2, 1, 1 }, { 1, 1, 2, 2 }, { 1, 1, 1, 1 }, { 2, 2, 1, 2 } };
	for (size_t k = 0; k < sizeof(cfg) / sizeof(cfg[0]); k++) {
		int up = cfg[k][0], down = cfg[k][1], h = 13, w = 10;
		gf_fir_desc d = { .n = 37, .h = h, .w = w, .up = up, .down = down, .p0 = cfg[k][2],
			          .f = { 0.125f, 0.375f, 0.375f, 0.125f }, .gain = (float)(up * up) };
		d.hout = (h * up + cfg[k][2] + cfg[k][3] - 4) / down + 1;
		d.wout = (w * up + cfg[k][2] + cfg[k][3] - 4) / down + 1;
		size_t ni = (size_t)d.n * h * w, no = (size_t)d.n * d.hout * d.wout;
		float *fx = host_rand(ni, 10 + k, -1, 1), *fdy = host_rand(no, 20 + k, -1, 1);
		float *fy = malloc(no * sizeof(float)), *fdx = malloc(ni * sizeof(float));
		float *gfx = dev_from(gpu, fx, ni), *gfdy = dev_from(gpu, fdy, no), *gfy = dev_alloc(gpu, no), *gfdx = dev_alloc(gpu, ni);
		NN_OK(cpu->ops->fir_forward(cpu, fy, fx, &d));
		NN_OK(gpu->ops->fir_forward(gpu, gfy, gfx, &d));
		NN_OK(cpu->ops->fir_backward(cpu, fdx, fdy, &d));
		NN_OK(gpu->ops->fir_backward(gpu, gfdx, gfdy, &d));
		char what[80];
		snprintf(what, sizeof(what), "fir_forward up %d down %d pad %d,%d", up, down, cfg[k][2], cfg[k][3]);
		CHECK(dev_close(what, gpu, gfy, fy, no, TOL_FP32));
		snprintf(what, sizeof(what), "fir_backward up %d down %d pad %d,%d", up, down, cfg[k][2], cfg[k][3]);
		CHECK(dev_close(what, gpu, gfdx, fdx, ni, TOL_FP32));
		gpu->ops->free(gpu, gfx), gpu->ops->free(gpu, gfdy), gpu->ops->free(gpu, gfy), gpu->ops->free(gpu, gfdx);
		free(fx), free(fdy), free(fy), free(fdx);
	}
	float *dev[] = { gx, gb, gdy, gy, gdx, gpos };
	for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
		gpu->ops->free(gpu, dev[i]);
	free(x), free(b), free(dy), free(y), free(dx), free(pos);
	checks_done();
}

/* The same network on both backends: forward, backward of <w, y> (and with
 * dbwd the double backward of 1/2 |dL/dx|^2), compared. */
static void net_case(const char *name, const char *code, int batch, int dbwd)
{
	gf_net *nc, *ng;
	NN_OK(nn_build(&nc, cpu, code, batch, 0));
	NN_OK(nn_build(&ng, gpu, code, batch, 0));
	gf_rng init = { 5, 0, 0 };
	NN_OK(gf_net_init(nc, &init));
	size_t np, nb;
	float *pc = gf_net_block(nc, GF_PARAMS, &np);
	gf_net_block(nc, GF_BUFFERS, &nb);
	for (size_t i = 0; i < np; i++)   /* noise strengths and biases away from 0 */
		pc[i] += 0.2f * (float)((int)(i * 7919 % 13) - 6) / 6.0f;
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
	float *dwg = dev_from(gpu, w, ny);
	float *ys[2], *grads[2], *dxs[2], *g2[2] = { NULL, NULL }, *dpx[2] = { NULL, NULL };
	for (int k = 0; k < 2; k++) {
		gf_net *net = k ? ng : nc;
		gf_backend *be = k ? gpu : cpu;
		gf_rng_init(gf_net_rng(net), 9, 3);
		NN_OK(gf_net_forward(net, &in, NULL, GF_TRAIN));
		gf_tensor y, dx;
		NN_OK(gf_net_output(net, &y));
		ys[k] = host_from(be, y.data, ny);
		NN_OK(gf_net_backward(net, k ? dwg : w, GF_NEED_DX | GF_NEED_DW));
		NN_OK(gf_net_dx(net, &dx));
		dxs[k] = host_from(be, dx.data, nx);
		grads[k] = host_from(be, gf_net_block(net, GF_GRADS, NULL), np);
		if (!dbwd)
			continue;
		float *t = dev_alloc(be, nx);
		NN_OK(be->ops->copy(be, t, dx.data, nx * sizeof(float), GF_COPY_D2D));
		NN_OK(gf_net_backward2(net, t, NULL, GF_NEED_DW | GF_NEED_DX));
		NN_OK(gf_net_dx(net, &dx));
		g2[k] = host_from(be, gf_net_block(net, GF_GRADS, NULL), np);
		dpx[k] = host_from(be, dx.data, nx);
		be->ops->free(be, t);
	}
	char what[160];
	snprintf(what, sizeof(what), "%s: y", name);
	CHECK(nn_close(what, ys[1], ys[0], ny, 1e-3));
	snprintf(what, sizeof(what), "%s: dL/dx", name);
	CHECK(nn_close(what, dxs[1], dxs[0], nx, 1e-3));
	size_t nv;
	const gf_view *v = gf_net_views(nc, GF_PARAMS, &nv);
	for (size_t i = 0; i < nv; i++) {
		snprintf(what, sizeof(what), "%s: dL/d%s", name, v[i].name);
		CHECK(nn_close(what, grads[1] + v[i].offset, grads[0] + v[i].offset, v[i].numel, 1e-3));
		if (dbwd) {
			snprintf(what, sizeof(what), "%s: dP/d%s", name, v[i].name);
			CHECK(nn_close(what, g2[1] + v[i].offset, g2[0] + v[i].offset, v[i].numel, 1e-3));
		}
	}
	if (dbwd) {
		snprintf(what, sizeof(what), "%s: dP/dx", name);
		CHECK(nn_close(what, dpx[1], dpx[0], nx, 1e-3));
	}
	gpu->ops->free(gpu, dwg);
	for (int k = 0; k < 2; k++)
		free(ys[k]), free(dxs[k]), free(grads[k]), free(g2[k]), free(dpx[k]);
	free(p), free(b), free(x), free(w);
	gf_net_destroy(nc);
	gf_net_destroy(ng);
}

static void test_nets(void **state)
{
	(void)state;
	net_case("synthesis block",
	         "return { {'linear', 16, 8, eqlr = true, bias_init = 1, name = 's0'}, {'const', 8, 4, 4, input = 'x'},"
	         " {'modconv', 8, 8, 3, with = 's0'}, {'noise', 8, mode = 'random'}, {'bias_act', 8, clamp = 2, name = 'h'},"
	         " {'linear', 16, 8, eqlr = true, bias_init = 1, input = 'x', name = 's1'},"
	         " {'modconv', 8, 4, 3, with = 's1', up = 2, input = 'h'}, {'fir', pad = 1, gain = 4},"
	         " {'noise', 4, mode = 'const'}, {'bias_act', 4, name = 'h2'},"
	         " {'linear', 16, 4, eqlr = true, bias_init = 1, input = 'x', name = 's2'},"
	         " {'modconv', 4, 3, 1, demod = false, with = 's2', input = 'h2', name = 'rgb'},"
	         " {'bias_act', 3, act = 'linear', clamp = 1, name = 'img'},"
	         " {'fir', up = 2, input = 'img'}, input_shape = {16} }",
	         4, 1);
	net_case("discriminator block",
	         "return { {'conv', 3, 8, 1, eqlr = true}, {'bias_act', 8, name = 'a'},"
	         " {'conv', 8, 8, 3, 1, 1, eqlr = true, bias = false}, {'bias_act', 8, clamp = 1},"
	         " {'fir', pad = 2}, {'conv', 8, 16, 3, 2, 0, eqlr = true, bias = false}, {'bias_act', 16, name = 'r'},"
	         " {'fir', down = 2, input = 'a'}, {'conv', 8, 16, 1, eqlr = true, bias = false},"
	         " {'add', with = 'r'}, {'flatten'}, {'linear', 256, 1, eqlr = true}, input_shape = {3, 8, 8} }",
	         4, 1);
	net_case("style mixing (mapping on two rows, prob 1)",
	         "return { {'style_mix', z = 4, prob = 1, layers = 3, name = 'mix'},"
	         " {'linear', 6, 5, eqlr = true, lr_mul = 0.5}, {'bias_act', 5, lr_mul = 0.5}, {'w_avg', 5, name = 'w'},"
	         " {'style_w', index = 0, source = 'mix', input = 'w', name = 'w0'},"
	         " {'style_w', index = 1, source = 'mix', input = 'w', name = 'w1'},"
	         " {'style_w', index = 2, source = 'mix', input = 'w', name = 'w2'},"
	         " {'concat', input = 'w0', with = 'w1', name = 'a'}, {'concat', with = 'w2'}, input_shape = {6} }",
	         4, 1);
	checks_done();
}

int main(void)
{
	cuda_require_device("test_cuda_sg2");
	const struct CMUnitTest tests[] = {
		CHECKED_TEST(test_ops),
		CHECKED_TEST(test_nets),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
