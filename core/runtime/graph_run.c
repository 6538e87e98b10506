/* core/runtime, the graph runtime: rings and messages (ring.c, msg.c),
 * the depth controller (depth.c), graphs (graph.c builds and validates,
 * graph_stop.c, graph_agree.c, graph_stats.c, this file runs), the API
 * stages call (stage_api.c), the stage loader and parameter checking
 * (loader.c, params.c) and Ctrl-C (signals.c). It uses only core/base;
 * the layers above reach it through <ganflow/graph.h>, <ganflow/stage.h>
 * and the other public headers, and the distributed layer (core/dist)
 * through the gf_graph_peers table it registers.
 *
 * Running a graph: setting up its rings and ports, creating the stage
 * instances, one thread each, the monitor (the calling thread of
 * gf_graph_run: stop requests, the grace period, the stall watchdog, the
 * progress line), and draining. See <ganflow/graph.h> and
 * graph_internal.h for the vocabulary (node, instance, link, edge) and how
 * stops work.
 *
 * The top of the runtime: it stands on graph_stop.c (the stops),
 * graph_agree.c (the stop every rank agrees on), graph_stats.c (what the
 * monitor shows) and stage_api.c's instances, and none of them calls it.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ganflow/depth.h>
#include <ganflow/graph.h>
#include <ganflow/log.h>
#include <ganflow/msg.h>
#include <ganflow/ring.h>
#include <ganflow/stage.h>

#include "graph_internal.h"
#include "ring_internal.h"

#define POOL_SLACK 8      /* envelopes beyond the rings' capacity: held by stages */
#define TICK 0.1          /* monitor wake-up period, seconds */

/* ---- setting up the run ---- */

void gf_graph_on_release(void *ud)
{
	gf_event_notify(ud);
}

static void edge_end_name(char *buf, size_t size, const struct node *n, int worker, const char *port)
{
	if (n->workers > 1)
		snprintf(buf, size, "%s#%d.%s", n->name, worker, port);
	else
		snprintf(buf, size, "%s.%s", n->name, port);
}

static int build_edges(gf_graph *g)
{
	int total = 0;
	for (int i = 0; i < g->nlinks; i++) {
		struct link *l = &g->links[i];
		int wa = g->nodes[l->from].workers, wb = g->nodes[l->to].workers;
		l->nedges = wa > wb ? wa : wb;
		total += l->nedges;
	}
	g->edges = calloc((size_t)total + 1, sizeof(*g->edges));
	if (!g->edges)
		return -ENOMEM;
	for (int i = 0; i < g->nlinks; i++) {
		struct link *l = &g->links[i];
		struct node *a = &g->nodes[l->from], *b = &g->nodes[l->to];
		l->edges = calloc((size_t)l->nedges, sizeof(*l->edges));
		if (!l->edges)
			return -ENOMEM;
		for (int k = 0; k < l->nedges; k++) {
			struct edge *e = calloc(1, sizeof(*e));
			if (!e)
				return -ENOMEM;
			g->edges[g->nedges++] = e;
			l->edges[k] = e;
			e->link = l;
			int rc = gf_ring_create(l->opts.capacity, l->opts.depth ? l->opts.depth : 1, &e->ring);
			if (rc)
				return rc;
			gf_depth_opts dopts = { .min = l->opts.min_depth, .fixed = l->opts.depth };
			if ((rc = gf_depth_create(e->ring, &dopts, &e->depth)))
				return rc;
			int ka = a->workers > 1 ? k : 0, kb = b->workers > 1 ? k : 0;
			e->prod = &a->inst[ka];
			e->cons = &b->inst[kb];
			edge_end_name(e->from, sizeof(e->from), a, ka, a->desc->outputs[l->out].name);
			edge_end_name(e->to, sizeof(e->to), b, kb, b->desc->inputs[l->in].name);
		}
	}
	return 0;
}

