/* The nn engine against PyTorch: the seed DC-GAN generator and
 * discriminator (forward, backward, running statistics, one Adam step,
 * eval mode), single layers, losses and optimisers, all compared with
 * tests/ref/nn_ref.safetensors, which tests/ref/make_nn_refs.py wrote with
 * torch 1.13 from the same hash-formula parameters (nn_fill_params). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "test_nn_util.h"

#define TOL 1e-4      /* "matches PyTorch to 1e-4 relative" */
#define SAMPLE 7      /* make_nn_refs.py samples large tensors every 7th element */

static gf_st_file *ref;
static gf_backend *be;

static int setup(void **state)
{
	(void)state;
	return nn_ref_open("tests/ref/nn_ref.safetensors", &ref, &be);
}

static int teardown(void **state)
{
	(void)state;
	nn_ref_close(ref, be);
	return 0;
}

/* Compares a[0..n) (sampled every `stride`) with reference `name`: the
 * error of each element relative to max(|ref|, floor), floor = 1e-2 of the
 * tensor's largest value or abs_floor, whichever is larger. Gradients
 * (abs_floor > 0, the network's gradient scale) are held to tol in norm
 * (||a - ref|| / ||ref||) and 10 tol element-wise: small entries of a
 * gradient are sums with much cancellation and carry f32 rounding of
 * their larger terms. */
static int check_floor(const char *name, const float *a, size_t n, size_t stride, double tol, double abs_floor)
{
	size_t rn;
	float *r = nn_ref(ref, name, &rn);
	if (!r)
		return 0;
	size_t m = (n + stride - 1) / stride;
	if (rn != m) {
		fprintf(stderr, "%s: %zu reference values, %zu computed\n", name, rn, m);
		free(r);
		return 0;
	}
	double mx = 0, worst = 0, d2 = 0, r2 = 0;
	size_t wi = 0;
	for (size_t i = 0; i < m; i++) {
		mx = fabs(r[i]) > mx ? fabs(r[i]) : mx;
		d2 += ((double)a[i * stride] - r[i]) * ((double)a[i * stride] - r[i]);
		r2 += (double)r[i] * r[i];
	}
	double floor = 1e-2 * mx > abs_floor ? 1e-2 * mx : abs_floor;
	for (size_t i = 0; i < m; i++) {
		double d = fabs((double)a[i * stride] - r[i]) / (fabs(r[i]) > floor ? fabs(r[i]) : floor + 1e-30);
		if (d > worst || isnan(d)) {
			worst = isnan(d) ? INFINITY : d;
			wi = i;
		}
	}
	/* gradients (abs_floor > 0): 1e-4 of the tensor's norm, and no element
	 * off by more than 10x that relative to the floor; values: element-wise */
	double norm = r2 > 0 ? sqrt(d2 / r2) : sqrt(d2);
	int ok = abs_floor > 0 ? norm <= tol && worst <= 10 * tol : worst <= tol;
	if (!ok)
		fprintf(stderr, "%s: relative error %.3g (norm %.3g, tolerance %.3g) at %zu: got %.9g, want %.9g\n", name,
		        worst, norm, tol, wi * stride, (double)a[wi * stride], (double)r[wi]);
	free(r);
	return ok;
}

static int check(const char *name, const float *a, size_t n, size_t stride, double tol)
{
	return check_floor(name, a, n, stride, tol, 0);
}

/* ---- DC-GAN ---- */

/* Gradients that are zero in exact arithmetic (the bias of a conv whose
 * output goes straight into a training-mode batchnorm): both sides hold
 * rounding noise, checked against the network's gradient scale instead. */
static int exact_zero(const char *tag, const char *view)
{
	return strcmp(tag, "G") == 0 && (strcmp(view, "4.bias") == 0 || strcmp(view, "8.bias") == 0);
}

