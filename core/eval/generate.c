/* Generators of a training checkpoint: rebuilt from the layer tables the
 * training stages store in its metadata, loaded with their weights, and
 * sampled (one G, a conditional G, or the mixture of per-class Gs).
 * See <ganflow/evaluate.h>. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/ckpt.h>
#include <ganflow/err.h>
#include <ganflow/evaluate.h>
#include <ganflow/safetensors.h>
#include <ganflow/train.h>

typedef struct gen {
	char name[96];
	int cls;          /* class of a per-class G, -1 otherwise */
	gf_net *net;
} gen;

struct gf_generators {
	gen *g;
	int n;
	int classes;      /* conditional G's classes, or the per-class count */
	int perclass;
	int zdim, c, h, w;
	int max_batch;
	int ema;          /* running on moving-average weights */
	float truncation; /* > 0: |z_i| beyond it redrawn (G without w_avg layers) */
	int wspace;       /* the truncation is psi on the generators' w_avg layers (StyleGAN2) */
	float *z, *zk;    /* (max_batch, zdim) noise, and the rows of one class */
	int32_t *lk;      /* (max_batch) labels of those rows */
	int *rows;        /* (max_batch) where they go */
	unsigned char *seen; /* (classes) classes the training data held; NULL = every class */
	char seen_text[256]; /* them as ranges */
};

/* Shapes, class count and buffers, once the networks exist. */
static int finish(gf_generators *gs, const char *what)
{
	gf_tensor in, o;
	gf_net_shapes(gs->g[0].net, &in, &o);
	if (in.ndim != 2 || o.ndim != 4)
		return gf_seterr(GF_ESHAPE, "%s: generator '%s' does not map noise vectors to images", what, gs->g[0].name);
	gs->zdim = (int)in.shape[1];
	gs->c = (int)o.shape[1], gs->h = (int)o.shape[2], gs->w = (int)o.shape[3];
	gs->perclass = gs->n > 1 || gs->g[0].cls >= 0;
	gs->classes = gs->perclass ? gs->n : gf_net_classes(gs->g[0].net);
	for (int i = 0; gs->perclass && i < gs->n; i++)
		if (gs->g[i].cls < 0 || gs->g[i].cls >= gs->n)
			return gf_seterr(GF_ECORRUPT, "%s: per-class generator '%s' has class %d, expected 0..%d", what,
			                 gs->g[i].name, gs->g[i].cls, gs->n - 1);
	size_t zb = (size_t)gs->max_batch * (size_t)gs->zdim * sizeof(float);
	gs->z = malloc(zb);
	gs->zk = malloc(zb);
	gs->lk = malloc((size_t)gs->max_batch * sizeof(int32_t));
	gs->rows = malloc((size_t)gs->max_batch * sizeof(int));
	return gs->z && gs->zk && gs->lk && gs->rows ? 0 : -ENOMEM;
}

int gf_generators_create(gf_generators **out, const gf_value *table, int count, gf_backend *be, int max_batch)
{
	*out = NULL;
	if (count < 1)
		return gf_seterr(GF_EPARAM, "generators: count %d < 1", count);
	gf_generators *gs = calloc(1, sizeof(*gs));
	if (!gs || !(gs->g = calloc((size_t)count, sizeof(*gs->g)))) {
		free(gs);
		return -ENOMEM;
	}
	gs->max_batch = max_batch;
	gs->n = count;
	int rc = 0;
	for (int i = 0; i < count && !rc; i++) {
		gen *g = &gs->g[i];
		snprintf(g->name, sizeof(g->name), "G%d", i);
		g->cls = count > 1 ? i : -1;
		gf_net_opts o = { .max_batch = max_batch };
		if ((rc = gf_net_create(&g->net, be, table, &o)))
			rc = gf_seterr(rc, "generator: %s", gf_errmsg());
	}
	if (!rc)
		rc = finish(gs, "generator table");
	if (rc) {
		gf_generators_close(gs);
		return rc;
	}
	*out = gs;
	return 0;
}

/* The truncation trick of a StyleGAN2 G: psi on every w_avg layer of its
 * table (in eval forwards w -> w_avg + psi (w - w_avg)), *found = 1 when
 * there is one; a G without them keeps its table (z is truncated). */
static int set_psi(gf_value *table, float psi, int *found)
{
	*found = 0;
	if (table->type != GF_VMAP && table->type != GF_VLIST)
		return 0;
	for (size_t i = 0; i < table->u.c.len; i++) {
		gf_value *l = &table->u.c.items[i];
		int ok;
		const char *type = gf_value_as_str(gf_value_arg(l, 0), "", &ok);
		if (!ok || (strcmp(type, "w_avg") && strcmp(type, "truncation")))
			continue;
		if (l->type != GF_VMAP)
			return gf_seterr(GF_EPARAM, "layer %zu (%s) has no keys (a map is needed to set psi)", i + 1, type);
		int rc = gf_value_set(l, "psi", gf_value_num(psi));
		if (rc)
			return rc;
		*found = 1;
	}
	return 0;
}

