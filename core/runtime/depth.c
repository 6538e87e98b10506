/* Jitter observer and adaptive depth controller of one edge.
 * See <ganflow/depth.h> for the rule.
 *
 * The producer's figures live on its own cache line and are written only by
 * the producer thread, the consumer's (and the controller state) only by
 * the consumer thread. Figures the other side or the monitor reads are
 * relaxed atomics: they are statistics, a slightly stale value only shifts
 * a decision by one item.
 */
#include <errno.h>
#include <math.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/depth.h>
#include <ganflow/log.h>

#include "../base/atomics.h"

#define ALPHA (1.0 / 64.0)
#define WARMUP 16
#define JITTER_RATIO 0.5   /* raise only when σa > JITTER_RATIO * s */
#define KEEPUP_RATIO 1.1   /* ... and a < KEEPUP_RATIO * s */
#define QUIET_MIN 32

struct gf_depth {
	gf_ring *ring;
	uint32_t capacity;
	uint32_t min;
	int fixed;

	/* producer's line */
	alignas(GF_CACHELINE) atomic_uint_least64_t ia_mean;  /* f64 bits */
	atomic_uint_least64_t ia_var;                        /* f64 bits */
	atomic_uint_least64_t pushes;
	atomic_uint_least64_t full_waits;

	/* consumer's line */
	alignas(GF_CACHELINE) atomic_uint_least64_t sv_mean;  /* f64 bits */
	atomic_uint_least64_t items;
	atomic_uint_least64_t stalls;
	uint64_t seen_full;        /* full_waits at the previous pop */
	uint32_t depth;            /* current active depth (consumer's copy) */
	uint32_t since_change;     /* pops since the last depth change */
	uint32_t quiet;            /* pops since the last stall or change */

	/* time-weighted depth, written by the consumer (and start/finish) */
	alignas(GF_CACHELINE) atomic_uint_least64_t t0;       /* f64: clock start, 0 = not started */
	atomic_uint_least64_t t_end;                         /* f64: clock stop, 0 = running */
	atomic_uint_least64_t t_change;                      /* f64: last change */
	atomic_uint_least64_t area;                          /* f64: Σ depth · dt up to t_change */
	atomic_uint cur;                                     /* depth since t_change */
	atomic_uint dmin, dmax;
};

/* ---- life ---- */

int gf_depth_create(gf_ring *r, const gf_depth_opts *opts, gf_depth **out)
{
	*out = NULL;
	uint32_t cap = gf_ring_capacity(r);
	uint32_t min = opts && opts->min ? opts->min : GF_DEPTH_MIN_DEFAULT;
	uint32_t fixed = opts ? opts->fixed : 0;
	if (fixed > cap || (!fixed && min > cap && opts && opts->min))
		return -EINVAL;
	if (min > cap)
		min = cap;
	gf_depth *d = aligned_alloc(GF_CACHELINE, (sizeof(*d) + GF_CACHELINE - 1) / GF_CACHELINE * GF_CACHELINE);
	if (!d)
		return -ENOMEM;
	memset(d, 0, sizeof(*d));
	d->ring = r;
	d->capacity = cap;
	d->min = min;
	d->fixed = fixed != 0;
	d->depth = fixed ? fixed : min;
	gf_ring_set_depth(r, d->depth);
	atomic_init(&d->cur, d->depth);
	atomic_init(&d->dmin, d->depth);
	atomic_init(&d->dmax, d->depth);
	*out = d;
	return 0;
}

void gf_depth_destroy(gf_depth *d)
{
	free(d);
}

void gf_depth_start(gf_depth *d, double now)
{
	gf_store_relaxed_f64(&d->t0, now);
	gf_store_relaxed_f64(&d->t_change, now);
	gf_store_relaxed_f64(&d->area, 0.0);
	gf_store_relaxed_f64(&d->t_end, 0.0);
}

void gf_depth_finish(gf_depth *d, double now)
{
	if (gf_load_relaxed_f64(&d->t0) == 0.0)
		return;
	gf_store_relaxed_f64(&d->t_end, now);
}

/* ---- observing ---- */

/* One EWMA step of mean and variance (West's incremental form) for sample
 * number n (0-based). The weight is max(α, 1/(n+1)): the first 1/α samples
 * give their plain running mean, so early figures are not biased towards
 * the first sample. */
static void ewma(atomic_uint_least64_t *mean, atomic_uint_least64_t *var, uint64_t n, double x)
{
	double m = gf_load_relaxed_f64(mean);
	if (n == 0) {
		gf_store_relaxed_f64(mean, x);
		if (var)
			gf_store_relaxed_f64(var, 0.0);
		return;
	}
	double alpha = 1.0 / (double)(n + 1);
	if (alpha < ALPHA)
		alpha = ALPHA;
	double diff = x - m;
	double incr = alpha * diff;
	gf_store_relaxed_f64(mean, m + incr);
	if (var)
		gf_store_relaxed_f64(var, (1.0 - alpha) * (gf_load_relaxed_f64(var) + diff * incr));
}

void gf_depth_on_push(gf_depth *d, double produce_s, int waited)
{
	uint64_t n = gf_load_relaxed_u64(&d->pushes);
	/* the first push has no predecessor: its "inter-arrival" is start-up */
	if (n > 0)
		ewma(&d->ia_mean, &d->ia_var, n - 1, produce_s);
	gf_store_relaxed_u64(&d->pushes, n + 1);
	if (waited)
		gf_add_relaxed_u64(&d->full_waits, 1);
}