static int build_ports(gf_graph *g, gf_ctx *c)
{
	const gf_stage_desc *d = c->node->desc;
	c->in = calloc(d->ninputs + 1, sizeof(*c->in));
	c->out = calloc(d->noutputs + 1, sizeof(*c->out));
	if (!c->in || !c->out)
		return -ENOMEM;
	int self = (int)(c->node - g->nodes);
	for (uint32_t p = 0; p < d->ninputs; p++) {
		struct in_port *ip = &c->in[p];
		gf_event_init(&ip->ev);
		ip->nlinks = c->node->in_links[p];
		ip->edges = calloc((size_t)g->nedges + 1, sizeof(*ip->edges));
		ip->eof = calloc((size_t)g->nedges + 1, 1);
		if (!ip->edges || !ip->eof)
			return -ENOMEM;
		int merge_from = -1;
		for (int i = 0; i < g->nlinks; i++) {
			struct link *l = &g->links[i];
			if (l->to != self || l->in != (int)p)
				continue;
			for (int k = 0; k < l->nedges; k++)
				if (l->edges[k]->cons == c)
					ip->edges[ip->nedges++] = l->edges[k];
			if (g->nodes[l->from].workers > 1)
				merge_from = l->from;
		}
		atomic_init(&ip->wait_s, 0);
		atomic_init(&ip->items, 0);
		if (ip->nedges == 0)
			ip->mode = IN_NONE;
		else if (ip->nlinks == 1 && merge_from >= 0)
			ip->mode = IN_MERGE;
		else if (ip->nedges == 1)
			ip->mode = IN_SINGLE;
		else
			ip->mode = IN_ANY;
		if (ip->mode == IN_ANY)
			for (int k = 0; k < ip->nedges; k++)
				gf_ring_set_consumer_event(ip->edges[k]->ring, &ip->ev);
		if (ip->mode == IN_MERGE) {
			ip->deal = &g->nodes[merge_from].wk->deal;
			int rc = gf_deal_cursor_init(ip->deal, &ip->cur, 1);
			if (rc)
				return rc;
		}
	}
	for (uint32_t p = 0; p < d->noutputs; p++) {
		struct out_port *op = &c->out[p];
		gf_event_init(&op->pool_ev);
		atomic_init(&op->wait_s, 0);
		op->nlinks = c->node->out_links[p];
		op->targets = calloc((size_t)op->nlinks + 1, sizeof(*op->targets));
		if (!op->targets)
			return -ENOMEM;
		uint32_t need = 0;
		for (int i = 0; i < g->nlinks; i++) {
			struct link *l = &g->links[i];
			if (l->from != self || l->out != (int)p)
				continue;
			struct target *t = &op->targets[op->ntargets++];
			t->edges = calloc((size_t)l->nedges, sizeof(*t->edges));
			if (!t->edges)
				return -ENOMEM;
			uint32_t sum = 0;
			for (int k = 0; k < l->nedges; k++) {
				if (l->edges[k]->prod == c) {
					t->edges[t->n++] = l->edges[k];
					sum += gf_ring_capacity(l->edges[k]->ring);
				}
			}
			if (sum > need)
				need = sum;
			if (t->n > 1) { /* we deal to the workers of l->to */
				struct node *to = &g->nodes[l->to];
				t->deal = &to->wk->deal;
				t->adaptive = to->adaptive;
				gf_deal_cursor_init(t->deal, &t->cur, 0);
			}
		}
		op->seq = 0;
		int rc = gf_msg_pool_create(need + POOL_SLACK, NULL, &op->pool);
		if (rc)
			return rc;
		gf_msg_pool_on_release(op->pool, gf_graph_on_release, &op->pool_ev);
	}
	return 0;
}

