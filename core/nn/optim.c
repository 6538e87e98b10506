/* Optimisers over a network's flat blocks (Adam, SGD, optimistic Adam) and
 * global-norm gradient clipping. The per-parameter state is one backend
 * block with named views ("m.3.weight"); the update itself is the
 * backend's fused optim_step op. See <ganflow/nn.h>. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>
#include <ganflow/nn.h>

#include "net_internal.h"

struct gf_optim {
	gf_net *net;
	gf_optim_conf conf;
	float *state;       /* (slots, nparams) */
	size_t nstate;
	int slots;
	gf_view *views;
	size_t nviews;
	int64_t steps;
	size_t off, count;  /* the range of the blocks it updates */
};

/* ---- configuration ---- */

void gf_optim_defaults(gf_optim_conf *c, gf_optim_kind kind)
{
	memset(c, 0, sizeof(*c));
	c->kind = kind;
	c->lr = kind == GF_OPT_SGD ? 1e-2f : 1e-3f;
	c->beta1 = 0.9f;
	c->beta2 = 0.999f;
	c->eps = 1e-8f;
}

static int kind_of(const char *s, gf_optim_kind *k)
{
	if (strcmp(s, "adam") == 0)
		*k = GF_OPT_ADAM;
	else if (strcmp(s, "sgd") == 0)
		*k = GF_OPT_SGD;
	else if (strcmp(s, "oadam") == 0 || strcmp(s, "optimistic_adam") == 0)
		*k = GF_OPT_OADAM;
	else
		return gf_seterr(GF_EPARAM, "optimiser: unknown kind '%s' (adam, sgd, oadam)", s);
	return 0;
}

static int num(const gf_value *v, const char *key, float *out)
{
	const gf_value *x = gf_value_get(v, key);
	int ok;
	double d = gf_value_as_num(x, *out, &ok);
	if (!ok)
		return gf_seterr(GF_EPARAM, "optimiser: %s must be a number", key);
	*out = (float)d;
	return 0;
}

int gf_optim_conf_parse(gf_optim_conf *c, const gf_value *v)
{
	static const char *const keys[] = { "kind", "lr", "betas", "beta1", "beta2", "eps", "weight_decay",
	                                    "decoupled", "momentum", "dampening", "nesterov", NULL };
	int ok;
	const char *kind = gf_value_as_str(gf_value_arg(v, 0), NULL, &ok);
	if (!kind)
		kind = gf_value_as_str(gf_value_get(v, "kind"), NULL, &ok);
	if (!kind || !ok)
		return gf_seterr(GF_EPARAM, "optimiser: needs a kind, e.g. {\"adam\", lr = 2e-4}");
	gf_optim_kind k = GF_OPT_ADAM;
	int rc = kind_of(kind, &k);
	if (rc)
		return rc;
	gf_optim_defaults(c, k);
	if (v->type == GF_VMAP) {
		for (size_t i = 0; i < v->u.c.len; i++) {
			const char *key = v->u.c.keys[i];
			int known = strcmp(key, "1") == 0;
			for (int j = 0; keys[j]; j++)
				known |= strcmp(key, keys[j]) == 0;
			if (!known)
				return gf_seterr(GF_EPARAM, "optimiser %s: unknown key '%s'", kind, key);
		}
	} else if (gf_value_len(v) > 1) {
		return gf_seterr(GF_EPARAM, "optimiser %s: settings must be named (lr = ...)", kind);
	}
	const gf_value *betas = gf_value_get(v, "betas");
	if (betas) {
		if (betas->type != GF_VLIST || gf_value_len(betas) != 2)
			return gf_seterr(GF_EPARAM, "optimiser %s: betas must be {beta1, beta2}", kind);
		c->beta1 = (float)gf_value_as_num(gf_value_at(betas, 0), 0, &ok);
		int ok2;
		c->beta2 = (float)gf_value_as_num(gf_value_at(betas, 1), 0, &ok2);
		if (!ok || !ok2)
			return gf_seterr(GF_EPARAM, "optimiser %s: betas must be numbers", kind);
	}
	if ((rc = num(v, "lr", &c->lr)) || (rc = num(v, "beta1", &c->beta1)) || (rc = num(v, "beta2", &c->beta2)) ||
	    (rc = num(v, "eps", &c->eps)) || (rc = num(v, "weight_decay", &c->weight_decay)) ||
	    (rc = num(v, "momentum", &c->momentum)) || (rc = num(v, "dampening", &c->dampening)))
		return rc;
	c->decoupled = gf_value_as_bool(gf_value_get(v, "decoupled"), 0, &ok);
	if (!ok)
		return gf_seterr(GF_EPARAM, "optimiser %s: decoupled must be a boolean", kind);
	c->nesterov = gf_value_as_bool(gf_value_get(v, "nesterov"), 0, &ok);
	if (!ok)
		return gf_seterr(GF_EPARAM, "optimiser %s: nesterov must be a boolean", kind);
	if (!(c->lr >= 0) || !(c->beta1 >= 0 && c->beta1 < 1) || !(c->beta2 >= 0 && c->beta2 < 1) || !(c->eps >= 0) ||
	    !(c->weight_decay >= 0) || !(c->momentum >= 0))
		return gf_seterr(GF_EPARAM, "optimiser %s: lr, betas, eps, weight_decay or momentum out of range", kind);
	if (c->nesterov && (c->momentum <= 0 || c->dampening != 0))
		return gf_seterr(GF_EPARAM, "optimiser sgd: nesterov needs momentum > 0 and dampening 0");
	return 0;
}

