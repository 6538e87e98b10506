/* Equalised learning rate for linear and conv (eqlr.h). The layer keeps
 * its parameter names (weight, bias); the scaled copies live in the
 * layer's workspace and are rewritten by every forward (copy + scale on
 * the backend), and the gradients with respect to them are scaled back
 * onto the stored parameters: dw = wgain * d(w_used), db = lr_mul *
 * d(b_used). Not a kind of its own, like sn.c. */
#include <math.h>
#include <string.h>

#include "eqlr.h"

static size_t align16(size_t n)
{
	return (n + 15) & ~(size_t)15;
}

int gf_eqlr_parse(const gf_layer_args *a, struct gf_eqlr *e, int sn_on)
{
	memset(e, 0, sizeof(*e));
	int rc;
	if ((rc = gf_layer_arg_bool(a, "eqlr", 0, &e->on)) || (rc = gf_layer_arg_num(a, -1, "lr_mul", 1.0, &e->lr_mul)) ||
	    (rc = gf_layer_arg_num(a, -1, "bias_init", 0.0, &e->bias_init)))
		return rc;
	if (!e->on && (gf_value_get(a->v, "lr_mul") || gf_value_get(a->v, "bias_init")))
		return gf_layer_err(GF_EPARAM, a->l, "lr_mul and bias_init need eqlr = true");
	if (e->on && sn_on)
		return gf_layer_err(GF_EPARAM, a->l, "eqlr and sn exclude each other");
	if (!(e->lr_mul > 0.0f))
		return gf_layer_err(GF_EPARAM, a->l, "lr_mul = %g must be > 0", (double)e->lr_mul);
	return 0;
}

void gf_eqlr_shapes(struct layer *l, struct gf_eqlr *e, size_t nw, size_t nb, double fan_in)
{
	if (!e->on)
		return;
	e->nw = nw;
	e->nb = nb;
	e->wgain = (float)((double)e->lr_mul / sqrt(fan_in));
	e->save = gf_layer_save(l, 2 * (align16(nw) + align16(nb ? nb : 1)));
}

int gf_eqlr_init(gf_layer_net *net, struct layer *l, const struct gf_eqlr *e, gf_rng *rng, float *host)
{
	gf_rng_normal(rng, host, e->nw, 0.0f, 1.0f / e->lr_mul);
	int rc = gf_layer_upload(net, l, 0, host);
	if (rc || !e->nb)
		return rc;
	return net->be->ops->fill(net->be, layer_param(net, l, 1), e->nb, e->bias_init);
}

/* workspace: [0] w_used, [1] b_used, [2] dw scratch, [3] db scratch */
static float *part(const struct layer *l, const struct gf_eqlr *e, int i)
{
	size_t aw = align16(e->nw), ab = align16(e->nb ? e->nb : 1);
	size_t off[4] = { 0, aw, aw + ab, 2 * aw + ab };
	return (float *)l->save[e->save] + off[i];
}

float *gf_eqlr_used(const gf_layer_net *net, const struct layer *l, const struct gf_eqlr *e, int bias)
{
	(void)net;
	return part(l, e, bias ? 1 : 0);
}

float *gf_eqlr_scratch(const gf_layer_net *net, const struct layer *l, const struct gf_eqlr *e, int bias)
{
	(void)net;
	return part(l, e, bias ? 3 : 2);
}

int gf_eqlr_weight(gf_layer_net *net, const struct layer *l, const struct gf_eqlr *e, const float **w, const float **b)
{
	gf_backend *be = net->be;
	float *ws = part(l, e, 0), *bs = part(l, e, 1);
	int rc;
	if ((rc = be->ops->copy(be, ws, layer_param(net, l, 0), e->nw * sizeof(float), GF_COPY_D2D)) ||
	    (rc = be->ops->scale(be, ws, e->nw, e->wgain)))
		return rc;
	*w = ws;
	*b = NULL;
	if (!e->nb)
		return 0;
	if ((rc = be->ops->copy(be, bs, layer_param(net, l, 1), e->nb * sizeof(float), GF_COPY_D2D)) ||
	    (rc = be->ops->scale(be, bs, e->nb, e->lr_mul)))
		return rc;
	*b = bs;
	return 0;
}

int gf_eqlr_fold(gf_layer_net *net, const struct layer *l, const struct gf_eqlr *e, int bias, int acc)
{
	gf_backend *be = net->be;
	float *g = layer_grad(net, l, bias ? 1 : 0), *s = part(l, e, bias ? 3 : 2);
	size_t n = bias ? e->nb : e->nw;
	float k = bias ? e->lr_mul : e->wgain;
	int rc;
	if (acc)
		return be->ops->axpy(be, g, s, n, k);
	if ((rc = be->ops->copy(be, g, s, n * sizeof(float), GF_COPY_D2D)))
		return rc;
	return be->ops->scale(be, g, n, k);
}
