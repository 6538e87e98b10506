/* cbn: conditional batch normalisation. Batchnorm without its own affine
 * step (batch statistics in training, running statistics in eval, as bn),
 * then a gain and a bias per sample and channel that come from the
 * condition:
 *
 *   y = (1 + g) * bn(x) + b,   g, b (B, C)
 *
 *   {"cbn", channels, eps = 1e-5, momentum = 0.1, classes = k, sn = false}
 *       g = E_gain[y], b = E_bias[y]: a learned row per class (SNGAN's
 *       categorical conditional BN). Parameters gain.weight and
 *       bias.weight (k, C), like two nn.Embedding(k, C).
 *   {"cbn", channels, cond = src, bias = false, sn = false}
 *       g = W_g c (+ b_g), b = W_b c (+ b_b) for the flat source c (D):
 *       BigGAN's ccbn (layers.py), whose c is the shared class embedding
 *       concatenated with a chunk of z, and whose projections are
 *       SNLinear(D, C, bias = False) with spectral norm. Parameters
 *       gain.weight (C, D) [gain.bias], bias.weight (C, D) [bias.bias],
 *       like two nn.Linear(D, C). c receives its gradient.
 *
 * PyTorch: F.batch_norm(x, running_mean, running_var, None, None,
 * training, momentum, eps) * (1 + gain(c)).view(B, C, 1, 1) +
 * bias(c).view(B, C, 1, 1). Inputs (C), (C, L) or (C, H, W). sn = true
 * is torch.nn.utils.spectral_norm on both projections (sn.c): weights
 * gain.weight_orig..., buffers gain.weight_u, gain.weight_v, likewise for
 * bias, after running_mean and running_var.
 *
 * Init: classes: both tables 0 (every class starts as plain batchnorm,
 * gamma 1, beta 0); with init = "dcgan" E_gain ~ N(0, 0.02); with sn =
 * true both N(0, 0.02) (a zero matrix has no spectral norm). cond: PyTorch's
 * nn.Linear (weight and bias U(+-1/sqrt(D))) or with init = "dcgan" N(0,
 * 0.02) and zero biases. Draws: gain's weight, bias, u, v, then bias's.
 *
 * The numbers: g and b are built with existing ops (embedding_forward or
 * GEMMs), then backend cbn_forward takes batchnorm's statistics and
 * normalises, applies them and a following unnamed relu/lrelu (fused as bn
 * does) in one pass over each channel;
 * cbn_backward gives dx and the per-sample dg, db, which embedding_backward
 * or GEMMs carry to the tables, the projections and c. */
#include <math.h>
#include <string.h>

#include "sn.h"

struct cbn_cfg {
	int c, classes, dim, bias;   /* dim: features of cond (cond mode, classes = 0) */
	float eps, momentum;
	gf_act act;                  /* activation fused after the affine step */
	float act_param;
	int stats;                   /* save slot: mean, rstd (C each) */
	int aff;                     /* save slot: g, b, dg, db (B, C each) */
	struct gf_sn sn[2];          /* gain's and bias's weight */
};
LAYER_CFG_FITS(struct cbn_cfg);

static int cbn_parse(gf_layer_net *net, struct layer *l, const gf_layer_args *a)
{
	struct cbn_cfg *c = LAYER_CFG(struct cbn_cfg, l);
	int rc;
	if ((rc = gf_layer_arg_int(a, 0, NULL, 0, 1, &c->c)) || (rc = gf_layer_arg_num(a, 1, "eps", 1e-5, &c->eps)) ||
	    (rc = gf_layer_arg_num(a, 2, "momentum", 0.1, &c->momentum)) ||
	    (gf_value_get(a->v, "classes") && (rc = gf_layer_arg_int(a, a->npos, "classes", 0, 1, &c->classes))) ||
	    (rc = gf_layer_arg_bool(a, "bias", 0, &c->bias)) || (rc = gf_sn_parse(a, &c->sn[0])))
		return rc;
	c->sn[1] = c->sn[0];
	if (!(c->eps > 0.0f) || !(c->momentum >= 0.0f && c->momentum <= 1.0f))
		return gf_layer_err(GF_EPARAM, l, "needs eps > 0 and momentum in [0, 1]");
	const gf_value *cond = gf_value_get(a->v, "cond");
	if (!cond == !c->classes)
		return gf_layer_err(GF_EPARAM, l, "needs either classes = <count> or cond = <a flat source>%s",
		                    cond ? ", not both" : "");
	if (c->bias && !cond)
		return gf_layer_err(GF_EPARAM, l, "bias = true applies to the cond projections only");
	return cond ? gf_layer_source(net, l, "cond", cond, &l->with) : 0;
}

