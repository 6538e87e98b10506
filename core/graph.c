/* Graphs: nodes, edges, validation, one thread per stage instance, stop and
 * drain, errors; and the runtime side of the stage ABI (gf_pop, gf_push,
 * gf_msg_get, gf_fail, ...). See <ganflow/graph.h> and <ganflow/stage.h>.
 *
 * Vocabulary: a *node* is a stage as the pipeline declared it; it has one
 * *instance* (gf_ctx) per worker. A *link* is one gf_graph_connect; it
 * becomes one *edge* (a ring with its depth controller) per worker of the
 * side that has several workers: an upstream stage deals messages
 * round-robin over the rings of a multi-worker stage, and the consumer of
 * a multi-worker stage pops its rings in the same round-robin order, so
 * order is kept without any extra thread.
 *
 * Stopping: `stop` (graceful: gf_should_stop) and `hard` (every wait
 * returns GF_ESTOP) only ever go from 0 to 1. External requests (signal
 * handlers) only set bits in `req` and wake the monitor, the calling thread
 * of gf_graph_run, which turns them into stops.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/depth.h>
#include <ganflow/dist.h>
#include <ganflow/graph.h>
#include <ganflow/loader.h>
#include <ganflow/log.h>
#include <ganflow/msg.h>
#include <ganflow/params.h>
#include <ganflow/ring.h>
#include <ganflow/stage.h>

#include "atomics.h"
#include "ring_internal.h"

#define NAME_MAX_LEN 64
#define MAX_WORKERS 64
#define POOL_SLACK 8      /* envelopes beyond the rings' capacity: held by stages */
#define MIN_POLLS 16       /* polls before a wait looks at the clock */
#define GRACE_DEFAULT 30.0
#define MAX_VALUES 16
#define TICK 0.1          /* monitor wake-up period, seconds */

enum { REQ_GRACEFUL = 1, REQ_HARD = 2 };
enum { IN_NONE = 0, IN_SINGLE, IN_MERGE, IN_ANY };

struct link;

struct edge {
	gf_ring *ring;
	gf_depth *depth;
	struct link *link;
	gf_ctx *prod, *cons;
	double last_push_end; /* producer's: when its previous push here returned */
	char from[96], to[96];
};

struct link {
	int from, out, to, in;
	gf_edge_opts opts;
	int nedges;
	struct edge **edges; /* (nedges) by worker index of the multi-worker side */
};

struct in_port {
	int nlinks;
	int nedges;
	struct edge **edges;
	int mode;        /* IN_* */
	int rr;          /* next edge in turn (merge) or to look at first (any) */
	char *eof;       /* (nedges) edge finished, IN_ANY */
	gf_event ev;     /* shared consumer event of IN_ANY */
	double last_end; /* when the previous pop returned */
};

struct target {       /* one link out of a port, as seen by one instance */
	int n;
	struct edge **edges; /* n > 1: deal round-robin */
	int rr;
};

struct out_port {
	gf_msg_pool *pool;
	gf_event pool_ev; /* an envelope came back */
	int nlinks;
	int ntargets;
	struct target *targets;
	int64_t seq, seq_stride;
};

struct node {
	char name[NAME_MAX_LEN];
	const gf_stage_desc *desc;
	gf_value params;
	int workers;
	int *in_links;  /* (ninputs) links per input port */
	int *out_links; /* (noutputs) */
	gf_ctx *inst;   /* (workers) */
};

struct gf_ctx {
	gf_graph *g;
	struct node *node;
	int worker;
	char name[NAME_MAX_LEN + 16];
	void *self;
	int created;
	int started;
	atomic_int done;      /* the thread finished (run, flush, close) */
	atomic_int_least64_t step; /* last step this instance reported, -1 = none */
	pthread_t thread;
	struct in_port *in;   /* (ninputs) */
	struct out_port *out; /* (noutputs) */
};

struct value {
	char name[32];
	double v;
};

struct gf_graph {
	struct node *nodes;
	int nnodes, capnodes;
	struct link *links;
	int nlinks, caplinks;
	struct edge **edges;
	int nedges;
	gf_ctx **inst;        /* every instance, node order */
	int ninst;

	gf_run_info info;
	char *run_dir, *backend, *resume, *pipeline;
	int ran;
	int creating;         /* gf_port_set_allocator allowed */
	unsigned flags;
	double grace;

	atomic_int stop;      /* graceful stop in effect */
	atomic_int hard;      /* hard stop in effect */
	atomic_int req;       /* REQ_* from gf_graph_request_stop */
	atomic_int failed;
	atomic_int reason;    /* gf_stop_reason */
	atomic_int ndone;     /* instances whose thread finished */
	atomic_int_least64_t step, items;
	gf_event mon_ev;