static void dcgan(const char *tag, const char *code, uint64_t k0, unsigned flags)
{
	gf_net *net;
	char name[256];
	NN_OK(nn_build(&net, be, code, 4, flags));
	nn_fill_params(net, k0, 0);
	snprintf(name, sizeof(name), "dcgan.%s.x", tag);
	size_t nx = 0, ny = 0;
	float *x = nn_ref(ref, name, &nx);
	assert_non_null(x);
	gf_tensor in, out, dx;
	gf_net_shapes(net, &in, NULL);
	in.data = x;
	in.shape[0] = 4;
	NN_OK(gf_net_forward(net, &in, NULL, GF_TRAIN));
	NN_OK(gf_net_output(net, &out));
	snprintf(name, sizeof(name), "dcgan.%s.y", tag);
	assert_true(check(name, out.data, (size_t)gf_tensor_numel(&out), 1, TOL));

	snprintf(name, sizeof(name), "dcgan.%s.dy", tag);
	float *dy = nn_ref(ref, name, &ny);
	assert_non_null(dy);
	assert_int_equal(ny, gf_tensor_numel(&out));
	NN_OK(gf_net_backward(net, dy, GF_NEED_DX | GF_NEED_DW));
	NN_OK(gf_net_dx(net, &dx));
	snprintf(name, sizeof(name), "dcgan.%s.dx", tag);
	assert_true(check(name, dx.data, nx, 1, TOL));

	size_t np, nv, nb, nbv;
	float *g = gf_net_block(net, GF_GRADS, &np);
	const gf_view *v = gf_net_views(net, GF_PARAMS, &nv);
	double gmax = 0;
	for (size_t i = 0; i < np; i++)
		gmax = fabs(g[i]) > gmax ? fabs(g[i]) : gmax;
	for (size_t i = 0; i < nv; i++) {
		snprintf(name, sizeof(name), "dcgan.%s.grad.%s", tag, v[i].name);
		if (exact_zero(tag, v[i].name)) {
			size_t rn = 0;
			float *r = nn_ref(ref, name, &rn);
			for (size_t j = 0; j < v[i].numel; j++)
				assert_true(fabs(g[v[i].offset + j]) < 1e-6 * gmax && fabs(r[j]) < 1e-6 * gmax);
			free(r);
			continue;
		}
		assert_true(check_floor(name, g + v[i].offset, v[i].numel, v[i].numel > 4096 ? SAMPLE : 1, TOL, 1e-4 * gmax));
	}
	float *buf = gf_net_block(net, GF_BUFFERS, &nb);
	const gf_view *bv = gf_net_views(net, GF_BUFFERS, &nbv);
	/* running statistics after one step from (0, 1) with momentum 0.1: compare
	 * the batch estimates they hold, (r - 0.9 * r0) / 0.1, which a plain
	 * check of r would hide behind the 0.9 (the D's variances are ~1e-4) */
	for (size_t i = 0; i < nbv; i++) {
		snprintf(name, sizeof(name), "dcgan.%s.buffer.%s", tag, bv[i].name);
		int is_var = strstr(bv[i].name, "running_var") != NULL;
		size_t rn = 0;
		float *r = nn_ref(ref, name, &rn);
		assert_int_equal(rn, bv[i].numel);
		float *mine = malloc(rn * sizeof(float)), *theirs = malloc(rn * sizeof(float));
		for (size_t j = 0; j < rn; j++) {
			mine[j] = (float)(((double)buf[bv[i].offset + j] - (is_var ? 0.9 : 0.0)) / 0.1);
			theirs[j] = (float)(((double)r[j] - (is_var ? 0.9 : 0.0)) / 0.1);
		}
		assert_true(nn_close(name, mine, theirs, rn, 1e-3));
		free(mine);
		free(theirs);
		free(r);
	}

	NN_OK(gf_net_forward(net, &in, NULL, GF_EVAL));
	NN_OK(gf_net_output(net, &out));
	snprintf(name, sizeof(name), "dcgan.%s.y_eval", tag);
	assert_true(check(name, out.data, (size_t)gf_tensor_numel(&out), 1, TOL));

	/* one Adam(2e-4, 0.5, 0.999) step: the parameters to 1e-4 relative,
	 * and the update itself (about 2e-4 per element) to 1e-3 of its size
	 * wherever the gradient is clear of Adam's eps (|g| > 1e-6); where it is
	 * not, the update depends on the gradient's last digits */
	float *before = malloc(np * sizeof(float));
	NN_OK(gf_net_read(net, GF_PARAMS, before));
	gf_optim *opt;
	gf_optim_conf oc;
	gf_optim_defaults(&oc, GF_OPT_ADAM);
	oc.lr = 2e-4f;
	oc.beta1 = 0.5f;
	NN_OK(gf_optim_create(&opt, net, &oc));
	NN_OK(gf_optim_step(opt));
	float *p = gf_net_block(net, GF_PARAMS, NULL);
	size_t checked = 0;
	for (size_t i = 0; i < nv; i++) {
		size_t stride = v[i].numel > 4096 ? SAMPLE : 1;
		snprintf(name, sizeof(name), "dcgan.%s.adam.%s", tag, v[i].name);
		size_t rn = 0;
		float *r = nn_ref(ref, name, &rn);
		snprintf(name, sizeof(name), "dcgan.%s.grad.%s", tag, v[i].name);
		float *rg = nn_ref(ref, name, NULL);
		for (size_t j = 0; j < rn; j++) {
			size_t at = v[i].offset + j * stride;
			double mine = (double)p[at] - before[at], theirs = (double)r[j] - before[at];
			if (fabsf(rg[j]) <= 1e-6f || exact_zero(tag, v[i].name)) {
				/* ill-conditioned: both moved by at most lr */
				assert_true(fabs(mine) <= 2.01e-4 && fabs(theirs) <= 2.01e-4);
				continue;
			}
			checked++;
			if (fabs((double)p[at] - r[j]) > TOL * fabs(r[j]) + 1e-7) {
				fprintf(stderr, "%s[%zu]: %.9g, PyTorch %.9g\n", name, j * stride, (double)p[at], (double)r[j]);
				fail();
			}
			if (fabs(mine - theirs) > 1e-3 * fabs(theirs) + 1.5e-7) {
				fprintf(stderr, "%s[%zu]: update %.6g, PyTorch %.6g (gradient %.3g)\n", v[i].name, j * stride, mine,
				        theirs, (double)rg[j]);
				fail();
			}
		}
		free(r);
		free(rg);
	}
	assert_true(checked > 100);
	free(before);
	gf_optim_destroy(opt);

	free(x);
	free(dy);
	gf_net_destroy(net);
}

