/* exchange: the gradient / parameter exchange of one network across
 * data-parallel ranks, on its own thread.
 *
 * A pipeline puts one exchange stage per trained network on every rank
 * and joins it to the g_step or d_step that owns the network:
 *
 *	local xd = gf.stage "exchange" { name = "xd", mode = "allreduce", bucket_mb = 4 }
 *	gf.connect(d.grads, xd.grads); gf.connect(xd.reduced, d.reduced)
 *
 * The protocol is in <ganflow/dist.h>: requests carry views of the
 * network's blocks, the exchange works on them in place and acknowledges.
 * Modes:
 *   allreduce  buckets of gradients, all-reduced (sum, then 1/world) as the
 *              backward pass produces them, so communication overlaps the
 *              rest of the backward;
 *   zero1      reduce-scatter of the gradient block, all-gather of the
 *              parameters after each rank updated its shard;
 *   gossip     DPOSG: `rounds` rounds of averaging the parameters with the
 *              two ring neighbours (x <- (x_left + x + x_right) / 3), no
 *              central node;
 *   none       acknowledges without communicating (per-class training
 *              keeps a pipeline's shape; nothing crosses ranks).
 * Host tensors go through MPI (non-blocking collectives on a communicator
 * of its own, polled, so a dead rank is found by the liveness probe after
 * `timeout` seconds and named); device tensors through NCCL (comm_nccl.so,
 * loaded on first use). At the handshake the ranks compare their
 * networks' parameter counts: mismatched pipelines fail there, naming both.
 */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

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
	size_t n;               /* the network's parameters (handshake) */
	int *counts, *displs;   /* (world) shard layout of the block, MPI ints */
	float *scratch;         /* host: zero1 shard, gossip neighbours and mean */
	size_t scratch_n;
	/* NCCL */
	void *dl;
	const gf_comm_ops *nccl;
	void *ncomm;
	int device;
	float *dscratch;        /* device scratch (2 n) */
	size_t *ucounts, *udispls;
	uint64_t ops;
	double busy_total;
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
	x->device = -1;
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
		return gf_fail(x->ctx, "out of memory (%zu floats of scratch)", n);
	x->scratch = s;
	x->scratch_n = n;
	return 0;
}

static int wait_req(xchg *x, MPI_Request *req, const char *what)
{
	int rc = gf_dist_wait(x->ctx, req, x->timeout, what);
	if (rc)
		x->failed = 1;
	return rc;
}

/* ---- NCCL (device tensors) ---- */

static int abort_cb(void *ud)
{
	return gf_dist_should_abort(ud);
}

static int nccl_open(xchg *x, int device)
{
	if (x->nccl)
		return 0;
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
		return gf_fail(x->ctx, "device tensors need the NCCL plugin comm_nccl.so (built with the CUDA toolkit and "
		                       "NCCL): %s", errs[0] ? errs : "not found");
	const gf_comm_ops *ops = dlsym(x->dl, GF_COMM_SYMBOL);
	if (!ops || ops->abi != GF_COMM_ABI || ops->size < sizeof(gf_comm_ops))
		return gf_fail(x->ctx, "comm_nccl.so: missing or foreign descriptor (abi %u, expected %u)",
		               ops ? ops->abi : 0, GF_COMM_ABI);
	char err[512];
	if (ops->create(&x->ncomm, x->have_comm ? &x->comm : NULL, x->rank, x->world, device, err, sizeof(err)))
		return gf_fail(x->ctx, "rank %d: NCCL communicator on GPU %d: %s", x->rank, device, err);
	x->nccl = ops;
	x->device = device;
	return 0;
}

static int nccl_wait(xchg *x, const char *what)
{
	char err[512];
	if (x->nccl->wait(x->ncomm, x->timeout, abort_cb, x->ctx, err, sizeof(err)) == 0)
		return 0;
	x->failed = 1;
	if (gf_dist_should_abort(x->ctx))
		return GF_ESTOP;
	int lost[8];
	int n = gf_dist_mpi() ? gf_dist_probe(gf_dist_probe_wait(), lost, 8) : 0;
	if (n > 0)
		return gf_fail(x->ctx, "rank %d stopped responding (no message for %.0f s while %s): %s", lost[0], x->timeout,
		               what, err);
	return gf_fail(x->ctx, "rank %d: NCCL failed while %s: %s", x->rank, what, err);
}

/* ---- operations ---- */

