/* Lua backbones (luaconf/backbones/dcgan.lua, classifier.lua) built by the
 * nn engine: shapes of G, D, CG, CD and the classifier for several sizes,
 * parameter names and counts, conditional inputs, intermediate outputs;
 * and bad layer tables, whose errors must name the layer (1-based table
 * position and type) and what is wrong. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "test_nn_util.h"

static gf_backend *be;

static int setup(void **state)
{
	(void)state;
	gf_backend_opts o = { .threads = 2 };
	return gf_backend_open("cpu", &o, &be);
}

static int teardown(void **state)
{
	(void)state;
	gf_backend_close(be);
	return 0;
}

static gf_net *build(const char *code, int batch)
{
	gf_net *net;
	NN_OK(nn_build(&net, be, code, batch, 0));
	gf_rng r = { 1, 0, 0 };
	NN_OK(gf_net_init(net, &r));
	return net;
}

static const gf_view *view(gf_net *net, gf_block b, const char *name)
{
	size_t n;
	const gf_view *v = gf_net_views(net, b, &n);
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i].name, name) == 0)
			return &v[i];
	return NULL;
}

/* Runs a forward on zeros/labels and returns the output shape. */
static gf_tensor run(gf_net *net, int batch)
{
	gf_tensor in, out;
	gf_net_shapes(net, &in, NULL);
	in.shape[0] = batch;
	float *x = calloc((size_t)gf_tensor_numel(&in), sizeof(float));
	in.data = x;
	int32_t lab[16];
	for (int i = 0; i < batch; i++)
		lab[i] = i % (gf_net_classes(net) ? gf_net_classes(net) : 1);
	gf_tensor lt = gf_tensor_make(lab, GF_I32, 1, (int64_t[]){ batch });
	NN_OK(gf_net_forward(net, &in, gf_net_classes(net) ? &lt : NULL, GF_TRAIN));
	NN_OK(gf_net_output(net, &out));
	free(x);
	return out;
}

/* ---- pix2pix ---- */

/* Parameters of the built network (the PARAMS block: what PyTorch's
 * parameters() counts; running statistics are buffers in both). */
static size_t nparams(gf_net *net)
{
	size_t n;
	gf_net_block(net, GF_PARAMS, &n);
	return n;
}

/* U-Net G and PatchGAN D of luaconf/backbones/pix2pix.lua against the same
 * networks built in PyTorch 1.13 (tests/ref/pix2pix_counts.py: counts and
 * output shapes), at 32 x 32 gray (5 downsamplings, the pipeline's size)
 * and 256 x 256 RGB (8, the paper's), batch and instance norm. */
static void test_pix2pix(void **state)
{
	(void)state;
	static const struct {
		const char *code;
		size_t params;      /* tests/ref/pix2pix_counts.py */
		int64_t out[3];
		int forward;        /* run a forward at batch 2 (the 32 x 32 ones) */
	} cases[] = {
		{ "return require('backbones.pix2pix').G{ size = 32, channels = 1 }", 16652929, { 1, 32, 32 }, 1 },
		{ "return require('backbones.pix2pix').G{ size = 256, channels = 3 }", 54413955, { 3, 256, 256 }, 0 },
		{ "return require('backbones.pix2pix').G{ size = 256, channels = 3, norm = 'instance' }", 54409603,
		  { 3, 256, 256 }, 0 },
		{ "return require('backbones.pix2pix').D{ size = 32, channels = 1 }", 2764609, { 1, 2, 2 }, 1 },
		{ "return require('backbones.pix2pix').D{ size = 256, channels = 3 }", 2768705, { 1, 30, 30 }, 0 },
		{ "return require('backbones.pix2pix').D{ size = 256, channels = 3, norm = 'instance' }", 2767809,
		  { 1, 30, 30 }, 0 },
		{ "return require('backbones.pix2pix').D{ size = 256, channels = 3, n_layers = 2 }", 666433, { 1, 62, 62 },
		  0 },
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		gf_net *net = build(cases[k].code, 2);
		gf_tensor in, out;
		gf_net_shapes(net, &in, &out);
		assert_int_equal(out.ndim, 4);
		for (int d = 0; d < 3; d++)
			assert_int_equal(out.shape[d + 1], cases[k].out[d]);
		assert_int_equal(nparams(net), cases[k].params);
		if (cases[k].forward) {
			gf_tensor o = run(net, 2);
			assert_int_equal(o.shape[0], 2);
			assert_int_equal(o.shape[1], cases[k].out[0]);
			assert_int_equal(o.shape[3], cases[k].out[2]);
		}
		gf_net_destroy(net);
	}
	/* the skips double the decoder's inputs: transposed convs (in, out, 4, 4)
	 * of 512 (bottleneck) -> 256, 2 x 256 -> 256... at 32 x 32: 1024 -> 256,
	 * 512 -> 128, 256 -> 64 and the last 128 -> 1 */
	gf_net *g = build("return require('backbones.pix2pix').G{ size = 32, channels = 1 }", 1);
	static const int64_t ups[][2] = { { 512, 256 }, { 1024, 256 }, { 512, 128 }, { 256, 64 }, { 128, 1 } };
	for (int k = 0; k < 5; k++) {
		size_t nv;
		const gf_view *v = gf_net_views(g, GF_PARAMS, &nv);
		int found = 0;
		for (size_t i = 0; i < nv; i++)
			found |= v[i].ndim == 4 && v[i].shape[0] == ups[k][0] && v[i].shape[1] == ups[k][1] &&
			         v[i].shape[2] == 4 && strstr(v[i].name, "weight") != NULL;
		if (!found)
			fail_msg("no transposed conv %lld -> %lld", (long long)ups[k][0], (long long)ups[k][1]);
	}
	gf_net_destroy(g);
	/* receptive field of the PatchGAN */
	gf_value rf = nn_lua("return { require('backbones.pix2pix').receptive_field(3), "
	                     "require('backbones.pix2pix').receptive_field(2) }");
	int ok;
	assert_int_equal(gf_value_as_int(gf_value_at(&rf, 0), -1, &ok), 70);
	assert_int_equal(gf_value_as_int(gf_value_at(&rf, 1), -1, &ok), 34);
	gf_value_free(&rf);
	static const char *bad[][2] = {
		{ "return require('backbones.pix2pix').G{ size = 48 }", "size must be a power of two" },
		{ "return require('backbones.pix2pix').D{ norm = 'group' }", "norm must be" },
		{ "return require('backbones.pix2pix').G{ size = 32, depth = 6 }", "depth must be 2 .. 5" },
		{ "return require('backbones.pix2pix').G{ sise = 32 }", "unknown option 'sise'" },
	};
	for (int k = 0; k < 4; k++) {
		gf_value v;
		assert_int_not_equal(gf_lua_eval(bad[k][0], &v), 0);
		if (!strstr(gf_errmsg(), bad[k][1]))
			fail_msg("'%s': error '%s' lacks '%s'", bad[k][0], gf_errmsg(), bad[k][1]);
	}
}

