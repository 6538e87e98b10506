/* bias_act: StyleGAN2's bias + activation with gain and clamping
 * (StyleGAN2-ADA's torch_utils/ops/bias_act.py, reference path):
 *
 *   {"bias_act", channels, act = "lrelu", slope = 0.2, gain = sqrt(2), clamp = 0,
 *    bias = true, lr_mul = 1}
 *
 *   y = clamp(act(x + lr_mul * b) * gain, -clamp, clamp)
 *
 * on (C), (C, L) or (C, H, W), the bias per channel, or on (R, C) with R !=
 * C: R rows of C channels (the mapping network on style mixing's two rows,
 * layer style_mix). act is "linear"
 * (gain 1 by default), "relu" or "lrelu" (gain sqrt(2) by default, as
 * StyleGAN2's def_gain); clamp > 0 is StyleGAN2's act_clamp (conv_clamp
 * times the gain its layers are called with: 1, or sqrt(0.5) in D's
 * residual blocks, which also multiplies `gain`), 0 none. PyTorch:
 * (F.leaky_relu(x + b.view(1, -1, 1, 1) * lr_mul, slope) * gain).clamp(-clamp,
 * clamp); where a value is clamped its gradient is 0 (torch.clamp's, but
 * for a value exactly at the bound, a set of measure zero). The bias
 * starts at 0 (lr_mul scales it at run time, as eqlr does for linear and
 * conv; its gradient is lr_mul times the plain one).
 *
 * Backend ops bias_act_forward / bias_act_backward (from the output: gain >
 * 0 keeps the sign). Piecewise linear: the double backward is the backward
 * applied to the tangent, with no parameter or second-order term (the
 * Jacobian does not change with b except across a kink). */
#include <math.h>
#include <string.h>

#include "../layer_kind.h"

struct bias_act_cfg {
	int c, bias;
	gf_act act;
	float slope, gain, clamp, lr_mul;
	int dbias;   /* save slot: the bias gradient before lr_mul (lr_mul != 1) */
	int rows;    /* rows per sample: (R, C) input, else 1 */
};
LAYER_CFG_FITS(struct bias_act_cfg);

static int bias_act_parse(gf_layer_net *net, struct layer *l, const gf_layer_args *a)
{
	(void)net;
	struct bias_act_cfg *c = LAYER_CFG(struct bias_act_cfg, l);
	int rc, ok;
	const char *act = gf_value_as_str(gf_value_get(a->v, "act"), "lrelu", &ok);
	if (!ok)
		return gf_layer_err(GF_EPARAM, l, "act must be a string (\"linear\", \"relu\", \"lrelu\")");
	if (strcmp(act, "linear") == 0 || strcmp(act, "none") == 0)
		c->act = GF_ACT_NONE;
	else if (strcmp(act, "relu") == 0)
		c->act = GF_ACT_RELU;
	else if (strcmp(act, "lrelu") == 0)
		c->act = GF_ACT_LRELU;
	else
		return gf_layer_err(GF_EPARAM, l, "act = \"%s\": expected \"linear\", \"relu\" or \"lrelu\"", act);
	if ((rc = gf_layer_arg_int(a, 0, "channels", 0, 1, &c->c)) || (rc = gf_layer_arg_num(a, -1, "slope", 0.2, &c->slope)) ||
	    (rc = gf_layer_arg_num(a, -1, "gain", c->act == GF_ACT_NONE ? 1.0 : sqrt(2.0), &c->gain)) ||
	    (rc = gf_layer_arg_num(a, -1, "clamp", 0.0, &c->clamp)) || (rc = gf_layer_arg_bool(a, "bias", 1, &c->bias)) ||
	    (rc = gf_layer_arg_num(a, -1, "lr_mul", 1.0, &c->lr_mul)))
		return rc;
	if (!(c->gain > 0.0f) || !(c->slope >= 0.0f) || !(c->clamp >= 0.0f) || !(c->lr_mul > 0.0f))
		return gf_layer_err(GF_EPARAM, l, "gain and lr_mul must be > 0, slope and clamp >= 0");
	return 0;
}

