/* fir: StyleGAN2's FIR resampling with the [1, 3, 3, 1] filter,
 * upfirdn2d semantics (StyleGAN2-ADA's torch_utils/ops/upfirdn2d.py):
 *
 *   {"fir", up = 1, down = 1, pad = {p0, p1}, gain = up * up}
 *
 * Each channel is upsampled by inserting up - 1 zeros after every pixel
 * (rows and columns), padded with p0 zeros before and p1 after, filtered
 * by the separable 4x4 filter f f^T, f = [1, 3, 3, 1] / 8 (sum 1) times
 * gain, and every down-th pixel kept: out = (in * up + p0 + p1 - 4) / down
 * + 1. StyleGAN2's uses, each one line:
 *
 *   {"fir", up = 2}                 upsample2d: pad {2, 1}, gain 4 (2H)
 *   {"fir", down = 2}               downsample2d: pad {1, 1} (H/2)
 *   {"fir", pad = 2}                the blur before a 3x3 stride-2 conv (D's down conv: H + 1)
 *   {"fir", pad = 1, gain = 4}      the blur after a stride-2 transposed conv (G's up conv: 2H + 1 -> 2H)
 *
 * StyleGAN2's conv2d_resample is the composition of these with a conv
 * (down) or modconv (up) in the layer table, not a fused kind. up and down
 * are 1 or 2; the same pads apply to rows and columns.
 *
 * Backend ops fir_forward / fir_backward (the adjoint), gathers with the
 * taps in the descriptor. Linear in x: the double backward's J t is the
 * forward on t, with no other term. */
#include "../layer_kind.h"

struct fir_cfg {
	int up, down, p0, p1;
	float gain;
};
LAYER_CFG_FITS(struct fir_cfg);

static int read_pad(const gf_layer_args *a, int up, int down, int *p0, int *p1)
{
	const gf_value *v = gf_value_get(a->v, "pad");
	if (!v) {
		if (up == 2 && down == 1) {
			*p0 = 2, *p1 = 1;   /* upsample2d: (fw + up - 1) / 2, (fw - up) / 2 */
			return 0;
		}
		if (down == 2 && up == 1) {
			*p0 = *p1 = 1;      /* downsample2d */
			return 0;
		}
		return gf_layer_err(GF_EPARAM, a->l, "needs pad (a number or {before, after}) unless up = 2 or down = 2");
	}
	int ok0 = 1, ok1 = 1;
	if (v->type == GF_VLIST && gf_value_len(v) == 2) {
		*p0 = (int)gf_value_as_int(gf_value_at(v, 0), -1, &ok0);
		*p1 = (int)gf_value_as_int(gf_value_at(v, 1), -1, &ok1);
	} else {
		*p0 = *p1 = (int)gf_value_as_int(v, -1, &ok0);
	}
	if (!ok0 || !ok1 || *p0 < 0 || *p1 < 0 || *p0 > 64 || *p1 > 64)
		return gf_layer_err(GF_EPARAM, a->l, "pad must be a number or {before, after}, each in 0..64");
	return 0;
}

static int fir_parse(gf_layer_net *net, struct layer *l, const gf_layer_args *a)
{
	(void)net;
	struct fir_cfg *c = LAYER_CFG(struct fir_cfg, l);
	int rc;
	if ((rc = gf_layer_arg_int(a, -1, "up", 1, 1, &c->up)) || (rc = gf_layer_arg_int(a, -1, "down", 1, 1, &c->down)))
		return rc;
	if (c->up > 2 || c->down > 2)
		return gf_layer_err(GF_EPARAM, l, "up = %d, down = %d: each 1 or 2", c->up, c->down);
	if ((rc = read_pad(a, c->up, c->down, &c->p0, &c->p1)) ||
	    (rc = gf_layer_arg_num(a, -1, "gain", (double)(c->up * c->up), &c->gain)))
		return rc;
	return 0;
}

static int fir_shapes(gf_layer_net *net, struct layer *l)
{
	const struct fir_cfg *c = LAYER_CCFG(struct fir_cfg, l);
	const struct node *in = layer_in(net, l);
	char s[96];
	int rc = gf_layer_expect_image(l, in, 0);
	if (rc)
		return rc;
	if (!GF_BACKEND_HAS(net->be, fir_forward) || !GF_BACKEND_HAS(net->be, fir_backward))
		return gf_layer_err(GF_EUNSUPPORTED, l, "the %s backend has no fir ops", net->be->ops->name);
	int64_t ho = in->shape[1] * c->up + c->p0 + c->p1 - 4, wo = in->shape[2] * c->up + c->p0 + c->p1 - 4;
	if (ho < 0 || wo < 0)
		return gf_layer_err(GF_ESHAPE, l, "the 4x4 filter does not fit the padded input %s",
		                    gf_layer_shape_str(in, s, sizeof(s)));
	gf_layer_set_shape(layer_out(net, l), 3, (int64_t[]){ in->shape[0], ho / c->down + 1, wo / c->down + 1 });
	return 0;
}

static gf_fir_desc fir_desc(const gf_layer_net *net, const struct layer *l, int B)
{
	const struct fir_cfg *c = LAYER_CCFG(struct fir_cfg, l);
	const struct node *in = layer_in(net, l), *out = layer_out(net, l);
	return (gf_fir_desc){ .n = B * (int)in->shape[0], .h = (int)in->shape[1], .w = (int)in->shape[2],
		              .hout = (int)out->shape[1], .wout = (int)out->shape[2], .up = c->up, .down = c->down,
		              .p0 = c->p0, .f = { 1.0f / 8, 3.0f / 8, 3.0f / 8, 1.0f / 8 }, .gain = c->gain };
}

static int fir_forward(gf_layer_net *net, struct layer *l, int B, unsigned mode)
{
	(void)mode;
	gf_fir_desc d = fir_desc(net, l, B);
	return net->be->ops->fir_forward(net->be, layer_out(net, l)->data, layer_in(net, l)->data, &d);
}

static int fir_backward(gf_layer_net *net, struct layer *l, int B, gf_layer_grad *g)
{
	gf_fir_desc d = fir_desc(net, l, B);
	return g->dx ? net->be->ops->fir_backward(net->be, g->dx, layer_out(net, l)->grad, &d) : 0;
}

/* linear: J t is the resampling of t */
static int fir_backward2(gf_layer_net *net, struct layer *l, int B, gf_layer_grad2 *g)
{
	gf_fir_desc d = fir_desc(net, l, B);
	return g->tout ? net->be->ops->fir_forward(net->be, g->tout, layer_in(net, l)->tan, &d) : 0;
}

const gf_layer_kind gf_layer_fir = {
	.name = "fir",
	.aliases = (const char *const[]){ "upfirdn2d", NULL },
	.keys = { "up", "down", "pad", "gain" },
	.parse = fir_parse,
	.shapes = fir_shapes,
	.forward = fir_forward,
	.backward = fir_backward,
	.backward2 = fir_backward2,
};
