/* Bounded SPSC ring of pointers with an active depth. See <ganflow/ring.h>.
 *
 * Positions are free-running 32-bit counters (head: next slot the producer
 * writes, tail: next slot the consumer reads); count = head - tail in
 * unsigned arithmetic, the slot is position & mask. Each side keeps a
 * private copy of the other side's counter and re-reads the shared one only
 * when its copy says "full" or "empty", so most operations touch only the
 * side's own cache line plus the slot.
 *
 * Sleeping: the consumer sleeps on `cons_ev` (notified after every push,
 * close and stop), the producer on `prod_ev` (notified after every pop,
 * depth raise, detach and stop). See atomics.h for why no wake-up is lost.
 */
#include <errno.h>
#include <sched.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <ganflow/log.h>
#include <ganflow/ring.h>

#include "../base/atomics.h"
#include "ring_internal.h"

/* Waiting: poll (one pause between polls) for up to the spin budget, then
 * yield twice, then sleep on the futex. The budget rides out a peer that
 * is busy for a few microseconds (waking a sleeping thread costs more than
 * that on a virtual machine) without stealing a core for long from the
 * other threads of a graph on a small machine, where a thread that spins
 * may be keeping the one it waits for off the CPU. GANFLOW_SPIN_US
 * overrides it (0: sleep after a few polls). */
#define SPIN_US_DEFAULT 5.0
#define YIELD_POLLS 2

static atomic_uint_least64_t spin_budget; /* f64 bits of seconds; 0 = not read yet */

double gf_spin_budget(void)
{
	double s = gf_load_relaxed_f64(&spin_budget);
	if (s != 0.0)
		return s < 0 ? 0.0 : s;
	const char *e = getenv("GANFLOW_SPIN_US");
	s = e ? atof(e) * 1e-6 : SPIN_US_DEFAULT * 1e-6;
	/* relaxed: every thread computes the same value; -1 encodes "zero" */
	gf_store_relaxed_f64(&spin_budget, s > 0 ? s : -1.0);
	return s > 0 ? s : 0.0;
}

/* Polls poll(r, p) until it stops returning -EAGAIN or the spin budget is
 * spent; returns its last result. */
static int spin(int (*poll)(gf_ring *, void **), gf_ring *r, void **p)
{
	int rc;
	double deadline = 0;
	for (unsigned i = 0;; i++) {
		if ((rc = poll(r, p)) != -EAGAIN)
			return rc;
		gf_cpu_relax();
		if ((i & 15) == 15) {
			double now = gf_now();
			if (deadline == 0)
				deadline = now + gf_spin_budget();
			else if (now >= deadline)
				break;
		}
	}
	for (int i = 0; i < YIELD_POLLS; i++) {
		if ((rc = poll(r, p)) != -EAGAIN)
			return rc;
		sched_yield();
	}
	return -EAGAIN;
}

enum {
	RING_CLOSED = 1u << 0,
	RING_DETACHED = 1u << 1,
	RING_STOPPED = 1u << 2
};

struct gf_ring {
	/* producer's line */
	alignas(GF_CACHELINE) atomic_uint head;
	uint32_t tail_cache;   /* producer's last view of tail */
	/* consumer's line */
	alignas(GF_CACHELINE) atomic_uint tail;
	uint32_t head_cache;   /* consumer's last view of head */
	/* read-mostly line */
	alignas(GF_CACHELINE) atomic_uint depth;
	atomic_uint flags;     /* RING_* */
	uint32_t mask;
	uint32_t capacity;
	gf_event *cons_evp;    /* &cons_ev, or a shared event of the consumer */
	alignas(GF_CACHELINE) gf_event cons_ev;
	alignas(GF_CACHELINE) gf_event prod_ev;
	alignas(GF_CACHELINE) void *slots[];
};

/* ---- life ---- */

