/* The double backward (gf_net_backward2): the gradient of a penalty on the
 * input gradient, for every layer kind that has one.
 *
 *  - finite differences: P = 1/2 sum (r . g)^2-free form P = 1/2 |g|^2 with
 *    g = d<w, D(x)>/dx (w a fixed random output weighting), computed by the
 *    engine at perturbed parameters and inputs (central differences, sums in
 *    double), against gf_net_backward2's dP/dw and dP/dx;
 *  - closed form: a two-layer convolutional D whose R1 gradient is written
 *    out by hand with loops in double;
 *  - the pieces of the API: refusals (a kind without a double backward, no
 *    kept input gradient), an output gradient walked in the same pass,
 *    GF_ACCUMULATE. The PyTorch references are test_nn_ref_dbwd.c's.
 *
 * Every forward runs GF_TRAIN | GF_FREEZE_STATS with the network's
 * generator reset first, so dropout masks, DiffAugment's draws and the
 * spectral norms' u, v are the same in each (as test_nn_gradcheck). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "test_nn_util.h"

#define SAMPLES 16   /* entries checked per tensor */

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

struct probe {
	gf_net *net;
	gf_tensor x, labels;
	float *w;        /* (output numel) weighting of the outputs: the seed */
	size_t nx, ny;
	gf_rng rng0;
};

static void forward(struct probe *p)
{
	*gf_net_rng(p->net) = p->rng0;
	NN_OK(gf_net_forward(p->net, &p->x, p->labels.data ? &p->labels : NULL, GF_TRAIN | GF_FREEZE_STATS));
}

/* g = d<w, D(x)>/dx; returns P = 1/2 |g|^2 (in double) and leaves g in the net. */
static double penalty(struct probe *p)
{
	forward(p);
	NN_OK(gf_net_backward(p->net, p->w, GF_NEED_DX));
	gf_tensor dx;
	NN_OK(gf_net_dx(p->net, &dx));
	const float *g = dx.data;
	double s = 0;
	for (size_t i = 0; i < p->nx; i++)
		s += (double)g[i] * g[i];
	return 0.5 * s;
}

static double numeric(struct probe *p, float *slot, float h)
{
	float keep = *slot;
	*slot = keep + h;
	double lp = penalty(p);
	*slot = keep - h;
	double lm = penalty(p);
	*slot = keep;
	return (lp - lm) / (2.0 * h);
}

struct tally {
	double num2, diff2;
	int n;
};

static void add(struct tally *t, double a, double n)
{
	t->num2 += n * n;
	t->diff2 += (a - n) * (a - n);
	t->n++;
}

static int verdict(const char *what, const struct tally *t, double tol)
{
	double rel = sqrt(t->diff2) / (sqrt(t->num2) + 1e-12);
	if (getenv("GC_VERBOSE"))
		fprintf(stderr, "  %s: %.3g over %d\n", what, rel, t->n);
	if (t->n == 0 || rel > tol) {
		fprintf(stderr, "%s: relative error %.3g over %d samples\n", what, rel, t->n);
		return 0;
	}
	return 1;
}

static void build(struct probe *p, const char *code, int batch, unsigned flags, int classes, int32_t *lab)
{
	memset(p, 0, sizeof(*p));
	NN_OK(nn_build(&p->net, be, code, batch, flags));
	gf_rng init = { 77, 0, 0 };
	NN_OK(gf_net_init(p->net, &init));
	size_t np;
	float *par = gf_net_block(p->net, GF_PARAMS, &np);
	float *noise = malloc((np ? np : 1) * sizeof(float));
	gf_rng_normal(&init, noise, np, 0.0f, 0.3f);
	for (size_t i = 0; i < np; i++)
		par[i] += noise[i];
	free(noise);
	gf_tensor in, out;
	gf_net_shapes(p->net, &in, &out);
	in.shape[0] = batch;
	out.shape[0] = batch;
	p->nx = (size_t)gf_tensor_numel(&in);
	p->ny = (size_t)gf_tensor_numel(&out);
	float *x = malloc(p->nx * sizeof(float));
	gf_rng_normal(&init, x, p->nx, 0.0f, 1.0f);
	in.data = x;
	p->x = in;
	if (classes) {
		for (int i = 0; i < batch; i++)
			lab[i] = (i * 7 + 3) % classes;
		p->labels = gf_tensor_make(lab, GF_I32, 1, (int64_t[]){ batch });
	}
	p->w = malloc(p->ny * sizeof(float));
	gf_rng_normal(&init, p->w, p->ny, 0.0f, 1.0f);
	gf_rng_init(&p->rng0, 5, 9);
	/* power iterations first: sn's u and v near the singular vectors */
	for (int i = 0; i < 20; i++)
		NN_OK(gf_net_forward(p->net, &p->x, p->labels.data ? &p->labels : NULL, GF_TRAIN));
}

static void release(struct probe *p)
{
	free(p->x.data);
	free(p->w);
	gf_net_destroy(p->net);
}

