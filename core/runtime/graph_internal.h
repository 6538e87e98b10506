/* Internal: the graph's own structures, shared by the files of the graph
 * runtime:
 *
 *	graph.c        building and validating (gf_graph_add, gf_graph_connect, ...)
 *	graph_stop.c   stop reasons, the graceful and the hard stop, failures, requests
 *	graph_agree.c  the stop every rank agrees on (the runtime's side)
 *	graph_workers.c adaptive worker counts: the monitor's observations and decisions
 *	graph_stats.c  edge statistics, the stall limits, the progress line, the end-of-run table
 *	stage_api.c    what stages call (<ganflow/stage.h>: gf_pop, gf_push, gf_fail, ...)
 *	graph_run.c    setting up the run, one thread per instance, the monitor, draining
 *
 * in that order from the bottom: each calls only the ones above it in this
 * list (graph_run.c, the top, calls them all).
 *
 * Vocabulary: a *node* is a stage as the pipeline declared it; it has one
 * *instance* (gf_ctx) per worker. A *link* is one gf_graph_connect; it
 * becomes one *edge* (a ring with its depth controller) per worker of the
 * side that has several workers: an upstream stage deals messages
 * round-robin over the rings of a multi-worker stage, and the consumer of
 * a multi-worker stage pops its rings in the same round-robin order, so
 * order is kept without any extra thread. Both sides look up which worker
 * holds message s in the node's deal table (deal.h), which is what lets a
 * workers = "auto" stage change its count mid-run without losing order.
 *
 * Stopping: `stop` (graceful: gf_should_stop) and `hard` (every wait
 * returns GF_ESTOP) only ever go from 0 to 1. External requests (signal
 * handlers) only set bits in `req` and wake the monitor, the calling thread
 * of gf_graph_run, which turns them into stops.
 */
#ifndef GF_GRAPH_INTERNAL_H
#define GF_GRAPH_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include <ganflow/depth.h>
#include <ganflow/graph.h>
#include <ganflow/msg.h>
#include <ganflow/ring.h>
#include <ganflow/stage.h>

#include <ganflow/workers.h>

#include "../base/atomics.h"
#include "deal.h"

#define NAME_MAX_LEN 64
#define MAX_VALUES 16

enum { REQ_GRACEFUL = 1, REQ_HARD = 2 };
enum { IN_NONE = 0, IN_SINGLE, IN_MERGE, IN_ANY };
enum { WAIT_NONE = 0, WAIT_POP, WAIT_PUSH, WAIT_GET };

struct link;

struct edge {
	gf_ring *ring;
	gf_depth *depth;
	struct link *link;
	gf_ctx *prod, *cons;
	double last_push_end; /* producer's: when its previous push here returned */
	char from[96], to[96];
};

struct link {
	int from, out, to, in;
	gf_edge_opts opts;
	int nedges;
	struct edge **edges; /* (nedges) by worker index of the multi-worker side */
};

struct in_port {
	int nlinks;
	int nedges;
	struct edge **edges;
	int mode;        /* IN_* */
	int rr;          /* next edge to look at first (IN_ANY) */
	gf_deal *deal;   /* IN_MERGE: the producing node's table */
	gf_deal_cursor cur;
	int64_t merged;  /* IN_MERGE: messages popped so far */
	char *eof;       /* (nedges) edge finished, IN_ANY */
	gf_event ev;     /* shared consumer event of IN_ANY */
	double last_end; /* when the previous pop returned */
	/* the owner writes, the monitor reads (graph_workers.c) */
	atomic_uint_least64_t wait_s; /* f64: seconds waited on this input in all */
	atomic_uint_least64_t items;  /* messages popped */
	int dev_ok;      /* gf_port_accept_device was called (create(), main thread) */
	gf_device dev;   /* the device memory it accepts */
	int dev_index;
};

struct target {       /* one link out of a port, as seen by one instance */
	int n;
	struct edge **edges; /* n > 1: edges[w] leads to worker w */
	gf_deal *deal;       /* n > 1: the consuming node's table */
	gf_deal_cursor cur;
	int64_t dealt;       /* messages dealt so far */
	int adaptive;        /* this instance moves the table to the wanted count */
};

struct out_port {
	gf_msg_pool *pool;
	gf_event pool_ev; /* an envelope came back */
	int nlinks;
	int ntargets;
	struct target *targets;
	int64_t seq;      /* next sequence number (a single instance's) */
	atomic_uint_least64_t wait_s; /* f64: seconds waited to push or for an envelope */
};

/* A node of several workers (deal table) and, with workers = "auto", its
 * controller and the monitor's view of the current window. */
struct node_workers {
	gf_deal deal;
	gf_workers *ctl;    /* NULL: the count is fixed */
	double t0, cpu0;    /* window start: gf_now(), process CPU seconds */
	double *in_wait;    /* (workers) each instance's input wait at t0 */
	double *out_wait;   /* (workers) its output wait at t0 */
	uint64_t *items;    /* (workers) its messages taken in at t0 */
	double *cpu;        /* (workers) its thread's CPU seconds at t0 */
	double *starved;    /* (noutlinks) each consumer's wait on the node at t0 */
	int noutlinks;
	int *outlinks;      /* (noutlinks) link indices out of the node */
};