static int cbn_shapes(gf_layer_net *net, struct layer *l)
{
	struct cbn_cfg *c = LAYER_CFG(struct cbn_cfg, l);
	const struct node *in = layer_in(net, l);
	char s[96];
	int rc;
	if (!GF_BACKEND_HAS(net->be, cbn_forward) || !GF_BACKEND_HAS(net->be, cbn_backward))
		return gf_layer_err(GF_EUNSUPPORTED, l, "the %s backend has no conditional batchnorm ops", net->be->ops->name);
	if (in->ndim < 1 || in->ndim > 3)
		return gf_layer_err(GF_ESHAPE, l, "expects (C), (C, L) or (C, H, W) input, got %s",
		                    gf_layer_shape_str(in, s, sizeof(s)));
	if (in->shape[0] != c->c)
		return gf_layer_err(GF_ESHAPE, l, "expects %d channels, got %lld", c->c, (long long)in->shape[0]);
	gf_layer_set_shape(layer_out(net, l), in->ndim, in->shape);
	int sn = c->sn[0].on;
	if (c->classes) {
		if (net->classes && net->classes != c->classes)
			return gf_layer_err(GF_ESHAPE, l, "has %d classes but the network has %d", c->classes, net->classes);
		net->classes = c->classes;
		net->nodes[net->label_node].consumers++;   /* a second input: the engine then asks for labels */
		gf_layer_param(l, sn ? "gain.weight_orig" : "gain.weight", 2, (int64_t[]){ c->classes, c->c });
		gf_layer_param(l, sn ? "bias.weight_orig" : "bias.weight", 2, (int64_t[]){ c->classes, c->c });
	} else {
		const struct node *cn = &net->nodes[l->with];
		if (cn->is_label)
			return gf_layer_err(GF_ESHAPE, l, "cond must be a flat source of features, not the labels (use classes =)");
		if (cn->ndim != 1)
			return gf_layer_err(GF_ESHAPE, l, "cond must be a flat source (D), got %s (add a flatten)",
			                    gf_layer_shape_str(cn, s, sizeof(s)));
		c->dim = (int)cn->shape[0];
		gf_layer_param(l, sn ? "gain.weight_orig" : "gain.weight", 2, (int64_t[]){ c->c, c->dim });
		if (c->bias)
			gf_layer_param(l, "gain.bias", 1, (int64_t[]){ c->c });
		gf_layer_param(l, sn ? "bias.weight_orig" : "bias.weight", 2, (int64_t[]){ c->c, c->dim });
		if (c->bias)
			gf_layer_param(l, "bias.bias", 1, (int64_t[]){ c->c });
	}
	gf_layer_buffer(l, "running_mean", (size_t)c->c, 0.0f);
	gf_layer_buffer(l, "running_var", (size_t)c->c, 1.0f);
	c->stats = gf_layer_save(l, 2 * (size_t)c->c);
	c->aff = gf_layer_save(l, 4 * (size_t)net->max_batch * (size_t)c->c);
	/* the tables read as embeddings (k, C), the projections as linears (C, D) */
	int m = c->classes ? c->classes : c->c, k = c->classes ? c->c : c->dim;
	if ((rc = gf_sn_shapes_at(net, l, &c->sn[0], 0, "gain.weight_u", "gain.weight_v", 1, m, k)))
		return rc;
	return gf_sn_shapes_at(net, l, &c->sn[1], c->bias ? 2 : 1, "bias.weight_u", "bias.weight_v", 1, m, k);
}

