/* Internal: placing a pipeline's stages on the ranks of a distributed run.
 *
 * Every rank runs the same pipeline script and declares every stage and
 * edge through this interface (core/lua/lua.c is its one caller; tests call it
 * directly). Each declared stage goes into a *shadow* graph that holds the
 * whole pipeline and is only ever validated, never run: parameters, ports,
 * kinds and unconnected inputs are checked alike on every rank, so a
 * mistake gives the same error everywhere. A stage is instantiated in this
 * rank's graph when it is placed here (rank -1: on every rank, or rank =
 * this rank). An edge between
 *
 *	two stages here                 becomes a ring, as in one process;
 *	a stage here, one on rank r     a transport_send stage here fed by a
 *	                                ring (or, on the receiving side, a
 *	                                transport_recv stage feeding the
 *	                                consumer through a ring);
 *	stages on other ranks           nothing on this rank.
 *
 * A stage on every rank connected to a stage placed on rank r is connected
 * through its instance on rank r only (data-parallel replicas are alike:
 * the one beside the consumer speaks for all). Cross-rank edges are
 * numbered in declaration order (their tag pairs the two transport
 * stages), so every rank must declare the same ones:
 * gf_placement_check_ranks compares the declarations across ranks.
 * See docs/dist.md.
 */
#ifndef GF_PLACEMENT_H
#define GF_PLACEMENT_H

#include <ganflow/graph.h>
#include <ganflow/stage.h>
#include <ganflow/value.h>

typedef struct gf_placement gf_placement;

/* How an edge travels (gf.connect's options). Zeros and NULLs mean the
 * defaults. */
typedef struct gf_place_opts {
	gf_edge_opts ring;     /* the ring on this rank (both ends here, or the
	                          one beside a transport stage) */
	const char *transport; /* cross-rank edges: "mpi" (NULL), "tcp" or "nccl" */
	const char *address;   /* "host:port" where the receiving rank listens (tcp); NULL or "" */
	double timeout;        /* seconds the transport waits for its peer; 0: its default */
	const char *latency;   /* pace of the receiving end, "low" or "relaxed";
	                          NULL or "": gf_placement_latency(the producer's kind) */
} gf_place_opts;

/* One cross-rank edge as this rank placed it. */
typedef struct gf_place_xedge {
	int tag;               /* 1, 2, ... in declaration order, alike on every rank */
	int from, to;          /* the stages (gf_placement_add ids) */
	int from_rank, to_rank;
	int node;              /* this rank's transport stage (node of gf_placement_graph),
	                          -1 when neither end is here */
	char kind[64];         /* the producer's message kind, forwarded by transport_recv */
	char latency[16];      /* "low" or "relaxed" */
	char transport[16];    /* "mpi", "tcp" or "nccl" */
} gf_place_xedge;

/* Creates an empty placement for this process, rank of world. Returns 0
 * with *out owned by the caller (gf_placement_destroy), or -ENOMEM. */
int gf_placement_create(gf_placement **out, int rank, int world);

/* Destroys the placement and the graphs it still holds. NULL is a no-op. */
void gf_placement_destroy(gf_placement *p);

/* Declares a stage instance of the stage `stage` (loaded with
 * gf_stage_load) on rank `rank` (-1: every rank). name, params and workers
 * as for gf_graph_add (the shadow graph chooses the instance name; this
 * rank's graph gets the same). *id (may be NULL) receives the stage's id
 * for gf_placement_connect. Returns 0, or an error code with the message
 * in gf_placement_error: a rank outside the world, or gf_graph_add's
 * errors from the shadow graph or this rank's graph. */
int gf_placement_add(gf_placement *p, const char *stage, const char *name, const gf_value *params, int workers,
                     int rank, int *id);

/* As gf_placement_add with a descriptor in hand (a stage compiled into a
 * test program); desc must outlive the placement and its graphs. */
int gf_placement_add_desc(gf_placement *p, const gf_stage_desc *desc, const char *name, const gf_value *params,
                          int workers, int rank, int *id);

/* Connects output `out` of stage `from` to input `in` of stage `to` (ids
 * from gf_placement_add): checked on the shadow graph, then a ring, a
 * transport stage joined by a ring, or nothing on this rank (see above).
 * opts may be NULL. Returns 0, or an error code with the message in
 * gf_placement_error (gf_graph_connect's errors; a tcp edge without an
 * address; a transport stage that cannot be added). */
int gf_placement_connect(gf_placement *p, int from, const char *out, int to, const char *in,
                         const gf_place_opts *opts);

/* Default pace of the receiving end of a cross-rank edge that carries
 * messages of `kind`: "relaxed" or "low". Static string. */
const char *gf_placement_latency(const char *kind);

/* Compares the stages and cross-rank edges declared on every rank
 * (COLLECTIVE, gf_dist_check_same). Returns 0 (also with one rank), or
 * GF_EDIST with the message in gf_placement_error. */
int gf_placement_check_ranks(gf_placement *p);

/* Validates the whole pipeline (the shadow graph), then this rank's graph
 * when it holds any stage ("rank R: ..."). Returns 0 or GF_EGRAPH with the
 * message in gf_placement_error. */
int gf_placement_validate(gf_placement *p);

/* The last error message. Owned by the placement. */
const char *gf_placement_error(const gf_placement *p);

/* Number of stages declared, and the instance name of stage id (NULL when
 * out of range). Owned by the placement. */
int gf_placement_stages(const gf_placement *p);
const char *gf_placement_name(const gf_placement *p, int id);

/* This rank's graph (NULL once taken), and the whole pipeline's. Owned by
 * the placement. */
gf_graph *gf_placement_graph(gf_placement *p);
gf_graph *gf_placement_shadow(gf_placement *p);

/* Hands this rank's graph to the caller (gf_graph_destroy): the placement
 * holds no graph to run afterwards. */
gf_graph *gf_placement_take_graph(gf_placement *p);

/* Cross-rank edges declared so far, and edge i (0-based) of them (NULL
 * when out of range). Owned by the placement. */
int gf_placement_xedges(const gf_placement *p);
const gf_place_xedge *gf_placement_xedge(const gf_placement *p, int i);

/* What every rank must agree on: a line per stage and per cross-rank edge.
 * Owned by the placement. */
const char *gf_placement_agreement(const gf_placement *p);

#endif