/* dP/dw and dP/dx from gf_net_backward2 against central differences. */
static void dbwd_check(const char *name, const char *code, int batch, unsigned flags, int classes, float h, double tol)
{
	struct probe p;
	int32_t lab[64];
	build(&p, code, batch, flags, classes, lab);
	NN_OK(gf_net_check_backward2(p.net));
	size_t np;
	float *par = gf_net_block(p.net, GF_PARAMS, &np);

	/* analytic: t = dP/dg = g */
	penalty(&p);
	gf_tensor dxt;
	NN_OK(gf_net_dx(p.net, &dxt));
	float *t = malloc(p.nx * sizeof(float)), *dpx = malloc(p.nx * sizeof(float));
	memcpy(t, dxt.data, p.nx * sizeof(float));
	NN_OK(gf_net_backward2(p.net, t, NULL, GF_NEED_DW | GF_NEED_DX));
	NN_OK(gf_net_dx(p.net, &dxt));
	memcpy(dpx, dxt.data, p.nx * sizeof(float));
	float *g = malloc((np ? np : 1) * sizeof(float));
	memcpy(g, gf_net_block(p.net, GF_GRADS, NULL), np * sizeof(float));

	gf_rng pick = { 3, 1, 0 };
	char what[160];
	struct tally tx = { 0 };
	float *x = p.x.data;
	for (int s = 0; s < SAMPLES; s++) {
		size_t i = (size_t)(gf_rng_u64(&pick) % p.nx);
		double nu = numeric(&p, &x[i], h);
		if (getenv("GC_DEBUG"))
			fprintf(stderr, "    x[%zu]: analytic %g numeric %g\n", i, dpx[i], nu);
		add(&tx, dpx[i], nu);
	}
	snprintf(what, sizeof(what), "%s: dP/dx", name);
	assert_true(verdict(what, &tx, tol));
	size_t nv;
	const gf_view *v = gf_net_views(p.net, GF_PARAMS, &nv);
	double gmax = 0;
	for (size_t i = 0; i < np; i++)
		gmax = fabs(g[i]) > gmax ? fabs(g[i]) : gmax;
	for (size_t k = 0; k < nv; k++) {
		struct tally tw = { 0 };
		int count = v[k].numel < SAMPLES ? (int)v[k].numel : SAMPLES;
		double amax = 0;
		for (int s = 0; s < count; s++) {
			size_t i = v[k].offset + (count == (int)v[k].numel ? (size_t)s : (size_t)(gf_rng_u64(&pick) % v[k].numel));
			add(&tw, g[i], numeric(&p, &par[i], h));
		}
		for (size_t i = 0; i < v[k].numel; i++)
			amax = fabs(g[v[k].offset + i]) > amax ? fabs(g[v[k].offset + i]) : amax;
		snprintf(what, sizeof(what), "%s: dP/d%s", name, v[k].name);
		/* a parameter P does not depend on (a bias: g is its forward's
		 * derivative, which a bias does not enter): both are noise */
		if (amax <= 1e-6 * gmax && sqrt(tw.num2 / tw.n) <= 1e-4 * gmax) {
			if (getenv("GC_VERBOSE"))
				fprintf(stderr, "  %s: zero (|a| %.2g, |n| %.2g)\n", what, amax, sqrt(tw.num2 / tw.n));
			continue;
		}
		assert_true(verdict(what, &tw, tol));
	}
	free(t);
	free(dpx);
	free(g);
	release(&p);
}

#define CASE(fn, name, code, batch, flags, classes)                 \
	static void fn(void **state)                                 \
	{                                                            \
		(void)state;                                         \
		dbwd_check(name, code, batch, flags, classes, 1e-2f, 1e-2); \
	}

/* Networks with kinks (ReLU, LeakyReLU, max pooling) have a piecewise
 * constant Jacobian: a perturbation that moves a unit across a kink makes
 * a jump, so these take a smaller step and a looser bound. */
#define KINKY(fn, name, code, batch, flags, classes)                \
	static void fn(void **state)                                 \
	{                                                            \
		(void)state;                                         \
		dbwd_check(name, code, batch, flags, classes, 1e-3f, 5e-2); \
	}

CASE(test_linear_tanh, "linear + tanh", "return { {'linear', 6, 5}, {'tanh'}, {'linear', 5, 2}, input_shape = {6} }", 3, 0, 0)
CASE(test_sigmoid, "sigmoid", "return { {'linear', 4, 5, bias = false}, {'sigmoid'}, {'linear', 5, 1}, {'sigmoid'}, input_shape = {4} }",
     3, 0, 0)
KINKY(test_lrelu_relu, "lrelu + relu",
      "return { {'linear', 5, 8}, {'lrelu', 0.2}, {'linear', 8, 6}, {'relu'}, {'linear', 6, 2}, input_shape = {5} }", 3, 0, 0)
CASE(test_conv, "conv 3x3 + tanh", "return { {'conv', 3, 6, 3, 1, 1}, {'tanh'}, {'conv', 6, 2, 3, 2, 1}, input_shape = {3, 5, 5} }",
     2, 0, 0)
CASE(test_conv_strides, "conv strides/padding/rect",
     "return { {'conv', 2, 4, 5, 2, 2, bias = false}, {'tanh'}, {'conv', 4, 3, 1, kw = 3, pw = 1}, {'sigmoid'},"
     " input_shape = {2, 8, 7} }", 2, 0, 0)
CASE(test_conv_winograd, "conv 3x3 (Winograd path)",
     "return { {'conv', 8, 8, 3, 1, 1}, {'tanh'}, {'conv', 8, 2, 3, 1, 1}, input_shape = {8, 12, 12} }", 2, 0, 0)
