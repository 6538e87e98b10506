/* bn: batch normalisation over the channels of (C), (C, L) or (C, H, W)
 * inputs, PyTorch's nn.BatchNorm1d / nn.BatchNorm2d(channels, eps,
 * momentum, affine): batch statistics in training (biased variance
 * normalises, the unbiased one enters the running average), running
 * statistics in eval mode.
 *
 *   {"bn", channels, eps = 1e-5, momentum = 0.1, affine = true, init = ...}
 *
 * Parameters weight (gamma) and bias (beta) when affine; buffers
 * running_mean and running_var; mean and rstd saved for backward. Backend
 * bn_forward_train / bn_forward_eval / bn_backward. Fusion: an unnamed bn
 * absorbs a following ReLU or LeakyReLU (the backend applies it after the
 * affine step, and its derivative inside bn_backward). */
#include <string.h>

#include "../layer_kind.h"

struct bn_cfg {
	int c, affine;
	float eps, momentum;
	gf_act act;        /* activation fused after the affine step */
	float act_param;
	int mean, rstd;    /* save slots */
};
LAYER_CFG_FITS(struct bn_cfg);

static int bn_parse(gf_layer_net *net, struct layer *l, const gf_layer_args *a)
{
	(void)net;
	struct bn_cfg *c = LAYER_CFG(struct bn_cfg, l);
	int rc;
	if ((rc = gf_layer_arg_int(a, 0, NULL, 0, 1, &c->c)) || (rc = gf_layer_arg_num(a, 1, "eps", 1e-5, &c->eps)) ||
	    (rc = gf_layer_arg_num(a, 2, "momentum", 0.1, &c->momentum)) ||
	    (rc = gf_layer_arg_bool(a, "affine", 1, &c->affine)))
		return rc;
	if (!(c->eps > 0.0f) || !(c->momentum >= 0.0f && c->momentum <= 1.0f))
		return gf_layer_err(GF_EPARAM, l, "needs eps > 0 and momentum in [0, 1]");
	return 0;
}

static int bn_shapes(gf_layer_net *net, struct layer *l)
{
	struct bn_cfg *c = LAYER_CFG(struct bn_cfg, l);
	const struct node *in = layer_in(net, l);
	char s[96];
	if (in->ndim < 1 || in->ndim > 3)
		return gf_layer_err(GF_ESHAPE, l, "expects (C), (C, L) or (C, H, W) input, got %s",
		                    gf_layer_shape_str(in, s, sizeof(s)));
	if (in->shape[0] != c->c)
		return gf_layer_err(GF_ESHAPE, l, "expects %d channels, got %lld", c->c, (long long)in->shape[0]);
	gf_layer_set_shape(layer_out(net, l), in->ndim, in->shape);
	if (c->affine) {
		gf_layer_param(l, "weight", 1, (int64_t[]){ c->c });
		gf_layer_param(l, "bias", 1, (int64_t[]){ c->c });
	}
	gf_layer_buffer(l, "running_mean", (size_t)c->c, 0.0f);
	gf_layer_buffer(l, "running_var", (size_t)c->c, 1.0f);
	c->mean = gf_layer_save(l, (size_t)c->c);
	c->rstd = gf_layer_save(l, (size_t)c->c);
	return 0;
}

static int bn_init(gf_layer_net *net, struct layer *l, gf_rng *rng, float *host)
{
	size_t n = l->param[0].n;
	int rc;
	if (l->init == INIT_DCGAN) {
		gf_rng_normal(rng, host, n, 1.0f, 0.02f);
		rc = gf_layer_upload(net, l, 0, host);
	} else {
		rc = net->be->ops->fill(net->be, layer_param(net, l, 0), n, 1.0f);
	}
	if (!rc)
		rc = net->be->ops->fill(net->be, layer_param(net, l, 1), l->param[1].n, 0.0f);
	return rc;
}

static gf_bn_desc bn_desc(const gf_layer_net *net, const struct layer *l, int B)
{
	const struct bn_cfg *c = LAYER_CCFG(struct bn_cfg, l);
	gf_bn_desc d;
	memset(&d, 0, sizeof(d));
	d.n = B;
	d.c = c->c;
	d.hw = (int)(layer_in(net, l)->numel / (size_t)c->c);
	d.eps = c->eps;
	d.momentum = c->momentum;
	d.act = c->act;
	d.slope = c->act_param;
	d.dtype = GF_F32;
	d.layout = GF_NCHW;
	return d;
}

