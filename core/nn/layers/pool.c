/* maxpool and avgpool: PyTorch's nn.MaxPool2d(k, stride, pad) and
 * nn.AvgPool2d(k, stride, pad, count_include_pad = ...).
 *
 *   {"maxpool", k, stride = k, pad = 0}
 *   {"avgpool", k, stride = k, pad = 0, count_include_pad = true}
 *
 * count_include_pad = false divides each window by the positions inside
 * the input (Inception's average poolings).
 *
 * Two kinds in one file because they are one backend op with a flag
 * (pooling_forward / pooling_backward, gf_pooling_desc.max); max pooling
 * also saves the argmax positions for backward. */
#include "../layer_kind.h"

struct pool_cfg {
	int k, stride, pad;
	int max;   /* the kind's variant: 1 max pooling, 0 average */
	int include_pad;   /* avgpool: count padded zeros in the divisor */
	int idx;   /* max: save slot of the argmax positions */
};
LAYER_CFG_FITS(struct pool_cfg);

static int pool_parse(gf_layer_net *net, struct layer *l, const gf_layer_args *a)
{
	(void)net;
	struct pool_cfg *c = LAYER_CFG(struct pool_cfg, l);
	int rc;
	c->max = l->kind->variant;
	if ((rc = gf_layer_arg_int(a, 0, NULL, 0, 1, &c->k)) || (rc = gf_layer_arg_int(a, 1, "stride", c->k, 1, &c->stride)) ||
	    (rc = gf_layer_arg_int(a, 2, "pad", 0, 0, &c->pad)))
		return rc;
	if (!c->max && (rc = gf_layer_arg_bool(a, "count_include_pad", 1, &c->include_pad)))
		return rc;
	return 0;
}

static int pool_shapes(gf_layer_net *net, struct layer *l)
{
	struct pool_cfg *c = LAYER_CFG(struct pool_cfg, l);
	const struct node *in = layer_in(net, l);
	struct node *out = layer_out(net, l);
	char s[96];
	int rc = gf_layer_expect_image(l, in, 0);
	if (rc)
		return rc;
	if (2 * c->pad > c->k)
		return gf_layer_err(GF_EPARAM, l, "pad %d must be at most half the kernel %d", c->pad, c->k);
	int64_t h = in->shape[1], w = in->shape[2];
	if (h + 2 * c->pad < c->k || w + 2 * c->pad < c->k)
		return gf_layer_err(GF_ESHAPE, l, "window %d does not fit the input %s", c->k,
		                    gf_layer_shape_str(in, s, sizeof(s)));
	gf_layer_set_shape(out, 3,
	                   (int64_t[]){ in->shape[0], (h + 2 * c->pad - c->k) / c->stride + 1,
	                                (w + 2 * c->pad - c->k) / c->stride + 1 });
	if (c->max)
		c->idx = gf_layer_save(l, (size_t)net->max_batch * out->numel);   /* int32 */
	return 0;
}

static gf_pooling_desc pool_desc(const gf_layer_net *net, const struct layer *l, int B)
{
	const struct pool_cfg *c = LAYER_CCFG(struct pool_cfg, l);
	const struct node *in = layer_in(net, l), *out = layer_out(net, l);
	gf_pooling_desc d = { B,      (int)in->shape[0], (int)in->shape[1], (int)in->shape[2], (int)out->shape[1],
	                      (int)out->shape[2], c->k, c->k, c->stride, c->stride, c->pad, c->pad, c->max,
	                      !c->max && !c->include_pad };
	return d;
}

static int32_t *argmax(const struct layer *l)
{
	const struct pool_cfg *c = LAYER_CCFG(struct pool_cfg, l);
	return c->max ? l->save[c->idx] : NULL;
}

static int pool_forward(gf_layer_net *net, struct layer *l, int B, unsigned mode)
{
	(void)mode;
	gf_pooling_desc d = pool_desc(net, l, B);
	return net->be->ops->pooling_forward(net->be, layer_out(net, l)->data, argmax(l), layer_in(net, l)->data, &d);
}

static int pool_backward(gf_layer_net *net, struct layer *l, int B, gf_layer_grad *g)
{
	if (!g->dx)
		return 0;
	gf_pooling_desc d = pool_desc(net, l, B);
	return net->be->ops->pooling_backward(net->be, g->dx, layer_out(net, l)->grad, argmax(l), &d);
}

/* Average pooling is linear (J t is its forward on t); max pooling reads
 * t at the forward's argmax positions (backend pooling_gather). */
static int pool_backward2(gf_layer_net *net, struct layer *l, int B, gf_layer_grad2 *g)
{
	if (!g->tout)
		return 0;
	gf_pooling_desc d = pool_desc(net, l, B);
	const float *t = layer_in(net, l)->tan;
	if (!LAYER_CCFG(struct pool_cfg, l)->max)
		return net->be->ops->pooling_forward(net->be, g->tout, NULL, t, &d);
	if (!GF_BACKEND_HAS(net->be, pooling_gather))
		return gf_layer_err(GF_EUNSUPPORTED, l, "the %s backend has no pooling_gather op", net->be->ops->name);
	return net->be->ops->pooling_gather(net->be, g->tout, t, argmax(l), &d);
}

const gf_layer_kind gf_layer_maxpool = {
	.name = "maxpool",
	.min_pos = 1,
	.max_pos = 3,
	.keys = { "stride", "pad" },
	.variant = 1,
	.parse = pool_parse,
	.shapes = pool_shapes,
	.forward = pool_forward,
	.backward = pool_backward,
	.backward2 = pool_backward2,
};

const gf_layer_kind gf_layer_avgpool = {
	.name = "avgpool",
	.min_pos = 1,
	.max_pos = 3,
	.keys = { "stride", "pad", "count_include_pad" },
	.parse = pool_parse,
	.shapes = pool_shapes,
	.forward = pool_forward,
	.backward = pool_backward,
	.backward2 = pool_backward2,
};
