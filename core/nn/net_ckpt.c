/* Network checkpoints as safetensors files: parameters, buffers,
 * optimiser state, step counters and generator states under stable names
 * (see gf_ckpt_part in <ganflow/nn.h>), so a run resumes bit-exactly and
 * PyTorch tooling can read the weights. (The checkpoint stage merges the
 * parts that stages collect with gf_ckpt_collect into one file per step.) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>
#include <ganflow/nn.h>
#include <ganflow/safetensors.h>

/* What one part contributes: host copies of its blocks and the entries. */
struct part_data {
	float *params, *buffers, *state;
	int64_t opt_step[1];
	int64_t rng[3];
};

struct list {
	gf_st_entry *e;
	char **names;
	size_t n, cap;
};

static int list_add(struct list *l, const char *prefix, const char *mid, const char *name, void *data,
                    gf_dtype dt, int ndim, const int64_t *shape)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		gf_st_entry *e = realloc(l->e, cap * sizeof(*e));
		if (!e)
			return -ENOMEM;
		l->e = e;
		char **nm = realloc(l->names, cap * sizeof(*nm));
		if (!nm)
			return -ENOMEM;
		l->names = nm;
		l->cap = cap;
	}
	size_t len = strlen(prefix) + strlen(mid) + strlen(name) + 3;
	char *s = malloc(len);
	if (!s)
		return -ENOMEM;
	snprintf(s, len, "%s%s%s%s", prefix, prefix[0] ? "." : "", mid, name);
	l->names[l->n] = s;
	l->e[l->n].name = s;
	l->e[l->n].t = gf_tensor_make(data, dt, ndim, shape);
	l->n++;
	return 0;
}

static void list_free(struct list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->names[i]);
	free(l->names);
	free(l->e);
}

static void parts_free(struct part_data *pd, int n)
{
	for (int i = 0; pd && i < n; i++) {
		free(pd[i].params);
		free(pd[i].buffers);
		free(pd[i].state);
	}
	free(pd);
}

/* Builds the expected entries of every part, with host buffers to fill
 * (load) or filled from the nets (save). */
static int build(const gf_ckpt_part *parts, int nparts, struct part_data *pd, struct list *l, int fill)
{
	int rc = 0;
	static const int64_t one[1] = { 1 }, three[1] = { 3 };
	for (int i = 0; i < nparts && !rc; i++) {
		const gf_ckpt_part *p = &parts[i];
		size_t np, nb, ns = 0, nv;
		gf_net_block(p->net, GF_PARAMS, &np);
		gf_net_block(p->net, GF_BUFFERS, &nb);
		if (p->opt)
			gf_optim_state(p->opt, &ns);
		pd[i].params = malloc((np ? np : 1) * sizeof(float));
		pd[i].buffers = malloc((nb ? nb : 1) * sizeof(float));
		pd[i].state = malloc((ns ? ns : 1) * sizeof(float));
		if (!pd[i].params || !pd[i].buffers || !pd[i].state)
			return gf_seterr(-ENOMEM, "checkpoint: out of memory");
		if (fill) {
			if ((rc = gf_net_read(p->net, GF_PARAMS, pd[i].params)) ||
			    (rc = gf_net_read(p->net, GF_BUFFERS, pd[i].buffers)))
				return rc;
			gf_backend *be = gf_net_backend(p->net);
			if (ns && (rc = be->ops->copy(be, pd[i].state, gf_optim_state(p->opt, NULL), ns * sizeof(float),
			                              GF_COPY_D2H)))
				return rc;
			const gf_rng *r = gf_net_rng(p->net);
			pd[i].rng[0] = (int64_t)r->seed;
			pd[i].rng[1] = (int64_t)r->stream;
			pd[i].rng[2] = (int64_t)r->offset;
			pd[i].opt_step[0] = p->opt ? gf_optim_steps(p->opt) : 0;
		}
		const gf_view *v = gf_net_views(p->net, GF_PARAMS, &nv);
		for (size_t k = 0; k < nv && !rc; k++)
			rc = list_add(l, p->prefix, "", v[k].name, pd[i].params + v[k].offset, GF_F32, v[k].ndim, v[k].shape);
		v = gf_net_views(p->net, GF_BUFFERS, &nv);
		for (size_t k = 0; k < nv && !rc; k++)
			rc = list_add(l, p->prefix, "", v[k].name, pd[i].buffers + v[k].offset, GF_F32, v[k].ndim, v[k].shape);
		if (!rc)
			rc = list_add(l, p->prefix, "", "rng", pd[i].rng, GF_I64, 1, three);
		if (p->opt) {
			v = gf_optim_views(p->opt, &nv);
			for (size_t k = 0; k < nv && !rc; k++)
				rc = list_add(l, p->prefix, "opt.", v[k].name, pd[i].state + v[k].offset, GF_F32, v[k].ndim,
				              v[k].shape);
			if (!rc)
				rc = list_add(l, p->prefix, "opt.", "step", pd[i].opt_step, GF_I64, 1, one);
		}
	}
	if (rc)
		return gf_seterr(rc, "checkpoint: out of memory");
	return 0;
}

