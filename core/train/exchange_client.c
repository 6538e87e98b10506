/* The step side of the gradient exchange: what g_step and d_step do to
 * train one network across data-parallel ranks with an `exchange` stage.
 * See <ganflow/dist.h> for the protocol and exchange_client.h for the calls.
 *
 * All-reduce: the network's gradient hook reports each layer's gradients
 * as the backward pass completes them (from the end of the block towards
 * offset 0); ranges are grouped into buckets of the exchange's bucket size
 * and each bucket leaves as a request whose tensor is a view of the grads
 * block, so the exchange thread all-reduces it while this thread computes
 * the gradients of the layers below. Before clipping and the optimiser
 * step the helper waits for every acknowledgement.
 *
 * ZeRO-1: the optimiser keeps state for this rank's shard only; after the
 * backward the exchange reduce-scatters the whole gradient block, the
 * helper clips the shard with the global norm (the exchange sums the
 * squares across ranks), updates the shard and has the parameters
 * all-gathered. Checkpoints gather the optimiser state into a temporary
 * full optimiser (collective), so a checkpoint looks like any other.
 *
 * Gossip (DPOSG): local clip and update (with optimistic Adam in the
 * pipelines), then the exchange averages the parameters with the ring
 * neighbours for `rounds` rounds.
 *
 * Without an exchange (ports unconnected) every call does exactly what a
 * single-process step does.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	int64_t step;
	/* all-reduce during backward */
	size_t lo;              /* [lo, n) of the grads block is final */
	size_t sent_hi;         /* [lo, sent_hi) is final and not yet sent */
	int broken;             /* a range came out of order: send the rest at the end */
	int pending;            /* requests not acknowledged yet */
	/* from the acknowledgements */
	double sumsq;
	double wait, busy;
};

/* ---- requests ---- */

/* Sends request op for [off, off + count) of base (a block of the net on
 * dev) and counts it as pending. */
static int request(gf_exchange_client *d, int op, float *base, size_t off, size_t count, gf_device dev)
{
	gf_backend *be = gf_net_backend(d->net);
	int rc;
	/* device ops are queued on the backend's stream: the values must be
	 * there before another engine reads them */
	if (dev != GF_CPU && (rc = be->ops->sync(be)))
		return gf_fail(d->ctx, "%s: waiting for the device before the exchange: %s", d->what, gf_errmsg());
	gf_msg *m;
	if ((rc = gf_msg_get(d->ctx, d->gport, &m)))
		return rc;
	int64_t shape[1] = { (int64_t)count };
	/* a view of the block, not a copy: the envelope's buffers stay unused
	 * and the range is the exchange's until it acknowledges */
	m->t[0] = gf_tensor_make(base + off, GF_F32, 1, shape);
	m->t[0].device = dev;
	m->t[0].device_index = dev == GF_CPU ? 0 : be->device_index;
	m->ntensors = 1;
	m->key = (uint64_t)op;
	m->pos = (uint64_t)off;
	m->step = d->step;
	if ((rc = gf_push(d->ctx, d->gport, m)))
		return rc;
	d->pending++;
	return 0;
}

/* Waits for every pending acknowledgement; the time spent here is the
 * communication the step could not hide. */
