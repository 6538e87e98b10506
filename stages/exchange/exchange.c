/* exchange: the communicator of one network's data-parallel exchange
 * across ranks.
 *
 * A pipeline puts one exchange stage per trained network on every rank
 * and joins it to the g_step or d_step that owns the network:
 *
 *	local xd = gf.stage "exchange" { name = "xd", mode = "allreduce", bucket_mb = 4 }
 *	gf.connect(d.grads, xd.grads); gf.connect(xd.reduced, d.reduced)
 *
 * The step stage's handshake (<ganflow/dist.h>) agrees on the mode and
 * compares the networks' parameter counts across ranks (mismatched
 * pipelines fail there, naming both), and the answer hands the step stage
 * this stage's communicator: a gf_comm (<ganflow/backend.h>) whose run
 * does the collectives. The step stage's backend runs them among the
 * step's own ops (its `collective` op), so a GPU step captures them in its
 * graph. Modes:
 *   allreduce  buckets of gradients, all-reduced (sum, then 1/world) as the
 *              backward pass produces them;
 *   zero1      reduce-scatter of the gradient block, the sum of the shards'
 *              squared norms, all-gather of the parameters after each rank
 *              updated its shard;
 *   gossip     DPOSG: `rounds` rounds of averaging the parameters with the
 *              two ring neighbours (x <- (x_left + x + x_right) / 3), no
 *              central node;
 *   none       nothing crosses ranks (per-class training keeps a
 *              pipeline's shape).
 * Host memory (the CPU backend) goes through MPI (non-blocking calls on a
 * communicator of this stage's, waited for on the step stage's thread,
 * so a dead rank is found by the liveness probe after `timeout` seconds
 * and named); device memory through NCCL (comm_nccl.so, loaded at the
 * handshake of a step stage on a GPU, queued on the stream the backend
 * gives). With NCCL this stage's thread stays a watchdog until the step
 * stage ends: an asynchronous NCCL error, a hard stop or a rank that stops
 * answering the probe aborts the communicator, so a step waiting on a
 * dead peer ends.
 */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include <ganflow/backend.h>
#include <ganflow/dist.h>
#include <ganflow/err.h>
#include <ganflow/log.h>
#include <ganflow/params.h>
#include <ganflow/stage.h>

#include "comm.h"

enum { IN_GRADS };
enum { OUT_REDUCED };

extern const gf_stage_desc ganflow_stage;

typedef struct xchg {
	gf_ctx *ctx;
	gf_dist_mode mode;
	size_t bucket;          /* floats */
	double bucket_mb;       /* as the pipeline gave it, for the log */
	int rounds;
	double timeout;
	int measure;
	int rank, world;
	MPI_Comm comm;
	int have_comm;
	int failed;             /* a collective was abandoned: leave the communicator alone */
	int helloed;
	size_t n;               /* the network's parameters (handshake) */
	int *counts, *displs;   /* (world) shard layout of the block, MPI ints */
	size_t *ucounts, *udispls;
	float *scratch;         /* host: zero1 shard, gossip neighbours and mean */
	size_t scratch_n;
	gf_comm table;          /* what the step stage's backend runs collectives through */
	/* NCCL */
	void *dl;
	const gf_comm_ops *nccl;
	void *ncomm;
	float *dscratch;        /* device scratch of gossip (2 n) */
} xchg;

/* ---- set-up ---- */

