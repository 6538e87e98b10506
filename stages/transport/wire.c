/* The wire of a cross-rank edge over MPI or TCP. See wire.h.
 *
 * Waiting: MPI has no wake-up on arrival, so requests are polled
 * (MPI_Test) with naps that grow the longer a wait lasts. Two paces
 * (parameter `latency`): "low", for data edges whose consumer may be
 * waiting, doubles from 20 us to 0.2 ms within 5 ms, 1 ms up to 0.2 s and
 * 5 ms on an idle edge; "relaxed", for the books (metrics, checkpoint
 * state: gf.connect picks it by the port's kind), naps a quarter of the
 * time waited, up to 20 ms, which costs a per-step edge ~5x fewer
 * wake-ups. Every wake-up takes the rank's core from its step stages, and
 * a rank that keeps the books of many others holds dozens of such edges.
 * Sockets wait in poll(). Every wait
 * leaves on a hard stop of the graph. After `timeout` seconds of silence
 * the peer is probed (gf_dist_probe); a dead one fails the stage with a
 * message naming its rank, a live one is merely slow and the wait goes on.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <ganflow/dist.h>
#include <ganflow/err.h>
#include <ganflow/log.h>
#include <ganflow/params.h>

#include "wire.h"

#define CHUNK (1u << 30)     /* largest MPI message (counts are int) */
#define NAP_MIN_NS 20000L        /* first nap of a wait on an MPI request */
#define RELAXED_MAX_NS 20000000L /* longest nap of a relaxed edge */
#define CREDIT_MAGIC 0x63726564u

/* ---- waiting ---- */

typedef struct waiter {
	wire *w;
	const char *what;
	double t0, silent_since;
	long ns;
	int warned;
} waiter;

static void waiter_start(waiter *wt, wire *w, const char *what)
{
	wt->w = w;
	wt->what = what;
	wt->t0 = wt->silent_since = gf_now();
	wt->ns = NAP_MIN_NS;
	wt->warned = 0;
}

/* One turn of a wait: sleeps a little (MPI) and checks stop and silence.
 * Returns 0 to go on waiting. */
static int waiter_tick(waiter *wt, int sleep)
{
	wire *w = wt->w;
	if (gf_dist_should_abort(w->ctx))
		return GF_ESTOP;
	double now = gf_now();
	if (sleep) {
		struct timespec ts = { 0, wt->ns };
		nanosleep(&ts, NULL);
		double waited = gf_now() - wt->t0;
		if (w->relaxed) {
			/* a quarter of the time waited: a wait of T seconds costs
			 * ~30 + 50 T wake-ups, and what arrives is seen within a
			 * quarter of the wait (at most 20 ms) */
			long ns = (long)(waited * 0.25e9);
			wt->ns = ns < NAP_MIN_NS ? NAP_MIN_NS : ns > RELAXED_MAX_NS ? RELAXED_MAX_NS : ns;
		} else {
			/* doubling naps, short while a message is due (0.2 ms
			 * for 5 ms, 1 ms up to 0.2 s), 5 ms on an idle edge */
			long cap = waited < 0.005 ? 200000L : waited < 0.2 ? 1000000L : 5000000L;
			wt->ns = wt->ns * 2 > cap ? cap : wt->ns * 2;
		}
	}
	if (now - wt->silent_since < w->timeout)
		return 0;
	if (w->tcp) {
		/* a dead TCP peer closes its socket: silence means slow */
		wt->silent_since = now;
		return 0;
	}
	int lost[4];
	int n = gf_dist_probe(gf_dist_probe_wait(), lost, 4);
	if (n > 0)
		return gf_fail(w->ctx, "rank %d stopped responding (no message for %.0f s while %s on edge %s)", lost[0],
		               gf_now() - wt->t0, wt->what, w->edge);
	if (!wt->warned)
		gf_warn(w->ctx, "edge %s: rank %d sent nothing for %.0f s while %s (it answers pings: slow, not dead)",
		        w->edge, w->peer, now - wt->t0, wt->what);
	wt->warned = 1;
	wt->silent_since = gf_now();
	return 0;
}

