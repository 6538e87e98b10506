/* The stage API: the runtime side of <ganflow/stage.h>. What a stage's
 * create/run/flush call: gf_pop, gf_try_pop, gf_msg_get, gf_push (messages
 * in and out of its ports), gf_fail, gf_warn, gf_info, gf_should_stop,
 * gf_report_step, gf_report_value, gf_edge_stats, gf_ctx_*. Each runs on
 * the calling instance's thread; the graph it belongs to is built by
 * graph.c and run by graph_run.c (graph_internal.h holds the structures).
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/depth.h>
#include <ganflow/graph.h>
#include <ganflow/log.h>
#include <ganflow/msg.h>
#include <ganflow/ring.h>
#include <ganflow/stage.h>

#include "graph_internal.h"
#include "ring_internal.h"

#define MIN_POLLS 16       /* polls before a wait looks at the clock */

/* ---- the stage ABI: ports ---- */

/* What an instance is blocked on since when, for the stall watchdog and
 * the worker controller. The kind and port are relaxed (a snapshot); the
 * start is released after them and cleared before the wait is added to the
 * port's total, so a reader that sees the same start before and after
 * reading the total (graph_workers.c) has a total without this wait and
 * the kind and port of it. */
static inline void wait_begin(gf_ctx *c, int kind, int port, double t0)
{
	gf_store_relaxed_int(&c->wait_port, port);
	gf_store_relaxed_int(&c->wait, kind);
	gf_store_release_f64(&c->wait_t0, t0);
}

static inline void wait_end(gf_ctx *c, double t1)
{
	int kind = gf_load_relaxed_int(&c->wait), port = gf_load_relaxed_int(&c->wait_port);
	double t0 = gf_load_relaxed_f64(&c->wait_t0); /* ours */
	atomic_uint_least64_t *sum = kind == WAIT_POP ? &c->in[port].wait_s : &c->out[port].wait_s;
	gf_store_release_f64(&c->wait_t0, 0.0);
	gf_store_release_f64(sum, gf_load_relaxed_f64(sum) + (t1 > t0 ? t1 - t0 : 0.0));
	gf_store_relaxed_int(&c->wait, WAIT_NONE);
}

/* Pops one item from edge e of input ip; block = 0: -EAGAIN when empty. */
static int pop_edge(gf_ctx *c, int port, struct in_port *ip, struct edge *e, gf_msg **out, int block)
{
	void *p;
	double t0 = gf_now(), t1 = t0;
	int stalled = 0;
	int rc = gf_ring_try_pop(e->ring, &p);
	if (rc == -EAGAIN) {
		if (!block)
			return rc;
		stalled = 1;
		wait_begin(c, WAIT_POP, port, t0);
		rc = gf_ring_pop(e->ring, &p);
		t1 = gf_now();
		wait_end(c, t1);
	}
	if (rc)
		return rc;
	gf_depth_on_pop(e->depth, ip->last_end > 0 ? t0 - ip->last_end : 0.0, stalled, t1 - t0, t1);
	ip->last_end = t1;
	*out = p;
	return 0;
}

/* One pass over the edges of an IN_ANY input, starting at rr. Returns 0
 * with *out and the edge, -EAGAIN (nothing now), GF_EEOF (all finished) or
 * GF_ESTOP. */
static int scan_any(struct in_port *ip, gf_msg **out, struct edge **from)
{
	int alive = 0;
	for (int k = 0; k < ip->nedges; k++) {
		int i = (ip->rr + k) % ip->nedges;
		if (ip->eof[i])
			continue;
		void *p;
		int rc = gf_ring_try_pop(ip->edges[i]->ring, &p);
		if (rc == 0) {
			ip->rr = (i + 1) % ip->nedges;
			*out = p;
			*from = ip->edges[i];
			return 0;
		}
		if (rc == GF_EEOF) {
			ip->eof[i] = 1;
			continue;
		}
		if (rc == GF_ESTOP)
			return rc;
		alive++;
	}
	return alive ? -EAGAIN : GF_EEOF;
}

