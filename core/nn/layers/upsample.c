/* upsample: nearest-neighbour upsampling of an image by an integer factor,
 * PyTorch's nn.Upsample(scale_factor = scale, mode = "nearest").
 *
 *   {"upsample", scale = 2, mode = "nearest"}
 *
 * Backend upsample_forward / upsample_backward. An unnamed x2 upsample
 * before a 3x3/1/1 conv is absorbed by the conv (conv.c): the layer says
 * what it is through as_upsample. */
#include <string.h>

#include "../layer_kind.h"

struct upsample_cfg {
	int scale;
};
LAYER_CFG_FITS(struct upsample_cfg);

static int upsample_parse(gf_layer_net *net, struct layer *l, const gf_layer_args *a)
{
	(void)net;
	struct upsample_cfg *c = LAYER_CFG(struct upsample_cfg, l);
	int rc, ok;
	if ((rc = gf_layer_arg_int(a, 0, "scale", 2, 1, &c->scale)))
		return rc;
	const char *mode = gf_value_as_str(gf_value_get(a->v, "mode"), "nearest", &ok);
	if (!ok || strcmp(mode, "nearest") != 0)
		return gf_layer_err(GF_EPARAM, l, "only mode = \"nearest\" is supported");
	l->as_upsample = c->scale;
	return 0;
}

static int upsample_shapes(gf_layer_net *net, struct layer *l)
{
	int s = LAYER_CCFG(struct upsample_cfg, l)->scale;
	const struct node *in = layer_in(net, l);
	int rc = gf_layer_expect_image(l, in, 0);
	if (rc)
		return rc;
	gf_layer_set_shape(layer_out(net, l), 3, (int64_t[]){ in->shape[0], in->shape[1] * s, in->shape[2] * s });
	return 0;
}

static int upsample_forward(gf_layer_net *net, struct layer *l, int B, unsigned mode)
{
	(void)mode;
	const struct node *in = layer_in(net, l);
	return net->be->ops->upsample_forward(net->be, layer_out(net, l)->data, in->data, B * (int)in->shape[0],
	                                      (int)in->shape[1], (int)in->shape[2], LAYER_CCFG(struct upsample_cfg, l)->scale);
}

static int upsample_backward(gf_layer_net *net, struct layer *l, int B, gf_layer_grad *g)
{
	const struct node *in = layer_in(net, l);
	if (!g->dx)
		return 0;
	return net->be->ops->upsample_backward(net->be, g->dx, layer_out(net, l)->grad, B * (int)in->shape[0],
	                                       (int)in->shape[1], (int)in->shape[2],
	                                       LAYER_CCFG(struct upsample_cfg, l)->scale);
}

static int upsample_backward2(gf_layer_net *net, struct layer *l, int B, gf_layer_grad2 *g)
{
	const struct node *in = layer_in(net, l);
	if (!g->tout)
		return 0;
	return net->be->ops->upsample_forward(net->be, g->tout, in->tan, B * (int)in->shape[0], (int)in->shape[1],
	                                      (int)in->shape[2], LAYER_CCFG(struct upsample_cfg, l)->scale);
}

const gf_layer_kind gf_layer_upsample = {
	.name = "upsample",
	.min_pos = 0,
	.max_pos = 1,
	.keys = { "scale", "mode" },
	.parse = upsample_parse,
	.shapes = upsample_shapes,
	.forward = upsample_forward,
	.backward = upsample_backward,
	.backward2 = upsample_backward2,
};
