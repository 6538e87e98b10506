/* ganflow rings: the bounded lock-free queue under every graph edge.
 *
 * A gf_ring is a single-producer single-consumer queue of pointers (the
 * graph passes gf_msg pointers through it). Its capacity is a power of two
 * fixed at creation; its *active depth* (1 <= depth <= capacity) is how many
 * items the producer may have queued at once, and may be changed at any
 * time from any thread (the depth controller of <ganflow/depth.h> moves it).
 * Head and tail live on their own cache lines and each side caches the
 * other's index, so in steady state a push or pop touches no line the other
 * side writes.
 *
 * Blocking calls poll briefly (GANFLOW_SPIN_US, default 5 us), yield, then
 * sleep on a futex. When nobody sleeps, looking for a sleeper to wake costs
 * a push or pop one load: the thread going to sleep pays for the memory
 * barrier both sides need, with membarrier(2) (full fences on both sides
 * where membarrier is unavailable, or with GANFLOW_MEMBARRIER=0). Every
 * blocking call has a stop path:
 *   - gf_ring_close()  (producer: no more items) makes pops return GF_EEOF
 *     once the ring is empty;
 *   - gf_ring_detach() (consumer: gone) makes pushes return GF_ESTOP;
 *   - gf_ring_stop()   (graph torn down) makes both sides return GF_ESTOP
 *     at once, even with items queued.
 *
 * Threads: exactly one thread pushes and one thread pops at a time; the
 * other calls (depth, count, close, detach, stop) are safe from any thread.
 * The ring never owns the pointers it carries: items left in a ring when it
 * is destroyed are the caller's to drain first (gf_ring_try_pop).
 */
#ifndef GANFLOW_RING_H
#define GANFLOW_RING_H

#include <stdint.h>

#include <ganflow/err.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gf_ring gf_ring;

#define GF_RING_MAX_CAPACITY (1u << 24)

/* Creates a ring of `capacity` slots (a power of two, 1 .. GF_RING_MAX_CAPACITY)
 * whose active depth starts at `depth` (clamped to 1 .. capacity).
 * Returns 0 with *out owned by the caller (gf_ring_destroy), -EINVAL or
 * -ENOMEM. */
int gf_ring_create(uint32_t capacity, uint32_t depth, gf_ring **out);

/* Frees the ring. No thread may be inside a call on it. */
void gf_ring_destroy(gf_ring *r);

uint32_t gf_ring_capacity(const gf_ring *r);

/* Active depth now. */
uint32_t gf_ring_depth(const gf_ring *r);

/* Sets the active depth (clamped to 1 .. capacity). Raising it wakes a
 * producer waiting for room; lowering it never drops items: the producer
 * simply waits until the consumer has brought the count under the new
 * depth. Any thread. */
void gf_ring_set_depth(gf_ring *r, uint32_t depth);

/* Items queued now (a snapshot; exact only from the producer or consumer
 * thread while the other side is idle). */
uint32_t gf_ring_count(const gf_ring *r);

/* ---- producer side ---- */

/* Queues p without blocking. Returns 0, -EAGAIN when the ring holds
 * `depth` items, or GF_ESTOP when the ring was stopped or its consumer
 * detached (p is not queued: the caller still owns it). */
int gf_ring_try_push(gf_ring *r, void *p);

/* Queues p, waiting while the ring is at its active depth. Returns 0 or
 * GF_ESTOP (stopped or consumer detached; the caller still owns p). */
int gf_ring_push(gf_ring *r, void *p);

/* Producer is done: once the queued items are popped, pops return GF_EEOF.
 * Pushing after close is a bug. Any thread; idempotent. */
void gf_ring_close(gf_ring *r);

/* ---- consumer side ---- */

/* Takes the oldest item without blocking. Returns 0 with *p set, -EAGAIN
 * when empty, GF_EEOF when empty and closed, GF_ESTOP when stopped (even if
 * items are queued). */
int gf_ring_try_pop(gf_ring *r, void **p);

/* Takes the oldest item, waiting while the ring is empty. Returns 0 with
 * *p set, GF_EEOF (closed and drained) or GF_ESTOP (stopped). */
int gf_ring_pop(gf_ring *r, void **p);

/* Consumer is gone: pushes return GF_ESTOP from now on (a producer blocked
 * on a full ring wakes up). Queued items stay for the owner to drain.
 * Any thread; idempotent. */
void gf_ring_detach(gf_ring *r);

/* ---- both ---- */

/* Hard stop: every blocked or later push and pop returns GF_ESTOP promptly.
 * Any thread (not a signal handler); idempotent. */
void gf_ring_stop(gf_ring *r);

/* 1 once gf_ring_close / gf_ring_detach / gf_ring_stop was called. */
int gf_ring_is_closed(const gf_ring *r);
int gf_ring_is_detached(const gf_ring *r);
int gf_ring_is_stopped(const gf_ring *r);

#ifdef __cplusplus
}
#endif
#endif
