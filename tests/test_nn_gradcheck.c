/* Finite-difference gradient checks of every layer type and loss: input
 * gradients (GF_NEED_DX) and weight gradients (GF_NEED_DW) of small
 * networks against central differences of L = sum(r * y) (r a fixed random
 * projection) accumulated in double; the fused forms (sub-pixel upsample +
 * conv, batchnorm + activation) and their unfused fallbacks separately;
 * gradient accumulation; NEED_DX leaving the gradient block alone.
 *
 * Samples whose forward and backward one-sided differences disagree sit on
 * a kink (ReLU, max pooling) within the step and are skipped; at most a
 * fifth of them may be. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "test_cuda_nets.h"
#include "test_nn_util.h"

#define SAMPLES 24    /* elements checked per tensor */

/* Step and tolerance (||analytic - numeric|| / ||numeric||): single layers
 * take 1e-2 / 1e-2; whole backbones, deep and full of LeakyReLU kinks that
 * a perturbation of one weight moves many activations across, a smaller
 * step and 1e-1: most tensors agree within 1e-2, a few within 7e-2
 * where many units cross a kink (their exact agreement with PyTorch is
 * test_nn_ref's job). */
static float H = 1e-2f;
static double TOL = 1e-2;
static int KINKS = 1;   /* skip samples on kinks; off for backbones, where
                         * every sample moves some unit across one */

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
	float *r;        /* (output numel) projection */
	size_t ny;
	double lscale;   /* sum |r * y|: the size of L's rounding error */
	gf_rng rng0;     /* dropout state replayed by every forward */
};

static double loss_of(struct probe *p)
{
	*gf_net_rng(p->net) = p->rng0;
	int rc = gf_net_forward(p->net, &p->x, p->labels.data ? &p->labels : NULL, GF_TRAIN | GF_FREEZE_STATS);
	if (rc) {
		fprintf(stderr, "forward: %s\n", gf_errmsg());
		abort();
	}
	gf_tensor y;
	gf_net_output(p->net, &y);
	const float *v = y.data;
	double l = 0, a = 0;
	for (size_t i = 0; i < p->ny; i++) {
		l += (double)p->r[i] * v[i];
		a += fabs((double)p->r[i] * v[i]);
	}
	p->lscale = a;
	return l;
}

/* Numeric derivative of L w.r.t. *slot; 0 and *kink = 1 on a kink. */
/* Rounding noise of a one-sided difference: f32 outputs, about 1e-7 of
 * sum |r * y| each, divided by the step. */
static double fd_noise(const struct probe *p)
{
	return 4e-7 * p->lscale / H;
}

/* The CPU backend's memory is host memory: inputs and parameters are
 * perturbed in place. */
static double numeric(struct probe *p, float *slot, int *kink)
{
	float keep = *slot;
	double l[3];
	const float steps[3] = { -H, 0.0f, H };
	for (int s = 0; s < 3; s++) {
		*slot = keep + steps[s];
		l[s] = loss_of(p);
	}
	*slot = keep;
	double fwd = (l[2] - l[1]) / H, bwd = (l[1] - l[0]) / H, c = (l[2] - l[0]) / (2 * H);
	*kink = KINKS && fabs(fwd - bwd) > 0.05 * (fabs(c) + 0.05) + fd_noise(p);
	return c;
}

struct tally {
	double num2, diff2;
	int n, skipped;
};

static void add(struct tally *t, double a, double n)
{
	t->num2 += n * n;
	t->diff2 += (a - n) * (a - n);
	t->n++;
}

static int verdict(const char *what, const struct tally *t)
{
	double rel = sqrt(t->diff2) / (sqrt(t->num2) + 1e-12);
	if (getenv("GC_VERBOSE"))
		fprintf(stderr, "  %s: %.3g over %d (%d kinks)\n", what, rel, t->n, t->skipped);
	if (t->n == 0 || rel > TOL || t->skipped * 4 > t->n) {
		fprintf(stderr, "%s: relative error %.3g over %d samples (%d on kinks)\n", what, rel, t->n, t->skipped);
		return 0;
	}
	return 1;
}