CASE(test_tconv, "tconv", "return { {'tconv', 3, 4, 3, 2, 1, output_padding = 1}, {'tanh'}, input_shape = {3, 4, 4} }", 2, 0, 0)
/* grouped convolutions (generic, depthwise direct, Winograd, sn) and the
 * grouped transposed conv: J t and the weight term through the backend's
 * grouped ops; R3GAN's bases and residual block */
CASE(test_conv_groups, "conv groups (generic, depthwise, sn)",
     "return { {'conv', 6, 9, 3, 2, 1, groups = 3}, {'tanh'}, {'conv', 9, 9, 3, 1, 1, groups = 9}, {'sigmoid'},"
     " {'conv', 9, 6, 1, groups = 3, sn = true}, {'tanh'}, input_shape = {6, 7, 6} }", 2, 0, 0)
CASE(test_conv_groups_winograd, "conv groups 2 (Winograd path)",
     "return { {'conv', 16, 16, 3, 1, 1, groups = 2}, {'tanh'}, {'conv', 16, 2, 3, 1, 1}, input_shape = {16, 12, 12} }", 2, 0,
     0)
CASE(test_tconv_groups, "tconv groups",
     "return { {'tconv', 4, 6, 3, 2, 1, output_padding = 1, groups = 2}, {'tanh'}, input_shape = {4, 3, 3} }", 2, 0, 0)
CASE(test_r3gan_bases, "R3GAN's generative basis (path length form) and discriminative basis",
     "return { {'linear', 5, 6, bias = false}, {'reshape', 6, 1, 1}, {'tconv', 6, 6, 4, groups = 6, bias = false}, {'tanh'},"
     " {'conv', 6, 6, 4, groups = 6, bias = false}, {'flatten'}, {'linear', 6, 2, bias = false}, {'tanh'},"
     " input_shape = {5} }", 3, 0, 0)
/* R3GAN's residual block with tanh and sigmoid after its biases for the
 * LeakyReLUs (piecewise linear: dP/dx is 0 between kinks and jumps across
 * one; test_bias_act has them, test_nn_ref_r3gan the block itself) */
CASE(test_r3gan_block, "R3GAN's residual block (smooth) + fir down",
     "return { {'conv', 4, 8, 1, bias = false}, {'bias_act', 8, act = 'linear'}, {'tanh'},"
     " {'conv', 8, 8, 3, 1, 1, groups = 4, bias = false}, {'bias_act', 8, act = 'linear'}, {'sigmoid'},"
     " {'conv', 8, 4, 1, bias = false}, {'add', with = 'x'}, {'fir', down = 2}, {'flatten'}, {'linear', 16, 1},"
     " input_shape = {4, 4, 4} }", 3, 0, 0)
CASE(test_upconv_fused, "upsample + conv (sub-pixel)",
     "return { {'upsample', 2}, {'conv', 3, 5, 3, 1, 1}, {'tanh'}, input_shape = {3, 4, 3} }", 2, 0, 0)
CASE(test_upconv_unfused, "upsample + conv (unfused)",
     "return { {'upsample', 2}, {'conv', 3, 5, 3, 1, 1}, {'tanh'}, input_shape = {3, 4, 3} }", 2, GF_NET_NOFUSE, 0)
CASE(test_bn2d, "bn2d", "return { {'conv', 2, 3, 3, 1, 1}, {'bn', 3, eps = 0.8}, {'tanh'}, input_shape = {2, 4, 4} }", 4, 0, 0)
CASE(test_bn1d, "bn1d", "return { {'linear', 4, 6}, {'bn', 6}, {'tanh'}, {'linear', 6, 2}, input_shape = {4} }", 5, 0, 0)
CASE(test_bn_noaffine, "bn no affine", "return { {'bn', 3, affine = false}, {'tanh'}, input_shape = {3, 3, 3} }", 3, 0, 0)
KINKY(test_bn_lrelu_fused, "bn + lrelu (fused)",
      "return { {'conv', 2, 3, 3, 1, 1}, {'bn', 3}, {'lrelu', 0.2}, {'conv', 3, 2, 3}, input_shape = {2, 4, 4} }", 3, 0, 0)
KINKY(test_bn_relu_unfused, "bn + relu (unfused)",
      "return { {'linear', 3, 4}, {'bn', 4}, {'relu'}, {'linear', 4, 3}, {'tanh'}, input_shape = {3} }", 6, GF_NET_NOFUSE, 0)
CASE(test_dropout, "dropout", "return { {'linear', 5, 8}, {'dropout', 0.3}, {'tanh'}, input_shape = {5} }", 4, 0, 0)
CASE(test_dropout2d, "dropout2d", "return { {'conv', 2, 4, 3, 1, 1}, {'dropout2d', 0.5}, {'tanh'}, input_shape = {2, 3, 3} }",
     3, 0, 0)
CASE(test_reshape, "flatten/reshape",
     "return { {'conv', 2, 3, 3, 2, 1}, {'tanh'}, {'flatten'}, {'linear', 12, 6}, {'reshape', 2, 3}, {'bn', 2},"
     " {'sigmoid'}, input_shape = {2, 4, 4} }", 3, 0, 0)