static int xc_create(gf_ctx *ctx, const gf_value *p, void **self)
{
	xchg *x = calloc(1, sizeof(*x));
	if (!x)
		return gf_fail(ctx, "out of memory");
	*self = x;
	x->ctx = ctx;
	const gf_run_info *run = gf_ctx_run(ctx);
	x->rank = run->rank;
	x->world = run->world;
	const char *mode = gf_param_str(p, "mode");
	if (gf_dist_mode_parse(mode, &x->mode)) /* the descriptor's choices are the modes it knows */
		return gf_fail(ctx, "parameter 'mode': %s", gf_errmsg());
	double mb = gf_param_num(p, "bucket_mb");
	x->rounds = (int)gf_param_int(p, "rounds");
	x->timeout = gf_param_num(p, "timeout");
	x->measure = gf_param_bool(p, "measure");
	/* open bounds, which a range lo..hi cannot say */
	if (mb == 0)
		return gf_fail(ctx, "parameter 'bucket_mb' is 0: a bucket must hold something (above 0, at most 4096)");
	if (x->timeout == 0)
		return gf_fail(ctx, "parameter 'timeout' is 0: the seconds a collective may stall must be above 0");
	x->bucket_mb = mb;
	x->bucket = (size_t)(mb * 1048576.0 / sizeof(float));
	if (x->bucket < 1)
		x->bucket = 1;
	x->counts = calloc((size_t)x->world, sizeof(int));
	x->displs = calloc((size_t)x->world, sizeof(int));
	x->ucounts = calloc((size_t)x->world, sizeof(size_t));
	x->udispls = calloc((size_t)x->world, sizeof(size_t));
	if (!x->counts || !x->displs || !x->ucounts || !x->udispls)
		return gf_fail(ctx, "out of memory");
	if (x->world == 1 || x->mode == GF_DIST_NONE)
		return 0;
	if (!gf_dist_mpi())
		return gf_fail(ctx, "mode %s across %d ranks needs an MPI world (start with mpirun or srun; processes "
		                    "started by hand with GANFLOW_RANK can only use TCP edges)", mode, x->world);
	/* collective: every rank creates its exchange stages in the same
	 * order (create() runs on the main thread, in declaration order) */
	if (gf_dist_comm_dup(&x->comm))
		return gf_fail(ctx, "%s", gf_errmsg());
	x->have_comm = 1;
	return 0;
}

static void xc_destroy(void *self)
{
	xchg *x = self;
	if (x->nccl) {
		if (x->dscratch)
			x->nccl->dev_free(x->ncomm, x->dscratch);
		x->nccl->destroy(x->ncomm);
	}
	if (x->dl)
		dlclose(x->dl);
	/* a communicator with an abandoned collective is left to the exit */
	if (x->have_comm && !x->failed && gf_dist_mpi())
		MPI_Comm_free(&x->comm);
	free(x->counts);
	free(x->displs);
	free(x->ucounts);
	free(x->udispls);
	free(x->scratch);
	free(x);
}

/* Shard layout of a block of n floats (gf_dist_shard) as MPI counts. */
static int layout(xchg *x, size_t n)
{
	if (n > (size_t)INT_MAX)
		return gf_fail(x->ctx, "a block of %zu floats exceeds what one MPI call moves (%d)", n, INT_MAX);
	for (int r = 0; r < x->world; r++) {
		size_t off, cnt;
		gf_dist_shard(n, r, x->world, &off, &cnt);
		x->counts[r] = (int)cnt;
		x->displs[r] = (int)off;
		x->ucounts[r] = cnt;
		x->udispls[r] = off;
	}
	return 0;
}

static int scratch(xchg *x, size_t n)
{
	if (x->scratch_n >= n)
		return 0;
	float *s = realloc(x->scratch, (n ? n : 1) * sizeof(float));
	if (!s)
		return gf_seterr(-ENOMEM, "out of memory (%zu floats of scratch)", n);
	x->scratch = s;
	x->scratch_n = n;
	return 0;
}

/* Waits for an MPI request on the thread of the stage that runs the
 * collective (ctx: its failures and hard stops). */
static int wait_req(xchg *x, gf_ctx *ctx, MPI_Request *req, const char *what)
{
	int rc = gf_dist_wait(ctx, req, x->timeout, what);
	if (rc)
		x->failed = 1;
	return rc;
}

/* ---- NCCL (device memory) ---- */

