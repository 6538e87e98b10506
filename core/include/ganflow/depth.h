/* ganflow adaptive depth: the jitter observer and depth controller of an edge.
 *
 * Every graph edge is a ring (<ganflow/ring.h>) with a fixed capacity and an
 * active depth d the producer may fill. A gf_depth watches the edge's
 * traffic and moves d between a minimum and the capacity, ParaGAN's
 * congestion-aware prefetch: deep where the producer is bursty, shallow
 * where it is steady, so memory in flight follows the network's weather.
 *
 * What it observes (the graph reports every push and pop):
 *   a, σa  EWMA mean and standard deviation of the inter-arrival time on
 *          this edge: from the end of one push into it to the start of the
 *          next, i.e. the producer's own time plus any wait on its other
 *          edges, not counting waits for room in this ring;
 *   s      EWMA mean of the consumer's service time: from the end of one
 *          pop on its input port to the start of the next;
 *   stalls pops that found the ring empty and had to wait (for w seconds);
 *   full   pushes that found the ring at its active depth.
 * EWMA weight α = 1/64 for all three (the plain running mean for the first
 * 64 samples, so early figures are not biased).
 *
 * The rule (applied by the consumer after each pop):
 *   raise  when a pop stalled, both sides have at least 16 samples, the
 *          producer's jitter is high relative to the service time
 *          (σa > s / 2) and the producer keeps up on average (a < 1.1 s, so
 *          a deeper ring can hide its gaps; a producer that is simply slower
 *          is not helped by depth):
 *              d ← min(capacity, max(2d, d + ⌈w / s⌉))
 *          i.e. at least double, and add at least as many slots as the
 *          consumer would have needed to cover the gap it just waited out
 *          (raise generously, lower slowly: the decay then approaches the
 *          depth the bursts need from above);
 *   raise  also when the producer found the ring full since the previous
 *          pop although the consumer is clearly faster (s · 1.1 < a), at most
 *          once per d pops: the consumer was busy with other edges (the
 *          ordered merge of several workers, a multi-edge input), and a
 *          deeper ring lets the producer run on:
 *              d ← min(capacity, 2d)
 *   lower  after a quiet window of max(32, 2d) pops without a stall since
 *          the last change: d ← max(min, d − 1).
 * A fixed edge (gf.connect(..., { depth = n })) never changes.
 * Adaptive edges start at the minimum (default 2).
 *
 * Threads: gf_depth_on_push only from the producer thread, gf_depth_on_pop
 * only from the consumer thread; gf_depth_stat and the getters from any
 * thread (relaxed snapshots).
 */
#ifndef GANFLOW_DEPTH_H
#define GANFLOW_DEPTH_H

#include <stdint.h>

#include <ganflow/ring.h>
#include <ganflow/stage.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GF_DEPTH_CAPACITY_DEFAULT 64u
#define GF_DEPTH_MIN_DEFAULT 2u

typedef struct gf_depth gf_depth;

typedef struct gf_depth_opts {
	uint32_t min;   /* lowest adaptive depth; 0 = GF_DEPTH_MIN_DEFAULT */
	uint32_t fixed; /* 0: adaptive; otherwise the edge's depth, never changed */
} gf_depth_opts;

/* Creates the controller of ring r (which it does not own) and sets the
 * ring's active depth to its starting value (opts->fixed, or the minimum).
 * opts may be NULL (adaptive, default minimum). Returns 0, -EINVAL (fixed
 * or min above the ring's capacity) or -ENOMEM. */
int gf_depth_create(gf_ring *r, const gf_depth_opts *opts, gf_depth **out);

void gf_depth_destroy(gf_depth *d);

/* Starts / stops the clock of the time-weighted depth statistics
 * (gf_now() seconds). Without start, the clock starts at the first pop. */
void gf_depth_start(gf_depth *d, double now);
void gf_depth_finish(gf_depth *d, double now);

/* Producer thread: a push happened. produce_s: seconds since the previous
 * push returned (0 for the first); waited: 1 when the push found the ring
 * at its active depth and had to wait. */
void gf_depth_on_push(gf_depth *d, double produce_s, int waited);

/* Consumer thread: a pop returned an item at `now`. service_s: seconds
 * since the previous pop returned (0 for the first); stalled: 1 when it
 * found the ring empty; wait_s: how long it waited. Runs the controller. */
void gf_depth_on_pop(gf_depth *d, double service_s, int stalled, double wait_s, double now);

/* Fills the numeric fields of *out (capacity, depth, depth_min/max/mean,
 * items, stalls, full_waits, fixed); from/to are left alone. */
void gf_depth_stat(const gf_depth *d, double now, gf_edge_stat *out);

/* EWMA figures (seconds): consumer service mean, producer inter-arrival
 * mean. */
double gf_depth_service_mean(const gf_depth *d);
double gf_depth_interarrival_mean(const gf_depth *d);

#ifdef __cplusplus
}
#endif
#endif