KINKY(test_maxpool, "maxpool", "return { {'conv', 2, 3, 3, 1, 1}, {'tanh'}, {'maxpool', 3, 2, 1}, {'sigmoid'}, input_shape = {2, 5, 5} }",
      2, 0, 0)
CASE(test_avgpool, "avgpool", "return { {'conv', 2, 3, 3, 1, 1}, {'tanh'}, {'avgpool', 2}, {'sigmoid'}, input_shape = {2, 5, 6} }", 2,
     0, 0)
CASE(test_avgpool_pad, "avgpool pad, count_include_pad = false",
     "return { {'tanh'}, {'avgpool', 3, 2, 1, count_include_pad = false}, {'sigmoid'}, input_shape = {2, 5, 5} }", 2, 0, 0)
CASE(test_upsample, "upsample x3", "return { {'tanh'}, {'upsample', 3}, {'conv', 2, 2, 3}, {'sigmoid'}, input_shape = {2, 3, 2} }",
     2, 0, 0)
CASE(test_add, "add (residual)",
     "return { {'conv', 2, 2, 3, 1, 1}, {'tanh'}, {'add', with = 'x'}, {'sigmoid'}, input_shape = {2, 4, 4} }", 2, 0, 0)
CASE(test_concat_split, "concat + split",
     "return { {'linear', 4, 8, name = 'z'}, {'split', 0, 3}, {'tanh', name = 'a'}, {'slice', from = 3, to = 8, input = 'z'},"
     " {'sigmoid'}, {'concat', with = 'a'}, {'linear', 8, 2}, {'tanh'}, input_shape = {4} }", 3, 0, 0)
CASE(test_gsp, "gsp", "return { {'conv', 2, 3, 3, 1, 1}, {'tanh'}, {'gsp'}, {'linear', 3, 2}, {'tanh'}, input_shape = {2, 4, 4} }", 2, 0,
     0)
CASE(test_instancenorm, "instancenorm affine",
     "return { {'conv', 3, 3, 3, 1, 1}, {'instancenorm', 3, affine = true}, {'tanh'}, {'conv', 3, 2, 1}, input_shape = {3, 4, 4} }",
     3, 0, 0)
CASE(test_instancenorm_plain, "instancenorm", "return { {'instancenorm', 2}, {'tanh'}, input_shape = {2, 3, 5} }", 2, 0, 0)
CASE(test_sn, "sn linear + conv + tconv",
     "return { {'conv', 2, 3, 3, 2, 1, sn = true}, {'tanh'}, {'tconv', 3, 2, 3, 1, 1, sn = true}, {'sigmoid'}, {'flatten'},"
     " {'linear', 8, 4, sn = true}, {'tanh'}, input_shape = {2, 4, 4} }", 2, 0, 0)
CASE(test_label_plane, "embedding label plane + concat (CD)",
     "return { {'embedding', 3, 16, input = 'label', sn = true}, {'reshape', 1, 4, 4, name = 'plane'},"
     " {'concat', input = 'x', with = 'plane'}, {'conv', 3, 4, 3, 2, 1}, {'tanh'}, {'flatten'}, {'linear', 16, 1},"
     " input_shape = {2, 4, 4} }", 3, 0, 3)
CASE(test_proj, "proj (SNGAN head)",
     "return { {'conv', 2, 3, 3, 1, 1}, {'tanh'}, {'gsp', name = 'h'}, {'linear', 3, 1}, {'proj', 4, 3, with = 'h'},"
     " {'sigmoid'}, input_shape = {2, 4, 4} }", 4, 0, 4)
CASE(test_proj_sn, "proj sn",
     "return { {'tanh', name = 'h'}, {'linear', 5, 1, sn = true}, {'proj', 3, 5, with = 'h', sn = true}, {'tanh'},"
     " input_shape = {5} }", 4, 0, 3)
CASE(test_diffaugment, "diffaugment",
     "return { {'diffaugment', 'color,translation,cutout'}, {'conv', 3, 2, 3, 1, 1}, {'tanh'}, input_shape = {3, 6, 6} }", 3, 0, 0)
/* R1 through StyleGAN2-ADA's augmentation (every transform on): the
 * gradient is taken at the image before augmentation, as StyleGAN2-ADA's */
CASE(test_ada, "ada", "return { {'ada', 'bgc', p = 1}, {'conv', 3, 2, 3, 1, 1}, {'tanh'}, {'conv', 2, 1, 3}, input_shape = {3, 6, 5} }",
     3, 0, 0)
CASE(test_ada_grey, "ada grey", "return { {'ada', 'bgc', p = 0.8}, {'conv', 1, 2, 3, 1, 1}, {'tanh'}, input_shape = {1, 6, 6} }", 4, 0, 0)
CASE(test_mbstd, "mbstd", "return { {'conv', 2, 4, 3, 1, 1}, {'mbstd', 2, 1}, {'conv', 5, 2, 3, 1, 1}, {'tanh'}, input_shape = {2, 3, 3} }",
     4, 0, 0)
CASE(test_mbstd_f2, "mbstd channels 2", "return { {'mbstd', group = 4, channels = 2}, {'tanh'}, input_shape = {4, 2, 3} }", 3, 0,
     0)