/* Checks dx and every parameter gradient of the network built from code. */
static void gradcheck(const char *name, const char *code, int batch, unsigned flags, int classes)
{
	struct probe p;
	memset(&p, 0, sizeof(p));
	NN_OK(nn_build(&p.net, be, code, batch, flags));
	gf_rng init = { 77, 0, 0 };
	NN_OK(gf_net_init(p.net, &init));
	/* parameters away from their tidy defaults (gamma 1, beta 0) */
	size_t np;
	float *par = gf_net_block(p.net, GF_PARAMS, &np);
	float *noise = malloc((np ? np : 1) * sizeof(float));
	gf_rng_normal(&init, noise, np, 0.0f, 0.3f);
	for (size_t i = 0; i < np; i++)
		par[i] += noise[i];
	free(noise);

	gf_tensor in, out;
	gf_net_shapes(p.net, &in, &out);
	in.shape[0] = batch;
	out.shape[0] = batch;
	size_t nx = (size_t)gf_tensor_numel(&in);
	p.ny = (size_t)gf_tensor_numel(&out);
	float *x = malloc(nx * sizeof(float));
	gf_rng_normal(&init, x, nx, 0.0f, 1.0f);
	in.data = x;
	p.x = in;
	int32_t lab[64];
	if (classes) {
		for (int i = 0; i < batch; i++)
			lab[i] = (i * 7 + 3) % classes;
		p.labels = gf_tensor_make(lab, GF_I32, 1, (int64_t[]){ batch });
	}
	p.r = malloc(p.ny * sizeof(float));
	gf_rng_normal(&init, p.r, p.ny, 0.0f, 1.0f);
	gf_rng_init(&p.rng0, 5, 9);

	/* a few training forwards first: power iterations bring sn's u and v
	 * near the top singular vectors (from random ones, sigma = u . W v can
	 * be near 0); the probes below run with GF_FREEZE_STATS, so nothing else
	 * they see depends on these */
	for (int i = 0; i < 20; i++)
		NN_OK(gf_net_forward(p.net, &p.x, p.labels.data ? &p.labels : NULL, GF_TRAIN));

	/* analytic */
	loss_of(&p);
	NN_OK(gf_net_backward(p.net, p.r, GF_NEED_DX | GF_NEED_DW));
	gf_tensor dxt;
	NN_OK(gf_net_dx(p.net, &dxt));
	float *dx = malloc(nx * sizeof(float)), *g = malloc((np ? np : 1) * sizeof(float));
	memcpy(dx, dxt.data, nx * sizeof(float));
	memcpy(g, gf_net_block(p.net, GF_GRADS, NULL), np * sizeof(float));

	/* numeric, on samples */
	gf_rng pick = { 3, 1, 0 };
	struct tally t = { 0 };
	char what[160];
	for (int s = 0; s < SAMPLES; s++) {
		size_t i = (size_t)(gf_rng_u64(&pick) % nx);
		int kink;
		double n = numeric(&p, &x[i], &kink);
		if (kink)
			t.skipped++;
		else
			add(&t, dx[i], n);
	}
	snprintf(what, sizeof(what), "%s: dx", name);
	assert_true(verdict(what, &t));
	size_t nv;
	const gf_view *v = gf_net_views(p.net, GF_PARAMS, &nv);
	for (size_t k = 0; k < nv; k++) {
		struct tally tw = { 0 };
		int count = v[k].numel < SAMPLES ? (int)v[k].numel : SAMPLES;
		for (int s = 0; s < count; s++) {
			size_t i = v[k].offset + (count == (int)v[k].numel ? (size_t)s : (size_t)(gf_rng_u64(&pick) % v[k].numel));
			int kink;
			double n = numeric(&p, &par[i], &kink);
			if (kink)
				tw.skipped++;
			else
				add(&tw, g[i], n);
		}
		snprintf(what, sizeof(what), "%s: d%s", name, v[k].name);
		/* a gradient that is zero in exact arithmetic (the bias of a conv
		 * feeding a batchnorm): analytic and numeric are both noise */
		double amax = 0, gmax = 0;
		for (size_t i = 0; i < v[k].numel; i++)
			amax = fabs(g[v[k].offset + i]) > amax ? fabs(g[v[k].offset + i]) : amax;
		for (size_t i = 0; i < np; i++)
			gmax = fabs(g[i]) > gmax ? fabs(g[i]) : gmax;
		if (amax <= 1e-5 * gmax && sqrt(tw.num2 / (tw.n ? tw.n : 1)) <= 5 * fd_noise(&p))
			continue;
		assert_true(verdict(what, &tw));
	}

	/* GF_ACCUMULATE adds; GF_NEED_DX alone leaves the gradients alone */
	loss_of(&p);
	NN_OK(gf_net_backward(p.net, p.r, GF_NEED_DW | GF_ACCUMULATE));
	float *g2 = gf_net_block(p.net, GF_GRADS, NULL);
	for (size_t i = 0; i < np; i++)
		assert_true(fabsf(g2[i] - 2 * g[i]) <= 1e-5f * (fabsf(g[i]) + 1e-3f));
	NN_OK(gf_net_backward(p.net, p.r, GF_NEED_DX));
	for (size_t i = 0; i < np; i++)
		assert_true(fabsf(g2[i] - 2 * g[i]) <= 1e-5f * (fabsf(g[i]) + 1e-3f));

	free(x);
	free(dx);
	free(g);
	free(p.r);
	gf_net_destroy(p.net);
}

#define CASE(fn, name, code, batch, flags, classes)        \
	static void fn(void **state)                        \
	{                                                   \
		(void)state;                                \
		H = 1e-2f;                                  \
		TOL = 1e-2;                                 \
		KINKS = 1;                                  \
		gradcheck(name, code, batch, flags, classes); \
	}

#define BACKBONE(fn, name, code, batch, classes)     \
	static void fn(void **state)                  \
	{                                             \
		(void)state;                          \
		H = 2e-3f;                            \
		TOL = 1e-1;                           \
		KINKS = 0;                            \
		gradcheck(name, code, batch, 0, classes); \
	}

