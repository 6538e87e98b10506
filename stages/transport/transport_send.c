/* transport_send: the sending end of a graph edge between two ranks.
 *
 * The Lua runner puts it on the producer's rank when gf.connect joins
 * stages placed on different ranks: the producer's output feeds it through
 * an ordinary ring, and it forwards every message, in order, to the
 * transport_recv stage on the consumer's rank (over MPI or TCP, see
 * wire.h): metadata, scalars and every tensor's bytes. It sends only as
 * many messages as the receiver granted credit for, so the receiving
 * ring's adaptive depth bounds what is in flight. At the end of its input
 * it sends END; when its run fails it tells the receiver (ABORT) so the
 * other rank stops at once with the reason instead of waiting.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <ganflow/dist.h>
#include <ganflow/err.h>
#include <ganflow/stage.h>

#include "wire.h"

enum { IN_MSGS };

typedef struct tx {
	wire w;
	int opened;
	int64_t credits;
	uint64_t dropped;
	wire_hdr h;
} tx;

static int tx_create(gf_ctx *ctx, const gf_value *p, void **self)
{
	tx *t = calloc(1, sizeof(*t));
	if (!t)
		return gf_fail(ctx, "out of memory");
	*self = t;
	t->w.fd = t->w.lfd = -1;
	return wire_init(&t->w, ctx, p, 1);
}

/* Tells the receiver the run failed here (best effort). */
static void tell_abort(tx *t, const char *why)
{
	if (!t->opened)
		return;
	memset(&t->h, 0, sizeof(t->h));
	t->h.type = W_ABORT;
	snprintf(t->h.text, sizeof(t->h.text), "%s", why);
	/* the graph is stopping hard: wire_send would leave at once, so send
	 * the header without waiting for it */
	if (t->w.tcp) {
		t->h.magic = WIRE_MAGIC;
		ssize_t k = send(t->w.fd, &t->h, sizeof(t->h), MSG_NOSIGNAL | MSG_DONTWAIT);
		(void)k;
	} else {
		MPI_Request req;
		t->h.magic = WIRE_MAGIC;
		if (MPI_Isend(&t->h, (int)sizeof(t->h), MPI_BYTE, t->w.peer, t->w.tag * 4, t->w.comm, &req) == MPI_SUCCESS)
			MPI_Request_free(&req);
	}
}

static int tx_run(void *self, gf_ctx *ctx)
{
	tx *t = self;
	int rc = wire_open(&t->w, 1);
	if (rc)
		return rc;
	t->opened = 1;
	memset(&t->h, 0, sizeof(t->h));
	t->h.type = W_HELLO;
	snprintf(t->h.text, sizeof(t->h.text), "%s", t->w.edge);
	if ((rc = wire_send(&t->w, &t->h, NULL)))
		return rc;
	for (;;) {
		gf_msg *m;
		rc = gf_pop(ctx, IN_MSGS, &m);
		if (rc == GF_EEOF)
			break;
		if (rc == GF_ESTOP) {
			tell_abort(t, "its run stopped (a stage failed or the run was interrupted)");
			return rc;
		}
		if (rc)
			return rc;
		for (int i = 0; i < m->ntensors; i++) {
			if (m->t[i].device != GF_CPU) {
				gf_msg_release(m);
				return gf_fail(ctx, "edge %s: tensor %d is in device memory; a cross-rank edge carries host "
				                    "tensors (copy it to the host first)", t->w.edge, i);
			}
		}
		while (t->credits <= 0) {
			int32_t c;
			if ((rc = wire_take_credit(&t->w, &c, 1))) {
				gf_msg_release(m);
				if (rc == GF_ESTOP)
					tell_abort(t, "its run stopped (a stage failed or the run was interrupted)");
				return rc;
			}
			if (c == CREDIT_ABORT) {
				gf_msg_release(m);
				return gf_fail(ctx, "edge %s: rank %d stopped: its run failed", t->w.edge, t->w.peer);
			}
			if (c == CREDIT_CLOSE) {
				/* the receiving stage finished: what is left has nowhere to go */
				gf_msg_release(m);
				t->dropped++;
				while (gf_pop(ctx, IN_MSGS, &m) == 0) {
					gf_msg_release(m);
					t->dropped++;
				}
				gf_info(ctx, "edge %s: the receiving stage on rank %d finished; %llu message(s) not sent",
				        t->w.edge, t->w.peer, (unsigned long long)t->dropped);
				return 0;
			}
			t->credits += c;
		}
		wire_pack(&t->h, m);
		rc = wire_send(&t->w, &t->h, m);
		gf_msg_release(m);
		if (rc) {
			if (rc == GF_ESTOP)
				tell_abort(t, "its run stopped (a stage failed or the run was interrupted)");
			return rc;
		}
		t->credits--;
	}
	memset(&t->h, 0, sizeof(t->h));
	t->h.type = W_END;
	if ((rc = wire_send(&t->w, &t->h, NULL)))
		return rc;
	wire_finish(&t->w);
	return 0;
}

static void tx_destroy(void *self)
{
	tx *t = self;
	wire_close(&t->w);
	free(t);
}

static const gf_port_desc inputs[] = {
	{ "inp", "any", 0, "messages of the producer on this rank" },
};

static const gf_param_desc params[] = { WIRE_PARAMS };

GF_STAGE_EXPORT const gf_stage_desc ganflow_stage = {
	.abi = GF_STAGE_ABI,
	.size = sizeof(gf_stage_desc),
	.name = "transport_send",
	.doc = "sending end of a cross-rank edge (inserted by gf.connect): forwards messages to transport_recv on another rank",
	.inputs = inputs,
	.ninputs = 1,
	.params = params,
	.nparams = sizeof(params) / sizeof(params[0]),
	.create = tx_create,
	.run = tx_run,
	.destroy = tx_destroy,
};