/* StyleGAN2's D-side kinds (and noise, const): eqlr, fir, bias_act */
CASE(test_eqlr_fir, "eqlr conv + fir blur + stride-2 conv + fir down + eqlr linear",
     "return { {'conv', 2, 3, 3, 1, 1, eqlr = true}, {'tanh'}, {'fir', pad = 2}, {'conv', 3, 3, 3, 2, 0, eqlr = true, lr_mul = 0.5},"
     " {'tanh'}, {'fir', down = 2}, {'flatten'}, {'linear', 3, 1, eqlr = true, lr_mul = 0.2}, {'tanh'}, input_shape = {2, 6, 6} }",
     2, 0, 0)
CASE(test_fir_up, "fir up + conv", "return { {'fir', up = 2}, {'conv', 2, 2, 3, 1, 1, eqlr = true}, {'tanh'}, input_shape = {2, 3, 3} }",
     2, 0, 0)
KINKY(test_bias_act, "bias_act lrelu gain clamp",
      "return { {'conv', 2, 3, 3, 1, 1, eqlr = true, bias = false}, {'bias_act', 3, clamp = 0.8}, {'conv', 3, 2, 3, 1, 1},"
      " {'tanh'}, input_shape = {2, 4, 4} }", 2, 0, 0)
CASE(test_noise_const, "noise random + const (J t = t)",
     "return { {'tanh'}, {'noise', 2, mode = 'random'}, {'conv', 2, 2, 3, 1, 1}, {'tanh', name = 'h'}, {'const', 2, 3, 3, input = 'x'},"
     " {'add', with = 'h'}, {'sigmoid'}, input_shape = {2, 3, 3} }", 2, 0, 0)
CASE(test_modconv, "modconv 3x3 demod, up 2 + fir, 1x1 toRGB (the path length's G)",
     "return { {'linear', 4, 6, eqlr = true, name = 'w'}, {'tanh', name = 'wt'}, {'linear', 6, 3, eqlr = true, bias_init = 1,"
     " name = 's0'}, {'const', 3, 3, 3, input = 'x'}, {'modconv', 3, 4, 3, with = 's0'}, {'noise', 4, mode = 'random'},"
     " {'tanh', name = 'h'}, {'linear', 6, 4, eqlr = true, bias_init = 1, input = 'wt', name = 's1'},"
     " {'modconv', 4, 2, 3, with = 's1', up = 2, input = 'h'}, {'fir', pad = 1, gain = 4}, {'tanh', name = 'h2'},"
     " {'linear', 6, 2, eqlr = true, bias_init = 1, input = 'wt', name = 's2'},"
     " {'modconv', 2, 3, 1, with = 's2', demod = false, input = 'h2'}, input_shape = {4} }", 3, 0, 0)
/* dot: both inputs from x (its second-order terms), and StyleGAN2 D's
 * cmap head (the label's side has no tangent) */
CASE(test_dot, "dot (bilinear in x)",
     "return { {'linear', 5, 4, name = 'a'}, {'linear', 5, 4, input = 'x'}, {'tanh', name = 'b'},"
     " {'dot', input = 'a', with = 'b', scale = 0.5}, {'tanh'}, input_shape = {5} }", 3, 0, 0)
CASE(test_dot_cmap, "dot with the label's mapping (cmap)",
     "return { {'conv', 2, 3, 3, 1, 1}, {'tanh'}, {'flatten'}, {'linear', 48, 4, name = 'o'}, {'embedding', 3, 4},"
     " {'bias_act', 4, act = 'linear', lr_mul = 1.7}, {'norm2'}, {'linear', 4, 4, eqlr = true, lr_mul = 0.01}, {'tanh', name = 'c'},"
     " {'dot', input = 'o', with = 'c', scale = 0.5}, input_shape = {2, 4, 4} }", 3, 0, 3)
/* DC-GAN's G (batchnorm on 2x2 planes of 3 samples, sub-pixel
 * convolutions) with tanh for its LeakyReLUs: with them, a difference step
 * of z moves units across the kinks of many of its 512 LeakyReLUs at once,
 * each a jump of the input gradient */
CASE(test_g_smooth, "DC-GAN G's layers, tanh for lrelu",
     "return { {'linear', 6, 32}, {'reshape', 8, 2, 2}, {'bn', 8}, {'upsample', 2}, {'conv', 8, 8, 3, 1, 1}, {'bn', 8, eps = 0.8},"
     " {'tanh'}, {'upsample', 2}, {'conv', 8, 4, 3, 1, 1}, {'bn', 4, eps = 0.8}, {'tanh'}, {'conv', 4, 2, 3, 1, 1}, {'tanh'},"
     " input_shape = {6} }", 3, 0, 0)
KINKY(test_dcgan_d, "DC-GAN D (size 16)", "return require('backbones.dcgan').D{ size = 16, channels = 2 }", 3, 0, 0)
/* SNGAN's D kinds (spectral norm, the optimized block's shortcut, avgpool,
 * add, gsp, the projection head) with tanh for its ReLUs: a ReLU network's
 * input gradient is piecewise constant, dP/dx is 0 between kinks and a
 * difference step across one jumps (test_lrelu_relu covers ReLU itself) */
CASE(test_sngan_d_smooth, "SNGAN D's kinds, tanh for relu",
     "return { {'conv', 2, 4, 3, 1, 1, sn = true}, {'tanh'}, {'conv', 4, 4, 3, 1, 1, sn = true}, {'avgpool', 2, name = 'r'},"
     " {'avgpool', 2, input = 'x'}, {'conv', 2, 4, 1, sn = true}, {'add', with = 'r'}, {'tanh'}, {'gsp', name = 'h'},"
     " {'linear', 4, 1, sn = true}, {'proj', 3, 4, with = 'h', sn = true}, input_shape = {2, 6, 6} }", 3, 0, 3)