static int nccl_open(xchg *x, int device)
{
	/* beside the stage directory: build/stages/exchange.so -> build/,
	 * PREFIX/lib/ganflow/stages/exchange.so -> PREFIX/lib/ganflow/ */
	char here[4096] = "";
	Dl_info info;
	if (dladdr((const void *)&ganflow_stage, &info) && info.dli_fname) {
		snprintf(here, sizeof(here), "%s", info.dli_fname);
		for (int k = 0; k < 2; k++) {
			char *slash = strrchr(here, '/');
			if (slash)
				*slash = '\0';
		}
	}
	const char *dirs[] = { getenv("GANFLOW_COMM_PATH"), here, GF_COMM_BUILD_DIR, GF_COMM_INSTALL_DIR };
	char path[4200], errs[2048] = "";
	for (size_t i = 0; i < 4 && !x->dl; i++) {
		if (!dirs[i] || !dirs[i][0])
			continue;
		snprintf(path, sizeof(path), "%s/comm_nccl.so", dirs[i]);
		x->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		if (!x->dl)
			snprintf(errs + strlen(errs), sizeof(errs) - strlen(errs), "%s%s", errs[0] ? "; " : "", dlerror());
	}
	if (!x->dl)
		return gf_fail(x->ctx, "a step stage on a GPU needs the NCCL plugin comm_nccl.so (built with the CUDA "
		                       "toolkit and NCCL): %s", errs[0] ? errs : "not found");
	const gf_comm_ops *ops = dlsym(x->dl, GF_COMM_SYMBOL);
	if (!ops || ops->abi != GF_COMM_ABI || ops->size < sizeof(gf_comm_ops))
		return gf_fail(x->ctx, "comm_nccl.so: missing or foreign descriptor (abi %u, expected %u)",
		               ops ? ops->abi : 0, GF_COMM_ABI);
	char err[512];
	if (ops->create(&x->ncomm, x->have_comm ? &x->comm : NULL, x->rank, x->world, device, err, sizeof(err)))
		return gf_fail(x->ctx, "rank %d: NCCL communicator on GPU %d: %s", x->rank, device, err);
	x->nccl = ops;
	if (x->mode == GF_DIST_GOSSIP &&
	    ops->dev_alloc(x->ncomm, (void **)&x->dscratch, 2 * (x->n ? x->n : 1) * sizeof(float)))
		return gf_fail(x->ctx, "out of device memory for gossip's %zu floats of scratch: %s", 2 * x->n,
		               ops->error(x->ncomm));
	return 0;
}

/* A collective on device memory: queued on stream, nothing waited for. */
static int nccl_run(xchg *x, gf_coll_op op, void *p, size_t n, void *stream)
{
	if (!x->nccl)
		return gf_seterr(GF_EPARAM, "a collective on device memory, but the handshake named no GPU");
	if ((op == GF_COLL_MEAN_SHARD || op == GF_COLL_GATHER || op == GF_COLL_RING_MEAN) && n != x->n)
		return gf_seterr(GF_EPARAM, "a collective over a block of %zu floats; the network has %zu", n, x->n);
	int rc = 0, left = (x->rank + x->world - 1) % x->world, right = (x->rank + 1) % x->world;
	switch (op) {
	case GF_COLL_MEAN:
		rc = x->nccl->allreduce_avg(x->ncomm, p, n, stream);
		break;
	case GF_COLL_MEAN_SHARD:
		rc = x->nccl->reduce_scatter_avg(x->ncomm, p, x->ucounts, x->udispls, stream);
		break;
	case GF_COLL_GATHER:
		rc = x->nccl->allgatherv(x->ncomm, p, x->ucounts, x->udispls, stream);
		break;
	case GF_COLL_SUM_F64:
		rc = x->nccl->allreduce_sum_f64(x->ncomm, p, n, stream);
		break;
	case GF_COLL_RING_MEAN:
		for (int k = 0; k < x->rounds && !rc; k++)
			rc = x->nccl->ring_average(x->ncomm, p, x->dscratch, n, left, right, stream);
		break;
	default:
		return gf_seterr(GF_EPARAM, "unknown collective %d", (int)op);
	}
	return rc ? gf_seterr(GF_EDIST, "NCCL: %s", x->nccl->error(x->ncomm)) : 0;
}