	pthread_mutex_t lock; /* err, values */
	char err[4096];
	struct value values[MAX_VALUES];
	int nvalues;

	double t_start, t_end;
};

/* ---- small helpers ---- */

static int seterr(gf_graph *g, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int seterr(gf_graph *g, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	pthread_mutex_lock(&g->lock);
	vsnprintf(g->err, sizeof(g->err), fmt, ap);
	pthread_mutex_unlock(&g->lock);
	va_end(ap);
	return rc;
}

static int reason_rank(int r)
{
	switch (r) {
	case GF_STOP_NONE: return 0;
	case GF_STOP_EOF: return 1;
	case GF_STOP_STEPS: return 2;
	case GF_STOP_REQUEST: return 3;
	case GF_STOP_HARD: return 4;
	case GF_STOP_GRACE: return 5;
	case GF_STOP_FAILURE: return 6;
	}
	return 0;
}

/* Records why the run ends; a weightier reason replaces a lighter one. */
static void set_reason(gf_graph *g, gf_stop_reason r)
{
	/* relaxed: the reason is read after the threads joined */
	int cur = gf_load_relaxed_int(&g->reason);
	while (reason_rank(r) > reason_rank(cur) && !gf_cas_relaxed_int(&g->reason, &cur, (int)r))
		;
}

static int is_hard(const gf_graph *g)
{
	/* acquire: pairs with the release in hard_stop; a thread that sees the
	 * flag also sees the failure message recorded before it */
	return gf_load_acquire_int(&g->hard);
}

static void graceful_stop(gf_graph *g)
{
	if (gf_exchange_seq_cst_int(&g->stop, 1) == 0)
		gf_event_wake(&g->mon_ev);
}

static void hard_stop(gf_graph *g)
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

static void record_failure(gf_graph *g, const char *who, const char *msg)
{
	pthread_mutex_lock(&g->lock);
	if (!gf_load_relaxed_int(&g->failed)) {
		snprintf(g->err, sizeof(g->err), "stage '%s' failed: %s", who, msg);
		gf_store_release_int(&g->failed, 1);
	}
	pthread_mutex_unlock(&g->lock);
	set_reason(g, GF_STOP_FAILURE);
	hard_stop(g);
}

/* ---- building ---- */

int gf_graph_create(gf_graph **out)
{
	gf_graph *g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	pthread_mutex_init(&g->lock, NULL);
	gf_event_init(&g->mon_ev);
	atomic_init(&g->stop, 0);
	atomic_init(&g->hard, 0);
	atomic_init(&g->req, 0);
	atomic_init(&g->failed, 0);
	atomic_init(&g->reason, GF_STOP_NONE);
	atomic_init(&g->ndone, 0);
	atomic_init(&g->step, 0);
	atomic_init(&g->items, 0);
	g->grace = GRACE_DEFAULT;
	g->info.world = 1;
	*out = g;
	return 0;
}

const char *gf_graph_error(const gf_graph *g)
{
	return g->err;
}

int gf_graph_nodes(const gf_graph *g)
{
	return g->nnodes;
}

const char *gf_graph_node_name(const gf_graph *g, int node)
{
	return node >= 0 && node < g->nnodes ? g->nodes[node].name : NULL;
}

void gf_graph_set_grace(gf_graph *g, double seconds)
{
	g->grace = seconds > 0 ? seconds : GRACE_DEFAULT;
}

static int find_node(const gf_graph *g, const char *name)
{
	for (int i = 0; i < g->nnodes; i++)
		if (strcmp(g->nodes[i].name, name) == 0)
			return i;
	return -1;
}

int gf_graph_add_desc(gf_graph *g, const gf_stage_desc *desc, const char *name, const gf_value *params,
                      int workers, int *node)
{
	char err[1024];
	if (g->ran)
		return seterr(g, GF_EGRAPH, "cannot add stage '%s': the graph has already run", name ? name : desc->name);
	int rc = gf_stage_check_desc(desc, desc->name ? desc->name : "stage", err, sizeof(err));
	if (rc)
		return seterr(g, rc, "%s", err);
	char inst[NAME_MAX_LEN];
	if (name) {
		if (!name[0] || strlen(name) >= NAME_MAX_LEN || strpbrk(name, " \t\n#:/"))
			return seterr(g, GF_EPARAM,
			              "stage name '%s' is invalid (1 to %d characters, no spaces, '#', ':' or '/')", name,
			              NAME_MAX_LEN - 1);
		if (find_node(g, name) >= 0)
			return seterr(g, GF_EGRAPH, "two stages are named '%s'; give one another name = \"...\"", name);
		snprintf(inst, sizeof(inst), "%s", name);
	} else {
		snprintf(inst, sizeof(inst), "%s", desc->name);
		for (int k = 2; find_node(g, inst) >= 0; k++)
			snprintf(inst, sizeof(inst), "%.50s%d", desc->name, k);
	}
	if (workers < 1 || workers > MAX_WORKERS)
		return seterr(g, GF_EPARAM, "stage '%s' (%s): workers must be 1 to %d, not %d", inst, desc->name,
		              MAX_WORKERS, workers);
	if (workers > 1 && !(desc->flags & GF_STAGE_WORKERS))
		return seterr(g, GF_EPARAM,
		              "stage '%s' (%s): cannot run %d workers (the stage does not declare GF_STAGE_WORKERS)", inst,
		              desc->name, workers);
	gf_value checked;
	rc = gf_params_check(desc, inst, params, &checked, err, sizeof(err));
	if (rc)
		return seterr(g, rc, "%s", err);
	if (g->nnodes == g->capnodes) {
		int cap = g->capnodes ? g->capnodes * 2 : 8;
		struct node *nodes = realloc(g->nodes, (size_t)cap * sizeof(*nodes));
		if (!nodes) {
			gf_value_free(&checked);
			return seterr(g, -ENOMEM, "out of memory");
		}
		g->nodes = nodes;
		g->capnodes = cap;
	}
	struct node *n = &g->nodes[g->nnodes];
	memset(n, 0, sizeof(*n));
	snprintf(n->name, sizeof(n->name), "%s", inst);
	n->desc = desc;
	n->params = checked;
	n->workers = workers;
	n->in_links = calloc(desc->ninputs + 1, sizeof(int));
	n->out_links = calloc(desc->noutputs + 1, sizeof(int));
	if (!n->in_links || !n->out_links) {
		free(n->in_links);
		free(n->out_links);
		gf_value_free(&n->params);
		return seterr(g, -ENOMEM, "out of memory");
	}
	if (node)
		*node = g->nnodes;
	g->nnodes++;
	return 0;
}

int gf_graph_add(gf_graph *g, const char *stage, const char *name, const gf_value *params, int workers, int *node)
{
	char err[4096];
	const gf_stage_desc *desc;
	int rc = gf_stage_load(stage, &desc, NULL, err, sizeof(err));
	if (rc)
		return seterr(g, rc, "%s", err);
	return gf_graph_add_desc(g, desc, name, params, workers, node);
}

static void list_ports(char *buf, size_t size, const gf_port_desc *ports, uint32_t n)
{
	size_t len = 0;
	buf[0] = '\0';
	for (uint32_t i = 0; i < n && len < size; i++)
		len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? ", " : "", ports[i].name);
	if (!n)
		snprintf(buf, size, "none");
}

