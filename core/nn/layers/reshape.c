/* reshape and flatten: a new per-sample shape over the same values in
 * NCHW order, PyTorch's x.view(batch, dims...) and torch.flatten(x, 1).
 *
 *   {"reshape", dims...}  (one dim may be -1)   {"flatten"}
 *
 * Two kinds in one file because flatten is the reshape to (numel): both
 * run as a device copy forward and backward. */
#include <string.h>

#include "../layer_kind.h"

struct reshape_cfg {
	int ndim;
	int64_t dims[MAX_SDIMS];   /* -1: inferred */
};
LAYER_CFG_FITS(struct reshape_cfg);

static int reshape_parse(gf_layer_net *net, struct layer *l, const gf_layer_args *a)
{
	(void)net;
	struct reshape_cfg *c = LAYER_CFG(struct reshape_cfg, l);
	c->ndim = a->npos;
	for (int i = 0; i < a->npos; i++) {
		int ok;
		int64_t d = gf_value_as_int(gf_layer_arg(a, i), 0, &ok);
		if (!ok || (d < 1 && d != -1))
			return gf_layer_err(GF_EPARAM, l, "argument %d must be a positive size or -1", i + 2);
		c->dims[i] = d;
	}
	return 0;
}

static int reshape_shapes(gf_layer_net *net, struct layer *l)
{
	const struct reshape_cfg *c = LAYER_CCFG(struct reshape_cfg, l);
	const struct node *in = layer_in(net, l);
	struct node *out = layer_out(net, l);
	char s[96], s2[96];
	int64_t sh[MAX_SDIMS], known = 1;
	int infer_at = -1;
	memcpy(sh, c->dims, sizeof(sh));
	for (int i = 0; i < c->ndim; i++) {
		if (sh[i] == -1) {
			if (infer_at >= 0)
				return gf_layer_err(GF_EPARAM, l, "only one dimension may be -1");
			infer_at = i;
		} else {
			known *= sh[i];
		}
	}
	if (infer_at >= 0 && known > 0 && in->numel % (size_t)known == 0)
		sh[infer_at] = (int64_t)in->numel / known;
	gf_layer_set_shape(out, c->ndim, sh);
	if (out->numel != in->numel)
		return gf_layer_err(GF_ESHAPE, l, "cannot reshape %s (%zu values) to %s", gf_layer_shape_str(in, s, sizeof(s)),
		                    in->numel, gf_layer_shape_str(out, s2, sizeof(s2)));
	return 0;
}

static int flatten_shapes(gf_layer_net *net, struct layer *l)
{
	gf_layer_set_shape(layer_out(net, l), 1, (int64_t[]){ (int64_t)layer_in(net, l)->numel });
	return 0;
}

static int reshape_forward(gf_layer_net *net, struct layer *l, int B, unsigned mode)
{
	(void)mode;
	const struct node *in = layer_in(net, l);
	return net->be->ops->copy(net->be, layer_out(net, l)->data, in->data, (size_t)B * in->numel * sizeof(float),
	                          GF_COPY_D2D);
}

static int reshape_backward(gf_layer_net *net, struct layer *l, int B, gf_layer_grad *g)
{
	if (!g->dx)
		return 0;
	return net->be->ops->copy(net->be, g->dx, layer_out(net, l)->grad, (size_t)B * layer_in(net, l)->numel * sizeof(float),
	                          GF_COPY_D2D);
}

static int reshape_backward2(gf_layer_net *net, struct layer *l, int B, gf_layer_grad2 *g)
{
	if (!g->tout)
		return 0;
	return net->be->ops->copy(net->be, g->tout, layer_in(net, l)->tan, (size_t)B * layer_in(net, l)->numel * sizeof(float),
	                          GF_COPY_D2D);
}

const gf_layer_kind gf_layer_reshape = {
	.name = "reshape",
	.aliases = (const char *const[]){ "view", NULL },
	.min_pos = 1,
	.max_pos = MAX_SDIMS,
	.parse = reshape_parse,
	.shapes = reshape_shapes,
	.forward = reshape_forward,
	.backward = reshape_backward,
	.backward2 = reshape_backward2,
};

const gf_layer_kind gf_layer_flatten = {
	.name = "flatten",
	.shapes = flatten_shapes,
	.forward = reshape_forward,
	.backward = reshape_backward,
	.backward2 = reshape_backward2,
};