/* ---- shapes ---- */

static void test_dcgan_shapes(void **state)
{
	(void)state;
	static const int sizes[][2] = { { 32, 1 }, { 64, 3 }, { 16, 3 } };
	for (int k = 0; k < 3; k++) {
		int s = sizes[k][0], c = sizes[k][1];
		char code[256];
		snprintf(code, sizeof(code), "return require('backbones.dcgan').G{ size = %d, channels = %d }", s, c);
		gf_net *g = build(code, 4);
		gf_tensor in, out;
		gf_net_shapes(g, &in, &out);
		assert_int_equal(in.ndim, 2);
		assert_int_equal(in.shape[1], 100);
		assert_int_equal(out.ndim, 4);
		assert_int_equal(out.shape[1], c);
		assert_int_equal(out.shape[2], s);
		assert_int_equal(out.shape[3], s);
		gf_tensor y = run(g, 3);
		assert_int_equal(y.shape[0], 3);
		const gf_view *w = view(g, GF_PARAMS, "0.weight");
		assert_non_null(w);
		assert_int_equal(w->shape[0], 128 * (s / 4) * (s / 4));
		assert_int_equal(w->shape[1], 100);
		assert_non_null(view(g, GF_BUFFERS, "5.running_var"));
		/* parameters of the PyTorch model: linear, 3 convs, 3 batchnorms */
		size_t np;
		gf_net_block(g, GF_PARAMS, &np);
		size_t want = (size_t)100 * 128 * (s / 4) * (s / 4) + 128 * (s / 4) * (s / 4) + 2 * 128 +
		              128 * 128 * 9 + 128 + 2 * 128 + 64 * 128 * 9 + 64 + 2 * 64 + (size_t)c * 64 * 9 + c;
		assert_int_equal(np, want);
		gf_net_destroy(g);

		snprintf(code, sizeof(code), "return require('backbones.dcgan').D{ size = %d, channels = %d }", s, c);
		gf_net *d = build(code, 4);
		gf_net_shapes(d, &in, &out);
		assert_int_equal(in.ndim, 4);
		assert_int_equal(in.shape[1], c);
		assert_int_equal(out.ndim, 2);
		assert_int_equal(out.shape[1], 1);
		y = run(d, 4);
		for (int i = 0; i < 4; i++) {
			float p = ((float *)y.data)[i];
			assert_true(p > 0.0f && p < 1.0f);   /* sigmoid */
		}
		w = view(d, GF_PARAMS, "16.weight");
		assert_non_null(w);
		assert_int_equal(w->shape[1], 128 * (s / 16) * (s / 16));
		gf_net_destroy(d);
	}
	/* logits and dropout options */
	gf_net *d = build("return require('backbones.dcgan').D{ sigmoid = false, dropout = 0 }", 2);
	char sum[4096];
	gf_net_summary(d, sum, sizeof(sum));
	assert_null(strstr(sum, "sigmoid"));
	gf_net_destroy(d);
}