static int pop_any(gf_ctx *c, int port, struct in_port *ip, gf_msg **out, int block)
{
	struct edge *e = NULL;
	double t0 = gf_now();
	int rc = scan_any(ip, out, &e);
	int stalled = rc == -EAGAIN;
	if (stalled && block)
		wait_begin(c, WAIT_POP, port, t0);
	double deadline = t0 + gf_spin_budget();
	for (int spin = 0; rc == -EAGAIN && block; spin++) {
		if (gf_graph_is_hard(c->g)) {
			wait_end(c, gf_now());
			return GF_ESTOP;
		}
		if (spin < MIN_POLLS || ((spin & 15) || gf_now() < deadline)) {
			gf_cpu_relax();
			rc = scan_any(ip, out, &e);
			continue;
		}
		uint32_t key = gf_event_prepare(&ip->ev);
		rc = scan_any(ip, out, &e);
		if (rc != -EAGAIN || gf_graph_is_hard(c->g)) {
			gf_event_cancel(&ip->ev);
			if (rc == -EAGAIN)
				rc = GF_ESTOP;
			break;
		}
		gf_event_wait(&ip->ev, key, -1);
		rc = scan_any(ip, out, &e);
	}
	double t1 = stalled ? gf_now() : t0;
	if (stalled && block)
		wait_end(c, t1);
	if (rc)
		return rc;
	gf_depth_on_pop(e->depth, ip->last_end > 0 ? t0 - ip->last_end : 0.0, stalled, t1 - t0, t1);
	ip->last_end = t1;
	return 0;
}

static int do_pop(gf_ctx *c, int port, gf_msg **out, int block)
{
	*out = NULL;
	if (port < 0 || (uint32_t)port >= c->node->desc->ninputs)
		return -EINVAL;
	struct in_port *ip = &c->in[port];
	for (;;) {
		int rc;
		switch (ip->mode) {
		case IN_NONE:
			return GF_EEOF;
		case IN_SINGLE:
			rc = pop_edge(c, port, ip, ip->edges[0], out, block);
			break;
		case IN_MERGE:
			/* the worker holding the next message, as the dealer
			 * decided (deal.h) */
			rc = pop_edge(c, port, ip, ip->edges[gf_deal_worker(ip->deal, &ip->cur, ip->merged)], out, block);
			if (rc == 0)
				ip->merged++;
			break;
		default:
			rc = pop_any(c, port, ip, out, block);
			break;
		}
		if (rc)
			return rc;
		/* relaxed: a statistic for the monitor; only we write it */
		gf_store_relaxed_u64(&ip->items, gf_load_relaxed_u64(&ip->items) + 1);
		c->in_seq = (*out)->seq;
		/* a worker's placeholder for an input it skipped: it kept the
		 * round-robin order, now it goes back to its pool */
		if ((*out)->flags & GF_MSG_DROPPED) {
			gf_msg_release(*out);
			*out = NULL;
			continue;
		}
		return 0;
	}
}

int gf_pop(gf_ctx *c, int port, gf_msg **out)
{
	return do_pop(c, port, out, 1);
}

int gf_try_pop(gf_ctx *c, int port, gf_msg **out)
{
	return do_pop(c, port, out, 0);
}

int gf_msg_get(gf_ctx *c, int port, gf_msg **out)
{
	*out = NULL;
	if (port < 0 || (uint32_t)port >= c->node->desc->noutputs)
		return -EINVAL;
	struct out_port *op = &c->out[port];
	double deadline = 0;
	int rc = 0, spin;
	for (spin = 0;; spin++) {
		if (gf_graph_is_hard(c->g)) {
			rc = GF_ESTOP;
			break;
		}
		if ((*out = gf_msg_pool_get(op->pool)))
			break;
		if (spin == 0)
			wait_begin(c, WAIT_GET, port, gf_now());
		if (spin < MIN_POLLS || (spin & 15)) {
			gf_cpu_relax();
			continue;
		}
		if (deadline == 0)
			deadline = gf_now() + gf_spin_budget();
		if (gf_now() < deadline) {
			gf_cpu_relax();
			continue;
		}
		uint32_t key = gf_event_prepare(&op->pool_ev);
		if ((*out = gf_msg_pool_get(op->pool))) {
			gf_event_cancel(&op->pool_ev);
			break;
		}
		if (gf_graph_is_hard(c->g)) {
			gf_event_cancel(&op->pool_ev);
			rc = GF_ESTOP;
			break;
		}
		gf_event_wait(&op->pool_ev, key, -1);
	}
	if (spin > 0)
		wait_end(c, gf_now());
	return rc;
}

/* The dealer's side of an adaptive stage: the controller wants another
 * count; from the message after s on, the deal table says so (a merger
 * may already wait for s on the ring the table gave it). */
static void deal_follow(struct target *t, int64_t s, double now)
{
	gf_deal *d = t->deal;
	int want = gf_deal_want(d), was = d->last;
	if (want == was || gf_deal_change(d, s + 1, want))
		return; /* unchanged, or a merger lags: at the next message */
	/* a worker that wakes has had no messages for a while: that gap is
	 * not the producer's pace on its edge */
	for (int k = was; k < want && k < t->n; k++)
		t->edges[k]->last_push_end = now;
}

