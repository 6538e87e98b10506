/* tconv: 2-d transposed convolution with a square kernel, PyTorch's
 * nn.ConvTranspose2d(in, out, k, stride, pad, output_padding, bias = bias,
 * groups = groups) with the weight (in, out / groups, k, k).
 *
 *   {"tconv", in, out, k, stride = 1, pad = 0, output_padding = 0, bias = true, init = ..., sn = false,
 *    groups = 1}
 *
 * A transposed conv is the data gradient of the conv from its output to
 * its input, so it runs on the backend's conv ops with input and output
 * swapped: forward = conv2d_backward (data), input gradient =
 * conv2d_forward, weight gradient = conv2d_backward (filter); the bias
 * through bias_add / bias_grad. sn = true: spectral_norm(nn.ConvTranspose2d(
 * ...)), which normalises along dim 1: the weight read as (in, out/g, k*k)
 * (sn.c). groups = g: g independent transposed convolutions in/g -> out/g,
 * the grouped conv swapped (GF_CAP_CONV_GROUPS); g = in = out on a (C, 1,
 * 1) input is R3GAN's generative basis, a learned k x k image per channel
 * scaled by the input. */
#include "sn.h"

struct tconv_cfg {
	int cin, cout, k, stride, pad, opad, bias, groups;
	struct gf_sn sn;
};
LAYER_CFG_FITS(struct tconv_cfg);

static int tconv_parse(gf_layer_net *net, struct layer *l, const gf_layer_args *a)
{
	(void)net;
	struct tconv_cfg *c = LAYER_CFG(struct tconv_cfg, l);
	int rc;
	if ((rc = gf_layer_arg_int(a, 0, NULL, 0, 1, &c->cin)) || (rc = gf_layer_arg_int(a, 1, NULL, 0, 1, &c->cout)) ||
	    (rc = gf_layer_arg_int(a, 2, NULL, 0, 1, &c->k)) || (rc = gf_layer_arg_int(a, 3, "stride", 1, 1, &c->stride)) ||
	    (rc = gf_layer_arg_int(a, 4, "pad", 0, 0, &c->pad)) || (rc = gf_layer_arg_bool(a, "bias", 1, &c->bias)) ||
	    (rc = gf_layer_arg_int(a, 5, "output_padding", 0, 0, &c->opad)) || (rc = gf_sn_parse(a, &c->sn)) ||
	    (rc = gf_layer_arg_int(a, -1, "groups", 1, 1, &c->groups)))
		return rc;
	return 0;
}

static int tconv_shapes(gf_layer_net *net, struct layer *l)
{
	struct tconv_cfg *c = LAYER_CFG(struct tconv_cfg, l);
	const struct node *in = layer_in(net, l);
	char s[96];
	int rc = gf_layer_expect_image(l, in, c->cin);
	if (rc)
		return rc;
	if ((rc = gf_layer_check_groups(net, l, c->groups, c->cin, c->cout)))
		return rc;
	if (c->opad >= c->stride && c->opad >= 1)
		return gf_layer_err(GF_EPARAM, l, "output_padding %d must be smaller than the stride %d", c->opad, c->stride);
	int64_t h = in->shape[1], w = in->shape[2];
	int64_t ho = (h - 1) * c->stride - 2 * c->pad + c->k + c->opad;
	int64_t wo = (w - 1) * c->stride - 2 * c->pad + c->k + c->opad;
	if (ho < 1 || wo < 1)
		return gf_layer_err(GF_ESHAPE, l, "output would be empty for input %s", gf_layer_shape_str(in, s, sizeof(s)));
	gf_layer_set_shape(layer_out(net, l), 3, (int64_t[]){ c->cout, ho, wo });
	gf_layer_param(l, gf_sn_weight_name(&c->sn), 4, (int64_t[]){ c->cin, c->cout / c->groups, c->k, c->k });
	if (c->bias)
		gf_layer_param(l, "bias", 1, (int64_t[]){ c->cout });
	return gf_sn_shapes(net, l, &c->sn, c->cin, c->cout / c->groups, c->k * c->k);
}

static int tconv_init(gf_layer_net *net, struct layer *l, gf_rng *rng, float *host)
{
	/* PyTorch's fan_in is weight.size(1) * k * k: the output channels of a group */
	const struct tconv_cfg *c = LAYER_CCFG(struct tconv_cfg, l);
	int rc = gf_layer_init_fan_in(net, l, rng, host, (double)(c->cout / c->groups) * (c->k * c->k));
	return rc ? rc : gf_sn_init(net, l, &c->sn, rng, host);
}

