/* concat: its input and a second node (`with`) joined along the channels
 * (dim 1), PyTorch's torch.cat((x, with), 1).
 *
 *   {"concat", with = <layer name, 1-based position, "x">}
 *
 * The only kind with two inputs: forward and backward are strided copies
 * (backend copy2d), and backward writes the gradient of both inputs. */
#include <string.h>

#include "../layer_kind.h"

static int concat_parse(gf_layer_net *net, struct layer *l, const gf_layer_args *a)
{
	const gf_value *with = gf_value_get(a->v, "with");
	if (!with)
		return gf_layer_err(GF_EPARAM, l, "needs with = <layer name, position, \"x\">");
	return gf_layer_source(net, l, "with", with, &l->with);
}

static int concat_shapes(gf_layer_net *net, struct layer *l)
{
	const struct node *in = layer_in(net, l), *b = &net->nodes[l->with];
	char s[96], s2[96];
	int64_t sh[MAX_SDIMS];
	if (b->is_label)
		return gf_layer_err(GF_ESHAPE, l, "cannot concatenate the labels (use an embedding)");
	if (b->ndim != in->ndim)
		return gf_layer_err(GF_ESHAPE, l, "cannot concatenate %s and %s", gf_layer_shape_str(in, s, sizeof(s)),
		                    gf_layer_shape_str(b, s2, sizeof(s2)));
	for (int i = 1; i < in->ndim; i++)
		if (b->shape[i] != in->shape[i])
			return gf_layer_err(GF_ESHAPE, l, "cannot concatenate %s and %s along the channels",
			                    gf_layer_shape_str(in, s, sizeof(s)), gf_layer_shape_str(b, s2, sizeof(s2)));
	memcpy(sh, in->shape, sizeof(sh));
	sh[0] = in->shape[0] + b->shape[0];
	gf_layer_set_shape(layer_out(net, l), in->ndim, sh);
	return 0;
}

static int concat_forward(gf_layer_net *net, struct layer *l, int B, unsigned mode)
{
	(void)mode;
	const struct node *in = layer_in(net, l), *w = &net->nodes[l->with], *out = layer_out(net, l);
	int rc = net->be->ops->copy2d(net->be, out->data, out->numel, in->data, in->numel, (size_t)B, in->numel, 0);
	if (!rc)
		rc = net->be->ops->copy2d(net->be, out->data + in->numel, out->numel, w->data, w->numel, (size_t)B, w->numel, 0);
	return rc;
}

static int concat_backward(gf_layer_net *net, struct layer *l, int B, gf_layer_grad *g)
{
	const struct node *in = layer_in(net, l), *w = &net->nodes[l->with], *out = layer_out(net, l);
	int rc;
	/* both inputs may need the accumulation scratch: fold the first in
	 * before writing the second */
	if (g->dx) {
		if ((rc = net->be->ops->copy2d(net->be, g->dx, in->numel, out->grad, out->numel, (size_t)B, in->numel, 0)) ||
		    (rc = gf_layer_grad_done(net, l->in, B)))
			return rc;
		g->dx = NULL;
	}
	if (w->needs && !w->is_label) {
		float *dwith = gf_layer_grad_dst(net, l->with);
		if ((rc = net->be->ops->copy2d(net->be, dwith, w->numel, out->grad + in->numel, out->numel, (size_t)B, w->numel, 0)) ||
		    (rc = gf_layer_grad_done(net, l->with, B)))
			return rc;
	}
	return 0;
}

/* Linear in both inputs: the tangents concatenated (the engine zeroes the
 * tangent of an input not downstream of x, the label plane of a CD). */
static int concat_backward2(gf_layer_net *net, struct layer *l, int B, gf_layer_grad2 *g)
{
	const struct node *in = layer_in(net, l), *w = &net->nodes[l->with], *out = layer_out(net, l);
	if (!g->tout)
		return 0;
	int rc = net->be->ops->copy2d(net->be, g->tout, out->numel, in->tan, in->numel, (size_t)B, in->numel, 0);
	if (!rc)
		rc = net->be->ops->copy2d(net->be, g->tout + in->numel, out->numel, w->tan, w->numel, (size_t)B, w->numel, 0);
	return rc;
}

const gf_layer_kind gf_layer_concat = {
	.name = "concat",
	.aliases = (const char *const[]){ "cat", NULL },
	.keys = { "with" },
	.parse = concat_parse,
	.shapes = concat_shapes,
	.forward = concat_forward,
	.backward = concat_backward,
	.backward2 = concat_backward2,
};