struct node {
	char name[NAME_MAX_LEN];
	const gf_stage_desc *desc;
	gf_value params;
	int workers;    /* instances */
	int adaptive;   /* workers = "auto" (and more than one instance) */
	int *in_links;  /* (ninputs) links per input port */
	int *out_links; /* (noutputs) */
	gf_ctx *inst;   /* (workers) */
	struct node_workers *wk; /* workers > 1, while the graph runs */
};

struct gf_ctx {
	gf_graph *g;
	struct node *node;
	int worker;
	char name[NAME_MAX_LEN + 16];
	void *self;
	int created;
	int started;
	atomic_int done;      /* the thread finished (run, flush, close) */
	atomic_int flushing;  /* inside the stage's flush hook (relaxed: the monitor's grace clock) */
	atomic_int_least64_t step; /* last step this instance reported, -1 = none */
	atomic_int_least64_t entered; /* the step it began (gf_step_begin), -1 = it never calls it */
	atomic_int wait;      /* WAIT_* while blocked in a runtime call: what the
	                         stall watchdog reports (relaxed: a snapshot) */
	atomic_int wait_port; /* the port of that wait */
	atomic_uint_least64_t wait_t0; /* f64: when that wait began, 0 = none
	                                  (release/acquire with the port's wait_s) */
	int64_t in_seq;       /* sequence number of the message popped last: a
	                         worker's output carries its input's */
	pthread_t thread;
	atomic_int_least64_t busy_ns; /* gf_report_busy's sum (relaxed: a figure shown) */
	atomic_int busy_kind;         /* 0 none reported, 1 host, 2 device */
	int64_t busy_seen_ns;         /* the monitor's: busy_ns at its last window */
	double busy_seen_t, busy_frac;
	atomic_uint_least64_t flops;  /* f64: gf_report_flops's sum (the instance's thread writes it,
	                                 others read it; relaxed: a figure shown) */
	/* gf_report_peak's, under the graph's lock */
	int peak_set;
	double peak;                  /* FLOP/s, <= 0 unknown */
	char peak_dev[32];
	char peak_what[256];
	struct in_port *in;   /* (ninputs) */
	struct out_port *out; /* (noutputs) */
};

struct value {
	char name[32];
	double v;
};

struct gf_graph {
	struct node *nodes;
	int nnodes, capnodes;
	struct link *links;
	int nlinks, caplinks;
	struct edge **edges;
	int nedges;
	gf_ctx **inst;        /* every instance, node order */
	int ninst;

	gf_run_info info;
	char *run_dir, *backend, *resume, *pipeline;
	int ran;
	unsigned flags;
	double grace;
	double stall, stall_stop; /* watchdog limits in seconds, 0 = automatic */
	gf_graph_created_fn created; /* gf_graph_on_created's, NULL: none */
	void *created_arg;
	/* the watchdog's view, kept by the monitor thread only */
	int64_t wd_step, wd_items;
	double t_progress;        /* when the step (or items) last moved */
	double slowest;           /* longest seconds per step seen after the first */
	int stall_warned, stalled;

	atomic_int stop;      /* graceful stop in effect */
	atomic_int hard;      /* hard stop in effect */
	atomic_int req;       /* REQ_* from gf_graph_request_stop */
	atomic_int failed;
	atomic_int reason;    /* gf_stop_reason */
	atomic_int ndone;     /* instances whose thread finished */
	atomic_int_least64_t step, items;
	atomic_int_least64_t step_base; /* the step a resumed run started at (0: a new run) */
	gf_event mon_ev;

	/* the stop every rank agrees on (graph_agree.c) */
	atomic_int_least64_t target; /* step the run ends at: info.steps, lowered by an agreed stop; 0 = none */
	atomic_int held;     /* drivers block at their next gf_report_step until released */
	atomic_int released; /* the agreed step is in target */
	atomic_int agreeing; /* this rank asked the others to agree on a stop (monitor only) */
	gf_event hold_ev;
	double t_agree;      /* when this rank asked (monitor only) */

	pthread_mutex_t lock; /* err, values */
	char err[4096];
	struct value values[MAX_VALUES];
	int nvalues;

	double t_start, t_end;
	int cores;            /* the cores this process may use (gf_workers_cores) */
};

/* ---- graph.c ---- */