static int mpi_wait(wire *w, MPI_Request *req, const char *what)
{
	waiter wt;
	waiter_start(&wt, w, what);
	for (;;) {
		int done = 0;
		w->polls++;
		if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
			return gf_fail(w->ctx, "edge %s: MPI error while %s (rank %d)", w->edge, what, w->peer);
		if (done)
			return 0;
		int rc = waiter_tick(&wt, 1);
		if (rc) {
			MPI_Cancel(req);
			MPI_Request_free(req);
			return rc;
		}
	}
}

/* ---- TCP ---- */

static int split_address(wire *w, char *host, size_t hsize, char *port, size_t psize)
{
	const char *colon = strrchr(w->address, ':');
	if (!colon || colon == w->address || !colon[1])
		return gf_fail(w->ctx, "edge %s: address '%s' is not host:port", w->edge, w->address);
	snprintf(host, hsize, "%.*s", (int)(colon - w->address), w->address);
	snprintf(port, psize, "%s", colon + 1);
	return 0;
}

static int tcp_resolve(wire *w, struct addrinfo **res, int passive)
{
	char host[256], port[32];
	int rc = split_address(w, host, sizeof(host), port, sizeof(port));
	if (rc)
		return rc;
	struct addrinfo hints;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = passive ? AI_PASSIVE : 0;
	int e = getaddrinfo(host, port, &hints, res);
	if (e)
		return gf_fail(w->ctx, "edge %s: address %s: %s", w->edge, w->address, gai_strerror(e));
	return 0;
}

static void tcp_tune(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* Waits until fd is ready for events (POLLIN / POLLOUT). */
static int tcp_wait(wire *w, int fd, short events, const char *what)
{
	waiter wt;
	waiter_start(&wt, w, what);
	for (;;) {
		struct pollfd p = { fd, events, 0 };
		int n = poll(&p, 1, 100);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return gf_fail(w->ctx, "edge %s: poll: %s", w->edge, strerror(errno));
		int rc = waiter_tick(&wt, 0);
		if (rc)
			return rc;
	}
}

static int tcp_write(wire *w, const void *p, size_t n, const char *what)
{
	const char *c = p;
	while (n > 0) {
		ssize_t k = send(w->fd, c, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (k > 0) {
			c += k;
			n -= (size_t)k;
			continue;
		}
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
			int rc = tcp_wait(w, w->fd, POLLOUT, what);
			if (rc)
				return rc;
			continue;
		}
		return gf_fail(w->ctx, "edge %s: rank %d closed the connection while %s (%s): it stopped or died", w->edge,
		               w->peer, what, k < 0 ? strerror(errno) : "closed");
	}
	return 0;
}

static int tcp_read(wire *w, void *p, size_t n, const char *what)
{
	char *c = p;
	while (n > 0) {
		ssize_t k = recv(w->fd, c, n, MSG_DONTWAIT);
		if (k > 0) {
			c += k;
			n -= (size_t)k;
			continue;
		}
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
			int rc = tcp_wait(w, w->fd, POLLIN, what);
			if (rc)
				return rc;
			continue;
		}
		return gf_fail(w->ctx, "edge %s: rank %d closed the connection while %s (%s): it stopped or died", w->edge,
		               w->peer, what, k < 0 ? strerror(errno) : "end of stream");
	}
	return 0;
}

static int tcp_listen(wire *w)
{
	struct addrinfo *res;
	int rc = tcp_resolve(w, &res, 1);
	if (rc)
		return rc;
	int fd = -1, err = 0;
	for (struct addrinfo *a = res; a; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
		if (fd < 0) {
			err = errno;
			continue;
		}
		int one = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 1) == 0)
			break;
		err = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return gf_fail(w->ctx, "edge %s: cannot listen on %s: %s", w->edge, w->address, strerror(err));
	w->lfd = fd;
	return 0;
}