/* ---- R1 of a two-layer convolutional D in closed form ----
 * D(x) = <W2, lrelu(conv1(x))> + b2, conv1 3x3 stride 2 pad 1 (C -> K),
 * the second layer a conv whose kernel covers its whole input (one
 * output). With m = lrelu'(conv1(x)) (1 or the slope) and d1 = m W2 the
 * input gradient is g = conv1^T(d1), and for P = gamma/2 mean_b |g_b|^2:
 *   dP/dW1[o][c][ky][kx] = gamma/B sum_b sum_(oy,ox) d1_b[o][oy][ox] g_b[c][2oy-1+ky][2ox-1+kx]
 *   dP/dW2[o][oy][ox]    = gamma/B sum_b m_b[o][oy][ox] conv1(g_b)[o][oy][ox]
 * and 0 for both biases: loops in double below, against the engine's R1
 * exactly as d_step computes it (seed ones, t = gamma g / B). */
enum { CB = 3, CC = 2, CH = 6, CW = 5, CK = 3, CHO = 3, CWO = 3 };

static double conv1_at(const float *w1, const double *x, int o, int oy, int ox)
{
	double s = 0;
	for (int c = 0; c < CC; c++)
		for (int ky = 0; ky < 3; ky++)
			for (int kx = 0; kx < 3; kx++) {
				int iy = 2 * oy - 1 + ky, ix = 2 * ox - 1 + kx;
				if (iy >= 0 && iy < CH && ix >= 0 && ix < CW)
					s += (double)w1[((o * CC + c) * 3 + ky) * 3 + kx] * x[(c * CH + iy) * CW + ix];
			}
	return s;
}

static void test_r1_closed_form(void **state)
{
	(void)state;
	const float gamma = 10.0f, slope = 0.2f;
	gf_net *net;
	NN_OK(nn_build(&net, be,
	               "return { {'conv', 2, 3, 3, 2, 1}, {'lrelu', 0.2}, {'conv', 3, 1, 3, kw = 3},"
	               " input_shape = {2, 6, 5} }",
	               CB, 0));
	gf_rng init = { 11, 0, 0 };
	NN_OK(gf_net_init(net, &init));
	size_t np;
	const float *par = gf_net_block(net, GF_PARAMS, &np);
	const float *w1 = par, *b1 = w1 + CK * CC * 9, *w2 = b1 + CK;
	enum { NX = CB * CC * CH * CW };
	float x[NX], ones[CB], t[NX];
	gf_rng_normal(&init, x, NX, 0.0f, 1.0f);
	for (int b = 0; b < CB; b++)
		ones[b] = 1.0f;
	gf_tensor xt = gf_tensor_make(x, GF_F32, 4, (int64_t[]){ CB, CC, CH, CW });

	/* the engine */
	NN_OK(gf_net_forward(net, &xt, NULL, GF_TRAIN));
	NN_OK(gf_net_backward(net, ones, GF_NEED_DX));
	gf_tensor dx;
	NN_OK(gf_net_dx(net, &dx));
	double p_engine = 0;
	for (int i = 0; i < NX; i++) {
		float g = ((const float *)dx.data)[i];
		p_engine += 0.5 * gamma * (double)g * g / CB;
		t[i] = gamma * g / CB;
	}
	NN_OK(gf_net_backward2(net, t, NULL, GF_NEED_DW));
	const float *grad = gf_net_block(net, GF_GRADS, NULL);

	/* by hand */
	double dw1[CK * CC * 9] = { 0 }, dw2[CK * CHO * CWO] = { 0 }, p_hand = 0;
	for (int b = 0; b < CB; b++) {
		double xb[CC * CH * CW], m[CK * CHO * CWO], d1[CK * CHO * CWO], g[CC * CH * CW] = { 0 };
		for (int i = 0; i < CC * CH * CW; i++)
			xb[i] = x[b * CC * CH * CW + i];
		for (int o = 0; o < CK; o++)
			for (int oy = 0; oy < CHO; oy++)
				for (int ox = 0; ox < CWO; ox++) {
					int q = (o * CHO + oy) * CWO + ox;
					m[q] = conv1_at(w1, xb, o, oy, ox) + b1[o] > 0 ? 1.0 : slope;
					d1[q] = m[q] * w2[q];
				}
		for (int o = 0; o < CK; o++)
			for (int c = 0; c < CC; c++)
				for (int ky = 0; ky < 3; ky++)
					for (int kx = 0; kx < 3; kx++)
						for (int oy = 0; oy < CHO; oy++)
							for (int ox = 0; ox < CWO; ox++) {
								int iy = 2 * oy - 1 + ky, ix = 2 * ox - 1 + kx;
								if (iy >= 0 && iy < CH && ix >= 0 && ix < CW)
									g[(c * CH + iy) * CW + ix] += w1[((o * CC + c) * 3 + ky) * 3 + kx] *
									                               d1[(o * CHO + oy) * CWO + ox];
							}
		for (int i = 0; i < CC * CH * CW; i++)
			p_hand += 0.5 * gamma * g[i] * g[i] / CB;
		for (int o = 0; o < CK; o++)
			for (int c = 0; c < CC; c++)
				for (int ky = 0; ky < 3; ky++)
					for (int kx = 0; kx < 3; kx++)
						for (int oy = 0; oy < CHO; oy++)
							for (int ox = 0; ox < CWO; ox++) {
								int iy = 2 * oy - 1 + ky, ix = 2 * ox - 1 + kx;
								if (iy >= 0 && iy < CH && ix >= 0 && ix < CW)
									dw1[((o * CC + c) * 3 + ky) * 3 + kx] +=
										gamma / CB * d1[(o * CHO + oy) * CWO + ox] * g[(c * CH + iy) * CW + ix];
							}
		for (int o = 0; o < CK; o++)
			for (int oy = 0; oy < CHO; oy++)
				for (int ox = 0; ox < CWO; ox++) {
					int q = (o * CHO + oy) * CWO + ox;
					dw2[q] += gamma / CB * m[q] * conv1_at(w1, g, o, oy, ox);
				}
	}
	assert_true(fabs(p_engine - p_hand) <= 1e-5 * p_hand);
	double e1 = 0, n1 = 0, e2 = 0, n2 = 0;
	for (int i = 0; i < CK * CC * 9; i++) {
		e1 = fmax(e1, fabs(grad[i] - dw1[i]));
		n1 = fmax(n1, fabs(dw1[i]));
	}
	for (int i = 0; i < CK * CHO * CWO; i++) {
		e2 = fmax(e2, fabs(grad[CK * CC * 9 + CK + i] - dw2[i]));
		n2 = fmax(n2, fabs(dw2[i]));
	}
	if (getenv("GC_VERBOSE"))
		fprintf(stderr, "  R1 closed form: P %.6g / %.6g, dW1 %.3g of %.3g, dW2 %.3g of %.3g\n", p_engine, p_hand, e1, n1,
		        e2, n2);
	assert_true(n1 > 0 && e1 <= 1e-5 * n1);
	assert_true(n2 > 0 && e2 <= 1e-5 * n2);
	for (int i = 0; i < CK; i++)   /* b1 */
		assert_true(grad[CK * CC * 9 + i] == 0.0f);
	assert_true(grad[np - 1] == 0.0f);   /* b2 */
	gf_net_destroy(net);
}

