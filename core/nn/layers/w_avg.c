/* w_avg: StyleGAN2's tracked average of w and the truncation trick in
 * w-space (MappingNetwork's w_avg buffer and truncation_psi),
 *
 *   {"w_avg", channels, beta = 0.995, psi = 1}        (C) -> (C)
 *
 * A training forward (GF_TRAIN without GF_FREEZE_STATS) passes w through
 * and moves the buffer w_avg (C, from 0) towards the batch mean:
 * w_avg = mean_b(w) + beta (w_avg - mean_b(w)) (StyleGAN2-ADA's
 * `w.mean(0).lerp(w_avg, w_avg_beta)`). An eval forward gives
 * w_avg + psi (w - w_avg) (`w_avg.lerp(w, psi)`): psi = 1 (default) is the
 * identity, psi < 1 the truncation trick (`ganflow sample truncation=`
 * sets psi on a G that has this layer). GF_TRAIN | GF_FREEZE_STATS passes
 * w through and leaves the buffer alone. Backward dx = psi dy (psi as the
 * forward used it); double backward J t = psi t. Backend ops copy, scale,
 * fill, gemm (the batch mean: ones (1, B) times w (B, C)), bias_add.
 *
 * A (2, C) input (style mixing: the mapping of z and of z2 per sample,
 * layer style_mix) is two rows: the average moves with the first only
 * (StyleGAN2-ADA's skip_w_avg_update for the second mapping), psi applies
 * to both. */
#include "../layer_kind.h"

struct w_avg_cfg {
	int c;
	float beta, psi;
	float used;   /* psi of the last forward (1 in training) */
	int work;     /* save slot: ones (max_batch), then (1 - psi) w_avg (C) */
	int rows;     /* rows per sample: 2 for a (2, C) input, else 1 */
};
LAYER_CFG_FITS(struct w_avg_cfg);

static int w_avg_parse(gf_layer_net *net, struct layer *l, const gf_layer_args *a)
{
	(void)net;
	struct w_avg_cfg *c = LAYER_CFG(struct w_avg_cfg, l);
	int rc;
	if ((rc = gf_layer_arg_int(a, 0, "channels", 0, 1, &c->c)) || (rc = gf_layer_arg_num(a, -1, "beta", 0.995, &c->beta)) ||
	    (rc = gf_layer_arg_num(a, -1, "psi", 1.0, &c->psi)))
		return rc;
	if (!(c->beta >= 0.0f && c->beta < 1.0f))
		return gf_layer_err(GF_EPARAM, l, "beta must be in [0, 1)");
	if (!(c->psi >= 0.0f))
		return gf_layer_err(GF_EPARAM, l, "psi must be >= 0");
	return 0;
}

static int w_avg_shapes(gf_layer_net *net, struct layer *l)
{
	struct w_avg_cfg *c = LAYER_CFG(struct w_avg_cfg, l);
	const struct node *in = layer_in(net, l);
	char s[96];
	if (!(in->ndim == 1 || (in->ndim == 2 && in->shape[0] == 2)) || in->shape[in->ndim - 1] != c->c)
		return gf_layer_err(GF_ESHAPE, l, "expects a flat input (%d) or two rows (2, %d), got %s", c->c, c->c,
		                    gf_layer_shape_str(in, s, sizeof(s)));
	c->rows = in->ndim == 2 ? 2 : 1;
	gf_layer_set_shape(layer_out(net, l), in->ndim, in->shape);
	gf_layer_buffer(l, "w_avg", (size_t)c->c, 0.0f);
	c->work = gf_layer_save(l, (size_t)net->max_batch + (size_t)c->c);
	return 0;
}

static int w_avg_forward(gf_layer_net *net, struct layer *l, int B, unsigned mode)
{
	struct w_avg_cfg *c = LAYER_CFG(struct w_avg_cfg, l);
	const struct node *in = layer_in(net, l);
	gf_backend *be = net->be;
	float *y = layer_out(net, l)->data, *avg = layer_buffer(net, l, 0), *ones = l->save[c->work],
	      *shift = ones + net->max_batch;
	size_t n = (size_t)B * (size_t)c->rows * (size_t)c->c;
	int rc;
	c->used = (mode & GF_TRAIN) ? 1.0f : c->psi;
	if ((rc = be->ops->copy(be, y, in->data, n * sizeof(float), GF_COPY_D2D)))
		return rc;
	if ((mode & GF_TRAIN) && !(mode & GF_FREEZE_STATS)) {
		/* avg = beta avg + (1 - beta) / B * ones^T w (the first rows: ldb skips the second) */
		if ((rc = be->ops->fill(be, ones, (size_t)B, 1.0f)))
			return rc;
		return be->ops->gemm(be, 0, 0, 1, c->c, B, (1.0f - c->beta) / (float)B, ones, B, in->data, c->rows * c->c,
		                     c->beta, avg, c->c);
	}
	if (c->used == 1.0f)
		return 0;
	/* y = psi w + (1 - psi) avg */
	if ((rc = be->ops->scale(be, y, n, c->used)) ||
	    (rc = be->ops->copy(be, shift, avg, (size_t)c->c * sizeof(float), GF_COPY_D2D)) ||
	    (rc = be->ops->scale(be, shift, (size_t)c->c, 1.0f - c->used)))
		return rc;
	return be->ops->bias_add(be, y, shift, B * c->rows, c->c, 1);
}

static int w_avg_backward(gf_layer_net *net, struct layer *l, int B, gf_layer_grad *g)
{
	const struct w_avg_cfg *c = LAYER_CCFG(struct w_avg_cfg, l);
	size_t n = (size_t)B * (size_t)c->rows * (size_t)c->c;
	if (!g->dx)
		return 0;
	int rc = net->be->ops->copy(net->be, g->dx, layer_out(net, l)->grad, n * sizeof(float), GF_COPY_D2D);
	return rc || c->used == 1.0f ? rc : net->be->ops->scale(net->be, g->dx, n, c->used);
}

static int w_avg_backward2(gf_layer_net *net, struct layer *l, int B, gf_layer_grad2 *g)
{
	const struct w_avg_cfg *c = LAYER_CCFG(struct w_avg_cfg, l);
	size_t n = (size_t)B * (size_t)c->rows * (size_t)c->c;
	if (!g->tout)
		return 0;
	int rc = net->be->ops->copy(net->be, g->tout, layer_in(net, l)->tan, n * sizeof(float), GF_COPY_D2D);
	return rc || c->used == 1.0f ? rc : net->be->ops->scale(net->be, g->tout, n, c->used);
}

const gf_layer_kind gf_layer_w_avg = {
	.name = "w_avg",
	.aliases = (const char *const[]){ "truncation", NULL },
	.min_pos = 1,
	.max_pos = 1,
	.keys = { "channels", "beta", "psi" },
	.flags = GF_LK_STATEFUL,
	.parse = w_avg_parse,
	.shapes = w_avg_shapes,
	.forward = w_avg_forward,
	.backward = w_avg_backward,
	.backward2 = w_avg_backward2,
};
