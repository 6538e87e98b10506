/* The attention layer (SAGAN/BigGAN self-attention) against PyTorch:
 * BigGAN-PyTorch's Attention module with and without spectral norm on its
 * four convolutions, compared with tests/ref/nn_ref5.safetensors, which
 * tests/ref/make_nn_refs5.py wrote with torch 1.13 (parameters stored in
 * the file under the engine's view names, gamma = 0.7). Checked: the
 * output, the input gradient and every parameter gradient (gamma's
 * included), accumulated gradients, the eval output, and with sn two
 * training forwards (each one power iteration: u and v after each) and
 * an eval forward (none). Also the view and checkpoint names (a
 * checkpoint reloads), and gf_net_init's start (gamma = 0, u and v unit
 * vectors). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>
#include <cmocka.h>

#include "test_nn_util.h"

#define TOL 1e-4
#define B 3

static gf_st_file *ref;
static gf_backend *be;
static double worst_seen;

static int setup(void **state)
{
	(void)state;
	return nn_ref_open("tests/ref/nn_ref5.safetensors", &ref, &be);
}

static int teardown(void **state)
{
	(void)state;
	nn_ref_close(ref, be);
	return 0;
}

/* a[0..n) against reference `name` (times scale) to TOL. */
static void check(const char *name, const float *a, size_t n, float scale)
{
	size_t rn = 0, w = 0;
	float *r = nn_ref(ref, name, &rn);
	assert_non_null(r);
	assert_int_equal(rn, n);
	for (size_t i = 0; i < n; i++)
		r[i] *= scale;
	double e = nn_relerr(a, r, n, 1e-2, &w);
	if (e > worst_seen)
		worst_seen = e;
	if (!nn_close(name, a, r, n, TOL))
		fail();
	free(r);
}

/* Copies attn.<c>.<view without "0."> into every view of the block. */
static void load_block(gf_net *net, unsigned which, const char *c, const char *suffix)
{
	size_t nv, n;
	const gf_view *v = gf_net_views(net, which, &nv);
	float *host = malloc(sizeof(float) * (gf_net_block(net, which, &n), n));
	gf_net_read(net, which, host);
	char name[128];
	for (size_t i = 0; i < nv; i++) {
		snprintf(name, sizeof(name), "attn.%s.%s%s", c, v[i].name + 2, suffix);
		size_t rn = 0;
		float *r = nn_ref(ref, name, &rn);
		assert_non_null(r);
		assert_int_equal(rn, v[i].numel);
		memcpy(host + v[i].offset, r, rn * sizeof(float));
		free(r);
	}
	gf_net_write(net, which, host);
	free(host);
}

/* The gradient of every parameter against attn.<c>.d<view><suffix>. */
static void check_grads(gf_net *net, const char *c, const char *suffix, float scale)
{
	size_t nv;
	const gf_view *v = gf_net_views(net, GF_PARAMS, &nv);
	const float *g = gf_net_block(net, GF_GRADS, NULL);
	char name[128];
	for (size_t i = 0; i < nv; i++) {
		snprintf(name, sizeof(name), "attn.%s.d%s%s", c, v[i].name + 2, suffix);
		check(name, g + v[i].offset, v[i].numel, scale);
	}
}

/* x<suffix> through a training forward and dy<suffix> back; y, dx and the
 * gradients checked; then the same backward again with GF_ACCUMULATE. */
static void train_step(gf_net *net, const char *c, const char *suffix, int accumulate)
{
	char name[128];
	snprintf(name, sizeof(name), "attn.%s.x%s", c, suffix);
	float *x = nn_ref(ref, name, NULL);
	snprintf(name, sizeof(name), "attn.%s.dy%s", c, suffix);
	float *dy = nn_ref(ref, name, NULL);
	assert_true(x && dy);
	gf_tensor in = nn_tensor(x, 4, B, 16, 8, 8), out, dx;
	NN_OK(gf_net_forward(net, &in, NULL, GF_TRAIN));
	NN_OK(gf_net_output(net, &out));
	snprintf(name, sizeof(name), "attn.%s.y%s", c, suffix);
	check(name, out.data, (size_t)gf_tensor_numel(&out), 1.0f);
	NN_OK(gf_net_backward(net, dy, GF_NEED_DX | GF_NEED_DW));
	NN_OK(gf_net_dx(net, &dx));
	snprintf(name, sizeof(name), "attn.%s.dx%s", c, suffix);
	check(name, dx.data, (size_t)gf_tensor_numel(&dx), 1.0f);
	check_grads(net, c, suffix, 1.0f);
	if (accumulate) {
		NN_OK(gf_net_backward(net, dy, GF_NEED_DW | GF_ACCUMULATE));
		check_grads(net, c, suffix, 2.0f);
	}
	free(x);
	free(dy);
}

