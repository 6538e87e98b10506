/* diffaugment: DiffAugment (Zhao et al. 2020), differentiable augmentation
 * of D's input, as the first layer of a discriminator:
 *
 *   {"diffaugment", "color,translation,cutout"}     (policy = "...")
 *
 * In training mode (d_step's real and fake passes, and g_step's D replica,
 * whose input gradient G trains through) every sample gets its own random
 * brightness, saturation and contrast, a translation by up to 1/8 of the
 * image with zeros shifted in, and a cutout of half the image's side, in
 * that order, for the parts the policy names; in eval mode the layer is
 * the identity. The parameters are 7 uniforms per sample drawn on the
 * backend from the network's generator (gf_net_rng), which each training
 * forward advances, so a resumed run draws the same ones. Backend ops
 * augment_forward / augment_backward (the map is affine in the image: the
 * backward is its transpose). */
#include <string.h>

#include "../layer_kind.h"

struct aug_cfg {
	unsigned what;  /* GF_AUG_* */
	int u;          /* save slot of the uniforms (max_batch, 7) */
};
LAYER_CFG_FITS(struct aug_cfg);

static int aug_parse(gf_layer_net *net, struct layer *l, const gf_layer_args *a)
{
	(void)net;
	struct aug_cfg *c = LAYER_CFG(struct aug_cfg, l);
	const gf_value *v = gf_layer_arg(a, 0);
	const gf_value *k = gf_value_get(a->v, "policy");
	if (v && k)
		return gf_layer_err(GF_EPARAM, l, "the policy is given twice (positional and policy =)");
	int ok = 1;
	const char *policy = gf_value_as_str(v ? v : k, "color,translation,cutout", &ok);
	if (!ok)
		return gf_layer_err(GF_EPARAM, l, "policy must be a string such as \"color,translation,cutout\"");
	static const struct {
		const char *name;
		unsigned bit;
	} parts[] = { { "color", GF_AUG_COLOR }, { "translation", GF_AUG_TRANSLATION }, { "cutout", GF_AUG_CUTOUT } };
	c->what = 0;
	for (const char *p = policy; *p;) {
		size_t n = strcspn(p, ",");
		unsigned bit = 0;
		for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
			if (strlen(parts[i].name) == n && !strncmp(parts[i].name, p, n))
				bit = parts[i].bit;
		if (!bit)
			return gf_layer_err(GF_EPARAM, l, "unknown augmentation '%.*s' in policy \"%s\" (color, translation, "
			                                  "cutout; applied in that order)",
			                    (int)n, p, policy);
		c->what |= bit;
		p += n + (p[n] == ',');
	}
	if (!c->what)
		return gf_layer_err(GF_EPARAM, l, "empty policy (color, translation, cutout)");
	return 0;
}

static int aug_shapes(gf_layer_net *net, struct layer *l)
{
	struct aug_cfg *c = LAYER_CFG(struct aug_cfg, l);
	const struct node *in = layer_in(net, l);
	int rc = gf_layer_expect_image(l, in, 0);
	if (rc)
		return rc;
	if (!GF_BACKEND_HAS(net->be, augment_backward))
		return gf_layer_err(GF_EUNSUPPORTED, l, "the backend has no augment ops");
	gf_layer_set_shape(layer_out(net, l), 3, in->shape);
	c->u = gf_layer_save(l, (size_t)net->max_batch * 7);
	return 0;
}

static int aug_forward(gf_layer_net *net, struct layer *l, int B, unsigned mode)
{
	const struct aug_cfg *c = LAYER_CCFG(struct aug_cfg, l);
	const struct node *in = layer_in(net, l);
	float *y = layer_out(net, l)->data;
	if (!(mode & GF_TRAIN))
		return net->be->ops->copy(net->be, y, in->data, (size_t)B * in->numel * sizeof(float), GF_COPY_D2D);
	size_t nu = (size_t)B * 7;
	int rc = net->be->ops->rng_uniform(net->be, l->save[c->u], nu, 0.0f, 1.0f, &net->rng);
	if (rc)
		return rc;
	net->rng.offset += gf_rng_blocks(nu);
	return net->be->ops->augment_forward(net->be, y, in->data, l->save[c->u], B, (int)in->shape[0], (int)in->shape[1],
	                                     (int)in->shape[2], c->what);
}

static int aug_backward(gf_layer_net *net, struct layer *l, int B, gf_layer_grad *g)
{
	const struct aug_cfg *c = LAYER_CCFG(struct aug_cfg, l);
	const struct node *in = layer_in(net, l);
	const float *dy = layer_out(net, l)->grad;
	if (!g->dx)
		return 0;
	if (!(net->mode & GF_TRAIN))
		return net->be->ops->copy(net->be, g->dx, dy, (size_t)B * in->numel * sizeof(float), GF_COPY_D2D);
	return net->be->ops->augment_backward(net->be, g->dx, dy, l->save[c->u], B, (int)in->shape[0], (int)in->shape[1],
	                                      (int)in->shape[2], c->what);
}

/* The map is affine in the image for the drawn parameters: J t is its
 * linear part (backend augment_linear: without the brightness shift). */
static int aug_backward2(gf_layer_net *net, struct layer *l, int B, gf_layer_grad2 *g)
{
	const struct aug_cfg *c = LAYER_CCFG(struct aug_cfg, l);
	const struct node *in = layer_in(net, l);
	if (!g->tout)
		return 0;
	if (!(net->mode & GF_TRAIN))
		return net->be->ops->copy(net->be, g->tout, in->tan, (size_t)B * in->numel * sizeof(float), GF_COPY_D2D);
	if (!GF_BACKEND_HAS(net->be, augment_linear))
		return gf_layer_err(GF_EUNSUPPORTED, l, "the %s backend has no augment_linear op", net->be->ops->name);
	return net->be->ops->augment_linear(net->be, g->tout, in->tan, l->save[c->u], B, (int)in->shape[0],
	                                    (int)in->shape[1], (int)in->shape[2], c->what);
}

const gf_layer_kind gf_layer_diffaugment = {
	.name = "diffaugment",
	.aliases = (const char *const[]){ "augment", NULL },
	.min_pos = 0,
	.max_pos = 1,
	.keys = { "policy" },
	.flags = GF_LK_STATEFUL,
	.parse = aug_parse,
	.shapes = aug_shapes,
	.forward = aug_forward,
	.backward = aug_backward,
	.backward2 = aug_backward2,
};