static int op_hello(xchg *x, gf_msg *m, gf_msg *ack)
{
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
		                 ? wait_req(x, &req, "comparing the networks' parameter counts")
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
	gf_msg_set_scalar(ack, "mode", (double)x->mode);
	gf_msg_set_scalar(ack, "bucket", (double)x->bucket);
	gf_msg_set_scalar(ack, "rounds", (double)x->rounds);
	gf_msg_set_scalar(ack, "rank", (double)x->rank);
	gf_msg_set_scalar(ack, "world", (double)x->world);
	if (x->rank == 0 && x->mode == GF_DIST_ALLREDUCE)
		gf_info(x->ctx, "%s over %d rank%s (%zu parameters, buckets of up to %g MiB: bucket_mb = %g, %zu floats)",
		        gf_dist_mode_name(x->mode), x->world, x->world == 1 ? "" : "s", x->n, x->bucket_mb, x->bucket_mb,
		        x->bucket);
	else if (x->rank == 0)
		gf_info(x->ctx, "%s over %d rank%s (%zu parameters)", gf_dist_mode_name(x->mode), x->world,
		        x->world == 1 ? "" : "s", x->n);
	return 0;
}

static void scale(float *p, size_t n, float s)
{
	for (size_t i = 0; i < n; i++)
		p[i] *= s;
}

static int op_reduce(xchg *x, gf_tensor *t)
{
	size_t n = (size_t)gf_tensor_numel(t);
	float *p = t->data;
	if (x->world == 1)
		return 0;
	double moved = 2.0 * (x->world - 1) / x->world * (double)n * sizeof(float);
	if (t->device != GF_CPU) {
		int rc = nccl_open(x, t->device_index);
		if (rc)
			return rc;
		if (x->nccl->allreduce_avg(x->ncomm, p, n))
			return gf_fail(x->ctx, "ncclAllReduce failed");
		if ((rc = nccl_wait(x, "all-reducing gradients")))
			return rc;
		gf_dist_count(GF_TRAFFIC_GRADS, (uint64_t)moved, 1);
		return 0;
	}
	if (n > (size_t)INT_MAX)
		return gf_fail(x->ctx, "bucket of %zu floats too large for MPI (lower bucket_mb)", n);
	MPI_Request req;
	if (MPI_Iallreduce(MPI_IN_PLACE, p, (int)n, MPI_FLOAT, MPI_SUM, x->comm, &req) != MPI_SUCCESS)
		return gf_fail(x->ctx, "MPI_Iallreduce failed");
	int rc = wait_req(x, &req, "all-reducing gradients");
	if (rc)
		return rc;
	scale(p, n, 1.0f / (float)x->world);
	gf_dist_count(GF_TRAFFIC_GRADS, (uint64_t)moved, 1);
	return 0;
}

static int op_reduce_scatter(xchg *x, gf_tensor *t, gf_msg *ack)
{
	size_t n = (size_t)gf_tensor_numel(t);
	float *p = t->data;
	if (n != x->n)
		return gf_fail(x->ctx, "reduce-scatter of %zu floats, the network has %zu", n, x->n);
	size_t off = x->udispls[x->rank], cnt = x->ucounts[x->rank];
	double sumsq = 0;
	int rc;
	if (t->device != GF_CPU) {
		if ((rc = nccl_open(x, t->device_index)))
			return rc;
		if (x->world > 1) {
			if (!x->dscratch && x->nccl->dev_alloc(x->ncomm, (void **)&x->dscratch, 2 * (n ? n : 1) * sizeof(float)))
				return gf_fail(x->ctx, "out of device memory (%zu floats)", 2 * n);
			if (x->nccl->reduce_scatter_avg(x->ncomm, p, x->dscratch, x->ucounts, x->udispls) ||
			    x->nccl->copy(x->ncomm, p + off, x->dscratch, cnt * sizeof(float), 2))
				return gf_fail(x->ctx, "NCCL reduce-scatter failed");
			if ((rc = nccl_wait(x, "reduce-scattering gradients")))
				return rc;
		}
		if (x->nccl->sumsq(x->ncomm, p + off, cnt, &sumsq))
			return gf_fail(x->ctx, "gradient norm on the device failed");
	} else {
		if (x->world > 1) {
			if ((rc = scratch(x, cnt)))
				return rc;
			MPI_Request req;
			if (MPI_Ireduce_scatter(p, x->scratch, x->counts, MPI_FLOAT, MPI_SUM, x->comm, &req) != MPI_SUCCESS)
				return gf_fail(x->ctx, "MPI_Ireduce_scatter failed");
			if ((rc = wait_req(x, &req, "reduce-scattering gradients")))
				return rc;
			float inv = 1.0f / (float)x->world;
			for (size_t i = 0; i < cnt; i++)
				p[off + i] = x->scratch[i] * inv;
		}
		for (size_t i = 0; i < cnt; i++)
			sumsq += (double)p[off + i] * (double)p[off + i];
	}
	if (x->world > 1) {
		MPI_Request req;
		if (MPI_Iallreduce(MPI_IN_PLACE, &sumsq, 1, MPI_DOUBLE, MPI_SUM, x->comm, &req) != MPI_SUCCESS)
			return gf_fail(x->ctx, "MPI_Iallreduce failed");
		if ((rc = wait_req(x, &req, "summing the gradient norm")))
			return rc;
		gf_dist_count(GF_TRAFFIC_GRADS, (uint64_t)((double)(x->world - 1) / x->world * (double)n * sizeof(float)), 1);
	}
	gf_msg_set_scalar(ack, "sumsq", sumsq);
	return 0;
}

