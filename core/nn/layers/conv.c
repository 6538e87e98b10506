/* conv: 2-d convolution, PyTorch's nn.Conv2d(in, out, k, stride, pad,
 * bias = bias, groups = groups) with the weight (out, in / groups, kh, kw).
 *
 *   {"conv", in, out, k, stride = 1, pad = 0, bias = true, init = ..., sn = false,
 *    kh = k, kw = k, ph = pad, pw = pad, groups = 1}
 *
 * kh/kw and ph/pw give rectangular kernels and padding (Inception's 1x7 and
 * 7x1 convolutions: nn.Conv2d(in, out, (1, 7), padding = (0, 3)) is
 * {"conv", in, out, 1, kw = 7, pw = 3}). groups = g splits the channels
 * into g independent convolutions of in/g -> out/g (ResNeXt's and R3GAN's
 * grouped 3x3, g = in = out the depthwise convolution); the fan-in of
 * every initialisation, spectral norm's matrix (out, in/g k k) and the
 * FLOPs are those of the grouped weight. Backends advertise it with
 * GF_CAP_CONV_GROUPS.
 *
 * Forward and backward are the backend's conv2d_forward / conv2d_backward.
 * Fusion: a conv 3x3 stride 1 pad 1 absorbs a nearest upsample x2 before
 * it when the backend advertises GF_CAP_CONV_UP2, and then runs as a
 * sub-pixel convolution of the low-resolution input (up = 2 in its
 * descriptor: 4 taps per output instead of 9; docs/nn.md "Engine
 * fusions"). sn = true: spectral_norm(nn.Conv2d(...)) (sn.c). eqlr = true
 * (lr_mul = 1, bias_init = 0): StyleGAN2-ADA's Conv2dLayer without its
 * resampling and activation (those are the fir and bias_act kinds), the
 * weight and bias scaled at run time (eqlr.c). */
#include <stdio.h>

#include "eqlr.h"
#include "sn.h"

struct conv_cfg {
	int cin, cout, kh, kw, stride, ph, pw, bias;
	int groups;
	int up;   /* 2 when a nearest upsample x2 is fused in, else 1 */
	struct gf_sn sn;
	struct gf_eqlr eq;
};
LAYER_CFG_FITS(struct conv_cfg);

static int conv_parse(gf_layer_net *net, struct layer *l, const gf_layer_args *a)
{
	(void)net;
	struct conv_cfg *c = LAYER_CFG(struct conv_cfg, l);
	int rc, k, pad;
	c->up = 1;
	if ((rc = gf_layer_arg_int(a, 0, NULL, 0, 1, &c->cin)) || (rc = gf_layer_arg_int(a, 1, NULL, 0, 1, &c->cout)) ||
	    (rc = gf_layer_arg_int(a, 2, NULL, 0, 1, &k)) || (rc = gf_layer_arg_int(a, 3, "stride", 1, 1, &c->stride)) ||
	    (rc = gf_layer_arg_int(a, 4, "pad", 0, 0, &pad)) || (rc = gf_layer_arg_bool(a, "bias", 1, &c->bias)) ||
	    (rc = gf_sn_parse(a, &c->sn)) || (rc = gf_layer_arg_int(a, -1, "kh", k, 1, &c->kh)) ||
	    (rc = gf_layer_arg_int(a, -1, "kw", k, 1, &c->kw)) || (rc = gf_layer_arg_int(a, -1, "ph", pad, 0, &c->ph)) ||
	    (rc = gf_layer_arg_int(a, -1, "pw", pad, 0, &c->pw)) || (rc = gf_layer_arg_int(a, -1, "groups", 1, 1, &c->groups)) ||
	    (rc = gf_eqlr_parse(a, &c->eq, c->sn.on)))
		return rc;
	return 0;
}

