/* ganflow stage ABI.
 *
 * A stage is a shared object exporting exactly one symbol, `ganflow_stage`,
 * a const gf_stage_desc. The loader reads `abi` and `size` first and
 * refuses a .so whose ABI version differs or whose descriptor is smaller
 * than the runtime expects, naming the file, before reading anything else.
 *
 * The descriptor declares the stage's ports (name + message kind) and its
 * parameters (name, type, default, doc, allowed range or choices). The
 * runtime checks a pipeline against these declarations before anything
 * runs: unknown keys, wrong types, values outside the allowed range or
 * choices, ports of different kinds, inputs left unconnected are errors
 * that name the stage instance and the key or port. A stage then reads the
 * checked values with gf_param_int() & co. (<ganflow/params.h>): it never
 * restates a default or re-checks a declared range.
 *
 * Life of a stage instance (one per worker when the stage runs several):
 *   create(ctx, params, &self)   on the main thread, before any run();
 *                                params is a GF_VMAP holding every declared
 *                                parameter (defaults filled in), owned by the
 *                                runtime and valid until destroy() returns.
 *                                If create() fails after setting *self, the
 *                                runtime still calls destroy(*self).
 *   run(self, ctx)               on the instance's own thread; loops on
 *                                gf_pop / gf_msg_get / gf_push. Returns 0 when
 *                                done (end of input, graceful stop), or an
 *                                error after gf_fail(). GF_ESTOP and GF_EEOF
 *                                returned from run count as a clean end.
 *   flush(self, ctx)             optional; after run() ended cleanly, before
 *                                the instance's outputs close: last chance to
 *                                push (final checkpoint state, last metrics).
 *   destroy(self)                on the main thread after every thread joined.
 *
 * Stages never include Lua headers; they see parameters as gf_value trees.
 */
#ifndef GANFLOW_STAGE_H
#define GANFLOW_STAGE_H

#include <stdint.h>

#include <ganflow/err.h>
#include <ganflow/msg.h>
#include <ganflow/value.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 2: gf_param_desc gained `allowed` (ranges and choices checked by the
 * runtime). Stages built for ABI 1 are refused at load time. */
#define GF_STAGE_ABI 2u

/* Exports one symbol from a stage built with -fvisibility=hidden:
 *   GF_STAGE_EXPORT const gf_stage_desc ganflow_stage = { ... };      */
#define GF_STAGE_EXPORT __attribute__((visibility("default")))
#define GF_STAGE_SYMBOL "ganflow_stage"

typedef struct gf_ctx gf_ctx;

typedef enum {
	GF_PARAM_INT = 1, /* integer; def "64" */
	GF_PARAM_NUM,     /* number (integers accepted); def "2e-4" */
	GF_PARAM_BOOL,    /* boolean; def "true" / "false" */
	GF_PARAM_STR,     /* string; def is the raw string ("bce") */
	GF_PARAM_LIST,    /* list (Lua array) of anything; def must be NULL or "nil" */
	GF_PARAM_TABLE,   /* any table (list or map): layer tables, optimiser
	                     settings; def must be NULL or "nil" */
	GF_PARAM_ANY      /* any value; def NULL or "nil" */
} gf_param_type;

typedef struct gf_param_desc {
	const char *name;
	gf_param_type type;
	const char *def;  /* default as text; NULL: required; "nil": optional, absent */
	const char *doc;  /* one line, shown by `ganflow stages` */
	const char *allowed; /* NULL: any value of the type. Integers and numbers:
	                        a closed range "lo..hi", either side may be left
	                        out ("1..", "..0.5"); strings: the choices
	                        "sync|async". The runtime refuses values outside
	                        it before anything runs, and the loader refuses a
	                        descriptor whose default lies outside it. */
} gf_param_desc;

enum {
	GF_PORT_OPTIONAL = 1u << 0, /* may be left unconnected */
	GF_PORT_MULTI = 1u << 1,    /* input: accepts several edges; gf_pop returns
	                               from whichever has a message */
	/* input of kind "records": the stage checks each message's payload
	 * CRC-32C when the message carries one to check (GF_RECORD_CRC32C in
	 * t[1][4], the CRC in t[1][5]: gf_records_crc in <ganflow/dataset.h>)
	 * and treats a mismatch as a bad record; lmdb_reader then leaves the
	 * check to it (see gf_port_feeds) */
	GF_PORT_CHECKS_CRC = 1u << 2,
	/* input of kind "records": the stage pushes what it keeps unchanged
	 * (a filter such as label_shard) */
	GF_PORT_PASSES_RECORDS = 1u << 3
};

typedef struct gf_port_desc {
	const char *name;
	const char *kind; /* message kind: "samples", "batch", "fakes", "weights",
	                     "grads", "metrics", "state", "items"...; "any" on an
	                     input accepts every kind */
	uint32_t flags;   /* GF_PORT_* */
	const char *doc;
} gf_port_desc;

