/* Spectral normalisation for the kinds with a weight matrix (sn.h):
 * torch.nn.utils.spectral_norm with one power iteration per training
 * forward. Not a layer kind of its own: linear.c, conv.c, tconv.c and
 * embedding.c call these from their own functions, so the key is one
 * implementation.
 *
 * The layer keeps PyTorch's names: the parameter weight_orig (the weight
 * the optimiser updates) and the buffers weight_u, weight_v (checkpointed
 * like running statistics, copied to replicas with GF_BUFFERS). Each
 * forward computes sigma = u . W v and w / sigma into the layer's
 * workspace, after updating u and v in training (PyTorch: eval mode reuses
 * the stored u and v and recomputes sigma from them). The backward treats
 * u and v as constants, as PyTorch does. Numbers: backend sn_forward /
 * sn_backward. */
#include <math.h>
#include <string.h>

#include "sn.h"

#define SN_EPS 1e-12f

static size_t align16(size_t n)
{
	return (n + 15) & ~(size_t)15;
}

int gf_sn_parse(const gf_layer_args *a, struct gf_sn *sn)
{
	memset(sn, 0, sizeof(*sn));
	return gf_layer_arg_bool(a, "sn", 0, &sn->on);
}

const char *gf_sn_weight_name(const struct gf_sn *sn)
{
	return sn->on ? "weight_orig" : "weight";
}

int gf_sn_shapes(gf_layer_net *net, struct layer *l, struct gf_sn *sn, int a, int m, int k)
{
	return gf_sn_shapes_at(net, l, sn, 0, "weight_u", "weight_v", a, m, k);
}

int gf_sn_shapes_at(gf_layer_net *net, struct layer *l, struct gf_sn *sn, int param, const char *u_name, const char *v_name,
                    int a, int m, int k)
{
	sn->param = param;
	if (!sn->on)
		return 0;
	if (!GF_BACKEND_HAS(net->be, sn_forward) || !GF_BACKEND_HAS(net->be, sn_backward))
		return gf_layer_err(GF_EUNSUPPORTED, l, "sn: the %s backend has no spectral normalisation ops",
		                    net->be->ops->name);
	sn->a = a;
	sn->m = m;
	sn->k = k;
	sn->buf = l->nbuf;
	int known = 0;
	for (int i = 0; i < l->nsn; i++)
		known |= l->sn[i] == sn;
	if (!known && l->nsn == LAYER_MAX_SN)
		return gf_layer_err(GF_EPARAM, l, "sn: more than %d spectral norms in one layer", LAYER_MAX_SN);
	if (!known)
		l->sn[l->nsn++] = sn;
	size_t n = (size_t)a * (size_t)k;
	/* start values: unit vectors, until gf_net_init draws them */
	gf_layer_buffer(l, u_name, (size_t)m, (float)(1.0 / sqrt((double)m)));
	gf_layer_buffer(l, v_name, n, (float)(1.0 / sqrt((double)n)));
	/* w / sigma, its gradient, sigma (16), and the u and v the last forward used */
	sn->save = gf_layer_save(l, 2 * align16(n * (size_t)m) + 16 + align16((size_t)m) + align16(n));
	return 0;
}

/* x / max(|x|, eps) in place, as torch.nn.functional.normalize */
static void normalize(float *x, size_t n)
{
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += (double)x[i] * x[i];
	float d = fmaxf((float)sqrt(s), SN_EPS);
	for (size_t i = 0; i < n; i++)
		x[i] /= d;
}

int gf_sn_init(gf_layer_net *net, struct layer *l, const struct gf_sn *sn, gf_rng *rng, float *host)
{
	if (!sn->on)
		return 0;
	/* PyTorch: u = normalize(N(0, 1) of size m), then v likewise */
	for (int j = sn->buf; j < sn->buf + 2; j++) {
		size_t n = l->buf[j].n;
		gf_rng_normal(rng, host, n, 0.0f, 1.0f);
		normalize(host, n);
		int rc = net->be->ops->copy(net->be, layer_buffer(net, l, j), host, n * sizeof(float), GF_COPY_H2D);
		if (rc)
			return rc;
	}
	return 0;
}

