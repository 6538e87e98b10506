/* style_mix and style_w: StyleGAN2's style mixing regularisation
 * (StyleGAN2-ADA's training/loss.py, style_mixing_prob), as two kinds that
 * frame the mapping network:
 *
 *   {"style_mix", z = 512, prob = 0.9, layers = 8}        (F) -> (2, F)
 *   {"style_w", index = i, source = "mix"}                (2, C) -> (C)
 *   {"style_w", index = i}                                (C) -> (C)
 *
 * style_mix takes the mapping's normalised input (normalize_2nd_moment(z),
 * with the class embedding after its first z features when conditional)
 * and adds a second row per sample: in a training forward (GF_TRAIN) a
 * fresh z2 ~ N(0, I) (z features, from the network's generator, as the
 * noise layer draws), normalised the same way, followed by the same class
 * embedding; in an eval forward a copy of the first row (nothing is drawn).
 * The mapping's layers then run on both rows with the same weights
 * (linear, bias_act and w_avg read a (2, C) input as two rows; w_avg moves
 * its average with the first row only, as StyleGAN2-ADA's
 * skip_w_avg_update). A training forward also draws the batch's two
 * uniforms u, which fix its cutoff (style_mix_row.h): with probability
 * prob a cutoff uniform in 1..layers-1, else layers (no mixing).
 *
 * style_w gives synthesis layer `index` (0..layers-1, in StyleGAN2's
 * order of ws: b4 conv, then per resolution conv0 = the previous toRGB's,
 * conv1, toRGB) its w: in a training forward the second row when index >=
 * the cutoff of the style_mix layer named by `source`, else the first
 * (the backend op style_mix, reading u on the device: a captured step
 * replays with each step's draw); in an eval forward the first row, so
 * evaluation and sampling never mix. Its gradient goes to the row it read
 * (0 to the other), so both w and w2 carry G's gradient into the mapping.
 *
 * Without source (no mixing) style_w is a copy of w: StyleGAN2's
 * broadcast of w to the num_ws synthesis inputs, one node per ws, where
 * g_step's path length takes its gradients (the table's penalty_at).
 *
 * PyTorch: ws = mapping(z); cutoff as above; ws[:, cutoff:] = mapping(z2)
 * [:, cutoff:]; layer i reads ws[:, i]. style_mix's gradient to its input
 * is the first row's plus, for the embedding part, the second row's (z2 is
 * a constant). Double backward: both are linear in their input, J t is the
 * forward's selection applied to the tangent (z2's part 0). */
#include <string.h>

#include "../layer_kind.h"

extern const gf_layer_kind gf_layer_style_mix;

struct style_mix_cfg {
	int zd, layers;
	float prob;
	int f;       /* input features */
	int z2;      /* save slot: z2 (max_batch, zd) */
	int r;       /* save slot: its per-row scales (max_batch) */
	int u;       /* save slot: the batch's two uniforms (and padding) */
	int drawn;   /* the last forward drew (a training forward) */
};
LAYER_CFG_FITS(struct style_mix_cfg);

struct style_w_cfg {
	int index, src;   /* src: the style_mix layer's index */
	int c;
	int mixed;        /* the last forward picked through the op (training) */
};
LAYER_CFG_FITS(struct style_w_cfg);

/* ---- style_mix ---- */

static int style_mix_parse(gf_layer_net *net, struct layer *l, const gf_layer_args *a)
{
	(void)net;
	struct style_mix_cfg *c = LAYER_CFG(struct style_mix_cfg, l);
	int rc;
	if (!gf_value_get(a->v, "z") || !gf_value_get(a->v, "layers"))
		return gf_layer_err(GF_EPARAM, l, "needs z (the latent's features) and layers (the synthesis' ws, >= 2)");
	if ((rc = gf_layer_arg_int(a, -1, "z", 1, 1, &c->zd)) || (rc = gf_layer_arg_num(a, -1, "prob", 0.9, &c->prob)) ||
	    (rc = gf_layer_arg_int(a, -1, "layers", 2, 2, &c->layers)))
		return rc;
	if (!(c->prob >= 0.0f && c->prob <= 1.0f))
		return gf_layer_err(GF_EPARAM, l, "prob must be in [0, 1]");
	return 0;
}