static int cbn_init(gf_layer_net *net, struct layer *l, gf_rng *rng, float *host)
{
	const struct cbn_cfg *c = LAYER_CCFG(struct cbn_cfg, l);
	int rc = 0;
	for (int j = 0; j < 2 && !rc; j++) {
		int p = c->sn[j].param;
		size_t n = l->param[p].n;
		if (c->classes) {
			if (c->sn[j].on || (j == 0 && l->init == INIT_DCGAN)) {
				gf_rng_normal(rng, host, n, 0.0f, 0.02f);
				rc = gf_layer_upload(net, l, p, host);
			} else {
				rc = net->be->ops->fill(net->be, layer_param(net, l, p), n, 0.0f);
			}
		} else {
			float bound = (float)(1.0 / sqrt((double)c->dim));
			if (l->init == INIT_DCGAN)
				gf_rng_normal(rng, host, n, 0.0f, 0.02f);
			else
				gf_rng_uniform(rng, host, n, -bound, bound);
			rc = gf_layer_upload(net, l, p, host);
			if (!rc && c->bias) {
				size_t nb = l->param[p + 1].n;
				if (l->init == INIT_DCGAN) {
					rc = net->be->ops->fill(net->be, layer_param(net, l, p + 1), nb, 0.0f);
				} else {
					gf_rng_uniform(rng, host, nb, -bound, bound);
					rc = gf_layer_upload(net, l, p + 1, host);
				}
			}
		}
		if (!rc)
			rc = gf_sn_init(net, l, &c->sn[j], rng, host);
	}
	return rc;
}

/* Workspace i of the (B, C) slot: 0 g, 1 b, 2 dg, 3 db. */
static float *aff(const gf_layer_net *net, const struct layer *l, int i)
{
	const struct cbn_cfg *c = LAYER_CCFG(struct cbn_cfg, l);
	return (float *)l->save[c->aff] + (size_t)i * (size_t)net->max_batch * (size_t)c->c;
}

static float *stat(const struct layer *l, int i)
{
	const struct cbn_cfg *c = LAYER_CCFG(struct cbn_cfg, l);
	return (float *)l->save[c->stats] + (size_t)i * (size_t)c->c;
}

static const int32_t *labels(const gf_layer_net *net)
{
	return (const int32_t *)(const void *)net->nodes[net->label_node].data;
}