static int tcp_accept(wire *w)
{
	double t0 = gf_now();
	for (;;) {
		struct pollfd p = { w->lfd, POLLIN, 0 };
		int n = poll(&p, 1, 100);
		if (n > 0) {
			int fd = accept4(w->lfd, NULL, NULL, SOCK_CLOEXEC);
			if (fd >= 0) {
				tcp_tune(fd);
				w->fd = fd;
				close(w->lfd);
				w->lfd = -1;
				return 0;
			}
			if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED)
				return gf_fail(w->ctx, "edge %s: accept on %s: %s", w->edge, w->address, strerror(errno));
		}
		if (gf_dist_should_abort(w->ctx))
			return GF_ESTOP;
		if (gf_now() - t0 > w->timeout)
			return gf_fail(w->ctx, "edge %s: rank %d did not connect to %s within %.0f s", w->edge, w->peer,
			               w->address, w->timeout);
	}
}

static int tcp_connect(wire *w)
{
	double t0 = gf_now();
	int last = 0;
	for (;;) {
		struct addrinfo *res;
		int rc = tcp_resolve(w, &res, 0);
		if (rc)
			return rc;
		for (struct addrinfo *a = res; a; a = a->ai_next) {
			int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
			if (fd < 0)
				continue;
			if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
				freeaddrinfo(res);
				tcp_tune(fd);
				w->fd = fd;
				return 0;
			}
			last = errno;
			close(fd);
		}
		freeaddrinfo(res);
		/* the receiving rank may not listen yet */
		if (gf_dist_should_abort(w->ctx))
			return GF_ESTOP;
		if (gf_now() - t0 > w->timeout)
			return gf_fail(w->ctx, "edge %s: cannot connect to rank %d at %s within %.0f s: %s", w->edge, w->peer,
			               w->address, w->timeout, strerror(last));
		struct timespec ts = { 0, 50000000L };
		nanosleep(&ts, NULL);
	}
}

/* ---- the end of an edge ---- */

int wire_init(wire *w, gf_ctx *ctx, const gf_value *p, int sender)
{
	memset(w, 0, sizeof(*w));
	w->ctx = ctx;
	w->fd = w->lfd = -1;
	w->peer = (int)gf_param_int(p, "peer");
	w->tag = (int)gf_param_int(p, "tag");
	w->timeout = gf_param_num(p, "timeout");
	snprintf(w->edge, sizeof(w->edge), "%s", gf_param_str(p, "edge"));
	snprintf(w->address, sizeof(w->address), "%s", gf_param_str(p, "address"));
	const char *t = gf_param_str(p, "transport");
	const gf_run_info *run = gf_ctx_run(ctx);
	if (!w->edge[0])
		snprintf(w->edge, sizeof(w->edge), "#%d", w->tag);
	/* ranges and choices are the runtime's (WIRE_PARAMS); left here: what
	 * depends on the run, and the open bound of timeout */
	if (w->peer >= run->world || w->peer == run->rank)
		return gf_fail(ctx, "edge %s: parameter 'peer' is %d, not another rank of the world of %d (this is rank %d)",
		               w->edge, w->peer, run->world, run->rank);
	if (w->timeout == 0)
		return gf_fail(ctx, "edge %s: parameter 'timeout' is 0: it must be above 0 seconds", w->edge);
	w->relaxed = !strcmp(gf_param_str(p, "latency"), "relaxed");
	if (!strcmp(t, "tcp")) {
		w->tcp = 1;
		if (!w->address[0])
			return gf_fail(ctx, "edge %s: transport tcp needs an address (host:port)", w->edge);
		/* the receiver listens from create(), so a sender that starts
		 * first finds the port open or retries until it is */
		return sender ? 0 : tcp_listen(w);
	}
	if (!strcmp(t, "nccl"))
		return gf_fail(ctx, "edge %s: transport \"nccl\" carries device tensors between GPUs and needs the CUDA "
		                    "build's NCCL plugin; this edge carries host messages: use \"mpi\"", w->edge);
	if (gf_dist_comm_edges(&w->comm))
		return gf_fail(ctx, "edge %s: %s (a cross-rank edge over MPI needs a launcher; for processes started by "
		                    "hand use transport = \"tcp\")", w->edge, gf_errmsg());
	return 0;
}