int gf_ring_create(uint32_t capacity, uint32_t depth, gf_ring **out)
{
	*out = NULL;
	if (capacity == 0 || capacity > GF_RING_MAX_CAPACITY || (capacity & (capacity - 1)))
		return -EINVAL;
	size_t bytes = sizeof(gf_ring) + (size_t)capacity * sizeof(void *);
	bytes = (bytes + GF_CACHELINE - 1) / GF_CACHELINE * GF_CACHELINE;
	gf_ring *r = aligned_alloc(GF_CACHELINE, bytes);
	if (!r)
		return -ENOMEM;
	atomic_init(&r->head, 0);
	atomic_init(&r->tail, 0);
	r->tail_cache = 0;
	r->head_cache = 0;
	atomic_init(&r->depth, depth < 1 ? 1 : depth > capacity ? capacity : depth);
	atomic_init(&r->flags, 0);
	r->mask = capacity - 1;
	r->capacity = capacity;
	gf_event_init(&r->cons_ev);
	gf_event_init(&r->prod_ev);
	r->cons_evp = &r->cons_ev;
	for (uint32_t i = 0; i < capacity; i++)
		r->slots[i] = NULL;
	*out = r;
	return 0;
}

void gf_ring_destroy(gf_ring *r)
{
	free(r);
}

void gf_ring_set_consumer_event(gf_ring *r, gf_event *ev)
{
	r->cons_evp = ev ? ev : &r->cons_ev;
}

gf_event *gf_ring_consumer_event(gf_ring *r)
{
	return r->cons_evp;
}

/* ---- depth and state ---- */

uint32_t gf_ring_capacity(const gf_ring *r)
{
	return r->capacity;
}

uint32_t gf_ring_depth(const gf_ring *r)
{
	/* relaxed: the depth is advice to the producer; a stale value only
	 * delays the effect of a change by one push */
	return gf_load_relaxed_u32(&r->depth);
}

void gf_ring_set_depth(gf_ring *r, uint32_t depth)
{
	if (depth < 1)
		depth = 1;
	if (depth > r->capacity)
		depth = r->capacity;
	uint32_t old = gf_load_relaxed_u32(&r->depth);
	/* relaxed: see gf_ring_depth; a producer asleep on a full ring is
	 * woken through prod_ev, whose notify fences this store first */
	gf_store_relaxed_u32(&r->depth, depth);
	if (depth > old)
		gf_event_notify(&r->prod_ev);
}

uint32_t gf_ring_count(const gf_ring *r)
{
	/* acquire both: a snapshot for statistics and tests */
	uint32_t t = gf_load_acquire_u32(&r->tail);
	uint32_t h = gf_load_acquire_u32(&r->head);
	return h - t;
}

static uint32_t ring_flags(const gf_ring *r)
{
	/* acquire: pairs with the release in gf_or_release_u32, so a consumer
	 * that sees RING_CLOSED also sees every item pushed before the close */
	return gf_load_acquire_u32(&r->flags);
}

int gf_ring_is_closed(const gf_ring *r)
{
	return !!(ring_flags(r) & RING_CLOSED);
}

int gf_ring_is_detached(const gf_ring *r)
{
	return !!(ring_flags(r) & RING_DETACHED);
}

int gf_ring_is_stopped(const gf_ring *r)
{
	return !!(ring_flags(r) & RING_STOPPED);
}

void gf_ring_close(gf_ring *r)
{
	gf_or_release_u32(&r->flags, RING_CLOSED);
	gf_event_notify(r->cons_evp);
}

void gf_ring_detach(gf_ring *r)
{
	gf_or_release_u32(&r->flags, RING_DETACHED);
	gf_event_notify(&r->prod_ev);
}

void gf_ring_stop(gf_ring *r)
{
	gf_or_release_u32(&r->flags, RING_STOPPED);
	gf_event_wake(r->cons_evp);
	gf_event_wake(&r->prod_ev);
}

/* ---- producer ---- */

