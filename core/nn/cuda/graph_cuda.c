/* Captured steps: the graph_begin / graph_end ops of the CUDA backend.
 *
 * Small GAN models are launch-bound: a DC-GAN iteration at batch 64 is a
 * few hundred short kernels, so the host's launch cost sets the pace. A
 * step bracketed by graph_begin/graph_end is captured once into a CUDA
 * graph (cudaStreamBeginCapture on the instance's stream) and later
 * launched as one unit.
 *
 * What makes a replay equal to the eager step is that the host code of the
 * step still runs each time (the engine's layer loop, generator offsets,
 * optimiser counters: all host state advances exactly as eagerly), but in
 * replay mode every op only
 *   - adds its kind, buffers and shapes to a running signature, which must
 *     equal the captured one (else graph_end refuses to launch), and
 *   - for ops whose scalars change from step to step (Philox offsets of
 *     random fills and dropout, Adam's bias corrections and learning rate,
 *     loss targets and scales, the decay of the ema op), stores the scalars in the next slot of a
 *     host array;
 * graph_end then copies the slots into a device array (the captured
 * kernels read their scalars from there, gf_cu_dyn) and launches the
 * graph. The same kernels with the same values: the same bits as eager.
 *
 * Nothing in a step may need the host (a loss read back, a D2H copy, a
 * sync): those ops return GF_EUNSUPPORTED between the brackets.
 * Allocations made while capturing (scratch growth) are legal through the
 * relaxed capture mode, and any scratch a graph may use is never freed
 * while the graph exists (device_cuda.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>

#include "cuda.h"

#define MAX_SLOTS 512
#define RING 4

struct gf_graph {
	gf_cuda *owner;
	cudaGraph_t graph;
	cudaGraphExec_t exec;
	uint64_t sig;
	int nops, nslots;
	int valid;
	struct gf_graph *next;   /* the owner's list, destroyed with it */
};

struct gf_cu_graph_state {
	gf_graph *cur;
	gf_graph *all;
	uint64_t sig;
	int nops, nslots;
	int failed;              /* an op inside the brackets was refused */
	gf_cu_dyn *slots;        /* host values of this step, MAX_SLOTS */
	gf_cu_dyn *slots_dev;    /* what captured kernels read */
	struct {
		gf_cu_dyn *p;     /* pinned upload buffer */
		cudaEvent_t ev;
		int used;
	} ring[RING];
	int ring_next;
};

static void state_free(struct gf_cu_graph_state *gs)
{
	for (int i = 0; i < RING; i++) {
		if (gs->ring[i].p)
			cudaFreeHost(gs->ring[i].p);
		if (gs->ring[i].ev)
			cudaEventDestroy(gs->ring[i].ev);
	}
	if (gs->slots_dev)
		cudaFree(gs->slots_dev);
	free(gs->slots);
	free(gs);
}

/* The graph machinery of an instance, made on its first graph_begin. */
static int state(gf_cuda *c)
{
	if (c->gs)
		return 0;
	struct gf_cu_graph_state *gs = calloc(1, sizeof(*gs));
	if (!gs)
		return gf_seterr(-ENOMEM, "cuda graph: out of memory");
	cudaError_t e = cudaSuccess;
	gs->slots = calloc(MAX_SLOTS, sizeof(gf_cu_dyn));
	if (!gs->slots) {
		state_free(gs);
		return gf_seterr(-ENOMEM, "cuda graph: out of memory");
	}
	e = cudaMalloc((void **)&gs->slots_dev, MAX_SLOTS * sizeof(gf_cu_dyn));
	for (int i = 0; i < RING && e == cudaSuccess; i++) {
		e = cudaHostAlloc((void **)&gs->ring[i].p, MAX_SLOTS * sizeof(gf_cu_dyn), cudaHostAllocPortable);
		if (e == cudaSuccess)
			e = cudaEventCreateWithFlags(&gs->ring[i].ev, cudaEventDisableTiming);
	}
	if (e != cudaSuccess) {
		state_free(gs);
		return gf_cu_fail(e, "cuda graph: setting up the per-step scalars", __FILE__, __LINE__);
	}
	c->gs = gs;
	return 0;
}