CASE(test_linear, "linear", "return { {'linear', 6, 5}, input_shape = {6} }", 3, 0, 0)
CASE(test_linear_nobias, "linear no bias", "return { {'linear', 6, 4, bias = false}, {'tanh'}, input_shape = {6} }", 3, 0, 0)
CASE(test_conv, "conv 3x3", "return { {'conv', 3, 6, 3, 1, 1}, input_shape = {3, 5, 5} }", 2, 0, 0)
CASE(test_conv_s2, "conv stride 2", "return { {'conv', 3, 6, 3, 2, 1}, input_shape = {3, 7, 7} }", 2, 0, 0)
CASE(test_conv_direct, "conv few outputs", "return { {'conv', 4, 2, 3, 1, 1}, input_shape = {4, 5, 5} }", 2, 0, 0)
CASE(test_conv_1x1, "conv 1x1", "return { {'conv', 3, 5, 1}, input_shape = {3, 4, 4} }", 2, 0, 0)
CASE(test_conv_k5, "conv 5x5 s2", "return { {'conv', 2, 5, 5, 2, 2, bias = false}, input_shape = {2, 8, 8} }", 2, 0, 0)
CASE(test_tconv, "tconv", "return { {'tconv', 3, 4, 3, 2, 1, output_padding = 1}, input_shape = {3, 4, 4} }", 2, 0, 0)
CASE(test_tconv_k4, "tconv k4", "return { {'tconv', 4, 2, 4, 2, 1}, input_shape = {4, 3, 3} }", 2, 0, 0)
/* grouped convolutions: the generic path (per-group GEMMs), the direct one
 * (depthwise), Winograd (8 channels a group at 12x12), 1x1, with sn and
 * eqlr; the grouped transposed conv; R3GAN's generative basis (a
 * depthwise 4x4 transposed conv of a (C, 1, 1) map) and discriminative
 * basis (a depthwise 4x4 conv to (C, 1, 1)) */
CASE(test_conv_groups, "conv groups 2, stride 2", "return { {'conv', 12, 6, 3, 2, 1, groups = 2}, input_shape = {12, 7, 7} }",
     2, 0, 0)
CASE(test_conv_depthwise, "conv depthwise", "return { {'conv', 4, 4, 3, 1, 1, groups = 4}, input_shape = {4, 5, 6} }", 2, 0, 0)
CASE(test_conv_groups_winograd, "conv groups 2 (Winograd)",
     "return { {'conv', 16, 16, 3, 1, 1, groups = 2, bias = false}, input_shape = {16, 12, 12} }", 2, 0, 0)
CASE(test_conv_groups_1x1_sn_eqlr, "conv groups 1x1, sn, eqlr",
     "return { {'conv', 10, 15, 1, groups = 5}, {'tanh'}, {'conv', 15, 9, 3, 1, 1, groups = 3, sn = true}, {'tanh'},"
     " {'conv', 9, 6, 3, 1, 1, groups = 3, eqlr = true, lr_mul = 0.5}, input_shape = {10, 4, 5} }", 2, 0, 0)
CASE(test_tconv_groups, "tconv groups 2",
     "return { {'tconv', 4, 6, 3, 2, 1, output_padding = 1, groups = 2}, input_shape = {4, 3, 4} }", 2, 0, 0)
CASE(test_r3gan_bases, "R3GAN's generative and discriminative bases",
     "return { {'linear', 5, 6, bias = false}, {'reshape', 6, 1, 1}, {'tconv', 6, 6, 4, groups = 6, bias = false}, {'tanh'},"
     " {'conv', 6, 6, 4, groups = 6, bias = false}, {'flatten'}, {'linear', 6, 2, bias = false}, input_shape = {5} }",
     3, 0, 0)
CASE(test_upconv_fused, "upsample+conv (sub-pixel)",
     "return { {'upsample', 2}, {'conv', 3, 5, 3, 1, 1}, input_shape = {3, 4, 3} }", 2, 0, 0)
CASE(test_upconv_unfused, "upsample+conv (unfused)",
     "return { {'upsample', 2}, {'conv', 3, 5, 3, 1, 1}, input_shape = {3, 4, 3} }", 2, GF_NET_NOFUSE, 0)
CASE(test_upsample3, "upsample x3", "return { {'upsample', 3}, input_shape = {2, 3, 2} }", 2, 0, 0)
CASE(test_diffaugment, "diffaugment", "return { {'diffaugment', 'color,translation,cutout'}, input_shape = {3, 6, 6} }",
     3, 0, 0)
CASE(test_diffaugment_grey, "diffaugment grey", "return { {'augment', 'color,translation'}, {'conv', 1, 2, 3}, input_shape = {1, 7, 5} }",
     2, 0, 0)
/* ADA with every transform on (p = 1): bilinear resampling with reflection and the colour matrix */
CASE(test_ada, "ada bgc", "return { {'ada', 'bgc', p = 1}, {'conv', 3, 2, 3, 1, 1}, input_shape = {3, 7, 6} }",
     3, 0, 0)
