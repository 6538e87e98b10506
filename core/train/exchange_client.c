/* The step side of the gradient exchange: what g_step and d_step do to
 * train one network across data-parallel ranks with an `exchange` stage.
 * See <ganflow/dist.h> for the handshake and exchange_client.h for the
 * calls.
 *
 * The handshake hands this client the exchange stage's communicator (a
 * gf_comm); every collective then runs through the step's own backend
 * (its `collective` op), among the step's ops: on the CPU when called
 * (MPI, on this stage's thread), on a GPU queued on a side stream of the
 * step's (NCCL), waited for in stream order, so a captured step captures
 * its exchange too (docs/dist.md, docs/cuda.md).
 *
 * All-reduce: the network's gradient hook reports each layer's gradients
 * as the backward pass completes them (from the end of the block towards
 * offset 0); ranges are grouped into buckets of the exchange's bucket size
 * and each bucket is all-reduced at once, in place, while (on a GPU) the
 * backward pass goes on below it. Before clipping and the optimiser step
 * the update waits for them all.
 *
 * ZeRO-1: the optimiser keeps state for this rank's shard only; after the
 * backward the whole gradient block is reduce-scattered, the shard's
 * squared norm summed across ranks (for clipping and the metrics), the
 * shard updated and the parameters all-gathered. Checkpoints gather the
 * optimiser state into a temporary full optimiser (collective), so a
 * checkpoint looks like any other.
 *
 * Gossip (DPOSG): local clip and update (with optimistic Adam in the
 * pipelines), then `rounds` rounds of averaging the parameters with the
 * ring neighbours.
 *
 * Without an exchange (ports unconnected) every call does exactly what a
 * single-process step does.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exchange_client.h"
#include <ganflow/err.h>
#include <ganflow/log.h>
#include <ganflow/train.h>

struct gf_exchange_client {
	gf_ctx *ctx;
	int gport, rport;       /* grads (out) and reduced (in) ports; -1 unconnected */
	gf_net *net;
	gf_optim **opt;         /* the stage's optimiser pointer (ZeRO-1 swaps it) */
	char what[32];
	gf_dist_mode mode;
	int rank, world, rounds;
	size_t n;               /* parameters */
	size_t bucket;          /* floats per all-reduce bucket */
	size_t shard_off, shard_n;
	gf_comm *comm;          /* the exchange stage's (handshake) */
	double *sumsq_dev;      /* the host update's norm, a double in the backend's memory */
	/* all-reduce during backward */
	int armed;              /* the hook was set for this update */
	size_t lo;              /* [lo, n) of the grads block is final */
	size_t sent_hi;         /* [lo, sent_hi) is final and not yet sent */
	int broken;             /* a range came out of order: send the rest at the end */
	double wait;            /* seconds in collectives this update */
};

/* ---- collectives ---- */

/* Bytes a collective moves, as the ring algorithms count them, into the
 * run's traffic counters. */
static void count(gf_exchange_client *d, gf_coll_op op, size_t n)
{
	double p = d->world, b = (double)n * sizeof(float);
	if (d->world < 2)
		return;
	if (op == GF_COLL_MEAN)
		gf_dist_count(GF_TRAFFIC_GRADS, (uint64_t)(2.0 * (p - 1) / p * b), 1);
	else if (op == GF_COLL_MEAN_SHARD)
		gf_dist_count(GF_TRAFFIC_GRADS, (uint64_t)((p - 1) / p * b), 1);
	else if (op == GF_COLL_GATHER)
		gf_dist_count(GF_TRAFFIC_PARAMS, (uint64_t)((p - 1) / p * b), 1);
	else if (op == GF_COLL_RING_MEAN)
		gf_dist_count(GF_TRAFFIC_PARAMS, (uint64_t)d->rounds * 2 * (uint64_t)b, (uint64_t)d->rounds);
}

