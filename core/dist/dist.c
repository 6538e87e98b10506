/* core/dist, the distributed world: MPI and liveness (this file), the
 * job's exit status under mpirun (dist_status.c) and the placement of a
 * pipeline's stages on the ranks (placement.c). It uses core/base,
 * core/runtime (graphs, the stage API, the agreed stop through
 * gf_graph_peers) and core/nn's counter-based generator (noise slices);
 * core/train, core/lua and the command use it.
 *
 * The distributed world of a ganflow process: launcher detection, MPI
 * start and end, start-up consistency checks, liveness probes and the
 * waits of stages on the network (gf_dist_wait, gf_dist_should_abort),
 * traffic counters, and the noise slices of data-parallel ranks.
 * See <ganflow/dist.h>.
 *
 * MPI is only touched when a launcher started the process (the launcher's
 * variables are in the environment): `ganflow` outside mpirun/srun never
 * initialises MPI. Three private communicators are made at start: one for
 * the liveness probes (a responder thread answers pings, so a rank that
 * waits too long on a collective can tell a dead peer from a slow one),
 * one for the transport edges, and the world itself for start-up checks on
 * the main thread. Every communicator returns errors instead of aborting.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>

#include <ganflow/dist.h>
#include <ganflow/err.h>
#include <ganflow/graph.h>
#include <ganflow/log.h>
#include <ganflow/stage.h>

#include "../base/atomics.h"

#define TAG_PING 1
#define TAG_PONG 2
#define TAG_STOP_REQ 3 /* the agreed stop, see the responder */
#define TAG_HOLD 4
#define TAG_HOLD_STEP 5
#define TAG_STOP_AT 6
#define POLL_MIN_NS 20000L       /* first sleep between MPI_Test polls */
#define POLL_MAX_NS 2000000L     /* longest sleep between polls */
#define RESPONDER_MAX_NS 20000000L /* the liveness responder's longest sleep: a ping waits
                                      seconds for its answer, and this thread runs all along */
#define FINALIZE_PROBE_EVERY 10.0 /* seconds between probes while ranks gather to finalise */

static struct {
	int detected;
	int rank, world;
	gf_launch how;
	int mpi;                 /* MPI initialised by us */
	int finalized;
	MPI_Comm probe, edges;   /* private communicators */
	pthread_t responder;
	int responder_started;
	atomic_int responder_stop;
	pthread_mutex_t probe_lock;
	int probe_id;
	atomic_uint_least64_t bytes[GF_TRAFFIC_KINDS];
	atomic_uint_least64_t calls[GF_TRAFFIC_KINDS];
} W = { .probe_lock = PTHREAD_MUTEX_INITIALIZER };

/* ---- environment ---- */

/* Parses a non-negative integer variable: 1 found (value in *out), 0
 * absent, -1 malformed. */
static int env_int(const char *name, long *out)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return 0;
	char *end;
	errno = 0;
	long x = strtol(v, &end, 10);
	if (*end || errno || x < 0 || x > 1000000)
		return -1;
	*out = x;
	return 1;
}

int gf_dist_detect(int *rank, int *world, gf_launch *how)
{
	static const char *const pairs[][2] = {
		{ "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE" },
		{ "PMI_RANK", "PMI_SIZE" },
		{ "PMIX_RANK", "PMIX_SIZE" },
		{ "SLURM_PROCID", "SLURM_NTASKS" },
		{ "GANFLOW_RANK", "GANFLOW_WORLD" },
	};
	*rank = 0;
	*world = 1;
	if (how)
		*how = GF_LAUNCH_NONE;
	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		long r = 0, w = 0;
		int fr = env_int(pairs[i][0], &r), fw = env_int(pairs[i][1], &w);
		if (fr == 0 && fw == 0)
			continue;
		if (fr < 0 || fw < 0 || fr == 0 || fw == 0 || w < 1 || r >= w)
			return gf_seterr(GF_EDIST, "launcher environment: %s=%s and %s=%s do not give a rank inside a world",
			                 pairs[i][0], getenv(pairs[i][0]) ? getenv(pairs[i][0]) : "(unset)", pairs[i][1],
			                 getenv(pairs[i][1]) ? getenv(pairs[i][1]) : "(unset)");
		/* srun without --mpi starts SLURM_NTASKS copies that are not MPI
		 * processes: only PMI/OMPI variables (or NTASKS > 1) mean MPI */
		*rank = (int)r;
		*world = (int)w;
		if (how)
			*how = i == 4 ? GF_LAUNCH_MANUAL : GF_LAUNCH_MPI;
		return 0;
	}
	return 0;
}