/* ---- create / destroy ---- */

static const char *const slot_names[3][3] = {
	[GF_OPT_ADAM] = { "m", "v", NULL },
	[GF_OPT_SGD] = { "momentum", NULL, NULL },
	[GF_OPT_OADAM] = { "m", "v", "g_prev" },
};

/* Allocates an optimiser over [off, off + count) of net's blocks with zero
 * state; views are made by the caller. */
static int optim_alloc(gf_optim **out, gf_net *net, const gf_optim_conf *c, size_t off, size_t count)
{
	*out = NULL;
	if ((int)c->kind < 0 || c->kind > GF_OPT_OADAM)
		return gf_seterr(GF_EPARAM, "optimiser: unknown kind %d", (int)c->kind);
	gf_optim *o = calloc(1, sizeof(*o));
	if (!o)
		return gf_seterr(-ENOMEM, "optimiser: out of memory");
	o->net = net;
	o->conf = *c;
	o->slots = c->kind == GF_OPT_ADAM ? 2 : c->kind == GF_OPT_OADAM ? 3 : 1;
	o->off = off;
	o->count = count;
	o->nstate = (size_t)o->slots * count;
	void *p;
	int rc = net->k.be->ops->alloc(net->k.be, &p, (o->nstate ? o->nstate : 1) * sizeof(float));
	if (rc) {
		free(o);
		return rc;
	}
	o->state = p;
	if ((rc = net->k.be->ops->fill(net->k.be, o->state, o->nstate, 0.0f))) {
		gf_optim_destroy(o);
		return rc;
	}
	*out = o;
	return 0;
}

int gf_optim_create_range(gf_optim **out, gf_net *net, const gf_optim_conf *c, size_t offset, size_t count)
{
	size_t np;
	gf_net_block(net, GF_PARAMS, &np);
	*out = NULL;
	if (offset > np || count > np - offset)
		return gf_seterr(GF_EPARAM, "optimiser: range [%zu, %zu) outside the %zu parameters", offset,
		                 offset + count, np);
	return optim_alloc(out, net, c, offset, count);
}

void gf_optim_range(const gf_optim *o, size_t *offset, size_t *count)
{
	*offset = o->off;
	*count = o->count;
}

int gf_optim_slots(const gf_optim *o)
{
	return o->slots;
}

int gf_optim_create(gf_optim **out, gf_net *net, const gf_optim_conf *c)
{
	size_t np, nv;
	gf_net_block(net, GF_PARAMS, &np);
	const gf_view *pv = gf_net_views(net, GF_PARAMS, &nv);
	gf_optim *o;
	int rc = optim_alloc(&o, net, c, 0, np);
	if (rc)
		return rc;
	o->views = calloc((size_t)o->slots * nv + 1, sizeof(*o->views));
	if (!o->views) {
		rc = gf_seterr(-ENOMEM, "optimiser: out of memory");
		goto fail;
	}
	for (int s = 0; s < o->slots; s++) {
		for (size_t i = 0; i < nv; i++) {
			gf_view *v = &o->views[o->nviews++];
			*v = pv[i];
			size_t len = strlen(pv[i].name) + strlen(slot_names[c->kind][s]) + 2;
			char *name = malloc(len);
			if (!name) {
				v->name = NULL;
				rc = gf_seterr(-ENOMEM, "optimiser: out of memory");
				goto fail;
			}
			snprintf(name, len, "%s.%s", slot_names[c->kind][s], pv[i].name);
			v->name = name;
			v->offset = (size_t)s * np + pv[i].offset;
		}
	}
	*out = o;
	return 0;
fail:
	gf_optim_destroy(o);
	return rc;
}

