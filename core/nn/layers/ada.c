/* ada: StyleGAN2-ADA's adaptive discriminator augmentation (Karras et al.
 * 2020) as the first layer of a discriminator:
 *
 *   {"ada", "bgc", p = 0}     (pipe = "bgc": blit, geom, color)
 *
 * In training mode (d_step's real and fake passes, its R1 pass, and
 * g_step's D replica, whose input gradient G trains through) every sample
 * gets StyleGAN2-ADA's transforms of the parts named, each one on with
 * probability p: x-flip, quarter turns, integer translation (blit);
 * isotropic and anisotropic scaling, rotation, fractional translation
 * (geom: composed into one map and resampled once, bilinearly, the image
 * continued by reflection); brightness, contrast, luma flip, hue rotation,
 * saturation (color: one colour matrix). In eval mode the layer is the
 * identity. p is the layer's buffer "p" (checkpointed with D, sent to
 * g_step's replica with D's weights); d_step adjusts it from D's outputs
 * on real images (ada_target, ada_interval, ada_kimg; <ganflow/train.h>
 * gf_ada). The random draws are GF_ADA_U uniforms per sample from the
 * network's generator (gf_net_rng), so a resumed run draws the same ones.
 * There is no PyTorch module for it: tests/ref/make_ada_refs.py writes the
 * reference, StyleGAN2-ADA's AugmentPipe maths in torch 1.13 with bilinear
 * resampling. Backend ops ada_params / ada_forward / ada_backward (the
 * map is affine in the image for drawn parameters: its backward is the
 * transpose, its double backward the forward without the offset). */
#include <stdio.h>
#include <string.h>

#include "../layer_kind.h"

struct ada_cfg {
	unsigned what;  /* GF_ADA_* */
	float p0;       /* p at creation (the buffer's fill) */
	int u, m;       /* save slots: the uniforms (max_batch, GF_ADA_U), the transforms (max_batch, GF_ADA_M) */
	char pipe[8];   /* as given, for the summary */
};
LAYER_CFG_FITS(struct ada_cfg);

static int ada_parse(gf_layer_net *net, struct layer *l, const gf_layer_args *a)
{
	(void)net;
	struct ada_cfg *c = LAYER_CFG(struct ada_cfg, l);
	const gf_value *v = gf_layer_arg(a, 0);
	const gf_value *k = gf_value_get(a->v, "pipe");
	if (v && k)
		return gf_layer_err(GF_EPARAM, l, "the pipe is given twice (positional and pipe =)");
	int ok = 1;
	const char *pipe = gf_value_as_str(v ? v : k, "bgc", &ok);
	if (!ok)
		return gf_layer_err(GF_EPARAM, l, "pipe must be a string such as \"bgc\"");
	c->what = 0;
	for (const char *s = pipe; *s; s++) {
		unsigned bit = *s == 'b' ? GF_ADA_BLIT : *s == 'g' ? GF_ADA_GEOM : *s == 'c' ? GF_ADA_COLOR : 0;
		if (!bit)
			return gf_layer_err(GF_EPARAM, l,
			                    "pipe \"%s\": unknown part '%c' (b = blit, g = geom, c = color, as StyleGAN2-ADA's "
			                    "\"bgc\"; its filter, noise and cutout parts are not implemented)",
			                    pipe, *s);
		if (c->what & bit)
			return gf_layer_err(GF_EPARAM, l, "pipe \"%s\" names '%c' twice", pipe, *s);
		c->what |= bit;
	}
	if (!c->what)
		return gf_layer_err(GF_EPARAM, l, "empty pipe (b = blit, g = geom, c = color)");
	snprintf(c->pipe, sizeof(c->pipe), "%s", pipe);
	int rc = gf_layer_arg_num(a, -1, "p", 0.0, &c->p0);
	if (rc)
		return rc;
	if (!(c->p0 >= 0.0f && c->p0 <= 1.0f))
		return gf_layer_err(GF_EPARAM, l, "p = %g is out of range (0..1, the probability of each transform)",
		                    (double)c->p0);
	return 0;
}