static int conv_shapes(gf_layer_net *net, struct layer *l)
{
	struct conv_cfg *c = LAYER_CFG(struct conv_cfg, l);
	const struct node *in = layer_in(net, l);
	char s[96];
	int rc = gf_layer_expect_image(l, in, c->cin);
	if (rc)
		return rc;
	if ((rc = gf_layer_check_groups(net, l, c->groups, c->cin, c->cout)))
		return rc;
	int cg = c->cin / c->groups;   /* input channels per group: the weight's second dimension */
	int64_t h = in->shape[1], w = in->shape[2];
	if (h + 2 * c->ph < c->kh || w + 2 * c->pw < c->kw)
	{
		char k[32];
		snprintf(k, sizeof(k), c->kh == c->kw ? "%d" : "%dx%d", c->kh, c->kw);
		return gf_layer_err(GF_ESHAPE, l, "kernel %s does not fit the padded input %s", k,
		                    gf_layer_shape_str(in, s, sizeof(s)));
	}
	int64_t ho = (h + 2 * c->ph - c->kh) / c->stride + 1, wo = (w + 2 * c->pw - c->kw) / c->stride + 1;
	gf_layer_set_shape(layer_out(net, l), 3, (int64_t[]){ c->cout, ho, wo });
	gf_layer_param(l, gf_sn_weight_name(&c->sn), 4, (int64_t[]){ c->cout, cg, c->kh, c->kw });
	if (c->bias)
		gf_layer_param(l, "bias", 1, (int64_t[]){ c->cout });
	gf_eqlr_shapes(l, &c->eq, l->param[0].n, c->bias ? (size_t)c->cout : 0, (double)cg * (c->kh * c->kw));
	return gf_sn_shapes(net, l, &c->sn, 1, c->cout, cg * c->kh * c->kw);
}

static int conv_init(gf_layer_net *net, struct layer *l, gf_rng *rng, float *host)
{
	const struct conv_cfg *c = LAYER_CCFG(struct conv_cfg, l);
	if (c->eq.on)
		return gf_eqlr_init(net, l, &c->eq, rng, host);
	int rc = gf_layer_init_fan_in(net, l, rng, host, (double)(c->cin / c->groups) * (c->kh * c->kw));
	return rc ? rc : gf_sn_init(net, l, &c->sn, rng, host);
}

static gf_conv_desc conv_desc(const gf_layer_net *net, const struct layer *l, int B)
{
	const struct conv_cfg *c = LAYER_CCFG(struct conv_cfg, l);
	gf_conv_desc d = gf_layer_conv_desc(layer_in(net, l), layer_out(net, l), c->kh, c->stride, c->ph, B);
	d.kw = c->kw;
	d.pw = c->pw;
	d.up = c->up;
	d.groups = c->groups;
	return d;
}

static int conv_forward(gf_layer_net *net, struct layer *l, int B, unsigned mode)
{
	const struct conv_cfg *c = LAYER_CCFG(struct conv_cfg, l);
	gf_conv_desc d = conv_desc(net, l, B);
	const float *w, *b = layer_param(net, l, 1);
	int rc = c->eq.on ? gf_eqlr_weight(net, l, &c->eq, &w, &b) : gf_sn_weight(net, l, &c->sn, mode, &w);
	return rc ? rc : net->be->ops->conv2d_forward(net->be, layer_out(net, l)->data, layer_in(net, l)->data, w, b, &d);
}

static int conv_backward(gf_layer_net *net, struct layer *l, int B, gf_layer_grad *g)
{
	const struct conv_cfg *c = LAYER_CCFG(struct conv_cfg, l);
	const struct node *out = layer_out(net, l);
	gf_conv_desc d = conv_desc(net, l, B);
	if (c->eq.on) {   /* the scaled weight's and bias's gradients, scaled back */
		int rc = net->be->ops->conv2d_backward(net->be, g->dx, g->dw ? gf_eqlr_scratch(net, l, &c->eq, 0) : NULL,
		                                       g->dw && c->bias ? gf_eqlr_scratch(net, l, &c->eq, 1) : NULL, out->grad,
		                                       layer_in(net, l)->data, gf_eqlr_used(net, l, &c->eq, 0), &d, 0);
		if (!rc && g->dw)
			rc = gf_eqlr_fold(net, l, &c->eq, 0, g->acc);
		if (!rc && g->dw && c->bias)
			rc = gf_eqlr_fold(net, l, &c->eq, 1, g->acc);
		return rc;
	}
	if (!c->sn.on)
		return net->be->ops->conv2d_backward(net->be, g->dx, g->dw ? layer_grad(net, l, 0) : NULL,
		                                     g->dw ? layer_grad(net, l, 1) : NULL, out->grad, layer_in(net, l)->data,
		                                     layer_param(net, l, 0), &d, g->acc);
	/* sn: the weight gradient of w / sigma into scratch, then through sigma */
	int acc, rc;
	float *dw = gf_sn_dweight(net, l, &c->sn, g, &acc);
	if ((rc = net->be->ops->conv2d_backward(net->be, g->dx, dw, NULL, out->grad, layer_in(net, l)->data,
	                                        gf_sn_used(net, l, &c->sn), &d, acc)) ||
	    (rc = gf_sn_backward(net, l, &c->sn, g)))
		return rc;
	if (g->dw && c->bias)
		return net->be->ops->bias_grad(net->be, layer_grad(net, l, 1), out->grad, B, c->cout,
		                               (int)(out->numel / (size_t)c->cout), g->acc);
	return 0;
}

