/* Real batches on their way to a step's fixed device buffers: see
 * gf_staging in <ganflow/train.h> and docs/cuda.md.
 *
 * Two slots, used in turn. With a copy instance (an async backend: its own
 * stream), a batch's copy into its slot's device staging starts when the
 * batch is put, while the compute stream runs the step before; the step
 * that uses it waits on the device for that copy (event `dma`), copies the
 * staging into its fixed buffers and records `used`, which the copy into
 * the same slot two batches later waits for. The message stays in its slot
 * until that slot is put again (its copy has run by then: the host waits
 * for it) or released. Without a copy instance the copy is made at use. */
#include <errno.h>
#include <stdlib.h>

#include <ganflow/err.h>
#include <ganflow/train.h>

typedef struct slot {
	gf_msg *m;              /* the message, kept until its copy ran */
	float *x;               /* device staging (copy instance only) */
	int32_t *l;
	void *dma, *used;       /* copy done (copy stream); staging read (compute stream) */
	int used_set;
} slot;

struct gf_staging {
	gf_backend *be, *cbe;
	size_t sample;          /* bytes of one image */
	int labels;             /* the labels go too */
	slot s[2];
	int next;               /* the slot the next batch goes to */
};

int gf_staging_create(gf_staging **out, gf_backend *be, gf_backend *cbe, size_t sample, int labels, int max_batch)
{
	gf_staging *g = calloc(1, sizeof(*g));
	*out = g;
	if (!g) {
		if (cbe)
			gf_backend_close(cbe);
		return gf_seterr(-ENOMEM, "out of memory");
	}
	g->be = be;
	g->cbe = cbe;
	g->sample = sample;
	g->labels = labels;
	if (!cbe)
		return 0;
	size_t xb = (size_t)max_batch * sample, lb = (size_t)max_batch * sizeof(int32_t);
	const gf_backend_ops *o = cbe->ops;
	for (int i = 0; i < 2; i++) {
		slot *s = &g->s[i];
		int rc = o->alloc(cbe, (void **)&s->x, xb);
		if (!rc)
			rc = o->alloc(cbe, (void **)&s->l, lb);
		if (!rc)
			rc = o->event_create(cbe, &s->dma);
		if (!rc)
			rc = be->ops->event_create(be, &s->used);
		if (rc)
			return rc;
	}
	return 0;
}

void gf_staging_release(gf_staging *g)
{
	for (int i = 0; g && i < 2; i++) {
		slot *s = &g->s[i];
		if (!s->m)
			continue;
		if (g->cbe)
			g->cbe->ops->event_sync(g->cbe, s->dma);
		gf_msg_release(s->m);
		s->m = NULL;
	}
}

void gf_staging_destroy(gf_staging *g)
{
	if (!g)
		return;
	gf_staging_release(g);
	for (int i = 0; i < 2 && g->cbe; i++) {
		slot *s = &g->s[i];
		if (s->x)
			g->cbe->ops->free(g->cbe, s->x);
		if (s->l)
			g->cbe->ops->free(g->cbe, s->l);
		if (s->dma)
			g->cbe->ops->event_destroy(g->cbe, s->dma);
		if (s->used)
			g->be->ops->event_destroy(g->be, s->used);
	}
	if (g->cbe)
		gf_backend_close(g->cbe);
	free(g);
}

int gf_staging_copy_stream(const gf_staging *g)
{
	return g->cbe != NULL;
}

int gf_staging_put(gf_staging *g, gf_msg *m, int *out)
{
	int j = g->next, rc = 0;
	g->next ^= 1;
	slot *s = &g->s[j];
	if (s->m) {
		if (g->cbe && (rc = g->cbe->ops->event_sync(g->cbe, s->dma))) {
			gf_msg_release(m);
			return rc;
		}
		gf_msg_release(s->m);
	}
	s->m = m;
	*out = j;
	if (!g->cbe)
		return 0;
	gf_backend *c = g->cbe;
	size_t n = (size_t)m->t[0].shape[0];
	if (s->used_set)
		rc = c->ops->event_wait(c, s->used); /* the step before last is done reading this buffer */
	if (!rc)
		rc = c->ops->copy_async(c, s->x, m->t[0].data, n * g->sample, GF_COPY_H2D);
	if (!rc && g->labels)
		rc = c->ops->copy_async(c, s->l, m->t[1].data, n * sizeof(int32_t), GF_COPY_H2D);
	if (!rc)
		rc = c->ops->event_record(c, s->dma);
	return rc;
}

const gf_msg *gf_staging_msg(const gf_staging *g, int j)
{
	return g->s[j].m;
}

int gf_staging_use(gf_staging *g, int j, void *x, void *l)
{
	slot *s = &g->s[j];
	gf_backend *be = g->be;
	const gf_msg *m = s->m;
	size_t n = (size_t)m->t[0].shape[0], xb = n * g->sample, lb = n * sizeof(int32_t);
	int rc;
	if (g->cbe) {
		rc = be->ops->event_wait(be, s->dma);
		if (!rc)
			rc = be->ops->copy(be, x, s->x, xb, GF_COPY_D2D);
		if (!rc && g->labels)
			rc = be->ops->copy(be, l, s->l, lb, GF_COPY_D2D);
		if (!rc && !(rc = be->ops->event_record(be, s->used)))
			s->used_set = 1;
	} else {
		rc = be->ops->copy(be, x, m->t[0].data, xb, GF_COPY_H2D);
		if (!rc && g->labels)
			rc = be->ops->copy(be, l, m->t[1].data, lb, GF_COPY_H2D);
	}
	return rc;
}
