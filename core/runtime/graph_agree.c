/* The stop every rank of a distributed run agrees on: a graceful stop
 * requested on any rank (Ctrl-C, SIGTERM, mpirun ending the job) becomes
 * "every rank ends after step S", so collectives stay matched and the
 * final checkpoint is the one a run with steps = S writes. See the
 * graph_agree.c section of graph_internal.h for the protocol. This is the
 * runtime's side; the messages are the distributed layer's (core/dist),
 * which sits above the runtime and registers a gf_graph_peers table here:
 * the runtime reaches MPI only through that table, and the distributed
 * layer reaches the graph only through gf_graph_hold_running and
 * gf_graph_stop_running, which find the running graph under a lock that
 * gf_graph_run takes to take it back: the distributed layer's thread
 * answers whenever its messages arrive, so it must never keep a pointer
 * to a graph whose run may have ended.
 *
 * Why drivers cannot pass the step they announce: a driver publishes its
 * step (seq_cst) and then reads `held` (seq_cst); the hold sets
 * `held` (seq_cst) and then reads every driver's step. In the single
 * order of these operations either the driver sees `held` and blocks at
 * the step it just published, or its step was published before the hold
 * read it; then it blocks at its next report, step + 1 at most. So the
 * highest step read + 1 bounds every driver of the rank that only
 * reports steps. A driver that also announces the step it begins
 * (gf_step_begin, before it takes any work of that step) is bounded by
 * the step it began, by the same argument on `entered`: if the hold read
 * step e, the driver's announcement of e + 1 comes later in that order,
 * so it sees `held` there and waits; released with a target below e + 1,
 * it does not run e + 1. This is what keeps the stop short: in a
 * synchronous GAN, d_step has finished step t and waits for the fakes of
 * t + 1 while g_step still computes t; "t + 1" would cost g_step a whole
 * step more, "t" only the rest of the one it is in.
 */
#include <pthread.h>

#include <ganflow/err.h>
#include <ganflow/graph.h>
#include <ganflow/log.h>

#include "graph_internal.h"

/* ---- the peers ---- */

/* Set while no graph runs (gf_dist_init, gf_dist_finalize); read by the
 * thread that runs the graph. */
static const gf_graph_peers *peers;

void gf_graph_set_peers(const gf_graph_peers *p)
{
	peers = p;
}

/* The graph whose distributed run is in progress, under running_lock:
 * set while its stage threads run, so that the peers' thread reaches it
 * only between the two. */
static pthread_mutex_t running_lock = PTHREAD_MUTEX_INITIALIZER;
static gf_graph *running;

void gf_graph_agree_attach(gf_graph *g)
{
	if (g->info.world < 2)
		return;
	pthread_mutex_lock(&running_lock);
	running = g;
	pthread_mutex_unlock(&running_lock);
}

void gf_graph_agree_detach(gf_graph *g)
{
	/* once this returns, no hold or stop of the peers' thread is inside g
	 * and none reaches it later: the caller may destroy it */
	pthread_mutex_lock(&running_lock);
	if (running == g)
		running = NULL;
	pthread_mutex_unlock(&running_lock);
}

/* ---- holding and stopping ---- */

static int64_t hold(gf_graph *g)
{
	gf_graph_set_reason(g, GF_STOP_REQUEST);
	gf_store_seq_cst_int(&g->held, 1);
	int64_t high = -1;
	for (int i = 0; i < g->ninst; i++) {
		/* a driver that begins its steps through gf_step_begin reaches
		 * the step it began and no further; one that only reports them
		 * may already be in the step after its last report */
		int64_t e = gf_load_seq_cst_i64(&g->inst[i]->entered);
		int64_t s = gf_load_seq_cst_i64(&g->inst[i]->step);
		int64_t reach = e >= 0 ? (e > s ? e : s) : s >= 0 ? s + 1 : -1;
		if (reach > high)
			high = reach;
	}
	return high;
}

static void stop_at(gf_graph *g, int64_t s)
{
	int64_t cur = gf_load_seq_cst_i64(&g->target);
	if (s > 0 && (cur <= 0 || s < cur))
		gf_store_seq_cst_i64(&g->target, s);
	/* the target is stored before the release a held driver acquires */
	gf_store_seq_cst_int(&g->released, 1);
	gf_event_wake(&g->hold_ev);
	if (s > 0)
		gf_log(GF_LOG_INFO, "stopping: every rank ends after step %lld (stages then flush)", (long long)s);
	if (s <= 0 || gf_load_relaxed_i64(&g->step) >= s) {
		/* nothing to run up to: the ordinary graceful stop */
		gf_graph_set_reason(g, GF_STOP_REQUEST);
		gf_graph_stop_graceful(g);
	}
}

int64_t gf_graph_hold_running(void)
{
	pthread_mutex_lock(&running_lock);
	int64_t h = running ? hold(running) : -1;
	pthread_mutex_unlock(&running_lock);
	return h;
}

void gf_graph_stop_running(int64_t s)
{
	pthread_mutex_lock(&running_lock);
	if (running)
		stop_at(running, s);
	pthread_mutex_unlock(&running_lock);
}

void gf_graph_hold_wait(gf_graph *g)
{
	for (;;) {
		uint32_t key = gf_event_prepare(&g->hold_ev);
		if (gf_load_seq_cst_int(&g->released) || gf_graph_is_hard(g)) {
			gf_event_cancel(&g->hold_ev);
			return;
		}
		gf_event_wait(&g->hold_ev, key, 0.1);
	}
}

/* ---- the monitor's side ---- */

int gf_graph_agree_begin(gf_graph *g, double now)
{
	if (g->info.world < 2 || !peers)
		return -1;
	if (gf_load_relaxed_int(&g->agreeing))
		return 0;
	if (peers->stop_request()) {
		gf_log(GF_LOG_WARN, "%s; stopping this rank on its own", gf_errmsg());
		return -1;
	}
	gf_store_relaxed_int(&g->agreeing, 1);
	g->t_agree = now;
	gf_graph_set_reason(g, GF_STOP_REQUEST);
	gf_log(GF_LOG_INFO, "stopping: the ranks agree on the last step, then stages flush (interrupt again to stop at once)");
	return 0;
}

void gf_graph_agree_check(gf_graph *g, double now)
{
	if (!gf_load_relaxed_int(&g->agreeing) || gf_load_seq_cst_int(&g->released) || gf_graph_is_hard(g))
		return;
	if (now - g->t_agree > g->grace) {
		gf_log(GF_LOG_WARN, "the ranks did not agree on a last step within %.1f s (a rank lost or not answering); "
		                    "stopping hard",
		       g->grace);
		gf_graph_set_reason(g, GF_STOP_GRACE);
		gf_graph_stop_hard(g);
	}
}