CASE(test_ada_grey, "ada bgc grey", "return { {'ada', pipe = 'bgc', p = 0.7}, input_shape = {1, 6, 8} }", 4, 0, 0)
CASE(test_bn2d, "bn2d", "return { {'bn', 3, eps = 0.8}, input_shape = {3, 4, 4} }", 4, 0, 0)
CASE(test_bn1d, "bn1d", "return { {'bn', 6}, input_shape = {6} }", 5, 0, 0)
CASE(test_bn1d_seq, "bn1d (C, L)", "return { {'bn', 3}, input_shape = {3, 5} }", 3, 0, 0)
CASE(test_bn_noaffine, "bn no affine", "return { {'bn', 3, affine = false}, {'tanh'}, input_shape = {3, 3, 3} }", 3, 0, 0)
CASE(test_bn_lrelu_fused, "bn+lrelu (fused)", "return { {'bn', 3}, {'lrelu', 0.2}, input_shape = {3, 4, 4} }", 3, 0, 0)
CASE(test_bn_lrelu_unfused, "bn+lrelu (unfused)", "return { {'bn', 3}, {'lrelu', 0.2}, input_shape = {3, 4, 4} }", 3,
     GF_NET_NOFUSE, 0)
CASE(test_bn_relu_fused, "bn+relu (fused)", "return { {'bn', 4}, {'relu'}, input_shape = {4} }", 6, 0, 0)
CASE(test_acts, "activations",
     "return { {'linear', 5, 8}, {'relu'}, {'linear', 8, 8}, {'lrelu', 0.2}, {'linear', 8, 8}, {'tanh'},"
     " {'linear', 8, 4}, {'sigmoid'}, input_shape = {5} }", 3, 0, 0)
CASE(test_dropout, "dropout", "return { {'linear', 5, 8}, {'dropout', 0.3}, input_shape = {5} }", 4, 0, 0)
CASE(test_dropout2d, "dropout2d", "return { {'conv', 2, 4, 3, 1, 1}, {'dropout2d', 0.5}, input_shape = {2, 3, 3} }",
     3, 0, 0)
CASE(test_reshape, "flatten/reshape",
     "return { {'conv', 2, 3, 3, 2, 1}, {'flatten'}, {'linear', 12, 6}, {'reshape', 2, 3}, {'bn', 2},"
     " input_shape = {2, 4, 4} }", 3, 0, 0)
CASE(test_maxpool, "maxpool", "return { {'maxpool', 3, 2, 1}, input_shape = {2, 5, 5} }", 2, 0, 0)
CASE(test_maxpool2, "maxpool 2 (2x2 path)", "return { {'maxpool', 2}, input_shape = {2, 4, 6} }", 2, 0, 0)
CASE(test_avgpool, "avgpool", "return { {'avgpool', 3, 2, 1}, input_shape = {2, 5, 5} }", 2, 0, 0)
CASE(test_avgpool2, "avgpool 2", "return { {'avgpool', 2}, input_shape = {2, 4, 6} }", 2, 0, 0)
CASE(test_avgpool2_odd, "avgpool 2, odd size", "return { {'avgpool', 2}, input_shape = {2, 5, 7} }", 2, 0, 0)
CASE(test_softmax, "softmax", "return { {'linear', 4, 6}, {'softmax'}, input_shape = {4} }", 3, 0, 0)
CASE(test_embed_concat, "embedding + concat (CG-style)",
     "return { {'embedding', 4, 3, input = 'label', name = 'e'}, {'concat', input = 'x', with = 'e'},"
     " {'linear', 8, 4}, input_shape = {5} }", 5, 0, 4)
CASE(test_label_plane, "label plane (CD-style)",
     "return { {'embedding', 3, 16, input = 'label'}, {'reshape', 1, 4, 4, name = 'plane'},"
     " {'concat', input = 'x', with = 'plane'}, {'conv', 3, 4, 3, 2, 1}, {'flatten'}, {'linear', 16, 1},"
     " input_shape = {2, 4, 4} }", 3, 0, 3)
CASE(test_branches, "input used twice (gradient accumulation)",
     "return { {'linear', 4, 4, name = 'a'}, {'tanh'}, {'concat', input = 'x', with = 2}, {'linear', 8, 3},"
     " input_shape = {4} }", 3, 0, 0)
CASE(test_add, "add (residual)",
     "return { {'conv', 2, 2, 3, 1, 1}, {'tanh'}, {'add', with = 'x'}, input_shape = {2, 4, 4} }", 2, 0, 0)
CASE(test_add_self, "add (one node twice)",
     "return { {'linear', 4, 5, name = 'a'}, {'add', with = 'a'}, {'tanh'}, input_shape = {4} }", 3, 0, 0)