static int setup(gf_graph *g)
{
	int ninst = 0;
	for (int i = 0; i < g->nnodes; i++) {
		struct node *n = &g->nodes[i];
		n->inst = calloc((size_t)n->workers, sizeof(*n->inst));
		if (!n->inst)
			return -ENOMEM;
		ninst += n->workers;
	}
	g->inst = calloc((size_t)ninst, sizeof(*g->inst));
	if (!g->inst)
		return -ENOMEM;
	g->ninst = ninst;
	int k = 0;
	for (int i = 0; i < g->nnodes; i++) {
		struct node *n = &g->nodes[i];
		for (int w = 0; w < n->workers; w++) {
			gf_ctx *c = &n->inst[w];
			c->g = g;
			c->node = n;
			c->worker = w;
			atomic_init(&c->done, 0);
			atomic_init(&c->flushing, 0);
			atomic_init(&c->step, -1);
			atomic_init(&c->entered, -1);
			atomic_init(&c->wait, WAIT_NONE);
			atomic_init(&c->wait_port, 0);
			atomic_init(&c->wait_t0, 0);
			c->in_seq = -1;
			atomic_init(&c->busy_ns, 0);
			atomic_init(&c->busy_kind, 0);
			atomic_init(&c->flops, 0);
			if (n->workers > 1)
				snprintf(c->name, sizeof(c->name), "%s#%d", n->name, w);
			else
				snprintf(c->name, sizeof(c->name), "%s", n->name);
			g->inst[k++] = c;
		}
	}
	int rc = build_edges(g);
	/* a node of several workers: the table its dealer and mergers share,
	 * a reader slot for each link out of it */
	for (int i = 0; i < g->nnodes && !rc; i++) {
		struct node *n = &g->nodes[i];
		if (n->workers < 2)
			continue;
		if (!(n->wk = calloc(1, sizeof(*n->wk))))
			return -ENOMEM;
		rc = gf_deal_init(&n->wk->deal, n->adaptive ? 1 : n->workers, n->out_links[0]);
	}
	for (int i = 0; i < g->ninst && !rc; i++)
		rc = build_ports(g, g->inst[i]);
	if (!rc)
		rc = gf_graph_workers_setup(g);
	return rc;
}

/* ---- running ---- */

static void finish_instance(gf_ctx *c)
{
	const gf_stage_desc *d = c->node->desc;
	/* outputs: the end of data flows downstream */
	for (uint32_t p = 0; p < d->noutputs; p++)
		for (int t = 0; t < c->out[p].ntargets; t++)
			for (int k = 0; k < c->out[p].targets[t].n; k++)
				gf_ring_close(c->out[p].targets[t].edges[k]->ring);
	/* inputs: producers stop pushing to us; what is queued goes back to
	 * its pools now, so a producer waiting for an envelope wakes up */
	for (uint32_t p = 0; p < d->ninputs; p++) {
		struct in_port *ip = &c->in[p];
		for (int k = 0; k < ip->nedges; k++) {
			gf_ring_detach(ip->edges[k]->ring);
			void *m;
			while (!gf_graph_is_hard(c->g) && gf_ring_drain_one(ip->edges[k]->ring, &m) == 0)
				gf_msg_release(m);
		}
	}
}

static void *instance_main(void *arg)
{
	gf_ctx *c = arg;
	gf_graph *g = c->g;
	const gf_stage_desc *d = c->node->desc;
	char tname[16];
	snprintf(tname, sizeof(tname), "gf:%.12s", c->name);
	pthread_setname_np(pthread_self(), tname);

	int rc = d->run(c->self, c);
	if (rc == GF_ESTOP || rc == GF_EEOF)
		rc = 0;
	if (rc) {
		char msg[256];
		snprintf(msg, sizeof(msg), "run() returned %d (%s) without a message from gf_fail()", rc, gf_strerror(rc));
		gf_graph_record_failure(g, c->name, msg);
	} else if (d->flush && !gf_graph_is_hard(g)) {
		gf_store_relaxed_int(&c->flushing, 1);
		rc = d->flush(c->self, c);
		gf_store_relaxed_int(&c->flushing, 0);
		if (rc && rc != GF_ESTOP && rc != GF_EEOF) {
			char msg[256];
			snprintf(msg, sizeof(msg), "flush() returned %d (%s) without a message from gf_fail()", rc,
			         gf_strerror(rc));
			gf_graph_record_failure(g, c->name, msg);
		}
	}
	finish_instance(c);
	gf_store_relaxed_int(&c->done, 1);
	/* release: our last pushes and stats are visible to the monitor that
	 * sees the count */
	gf_add_release_int(&g->ndone, 1);
	gf_event_notify(&g->mon_ev);
	return NULL;
}


static void list_running(gf_graph *g, char *buf, size_t size)
{
	size_t len = 0;
	buf[0] = '\0';
	for (int i = 0; i < g->ninst && len < size; i++) {
		gf_ctx *c = g->inst[i];
		if (c->started && !gf_load_relaxed_int(&c->done))
			len += (size_t)snprintf(buf + len, size - len, "%s%s", len ? ", " : "", c->name);
	}
}

/* ---- the stall watchdog ---- */

static void seconds_text(char *buf, size_t size, double s)
{
	if (s >= 120)
		snprintf(buf, size, "%.0f min", s / 60);
	else if (s >= 10)
		snprintf(buf, size, "%.0f s", s);
	else
		snprintf(buf, size, "%.1f s", s);
}

