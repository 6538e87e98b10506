/* Epoch orders: class filter, shard-order permutation, shuffle window and
 * rank partition, all a pure function of (seed, epoch) (scheme in
 * <ganflow/dataset.h>).
 *
 * Computing an order costs O(candidates) time and two arrays of candidates
 * (the global order and the candidates themselves); a rank keeps its slice.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/dataset.h>
#include <ganflow/err.h>

#include "dataset_int.h"

struct gf_order {
	gf_order_opts o;
	uint64_t m;          /* candidates */
	uint64_t len;        /* per rank */
	uint64_t *cand;      /* (m) ascending positions */
	uint32_t nshards;
	uint64_t *shard_lo;  /* (nshards + 1) candidate ranges per shard */
	uint32_t *perm;      /* (nshards) */
	uint64_t *global;    /* (m) global order scratch */
	uint64_t *win;       /* (window) */
	uint64_t window;
};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int gf_order_create(const gf_dataset *ds, const gf_order_opts *o, gf_order **out)
{
	const gf_dataset_meta *dm = gf_dataset_metadata(ds);
	uint32_t world = o->world ? o->world : 1;
	*out = NULL;
	if (o->rank >= world)
		return gf_seterr(GF_EPARAM, "dataset %s: rank %u outside world of %u", gf_dataset_path(ds), o->rank, world);
	if (o->nclasses && !dm->nclasses)
		return gf_seterr(GF_EPARAM, "dataset %s: a class filter needs a labelled dataset (this one has no classes)",
		                 gf_dataset_path(ds));
	for (uint32_t i = 0; i < o->nclasses; i++) {
		if (o->classes[i] < 0 || (uint64_t)o->classes[i] >= dm->nclasses)
			return gf_seterr(GF_EPARAM, "dataset %s: class %lld not in the dataset (classes 0..%u)",
			                 gf_dataset_path(ds), (long long)o->classes[i], dm->nclasses - 1);
		for (uint32_t j = 0; j < i; j++)
			if (o->classes[j] == o->classes[i])
				return gf_seterr(GF_EPARAM, "dataset %s: class %lld listed twice", gf_dataset_path(ds),
				                 (long long)o->classes[i]);
	}
	gf_order *ord = calloc(1, sizeof(*ord));
	if (!ord)
		return -ENOMEM;
	ord->o = *o;
	ord->o.world = world;
	ord->o.classes = NULL;
	if (o->nclasses) {
		for (uint32_t i = 0; i < o->nclasses; i++)
			ord->m += dm->class_count[o->classes[i]];
	} else {
		ord->m = dm->count;
	}
	ord->nshards = dm->nshards;
	ord->cand = malloc((ord->m ? ord->m : 1) * sizeof(uint64_t));
	ord->global = malloc((ord->m ? ord->m : 1) * sizeof(uint64_t));
	ord->shard_lo = calloc(ord->nshards + 1, sizeof(uint64_t));
	ord->perm = calloc(ord->nshards, sizeof(uint32_t));
	if (!ord->cand || !ord->global || !ord->shard_lo || !ord->perm)
		goto nomem;
	if (o->nclasses) {
		uint64_t k = 0;
		for (uint32_t i = 0; i < o->nclasses; i++) {
			int64_t c = o->classes[i];
			memcpy(ord->cand + k, dm->class_index[c], dm->class_count[c] * sizeof(uint64_t));
			k += dm->class_count[c];
		}
		qsort(ord->cand, ord->m, sizeof(uint64_t), cmp_u64);
	} else {
		for (uint64_t i = 0; i < ord->m; i++)
			ord->cand[i] = i;
	}
	/* Candidate range of each shard: the candidates are ascending and the
	 * shards cover ascending position ranges. */
	uint64_t k = 0;
	for (uint32_t s = 0; s < ord->nshards; s++) {
		const gf_shard_info *si = gf_dataset_shard(ds, s);
		ord->shard_lo[s] = k;
		while (k < ord->m && ord->cand[k] < si->base + si->count)
			k++;
	}
	ord->shard_lo[ord->nshards] = ord->m;
	ord->window = o->window && o->window < ord->m ? o->window : ord->m;
	ord->win = malloc((ord->window ? ord->window : 1) * sizeof(uint64_t));
	if (!ord->win)
		goto nomem;
	ord->len = ord->m / world;
	*out = ord;
	return 0;
nomem:
	gf_order_destroy(ord);
	return -ENOMEM;
}

uint64_t gf_order_len(const gf_order *ord)
{
	return ord->len;
}

uint64_t gf_order_candidates(const gf_order *ord)
{
	return ord->m;
}

/* Global order of an epoch into ord->global. */
static void global_order(gf_order *ord, uint64_t epoch)
{
	uint64_t m = ord->m, *g = ord->global;
	if (!ord->o.shuffle) {
		memcpy(g, ord->cand, m * sizeof(uint64_t));
		return;
	}
	uint64_t rs = gf_hash3(ord->o.seed, epoch, 1);
	for (uint32_t s = 0; s < ord->nshards; s++)
		ord->perm[s] = s;
	for (uint32_t s = ord->nshards; s > 1; s--) {
		uint32_t j = (uint32_t)gf_uniform(&rs, s);
		uint32_t t = ord->perm[s - 1];
		ord->perm[s - 1] = ord->perm[j];
		ord->perm[j] = t;
	}
	uint64_t rw = gf_hash3(ord->o.seed, epoch, 2);
	uint64_t w = ord->window, filled = 0, emitted = 0;
	for (uint32_t si = 0; si < ord->nshards; si++) {
		uint32_t s = ord->perm[si];
		for (uint64_t c = ord->shard_lo[s]; c < ord->shard_lo[s + 1]; c++) {
			uint64_t x = ord->cand[c];
			if (filled < w) {
				ord->win[filled++] = x;
				continue;
			}
			uint64_t j = gf_uniform(&rw, w);
			g[emitted++] = ord->win[j];
			ord->win[j] = x;
		}
	}
	for (uint64_t i = filled; i > 1; i--) {
		uint64_t j = gf_uniform(&rw, i);
		uint64_t t = ord->win[i - 1];
		ord->win[i - 1] = ord->win[j];
		ord->win[j] = t;
	}
	memcpy(g + emitted, ord->win, filled * sizeof(uint64_t));
}

int gf_order_fill(gf_order *ord, uint64_t epoch, uint64_t *out)
{
	global_order(ord, epoch);
	memcpy(out, ord->global + (uint64_t)ord->o.rank * ord->len, ord->len * sizeof(uint64_t));
	return 0;
}

void gf_order_destroy(gf_order *ord)
{
	if (!ord)
		return;
	free(ord->cand);
	free(ord->global);
	free(ord->shard_lo);
	free(ord->perm);
	free(ord->win);
	free(ord);
}