/* op on x (n elements of the backend's memory) through the step's
 * backend, ordered among the step's ops; GF_COLL_WAIT: later ops wait for
 * every one launched. The time it held this thread counts as the
 * update's communication wait. */
static int coll(gf_exchange_client *d, gf_coll_op op, void *x, size_t n, const char *what)
{
	gf_backend *be = gf_net_backend(d->net);
	double t0 = gf_now();
	int rc = be->ops->collective(be, d->comm, op, x, n);
	d->wait += gf_now() - t0;
	if (rc)
		return rc == GF_EFAIL || rc == GF_ESTOP ? rc : gf_fail(d->ctx, "%s: %s: %s", d->what, what, gf_errmsg());
	count(d, op, n);
	return 0;
}

/* ---- the gradient hook ---- */

static int on_grads(void *ud, size_t off, size_t count)
{
	gf_exchange_client *d = ud;
	if (d->broken)
		return 0;
	if (off + count != d->lo) {
		d->broken = 1; /* not the layout the bucketing expects: send the rest at the end */
		return 0;
	}
	d->lo = off;
	if (d->sent_hi - d->lo < d->bucket)
		return 0;
	float *g = gf_net_block(d->net, GF_GRADS, NULL);
	int rc = coll(d, GF_COLL_MEAN, g + d->lo, d->sent_hi - d->lo, "all-reducing gradients");
	d->sent_hi = d->lo;
	return rc;
}

/* ---- life ---- */

int gf_exchange_client_create(gf_exchange_client **out, gf_ctx *ctx, int grads_port, int reduced_port, gf_net *net,
                        gf_optim **opt, const char *what)
{
	*out = NULL;
	int g = grads_port >= 0 ? gf_port_edges(ctx, 1, grads_port) : 0;
	int r = reduced_port >= 0 ? gf_port_edges(ctx, 0, reduced_port) : 0;
	if ((g > 0) != (r > 0))
		return gf_fail(ctx, "connect both 'grads' and 'reduced' of this stage to one exchange stage (only %s is)",
		               g ? "grads" : "reduced");
	if (g > 1)
		return gf_fail(ctx, "'grads' goes to %d stages: connect it to one exchange stage", g);
	gf_exchange_client *d = calloc(1, sizeof(*d));
	if (!d)
		return gf_fail(ctx, "out of memory");
	d->ctx = ctx;
	d->gport = g ? grads_port : -1;
	d->rport = g ? reduced_port : -1;
	d->net = net;
	d->opt = opt;
	snprintf(d->what, sizeof(d->what), "%s", what);
	d->mode = GF_DIST_NONE;
	const gf_run_info *run = gf_ctx_run(ctx);
	d->rank = run->rank;
	d->world = run->world;
	gf_net_block(net, GF_PARAMS, &d->n);
	*out = d;
	return 0;
}

void gf_exchange_client_destroy(gf_exchange_client *d)
{
	if (!d)
		return;
	if (d->sumsq_dev) {
		gf_backend *be = gf_net_backend(d->net);
		be->ops->free(be, d->sumsq_dev);
	}
	free(d);
}

/* ZeRO-1: the optimiser keeps only this rank's shard of its state. The
 * full one (fresh, or restored from a checkpoint) hands its slices over. */
static int to_shard(gf_exchange_client *d)
{
	gf_backend *be = gf_net_backend(d->net);
	gf_optim *full = *d->opt, *part;
	gf_dist_shard(d->n, d->rank, d->world, &d->shard_off, &d->shard_n);
	int rc = gf_optim_create_range(&part, d->net, gf_optim_config(full), d->shard_off, d->shard_n);
	if (rc)
		return gf_fail(d->ctx, "%s: ZeRO-1 shard optimiser: %s", d->what, gf_errmsg());
	float *src = gf_optim_state(full, NULL), *dst = gf_optim_state(part, NULL);
	for (int k = 0; k < gf_optim_slots(full) && !rc; k++)
		if (d->shard_n)
			rc = be->ops->copy(be, dst + (size_t)k * d->shard_n, src + (size_t)k * d->n + d->shard_off,
			                   d->shard_n * sizeof(float), GF_COPY_D2D);
	if (rc) {
		gf_optim_destroy(part);
		return gf_fail(d->ctx, "%s: ZeRO-1 shard optimiser: %s", d->what, gf_errmsg());
	}
	gf_optim_set_steps(part, gf_optim_steps(full));
	gf_optim_destroy(full);
	*d->opt = part;
	return 0;
}

