/* instancenorm: PyTorch's nn.InstanceNorm2d(channels, eps, affine =
 * false, track_running_stats = false), the normalisation of pix2pix and
 * CycleGAN generators: each (sample, channel) plane normalised by its own
 * mean and biased variance, the same in training and eval (no running
 * statistics), then gamma * . + beta per channel when affine.
 *
 *   {"instancenorm", channels, eps = 1e-5, affine = false}
 *
 * Composes the batchnorm ops: a batch of B samples of C channels is one
 * sample of B*C channels to bn_forward_train (n = 1, c = B*C, hw = H*W,
 * no running statistics). The affine parameters are broadcast to (B, C)
 * with bias_add onto zeroed workspace, and their (B, C)
 * gradients reduced over the batch with bias_grad (hw = 1). */
#include "../layer_kind.h"

struct instancenorm_cfg {
	int c, affine;
	float eps;
	int stats;                /* save slot: mean, rstd (B*C each) */
	int aff;                  /* affine: save slot of gamma and beta broadcast to (B, C),
	                           * then their (B, C) gradients */
};
LAYER_CFG_FITS(struct instancenorm_cfg);

static int instancenorm_parse(gf_layer_net *net, struct layer *l, const gf_layer_args *a)
{
	(void)net;
	struct instancenorm_cfg *c = LAYER_CFG(struct instancenorm_cfg, l);
	int rc;
	if ((rc = gf_layer_arg_int(a, 0, NULL, 0, 1, &c->c)) || (rc = gf_layer_arg_num(a, 1, "eps", 1e-5, &c->eps)) ||
	    (rc = gf_layer_arg_bool(a, "affine", 0, &c->affine)))
		return rc;
	if (!(c->eps > 0))
		return gf_layer_err(GF_EPARAM, l, "eps = %g must be positive", (double)c->eps);
	return 0;
}

static int instancenorm_shapes(gf_layer_net *net, struct layer *l)
{
	struct instancenorm_cfg *c = LAYER_CFG(struct instancenorm_cfg, l);
	const struct node *in = layer_in(net, l);
	char s[96];
	int rc = gf_layer_expect_image(l, in, c->c);
	if (rc)
		return rc;
	if (in->shape[1] * in->shape[2] < 2)
		return gf_layer_err(GF_ESHAPE, l, "needs more than one value per plane, got %s",
		                    gf_layer_shape_str(in, s, sizeof(s)));
	gf_layer_set_shape(layer_out(net, l), 3, in->shape);
	size_t planes = (size_t)net->max_batch * (size_t)c->c;
	c->stats = gf_layer_save(l, 2 * planes);
	if (c->affine) {
		gf_layer_param(l, "weight", 1, (int64_t[]){ c->c });
		gf_layer_param(l, "bias", 1, (int64_t[]){ c->c });
		c->aff = gf_layer_save(l, 4 * planes);
	}
	return 0;
}

/* PyTorch's: gamma 1, beta 0 */
static int instancenorm_init(gf_layer_net *net, struct layer *l, gf_rng *rng, float *host)
{
	(void)rng;
	(void)host;
	int rc = net->be->ops->fill(net->be, layer_param(net, l, 0), l->param[0].n, 1.0f);
	if (!rc)
		rc = net->be->ops->fill(net->be, layer_param(net, l, 1), l->param[1].n, 0.0f);
	return rc;
}

/* Workspace i of a save slot (B*C floats each at max_batch). */
static float *ws(const gf_layer_net *net, const struct layer *l, int slot, int i)
{
	return (float *)l->save[slot] + (size_t)i * (size_t)net->max_batch * (size_t)LAYER_CCFG(struct instancenorm_cfg, l)->c;
}

static gf_bn_desc instancenorm_desc(const gf_layer_net *net, const struct layer *l, int B)
{
	const struct instancenorm_cfg *c = LAYER_CCFG(struct instancenorm_cfg, l);
	const struct node *in = layer_in(net, l);
	gf_bn_desc d = { .n = 1, .c = B * c->c, .hw = (int)(in->shape[1] * in->shape[2]), .eps = c->eps,
	                 .act = GF_ACT_NONE, .dtype = GF_F32, .layout = GF_NCHW };
	return d;
}

