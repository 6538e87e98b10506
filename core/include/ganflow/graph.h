/* ganflow graphs: stage instances joined by rings, run one thread each.
 *
 * This is the C face of what a Lua pipeline describes; core/dist/placement.c
 * builds a rank's graph through it for core/lua/lua.c, and tests and
 * benchmarks use it directly. The implementation: core/runtime/graph.c (building,
 * validating), core/runtime/graph_run.c (running, stopping), core/runtime/stage_api.c (what
 * stages call, <ganflow/stage.h>), core/runtime/graph_stats.c (statistics).
 *
 *	gf_graph *g;
 *	int src, sink;
 *	gf_graph_create(&g);
 *	gf_graph_add(g, "count_source", "src", params, 1, &src);
 *	gf_graph_add(g, "check_sink", "sink", NULL, 1, &sink);
 *	gf_graph_connect(g, src, "out", sink, "inp", NULL);
 *	rc = gf_graph_run(g, &info, 0);     // 0, or an error: gf_graph_error(g)
 *	gf_graph_destroy(g);
 *
 * Adding a stage loads it and checks its parameters at once; connecting
 * checks port names and message kinds at once; gf_graph_run validates the
 * whole graph (unconnected ports) before anything is created. Each check
 * fails with a message naming the stage instance, port or key.
 *
 * Running: every stage instance (one per worker) is created on the calling
 * thread, then runs on its own thread. The graph ends when every instance
 * has returned: at end of data (sources return, their outputs close, the
 * end flows downstream), after a graceful stop (step target reached,
 * gf_graph_request_stop(g, 0): gf_should_stop() turns 1, stages leave
 * their loops, flush() runs, everything drains), or after a hard stop (the
 * first stage failure, gf_graph_request_stop(g, 1), or a graceful stop that
 * did not finish within the grace period): every blocking pop, push and
 * get returns GF_ESTOP, all threads join. Then destroy() runs for every
 * instance on the calling thread.
 *
 * Back edges (cycles) are allowed when something outside the cycle feeds
 * it (d_step's real batches feed the G/D loop) or one of its stages
 * declares GF_STAGE_CYCLE_START; a cycle of stages that only feed each
 * other (or a stage wired to itself) is refused by gf_graph_validate,
 * naming its stages. A graph whose stages still wait on each other forever
 * is the pipeline's bug, but a stop (and the stall watchdog) still ends it.
 */
#ifndef GANFLOW_GRAPH_H
#define GANFLOW_GRAPH_H

#include <stdint.h>

#include <ganflow/stage.h>
#include <ganflow/value.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gf_graph gf_graph;

/* Options of one edge (gf_graph_connect); zeros mean defaults. */
typedef struct gf_edge_opts {
	uint32_t capacity;  /* ring capacity, a power of two; 0 = GF_DEPTH_CAPACITY_DEFAULT (64) */
	uint32_t depth;     /* fixed active depth (1 .. capacity); 0 = adaptive */
	uint32_t min_depth; /* lowest adaptive depth; 0 = GF_DEPTH_MIN_DEFAULT (2) */
} gf_edge_opts;

/* gf_graph_run flags. */
enum {
	GF_GRAPH_QUIET = 1u << 0 /* no progress line, no end-of-run table */
};

/* Why a run ended (gf_graph_stop_reason). */
typedef enum {
	GF_STOP_NONE = 0,   /* not run yet, or still running */
	GF_STOP_EOF,        /* every stage returned on its own (end of data) */
	GF_STOP_STEPS,      /* the step target was reached */
	GF_STOP_REQUEST,    /* gf_graph_request_stop(g, 0) (SIGINT, SIGTERM) */
	GF_STOP_HARD,       /* gf_graph_request_stop(g, 1) (second SIGINT) */
	GF_STOP_FAILURE,    /* a stage failed */
	GF_STOP_GRACE,      /* a graceful stop did not finish in time */
	GF_STOP_STALL       /* no step completed within the stall limit */
} gf_stop_reason;

/* Creates an empty graph. Returns 0 with *out owned by the caller
 * (gf_graph_destroy), or -ENOMEM. */
int gf_graph_create(gf_graph **out);

/* Destroys the graph (after gf_graph_run returned, or without running it). */
void gf_graph_destroy(gf_graph *g);

/* The `workers` argument of gf_graph_add: n >= 1 runs n workers (more
 * than 1 needs a GF_STAGE_WORKERS stage); GF_WORKERS_AUTO lets the count
 * adapt between 1 and the cores this process may use (gf_workers_cores,
 * at most GF_MAX_WORKERS), GF_WORKERS_AUTO_MAX(m) between 1 and m
 * (<ganflow/workers.h>; Lua: workers = "auto", max_workers = m). */