/* The communicator in the handshake's answer: a view of the exchange
 * stage's gf_comm, which only a stage of this process can hand over. */
static int take_comm(gf_exchange_client *d, const gf_msg *m)
{
	const gf_tensor *t = &m->t[0];
	if (m->ntensors < 1 || t->dtype != GF_U8 || t->ndim != 1 || t->shape[0] != (int64_t)sizeof(gf_comm) ||
	    !t->data || gf_msg_scalar(m, "pid", -1) != (double)getpid() ||
	    gf_msg_scalar(m, "rank", -1) != (double)d->rank)
		return gf_fail(d->ctx, "%s: the exchange stage's answer carries no communicator of this process (the "
		                       "exchange stage must run on this rank, joined by rings)", d->what);
	d->comm = t->data;
	d->comm->caller = d->ctx;
	return 0;
}

int gf_exchange_client_start(gf_exchange_client *d)
{
	if (d->gport < 0)
		return 0;
	gf_backend *be = gf_net_backend(d->net);
	if (!GF_BACKEND_HAS(be, collective))
		return gf_fail(d->ctx, "%s: the backend has no collective op (a backend module built before it: rebuild "
		                       "it) and cannot take part in the exchange", d->what);
	gf_msg *m;
	int rc = gf_msg_get(d->ctx, d->gport, &m);
	if (rc)
		return rc;
	m->key = GF_XCHG_HELLO;
	m->step = -1;
	gf_msg_set_scalar(m, "params", (double)d->n);
	gf_msg_set_scalar(m, "device", (double)be->device);
	gf_msg_set_scalar(m, "device_index", (double)be->device_index);
	if ((rc = gf_push(d->ctx, d->gport, m)))
		return rc;
	if ((rc = gf_pop(d->ctx, d->rport, &m)))
		return rc == GF_EEOF ? gf_fail(d->ctx, "%s: the exchange stage ended before the handshake", d->what) : rc;
	if (m->key != GF_XCHG_HELLO) {
		gf_msg_release(m);
		return gf_fail(d->ctx, "%s: the exchange stage answered the handshake with operation %llu", d->what,
		               (unsigned long long)m->key);
	}
	d->mode = (gf_dist_mode)(int)gf_msg_scalar(m, "mode", 0);
	d->bucket = (size_t)gf_msg_scalar(m, "bucket", 1 << 20);
	d->rounds = (int)gf_msg_scalar(m, "rounds", 1);
	rc = take_comm(d, m);
	gf_msg_release(m);
	if (rc)
		return rc;
	if (d->bucket < 1)
		d->bucket = 1;
	if (d->mode == GF_DIST_ZERO1 && (rc = to_shard(d)))
		return rc;
	if (d->mode == GF_DIST_ZERO1 && be->ops->alloc(be, (void **)&d->sumsq_dev, sizeof(double)))
		return gf_fail(d->ctx, "%s: out of memory", d->what);
	if (gf_exchange_client_sliced(d)) {
		/* dropout masks differ across ranks, as the samples do; rank 0
		 * keeps the stream a checkpoint records */
		gf_rng *r = gf_net_rng(d->net);
		r->stream ^= (uint64_t)d->rank * 0x9e3779b97f4a7c15ull;
	}
	return 0;
}

gf_dist_mode gf_exchange_client_mode(const gf_exchange_client *d)
{
	return d->mode;
}

