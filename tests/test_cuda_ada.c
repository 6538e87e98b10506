/* The CUDA backend's StyleGAN2-ADA augmentation against the CPU backend's:
 * ada_params (the same uniforms and p on both: the transforms), ada_forward
 * (with and without the colour offset) and ada_backward (the CUDA gather
 * against the CPU scatter) on RGB, grey and 2-channel images, square and
 * oblong, p = 1 and 0.4; then a D with an ada layer first on both backends
 * with the same parameters, inputs and generator: its output, dx and the
 * double backward of P = 1/2 |g|^2 (R1 through the augmentation), dP/dx
 * and dP/dw. fp32; every case runs and reports before the test fails
 * (CHECK). Exits 77 without a CUDA device. */
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

static void ops_case(int n, int c, int h, int w, unsigned what, float p)
{
	size_t nu = (size_t)n * GF_ADA_U, nm = (size_t)n * GF_ADA_M, cnt = (size_t)n * c * h * w;
	float *u = host_rand(nu, 30, 0, 1), *x = host_rand(cnt, 31, -1, 1), *dy = host_rand(cnt, 32, -1, 1);
	float *m = malloc(nm * sizeof(float)), *y = malloc(cnt * sizeof(float)), *yl = malloc(cnt * sizeof(float));
	float *dx = malloc(cnt * sizeof(float));
	NN_OK(cpu->ops->ada_params(cpu, m, u, &p, n, c, h, w, what));
	NN_OK(cpu->ops->ada_forward(cpu, y, x, m, n, c, h, w, 1));
	NN_OK(cpu->ops->ada_forward(cpu, yl, x, m, n, c, h, w, 0));
	NN_OK(cpu->ops->ada_backward(cpu, dx, dy, m, n, c, h, w));
	float *gu = dev_from(gpu, u, nu), *gp = dev_from(gpu, &p, 1), *gx = dev_from(gpu, x, cnt), *gdy = dev_from(gpu, dy, cnt);
	float *gm = dev_alloc(gpu, nm), *gy = dev_alloc(gpu, cnt);
	char k[96];
	NN_OK(gpu->ops->ada_params(gpu, gm, gu, gp, n, c, h, w, what));
	snprintf(k, sizeof(k), "ada_params (%d, %d, %d, %d) what %u p %g", n, c, h, w, what, (double)p);
	CHECK(dev_close(k, gpu, gm, m, nm, 1e-6));
	NN_OK(gpu->ops->ada_forward(gpu, gy, gx, gm, n, c, h, w, 1));
	snprintf(k, sizeof(k), "ada_forward (%d, %d, %d, %d) what %u", n, c, h, w, what);
	CHECK(dev_close(k, gpu, gy, y, cnt, TOL_FP32));
	NN_OK(gpu->ops->ada_forward(gpu, gy, gx, gm, n, c, h, w, 0));
	snprintf(k, sizeof(k), "ada_forward linear (%d, %d, %d, %d) what %u", n, c, h, w, what);
	CHECK(dev_close(k, gpu, gy, yl, cnt, TOL_FP32));
	NN_OK(gpu->ops->ada_backward(gpu, gy, gdy, gm, n, c, h, w));
	snprintf(k, sizeof(k), "ada_backward (%d, %d, %d, %d) what %u", n, c, h, w, what);
	CHECK(dev_close(k, gpu, gy, dx, cnt, 1e-4));
	float *dev[] = { gu, gp, gx, gdy, gm, gy };
	for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
		gpu->ops->free(gpu, dev[i]);
	free(u), free(x), free(dy), free(m), free(y), free(yl), free(dx);
}

static void test_ops(void **state)
{
	(void)state;
	const unsigned bgc = GF_ADA_BLIT | GF_ADA_GEOM | GF_ADA_COLOR;
	ops_case(64, 3, 32, 32, bgc, 1.0f);
	ops_case(64, 1, 32, 32, bgc, 0.4f);
	ops_case(9, 3, 17, 12, bgc, 1.0f);
	ops_case(7, 2, 9, 5, GF_ADA_BLIT | GF_ADA_GEOM, 1.0f);
	ops_case(16, 3, 8, 8, GF_ADA_BLIT, 1.0f);
	ops_case(16, 3, 8, 8, GF_ADA_COLOR, 1.0f);
	ops_case(16, 1, 64, 48, bgc, 0.0f);
	checks_done();
}