static int op_allgather(xchg *x, gf_tensor *t)
{
	size_t n = (size_t)gf_tensor_numel(t);
	if (x->world == 1)
		return 0;
	int rc;
	if (n != x->n && (rc = layout(x, n)))
		return rc;
	if (t->device != GF_CPU) {
		if ((rc = nccl_open(x, t->device_index)))
			return rc;
		if (x->nccl->allgatherv(x->ncomm, t->data, x->ucounts, x->udispls))
			return gf_fail(x->ctx, "NCCL all-gather failed");
		rc = nccl_wait(x, "all-gathering parameters");
	} else {
		MPI_Request req;
		if (MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, t->data, x->counts, x->displs, MPI_FLOAT, x->comm,
		                    &req) != MPI_SUCCESS)
			return gf_fail(x->ctx, "MPI_Iallgatherv failed");
		rc = wait_req(x, &req, "all-gathering parameters");
	}
	if (n != x->n && layout(x, x->n))
		return GF_EFAIL;
	if (!rc)
		gf_dist_count(GF_TRAFFIC_PARAMS, (uint64_t)((double)(x->world - 1) / x->world * (double)n * sizeof(float)), 1);
	return rc;
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
static int distance(xchg *x, const float *p, size_t n, double *out)
{
	float *mean = x->scratch + 2 * n;
	MPI_Request req;
	if (MPI_Iallreduce(p, mean, (int)n, MPI_FLOAT, MPI_SUM, x->comm, &req) != MPI_SUCCESS)
		return gf_fail(x->ctx, "MPI_Iallreduce failed");
	int rc = wait_req(x, &req, "measuring the distance to the mean");
	if (rc)
		return rc;
	double d = 0, inv = 1.0 / x->world;
	for (size_t i = 0; i < n; i++) {
		double e = (double)p[i] - (double)mean[i] * inv;
		d += e * e;
	}
	*out = d;
	if (MPI_Iallreduce(MPI_IN_PLACE, out, 1, MPI_DOUBLE, MPI_SUM, x->comm, &req) != MPI_SUCCESS)
		return gf_fail(x->ctx, "MPI_Iallreduce failed");
	return wait_req(x, &req, "measuring the distance to the mean");
}