static int find_port(const gf_port_desc *ports, uint32_t n, const char *name)
{
	for (uint32_t i = 0; i < n; i++)
		if (strcmp(ports[i].name, name) == 0)
			return (int)i;
	return -1;
}

int gf_graph_connect(gf_graph *g, int from, const char *out, int to, const char *in, const gf_edge_opts *opts)
{
	char list[512];
	if (g->ran)
		return seterr(g, GF_EGRAPH, "cannot connect: the graph has already run");
	if (from < 0 || from >= g->nnodes || to < 0 || to >= g->nnodes)
		return seterr(g, GF_ENOTFOUND, "connect: no such stage (%d or %d)", from, to);
	struct node *a = &g->nodes[from], *b = &g->nodes[to];
	int op = find_port(a->desc->outputs, a->desc->noutputs, out);
	if (op < 0) {
		list_ports(list, sizeof(list), a->desc->outputs, a->desc->noutputs);
		return seterr(g, GF_ENOTFOUND, "stage '%s' (%s) has no output port '%s' (outputs: %s)", a->name,
		              a->desc->name, out, list);
	}
	int ip = find_port(b->desc->inputs, b->desc->ninputs, in);
	if (ip < 0) {
		list_ports(list, sizeof(list), b->desc->inputs, b->desc->ninputs);
		return seterr(g, GF_ENOTFOUND, "stage '%s' (%s) has no input port '%s' (inputs: %s)", b->name,
		              b->desc->name, in, list);
	}
	const gf_port_desc *po = &a->desc->outputs[op], *pi = &b->desc->inputs[ip];
	/* "any" on an input takes every kind; "any" on an output (a stage that
	 * forwards whatever reaches it, such as transport_recv, whose kind the
	 * Lua layer checked against the remote producer) feeds every kind */
	if (strcmp(pi->kind, "any") != 0 && strcmp(po->kind, "any") != 0 && strcmp(po->kind, pi->kind) != 0)
		return seterr(g, GF_EKIND,
		              "cannot connect '%s.%s' to '%s.%s': stage '%s' sends \"%s\" messages, stage '%s' expects \"%s\"",
		              a->name, out, b->name, in, a->name, po->kind, b->name, pi->kind);
	if (b->in_links[ip] > 0 && !(pi->flags & GF_PORT_MULTI)) {
		for (int i = 0; i < g->nlinks; i++) {
			struct link *l = &g->links[i];
			if (l->to == to && l->in == ip)
				return seterr(g, GF_EGRAPH,
				              "input '%s.%s' is already connected (from '%s.%s'); only inputs declared GF_PORT_MULTI take several edges",
				              b->name, in, g->nodes[l->from].name, a->desc->outputs[l->out].name);
		}
	}
	if (a->workers > 1 && b->workers > 1)
		return seterr(g, GF_EGRAPH,
		              "cannot connect '%s.%s' to '%s.%s': both stages run several workers; put a single-worker stage between them",
		              a->name, out, b->name, in);
	gf_edge_opts o = opts ? *opts : (gf_edge_opts){ 0 };
	if (!o.capacity)
		o.capacity = GF_DEPTH_CAPACITY_DEFAULT;
	if (o.depth > o.capacity && !(opts && opts->capacity))
		o.capacity = o.depth; /* depth = 100 alone: grow the capacity to fit */
	if (o.capacity & (o.capacity - 1)) {
		if (opts && opts->capacity)
			return seterr(g, GF_EPARAM, "connect '%s.%s' -> '%s.%s': capacity %u is not a power of two", a->name,
			              out, b->name, in, o.capacity);
		uint32_t c = 1;
		while (c < o.capacity)
			c <<= 1;
		o.capacity = c;
	}
	if (o.capacity > GF_RING_MAX_CAPACITY)
		return seterr(g, GF_EPARAM, "connect '%s.%s' -> '%s.%s': capacity %u is above %u", a->name, out, b->name,
		              in, o.capacity, GF_RING_MAX_CAPACITY);
	if (o.depth > o.capacity || o.min_depth > o.capacity)
		return seterr(g, GF_EPARAM, "connect '%s.%s' -> '%s.%s': depth %u exceeds the capacity %u", a->name, out,
		              b->name, in, o.depth > o.capacity ? o.depth : o.min_depth, o.capacity);
	if (g->nlinks == g->caplinks) {
		int cap = g->caplinks ? g->caplinks * 2 : 8;
		struct link *links = realloc(g->links, (size_t)cap * sizeof(*links));
		if (!links)
			return seterr(g, -ENOMEM, "out of memory");
		g->links = links;
		g->caplinks = cap;
	}
	struct link *l = &g->links[g->nlinks++];
	memset(l, 0, sizeof(*l));
	l->from = from;
	l->out = op;
	l->to = to;
	l->in = ip;
	l->opts = o;
	a->out_links[op]++;
	b->in_links[ip]++;
	return 0;
}