static gf_bn_desc cbn_desc(const gf_layer_net *net, const struct layer *l, int B)
{
	const struct cbn_cfg *c = LAYER_CCFG(struct cbn_cfg, l);
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

/* g = 1 + gain(cond), b = bias(cond) into the (B, C) workspace. */
static int cbn_affine(gf_layer_net *net, struct layer *l, int B, unsigned mode)
{
	const struct cbn_cfg *c = LAYER_CCFG(struct cbn_cfg, l);
	size_t n = (size_t)B * (size_t)c->c;
	float *g = aff(net, l, 0), *b = aff(net, l, 1), *t = aff(net, l, 2);
	const float *wg, *wb;
	int rc;
	if ((rc = gf_sn_weight(net, l, &c->sn[0], mode, &wg)) || (rc = gf_sn_weight(net, l, &c->sn[1], mode, &wb)) ||
	    (rc = net->be->ops->fill(net->be, g, n, 1.0f)))
		return rc;
	if (c->classes) {
		if ((rc = net->be->ops->embedding_forward(net->be, t, wg, labels(net), B, c->c, c->classes)) ||
		    (rc = net->be->ops->axpy(net->be, g, t, n, 1.0f)))
			return rc;
		return net->be->ops->embedding_forward(net->be, b, wb, labels(net), B, c->c, c->classes);
	}
	const float *x = net->nodes[l->with].data;
	if ((rc = net->be->ops->gemm(net->be, 0, 1, B, c->c, c->dim, 1.0f, x, c->dim, wg, c->dim, 1.0f, g, c->c)) ||
	    (rc = net->be->ops->gemm(net->be, 0, 1, B, c->c, c->dim, 1.0f, x, c->dim, wb, c->dim, 0.0f, b, c->c)))
		return rc;
	if (c->bias && ((rc = net->be->ops->bias_add(net->be, g, layer_param(net, l, 1), B, c->c, 1)) ||
	                (rc = net->be->ops->bias_add(net->be, b, layer_param(net, l, 3), B, c->c, 1))))
		return rc;
	return 0;
}

static int cbn_forward(gf_layer_net *net, struct layer *l, int B, unsigned mode)
{
	gf_bn_desc d = cbn_desc(net, l, B);
	float *rm = layer_buffer(net, l, 0), *rv = layer_buffer(net, l, 1);
	int rc = cbn_affine(net, l, B, mode);
	if (rc)
		return rc;
	int train = (mode & GF_TRAIN) != 0, freeze = (mode & GF_FREEZE_STATS) != 0;
	return net->be->ops->cbn_forward(net->be, layer_out(net, l)->data, stat(l, 0), stat(l, 1),
	                                 train && freeze ? NULL : rm, train && freeze ? NULL : rv, layer_in(net, l)->data,
	                                 aff(net, l, 0), aff(net, l, 1), &d, train);
}

static int cbn_backward(gf_layer_net *net, struct layer *l, int B, gf_layer_grad *g)
{
	const struct cbn_cfg *c = LAYER_CCFG(struct cbn_cfg, l);
	gf_bn_desc d = cbn_desc(net, l, B);
	const struct node *out = layer_out(net, l);
	const struct node *cn = c->classes ? NULL : &net->nodes[l->with];
	float *dg = aff(net, l, 2), *db = aff(net, l, 3);
	int rc, acc;
	if ((rc = net->be->ops->cbn_backward(net->be, g->dx, dg, db, out->grad, out->data, layer_in(net, l)->data,
	                                     aff(net, l, 0), stat(l, 0), stat(l, 1), &d)))
		return rc;
	/* the input and cond may share the accumulation scratch: fold the
	 * first in before writing the second */
	if (g->dx && cn && cn->needs) {
		if ((rc = gf_layer_grad_done(net, l->in, B)))
			return rc;
		g->dx = NULL;
	}
	if (g->dw) {
		for (int j = 0; j < 2; j++) {
			const float *dgb = j ? db : dg;
			float *dw = gf_sn_dweight(net, l, &c->sn[j], g, &acc);
			if (c->classes)
				rc = net->be->ops->embedding_backward(net->be, dw, dgb, labels(net), B, c->c, c->classes, acc);
			else
				rc = net->be->ops->gemm(net->be, 1, 0, c->c, c->dim, B, 1.0f, dgb, c->c, cn->data, c->dim,
				                        acc ? 1.0f : 0.0f, dw, c->dim);
			if (!rc && c->bias)
				rc = net->be->ops->bias_grad(net->be, layer_grad(net, l, c->sn[j].param + 1), dgb, B, c->c, 1, g->acc);
			if (rc || (rc = gf_sn_backward(net, l, &c->sn[j], g)))
				return rc;
		}
	}
	if (cn && cn->needs) {
		float *dc = gf_layer_grad_dst(net, l->with);
		if ((rc = net->be->ops->gemm(net->be, 0, 0, B, c->dim, c->c, 1.0f, dg, c->c, gf_sn_used(net, l, &c->sn[0]),
		                             c->dim, 0.0f, dc, c->dim)) ||
		    (rc = net->be->ops->gemm(net->be, 0, 0, B, c->dim, c->c, 1.0f, db, c->c, gf_sn_used(net, l, &c->sn[1]),
		                             c->dim, 1.0f, dc, c->dim)))
			return rc;
		return gf_layer_grad_done(net, l->with, B);
	}
	return 0;
}

static double cbn_flops(const gf_layer_net *net, const struct layer *l, int B, int exec)
{
	(void)net;
	(void)exec;
	const struct cbn_cfg *c = LAYER_CCFG(struct cbn_cfg, l);
	return c->classes ? 0.0 : 4.0 * B * c->c * c->dim;   /* the two projections */
}

static const char *cbn_note(const struct layer *l)
{
	gf_act act = LAYER_CCFG(struct cbn_cfg, l)->act;
	return act == GF_ACT_LRELU ? "  + lrelu" : act == GF_ACT_RELU ? "  + relu" : NULL;
}

/* cbn -> relu/lrelu: the activation inside the normalisation pass */
static int cbn_absorb_output(const gf_layer_net *net, struct layer *l, const struct layer *next)
{
	(void)net;
	struct cbn_cfg *c = LAYER_CFG(struct cbn_cfg, l);
	if (c->act != GF_ACT_NONE || (next->as_act != GF_ACT_RELU && next->as_act != GF_ACT_LRELU))
		return 0;
	c->act = next->as_act;
	c->act_param = next->as_act == GF_ACT_RELU ? 0.0f : next->as_act_param;
	return 1;
}

const gf_layer_kind gf_layer_cbn = {
	.name = "cbn",
	.aliases = (const char *const[]){ "ccbn", NULL },
	.min_pos = 1,
	.max_pos = 3,
	.keys = { "eps", "momentum", "classes", "cond", "bias", "sn", "init" },
	.flags = GF_LK_STATEFUL,
	.parse = cbn_parse,
	.shapes = cbn_shapes,
	.init = cbn_init,
	.forward = cbn_forward,
	.backward = cbn_backward,
	.flops = cbn_flops,
	.note = cbn_note,
	.absorb_output = cbn_absorb_output,
	.absorbed_note = "  fused into the conditional batchnorm",
};
