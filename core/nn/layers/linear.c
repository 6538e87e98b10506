/* linear: y = x W^T + b on a flat input, PyTorch's nn.Linear(in, out,
 * bias = bias) with the weight (out, in). A (R, in) input is R rows per
 * sample, (R, out) out (nn.Linear on the last dimension: the mapping
 * network on w and style mixing's w2, layer style_mix).
 *
 *   {"linear", in, out, bias = true, init = ..., init_gain = 1, sn = false}
 *
 * Forward and both gradients are GEMMs (backend gemm, bias_add,
 * bias_grad); the double backward too (J t is the forward without its
 * bias, the parameter term a weight gradient). sn = true: spectral_norm(nn.Linear(...)) (sn.c).
 * eqlr = true (lr_mul = 1, bias_init = 0): StyleGAN2-ADA's
 * FullyConnectedLayer without its activation (bias_act), the weight and
 * bias scaled at run time (eqlr.c). */
#include "eqlr.h"
#include "sn.h"

struct linear_cfg {
	int fin, fout, bias;
	int rows;   /* rows per sample (1: a flat input) */
	struct gf_sn sn;
	struct gf_eqlr eq;
};
LAYER_CFG_FITS(struct linear_cfg);

static int linear_parse(gf_layer_net *net, struct layer *l, const gf_layer_args *a)
{
	(void)net;
	struct linear_cfg *c = LAYER_CFG(struct linear_cfg, l);
	int rc;
	if ((rc = gf_layer_arg_int(a, 0, NULL, 0, 1, &c->fin)) || (rc = gf_layer_arg_int(a, 1, NULL, 0, 1, &c->fout)) ||
	    (rc = gf_layer_arg_bool(a, "bias", 1, &c->bias)) || (rc = gf_sn_parse(a, &c->sn)) || (rc = gf_eqlr_parse(a, &c->eq, c->sn.on)))
		return rc;
	return 0;
}

static int linear_shapes(gf_layer_net *net, struct layer *l)
{
	struct linear_cfg *c = LAYER_CFG(struct linear_cfg, l);
	const struct node *in = layer_in(net, l);
	char s[96];
	if (in->ndim != 1 && in->ndim != 2)
		return gf_layer_err(GF_ESHAPE, l, "expects a flat input of %d features, got %s (add a flatten)", c->fin,
		                    gf_layer_shape_str(in, s, sizeof(s)));
	if (in->shape[in->ndim - 1] != c->fin)
		return gf_layer_err(GF_ESHAPE, l, "expects %d input features, got %lld", c->fin,
		                    (long long)in->shape[in->ndim - 1]);
	c->rows = in->ndim == 2 ? (int)in->shape[0] : 1;
	if (in->ndim == 2)
		gf_layer_set_shape(layer_out(net, l), 2, (int64_t[]){ c->rows, c->fout });
	else
		gf_layer_set_shape(layer_out(net, l), 1, (int64_t[]){ c->fout });
	gf_layer_param(l, gf_sn_weight_name(&c->sn), 2, (int64_t[]){ c->fout, c->fin });
	if (c->bias)
		gf_layer_param(l, "bias", 1, (int64_t[]){ c->fout });
	gf_eqlr_shapes(l, &c->eq, (size_t)c->fout * (size_t)c->fin, c->bias ? (size_t)c->fout : 0, (double)c->fin);
	return gf_sn_shapes(net, l, &c->sn, 1, c->fout, c->fin);
}

static int linear_init(gf_layer_net *net, struct layer *l, gf_rng *rng, float *host)
{
	const struct linear_cfg *c = LAYER_CCFG(struct linear_cfg, l);
	if (c->eq.on)
		return gf_eqlr_init(net, l, &c->eq, rng, host);
	int rc = gf_layer_init_fan_in(net, l, rng, host, (double)c->fin);
	return rc ? rc : gf_sn_init(net, l, &c->sn, rng, host);
}

static int linear_forward(gf_layer_net *net, struct layer *l, int B, unsigned mode)
{
	const struct linear_cfg *c = LAYER_CCFG(struct linear_cfg, l);
	B *= c->rows;
	float *y = layer_out(net, l)->data;
	const float *w, *b = layer_param(net, l, 1);
	int rc = c->eq.on ? gf_eqlr_weight(net, l, &c->eq, &w, &b) : gf_sn_weight(net, l, &c->sn, mode, &w);
	if (!rc)
		rc = net->be->ops->gemm(net->be, 0, 1, B, c->fout, c->fin, 1.0f, layer_in(net, l)->data, c->fin, w, c->fin, 0.0f,
		                        y, c->fout);
	if (!rc && b)
		rc = net->be->ops->bias_add(net->be, y, b, B, c->fout, 1);
	return rc;
}

/* eqlr: the gradients of the scaled weight and bias into scratch, then
 * scaled onto the parameters */
