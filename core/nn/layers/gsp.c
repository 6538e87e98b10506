/* gsp: global sum pooling over the spatial dimensions, (C, H, W) -> (C),
 * the last step of the SNGAN and BigGAN discriminators before their
 * linear and projection heads: PyTorch's torch.sum(x, dim = (2, 3)).
 *
 *   {"gsp"}
 *
 * Composes existing backend ops: the forward is bias_grad over the batch
 * viewed as one sample of B*C planes (one deterministic sum per plane),
 * the backward broadcasts each plane's gradient back with bias_add onto a
 * zeroed input gradient. */
#include "../layer_kind.h"

static int gsp_shapes(gf_layer_net *net, struct layer *l)
{
	const struct node *in = layer_in(net, l);
	int rc = gf_layer_expect_image(l, in, 0);
	if (rc)
		return rc;
	gf_layer_set_shape(layer_out(net, l), 1, in->shape);
	return 0;
}

static int gsp_forward(gf_layer_net *net, struct layer *l, int B, unsigned mode)
{
	(void)mode;
	const struct node *in = layer_in(net, l);
	int planes = B * (int)in->shape[0], hw = (int)(in->shape[1] * in->shape[2]);
	return net->be->ops->bias_grad(net->be, layer_out(net, l)->data, in->data, 1, planes, hw, 0);
}

static int gsp_backward(gf_layer_net *net, struct layer *l, int B, gf_layer_grad *g)
{
	const struct node *in = layer_in(net, l);
	int planes = B * (int)in->shape[0], hw = (int)(in->shape[1] * in->shape[2]);
	int rc;
	if (!g->dx)
		return 0;
	if ((rc = net->be->ops->fill(net->be, g->dx, (size_t)planes * hw, 0.0f)))
		return rc;
	return net->be->ops->bias_add(net->be, g->dx, layer_out(net, l)->grad, 1, planes, hw);
}

static int gsp_backward2(gf_layer_net *net, struct layer *l, int B, gf_layer_grad2 *g)
{
	const struct node *in = layer_in(net, l);
	int planes = B * (int)in->shape[0], hw = (int)(in->shape[1] * in->shape[2]);
	return g->tout ? net->be->ops->bias_grad(net->be, g->tout, in->tan, 1, planes, hw, 0) : 0;
}

const gf_layer_kind gf_layer_gsp = {
	.name = "gsp",
	.shapes = gsp_shapes,
	.forward = gsp_forward,
	.backward = gsp_backward,
	.backward2 = gsp_backward2,
};