int gf_generators_wspace(const gf_generators *gs)
{
	return gs->wspace;
}

int gf_generators_open(gf_generators **out, const char *given, gf_backend *be, int max_batch)
{
	return gf_generators_open_with(out, given, be, max_batch, NULL);
}

const float *gf_generators_noise(const gf_generators *gs)
{
	return gs->z;
}

int gf_generators_ema(const gf_generators *gs)
{
	return gs->ema;
}

int gf_generators_open_with(gf_generators **out, const char *given, gf_backend *be, int max_batch,
                            const gf_generators_opts *opts)
{
	gf_generators_opts o = opts ? *opts : (gf_generators_opts){ .ema = -1 };
	gf_ckpt *c;
	char path[4096];
	*out = NULL;
	/* a run directory (its latest checkpoint) as resume= takes it */
	int rc = gf_ckpt_resolve(given, path, sizeof(path));
	if (rc || (rc = gf_ckpt_open(&c, path)))
		return rc;
	gf_generators *gs = calloc(1, sizeof(*gs));
	if (!gs || !(gs->g = calloc((size_t)gf_ckpt_nparts(c) + 1, sizeof(*gs->g)))) {
		free(gs);
		gf_ckpt_close(c);
		return -ENOMEM;
	}
	gs->max_batch = max_batch;
	gs->truncation = o.truncation;
	for (int i = 0; i < gf_ckpt_nparts(c); i++) {
		if (strcmp(gf_ckpt_part_role(c, i), "generator"))
			continue;
		gen *g = &gs->g[gs->n++];
		snprintf(g->name, sizeof(g->name), "%s", gf_ckpt_part_name(c, i));
		g->cls = gf_ckpt_part_class(c, i);
		int has = gf_ckpt_has_ema(c, i);
		if (o.ema == 1 && !has) {
			rc = gf_seterr(GF_ENOTFOUND, "%s: generator '%s' has no moving average (%s.ema.*): it was trained "
			                             "without g_step's ema option; use ema=0", path, g->name, g->name);
			goto fail;
		}
		if (gs->n > 1 && (o.ema != 0 && has) != gs->ema) {
			rc = gf_seterr(GF_ECORRUPT, "%s: some generators have moving averages and some not", path);
			goto fail;
		}
		gs->ema = o.ema != 0 && has;
		gf_value table;
		int wspace = 0;
		if ((rc = gf_ckpt_table(c, i, &table)))
			goto fail;
		if (o.truncation > 0 && (rc = set_psi(&table, o.truncation, &wspace)))
			rc = gf_seterr(rc, "%s: generator '%s': truncation: %s", path, g->name, gf_errmsg());
		if (!rc)
			rc = gf_ckpt_net_weights_table(c, i, gs->ema ? "ema" : "net", &table, be, max_batch, &g->net);
		gf_value_free(&table);
		if (rc)
			goto fail;
		if (gs->n > 1 && wspace != gs->wspace) {
			rc = gf_seterr(GF_ECORRUPT, "%s: some generators have a w_avg layer and some not", path);
			goto fail;
		}
		gs->wspace = wspace;
	}
	if (!gs->n) {
		rc = gf_seterr(GF_ENOTFOUND, "%s holds no generator (no '<stage>.role = generator' metadata): "
		                             "is it a ganflow training checkpoint?", path);
		goto fail;
	}
	if ((rc = finish(gs, path)))
		goto fail;
	/* the classes a conditional G's training data held (d_step's
	 * "<d>.data_classes"; checkpoints of every part agree, older ones have none) */
	for (int i = 0; !gs->perclass && gs->classes > 0 && i < gf_ckpt_nparts(c); i++) {
		const char *dc = gf_ckpt_part_meta(c, i, "data_classes");
		if (!dc)
			continue;
		unsigned char *m = malloc((size_t)gs->classes);
		if (!m) {
			rc = -ENOMEM;
			goto fail;
		}
		if ((rc = gf_data_classes_parse(dc, gs->classes, m))) {
			free(m);
			rc = gf_seterr(rc, "%s: part '%s': %s", path, gf_ckpt_part_name(c, i), gf_errmsg());
			goto fail;
		}
		if (!gs->seen) {
			gs->seen = m;
		} else {
			for (int k = 0; k < gs->classes; k++)
				gs->seen[k] |= m[k];
			free(m);
		}
	}
	if (gs->seen)
		gf_data_classes_format(gs->seen, gs->classes, gs->seen_text, sizeof(gs->seen_text));
	gf_ckpt_close(c);
	*out = gs;
	return 0;
fail:
	gf_ckpt_close(c);
	gf_generators_close(gs);
	return rc;
}