/* 0: w / sigma, 1: its gradient, 2: sigma, 3: u, 4: v (as the last forward used them) */
static float *sn_work(const struct layer *l, const struct gf_sn *sn, int which)
{
	size_t n = align16((size_t)sn->a * (size_t)sn->m * (size_t)sn->k);
	float *base = (float *)l->save[sn->save];
	if (which <= 2)
		return base + (size_t)which * n;
	base += 2 * n + 16;
	return which == 3 ? base : base + align16((size_t)sn->m);
}

int gf_sn_weight(gf_layer_net *net, struct layer *l, const struct gf_sn *sn, unsigned mode, const float **w)
{
	*w = layer_param(net, l, sn->param);
	if (!sn->on)
		return 0;
	/* Training forwards iterate, as PyTorch's module in train mode; with
	 * GF_FREEZE_STATS (a G step's replica of D) on copies of u and v, so
	 * the buffers stay D's own. Without the iteration, sigma = u^T W v of
	 * the stored vectors, which right after init (independent random u
	 * and v) can be near 0 and blow w / sigma up. The backward uses the
	 * u and v the forward used. */
	int train = (mode & GF_TRAIN) != 0, keep = train && !(mode & GF_FREEZE_STATS);
	float *w_sn = sn_work(l, sn, 0), *u = sn_work(l, sn, 3), *v = sn_work(l, sn, 4);
	float *bu = layer_buffer(net, l, sn->buf), *bv = layer_buffer(net, l, sn->buf + 1);
	size_t nu = (size_t)sn->m * sizeof(float), nv = (size_t)sn->a * (size_t)sn->k * sizeof(float);
	int rc = net->be->ops->copy(net->be, u, bu, nu, GF_COPY_D2D);
	if (!rc)
		rc = net->be->ops->copy(net->be, v, bv, nv, GF_COPY_D2D);
	if (!rc)
		rc = net->be->ops->sn_forward(net->be, w_sn, sn_work(l, sn, 2), u, v, *w, sn->a, sn->m, sn->k, SN_EPS, train);
	if (!rc && keep)
		rc = net->be->ops->copy(net->be, bu, u, nu, GF_COPY_D2D);
	if (!rc && keep)
		rc = net->be->ops->copy(net->be, bv, v, nv, GF_COPY_D2D);
	*w = w_sn;
	return rc;
}

const float *gf_sn_used(const gf_layer_net *net, const struct layer *l, const struct gf_sn *sn)
{
	return sn->on ? sn_work(l, sn, 0) : layer_param(net, l, sn->param);
}

float *gf_sn_dweight(gf_layer_net *net, const struct layer *l, const struct gf_sn *sn, const gf_layer_grad *g,
                     int *accumulate)
{
	if (!g->dw) {
		*accumulate = 0;
		return NULL;
	}
	*accumulate = sn->on ? 0 : g->acc;
	return sn->on ? sn_work(l, sn, 1) : layer_grad(net, l, sn->param);
}

int gf_sn_backward(gf_layer_net *net, const struct layer *l, const struct gf_sn *sn, const gf_layer_grad *g)
{
	if (!sn->on || !g->dw)
		return 0;
	return net->be->ops->sn_backward(net->be, layer_grad(net, l, sn->param), sn_work(l, sn, 1),
	                                 layer_param(net, l, sn->param), sn_work(l, sn, 2), sn_work(l, sn, 3),
	                                 sn_work(l, sn, 4), sn->a, sn->m, sn->k, g->acc);
}

int gf_sn_iterate(gf_layer_net *net)
{
	for (int i = 0; i < net->nlayers; i++) {
		struct layer *l = &net->layers[i];
		for (int j = 0; j < l->nsn; j++) {
			const struct gf_sn *sn = l->sn[j];
			/* sigma and w / sigma go to the forward's workspace, which the
			 * next forward overwrites */
			int rc = net->be->ops->sn_forward(net->be, sn_work(l, sn, 0), sn_work(l, sn, 2),
			                                  layer_buffer(net, l, sn->buf), layer_buffer(net, l, sn->buf + 1),
			                                  layer_param(net, l, sn->param), sn->a, sn->m, sn->k, SN_EPS, 1);
			if (rc)
				return gf_layer_err(rc, l, "sn: power iteration: %s", gf_errmsg());
		}
	}
	return 0;
}