enum {
	/* The stage may run as several workers (`workers = n` or
	 * `workers = "auto"` in Lua: <ganflow/workers.h>). Such a
	 * stage has one input and one output and pushes exactly one message per
	 * message it pops, in order (a skipped input is pushed back as a message
	 * flagged GF_MSG_DROPPED). The runtime deals inputs round-robin over the
	 * workers (those active, with "auto") and merges their outputs in the
	 * same order, so downstream sees the order of upstream whatever the
	 * count; an output carries the sequence number of its input. */
	GF_STAGE_WORKERS = 1u << 0,
	/* The stage pushes before anything arrives on the inputs that close a
	 * cycle through it (it starts a loop of stages, such as a ping that
	 * sends first and waits for the answer on a back edge). A cycle that
	 * nothing outside it feeds is refused at validation unless one of its
	 * stages declares this: otherwise every stage of it would wait for
	 * another forever. */
	GF_STAGE_CYCLE_START = 1u << 1
};

typedef struct gf_stage_desc {
	uint32_t abi;   /* GF_STAGE_ABI */
	uint32_t size;  /* sizeof(gf_stage_desc) */
	const char *name;
	const char *doc;
	const gf_port_desc *inputs;
	uint32_t ninputs;
	const gf_port_desc *outputs;
	uint32_t noutputs;
	const gf_param_desc *params;
	uint32_t nparams;
	uint32_t flags; /* GF_STAGE_* */
	int (*create)(gf_ctx *ctx, const gf_value *params, void **self);
	int (*run)(void *self, gf_ctx *ctx);
	int (*flush)(void *self, gf_ctx *ctx); /* may be NULL */
	void (*destroy)(void *self);           /* may be NULL */
} gf_stage_desc;

/* What a run was started with: the same for every stage of the graph. */
typedef struct gf_run_info {
	int rank;              /* this process's rank, 0 without a launcher */
	int world;             /* number of processes, 1 without a launcher */
	uint64_t seed;         /* run seed */
	int64_t steps;         /* step target, 0 = until end of data or a stop */
	const char *run_dir;   /* directory this run writes into (exists), or NULL */
	const char *backend;   /* "cpu", "cuda" or "auto" as requested */
	const char *resume;    /* checkpoint to resume from, or NULL */
	const char *pipeline;  /* path of the Lua script, or NULL */
	int threads;           /* compute threads per stage requested, 0 = default */
	int64_t checkpoint_every; /* steps between checkpoints, 0 = only at the end */
} gf_run_info;

/* Statistics of one edge, as shown in the end-of-run table and recorded by
 * the metrics stage. */
typedef struct gf_edge_stat {
	char from[96];        /* "stage.port" */
	char to[96];
	uint32_t capacity;
	uint32_t depth;       /* active depth now */
	uint32_t depth_min, depth_max;
	double depth_mean;    /* time-weighted since the start */
	uint64_t items;       /* messages delivered */
	uint64_t stalls;      /* pops that found the ring empty and had to wait */
	uint64_t full_waits;  /* pushes that found the active depth full */
	int fixed;            /* 1 when the pipeline fixed the depth */
} gf_edge_stat;

/* Worker count of a stage that runs several workers (workers = n > 1, or
 * workers = "auto": <ganflow/workers.h>), as shown in the end-of-run table
 * and recorded by the metrics stage. */
typedef struct gf_worker_stat {
	char stage[64];       /* instance name of the stage */
	int workers;          /* workers that get messages now */
	int min, max;         /* range over the run */
	int limit;            /* instances: the most it may use (max_workers) */
	double mean;          /* time-weighted since the start */
	uint64_t changes;     /* times the count changed */
	double needed;        /* the controller's latest estimate of the workers
	                         the consumer needs (0 before the first window) */
	int adaptive;         /* 1: workers = "auto"; 0: the pipeline fixed it */
} gf_worker_stat;

/* ---- messages in and out ---- */

/* Pops the next message from input port `port` (index into the descriptor's
 * inputs). Blocks (spins briefly, then sleeps) until one arrives.
 * Returns 0 with *out owned by the caller (release with gf_msg_release),
 * GF_EEOF when every producer of the port has finished and nothing is left,
 * GF_ESTOP when the graph is being torn down. */
int gf_pop(gf_ctx *ctx, int port, gf_msg **out);

/* As gf_pop, but returns -EAGAIN instead of blocking when nothing is ready. */
int gf_try_pop(gf_ctx *ctx, int port, gf_msg **out);

/* Takes an empty envelope from output port `port`'s pool. Blocks while
 * every envelope is in flight. Returns 0 with *out (one reference, owned by
 * the caller) or GF_ESTOP. */