static void eval_check(gf_net *net, const char *c, const char *xname)
{
	char name[128];
	snprintf(name, sizeof(name), "attn.%s.%s", c, xname);
	float *x = nn_ref(ref, name, NULL);
	gf_tensor in = nn_tensor(x, 4, B, 16, 8, 8), out;
	NN_OK(gf_net_forward(net, &in, NULL, GF_EVAL));
	NN_OK(gf_net_output(net, &out));
	snprintf(name, sizeof(name), "attn.%s.y_eval", c);
	check(name, out.data, (size_t)gf_tensor_numel(&out), 1.0f);
	free(x);
}

static void test_plain(void **state)
{
	(void)state;
	gf_net *net;
	NN_OK(nn_build(&net, be, "return { {'attention', 16}, input_shape = {16, 8, 8} }", B, 0));
	size_t nv, nb;
	const gf_view *v = gf_net_views(net, GF_PARAMS, &nv);
	const char *want[] = { "0.theta.weight", "0.phi.weight", "0.g.weight", "0.o.weight", "0.gamma" };
	const int64_t rows[] = { 2, 2, 8, 16, 1 };
	assert_int_equal(nv, 5);
	for (size_t i = 0; i < nv; i++) {
		assert_string_equal(v[i].name, want[i]);
		assert_int_equal(v[i].shape[0], rows[i]);
	}
	gf_net_views(net, GF_BUFFERS, &nb);
	assert_int_equal(nb, 0);
	load_block(net, GF_PARAMS, "plain", "");
	train_step(net, "plain", "", 1);
	eval_check(net, "plain", "x");
	gf_net_destroy(net);
}