static int style_mix_shapes(gf_layer_net *net, struct layer *l)
{
	struct style_mix_cfg *c = LAYER_CFG(struct style_mix_cfg, l);
	const struct node *in = layer_in(net, l);
	char s[96];
	if (!GF_BACKEND_HAS(net->be, row_dot) || !GF_BACKEND_HAS(net->be, row_scale) || !GF_BACKEND_HAS(net->be, rsqrt_eps) ||
	    !GF_BACKEND_HAS(net->be, style_mix))
		return gf_layer_err(GF_EUNSUPPORTED, l, "the %s backend has no row_dot/row_scale/rsqrt_eps/style_mix ops",
		                    net->be->ops->name);
	if (in->is_label || in->ndim != 1 || in->shape[0] < c->zd)
		return gf_layer_err(GF_ESHAPE, l, "expects a flat input of at least z = %d features, got %s", c->zd,
		                    gf_layer_shape_str(in, s, sizeof(s)));
	c->f = (int)in->shape[0];
	gf_layer_set_shape(layer_out(net, l), 2, (int64_t[]){ 2, c->f });
	c->z2 = gf_layer_save(l, (size_t)net->max_batch * (size_t)c->zd);
	c->r = gf_layer_save(l, (size_t)net->max_batch);
	c->u = gf_layer_save(l, 4);
	return 0;
}

static int style_mix_forward(gf_layer_net *net, struct layer *l, int B, unsigned mode)
{
	struct style_mix_cfg *c = LAYER_CFG(struct style_mix_cfg, l);
	const struct node *in = layer_in(net, l);
	gf_backend *be = net->be;
	float *y = layer_out(net, l)->data, *z2 = l->save[c->z2], *r = l->save[c->r];
	size_t F = (size_t)c->f, zd = (size_t)c->zd, n = (size_t)B * zd;
	int rc;
	c->drawn = (mode & GF_TRAIN) != 0;
	if ((rc = be->ops->copy2d(be, y, 2 * F, in->data, F, (size_t)B, F, 0)))   /* row 0: the input */
		return rc;
	if (!c->drawn)   /* eval: row 1 a copy, never read */
		return be->ops->copy2d(be, y + F, 2 * F, in->data, F, (size_t)B, F, 0);
	/* z2 ~ N(0, I), then the batch's uniforms */
	if ((rc = be->ops->rng_normal(be, z2, n, 0.0f, 1.0f, &net->rng)))
		return rc;
	net->rng.offset += gf_rng_blocks(n);
	if ((rc = be->ops->rng_uniform(be, l->save[c->u], 2, 0.0f, 1.0f, &net->rng)))
		return rc;
	net->rng.offset += gf_rng_blocks(2);
	/* normalize_2nd_moment(z2) as the norm2 layer computes it */
	if ((rc = be->ops->row_dot(be, r, z2, z2, B, c->zd, 0)) || (rc = be->ops->scale(be, r, (size_t)B, 1.0f / (float)zd)) ||
	    (rc = be->ops->rsqrt_eps(be, r, r, (size_t)B, 1e-8f)) || (rc = be->ops->row_scale(be, z2, r, z2, B, c->zd, 0)))
		return rc;
	if ((rc = be->ops->copy2d(be, y + F, 2 * F, z2, zd, (size_t)B, zd, 0)))
		return rc;
	return F > zd ? be->ops->copy2d(be, y + F + zd, 2 * F, in->data + zd, F, (size_t)B, F - zd, 0) : 0;
}