#define GF_MAX_WORKERS 64
#define GF_WORKERS_AUTO 0
#define GF_WORKERS_AUTO_MAX(m) (-(m))

/* Adds a stage instance of the stage `stage` (loaded with gf_stage_load).
 * name: the instance name, unique in the graph (NULL: the stage name, then
 * "name2", "name3" ...). params: a GF_VMAP (or NULL) checked with
 * gf_params_check; the graph keeps its own checked copy. workers: see
 * GF_WORKERS_AUTO above; an adaptive stage has as many instances as its
 * maximum and a count that changes while it runs. *node (may be NULL)
 * receives the instance's index for gf_graph_connect.
 * Returns 0, or GF_ENOTFOUND / GF_EABI / -ENOEXEC (loading), GF_EPARAM
 * (parameters, workers), GF_EGRAPH (duplicate name, graph already run),
 * with the message in gf_graph_error(g). */
int gf_graph_add(gf_graph *g, const char *stage, const char *name, const gf_value *params, int workers,
                 int *node);

/* As gf_graph_add with a descriptor in hand (a stage compiled into a test
 * program). desc must stay valid for the life of the graph; it is checked
 * with gf_stage_check_desc. */
int gf_graph_add_desc(gf_graph *g, const gf_stage_desc *desc, const char *name, const gf_value *params,
                      int workers, int *node);

/* Connects output port `out` of node `from` to input port `in` of node
 * `to`. opts may be NULL. Returns 0, or with the message in gf_graph_error:
 *   GF_ENOTFOUND  no such node or port (the message lists the ports)
 *   GF_EKIND      the ports carry different message kinds (input kind "any"
 *                 accepts everything); the message names both stages
 *   GF_EGRAPH     the input already has an edge and is not GF_PORT_MULTI,
 *                 or both ends have several workers
 *   GF_EPARAM     bad capacity / depth */
int gf_graph_connect(gf_graph *g, int from, const char *out, int to, const char *in, const gf_edge_opts *opts);

/* Checks the whole graph without running it: every input (and output)
 * not declared GF_PORT_OPTIONAL is connected, there is a stage at all, and
 * every cycle is fed from outside or has a GF_STAGE_CYCLE_START stage.
 * Returns 0 or GF_EGRAPH with the message in gf_graph_error (naming the
 * stage and port). gf_graph_run does the same first. */
int gf_graph_validate(gf_graph *g);

/* Validates, creates every instance, runs the graph to its end and destroys
 * the instances (see above). info (may be NULL: rank 0 of 1, no step
 * target) is copied. Shows a live progress line and prints the edge table
 * at the end unless GF_GRAPH_QUIET. Callable once per graph.
 * Returns 0 when the run ended without a failure (end of data, step target,
 * graceful stop request), GF_EGRAPH (validation), GF_EFAIL (a stage failed
 * in create, run or flush: gf_graph_error is "stage 'NAME' failed: MESSAGE"),
 * GF_ESTOP (hard stop requested, or the grace period ran out). */
int gf_graph_run(gf_graph *g, const gf_run_info *info, unsigned flags);

/* Asks a running graph to stop: hard = 0 graceful, 1 hard. Async-signal-
 * safe (only atomic stores and a futex wake): call it from a SIGINT
 * handler. Before the run starts, the request applies as soon as it does. */
void gf_graph_request_stop(gf_graph *g, int hard);

/* Seconds a graceful stop may go without progress before it turns into a
 * hard stop (default 30). Progress is a stage inside its flush hook using
 * CPU (1% of the time or more: a final evaluation or checkpoint on a slow
 * machine); a stage that ignores the stop and stays in run() is stopped
 * hard when the grace has passed. */
void gf_graph_set_grace(gf_graph *g, double seconds);

/* The stall watchdog. When no step (and no item) is reported for
 * `report` seconds the run logs which edges are starved (their consumer
 * waits on them empty), which stages are blocked on full edges and which
 * are busy; after `stop` seconds it stops the run: gracefully (stages
 * flush, the final checkpoint is written) when a step completed since the
 * start, at once otherwise (there is nothing new to save), and
 * gf_graph_run returns GF_EFAIL with the report in gf_graph_error. 0 means
 * automatic: report after 60 s before the first step, after that 10 x the
 * slowest step seen (at least 30 s); stop after 10 x the report time. */
void gf_graph_set_stall(gf_graph *g, double report, double stop);

