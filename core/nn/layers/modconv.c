/* modconv: StyleGAN2's modulated convolution with weight demodulation
 * (Karras et al. 2020, StyleGAN2-ADA's modulated_conv2d):
 *
 *   {"modconv", cin, cout, k, with = styles, demod = true, up = 1, pad = k / 2 (0 with up = 2)}
 *
 * with per-sample styles s (cin) from `with` (a flat source: StyleGAN2's
 * affine of w, here an {"linear", w_dim, cin, eqlr = true, bias_init = 1}):
 *
 *   w'[n, o, i] = w[o, i] * s[n, i] * g,   d[n, o] = 1 / sqrt(sum_(i, taps) w'[n, o, i]^2 + 1e-8)
 *   y[n, o] = d[n, o] * conv(x[n], w'[n])                          (demod = true)
 *
 * g = 1 with demod (the demodulation cancels the weight's scale, as
 * StyleGAN2's SynthesisLayer, whose weight has no gain), 1 / sqrt(cin k k)
 * and no d without (StyleGAN2's ToRGBLayer, its weight_gain on the
 * styles: {"modconv", C, 3, 1, demod = false}). The weight is stored N(0,
 * 1), (cout, cin, k, k), or with up = 2 (cin, cout, k, k): StyleGAN2's
 * weight.transpose(0, 1), the transposed convolution's layout, as tconv.
 *
 * Computed in the "modulate the input, convolve, demodulate the output"
 * form (StyleGAN2-ADA's fused_modconv = False): x * s per (sample,
 * channel), one ordinary convolution of the whole batch with the shared
 * weight, then y * d; d from the per-(o, i) sums of squares of the weight
 * and s^2 by one GEMM. It equals the grouped-convolution form (a
 * convolution per sample with its own w'[n] d[n]) in exact arithmetic;
 * test_nn_ref_sg2 checks the two against each other and against PyTorch's
 * grouped form.
 *
 * up = 2: the convolution is transposed with stride 2 (StyleGAN2's
 * conv2d_resample up path): output (H - 1) 2 - 2 pad + k, then {"fir",
 * pad = 1, gain = 4} in the table gives StyleGAN2's 2H (a composition of
 * two layers, not a fused kind).
 *
 * Ops: row_scale, row_dot, gemm, rsqrt_eps and the conv ops. The backward
 * goes to x, to the styles (through the modulation and the
 * demodulation) and to the weight. No double backward: g_step's path
 * length penalty refuses a G with modconv by name (gf_net_check_backward2);
 * R1 differentiates D, which has none. */
#include <math.h>

#include "../layer_kind.h"

#define DEMOD_EPS 1e-8f

struct modconv_cfg {
	int cin, cout, k, up, pad, demod;
	float gain;
	int big;     /* save slot: xs | dxs (B, cin, HWin) | y0 | dy0 (B, cout, HWo) */
	int small;   /* save slot: d | D2 | dD2 | tmp (B, cout) | s2 | ds2 (B, cin) | W2 | dW2 (cout cin) | ws | dws (weight) */
};
LAYER_CFG_FITS(struct modconv_cfg);

static size_t align16(size_t n)
{
	return (n + 15) & ~(size_t)15;
}

static int modconv_parse(gf_layer_net *net, struct layer *l, const gf_layer_args *a)
{
	struct modconv_cfg *c = LAYER_CFG(struct modconv_cfg, l);
	int rc;
	if ((rc = gf_layer_arg_int(a, 0, NULL, 0, 1, &c->cin)) || (rc = gf_layer_arg_int(a, 1, NULL, 0, 1, &c->cout)) ||
	    (rc = gf_layer_arg_int(a, 2, NULL, 0, 1, &c->k)) || (rc = gf_layer_arg_bool(a, "demod", 1, &c->demod)) ||
	    (rc = gf_layer_arg_int(a, -1, "up", 1, 1, &c->up)))
		return rc;
	if (c->up > 2)
		return gf_layer_err(GF_EPARAM, l, "up = %d: 1 or 2", c->up);
	if ((rc = gf_layer_arg_int(a, -1, "pad", c->up == 1 ? c->k / 2 : 0, 0, &c->pad)))
		return rc;
	c->gain = c->demod ? 1.0f : (float)(1.0 / sqrt((double)c->cin * c->k * c->k));
	const gf_value *with = gf_value_get(a->v, "with");
	if (!with)
		return gf_layer_err(GF_EPARAM, l, "needs with = <the styles (cin): layer name or position>");
	return gf_layer_source(net, l, "with", with, &l->with);
}

