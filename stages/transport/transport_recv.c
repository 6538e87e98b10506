/* transport_recv: the receiving end of a graph edge between two ranks.
 *
 * The Lua runner puts it on the consumer's rank when gf.connect joins
 * stages placed on different ranks; it feeds the consumer through an
 * ordinary ring, the one whose adaptive depth (core/runtime/depth.c) watches the
 * inter-arrival jitter of what the network delivers. The stage grants the
 * sender credit for "the ring's active depth" messages beyond those it
 * has pushed, so when the controller deepens the ring (the consumer
 * stalled on bursty arrivals) the network may run further ahead, and when
 * it shrinks it the sender slows down. Messages arrive in order, complete
 * (metadata, scalars, every tensor), with the producer's name as their
 * source. A sender whose run failed makes this stage fail with the
 * reason; a sender that dies is found by the liveness probe.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <ganflow/dist.h>
#include <ganflow/err.h>
#include <ganflow/params.h>
#include <ganflow/stage.h>

#include "wire.h"

enum { OUT_MSGS };

#define MAX_SOURCES 64
#define MAX_EDGES 1024

typedef struct rx {
	wire w;
	int opened;
	char kind[64];
	int ended;          /* END received */
	int64_t granted, pushed;
	int edge_index;     /* our output ring in gf_edge_stats, -1 unknown */
	gf_edge_stat *stats;
	int nstats;
	char *sources[MAX_SOURCES]; /* interned producer names (msg->source) */
	int nsources;
	wire_hdr h;
} rx;

static int rx_create(gf_ctx *ctx, const gf_value *p, void **self)
{
	rx *r = calloc(1, sizeof(*r));
	if (!r)
		return gf_fail(ctx, "out of memory");
	*self = r;
	r->w.fd = r->w.lfd = -1;
	r->edge_index = -1;
	snprintf(r->kind, sizeof(r->kind), "%s", gf_param_str(p, "kind"));
	r->stats = calloc(MAX_EDGES, sizeof(*r->stats));
	if (!r->stats)
		return gf_fail(ctx, "out of memory");
	return wire_init(&r->w, ctx, p, 0);
}

/* The active depth of our output ring (the adaptive depth the runtime
 * keeps for it); 1 when it cannot be found. */
static int64_t ring_depth(rx *r, gf_ctx *ctx)
{
	int n = gf_edge_stats(ctx, r->stats, MAX_EDGES);
	if (n > MAX_EDGES)
		n = MAX_EDGES;
	if (r->edge_index < 0 || r->edge_index >= n) {
		char from[128];
		snprintf(from, sizeof(from), "%s.out", gf_ctx_name(ctx));
		for (int i = 0; i < n; i++)
			if (!strcmp(r->stats[i].from, from)) {
				r->edge_index = i;
				break;
			}
	}
	if (r->edge_index < 0 || r->edge_index >= n)
		return 1;
	return r->stats[r->edge_index].depth ? r->stats[r->edge_index].depth : 1;
}

/* Keeps (granted - pushed) = the ring's depth: what may be on its way. */
static int grant(rx *r, gf_ctx *ctx)
{
	int64_t want = r->pushed + ring_depth(r, ctx) - r->granted;
	if (want <= 0)
		return 0;
	int rc = wire_send_credit(&r->w, (int32_t)want);
	if (!rc)
		r->granted += want;
	return rc;
}

static const char *intern(rx *r, const char *s)
{
	if (!s[0])
		return NULL;
	for (int i = 0; i < r->nsources; i++)
		if (!strcmp(r->sources[i], s))
			return r->sources[i];
	if (r->nsources == MAX_SOURCES)
		return "(remote)";
	char *c = strdup(s);
	if (!c)
		return "(remote)";
	r->sources[r->nsources++] = c;
	return c;
}