/* ---- validation ---- */

int gf_graph_validate(gf_graph *g)
{
	if (g->nnodes == 0)
		return seterr(g, GF_EGRAPH, "the pipeline declares no stages");
	/* inputs first: a stage that gets nothing is the likelier mistake */
	for (int i = 0; i < g->nnodes; i++) {
		struct node *n = &g->nodes[i];
		for (uint32_t p = 0; p < n->desc->ninputs; p++) {
			const gf_port_desc *pd = &n->desc->inputs[p];
			if (!n->in_links[p] && !(pd->flags & GF_PORT_OPTIONAL))
				return seterr(g, GF_EGRAPH,
				              "input '%s.%s' of stage '%s' (%s) is not connected (it expects \"%s\" messages)",
				              n->name, pd->name, n->name, n->desc->name, pd->kind);
		}
	}
	for (int i = 0; i < g->nnodes; i++) {
		struct node *n = &g->nodes[i];
		for (uint32_t p = 0; p < n->desc->noutputs; p++) {
			const gf_port_desc *pd = &n->desc->outputs[p];
			if (!n->out_links[p] && !(pd->flags & GF_PORT_OPTIONAL))
				return seterr(g, GF_EGRAPH,
				              "output '%s.%s' of stage '%s' (%s) is not connected (it sends \"%s\" messages)",
				              n->name, pd->name, n->name, n->desc->name, pd->kind);
		}
	}
	return 0;
}

/* ---- setting up the run ---- */