/* ---- signatures and slots (called by every op) ---- */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

int gf_cu_sig(gf_cuda *c, int op, const uint64_t *v, int n)
{
	if (c->gmode == GF_CU_EAGER)
		return 0;
	struct gf_cu_graph_state *gs = c->gs;
	gs->sig = fnv(gs->sig, &op, sizeof(op));
	gs->sig = fnv(gs->sig, v, (size_t)n * sizeof(*v));
	gs->nops++;
	return c->gmode == GF_CU_REPLAY ? GF_CU_SKIP : 0;
}

void gf_cu_sig_bytes(gf_cuda *c, const void *p, size_t size)
{
	if (c->gmode != GF_CU_EAGER)
		c->gs->sig = fnv(c->gs->sig, p, size);
}

int gf_cu_dyn_slot(gf_cuda *c, const gf_cu_dyn *value, const gf_cu_dyn **dev)
{
	*dev = NULL;
	if (c->gmode == GF_CU_EAGER)
		return 0;
	struct gf_cu_graph_state *gs = c->gs;
	if (gs->nslots >= MAX_SLOTS) {
		gs->failed = 1;
		return gf_seterr(GF_EUNSUPPORTED, "cuda graph: more than %d ops with per-step scalars in one step",
		                 MAX_SLOTS);
	}
	int k = gs->nslots++;
	gs->slots[k] = *value;
	*dev = gs->slots_dev + k;
	return 0;
}

int gf_cu_no_graph(gf_cuda *c, const char *what)
{
	if (c->gmode == GF_CU_EAGER)
		return 0;
	c->gs->failed = 1;
	return gf_seterr(GF_EUNSUPPORTED, "cuda graph: %s is not allowed between graph_begin and graph_end (it needs "
	                 "the host; do it outside the captured step)", what);
}

/* ---- begin / end ---- */

/* Copies this step's slots to the device, ordered before the launch. */
static int upload(gf_cuda *c)
{
	struct gf_cu_graph_state *gs = c->gs;
	if (!gs->nslots)
		return 0;
	int k = gs->ring_next;
	gs->ring_next = (k + 1) % RING;
	if (gs->ring[k].used)
		CU_CHECK(cudaEventSynchronize(gs->ring[k].ev));   /* its previous upload is done */
	memcpy(gs->ring[k].p, gs->slots, (size_t)gs->nslots * sizeof(gf_cu_dyn));
	CU_CHECK(cudaMemcpyAsync(gs->slots_dev, gs->ring[k].p, (size_t)gs->nslots * sizeof(gf_cu_dyn),
	                         cudaMemcpyHostToDevice, c->stream));
	CU_CHECK(cudaEventRecord(gs->ring[k].ev, c->stream));
	gs->ring[k].used = 1;
	return 0;
}

int gf_cu_graph_begin(gf_backend *be, gf_graph **graph)
{
	gf_cuda *c = gf_cu(be);
	TRY(gf_cu_enter(c));
	if (c->gmode != GF_CU_EAGER)
		return gf_seterr(GF_EPARAM, "cuda graph: graph_begin inside another graph_begin/graph_end");
	TRY(state(c));
	struct gf_cu_graph_state *gs = c->gs;
	gs->sig = 1469598103934665603ull;
	gs->nops = 0;
	gs->nslots = 0;
	gs->failed = 0;
	if (*graph) {
		gf_graph *g = *graph;
		if (g->owner != c)
			return gf_seterr(GF_EPARAM, "cuda graph: the graph belongs to another backend instance");
		if (!g->valid)
			return gf_seterr(GF_EPARAM, "cuda graph: this graph's capture failed; destroy it and capture again");
		gs->cur = g;
		c->gmode = GF_CU_REPLAY;
		return 0;
	}
	gf_graph *g = calloc(1, sizeof(*g));
	if (!g)
		return gf_seterr(-ENOMEM, "cuda graph: out of memory");
	g->owner = c;
	/* thread-local: other stage threads may allocate meanwhile */
	cudaError_t e = cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal);
	if (e != cudaSuccess) {
		free(g);
		return gf_cu_fail(e, "cudaStreamBeginCapture", __FILE__, __LINE__);
	}
	g->next = gs->all;
	gs->all = g;
	c->graphs_alive++;
	gs->cur = g;
	c->gmode = GF_CU_CAPTURE;
	*graph = g;
	return 0;
}