int gf_exchange_client_sliced(const gf_exchange_client *d)
{
	return d->mode != GF_DIST_NONE && d->world > 1;
}

/* ---- one update ---- */

void gf_exchange_client_arm(gf_exchange_client *d, int64_t step)
{
	d->wait = 0;
	d->armed = 1;
	if (d->comm)
		d->comm->step = step;
	if (d->mode != GF_DIST_ALLREDUCE)
		return;
	d->lo = d->sent_hi = d->n;
	d->broken = 0;
	gf_net_set_grad_hook(d->net, on_grads, d);
}

int gf_exchange_client_reduce(gf_exchange_client *d, int64_t step)
{
	float *g = gf_net_block(d->net, GF_GRADS, NULL);
	int rc, armed = d->armed;
	d->armed = 0;
	if (!armed)
		d->wait = 0;
	if (d->comm)
		d->comm->step = step;
	switch (d->mode) {
	case GF_DIST_ALLREDUCE: {
		/* not armed: the update was apart from its last backward (a graph
		 * step of its own), so the whole block goes now */
		size_t hi = armed ? d->sent_hi : d->n;
		gf_net_set_grad_hook(d->net, NULL, NULL);
		d->sent_hi = 0;
		if (hi > 0 && (rc = coll(d, GF_COLL_MEAN, g, hi, "all-reducing gradients")))
			return rc;
		return coll(d, GF_COLL_WAIT, NULL, 0, "all-reducing gradients");
	}
	case GF_DIST_ZERO1:
		if ((rc = coll(d, GF_COLL_MEAN_SHARD, g, d->n, "reduce-scattering gradients")))
			return rc;
		return coll(d, GF_COLL_WAIT, NULL, 0, "reduce-scattering gradients");
	default:
		return 0;
	}
}

void gf_exchange_client_range(const gf_exchange_client *d, size_t *off, size_t *count)
{
	*off = d->mode == GF_DIST_ZERO1 ? d->shard_off : 0;
	*count = d->mode == GF_DIST_ZERO1 ? d->shard_n : d->n;
}

int gf_exchange_client_sumsq(gf_exchange_client *d, double *sumsq)
{
	if (d->mode != GF_DIST_ZERO1)
		return 0;
	int rc = coll(d, GF_COLL_SUM_F64, sumsq, 1, "summing the gradient norm");
	return rc ? rc : coll(d, GF_COLL_WAIT, NULL, 0, "summing the gradient norm");
}

int gf_exchange_client_after(gf_exchange_client *d)
{
	float *p = gf_net_block(d->net, GF_PARAMS, NULL);
	int rc;
	if (d->mode == GF_DIST_ZERO1)
		rc = coll(d, GF_COLL_GATHER, p, d->n, "all-gathering parameters");
	else if (d->mode == GF_DIST_GOSSIP)
		rc = coll(d, GF_COLL_RING_MEAN, p, d->n, "averaging with the ring neighbours");
	else
		return 0;
	return rc ? rc : coll(d, GF_COLL_WAIT, NULL, 0, "exchanging parameters");
}

/* 1 when the backend trains in fp16 with dynamic loss scaling: then a
 * non-finite gradient is an overflow of the scaled loss, which the
 * backend's optimiser step handles by skipping the update (counted in its
 * stats) and lowering the scale, not a failure of the run. */
static int loss_scaled(gf_backend *be)
{
	gf_backend_stats st;
	return GF_BACKEND_HAS(be, stats) && be->ops->stats(be, &st) == 0 && st.precision == GF_PREC_FP16;
}