static void test_conditional(void **state)
{
	(void)state;
	gf_net *g = build("return require('backbones.dcgan').CG{ classes = 10 }", 4);
	assert_int_equal(gf_net_classes(g), 10);
	const gf_view *w = view(g, GF_PARAMS, "label_embedding.weight");
	assert_non_null(w);
	assert_int_equal(w->shape[0], 10);
	assert_int_equal(w->shape[1], 10);
	w = view(g, GF_PARAMS, "2.weight");   /* the first linear takes 100 + 10 */
	assert_non_null(w);
	assert_int_equal(w->shape[1], 110);
	gf_tensor y = run(g, 4);
	assert_int_equal(y.shape[1], 1);
	assert_int_equal(y.shape[2], 32);
	/* labels are required, and checked */
	gf_tensor in;
	gf_net_shapes(g, &in, NULL);
	float z[400] = { 0 };
	in.data = z;
	assert_int_equal(gf_net_forward(g, &in, NULL, GF_TRAIN), GF_EPARAM);
	assert_non_null(strstr(gf_errmsg(), "labels"));
	int32_t bad[4] = { 0, 1, 10, 2 };
	gf_tensor lt = gf_tensor_make(bad, GF_I32, 1, (int64_t[]){ 4 });
	int rc = gf_net_forward(g, &in, &lt, GF_TRAIN);
	assert_int_equal(rc, GF_EPARAM);
	assert_non_null(strstr(gf_errmsg(), "layer 1 (embedding)"));
	gf_net_destroy(g);

	gf_net *d = build("return require('backbones.dcgan').CD{ classes = 10, size = 32, channels = 3 }", 4);
	assert_int_equal(gf_net_classes(d), 10);
	w = view(d, GF_PARAMS, "0.weight");   /* a size x size plane per class */
	assert_int_equal(w->shape[1], 32 * 32);
	w = view(d, GF_PARAMS, "3.weight");   /* the first conv sees channels + 1 */
	assert_int_equal(w->shape[1], 4);
	y = run(d, 4);
	assert_int_equal(y.shape[1], 1);
	gf_net_destroy(d);

	/* the plain networks take no labels */
	gf_net *p = build("return require('backbones.dcgan').G{}", 2);
	assert_int_equal(gf_net_classes(p), 0);
	gf_net_destroy(p);
}

static void test_classifier(void **state)
{
	(void)state;
	gf_net *c = build("return require('backbones.classifier').classifier{ size = 28, classes = 10 }", 8);
	gf_tensor y = run(c, 8);
	assert_int_equal(y.ndim, 2);
	assert_int_equal(y.shape[1], 10);
	gf_tensor f;
	NN_OK(gf_net_node(c, "features", &f));
	assert_int_equal(f.shape[0], 8);
	assert_int_equal(f.shape[1], 128);
	assert_int_equal(gf_net_node(c, "nope", &f), GF_ENOTFOUND);
	/* training step with cross-entropy runs */
	float *dl = calloc(80, sizeof(float)), loss;
	int32_t lab[8] = { 0, 1, 2, 3, 4, 5, 6, 7 };
	gf_tensor lt = gf_tensor_make(lab, GF_I32, 1, (int64_t[]){ 8 });
	NN_OK(gf_loss(be, GF_LOSS_CE, &loss, dl, &y, &lt, 0, 1.0f));
	assert_true(fabsf(loss - logf(10.0f)) < 1.0f);
	NN_OK(gf_net_backward(c, dl, GF_NEED_DW));
	free(dl);
	gf_net_destroy(c);
	c = build("return require('backbones.classifier').classifier{ size = 32, channels = 3, probs = true }", 2);
	y = run(c, 2);
	float s = 0;
	for (int i = 0; i < 10; i++)
		s += ((float *)y.data)[i];
	assert_true(fabsf(s - 1.0f) < 1e-5f);
	gf_net_destroy(c);
}

/* Fusions happen where the table allows, and are visible in the summary. */
static void test_fusion(void **state)
{
	(void)state;
	gf_net *g = build("return require('backbones.dcgan').G{}", 2);
	char sum[4096];
	gf_net_summary(g, sum, sizeof(sum));
	assert_non_null(strstr(sum, "sub-pixel"));
	assert_non_null(strstr(sum, "fused into the batchnorm"));
	double m, e;
	gf_net_flops(g, 64, 0, &m, &e);
	assert_true(e < m / 2);   /* 4 taps instead of 9 in the two big convs */
	gf_net_destroy(g);
	gf_net *u;
	NN_OK(nn_build(&u, be, "return require('backbones.dcgan').G{}", 2, GF_NET_NOFUSE));
	gf_net_summary(u, sum, sizeof(sum));
	assert_null(strstr(sum, "fused"));
	gf_net_flops(u, 64, 0, &m, &e);
	assert_true(m == e);
	gf_net_destroy(u);
	/* a named upsample stays (its output can be asked for) */
	NN_OK(nn_build(&u, be, "return { {'upsample', 2, name = 'up'}, {'conv', 2, 2, 3, 1, 1}, input_shape = {2, 3, 3} }",
	               2, 0));
	gf_net_summary(u, sum, sizeof(sum));
	assert_null(strstr(sum, "fused"));
	gf_net_destroy(u);
}

