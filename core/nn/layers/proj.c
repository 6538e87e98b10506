/* proj: the projection discriminator's head (Miyato & Koyama 2018, as in
 * SNGAN and BigGAN): the unconditional output plus the inner product of a
 * class embedding with the feature vector h,
 *
 *   out = in + <embed(y), h>        in (1), h (F), y the labels
 *
 * PyTorch: `self.linear(h) + torch.sum(self.embed(y) * h, 1, keepdim=True)`
 * with embed = nn.Embedding(classes, F) (spectral_norm(...) with sn = true).
 *
 *   {"linear", F, 1, sn = true},
 *   {"proj", classes, F, with = "h", sn = true}
 *
 * The input is the unconditional output (1); `with` names the features h
 * (a flat source of F values, typically gsp's output); the labels are read
 * as embedding's are. Parameter weight (classes, F), initialised N(0, 1)
 * as nn.Embedding. Backend ops embedding_forward/_backward, row_dot and
 * row_scale: forward gathers the rows e = embed(y) and adds row_dot(e, h);
 * backward passes dy to the input, dy * e to h (row_scale) and scatters
 * dy * h into the table. */
#include "sn.h"

struct proj_cfg {
	int classes, dim;
	int rows;          /* save slot: e = weight[y] (B, F), then dy * h (B, F) */
	struct gf_sn sn;
};
LAYER_CFG_FITS(struct proj_cfg);

static int proj_parse(gf_layer_net *net, struct layer *l, const gf_layer_args *a)
{
	struct proj_cfg *c = LAYER_CFG(struct proj_cfg, l);
	int rc;
	if ((!gf_layer_arg(a, 0) && !gf_value_get(a->v, "classes")) || (!gf_layer_arg(a, 1) && !gf_value_get(a->v, "dim")))
		return gf_layer_err(GF_EPARAM, l, "needs classes and dim (the features of `with`)");
	if ((rc = gf_layer_arg_int(a, 0, "classes", 0, 1, &c->classes)) ||
	    (rc = gf_layer_arg_int(a, 1, "dim", 0, 1, &c->dim)) || (rc = gf_sn_parse(a, &c->sn)))
		return rc;
	const gf_value *with = gf_value_get(a->v, "with");
	if (!with)
		return gf_layer_err(GF_EPARAM, l, "needs with = <the features h: layer name, position, \"x\">");
	return gf_layer_source(net, l, "with", with, &l->with);
}

static int proj_shapes(gf_layer_net *net, struct layer *l)
{
	struct proj_cfg *c = LAYER_CFG(struct proj_cfg, l);
	const struct node *in = layer_in(net, l), *h = &net->nodes[l->with];
	char s[96];
	if (!GF_BACKEND_HAS(net->be, row_dot) || !GF_BACKEND_HAS(net->be, row_scale))
		return gf_layer_err(GF_EUNSUPPORTED, l, "the %s backend has no row_dot/row_scale ops", net->be->ops->name);
	if (in->ndim != 1 || in->shape[0] != 1)
		return gf_layer_err(GF_ESHAPE, l, "expects the unconditional output (1) as input, got %s",
		                    gf_layer_shape_str(in, s, sizeof(s)));
	if (h->is_label)
		return gf_layer_err(GF_ESHAPE, l, "with must be the features, not the labels");
	if (h->ndim != 1 || h->shape[0] != c->dim)
		return gf_layer_err(GF_ESHAPE, l, "expects with = features (%d), got %s", c->dim,
		                    gf_layer_shape_str(h, s, sizeof(s)));
	if (net->classes && net->classes != c->classes)
		return gf_layer_err(GF_ESHAPE, l, "has %d classes but the network has %d", c->classes, net->classes);
	net->classes = c->classes;
	net->nodes[net->label_node].consumers++;   /* a third input: the engine then asks for labels */
	gf_layer_set_shape(layer_out(net, l), 1, in->shape);
	gf_layer_param(l, gf_sn_weight_name(&c->sn), 2, (int64_t[]){ c->classes, c->dim });
	c->rows = gf_layer_save(l, 2 * (size_t)net->max_batch * (size_t)c->dim);
	return gf_sn_shapes(net, l, &c->sn, 1, c->classes, c->dim);
}

static int proj_init(gf_layer_net *net, struct layer *l, gf_rng *rng, float *host)
{
	gf_rng_normal(rng, host, l->param[0].n, 0.0f, 1.0f);
	int rc = gf_layer_upload(net, l, 0, host);
	return rc ? rc : gf_sn_init(net, l, &LAYER_CCFG(struct proj_cfg, l)->sn, rng, host);
}