/* Before gf_dist_init the environment is read at every call (a program
 * may set it, as the tests do); init fixes the world for good. */
static void detect_once(void)
{
	if (W.detected && W.mpi)
		return;
	int r, w;
	gf_launch how;
	if (gf_dist_detect(&r, &w, &how) == 0) {
		W.rank = r;
		W.world = w;
		W.how = how;
	} else {
		W.rank = 0;
		W.world = 1;
		W.how = GF_LAUNCH_NONE;
	}
	W.detected = 1;
}

int gf_dist_rank(void)
{
	detect_once();
	return W.rank;
}

int gf_dist_world(void)
{
	detect_once();
	return W.world;
}

int gf_dist_mpi(void)
{
	return W.mpi && !W.finalized;
}

/* ---- polling ---- */

static void nap(long ns)
{
	struct timespec ts = { ns / 1000000000L, ns % 1000000000L };
	nanosleep(&ts, NULL);
}

/* ---- the liveness responder ----
 *
 * Answers pings, and carries the agreed stop (<ganflow/graph.h>,
 * core/runtime/graph_agree.c): STOP_REQ (any rank -> rank 0: "a stop was
 * requested here"), HOLD (rank 0 -> every rank: freeze your drivers),
 * HOLD_STEP (every rank -> rank 0: the highest step mine can reach),
 * STOP_AT (rank 0 -> every rank: end after this step). Rank 0 runs one
 * agreement per process; a request after it gets the same step back (a
 * rank whose graph started after the agreement). */

enum { R_PING, R_HOLD, R_STOP_AT, R_STOP_REQ, R_HOLD_STEP, R_N };

/* The gf_graph_peers table this layer registers with the graph runtime
 * while MPI is up (gf_dist_init to gf_dist_finalize). The graph is not
 * ours to keep: the responder reaches the running one through
 * gf_graph_hold_running / gf_graph_stop_running, which the runtime guards
 * against a run that has ended. */

/* Asks rank 0 to start an agreed stop (one small message; rank 0 ignores
 * requests after the first): 0, or GF_EDIST without an MPI world. */
static int stop_request(void)
{
	if (!gf_dist_mpi() || !W.responder_started)
		return gf_seterr(GF_EDIST, "no MPI world to agree on a stop through");
	int64_t msg[2] = { W.rank, 0 };
	/* small: sent eagerly, rank 0's responder receives it */
	if (MPI_Send(msg, 2, MPI_INT64_T, 0, TAG_STOP_REQ, W.probe) != MPI_SUCCESS)
		return gf_seterr(GF_EDIST, "rank %d: cannot send the stop request to rank 0", W.rank);
	return 0;
}

static const gf_graph_peers peers = { .stop_request = stop_request };

static int post(MPI_Request *req, int64_t *buf, int tag, int src)
{
	return MPI_Irecv(buf, 2, MPI_INT64_T, src, tag, W.probe, req) == MPI_SUCCESS ? 0 : -1;
}

static void send_all(int tag, int64_t value)
{
	for (int r = 0; r < W.world; r++) {
		int64_t msg[2] = { 0, value };
		MPI_Send(msg, 2, MPI_INT64_T, r, tag, W.probe);
	}
}

