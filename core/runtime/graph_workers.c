/* Adaptive worker counts, the monitor's side. A stage run with workers =
 * "auto" has as many instances as its maximum; every GF_WORKERS_WINDOW
 * seconds the monitor measures it (what its instances did, how long its
 * consumers waited on it, how many cores the process left idle), asks the
 * node's controller (workers.c, the rule in <ganflow/workers.h>) for a
 * count and tells the dealer (gf_deal_set_want), which moves the deal
 * table at its next message (stage_api.c, deal.h). Also what the count
 * looks like: the statistics, the progress line's part, the end-of-run
 * table.
 *
 * Every figure comes from totals the instances keep themselves (seconds
 * waited per port, messages popped): the monitor takes differences between
 * two windows and never stops an instance to look.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ganflow/graph.h>
#include <ganflow/log.h>
#include <ganflow/workers.h>

#include "graph_internal.h"

/* ---- what the instances report ---- */

/* Seconds instance c has waited on input port `port` (in = 1) or output
 * port `port` (in = 0) since the start, the wait in progress included.
 * The start of a wait is cleared before the wait is added to the total
 * (stage_api.c): reading the same start before and after the total means
 * the total lacks this wait, so adding it counts it once. */
static double waited(gf_ctx *c, int in, int port, double now)
{
	atomic_uint_least64_t *sum = in ? &c->in[port].wait_s : &c->out[port].wait_s;
	for (int tries = 0; tries < 16; tries++) {
		double t0 = gf_load_acquire_f64(&c->wait_t0);
		int kind = gf_load_relaxed_int(&c->wait), p = gf_load_relaxed_int(&c->wait_port);
		double total = gf_load_acquire_f64(sum);
		if (gf_load_acquire_f64(&c->wait_t0) != t0)
			continue; /* a wait began or ended meanwhile */
		int ours = t0 > 0 && p == port && (in ? kind == WAIT_POP : kind == WAIT_PUSH || kind == WAIT_GET);
		return total + (ours && now > t0 ? now - t0 : 0.0);
	}
	return gf_load_acquire_f64(sum);
}