static int modconv_shapes(gf_layer_net *net, struct layer *l)
{
	struct modconv_cfg *c = LAYER_CFG(struct modconv_cfg, l);
	const struct node *in = layer_in(net, l), *s = &net->nodes[l->with];
	char str[96];
	int rc = gf_layer_expect_image(l, in, c->cin);
	if (rc)
		return rc;
	if (!GF_BACKEND_HAS(net->be, row_dot) || !GF_BACKEND_HAS(net->be, row_scale) ||
	    !GF_BACKEND_HAS(net->be, rsqrt_eps))
		return gf_layer_err(GF_EUNSUPPORTED, l, "the %s backend has no row_dot/row_scale/rsqrt_eps ops",
		                    net->be->ops->name);
	if (s->is_label || s->ndim != 1 || s->shape[0] != c->cin)
		return gf_layer_err(GF_ESHAPE, l, "expects with = styles (%d), got %s", c->cin,
		                    gf_layer_shape_str(s, str, sizeof(str)));
	int64_t h = in->shape[1], w = in->shape[2], ho, wo;
	if (c->up == 1) {
		ho = h + 2 * c->pad - c->k + 1;
		wo = w + 2 * c->pad - c->k + 1;
	} else {
		ho = (h - 1) * 2 - 2 * c->pad + c->k;
		wo = (w - 1) * 2 - 2 * c->pad + c->k;
	}
	if (ho < 1 || wo < 1)
		return gf_layer_err(GF_ESHAPE, l, "kernel %d does not fit the padded input %s", c->k,
		                    gf_layer_shape_str(in, str, sizeof(str)));
	gf_layer_set_shape(layer_out(net, l), 3, (int64_t[]){ c->cout, ho, wo });
	if (c->up == 1)
		gf_layer_param(l, "weight", 4, (int64_t[]){ c->cout, c->cin, c->k, c->k });
	else
		gf_layer_param(l, "weight", 4, (int64_t[]){ c->cin, c->cout, c->k, c->k });
	size_t B = (size_t)net->max_batch, xin = B * in->numel, yo = B * (size_t)(c->cout * ho * wo);
	size_t nw = l->param[0].n, cc = (size_t)c->cout * (size_t)c->cin;
	c->big = gf_layer_save(l, 2 * align16(xin) + 2 * align16(yo));
	c->small = gf_layer_save(l, 4 * align16(B * (size_t)c->cout) + 2 * align16(B * (size_t)c->cin) + 2 * align16(cc) +
	                                2 * align16(nw));
	return 0;
}

static int modconv_init(gf_layer_net *net, struct layer *l, gf_rng *rng, float *host)
{
	gf_rng_normal(rng, host, l->param[0].n, 0.0f, 1.0f);
	return gf_layer_upload(net, l, 0, host);
}

/* the workspace's parts */
enum { P_XS, P_DXS, P_Y0, P_DY0, P_D, P_D2, P_DD2, P_TMP, P_S2, P_DS2, P_W2, P_DW2, P_WS, P_DWS };

static float *part(const gf_layer_net *net, const struct layer *l, int which)
{
	const struct modconv_cfg *c = LAYER_CCFG(struct modconv_cfg, l);
	const struct node *in = layer_in(net, l), *out = layer_out(net, l);
	size_t B = (size_t)net->max_batch, xin = align16(B * in->numel), yo = align16(B * out->numel);
	size_t bo = align16(B * (size_t)c->cout), bi = align16(B * (size_t)c->cin);
	size_t cc = align16((size_t)c->cout * (size_t)c->cin), nw = align16(l->param[0].n);
	size_t big[4] = { 0, xin, 2 * xin, 2 * xin + yo };
	size_t small[10] = { 0, bo, 2 * bo, 3 * bo, 4 * bo, 4 * bo + bi, 4 * bo + 2 * bi, 4 * bo + 2 * bi + cc,
		             4 * bo + 2 * bi + 2 * cc, 4 * bo + 2 * bi + 2 * cc + nw };
	if (which < P_D)
		return (float *)l->save[c->big] + big[which];
	return (float *)l->save[c->small] + small[which - P_D];
}

/* the convolution: up = 1 from the input to the output, up = 2 from the
 * output to the input (the layer is its data gradient) */
static gf_conv_desc modconv_desc(const gf_layer_net *net, const struct layer *l, int B)
{
	const struct modconv_cfg *c = LAYER_CCFG(struct modconv_cfg, l);
	const struct node *in = layer_in(net, l), *out = layer_out(net, l);
	return c->up == 1 ? gf_layer_conv_desc(in, out, c->k, 1, c->pad, B) : gf_layer_conv_desc(out, in, c->k, 2, c->pad, B);
}

static const float *used_weight(const gf_layer_net *net, const struct layer *l)
{
	return LAYER_CCFG(struct modconv_cfg, l)->demod ? layer_param(net, l, 0) : part(net, l, P_WS);
}