/* Called by the monitor on every tick while no stop is in effect: notes
 * progress (a step, or items where no stage reports steps), reports a
 * stall once past the report limit, and stops the run past the stop limit. */
static void watchdog(gf_graph *g, double now)
{
	int64_t step = gf_load_relaxed_i64(&g->step);
	int64_t items = gf_load_relaxed_i64(&g->items);
	/* one rank of several may host no stage that reports steps (a reader
	 * feeding another rank): there it arms with the first step */
	if (g->info.world > 1 && step == 0 && items == 0) {
		g->t_progress = now;
		return;
	}
	if (step != g->wd_step || items != g->wd_items) {
		/* the first interval holds the start-up (networks, first reads) */
		if (step > g->wd_step && g->wd_step > 0) {
			double per = (now - g->t_progress) / (double)(step - g->wd_step);
			if (per > g->slowest)
				g->slowest = per;
		}
		if (g->stall_warned)
			gf_log(GF_LOG_INFO, "stall over: step %lld", (long long)step);
		g->wd_step = step;
		g->wd_items = items;
		g->t_progress = now;
		g->stall_warned = 0;
		return;
	}
	double idle = now - g->t_progress, limit = gf_graph_stall_limit(g), stop = gf_graph_stall_stop_limit(g);
	if (idle < limit)
		return;
	char what[2048], a[32], b[32], c[32];
	seconds_text(a, sizeof(a), idle);
	seconds_text(b, sizeof(b), stop);
	if (!g->stall_warned || idle >= stop) {
		gf_graph_stall_text(g, what, sizeof(what));
		if (step > 0)
			snprintf(c, sizeof(c), "since step %lld", (long long)step);
		else
			snprintf(c, sizeof(c), "since the start");
	}
	if (!g->stall_warned) {
		g->stall_warned = 1;
		gf_log(GF_LOG_WARN, "stalled: no step completed for %s (%s): %s; the run stops if none completes within %s (stall=, stall_stop=)",
		       a, c, what, b);
	}
	if (idle < stop)
		return;
	g->stalled = 1;
	gf_graph_set_reason(g, GF_STOP_STALL);
	if (step > 0) {
		gf_graph_seterr(g, GF_EFAIL, "the run stalled: no step completed for %s (%s): %s; stopped gracefully (stages flushed: a checkpoint stage wrote its final checkpoint)",
		                a, c, what);
		gf_log(GF_LOG_WARN, "stalled for %s: stopping (stages flush, the final checkpoint is written)", a);
		gf_graph_stop_graceful(g);
	} else {
		gf_graph_seterr(g, GF_EFAIL, "the run stalled: no step completed for %s (%s): %s; stopped without a checkpoint (no step to save)",
		                a, c, what);
		gf_graph_stop_hard(g);
	}
}

/* CPU seconds the threads of the stages inside their flush hook have used
 * so far: while this grows, a graceful stop is doing its work (a final
 * evaluation, a checkpoint written by a sanitizer build on a loaded
 * machine), not stuck. Stages still in run() do not count: one that
 * ignores the stop keeps running and is stopped hard after the grace. */