CASE(test_gsp, "gsp", "return { {'conv', 2, 3, 3, 1, 1}, {'gsp'}, {'linear', 3, 2}, input_shape = {2, 4, 4} }", 2, 0, 0)
CASE(test_split, "split (two chunks of one source)",
     "return { {'linear', 4, 8, name = 'z'}, {'split', 0, 3}, {'tanh', name = 'a'}, {'slice', from = 3, to = 8, input = 'z'},"
     " {'concat', with = 'a'}, input_shape = {4} }", 3, 0, 0)
CASE(test_instancenorm, "instancenorm affine",
     "return { {'instancenorm', 3, affine = true}, {'conv', 3, 2, 1}, input_shape = {3, 4, 4} }", 3, 0, 0)
CASE(test_instancenorm_plain, "instancenorm", "return { {'instancenorm', 2}, {'tanh'}, input_shape = {2, 3, 5} }", 2, 0, 0)
/* spectral norm: GF_FREEZE_STATS (every forward here) runs without the
 * power iteration, so u and v stay fixed and the loss is a function of the
 * weights; the gradient goes through sigma */
CASE(test_sn_linear_conv, "sn linear + conv",
     "return { {'conv', 2, 3, 3, 2, 1, sn = true}, {'tanh'}, {'flatten'}, {'linear', 12, 4, sn = true},"
     " input_shape = {2, 4, 4} }", 2, 0, 0)
CASE(test_sn_tconv, "sn tconv", "return { {'tconv', 3, 2, 3, 2, 1, output_padding = 1, sn = true}, input_shape = {3, 3, 3} }",
     2, 0, 0)
CASE(test_sn_embedding, "sn embedding", "return { {'embedding', 4, 3, sn = true}, {'linear', 3, 2}, input_shape = {1} }", 5, 0,
     4)
/* conditional batchnorm: batch statistics (GF_FREEZE_STATS keeps them
 * batch statistics without touching the running ones); cond's gradient
 * reaches x through the split or the linear that made it */
CASE(test_cbn_classes, "cbn classes", "return { {'cbn', 3, classes = 4}, {'tanh'}, input_shape = {3, 3, 3} }", 4, 0, 4)
CASE(test_cbn_classes_sn, "cbn classes sn", "return { {'cbn', 3, classes = 3, sn = true}, {'tanh'}, input_shape = {3, 4} }",
     4, 0, 3)
CASE(test_cbn_cond, "cbn cond + lrelu (fused)",
     "return { {'split', 0, 5, name = 'c'}, {'split', 5, 23, input = 'x'}, {'reshape', 2, 3, 3},"
     " {'cbn', 2, cond = 'c', bias = true}, {'lrelu', 0.2}, input_shape = {23} }", 3, 0, 0)
CASE(test_cbn_cond_sn, "cbn cond sn (input and cond from x)",
     "return { {'linear', 6, 4, name = 'c'}, {'cbn', 6, cond = 'c', sn = true, input = 'x'}, {'tanh'},"
     " input_shape = {6} }", 5, 0, 0)
CASE(test_proj, "proj", "return { {'conv', 2, 3, 3, 1, 1}, {'gsp', name = 'h'}, {'linear', 3, 1}, {'proj', 4, 3, with = 'h'},"
     " input_shape = {2, 4, 4} }", 4, 0, 4)
CASE(test_proj_sn, "proj sn", "return { {'tanh', name = 'h'}, {'linear', 5, 1, sn = true}, {'proj', 3, 5, with = 'h', sn = true},"
     " input_shape = {5} }", 4, 0, 3)
/* self-attention: gamma away from 0 by the parameter noise; max pooling's
 * kinks are skipped like maxpool's */
CASE(test_attention, "attention", "return { {'attention', 8}, {'tanh'}, input_shape = {8, 4, 6} }", 2, 0, 0)
CASE(test_attention_sn, "attention sn",
     "return { {'conv', 3, 16, 1}, {'attention', 16, sn = true}, input_shape = {3, 4, 4} }", 2, 0, 0)
/* minibatch standard deviation: groups of 2 (and of the whole batch of
 * 3), one and two statistics channels */
CASE(test_mbstd, "mbstd", "return { {'mbstd', 2, 1}, {'conv', 5, 2, 3, 1, 1}, input_shape = {4, 3, 3} }", 4, 0, 0)
CASE(test_mbstd_f2, "mbstd channels 2", "return { {'mbstd', group = 4, channels = 2}, {'tanh'}, input_shape = {4, 2, 3} }",
     3, 0, 0)
/* StyleGAN2's kinds (test_nn_ref_sg2 has their PyTorch references) */
CASE(test_eqlr_linear, "eqlr linear", "return { {'linear', 6, 5, eqlr = true, lr_mul = 0.1, bias_init = 0.5}, input_shape = {6} }", 3,
     0, 0)
CASE(test_eqlr_conv, "eqlr conv", "return { {'conv', 3, 4, 3, 2, 1, eqlr = true, lr_mul = 0.5}, input_shape = {3, 5, 5} }", 2, 0, 0)
CASE(test_fir, "fir up, down, blurs",
     "return { {'fir', up = 2}, {'fir', down = 2}, {'fir', pad = 2}, {'fir', pad = 1, gain = 4}, input_shape = {2, 4, 5} }", 2, 0,
     0)