static int bias_act_shapes(gf_layer_net *net, struct layer *l)
{
	struct bias_act_cfg *c = LAYER_CFG(struct bias_act_cfg, l);
	const struct node *in = layer_in(net, l);
	char s[96];
	if (!GF_BACKEND_HAS(net->be, bias_act_forward) || !GF_BACKEND_HAS(net->be, bias_act_backward))
		return gf_layer_err(GF_EUNSUPPORTED, l, "the %s backend has no bias_act ops", net->be->ops->name);
	c->rows = in->ndim == 2 && in->shape[0] != c->c && in->shape[1] == c->c ? (int)in->shape[0] : 1;
	if (in->is_label || in->ndim < 1 || (in->shape[0] != c->c && c->rows == 1))
		return gf_layer_err(GF_ESHAPE, l, "expects %d channels first (or rows of them), got %s", c->c,
		                    gf_layer_shape_str(in, s, sizeof(s)));
	gf_layer_set_shape(layer_out(net, l), in->ndim, in->shape);
	if (c->bias)
		gf_layer_param(l, "bias", 1, (int64_t[]){ c->c });
	if (c->bias && c->lr_mul != 1.0f)
		c->dbias = gf_layer_save(l, (size_t)c->c);
	return 0;
}

static int bias_act_init(gf_layer_net *net, struct layer *l, gf_rng *rng, float *host)
{
	(void)rng;
	(void)host;
	return net->be->ops->fill(net->be, layer_param(net, l, 0), l->param[0].n, 0.0f);
}

static gf_bias_act_desc bias_act_desc(const gf_layer_net *net, const struct layer *l, int B)
{
	const struct bias_act_cfg *c = LAYER_CCFG(struct bias_act_cfg, l);
	return (gf_bias_act_desc){ .n = B * c->rows, .c = c->c,
		                   .hw = (int)(layer_in(net, l)->numel / (size_t)c->c / (size_t)c->rows), .act = c->act,
		                   .alpha = c->slope, .gain = c->gain, .clamp = c->clamp, .bgain = c->lr_mul };
}

static int bias_act_forward(gf_layer_net *net, struct layer *l, int B, unsigned mode)
{
	(void)mode;
	gf_bias_act_desc d = bias_act_desc(net, l, B);
	return net->be->ops->bias_act_forward(net->be, layer_out(net, l)->data, layer_in(net, l)->data,
	                                      layer_param(net, l, 0), &d);
}

static int bias_act_backward(gf_layer_net *net, struct layer *l, int B, gf_layer_grad *g)
{
	const struct bias_act_cfg *c = LAYER_CCFG(struct bias_act_cfg, l);
	const struct node *out = layer_out(net, l);
	gf_bias_act_desc d = bias_act_desc(net, l, B);
	gf_backend *be = net->be;
	int rc, dw = g->dw && c->bias;
	if (!g->dx && !dw)
		return 0;
	/* the pre-activation gradient, in dx or, not wanted, in the engine's
	 * accumulation scratch (free: without dx nothing is accumulated) */
	float *dpre = g->dx ? g->dx : net->acc;
	if ((rc = be->ops->bias_act_backward(be, dpre, out->grad, out->data, &d)) || !dw)
		return rc;
	if (c->lr_mul == 1.0f)
		return be->ops->bias_grad(be, layer_grad(net, l, 0), dpre, d.n, c->c, d.hw, g->acc);
	float *s = l->save[c->dbias];
	if ((rc = be->ops->bias_grad(be, s, dpre, d.n, c->c, d.hw, 0)))
		return rc;
	if (g->acc)
		return be->ops->axpy(be, layer_grad(net, l, 0), s, (size_t)c->c, c->lr_mul);
	if ((rc = be->ops->copy(be, layer_grad(net, l, 0), s, (size_t)c->c * sizeof(float), GF_COPY_D2D)))
		return rc;
	return be->ops->scale(be, layer_grad(net, l, 0), (size_t)c->c, c->lr_mul);
}

/* piecewise linear: J t = the backward on t */
static int bias_act_backward2(gf_layer_net *net, struct layer *l, int B, gf_layer_grad2 *g)
{
	const struct node *out = layer_out(net, l);
	gf_bias_act_desc d = bias_act_desc(net, l, B);
	return g->tout ? net->be->ops->bias_act_backward(net->be, g->tout, layer_in(net, l)->tan, out->data, &d) : 0;
}

const gf_layer_kind gf_layer_bias_act = {
	.name = "bias_act",
	.min_pos = 1,
	.max_pos = 1,
	.keys = { "channels", "act", "slope", "gain", "clamp", "bias", "lr_mul" },
	.parse = bias_act_parse,
	.shapes = bias_act_shapes,
	.init = bias_act_init,
	.forward = bias_act_forward,
	.backward = bias_act_backward,
	.backward2 = bias_act_backward2,
};