static void set_depth(gf_depth *d, uint32_t depth, double now)
{
	if (depth == d->depth)
		return;
	double t0 = gf_load_relaxed_f64(&d->t0);
	if (t0 == 0.0) {
		gf_depth_start(d, now);
	} else {
		double tc = gf_load_relaxed_f64(&d->t_change);
		double area = gf_load_relaxed_f64(&d->area) + (double)d->depth * (now - tc);
		gf_store_relaxed_f64(&d->area, area);
		gf_store_relaxed_f64(&d->t_change, now);
	}
	d->depth = depth;
	gf_store_relaxed_u32(&d->cur, depth);
	if (depth < gf_load_relaxed_u32(&d->dmin))
		gf_store_relaxed_u32(&d->dmin, depth);
	if (depth > gf_load_relaxed_u32(&d->dmax))
		gf_store_relaxed_u32(&d->dmax, depth);
	gf_ring_set_depth(d->ring, depth);
	d->since_change = 0;
	d->quiet = 0;
}

void gf_depth_on_pop(gf_depth *d, double service_s, int stalled, double wait_s, double now)
{
	uint64_t n = gf_load_relaxed_u64(&d->items);
	if (n == 0 && gf_load_relaxed_f64(&d->t0) == 0.0)
		gf_depth_start(d, now);
	if (n > 0)
		ewma(&d->sv_mean, NULL, n - 1, service_s);
	gf_store_relaxed_u64(&d->items, n + 1);
	if (stalled)
		gf_add_relaxed_u64(&d->stalls, 1);
	if (d->fixed)
		return;
	d->since_change++;
	d->quiet = stalled ? 0 : d->quiet + 1;
	/* relaxed: a statistic of the producer; one pop late is fine */
	uint64_t fw = gf_load_relaxed_u64(&d->full_waits);
	int new_full = fw > d->seen_full;
	d->seen_full = fw;

	double s = gf_load_relaxed_f64(&d->sv_mean);
	int warm = n >= WARMUP && gf_load_relaxed_u64(&d->pushes) > WARMUP && s > 0.0;
	if (warm && d->depth < d->capacity) {
		double a = gf_load_relaxed_f64(&d->ia_mean);
		double sd = sqrt(gf_load_relaxed_f64(&d->ia_var));
		/* the consumer waited for a producer that keeps up on average
		 * but arrives in bursts: cover the gap it just waited out */
		if (stalled && sd > JITTER_RATIO * s && a < KEEPUP_RATIO * s) {
			double need = ceil(wait_s / s - 1e-9);
			uint32_t add = need < 1.0 ? 1u : need > (double)d->capacity ? d->capacity : (uint32_t)need;
			/* at least double: the gap just waited out is a sample, the
			 * next one may be longer, and the slow decay then finds the
			 * depth the bursts need from above instead of stalling at
			 * every burst on the way up */
			if (add < d->depth)
				add = d->depth;
			uint32_t nd = d->depth + add;
			set_depth(d, nd > d->capacity ? d->capacity : nd, now);
			return;
		}
		/* the producer found the ring full although the consumer is
		 * clearly faster: the consumer was busy elsewhere (the merge of
		 * several workers, a multi-edge input), so a deeper ring lets the
		 * producer run on instead of waiting */
		if (new_full && s * KEEPUP_RATIO < a && d->since_change >= d->depth) {
			uint32_t nd = 2 * d->depth;
			set_depth(d, nd > d->capacity ? d->capacity : nd, now);
			return;
		}
	}
	uint32_t window = 2 * d->depth > QUIET_MIN ? 2 * d->depth : QUIET_MIN;
	if (!stalled && d->quiet >= window && d->depth > d->min)
		set_depth(d, d->depth - 1, now);
	else if (d->quiet >= window)
		d->quiet = 0;
}

/* ---- reading ---- */

void gf_depth_stat(const gf_depth *d, double now, gf_edge_stat *out)
{
	out->capacity = d->capacity;
	out->depth = gf_load_relaxed_u32(&d->cur);
	out->depth_min = gf_load_relaxed_u32(&d->dmin);
	out->depth_max = gf_load_relaxed_u32(&d->dmax);
	out->items = gf_load_relaxed_u64(&d->items);
	out->stalls = gf_load_relaxed_u64(&d->stalls);
	out->full_waits = gf_load_relaxed_u64(&d->full_waits);
	out->fixed = d->fixed;
	double t0 = gf_load_relaxed_f64(&d->t0);
	double te = gf_load_relaxed_f64(&d->t_end);
	if (te > 0.0)
		now = te;
	double tc = gf_load_relaxed_f64(&d->t_change);
	if (t0 == 0.0 || now <= t0) {
		out->depth_mean = (double)out->depth;
		return;
	}
	double area = gf_load_relaxed_f64(&d->area) + (double)out->depth * (now > tc ? now - tc : 0.0);
	out->depth_mean = area / (now - t0);
}

double gf_depth_service_mean(const gf_depth *d)
{
	return gf_load_relaxed_f64(&d->sv_mean);
}

double gf_depth_interarrival_mean(const gf_depth *d)
{
	return gf_load_relaxed_f64(&d->ia_mean);
}