static void test_dcgan_g(void **state)
{
	(void)state;
	dcgan("G", "return require('backbones.dcgan').G{ size = 32, channels = 1 }", 0, 0);
}

static void test_dcgan_g_unfused(void **state)
{
	(void)state;
	dcgan("G", "return require('backbones.dcgan').G{ size = 32, channels = 1 }", 0, GF_NET_NOFUSE);
}

static void test_dcgan_d(void **state)
{
	(void)state;
	dcgan("D", "return require('backbones.dcgan').D{ size = 32, channels = 1, dropout = 0 }", 100, 0);
}

/* ---- single layers ---- */

static const struct layer_case {
	const char *name, *table;
	int ndim;
	int shape[4];   /* input shape including the batch */
	int both;       /* also run unfused */
} layer_cases[] = {
	{ "linear", "{ {'linear', 7, 5}, input_shape = {7} }", 2, { 3, 7 }, 0 },
	{ "conv_s2", "{ {'conv', 3, 6, 3, 2, 1}, input_shape = {3, 9, 9} }", 4, { 2, 3, 9, 9 }, 0 },
	{ "conv_k5", "{ {'conv', 4, 8, 5, 1, 2}, input_shape = {4, 8, 8} }", 4, { 2, 4, 8, 8 }, 0 },
	{ "conv_1x1", "{ {'conv', 5, 7, 1}, input_shape = {5, 4, 4} }", 4, { 2, 5, 4, 4 }, 0 },
	{ "conv_direct", "{ {'conv', 6, 3, 3, 1, 1}, input_shape = {6, 7, 7} }", 4, { 2, 6, 7, 7 }, 0 },
	{ "conv_nobias", "{ {'conv', 3, 4, 3, 1, 0, bias = false}, input_shape = {3, 6, 6} }", 4, { 2, 3, 6, 6 }, 0 },
	{ "tconv", "{ {'tconv', 3, 4, 3, 2, 1, output_padding = 1}, input_shape = {3, 5, 5} }", 4, { 2, 3, 5, 5 }, 0 },
	{ "tconv_k4", "{ {'tconv', 4, 2, 4, 2, 1}, input_shape = {4, 4, 4} }", 4, { 2, 4, 4, 4 }, 0 },
	{ "upconv", "{ {'upsample', 2}, {'conv', 5, 6, 3, 1, 1}, input_shape = {5, 4, 3} }", 4, { 2, 5, 4, 3 }, 1 },
	{ "bn2d", "{ {'bn', 4, 0.8}, input_shape = {4, 5, 5} }", 4, { 3, 4, 5, 5 }, 0 },
	{ "bn1d", "{ {'bn', 6}, input_shape = {6} }", 2, { 5, 6 }, 0 },
	{ "bn_lrelu", "{ {'bn', 3}, {'lrelu', 0.2}, input_shape = {3, 4, 4} }", 4, { 4, 3, 4, 4 }, 1 },
	{ "maxpool", "{ {'maxpool', 3, 2, 1}, input_shape = {3, 7, 7} }", 4, { 2, 3, 7, 7 }, 0 },
	{ "avgpool", "{ {'avgpool', 2}, input_shape = {3, 6, 6} }", 4, { 2, 3, 6, 6 }, 0 },
	{ "softmax", "{ {'softmax'}, input_shape = {9} }", 2, { 4, 9 }, 0 },
	{ "tanh", "{ {'tanh'}, input_shape = {8} }", 2, { 3, 8 }, 0 },
	{ "sigmoid", "{ {'sigmoid'}, input_shape = {8} }", 2, { 3, 8 }, 0 },
	{ "relu", "{ {'relu'}, input_shape = {8} }", 2, { 3, 8 }, 0 },
	/* 8 channels in and out: the Winograd path (core/nn/cpu/winograd_cpu.c);
	 * last, as the parameter counter runs through the list */
	{ "conv_same", "{ {'conv', 8, 9, 3, 1, 1}, input_shape = {8, 13, 12} }", 4, { 2, 8, 13, 12 }, 0 },
};

