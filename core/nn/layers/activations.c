/* The pointwise activations relu, lrelu, tanh and sigmoid: PyTorch's
 * nn.ReLU, nn.LeakyReLU(slope), nn.Tanh, nn.Sigmoid.
 *
 *   {"relu"}  {"lrelu", slope = 0.01}  {"tanh"}  {"sigmoid"}
 *
 * Four kinds in one file because they are one layer with a different
 * gf_act (the kind's variant): the same parse, shapes, forward
 * (act_forward) and backward (act_backward, from the output). The parse
 * records which activation the layer is (as_act, as_act_param); that is
 * also what a batchnorm before a relu or lrelu reads to absorb it (bn.c). */
#include "../layer_kind.h"

static int act_shapes(gf_layer_net *net, struct layer *l)
{
	const struct node *in = layer_in(net, l);
	gf_layer_set_shape(layer_out(net, l), in->ndim, in->shape);
	return 0;
}

static int act_forward(gf_layer_net *net, struct layer *l, int B, unsigned mode)
{
	(void)mode;
	const struct node *in = layer_in(net, l);
	return net->be->ops->act_forward(net->be, layer_out(net, l)->data, in->data, (size_t)B * in->numel, l->as_act,
	                                 l->as_act_param);
}

static int act_backward(gf_layer_net *net, struct layer *l, int B, gf_layer_grad *g)
{
	const struct node *out = layer_out(net, l);
	if (!g->dx)
		return 0;
	return net->be->ops->act_backward(net->be, g->dx, out->grad, out->data, (size_t)B * layer_in(net, l)->numel,
	                                  l->as_act, l->as_act_param);
}

/* J t = t act'(x) (act_backward on t); the backward dy act'(x) depends on
 * x where act'' is not zero: tanh and sigmoid add t dy act''(x) to the
 * input's gradient. */
static int act_backward2(gf_layer_net *net, struct layer *l, int B, gf_layer_grad2 *g)
{
	const struct node *in = layer_in(net, l), *out = layer_out(net, l);
	size_t n = (size_t)B * in->numel;
	int rc;
	if (g->tout && (rc = net->be->ops->act_backward(net->be, g->tout, in->tan, out->data, n, l->as_act, l->as_act_param)))
		return rc;
	if ((l->as_act != GF_ACT_TANH && l->as_act != GF_ACT_SIGMOID) || !in->needs)
		return 0;
	if (!GF_BACKEND_HAS(net->be, act_backward2))
		return gf_layer_err(GF_EUNSUPPORTED, l, "the %s backend has no act_backward2 op", net->be->ops->name);
	if ((rc = net->be->ops->act_backward2(net->be, gf_layer_grad_dst(net, l->in), in->tan, out->grad, out->data, n,
	                                      l->as_act, l->as_act_param)))
		return rc;
	return gf_layer_grad_done(net, l->in, B);
}

/* Which activation the layer is (the kind's variant), and its slope. */
static int act_parse(gf_layer_net *net, struct layer *l, const gf_layer_args *a)
{
	(void)net;
	l->as_act = (gf_act)l->kind->variant;
	if (l->as_act != GF_ACT_LRELU)
		return 0;
	int rc = gf_layer_arg_num(a, 0, "slope", 0.01, &l->as_act_param);
	if (rc)
		return rc;
	if (!(l->as_act_param >= 0.0f))
		return gf_layer_err(GF_EPARAM, l, "negative slope %g must be >= 0", (double)l->as_act_param);
	return 0;
}

#define ACT_FUNCTIONS                                                                                      \
	.parse = act_parse, .shapes = act_shapes, .forward = act_forward, .backward = act_backward,           \
	.backward2 = act_backward2

const gf_layer_kind gf_layer_relu = { .name = "relu", .variant = GF_ACT_RELU, ACT_FUNCTIONS };

const gf_layer_kind gf_layer_lrelu = {
	.name = "lrelu",
	.aliases = (const char *const[]){ "leaky_relu", "leakyrelu", NULL },
	.max_pos = 1,
	.keys = { "slope" },
	.variant = GF_ACT_LRELU,
	ACT_FUNCTIONS,
};

const gf_layer_kind gf_layer_tanh = { .name = "tanh", .variant = GF_ACT_TANH, ACT_FUNCTIONS };

const gf_layer_kind gf_layer_sigmoid = { .name = "sigmoid", .variant = GF_ACT_SIGMOID, ACT_FUNCTIONS };
