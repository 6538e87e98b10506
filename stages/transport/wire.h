/* The wire of a cross-rank graph edge: what transport_send and
 * transport_recv (stages/transport) exchange, over MPI point-to-point or a
 * TCP connection.
 *
 * Protocol (one edge = one sender, one receiver, in order):
 *   sender -> receiver  HELLO (the edge's name: both ends check they pair
 *                       the same edge), then DATA messages (a header with
 *                       the message's metadata and tensor shapes, then each
 *                       tensor's bytes), then END (the producer finished)
 *                       or ABORT (the sender's run failed: `text` says why).
 *   receiver -> sender  credits: n > 0 more messages may be sent;
 *                       CREDIT_CLOSE (the receiving stage finished: drop the
 *                       rest) or CREDIT_ABORT (its run failed).
 * Flow control is by credit: the receiver lets at most "its ring's active
 * depth" messages be on their way or waiting in the ring, so the runtime's
 * adaptive depth of that local ring (which watches the inter-arrival
 * jitter of what the network delivers) is what decides how far the
 * network may run ahead of the consumer; no hidden queue in socket or MPI
 * buffers takes its place.
 *
 * Over MPI each edge has three tags (header, payload, credit) on the edge
 * communicator of core/dist/dist.c; over TCP the sender connects to the
 * receiver's address and credits come back on the same connection.
 */
#ifndef GF_TRANSPORT_WIRE_H
#define GF_TRANSPORT_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

#include <ganflow/msg.h>
#include <ganflow/stage.h>

#define WIRE_MAGIC 0x31776667u /* "gfw1" */
#define WIRE_TEXT 320
#define WIRE_SOURCE 96

enum { W_HELLO = 1, W_DATA, W_END, W_ABORT };
enum { CREDIT_CLOSE = -1, CREDIT_ABORT = -2 };

typedef struct wire_tensor {
	int32_t ndim, dtype, layout, device;
	int64_t shape[GF_MAX_DIMS];
} wire_tensor;

typedef struct wire_hdr {
	uint32_t magic, type;
	int64_t seq, step, version;
	uint64_t key;
	int64_t label, epoch;
	uint64_t pos;
	uint32_t flags;
	int32_t ntensors, nscalars, pad_;
	wire_tensor t[GF_MSG_MAX_TENSORS];
	gf_scalar scalars[GF_MSG_MAX_SCALARS];
	char source[WIRE_SOURCE];
	char text[WIRE_TEXT];   /* HELLO: the edge; ABORT: why */
} wire_hdr;

/* One end of an edge. */
typedef struct wire {
	gf_ctx *ctx;
	int tcp;                /* 1: TCP, 0: MPI */
	int peer;               /* the other end's rank */
	int tag;                /* edge number (1, 2, ...) */
	char edge[WIRE_TEXT];   /* "g.fakes -> d.fakes" */
	double timeout;         /* seconds of silence before the peer is probed */
	int relaxed;            /* latency "relaxed": long naps while waiting (see wire.c) */
	uint64_t polls;         /* MPI_Test calls while waiting */
	/* MPI */
	MPI_Comm comm;
	/* TCP */
	int fd, lfd;            /* connection, listening socket (receiver) */
	int credit_dead;        /* receiver: the sender closed its side (after END) */
	char address[256];
	uint64_t bytes, msgs;   /* sent */
} wire;

/* Sets up an end (create()): MPI needs an MPI world, TCP an address.
 * Errors are set on ctx. */
int wire_init(wire *w, gf_ctx *ctx, const gf_value *params, int sender);
/* After the last send (END) on a TCP edge: half-close and wait for the
 * receiver to close, so nothing it has yet to read is lost to a reset. */
void wire_finish(wire *w);
void wire_close(wire *w);

/* Connects (sender) or accepts the sender's connection (receiver); MPI: no-op. */
int wire_open(wire *w, int sender);

/* Sends a header followed by the payload of every tensor of m (m may be
 * NULL for control headers). Blocks until the data left (MPI: the sends
 * completed). Returns 0, GF_ESTOP (hard stop) or GF_EFAIL (reported). */
int wire_send(wire *w, wire_hdr *h, const gf_msg *m);

/* Receives the next header (blocks; a hard stop gives GF_ESTOP; a peer
 * silent longer than the timeout is probed and a dead one fails the stage
 * naming its rank). */
int wire_recv_hdr(wire *w, wire_hdr *h);

/* Receives `bytes` of payload into p (after a DATA header, tensor by tensor). */
int wire_recv_payload(wire *w, void *p, size_t bytes);

/* Credits: the receiver sends n (or CREDIT_CLOSE / CREDIT_ABORT); the
 * sender waits for some (block = 1) or takes what is there (block = 0):
 * *n = credits received (0 when none, negative for close / abort). */
int wire_send_credit(wire *w, int32_t n);
int wire_take_credit(wire *w, int32_t *n, int block);

/* Header of a message (metadata, tensor shapes) and back. */
void wire_pack(wire_hdr *h, const gf_msg *m);
int wire_unpack(const wire_hdr *h, gf_msg *m, char *err, size_t errsize);

/* The parameters both stages declare. */
#define WIRE_PARAMS                                                                                     \
	{ "peer", GF_PARAM_INT, NULL, "rank at the other end of the edge (another rank of the world)", "0.." }, \
	{ "tag", GF_PARAM_INT, NULL, "edge number, the same on both ranks (1, 2, ... in declaration order)", "1..8000" }, \
	{ "edge", GF_PARAM_STR, "", "the edge as declared (\"g.fakes -> d.fakes\"), checked at both ends", NULL }, \
	{ "transport", GF_PARAM_STR, "mpi", "mpi (point-to-point on the edge communicator) or tcp; nccl is refused " \
	  "with the reason (these edges carry host messages)", "mpi|tcp|nccl" },                            \
	{ "address", GF_PARAM_STR, "", "tcp: host:port the receiving rank listens on", NULL },                  \
	{ "timeout", GF_PARAM_NUM, "60", "seconds (above 0) without a message before the peer is probed (a dead peer " \
	  "fails the run)", "0.." },                                                                        \
	{ "latency", GF_PARAM_STR, "low", "MPI waits: low (naps of at most 1 ms while a message is due: data edges) or " \
	  "relaxed (naps of a quarter of the time waited, up to 20 ms: metrics and checkpoint edges, where a few ms " \
	  "cost nothing and every wake-up costs the rank's cores)", "low|relaxed" }

#endif
