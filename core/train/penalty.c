/* Gradient penalties of the step stages (R1 and WGAN-GP in d_step, the
 * path length in g_step): see gf_penalty in <ganflow/train.h>.
 *
 * Each is P = weight * mean_i phi(|g_i|) on the per-sample input gradient
 * g_i of the network's last forward, so its adjoint is g_i scaled by one
 * number per sample: the lengths come to the host (one float per sample,
 * backend row_dot), the factors go back (row_scale) and the engine's
 * double backward (gf_net_backward2) does the rest. Nothing else leaves
 * the device.
 *
 * A network with penalty points (its table's penalty_at: StyleGAN2's ws)
 * has g_i the K point gradients of sample i, and |g_i| their RMS over the
 * points, sqrt(sum_k |g_ik|^2 / K) (StyleGAN2's lengths: the squares summed
 * over w's features, averaged over the ws); K = 1 is the input. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include <ganflow/err.h>
#include <ganflow/train.h>

struct gf_penalty {
	gf_net *net;
	gf_backend *be;
	int max_batch, B;
	size_t nin, nout;     /* per sample (nin: the points' together) */
	int npts;             /* K: the penalty points (1: the input) */
	size_t pn[GF_NET_MAX_POINTS];   /* their features per sample */
	float *ones;          /* (max_batch, nout) device: the seed of R1 and WGAN-GP */
	float *t;             /* (max_batch, nin) device: dP/dg */
	float *dev;           /* (npts + 1, max_batch) device: |g_ik|^2 per point, then the factors */
};

int gf_penalty_create(gf_penalty **out, gf_net *net, int max_batch)
{
	*out = NULL;
	gf_backend *be = gf_net_backend(net);
	if (!GF_BACKEND_HAS(be, row_dot) || !GF_BACKEND_HAS(be, row_scale) || !GF_BACKEND_HAS(be, penalty_factors))
		return gf_seterr(GF_EUNSUPPORTED, "gradient penalty: the %s backend has no row_dot/row_scale/penalty_factors "
		                 "ops", be->ops->name);
	int rc = gf_net_check_backward2(net);
	if (rc)
		return rc;
	gf_penalty *p = calloc(1, sizeof(*p));
	if (!p)
		return gf_seterr(-ENOMEM, "gradient penalty: out of memory");
	gf_tensor in, o;
	gf_net_shapes(net, &in, &o);
	p->net = net;
	p->be = be;
	p->max_batch = max_batch;
	p->nin = (size_t)gf_tensor_numel(&in) / (size_t)in.shape[0];
	p->npts = 1;
	p->pn[0] = p->nin;
	if (gf_net_penalty_points(net)) {
		p->npts = gf_net_penalty_points(net);
		p->nin = 0;
		for (int k = 0; k < p->npts; k++) {
			p->pn[k] = gf_net_point_numel(net, k);
			p->nin += p->pn[k];
		}
	}
	p->nout = (size_t)gf_tensor_numel(&o) / (size_t)o.shape[0];
	size_t mb = (size_t)max_batch;
	if ((rc = be->ops->alloc(be, (void **)&p->ones, mb * p->nout * sizeof(float))) ||
	    (rc = be->ops->alloc(be, (void **)&p->t, mb * p->nin * sizeof(float))) ||
	    (rc = be->ops->alloc(be, (void **)&p->dev, (size_t)(p->npts + 1) * mb * sizeof(float))) ||
	    (rc = be->ops->fill(be, p->ones, mb * p->nout, 1.0f))) {
		gf_penalty_destroy(p);
		return rc ? rc : gf_seterr(-ENOMEM, "gradient penalty: out of memory");
	}
	*out = p;
	return 0;
}

void gf_penalty_destroy(gf_penalty *p)
{
	if (!p)
		return;
	float *dev[] = { p->ones, p->t, p->dev };
	for (int i = 0; i < 3; i++)
		if (dev[i])
			p->be->ops->free(p->be, dev[i]);
	free(p);
}

int gf_penalty_lengths(gf_penalty *p, const float *seed)
{
	gf_tensor x, g;
	int rc = gf_net_output(p->net, &x);
	if (rc)
		return rc;
	int B = (int)x.shape[0];
	if (B < 1 || B > p->max_batch)
		return gf_seterr(GF_ESHAPE, "gradient penalty: batch %d not in 1..%d", B, p->max_batch);
	const gf_backend_ops *o = p->be->ops;
	if ((rc = gf_net_backward(p->net, seed ? seed : p->ones, GF_NEED_DX)))
		return rc;
	int points = gf_net_penalty_points(p->net) > 0;
	size_t off = 0;
	for (int k = 0; k < p->npts; k++) {
		if ((rc = points ? gf_net_point_grad(p->net, k, &g) : gf_net_dx(p->net, &g)) ||
		    (rc = o->row_dot(p->be, p->dev + (size_t)k * p->max_batch, g.data, g.data, B, (int)p->pn[k], 0)))
			return rc;
		/* t = g now: the factors scale it in place (the double backward
		 * overwrites the network's copy of g) */
		if ((rc = o->copy(p->be, p->t + off, g.data, (size_t)B * p->pn[k] * sizeof(float), GF_COPY_D2D)))
			return rc;
		off += (size_t)B * p->pn[k];
	}
	p->B = B;
	return 0;
}

int gf_penalty_apply(gf_penalty *p, const gf_penalty_desc *d, double *center_st, double *out, const float *dy,
                     unsigned flags)
{
	int B = p->B, rc;
	if (!B)
		return gf_seterr(GF_EPARAM, "gradient penalty: no lengths (gf_penalty_lengths first)");
	p->B = 0;
	const gf_backend_ops *o = p->be->ops;
	float *f = p->dev + (size_t)p->npts * p->max_batch;
	if ((rc = o->penalty_factors(p->be, f, out, center_st, p->dev, B, p->max_batch, p->npts, d)))
		return rc;
	size_t off = 0;
	for (int k = 0; k < p->npts; k++) {
		if ((rc = o->row_scale(p->be, p->t + off, f, p->t + off, B, (int)p->pn[k], 0)))
			return rc;
		off += (size_t)B * p->pn[k];
	}
	return gf_net_backward2(p->net, p->t, dy, flags);
}

void gf_penalty_adam_ratio(gf_optim_conf *c, int every)
{
	if (every <= 1)
		return;
	double r = (double)every / (every + 1);
	c->lr = (float)(c->lr * r);
	if (c->kind == GF_OPT_ADAM || c->kind == GF_OPT_OADAM) {
		c->beta1 = (float)pow(c->beta1, r);
		c->beta2 = (float)pow(c->beta2, r);
	}
}