int gf_push(gf_ctx *c, int port, gf_msg *m)
{
	if (!m)
		return -EINVAL;
	if (port < 0 || (uint32_t)port >= c->node->desc->noutputs) {
		gf_msg_release(m);
		return -EINVAL;
	}
	struct out_port *op = &c->out[port];
	if (op->ntargets == 0) {
		gf_msg_release(m);
		return 0;
	}
	/* a worker's output carries its input's number: the order of the
	 * stage's input, whichever worker made it */
	if (c->node->workers > 1) {
		m->seq = c->in_seq;
	} else {
		m->seq = op->seq;
		op->seq++;
	}
	double now = gf_now();
	/* one reference per target, taken before the first push: a consumer
	 * may release its reference before we are done with the others */
	for (int i = 1; i < op->ntargets; i++)
		gf_msg_retain(m);
	int delivered = 0;
	for (int i = 0; i < op->ntargets; i++) {
		struct target *t = &op->targets[i];
		struct edge *e = t->edges[0];
		if (t->n > 1) {
			int64_t s = t->dealt++;
			e = t->edges[gf_deal_worker(t->deal, &t->cur, s)];
			if (t->adaptive)
				deal_follow(t, s, now);
		}
		/* inter-arrival as this edge's consumer sees it: since the end of
		 * the previous push here, including any wait on sibling edges
		 * (fan-out, dealing to workers), excluding waits on this one */
		double produce = e->last_push_end > 0 ? now - e->last_push_end : 0.0;
		int waited = 0;
		int rc = gf_ring_try_push(e->ring, m);
		if (rc == -EAGAIN) {
			waited = 1;
			wait_begin(c, WAIT_PUSH, port, now);
			rc = gf_ring_push(e->ring, m);
			now = gf_now();
			wait_end(c, now);
		}
		e->last_push_end = now;
		if (rc == 0) {
			gf_depth_on_push(e->depth, produce, waited);
			delivered++;
		} else {
			gf_msg_release(m); /* this target's reference */
		}
	}
	return delivered ? 0 : GF_ESTOP;
}

int gf_port_edges(gf_ctx *c, int dir, int port)
{
	const gf_stage_desc *d = c->node->desc;
	if (dir == 0)
		return port >= 0 && (uint32_t)port < d->ninputs ? c->node->in_links[port] : 0;
	return port >= 0 && (uint32_t)port < d->noutputs ? c->node->out_links[port] : 0;
}

int gf_port_set_allocator(gf_ctx *c, int dir, int port, const gf_allocator *alloc)
{
	const gf_stage_desc *d = c->node->desc;
	if (port < 0 || (uint32_t)port >= (dir ? d->noutputs : d->ninputs) || !c->in || !c->out)
		return gf_seterr(GF_EPARAM, "gf_port_set_allocator: stage '%s' has no %s port %d", c->name,
		                 dir ? "output" : "input", port);
	if (dir)
		return gf_msg_pool_set_allocator(c->out[port].pool, alloc);
	const struct in_port *ip = &c->in[port];
	for (int k = 0; k < ip->nedges; k++) {
		const struct edge *e = ip->edges[k];
		int rc = gf_msg_pool_set_allocator(e->prod->out[e->link->out].pool, alloc);
		if (rc)
			return rc;
	}
	return 0;
}

void gf_port_accept_device(gf_ctx *c, int port, gf_device device, int index)
{
	if (port < 0 || (uint32_t)port >= c->node->desc->ninputs || !c->in)
		return;
	c->in[port].dev_ok = 1;
	c->in[port].dev = device;
	c->in[port].dev_index = index;
}

int gf_port_device_ok(gf_ctx *c, int port, gf_device device, int index)
{
	if (port < 0 || (uint32_t)port >= c->node->desc->noutputs || !c->out)
		return 0;
	const struct out_port *op = &c->out[port];
	int n = 0;
	for (int t = 0; t < op->ntargets; t++) {
		for (int k = 0; k < op->targets[t].n; k++) {
			const struct edge *e = op->targets[t].edges[k];
			const struct in_port *ip = &e->cons->in[e->link->in];
			if (!ip->dev_ok || ip->dev != device || ip->dev_index != index)
				return 0;
			n++;
		}
	}
	return n > 0;
}

/* The node of the nearest `stage` upstream of the instance's input port
 * (breadth-first), or -1. */