/* Called by gf_graph_run once every stage instance was created (each has
 * checked its parameters and loaded what it resumes from) and before any
 * runs, on the calling thread: the first moment the run is known to start.
 * A non-zero return ends the run there with GF_EFAIL and gf_errmsg() as
 * its message (stages are destroyed, nothing ran). The caller of
 * `ganflow run` writes the run directory's record here (core/lua/rundir.c).
 * NULL: none. */
typedef int (*gf_graph_created_fn)(void *arg);
void gf_graph_on_created(gf_graph *g, gf_graph_created_fn fn, void *arg);

/* The last error message ("" when none). Owned by the graph, valid until
 * the next call on it or gf_graph_destroy. */
const char *gf_graph_error(const gf_graph *g);

/* Why the run ended. */
gf_stop_reason gf_graph_stop_reason(const gf_graph *g);
const char *gf_stop_reason_name(gf_stop_reason r);

/* Number of stage instances (nodes) added. */
int gf_graph_nodes(const gf_graph *g);

/* Instance name of node `node` (the one given, or the one the graph chose),
 * or NULL when out of range. Owned by the graph. */
const char *gf_graph_node_name(const gf_graph *g, int node);

/* Edge statistics (one per ring; a link to or from a stage with n workers
 * is n rings, named "stage#i.port", less the rings of workers a workers =
 * "auto" stage has not used so far); copies up to max into out and returns
 * the number of rings. Valid during and after the run. */
int gf_graph_edge_stats(gf_graph *g, gf_edge_stat *out, int max);

/* Worker statistics (one per stage with several workers or workers =
 * "auto"); copies up to max into out and returns the number of such
 * stages. Valid during and after the run. Edges to or from workers an
 * adaptive stage never used are left out of gf_graph_edge_stats. */
int gf_graph_worker_stats(gf_graph *g, gf_worker_stat *out, int max);

/* Last step and total items reported with gf_report_step, and the run's
 * wall time in seconds (so far, or total after the run). */
int64_t gf_graph_step(const gf_graph *g);
int64_t gf_graph_items(const gf_graph *g);
double gf_graph_seconds(const gf_graph *g);

/* Latest value a stage published under `name` with gf_report_value.
 * Returns 1 with *out set, 0 when no stage published that name. */
int gf_graph_value(gf_graph *g, const char *name, double *out);

/* Prints the end-of-run table of every edge (gf_log, info level). */
void gf_graph_print_edges(gf_graph *g);

/* ---- the stop every rank of a distributed run agrees on ----
 *
 * A graceful stop requested on one rank (Ctrl-C) must end every rank
 * after the same step, or collectives stay half-matched. The graph runtime
 * does its part (freezing the stage threads that report steps, ending the
 * run after a given step) and reaches the ranks through the table below,
 * which the distributed layer (core/dist, <ganflow/dist.h>) registers when
 * it starts MPI: the runtime never calls MPI itself. docs/dist.md#faults. */

/* The distributed layer's side of an agreed stop. */
typedef struct gf_graph_peers {
	/* A graceful stop was requested on this rank: ask the ranks to agree
	 * on a last step (their answer comes back as gf_graph_stop_running).
	 * Returns 0, or an error code with gf_errmsg() set when there is no
	 * world to ask (the rank then stops on its own). */
	int (*stop_request)(void);
} gf_graph_peers;

/* Registers the table (NULL: none, stops stay local to the process); p
 * must outlive its registration. Call it with no graph running. */
void gf_graph_set_peers(const gf_graph_peers *p);

/* The two calls the distributed layer's thread makes on the run in
 * progress of a graph with info.world > 1 (one at a time per process).
 * They never hold a graph pointer of their own: gf_graph_run registers
 * its graph when the stage threads start and takes it back, under the
 * lock these calls hold while they act on it, before it returns; so a
 * late answer never reaches a graph whose run has ended (and that the
 * caller may be destroying): with no run registered they do nothing. */

/* Freezes the stage threads that report steps (each blocks in its next
 * gf_report_step or gf_step_begin) and returns the highest step any of
 * them can still reach: for a thread that announces its steps with
 * gf_step_begin, the step it began; for one that only reports them, its
 * last reported step + 1; -1 when none began or reported a step yet, or
 * when no run is in progress. Marks the run as stopped by a request.
 * Thread-safe. */
int64_t gf_graph_hold_running(void);

/* Ends the run in progress after step s (lowers the step target; s <= 0:
 * stop now) and releases the threads frozen by gf_graph_hold_running.
 * Thread-safe; nothing when no run is in progress. */
void gf_graph_stop_running(int64_t s);

#ifdef __cplusplus
}
#endif
#endif