static double flushing_cpu(gf_graph *g)
{
	double sum = 0;
	for (int i = 0; i < g->ninst; i++) {
		gf_ctx *c = g->inst[i];
		clockid_t id;
		struct timespec ts;
		if (c->started && !gf_load_relaxed_int(&c->done) && gf_load_relaxed_int(&c->flushing) &&
		    pthread_getcpuclockid(c->thread, &id) == 0 && clock_gettime(id, &ts) == 0)
			sum += (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
	}
	return sum;
}

static void monitor(gf_graph *g)
{
	struct gf_progress pr = { .t_last = g->t_start, .flops_t = g->t_start, .flop_rate = -1 };
	int show = !(g->flags & GF_GRAPH_QUIET);
	double tick = gf_log_tty() ? 0.25 : 1.0;
	double next_progress = g->t_start + tick;
	double t_stop = 0, next_warn = 0;
	double t_cpu = 0, cpu_seen = 0; /* the grace clock's last look at flushing_cpu */
	char text[1024];
	for (;;) {
		/* acquire: pairs with the release increment of finishing threads */
		if (gf_load_acquire_int(&g->ndone) == g->ninst)
			break;
		uint32_t key = gf_event_prepare(&g->mon_ev);
		if (gf_load_acquire_int(&g->ndone) == g->ninst)
			gf_event_cancel(&g->mon_ev);
		else
			gf_event_wait(&g->mon_ev, key, TICK);
		double now = gf_now();
		int req = gf_load_acquire_int(&g->req);
		if ((req & REQ_HARD) && !gf_graph_is_hard(g)) {
			gf_graph_set_reason(g, GF_STOP_HARD);
			gf_log(GF_LOG_WARN, "stopping now (hard stop)");
			gf_graph_stop_hard(g);
		} else if ((req & REQ_GRACEFUL) && !gf_load_relaxed_int(&g->stop) && !gf_load_relaxed_int(&g->agreeing)) {
			/* under MPI every rank ends after the same step */
			if (gf_graph_agree_begin(g, now)) {
				gf_graph_set_reason(g, GF_STOP_REQUEST);
				gf_log(GF_LOG_INFO, "stopping: letting the stages finish and flush (interrupt again to stop at once)");
				gf_graph_stop_graceful(g);
			}
		}
		gf_graph_agree_check(g, now);
		if (!gf_load_relaxed_int(&g->stop))
			watchdog(g, now);
		gf_graph_workers_tick(g, now);
		if (gf_load_relaxed_int(&g->stop) && !gf_graph_is_hard(g)) {
			if (t_stop == 0) {
				t_stop = t_cpu = now;
				cpu_seen = flushing_cpu(g);
			} else if (now - t_cpu >= (g->grace < 4 ? g->grace / 4 : 1.0)) {
				/* a flush that computed for 1% of the time since the last look restarts the grace */
				double cpu = flushing_cpu(g);
				if (cpu - cpu_seen >= 0.01 * (now - t_cpu))
					t_stop = now;
				cpu_seen = cpu;
				t_cpu = now;
			}
			if (now - t_stop > g->grace) {
				char running[512];
				list_running(g, running, sizeof(running));
				gf_log(GF_LOG_WARN, "graceful stop did not finish: no progress for %.1f s (still running: %s); stopping hard",
				       g->grace, running[0] ? running : "?");
				gf_graph_set_reason(g, GF_STOP_GRACE);
				gf_graph_stop_hard(g);
			}
		}
		if (gf_graph_is_hard(g)) {
			if (next_warn == 0)
				next_warn = now + 10;
			else if (now > next_warn) {
				char running[512];
				list_running(g, running, sizeof(running));
				gf_log(GF_LOG_WARN, "waiting for stages that do not return after the stop: %s", running);
				next_warn = now + 10;
			}
		}
		if (show && now >= next_progress) {
			gf_graph_progress_text(g, &pr, now, text, sizeof(text));
			gf_progress(text);
			next_progress = now + tick;
		}
	}
	if (show) {
		gf_graph_progress_text(g, &pr, gf_now(), text, sizeof(text));
		gf_progress_done(text);
	}
}

static void destroy_instances(gf_graph *g)
{
	for (int i = 0; i < g->ninst; i++) {
		gf_ctx *c = g->inst[i];
		if (c->created && c->node->desc->destroy)
			c->node->desc->destroy(c->self);
		c->created = 0;
		c->self = NULL;
	}
}

/* After every thread joined: leftovers go back to their pools, leaks are
 * reported. */
static void drain(gf_graph *g)
{
	for (int i = 0; i < g->nedges; i++) {
		void *m;
		while (gf_ring_drain_one(g->edges[i]->ring, &m) == 0)
			gf_msg_release(m);
	}
	for (int i = 0; i < g->ninst; i++) {
		gf_ctx *c = g->inst[i];
		for (uint32_t p = 0; c->out && p < c->node->desc->noutputs; p++) {
			gf_msg_pool *pool = c->out[p].pool;
			if (!pool)
				continue;
			uint32_t lost = gf_msg_pool_size(pool) - gf_msg_pool_free_count(pool);
			if (lost)
				gf_log(GF_LOG_WARN, "stage '%s': %u message(s) of port '%s' were never released", c->name, lost,
				       c->node->desc->outputs[p].name);
		}
	}
}

static int create_instances(gf_graph *g)
{
	for (int i = 0; i < g->ninst; i++) {
		gf_ctx *c = g->inst[i];
		void *self = NULL;
		int rc = c->node->desc->create(c, &c->node->params, &self);
		if (rc && self && c->node->desc->destroy)
			c->node->desc->destroy(self); /* what a failed create() left behind */
		if (rc) {
			if (!gf_load_relaxed_int(&g->failed)) {
				char msg[256];
				snprintf(msg, sizeof(msg), "create() returned %d (%s) without a message from gf_fail()", rc,
				         gf_strerror(rc));
				gf_graph_record_failure(g, c->name, msg);
			}
			return GF_EFAIL;
		}
		c->self = self;
		c->created = 1;
		if (gf_load_relaxed_int(&g->failed)) {
			return GF_EFAIL;
		}
	}
	return 0;
}

static void copy_info(gf_graph *g, const gf_run_info *info)
{
	if (!info)
		return;
	g->info = *info;
	g->run_dir = info->run_dir ? strdup(info->run_dir) : NULL;
	g->backend = info->backend ? strdup(info->backend) : NULL;
	g->resume = info->resume ? strdup(info->resume) : NULL;
	g->pipeline = info->pipeline ? strdup(info->pipeline) : NULL;
	g->info.run_dir = g->run_dir;
	g->info.backend = g->backend;
	g->info.resume = g->resume;
	g->info.pipeline = g->pipeline;
	if (g->info.world < 1)
		g->info.world = 1;
}

int gf_graph_run(gf_graph *g, const gf_run_info *info, unsigned flags)
{
	if (g->ran)
		return gf_graph_seterr(g, GF_EGRAPH, "the graph has already run");
	g->ran = 1;
	g->flags = flags;
	copy_info(g, info);
	gf_store_relaxed_i64(&g->target, g->info.steps);
	if (!g->info.backend)
		g->info.backend = "auto";
	int rc = gf_graph_validate(g);
	if (rc)
		return rc;
	if ((rc = setup(g))) {
		gf_graph_seterr(g, rc, "cannot set up the graph: %s", gf_strerror(rc));
		goto out;
	}
	if ((rc = create_instances(g)))
		goto out;
	if (g->created && g->created(g->created_arg)) {
		rc = gf_graph_seterr(g, GF_EFAIL, "%s", gf_errmsg());
		goto out;
	}
	if (gf_load_acquire_int(&g->req) & REQ_HARD) {
		gf_graph_set_reason(g, GF_STOP_HARD);
		gf_graph_stop_hard(g);
		rc = GF_ESTOP;
		goto out;
	}

	g->t_start = gf_now();
	g->t_progress = g->t_start;
	for (int i = 0; i < g->nedges; i++)
		gf_depth_start(g->edges[i]->depth, g->t_start);
	gf_graph_workers_start(g, g->t_start);
	/* Stage threads leave SIGINT/SIGTERM to the calling thread. */
	sigset_t block, old;
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	for (int i = 0; i < g->ninst; i++) {
		gf_ctx *c = g->inst[i];
		int prc = pthread_create(&c->thread, NULL, instance_main, c);
		if (prc) {
			char msg[128];
			snprintf(msg, sizeof(msg), "cannot start a thread: %s", strerror(prc));
			gf_graph_record_failure(g, c->name, msg);
			/* the ones not started count as done */
			gf_add_release_int(&g->ndone, g->ninst - i);
			break;
		}
		c->started = 1;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);

	gf_graph_agree_attach(g);
	monitor(g);
	for (int i = 0; i < g->ninst; i++)
		if (g->inst[i]->started)
			pthread_join(g->inst[i]->thread, NULL);
	gf_graph_agree_detach(g);
	g->t_end = gf_now();
	for (int i = 0; i < g->nedges; i++)
		gf_depth_finish(g->edges[i]->depth, g->t_end);
	gf_graph_workers_finish(g, g->t_end);

	gf_graph_set_reason(g, GF_STOP_EOF);
	if (gf_load_acquire_int(&g->failed) || g->stalled)
		rc = GF_EFAIL; /* the message is set */
	else if (gf_graph_is_hard(g)) {
		rc = GF_ESTOP;
		gf_graph_seterr(g, rc, "the run was stopped (%s)", gf_stop_reason_name(gf_graph_stop_reason(g)));
	} else
		rc = 0;
	if (!(flags & GF_GRAPH_QUIET))
		gf_graph_print_summary(g);
out:
	destroy_instances(g);
	drain(g);
	return rc;
}