static float *rows(const gf_layer_net *net, const struct layer *l, int which)
{
	const struct proj_cfg *c = LAYER_CCFG(struct proj_cfg, l);
	return (float *)l->save[c->rows] + (size_t)which * (size_t)net->max_batch * (size_t)c->dim;
}

static const int32_t *labels(const gf_layer_net *net)
{
	return (const int32_t *)(const void *)net->nodes[net->label_node].data;
}

static int proj_forward(gf_layer_net *net, struct layer *l, int B, unsigned mode)
{
	const struct proj_cfg *c = LAYER_CCFG(struct proj_cfg, l);
	float *e = rows(net, l, 0), *y = layer_out(net, l)->data;
	const float *w;
	int rc;
	if ((rc = gf_sn_weight(net, l, &c->sn, mode, &w)) ||
	    (rc = net->be->ops->embedding_forward(net->be, e, w, labels(net), B, c->dim, c->classes)) ||
	    (rc = net->be->ops->copy(net->be, y, layer_in(net, l)->data, (size_t)B * sizeof(float), GF_COPY_D2D)))
		return rc;
	return net->be->ops->row_dot(net->be, y, e, net->nodes[l->with].data, B, c->dim, 1);
}

static int proj_backward(gf_layer_net *net, struct layer *l, int B, gf_layer_grad *g)
{
	const struct proj_cfg *c = LAYER_CCFG(struct proj_cfg, l);
	const float *dy = layer_out(net, l)->grad;
	const struct node *h = &net->nodes[l->with];
	int rc, acc;
	/* the input and h may share the accumulation scratch: fold the first
	 * in before writing the second */
	if (g->dx) {
		if ((rc = net->be->ops->copy(net->be, g->dx, dy, (size_t)B * sizeof(float), GF_COPY_D2D)) ||
		    (rc = gf_layer_grad_done(net, l->in, B)))
			return rc;
		g->dx = NULL;
	}
	if (h->needs) {
		if ((rc = net->be->ops->row_scale(net->be, gf_layer_grad_dst(net, l->with), dy, rows(net, l, 0), B, c->dim, 0)) ||
		    (rc = gf_layer_grad_done(net, l->with, B)))
			return rc;
	}
	if (!g->dw)
		return 0;
	float *dw = gf_sn_dweight(net, l, &c->sn, g, &acc), *t = rows(net, l, 1);
	if ((rc = net->be->ops->row_scale(net->be, t, dy, h->data, B, c->dim, 0)) ||
	    (rc = net->be->ops->embedding_backward(net->be, dw, t, labels(net), B, c->dim, c->classes, acc)))
		return rc;
	return gf_sn_backward(net, l, &c->sn, g);
}

/* J (t_in, t_h) = t_in + <embed(y), t_h>; S's term <t_h, dy embed(y)>
 * scatters dy * t_h into the table, as the backward scatters dy * h. */
static int proj_backward2(gf_layer_net *net, struct layer *l, int B, gf_layer_grad2 *g)
{
	const struct proj_cfg *c = LAYER_CCFG(struct proj_cfg, l);
	const float *th = net->nodes[l->with].tan;
	int rc, acc;
	if (g->tout && ((rc = net->be->ops->copy(net->be, g->tout, layer_in(net, l)->tan, (size_t)B * sizeof(float),
	                                         GF_COPY_D2D)) ||
	                (rc = net->be->ops->row_dot(net->be, g->tout, rows(net, l, 0), th, B, c->dim, 1))))
		return rc;
	if (!g->dw)
		return 0;
	gf_layer_grad gw = { .dw = 1, .acc = 1 };
	float *dw = gf_sn_dweight(net, l, &c->sn, &gw, &acc), *s = rows(net, l, 1);
	if ((rc = net->be->ops->row_scale(net->be, s, layer_out(net, l)->grad, th, B, c->dim, 0)) ||
	    (rc = net->be->ops->embedding_backward(net->be, dw, s, labels(net), B, c->dim, c->classes, acc)))
		return rc;
	return gf_sn_backward(net, l, &c->sn, &gw);
}

const gf_layer_kind gf_layer_proj = {
	.name = "proj",
	.min_pos = 0,
	.max_pos = 2,
	.keys = { "classes", "dim", "with", "sn" },
	.parse = proj_parse,
	.shapes = proj_shapes,
	.init = proj_init,
	.forward = proj_forward,
	.backward = proj_backward,
	.backward2 = proj_backward2,
};