static void test_init(void **state)
{
	(void)state;
	gf_net *g = build("return require('backbones.dcgan').G{ init = 'dcgan' }", 2);
	size_t np;
	float *p = gf_net_block(g, GF_PARAMS, &np);
	const gf_view *w = view(g, GF_PARAMS, "4.weight"), *b = view(g, GF_PARAMS, "4.bias");
	const gf_view *gm = view(g, GF_PARAMS, "5.weight");
	double s = 0, s2 = 0;
	for (size_t i = 0; i < w->numel; i++) {
		s += p[w->offset + i];
		s2 += (double)p[w->offset + i] * p[w->offset + i];
	}
	assert_true(fabs(s / w->numel) < 1e-3);
	assert_true(fabs(sqrt(s2 / w->numel) - 0.02) < 1e-3);
	for (size_t i = 0; i < b->numel; i++)
		assert_true(p[b->offset + i] == 0.0f);
	s = 0;
	for (size_t i = 0; i < gm->numel; i++)
		s += p[gm->offset + i];
	assert_true(fabs(s / gm->numel - 1.0) < 0.01);
	gf_net_destroy(g);
	/* PyTorch's default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)); batchnorm 1 and 0 */
	g = build("return require('backbones.dcgan').G{}", 2);
	p = gf_net_block(g, GF_PARAMS, &np);
	w = view(g, GF_PARAMS, "4.weight");
	gm = view(g, GF_PARAMS, "5.weight");
	float bound = 1.0f / sqrtf(128 * 9), mx = 0;
	for (size_t i = 0; i < w->numel; i++)
		mx = fabsf(p[w->offset + i]) > mx ? fabsf(p[w->offset + i]) : mx;
	assert_true(mx <= bound && mx > 0.99f * bound);
	for (size_t i = 0; i < gm->numel; i++)
		assert_true(p[gm->offset + i] == 1.0f && p[gm->offset + gm->numel + i] == 0.0f);
	size_t nb;
	float *buf = gf_net_block(g, GF_BUFFERS, &nb);
	const gf_view *rv = view(g, GF_BUFFERS, "2.running_var");
	assert_true(buf[rv->offset] == 1.0f && buf[rv->offset - 1] == 0.0f);
	gf_net_destroy(g);
}

/* ---- bad tables ---- */

static void expect_error(const char *table, int rc, const char *msg)
{
	gf_net *net = NULL;
	char code[1024];
	snprintf(code, sizeof(code), "return %s", table);
	int got = nn_build(&net, be, code, 2, 0);
	if (got != rc || !strstr(gf_errmsg(), msg)) {
		fprintf(stderr, "table %s\n  gave %s: %s\n  wanted %s containing '%s'\n", table, gf_strerror(got),
		        gf_errmsg(), gf_strerror(rc), msg);
		gf_net_destroy(net);
		fail();
	}
	assert_null(net);
}

/* ---- ResNet backbones (sngan.lua, biggan.lua) ---- */

/* Parameter counts of the configurations tests/bench/torch_backbones.py
 * writes with torch.nn from the papers' tables (`torch_backbones.py
 * counts`), and the shapes, at 32x32x1, and BigGAN's 128 architecture
 * with its self-attention at 64 (the networks of the GPU check's biggan
 * row, at ch 8); size 64 and attention build with the images they should
 * make. */