static int style_mix_backward(gf_layer_net *net, struct layer *l, int B, gf_layer_grad *g)
{
	const struct style_mix_cfg *c = LAYER_CCFG(struct style_mix_cfg, l);
	const float *dy = layer_out(net, l)->grad;
	size_t F = (size_t)c->f, zd = (size_t)c->zd;
	int rc;
	if (!g->dx)
		return 0;
	if ((rc = net->be->ops->copy2d(net->be, g->dx, F, dy, 2 * F, (size_t)B, F, 0)))
		return rc;
	/* the embedding's part of the second row (z2 is a constant) */
	return F > zd ? net->be->ops->copy2d(net->be, g->dx + zd, F, dy + F + zd, 2 * F, (size_t)B, F - zd, 1) : 0;
}

static int style_mix_backward2(gf_layer_net *net, struct layer *l, int B, gf_layer_grad2 *g)
{
	const struct style_mix_cfg *c = LAYER_CCFG(struct style_mix_cfg, l);
	const float *t = layer_in(net, l)->tan;
	size_t F = (size_t)c->f, zd = (size_t)c->zd;
	gf_backend *be = net->be;
	int rc;
	if (!g->tout)
		return 0;
	if ((rc = be->ops->fill(be, g->tout, (size_t)B * 2 * F, 0.0f)) ||
	    (rc = be->ops->copy2d(be, g->tout, 2 * F, t, F, (size_t)B, F, 0)))
		return rc;
	return F > zd ? be->ops->copy2d(be, g->tout + F + zd, 2 * F, t + zd, F, (size_t)B, F - zd, 0) : 0;
}

const gf_layer_kind gf_layer_style_mix = {
	.name = "style_mix",
	.min_pos = 0,
	.max_pos = 0,
	.keys = { "z", "prob", "layers" },
	.flags = GF_LK_STATEFUL,
	.parse = style_mix_parse,
	.shapes = style_mix_shapes,
	.forward = style_mix_forward,
	.backward = style_mix_backward,
	.backward2 = style_mix_backward2,
};

/* ---- style_w ---- */

static int style_w_parse(gf_layer_net *net, struct layer *l, const gf_layer_args *a)
{
	struct style_w_cfg *c = LAYER_CFG(struct style_w_cfg, l);
	int rc, ok;
	const char *src = gf_value_as_str(gf_value_get(a->v, "source"), "", &ok);
	if (!gf_value_get(a->v, "index") || !ok)
		return gf_layer_err(GF_EPARAM, l, "needs index (the synthesis layer's w, 0-based) and, with style mixing, "
		                                  "source (the style_mix layer's name)");
	if ((rc = gf_layer_arg_int(a, -1, "index", 0, 0, &c->index)))
		return rc;
	c->src = -1;
	if (!src[0])   /* no mixing: a copy of w, the path length's point (docs/train.md) */
		return 0;
	for (int i = 0; i < l->index; i++)
		if (strcmp(net->layers[i].name, src) == 0)
			c->src = i;
	if (c->src < 0 || net->layers[c->src].kind != &gf_layer_style_mix)
		return gf_layer_err(GF_EPARAM, l, "source = \"%s\" names no earlier style_mix layer", src);
	const struct style_mix_cfg *m = LAYER_CCFG(struct style_mix_cfg, &net->layers[c->src]);
	if (c->index >= m->layers)
		return gf_layer_err(GF_EPARAM, l, "index = %d is past the %d ws of %s", c->index, m->layers, src);
	return 0;
}