static void *responder_main(void *arg)
{
	(void)arg;
	static const int tags[R_N] = { TAG_PING, TAG_HOLD, TAG_STOP_AT, TAG_STOP_REQ, TAG_HOLD_STEP };
	int ping[2];
	int64_t buf[R_N][2];
	MPI_Request req[R_N];
	int nreq = W.rank == 0 ? R_N : R_STOP_REQ; /* only rank 0 coordinates */
	int agreeing = 0, answers = 0;
	int64_t highest = -1;
	if (MPI_Irecv(ping, 2, MPI_INT, MPI_ANY_SOURCE, TAG_PING, W.probe, &req[R_PING]) != MPI_SUCCESS)
		return NULL;
	for (int i = 1; i < nreq; i++)
		if (post(&req[i], buf[i], tags[i], i == R_HOLD || i == R_STOP_AT ? 0 : MPI_ANY_SOURCE))
			return NULL;
	long ns = POLL_MIN_NS;
	/* relaxed: the flag only has to be seen eventually; finalize joins us */
	while (!gf_load_relaxed_int(&W.responder_stop)) {
		int done = 0, i = MPI_UNDEFINED;
		MPI_Status st;
		if (MPI_Testany(nreq, req, &i, &done, &st) != MPI_SUCCESS)
			break;
		if (!done || i == MPI_UNDEFINED) {
			nap(ns);
			ns = ns * 2 > RESPONDER_MAX_NS ? RESPONDER_MAX_NS : ns * 2;
			continue;
		}
		ns = POLL_MIN_NS;
		/* small sends: eager, never wait for the receiving rank */
		switch (i) {
		case R_PING: {
			int pong[2] = { ping[0], W.rank };
			MPI_Send(pong, 2, MPI_INT, st.MPI_SOURCE, TAG_PONG, W.probe);
			if (MPI_Irecv(ping, 2, MPI_INT, MPI_ANY_SOURCE, TAG_PING, W.probe, &req[R_PING]) != MPI_SUCCESS)
				return NULL;
			continue;
		}
		case R_HOLD: {
			int64_t msg[2] = { W.rank, gf_graph_hold_running() };
			MPI_Send(msg, 2, MPI_INT64_T, 0, TAG_HOLD_STEP, W.probe);
			break;
		}
		case R_STOP_AT: gf_graph_stop_running(buf[R_STOP_AT][1]); break;
		case R_STOP_REQ:
			if (!agreeing) {
				agreeing = 1;
				gf_log(GF_LOG_INFO, "rank %d asked to stop: the ranks agree on the last step", (int)buf[R_STOP_REQ][0]);
				send_all(TAG_HOLD, 0);
			} else if (answers == W.world) {
				/* asked after the agreement (its graph started late): the same step */
				int64_t msg[2] = { 0, highest };
				MPI_Send(msg, 2, MPI_INT64_T, (int)buf[R_STOP_REQ][0], TAG_STOP_AT, W.probe);
			}
			break;
		case R_HOLD_STEP:
			if (buf[R_HOLD_STEP][1] > highest)
				highest = buf[R_HOLD_STEP][1];
			if (++answers == W.world)
				send_all(TAG_STOP_AT, highest);
			break;
		}
		if (post(&req[i], buf[i], tags[i], i == R_HOLD || i == R_STOP_AT ? 0 : MPI_ANY_SOURCE))
			return NULL;
	}
	for (int i = 0; i < nreq; i++) {
		MPI_Cancel(&req[i]);
		MPI_Wait(&req[i], MPI_STATUS_IGNORE);
	}
	return NULL;
}

/* ---- start and end ---- */

int gf_dist_init(void)
{
	detect_once();
	if (W.mpi || W.how != GF_LAUNCH_MPI)
		return 0;
	int inited = 0, prov = 0;
	MPI_Initialized(&inited);
	if (!inited) {
		int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &prov);
		if (rc != MPI_SUCCESS)
			return gf_seterr(GF_EDIST, "MPI_Init_thread failed (code %d)", rc);
	} else {
		MPI_Query_thread(&prov);
	}
	W.mpi = 1;
	gf_graph_set_peers(&peers);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	if (prov < MPI_THREAD_MULTIPLE)
		return gf_seterr(GF_EDIST, "the MPI library gives thread level %d, ganflow needs MPI_THREAD_MULTIPLE (%d): "
		                 "stages communicate from their own threads", prov, MPI_THREAD_MULTIPLE);
	int r, w;
	MPI_Comm_rank(MPI_COMM_WORLD, &r);
	MPI_Comm_size(MPI_COMM_WORLD, &w);
	if (r != W.rank || w != W.world)
		return gf_seterr(GF_EDIST, "the launcher says rank %d of %d, MPI says rank %d of %d", W.rank, W.world, r, w);
	if (MPI_Comm_dup(MPI_COMM_WORLD, &W.probe) != MPI_SUCCESS || MPI_Comm_dup(MPI_COMM_WORLD, &W.edges) != MPI_SUCCESS)
		return gf_seterr(GF_EDIST, "cannot create the communicators of rank %d", W.rank);
	MPI_Comm_set_errhandler(W.probe, MPI_ERRORS_RETURN);
	MPI_Comm_set_errhandler(W.edges, MPI_ERRORS_RETURN);
	atomic_init(&W.responder_stop, 0);
	if (pthread_create(&W.responder, NULL, responder_main, NULL) == 0)
		W.responder_started = 1;
	else
		return gf_seterr(GF_EDIST, "cannot start the liveness thread of rank %d", W.rank);
	return 0;
}

