/* Captured steps of a step stage: which steps run eagerly, which are
 * captured into a graph and which replay one. See gf_stepgraph in
 * <ganflow/train.h> and docs/cuda.md ("Step stages").
 *
 * The backend's graph_begin/graph_end do the capturing and replaying
 * (graph_cuda.c on a GPU; graph_cpu.c's checked emulation on the CPU); this
 * file only decides, per kind of step (a key the stage computes from what
 * makes two steps' ops differ), when: eagerly the first time a key is met
 * (cuDNN's algorithm search happens there, outside any capture, and a
 * last short batch never pays for a capture), captured the second time,
 * replayed after that. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>
#include <ganflow/log.h>
#include <ganflow/train.h>

#define KEYS 8

struct gf_stepgraph {
	gf_backend *be;
	const char *what;
	int enabled;
	struct {
		uint64_t key;
		int seen;          /* steps of this key run (0: slot free) */
		gf_graph *graph;   /* captured, or NULL */
		uint64_t used;     /* the step counter at its last use (LRU) */
	} k[KEYS];
	int cur;                   /* slot of the step begun, -1 = eager */
	int begun;
	int capturing;
	uint64_t clock;
	int64_t neager, ncaptured, nreplayed;
	int64_t nforced;           /* eager because asked to (or no graphs), not a warm-up */
};

int gf_stepgraph_create(gf_stepgraph **out, gf_backend *be, int enabled, const char *what)
{
	gf_stepgraph *g = calloc(1, sizeof(*g));
	*out = g;
	if (!g)
		return gf_seterr(-ENOMEM, "out of memory");
	g->be = be;
	g->what = what;
	g->enabled = enabled && GF_BACKEND_HAS(be, graph_begin) && GF_BACKEND_HAS(be, graph_end) &&
	             GF_BACKEND_HAS(be, graph_destroy);
	g->cur = -1;
	return 0;
}

static void drop(gf_stepgraph *g, int i)
{
	if (g->k[i].graph)
		g->be->ops->graph_destroy(g->be, g->k[i].graph);
	memset(&g->k[i], 0, sizeof(g->k[i]));
}

void gf_stepgraph_destroy(gf_stepgraph *g)
{
	if (!g)
		return;
	for (int i = 0; i < KEYS; i++)
		drop(g, i);
	free(g);
}

int gf_stepgraph_enabled(const gf_stepgraph *g)
{
	return g->enabled;
}

int gf_stepgraph_begin(gf_stepgraph *g, uint64_t key, int eager)
{
	g->begun = 1;
	g->cur = -1;
	g->capturing = 0;
	g->clock++;
	if (!g->enabled || eager) {
		g->neager++;
		g->nforced++;
		return 0;
	}
	int slot = -1, lru = 0;
	for (int i = 0; i < KEYS && slot < 0; i++)
		if (g->k[i].seen && g->k[i].key == key)
			slot = i;
	if (slot < 0) {
		/* a new key: a free slot, or the least recently used one's */
		for (int i = 0; i < KEYS; i++) {
			if (!g->k[i].seen) {
				lru = i;
				break;
			}
			if (g->k[i].used < g->k[lru].used)
				lru = i;
		}
		drop(g, lru);
		g->k[lru].key = key;
		g->k[lru].seen = 1;
		g->k[lru].used = g->clock;
		g->neager++; /* its warm-up */
		return 0;
	}
	g->k[slot].used = g->clock;
	g->k[slot].seen++;
	g->capturing = g->k[slot].graph == NULL;
	int rc = g->be->ops->graph_begin(g->be, &g->k[slot].graph);
	if (rc) {
		g->k[slot].graph = NULL;
		return rc;
	}
	g->cur = slot;
	return 0;
}

int gf_stepgraph_end(gf_stepgraph *g, int rc)
{
	if (!g->begun)
		return rc ? rc : gf_seterr(GF_EPARAM, "%s: step end without a begin", g->what);
	g->begun = 0;
	if (g->cur < 0)
		return rc;
	int slot = g->cur;
	g->cur = -1;
	char why[512] = "";
	if (rc)
		snprintf(why, sizeof(why), "%s", gf_errmsg());
	int erc = g->be->ops->graph_end(g->be, g->k[slot].graph);
	if (rc || erc) {
		/* the graph of this key is not to be trusted any more */
		if (g->k[slot].graph)
			g->be->ops->graph_destroy(g->be, g->k[slot].graph);
		g->k[slot].graph = NULL;
		g->k[slot].seen = 1; /* capture again next time */
		if (rc) {
			gf_seterr(rc, "%s", why);
			return rc;
		}
		if (erc == GF_EPARAM && !g->capturing)
			return gf_seterr(erc, "%s: the replayed step differs from the captured one (%s); a step stage "
			                 "must give every step of one key the same ops, buffers and shapes", g->what,
			                 gf_errmsg());
		return erc;
	}
	if (g->capturing)
		g->ncaptured++;
	else
		g->nreplayed++;
	return 0;
}

int64_t gf_stepgraph_forced(const gf_stepgraph *g)
{
	return g->nforced;
}

void gf_stepgraph_counts(const gf_stepgraph *g, int64_t *eager, int64_t *captured, int64_t *replayed)
{
	*eager = g->neager;
	*captured = g->ncaptured;
	*replayed = g->nreplayed;
}