/* ---- collectives on host memory (MPI) ----
 * Called on the thread of the step stage that runs them (ctx). */

static void scale(float *p, size_t n, float s)
{
	for (size_t i = 0; i < n; i++)
		p[i] *= s;
}

/* p (n values of type) <- their sum over the ranks, in place. */
static int mpi_sum(xchg *x, gf_ctx *ctx, void *p, size_t n, MPI_Datatype type, const char *what)
{
	if (n > (size_t)INT_MAX)
		return gf_seterr(GF_EPARAM, "%zu values are too many for one MPI call (lower bucket_mb)", n);
	MPI_Request req;
	if (MPI_Iallreduce(MPI_IN_PLACE, p, (int)n, type, MPI_SUM, x->comm, &req) != MPI_SUCCESS)
		return gf_fail(ctx, "MPI_Iallreduce failed");
	return wait_req(x, ctx, &req, what);
}

static int mpi_mean(xchg *x, gf_ctx *ctx, float *p, size_t n)
{
	int rc = mpi_sum(x, ctx, p, n, MPI_FLOAT, "all-reducing gradients");
	if (rc)
		return rc;
	scale(p, n, 1.0f / (float)x->world);
	return 0;
}

static int mpi_mean_shard(xchg *x, gf_ctx *ctx, float *p)
{
	size_t off = x->udispls[x->rank], cnt = x->ucounts[x->rank];
	int rc = scratch(x, cnt);
	if (rc)
		return rc;
	MPI_Request req;
	if (MPI_Ireduce_scatter(p, x->scratch, x->counts, MPI_FLOAT, MPI_SUM, x->comm, &req) != MPI_SUCCESS)
		return gf_fail(ctx, "MPI_Ireduce_scatter failed");
	if ((rc = wait_req(x, ctx, &req, "reduce-scattering gradients")))
		return rc;
	float inv = 1.0f / (float)x->world;
	for (size_t i = 0; i < cnt; i++)
		p[off + i] = x->scratch[i] * inv;
	return 0;
}

static int mpi_gather(xchg *x, gf_ctx *ctx, float *p)
{
	MPI_Request req;
	if (MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, p, x->counts, x->displs, MPI_FLOAT, x->comm, &req) !=
	    MPI_SUCCESS)
		return gf_fail(ctx, "MPI_Iallgatherv failed");
	return wait_req(x, ctx, &req, "all-gathering parameters");
}

/* Second largest eigenvalue magnitude of the ring's mixing matrix (1/3 on
 * the diagonal and for each neighbour): the factor by which one round
 * shrinks the distance to the mean (at most; exactly when the deviation
 * lies in that eigenspace, as it always does for 2 and 4 ranks). */
static double ring_lambda(int w)
{
	if (w <= 1)
		return 0;
	if (w == 2)
		return 1.0 / 3.0;
	double best = 0;
	for (int k = 1; k < w; k++) {
		double l = fabs((1.0 + 2.0 * cos(2.0 * M_PI * k / w)) / 3.0);
		if (l > best)
			best = l;
	}
	return best;
}

/* Sum over ranks of ||x_i - mean||^2 (measure = true only: costs an
 * all-reduce of the whole block). */
static int distance(xchg *x, gf_ctx *ctx, const float *p, size_t n, double *out)
{
	float *mean = x->scratch + 2 * n;
	MPI_Request req;
	if (MPI_Iallreduce(p, mean, (int)n, MPI_FLOAT, MPI_SUM, x->comm, &req) != MPI_SUCCESS)
		return gf_fail(ctx, "MPI_Iallreduce failed");
	int rc = wait_req(x, ctx, &req, "measuring the distance to the mean");
	if (rc)
		return rc;
	double d = 0, inv = 1.0 / x->world;
	for (size_t i = 0; i < n; i++) {
		double e = (double)p[i] - (double)mean[i] * inv;
		d += e * e;
	}
	*out = d;
	if (MPI_Iallreduce(MPI_IN_PLACE, out, 1, MPI_DOUBLE, MPI_SUM, x->comm, &req) != MPI_SUCCESS)
		return gf_fail(ctx, "MPI_Iallreduce failed");
	return wait_req(x, ctx, &req, "measuring the distance to the mean");
}