/* Waits for a collective of the main thread, probing now and then, so a
 * rank that died (or failed before it got there) ends the wait instead of
 * hanging it: 0, or GF_EDIST with "rank N stopped responding while ..." in
 * gf_errmsg(). */
static int wait_collective(MPI_Request *req, const char *while_what)
{
	double next = gf_now() + FINALIZE_PROBE_EVERY, t0 = gf_now();
	long ns = POLL_MIN_NS;
	for (;;) {
		int done = 0;
		if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
			return gf_seterr(GF_EDIST, "rank %d: MPI failed while %s", W.rank, while_what);
		if (done)
			return 0;
		if (gf_now() > next) {
			int lost[8];
			int n = gf_dist_probe(gf_dist_probe_wait(), lost, 8);
			if (n > 0)
				return gf_seterr(GF_EDIST, "rank %d stopped responding (no message for %.0f s) while %s", lost[0],
				                 gf_now() - t0, while_what);
			next = gf_now() + FINALIZE_PROBE_EVERY;
		}
		nap(ns);
		ns = ns * 2 > POLL_MAX_NS ? POLL_MAX_NS : ns * 2;
	}
}

/* Waits until every rank reached the end (a non-blocking barrier): 0 when
 * all are there, GF_EDIST naming a lost rank. */
static int gather_to_finish(void)
{
	MPI_Request req;
	if (MPI_Ibarrier(W.probe, &req) != MPI_SUCCESS)
		return GF_EDIST;
	int rc = wait_collective(&req, "the ranks gathered to finish");
	if (rc)
		gf_log(GF_LOG_ERROR, "rank %d: %s; exiting without MPI_Finalize", W.rank, gf_errmsg());
	return rc;
}

void gf_dist_finalize(int ok)
{
	if (!W.mpi || W.finalized)
		return;
	if (!ok || gather_to_finish()) {
		/* a peer may be dead: MPI_Finalize would wait for it forever */
		W.finalized = 1;
		gf_graph_set_peers(NULL);
		return;
	}
	if (W.responder_started) {
		gf_store_relaxed_int(&W.responder_stop, 1);
		pthread_join(W.responder, NULL);
		W.responder_started = 0;
	}
	MPI_Comm_free(&W.probe);
	MPI_Comm_free(&W.edges);
	MPI_Finalize();
	W.finalized = 1;
	gf_graph_set_peers(NULL);
}

int gf_dist_comm_dup(void *comm)
{
	if (!gf_dist_mpi())
		return gf_seterr(GF_EDIST, "no MPI world (start ganflow with mpirun or srun)");
	MPI_Comm *c = comm;
	if (MPI_Comm_dup(MPI_COMM_WORLD, c) != MPI_SUCCESS)
		return gf_seterr(GF_EDIST, "rank %d: MPI_Comm_dup failed", W.rank);
	MPI_Comm_set_errhandler(*c, MPI_ERRORS_RETURN);
	return 0;
}

int gf_dist_comm_edges(void *comm)
{
	if (!gf_dist_mpi())
		return gf_seterr(GF_EDIST, "no MPI world (start ganflow with mpirun or srun)");
	*(MPI_Comm *)comm = W.edges;
	return 0;
}

/* ---- start-up checks ---- */

static uint64_t fnv1a(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
	return h;
}

