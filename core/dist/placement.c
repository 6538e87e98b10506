/* Placement: which stages and edges of a pipeline this rank runs, and the
 * transport stages that carry the edges between ranks. See placement.h
 * (and docs/dist.md) for the rules; core/lua/lua.c declares a script's stages
 * and edges through it, tests do so directly.
 *
 * The error messages name what the script wrote (gf.stage "x", gf.connect(a.out,
 * b.inp)): placement is what those calls do, and a user reads its errors
 * at the script line that made them.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/dist.h>
#include <ganflow/err.h>
#include <ganflow/graph.h>
#include <ganflow/loader.h>

#include "placement.h"

/* A stage as the script declared it (on every rank). */
struct decl {
	int rank;                   /* placed on this rank, -1 on every rank */
	int node;                   /* node in this rank's graph, -1 when not here */
	const gf_stage_desc *desc;
};

struct gf_placement {
	int rank, world;            /* this process in the run's world */
	gf_graph *g;                /* this rank's graph; NULL once taken */
	gf_graph *shadow;           /* every declared stage and edge, for checks only (node = decl index) */
	struct decl *decls;         /* (ndecls) by shadow node */
	int ndecls, capdecls;
	gf_place_xedge *xedges;     /* (nxedges) cross-rank edges, by tag - 1 */
	int nxedges, capxedges;
	char *agree;                /* what every rank must agree on: stages and cross-rank edges */
	size_t agree_len, agree_cap;
	char err[8192];
};

/* ---- the pace of a cross-rank edge ---- */

/* The receiving end of a cross-rank edge polls between naps (MPI wakes no
 * thread); "relaxed" naps longer, so a message a step costs fewer wake-ups
 * of the rank's core (docs/dist.md, "Waiting costs wake-ups"). The books
 * (per-step metrics, checkpoint parts) need no haste; every other kind
 * (fakes, weights, batches) waits at the low pace. gf.connect's `latency`
 * option overrides this per edge. */
static const struct {
	const char *kind;
	const char *latency;
} default_pace[] = {
	{ "metrics", "relaxed" },
	{ "state", "relaxed" },
};

const char *gf_placement_latency(const char *kind)
{
	for (size_t i = 0; i < sizeof(default_pace) / sizeof(default_pace[0]); i++)
		if (!strcmp(kind, default_pace[i].kind))
			return default_pace[i].latency;
	return "low";
}

/* ---- helpers ---- */

static int seterr(gf_placement *p, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int seterr(gf_placement *p, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p->err, sizeof(p->err), fmt, ap);
	va_end(ap);
	return rc;
}

/* Appends a line to the description every rank must agree on. Returns 0
 * or -ENOMEM. */