void wire_finish(wire *w)
{
	if (!w->tcp || w->fd < 0)
		return;
	/* Closing a TCP socket with unread bytes (credits the receiver
	 * granted after our last message) sends a reset instead of a FIN,
	 * and a reset can discard what the receiver has not read yet: our
	 * END. So: no more writes, then read (and drop) until the receiver,
	 * which closes as soon as it reads END, closes too; bounded by the
	 * edge's timeout. */
	shutdown(w->fd, SHUT_WR);
	double t0 = gf_now();
	for (;;) {
		char buf[256];
		ssize_t k = recv(w->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (k > 0)
			continue;
		if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
			return;
		double left = w->timeout - (gf_now() - t0);
		if (left <= 0)
			return;
		struct pollfd p = { w->fd, POLLIN, 0 };
		poll(&p, 1, left > 1 ? 1000 : (int)(left * 1000) + 1);
	}
}

void wire_close(wire *w)
{
	if (w->fd >= 0)
		close(w->fd);
	if (w->lfd >= 0)
		close(w->lfd);
	w->fd = w->lfd = -1;
}

int wire_open(wire *w, int sender)
{
	if (!w->tcp)
		return 0;
	return sender ? tcp_connect(w) : tcp_accept(w);
}

static int tag_of(const wire *w, int k)
{
	return w->tag * 4 + k;
}

int wire_send(wire *w, wire_hdr *h, const gf_msg *m)
{
	h->magic = WIRE_MAGIC;
	int rc;
	uint64_t bytes = sizeof(*h);
	if (w->tcp) {
		if ((rc = tcp_write(w, h, sizeof(*h), "sending a header")))
			return rc;
		for (int i = 0; m && i < m->ntensors; i++) {
			size_t n = gf_tensor_bytes(&m->t[i]);
			if ((rc = tcp_write(w, m->t[i].data, n, "sending a tensor")))
				return rc;
			bytes += n;
		}
	} else {
		MPI_Request req;
		if (MPI_Isend(h, (int)sizeof(*h), MPI_BYTE, w->peer, tag_of(w, 0), w->comm, &req) != MPI_SUCCESS)
			return gf_fail(w->ctx, "edge %s: MPI_Isend to rank %d failed", w->edge, w->peer);
		if ((rc = mpi_wait(w, &req, "sending a header")))
			return rc;
		for (int i = 0; m && i < m->ntensors; i++) {
			const char *c = m->t[i].data;
			size_t n = gf_tensor_bytes(&m->t[i]);
			bytes += n;
			do {
				int k = (int)(n > CHUNK ? CHUNK : n);
				if (MPI_Isend(c, k, MPI_BYTE, w->peer, tag_of(w, 1), w->comm, &req) != MPI_SUCCESS)
					return gf_fail(w->ctx, "edge %s: MPI_Isend to rank %d failed", w->edge, w->peer);
				if ((rc = mpi_wait(w, &req, "sending a tensor")))
					return rc;
				c += k;
				n -= (size_t)k;
			} while (n > 0);
		}
	}
	w->bytes += bytes;
	w->msgs++;
	gf_dist_count(GF_TRAFFIC_EDGES, bytes, 1);
	return 0;
}

int wire_recv_hdr(wire *w, wire_hdr *h)
{
	int rc;
	if (w->tcp) {
		rc = tcp_read(w, h, sizeof(*h), "waiting for a message");
	} else {
		MPI_Request req;
		if (MPI_Irecv(h, (int)sizeof(*h), MPI_BYTE, w->peer, tag_of(w, 0), w->comm, &req) != MPI_SUCCESS)
			return gf_fail(w->ctx, "edge %s: MPI_Irecv from rank %d failed", w->edge, w->peer);
		rc = mpi_wait(w, &req, "waiting for a message");
	}
	if (rc)
		return rc;
	if (h->magic != WIRE_MAGIC || h->type < W_HELLO || h->type > W_ABORT)
		return gf_fail(w->ctx, "edge %s: garbled header from rank %d (magic %08x, type %u)", w->edge, w->peer,
		               h->magic, h->type);
	h->text[WIRE_TEXT - 1] = '\0';
	h->source[WIRE_SOURCE - 1] = '\0';
	return 0;
}

int wire_recv_payload(wire *w, void *p, size_t bytes)
{
	if (w->tcp)
		return tcp_read(w, p, bytes, "receiving a tensor");
	char *c = p;
	do {
		int k = (int)(bytes > CHUNK ? CHUNK : bytes);
		MPI_Request req;
		if (MPI_Irecv(c, k, MPI_BYTE, w->peer, tag_of(w, 1), w->comm, &req) != MPI_SUCCESS)
			return gf_fail(w->ctx, "edge %s: MPI_Irecv from rank %d failed", w->edge, w->peer);
		int rc = mpi_wait(w, &req, "receiving a tensor");
		if (rc)
			return rc;
		c += k;
		bytes -= (size_t)k;
	} while (bytes > 0);
	return 0;
}

int wire_send_credit(wire *w, int32_t n)
{
	if (w->tcp) {
		/* a sender that sent its END may have closed the connection
		 * already: what it sent is still to be read, so a credit that
		 * cannot be written is not an error (a broken connection shows
		 * on the next read) */
		uint32_t rec[2] = { CREDIT_MAGIC, (uint32_t)n };
		if (w->credit_dead)
			return 0;
		const char *c = (const char *)rec;
		size_t left = sizeof(rec);
		while (left > 0) {
			ssize_t k = send(w->fd, c, left, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (k > 0) {
				c += k;
				left -= (size_t)k;
				continue;
			}
			if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
				int rc = tcp_wait(w, w->fd, POLLOUT, "granting credit");
				if (rc)
					return rc;
				continue;
			}
			w->credit_dead = 1;
			return 0;
		}
		return 0;
	}
	/* a few bytes: sent eagerly, the wait is short */
	MPI_Request req;
	if (MPI_Isend(&n, 1, MPI_INT32_T, w->peer, tag_of(w, 2), w->comm, &req) != MPI_SUCCESS)
		return gf_fail(w->ctx, "edge %s: MPI_Isend to rank %d failed", w->edge, w->peer);
	return mpi_wait(w, &req, "granting credit");
}

int wire_take_credit(wire *w, int32_t *n, int block)
{
	*n = 0;
	if (w->tcp) {
		for (;;) {
			struct pollfd p = { w->fd, POLLIN, 0 };
			if (!block && poll(&p, 1, 0) <= 0)
				return 0;
			uint32_t rec[2];
			int rc = tcp_read(w, rec, sizeof(rec), "waiting for credit");
			if (rc)
				return rc;
			if (rec[0] != CREDIT_MAGIC)
				return gf_fail(w->ctx, "edge %s: garbled credit from rank %d", w->edge, w->peer);
			int32_t c = (int32_t)rec[1];
			if (c < 0) {
				*n = c;
				return 0;
			}
			*n += c;
			block = 0; /* got some: take the rest without waiting */
		}
	}
	for (;;) {
		int flag = 0;
		MPI_Status st;
		if (MPI_Iprobe(w->peer, tag_of(w, 2), w->comm, &flag, &st) != MPI_SUCCESS)
			return gf_fail(w->ctx, "edge %s: MPI_Iprobe failed", w->edge);
		if (flag) {
			int32_t c;
			if (MPI_Recv(&c, 1, MPI_INT32_T, w->peer, tag_of(w, 2), w->comm, MPI_STATUS_IGNORE) != MPI_SUCCESS)
				return gf_fail(w->ctx, "edge %s: MPI_Recv of credit failed", w->edge);
			if (c < 0) {
				*n = c;
				return 0;
			}
			*n += c;
			block = 0;
			continue;
		}
		if (!block || *n > 0)
			return 0;
		MPI_Request req;
		int32_t c;
		if (MPI_Irecv(&c, 1, MPI_INT32_T, w->peer, tag_of(w, 2), w->comm, &req) != MPI_SUCCESS)
			return gf_fail(w->ctx, "edge %s: MPI_Irecv of credit failed", w->edge);
		int rc = mpi_wait(w, &req, "waiting for the receiver to take more");
		if (rc)
			return rc;
		if (c < 0) {
			*n = c;
			return 0;
		}
		*n += c;
		block = 0;
	}
}

/* ---- messages ---- */

void wire_pack(wire_hdr *h, const gf_msg *m)
{
	memset(h, 0, sizeof(*h));
	h->type = W_DATA;
	h->seq = m->seq;
	h->step = m->step;
	h->version = m->version;
	h->key = m->key;
	h->label = m->label;
	h->epoch = m->epoch;
	h->pos = m->pos;
	h->flags = m->flags;
	h->ntensors = m->ntensors;
	h->nscalars = m->nscalars;
	for (int i = 0; i < m->ntensors; i++) {
		const gf_tensor *t = &m->t[i];
		h->t[i].ndim = t->ndim;
		h->t[i].dtype = (int32_t)t->dtype;
		h->t[i].layout = (int32_t)t->layout;
		h->t[i].device = (int32_t)t->device;
		for (int d = 0; d < t->ndim; d++)
			h->t[i].shape[d] = t->shape[d];
	}
	memcpy(h->scalars, m->scalars, (size_t)m->nscalars * sizeof(gf_scalar));
	if (m->source)
		snprintf(h->source, sizeof(h->source), "%s", m->source);
}

int wire_unpack(const wire_hdr *h, gf_msg *m, char *err, size_t errsize)
{
	if (h->ntensors < 0 || h->ntensors > GF_MSG_MAX_TENSORS || h->nscalars < 0 || h->nscalars > GF_MSG_MAX_SCALARS) {
		snprintf(err, errsize, "a header with %d tensors and %d scalars", h->ntensors, h->nscalars);
		return GF_ECORRUPT;
	}
	m->step = h->step;
	m->version = h->version;
	m->key = h->key;
	m->label = h->label;
	m->epoch = h->epoch;
	m->pos = h->pos;
	m->flags = h->flags;
	m->nscalars = h->nscalars;
	memcpy(m->scalars, h->scalars, (size_t)h->nscalars * sizeof(gf_scalar));
	for (int i = 0; i < h->ntensors; i++) {
		const wire_tensor *t = &h->t[i];
		if (t->ndim < 0 || t->ndim > GF_MAX_DIMS || t->dtype < GF_F32 || t->dtype > GF_I64) {
			snprintf(err, errsize, "tensor %d: %d dimensions of dtype %d", i, t->ndim, t->dtype);
			return GF_ECORRUPT;
		}
		for (int d = 0; d < t->ndim; d++)
			if (t->shape[d] < 0 || t->shape[d] > ((int64_t)1 << 40)) {
				snprintf(err, errsize, "tensor %d: dimension %d is %lld", i, d, (long long)t->shape[d]);
				return GF_ECORRUPT;
			}
		if (!gf_msg_tensor(m, i, (gf_dtype)t->dtype, t->ndim, t->shape)) {
			snprintf(err, errsize, "out of memory for tensor %d", i);
			return -ENOMEM;
		}
		m->t[i].layout = (gf_layout)t->layout;
	}
	return 0;
}
