/* Graphs: building and validating. gf_graph_add loads a stage and checks
 * its parameters, gf_graph_connect checks ports and kinds, gf_graph_validate
 * the whole graph; each failure names the stage instance, port or key.
 * See <ganflow/graph.h>.
 *
 * The rest of the graph runtime (graph_internal.h holds the shared
 * structures): graph_run.c runs a built graph (threads, monitor, stopping),
 * stage_api.c is what stages call (gf_pop, gf_push, gf_fail, ...),
 * graph_stats.c the edge statistics and what the terminal shows.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/depth.h>
#include <ganflow/graph.h>
#include <ganflow/loader.h>
#include <ganflow/params.h>
#include <ganflow/ring.h>
#include <ganflow/workers.h>

#include "graph_internal.h"

#define GRACE_DEFAULT 30.0

/* ---- errors ---- */

int gf_graph_seterr(gf_graph *g, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	pthread_mutex_lock(&g->lock);
	vsnprintf(g->err, sizeof(g->err), fmt, ap);
	pthread_mutex_unlock(&g->lock);
	va_end(ap);
	return rc;
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
	atomic_init(&g->step_base, 0);
	atomic_init(&g->items, 0);
	atomic_init(&g->target, 0);
	atomic_init(&g->held, 0);
	atomic_init(&g->released, 0);
	atomic_init(&g->agreeing, 0);
	gf_event_init(&g->hold_ev);
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

void gf_graph_set_stall(gf_graph *g, double report, double stop)
{
	g->stall = report > 0 ? report : 0;
	g->stall_stop = stop > 0 ? stop : 0;
}

void gf_graph_on_created(gf_graph *g, gf_graph_created_fn fn, void *arg)
{
	g->created = fn;
	g->created_arg = arg;
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
		return gf_graph_seterr(g, GF_EGRAPH, "cannot add stage '%s': the graph has already run",
		                       name ? name : desc->name);
	int rc = gf_stage_check_desc(desc, desc->name ? desc->name : "stage", err, sizeof(err));
	if (rc)
		return gf_graph_seterr(g, rc, "%s", err);
	char inst[NAME_MAX_LEN];
	if (name) {
		if (!name[0] || strlen(name) >= NAME_MAX_LEN || strpbrk(name, " \t\n#:/"))
			return gf_graph_seterr(
			    g, GF_EPARAM, "stage name '%s' is invalid (1 to %d characters, no spaces, '#', ':' or '/')",
			    name, NAME_MAX_LEN - 1);
		if (find_node(g, name) >= 0)
			return gf_graph_seterr(g, GF_EGRAPH,
			                       "two stages are named '%s'; give one another name = \"...\"", name);
		snprintf(inst, sizeof(inst), "%s", name);
	} else {
		snprintf(inst, sizeof(inst), "%s", desc->name);
		for (int k = 2; find_node(g, inst) >= 0; k++)
			snprintf(inst, sizeof(inst), "%.50s%d", desc->name, k);
	}
	int adaptive = 0;
	if (workers <= GF_WORKERS_AUTO) {
		/* workers = "auto": as many instances as it may use, dealt to
		 * as the controller decides */
		if (!(desc->flags & GF_STAGE_WORKERS))
			return gf_graph_seterr(
			    g, GF_EPARAM,
			    "stage '%s' (%s): cannot run workers = \"auto\" (the stage does not declare GF_STAGE_WORKERS)",
			    inst, desc->name);
		int max = workers < 0 ? -workers : gf_workers_cores();
		if (workers == GF_WORKERS_AUTO && max > GF_MAX_WORKERS)
			max = GF_MAX_WORKERS;
		if (max > GF_MAX_WORKERS)
			return gf_graph_seterr(g, GF_EPARAM, "stage '%s' (%s): max_workers must be 1 to %d, not %d", inst,
			                       desc->name, GF_MAX_WORKERS, max);
		workers = max;
		adaptive = max > 1;
	}
	if (workers > GF_MAX_WORKERS)
		return gf_graph_seterr(g, GF_EPARAM, "stage '%s' (%s): workers must be 1 to %d, not %d", inst,
		                       desc->name, GF_MAX_WORKERS, workers);
	if (workers > 1 && !(desc->flags & GF_STAGE_WORKERS))
		return gf_graph_seterr(
		    g, GF_EPARAM,
		    "stage '%s' (%s): cannot run %d workers (the stage does not declare GF_STAGE_WORKERS)", inst,
		    desc->name, workers);
	gf_value checked;
	rc = gf_params_check(desc, inst, params, &checked, err, sizeof(err));
	if (rc)
		return gf_graph_seterr(g, rc, "%s", err);
	if (g->nnodes == g->capnodes) {
		int cap = g->capnodes ? g->capnodes * 2 : 8;
		struct node *nodes = realloc(g->nodes, (size_t)cap * sizeof(*nodes));
		if (!nodes) {
			gf_value_free(&checked);
			return gf_graph_seterr(g, -ENOMEM, "out of memory");
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
	n->adaptive = adaptive;
	n->in_links = calloc(desc->ninputs + 1, sizeof(int));
	n->out_links = calloc(desc->noutputs + 1, sizeof(int));
	if (!n->in_links || !n->out_links) {
		free(n->in_links);
		free(n->out_links);
		gf_value_free(&n->params);
		return gf_graph_seterr(g, -ENOMEM, "out of memory");
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
		return gf_graph_seterr(g, rc, "%s", err);
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
		return gf_graph_seterr(g, GF_EGRAPH, "cannot connect: the graph has already run");
	if (from < 0 || from >= g->nnodes || to < 0 || to >= g->nnodes)
		return gf_graph_seterr(g, GF_ENOTFOUND, "connect: no such stage (%d or %d)", from, to);
	struct node *a = &g->nodes[from], *b = &g->nodes[to];
	int op = find_port(a->desc->outputs, a->desc->noutputs, out);
	if (op < 0) {
		list_ports(list, sizeof(list), a->desc->outputs, a->desc->noutputs);
		return gf_graph_seterr(g, GF_ENOTFOUND, "stage '%s' (%s) has no output port '%s' (outputs: %s)",
		                       a->name, a->desc->name, out, list);
	}
	int ip = find_port(b->desc->inputs, b->desc->ninputs, in);
	if (ip < 0) {
		list_ports(list, sizeof(list), b->desc->inputs, b->desc->ninputs);
		return gf_graph_seterr(g, GF_ENOTFOUND, "stage '%s' (%s) has no input port '%s' (inputs: %s)", b->name,
		                       b->desc->name, in, list);
	}
	const gf_port_desc *po = &a->desc->outputs[op], *pi = &b->desc->inputs[ip];
	/* "any" on an input takes every kind; "any" on an output (a stage that
	 * forwards whatever reaches it, such as transport_recv, whose kind the
	 * Lua layer checked against the remote producer) feeds every kind */
	if (strcmp(pi->kind, "any") != 0 && strcmp(po->kind, "any") != 0 && strcmp(po->kind, pi->kind) != 0)
		return gf_graph_seterr(
		    g, GF_EKIND,
		    "cannot connect '%s.%s' to '%s.%s': stage '%s' sends \"%s\" messages, stage '%s' expects \"%s\"",
		    a->name, out, b->name, in, a->name, po->kind, b->name, pi->kind);
	if (b->in_links[ip] > 0 && !(pi->flags & GF_PORT_MULTI)) {
		for (int i = 0; i < g->nlinks; i++) {
			struct link *l = &g->links[i];
			if (l->to == to && l->in == ip)
				return gf_graph_seterr(
				    g, GF_EGRAPH,
				    "input '%s.%s' is already connected (from '%s.%s'); only inputs declared GF_PORT_MULTI take several edges",
				    b->name, in, g->nodes[l->from].name, a->desc->outputs[l->out].name);
		}
	}
	if (a->workers > 1 && b->workers > 1)
		return gf_graph_seterr(
		    g, GF_EGRAPH,
		    "cannot connect '%s.%s' to '%s.%s': both stages run several workers; put a single-worker stage between them",
		    a->name, out, b->name, in);
	gf_edge_opts o = opts ? *opts : (gf_edge_opts){ 0 };
	if (!o.capacity)
		o.capacity = GF_DEPTH_CAPACITY_DEFAULT;
	if (o.depth > o.capacity && !(opts && opts->capacity))
		o.capacity = o.depth; /* depth = 100 alone: grow the capacity to fit */
	if (o.capacity & (o.capacity - 1)) {
		if (opts && opts->capacity)
			return gf_graph_seterr(g, GF_EPARAM,
			                       "connect '%s.%s' -> '%s.%s': capacity %u is not a power of two", a->name,
			                       out, b->name, in, o.capacity);
		uint32_t c = 1;
		while (c < o.capacity)
			c <<= 1;
		o.capacity = c;
	}
	if (o.capacity > GF_RING_MAX_CAPACITY)
		return gf_graph_seterr(g, GF_EPARAM, "connect '%s.%s' -> '%s.%s': capacity %u is above %u", a->name,
		                       out, b->name, in, o.capacity, GF_RING_MAX_CAPACITY);
	if (o.depth > o.capacity || o.min_depth > o.capacity)
		return gf_graph_seterr(g, GF_EPARAM, "connect '%s.%s' -> '%s.%s': depth %u exceeds the capacity %u",
		                       a->name, out, b->name, in, o.depth > o.capacity ? o.depth : o.min_depth,
		                       o.capacity);
	if (g->nlinks == g->caplinks) {
		int cap = g->caplinks ? g->caplinks * 2 : 8;
		struct link *links = realloc(g->links, (size_t)cap * sizeof(*links));
		if (!links)
			return gf_graph_seterr(g, -ENOMEM, "out of memory");
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

/* Cycles. A link that closes a loop (D's weights back to G) is fine when
 * something outside the loop feeds it (d_step's real batches) or a stage of
 * it declares GF_STAGE_CYCLE_START; a loop of stages that only feed each
 * other waits forever. The loops are the strongly connected components of
 * the stage graph (Tarjan's algorithm; pipelines have tens of stages, so
 * the recursion stays shallow). */

struct scc {
	int *index, *low, *stack, *onstack, *comp;
	int next, sp, ncomp;
};

static void scc_visit(const gf_graph *g, struct scc *t, int v)
{
	t->index[v] = t->low[v] = t->next++;
	t->stack[t->sp++] = v;
	t->onstack[v] = 1;
	for (int i = 0; i < g->nlinks; i++) {
		const struct link *l = &g->links[i];
		if (l->from != v)
			continue;
		int w = l->to;
		if (t->index[w] < 0) {
			scc_visit(g, t, w);
			if (t->low[w] < t->low[v])
				t->low[v] = t->low[w];
		} else if (t->onstack[w] && t->index[w] < t->low[v]) {
			t->low[v] = t->index[w];
		}
	}
	if (t->low[v] != t->index[v])
		return;
	int w;
	do {
		w = t->stack[--t->sp];
		t->onstack[w] = 0;
		t->comp[w] = t->ncomp;
	} while (w != v);
	t->ncomp++;
}

/* Refuses a cycle that nothing outside it feeds, naming its stages. */
static int check_cycles(gf_graph *g)
{
	int n = g->nnodes, rc = 0;
	struct scc t = { 0 };
	int *buf = malloc((size_t)n * 5 * sizeof(int));
	if (!buf)
		return gf_graph_seterr(g, -ENOMEM, "out of memory");
	t.index = buf;
	t.low = buf + n;
	t.stack = buf + 2 * n;
	t.onstack = buf + 3 * n;
	t.comp = buf + 4 * n;
	for (int v = 0; v < n; v++) {
		t.index[v] = -1;
		t.onstack[v] = 0;
	}
	for (int v = 0; v < n; v++)
		if (t.index[v] < 0)
			scc_visit(g, &t, v);
	for (int c = 0; c < t.ncomp && !rc; c++) {
		int members = 0, self = -1, fed = 0, starter = 0;
		for (int v = 0; v < n; v++)
			if (t.comp[v] == c) {
				members++;
				if (g->nodes[v].desc->flags & GF_STAGE_CYCLE_START)
					starter = 1;
			}
		for (int i = 0; i < g->nlinks; i++) {
			const struct link *l = &g->links[i];
			if (t.comp[l->to] != c)
				continue;
			if (t.comp[l->from] != c)
				fed = 1;
			else if (l->from == l->to)
				self = i;
		}
		if ((members < 2 && self < 0) || fed || starter)
			continue;
		if (members == 1) {
			const struct link *l = &g->links[self];
			const struct node *a = &g->nodes[l->from];
			rc = gf_graph_seterr(
			    g, GF_EGRAPH,
			    "stage '%s' (%s) is wired to itself ('%s.%s' -> '%s.%s') and nothing outside feeds it: it would wait for its own output forever (connect an input from another stage, or the stage must declare GF_STAGE_CYCLE_START)",
			    a->name, a->desc->name, a->name, a->desc->outputs[l->out].name, a->name,
			    a->desc->inputs[l->in].name);
			break;
		}
		char names[1024];
		size_t len = 0;
		names[0] = '\0';
		for (int v = 0; v < n && len < sizeof(names); v++)
			if (t.comp[v] == c)
				len += (size_t)snprintf(names + len, sizeof(names) - len, "%s'%s'", len ? ", " : "",
				                        g->nodes[v].name);
		rc = gf_graph_seterr(
		    g, GF_EGRAPH,
		    "stages %s form a cycle that nothing outside feeds: each waits for another forever (connect an input of one of them from outside the cycle, or one stage must declare GF_STAGE_CYCLE_START)",
		    names);
	}
	free(buf);
	return rc;
}

int gf_graph_validate(gf_graph *g)
{
	if (g->nnodes == 0)
		return gf_graph_seterr(g, GF_EGRAPH, "the pipeline declares no stages");
	/* one dealer moves an adaptive stage's deal table (deal.h) */
	for (int i = 0; i < g->nnodes; i++) {
		struct node *n = &g->nodes[i];
		if (n->adaptive && n->in_links[0] > 1)
			return gf_graph_seterr(
			    g, GF_EGRAPH,
			    "stage '%s' (%s) runs workers = \"auto\" but its input '%s' has %d edges: the order its workers keep comes from one upstream stage (give it one edge, or a fixed workers = n)",
			    n->name, n->desc->name, n->desc->inputs[0].name, n->in_links[0]);
	}
	/* inputs first: a stage that gets nothing is the likelier mistake */
	for (int i = 0; i < g->nnodes; i++) {
		struct node *n = &g->nodes[i];
		for (uint32_t p = 0; p < n->desc->ninputs; p++) {
			const gf_port_desc *pd = &n->desc->inputs[p];
			if (!n->in_links[p] && !(pd->flags & GF_PORT_OPTIONAL))
				return gf_graph_seterr(
				    g, GF_EGRAPH,
				    "input '%s.%s' of stage '%s' (%s) is not connected (it expects \"%s\" messages)",
				    n->name, pd->name, n->name, n->desc->name, pd->kind);
		}
	}
	for (int i = 0; i < g->nnodes; i++) {
		struct node *n = &g->nodes[i];
		for (uint32_t p = 0; p < n->desc->noutputs; p++) {
			const gf_port_desc *pd = &n->desc->outputs[p];
			if (!n->out_links[p] && !(pd->flags & GF_PORT_OPTIONAL))
				return gf_graph_seterr(
				    g, GF_EGRAPH,
				    "output '%s.%s' of stage '%s' (%s) is not connected (it sends \"%s\" messages)",
				    n->name, pd->name, n->name, n->desc->name, pd->kind);
		}
	}
	return check_cycles(g);
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
		struct node *n = &g->nodes[i];
		gf_value_free(&n->params);
		free(n->in_links);
		free(n->out_links);
		free(n->inst);
		if (n->wk) {
			gf_deal_free(&n->wk->deal);
			gf_workers_destroy(n->wk->ctl);
			free(n->wk->in_wait);
			free(n->wk->out_wait);
			free(n->wk->items);
			free(n->wk->cpu);
			free(n->wk->starved);
			free(n->wk->outlinks);
			free(n->wk);
		}
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