static int linear_backward_eqlr(gf_layer_net *net, struct layer *l, int B /* rows */, gf_layer_grad *g)
{
	const struct linear_cfg *c = LAYER_CCFG(struct linear_cfg, l);
	const float *dy = layer_out(net, l)->grad;
	int rc;
	if (g->dw) {
		if ((rc = net->be->ops->gemm(net->be, 1, 0, c->fout, c->fin, B, 1.0f, dy, c->fout, layer_in(net, l)->data,
		                             c->fin, 0.0f, gf_eqlr_scratch(net, l, &c->eq, 0), c->fin)) ||
		    (rc = gf_eqlr_fold(net, l, &c->eq, 0, g->acc)))
			return rc;
		if (c->bias && ((rc = net->be->ops->bias_grad(net->be, gf_eqlr_scratch(net, l, &c->eq, 1), dy, B, c->fout, 1, 0)) ||
		                (rc = gf_eqlr_fold(net, l, &c->eq, 1, g->acc))))
			return rc;
	}
	if (g->dx)
		return net->be->ops->gemm(net->be, 0, 0, B, c->fin, c->fout, 1.0f, dy, c->fout,
		                          gf_eqlr_used(net, l, &c->eq, 0), c->fin, 0.0f, g->dx, c->fin);
	return 0;
}

static int linear_backward(gf_layer_net *net, struct layer *l, int B, gf_layer_grad *g)
{
	const struct linear_cfg *c = LAYER_CCFG(struct linear_cfg, l);
	B *= c->rows;
	const float *dy = layer_out(net, l)->grad;
	int rc, acc;
	if (c->eq.on)
		return linear_backward_eqlr(net, l, B, g);
	float *dw = gf_sn_dweight(net, l, &c->sn, g, &acc);
	if (g->dw) {
		if ((rc = net->be->ops->gemm(net->be, 1, 0, c->fout, c->fin, B, 1.0f, dy, c->fout, layer_in(net, l)->data,
		                             c->fin, acc ? 1.0f : 0.0f, dw, c->fin)) ||
		    (rc = gf_sn_backward(net, l, &c->sn, g)))
			return rc;
		if (c->bias && (rc = net->be->ops->bias_grad(net->be, layer_grad(net, l, 1), dy, B, c->fout, 1, g->acc)))
			return rc;
	}
	if (g->dx) {
		return net->be->ops->gemm(net->be, 0, 0, B, c->fin, c->fout, 1.0f, dy, c->fout, gf_sn_used(net, l, &c->sn), c->fin,
		                          0.0f, g->dx, c->fin);
	}
	return 0;
}

/* J t = t W^T (no bias); S = <t, dy W> gives dW += dy^T t, the weight
 * gradient with t in place of x (through sigma with sn). */
static int linear_backward2(gf_layer_net *net, struct layer *l, int B, gf_layer_grad2 *g)
{
	const struct linear_cfg *c = LAYER_CCFG(struct linear_cfg, l);
	B *= c->rows;
	const float *t = layer_in(net, l)->tan, *dy = layer_out(net, l)->grad;
	const float *w = c->eq.on ? gf_eqlr_used(net, l, &c->eq, 0) : gf_sn_used(net, l, &c->sn);
	int rc, acc;
	if (g->tout &&
	    (rc = net->be->ops->gemm(net->be, 0, 1, B, c->fout, c->fin, 1.0f, t, c->fin, w, c->fin, 0.0f, g->tout, c->fout)))
		return rc;
	if (!g->dw)
		return 0;
	if (c->eq.on)   /* the weight term of the scaled weight, scaled back */
		return (rc = net->be->ops->gemm(net->be, 1, 0, c->fout, c->fin, B, 1.0f, dy, c->fout, t, c->fin, 0.0f,
		                                gf_eqlr_scratch(net, l, &c->eq, 0), c->fin))
		               ? rc
		               : gf_eqlr_fold(net, l, &c->eq, 0, 1);
	gf_layer_grad gw = { .dw = 1, .acc = 1 };
	float *dw = gf_sn_dweight(net, l, &c->sn, &gw, &acc);
	if ((rc = net->be->ops->gemm(net->be, 1, 0, c->fout, c->fin, B, 1.0f, dy, c->fout, t, c->fin, acc ? 1.0f : 0.0f, dw,
	                             c->fin)))
		return rc;
	return gf_sn_backward(net, l, &c->sn, &gw);
}

static double linear_flops(const gf_layer_net *net, const struct layer *l, int B, int exec)
{
	(void)net;
	(void)exec;
	const struct linear_cfg *c = LAYER_CCFG(struct linear_cfg, l);
	return 2.0 * B * c->rows * c->fin * c->fout;
}

const gf_layer_kind gf_layer_linear = {
	.name = "linear",
	.min_pos = 2,
	.max_pos = 2,
	.keys = { "bias", "init", "init_gain", "sn", "eqlr", "lr_mul", "bias_init" },
	.parse = linear_parse,
	.shapes = linear_shapes,
	.init = linear_init,
	.forward = linear_forward,
	.backward = linear_backward,
	.backward2 = linear_backward2,
	.flops = linear_flops,
};