/* A D with ada first on both backends: output, dx, and R1's double
 * backward (dP/dx, dP/dw of P = 1/2 |g|^2, g = d<w, D(x)>/dx). */
static void test_net(void **state)
{
	(void)state;
	static const char *code = "return { {'ada', 'bgc', p = 0.9}, {'conv', 3, 8, 3, 2, 1}, {'lrelu', 0.2},"
	                          " {'conv', 8, 4, 3, 2, 1}, {'tanh'}, {'flatten'}, {'linear', 64, 1}, input_shape = {3, 16, 16} }";
	const int batch = 12;
	gf_net *nc, *ng;
	NN_OK(nn_build(&nc, cpu, code, batch, 0));
	NN_OK(nn_build(&ng, gpu, code, batch, 0));
	gf_rng init = { 5, 0, 0 };
	NN_OK(gf_net_init(nc, &init));
	size_t np, nb;
	gf_net_block(nc, GF_PARAMS, &np);
	gf_net_block(nc, GF_BUFFERS, &nb);
	float *p = malloc(np * sizeof(float)), *b = malloc(nb * sizeof(float));
	NN_OK(gf_net_read(nc, GF_PARAMS, p));
	NN_OK(gf_net_read(nc, GF_BUFFERS, b));
	NN_OK(gf_net_write(ng, GF_PARAMS, p));
	NN_OK(gf_net_write(ng, GF_BUFFERS, b));
	gf_tensor in, out;
	gf_net_shapes(nc, &in, &out);
	in.shape[0] = batch;
	size_t nx = (size_t)gf_tensor_numel(&in), ny = (size_t)batch;
	float *x = host_rand(nx, 60, -1, 1), *w = host_rand(ny, 61, -1, 1);
	in.data = x;
	float *dwg = dev_from(gpu, w, ny);
	float *outs[2], *dxs[2], *grads[2], *dpx[2];
	for (int k = 0; k < 2; k++) {
		gf_net *net = k ? ng : nc;
		gf_backend *be = k ? gpu : cpu;
		gf_rng_init(gf_net_rng(net), 9, 3);
		NN_OK(gf_net_forward(net, &in, NULL, GF_TRAIN));
		gf_net_output(net, &out);
		outs[k] = host_from(be, out.data, ny);
		NN_OK(gf_net_backward(net, k ? dwg : w, GF_NEED_DX));
		gf_tensor dx;
		NN_OK(gf_net_dx(net, &dx));
		dxs[k] = host_from(be, dx.data, nx);
		float *t = dev_alloc(be, nx);
		NN_OK(be->ops->copy(be, t, dx.data, nx * sizeof(float), GF_COPY_D2D));
		NN_OK(gf_net_backward2(net, t, NULL, GF_NEED_DW | GF_NEED_DX));
		NN_OK(gf_net_dx(net, &dx));
		grads[k] = host_from(be, gf_net_block(net, GF_GRADS, NULL), np);
		dpx[k] = host_from(be, dx.data, nx);
		be->ops->free(be, t);
	}
	CHECK(nn_close("ada D: output", outs[1], outs[0], ny, 1e-4));
	CHECK(nn_close("ada D: dx", dxs[1], dxs[0], nx, 1e-3));
	CHECK(nn_close("ada D: dP/dx", dpx[1], dpx[0], nx, 1e-3));
	size_t nv;
	const gf_view *v = gf_net_views(nc, GF_PARAMS, &nv);
	for (size_t i = 0; i < nv; i++) {
		char what[96];
		snprintf(what, sizeof(what), "ada D: dP/d%s", v[i].name);
		CHECK(nn_close(what, grads[1] + v[i].offset, grads[0] + v[i].offset, v[i].numel, 1e-3));
	}
	gpu->ops->free(gpu, dwg);
	for (int k = 0; k < 2; k++)
		free(outs[k]), free(dxs[k]), free(grads[k]), free(dpx[k]);
	free(p), free(b), free(x), free(w);
	gf_net_destroy(nc);
	gf_net_destroy(ng);
	checks_done();
}

int main(void)
{
	cuda_require_device("test_cuda_ada");
	const struct CMUnitTest tests[] = {
		CHECKED_TEST(test_ops),
		CHECKED_TEST(test_net),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