CASE(test_fir_general, "fir asymmetric pads, up and down together",
     "return { {'fir', pad = {2, 1}, gain = 1.5}, {'fir', up = 2, down = 2, pad = {1, 2}}, input_shape = {2, 5, 4} }", 2, 0, 0)
CASE(test_bias_act, "bias_act lrelu clamp", "return { {'bias_act', 12, clamp = 1.2}, input_shape = {12, 1, 2} }", 2, 0, 0)
CASE(test_bias_act_relu, "bias_act relu lr_mul", "return { {'bias_act', 4, act = 'relu', lr_mul = 0.3}, {'tanh'}, input_shape = {4} }",
     3, 0, 0)
CASE(test_noise, "noise (random, the generator replayed)",
     "return { {'conv', 2, 5, 3, 1, 1}, {'noise', 5, mode = 'random'}, input_shape = {2, 4, 4} }", 2, 0, 0)
CASE(test_noise_const, "noise const", "return { {'noise', 2, mode = 'const'}, {'tanh'}, input_shape = {2, 3, 3} }", 2, 0, 0)
CASE(test_noise_channel, "noise const, a strength per channel",
     "return { {'noise', 2, mode = 'const', strength = 'channel'}, {'tanh'}, input_shape = {2, 3, 3} }", 2, 0, 0)
CASE(test_const, "const + a branch from x",
     "return { {'linear', 4, 18}, {'reshape', 2, 3, 3, name = 'b'}, {'const', 2, 3, 3, input = 'x'}, {'add', with = 'b'},"
     " {'tanh'}, input_shape = {4} }", 2, 0, 0)
CASE(test_modconv, "modconv 3x3 demod",
     "return { {'linear', 5, 3, eqlr = true, bias_init = 1, name = 's'}, {'linear', 5, 27, input = 'x'}, {'reshape', 3, 3, 3},"
     " {'modconv', 3, 4, 3, with = 's'}, input_shape = {5} }", 2, 0, 0)
CASE(test_modconv_up, "modconv up 2 + fir",
     "return { {'linear', 5, 3, eqlr = true, bias_init = 1, name = 's'}, {'linear', 5, 12, input = 'x'}, {'reshape', 3, 2, 2},"
     " {'modconv', 3, 2, 3, with = 's', up = 2}, {'fir', pad = 1, gain = 4}, input_shape = {5} }", 2, 0, 0)
CASE(test_modconv_rgb, "modconv 1x1 no demod (toRGB)",
     "return { {'linear', 5, 3, eqlr = true, bias_init = 1, name = 's'}, {'linear', 5, 12, input = 'x'}, {'reshape', 3, 2, 2},"
     " {'modconv', 3, 3, 1, with = 's', demod = false}, input_shape = {5} }", 3, 0, 0)

/* stylegan2.lua's own kinds: the mapping's normalisation, D's cmap
 * projection (both inputs downstream of x), w_avg in training (identity) */
CASE(test_norm2, "norm2", "return { {'norm2'}, {'linear', 6, 3}, {'tanh'}, input_shape = {6} }", 3, 0, 0)
CASE(test_dot, "dot",
     "return { {'linear', 5, 4, name = 'a'}, {'linear', 5, 4, input = 'x'}, {'tanh', name = 'b'},"
     " {'dot', input = 'a', with = 'b', scale = 0.5}, input_shape = {5} }", 3, 0, 0)
CASE(test_w_avg, "w_avg (training)", "return { {'linear', 4, 3}, {'w_avg', 3, beta = 0.9}, {'tanh'}, input_shape = {4} }", 3, 0,
     0)
/* style mixing (layer style_mix, style_w): the mapping's layers on both
 * rows (linear, bias_act, w_avg read (2, C) as two rows), the rows each
 * style_w reads (prob 1, 3 ws: index 0 reads w, index 2 w2; prob 0: both
 * w), the embedding's part of the second row back to the input; z2 and
 * the cutoff replayed with the generator */
#define MIX_NET(prob)                                                                                            \
	"return { {'style_mix', z = 4, prob = " prob ", layers = 3, name = 'mix'},"                                    \
	" {'linear', 6, 5, eqlr = true, lr_mul = 0.5}, {'bias_act', 5, lr_mul = 0.5}, {'w_avg', 5, name = 'w'},"      \
	" {'style_w', index = 0, source = 'mix', input = 'w', name = 'w0'},"                                          \
	" {'style_w', index = 2, source = 'mix', input = 'w', name = 'w2'}, {'linear', 5, 4, input = 'w2', name = 'a'}," \
	" {'add', input = 'w0', with = 'w2'}, {'concat', with = 'a'}, input_shape = {6} }"