static void run_layer_case(const struct layer_case *c, uint64_t k, unsigned flags)
{
	char code[512], name[128];
	gf_net *net;
	snprintf(code, sizeof(code), "return %s", c->table);
	NN_OK(nn_build(&net, be, code, c->shape[0], flags));
	nn_fill_params(net, k, 0);
	size_t nx = 0, ndy = 0;
	snprintf(name, sizeof(name), "layer.%s.x", c->name);
	float *x = nn_ref(ref, name, &nx);
	snprintf(name, sizeof(name), "layer.%s.dy", c->name);
	float *dy = nn_ref(ref, name, &ndy);
	assert_non_null(x);
	assert_non_null(dy);
	int64_t sh[4];
	for (int i = 0; i < c->ndim; i++)
		sh[i] = c->shape[i];
	gf_tensor in = gf_tensor_make(x, GF_F32, c->ndim, sh), out, dx;
	NN_OK(gf_net_forward(net, &in, NULL, GF_TRAIN));
	NN_OK(gf_net_output(net, &out));
	snprintf(name, sizeof(name), "layer.%s.y", c->name);
	assert_true(check(name, out.data, (size_t)gf_tensor_numel(&out), 1, TOL));
	NN_OK(gf_net_backward(net, dy, GF_NEED_DX | GF_NEED_DW));
	NN_OK(gf_net_dx(net, &dx));
	snprintf(name, sizeof(name), "layer.%s.dx", c->name);
	assert_true(check(name, dx.data, nx, 1, TOL));
	size_t nv;
	const gf_view *v = gf_net_views(net, GF_PARAMS, &nv);
	float *g = gf_net_block(net, GF_GRADS, NULL);
	for (size_t i = 0; i < nv; i++) {
		snprintf(name, sizeof(name), "layer.%s.d%s", c->name, strrchr(v[i].name, '.') + 1);
		assert_true(check(name, g + v[i].offset, v[i].numel, 1, TOL));
	}
	free(x);
	free(dy);
	gf_net_destroy(net);
}

static void test_layers(void **state)
{
	(void)state;
	uint64_t k = 300;
	for (size_t i = 0; i < sizeof(layer_cases) / sizeof(layer_cases[0]); i++) {
		const struct layer_case *c = &layer_cases[i];
		gf_net *probe;
		char code[512];
		snprintf(code, sizeof(code), "return %s", c->table);
		NN_OK(nn_build(&probe, be, code, c->shape[0], 0));
		size_t nv;
		gf_net_views(probe, GF_PARAMS, &nv);
		gf_net_destroy(probe);
		run_layer_case(c, k, 0);
		if (c->both)
			run_layer_case(c, k, GF_NET_NOFUSE);
		k += nv + 1;
	}
}

