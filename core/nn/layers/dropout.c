/* dropout and dropout2d: PyTorch's nn.Dropout(p) (each value) and
 * nn.Dropout2d(p) (whole channels of each sample), scaled by 1/(1-p) in
 * training, the identity in eval mode.
 *
 *   {"dropout", p = 0.5}  {"dropout2d", p = 0.5}
 *
 * Two kinds in one file because they are one layer with a different group
 * size: backend dropout_forward / dropout_backward over `groups` groups of
 * `group` consecutive values (group 1, or a channel's H*W). Masks come from
 * the network's generator (gf_net_rng), which each training forward
 * advances, so checkpoints resume them exactly. */
#include "../layer_kind.h"

struct dropout_cfg {
	float p;
	int channels;   /* the kind's variant: 1 for dropout2d, one mask value per (sample, channel) */
	int mask;       /* save slot */
};
LAYER_CFG_FITS(struct dropout_cfg);

static int dropout_parse(gf_layer_net *net, struct layer *l, const gf_layer_args *a)
{
	(void)net;
	struct dropout_cfg *c = LAYER_CFG(struct dropout_cfg, l);
	c->channels = l->kind->variant;
	int rc = gf_layer_arg_num(a, 0, "p", 0.5, &c->p);
	if (rc)
		return rc;
	if (!(c->p >= 0.0f && c->p < 1.0f))
		return gf_layer_err(GF_EPARAM, l, "p = %g must be in [0, 1)", (double)c->p);
	return 0;
}

static int dropout_shapes(gf_layer_net *net, struct layer *l)
{
	struct dropout_cfg *c = LAYER_CFG(struct dropout_cfg, l);
	const struct node *in = layer_in(net, l);
	char s[96];
	if (c->channels && in->ndim < 2)
		return gf_layer_err(GF_ESHAPE, l, "expects (C, H, W) or (C, L) input, got %s",
		                    gf_layer_shape_str(in, s, sizeof(s)));
	gf_layer_set_shape(layer_out(net, l), in->ndim, in->shape);
	c->mask = gf_layer_save(l, (size_t)net->max_batch * (c->channels ? (size_t)in->shape[0] : in->numel));
	return 0;
}

static size_t groups(const struct dropout_cfg *c, const struct node *in, int B)
{
	return c->channels ? (size_t)B * (size_t)in->shape[0] : (size_t)B * in->numel;
}

static int dropout_forward(gf_layer_net *net, struct layer *l, int B, unsigned mode)
{
	const struct dropout_cfg *c = LAYER_CCFG(struct dropout_cfg, l);
	const struct node *in = layer_in(net, l);
	float *y = layer_out(net, l)->data;
	size_t n = (size_t)B * in->numel, ng = groups(c, in, B);
	if (!(mode & GF_TRAIN) || c->p == 0.0f)
		return net->be->ops->copy(net->be, y, in->data, n * sizeof(float), GF_COPY_D2D);
	int rc = net->be->ops->dropout_forward(net->be, y, l->save[c->mask], in->data, ng, n / ng, c->p, &net->rng);
	if (!rc)
		net->rng.offset += gf_rng_blocks(ng);
	return rc;
}

static int dropout_backward(gf_layer_net *net, struct layer *l, int B, gf_layer_grad *g)
{
	const struct dropout_cfg *c = LAYER_CCFG(struct dropout_cfg, l);
	const struct node *in = layer_in(net, l);
	const float *dy = layer_out(net, l)->grad;
	size_t n = (size_t)B * in->numel, ng = groups(c, in, B);
	if (!g->dx)
		return 0;
	if (!(net->mode & GF_TRAIN) || c->p == 0.0f)
		return net->be->ops->copy(net->be, g->dx, dy, n * sizeof(float), GF_COPY_D2D);
	return net->be->ops->dropout_backward(net->be, g->dx, dy, l->save[c->mask], ng, n / ng);
}

/* The mask is the one the forward drew: J t = t * mask, nothing else. */
static int dropout_backward2(gf_layer_net *net, struct layer *l, int B, gf_layer_grad2 *g)
{
	const struct dropout_cfg *c = LAYER_CCFG(struct dropout_cfg, l);
	const struct node *in = layer_in(net, l);
	size_t n = (size_t)B * in->numel, ng = groups(c, in, B);
	if (!g->tout)
		return 0;
	if (!(net->mode & GF_TRAIN) || c->p == 0.0f)
		return net->be->ops->copy(net->be, g->tout, in->tan, n * sizeof(float), GF_COPY_D2D);
	return net->be->ops->dropout_backward(net->be, g->tout, in->tan, l->save[c->mask], ng, n / ng);
}

const gf_layer_kind gf_layer_dropout = {
	.name = "dropout",
	.max_pos = 1,
	.keys = { "p" },
	.flags = GF_LK_STATEFUL,
	.parse = dropout_parse,
	.shapes = dropout_shapes,
	.forward = dropout_forward,
	.backward = dropout_backward,
	.backward2 = dropout_backward2,
};

const gf_layer_kind gf_layer_dropout2d = {
	.name = "dropout2d",
	.max_pos = 1,
	.keys = { "p" },
	.flags = GF_LK_STATEFUL,
	.variant = 1,
	.parse = dropout_parse,
	.shapes = dropout_shapes,
	.forward = dropout_forward,
	.backward = dropout_backward,
	.backward2 = dropout_backward2,
};