/* J t = conv(t, w) without the bias (with up = 2 the sub-pixel form, as
 * the forward); S = <t, conv^T(dy)> gives dW += the weight gradient of
 * (dy, t). Both are the forward's and backward's own ops, so Winograd and
 * the sub-pixel form serve the double backward as they serve the step. */
static int conv_backward2(gf_layer_net *net, struct layer *l, int B, gf_layer_grad2 *g)
{
	const struct conv_cfg *c = LAYER_CCFG(struct conv_cfg, l);
	gf_conv_desc d = conv_desc(net, l, B);
	const float *t = layer_in(net, l)->tan;
	const float *w = c->eq.on ? gf_eqlr_used(net, l, &c->eq, 0) : gf_sn_used(net, l, &c->sn);
	int rc, acc;
	if (g->tout && (rc = net->be->ops->conv2d_forward(net->be, g->tout, t, w, NULL, &d)))
		return rc;
	if (!g->dw)
		return 0;
	if (c->eq.on)
		return (rc = net->be->ops->conv2d_backward(net->be, NULL, gf_eqlr_scratch(net, l, &c->eq, 0), NULL,
		                                           layer_out(net, l)->grad, t, w, &d, 0))
		               ? rc
		               : gf_eqlr_fold(net, l, &c->eq, 0, 1);
	gf_layer_grad gw = { .dw = 1, .acc = 1 };
	float *dw = gf_sn_dweight(net, l, &c->sn, &gw, &acc);
	if ((rc = net->be->ops->conv2d_backward(net->be, NULL, dw, NULL, layer_out(net, l)->grad, t, w, &d, acc)))
		return rc;
	return gf_sn_backward(net, l, &c->sn, &gw);
}

static double conv_flops(const gf_layer_net *net, const struct layer *l, int B, int exec)
{
	const struct conv_cfg *c = LAYER_CCFG(struct conv_cfg, l);
	double taps = (exec && c->up == 2) ? 4.0 : (double)c->kh * c->kw;
	return 2.0 * B * (double)layer_out(net, l)->numel * (c->cin / c->groups) * taps;
}

static const char *conv_note(const struct layer *l)
{
	return LAYER_CCFG(struct conv_cfg, l)->up == 2 ? "  sub-pixel (upsample fused)" : NULL;
}

/* nearest upsample x2 -> 3x3/1/1 conv: the sub-pixel conv */
static int conv_absorb_input(const gf_layer_net *net, struct layer *l, const struct layer *prev)
{
	struct conv_cfg *c = LAYER_CFG(struct conv_cfg, l);
	if (prev->as_upsample != 2 || c->kh != 3 || c->kw != 3 || c->stride != 1 || c->ph != 1 || c->pw != 1 || c->up != 1 ||
	    c->groups != 1 || !(net->be->caps & GF_CAP_CONV_UP2))
		return 0;
	c->up = 2;
	return 1;
}

const gf_layer_kind gf_layer_conv = {
	.name = "conv",
	.aliases = (const char *const[]){ "conv2d", NULL },
	.min_pos = 3,
	.max_pos = 5,
	.keys = { "stride", "pad", "bias", "init", "init_gain", "sn", "kh", "kw", "ph", "pw", "groups", "eqlr", "lr_mul",
	          "bias_init" },
	.parse = conv_parse,
	.shapes = conv_shapes,
	.init = conv_init,
	.forward = conv_forward,
	.backward = conv_backward,
	.backward2 = conv_backward2,
	.flops = conv_flops,
	.note = conv_note,
	.absorb_input = conv_absorb_input,
	.absorbed_note = "  fused into the next conv",
};
