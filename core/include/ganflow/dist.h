/* ganflow distributed runs: the world, start-up checks, liveness, traffic
 * counters, and the protocol between the training stages and the
 * `exchange` stage.
 *
 * The world. `mpirun -np N ganflow run PIPELINE.lua` (or `srun`) starts N
 * processes; each finds its rank in the launcher's environment
 * (OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE, SLURM_PROCID/NTASKS) and
 * `ganflow run` initialises MPI once (MPI_THREAD_MULTIPLE) before the
 * pipeline script runs, and finalises it at exit. Without a launcher
 * ganflow is rank 0 of 1 and makes no MPI call at all. A third way,
 * GANFLOW_RANK / GANFLOW_WORLD in the environment, runs processes as ranks
 * of a world WITHOUT MPI: only TCP transport edges work between them (the
 * network-namespace jitter test uses it; exchange stages refuse to run).
 *
 * MPI types never appear in this header: the distributed stages include
 * <mpi.h> themselves, and the calls below that hand out MPI handles take a
 * pointer to an MPI_Comm as `void *`.
 *
 * Threads: gf_dist_init and gf_dist_finalize on the main thread; everything
 * else from any thread once init returned.
 */
#ifndef GANFLOW_DIST_H
#define GANFLOW_DIST_H

#include <stddef.h>
#include <stdint.h>

#include <ganflow/rng.h>
#include <ganflow/stage.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the world ---- */

/* How this process was started. */
typedef enum {
	GF_LAUNCH_NONE = 0, /* no launcher: rank 0 of 1, no MPI */
	GF_LAUNCH_MPI,      /* mpirun / srun / PMI: MPI is initialised */
	GF_LAUNCH_MANUAL    /* GANFLOW_RANK / GANFLOW_WORLD without MPI: TCP edges only */
} gf_launch;

/* Rank and world size from the environment only (no MPI call): the
 * launcher's variables, then GANFLOW_RANK / GANFLOW_WORLD; 0 and 1 when
 * none is set. *how (may be NULL) receives what was found. Returns 0, or
 * GF_EDIST when the variables are malformed or the rank is outside the
 * world (message in gf_errmsg()). */
int gf_dist_detect(int *rank, int *world, gf_launch *how);

/* Initialises the world once per process: with a launcher, MPI_Init_thread
 * (MPI_THREAD_MULTIPLE), the communicators of the distributed stages, and
 * the liveness responder thread (answers gf_dist_probe pings). Without a
 * launcher nothing happens. Idempotent. Returns 0, or GF_EDIST (MPI could
 * not start, no MPI_THREAD_MULTIPLE, the launcher's rank/size disagree with
 * MPI's) with the reason in gf_errmsg(). */
int gf_dist_init(void);

/* Ends the world: ok = 1 after a run that succeeded on this rank:
 * MPI_Finalize (which waits for every rank to get there); ok = 0: no MPI
 * call at all (a peer may be dead, and MPI_Finalize would wait for it), the
 * process is about to exit non-zero. Idempotent; no-op without MPI. */
void gf_dist_finalize(int ok);

/* Makes a rank's failure the job's failure where the launcher would lose
 * it: under Open MPI with --enable-recovery mpirun returns 0 whatever the
 * ranks' exit statuses (MPI_Abort included). There (the rank's
 * environment has OMPI_MCA_orte_enable_recovery=1 and GANFLOW_FAIL_JOB is
 * not 0) it waits wait_s seconds, so that ranks stuck in the same
 * collective report the same loss, and sends SIGTERM to mpirun (or the
 * orted that started this rank), found among the process's ancestors;
 * mpirun then ends the job, exit status 1. Returns 1 when it signalled
 * the launcher, 0 otherwise (not needed, or no launcher found: logged).
 * Call it on the way out of a failed run, after the failure's message
 * (`ganflow run` waits GANFLOW_PROBE_WAIT + 1 s). */
int gf_dist_fail_job(double wait_s);

/* This process's rank and the world size (after gf_dist_init; before it,
 * what gf_dist_detect finds). */
int gf_dist_rank(void);
int gf_dist_world(void);

/* 1 when MPI is initialised (world > 1 under a launcher), else 0. */
int gf_dist_mpi(void);

/* A new communicator over every rank (MPI_Comm_dup of the world),
 * written to *(MPI_Comm *)comm. COLLECTIVE: every rank must call it in the
 * same order (stages call it from create(), which runs on the main thread
 * in declaration order). Errors return MPI_ERRORS_RETURN-style codes
 * instead of aborting. Returns 0 or GF_EDIST (no MPI). */
int gf_dist_comm_dup(void *comm);

/* The communicator the transport stages share (point-to-point only; each
 * edge has its own tags), written to *(MPI_Comm *)comm. Not collective.
 * Returns 0 or GF_EDIST (no MPI). */
int gf_dist_comm_edges(void *comm);

/* ---- start-up checks ---- */

/* Compares a description of the pipeline across ranks (COLLECTIVE, main
 * thread): every rank passes its own text (one item per line); when all
 * agree, returns 0. Otherwise returns GF_EDIST with err naming the first
 * rank whose text differs from rank 0's and the first differing line of
 * each ("rank 1 declares \"stage x count_source rank=all\", rank 0
 * \"(nothing)\""). what names the thing in the message ("pipeline").
 * Without MPI: 0. */
int gf_dist_check_same(const char *what, const char *desc, char *err, size_t errsize);

/* Copies rank root's NUL-terminated string in buf (size bytes) to every
 * rank (COLLECTIVE, main thread). Without MPI: 0, buf untouched. */
int gf_dist_bcast_str(char *buf, size_t size, int root);

/* ---- liveness ---- */

