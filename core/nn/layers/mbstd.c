/* mbstd: minibatch standard deviation (Karras et al., progressive GANs;
 * StyleGAN2's MinibatchStdLayer), near the end of a discriminator:
 *
 *   {"mbstd", group = 4, channels = 1}        (C, H, W) -> (C + channels, H, W)
 *
 * The batch is split into groups of G = min(group, batch) samples (sample
 * i is member i / (batch / G) of group i % (batch / G), StyleGAN2's
 * x.reshape(G, -1, F, C / F, H, W)); for each group and each of the
 * `channels` slices of C / channels channels, the standard deviation over
 * the group's members, sqrt(biased variance + 1e-8), is averaged over the
 * slice and appended as a constant plane to every member. PyTorch
 * (StyleGAN2-ADA's training/networks.py):
 *
 *   y = x.reshape(G, -1, F, c, H, W); y = y - y.mean(dim=0)
 *   y = y.square().mean(dim=0); y = (y + 1e-8).sqrt(); y = y.mean(dim=[2, 3, 4])
 *   y = y.reshape(-1, F, 1, 1).repeat(G, 1, H, W); torch.cat([x, y], dim=1)
 *
 * The batch must be a multiple of G (a forward error names the layer
 * otherwise). Backend mbstd_forward / mbstd_backward / mbstd_backward2
 * (the statistics depend on x nonlinearly: the double backward has a
 * second-order term on the input). */
#include "../layer_kind.h"

#define MBSTD_EPS 1e-8f

struct mbstd_cfg {
	int group, f;
};
LAYER_CFG_FITS(struct mbstd_cfg);

static int mbstd_parse(gf_layer_net *net, struct layer *l, const gf_layer_args *a)
{
	(void)net;
	struct mbstd_cfg *c = LAYER_CFG(struct mbstd_cfg, l);
	int rc;
	if ((rc = gf_layer_arg_int(a, 0, "group", 4, 1, &c->group)) || (rc = gf_layer_arg_int(a, 1, "channels", 1, 1, &c->f)))
		return rc;
	if (c->group > 64)
		return gf_layer_err(GF_EPARAM, l, "group = %d is out of range (1..64)", c->group);
	return 0;
}

static int mbstd_shapes(gf_layer_net *net, struct layer *l)
{
	const struct mbstd_cfg *c = LAYER_CCFG(struct mbstd_cfg, l);
	const struct node *in = layer_in(net, l);
	int rc = gf_layer_expect_image(l, in, 0);
	if (rc)
		return rc;
	if (in->shape[0] % c->f)
		return gf_layer_err(GF_ESHAPE, l, "%lld input channels are not a multiple of channels = %d",
		                    (long long)in->shape[0], c->f);
	if (!GF_BACKEND_HAS(net->be, mbstd_forward) || !GF_BACKEND_HAS(net->be, mbstd_backward))
		return gf_layer_err(GF_EUNSUPPORTED, l, "the %s backend has no mbstd ops", net->be->ops->name);
	gf_layer_set_shape(layer_out(net, l), 3, (int64_t[]){ in->shape[0] + c->f, in->shape[1], in->shape[2] });
	return 0;
}

static int mbstd_desc(const gf_layer_net *net, const struct layer *l, int B, gf_mbstd_desc *d)
{
	const struct mbstd_cfg *c = LAYER_CCFG(struct mbstd_cfg, l);
	const struct node *in = layer_in(net, l);
	*d = (gf_mbstd_desc){ .n = B, .c = (int)in->shape[0], .h = (int)in->shape[1], .w = (int)in->shape[2],
	                      .group = c->group < B ? c->group : B, .f = c->f, .eps = MBSTD_EPS };
	if (B % d->group)
		return gf_layer_err(GF_ESHAPE, l, "batch %d is not a multiple of the group size %d", B, d->group);
	return 0;
}

static int mbstd_forward(gf_layer_net *net, struct layer *l, int B, unsigned mode)
{
	(void)mode;
	gf_mbstd_desc d;
	int rc = mbstd_desc(net, l, B, &d);
	return rc ? rc : net->be->ops->mbstd_forward(net->be, layer_out(net, l)->data, layer_in(net, l)->data, &d);
}

static int mbstd_backward(gf_layer_net *net, struct layer *l, int B, gf_layer_grad *g)
{
	gf_mbstd_desc d;
	int rc = mbstd_desc(net, l, B, &d);
	if (rc || !g->dx)
		return rc;
	return net->be->ops->mbstd_backward(net->be, g->dx, layer_out(net, l)->grad, layer_in(net, l)->data, &d);
}

static int mbstd_backward2(gf_layer_net *net, struct layer *l, int B, gf_layer_grad2 *g)
{
	const struct node *in = layer_in(net, l);
	gf_mbstd_desc d;
	int rc = mbstd_desc(net, l, B, &d);
	if (rc)
		return rc;
	if (!GF_BACKEND_HAS(net->be, mbstd_backward2))
		return gf_layer_err(GF_EUNSUPPORTED, l, "the %s backend has no mbstd_backward2 op", net->be->ops->name);
	float *dx = in->needs ? gf_layer_grad_dst(net, l->in) : NULL;
	if ((rc = net->be->ops->mbstd_backward2(net->be, g->tout, dx, in->tan, layer_out(net, l)->grad, in->data, &d)))
		return rc;
	return dx ? gf_layer_grad_done(net, l->in, B) : 0;
}

const gf_layer_kind gf_layer_mbstd = {
	.name = "mbstd",
	.aliases = (const char *const[]){ "minibatch_stddev", NULL },
	.max_pos = 2,
	.keys = { "group", "channels" },
	.parse = mbstd_parse,
	.shapes = mbstd_shapes,
	.forward = mbstd_forward,
	.backward = mbstd_backward,
	.backward2 = mbstd_backward2,
};