static int wait_acks(gf_exchange_client *d)
{
	double t0 = gf_now();
	while (d->pending > 0) {
		gf_msg *m;
		int rc = gf_pop(d->ctx, d->rport, &m);
		if (rc == GF_EEOF)
			return gf_fail(d->ctx, "%s: the exchange stage ended with %d request(s) unanswered", d->what,
			               d->pending);
		if (rc)
			return rc;
		d->busy += gf_msg_scalar(m, "busy", 0);
		if (m->key == GF_XCHG_REDUCE_SCATTER)
			d->sumsq = gf_msg_scalar(m, "sumsq", NAN);
		gf_msg_release(m);
		d->pending--;
	}
	d->wait += gf_now() - t0;
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
	int rc = request(d, GF_XCHG_REDUCE, g, d->lo, d->sent_hi - d->lo, gf_net_backend(d->net)->device);
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

int gf_exchange_client_start(gf_exchange_client *d)
{
	if (d->gport < 0)
		return 0;
	gf_msg *m;
	int rc = gf_msg_get(d->ctx, d->gport, &m);
	if (rc)
		return rc;
	m->key = GF_XCHG_HELLO;
	m->step = -1;
	gf_msg_set_scalar(m, "params", (double)d->n);
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
	gf_msg_release(m);
	if (d->bucket < 1)
		d->bucket = 1;
	if (d->mode == GF_DIST_ZERO1 && (rc = to_shard(d)))
		return rc;
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
	d->step = step;
	d->wait = d->busy = 0;
	if (d->mode != GF_DIST_ALLREDUCE)
		return;
	d->lo = d->sent_hi = d->n;
	d->broken = 0;
	gf_net_set_grad_hook(d->net, on_grads, d);
}

int gf_exchange_client_reduce(gf_exchange_client *d)
{
	float *g = gf_net_block(d->net, GF_GRADS, NULL);
	gf_device dev = gf_net_backend(d->net)->device;
	int rc;
	switch (d->mode) {
	case GF_DIST_ALLREDUCE:
		gf_net_set_grad_hook(d->net, NULL, NULL);
		if (d->sent_hi > 0 && (rc = request(d, GF_XCHG_REDUCE, g, 0, d->sent_hi, dev)))
			return rc;
		d->sent_hi = 0;
		return wait_acks(d);
	case GF_DIST_ZERO1:
		d->sumsq = NAN;
		if ((rc = request(d, GF_XCHG_REDUCE_SCATTER, g, 0, d->n, dev)))
			return rc;
		return wait_acks(d);
	default:
		return 0;
	}
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
		double total = sqrt(d->sumsq);
		if (norm)
			*norm = (float)total;
		if (!isfinite(total) && !loss_scaled(be))
			return gf_seterr(GF_ENONFINITE, "gradient norm is %g", total);
		if (max_norm > 0 && isfinite(total)) {
			double coef = (double)max_norm / (total + 1e-6);
			float *g = gf_net_block(d->net, GF_GRADS, NULL);
			if (coef < 1.0 && d->shard_n && (rc = be->ops->scale(be, g + d->shard_off, d->shard_n, (float)coef)))
				return rc;
		}
		if ((rc = gf_optim_step(*d->opt)))
			return rc;
		if ((rc = request(d, GF_XCHG_ALLGATHER, gf_net_block(d->net, GF_PARAMS, NULL), 0, d->n, be->device)))
			return rc;
		return wait_acks(d);
	}
	/* none, all-reduce, gossip: the single-process update */
	rc = gf_net_clip_grad_norm(d->net, max_norm, norm);
	if (rc == GF_ENONFINITE && loss_scaled(be))
		rc = 0; /* fp16 overflow: the optimiser step below skips this update and lowers the scale */
	if (rc || (rc = gf_optim_step(*d->opt)))
		return rc;
	if (d->mode != GF_DIST_GOSSIP)
		return 0;
	if ((rc = request(d, GF_XCHG_GOSSIP, gf_net_block(d->net, GF_PARAMS, NULL), 0, d->n, be->device)))
		return rc;
	return wait_acks(d);
}

double gf_exchange_client_wait(const gf_exchange_client *d)
{
	return d->wait;
}

double gf_exchange_client_busy(const gf_exchange_client *d)
{
	return d->busy;
}

/* ---- checkpoints ---- */

/* ZeRO-1: a full optimiser whose every slot is all-gathered from the
 * shards (through a host buffer). Collective. */
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
		if (!rc)
			rc = request(d, GF_XCHG_ALLGATHER, host, 0, d->n, GF_CPU);
		if (!rc)
			rc = wait_acks(d);
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
	double wait = d->wait, busy = d->busy;
	int rc = gather_optim(d, &full);
	d->wait = wait;
	d->busy = busy;
	if (rc)
		return rc;
	rc = s ? gf_state_add_net(s, prefix, d->net, full) : 0;
	gf_optim_destroy(full);
	return rc;
}
