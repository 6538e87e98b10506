/* norm2: StyleGAN2's normalize_2nd_moment (the mapping network's input
 * normalisation of z and of the class embedding),
 *
 *   {"norm2", eps = 1e-8}        (C) -> (C)
 *
 *   y = x * r,  r = 1 / sqrt(mean_c x^2 + eps)    per sample
 *
 * PyTorch: x * (x.square().mean(dim=1, keepdim=True) + eps).rsqrt().
 * Backward: dx = r (dy - y <y, dy> / C). Backend ops row_dot, row_scale,
 * rsqrt_eps, scale, axpy: no op of its own. No double backward: g_step's
 * pl (the path length w.r.t. z, through the mapping network) refuses a
 * network with it, naming the layer; D's label mapping (cmap) is not
 * downstream of the image, so R1 is not concerned. */
#include "../layer_kind.h"

struct norm2_cfg {
	float eps;
	int r;     /* save slot: r (max_batch), then <y, dy> (max_batch) */
	int tmp;   /* save slot: (max_batch, C) */
};
LAYER_CFG_FITS(struct norm2_cfg);

static int norm2_parse(gf_layer_net *net, struct layer *l, const gf_layer_args *a)
{
	(void)net;
	struct norm2_cfg *c = LAYER_CFG(struct norm2_cfg, l);
	int rc = gf_layer_arg_num(a, -1, "eps", 1e-8, &c->eps);
	if (rc)
		return rc;
	if (!(c->eps > 0.0f))
		return gf_layer_err(GF_EPARAM, l, "eps must be > 0");
	return 0;
}

static int norm2_shapes(gf_layer_net *net, struct layer *l)
{
	struct norm2_cfg *c = LAYER_CFG(struct norm2_cfg, l);
	const struct node *in = layer_in(net, l);
	char s[96];
	if (!GF_BACKEND_HAS(net->be, row_dot) || !GF_BACKEND_HAS(net->be, row_scale) || !GF_BACKEND_HAS(net->be, rsqrt_eps))
		return gf_layer_err(GF_EUNSUPPORTED, l, "the %s backend has no row_dot/row_scale/rsqrt_eps ops",
		                    net->be->ops->name);
	if (in->ndim != 1)
		return gf_layer_err(GF_ESHAPE, l, "expects a flat input (C), got %s", gf_layer_shape_str(in, s, sizeof(s)));
	gf_layer_set_shape(layer_out(net, l), 1, in->shape);
	c->r = gf_layer_save(l, 2 * (size_t)net->max_batch);
	c->tmp = gf_layer_save(l, (size_t)net->max_batch * in->numel);
	return 0;
}

static int norm2_forward(gf_layer_net *net, struct layer *l, int B, unsigned mode)
{
	(void)mode;
	const struct norm2_cfg *c = LAYER_CCFG(struct norm2_cfg, l);
	const struct node *in = layer_in(net, l);
	gf_backend *be = net->be;
	int C = (int)in->numel, rc;
	float *r = l->save[c->r];
	if ((rc = be->ops->row_dot(be, r, in->data, in->data, B, C, 0)) || (rc = be->ops->scale(be, r, (size_t)B, 1.0f / (float)C)) ||
	    (rc = be->ops->rsqrt_eps(be, r, r, (size_t)B, c->eps)))
		return rc;
	return be->ops->row_scale(be, layer_out(net, l)->data, r, in->data, B, C, 0);
}

static int norm2_backward(gf_layer_net *net, struct layer *l, int B, gf_layer_grad *g)
{
	const struct norm2_cfg *c = LAYER_CCFG(struct norm2_cfg, l);
	const struct node *out = layer_out(net, l);
	gf_backend *be = net->be;
	int C = (int)out->numel, rc;
	if (!g->dx)
		return 0;
	float *r = l->save[c->r], *b = r + net->max_batch, *tmp = l->save[c->tmp];
	/* tmp = dy - y <y, dy> / C, dx = r tmp */
	if ((rc = be->ops->row_dot(be, b, out->data, out->grad, B, C, 0)) ||
	    (rc = be->ops->scale(be, b, (size_t)B, -1.0f / (float)C)) ||
	    (rc = be->ops->row_scale(be, tmp, b, out->data, B, C, 0)) ||
	    (rc = be->ops->axpy(be, tmp, out->grad, (size_t)B * (size_t)C, 1.0f)))
		return rc;
	return be->ops->row_scale(be, g->dx, r, tmp, B, C, 0);
}

const gf_layer_kind gf_layer_norm2 = {
	.name = "norm2",
	.aliases = (const char *const[]){ "normalize_2nd_moment", NULL },
	.min_pos = 0,
	.max_pos = 0,
	.keys = { "eps" },
	.parse = norm2_parse,
	.shapes = norm2_shapes,
	.forward = norm2_forward,
	.backward = norm2_backward,
};