static int upstream(gf_ctx *c, int port, const char *stage)
{
	gf_graph *g = c->g;
	int n = g->nnodes, head = 0, tail = 0, me = (int)(c->node - g->nodes);
	int *queue = malloc((size_t)(n ? n : 1) * sizeof(int));
	char *seen = calloc((size_t)(n ? n : 1), 1);
	int found = -1;
	if (!queue || !seen)
		goto out;
	seen[me] = 1;
	/* the stages feeding `port` first, then whatever feeds them */
	for (int l = 0; l < g->nlinks; l++) {
		const struct link *k = &g->links[l];
		if (k->to == me && k->in == port && !seen[k->from]) {
			seen[k->from] = 1;
			queue[tail++] = k->from;
		}
	}
	while (head < tail && found < 0) {
		int at = queue[head++];
		if (!strcmp(g->nodes[at].desc->name, stage)) {
			found = at;
			break;
		}
		for (int l = 0; l < g->nlinks; l++) {
			const struct link *k = &g->links[l];
			if (k->to == at && !seen[k->from]) {
				seen[k->from] = 1;
				queue[tail++] = k->from;
			}
		}
	}
out:
	free(queue);
	free(seen);
	return found;
}

const char *gf_port_upstream(gf_ctx *c, int port, const char *stage)
{
	int at = upstream(c, port, stage);
	return at < 0 ? NULL : c->g->nodes[at].name;
}

const gf_value *gf_port_upstream_params(gf_ctx *c, int port, const char *stage)
{
	int at = upstream(c, port, stage);
	return at < 0 ? NULL : &c->g->nodes[at].params;
}

static int feeds(const gf_graph *g, int node, int port, uint32_t want, uint32_t through, int depth)
{
	int edges = 0;
	if (depth > g->nnodes) /* a cycle */
		return 0;
	for (int l = 0; l < g->nlinks; l++) {
		const struct link *k = &g->links[l];
		if (k->from != node || k->out != port)
			continue;
		edges++;
		const gf_stage_desc *d = g->nodes[k->to].desc;
		uint32_t f = k->in >= 0 && (uint32_t)k->in < d->ninputs ? d->inputs[k->in].flags : 0;
		if (want && (f & want) == want)
			continue;
		if (!through || (f & through) != through || !d->noutputs)
			return 0;
		for (uint32_t o = 0; o < d->noutputs; o++)
			if (!feeds(g, k->to, (int)o, want, through, depth + 1))
				return 0;
	}
	return edges > 0;
}

int gf_port_feeds(gf_ctx *c, int port, uint32_t want, uint32_t through)
{
	return feeds(c->g, (int)(c->node - c->g->nodes), port, want, through, 0);
}

/* ---- the stage ABI: errors, reporting, identity ---- */

int gf_fail(gf_ctx *c, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	gf_graph_record_failure(c->g, c->name, msg);
	return GF_EFAIL;
}

static void ctx_log(gf_ctx *c, int level, const char *fmt, va_list ap)
{
	char msg[2048];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	gf_log(level, "%s: %s", c->name, msg);
}

void gf_warn(gf_ctx *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ctx_log(c, GF_LOG_WARN, fmt, ap);
	va_end(ap);
}

void gf_info(gf_ctx *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ctx_log(c, GF_LOG_INFO, fmt, ap);
	va_end(ap);
}

int gf_should_stop(gf_ctx *c)
{
	/* relaxed: a stage only needs to notice the stop soon, not in any
	 * particular order with other memory */
	return gf_load_relaxed_int(&c->g->stop);
}

int gf_ctx_hard_stop(gf_ctx *c)
{
	return gf_graph_is_hard(c->g);
}

void gf_report_step(gf_ctx *c, int64_t step, int64_t items)
{
	gf_graph *g = c->g;
	/* The graph's step is the lowest among the instances that report
	 * steps: with several drivers (one d_step per class) the step target is
	 * reached when every one of them has reached it. Relaxed: statistics;
	 * concurrent reporters may publish a slightly older minimum, which the
	 * next report corrects (the max-CAS keeps it from going backwards). */
	if (step < 0) {
		/* items without a step: a stage that is not a driver */
		if (items)
			gf_add_relaxed_i64(&g->items, items);
		return;
	}
	/* seq_cst with the read of `held` after it: see graph_agree.c */
	gf_store_seq_cst_i64(&c->step, step);
	if (gf_load_seq_cst_int(&g->held))
		gf_graph_hold_wait(g);
	int64_t low = step;
	for (int i = 0; i < g->ninst; i++) {
		int64_t s = gf_load_relaxed_i64(&g->inst[i]->step);
		if (s >= 0 && s < low)
			low = s;
	}
	step = low;
	int64_t cur = gf_load_relaxed_i64(&g->step);
	while (step > cur && !gf_cas_relaxed_i64(&g->step, &cur, step))
		;

	if (items)
		gf_add_relaxed_i64(&g->items, items);
	int64_t target = gf_load_seq_cst_i64(&g->target);
	if (target > 0 && step >= target && !gf_load_relaxed_int(&g->stop)) {
		gf_graph_set_reason(g, GF_STOP_STEPS);
		gf_graph_stop_graceful(g);
	}
}