int gf_exchange_client_update(gf_exchange_client *d, float max_norm, float *norm)
{
	gf_backend *be = gf_net_backend(d->net);
	int rc;
	if (d->mode == GF_DIST_ZERO1) {
		/* the global norm: the shards' sums of squares, summed across ranks */
		float *g = gf_net_block(d->net, GF_GRADS, NULL) + d->shard_off;
		double sumsq = 0;
		if ((rc = be->ops->reduce_dev(be, d->sumsq_dev, g, d->shard_n, 1)) ||
		    (rc = gf_exchange_client_sumsq(d, d->sumsq_dev)) ||
		    (rc = be->ops->copy(be, &sumsq, d->sumsq_dev, sizeof(sumsq), GF_COPY_D2H)))
			return rc;
		double total = sqrt(sumsq);
		if (norm)
			*norm = (float)total;
		if (!isfinite(total) && !loss_scaled(be))
			return gf_seterr(GF_ENONFINITE, "gradient norm is %g", total);
		if (max_norm > 0 && isfinite(total)) {
			double coef = (double)max_norm / (total + 1e-6);
			if (coef < 1.0 && d->shard_n && (rc = be->ops->scale(be, g, d->shard_n, (float)coef)))
				return rc;
		}
		if ((rc = gf_optim_step(*d->opt)))
			return rc;
		return gf_exchange_client_after(d);
	}
	/* none, all-reduce, gossip: the single-process update */
	rc = gf_net_clip_grad_norm(d->net, max_norm, norm);
	if (rc == GF_ENONFINITE && loss_scaled(be))
		rc = 0; /* fp16 overflow: the optimiser step below skips this update and lowers the scale */
	if (rc || (rc = gf_optim_step(*d->opt)))
		return rc;
	return gf_exchange_client_after(d);
}

double gf_exchange_client_wait(const gf_exchange_client *d)
{
	return d->wait;
}

/* ---- checkpoints ---- */

/* ZeRO-1: a full optimiser whose every slot is all-gathered from the
 * shards, through a host buffer (the communicator's MPI side, on this
 * thread, whatever the backend). Collective. */
static int gather_optim(gf_exchange_client *d, gf_optim **out)
{
	gf_backend *be = gf_net_backend(d->net);
	gf_optim *part = *d->opt, *full = NULL;
	float *host = malloc((d->n ? d->n : 1) * sizeof(float));
	int rc = host ? gf_optim_create(&full, d->net, gf_optim_config(part)) : -ENOMEM;
	if (rc) {
		free(host);
		return gf_fail(d->ctx, "%s: checkpoint of the ZeRO-1 optimiser: %s", d->what,
		               rc == -ENOMEM ? "out of memory" : gf_errmsg());
	}
	float *src = gf_optim_state(part, NULL), *dst = gf_optim_state(full, NULL);
	for (int k = 0; k < gf_optim_slots(part) && !rc; k++) {
		if (d->shard_n)
			rc = be->ops->copy(be, host + d->shard_off, src + (size_t)k * d->shard_n, d->shard_n * sizeof(float),
			                   GF_COPY_D2H);
		if (!rc && !(rc = d->comm->run(d->comm, GF_COLL_GATHER, host, d->n, GF_CPU, NULL)))
			count(d, GF_COLL_GATHER, d->n);
		if (!rc && d->n)
			rc = be->ops->copy(be, dst + (size_t)k * d->n, host, d->n * sizeof(float), GF_COPY_H2D);
	}
	free(host);
	if (rc) {
		gf_optim_destroy(full);
		return rc == GF_EFAIL || rc == GF_ESTOP ? rc
		                                        : gf_fail(d->ctx, "%s: gathering the optimiser state: %s",
		                                                  d->what, gf_errmsg());
	}
	gf_optim_set_steps(full, gf_optim_steps(part));
	*out = full;
	return 0;
}

int gf_exchange_client_state(gf_exchange_client *d, gf_state *s, const char *prefix)
{
	if (d->mode != GF_DIST_ZERO1)
		return s ? gf_state_add_net(s, prefix, d->net, *d->opt) : 0;
	gf_optim *full = NULL;
	int rc = gather_optim(d, &full);
	if (rc)
		return rc;
	rc = s ? gf_state_add_net(s, prefix, d->net, full) : 0;
	gf_optim_destroy(full);
	return rc;
}
