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
 * demodulation) and to the weight. The double backward (g_step's path
 * length penalty differentiates G's output with respect to its noise,
 * through the styles) is written out below: the tangent of both inputs,
 * the weight terms and the second-order terms on x and on the styles. */
#include <math.h>

#include "../layer_kind.h"

#define DEMOD_EPS 1e-8f

struct modconv_cfg {
	int cin, cout, k, up, pad, demod;
	float gain;
	int big;     /* save slot: xs | dxs (B, cin, HWin) | y0 | dy0 (B, cout, HWo) */
	int small;   /* save slot: d | D2 | dD2 | tmp (B, cout) | s2 | ds2 (B, cin) | W2 | dW2 (cout cin) | ws | dws (weight) */
	int dbl;     /* save slot of the double backward: U (B, cin, HWin) | T (B, cout, HWo) | 7 (B, cout) | 3 (B, cin) */
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
	c->dbl = gf_layer_save(l, align16(xin) + align16(yo) + 7 * align16(B * (size_t)c->cout) + 3 * align16(B * (size_t)c->cin));
	return 0;
}

static int modconv_init(gf_layer_net *net, struct layer *l, gf_rng *rng, float *host)
{
	gf_rng_normal(rng, host, l->param[0].n, 0.0f, 1.0f);
	return gf_layer_upload(net, l, 0, host);
}

/* the workspace's parts */
enum { P_XS, P_DXS, P_Y0, P_DY0, P_D, P_D2, P_DD2, P_TMP, P_S2, P_DS2, P_W2, P_DW2, P_WS, P_DWS,
       /* the double backward's */
       P_U, P_T, P_E, P_A, P_DD, P_D3, P_BB, P_Q, P_R, P_ST, P_QW, P_RW };

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
	if (which >= P_U) {
		size_t at = which == P_U ? 0 : which == P_T ? xin : which <= P_R ? xin + yo + (size_t)(which - P_E) * bo
		                                                                   : xin + yo + 7 * bo + (size_t)(which - P_ST) * bi;
		return (float *)l->save[c->dbl] + at;
	}
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

/* ---- double backward ----
 * S = <t_x, dx> + <t_s, ds> for the backward above. With u = t_x s + x t_s
 * (the tangent of xs), e[o] = sum_i t_s[i] s[i] W2[o, i] (half the tangent
 * of D2) and a = d, b = -d^3 e:
 *
 *   J t = a C(u) + b y0,     S = <a dy, C(u)> + <b dy, C(xs)>      (C: the convolution)
 *
 * so with G1 = C^T(a dy) (the backward's dxs) and G2 = C^T(b dy):
 *   dS/dx = G1 t_s + G2 s
 *   dS/ds = sum_p G1 t_x + sum_p G2 x + 2 s (q W2) + t_s (r W2)
 *   dS/dw = convw(a dy, u) + convw(b dy, xs) + 2 w (q^T s^2 + r^T (s t_s))
 * where q = dS/dD2 = -A d^3 / 2 + 3 dd e d^5 / 2 and r = dS/de = -dd d^3,
 * A = <dy, C(u)>, dd = <dy, y0> per (sample, output channel). Without
 * demodulation a = 1 (the gain in the weight), b = 0. */
static int conv_op(gf_layer_net *net, const struct layer *l, float *y, const float *x, const gf_conv_desc *d)
{
	return LAYER_CCFG(struct modconv_cfg, l)->up == 1
	               ? net->be->ops->conv2d_forward(net->be, y, x, used_weight(net, l), NULL, d)
	               : net->be->ops->conv2d_backward(net->be, y, NULL, NULL, x, NULL, used_weight(net, l), d, 0);
}

static int conv_t(gf_layer_net *net, const struct layer *l, float *dx, const float *dy, const gf_conv_desc *d)
{
	return LAYER_CCFG(struct modconv_cfg, l)->up == 1
	               ? net->be->ops->conv2d_backward(net->be, dx, NULL, NULL, dy, NULL, used_weight(net, l), d, 0)
	               : net->be->ops->conv2d_forward(net->be, dx, dy, used_weight(net, l), NULL, d);
}

/* dw (+)= the weight gradient of the convolution of input x with output gradient dy */
static int conv_w(gf_layer_net *net, const struct layer *l, float *dw, const float *dy, const float *x, const gf_conv_desc *d,
                  int acc)
{
	return LAYER_CCFG(struct modconv_cfg, l)->up == 1
	               ? net->be->ops->conv2d_backward(net->be, NULL, dw, NULL, dy, x, used_weight(net, l), d, acc)
	               : net->be->ops->conv2d_backward(net->be, NULL, dw, NULL, x, dy, used_weight(net, l), d, acc);
}