int gf_ring_try_push(gf_ring *r, void *p)
{
	/* relaxed: flags only need to be seen eventually; a push racing with a
	 * detach lands in a ring its owner drains at teardown */
	if (gf_load_relaxed_u32(&r->flags) & (RING_DETACHED | RING_STOPPED))
		return GF_ESTOP;
	/* relaxed: head is only written by this thread */
	uint32_t h = gf_load_relaxed_u32(&r->head);
	uint32_t depth = gf_ring_depth(r);
	if (h - r->tail_cache >= depth) {
		/* acquire: the consumer has finished reading the slots it
		 * released before publishing tail, so we may overwrite them */
		r->tail_cache = gf_load_acquire_u32(&r->tail);
		if (h - r->tail_cache >= depth)
			return -EAGAIN;
	}
	r->slots[h & r->mask] = p;
	/* release: the slot write above becomes visible with the new head */
	gf_store_release_u32(&r->head, h + 1);
	gf_event_notify(r->cons_evp);
	return 0;
}

static int poll_push(gf_ring *r, void **p)
{
	return gf_ring_try_push(r, *p);
}

int gf_ring_push(gf_ring *r, void *p)
{
	int rc = gf_ring_try_push(r, p);
	if (rc != -EAGAIN)
		return rc;
	rc = spin(poll_push, r, &p);
	if (rc != -EAGAIN)
		return rc;
	for (;;) {
		uint32_t key = gf_event_prepare(&r->prod_ev);
		if ((rc = gf_ring_try_push(r, p)) != -EAGAIN) {
			gf_event_cancel(&r->prod_ev);
			return rc;
		}
		gf_event_wait(&r->prod_ev, key, -1);
	}
}

/* ---- consumer ---- */

int gf_ring_try_pop(gf_ring *r, void **p)
{
	uint32_t flags = gf_load_relaxed_u32(&r->flags);
	if (flags & RING_STOPPED)
		return GF_ESTOP;
	/* relaxed: tail is only written by this thread */
	uint32_t t = gf_load_relaxed_u32(&r->tail);
	if (t == r->head_cache) {
		/* acquire: pairs with the producer's release of head, so the
		 * slot contents are visible */
		r->head_cache = gf_load_acquire_u32(&r->head);
		if (t == r->head_cache) {
			if (!(ring_flags(r) & RING_CLOSED))
				return -EAGAIN;
			/* closed: items pushed before the close are visible now
			 * (acquire of flags), look once more */
			r->head_cache = gf_load_acquire_u32(&r->head);
			if (t == r->head_cache)
				return GF_EEOF;
		}
	}
	*p = r->slots[t & r->mask];
	/* release: we are done reading the slot before the producer may
	 * reuse it */
	gf_store_release_u32(&r->tail, t + 1);
	gf_event_notify(&r->prod_ev);
	return 0;
}

int gf_ring_drain_one(gf_ring *r, void **p)
{
	uint32_t t = gf_load_relaxed_u32(&r->tail);
	/* acquire: as in gf_ring_try_pop */
	r->head_cache = gf_load_acquire_u32(&r->head);
	if (t == r->head_cache)
		return -EAGAIN;
	*p = r->slots[t & r->mask];
	gf_store_release_u32(&r->tail, t + 1);
	gf_event_notify(&r->prod_ev);
	return 0;
}

int gf_ring_pop(gf_ring *r, void **p)
{
	int rc = gf_ring_try_pop(r, p);
	if (rc != -EAGAIN)
		return rc;
	rc = spin(gf_ring_try_pop, r, p);
	if (rc != -EAGAIN)
		return rc;
	gf_event *ev = r->cons_evp;
	for (;;) {
		uint32_t key = gf_event_prepare(ev);
		if ((rc = gf_ring_try_pop(r, p)) != -EAGAIN) {
			gf_event_cancel(ev);
			return rc;
		}
		gf_event_wait(ev, key, -1);
	}
}
