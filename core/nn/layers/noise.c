/* noise: StyleGAN2's noise injection (SynthesisLayer's noise input),
 *
 *   {"noise", channels, mode = "auto", strength = "scalar"}   (C, H, W) -> (C, H, W)
 *
 *   y = x + s * noise[n, h, w]            strength = "scalar" (StyleGAN2)
 *   y = x + s[c] * noise[n, h, w]         strength = "channel" (StyleGAN1)
 *
 * one N(0, 1) value per pixel and sample, shared by the channels, scaled
 * by a learned strength (parameter noise_strength, (1) or (C), starting
 * at 0: the layer starts as the identity). StyleGAN2-ADA's SynthesisLayer
 * learns one scalar per layer (torch.zeros([])), the default; one per
 * channel is StyleGAN1's, and what this layer learned before it had the
 * option (checkpoints of then hold (C) strengths: gf_ckpt_table reads them
 * as strength = "channel", see docs/nn.md). mode:
 *   "random"  a fresh draw at every forward, from the network's generator
 *             (gf_net_rng, as dropout: a resumed run draws the same noise);
 *   "const"   the buffer noise_const (H, W), drawn by gf_net_init from the
 *             run's initialisation generator right after the layer's
 *             parameters and checkpointed (StyleGAN2's noise_const, for
 *             evaluation and sampling: the same image for the same z);
 *   "none"    y = x;
 *   "auto"    random in training forwards (GF_TRAIN), const in eval ones.
 * PyTorch: x + noise * strength (a 0-dim tensor) or
 * x + noise * strength.view(1, -1, 1, 1), noise (B, 1, H, W).
 *
 * The products are strided batched GEMMs (gemm_batched: the (C, 1)
 * strengths times each sample's (1, H W) noise, and their gradient summed
 * over the batch); a scalar is first spread over the C rows (gemm: ones
 * (C, 1) times s) and its gradient summed back (ones (1, C) times the
 * rows' gradients); the draw is rng_normal: no op of its own. The input
 * gradient is dy, which does not depend on the strength: the double
 * backward is J t = t with no other term. */
#include <string.h>

#include "../layer_kind.h"

enum { NOISE_AUTO, NOISE_RANDOM, NOISE_CONST, NOISE_NONE };

struct noise_cfg {
	int c, mode;
	int scalar;  /* strength = "scalar": one strength for the C channels */
	int used;    /* what the last forward added: NOISE_RANDOM, _CONST or _NONE */
	int drawn;   /* save slot: the last random draw (max_batch, H W) */
	int rows;    /* save slot (scalar): ones (C), then the strength per row (C), then its gradient (C) */
};
LAYER_CFG_FITS(struct noise_cfg);

static int noise_parse(gf_layer_net *net, struct layer *l, const gf_layer_args *a)
{
	(void)net;
	struct noise_cfg *c = LAYER_CFG(struct noise_cfg, l);
	static const char *const modes[] = { "auto", "random", "const", "none" };
	int rc, ok;
	if ((rc = gf_layer_arg_int(a, 0, "channels", 0, 1, &c->c)))
		return rc;
	const char *m = gf_value_as_str(gf_value_get(a->v, "mode"), "auto", &ok);
	c->mode = -1;
	for (int i = 0; ok && i < 4; i++)
		if (strcmp(m, modes[i]) == 0)
			c->mode = i;
	if (c->mode < 0)
		return gf_layer_err(GF_EPARAM, l, "mode must be \"auto\", \"random\", \"const\" or \"none\"");
	const char *st = gf_value_as_str(gf_value_get(a->v, "strength"), "scalar", &ok);
	if (!ok || (strcmp(st, "scalar") && strcmp(st, "channel")))
		return gf_layer_err(GF_EPARAM, l, "strength must be \"scalar\" (one per layer, StyleGAN2) or \"channel\" "
		                                  "(one per channel)");
	c->scalar = !strcmp(st, "scalar");
	return 0;
}

static int noise_shapes(gf_layer_net *net, struct layer *l)
{
	struct noise_cfg *c = LAYER_CFG(struct noise_cfg, l);
	const struct node *in = layer_in(net, l);
	int rc = gf_layer_expect_image(l, in, c->c);
	if (rc)
		return rc;
	if (!GF_BACKEND_HAS(net->be, gemm_batched))
		return gf_layer_err(GF_EUNSUPPORTED, l, "the %s backend has no gemm_batched op", net->be->ops->name);
	size_t hw = (size_t)(in->shape[1] * in->shape[2]);
	gf_layer_set_shape(layer_out(net, l), 3, in->shape);
	gf_layer_param(l, "noise_strength", 1, (int64_t[]){ c->scalar ? 1 : c->c });
	gf_layer_buffer(l, "noise_const", hw, 0.0f);
	c->drawn = gf_layer_save(l, (size_t)net->max_batch * hw);
	c->rows = c->scalar ? gf_layer_save(l, 3 * (size_t)c->c) : -1;
	return 0;
}

/* The strength of each of the C rows: the parameter itself per channel;
 * a scalar spread over the rows (ones (C, 1) times s (1, 1)). */