static int instancenorm_forward(gf_layer_net *net, struct layer *l, int B, unsigned mode)
{
	(void)mode;   /* no running statistics: the same in training and eval */
	const struct instancenorm_cfg *c = LAYER_CCFG(struct instancenorm_cfg, l);
	gf_bn_desc d = instancenorm_desc(net, l, B);
	float *gamma = NULL, *beta = NULL;
	int rc;
	if (c->affine) {
		gamma = ws(net, l, c->aff, 0);
		beta = ws(net, l, c->aff, 1);
		size_t n = (size_t)B * (size_t)c->c;
		if ((rc = net->be->ops->fill(net->be, gamma, 2 * n, 0.0f)) ||
		    (rc = net->be->ops->bias_add(net->be, gamma, layer_param(net, l, 0), B, c->c, 1)) ||
		    (rc = net->be->ops->bias_add(net->be, beta, layer_param(net, l, 1), B, c->c, 1)))
			return rc;
	}
	return net->be->ops->bn_forward_train(net->be, layer_out(net, l)->data, ws(net, l, c->stats, 0), ws(net, l, c->stats, 1), NULL,
	                                      NULL, layer_in(net, l)->data, gamma, beta, &d);
}

static int instancenorm_backward(gf_layer_net *net, struct layer *l, int B, gf_layer_grad *g)
{
	const struct instancenorm_cfg *c = LAYER_CCFG(struct instancenorm_cfg, l);
	gf_bn_desc d = instancenorm_desc(net, l, B);
	const struct node *out = layer_out(net, l);
	int dw = c->affine && g->dw;
	int rc;
	if (!g->dx && !dw)
		return 0;
	rc = net->be->ops->bn_backward(net->be, g->dx, dw ? ws(net, l, c->aff, 2) : NULL, dw ? ws(net, l, c->aff, 3) : NULL,
	                               out->grad, out->data, layer_in(net, l)->data, c->affine ? ws(net, l, c->aff, 0) : NULL,
	                               ws(net, l, c->stats, 0), ws(net, l, c->stats, 1), &d, 0);
	if (rc || !dw)
		return rc;
	if ((rc = net->be->ops->bias_grad(net->be, layer_grad(net, l, 0), ws(net, l, c->aff, 2), B, c->c, 1, g->acc)))
		return rc;
	return net->be->ops->bias_grad(net->be, layer_grad(net, l, 1), ws(net, l, c->aff, 3), B, c->c, 1, g->acc);
}

/* bn_backward2 on the same (1, B*C, H*W) view; the (B, C) gamma term
 * reduced over the batch as the backward's. */
static int instancenorm_backward2(gf_layer_net *net, struct layer *l, int B, gf_layer_grad2 *g)
{
	const struct instancenorm_cfg *c = LAYER_CCFG(struct instancenorm_cfg, l);
	gf_bn_desc d = instancenorm_desc(net, l, B);
	const struct node *in = layer_in(net, l), *out = layer_out(net, l);
	int dw = c->affine && g->dw, rc;
	if (!GF_BACKEND_HAS(net->be, bn_backward2))
		return gf_layer_err(GF_EUNSUPPORTED, l, "the %s backend has no bn_backward2 op", net->be->ops->name);
	float *dx = in->needs ? gf_layer_grad_dst(net, l->in) : NULL;
	rc = net->be->ops->bn_backward2(net->be, g->tout, dx, dw ? ws(net, l, c->aff, 2) : NULL, in->tan, out->grad, out->data,
	                                in->data, c->affine ? ws(net, l, c->aff, 0) : NULL, ws(net, l, c->stats, 0),
	                                ws(net, l, c->stats, 1), &d, 0);
	if (!rc && dx)
		rc = gf_layer_grad_done(net, l->in, B);
	if (!rc && dw)
		rc = net->be->ops->bias_grad(net->be, layer_grad(net, l, 0), ws(net, l, c->aff, 2), B, c->c, 1, 1);
	return rc;
}

const gf_layer_kind gf_layer_instancenorm = {
	.name = "instancenorm",
	.aliases = (const char *const[]){ "instancenorm2d", "in2d", NULL },
	.min_pos = 1,
	.max_pos = 2,
	.keys = { "eps", "affine" },
	.parse = instancenorm_parse,
	.shapes = instancenorm_shapes,
	.init = instancenorm_init,
	.forward = instancenorm_forward,
	.backward = instancenorm_backward,
	.backward2 = instancenorm_backward2,
};