int gf_cu_graph_end(gf_backend *be, gf_graph *g)
{
	gf_cuda *c = gf_cu(be);
	TRY(gf_cu_enter(c));
	struct gf_cu_graph_state *gs = c->gs;
	if (c->gmode == GF_CU_EAGER || !gs || gs->cur != g)
		return gf_seterr(GF_EPARAM, "cuda graph: graph_end without the matching graph_begin");
	int mode = c->gmode;
	c->gmode = GF_CU_EAGER;
	gs->cur = NULL;
	if (mode == GF_CU_CAPTURE) {
		cudaGraph_t graph = NULL;
		cudaError_t e = cudaStreamEndCapture(c->stream, &graph);
		if (e != cudaSuccess || gs->failed) {
			if (graph)
				cudaGraphDestroy(graph);
			cudaGetLastError();
			if (e != cudaSuccess)
				return gf_cu_fail(e, "cudaStreamEndCapture (an op of the step failed while capturing?)", __FILE__,
				                  __LINE__);
			return gf_seterr(GF_EUNSUPPORTED, "cuda graph: the step was not captured: an op was refused (%s)",
			                 gf_errmsg());
		}
		g->graph = graph;
		e = cudaGraphInstantiate(&g->exec, graph, 0);
		if (e != cudaSuccess)
			return gf_cu_fail(e, "cudaGraphInstantiate", __FILE__, __LINE__);
		g->sig = gs->sig;
		g->nops = gs->nops;
		g->nslots = gs->nslots;
		g->valid = 1;
		c->ngraphs++;
		/* capturing ran nothing: this launch is the step */
		TRY(upload(c));
		CU_CHECK(cudaGraphLaunch(g->exec, c->stream));
		return 0;
	}
	if (gs->failed)
		return gf_seterr(GF_EUNSUPPORTED, "cuda graph: the step was not run: an op was refused (%s)", gf_errmsg());
	if (gs->nops != g->nops || gs->nslots != g->nslots || gs->sig != g->sig)
		return gf_seterr(GF_EPARAM, "cuda graph: this step differs from the captured one (%d ops, %d per-step "
		                 "scalars; captured %d ops, %d scalars%s): it was not run; destroy the graph and capture "
		                 "the new step", gs->nops, gs->nslots, g->nops, g->nslots,
		                 gs->nops == g->nops ? ", other buffers or shapes" : "");
	TRY(upload(c));
	CU_CHECK(cudaGraphLaunch(g->exec, c->stream));
	c->nreplays++;
	return 0;
}

void gf_cu_graph_destroy(gf_backend *be, gf_graph *g)
{
	gf_cuda *c = gf_cu(be);
	if (!g || g->owner != c || !c->gs || c->gs->cur == g)
		return;
	gf_cu_enter(c);
	cudaStreamSynchronize(c->stream);   /* a launch may still be running */
	for (gf_graph **p = &c->gs->all; *p; p = &(*p)->next) {
		if (*p == g) {
			*p = g->next;
			break;
		}
	}
	if (g->exec)
		cudaGraphExecDestroy(g->exec);
	if (g->graph)
		cudaGraphDestroy(g->graph);
	c->graphs_alive--;
	free(g);
}

void gf_cu_graphs_destroy(gf_cuda *c)
{
	struct gf_cu_graph_state *gs = c->gs;
	if (!gs)
		return;
	while (gs->all) {
		gf_graph *g = gs->all;
		gs->all = g->next;
		if (g->exec)
			cudaGraphExecDestroy(g->exec);
		if (g->graph)
			cudaGraphDestroy(g->graph);
		free(g);
	}
	c->graphs_alive = 0;
	state_free(gs);
	c->gs = NULL;
}