/* ---- collecting ---- */

struct collected {
	struct list l;
	struct part_data *pd;
	int nparts;
};

int gf_ckpt_collect(const gf_ckpt_part *parts, int nparts, gf_ckpt_entries *out)
{
	memset(out, 0, sizeof(*out));
	struct collected *c = calloc(1, sizeof(*c));
	if (!c)
		return gf_seterr(-ENOMEM, "checkpoint: out of memory");
	c->nparts = nparts;
	c->pd = calloc((size_t)(nparts > 0 ? nparts : 1), sizeof(*c->pd));
	int rc = c->pd ? build(parts, nparts, c->pd, &c->l, 1) : gf_seterr(-ENOMEM, "checkpoint: out of memory");
	if (rc) {
		list_free(&c->l);
		parts_free(c->pd, nparts);
		free(c);
		return rc;
	}
	out->e = c->l.e;
	out->n = c->l.n;
	out->priv = c;
	return 0;
}

void gf_ckpt_entries_free(gf_ckpt_entries *ce)
{
	if (!ce || !ce->priv)
		return;
	struct collected *c = ce->priv;
	list_free(&c->l);
	parts_free(c->pd, c->nparts);
	free(c);
	memset(ce, 0, sizeof(*ce));
}

/* ---- saving and loading ---- */

int gf_ckpt_save(const char *path, const gf_ckpt_part *parts, int nparts, int64_t step,
                 const gf_rng *rng, const char *const *meta)
{
	struct list l = { 0 };
	struct part_data *pd = calloc((size_t)(nparts > 0 ? nparts : 1), sizeof(*pd));
	const char **m = NULL;
	int64_t st[1] = { step }, rs[3];
	static const int64_t one[1] = { 1 }, three[1] = { 3 };
	int rc;
	if (!pd)
		return gf_seterr(-ENOMEM, "checkpoint: out of memory");
	if ((rc = build(parts, nparts, pd, &l, 1)))
		goto out;
	if ((rc = list_add(&l, "", "", "step", st, GF_I64, 1, one)))
		goto oom;
	if (rng) {
		rs[0] = (int64_t)rng->seed;
		rs[1] = (int64_t)rng->stream;
		rs[2] = (int64_t)rng->offset;
		if ((rc = list_add(&l, "", "", "rng", rs, GF_I64, 1, three)))
			goto oom;
	}
	size_t nm = 0;
	while (meta && meta[nm] && meta[nm + 1])
		nm += 2;
	m = calloc(nm + 3, sizeof(*m));
	if (!m)
		goto oom;
	m[0] = "format";
	m[1] = "ganflow-nn-1";
	for (size_t i = 0; i < nm; i++)
		m[2 + i] = meta[i];
	rc = gf_st_write(path, l.e, l.n, m);
	goto out;
oom:
	rc = gf_seterr(-ENOMEM, "checkpoint %s: out of memory", path);
out:
	free(m);
	list_free(&l);
	parts_free(pd, nparts);
	return rc;
}

static int has_prefix(const char *name, const char *prefix)
{
	size_t n = strlen(prefix);
	return n == 0 || (strncmp(name, prefix, n) == 0 && name[n] == '.');
}

/* A scalar noise strength (1) that the checkpoint holds per channel: the
 * noise layer's strength before StyleGAN2's one per layer became its
 * default (core/nn/layers/noise.c). */
