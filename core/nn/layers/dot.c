/* dot: the inner product of two flat sources per sample, scaled: StyleGAN2
 * D's conditioning, which projects its output on the label's mapping
 * (DiscriminatorEpilogue: (x * cmap).sum(dim=1, keepdim=True) / sqrt(cmap_dim)),
 *
 *   {"dot", with = src, scale = 1}        (C), (C) -> (1)
 *
 *   y = scale * <x, with>
 *
 * PyTorch: (x * w).sum(dim=1, keepdim=True) * scale. Backward dx = scale dy
 * with, dwith = scale dy x (row_scale); double backward J t = scale (<t_x,
 * with> + <x, t_with>) and the second-order terms scale dy t_x on with,
 * scale dy t_with on x (the map is bilinear). Backend ops row_dot,
 * row_scale, scale, copy. */
#include "../layer_kind.h"

struct dot_cfg {
	float scale;
	int sdy;   /* save slot: scale * dy (max_batch) */
};
LAYER_CFG_FITS(struct dot_cfg);

static int dot_parse(gf_layer_net *net, struct layer *l, const gf_layer_args *a)
{
	struct dot_cfg *c = LAYER_CFG(struct dot_cfg, l);
	int rc = gf_layer_arg_num(a, -1, "scale", 1.0, &c->scale);
	if (rc)
		return rc;
	const gf_value *with = gf_value_get(a->v, "with");
	if (!with)
		return gf_layer_err(GF_EPARAM, l, "needs with = <the second vector: layer name, position, \"x\">");
	return gf_layer_source(net, l, "with", with, &l->with);
}

static int dot_shapes(gf_layer_net *net, struct layer *l)
{
	struct dot_cfg *c = LAYER_CFG(struct dot_cfg, l);
	const struct node *in = layer_in(net, l), *w = &net->nodes[l->with];
	char s[96], t[96];
	if (!GF_BACKEND_HAS(net->be, row_dot) || !GF_BACKEND_HAS(net->be, row_scale))
		return gf_layer_err(GF_EUNSUPPORTED, l, "the %s backend has no row_dot/row_scale ops", net->be->ops->name);
	if (w->is_label)
		return gf_layer_err(GF_ESHAPE, l, "with must be a vector, not the labels");
	if (in->ndim != 1 || w->ndim != 1 || in->shape[0] != w->shape[0])
		return gf_layer_err(GF_ESHAPE, l, "expects two flat inputs of the same size, got %s and %s",
		                    gf_layer_shape_str(in, s, sizeof(s)), gf_layer_shape_str(w, t, sizeof(t)));
	gf_layer_set_shape(layer_out(net, l), 1, (int64_t[]){ 1 });
	c->sdy = gf_layer_save(l, (size_t)net->max_batch);
	return 0;
}

static int dot_forward(gf_layer_net *net, struct layer *l, int B, unsigned mode)
{
	(void)mode;
	const struct dot_cfg *c = LAYER_CCFG(struct dot_cfg, l);
	const struct node *in = layer_in(net, l);
	float *y = layer_out(net, l)->data;
	int rc = net->be->ops->row_dot(net->be, y, in->data, net->nodes[l->with].data, B, (int)in->numel, 0);
	return rc ? rc : net->be->ops->scale(net->be, y, (size_t)B, c->scale);
}

/* scale * dy of the output, into the save slot */
static int scaled_dy(gf_layer_net *net, const struct layer *l, int B, float **sdy)
{
	const struct dot_cfg *c = LAYER_CCFG(struct dot_cfg, l);
	*sdy = l->save[c->sdy];
	int rc = net->be->ops->copy(net->be, *sdy, layer_out(net, l)->grad, (size_t)B * sizeof(float), GF_COPY_D2D);
	return rc ? rc : net->be->ops->scale(net->be, *sdy, (size_t)B, c->scale);
}

static int dot_backward(gf_layer_net *net, struct layer *l, int B, gf_layer_grad *g)
{
	const struct node *in = layer_in(net, l), *w = &net->nodes[l->with];
	int C = (int)in->numel, rc;
	float *sdy;
	if (!g->dx && !w->needs)
		return 0;
	if ((rc = scaled_dy(net, l, B, &sdy)))
		return rc;
	/* the input and with may share the accumulation scratch: fold the
	 * first in before writing the second */
	if (g->dx) {
		if ((rc = net->be->ops->row_scale(net->be, g->dx, sdy, w->data, B, C, 0)) ||
		    (rc = gf_layer_grad_done(net, l->in, B)))
			return rc;
		g->dx = NULL;
	}
	if (w->needs && ((rc = net->be->ops->row_scale(net->be, gf_layer_grad_dst(net, l->with), sdy, in->data, B, C, 0)) ||
	                 (rc = gf_layer_grad_done(net, l->with, B))))
		return rc;
	return 0;
}

static int dot_backward2(gf_layer_net *net, struct layer *l, int B, gf_layer_grad2 *g)
{
	const struct dot_cfg *c = LAYER_CCFG(struct dot_cfg, l);
	const struct node *in = layer_in(net, l), *w = &net->nodes[l->with];
	gf_backend *be = net->be;
	int C = (int)in->numel, rc;
	if (g->tout && ((rc = be->ops->row_dot(be, g->tout, in->tan, w->data, B, C, 0)) ||
	                (rc = be->ops->row_dot(be, g->tout, in->data, w->tan, B, C, 1)) ||
	                (rc = be->ops->scale(be, g->tout, (size_t)B, c->scale))))
		return rc;
	if (!in->needs && !w->needs)
		return 0;
	float *sdy;
	if ((rc = scaled_dy(net, l, B, &sdy)))
		return rc;
	if (in->needs && ((rc = be->ops->row_scale(be, gf_layer_grad_dst(net, l->in), sdy, w->tan, B, C, 0)) ||
	                  (rc = gf_layer_grad_done(net, l->in, B))))
		return rc;
	if (w->needs && ((rc = be->ops->row_scale(be, gf_layer_grad_dst(net, l->with), sdy, in->tan, B, C, 0)) ||
	                 (rc = gf_layer_grad_done(net, l->with, B))))
		return rc;
	return 0;
}

const gf_layer_kind gf_layer_dot = {
	.name = "dot",
	.min_pos = 0,
	.max_pos = 0,
	.keys = { "with", "scale" },
	.parse = dot_parse,
	.shapes = dot_shapes,
	.forward = dot_forward,
	.backward = dot_backward,
	.backward2 = dot_backward2,
};