static int rx_loop(rx *r, gf_ctx *ctx)
{
	int rc = wire_open(&r->w, 0);
	if (rc)
		return rc;
	r->opened = 1;
	if ((rc = wire_recv_hdr(&r->w, &r->h)))
		return rc;
	if (r->h.type != W_HELLO || strcmp(r->h.text, r->w.edge))
		return gf_fail(ctx, "edge %s: rank %d sends \"%s\" on edge number %d (the ranks declared their cross-rank "
		                    "edges differently)", r->w.edge, r->w.peer, r->h.type == W_HELLO ? r->h.text : "?",
		               r->w.tag);
	for (;;) {
		if ((rc = grant(r, ctx)))
			return rc;
		if ((rc = wire_recv_hdr(&r->w, &r->h)))
			return rc;
		if (r->h.type == W_END) {
			/* everything the sender sent is read: close now (a FIN),
			 * which ends the sender's wire_finish */
			r->ended = 1;
			wire_close(&r->w);
			return 0;
		}
		if (r->h.type == W_ABORT)
			return gf_fail(ctx, "edge %s: rank %d stopped: %s", r->w.edge, r->w.peer, r->h.text);
		if (r->h.type != W_DATA)
			return gf_fail(ctx, "edge %s: unexpected header type %u from rank %d", r->w.edge, r->h.type, r->w.peer);
		gf_msg *m;
		if ((rc = gf_msg_get(ctx, OUT_MSGS, &m)))
			return rc;
		char err[256];
		if ((rc = wire_unpack(&r->h, m, err, sizeof(err)))) {
			gf_msg_release(m);
			return gf_fail(ctx, "edge %s: from rank %d: %s", r->w.edge, r->w.peer, err);
		}
		for (int i = 0; i < m->ntensors; i++) {
			if ((rc = wire_recv_payload(&r->w, m->t[i].data, gf_tensor_bytes(&m->t[i])))) {
				gf_msg_release(m);
				return rc;
			}
		}
		m->source = intern(r, r->h.source);
		if ((rc = gf_push(ctx, OUT_MSGS, m)))
			return rc;
		r->pushed++;
	}
}

static int rx_run(void *self, gf_ctx *ctx)
{
	rx *r = self;
	int rc = rx_loop(r, ctx);
	if (!r->w.tcp)
		gf_info(ctx, "edge %s: %lld message(s) from rank %d, %llu polls while waiting (latency %s)", r->w.edge,
		        (long long)r->pushed, r->w.peer, (unsigned long long)r->w.polls, r->w.relaxed ? "relaxed" : "low");
	if (r->opened && !r->ended) {
		/* tell the sender: our run failed, or our consumer finished */
		int hard = gf_dist_should_abort(ctx);
		if (!hard || rc == GF_ESTOP) {
			int32_t c = hard ? CREDIT_ABORT : CREDIT_CLOSE;
			if (r->w.tcp) {
				uint32_t rec[2] = { 0x63726564u, (uint32_t)c };
				ssize_t k = send(r->w.fd, rec, sizeof(rec), MSG_NOSIGNAL | MSG_DONTWAIT);
				(void)k;
			} else {
				MPI_Request req;
				static int32_t codes[2] = { CREDIT_CLOSE, CREDIT_ABORT };
				if (MPI_Isend(&codes[hard], 1, MPI_INT32_T, r->w.peer, r->w.tag * 4 + 2, r->w.comm, &req) ==
				    MPI_SUCCESS)
					MPI_Request_free(&req);
			}
		}
	}
	return rc == GF_ESTOP && !gf_dist_should_abort(ctx) ? 0 : rc;
}

static void rx_destroy(void *self)
{
	rx *r = self;
	wire_close(&r->w);
	for (int i = 0; i < r->nsources; i++)
		free(r->sources[i]);
	free(r->stats);
	free(r);
}

static const gf_port_desc outputs[] = {
	{ "out", "any", 0, "the messages of the producer on the other rank, in order (its kind)" },
};

static const gf_param_desc params[] = {
	WIRE_PARAMS,
	{ "kind", GF_PARAM_STR, "any", "message kind of the producer's port (for messages and checks)", NULL },
};

GF_STAGE_EXPORT const gf_stage_desc ganflow_stage = {
	.abi = GF_STAGE_ABI,
	.size = sizeof(gf_stage_desc),
	.name = "transport_recv",
	.doc = "receiving end of a cross-rank edge (inserted by gf.connect): delivers another rank's messages in order",
	.outputs = outputs,
	.noutputs = 1,
	.params = params,
	.nparams = sizeof(params) / sizeof(params[0]),
	.create = rx_create,
	.run = rx_run,
	.destroy = rx_destroy,
};