CASE(test_style_mix, "style_mix + style_w (mixed)", MIX_NET("1"), 3, 0, 0)
CASE(test_style_mix_off, "style_mix + style_w (prob 0)", MIX_NET("0"), 3, 0, 0)
CASE(test_style_mix_z, "style_mix without an embedding, 2 ws",
     "return { {'style_mix', z = 4, prob = 1, layers = 2, name = 'mix'}, {'linear', 4, 3, name = 'w'},"
     " {'style_w', index = 0, source = 'mix', input = 'w', name = 'w0'},"
     " {'style_w', index = 1, source = 'mix', input = 'w', name = 'w1'}, {'concat', input = 'w0', with = 'w1'},"
     " {'tanh'}, input_shape = {4} }", 3, 0, 0)
/* the hand-written networks the CUDA tests compare with the CPU
 * (test_cuda_nets.h), whole, with the backbones' settings: their
 * gradients are right on the CPU */
BACKBONE(test_cuda_all_layers, "test_cuda_net's all-layers net", NET_ALL_LAYERS, 6, 0)
BACKBONE(test_cuda_resnet_kinds, "test_cuda_net's resnet-kinds net", NET_RESNET_KINDS, 6, 0)
BACKBONE(test_cuda_cbn_proj, "test_cuda_net's cbn + proj net", NET_CBN_PROJ, 6, 5)
BACKBONE(test_dcgan_g, "DC-GAN G (size 8)", "return require('backbones.dcgan').G{ z = 6, size = 8, channels = 2 }", 3, 0)
BACKBONE(test_dcgan_d, "DC-GAN D (size 16)", "return require('backbones.dcgan').D{ size = 16, channels = 2 }", 3, 0)
BACKBONE(test_dcgan_cg, "DC-CGAN G (size 8)", "return require('backbones.dcgan').CG{ z = 6, size = 8, classes = 3 }", 3, 3)
BACKBONE(test_dcgan_cd, "DC-CGAN D (size 16)", "return require('backbones.dcgan').CD{ size = 16, classes = 3 }", 3, 3)
BACKBONE(test_r3gan_g, "R3GAN G (size 8, conditional)",
         "return require('backbones.r3gan').G{ size = 8, z = 5, channels = 2, widths = {6, 4}, cardinality = 2, blocks = 1,"
         " classes = 3, embed = 2 }", 3, 3)
BACKBONE(test_r3gan_d, "R3GAN D (size 8, conditional)",
         "return require('backbones.r3gan').D{ size = 8, channels = 2, widths = {6, 4}, cardinality = 2, blocks = {1, 2},"
         " classes = 3, embed = 3 }", 3, 3)

/* ---- losses ---- */

static void loss_check(gf_loss_kind kind, float lo, float hi, int with_target, float tv)
{
	enum { N = 6, K = 3 };
	float x[N * K], t[N * K], dx[N * K];
	int32_t lab[N];
	gf_rng r = { 8, (uint64_t)kind, 0 };
	gf_rng_uniform(&r, x, N * K, lo, hi);
	gf_rng_uniform(&r, t, N * K, 0.0f, 1.0f);
	for (int i = 0; i < N; i++)
		lab[i] = (i * 2 + 1) % K;
	gf_tensor xt = nn_tensor(x, 2, N, K), tt = nn_tensor(t, 2, N, K);
	gf_tensor lt = gf_tensor_make(lab, GF_I32, 1, (int64_t[]){ N });
	const gf_tensor *target = kind == GF_LOSS_CE ? &lt : with_target ? &tt : NULL;
	float l;
	NN_OK(gf_loss(be, kind, &l, dx, &xt, target, tv, 0.7f));
	struct tally tl = { 0 };
	const float h = 1e-3f;
	for (int i = 0; i < N * K; i++) {
		float keep = x[i], lp, lm;
		x[i] = keep + h;
		NN_OK(gf_loss(be, kind, &lp, NULL, &xt, target, tv, 0.7f));
		x[i] = keep - h;
		NN_OK(gf_loss(be, kind, &lm, NULL, &xt, target, tv, 0.7f));
		x[i] = keep;
		add(&tl, dx[i], ((double)lp - lm) / (2 * h));
	}
	char what[64];
	snprintf(what, sizeof(what), "loss %s", gf_loss_name(kind));
	assert_true(verdict(what, &tl));
}