/* Line `i` (0-based) of text into out, "(nothing)" past the end. */
static void nth_line(const char *text, int i, char *out, size_t size)
{
	const char *p = text;
	for (int k = 0; k < i && p; k++) {
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	if (!p || !*p) {
		snprintf(out, size, "(nothing)");
		return;
	}
	size_t len = strcspn(p, "\n");
	snprintf(out, size, "%.*s", (int)(len < size - 1 ? len : size - 1), p);
}

int gf_dist_check_same(const char *what, const char *desc, char *err, size_t errsize)
{
	if (!gf_dist_mpi())
		return 0;
	size_t len = strlen(desc);
	uint64_t mine[2] = { fnv1a(desc, len), (uint64_t)len };
	uint64_t *all = calloc((size_t)W.world * 2, sizeof(uint64_t));
	int *counts = calloc((size_t)W.world, sizeof(int)), *displs = calloc((size_t)W.world, sizeof(int));
	char *texts = NULL;
	int rc = 0;
	if (!all || !counts || !displs) {
		rc = -ENOMEM;
		snprintf(err, errsize, "out of memory");
		goto out;
	}
	MPI_Request req;
	char while_what[128];
	snprintf(while_what, sizeof(while_what), "the ranks compared their %s", what);
	if (MPI_Iallgather(mine, 2, MPI_UINT64_T, all, 2, MPI_UINT64_T, MPI_COMM_WORLD, &req) != MPI_SUCCESS ||
	    wait_collective(&req, while_what)) {
		rc = GF_EDIST;
		snprintf(err, errsize, "rank %d: comparing the %s across ranks failed: %s", W.rank, what, gf_errmsg());
		goto out;
	}
	int differ = 0;
	for (int r = 1; r < W.world; r++)
		differ |= all[2 * r] != all[0] || all[2 * r + 1] != all[1];
	if (!differ)
		goto out;
	/* they differ: every rank gathers every text to say how */
	size_t total = 0;
	for (int r = 0; r < W.world; r++) {
		counts[r] = (int)all[2 * r + 1];
		displs[r] = (int)total;
		total += all[2 * r + 1];
	}
	texts = malloc(total + 1);
	if (!texts) {
		rc = -ENOMEM;
		snprintf(err, errsize, "out of memory");
		goto out;
	}
	if (MPI_Iallgatherv(desc, (int)len, MPI_CHAR, texts, counts, displs, MPI_CHAR, MPI_COMM_WORLD, &req) !=
	        MPI_SUCCESS ||
	    wait_collective(&req, while_what)) {
		rc = GF_EDIST;
		snprintf(err, errsize, "rank %d: the %s differs across ranks", W.rank, what);
		goto out;
	}
	texts[total] = '\0';
	rc = GF_EDIST;
	for (int r = 1; r < W.world; r++) {
		if (all[2 * r] == all[0] && all[2 * r + 1] == all[1])
			continue;
		char *a = strndup(texts, (size_t)counts[0]), *b = strndup(texts + displs[r], (size_t)counts[r]);
		if (!a || !b) {
			free(a);
			free(b);
			snprintf(err, errsize, "mismatched %s: rank %d differs from rank 0", what, r);
			goto out;
		}
		int line = 0;
		char la[256], lb[256];
		for (;; line++) {
			nth_line(a, line, la, sizeof(la));
			nth_line(b, line, lb, sizeof(lb));
			if (strcmp(la, lb) || !strcmp(la, "(nothing)"))
				break;
		}
		snprintf(err, errsize,
		         "mismatched %s across ranks: rank %d has \"%s\" where rank 0 has \"%s\" (item %d); every rank "
		         "must run the same script with the same arguments (place stages with rank = r instead of "
		         "declaring them on some ranks only)",
		         what, r, lb, la, line + 1);
		free(a);
		free(b);
		break;
	}
out:
	free(all);
	free(counts);
	free(displs);
	free(texts);
	return rc;
}

int gf_dist_bcast_str(char *buf, size_t size, int root)
{
	if (!gf_dist_mpi())
		return 0;
	int len = W.rank == root ? (int)strnlen(buf, size - 1) : 0;
	MPI_Request req;
	if (MPI_Ibcast(&len, 1, MPI_INT, root, MPI_COMM_WORLD, &req) != MPI_SUCCESS ||
	    wait_collective(&req, "rank 0 sent the run directory") ||
	    MPI_Ibcast(buf, len, MPI_CHAR, root, MPI_COMM_WORLD, &req) != MPI_SUCCESS ||
	    wait_collective(&req, "rank 0 sent the run directory"))
		return gf_seterr(GF_EDIST, "rank %d: broadcast from rank %d failed: %s", W.rank, root, gf_errmsg());
	buf[len] = '\0';
	return 0;
}

/* ---- liveness ---- */

double gf_dist_probe_wait(void)
{
	const char *v = getenv("GANFLOW_PROBE_WAIT");
	double w = v ? atof(v) : 0;
	return w > 0 ? w : 2.0;
}

int gf_dist_probe(double wait_s, int *lost, int max)
{
	if (!gf_dist_mpi())
		return gf_seterr(GF_EDIST, "no MPI world");
	pthread_mutex_lock(&W.probe_lock);
	int n = W.world, id = ++W.probe_id, nlost = 0;
	MPI_Request *sreq = calloc((size_t)n, sizeof(*sreq)), *rreq = calloc((size_t)n, sizeof(*rreq));
	int (*pong)[2] = calloc((size_t)n, sizeof(*pong));
	char *answered = calloc((size_t)n, 1);
	if (!sreq || !rreq || !pong || !answered) {
		free(sreq);
		free(rreq);
		free(pong);
		free(answered);
		pthread_mutex_unlock(&W.probe_lock);
		return gf_seterr(-ENOMEM, "out of memory");
	}
	/* static: a send to a dead rank may never complete, and its request
	 * is freed below while MPI may still read the buffer (probes are
	 * serialised by the lock, so one buffer serves them all) */
	static int ping[2];
	ping[0] = id;
	ping[1] = W.rank;
	for (int r = 0; r < n; r++) {
		sreq[r] = rreq[r] = MPI_REQUEST_NULL;
		if (r == W.rank) {
			answered[r] = 1;
			continue;
		}
		MPI_Irecv(pong[r], 2, MPI_INT, r, TAG_PONG, W.probe, &rreq[r]);
		MPI_Isend(ping, 2, MPI_INT, r, TAG_PING, W.probe, &sreq[r]);
	}
	double deadline = gf_now() + wait_s;
	long ns = POLL_MIN_NS;
	for (;;) {
		int pending = 0;
		for (int r = 0; r < n; r++) {
			if (answered[r])
				continue;
			int done = 0;
			MPI_Test(&rreq[r], &done, MPI_STATUS_IGNORE);
			if (!done) {
				pending++;
				continue;
			}
			if (pong[r][0] == id) {
				answered[r] = 1;
			} else {
				/* the late answer to an earlier probe: wait for ours */
				MPI_Irecv(pong[r], 2, MPI_INT, r, TAG_PONG, W.probe, &rreq[r]);
				pending++;
			}
		}
		if (!pending || gf_now() > deadline)
			break;
		nap(ns);
		ns = ns * 2 > POLL_MAX_NS ? POLL_MAX_NS : ns * 2;
	}
	for (int r = 0; r < n; r++) {
		if (!answered[r]) {
			if (nlost < max)
				lost[nlost] = r;
			nlost++;
			/* an answer that may still come matches a later receive
			 * and is recognised as stale by its id */
			MPI_Cancel(&rreq[r]);
			MPI_Request_free(&rreq[r]);
		}
		if (sreq[r] != MPI_REQUEST_NULL)
			MPI_Request_free(&sreq[r]);
	}
	free(sreq);
	free(rreq);
	free(pong);
	free(answered);
	pthread_mutex_unlock(&W.probe_lock);
	return nlost;
}

int gf_dist_should_abort(gf_ctx *ctx)
{
	/* only the hard stop: a graceful one lets collectives finish */
	return gf_ctx_hard_stop(ctx);
}

int gf_dist_wait(gf_ctx *ctx, void *reqp, double timeout_s, const char *what)
{
	MPI_Request *req = reqp;
	double t0 = gf_now(), silent = t0;
	long ns = 10000;
	int warned = 0;
	for (;;) {
		int done = 0;
		if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
			return gf_fail(ctx, "rank %d: MPI error while %s", W.rank, what);
		if (done)
			return 0;
		if (gf_dist_should_abort(ctx)) {
			MPI_Cancel(req);
			MPI_Request_free(req);
			return GF_ESTOP;
		}
		double now = gf_now();
		struct timespec ts = { 0, ns };
		nanosleep(&ts, NULL);
		/* short naps while the operation is young, longer ones later */
		long cap = now - t0 < 0.02 ? 100000L : now - t0 < 1.0 ? 1000000L : 10000000L;
		ns = ns * 2 > cap ? cap : ns * 2;
		if (now - silent < timeout_s)
			continue;
		int lost[8];
		int n = gf_dist_probe(gf_dist_probe_wait(), lost, 8);
		if (n > 0) {
			char more[64] = "";
			if (n > 1)
				snprintf(more, sizeof(more), " (and %d more)", n - 1);
			return gf_fail(ctx, "rank %d stopped responding%s (no message for %.0f s while %s)", lost[0], more,
			               gf_now() - t0, what);
		}
		if (!warned)
			gf_warn(ctx, "still waiting after %.0f s while %s; every rank answers pings (a slow rank, not a dead one)",
			        now - t0, what);
		warned = 1;
		silent = gf_now();
	}
}

/* ---- traffic ---- */

void gf_dist_count(gf_traffic kind, uint64_t bytes, uint64_t calls)
{
	if ((int)kind < 0 || kind >= GF_TRAFFIC_KINDS)
		return;
	/* relaxed: statistics read after the run */
	gf_add_relaxed_u64(&W.bytes[kind], bytes);
	gf_add_relaxed_u64(&W.calls[kind], calls);
}

void gf_dist_traffic(uint64_t bytes[GF_TRAFFIC_KINDS], uint64_t calls[GF_TRAFFIC_KINDS])
{
	for (int k = 0; k < GF_TRAFFIC_KINDS; k++) {
		bytes[k] = gf_load_relaxed_u64(&W.bytes[k]);
		calls[k] = gf_load_relaxed_u64(&W.calls[k]);
	}
}

/* ---- modes ---- */

const char *gf_dist_mode_name(gf_dist_mode m)
{
	switch (m) {
	case GF_DIST_NONE: return "none";
	case GF_DIST_ALLREDUCE: return "allreduce";
	case GF_DIST_ZERO1: return "zero1";
	case GF_DIST_GOSSIP: return "gossip";
	}
	return "?";
}

int gf_dist_mode_parse(const char *s, gf_dist_mode *out)
{
	for (int m = GF_DIST_NONE; m <= GF_DIST_GOSSIP; m++)
		if (!strcmp(s, gf_dist_mode_name((gf_dist_mode)m))) {
			*out = (gf_dist_mode)m;
			return 0;
		}
	return gf_seterr(GF_EPARAM, "unknown exchange mode '%s' (allreduce, zero1, gossip, none)", s);
}

/* ---- noise slices ---- */

void gf_dist_normal_slice(gf_rng *r, float *out, size_t n, int rank, int world)
{
	size_t first = (size_t)rank * n;
	if (first % 4 == 0) {
		/* elements 4b..4b+3 come from block b: a draw starting first/4
		 * blocks later gives exactly these elements */
		gf_rng t = *r;
		t.offset += first / 4;
		gf_rng_normal(&t, out, n, 0.0f, 1.0f);
	} else {
		for (size_t i = 0; i < n; i++)
			out[i] = gf_rng_normal_at(r->seed, r->stream, r->offset, first + i);
	}
	r->offset += gf_rng_blocks(n * (size_t)world);
}

void gf_dist_uniform_slice(gf_rng *r, float *out, size_t n, int rank, int world)
{
	size_t first = (size_t)rank * n;
	for (size_t i = 0; i < n; i++) {
		uint32_t w[4];
		size_t e = first + i;
		gf_rng_block(w, r->seed, r->stream, r->offset + e / 4);
		out[i] = gf_rng_u01(w[e % 4]);
	}
	r->offset += gf_rng_blocks(n * (size_t)world);
}