int gf_msg_get(gf_ctx *ctx, int port, gf_msg **out);

/* Pushes m to every edge leading out of output port `port` (a reference per
 * edge); ownership of the caller's reference passes to the runtime. Blocks
 * while a downstream ring is at its active depth. Returns 0, or GF_ESTOP
 * when the graph is stopping or no consumer is left (m is released). A push
 * to an unconnected optional port releases m and returns 0. */
int gf_push(gf_ctx *ctx, int port, gf_msg *m);

/* Number of edges connected to an input (dir 0) or output (dir 1) port. */
int gf_port_edges(gf_ctx *ctx, int dir, int port);

/* The instance name of the nearest stage whose descriptor is named `stage`
 * (e.g. "lmdb_reader") upstream of input port `port`: the edges feeding
 * the port are walked backwards, breadth-first, through every input of the
 * stages met (batch, decode, ...); the first found wins. NULL when none
 * is (in this process's graph: a cross-rank edge ends the walk). The
 * string is owned by the graph and valid while it exists. A d_step finds
 * the reader whose data position it checkpoints this way. */
const char *gf_port_upstream(gf_ctx *ctx, int port, const char *stage);

/* The checked parameters (defaults filled in, read with gf_param_*) of the
 * instance gf_port_upstream finds, or NULL. Owned by the graph, valid while
 * it exists. A d_step reads the dataset its reader serves this way. */
const gf_value *gf_port_upstream_params(gf_ctx *ctx, int port, const char *stage);

/* 1 when every edge leaving output `port` (and there is at least one)
 * leads to an input flagged `want`, or to an input flagged `through` of a
 * stage whose every output does so in turn; 0 otherwise (also across a
 * rank boundary, or through a cycle). lmdb_reader asks it with
 * GF_PORT_CHECKS_CRC, GF_PORT_PASSES_RECORDS. */
int gf_port_feeds(gf_ctx *ctx, int port, uint32_t want, uint32_t through);

/* ---- message memory for devices (docs/cuda.md) ---- */

/* Sets the allocator of message buffers. dir 1: of this instance's output
 * port `port`; dir 0: of every output port on this rank that feeds input
 * `port` (a GPU step stage asks for its batches in pinned memory, which
 * its device copies from asynchronously). Call it before those pools hand
 * out a buffer: from create() for dir 0 (every instance's create() runs
 * before any run()), from create() or the start of run() for dir 1. The
 * allocator and its ud must stay usable while the graph runs, and its free
 * until the graph is destroyed (pinned_free and device_free of a backend
 * need no instance). Returns 0, GF_EPARAM (no such port), -EBUSY (a pool
 * already holds buffers) or -EEXIST (a pool already has another
 * allocator: two consumers asked for different memory). */
int gf_port_set_allocator(gf_ctx *ctx, int dir, int port, const gf_allocator *alloc);

/* create(): input `port` takes messages whose tensors are in the memory of
 * device (device, index), marked ready by gf_msg.event, which the stage
 * waits on with its backend before reading them (docs/cuda.md's protocol);
 * it still takes host messages (event NULL). */
void gf_port_accept_device(gf_ctx *ctx, int port, gf_device device, int index);

/* 1 when every edge leaving output `port` (there is at least one) leads to
 * an input on this rank that accepts memory of (device, index)
 * (gf_port_accept_device); 0 otherwise, also across a rank boundary (the
 * transport stage sends host memory). For run(): every create() is done. */
int gf_port_device_ok(gf_ctx *ctx, int port, gf_device device, int index);

/* ---- errors and reporting ---- */

/* Records why the stage fails (printf-style; the runtime prefixes the stage
 * instance name) and returns GF_EFAIL, so a stage writes
 *   return gf_fail(ctx, "key %llu: bad header", key);
 * The first failure stops the whole graph; `ganflow run` prints it and exits
 * non-zero. Callable from create() and run(). */