/* Sets the graph's error message; returns rc. Thread-safe. */
int gf_graph_seterr(gf_graph *g, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- graph_stop.c ---- */

/* 1 once the hard stop is in effect. Acquire: pairs with the release in
 * gf_graph_stop_hard; a thread that sees the flag also sees the failure
 * message recorded before it. */
static inline int gf_graph_is_hard(const gf_graph *g)
{
	return gf_load_acquire_int(&g->hard);
}

/* Records why the run ends; a weightier reason replaces a lighter one. */
void gf_graph_set_reason(gf_graph *g, gf_stop_reason r);

/* Starts the graceful stop (gf_should_stop turns 1), once. */
void gf_graph_stop_graceful(gf_graph *g);

/* Starts the hard stop: every ring stops, every waiting instance wakes. */
void gf_graph_stop_hard(gf_graph *g);

/* Records the first failure ("stage 'WHO' failed: MSG") and stops hard. */
void gf_graph_record_failure(gf_graph *g, const char *who, const char *msg);

/* ---- graph_run.c ---- */

/* Release hook of an output port's pool: wakes a producer waiting for an
 * envelope (ud is the port's pool_ev). */
void gf_graph_on_release(void *ud);

/* ---- graph_agree.c: a stop every rank of a distributed run agrees on ----
 *
 * A graceful stop that ranks decide each on its own (Ctrl-C reaches them
 * at different moments) leaves a collective half-matched: one rank starts
 * step k + 1, another has stopped at k. Instead, rank 0 collects from
 * every rank the highest step its drivers can still reach once frozen
 * (gf_graph_hold_running), takes the maximum S and sends it back
 * (gf_graph_stop_running): every rank then ends after step S exactly as a run
 * with steps = S does, and the final checkpoint is the same on all. The
 * messages are the distributed layer's (core/dist/dist.c: they travel
 * through its liveness responder, so they never wait on a stage), reached
 * through the gf_graph_peers table it registers (<ganflow/graph.h>). */

/* gf_graph_run, around the monitor: makes g the running graph that
 * gf_graph_hold_running and gf_graph_stop_running reach when the run
 * spans ranks (info.world > 1), and takes it back (under their lock: once
 * detach returns, no call of theirs is inside g). */
void gf_graph_agree_attach(gf_graph *g);
void gf_graph_agree_detach(gf_graph *g);

/* In gf_report_step and gf_step_begin, after the instance published its
 * step: blocks while the drivers are held (until gf_graph_stop_running or a
 * hard stop). */
void gf_graph_hold_wait(gf_graph *g);

/* Monitor: a graceful stop was requested on this rank of a distributed
 * run: ask the ranks for an agreed stop (returns 0), or -1 when there is
 * no world to agree through (the caller stops gracefully at once). */
int gf_graph_agree_begin(gf_graph *g, double now);

/* Monitor, every tick while agreeing: stops hard when no agreement came
 * within the grace period (a rank lost, rank 0 busy). */
void gf_graph_agree_check(gf_graph *g, double now);

/* ---- graph_workers.c: adaptive worker counts, the monitor's side ----
 *
 * Every window (GF_WORKERS_WINDOW) the monitor measures each workers =
 * "auto" node (its instances' work and waits, its consumers' waits on it,
 * the process's idle cores), hands the figures to the node's controller
 * (<ganflow/workers.h>) and tells the dealer the count it wants
 * (gf_deal_set_want). */

/* gf_graph_run, after the ports are built: the controllers and windows.
 * Returns 0 or -ENOMEM. */
int gf_graph_workers_setup(gf_graph *g);
void gf_graph_workers_start(gf_graph *g, double now);
void gf_graph_workers_tick(gf_graph *g, double now);
void gf_graph_workers_finish(gf_graph *g, double now);

/* 1 when e leads to or from a worker that never got a message (beyond
 * the most workers = "auto" used so far): left out of the edge table. */
int gf_graph_edge_unused(const gf_graph *g, const struct edge *e);

/* 1 when c is a worker parked by its stage's controller (not dealt to). */
int gf_graph_worker_parked(const gf_ctx *c);

/* The progress line's part: "  workers decode=3" for every workers =
 * "auto" stage ("" when none). */
void gf_graph_workers_text(gf_graph *g, char *buf, size_t size);

/* The end-of-run table of the stages with several workers. */
void gf_graph_print_workers(gf_graph *g);

/* ---- graph_stats.c: what the monitor shows ---- */

struct gf_progress {
	double t_last;
	int64_t items_last, step_last;
	double rate, step_rate;
	double flops_t, flops_last, flop_rate; /* the FLOP/s window (>= 1 s; flop_rate < 0 before one) */
};

/* The FLOPs the graph's instances reported (gf_report_flops), and the peak
 * FLOP/s of their devices, each device once (its largest figure): 0 when
 * none was reported or one device's is unknown. */
double gf_graph_flops(gf_graph *g);
double gf_graph_peak(gf_graph *g);

/* The live progress line: elapsed time, step, items/s, slowest edge, ETA,
 * published values. pr smooths the rates between calls (t_last = the
 * run's start before the first). */
void gf_graph_progress_text(gf_graph *g, struct gf_progress *pr, double now, char *buf, size_t size);

/* Seconds without a step after which the watchdog reports a stall (and
 * the progress line shows "stalled" instead of an ETA), and after which
 * it stops the run. */
double gf_graph_stall_limit(const gf_graph *g);
double gf_graph_stall_stop_limit(const gf_graph *g);

/* What a stall looks like now: the edges whose consumer waits on them
 * empty, the stages blocked pushing into full edges, the stages busy
 * (neither waiting nor finished). */
void gf_graph_stall_text(gf_graph *g, char *buf, size_t size);

/* The end-of-run line (reason, time, step, items, rate) and the edge table. */
void gf_graph_print_summary(gf_graph *g);

#endif
