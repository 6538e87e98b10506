/* split: features from..to-1 of a flat input, (F) -> (to - from): the
 * chunks of z that BigGAN hands to each block ("hierarchical latent
 * space"): PyTorch's x[:, from:to] (torch.split / narrow along dim 1).
 *
 *   {"split", from, to}   or   {"split", from = 20, to = 40}   (alias slice)
 *
 * 0-based, `to` excluded, as a Python slice. Composes existing backend ops:
 * a strided copy forward (copy2d), and backward the same copy into a
 * zeroed input gradient (the engine sums the gradients of several splits
 * of one source). */
#include "../layer_kind.h"

struct split_cfg {
	int from, to;
};
LAYER_CFG_FITS(struct split_cfg);

static int split_parse(gf_layer_net *net, struct layer *l, const gf_layer_args *a)
{
	(void)net;
	struct split_cfg *c = LAYER_CFG(struct split_cfg, l);
	int rc;
	if ((!gf_layer_arg(a, 0) && !gf_value_get(a->v, "from")) || (!gf_layer_arg(a, 1) && !gf_value_get(a->v, "to")))
		return gf_layer_err(GF_EPARAM, l, "needs from and to (features from..to-1, 0-based)");
	if ((rc = gf_layer_arg_int(a, 0, "from", 0, 0, &c->from)) || (rc = gf_layer_arg_int(a, 1, "to", 0, 1, &c->to)))
		return rc;
	if (c->to <= c->from)
		return gf_layer_err(GF_EPARAM, l, "to = %d must be greater than from = %d", c->to, c->from);
	return 0;
}

static int split_shapes(gf_layer_net *net, struct layer *l)
{
	const struct split_cfg *c = LAYER_CCFG(struct split_cfg, l);
	const struct node *in = layer_in(net, l);
	char s[96];
	if (in->ndim != 1)
		return gf_layer_err(GF_ESHAPE, l, "expects a flat input, got %s (add a flatten)",
		                    gf_layer_shape_str(in, s, sizeof(s)));
	if (c->to > in->shape[0])
		return gf_layer_err(GF_ESHAPE, l, "range %d..%d does not fit the input's %lld features", c->from, c->to,
		                    (long long)in->shape[0]);
	gf_layer_set_shape(layer_out(net, l), 1, (int64_t[]){ c->to - c->from });
	return 0;
}

static int split_forward(gf_layer_net *net, struct layer *l, int B, unsigned mode)
{
	(void)mode;
	const struct split_cfg *c = LAYER_CCFG(struct split_cfg, l);
	const struct node *in = layer_in(net, l);
	size_t w = (size_t)(c->to - c->from);
	return net->be->ops->copy2d(net->be, layer_out(net, l)->data, w, in->data + c->from, in->numel, (size_t)B, w, 0);
}

static int split_backward(gf_layer_net *net, struct layer *l, int B, gf_layer_grad *g)
{
	const struct split_cfg *c = LAYER_CCFG(struct split_cfg, l);
	const struct node *in = layer_in(net, l);
	size_t w = (size_t)(c->to - c->from);
	int rc;
	if (!g->dx)
		return 0;
	if ((rc = net->be->ops->fill(net->be, g->dx, (size_t)B * in->numel, 0.0f)))
		return rc;
	return net->be->ops->copy2d(net->be, g->dx + c->from, in->numel, layer_out(net, l)->grad, w, (size_t)B, w, 0);
}

static int split_backward2(gf_layer_net *net, struct layer *l, int B, gf_layer_grad2 *g)
{
	const struct split_cfg *c = LAYER_CCFG(struct split_cfg, l);
	const struct node *in = layer_in(net, l);
	size_t w = (size_t)(c->to - c->from);
	if (!g->tout)
		return 0;
	return net->be->ops->copy2d(net->be, g->tout, w, in->tan + c->from, in->numel, (size_t)B, w, 0);
}

const gf_layer_kind gf_layer_split = {
	.name = "split",
	.aliases = (const char *const[]){ "slice", NULL },
	.min_pos = 0,
	.max_pos = 2,
	.keys = { "from", "to" },
	.parse = split_parse,
	.shapes = split_shapes,
	.forward = split_forward,
	.backward = split_backward,
	.backward2 = split_backward2,
};
