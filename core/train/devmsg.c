/* Messages whose tensors stay in device memory: see gf_devmsg in
 * <ganflow/train.h> and the protocol of docs/cuda.md.
 *
 * Producer: queue the work that fills a message's device buffers, record
 * the message's own event (one per envelope, so a consumer still waiting
 * on an earlier use of another envelope is never confused), push.
 * Consumer: make its stream wait on the event (the host does not), queue
 * its copies out of the buffers, and keep the message until those copies
 * have run: the producer refills an envelope as soon as it is released.
 * The consumer releases held messages a step later, after an event it
 * recorded behind its copies, which by then has long completed. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>
#include <ganflow/train.h>

struct pair {
	gf_msg *m;
	void *ev;
};

struct gf_devmsg {
	gf_backend *be;
	int async;
	struct pair *own;    /* producer: an event per envelope */
	int nown, capown;
	struct pair *held;   /* consumer: messages kept, oldest first */
	int nheld, capheld;
	void **spare;        /* events of released holds, for reuse */
	int nspare, capspare;
	void *fence;
	int fenced;
};

int gf_devmsg_create(gf_devmsg **out, gf_backend *be)
{
	gf_devmsg *d = calloc(1, sizeof(*d));
	*out = d;
	if (!d)
		return gf_seterr(-ENOMEM, "out of memory");
	d->be = be;
	d->async = gf_train_async(be);
	return 0;
}

static int grow(void **arr, int *cap, int need, size_t size)
{
	if (need <= *cap)
		return 0;
	int c = *cap ? 2 * *cap : 8;
	while (c < need)
		c *= 2;
	void *p = realloc(*arr, (size_t)c * size);
	if (!p)
		return gf_seterr(-ENOMEM, "out of memory");
	*arr = p;
	*cap = c;
	return 0;
}

void gf_devmsg_destroy(gf_devmsg *d)
{
	if (!d)
		return;
	gf_devmsg_release(d, 0);
	for (int i = 0; i < d->nheld; i++) /* a failed wait: release them anyway */
		gf_msg_release(d->held[i].m);
	const gf_backend_ops *o = d->be->ops;
	for (int i = 0; i < d->nown; i++)
		o->event_destroy(d->be, d->own[i].ev);
	for (int i = 0; i < d->nspare; i++)
		o->event_destroy(d->be, d->spare[i]);
	if (d->fence)
		o->event_destroy(d->be, d->fence);
	free(d->own);
	free(d->held);
	free(d->spare);
	free(d);
}

int gf_devmsg_ready(gf_devmsg *d, gf_msg *m)
{
	if (!d->async)
		return gf_seterr(GF_EPARAM, "device message on a backend without events");
	void *ev = NULL;
	for (int i = 0; i < d->nown && !ev; i++)
		if (d->own[i].m == m)
			ev = d->own[i].ev;
	if (!ev) {
		int rc = grow((void **)&d->own, &d->capown, d->nown + 1, sizeof(*d->own));
		if (rc || (rc = d->be->ops->event_create(d->be, &ev)))
			return rc;
		d->own[d->nown++] = (struct pair){ m, ev };
	}
	int rc = d->be->ops->event_record(d->be, ev);
	if (!rc)
		m->event = ev;
	return rc;
}

int gf_devmsg_wait(gf_devmsg *d, const gf_msg *m)
{
	if (!m->event)
		return 0;
	if (!d->async)
		return gf_seterr(GF_EPARAM, "a message in device memory reached a backend without events (%s)",
		                 d->be->ops->name);
	return d->be->ops->event_wait(d->be, m->event);
}

int gf_devmsg_hold(gf_devmsg *d, gf_msg *m)
{
	if (!d->async) {
		gf_msg_release(m);
		return 0;
	}
	void *ev = NULL;
	int rc = grow((void **)&d->held, &d->capheld, d->nheld + 1, sizeof(*d->held));
	if (!rc) {
		if (d->nspare)
			ev = d->spare[--d->nspare];
		else
			rc = d->be->ops->event_create(d->be, &ev);
	}
	if (!rc && (rc = d->be->ops->event_record(d->be, ev)))
		d->be->ops->event_destroy(d->be, ev);
	if (rc) {
		/* no event: wait for everything queued instead */
		int src = d->be->ops->sync(d->be);
		gf_msg_release(m);
		return src ? src : rc;
	}
	d->held[d->nheld++] = (struct pair){ m, ev };
	return 0;
}

int gf_devmsg_release(gf_devmsg *d, int keep)
{
	int n = d->nheld - (keep > 0 ? keep : 0), done = 0, rc = 0;
	for (; done < n; done++) {
		if ((rc = d->be->ops->event_sync(d->be, d->held[done].ev)))
			break;
		gf_msg_release(d->held[done].m);
		if (grow((void **)&d->spare, &d->capspare, d->nspare + 1, sizeof(*d->spare)))
			d->be->ops->event_destroy(d->be, d->held[done].ev);
		else
			d->spare[d->nspare++] = d->held[done].ev;
	}
	if (done > 0) {
		memmove(d->held, d->held + done, (size_t)(d->nheld - done) * sizeof(*d->held));
		d->nheld -= done;
	}
	return rc;
}

int gf_devmsg_fence(gf_devmsg *d)
{
	if (!d->async)
		return 0;
	int rc = d->fence ? 0 : d->be->ops->event_create(d->be, &d->fence);
	if (!rc && !(rc = d->be->ops->event_record(d->be, d->fence)))
		d->fenced = 1;
	return rc;
}

int gf_devmsg_fence_wait(gf_devmsg *d)
{
	if (!d->async || !d->fenced)
		return 0;
	return d->be->ops->event_sync(d->be, d->fence);
}