static int modconv_backward2(gf_layer_net *net, struct layer *l, int B, gf_layer_grad2 *g)
{
	const struct modconv_cfg *c = LAYER_CCFG(struct modconv_cfg, l);
	const struct node *in = layer_in(net, l), *sn = &net->nodes[l->with], *out = layer_out(net, l);
	gf_backend *be = net->be;
	const float *x = in->data, *s = sn->data, *tx = in->tan, *ts = sn->tan, *dy = out->grad, *w = layer_param(net, l, 0);
	int hwi = (int)(in->numel / (size_t)c->cin), hwo = (int)(out->numel / (size_t)c->cout), kk = c->k * c->k, rc;
	int bi = B * c->cin, bo = B * c->cout;
	size_t nw = l->param[0].n;
	gf_conv_desc d = modconv_desc(net, l, B);
	float *u = part(net, l, P_U), *ty0 = part(net, l, P_T), *g1 = part(net, l, P_DXS);
	/* u = t_x s + x t_s, C(u) */
	if ((rc = be->ops->row_scale(be, u, s, tx, bi, hwi, 0)) || (rc = be->ops->row_scale(be, u, ts, x, bi, hwi, 1)) ||
	    (rc = conv_op(net, l, c->demod ? ty0 : (g->tout ? g->tout : ty0), u, &d)))
		return rc;
	if (!c->demod) {
		if (g->dw) {   /* dw += gain convw(dy, u) */
			float *dws = part(net, l, P_DWS);
			if ((rc = conv_w(net, l, dws, dy, u, &d, 0)) || (rc = be->ops->axpy(be, layer_grad(net, l, 0), dws, nw, c->gain)))
				return rc;
		}
		if (!in->needs && !sn->needs)
			return 0;
		if ((rc = conv_t(net, l, g1, dy, &d)))
			return rc;
		if (in->needs && ((rc = be->ops->row_scale(be, gf_layer_grad_dst(net, l->in), ts, g1, bi, hwi, 0)) ||
		                  (rc = gf_layer_grad_done(net, l->in, B))))
			return rc;
		if (sn->needs && ((rc = be->ops->row_dot(be, gf_layer_grad_dst(net, l->with), g1, tx, bi, hwi, 0)) ||
		                  (rc = gf_layer_grad_done(net, l->with, B))))
			return rc;
		return 0;
	}
	const float *dm = part(net, l, P_D), *y0 = part(net, l, P_Y0), *s2 = part(net, l, P_S2), *w2 = part(net, l, P_W2);
	const float *xs = part(net, l, P_XS);
	float *e = part(net, l, P_E), *A = part(net, l, P_A), *dd = part(net, l, P_DD), *d3 = part(net, l, P_D3);
	float *bb = part(net, l, P_BB), *q = part(net, l, P_Q), *r = part(net, l, P_R), *st = part(net, l, P_ST);
	float *dya = part(net, l, P_DY0), *dyb = ty0;
	/* e = (s t_s) W2^T, A = <dy, C(u)>, dd = <dy, y0>, d^3, b = -d^3 e */
	if ((rc = be->ops->row_scale(be, st, s, ts, bi, 1, 0)))
		return rc;
	rc = c->up == 1 ? be->ops->gemm(be, 0, 1, B, c->cout, c->cin, 1.0f, st, c->cin, w2, c->cin, 0.0f, e, c->cout)
	                : be->ops->gemm(be, 0, 0, B, c->cout, c->cin, 1.0f, st, c->cin, w2, c->cout, 0.0f, e, c->cout);
	if (rc || (rc = be->ops->row_dot(be, A, dy, ty0, bo, hwo, 0)) || (rc = be->ops->row_dot(be, dd, dy, y0, bo, hwo, 0)) ||
	    (rc = be->ops->row_scale(be, d3, dm, dm, bo, 1, 0)) || (rc = be->ops->row_scale(be, d3, dm, d3, bo, 1, 0)) ||
	    (rc = be->ops->row_scale(be, bb, d3, e, bo, 1, 0)) || (rc = be->ops->scale(be, bb, (size_t)bo, -1.0f)))
		return rc;
	/* J t = d C(u) + b y0 */
	if (g->tout && ((rc = be->ops->row_scale(be, g->tout, dm, ty0, bo, hwo, 0)) ||
	                (rc = be->ops->row_scale(be, g->tout, bb, y0, bo, hwo, 1))))
		return rc;
	/* q = d^3 (3 dd e d^2 - A) / 2 (in q), r = -dd d^3 */
	if ((rc = be->ops->row_scale(be, q, dm, dm, bo, 1, 0)) || (rc = be->ops->row_scale(be, q, q, e, bo, 1, 0)) ||
	    (rc = be->ops->row_scale(be, q, q, dd, bo, 1, 0)) || (rc = be->ops->scale(be, q, (size_t)bo, 3.0f)) ||
	    (rc = be->ops->axpy(be, q, A, (size_t)bo, -1.0f)) || (rc = be->ops->row_scale(be, q, q, d3, bo, 1, 0)) ||
	    (rc = be->ops->scale(be, q, (size_t)bo, 0.5f)) || (rc = be->ops->row_scale(be, r, dd, d3, bo, 1, 0)) ||
	    (rc = be->ops->scale(be, r, (size_t)bo, -1.0f)))
		return rc;
	/* a dy, b dy (C(u) is dead: its buffer takes b dy) */
	if ((rc = be->ops->row_scale(be, dya, dm, dy, bo, hwo, 0)) || (rc = be->ops->row_scale(be, dyb, bb, dy, bo, hwo, 0)))
		return rc;
	if (g->dw) {
		float *gw = layer_grad(net, l, 0), *m = part(net, l, P_DW2);
		size_t cc = (size_t)c->cout * c->cin;
		if ((rc = conv_w(net, l, gw, dya, u, &d, 1)) || (rc = conv_w(net, l, gw, dyb, xs, &d, 1)))
			return rc;
		if (c->up == 1) {   /* M (cout, cin) = q^T s^2 + r^T (s t_s) */
			if ((rc = be->ops->gemm(be, 1, 0, c->cout, c->cin, B, 1.0f, q, c->cout, s2, c->cin, 0.0f, m, c->cin)) ||
			    (rc = be->ops->gemm(be, 1, 0, c->cout, c->cin, B, 1.0f, r, c->cout, st, c->cin, 1.0f, m, c->cin)))
				return rc;
		} else {            /* M (cin, cout) */
			if ((rc = be->ops->gemm(be, 1, 0, c->cin, c->cout, B, 1.0f, s2, c->cin, q, c->cout, 0.0f, m, c->cout)) ||
			    (rc = be->ops->gemm(be, 1, 0, c->cin, c->cout, B, 1.0f, st, c->cin, r, c->cout, 1.0f, m, c->cout)))
				return rc;
		}
		if ((rc = be->ops->scale(be, m, cc, 2.0f)) || (rc = be->ops->row_scale(be, gw, m, w, (int)cc, kk, 1)))
			return rc;
	}
	if (!in->needs && !sn->needs)
		return 0;
	/* G1 = C^T(a dy), G2 = C^T(b dy) (into u, dead now) */
	float *g2 = u;
	if ((rc = conv_t(net, l, g1, dya, &d)) || (rc = conv_t(net, l, g2, dyb, &d)))
		return rc;
	if (in->needs) {
		float *dx = gf_layer_grad_dst(net, l->in);
		if ((rc = be->ops->row_scale(be, dx, ts, g1, bi, hwi, 0)) || (rc = be->ops->row_scale(be, dx, s, g2, bi, hwi, 1)) ||
		    (rc = gf_layer_grad_done(net, l->in, B)))
			return rc;
	}
	if (!sn->needs)
		return 0;
	float *ds = gf_layer_grad_dst(net, l->with), *qw = part(net, l, P_QW), *rw = part(net, l, P_RW);
	if ((rc = be->ops->row_dot(be, ds, g1, tx, bi, hwi, 0)) || (rc = be->ops->row_dot(be, ds, g2, x, bi, hwi, 1)))
		return rc;
	/* q W2 and r W2 (B, cin); W2 is (cout, cin), or (cin, cout) with up = 2 */
	int tw = c->up == 2, ldw = tw ? c->cout : c->cin;
	if ((rc = be->ops->gemm(be, 0, tw, B, c->cin, c->cout, 1.0f, q, c->cout, w2, ldw, 0.0f, qw, c->cin)) ||
	    (rc = be->ops->gemm(be, 0, tw, B, c->cin, c->cout, 1.0f, r, c->cout, w2, ldw, 0.0f, rw, c->cin)) ||
	    (rc = be->ops->scale(be, qw, (size_t)bi, 2.0f)) || (rc = be->ops->row_scale(be, ds, s, qw, bi, 1, 1)) ||
	    (rc = be->ops->row_scale(be, ds, ts, rw, bi, 1, 1)))
		return rc;
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
	.backward2 = modconv_backward2,
	.flops = modconv_flops,
};