static void test_embedding(void **state)
{
	(void)state;
	gf_net *net;
	NN_OK(nn_build(&net, be, "return { {'embedding', 5, 4}, input_shape = {1} }", 4, 0));
	assert_int_equal(gf_net_classes(net), 5);
	nn_fill_params(net, 700, 1);
	gf_tensor t;
	NN_OK(gf_st_get(ref, "layer.embedding.idx", &t));
	int32_t idx[4];
	memcpy(idx, t.data, sizeof(idx));
	float x[4] = { 0 };
	gf_tensor in = nn_tensor(x, 2, 4, 1), lab = gf_tensor_make(idx, GF_I32, 1, (int64_t[]){ 4 }), out;
	NN_OK(gf_net_forward(net, &in, &lab, GF_TRAIN));
	NN_OK(gf_net_output(net, &out));
	assert_true(check("layer.embedding.y", out.data, 16, 1, TOL));
	size_t n = 0;
	float *dy = nn_ref(ref, "layer.embedding.dy", &n);
	NN_OK(gf_net_backward(net, dy, GF_NEED_DW));
	assert_true(check("layer.embedding.dweight", gf_net_block(net, GF_GRADS, NULL), 20, 1, TOL));
	/* out-of-range labels are an error, not a wild read */
	idx[1] = 5;
	assert_int_equal(gf_net_forward(net, &in, &lab, GF_TRAIN), GF_EPARAM);
	assert_non_null(strstr(gf_errmsg(), "label 5"));
	free(dy);
	gf_net_destroy(net);
}

/* ---- losses ---- */

static void loss_case(const char *name, gf_loss_kind kind, int has_t, float tv)
{
	char key[128];
	size_t n = 0, nt = 0;
	snprintf(key, sizeof(key), "loss.%s.x", name);
	float *x = nn_ref(ref, key, &n);
	float *t = NULL;
	if (has_t) {
		snprintf(key, sizeof(key), "loss.%s.t", name);
		t = nn_ref(ref, key, &nt);
		assert_int_equal(nt, n);
	}
	gf_tensor xt;
	snprintf(key, sizeof(key), "loss.%s.x", name);
	NN_OK(gf_st_get(ref, key, &xt));   /* for the shape */
	xt.data = x;
	gf_tensor tt = xt;
	tt.data = t;
	float *dx = calloc(n, sizeof(float)), value;
	NN_OK(gf_loss(be, kind, &value, dx, &xt, t ? &tt : NULL, tv, 1.0f));
	snprintf(key, sizeof(key), "loss.%s.value", name);
	assert_true(check(key, &value, 1, 1, 1e-5));
	snprintf(key, sizeof(key), "loss.%s.grad", name);
	assert_true(check(key, dx, n, 1, 1e-5));
	/* scale multiplies both */
	float v2;
	NN_OK(gf_loss(be, kind, &v2, dx, &xt, t ? &tt : NULL, tv, 0.5f));
	assert_true(fabsf(v2 - 0.5f * value) <= 1e-6f * fabsf(value) + 1e-7f);
	free(x);
	free(t);
	free(dx);
}