static int mpi_ring_mean(xchg *x, gf_ctx *ctx, float *p, size_t n, int64_t step)
{
	double lambda = ring_lambda(x->world);
	int left = (x->rank + x->world - 1) % x->world, right = (x->rank + 1) % x->world;
	int rc;
	if (n > (size_t)INT_MAX)
		return gf_seterr(GF_EPARAM, "a block of %zu floats is too large for MPI", n);
	if ((rc = scratch(x, (x->measure ? 3 : 2) * n)))
		return rc;
	float *l = x->scratch, *r = x->scratch + n;
	double before = 0, after = 0;
	if (x->measure && (rc = distance(x, ctx, p, n, &before)))
		return rc;
	for (int k = 0; k < x->rounds; k++) {
		MPI_Request req[4];
		/* the tag is the round: messages of one pair stay in order anyway */
		if (MPI_Irecv(l, (int)n, MPI_FLOAT, left, k, x->comm, &req[0]) != MPI_SUCCESS ||
		    MPI_Irecv(r, (int)n, MPI_FLOAT, right, k, x->comm, &req[1]) != MPI_SUCCESS ||
		    MPI_Isend(p, (int)n, MPI_FLOAT, left, k, x->comm, &req[2]) != MPI_SUCCESS ||
		    MPI_Isend(p, (int)n, MPI_FLOAT, right, k, x->comm, &req[3]) != MPI_SUCCESS)
			return gf_fail(ctx, "MPI point-to-point with the ring neighbours failed");
		for (int i = 0; i < 4; i++)
			if ((rc = wait_req(x, ctx, &req[i], i < 2 ? "receiving a neighbour's parameters"
			                                            : "sending parameters to a neighbour")))
				return rc;
		for (size_t i = 0; i < n; i++)
			p[i] = (l[i] + p[i] + r[i]) / 3.0f;
		if (x->measure) {
			if ((rc = distance(x, ctx, p, n, &after)))
				return rc;
			double f = before > 0 ? sqrt(after / before) : 0;
			if (x->rank == 0)
				gf_info(x->ctx, "gossip step %lld round %d: distance to the mean %.6g -> %.6g (factor %.4f; "
				                "ring averaging predicts %.4f)",
				        (long long)step, k + 1, sqrt(before), sqrt(after), f, lambda);
			before = after;
		}
	}
	return 0;
}

/* The communicator's run (gf_comm): MPI for host memory, NCCL for a GPU's. */
static int comm_run(const gf_comm *comm, gf_coll_op op, void *p, size_t n, gf_device device, void *stream)
{
	xchg *x = comm->impl;
	gf_ctx *ctx = comm->caller ? comm->caller : x->ctx;
	if (x->world == 1 || x->mode == GF_DIST_NONE)
		return 0; /* nothing crosses ranks */
	if (device != GF_CPU)
		return nccl_run(x, op, p, n, stream);
	if ((op == GF_COLL_MEAN_SHARD || op == GF_COLL_GATHER) && n != x->n)
		return gf_seterr(GF_EPARAM, "a collective over a block of %zu floats; the network has %zu", n, x->n);
	switch (op) {
	case GF_COLL_MEAN:
		return mpi_mean(x, ctx, p, n);
	case GF_COLL_MEAN_SHARD:
		return mpi_mean_shard(x, ctx, p);
	case GF_COLL_GATHER:
		return mpi_gather(x, ctx, p);
	case GF_COLL_SUM_F64:
		return mpi_sum(x, ctx, p, n, MPI_DOUBLE, "summing the gradient norm");
	case GF_COLL_RING_MEAN:
		return mpi_ring_mean(x, ctx, p, n, comm->step);
	default:
		return gf_seterr(GF_EPARAM, "unknown collective %d", (int)op);
	}
}

