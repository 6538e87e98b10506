/* How a run stops: the reason it ends (a weightier one replaces a
 * lighter one), the graceful stop (gf_should_stop turns 1), the hard stop
 * (every ring stops, every waiting instance wakes), the first failure,
 * and stop requests from outside (signal handlers). Below everything else
 * in the graph's run: the runner (graph_run.c), the agreed stop
 * (graph_agree.c), the statistics (graph_stats.c) and the stage API
 * (stage_api.c) call it; it calls only the rings and events.
 */
#include <pthread.h>
#include <stdio.h>

#include <ganflow/graph.h>
#include <ganflow/ring.h>

#include "graph_internal.h"

/* ---- stopping ---- */

static int reason_rank(int r)
{
	switch (r) {
	case GF_STOP_NONE: return 0;
	case GF_STOP_EOF: return 1;
	case GF_STOP_STEPS: return 2;
	case GF_STOP_REQUEST: return 3;
	case GF_STOP_HARD: return 4;
	case GF_STOP_GRACE: return 5;
	case GF_STOP_STALL: return 6;
	case GF_STOP_FAILURE: return 7;
	}
	return 0;
}

/* Records why the run ends; a weightier reason replaces a lighter one. */
void gf_graph_set_reason(gf_graph *g, gf_stop_reason r)
{
	/* relaxed: the reason is read after the threads joined */
	int cur = gf_load_relaxed_int(&g->reason);
	while (reason_rank(r) > reason_rank(cur) && !gf_cas_relaxed_int(&g->reason, &cur, (int)r))
		;
}

void gf_graph_stop_graceful(gf_graph *g)
{
	if (gf_exchange_seq_cst_int(&g->stop, 1) == 0)
		gf_event_wake(&g->mon_ev);
}

void gf_graph_stop_hard(gf_graph *g)
{
	if (gf_exchange_seq_cst_int(&g->hard, 1))
		return;
	gf_store_release_int(&g->stop, 1);
	for (int i = 0; i < g->nedges; i++)
		gf_ring_stop(g->edges[i]->ring);
	for (int i = 0; i < g->ninst; i++) {
		gf_ctx *c = g->inst[i];
		for (uint32_t p = 0; c->out && p < c->node->desc->noutputs; p++)
			gf_event_wake(&c->out[p].pool_ev);
		for (uint32_t p = 0; c->in && p < c->node->desc->ninputs; p++)
			gf_event_wake(&c->in[p].ev);
	}
	gf_event_wake(&g->mon_ev);
}

void gf_graph_record_failure(gf_graph *g, const char *who, const char *msg)
{
	pthread_mutex_lock(&g->lock);
	if (!gf_load_relaxed_int(&g->failed)) {
		snprintf(g->err, sizeof(g->err), "stage '%s' failed: %s", who, msg);
		gf_store_release_int(&g->failed, 1);
	}
	pthread_mutex_unlock(&g->lock);
	gf_graph_set_reason(g, GF_STOP_FAILURE);
	gf_graph_stop_hard(g);
}

/* ---- requests and reasons ---- */

void gf_graph_request_stop(gf_graph *g, int hard)
{
	/* lock-free atomics and a futex call only: async-signal-safe */
	gf_or_release_int(&g->req, hard ? REQ_HARD : REQ_GRACEFUL);
	gf_event_wake(&g->mon_ev);
}

gf_stop_reason gf_graph_stop_reason(const gf_graph *g)
{
	return (gf_stop_reason)gf_load_relaxed_int(&g->reason);
}

const char *gf_stop_reason_name(gf_stop_reason r)
{
	switch (r) {
	case GF_STOP_NONE: return "running";
	case GF_STOP_EOF: return "end of data";
	case GF_STOP_STEPS: return "step target reached";
	case GF_STOP_REQUEST: return "stop requested";
	case GF_STOP_HARD: return "hard stop requested";
	case GF_STOP_FAILURE: return "stage failure";
	case GF_STOP_GRACE: return "graceful stop timed out";
	case GF_STOP_STALL: return "stalled";
	}
	return "?";
}