static void test_losses(void **state)
{
	(void)state;
	loss_case("bce", GF_LOSS_BCE, 1, 0);
	loss_case("bce_clamp", GF_LOSS_BCE, 1, 0);
	loss_case("bce_logits", GF_LOSS_BCE_LOGITS, 1, 0);
	loss_case("nonsat_logits", GF_LOSS_NONSAT_LOGITS, 0, 0);
	loss_case("hinge_d_real", GF_LOSS_HINGE_D, 0, 1.0f);
	loss_case("hinge_d_fake", GF_LOSS_HINGE_D, 0, -1.0f);
	loss_case("hinge_g", GF_LOSS_HINGE_G, 0, 0);
	loss_case("ls", GF_LOSS_LS, 1, 0);
	loss_case("l1", GF_LOSS_L1, 1, 0);

	/* cross-entropy with class labels */
	size_t n = 0;
	float *x = nn_ref(ref, "loss.ce.x", &n), *dx = calloc(n, sizeof(float)), value;
	gf_tensor lt;
	NN_OK(gf_st_get(ref, "loss.ce.labels", &lt));
	int32_t labels[4];
	memcpy(labels, lt.data, sizeof(labels));
	gf_tensor xt = nn_tensor(x, 2, 4, 5), yt = gf_tensor_make(labels, GF_I32, 1, (int64_t[]){ 4 });
	NN_OK(gf_loss(be, GF_LOSS_CE, &value, dx, &xt, &yt, 0, 1.0f));
	assert_true(check("loss.ce.value", &value, 1, 1, 1e-5));
	assert_true(check("loss.ce.grad", dx, n, 1, 1e-5));
	free(x);
	free(dx);

	/* non-saturating G loss on probabilities = bce with target 1 */
	float p[3] = { 0.2f, 0.7f, 0.9f }, g1[3], g2[3], v1, v2;
	gf_tensor pt = nn_tensor(p, 2, 3, 1);
	NN_OK(gf_loss(be, GF_LOSS_NONSAT, &v1, g1, &pt, NULL, 0, 1.0f));
	NN_OK(gf_loss(be, GF_LOSS_BCE, &v2, g2, &pt, NULL, 1.0f, 1.0f));
	assert_true(v1 == v2 && memcmp(g1, g2, sizeof(g1)) == 0);
	/* a probability outside [0, 1] is an error, a NaN a non-finite value */
	p[1] = 1.5f;
	assert_int_equal(gf_loss(be, GF_LOSS_BCE, &v1, g1, &pt, NULL, 1.0f, 1.0f), GF_EPARAM);
	p[1] = NAN;
	assert_int_equal(gf_loss(be, GF_LOSS_BCE, &v1, g1, &pt, NULL, 1.0f, 1.0f), GF_ENONFINITE);
}

/* ---- optimisers ---- */

static void optim_case(const char *name, const gf_optim_conf *c)
{
	gf_net *net;
	char key[128];
	NN_OK(nn_build(&net, be, "return { {'linear', 10, 1, bias = false}, input_shape = {10} }", 1, 0));
	gf_optim *o;
	NN_OK(gf_optim_create(&o, net, c));
	snprintf(key, sizeof(key), "optim.%s.p0", name);
	float *p0 = nn_ref(ref, key, NULL);
	NN_OK(gf_net_write(net, GF_PARAMS, p0));
	for (int s = 0; s < 3; s++) {
		snprintf(key, sizeof(key), "optim.%s.g%d", name, s);
		float *g = nn_ref(ref, key, NULL);
		NN_OK(gf_net_write(net, GF_GRADS, g));
		NN_OK(gf_optim_step(o));
		snprintf(key, sizeof(key), "optim.%s.p%d", name, s + 1);
		assert_true(check(key, gf_net_block(net, GF_PARAMS, NULL), 10, 1, 1e-5));
		free(g);
	}
	assert_int_equal(gf_optim_steps(o), 3);
	free(p0);
	gf_optim_destroy(o);
	gf_net_destroy(net);
}

static void test_optimisers(void **state)
{
	(void)state;
	gf_optim_conf c;
	gf_optim_defaults(&c, GF_OPT_ADAM);
	c.lr = 1e-2f;
	c.beta1 = 0.5f;
	optim_case("adam", &c);
	gf_optim_defaults(&c, GF_OPT_ADAM);
	c.lr = 1e-2f;
	c.beta2 = 0.99f;
	c.eps = 1e-6f;
	c.weight_decay = 0.1f;
	optim_case("adam_wd", &c);
	gf_optim_defaults(&c, GF_OPT_ADAM);
	c.lr = 1e-2f;
	c.weight_decay = 0.1f;
	c.decoupled = 1;
	optim_case("adamw", &c);
	gf_optim_defaults(&c, GF_OPT_SGD);
	c.lr = 0.1f;
	optim_case("sgd", &c);
	c.momentum = 0.9f;
	c.dampening = 0.1f;
	c.weight_decay = 0.01f;
	optim_case("sgd_momentum", &c);
	gf_optim_defaults(&c, GF_OPT_SGD);
	c.lr = 0.1f;
	c.momentum = 0.9f;
	c.nesterov = 1;
	optim_case("sgd_nesterov", &c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dcgan_g),
		cmocka_unit_test(test_dcgan_g_unfused),
		cmocka_unit_test(test_dcgan_d),
		cmocka_unit_test(test_layers),
		cmocka_unit_test(test_embedding),
		cmocka_unit_test(test_losses),
		cmocka_unit_test(test_optimisers),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