/* ---- the handshake ---- */

static int op_hello(xchg *x, gf_msg *m, gf_msg *ack)
{
	if (x->helloed)
		return gf_fail(x->ctx, "a second handshake: connect one step stage to each exchange stage");
	int64_t n = (int64_t)gf_msg_scalar(m, "params", -1);
	if (n < 0)
		return gf_fail(x->ctx, "handshake without the network's parameter count");
	x->n = (size_t)n;
	if (x->have_comm) {
		int64_t *all = calloc((size_t)x->world, sizeof(int64_t));
		if (!all)
			return gf_fail(x->ctx, "out of memory");
		MPI_Request req;
		int rc = MPI_Iallgather(&n, 1, MPI_INT64_T, all, 1, MPI_INT64_T, x->comm, &req) == MPI_SUCCESS
		                 ? wait_req(x, x->ctx, &req, "comparing the networks' parameter counts")
		                 : gf_fail(x->ctx, "MPI_Iallgather failed");
		for (int r = 1; !rc && r < x->world; r++)
			if (all[r] != all[0])
				rc = gf_fail(x->ctx, "mismatched pipelines: the network of rank %d has %lld parameters, rank 0's "
				                     "has %lld (every rank must build the same networks)",
				             r, (long long)all[r], (long long)all[0]);
		free(all);
		if (rc)
			return rc;
	}
	if (layout(x, x->n))
		return GF_EFAIL;
	gf_device dev = (gf_device)(int)gf_msg_scalar(m, "device", GF_CPU);
	if (dev != GF_CPU && x->world > 1 && x->mode != GF_DIST_NONE) {
		int rc = nccl_open(x, (int)gf_msg_scalar(m, "device_index", 0));
		if (rc)
			return rc;
		if (x->measure && x->rank == 0)
			gf_warn(x->ctx, "measure = true measures host runs only: on a GPU the gossip rounds run inside the "
			                "captured step");
	}
	x->table = (gf_comm){ .rank = x->rank, .world = x->world, .run = comm_run, .impl = x };
	x->helloed = 1;
	gf_msg_set_scalar(ack, "mode", (double)x->mode);
	gf_msg_set_scalar(ack, "bucket", (double)x->bucket);
	gf_msg_set_scalar(ack, "rounds", (double)x->rounds);
	gf_msg_set_scalar(ack, "rank", (double)x->rank);
	gf_msg_set_scalar(ack, "world", (double)x->world);
	gf_msg_set_scalar(ack, "pid", (double)getpid());
	int64_t size[1] = { (int64_t)sizeof(gf_comm) };
	ack->t[0] = gf_tensor_make(&x->table, GF_U8, 1, size); /* a view: the table stays this stage's */
	ack->ntensors = 1;
	char buckets[128] = "";
	if (x->mode == GF_DIST_ALLREDUCE) /* the value the pipeline gave, not the word */
		snprintf(buckets, sizeof(buckets), ", buckets of up to %g MiB: bucket_mb = %g, %zu floats", x->bucket_mb,
		         x->bucket_mb, x->bucket);
	if (x->rank == 0)
		gf_info(x->ctx, "%s over %d rank%s (%zu parameters%s%s)", gf_dist_mode_name(x->mode), x->world,
		        x->world == 1 ? "" : "s", x->n, buckets, x->nccl ? ", NCCL" : "");
	return 0;
}

/* ---- the loop ---- */

static void nap(long ns)
{
	struct timespec ts = { 0, ns };
	nanosleep(&ts, NULL);
}

/* The next request, watching the NCCL communicator meanwhile: its
 * collectives run on the step stage's streams, where nothing on the host
 * waits for them with a timeout, so a peer lost mid-collective would
 * leave the step waiting for ever. A hard stop, an asynchronous NCCL error
 * or a rank that stops answering the probe (asked every `timeout`
 * seconds) aborts the communicator, which ends those kernels. */
