/* ganflow adaptive worker counts: how many workers a GF_STAGE_WORKERS stage
 * run with workers = "auto" uses.
 *
 * A stage declared GF_STAGE_WORKERS (decode, augmentation) may run as
 * several instances; the upstream stage deals messages to them and the
 * downstream one merges their outputs back in order (<ganflow/stage.h>).
 * With workers = "auto" the graph creates max_workers instances (default:
 * the cores this process may use, gf_workers_cores) and deals to the first
 * n of them only; the others park on their empty input ring (a futex
 * sleep, woken by the end of the data or a stop like any waiting stage).
 * A gf_workers controller moves n between 1 and the maximum from what the
 * graph's monitor observes, window by window, as the depth controller
 * (<ganflow/depth.h>) moves ring depths from what each edge sees.
 *
 * What it observes over a window of t seconds (gf_workers_obs):
 *   busy     worker-seconds the stage's instances spent neither waiting for
 *            input nor waiting to push (a full output ring, no free
 *            envelope): the work itself, active and draining workers alike;
 *   in_wait  worker-seconds the n active workers waited for input;
 *   starved  seconds the stage's consumer waited on the stage's output
 *            (found its ring empty); the most starved consumer when the
 *            output feeds several;
 *   items    messages the stage's instances took in;
 *   cpu      CPU seconds the stage's threads used (their thread CPU clocks);
 *   idle     cores this process left idle: usable cores minus its CPU
 *            seconds per second (CLOCK_PROCESS_CPUTIME_ID over the window).
 * From these, the workers the consumer needs: busy / (t - starved), the
 * work per second of the consumer's own (non-waiting) time.
 *
 * The rule (gf_workers_observe, once per window):
 *   grow    when the consumer starved at least 5% of the window, needed
 *           > 1.05 n, the active workers waited for input less than 25% of
 *           their time (a slow upstream is not helped by more workers),
 *           at least half a core is idle and n < max:
 *               n <- min(max, n + max(1, round(idle / share)), ceil(1.1 needed))
 *           where share = cpu / busy is the cores a working worker keeps
 *           busy (1 for a decoder, near 0 for a worker that mostly waits on
 *           something else): to the estimate at once where the idle cores
 *           can run the new workers, at least one more;
 *   shrink  after 2 windows in a row in which the consumer starved less
 *           than 2% of the time and needed <= 0.8 (n - 1) (the output rings
 *           stay full, or the workers wait for input: one worker fewer
 *           would still keep up with 20% to spare): n <- n - 1;
 *   the window after a change is not judged (the new worker's rings fill),
 *   and neither is a window in which no item moved.
 * Between the two thresholds the count stays: a stage that needs 1.5
 * workers runs 2 and does not oscillate.
 *
 * Threads: gf_workers_observe, _start and _finish from one thread (the
 * graph's monitor); gf_workers_count and gf_workers_stat from any thread
 * (relaxed snapshots).
 */
#ifndef GANFLOW_WORKERS_H
#define GANFLOW_WORKERS_H

#include <stdint.h>

#include <ganflow/stage.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Seconds per observation window. */
#define GF_WORKERS_WINDOW 0.25

typedef struct gf_workers gf_workers;

typedef struct gf_workers_opts {
	int max;   /* most workers (>= 1) */
	int start; /* workers at the start (1 .. max; 0 = 1) */
} gf_workers_opts;

typedef struct gf_workers_obs {
	double t;        /* window length, seconds */
	double busy;     /* worker-seconds of work */
	double in_wait;  /* worker-seconds the active workers waited for input */
	double starved;  /* seconds the consumer waited on the stage's output */
	double idle;     /* cores left idle */
	double cpu;      /* CPU seconds of the stage's threads */
	uint64_t items;  /* messages taken in */
} gf_workers_obs;

/* Creates a controller. Returns 0, -EINVAL (max < 1, start outside
 * 1 .. max) or -ENOMEM. */
int gf_workers_create(const gf_workers_opts *opts, gf_workers **out);

void gf_workers_destroy(gf_workers *w);

/* Starts / stops the clock of the time-weighted mean (gf_now() seconds). */
void gf_workers_start(gf_workers *w, double now);
void gf_workers_finish(gf_workers *w, double now);

/* One window's observations at `now`; applies the rule above and returns
 * the worker count for the next window. */
int gf_workers_observe(gf_workers *w, const gf_workers_obs *obs, double now);

/* The count now. */
int gf_workers_count(const gf_workers *w);

/* Fills workers, min, max, limit, mean, changes, needed and adaptive (1)
 * of *out; stage is left alone. */
void gf_workers_stat(const gf_workers *w, double now, gf_worker_stat *out);

/* The cores this process may use: its CPU affinity mask, lowered to a
 * cgroup v2 CPU quota (cpu.max) when one is set; at least 1. */
int gf_workers_cores(void);

#ifdef __cplusplus
}
#endif
#endif