static void test_resnet_backbones(void **state)
{
	(void)state;
	static const struct {
		const char *code;
		size_t params;   /* torch_backbones.py counts */
		int c, h;        /* output image, or 0: D (one value); c = -1: counted, not run (GPU-sized) */
	} cases[] = {
		{ "return require('backbones.sngan').G{ ch = 32, channels = 1 }", 125441, 1, 32 },
		{ "return require('backbones.sngan').D{ ch = 32, channels = 1 }", 66209, 0, 0 },
		{ "return require('backbones.sngan').G{ ch = 32, channels = 1, classes = 10 }", 128897, 1, 32 },
		{ "return require('backbones.sngan').D{ ch = 32, channels = 1, classes = 10 }", 66529, 0, 0 },
		{ "return require('backbones.biggan').G{ ch = 8, channels = 1, classes = 10 }", 138625, 1, 32 },
		{ "return require('backbones.biggan').D{ ch = 8, channels = 1, classes = 10 }", 66529, 0, 0 },
		{ "return require('backbones.sngan').G{ ch = 4, size = 64, attention = 32 }", 0, 3, 64 },
		{ "return require('backbones.sngan').D{ ch = 8, size = 64, attention = 32, augment = 'translation' }", 0, 0, 0 },
		{ "return require('backbones.biggan').G{ ch = 8, size = 128, classes = 5 }", 696340, 3, 128 },
		{ "return require('backbones.biggan').D{ ch = 8, size = 128, classes = 5 }", 602218, 0, 0 },
		{ "return require('backbones.biggan').G{ ch = 2, size = 64, classes = 0 }", 0, 3, 64 },
		/* StyleGAN2 (stylegan2.lua): the CPU width of stylegan2_fashion and the ADA
		 * paper's CIFAR-10 configuration (the defaults). G's counts are those of
		 * StyleGAN2-ADA's own training/networks.py Generator at the same sizes
		 * (mapping 2 layers, one noise strength per synthesis layer); its
		 * conditional embedding FullyConnectedLayer(c, w) has the count of
		 * ganflow's row plus bias */
		{ "return require('backbones.stylegan2').G{ ch = 32, z = 64, w = 64, channels = 1 }", 96587, 1, 32 },
		{ "return require('backbones.stylegan2').D{ ch = 32, channels = 1, mbstd = 4 }", 84609, 0, 0 },
		{ "return require('backbones.stylegan2').G{ ch = 32, z = 64, w = 64, channels = 1, classes = 10 }", 101387, 1,
		  32 },
		{ "return require('backbones.stylegan2').D{ ch = 32, channels = 1, classes = 10, mbstd = 2 }", 94432, 0, 0 },
		{ "return require('backbones.stylegan2').G{}", 19947539, -1, 0 },
		{ "return require('backbones.stylegan2').D{ mbstd = 2 }", 21507073, -1, 0 },
		{ "return require('backbones.stylegan2').G{ classes = 10 }", 20215315, -1, 0 },
		{ "return require('backbones.stylegan2').D{ classes = 10, mbstd = 2 }", 23876096, -1, 0 },
		{ "return require('backbones.stylegan2').G{ ch = 4, z = 8, w = 8, size = 64 }", 0, 3, 64 },
		/* R3GAN (r3gan.lua): the bench's CPU width (widths 64, cardinality 8, 1
		 * block per stage) and the authors' CIFAR-10 preset (the defaults); the
		 * CIFAR counts are also those of R3GAN's own Networks.py (3 channels:
		 * tests/ref/make_nn_refs_r3gan.py prints them) */
		{ "return require('backbones.r3gan').G{ channels = 1, widths = 64, cardinality = 8, blocks = 1 }", 145472, 1, 32 },
		{ "return require('backbones.r3gan').D{ channels = 1, widths = 64, cardinality = 8, blocks = 1 }", 141440, 0, 0 },
		{ "return require('backbones.r3gan').G{ channels = 1, widths = 64, cardinality = 8, blocks = 1, classes = 10 }",
		  150208, 1, 32 },
		{ "return require('backbones.r3gan').D{ channels = 1, widths = 64, cardinality = 8, blocks = 1, classes = 10 }",
		  146112, 0, 0 },
		{ "return require('backbones.r3gan').G{}", 20732160, -1, 0 },
		{ "return require('backbones.r3gan').D{}", 20683776, -1, 0 },
		{ "return require('backbones.r3gan').G{ classes = 10 }", 20781952, -1, 0 },
		{ "return require('backbones.r3gan').D{ classes = 10 }", 21280512, -1, 0 },
		{ "return require('backbones.r3gan').G{ size = 64, widths = {16, 16, 8, 8, 4}, cardinality = {4, 4, 2, 2, 1},"
		  " blocks = {1, 0, 1, 2, 1} }", 0, 3, 64 },
		{ "return require('backbones.r3gan').D{ size = 64, widths = {16, 16, 8, 8, 4}, cardinality = {4, 4, 2, 2, 1},"
		  " blocks = {1, 0, 1, 2, 1}, classes = 3, ada = 'bgc' }", 0, 0, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		gf_net *n = build(cases[i].code, 2);
		size_t np;
		gf_net_block(n, GF_PARAMS, &np);
		if (cases[i].params && np != cases[i].params) {
			fprintf(stderr, "%s: %zu parameters, PyTorch's network has %zu\n", cases[i].code, np, cases[i].params);
			fail();
		}
		if (cases[i].c < 0) {
			gf_net_destroy(n);
			continue;
		}
		gf_tensor out = run(n, 2);
		if (cases[i].c) {
			assert_int_equal(out.ndim, 4);
			assert_int_equal(out.shape[1], cases[i].c);
			assert_int_equal(out.shape[2], cases[i].h);
			assert_int_equal(out.shape[3], cases[i].h);
		} else {
			assert_int_equal(gf_tensor_numel(&out), 2);
		}
		gf_net_destroy(n);
	}
	/* the self-attention is where it was asked for, and only once in D */
	gf_net *g = build("return require('backbones.biggan').G{ ch = 8, size = 128, classes = 5 }", 1);
	const gf_view *gamma = view(g, GF_PARAMS, "attn.gamma");
	assert_non_null(gamma);
	gf_net_destroy(g);
	gf_value v;
	assert_int_equal(gf_lua_eval("return require('backbones.biggan').G{ z = 90, size = 32 }", &v), GF_ELUA);
	assert_non_null(strstr(gf_errmsg(), "z = 90 must split into 4 equal chunks"));
	assert_int_equal(gf_lua_eval("return require('backbones.sngan').D{ size = 48 }", &v), GF_ELUA);
	assert_non_null(strstr(gf_errmsg(), "size must be 32, 64 or 128"));
	assert_int_equal(gf_lua_eval("return require('backbones.sngan').G{ width = 3 }", &v), GF_ELUA);
	assert_non_null(strstr(gf_errmsg(), "unknown option 'width'"));
}

/* R3GAN's G with out = "tanh": the authors' G (same parameters, same
 * initialisation) with a tanh after its last 1x1 conv, pixel for pixel;
 * any other out is refused by name. */
static void test_r3gan_out(void **state)
{
	(void)state;
	const int batch = 2;
	gf_net *lin = build("return require('backbones.r3gan').G{ channels = 1, widths = 16, cardinality = 4, blocks = 1 }",
	                    batch);
	gf_net *th = build("return require('backbones.r3gan').G{ channels = 1, widths = 16, cardinality = 4, blocks = 1,"
	                   " out = 'tanh' }", batch);
	assert_int_equal(nparams(lin), nparams(th));
	gf_tensor in;
	gf_net_shapes(lin, &in, NULL);
	in.shape[0] = batch;
	int64_t nz = gf_tensor_numel(&in);
	float *z = malloc((size_t)nz * sizeof(float));
	for (int64_t i = 0; i < nz; i++)
		z[i] = 8.0f * sinf(0.7f * (float)i + 0.3f);   /* large enough to put pixels past +-1 */
	in.data = z;
	gf_tensor a, b;
	NN_OK(gf_net_forward(lin, &in, NULL, GF_TRAIN));
	NN_OK(gf_net_output(lin, &a));
	NN_OK(gf_net_forward(th, &in, NULL, GF_TRAIN));
	NN_OK(gf_net_output(th, &b));
	assert_int_equal(gf_tensor_numel(&a), gf_tensor_numel(&b));
	assert_int_equal(b.shape[1], 1);
	assert_int_equal(b.shape[2], 32);
	const float *pa = a.data, *pb = b.data;
	float amax = 0;
	for (int64_t i = 0; i < gf_tensor_numel(&a); i++) {
		amax = fmaxf(amax, fabsf(pa[i]));
		assert_true(fabsf(pb[i]) <= 1.0f);
		if (fabsf(pb[i] - tanhf(pa[i])) > 1e-5f) {
			fprintf(stderr, "pixel %lld: tanh G %g, tanh(linear G) %g\n", (long long)i, pb[i], tanhf(pa[i]));
			fail();
		}
	}
	assert_true(amax > 1.0f);   /* the linear G leaves [-1, 1]: the tanh is seen to act */
	free(z);
	gf_net_destroy(lin);
	gf_net_destroy(th);
	gf_value v;
	assert_int_equal(gf_lua_eval("return require('backbones.r3gan').G{ out = 'sigmoid' }", &v), GF_ELUA);
	assert_non_null(strstr(gf_errmsg(), "r3gan.G: out = 'sigmoid': expected \"linear\" (the authors' G) or \"tanh\""));
}

static void test_bad_tables(void **state)
{
	(void)state;
	expect_error("{ {'linear', 4, 4}, {'convolution', 4, 4, 3}, input_shape = {4} }", GF_EPARAM,
	             "layer 2 (convolution): unknown layer type");
	expect_error("{ {'conv', 3, 8}, input_shape = {3, 8, 8} }", GF_EPARAM,
	             "layer 1 (conv): takes 3 to 5 arguments, got 2");
	expect_error("{ {'relu', 0.2}, input_shape = {3} }", GF_EPARAM, "layer 1 (relu): takes 0 arguments, got 1");
	expect_error("{ {'linear', 4}, input_shape = {4} }", GF_EPARAM, "layer 1 (linear): takes 2 arguments, got 1");
	expect_error("{ {'conv', 1, 64, 3, 1, 1}, {'conv', 128, 64, 3, 1, 1}, input_shape = {1, 8, 8} }", GF_ESHAPE,
	             "layer 2 (conv): expects 128 input channels, got 64");
	expect_error("{ {'conv', 1, 4, 3, 1, 1}, {'linear', 256, 2}, input_shape = {1, 8, 8} }", GF_ESHAPE,
	             "layer 2 (linear): expects a flat input of 256 features, got (4, 8, 8) (add a flatten)");
	expect_error("{ {'linear', 10, 4}, input_shape = {12} }", GF_ESHAPE, "layer 1 (linear): expects 10 input features, got 12");
	expect_error("{ {'conv', 1, 4, 3, strid = 2}, input_shape = {1, 8, 8} }", GF_EPARAM,
	             "layer 1 (conv): unknown key 'strid'");
	expect_error("{ {'conv', 1, 4, 3, 2, stride = 2}, input_shape = {1, 8, 8} }", GF_EPARAM, "stride given both");
	expect_error("{ {'conv', 1, 4, 'three'}, input_shape = {1, 8, 8} }", GF_EPARAM,
	             "layer 1 (conv): argument 4 must be an integer, got a string");
	expect_error("{ {'conv', 1, 4, 9}, input_shape = {1, 4, 4} }", GF_ESHAPE, "kernel 9 does not fit");
	expect_error("{ {'linear', 4, 4}, {'concat', with = 'nope'}, input_shape = {4} }", GF_EPARAM,
	             "layer 2 (concat): with = \"nope\" names no earlier layer");
	expect_error("{ {'linear', 4, 4, input = 3}, input_shape = {4} }", GF_EPARAM, "is not an earlier layer");
	expect_error("{ {'linear', 4, 4}, {'concat'}, input_shape = {4} }", GF_EPARAM, "layer 2 (concat): needs with");
	expect_error("{ {'conv', 1, 2, 3, 2, 1}, {'concat', with = 'x'}, input_shape = {1, 4, 4} }", GF_ESHAPE,
	             "layer 2 (concat): cannot concatenate (2, 2, 2) and (1, 4, 4) along the channels");
	expect_error("{ {'reshape', 3, 3}, input_shape = {10} }", GF_ESHAPE, "layer 1 (reshape): cannot reshape (10)");
	expect_error("{ 5, input_shape = {4} }", GF_EPARAM, "layer 1 (?): is a integer");
	expect_error("{ {4, 4}, input_shape = {4} }", GF_EPARAM, "layer 1 (?): has no type name");
	expect_error("{ {'lrelu', -0.1}, input_shape = {4} }", GF_EPARAM, "layer 1 (lrelu): negative slope");
	expect_error("{ {'dropout', 1.0}, input_shape = {4} }", GF_EPARAM, "layer 1 (dropout): p = 1 must be in [0, 1)");
	/* penalty points (a gradient penalty's g at a layer's flat output) */
	expect_error("{ {'linear', 4, 4, name = 'w'}, input_shape = {4}, penalty_at = 'w' }", GF_EPARAM,
	             "network: penalty_at must be a list of 1..");
	expect_error("{ {'linear', 4, 4, name = 'w'}, input_shape = {4}, penalty_at = { 'w', 'ws' } }", GF_EPARAM,
	             "network: penalty_at[2] = \"ws\" names no layer");
	expect_error("{ {'conv', 1, 4, 3, 1, 1, name = 'c'}, {'flatten'}, input_shape = {1, 4, 4}, penalty_at = { 'c' } }",
	             GF_EPARAM, "network: penalty_at[1]: layer c's output is not a flat vector");
	expect_error("{ {'bn', 4, eps = 0}, input_shape = {4} }", GF_EPARAM, "layer 1 (bn): needs eps > 0");
	expect_error("{ {'bn', 3}, input_shape = {4} }", GF_ESHAPE, "layer 1 (bn): expects 3 channels, got 4");
	expect_error("{ {'embedding', 10, 4, input = 'x'}, input_shape = {4} }", GF_ESHAPE,
	             "layer 1 (embedding): expects the labels as input");
	expect_error("{ {'linear', 1, 4, input = 'label'}, input_shape = {4} }", GF_ESHAPE,
	             "layer 1 (linear): cannot take the labels as input");
	expect_error("{ {'linear', 4, 4, name = 'a'}, {'linear', 4, 4, name = 'a'}, input_shape = {4} }", GF_EPARAM,
	             "layer 2 (linear): name \"a\" already used by layer 1");
	expect_error("{ {'linear', 4, 4}, inptu_shape = {4} }", GF_EPARAM, "unknown key 'inptu_shape'");
	expect_error("{ {'linear', 4, 4} }", GF_EPARAM, "no input shape");
	expect_error("{ input_shape = {4} }", GF_EPARAM, "no layers");
	expect_error("{ {'linear', 4, 4, init = 'xavier'}, input_shape = {4} }", GF_EPARAM, "init must be");
	expect_error("{ {'tconv', 2, 2, 3, 2, 1, output_padding = 2}, input_shape = {2, 4, 4} }", GF_EPARAM,
	             "output_padding 2 must be smaller than the stride 2");
	expect_error("{ {'maxpool', 5}, input_shape = {2, 4, 4} }", GF_ESHAPE, "layer 1 (maxpool): window 5 does not fit");
	expect_error("{ {'upsample', 2, mode = 'bilinear'}, input_shape = {2, 4, 4} }", GF_EPARAM, "nearest");
	expect_error("{ {'embedding', 5, 2}, {'embedding', 6, 2, input = 'label'}, input_shape = {1} }", GF_ESHAPE,
	             "layer 2 (embedding): has 6 classes but the network has 5");
	/* cbn and proj */
	expect_error("{ {'cbn', 4}, input_shape = {4, 2, 2} }", GF_EPARAM,
	             "layer 1 (cbn): needs either classes = <count> or cond = <a flat source>");
	expect_error("{ {'linear', 3, 2, name = 'c'}, {'cbn', 3, classes = 4, cond = 'c', input = 'x'}, input_shape = {3} }",
	             GF_EPARAM, "layer 2 (cbn): needs either classes = <count> or cond = <a flat source>, not both");
	expect_error("{ {'cbn', 4, classes = 0}, input_shape = {4} }", GF_EPARAM, "layer 1 (cbn): classes = 0 is out of range");
	expect_error("{ {'cbn', 4, classes = 3, bias = true}, input_shape = {4} }", GF_EPARAM,
	             "layer 1 (cbn): bias = true applies to the cond projections only");
	expect_error("{ {'cbn', 3, classes = 2}, input_shape = {4, 2, 2} }", GF_ESHAPE, "layer 1 (cbn): expects 3 channels, got 4");
	expect_error("{ {'conv', 1, 2, 3, 1, 1, name = 'c'}, {'cbn', 2, cond = 'c'}, input_shape = {1, 4, 4} }", GF_ESHAPE,
	             "layer 2 (cbn): cond must be a flat source (D), got (2, 4, 4) (add a flatten)");
	expect_error("{ {'cbn', 4, cond = 'label'}, input_shape = {4} }", GF_ESHAPE,
	             "layer 1 (cbn): cond must be a flat source of features, not the labels");
	expect_error("{ {'cbn', 4, cond = 'z'}, input_shape = {4} }", GF_EPARAM,
	             "layer 1 (cbn): cond = \"z\" names no earlier layer");
	expect_error("{ {'embedding', 5, 2}, {'cbn', 2, classes = 6}, input_shape = {1} }", GF_ESHAPE,
	             "layer 2 (cbn): has 6 classes but the network has 5");
	expect_error("{ {'linear', 4, 1}, {'proj', 3, 4}, input_shape = {4} }", GF_EPARAM, "layer 2 (proj): needs with");
	expect_error("{ {'linear', 4, 1}, {'proj', 3, with = 'x'}, input_shape = {4} }", GF_EPARAM,
	             "layer 2 (proj): needs classes and dim");
	expect_error("{ {'linear', 4, 2}, {'proj', 3, 4, with = 'x'}, input_shape = {4} }", GF_ESHAPE,
	             "layer 2 (proj): expects the unconditional output (1) as input, got (2)");
	expect_error("{ {'linear', 4, 1}, {'proj', 3, 5, with = 'x'}, input_shape = {4} }", GF_ESHAPE,
	             "layer 2 (proj): expects with = features (5), got (4)");
	expect_error("{ {'linear', 4, 1}, {'proj', 3, 4, with = 'label'}, input_shape = {4} }", GF_ESHAPE,
	             "layer 2 (proj): with must be the features, not the labels");
	expect_error("{ {'bn', 4, classes = 3}, input_shape = {4} }", GF_EPARAM, "layer 1 (bn): unknown key 'classes'");
	expect_error("{ {'conv', 3, 30, 1}, {'attention', 30}, input_shape = {3, 8, 8} }", GF_EPARAM,
	             "layer 2 (attention): channels 30 is not a multiple of 8");
	expect_error("{ {'attention', 16}, input_shape = {8, 8, 8} }", GF_ESHAPE,
	             "layer 1 (attention): expects 16 input channels, got 8");
	expect_error("{ {'attention', 8}, input_shape = {8, 5, 4} }", GF_ESHAPE,
	             "layer 1 (attention): input (8, 5, 4): height and width must be even (2x2 max-pool)");
	expect_error("{ {'attention', 8}, input_shape = {8} }", GF_ESHAPE, "layer 1 (attention): expects an image");
	expect_error("{ {'attention', 8, sn = 1}, input_shape = {8, 4, 4} }", GF_EPARAM,
	             "layer 1 (attention): sn must be true or false");
	expect_error("{ {'attention'}, input_shape = {8, 4, 4} }", GF_EPARAM,
	             "layer 1 (attention): takes 1 argument");

	/* a backbone option that does not exist is a Lua error naming it */
	gf_value v;
	assert_int_equal(gf_lua_eval("return require('backbones.dcgan').G{ zdim = 100 }", &v), GF_ELUA);
	assert_non_null(strstr(gf_errmsg(), "unknown option 'zdim'"));
	assert_int_equal(gf_lua_eval("return require('backbones.dcgan').D{ size = 24 }", &v), GF_ELUA);
	assert_non_null(strstr(gf_errmsg(), "multiple of 16"));
}

/* Every alias in docs/nn.md builds its canonical kind (layers/registry.c),
 * which the summary names. */
static void test_aliases(void **state)
{
	(void)state;
	static const struct {
		const char *entry, *input, *type;
	} cases[] = {
		{ "{'conv2d', 2, 2, 3}", "{2, 4, 4}", "conv" },
		{ "{'deconv', 2, 2, 3}", "{2, 4, 4}", "tconv" },
		{ "{'convtranspose', 2, 2, 3}", "{2, 4, 4}", "tconv" },
		{ "{'conv_transpose', 2, 2, 3}", "{2, 4, 4}", "tconv" },
		{ "{'batchnorm', 2}", "{2, 4, 4}", "bn" },
		{ "{'bn1d', 2}", "{2}", "bn" },
		{ "{'bn2d', 2}", "{2, 4, 4}", "bn" },
		{ "{'leaky_relu', 0.2}", "{4}", "lrelu" },
		{ "{'leakyrelu'}", "{4}", "lrelu" },
		{ "{'view', 2, 2}", "{4}", "reshape" },
		{ "{'embed', 3, 4}", "{4}", "embedding" },
		{ "{'cat', with = 'x'}", "{4}", "concat" },
		{ "{'ccbn', 2, classes = 3}", "{2, 4, 4}", "cbn" },
		{ "{'attn', 8}", "{8, 4, 4}", "attention" },
		{ "{'self_attention', 8}", "{8, 4, 4}", "attention" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char code[256], sum[512], want[64];
		snprintf(code, sizeof(code), "return { %s, input_shape = %s }", cases[i].entry, cases[i].input);
		gf_net *net = build(code, 2);
		gf_net_summary(net, sum, sizeof(sum));
		snprintf(want, sizeof(want), "  1 %-10s", cases[i].type);
		if (strncmp(sum, want, strlen(want)) != 0) {
			fprintf(stderr, "%s: summary '%s', wanted type %s\n", cases[i].entry, sum, cases[i].type);
			fail();
		}
		gf_net_destroy(net);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dcgan_shapes),
		cmocka_unit_test(test_conditional),
		cmocka_unit_test(test_classifier),
		cmocka_unit_test(test_fusion),
		cmocka_unit_test(test_init),
		cmocka_unit_test(test_resnet_backbones),
		cmocka_unit_test(test_r3gan_out),
		cmocka_unit_test(test_bad_tables),
		cmocka_unit_test(test_aliases),
		cmocka_unit_test(test_pix2pix),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