static int watch(xchg *x, gf_msg **m)
{
	double probe_at = gf_now() + x->timeout;
	for (;;) {
		int rc = gf_try_pop(x->ctx, IN_GRADS, m);
		if (rc != -EAGAIN) {
			if (rc == GF_ESTOP)
				x->nccl->abort(x->ncomm);
			return rc;
		}
		char err[256];
		if (x->nccl->async_error(x->ncomm, err, sizeof(err))) {
			x->nccl->abort(x->ncomm);
			return gf_fail(x->ctx, "rank %d: %s (communicator aborted)", x->rank, err);
		}
		if (gf_dist_should_abort(x->ctx)) {
			x->nccl->abort(x->ncomm);
			return GF_ESTOP;
		}
		if (gf_now() >= probe_at) {
			int lost[8];
			if (gf_dist_probe(gf_dist_probe_wait(), lost, 8) > 0) {
				x->nccl->abort(x->ncomm);
				return gf_fail(x->ctx, "rank %d stopped responding (NCCL communicator aborted)", lost[0]);
			}
			probe_at = gf_now() + x->timeout;
		}
		nap(10000000L);
	}
}

static int xc_run(void *self, gf_ctx *ctx)
{
	xchg *x = self;
	for (;;) {
		gf_msg *m, *ack;
		int rc = x->nccl ? watch(x, &m) : gf_pop(ctx, IN_GRADS, &m);
		if (rc == GF_EEOF)
			return 0;
		if (rc)
			return rc;
		int op = (int)m->key;
		if (op != GF_XCHG_HELLO) {
			gf_msg_release(m);
			return gf_fail(ctx, "request %d: the exchange protocol has only the handshake (the collectives run "
			                    "in the step stage's own steps)", op);
		}
		if ((rc = gf_msg_get(ctx, OUT_REDUCED, &ack))) {
			gf_msg_release(m);
			return rc;
		}
		rc = op_hello(x, m, ack);
		ack->key = (uint64_t)op;
		ack->step = m->step;
		gf_msg_release(m);
		if (rc) {
			gf_msg_release(ack);
			return rc;
		}
		if ((rc = gf_push(ctx, OUT_REDUCED, ack)))
			return rc;
	}
}

static const gf_port_desc inputs[] = {
	{ "grads", "grads", 0, "the handshake of g_step / d_step (the network's size, its backend's device)" },
};

static const gf_port_desc outputs[] = {
	{ "reduced", "grads", 0, "the handshake's answer: the mode and this stage's communicator" },
};

static const gf_param_desc params[] = {
	{ "mode", GF_PARAM_STR, "allreduce", "allreduce, zero1, gossip or none", "allreduce|zero1|gossip|none" },
	{ "bucket_mb", GF_PARAM_NUM, "4", "allreduce: gradient bucket size in MiB, above 0 (communication starts per bucket)", "0..4096" },
	{ "rounds", GF_PARAM_INT, "1", "gossip: averaging rounds with the ring neighbours per step", "1..64" },
	{ "measure", GF_PARAM_BOOL, "false", "gossip: measure and log the distance to the mean each round (costly)", NULL },
	{ "timeout", GF_PARAM_NUM, "60", "seconds (above 0) a collective may stall before the ranks are probed (a dead one fails the run)", "0.." },
};

GF_STAGE_EXPORT const gf_stage_desc ganflow_stage = {
	.abi = GF_STAGE_ABI,
	.size = sizeof(gf_stage_desc),
	.name = "exchange",
	.doc = "exchanges one network's gradients or parameters across data-parallel ranks (MPI on CPU, NCCL on GPU)",
	.inputs = inputs,
	.ninputs = 1,
	.outputs = outputs,
	.noutputs = 1,
	.params = params,
	.nparams = sizeof(params) / sizeof(params[0]),
	.create = xc_create,
	.run = xc_run,
	.destroy = xc_destroy,
};
