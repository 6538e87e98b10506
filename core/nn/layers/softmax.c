/* softmax: over the features of a flat input, PyTorch's nn.Softmax(dim = 1).
 *
 *   {"softmax"}
 *
 * Backend softmax_forward / softmax_backward (the gradient from the
 * output: dx = y * (dy - sum(dy * y))). docs/nn.md "Adding a layer" walks
 * through this kind from the Lua key to its kernels and tests. */
#include "../layer_kind.h"

static int softmax_shapes(gf_layer_net *net, struct layer *l)
{
	const struct node *in = layer_in(net, l);
	char s[96];
	if (in->ndim != 1)
		return gf_layer_err(GF_ESHAPE, l, "expects a flat input, got %s", gf_layer_shape_str(in, s, sizeof(s)));
	gf_layer_set_shape(layer_out(net, l), 1, in->shape);
	return 0;
}

static int softmax_forward(gf_layer_net *net, struct layer *l, int B, unsigned mode)
{
	(void)mode;   /* the same in training and eval */
	const struct node *in = layer_in(net, l);
	return net->be->ops->softmax_forward(net->be, layer_out(net, l)->data, in->data, B, (int)in->numel);
}

static int softmax_backward(gf_layer_net *net, struct layer *l, int B, gf_layer_grad *g)
{
	const struct node *out = layer_out(net, l);
	if (!g->dx)
		return 0;
	return net->be->ops->softmax_backward(net->be, g->dx, out->grad, out->data, B, (int)layer_in(net, l)->numel);
}

const gf_layer_kind gf_layer_softmax = {
	.name = "softmax",
	.shapes = softmax_shapes,
	.forward = softmax_forward,
	.backward = softmax_backward,
};