/* ---- the API ---- */

/* A kind without a double backward is named; the embedding feeding only
 * a label plane is not in the way. */
static void test_refusals(void **state)
{
	(void)state;
	gf_net *net;
	NN_OK(nn_build(&net, be, "return { {'conv', 8, 8, 3, 1, 1}, {'attention', 8}, {'gsp'}, input_shape = {8, 4, 4} }", 2, 0));
	assert_int_equal(gf_net_check_backward2(net), GF_EUNSUPPORTED);
	assert_non_null(strstr(gf_errmsg(), "layer 2 (attention): has no double backward"));
	gf_net_destroy(net);
	NN_OK(nn_build(&net, be, "return { {'linear', 4, 4}, {'softmax'}, input_shape = {4} }", 2, 0));
	assert_int_equal(gf_net_check_backward2(net), GF_EUNSUPPORTED);
	assert_non_null(strstr(gf_errmsg(), "layer 2 (softmax)"));
	gf_net_destroy(net);
	NN_OK(nn_build(&net, be, "return { {'split', 0, 4, name = 'c'}, {'cbn', 6, cond = 'c', input = 'x'}, input_shape = {6} }",
	               2, GF_NET_NOFUSE));
	assert_int_equal(gf_net_check_backward2(net), GF_EUNSUPPORTED);
	assert_non_null(strstr(gf_errmsg(), "(cbn)"));
	gf_net_destroy(net);

	/* no kept input gradient: none at all, a backward without GF_NEED_DX,
	 * a forward since */
	NN_OK(nn_build(&net, be, "return { {'linear', 3, 2}, {'tanh'}, input_shape = {3} }", 2, 0));
	gf_rng init = { 1, 0, 0 };
	NN_OK(gf_net_init(net, &init));
	float x[6] = { 1, 2, 3, 4, 5, 6 }, w[4] = { 1, 1, 1, 1 }, t[6] = { 0 };
	gf_tensor xt = gf_tensor_make(x, GF_F32, 2, (int64_t[]){ 2, 3 });
	assert_int_equal(gf_net_backward2(net, t, NULL, GF_NEED_DW), GF_EPARAM);
	NN_OK(gf_net_forward(net, &xt, NULL, GF_TRAIN));
	NN_OK(gf_net_backward(net, w, GF_NEED_DW));
	assert_int_equal(gf_net_backward2(net, t, NULL, GF_NEED_DW), GF_EPARAM);
	NN_OK(gf_net_backward(net, w, GF_NEED_DX));
	NN_OK(gf_net_forward(net, &xt, NULL, GF_TRAIN));
	assert_int_equal(gf_net_backward2(net, t, NULL, GF_NEED_DW), GF_EPARAM);
	/* and one double backward per kept gradient */
	NN_OK(gf_net_backward(net, w, GF_NEED_DX));
	NN_OK(gf_net_backward2(net, t, NULL, GF_NEED_DW));
	assert_int_equal(gf_net_backward2(net, t, NULL, GF_NEED_DW), GF_EPARAM);
	gf_net_destroy(net);
}