static int style_w_shapes(gf_layer_net *net, struct layer *l)
{
	struct style_w_cfg *c = LAYER_CFG(struct style_w_cfg, l);
	const struct node *in = layer_in(net, l);
	char s[96];
	if (c->src < 0) {
		if (in->is_label || in->ndim != 1)
			return gf_layer_err(GF_ESHAPE, l, "expects w (C) without source, got %s",
			                    gf_layer_shape_str(in, s, sizeof(s)));
		c->c = (int)in->shape[0];
		gf_layer_set_shape(layer_out(net, l), 1, (int64_t[]){ c->c });
		return 0;
	}
	if (in->is_label || in->ndim != 2 || in->shape[0] != 2)
		return gf_layer_err(GF_ESHAPE, l, "expects the mapping's two rows (2, C), got %s",
		                    gf_layer_shape_str(in, s, sizeof(s)));
	c->c = (int)in->shape[1];
	gf_layer_set_shape(layer_out(net, l), 1, (int64_t[]){ c->c });
	return 0;
}

static const float *style_w_u(const gf_layer_net *net, const struct style_w_cfg *c, int *layers, float *prob)
{
	const struct layer *src = &net->layers[c->src];
	const struct style_mix_cfg *m = LAYER_CCFG(struct style_mix_cfg, src);
	*layers = m->layers;
	*prob = m->prob;
	return src->save[m->u];
}

static int style_w_forward(gf_layer_net *net, struct layer *l, int B, unsigned mode)
{
	struct style_w_cfg *c = LAYER_CFG(struct style_w_cfg, l);
	const struct node *in = layer_in(net, l);
	float *y = layer_out(net, l)->data, prob;
	int layers;
	if (c->src < 0)
		return net->be->ops->copy(net->be, y, in->data, (size_t)B * (size_t)c->c * sizeof(float), GF_COPY_D2D);
	/* mixed only after a style_mix forward that drew (a training one) */
	c->mixed = (mode & GF_TRAIN) && LAYER_CCFG(struct style_mix_cfg, &net->layers[c->src])->drawn;
	if (!c->mixed)
		return net->be->ops->copy2d(net->be, y, (size_t)c->c, in->data, 2 * (size_t)c->c, (size_t)B, (size_t)c->c, 0);
	const float *u = style_w_u(net, c, &layers, &prob);
	return net->be->ops->style_mix(net->be, y, in->data, u, B, c->c, c->index, layers, prob, 0);
}

static int style_w_backward(gf_layer_net *net, struct layer *l, int B, gf_layer_grad *g)
{
	const struct style_w_cfg *c = LAYER_CCFG(struct style_w_cfg, l);
	const float *dy = layer_out(net, l)->grad;
	float prob;
	int layers;
	if (!g->dx)
		return 0;
	if (c->src < 0)
		return net->be->ops->copy(net->be, g->dx, dy, (size_t)B * (size_t)c->c * sizeof(float), GF_COPY_D2D);
	const float *u = style_w_u(net, c, &layers, &prob);
	return net->be->ops->style_mix(net->be, g->dx, dy, u, B, c->c, c->index, layers, c->mixed ? prob : 0.0f, 1);
}

static int style_w_backward2(gf_layer_net *net, struct layer *l, int B, gf_layer_grad2 *g)
{
	const struct style_w_cfg *c = LAYER_CCFG(struct style_w_cfg, l);
	float prob;
	int layers;
	if (!g->tout)
		return 0;
	if (c->src < 0)
		return net->be->ops->copy(net->be, g->tout, layer_in(net, l)->tan, (size_t)B * (size_t)c->c * sizeof(float),
		                          GF_COPY_D2D);
	const float *u = style_w_u(net, c, &layers, &prob);
	return net->be->ops->style_mix(net->be, g->tout, layer_in(net, l)->tan, u, B, c->c, c->index, layers,
	                               c->mixed ? prob : 0.0f, 0);
}

const gf_layer_kind gf_layer_style_w = {
	.name = "style_w",
	.min_pos = 0,
	.max_pos = 0,
	.keys = { "index", "source" },
	.flags = GF_LK_STATEFUL,
	.parse = style_w_parse,
	.shapes = style_w_shapes,
	.forward = style_w_forward,
	.backward = style_w_backward,
	.backward2 = style_w_backward2,
};
