/* Internal: how the graph hooks its own wait objects into rings.
 *
 * A stage input fed by several rings (a GF_PORT_MULTI input, or the merge
 * of a multi-worker stage's outputs) must sleep until *any* of them has an
 * item, so those rings notify one shared consumer event instead of their
 * own. */
#ifndef GF_RING_INTERNAL_H
#define GF_RING_INTERNAL_H

#include <ganflow/ring.h>

#include "../base/atomics.h"

/* Makes the ring notify ev (instead of its own event) whenever an item is
 * pushed, or it is closed or stopped. Call before either side runs; ev must
 * outlive the ring's use. */
void gf_ring_set_consumer_event(gf_ring *r, gf_event *ev);

/* The event a consumer sleeps on for this ring (its own, or the one set
 * above). */
gf_event *gf_ring_consumer_event(gf_ring *r);

/* Takes the oldest item whatever the ring's flags (closed, detached,
 * stopped): for draining leftovers once no thread uses the ring, and for a
 * consumer draining its own input after detaching it. Returns 0 with *p,
 * or -EAGAIN when empty. Consumer side only. */
int gf_ring_drain_one(gf_ring *r, void **p);

/* Seconds a blocking call polls before it sleeps (GANFLOW_SPIN_US, default
 * 5 us); the graph's own waits (multi-edge inputs, envelope pools) use the
 * same budget. */
double gf_spin_budget(void);

#endif