/* Pings every other rank on a private communicator and waits up to
 * wait_s seconds for their answers (every initialised process answers from
 * its responder thread, whatever its stages are doing). Writes the ranks
 * that did not answer into lost (up to max) and returns how many there
 * are (0: every rank is alive), or GF_EDIST without MPI. Concurrent calls
 * are serialised. */
int gf_dist_probe(double wait_s, int *lost, int max);

/* Seconds a probe waits for answers by default (GANFLOW_PROBE_WAIT, 2). */
double gf_dist_probe_wait(void);

/* Waits for an MPI request (*(MPI_Request *)req) of a stage's thread:
 * polls it with a sleep that grows from tens of microseconds to a few
 * milliseconds, leaves on a hard stop (GF_ESTOP, request cancelled), and
 * after timeout_s seconds without completion probes the world: a rank
 * that does not answer fails the stage ("rank N stopped responding (no
 * message for T s while WHAT)", GF_EFAIL); when every rank answers it
 * warns once and goes on waiting (a slow rank, not a dead one). */
int gf_dist_wait(gf_ctx *ctx, void *req, double timeout_s, const char *what);

/* For stages that wait outside the runtime (MPI requests, sockets): 1 once
 * the graph is stopping HARD (a stage failed, second Ctrl-C, grace period
 * over): leave at once. A graceful stop (gf_should_stop) is not a reason
 * to abandon a collective the other ranks are in. */
int gf_dist_should_abort(gf_ctx *ctx);

/* ---- traffic counters ---- */

typedef enum {
	GF_TRAFFIC_GRADS = 0, /* gradient collectives (all-reduce, reduce-scatter) */
	GF_TRAFFIC_PARAMS,    /* parameter collectives (ZeRO-1 all-gather, gossip averaging) */
	GF_TRAFFIC_EDGES,     /* cross-rank graph edges (transport stages) */
	GF_TRAFFIC_KINDS
} gf_traffic;

/* Adds bytes this rank sent (as counted by the algorithm: a ring
 * all-reduce of B bytes over p ranks counts 2 (p-1)/p B). Thread-safe. */
void gf_dist_count(gf_traffic kind, uint64_t bytes, uint64_t calls);

/* Bytes and calls counted so far, per kind. */
void gf_dist_traffic(uint64_t bytes[GF_TRAFFIC_KINDS], uint64_t calls[GF_TRAFFIC_KINDS]);

/* ---- data-parallel helpers ---- */

/* Shard of a flat block of n values owned by rank of world (ZeRO-1): the
 * contiguous range [*off, *off + *count) with *off = floor(rank n / world). */
static inline void gf_dist_shard(size_t n, int rank, int world, size_t *off, size_t *count)
{
	size_t lo = (size_t)((uint64_t)n * (uint64_t)rank / (uint64_t)world);
	size_t hi = (size_t)((uint64_t)n * (uint64_t)(rank + 1) / (uint64_t)world);
	*off = lo;
	*count = hi - lo;
}

/* Normals for a data-parallel rank: elements [rank n, (rank + 1) n) of one
 * draw of world * n normals from r, then r advanced past the whole draw.
 * So `world` ranks with batch B draw exactly the noise one process with
 * batch world * B draws (gf_rng_normal), and every rank advances alike. */
void gf_dist_normal_slice(gf_rng *r, float *out, size_t n, int rank, int world);

/* Uniforms in [0, 1) likewise (elements of one draw of world * n). */
void gf_dist_uniform_slice(gf_rng *r, float *out, size_t n, int rank, int world);

/* ---- the exchange protocol ----
 *
 * Step stages talk to an `exchange` stage (stages/exchange) through
 * two ports: output `grads` and input `reduced`, both of kind "grads",
 * joined by rings on the same rank. One message each way, at the start of
 * the step stage's run:
 *
 *   GF_XCHG_HELLO    scalars "params" = the network's parameter count,
 *                    "device" and "device_index" = its backend's memory
 *                    (a GPU's makes the exchange open its NCCL
 *                    communicator on that device). The exchange compares
 *                    counts across ranks (mismatched pipelines fail here)
 *                    and answers with scalars "mode" (GF_DIST_*), "bucket"
 *                    (floats per all-reduce bucket), "rank", "world",
 *                    "rounds", "pid", and t[0]: a GF_U8 view of its
 *                    gf_comm (<ganflow/backend.h>), valid while the
 *                    exchange stage exists.
 *
 * Every collective then runs through that communicator on the step
 * stage's own backend (gf_backend_ops.collective), among the step's ops:
 * the gradient buckets as the backward pass completes them
 * (GF_COLL_MEAN), ZeRO-1's reduce-scatter, norm and all-gather
 * (GF_COLL_MEAN_SHARD, GF_COLL_SUM_F64, GF_COLL_GATHER), gossip's rounds
 * (GF_COLL_RING_MEAN), each waited for with GF_COLL_WAIT before what reads
 * its result; so a step captured as a graph on a GPU holds its exchange
 * (docs/dist.md). The step stage sets the communicator's caller (its
 * gf_ctx: an MPI wait that finds a dead rank fails that stage) and step.
 */
enum {
	GF_XCHG_HELLO = 1
};

/* Exchange modes. */
typedef enum {
	GF_DIST_NONE = 0,   /* no exchange (single process, per-class training) */
	GF_DIST_ALLREDUCE,  /* gradient buckets all-reduced during backward */
	GF_DIST_ZERO1,      /* reduce-scatter, shard update, all-gather */
	GF_DIST_GOSSIP      /* local update, then ring averaging of the parameters */
} gf_dist_mode;

/* "none", "allreduce", "zero1", "gossip". */
const char *gf_dist_mode_name(gf_dist_mode m);
int gf_dist_mode_parse(const char *s, gf_dist_mode *out);

#ifdef __cplusplus
}
#endif
#endif