void gf_report_busy(gf_ctx *c, double seconds, int device)
{
	if (!(seconds > 0))
		return;
	gf_add_relaxed_i64(&c->busy_ns, (int64_t)(seconds * 1e9));
	gf_store_relaxed_int(&c->busy_kind, device ? 2 : 1);
}

void gf_report_flops(gf_ctx *c, double flops)
{
	if (!(flops > 0))
		return;
	/* one writer (this instance's thread): a load and a store are enough;
	 * relaxed, as busy_ns: readers show it */
	gf_store_relaxed_f64(&c->flops, gf_load_relaxed_f64(&c->flops) + flops);
}

void gf_report_peak(gf_ctx *c, const char *device, double flop_s, const char *what)
{
	gf_graph *g = c->g;
	pthread_mutex_lock(&g->lock);
	c->peak_set = 1;
	c->peak = flop_s > 0 ? flop_s : 0;
	snprintf(c->peak_dev, sizeof(c->peak_dev), "%s", device ? device : "?");
	snprintf(c->peak_what, sizeof(c->peak_what), "%s", what ? what : "");
	pthread_mutex_unlock(&g->lock);
}

void gf_flops_stats(gf_ctx *c, double *flops, double *peak)
{
	if (flops)
		*flops = gf_graph_flops(c->g);
	if (peak)
		*peak = gf_graph_peak(c->g);
}

void gf_report_resume(gf_ctx *c, int64_t step)
{
	if (step <= 0)
		return;
	gf_report_step(c, step, 0);
	/* the progress line counts from here (relaxed: statistics) */
	gf_store_relaxed_i64(&c->g->step_base, gf_load_relaxed_i64(&c->g->step));
}

int gf_step_begin(gf_ctx *c, int64_t step)
{
	gf_graph *g = c->g;
	/* a later input of a step already begun (several micro-batches) */
	if (step <= gf_load_relaxed_i64(&c->entered))
		return 0;
	/* seq_cst with the read of `held` after it: see graph_agree.c */
	gf_store_seq_cst_i64(&c->entered, step);
	if (gf_load_seq_cst_int(&g->held))
		gf_graph_hold_wait(g);
	if (gf_graph_is_hard(g))
		return GF_ESTOP;
	int64_t target = gf_load_seq_cst_i64(&g->target);
	return target > 0 && step > target ? GF_ESTOP : 0;
}

void gf_report_value(gf_ctx *c, const char *name, double value)
{
	gf_graph *g = c->g;
	pthread_mutex_lock(&g->lock);
	int i;
	for (i = 0; i < g->nvalues; i++)
		if (strncmp(g->values[i].name, name, sizeof(g->values[i].name) - 1) == 0)
			break;
	if (i < MAX_VALUES) {
		if (i == g->nvalues) {
			snprintf(g->values[i].name, sizeof(g->values[i].name), "%s", name);
			g->nvalues++;
		}
		g->values[i].v = value;
	}
	pthread_mutex_unlock(&g->lock);
}

int gf_edge_stats(gf_ctx *c, gf_edge_stat *out, int max)
{
	return gf_graph_edge_stats(c->g, out, max);
}

int gf_worker_stats(gf_ctx *c, gf_worker_stat *out, int max)
{
	return gf_graph_worker_stats(c->g, out, max);
}

const gf_run_info *gf_ctx_run(gf_ctx *c)
{
	return &c->g->info;
}

int64_t gf_ctx_steps(gf_ctx *c)
{
	/* seq_cst: a driver released from an agreed stop's hold reads the
	 * lowered target (graph_agree.c) */
	return gf_load_seq_cst_i64(&c->g->target);
}

const char *gf_ctx_name(gf_ctx *c)
{
	return c->name;
}

int gf_ctx_worker(gf_ctx *c)
{
	return c->worker;
}

int gf_ctx_workers(gf_ctx *c)
{
	return c->node->workers;
}