static int modconv_forward(gf_layer_net *net, struct layer *l, int B, unsigned mode)
{
	(void)mode;
	const struct modconv_cfg *c = LAYER_CCFG(struct modconv_cfg, l);
	const struct node *in = layer_in(net, l), *sn = &net->nodes[l->with];
	struct node *out = layer_out(net, l);
	gf_backend *be = net->be;
	const float *w = layer_param(net, l, 0), *s = sn->data;
	float *xs = part(net, l, P_XS), *y0 = c->demod ? part(net, l, P_Y0) : out->data;
	int hwi = (int)(in->numel / (size_t)c->cin), hwo = (int)(out->numel / (size_t)c->cout), kk = c->k * c->k, rc;
	size_t nw = l->param[0].n;
	gf_conv_desc d = modconv_desc(net, l, B);
	if ((rc = be->ops->row_scale(be, xs, s, in->data, B * c->cin, hwi, 0)))
		return rc;
	if (!c->demod && ((rc = be->ops->copy(be, part(net, l, P_WS), w, nw * sizeof(float), GF_COPY_D2D)) ||
	                  (rc = be->ops->scale(be, part(net, l, P_WS), nw, c->gain))))
		return rc;
	rc = c->up == 1 ? be->ops->conv2d_forward(be, y0, xs, used_weight(net, l), NULL, &d)
	                : be->ops->conv2d_backward(be, y0, NULL, NULL, xs, NULL, used_weight(net, l), &d, 0);
	if (rc || !c->demod)
		return rc;
	float *w2 = part(net, l, P_W2), *s2 = part(net, l, P_S2), *d2 = part(net, l, P_D2), *dm = part(net, l, P_D);
	if ((rc = be->ops->row_dot(be, w2, w, w, c->cout * c->cin, kk, 0)) ||
	    (rc = be->ops->row_scale(be, s2, s, s, B * c->cin, 1, 0)))
		return rc;
	if (c->up == 1)   /* W2 (cout, cin) */
		rc = be->ops->gemm(be, 0, 1, B, c->cout, c->cin, 1.0f, s2, c->cin, w2, c->cin, 0.0f, d2, c->cout);
	else              /* W2 (cin, cout) */
		rc = be->ops->gemm(be, 0, 0, B, c->cout, c->cin, 1.0f, s2, c->cin, w2, c->cout, 0.0f, d2, c->cout);
	if (rc || (rc = be->ops->rsqrt_eps(be, dm, d2, (size_t)B * c->cout, DEMOD_EPS)))
		return rc;
	return be->ops->row_scale(be, out->data, dm, y0, B * c->cout, hwo, 0);
}