static int bn_forward(gf_layer_net *net, struct layer *l, int B, unsigned mode)
{
	const struct bn_cfg *c = LAYER_CCFG(struct bn_cfg, l);
	gf_bn_desc d = bn_desc(net, l, B);
	float *y = layer_out(net, l)->data, *x = layer_in(net, l)->data;
	float *g = layer_param(net, l, 0), *b = layer_param(net, l, 1);
	float *rm = layer_buffer(net, l, 0), *rv = layer_buffer(net, l, 1);
	if (!(mode & GF_TRAIN))
		return net->be->ops->bn_forward_eval(net->be, y, x, g, b, rm, rv, &d);
	int freeze = (mode & GF_FREEZE_STATS) != 0;
	return net->be->ops->bn_forward_train(net->be, y, l->save[c->mean], l->save[c->rstd], freeze ? NULL : rm,
	                                      freeze ? NULL : rv, x, g, b, &d);
}

static int bn_backward(gf_layer_net *net, struct layer *l, int B, gf_layer_grad *g)
{
	const struct bn_cfg *c = LAYER_CCFG(struct bn_cfg, l);
	gf_bn_desc d = bn_desc(net, l, B);
	const struct node *out = layer_out(net, l);
	return net->be->ops->bn_backward(net->be, g->dx, g->dw ? layer_grad(net, l, 0) : NULL,
	                                 g->dw ? layer_grad(net, l, 1) : NULL, out->grad, out->data, layer_in(net, l)->data,
	                                 layer_param(net, l, 0), l->save[c->mean], l->save[c->rstd], &d, g->acc);
}

/* Training mode only (a backward refuses an eval forward): backend
 * bn_backward2 gives J t (with the fused activation's mask), the gamma
 * term and the second-order term on x, which batch statistics make
 * non-zero. */
static int bn_backward2(gf_layer_net *net, struct layer *l, int B, gf_layer_grad2 *g)
{
	const struct bn_cfg *c = LAYER_CCFG(struct bn_cfg, l);
	gf_bn_desc d = bn_desc(net, l, B);
	const struct node *in = layer_in(net, l), *out = layer_out(net, l);
	if (!GF_BACKEND_HAS(net->be, bn_backward2))
		return gf_layer_err(GF_EUNSUPPORTED, l, "the %s backend has no bn_backward2 op", net->be->ops->name);
	float *dx = in->needs ? gf_layer_grad_dst(net, l->in) : NULL;
	int rc = net->be->ops->bn_backward2(net->be, g->tout, dx, g->dw ? layer_grad(net, l, 0) : NULL, in->tan, out->grad,
	                                    out->data, in->data, layer_param(net, l, 0), l->save[c->mean], l->save[c->rstd],
	                                    &d, 1);
	return !rc && dx ? gf_layer_grad_done(net, l->in, B) : rc;
}

static const char *bn_note(const struct layer *l)
{
	gf_act act = LAYER_CCFG(struct bn_cfg, l)->act;
	return act == GF_ACT_LRELU ? "  + lrelu" : act == GF_ACT_RELU ? "  + relu" : NULL;
}

/* batchnorm -> relu/lrelu: the activation inside the normalisation */
static int bn_absorb_output(const gf_layer_net *net, struct layer *l, const struct layer *next)
{
	(void)net;
	struct bn_cfg *c = LAYER_CFG(struct bn_cfg, l);
	if (c->act != GF_ACT_NONE || (next->as_act != GF_ACT_RELU && next->as_act != GF_ACT_LRELU))
		return 0;
	c->act = next->as_act;
	c->act_param = next->as_act == GF_ACT_RELU ? 0.0f : next->as_act_param;
	return 1;
}

const gf_layer_kind gf_layer_bn = {
	.name = "bn",
	.aliases = (const char *const[]){ "batchnorm", "bn1d", "bn2d", NULL },
	.min_pos = 1,
	.max_pos = 3,
	.keys = { "eps", "momentum", "affine", "init" },
	.flags = GF_LK_STATEFUL,
	.parse = bn_parse,
	.shapes = bn_shapes,
	.init = bn_init,
	.forward = bn_forward,
	.backward = bn_backward,
	.backward2 = bn_backward2,
	.note = bn_note,
	.absorb_output = bn_absorb_output,
	.absorbed_note = "  fused into the batchnorm",
};