int gf_fail(gf_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Warning / information lines, prefixed with the stage instance name.
 * Never interleave with the progress line. */
void gf_warn(gf_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void gf_info(gf_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* 1 once a graceful stop was requested (step target reached, SIGINT,
 * SIGTERM): sources and step stages leave their loop at the next clean
 * point. Cheap: one relaxed atomic load. */
int gf_should_stop(gf_ctx *ctx);

/* 1 once the hard stop is in effect (a stage failed, a second SIGINT, the
 * grace period ran out): every runtime wait returns GF_ESTOP. A stage
 * waiting on something else (a network request) polls it to give up;
 * gf_dist_should_abort is this test. A thread that sees 1 also sees the
 * failure message recorded before the stop. */
int gf_ctx_hard_stop(gf_ctx *ctx);

/* Reports progress: the step just completed and the items (images) it
 * processed. Drives the progress line (step, items/s, ETA) and the step
 * target. The run's step is the LOWEST step among the stage instances that
 * report steps (several d_steps in per-class training): once it reaches
 * the run's steps, a graceful stop begins. Stages that drive training
 * (d_step, or a test sink) call it. A negative step adds items only (a
 * stage that consumes images but does not drive the step count). */
void gf_report_step(gf_ctx *ctx, int64_t step, int64_t items);

/* A driver resumed from a checkpoint reports the step it restored as its
 * run begins (nothing for step <= 0): the progress line then starts there,
 * and counts its rate and ETA from there, instead of showing step 0 until
 * the first step completes. */
void gf_report_resume(gf_ctx *ctx, int64_t step);

/* A driver is about to begin step `step` (the step it will report when
 * done): call it once it holds the input that starts the step and before
 * any work of it (g_step after D's weights arrive, d_step after the fakes
 * of the iteration). Returns 0 to go on, or GF_ESTOP when the step must not
 * run: the run ends before it (the step target, lowered by a stop every
 * rank agreed on) or stops hard; the caller then releases what it holds
 * and returns. Calling it again for a step already begun returns 0 at
 * once. Under mpirun an agreed stop (Ctrl-C) waits here, so the ranks can
 * end after the step already under way instead of the one after it
 * (docs/dist.md#faults); drivers that do not call it are assumed to be in
 * the step after their last report. */
int gf_step_begin(gf_ctx *ctx, int64_t step);

/* Publishes a named figure shown on the progress line and in the run
 * summary (losses, FID...). Thread-safe; the latest value wins. */
void gf_report_value(gf_ctx *ctx, const char *name, double value);

/* Adds `seconds` of work a step stage's steps took: device time between
 * timed events when `device` (a GPU), else the host's compute time. The
 * progress line shows each such stage's busy fraction over the last
 * seconds ("d busy 97% device"), the end-of-run table over the whole run:
 * whether the device waits for the data path or for the host. */
void gf_report_busy(gf_ctx *ctx, double seconds, int device);

/* Adds `flops` floating-point operations that a step stage's steps
 * queued: the model's FLOPs, 2 per multiply-add of the convolutions and
 * GEMMs and of their gradients (gf_net_flops_done; gf_trainer reports
 * them at every update). Call it from the stage's own thread. The
 * progress line shows the run's FLOP/s and MFU over the last seconds
 * ("41.2 GFLOP/s MFU 38%"), the end-of-run summary a table over the whole
 * run, the metrics stage flop_s and mfu on each line. */
void gf_report_flops(gf_ctx *ctx, double flops);

/* The peak FLOP/s of the device a step stage's steps run on, reported
 * once (at create: the backend's peak_flops). `device` names the device
 * ("cuda:0", "cpu"): stages sharing one count its peak once (the largest
 * reported), different devices add up; `what` says where the figure
 * comes from (a datasheet, a measurement), shown in the end-of-run table.
 * flop_s <= 0: no peak is known for it (`what` says why), and no MFU is
 * shown while a reported device has none. Thread-safe; copies both
 * strings. */
void gf_report_peak(gf_ctx *ctx, const char *device, double flop_s, const char *what);

/* The FLOPs every instance of the graph (this rank's) has reported so far
 * and the peak FLOP/s of their devices (0: none reported, or one unknown):
 * a metrics stage's flop_s and mfu are their change over its interval.
 * Thread-safe. */
void gf_flops_stats(gf_ctx *ctx, double *flops, double *peak);

/* Copies up to max edge statistics into out; returns the number of edges. */
int gf_edge_stats(gf_ctx *ctx, gf_edge_stat *out, int max);

/* Copies up to max worker statistics (one per stage running several
 * workers or workers = "auto") into out; returns the number of such
 * stages. */
int gf_worker_stats(gf_ctx *ctx, gf_worker_stat *out, int max);

/* ---- who and where ---- */

const gf_run_info *gf_ctx_run(gf_ctx *ctx);
/* The step the run ends at (0 = none): gf_run_info.steps, or lower once
 * the ranks of a distributed run agreed to stop after an earlier step
 * (Ctrl-C under mpirun). Drivers test it, not run->steps, to end their
 * loop; run->steps stays the planned length (schedules). */
int64_t gf_ctx_steps(gf_ctx *ctx);
/* Instance name ("reader", "d"); valid for the life of the graph. */
const char *gf_ctx_name(gf_ctx *ctx);
/* Worker index (0-based) and count of instances for GF_STAGE_WORKERS
 * stages; 0 and 1 otherwise. With workers = "auto" the count is the
 * maximum: how many of them get messages changes during the run. */
int gf_ctx_worker(gf_ctx *ctx);
int gf_ctx_workers(gf_ctx *ctx);

#ifdef __cplusplus
}
#endif
#endif