static int ada_shapes(gf_layer_net *net, struct layer *l)
{
	struct ada_cfg *c = LAYER_CFG(struct ada_cfg, l);
	const struct node *in = layer_in(net, l);
	int rc = gf_layer_expect_image(l, in, 0);
	if (rc)
		return rc;
	if ((c->what & GF_ADA_COLOR) && in->shape[0] != 1 && in->shape[0] != 3)
		return gf_layer_err(GF_ESHAPE, l, "colour transforms (pipe \"%s\") need 1 or 3 channels, the input has %lld",
		                    c->pipe, (long long)in->shape[0]);
	if (in->shape[1] < 2 || in->shape[2] < 2)
		return gf_layer_err(GF_ESHAPE, l, "images of %lldx%lld: the reflection needs 2 pixels or more per side",
		                    (long long)in->shape[1], (long long)in->shape[2]);
	if (!GF_BACKEND_HAS(net->be, ada_backward))
		return gf_layer_err(GF_EUNSUPPORTED, l, "the %s backend has no ada ops", net->be->ops->name);
	gf_layer_set_shape(layer_out(net, l), 3, in->shape);
	gf_layer_buffer(l, "p", 1, c->p0);
	c->u = gf_layer_save(l, (size_t)net->max_batch * GF_ADA_U);
	c->m = gf_layer_save(l, (size_t)net->max_batch * GF_ADA_M);
	return 0;
}

static int ada_forward(gf_layer_net *net, struct layer *l, int B, unsigned mode)
{
	const struct ada_cfg *c = LAYER_CCFG(struct ada_cfg, l);
	const struct node *in = layer_in(net, l);
	const gf_backend_ops *o = net->be->ops;
	float *y = layer_out(net, l)->data;
	int ch = (int)in->shape[0], h = (int)in->shape[1], w = (int)in->shape[2];
	if (!(mode & GF_TRAIN))
		return o->copy(net->be, y, in->data, (size_t)B * in->numel * sizeof(float), GF_COPY_D2D);
	size_t nu = (size_t)B * GF_ADA_U;
	int rc = o->rng_uniform(net->be, l->save[c->u], nu, 0.0f, 1.0f, &net->rng);
	if (rc)
		return rc;
	net->rng.offset += gf_rng_blocks(nu);
	if ((rc = o->ada_params(net->be, l->save[c->m], l->save[c->u], layer_buffer(net, l, 0), B, ch, h, w, c->what)))
		return rc;
	return o->ada_forward(net->be, y, in->data, l->save[c->m], B, ch, h, w, 1);
}

static int ada_backward(gf_layer_net *net, struct layer *l, int B, gf_layer_grad *g)
{
	const struct ada_cfg *c = LAYER_CCFG(struct ada_cfg, l);
	const struct node *in = layer_in(net, l);
	const float *dy = layer_out(net, l)->grad;
	if (!g->dx)
		return 0;
	if (!(net->mode & GF_TRAIN))
		return net->be->ops->copy(net->be, g->dx, dy, (size_t)B * in->numel * sizeof(float), GF_COPY_D2D);
	return net->be->ops->ada_backward(net->be, g->dx, dy, l->save[c->m], B, (int)in->shape[0], (int)in->shape[1],
	                                  (int)in->shape[2]);
}

/* Linear in the image for the drawn transforms: J t is the forward of the
 * tangent without the colour offset, and there are no second-order terms. */
static int ada_backward2(gf_layer_net *net, struct layer *l, int B, gf_layer_grad2 *g)
{
	const struct ada_cfg *c = LAYER_CCFG(struct ada_cfg, l);
	const struct node *in = layer_in(net, l);
	if (!g->tout)
		return 0;
	if (!(net->mode & GF_TRAIN))
		return net->be->ops->copy(net->be, g->tout, in->tan, (size_t)B * in->numel * sizeof(float), GF_COPY_D2D);
	return net->be->ops->ada_forward(net->be, g->tout, in->tan, l->save[c->m], B, (int)in->shape[0],
	                                 (int)in->shape[1], (int)in->shape[2], 0);
}

static const char *ada_note(const struct layer *l)
{
	return LAYER_CCFG(struct ada_cfg, l)->pipe;
}

const gf_layer_kind gf_layer_ada = {
	.name = "ada",
	.min_pos = 0,
	.max_pos = 1,
	.keys = { "pipe", "p" },
	.flags = GF_LK_STATEFUL,
	.parse = ada_parse,
	.shapes = ada_shapes,
	.forward = ada_forward,
	.backward = ada_backward,
	.backward2 = ada_backward2,
	.note = ada_note,
};