static int modconv_backward(gf_layer_net *net, struct layer *l, int B, gf_layer_grad *g)
{
	const struct modconv_cfg *c = LAYER_CCFG(struct modconv_cfg, l);
	const struct node *in = layer_in(net, l), *sn = &net->nodes[l->with], *out = layer_out(net, l);
	gf_backend *be = net->be;
	const float *w = layer_param(net, l, 0), *s = sn->data, *dyc = out->grad;
	int hwi = (int)(in->numel / (size_t)c->cin), hwo = (int)(out->numel / (size_t)c->cout), kk = c->k * c->k, rc;
	int want_s = sn->needs, want_xs = g->dx || want_s;
	size_t nw = l->param[0].n;
	gf_conv_desc d = modconv_desc(net, l, B);
	float *dd2 = part(net, l, P_DD2), *s2 = part(net, l, P_S2), *w2 = part(net, l, P_W2);
	if (c->demod) {
		/* y = y0 d: dy0 = dy d, dd = <dy, y0>, dD2 = -dd d^3 / 2 */
		float *dm = part(net, l, P_D), *tmp = part(net, l, P_TMP), *dd = part(net, l, P_D2);
		size_t bo = (size_t)B * c->cout;
		if ((rc = be->ops->row_scale(be, part(net, l, P_DY0), dm, out->grad, (int)bo, hwo, 0)) ||
		    (rc = be->ops->row_dot(be, dd, out->grad, part(net, l, P_Y0), (int)bo, hwo, 0)) ||
		    (rc = be->ops->row_scale(be, tmp, dm, dm, (int)bo, 1, 0)) ||
		    (rc = be->ops->row_scale(be, tmp, dm, tmp, (int)bo, 1, 0)) ||
		    (rc = be->ops->row_scale(be, dd2, dd, tmp, (int)bo, 1, 0)) || (rc = be->ops->scale(be, dd2, bo, -0.5f)))
			return rc;
		dyc = part(net, l, P_DY0);
	}
	/* the convolution: dxs and the used weight's gradient */
	float *dxs = want_xs ? part(net, l, P_DXS) : NULL, *xs = part(net, l, P_XS);
	float *dwu = NULL;
	int accw = 0;
	if (g->dw) {
		dwu = c->demod ? layer_grad(net, l, 0) : part(net, l, P_DWS);
		accw = c->demod ? g->acc : 0;
	}
	if (c->up == 1) {
		if ((dxs || dwu) && (rc = be->ops->conv2d_backward(be, dxs, dwu, NULL, dyc, xs, used_weight(net, l), &d, accw)))
			return rc;
	} else {
		if (dxs && (rc = be->ops->conv2d_forward(be, dxs, dyc, used_weight(net, l), NULL, &d)))
			return rc;
		if (dwu && (rc = be->ops->conv2d_backward(be, NULL, dwu, NULL, xs, dyc, used_weight(net, l), &d, accw)))
			return rc;
	}
	if (g->dw && !c->demod) {   /* through the gain */
		float *gw = layer_grad(net, l, 0);
		if (g->acc)
			rc = be->ops->axpy(be, gw, dwu, nw, c->gain);
		else if (!(rc = be->ops->copy(be, gw, dwu, nw * sizeof(float), GF_COPY_D2D)))
			rc = be->ops->scale(be, gw, nw, c->gain);
		if (rc)
			return rc;
	}
	if (g->dw && c->demod) {   /* W2 = sum over taps of w^2: dw += 2 w dW2 */
		float *dw2 = part(net, l, P_DW2);
		size_t cc = (size_t)c->cout * c->cin;
		if (c->up == 1)   /* dW2 (cout, cin) = dD2^T s2 */
			rc = be->ops->gemm(be, 1, 0, c->cout, c->cin, B, 1.0f, dd2, c->cout, s2, c->cin, 0.0f, dw2, c->cin);
		else              /* dW2 (cin, cout) = s2^T dD2 */
			rc = be->ops->gemm(be, 1, 0, c->cin, c->cout, B, 1.0f, s2, c->cin, dd2, c->cout, 0.0f, dw2, c->cout);
		if (rc || (rc = be->ops->scale(be, dw2, cc, 2.0f)) ||
		    (rc = be->ops->row_scale(be, layer_grad(net, l, 0), dw2, w, (int)cc, kk, 1)))
			return rc;
	}
	/* x: dx = dxs s, folded in before the styles' gradient (they may share the scratch) */
	if (g->dx) {
		if ((rc = be->ops->row_scale(be, g->dx, s, dxs, B * c->cin, hwi, 0)) || (rc = gf_layer_grad_done(net, l->in, B)))
			return rc;
		g->dx = NULL;
	}
	if (!want_s)
		return 0;
	/* styles: <dxs, x> per (sample, channel), and through the demodulation 2 s dS2, dS2 = dD2 W2 */
	float *ds = gf_layer_grad_dst(net, l->with);
	if ((rc = be->ops->row_dot(be, ds, dxs, in->data, B * c->cin, hwi, 0)))
		return rc;
	if (c->demod) {
		float *ds2 = part(net, l, P_DS2);
		if (c->up == 1)
			rc = be->ops->gemm(be, 0, 0, B, c->cin, c->cout, 1.0f, dd2, c->cout, w2, c->cin, 0.0f, ds2, c->cin);
		else
			rc = be->ops->gemm(be, 0, 1, B, c->cin, c->cout, 1.0f, dd2, c->cout, w2, c->cout, 0.0f, ds2, c->cin);
		if (rc || (rc = be->ops->scale(be, ds2, (size_t)B * c->cin, 2.0f)) ||
		    (rc = be->ops->row_scale(be, ds, s, ds2, B * c->cin, 1, 1)))
			return rc;
	}
	return gf_layer_grad_done(net, l->with, B);
}

static double modconv_flops(const gf_layer_net *net, const struct layer *l, int B, int exec)
{
	(void)exec;
	const struct modconv_cfg *c = LAYER_CCFG(struct modconv_cfg, l);
	const struct node *conv_out = c->up == 1 ? layer_out(net, l) : layer_in(net, l);
	int other = c->up == 1 ? c->cin : c->cout;
	return 2.0 * B * (double)conv_out->numel * other * c->k * c->k;
}

const gf_layer_kind gf_layer_modconv = {
	.name = "modconv",
	.aliases = (const char *const[]){ "modulated_conv", NULL },
	.min_pos = 3,
	.max_pos = 3,
	.keys = { "with", "demod", "up", "pad" },
	.parse = modconv_parse,
	.shapes = modconv_shapes,
	.init = modconv_init,
	.forward = modconv_forward,
	.backward = modconv_backward,
	.flops = modconv_flops,
};