static void on_release(void *ud)
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
	}
	for (uint32_t p = 0; p < d->noutputs; p++) {
		struct out_port *op = &c->out[p];
		gf_event_init(&op->pool_ev);
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
		}
		op->seq = c->worker;
		op->seq_stride = c->node->workers;
		int rc = gf_msg_pool_create(need + POOL_SLACK, NULL, &op->pool);
		if (rc)
			return rc;
		gf_msg_pool_on_release(op->pool, on_release, &op->pool_ev);
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
			atomic_init(&c->step, -1);
			if (n->workers > 1)
				snprintf(c->name, sizeof(c->name), "%s#%d", n->name, w);
			else
				snprintf(c->name, sizeof(c->name), "%s", n->name);
			g->inst[k++] = c;
		}
	}
	int rc = build_edges(g);
	for (int i = 0; i < g->ninst && !rc; i++)
		rc = build_ports(g, g->inst[i]);
	return rc;
}

/* ---- the stage ABI: ports ---- */

/* Pops one item from edge e of input ip; block = 0: -EAGAIN when empty. */
static int pop_edge(struct in_port *ip, struct edge *e, gf_msg **out, int block)
{
	void *p;
	double t0 = gf_now(), t1 = t0;
	int stalled = 0;
	int rc = gf_ring_try_pop(e->ring, &p);
	if (rc == -EAGAIN) {
		if (!block)
			return rc;
		stalled = 1;
		rc = gf_ring_pop(e->ring, &p);
		t1 = gf_now();
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

static int pop_any(gf_ctx *c, struct in_port *ip, gf_msg **out, int block)
{
	struct edge *e = NULL;
	double t0 = gf_now();
	int rc = scan_any(ip, out, &e);
	int stalled = rc == -EAGAIN;
	double deadline = t0 + gf_spin_budget();
	for (int spin = 0; rc == -EAGAIN && block; spin++) {
		if (is_hard(c->g))
			return GF_ESTOP;
		if (spin < MIN_POLLS || ((spin & 15) || gf_now() < deadline)) {
			gf_cpu_relax();
			rc = scan_any(ip, out, &e);
			continue;
		}
		uint32_t key = gf_event_prepare(&ip->ev);
		rc = scan_any(ip, out, &e);
		if (rc != -EAGAIN || is_hard(c->g)) {
			gf_event_cancel(&ip->ev);
			if (rc == -EAGAIN)
				rc = GF_ESTOP;
			break;
		}
		gf_event_wait(&ip->ev, key, -1);
		rc = scan_any(ip, out, &e);
	}
	if (rc)
		return rc;
	double t1 = stalled ? gf_now() : t0;
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
			rc = pop_edge(ip, ip->edges[0], out, block);
			break;
		case IN_MERGE:
			rc = pop_edge(ip, ip->edges[ip->rr], out, block);
			if (rc == 0)
				ip->rr = (ip->rr + 1) % ip->nedges;
			break;
		default:
			rc = pop_any(c, ip, out, block);
			break;
		}
		if (rc)
			return rc;
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
	for (int spin = 0;; spin++) {
		if (is_hard(c->g))
			return GF_ESTOP;
		if ((*out = gf_msg_pool_get(op->pool)))
			return 0;
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
			return 0;
		}
		if (is_hard(c->g)) {
			gf_event_cancel(&op->pool_ev);
			return GF_ESTOP;
		}
		gf_event_wait(&op->pool_ev, key, -1);
	}
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
	m->seq = op->seq;
	op->seq += op->seq_stride;
	double now = gf_now();
	/* one reference per target, taken before the first push: a consumer
	 * may release its reference before we are done with the others */
	for (int i = 1; i < op->ntargets; i++)
		gf_msg_retain(m);
	int delivered = 0;
	for (int i = 0; i < op->ntargets; i++) {
		struct target *t = &op->targets[i];
		struct edge *e = t->edges[t->rr];
		if (t->n > 1)
			t->rr = (t->rr + 1) % t->n;
		/* inter-arrival as this edge's consumer sees it: since the end of
		 * the previous push here, including any wait on sibling edges
		 * (fan-out, dealing to workers), excluding waits on this one */
		double produce = e->last_push_end > 0 ? now - e->last_push_end : 0.0;
		int waited = 0;
		int rc = gf_ring_try_push(e->ring, m);
		if (rc == -EAGAIN) {
			waited = 1;
			rc = gf_ring_push(e->ring, m);
			now = gf_now();
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

int gf_port_set_allocator(gf_ctx *c, int port, const gf_allocator *alloc)
{
	if (!c->g->creating || port < 0 || (uint32_t)port >= c->node->desc->noutputs || !alloc)
		return -EINVAL;
	struct out_port *op = &c->out[port];
	uint32_t n = gf_msg_pool_size(op->pool);
	if (gf_msg_pool_free_count(op->pool) != n)
		return -EINVAL;
	gf_msg_pool *pool;
	int rc = gf_msg_pool_create(n, alloc, &pool);
	if (rc)
		return rc;
	gf_msg_pool_destroy(op->pool);
	op->pool = pool;
	gf_msg_pool_on_release(pool, on_release, &op->pool_ev);
	return 0;
}

/* ---- the stage ABI: errors, reporting, identity ---- */

int gf_fail(gf_ctx *c, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	record_failure(c->g, c->name, msg);
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

int gf_dist_should_abort(gf_ctx *c)
{
	/* declared in <ganflow/dist.h>: stages blocked on the network poll it */
	return is_hard(c->g);
}

int gf_should_stop(gf_ctx *c)
{
	/* relaxed: a stage only needs to notice the stop soon, not in any
	 * particular order with other memory */
	return gf_load_relaxed_int(&c->g->stop);
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
	gf_store_relaxed_i64(&c->step, step);
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
	if (g->info.steps > 0 && step >= g->info.steps && !gf_load_relaxed_int(&g->stop)) {
		set_reason(g, GF_STOP_STEPS);
		graceful_stop(g);
	}
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

const gf_run_info *gf_ctx_run(gf_ctx *c)
{
	return &c->g->info;
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
			while (!is_hard(c->g) && gf_ring_drain_one(ip->edges[k]->ring, &m) == 0)
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
		record_failure(g, c->name, msg);
	} else if (d->flush && !is_hard(g)) {
		rc = d->flush(c->self, c);
		if (rc && rc != GF_ESTOP && rc != GF_EEOF) {
			char msg[256];
			snprintf(msg, sizeof(msg), "flush() returned %d (%s) without a message from gf_fail()", rc,
			         gf_strerror(rc));
			record_failure(g, c->name, msg);
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

static void human(char *buf, size_t size, double v)
{
	if (v >= 1e9)
		snprintf(buf, size, "%.2fG", v / 1e9);
	else if (v >= 1e6)
		snprintf(buf, size, "%.2fM", v / 1e6);
	else if (v >= 1e3)
		snprintf(buf, size, "%.2fk", v / 1e3);
	else
		snprintf(buf, size, "%.1f", v);
}

static void human_time(char *buf, size_t size, double s)
{
	if (s >= 3600)
		snprintf(buf, size, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
	else if (s >= 60)
		snprintf(buf, size, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
	else
		snprintf(buf, size, "%.0fs", s);
}

static void human_dur(char *buf, size_t size, double s)
{
	if (s >= 1)
		snprintf(buf, size, "%.2fs", s);
	else if (s >= 1e-3)
		snprintf(buf, size, "%.2fms", s * 1e3);
	else
		snprintf(buf, size, "%.1fus", s * 1e6);
}

struct progress {
	double t_last;
	int64_t items_last, step_last;
	double rate, step_rate;
};

static void progress_text(gf_graph *g, struct progress *pr, double now, char *buf, size_t size)
{
	int64_t step = gf_load_relaxed_i64(&g->step);
	int64_t items = gf_load_relaxed_i64(&g->items);
	double dt = now - pr->t_last;
	if (dt > 0.05) {
		double r = (double)(items - pr->items_last) / dt;
		double sr = (double)(step - pr->step_last) / dt;
		pr->rate = pr->t_last == g->t_start ? r : 0.7 * pr->rate + 0.3 * r;
		pr->step_rate = pr->t_last == g->t_start ? sr : 0.7 * pr->step_rate + 0.3 * sr;
		pr->t_last = now;
		pr->items_last = items;
		pr->step_last = step;
	}
	size_t len = 0;
	char a[32], b[32];
	human_time(a, sizeof(a), now - g->t_start);
	len += (size_t)snprintf(buf + len, size - len, "[%s] ", a);
	if (g->info.steps > 0)
		len += (size_t)snprintf(buf + len, size - len, "step %" PRId64 "/%" PRId64, step, g->info.steps);
	else
		len += (size_t)snprintf(buf + len, size - len, "step %" PRId64, step);
	human(a, sizeof(a), pr->rate);
	len += (size_t)snprintf(buf + len, size - len, "  %s items/s", a);
	/* slowest edge: the one whose consumer takes longest per item */
	struct edge *slow = NULL;
	double worst = 0;
	for (int i = 0; i < g->nedges; i++) {
		double s = gf_depth_service_mean(g->edges[i]->depth);
		if (s > worst) {
			worst = s;
			slow = g->edges[i];
		}
	}
	if (slow && len < size) {
		human_dur(b, sizeof(b), worst);
		len += (size_t)snprintf(buf + len, size - len, "  slowest %s>%s %s/item d=%u", slow->from, slow->to, b,
		                        gf_ring_depth(slow->ring));
	}
	if (g->info.steps > 0 && pr->step_rate > 0 && step < g->info.steps && len < size) {
		human_time(a, sizeof(a), (double)(g->info.steps - step) / pr->step_rate);
		len += (size_t)snprintf(buf + len, size - len, "  ETA %s", a);
	}
	pthread_mutex_lock(&g->lock);
	for (int i = 0; i < g->nvalues && len < size; i++)
		len += (size_t)snprintf(buf + len, size - len, "  %s %.4g", g->values[i].name, g->values[i].v);
	pthread_mutex_unlock(&g->lock);
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

static void monitor(gf_graph *g)
{
	struct progress pr = { .t_last = g->t_start };
	int show = !(g->flags & GF_GRAPH_QUIET);
	double tick = gf_log_tty() ? 0.25 : 1.0;
	double next_progress = g->t_start + tick;
	double t_stop = 0, next_warn = 0;
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
		if ((req & REQ_HARD) && !is_hard(g)) {
			set_reason(g, GF_STOP_HARD);
			gf_log(GF_LOG_WARN, "stopping now (hard stop)");
			hard_stop(g);
		} else if ((req & REQ_GRACEFUL) && !gf_load_relaxed_int(&g->stop)) {
			set_reason(g, GF_STOP_REQUEST);
			gf_log(GF_LOG_INFO, "stopping: letting the stages finish and flush (interrupt again to stop at once)");
			graceful_stop(g);
		}
		if (gf_load_relaxed_int(&g->stop) && !is_hard(g)) {
			if (t_stop == 0)
				t_stop = now;
			else if (now - t_stop > g->grace) {
				char running[512];
				list_running(g, running, sizeof(running));
				gf_log(GF_LOG_WARN, "graceful stop did not finish within %.1f s (still running: %s); stopping hard",
				       g->grace, running[0] ? running : "?");
				set_reason(g, GF_STOP_GRACE);
				hard_stop(g);
			}
		}
		if (is_hard(g)) {
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
			progress_text(g, &pr, now, text, sizeof(text));
			gf_progress(text);
			next_progress = now + tick;
		}
	}
	if (show) {
		progress_text(g, &pr, gf_now(), text, sizeof(text));
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
	g->creating = 1;
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
				record_failure(g, c->name, msg);
			}
			g->creating = 0;
			return GF_EFAIL;
		}
		c->self = self;
		c->created = 1;
		if (gf_load_relaxed_int(&g->failed)) {
			g->creating = 0;
			return GF_EFAIL;
		}
	}
	g->creating = 0;
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
		return seterr(g, GF_EGRAPH, "the graph has already run");
	g->ran = 1;
	g->flags = flags;
	copy_info(g, info);
	if (!g->info.backend)
		g->info.backend = "auto";
	int rc = gf_graph_validate(g);
	if (rc)
		return rc;
	if ((rc = setup(g))) {
		seterr(g, rc, "cannot set up the graph: %s", gf_strerror(rc));
		goto out;
	}
	if ((rc = create_instances(g)))
		goto out;
	if (gf_load_acquire_int(&g->req) & REQ_HARD) {
		set_reason(g, GF_STOP_HARD);
		hard_stop(g);
		rc = GF_ESTOP;
		goto out;
	}

	g->t_start = gf_now();
	for (int i = 0; i < g->nedges; i++)
		gf_depth_start(g->edges[i]->depth, g->t_start);
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
			record_failure(g, c->name, msg);
			/* the ones not started count as done */
			gf_add_release_int(&g->ndone, g->ninst - i);
			break;
		}
		c->started = 1;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);

	monitor(g);
	for (int i = 0; i < g->ninst; i++)
		if (g->inst[i]->started)
			pthread_join(g->inst[i]->thread, NULL);
	g->t_end = gf_now();
	for (int i = 0; i < g->nedges; i++)
		gf_depth_finish(g->edges[i]->depth, g->t_end);

	set_reason(g, GF_STOP_EOF);
	if (gf_load_acquire_int(&g->failed))
		rc = GF_EFAIL;
	else if (is_hard(g)) {
		rc = GF_ESTOP;
		seterr(g, rc, "the run was stopped (%s)",
		       gf_stop_reason_name(gf_graph_stop_reason(g)));
	} else
		rc = 0;
	if (!(flags & GF_GRAPH_QUIET)) {
		char a[32], b[32];
		double el = g->t_end - g->t_start;
		human(a, sizeof(a), el > 0 ? (double)gf_load_relaxed_i64(&g->items) / el : 0);
		human_time(b, sizeof(b), el);
		gf_log(GF_LOG_INFO, "run ended (%s) after %s (%.2f s): step %" PRId64 ", %" PRId64 " items, %s items/s",
		       gf_stop_reason_name(gf_graph_stop_reason(g)), b, el, gf_load_relaxed_i64(&g->step),
		       gf_load_relaxed_i64(&g->items), a);
		gf_graph_print_edges(g);
	}
out:
	destroy_instances(g);
	drain(g);
	return rc;
}

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
	}
	return "?";
}

/* ---- statistics ---- */

int gf_graph_edge_stats(gf_graph *g, gf_edge_stat *out, int max)
{
	double now = gf_now();
	for (int i = 0; i < g->nedges && i < max; i++) {
		struct edge *e = g->edges[i];
		memset(&out[i], 0, sizeof(out[i]));
		snprintf(out[i].from, sizeof(out[i].from), "%s", e->from);
		snprintf(out[i].to, sizeof(out[i].to), "%s", e->to);
		gf_depth_stat(e->depth, now, &out[i]);
	}
	return g->nedges;
}

int64_t gf_graph_step(const gf_graph *g)
{
	return gf_load_relaxed_i64(&g->step);
}

int64_t gf_graph_items(const gf_graph *g)
{
	return gf_load_relaxed_i64(&g->items);
}

double gf_graph_seconds(const gf_graph *g)
{
	if (g->t_start == 0)
		return 0;
	return (g->t_end > 0 ? g->t_end : gf_now()) - g->t_start;
}

int gf_graph_value(gf_graph *g, const char *name, double *out)
{
	int found = 0;
	pthread_mutex_lock(&g->lock);
	for (int i = 0; i < g->nvalues && !found; i++) {
		if (strncmp(g->values[i].name, name, sizeof(g->values[i].name) - 1) == 0) {
			*out = g->values[i].v;
			found = 1;
		}
	}
	pthread_mutex_unlock(&g->lock);
	return found;
}

void gf_graph_print_edges(gf_graph *g)
{
	if (g->nedges == 0)
		return;
	gf_edge_stat *st = calloc((size_t)g->nedges, sizeof(*st));
	if (!st)
		return;
	int n = gf_graph_edge_stats(g, st, g->nedges);
	int w = 4;
	for (int i = 0; i < n; i++) {
		int l = (int)(strlen(st[i].from) + strlen(st[i].to) + 4);
		if (l > w)
			w = l;
	}
	gf_log(GF_LOG_INFO, "%-*s %8s %6s %6s %7s %6s %10s %10s %12s", w, "edge", "capacity", "depth", "min", "mean",
	       "max", "stalls", "full waits", "items");
	for (int i = 0; i < n; i++) {
		char name[256];
		snprintf(name, sizeof(name), "%s -> %s", st[i].from, st[i].to);
		if (st[i].fixed)
			gf_log(GF_LOG_INFO, "%-*s %8u %6u %6s %7s %6s %10" PRIu64 " %10" PRIu64 " %12" PRIu64, w, name,
			       st[i].capacity, st[i].depth, "fixed", "", "", st[i].stalls, st[i].full_waits, st[i].items);
		else
			gf_log(GF_LOG_INFO, "%-*s %8u %6u %6u %7.1f %6u %10" PRIu64 " %10" PRIu64 " %12" PRIu64, w, name,
			       st[i].capacity, st[i].depth, st[i].depth_min, st[i].depth_mean, st[i].depth_max, st[i].stalls,
			       st[i].full_waits, st[i].items);
	}
	free(st);
}

/* ---- teardown ---- */

void gf_graph_destroy(gf_graph *g)
{
	if (!g)
		return;
	for (int i = 0; i < g->ninst; i++) {
		gf_ctx *c = g->inst[i];
		const gf_stage_desc *d = c->node->desc;
		for (uint32_t p = 0; c->in && p < d->ninputs; p++) {
			free(c->in[p].edges);
			free(c->in[p].eof);
		}
		for (uint32_t p = 0; c->out && p < d->noutputs; p++) {
			for (int t = 0; t < c->out[p].ntargets; t++)
				free(c->out[p].targets[t].edges);
			free(c->out[p].targets);
			gf_msg_pool_destroy(c->out[p].pool);
		}
		free(c->in);
		free(c->out);
	}
	for (int i = 0; i < g->nedges; i++) {
		gf_depth_destroy(g->edges[i]->depth);
		gf_ring_destroy(g->edges[i]->ring);
		free(g->edges[i]);
	}
	for (int i = 0; i < g->nlinks; i++)
		free(g->links[i].edges);
	for (int i = 0; i < g->nnodes; i++) {
		gf_value_free(&g->nodes[i].params);
		free(g->nodes[i].in_links);
		free(g->nodes[i].out_links);
		free(g->nodes[i].inst);
	}
	free(g->edges);
	free(g->links);
	free(g->nodes);
	free(g->inst);
	free(g->run_dir);
	free(g->backend);
	free(g->resume);
	free(g->pipeline);
	pthread_mutex_destroy(&g->lock);
	free(g);
}