void gf_generators_close(gf_generators *gs)
{
	if (!gs)
		return;
	for (int i = 0; i < gs->n; i++)
		gf_net_destroy(gs->g[i].net);
	free(gs->g);
	free(gs->z);
	free(gs->zk);
	free(gs->lk);
	free(gs->rows);
	free(gs->seen);
	free(gs);
}

int gf_generators_seen(const gf_generators *g, int k)
{
	return k >= 0 && k < g->classes && (!g->seen || g->seen[k]);
}

const char *gf_generators_seen_text(const gf_generators *g)
{
	return g->seen ? g->seen_text : NULL;
}

int gf_generators_count(const gf_generators *g) { return g->n; }
int gf_generators_classes(const gf_generators *g) { return g->classes; }

void gf_generators_shape(const gf_generators *g, int *c, int *h, int *w)
{
	*c = g->c, *h = g->h, *w = g->w;
}

gf_net *gf_generators_net(gf_generators *g, int i)
{
	return i >= 0 && i < g->n ? g->g[i].net : NULL;
}

/* Runs generator k on the rows given and scatters its images into place. */
static int run_rows(gf_generators *gs, gen *g, int m, unsigned mode, float *images)
{
	int64_t zs[2] = { m, gs->zdim }, ls[1] = { m };
	gf_tensor z = gf_tensor_make(gs->zk, GF_F32, 2, zs), lab = gf_tensor_make(gs->lk, GF_I32, 1, ls);
	int rc = gf_net_forward(g->net, &z, gf_net_classes(g->net) ? &lab : NULL, mode);
	if (rc)
		return gf_seterr(rc, "generator '%s': %s", g->name, gf_errmsg());
	gf_tensor o;
	gf_net_output(g->net, &o);
	size_t per = (size_t)gs->c * (size_t)gs->h * (size_t)gs->w;
	gf_backend *be = gf_net_backend(g->net);
	for (int i = 0; i < m; i++) {
		float *img = images + (size_t)gs->rows[i] * per;
		rc = be->ops->copy(be, img, (const float *)o.data + (size_t)i * per, per * sizeof(float), GF_COPY_D2H);
		if (rc)
			return rc;
		/* a black grid or a finite-looking FID must not hide a broken G */
		size_t k = gf_finite_find(img, per);
		if (k < per)
			return gf_seterr(GF_ENONFINITE, "generator '%s': generator output is not finite (image %d, value %zu "
			                                "is %s)",
			                 g->name, gs->rows[i], k, img[k] != img[k] ? "nan" : "inf");
	}
	return 0;
}

int gf_generators_sample(gf_generators *gs, gf_rng *r, const int32_t *labels, int n, unsigned mode,
                         float *images)
{
	if (n < 1 || n > gs->max_batch)
		return gf_seterr(GF_EPARAM, "sample: n = %d outside 1..%d", n, gs->max_batch);
	if (gs->classes && !labels)
		return gf_seterr(GF_EPARAM, "sample: the generators are conditional or per-class: labels needed");
	size_t zd = (size_t)gs->zdim;
	gf_rng_normal(r, gs->z, (size_t)n * zd, 0.0f, 1.0f);
	for (size_t i = 0; gs->truncation > 0 && !gs->wspace && i < (size_t)n * zd; i++)
		while (fabsf(gs->z[i]) > gs->truncation) /* P(|z| <= t) > 0.38 for t >= 0.5: a few draws */
			gf_rng_normal(r, gs->z + i, 1, 0.0f, 1.0f);
	for (int k = 0; k < (gs->perclass ? gs->n : 1); k++) {
		gen *g = &gs->g[k];
		int m = 0;
		for (int i = 0; i < n; i++) {
			if (labels && (labels[i] < 0 || labels[i] >= (gs->classes ? gs->classes : 1)))
				return gf_seterr(GF_EPARAM, "sample: label %d outside 0..%d", labels[i], gs->classes - 1);
			if (gs->perclass && labels[i] != g->cls)
				continue;
			memcpy(gs->zk + (size_t)m * zd, gs->z + (size_t)i * zd, zd * sizeof(float));
			gs->lk[m] = labels ? labels[i] : 0;
			gs->rows[m++] = i;
		}
		if (m) {
			int rc = run_rows(gs, g, m, mode, images);
			if (rc)
				return rc;
		}
	}
	return 0;
}
