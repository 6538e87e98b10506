/* add: its input plus a second node (`with`) of the same shape, the
 * residual sum of ResNet blocks (SNGAN, BigGAN): PyTorch's x + with.
 *
 *   {"add", with = <layer name, 1-based position, "x">}
 *
 * Composes existing backend ops (a copy and copy2d accumulating), so every
 * backend runs it; backward hands the output gradient to both inputs, the
 * first folded in before the second is written, as concat does. */
#include "../layer_kind.h"

static int add_parse(gf_layer_net *net, struct layer *l, const gf_layer_args *a)
{
	const gf_value *with = gf_value_get(a->v, "with");
	if (!with)
		return gf_layer_err(GF_EPARAM, l, "needs with = <layer name, position, \"x\">");
	return gf_layer_source(net, l, "with", with, &l->with);
}

static int add_shapes(gf_layer_net *net, struct layer *l)
{
	const struct node *in = layer_in(net, l), *b = &net->nodes[l->with];
	char s[96], s2[96];
	int same = b->ndim == in->ndim;
	if (b->is_label)
		return gf_layer_err(GF_ESHAPE, l, "cannot add the labels (use an embedding)");
	for (int i = 0; same && i < in->ndim; i++)
		same = b->shape[i] == in->shape[i];
	if (!same)
		return gf_layer_err(GF_ESHAPE, l, "shapes (%d, %s and (%d, %s differ", net->max_batch,
		                    gf_layer_shape_str(in, s, sizeof(s)) + 1, net->max_batch,
		                    gf_layer_shape_str(b, s2, sizeof(s2)) + 1);
	gf_layer_set_shape(layer_out(net, l), in->ndim, in->shape);
	return 0;
}

static int add_forward(gf_layer_net *net, struct layer *l, int B, unsigned mode)
{
	(void)mode;
	const struct node *in = layer_in(net, l), *w = &net->nodes[l->with], *out = layer_out(net, l);
	size_t n = (size_t)B * in->numel;
	int rc = net->be->ops->copy(net->be, out->data, in->data, n * sizeof(float), GF_COPY_D2D);
	if (!rc)
		rc = net->be->ops->copy2d(net->be, out->data, n, w->data, n, 1, n, 1);
	return rc;
}

static int add_backward(gf_layer_net *net, struct layer *l, int B, gf_layer_grad *g)
{
	const struct node *in = layer_in(net, l), *w = &net->nodes[l->with], *out = layer_out(net, l);
	size_t bytes = (size_t)B * in->numel * sizeof(float);
	int rc;
	/* both inputs may need the accumulation scratch (with may even be the
	 * input): fold the first in before writing the second */
	if (g->dx) {
		if ((rc = net->be->ops->copy(net->be, g->dx, out->grad, bytes, GF_COPY_D2D)) ||
		    (rc = gf_layer_grad_done(net, l->in, B)))
			return rc;
		g->dx = NULL;
	}
	if (w->needs) {
		if ((rc = net->be->ops->copy(net->be, gf_layer_grad_dst(net, l->with), out->grad, bytes, GF_COPY_D2D)) ||
		    (rc = gf_layer_grad_done(net, l->with, B)))
			return rc;
	}
	return 0;
}

static int add_backward2(gf_layer_net *net, struct layer *l, int B, gf_layer_grad2 *g)
{
	const struct node *in = layer_in(net, l), *w = &net->nodes[l->with];
	size_t n = (size_t)B * in->numel;
	if (!g->tout)
		return 0;
	int rc = net->be->ops->copy(net->be, g->tout, in->tan, n * sizeof(float), GF_COPY_D2D);
	return rc ? rc : net->be->ops->axpy(net->be, g->tout, w->tan, n, 1.0f);
}

const gf_layer_kind gf_layer_add = {
	.name = "add",
	.keys = { "with" },
	.parse = add_parse,
	.shapes = add_shapes,
	.forward = add_forward,
	.backward = add_backward,
	.backward2 = add_backward2,
};