static int old_noise_strength(const char *name, const gf_tensor *t)
{
	const char *tail = ".noise_strength";
	size_t n = strlen(name), k = strlen(tail);
	return n > k && !strcmp(name + n - k, tail) && gf_tensor_numel(t) == 1;
}

int gf_ckpt_load(const char *path, const gf_ckpt_part *parts, int nparts, int64_t *step, gf_rng *rng)
{
	struct list l = { 0 };
	struct part_data *pd = calloc((size_t)(nparts > 0 ? nparts : 1), sizeof(*pd));
	gf_st_file *f = NULL;
	int64_t st[1], rs[3];
	static const int64_t one[1] = { 1 }, three[1] = { 3 };
	int rc;
	if (!pd)
		return gf_seterr(-ENOMEM, "checkpoint: out of memory");
	if ((rc = build(parts, nparts, pd, &l, 0)))
		goto out;
	if ((rc = gf_st_open(&f, path)))
		goto out;
	/* check everything before touching any network */
	for (size_t i = 0; i < l.n; i++) {
		const gf_tensor *t = &l.e[i].t;
		if ((rc = gf_st_read(f, l.e[i].name, t->dtype, t->ndim, t->shape, t->data))) {
			if (rc == GF_ENOTFOUND)
				gf_seterr(rc, "checkpoint %s: no tensor '%s' (the network has it)", path, l.e[i].name);
			else if (rc == GF_ESHAPE && old_noise_strength(l.e[i].name, t))
				gf_seterr(rc, "%s: one noise strength per channel, from before the noise layer took StyleGAN2's "
				              "one per layer; build the layer with strength = \"channel\" to load it (the StyleGAN2 "
				              "backbone's noise_strength = \"channel\", stylegan2_fashion.lua's too)",
				          gf_errmsg());
			goto out;
		}
	}
	for (size_t i = 0; i < gf_st_count(f); i++) {
		const char *name = gf_st_name(f, i);
		for (int k = 0; k < nparts; k++) {
			if (!has_prefix(name, parts[k].prefix))
				continue;
			int known = 0;
			for (size_t j = 0; j < l.n && !known; j++)
				known = strcmp(l.e[j].name, name) == 0;
			size_t pl = strlen(parts[k].prefix);
			const char *rest = name + pl + (pl ? 1 : 0);
			if (!parts[k].opt && strncmp(rest, "opt.", 4) == 0)
				known = 1;   /* optimiser state not asked for */
			if (!pl && (strcmp(rest, "step") == 0 || strcmp(rest, "rng") == 0))
				known = 1;
			if (!known) {
				rc = gf_seterr(GF_ESHAPE, "checkpoint %s: tensor '%s' is not in the network", path, name);
				goto out;
			}
		}
	}
	if (step && (rc = gf_st_read(f, "step", GF_I64, 1, one, st)))
		goto out;
	if (rng && (rc = gf_st_read(f, "rng", GF_I64, 1, three, rs)))
		goto out;
	/* all present and of the right shape: apply */
	for (int i = 0; i < nparts; i++) {
		const gf_ckpt_part *p = &parts[i];
		if ((rc = gf_net_write(p->net, GF_PARAMS, pd[i].params)) ||
		    (rc = gf_net_write(p->net, GF_BUFFERS, pd[i].buffers)))
			goto out;
		gf_rng *r = gf_net_rng(p->net);
		r->seed = (uint64_t)pd[i].rng[0];
		r->stream = (uint64_t)pd[i].rng[1];
		r->offset = (uint64_t)pd[i].rng[2];
		if (p->opt) {
			size_t ns;
			float *s = gf_optim_state(p->opt, &ns);
			gf_backend *be = gf_net_backend(p->net);
			if (ns && (rc = be->ops->copy(be, s, pd[i].state, ns * sizeof(float), GF_COPY_H2D)))
				goto out;
			gf_optim_set_steps(p->opt, pd[i].opt_step[0]);
		}
	}
	if (step)
		*step = st[0];
	if (rng) {
		rng->seed = (uint64_t)rs[0];
		rng->stream = (uint64_t)rs[1];
		rng->offset = (uint64_t)rs[2];
	}
out:
	gf_st_close(f);
	list_free(&l);
	parts_free(pd, nparts);
	return rc;
}