static int row_strengths(gf_layer_net *net, struct layer *l, const float **out)
{
	const struct noise_cfg *c = LAYER_CCFG(struct noise_cfg, l);
	gf_backend *be = net->be;
	*out = layer_param(net, l, 0);
	if (!c->scalar)
		return 0;
	float *ones = l->save[c->rows], *rows = ones + c->c;
	int rc = be->ops->fill(be, ones, (size_t)c->c, 1.0f);
	if (!rc)
		rc = be->ops->gemm(be, 0, 0, c->c, 1, 1, 1.0f, ones, 1, layer_param(net, l, 0), 1, 0.0f, rows, 1);
	*out = rows;
	return rc;
}

/* strength 0, then noise_const ~ N(0, 1) from the initialisation generator */
static int noise_init(gf_layer_net *net, struct layer *l, gf_rng *rng, float *host)
{
	int rc = net->be->ops->fill(net->be, layer_param(net, l, 0), l->param[0].n, 0.0f);
	if (rc)
		return rc;
	gf_rng_normal(rng, host, l->buf[0].n, 0.0f, 1.0f);
	return net->be->ops->copy(net->be, layer_buffer(net, l, 0), host, l->buf[0].n * sizeof(float), GF_COPY_H2D);
}

static const float *noise_of(const gf_layer_net *net, const struct layer *l, int64_t *stride)
{
	const struct noise_cfg *c = LAYER_CCFG(struct noise_cfg, l);
	const struct node *in = layer_in(net, l);
	*stride = c->used == NOISE_RANDOM ? in->shape[1] * in->shape[2] : 0;
	return c->used == NOISE_RANDOM ? l->save[c->drawn] : layer_buffer(net, l, 0);
}

static int noise_forward(gf_layer_net *net, struct layer *l, int B, unsigned mode)
{
	struct noise_cfg *c = LAYER_CFG(struct noise_cfg, l);
	const struct node *in = layer_in(net, l);
	struct node *out = layer_out(net, l);
	gf_backend *be = net->be;
	int hw = (int)(in->shape[1] * in->shape[2]), rc;
	c->used = c->mode != NOISE_AUTO ? c->mode : (mode & GF_TRAIN) ? NOISE_RANDOM : NOISE_CONST;
	if ((rc = be->ops->copy(be, out->data, in->data, (size_t)B * in->numel * sizeof(float), GF_COPY_D2D)) ||
	    c->used == NOISE_NONE)
		return rc;
	if (c->used == NOISE_RANDOM) {
		size_t n = (size_t)B * (size_t)hw;
		if ((rc = be->ops->rng_normal(be, l->save[c->drawn], n, 0.0f, 1.0f, &net->rng)))
			return rc;
		net->rng.offset += gf_rng_blocks(n);
	}
	int64_t stride;
	const float *z = noise_of(net, l, &stride), *s;
	if ((rc = row_strengths(net, l, &s)))
		return rc;
	return be->ops->gemm_batched(be, 0, 0, c->c, hw, 1, 1.0f, s, 1, 0, z, hw, stride, 1.0f, out->data, hw,
	                             (int64_t)c->c * hw, B);
}

static int noise_backward(gf_layer_net *net, struct layer *l, int B, gf_layer_grad *g)
{
	const struct noise_cfg *c = LAYER_CCFG(struct noise_cfg, l);
	const struct node *out = layer_out(net, l);
	gf_backend *be = net->be;
	int hw = (int)(out->shape[1] * out->shape[2]), rc;
	if (g->dx && (rc = be->ops->copy(be, g->dx, out->grad, (size_t)B * out->numel * sizeof(float), GF_COPY_D2D)))
		return rc;
	if (!g->dw)
		return 0;
	if (c->used == NOISE_NONE)
		return g->acc ? 0 : be->ops->fill(be, layer_grad(net, l, 0), (size_t)(c->scalar ? 1 : c->c), 0.0f);
	/* d strength per row (C, 1) = sum over the batch of dy_b (C, HW) noise_b^T */
	int64_t stride;
	const float *z = noise_of(net, l, &stride);
	float *drows = c->scalar ? (float *)l->save[c->rows] + 2 * c->c : layer_grad(net, l, 0);
	rc = be->ops->gemm_batched(be, 0, 1, c->c, 1, hw, 1.0f, out->grad, hw, (int64_t)c->c * hw, z, hw, stride,
	                           g->acc && !c->scalar ? 1.0f : 0.0f, drows, 1, 0, B);
	if (rc || !c->scalar)
		return rc;
	/* a scalar's: the rows' summed (ones (1, C) times their (C, 1)) */
	return be->ops->gemm(be, 0, 0, 1, 1, c->c, 1.0f, l->save[c->rows], c->c, drows, 1, g->acc ? 1.0f : 0.0f,
	                     layer_grad(net, l, 0), 1);
}

static int noise_backward2(gf_layer_net *net, struct layer *l, int B, gf_layer_grad2 *g)
{
	const struct node *in = layer_in(net, l);
	return g->tout ? net->be->ops->copy(net->be, g->tout, in->tan, (size_t)B * in->numel * sizeof(float), GF_COPY_D2D)
	               : 0;
}

const gf_layer_kind gf_layer_noise = {
	.name = "noise",
	.min_pos = 1,
	.max_pos = 1,
	.keys = { "channels", "mode", "strength" },
	.flags = GF_LK_STATEFUL,
	.parse = noise_parse,
	.shapes = noise_shapes,
	.init = noise_init,
	.forward = noise_forward,
	.backward = noise_backward,
	.backward2 = noise_backward2,
};