/* The conv whose data gradient this layer is: from the output to the input. */
static gf_conv_desc tconv_desc(const gf_layer_net *net, const struct layer *l, int B)
{
	const struct tconv_cfg *c = LAYER_CCFG(struct tconv_cfg, l);
	gf_conv_desc d = gf_layer_conv_desc(layer_out(net, l), layer_in(net, l), c->k, c->stride, c->pad, B);
	d.groups = c->groups;
	return d;
}

static int tconv_forward(gf_layer_net *net, struct layer *l, int B, unsigned mode)
{
	const struct tconv_cfg *c = LAYER_CCFG(struct tconv_cfg, l);
	struct node *out = layer_out(net, l);
	float *b = layer_param(net, l, 1);
	gf_conv_desc d = tconv_desc(net, l, B);
	const float *w;
	int rc = gf_sn_weight(net, l, &c->sn, mode, &w);
	if (!rc)
		rc = net->be->ops->conv2d_backward(net->be, out->data, NULL, NULL, layer_in(net, l)->data, NULL, w, &d, 0);
	if (!rc && b)
		rc = net->be->ops->bias_add(net->be, out->data, b, B, c->cout, (int)(out->numel / (size_t)c->cout));
	return rc;
}

static int tconv_backward(gf_layer_net *net, struct layer *l, int B, gf_layer_grad *g)
{
	const struct tconv_cfg *c = LAYER_CCFG(struct tconv_cfg, l);
	const struct node *out = layer_out(net, l);
	gf_conv_desc d = tconv_desc(net, l, B);
	const float *w = gf_sn_used(net, l, &c->sn);
	int rc, acc;
	float *dw = gf_sn_dweight(net, l, &c->sn, g, &acc);
	if (g->dw) {
		if ((rc = net->be->ops->conv2d_backward(net->be, NULL, dw, NULL, layer_in(net, l)->data, out->grad, w, &d,
		                                        acc)) ||
		    (rc = gf_sn_backward(net, l, &c->sn, g)))
			return rc;
		if (c->bias && (rc = net->be->ops->bias_grad(net->be, layer_grad(net, l, 1), out->grad, B, c->cout,
		                                             (int)(out->numel / (size_t)c->cout), g->acc)))
			return rc;
	}
	if (g->dx)
		return net->be->ops->conv2d_forward(net->be, g->dx, out->grad, w, NULL, &d);
	return 0;
}

/* J t = the transposed conv of t without the bias; S = <t, conv(dy, w)>
 * gives dW += the weight gradient of that conv with dy as its input and t
 * as its output gradient (tconv_backward's with t for x). */
static int tconv_backward2(gf_layer_net *net, struct layer *l, int B, gf_layer_grad2 *g)
{
	const struct tconv_cfg *c = LAYER_CCFG(struct tconv_cfg, l);
	gf_conv_desc d = tconv_desc(net, l, B);
	const float *t = layer_in(net, l)->tan, *w = gf_sn_used(net, l, &c->sn);
	int rc, acc;
	if (g->tout && (rc = net->be->ops->conv2d_backward(net->be, g->tout, NULL, NULL, t, NULL, w, &d, 0)))
		return rc;
	if (!g->dw)
		return 0;
	gf_layer_grad gw = { .dw = 1, .acc = 1 };
	float *dw = gf_sn_dweight(net, l, &c->sn, &gw, &acc);
	if ((rc = net->be->ops->conv2d_backward(net->be, NULL, dw, NULL, t, layer_out(net, l)->grad, w, &d, acc)))
		return rc;
	return gf_sn_backward(net, l, &c->sn, &gw);
}

static double tconv_flops(const gf_layer_net *net, const struct layer *l, int B, int exec)
{
	(void)exec;
	const struct tconv_cfg *c = LAYER_CCFG(struct tconv_cfg, l);
	return 2.0 * B * (double)layer_in(net, l)->numel * (c->cout / c->groups) * c->k * c->k;
}

const gf_layer_kind gf_layer_tconv = {
	.name = "tconv",
	.aliases = (const char *const[]){ "deconv", "convtranspose", "conv_transpose", NULL },
	.min_pos = 3,
	.max_pos = 6,
	.keys = { "stride", "pad", "output_padding", "bias", "init", "init_gain", "sn", "groups" },
	.parse = tconv_parse,
	.shapes = tconv_shapes,
	.init = tconv_init,
	.forward = tconv_forward,
	.backward = tconv_backward,
	.backward2 = tconv_backward2,
	.flops = tconv_flops,
};