void gf_optim_destroy(gf_optim *o)
{
	if (!o)
		return;
	if (o->state)
		o->net->k.be->ops->free(o->net->k.be, o->state);
	for (size_t i = 0; i < o->nviews; i++)
		free((char *)o->views[i].name);
	free(o->views);
	free(o);
}

/* ---- steps ---- */

/* The update's arithmetic per parameter, as the CPU kernels do it (ops_cpu.c):
 * Adam m (3), v (4), the denominator (3), the step (3); optimistic Adam 2
 * more for its extrapolated gradient; SGD 2, momentum 3 more, Nesterov 2
 * more; weight decay 2 (decoupled: 1). For gf_net_flops_done. */
static double update_flops(const gf_optim_conf *c)
{
	double f;
	if (c->kind == GF_OPT_SGD)
		f = 2 + (c->momentum != 0.0f ? 3 + (c->nesterov ? 2 : 0) : 0);
	else
		f = 13 + (c->kind == GF_OPT_OADAM ? 2 : 0);
	if (c->weight_decay != 0.0f)
		f += c->kind != GF_OPT_SGD && c->decoupled ? 1 : 2;
	return f;
}

int gf_optim_step(gf_optim *o)
{
	gf_net *net = o->net;
	size_t np = o->count;
	float *p = gf_net_block(net, GF_PARAMS, NULL) + o->off;
	float *g = gf_net_block(net, GF_GRADS, NULL) + o->off;
	const gf_optim_conf *c = &o->conf;
	gf_optim_args a;
	memset(&a, 0, sizeof(a));
	a.kind = c->kind;
	a.lr = c->lr;
	a.beta1 = c->beta1;
	a.beta2 = c->beta2;
	a.eps = c->eps;
	a.weight_decay = c->weight_decay;
	a.decoupled = c->decoupled;
	a.momentum = c->momentum;
	a.dampening = c->dampening;
	a.nesterov = c->nesterov;
	a.step = o->steps + 1;
	/* as torch.optim.Adam: Python doubles, rounded once to f32 */
	double bc1 = 1.0 - pow((double)c->beta1, (double)a.step);
	double bc2 = 1.0 - pow((double)c->beta2, (double)a.step);
	a.step_size = (float)((double)c->lr / bc1);
	a.bc2_sqrt = (float)sqrt(bc2);
	int rc = np ? net->k.be->ops->optim_step(net->k.be, p, g, o->state, np, &a) : 0;
	if (rc)
		return rc;
	gf_net_count(net, update_flops(c) * (double)np);
	o->steps++;
	return 0;
}

int64_t gf_optim_steps(const gf_optim *o)
{
	return o->steps;
}

void gf_optim_set_steps(gf_optim *o, int64_t steps)
{
	o->steps = steps;
}

void gf_optim_set_lr(gf_optim *o, float lr)
{
	o->conf.lr = lr;
}

void gf_optim_set_beta2(gf_optim *o, float beta2)
{
	o->conf.beta2 = beta2;
}

const gf_optim_conf *gf_optim_config(const gf_optim *o)
{
	return &o->conf;
}

float *gf_optim_state(gf_optim *o, size_t *n)
{
	if (n)
		*n = o->nstate;
	return o->state;
}

const gf_view *gf_optim_views(const gf_optim *o, size_t *n)
{
	*n = o->nviews;
	return o->views;
}

/* ---- clipping ---- */

int gf_net_clip_grad_norm(gf_net *net, float max_norm, float *norm)
{
	size_t n;
	float *g = gf_net_block(net, GF_GRADS, &n);
	double ss = 0;
	int rc = n ? net->k.be->ops->sumsq(net->k.be, &ss, g, n) : 0;
	if (rc)
		return rc;
	double total = sqrt(ss);
	if (norm)
		*norm = (float)total;
	if (!isfinite(total))
		return gf_seterr(GF_ENONFINITE, "gradient norm is %g", total);
	if (max_norm > 0) {
		double coef = (double)max_norm / (total + 1e-6);
		if (coef < 1.0)
			return net->k.be->ops->scale(net->k.be, g, n, (float)coef);
	}
	return 0;
}
