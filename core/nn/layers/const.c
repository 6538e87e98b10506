/* const: StyleGAN2's learned constant input (SynthesisBlock's const at
 * 4x4), the same (C, H, W) tensor for every sample:
 *
 *   {"const", channels, height, width}        any input -> (C, H, W)
 *
 * The input only gives the batch (G's w, typically input = "x"); it gets
 * no gradient (zero). Parameter const (C, H, W), initialised N(0, 1) as
 * StyleGAN2-ADA's torch.randn. PyTorch: const.unsqueeze(0).repeat(B, 1, 1, 1).
 * Forward fill + bias_add (the constant as a "bias" of B rows), backward
 * bias_grad (the sum over the batch); the output does not depend on the
 * input, so the double backward's tangent is zero. */
#include "../layer_kind.h"

struct const_cfg {
	int c, h, w;
};
LAYER_CFG_FITS(struct const_cfg);

static int const_parse(gf_layer_net *net, struct layer *l, const gf_layer_args *a)
{
	(void)net;
	struct const_cfg *c = LAYER_CFG(struct const_cfg, l);
	int rc;
	if ((rc = gf_layer_arg_int(a, 0, "channels", 0, 1, &c->c)) || (rc = gf_layer_arg_int(a, 1, "height", 0, 1, &c->h)) ||
	    (rc = gf_layer_arg_int(a, 2, "width", 0, 1, &c->w)))
		return rc;
	return 0;
}

static int const_shapes(gf_layer_net *net, struct layer *l)
{
	const struct const_cfg *c = LAYER_CCFG(struct const_cfg, l);
	if (layer_in(net, l)->is_label)
		return gf_layer_err(GF_ESHAPE, l, "cannot take the labels as input (its input gives the batch: use input = \"x\")");
	int64_t shape[3] = { c->c, c->h, c->w };
	gf_layer_set_shape(layer_out(net, l), 3, shape);
	gf_layer_param(l, "const", 3, shape);
	return 0;
}

static int const_init(gf_layer_net *net, struct layer *l, gf_rng *rng, float *host)
{
	gf_rng_normal(rng, host, l->param[0].n, 0.0f, 1.0f);
	return gf_layer_upload(net, l, 0, host);
}

static int const_forward(gf_layer_net *net, struct layer *l, int B, unsigned mode)
{
	(void)mode;
	struct node *out = layer_out(net, l);
	int rc = net->be->ops->fill(net->be, out->data, (size_t)B * out->numel, 0.0f);
	return rc ? rc : net->be->ops->bias_add(net->be, out->data, layer_param(net, l, 0), B, (int)out->numel, 1);
}

static int const_backward(gf_layer_net *net, struct layer *l, int B, gf_layer_grad *g)
{
	const struct node *out = layer_out(net, l);
	int rc;
	if (g->dx && (rc = net->be->ops->fill(net->be, g->dx, (size_t)B * layer_in(net, l)->numel, 0.0f)))
		return rc;
	if (!g->dw)
		return 0;
	return net->be->ops->bias_grad(net->be, layer_grad(net, l, 0), out->grad, B, (int)out->numel, 1, g->acc);
}

static int const_backward2(gf_layer_net *net, struct layer *l, int B, gf_layer_grad2 *g)
{
	const struct node *out = layer_out(net, l);
	return g->tout ? net->be->ops->fill(net->be, g->tout, (size_t)B * out->numel, 0.0f) : 0;
}

const gf_layer_kind gf_layer_const = {
	.name = "const",
	.aliases = (const char *const[]){ "constant", NULL },
	.min_pos = 3,
	.max_pos = 3,
	.keys = { "channels", "height", "width" },
	.parse = const_parse,
	.shapes = const_shapes,
	.init = const_init,
	.forward = const_forward,
	.backward = const_backward,
	.backward2 = const_backward2,
};