static void test_losses(void **state)
{
	(void)state;
	loss_check(GF_LOSS_BCE, 0.05f, 0.95f, 1, 0);
	loss_check(GF_LOSS_BCE, 0.05f, 0.95f, 0, 1.0f);
	loss_check(GF_LOSS_BCE_LOGITS, -4.0f, 4.0f, 1, 0);
	loss_check(GF_LOSS_NONSAT, 0.05f, 0.95f, 0, 0);
	loss_check(GF_LOSS_NONSAT_LOGITS, -4.0f, 4.0f, 0, 0);
	loss_check(GF_LOSS_HINGE_D, 0.2f, 0.8f, 0, 1.0f);     /* away from the hinge at 1 */
	loss_check(GF_LOSS_HINGE_D, -0.8f, 0.5f, 0, -1.0f);
	loss_check(GF_LOSS_HINGE_G, -2.0f, 2.0f, 0, 0);
	loss_check(GF_LOSS_LS, -2.0f, 2.0f, 1, 0);
	loss_check(GF_LOSS_L1, 1.5f, 3.0f, 1, 0);
	loss_check(GF_LOSS_CE, -3.0f, 3.0f, 0, 0);
	loss_check(GF_LOSS_RELATIVISTIC, -3.0f, 3.0f, 0, 1.0f);   /* R3GAN's D: rows 0-2 real, 3-5 fake */
	loss_check(GF_LOSS_RELATIVISTIC, -3.0f, 3.0f, 0, -1.0f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_linear),
		cmocka_unit_test(test_mbstd),
		cmocka_unit_test(test_eqlr_linear),
		cmocka_unit_test(test_eqlr_conv),
		cmocka_unit_test(test_fir),
		cmocka_unit_test(test_fir_general),
		cmocka_unit_test(test_bias_act),
		cmocka_unit_test(test_bias_act_relu),
		cmocka_unit_test(test_noise),
		cmocka_unit_test(test_noise_const),
		cmocka_unit_test(test_noise_channel),
		cmocka_unit_test(test_const),
		cmocka_unit_test(test_modconv),
		cmocka_unit_test(test_modconv_up),
		cmocka_unit_test(test_modconv_rgb),
		cmocka_unit_test(test_norm2),
		cmocka_unit_test(test_dot),
		cmocka_unit_test(test_w_avg),
		cmocka_unit_test(test_style_mix),
		cmocka_unit_test(test_style_mix_off),
		cmocka_unit_test(test_style_mix_z),
		cmocka_unit_test(test_mbstd_f2),
		cmocka_unit_test(test_linear_nobias),
		cmocka_unit_test(test_conv),
		cmocka_unit_test(test_conv_s2),
		cmocka_unit_test(test_conv_direct),
		cmocka_unit_test(test_conv_1x1),
		cmocka_unit_test(test_conv_k5),
		cmocka_unit_test(test_tconv),
		cmocka_unit_test(test_tconv_k4),
		cmocka_unit_test(test_conv_groups),
		cmocka_unit_test(test_conv_depthwise),
		cmocka_unit_test(test_conv_groups_winograd),
		cmocka_unit_test(test_conv_groups_1x1_sn_eqlr),
		cmocka_unit_test(test_tconv_groups),
		cmocka_unit_test(test_r3gan_bases),
		cmocka_unit_test(test_upconv_fused),
		cmocka_unit_test(test_upconv_unfused),
		cmocka_unit_test(test_upsample3),
		cmocka_unit_test(test_diffaugment),
		cmocka_unit_test(test_diffaugment_grey),
		cmocka_unit_test(test_ada),
		cmocka_unit_test(test_ada_grey),
		cmocka_unit_test(test_bn2d),
		cmocka_unit_test(test_bn1d),
		cmocka_unit_test(test_bn1d_seq),
		cmocka_unit_test(test_bn_noaffine),
		cmocka_unit_test(test_bn_lrelu_fused),
		cmocka_unit_test(test_bn_lrelu_unfused),
		cmocka_unit_test(test_bn_relu_fused),
		cmocka_unit_test(test_acts),
		cmocka_unit_test(test_dropout),
		cmocka_unit_test(test_dropout2d),
		cmocka_unit_test(test_reshape),
		cmocka_unit_test(test_maxpool),
		cmocka_unit_test(test_maxpool2),
		cmocka_unit_test(test_avgpool),
		cmocka_unit_test(test_avgpool2),
		cmocka_unit_test(test_avgpool2_odd),
		cmocka_unit_test(test_softmax),
		cmocka_unit_test(test_embed_concat),
		cmocka_unit_test(test_label_plane),
		cmocka_unit_test(test_branches),
		cmocka_unit_test(test_add),
		cmocka_unit_test(test_add_self),
		cmocka_unit_test(test_gsp),
		cmocka_unit_test(test_split),
		cmocka_unit_test(test_instancenorm),
		cmocka_unit_test(test_instancenorm_plain),
		cmocka_unit_test(test_sn_linear_conv),
		cmocka_unit_test(test_sn_tconv),
		cmocka_unit_test(test_sn_embedding),
		cmocka_unit_test(test_cbn_classes),
		cmocka_unit_test(test_cbn_classes_sn),
		cmocka_unit_test(test_cbn_cond),
		cmocka_unit_test(test_cbn_cond_sn),
		cmocka_unit_test(test_proj),
		cmocka_unit_test(test_proj_sn),
		cmocka_unit_test(test_attention),
		cmocka_unit_test(test_attention_sn),
		cmocka_unit_test(test_cuda_all_layers),
		cmocka_unit_test(test_cuda_resnet_kinds),
		cmocka_unit_test(test_cuda_cbn_proj),
		cmocka_unit_test(test_dcgan_g),
		cmocka_unit_test(test_dcgan_d),
		cmocka_unit_test(test_dcgan_cg),
		cmocka_unit_test(test_dcgan_cd),
		cmocka_unit_test(test_r3gan_g),
		cmocka_unit_test(test_r3gan_d),
		cmocka_unit_test(test_losses),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