static double cpu_clock(clockid_t id)
{
	struct timespec ts;
	if (clock_gettime(id, &ts))
		return 0;
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double process_cpu(void)
{
	return cpu_clock(CLOCK_PROCESS_CPUTIME_ID);
}

/* CPU seconds of instance c's thread (0 before it starts; a thread that
 * ended keeps its last figure). */
static double thread_cpu(gf_ctx *c, double last)
{
	clockid_t id;
	if (!c->started || gf_load_relaxed_int(&c->done) || pthread_getcpuclockid(c->thread, &id))
		return last;
	double t = cpu_clock(id);
	return t > last ? t : last;
}

/* ---- setting up ---- */

int gf_graph_workers_setup(gf_graph *g)
{
	g->cores = gf_workers_cores();
	for (int i = 0; i < g->nnodes; i++) {
		struct node *n = &g->nodes[i];
		struct node_workers *w = n->wk;
		if (!n->adaptive || !w)
			continue;
		gf_workers_opts o = { .max = n->workers, .start = 1 };
		int rc = gf_workers_create(&o, &w->ctl);
		if (rc)
			return rc;
		w->in_wait = calloc((size_t)n->workers, sizeof(double));
		w->out_wait = calloc((size_t)n->workers, sizeof(double));
		w->items = calloc((size_t)n->workers, sizeof(uint64_t));
		w->cpu = calloc((size_t)n->workers, sizeof(double));
		w->starved = calloc((size_t)n->out_links[0] + 1, sizeof(double));
		w->outlinks = calloc((size_t)n->out_links[0] + 1, sizeof(int));
		if (!w->in_wait || !w->out_wait || !w->items || !w->cpu || !w->starved || !w->outlinks)
			return -ENOMEM;
		for (int l = 0; l < g->nlinks; l++)
			if (g->links[l].from == i && w->noutlinks < n->out_links[0])
				w->outlinks[w->noutlinks++] = l;
	}
	return 0;
}

/* The window's starting point: every total as it is now. */
static void window_begin(gf_graph *g, struct node *n, double now)
{
	struct node_workers *w = n->wk;
	for (int k = 0; k < n->workers; k++) {
		gf_ctx *c = &n->inst[k];
		w->in_wait[k] = waited(c, 1, 0, now);
		w->out_wait[k] = waited(c, 0, 0, now);
		w->items[k] = gf_load_relaxed_u64(&c->in[0].items);
		w->cpu[k] = thread_cpu(c, w->cpu[k]);
	}
	for (int k = 0; k < w->noutlinks; k++) {
		const struct link *l = &g->links[w->outlinks[k]];
		w->starved[k] = waited(&g->nodes[l->to].inst[0], 1, l->in, now);
	}
	w->t0 = now;
	w->cpu0 = process_cpu();
}

void gf_graph_workers_start(gf_graph *g, double now)
{
	for (int i = 0; i < g->nnodes; i++) {
		struct node *n = &g->nodes[i];
		if (n->adaptive && n->wk && n->wk->ctl) {
			gf_workers_start(n->wk->ctl, now);
			window_begin(g, n, now);
		}
	}
}

void gf_graph_workers_finish(gf_graph *g, double now)
{
	for (int i = 0; i < g->nnodes; i++)
		if (g->nodes[i].wk && g->nodes[i].wk->ctl)
			gf_workers_finish(g->nodes[i].wk->ctl, now);
}

/* ---- deciding ---- */

static void judge(gf_graph *g, struct node *n, double now)
{
	struct node_workers *w = n->wk;
	double t = now - w->t0;
	int count = gf_workers_count(w->ctl);
	gf_workers_obs o = { .t = t };
	for (int k = 0; k < n->workers; k++) {
		gf_ctx *c = &n->inst[k];
		double in = waited(c, 1, 0, now), out = waited(c, 0, 0, now);
		uint64_t items = gf_load_relaxed_u64(&c->in[0].items);
		double din = in - w->in_wait[k], dout = out - w->out_wait[k];
		o.items += items - w->items[k];
		o.cpu += thread_cpu(c, w->cpu[k]) - w->cpu[k];
		/* a finished instance neither works nor waits */
		double busy = gf_load_relaxed_int(&c->done) ? 0.0 : t - din - dout;
		if (busy > 0)
			o.busy += busy;
		if (k < count)
			o.in_wait += din;
	}
	for (int k = 0; k < w->noutlinks; k++) {
		const struct link *l = &g->links[w->outlinks[k]];
		double s = waited(&g->nodes[l->to].inst[0], 1, l->in, now) - w->starved[k];
		if (s > o.starved)
			o.starved = s;
	}
	double cpu = process_cpu();
	o.idle = g->cores - (t > 0 ? (cpu - w->cpu0) / t : 0.0);
	int next = gf_workers_observe(w->ctl, &o, now);
	if (next != count) {
		gf_deal_set_want(&w->deal, next);
		gf_worker_stat st;
		gf_workers_stat(w->ctl, now, &st);
		gf_log(GF_LOG_DEBUG,
		       "%s: %d -> %d workers (its consumer waited %.0f%% of %.2f s, %.2f workers needed, %.1f cores idle, its inputs waited %.0f%%)",
		       n->name, count, next, 100 * o.starved / t, t, st.needed, o.idle, 100 * o.in_wait / (count * t));
	}
	window_begin(g, n, now);
}

void gf_graph_workers_tick(gf_graph *g, double now)
{
	for (int i = 0; i < g->nnodes; i++) {
		struct node *n = &g->nodes[i];
		if (n->adaptive && n->wk && n->wk->ctl && now - n->wk->t0 >= GF_WORKERS_WINDOW)
			judge(g, n, now);
	}
}

/* ---- what the count looks like ---- */

static void node_stat(gf_graph *g, struct node *n, double now, gf_worker_stat *st)
{
	memset(st, 0, sizeof(*st));
	snprintf(st->stage, sizeof(st->stage), "%s", n->name);
	if (n->wk && n->wk->ctl) {
		gf_workers_stat(n->wk->ctl, now, st);
		return;
	}
	(void)g;
	st->workers = st->min = st->max = st->limit = n->workers;
	st->mean = n->workers;
}

int gf_graph_worker_stats(gf_graph *g, gf_worker_stat *out, int max)
{
	double now = g->t_end > 0 ? g->t_end : gf_now();
	int k = 0;
	for (int i = 0; i < g->nnodes; i++) {
		struct node *n = &g->nodes[i];
		if (n->workers < 2)
			continue;
		if (k < max)
			node_stat(g, n, now, &out[k]);
		k++;
	}
	return k;
}

int gf_graph_edge_unused(const gf_graph *g, const struct edge *e)
{
	(void)g;
	const gf_ctx *c = e->prod->node->adaptive ? e->prod : e->cons->node->adaptive ? e->cons : NULL;
	if (!c || !c->node->wk || !c->node->wk->ctl)
		return 0;
	gf_worker_stat st;
	gf_workers_stat(c->node->wk->ctl, 0, &st);
	return c->worker >= st.max;
}

int gf_graph_worker_parked(const gf_ctx *c)
{
	const struct node *n = c->node;
	return n->adaptive && n->wk && n->wk->ctl && c->worker >= gf_workers_count(n->wk->ctl);
}

void gf_graph_workers_text(gf_graph *g, char *buf, size_t size)
{
	size_t len = 0;
	buf[0] = '\0';
	for (int i = 0; i < g->nnodes && len < size; i++) {
		struct node *n = &g->nodes[i];
		if (n->adaptive && n->wk && n->wk->ctl)
			len += (size_t)snprintf(buf + len, size - len, "%s%s=%d", len ? "," : "  workers ", n->name,
			                        gf_workers_count(n->wk->ctl));
	}
}

void gf_graph_print_workers(gf_graph *g)
{
	int n = gf_graph_worker_stats(g, NULL, 0);
	if (n == 0)
		return;
	gf_worker_stat *st = calloc((size_t)n, sizeof(*st));
	if (!st)
		return;
	n = gf_graph_worker_stats(g, st, n);
	int w = 5;
	for (int i = 0; i < n; i++)
		if ((int)strlen(st[i].stage) > w)
			w = (int)strlen(st[i].stage);
	gf_log(GF_LOG_INFO, "%-*s %8s %6s %6s %7s %6s %6s %8s %7s", w, "stage", "workers", "now", "min", "mean", "max",
	       "limit", "changes", "needed");
	for (int i = 0; i < n; i++) {
		if (st[i].adaptive)
			gf_log(GF_LOG_INFO, "%-*s %8s %6d %6d %7.2f %6d %6d %8" PRIu64 " %7.2f", w, st[i].stage, "auto",
			       st[i].workers, st[i].min, st[i].mean, st[i].max, st[i].limit, st[i].changes, st[i].needed);
		else
			gf_log(GF_LOG_INFO, "%-*s %8s %6d %6s %7s %6s %6d %8s %7s", w, st[i].stage, "fixed", st[i].workers,
			       "", "", "", st[i].limit, "", "");
	}
	free(st);
}