static int op_gossip(xchg *x, gf_tensor *t, int64_t step, gf_msg *ack)
{
	size_t n = (size_t)gf_tensor_numel(t);
	float *p = t->data;
	double lambda = ring_lambda(x->world);
	gf_msg_set_scalar(ack, "predicted", lambda);
	if (x->world == 1)
		return 0;
	int left = (x->rank + x->world - 1) % x->world, right = (x->rank + 1) % x->world;
	int rc;
	if (t->device != GF_CPU) {
		if ((rc = nccl_open(x, t->device_index)))
			return rc;
		if (!x->dscratch && x->nccl->dev_alloc(x->ncomm, (void **)&x->dscratch, 2 * (n ? n : 1) * sizeof(float)))
			return gf_fail(x->ctx, "out of device memory (%zu floats)", 2 * n);
		for (int k = 0; k < x->rounds; k++) {
			if (x->nccl->ring_average(x->ncomm, p, x->dscratch, n, left, right))
				return gf_fail(x->ctx, "NCCL gossip round failed");
			if ((rc = nccl_wait(x, "averaging with the ring neighbours")))
				return rc;
		}
		gf_dist_count(GF_TRAFFIC_PARAMS, (uint64_t)x->rounds * 2 * n * sizeof(float), (uint64_t)x->rounds);
		return 0;
	}
	if (n > (size_t)INT_MAX)
		return gf_fail(x->ctx, "a block of %zu floats is too large for MPI", n);
	if ((rc = scratch(x, (x->measure ? 3 : 2) * n)))
		return rc;
	float *l = x->scratch, *r = x->scratch + n;
	double before = 0, after = 0, logsum = 0;
	int measured = 0;
	if (x->measure && (rc = distance(x, p, n, &before)))
		return rc;
	for (int k = 0; k < x->rounds; k++) {
		MPI_Request req[4];
		/* the tag is the round: messages of one pair stay in order anyway */
		if (MPI_Irecv(l, (int)n, MPI_FLOAT, left, k, x->comm, &req[0]) != MPI_SUCCESS ||
		    MPI_Irecv(r, (int)n, MPI_FLOAT, right, k, x->comm, &req[1]) != MPI_SUCCESS ||
		    MPI_Isend(p, (int)n, MPI_FLOAT, left, k, x->comm, &req[2]) != MPI_SUCCESS ||
		    MPI_Isend(p, (int)n, MPI_FLOAT, right, k, x->comm, &req[3]) != MPI_SUCCESS)
			return gf_fail(x->ctx, "MPI point-to-point with the ring neighbours failed");
		for (int i = 0; i < 4; i++)
			if ((rc = wait_req(x, &req[i], i < 2 ? "receiving a neighbour's parameters"
			                                       : "sending parameters to a neighbour")))
				return rc;
		for (size_t i = 0; i < n; i++)
			p[i] = (l[i] + p[i] + r[i]) / 3.0f;
		if (x->measure) {
			if ((rc = distance(x, p, n, &after)))
				return rc;
			double f = before > 0 ? sqrt(after / before) : 0;
			if (x->rank == 0)
				gf_info(x->ctx, "gossip step %lld round %d: distance to the mean %.6g -> %.6g (factor %.4f; "
				                "ring averaging predicts %.4f)",
				        (long long)step, k + 1, sqrt(before), sqrt(after), f, lambda);
			if (before > 0 && after > 0) {
				logsum += log(f);
				measured++;
			}
			before = after;
		}
	}
	if (measured)
		gf_msg_set_scalar(ack, "factor", exp(logsum / measured));
	gf_dist_count(GF_TRAFFIC_PARAMS, (uint64_t)x->rounds * 2 * n * sizeof(float), (uint64_t)x->rounds);
	return 0;
}

/* ---- the loop ---- */

static int xc_run(void *self, gf_ctx *ctx)
{
	xchg *x = self;
	for (;;) {
		gf_msg *m, *ack;
		int rc = gf_pop(ctx, IN_GRADS, &m);
		if (rc == GF_EEOF)
			return 0;
		if (rc)
			return rc;
		if ((rc = gf_msg_get(ctx, OUT_REDUCED, &ack))) {
			gf_msg_release(m);
			return rc;
		}
		double t0 = gf_now();
		int op = (int)m->key;
		gf_tensor *t = &m->t[0];
		if (op != GF_XCHG_HELLO && (m->ntensors < 1 || t->dtype != GF_F32 || !t->data)) {
			gf_msg_release(m);
			gf_msg_release(ack);
			return gf_fail(ctx, "request %d without an f32 tensor", op);
		}
		if (op != GF_XCHG_HELLO && x->n == 0 && x->mode != GF_DIST_NONE && gf_tensor_numel(t) > 0) {
			gf_msg_release(m);
			gf_msg_release(ack);
			return gf_fail(ctx, "request %d before the handshake", op);
		}
		if (op == GF_XCHG_HELLO)
			rc = op_hello(x, m, ack);
		else if (x->mode == GF_DIST_NONE)
			rc = 0; /* per-class: acknowledged, nothing crosses ranks */
		else if (op == GF_XCHG_REDUCE)
			rc = op_reduce(x, t);
		else if (op == GF_XCHG_REDUCE_SCATTER)
			rc = op_reduce_scatter(x, t, ack);
		else if (op == GF_XCHG_ALLGATHER)
			rc = op_allgather(x, t);
		else if (op == GF_XCHG_GOSSIP)
			rc = op_gossip(x, t, m->step, ack);
		else
			rc = gf_fail(ctx, "unknown request %d", op);
		double busy = gf_now() - t0;
		ack->key = (uint64_t)op;
		ack->pos = m->pos;
		ack->step = m->step;
		gf_msg_set_scalar(ack, "busy", busy);
		gf_msg_release(m);
		if (rc) {
			gf_msg_release(ack);
			return rc;
		}
		x->ops++;
		x->busy_total += busy;
		if ((rc = gf_push(ctx, OUT_REDUCED, ack)))
			return rc;
	}
}

static const gf_port_desc inputs[] = {
	{ "grads", "grads", 0, "requests of g_step / d_step: gradient buckets, shards, parameters (views)" },
};

static const gf_port_desc outputs[] = {
	{ "reduced", "grads", 0, "one acknowledgement per request, in order" },
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