static void test_sn(void **state)
{
	(void)state;
	gf_net *net;
	NN_OK(nn_build(&net, be, "return { {'attention', 16, sn = true}, input_shape = {16, 8, 8} }", B, 0));
	size_t nv, nb;
	const gf_view *v = gf_net_views(net, GF_PARAMS, &nv);
	const gf_view *bv = gf_net_views(net, GF_BUFFERS, &nb);
	assert_int_equal(nv, 5);
	assert_string_equal(v[0].name, "0.theta.weight_orig");
	assert_string_equal(v[3].name, "0.o.weight_orig");
	assert_int_equal(nb, 8);
	assert_string_equal(bv[0].name, "0.theta.weight_u");
	assert_string_equal(bv[7].name, "0.o.weight_v");
	assert_int_equal(bv[7].numel, 8);
	load_block(net, GF_PARAMS, "sn", "");
	load_block(net, GF_BUFFERS, "sn", "");
	const float *buf = gf_net_block(net, GF_BUFFERS, NULL);
	char name[128];
	for (int s = 0; s < 2; s++) {
		char suffix[4];
		snprintf(suffix, sizeof(suffix), "%d", s);
		train_step(net, "sn", suffix, s == 1);
		for (size_t i = 0; i < nb; i++) {
			snprintf(name, sizeof(name), "attn.sn.%s%d", bv[i].name + 2, s);
			check(name, buf + bv[i].offset, bv[i].numel, 1.0f);
		}
	}
	eval_check(net, "sn", "x0");
	/* eval leaves u and v alone */
	for (size_t i = 0; i < nb; i++) {
		snprintf(name, sizeof(name), "attn.sn.%s1", bv[i].name + 2);
		check(name, buf + bv[i].offset, bv[i].numel, 1.0f);
	}
	/* a checkpoint holds PyTorch's names, and a fresh network loads them */
	char path[] = "/tmp/gf_test_attn.XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	gf_ckpt_part part = { "D", net, NULL };
	NN_OK(gf_ckpt_save(path, &part, 1, 1, NULL, NULL));
	gf_st_file *f;
	gf_tensor t;
	NN_OK(gf_st_open(&f, path));
	const char *names[] = { "D.0.theta.weight_orig", "D.0.phi.weight_u", "D.0.g.weight_v", "D.0.o.weight_orig",
		                "D.0.gamma" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		NN_OK(gf_st_get(f, names[i], &t));
	assert_int_equal(t.ndim, 1);
	gf_st_close(f);
	gf_net *back;
	NN_OK(nn_build(&back, be, "return { {'attention', 16, sn = true}, input_shape = {16, 8, 8} }", B, 0));
	gf_ckpt_part bpart = { "D", back, NULL };
	NN_OK(gf_ckpt_load(path, &bpart, 1, NULL, NULL));
	size_t np, nbuf;
	gf_net_block(net, GF_PARAMS, &np);
	gf_net_block(net, GF_BUFFERS, &nbuf);
	assert_int_equal(nbuf, 84);   /* u, v: 2 + 16, 2 + 16, 8 + 16, 16 + 8 */
	assert_memory_equal(gf_net_block(back, GF_PARAMS, NULL), gf_net_block(net, GF_PARAMS, NULL), np * sizeof(float));
	assert_memory_equal(gf_net_block(back, GF_BUFFERS, NULL), buf, nbuf * sizeof(float));
	unlink(path);
	gf_net_destroy(back);
	gf_net_destroy(net);
	printf("attention vs PyTorch: largest relative error %.3g\n", worst_seen);
}

/* gf_net_init: gamma 0 (the layer starts as the identity) unless the table
 * says gamma = g, weights within PyTorch's U(+-1/sqrt(fan_in)), u and v
 * unit vectors. */
static void test_init(void **state)
{
	(void)state;
	gf_net *net;
	NN_OK(nn_build(&net, be, "return { {'attention', 16, sn = true}, input_shape = {16, 8, 8} }", B, 0));
	gf_rng init = { 5, 0, 0 };
	NN_OK(gf_net_init(net, &init));
	size_t nv, nb;
	const gf_view *v = gf_net_views(net, GF_PARAMS, &nv);
	const gf_view *bv = gf_net_views(net, GF_BUFFERS, &nb);
	const float *p = gf_net_block(net, GF_PARAMS, NULL), *buf = gf_net_block(net, GF_BUFFERS, NULL);
	assert_true(p[v[4].offset] == 0.0f);
	for (size_t i = 0; i < 4; i++) {
		float bound = (float)(1.0 / sqrt((double)v[i].shape[1])), mx = 0;
		for (size_t j = 0; j < v[i].numel; j++)
			mx = fabsf(p[v[i].offset + j]) > mx ? fabsf(p[v[i].offset + j]) : mx;
		assert_true(mx <= bound && mx > 0.5f * bound);
	}
	for (size_t i = 0; i < nb; i++) {
		double s = 0;
		for (size_t j = 0; j < bv[i].numel; j++)
			s += (double)buf[bv[i].offset + j] * buf[bv[i].offset + j];
		assert_true(fabs(s - 1.0) < 1e-5);
	}
	/* gamma = 0: the output is the input */
	float x[B * 16 * 64];
	nn_fill(x, B * 16 * 64, 7, 1.0f, 0.0f);
	gf_tensor in = nn_tensor(x, 4, B, 16, 8, 8), out;
	NN_OK(gf_net_forward(net, &in, NULL, GF_TRAIN));
	NN_OK(gf_net_output(net, &out));
	assert_memory_equal(out.data, x, sizeof(x));
	gf_net_destroy(net);
	/* gamma = g starts there instead */
	NN_OK(nn_build(&net, be, "return { {'attention', 8, gamma = 0.25}, input_shape = {8, 4, 4} }", B, 0));
	NN_OK(gf_net_init(net, &init));
	v = gf_net_views(net, GF_PARAMS, &nv);
	assert_true(gf_net_block(net, GF_PARAMS, NULL)[v[4].offset] == 0.25f);
	gf_net_destroy(net);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plain),
		cmocka_unit_test(test_sn),
		cmocka_unit_test(test_init),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