/* An output gradient walked in the double backward's pass gives the sum
 * of its own backward and the penalty's; GF_ACCUMULATE adds. */
static void test_loss_in_the_same_walk(void **state)
{
	(void)state;
	struct probe p;
	int32_t lab[8];
	build(&p, "return require('backbones.dcgan').D{ size = 16, channels = 1 }", 4, 0, 0, lab);
	size_t np;
	gf_net_block(p.net, GF_PARAMS, &np);
	float *dy = malloc(p.ny * sizeof(float)), *t = malloc(p.nx * sizeof(float));
	float *a = malloc(np * sizeof(float)), *b = malloc(np * sizeof(float)), *c = malloc(np * sizeof(float));
	for (size_t i = 0; i < p.ny; i++)
		dy[i] = 0.3f * (float)i - 0.4f;
	/* the loss alone */
	forward(&p);
	NN_OK(gf_net_backward(p.net, dy, GF_NEED_DW));
	memcpy(a, gf_net_block(p.net, GF_GRADS, NULL), np * sizeof(float));
	/* the penalty alone */
	penalty(&p);
	gf_tensor dx;
	NN_OK(gf_net_dx(p.net, &dx));
	memcpy(t, dx.data, p.nx * sizeof(float));
	NN_OK(gf_net_backward2(p.net, t, NULL, GF_NEED_DW));
	memcpy(b, gf_net_block(p.net, GF_GRADS, NULL), np * sizeof(float));
	/* both in one pass */
	penalty(&p);
	NN_OK(gf_net_backward2(p.net, t, dy, GF_NEED_DW));
	memcpy(c, gf_net_block(p.net, GF_GRADS, NULL), np * sizeof(float));
	double e = 0, n = 0;
	for (size_t i = 0; i < np; i++) {
		e = fmax(e, fabs((double)c[i] - a[i] - b[i]));
		n = fmax(n, fabs((double)a[i] + b[i]));
	}
	assert_true(e <= 1e-5 * n);
	/* accumulate: twice the penalty's */
	penalty(&p);
	NN_OK(gf_net_backward2(p.net, t, NULL, GF_NEED_DW));
	penalty(&p);
	NN_OK(gf_net_backward2(p.net, t, NULL, GF_NEED_DW | GF_ACCUMULATE));
	const float *g2 = gf_net_block(p.net, GF_GRADS, NULL);
	for (size_t i = 0; i < np; i++)
		assert_true(fabsf(g2[i] - 2 * b[i]) <= 1e-5f * (fabsf(b[i]) + 1e-3f));
	free(dy);
	free(t);
	free(a);
	free(b);
	free(c);
	release(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_linear_tanh),
		cmocka_unit_test(test_sigmoid),
		cmocka_unit_test(test_lrelu_relu),
		cmocka_unit_test(test_conv),
		cmocka_unit_test(test_conv_strides),
		cmocka_unit_test(test_conv_winograd),
		cmocka_unit_test(test_tconv),
		cmocka_unit_test(test_conv_groups),
		cmocka_unit_test(test_conv_groups_winograd),
		cmocka_unit_test(test_tconv_groups),
		cmocka_unit_test(test_r3gan_bases),
		cmocka_unit_test(test_r3gan_block),
		cmocka_unit_test(test_upconv_fused),
		cmocka_unit_test(test_upconv_unfused),
		cmocka_unit_test(test_bn2d),
		cmocka_unit_test(test_bn1d),
		cmocka_unit_test(test_bn_noaffine),
		cmocka_unit_test(test_bn_lrelu_fused),
		cmocka_unit_test(test_bn_relu_unfused),
		cmocka_unit_test(test_dropout),
		cmocka_unit_test(test_dropout2d),
		cmocka_unit_test(test_reshape),
		cmocka_unit_test(test_maxpool),
		cmocka_unit_test(test_avgpool),
		cmocka_unit_test(test_avgpool_pad),
		cmocka_unit_test(test_upsample),
		cmocka_unit_test(test_add),
		cmocka_unit_test(test_concat_split),
		cmocka_unit_test(test_gsp),
		cmocka_unit_test(test_instancenorm),
		cmocka_unit_test(test_instancenorm_plain),
		cmocka_unit_test(test_sn),
		cmocka_unit_test(test_label_plane),
		cmocka_unit_test(test_proj),
		cmocka_unit_test(test_proj_sn),
		cmocka_unit_test(test_diffaugment),
		cmocka_unit_test(test_ada),
		cmocka_unit_test(test_ada_grey),
		cmocka_unit_test(test_mbstd),
		cmocka_unit_test(test_mbstd_f2),
		cmocka_unit_test(test_eqlr_fir),
		cmocka_unit_test(test_fir_up),
		cmocka_unit_test(test_bias_act),
		cmocka_unit_test(test_noise_const),
		cmocka_unit_test(test_modconv),
		cmocka_unit_test(test_dot),
		cmocka_unit_test(test_dot_cmap),
		cmocka_unit_test(test_g_smooth),
		cmocka_unit_test(test_dcgan_d),
		cmocka_unit_test(test_sngan_d_smooth),
		cmocka_unit_test(test_r1_closed_form),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_loss_in_the_same_walk),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
