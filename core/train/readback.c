/* Step results read after the step: see gf_readback in <ganflow/train.h>
 * and docs/cuda.md ("Step stages").
 *
 * A step's ops leave their results (losses from loss_dev, sums from
 * reduce_dev) in a few fixed device slots. On a backend with events each
 * step then queues one asynchronous copy of the slots into its entry of a
 * ring of pinned host buffers and records an event behind it; the stage
 * takes an entry (waiting for its event) only when it reports the values,
 * which it does a step later, so the host never waits for the step it has
 * just queued. Two timed events around the step give the time the device
 * spent on it. On a host backend the values are copied at the push and
 * the time is the host's. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>
#include <ganflow/log.h>
#include <ganflow/train.h>

struct entry {
	int64_t tag;
	void *start, *end;   /* events (async) */
	double t0, t1;       /* host seconds at begin and push (host timing) */
};

struct gf_readback {
	gf_backend *be;
	int nvals, depth;
	int async;           /* events and asynchronous copies */
	int timed;           /* timed events */
	double *slots;       /* (nvals) device */
	double *host;        /* (depth, nvals) pinned, or malloc'ed on a host backend */
	struct entry *e;     /* (depth) */
	int head, count;
	int begun;
};

int gf_readback_create(gf_readback **out, gf_backend *be, int nvals, int depth)
{
	gf_readback *r = calloc(1, sizeof(*r));
	*out = r;
	if (!r)
		return gf_seterr(-ENOMEM, "out of memory");
	if (nvals < 1 || depth < 1)
		return gf_seterr(GF_EPARAM, "readback: %d values, depth %d", nvals, depth);
	const gf_backend_ops *o = be->ops;
	r->be = be;
	r->nvals = nvals;
	r->depth = depth;
	r->async = gf_train_async(be);
	r->timed = r->async && GF_BACKEND_HAS(be, event_create_timed) && GF_BACKEND_HAS(be, event_elapsed);
	size_t bytes = (size_t)depth * (size_t)nvals * sizeof(double);
	r->e = calloc((size_t)depth, sizeof(*r->e));
	r->host = r->async ? o->pinned_alloc(be, bytes) : malloc(bytes);
	if (!r->e || !r->host)
		return gf_seterr(-ENOMEM, "readback: out of memory");
	int rc = o->alloc(be, (void **)&r->slots, (size_t)nvals * sizeof(double));
	if (!rc)
		rc = o->fill(be, (float *)(void *)r->slots, 2 * (size_t)nvals, 0.0f);
	for (int i = 0; i < depth && r->async && !rc; i++) {
		rc = r->timed ? o->event_create_timed(be, &r->e[i].start) : 0;
		if (!rc)
			rc = r->timed ? o->event_create_timed(be, &r->e[i].end) : o->event_create(be, &r->e[i].end);
	}
	return rc;
}

void gf_readback_destroy(gf_readback *r)
{
	if (!r)
		return;
	const gf_backend_ops *o = r->be ? r->be->ops : NULL;
	/* a copy into the pinned buffers may still be on its way */
	for (int k = 0; r->async && r->e && k < r->count; k++)
		o->event_sync(r->be, r->e[(r->head + k) % r->depth].end);
	for (int i = 0; r->e && r->async && i < r->depth; i++) {
		if (r->e[i].start)
			o->event_destroy(r->be, r->e[i].start);
		if (r->e[i].end)
			o->event_destroy(r->be, r->e[i].end);
	}
	if (r->host)
		r->async ? o->pinned_free(r->be, r->host) : free(r->host);
	if (r->slots)
		o->free(r->be, r->slots);
	free(r->e);
	free(r);
}

double *gf_readback_slots(gf_readback *r)
{
	return r->slots;
}

int gf_readback_deferred(const gf_readback *r)
{
	return r->async;
}

int gf_readback_device_timed(const gf_readback *r)
{
	return r->timed;
}

int gf_readback_count(const gf_readback *r)
{
	return r->count;
}

int gf_readback_begin(gf_readback *r)
{
	if (r->count >= r->depth)
		return gf_seterr(GF_EPARAM, "readback: %d steps in flight already (take one first)", r->count);
	struct entry *e = &r->e[(r->head + r->count) % r->depth];
	r->begun = 1;
	e->t0 = gf_now();
	return r->timed ? r->be->ops->event_record(r->be, e->start) : 0;
}

int gf_readback_push(gf_readback *r, int64_t tag)
{
	if (r->count >= r->depth)
		return gf_seterr(GF_EPARAM, "readback: %d steps in flight already (take one first)", r->count);
	int i = (r->head + r->count) % r->depth;
	struct entry *e = &r->e[i];
	const gf_backend_ops *o = r->be->ops;
	size_t bytes = (size_t)r->nvals * sizeof(double);
	double *dst = r->host + (size_t)i * r->nvals;
	if (!r->begun) {
		e->t0 = gf_now();
		if (r->timed) {
			int rc = o->event_record(r->be, e->start);
			if (rc)
				return rc;
		}
	}
	r->begun = 0;
	int rc = r->async ? o->copy_async(r->be, dst, r->slots, bytes, GF_COPY_D2H)
	                  : o->copy(r->be, dst, r->slots, bytes, GF_COPY_D2H);
	if (!rc && r->async)
		rc = o->event_record(r->be, e->end);
	if (rc)
		return rc;
	e->t1 = gf_now();
	e->tag = tag;
	r->count++;
	return 0;
}

int gf_readback_take(gf_readback *r, int64_t *tag, const double **vals, double *busy)
{
	if (!r->count)
		return gf_seterr(GF_EPARAM, "readback: nothing in flight");
	int i = r->head;
	struct entry *e = &r->e[i];
	int rc = 0;
	double b = e->t1 - e->t0;
	if (r->async && (rc = r->be->ops->event_sync(r->be, e->end)))
		return rc;
	if (r->timed) {
		float ms = 0;
		if ((rc = r->be->ops->event_elapsed(r->be, e->start, e->end, &ms)))
			return rc;
		b = ms * 1e-3;
	}
	r->head = (r->head + 1) % r->depth;
	r->count--;
	*tag = e->tag;
	*vals = r->host + (size_t)i * r->nvals;
	if (busy)
		*busy = b;
	return 0;
}