static int agree_add(gf_placement *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int agree_add(gf_placement *p, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	size_t len = strlen(line);
	if (p->agree_len + len + 2 > p->agree_cap) {
		size_t cap = (p->agree_cap + len + 2) * 2;
		char *d = realloc(p->agree, cap);
		if (!d)
			return -ENOMEM;
		p->agree = d;
		p->agree_cap = cap;
	}
	memcpy(p->agree + p->agree_len, line, len);
	p->agree_len += len;
	p->agree[p->agree_len++] = '\n';
	p->agree[p->agree_len] = '\0';
	return 0;
}

/* ---- life ---- */

int gf_placement_create(gf_placement **out, int rank, int world)
{
	gf_placement *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->rank = rank;
	p->world = world;
	if (gf_graph_create(&p->g) || gf_graph_create(&p->shadow)) {
		gf_placement_destroy(p);
		return -ENOMEM;
	}
	*out = p;
	return 0;
}

void gf_placement_destroy(gf_placement *p)
{
	if (!p)
		return;
	gf_graph_destroy(p->g);
	gf_graph_destroy(p->shadow);
	free(p->decls);
	free(p->xedges);
	free(p->agree);
	free(p);
}

/* ---- stages ---- */

static int add(gf_placement *p, const gf_stage_desc *desc, const char *stage, const char *name,
               const gf_value *params, int workers, int rank, int *id)
{
	if (rank >= p->world)
		return seterr(p, GF_EPARAM,
		              "gf.stage \"%s\": rank = %d, but the run has %d rank%s (start it with mpirun -np %d, "
		              "or place the stage with rank = r %% gf.world())",
		              stage, rank, p->world, p->world == 1 ? "" : "s", rank + 1);
	if (rank < -1)
		return seterr(p, GF_EPARAM, "gf.stage \"%s\": rank must be >= 0, not %d", stage, rank);
	if (!desc) {
		int rc = gf_stage_load(stage, &desc, NULL, p->err, sizeof(p->err));
		if (rc)
			return rc;
	}
	if (p->ndecls == p->capdecls) {
		int cap = p->capdecls ? 2 * p->capdecls : 16;
		struct decl *d = realloc(p->decls, (size_t)cap * sizeof(*d));
		if (!d)
			return seterr(p, -ENOMEM, "out of memory");
		p->decls = d;
		p->capdecls = cap;
	}
	/* the shadow graph checks the parameters and names the instance the
	 * same way on every rank, whether the stage lives here or not */
	int node;
	int rc = gf_graph_add_desc(p->shadow, desc, name, params, workers, &node);
	if (rc)
		return seterr(p, rc, "%s", gf_graph_error(p->shadow));
	const char *inst = gf_graph_node_name(p->shadow, node);
	struct decl *d = &p->decls[p->ndecls++];
	d->rank = rank;
	d->node = -1;
	d->desc = desc;
	if (rank < 0 || rank == p->rank) {
		rc = gf_graph_add_desc(p->g, desc, inst, params, workers, &d->node);
		if (rc)
			return seterr(p, rc, "%s", gf_graph_error(p->g));
	}
	if (agree_add(p, "stage %s %s rank=%d", inst, stage, rank))
		return seterr(p, -ENOMEM, "out of memory");
	if (id)
		*id = node;
	return 0;
}

int gf_placement_add(gf_placement *p, const char *stage, const char *name, const gf_value *params, int workers,
                     int rank, int *id)
{
	return add(p, NULL, stage, name, params, workers, rank, id);
}

int gf_placement_add_desc(gf_placement *p, const gf_stage_desc *desc, const char *name, const gf_value *params,
                          int workers, int rank, int *id)
{
	return add(p, desc, desc->name, name, params, workers, rank, id);
}

/* ---- edges ---- */

/* Adds the transport stage of cross-rank edge x to this rank's graph: its
 * sending end when this rank produces, else its receiving end. Returns 0
 * with x->node set, or an error with the message set. */
static int add_transport(gf_placement *p, gf_place_xedge *x, const char *edge, const char *address,
                         double timeout)
{
	int send = x->from_rank == p->rank;
	char name[64];
	snprintf(name, sizeof(name), "_%s%d", send ? "tx" : "rx", x->tag);
	gf_value v = gf_value_map();
	int rc = gf_value_set(&v, "peer", gf_value_int(send ? x->to_rank : x->from_rank));
	if (!rc)
		rc = gf_value_set(&v, "tag", gf_value_int(x->tag));
	if (!rc)
		rc = gf_value_set(&v, "edge", gf_value_str(edge));
	if (!rc)
		rc = gf_value_set(&v, "transport", gf_value_str(x->transport));
	if (!rc && address)
		rc = gf_value_set(&v, "address", gf_value_str(address));
	if (!rc && timeout > 0)
		rc = gf_value_set(&v, "timeout", gf_value_num(timeout));
	if (!rc)
		rc = gf_value_set(&v, "latency", gf_value_str(x->latency));
	if (!rc && !send)
		rc = gf_value_set(&v, "kind", gf_value_str(x->kind));
	if (rc) {
		gf_value_free(&v);
		return seterr(p, -ENOMEM, "out of memory");
	}
	rc = gf_graph_add(p->g, send ? "transport_send" : "transport_recv", name, &v, 1, &x->node);
	gf_value_free(&v);
	if (rc)
		return seterr(p, rc, "%s: cannot add its transport stage: %s", edge, gf_graph_error(p->g));
	return 0;
}

int gf_placement_connect(gf_placement *p, int from, const char *out, int to, const char *in,
                         const gf_place_opts *opts)
{
	const gf_place_opts none = { 0 };
	if (!opts)
		opts = &none;
	/* the whole pipeline's rules (ports, kinds, one edge per input) are
	 * checked on the shadow graph, alike on every rank */
	int rc = gf_graph_connect(p->shadow, from, out, to, in, &opts->ring);
	if (rc)
		return seterr(p, rc, "%s", gf_graph_error(p->shadow));
	const struct decl *da = &p->decls[from], *db = &p->decls[to];
	int ra = da->rank, rb = db->rank, me = p->rank;
	if (ra < 0 || rb < 0 || ra == rb) {
		/* a ring, on the rank(s) where both ends are: both on every rank;
		 * or one placed on rank k and the other there too */
		int here = (ra < 0 || ra == me) && (rb < 0 || rb == me);
		if (here && (rc = gf_graph_connect(p->g, da->node, out, db->node, in, &opts->ring)))
			return seterr(p, rc, "%s", gf_graph_error(p->g));
		return 0;
	}
	const char *a = gf_placement_name(p, from), *b = gf_placement_name(p, to);
	const char *transport = opts->transport ? opts->transport : "mpi";
	const char *address = opts->address && opts->address[0] ? opts->address : NULL;
	if (!strcmp(transport, "tcp") && !address)
		return seterr(p, GF_EPARAM,
		              "gf.connect(%s.%s, %s.%s): transport = \"tcp\" needs address = \"host:port\" (where rank %d listens)",
		              a, out, b, in, rb);
	if (p->nxedges == p->capxedges) {
		int cap = p->capxedges ? 2 * p->capxedges : 8;
		gf_place_xedge *x = realloc(p->xedges, (size_t)cap * sizeof(*x));
		if (!x)
			return seterr(p, -ENOMEM, "out of memory");
		p->xedges = x;
		p->capxedges = cap;
	}
	gf_place_xedge *x = &p->xedges[p->nxedges];
	memset(x, 0, sizeof(*x));
	x->tag = p->nxedges + 1;
	x->from = from;
	x->to = to;
	x->from_rank = ra;
	x->to_rank = rb;
	x->node = -1;
	snprintf(x->transport, sizeof(x->transport), "%s", transport);
	char edge[320];
	snprintf(edge, sizeof(edge), "%s.%s -> %s.%s", a, out, b, in);
	if (agree_add(p, "edge %d %s rank %d -> %d %s", x->tag, edge, ra, rb, transport))
		return seterr(p, -ENOMEM, "out of memory");
	p->nxedges++;
	/* the kind the receiving end forwards: the producer's */
	snprintf(x->kind, sizeof(x->kind), "any");
	for (uint32_t i = 0; i < da->desc->noutputs; i++)
		if (!strcmp(da->desc->outputs[i].name, out))
			snprintf(x->kind, sizeof(x->kind), "%s", da->desc->outputs[i].kind);
	snprintf(x->latency, sizeof(x->latency), "%s",
	         opts->latency && opts->latency[0] ? opts->latency : gf_placement_latency(x->kind));
	if (me != ra && me != rb)
		return 0;
	if ((rc = add_transport(p, x, edge, address, opts->timeout)))
		return rc;
	if (me == ra)
		rc = gf_graph_connect(p->g, da->node, out, x->node, "inp", &opts->ring);
	else
		rc = gf_graph_connect(p->g, x->node, "out", db->node, in, &opts->ring);
	if (rc)
		return seterr(p, rc, "%s", gf_graph_error(p->g));
	return 0;
}

/* ---- checks ---- */

int gf_placement_check_ranks(gf_placement *p)
{
	if (p->world <= 1)
		return 0;
	return gf_dist_check_same("pipeline", p->agree ? p->agree : "", p->err, sizeof(p->err));
}

int gf_placement_validate(gf_placement *p)
{
	if (gf_graph_validate(p->shadow))
		return seterr(p, GF_EGRAPH, "%s", gf_graph_error(p->shadow));
	if (p->g && gf_graph_nodes(p->g) > 0 && gf_graph_validate(p->g))
		return seterr(p, GF_EGRAPH, "rank %d: %s", p->rank, gf_graph_error(p->g));
	return 0;
}

/* ---- what was placed ---- */

const char *gf_placement_error(const gf_placement *p)
{
	return p->err;
}

int gf_placement_stages(const gf_placement *p)
{
	return p->ndecls;
}

const char *gf_placement_name(const gf_placement *p, int id)
{
	return id >= 0 && id < p->ndecls ? gf_graph_node_name(p->shadow, id) : NULL;
}

gf_graph *gf_placement_graph(gf_placement *p)
{
	return p->g;
}

gf_graph *gf_placement_shadow(gf_placement *p)
{
	return p->shadow;
}

gf_graph *gf_placement_take_graph(gf_placement *p)
{
	gf_graph *g = p->g;
	p->g = NULL;
	return g;
}

int gf_placement_xedges(const gf_placement *p)
{
	return p->nxedges;
}

const gf_place_xedge *gf_placement_xedge(const gf_placement *p, int i)
{
	return i >= 0 && i < p->nxedges ? &p->xedges[i] : NULL;
}

const char *gf_placement_agreement(const gf_placement *p)
{
	return p->agree ? p->agree : "";
}
