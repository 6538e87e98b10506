/* Epoch orders: class filter, block permutation, rank partition and shuffle
 * window, all a pure function of (seed, epoch) (scheme and costs in
 * <ganflow/dataset.h>).
 *
 * Nothing here grows with the data: a part's order is generated one record
 * at a time from a Feistel permutation of the block numbers (a few keys)
 * and the part's shuffle window (`window` slots). Only a class filter
 * keeps a list, its candidates. Seeking to a position replays the window
 * from the start of the part: O(pos) time, a few nanoseconds a record.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/dataset.h>
#include <ganflow/err.h>

#include "dataset_int.h"

#define FEISTEL_ROUNDS 6
#define BLOCK_BYTES 65536u    /* default block: records in this many bytes of values */
#define BLOCKS_PER_WINDOW 8192u /* default block: at least this many blocks in a window */

/* A keyed bijection of [0, n): a balanced Feistel network over 2^(2 half)
 * >= n values (at most 4 n), cycle-walked back into [0, n). */
typedef struct perm {
	uint64_t n, mask;
	unsigned half;
	uint64_t key[FEISTEL_ROUNDS];
} perm;

static void perm_init(perm *p, uint64_t n, uint64_t seed)
{
	unsigned bits = 2;
	while (bits < 64 && (1ull << bits) < n)
		bits++;
	bits += bits & 1;
	p->n = n;
	p->half = bits / 2;
	p->mask = (1ull << p->half) - 1;
	uint64_t s = seed;
	for (int i = 0; i < FEISTEL_ROUNDS; i++)
		p->key[i] = gf_splitmix64(&s);
}

static inline uint64_t round_fn(uint64_t r, uint64_t key)
{
	uint64_t s = r ^ key;
	return gf_splitmix64(&s);
}

static uint64_t perm_fwd(const perm *p, uint64_t x)
{
	do {
		uint64_t l = x >> p->half, r = x & p->mask;
		for (int i = 0; i < FEISTEL_ROUNDS; i++) {
			uint64_t t = l ^ (round_fn(r, p->key[i]) & p->mask);
			l = r;
			r = t;
		}
		x = l << p->half | r;
	} while (x >= p->n);
	return x;
}

static uint64_t perm_inv(const perm *p, uint64_t x)
{
	do {
		uint64_t l = x >> p->half, r = x & p->mask;
		for (int i = FEISTEL_ROUNDS - 1; i >= 0; i--) {
			uint64_t t = r ^ (round_fn(l, p->key[i]) & p->mask);
			r = l;
			l = t;
		}
		x = l << p->half | r;
	} while (x >= p->n);
	return x;
}

uint64_t gf_permute(uint64_t i, uint64_t n, uint64_t seed)
{
	perm p;
	perm_init(&p, n, seed);
	return perm_fwd(&p, i);
}

struct gf_order {
	gf_order_opts o;
	uint64_t m;          /* candidates */
	uint64_t *cand;      /* (m) ascending positions with a class filter; NULL: candidate i = position i */
	uint64_t block, nblocks, last_len; /* blocks of `block` candidates, the last one last_len long */
	uint64_t lo, len;    /* this part: sequence positions [lo, lo + len) */
	uint64_t w;          /* window slots: min(window, len) */
	uint64_t *win;       /* (w) */
	/* the epoch being generated */
	uint64_t epoch;
	perm bp;             /* block order */
	uint64_t short_slot; /* where the short last block lands in the sequence */
	uint64_t cache_slot, cache_block;
	uint64_t rng;
	uint64_t emitted;    /* records returned in this epoch */
	uint64_t src;        /* records of the slice fed to the window */
	uint64_t filled;
	int draining;
	uint64_t drained;
};

/* The default block: the records in BLOCK_BYTES of values, at most
 * window / BLOCKS_PER_WINDOW (w: the window's slots). */
static uint64_t auto_block(const gf_dataset *ds, uint64_t w)
{
	const gf_dataset_meta *dm = gf_dataset_metadata(ds);
	if (!dm->count)
		return 1;
	uint64_t mean = dm->payload_bytes / dm->count + GF_RECORD_HEADER_SIZE + 4;
	uint64_t b = BLOCK_BYTES / mean, cap = w / BLOCKS_PER_WINDOW;
	if (b > cap)
		b = cap;
	return b ? b : 1;
}

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
		if (!(ord->cand = malloc((ord->m ? ord->m : 1) * sizeof(uint64_t))))
			goto nomem;
		uint64_t k = 0;
		for (uint32_t i = 0; i < o->nclasses; i++) {
			int rc = gf_dataset_class_positions(ds, (uint32_t)o->classes[i], ord->cand + k);
			if (rc) {
				gf_order_destroy(ord);
				return rc;
			}
			k += dm->class_count[o->classes[i]];
		}
		qsort(ord->cand, ord->m, sizeof(uint64_t), cmp_u64);
	} else {
		ord->m = dm->count;
	}
	if (o->spread_remainder) {
		ord->lo = (uint64_t)((__uint128_t)ord->m * o->rank / world);
		ord->len = (uint64_t)((__uint128_t)ord->m * (o->rank + 1) / world) - ord->lo;
	} else {
		ord->len = ord->m / world;
		ord->lo = ord->len * o->rank;
	}
	ord->w = o->window && o->window < ord->len ? o->window : ord->len;
	ord->block = o->block ? o->block : auto_block(ds, ord->w);
	if (ord->m && ord->block > ord->m)
		ord->block = ord->m;
	ord->nblocks = ord->m ? (ord->m + ord->block - 1) / ord->block : 0;
	ord->last_len = ord->m ? ord->m - (ord->nblocks - 1) * ord->block : 0;
	if (o->shuffle && !(ord->win = malloc((ord->w ? ord->w : 1) * sizeof(uint64_t))))
		goto nomem;
	ord->epoch = UINT64_MAX;
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

uint64_t gf_order_block(const gf_order *ord)
{
	return ord->block;
}

/* Candidate index at position q of the epoch's block sequence: slot j of
 * the sequence holds block perm(j); every block is `block` long except the
 * last one (block nblocks - 1), which sits in slot short_slot. */
static uint64_t seq_at(gf_order *ord, uint64_t q)
{
	uint64_t b = ord->block, s = ord->last_len, j, off;
	if (q < ord->short_slot * b) {
		j = q / b;
		off = q % b;
	} else if (q < ord->short_slot * b + s) {
		j = ord->short_slot;
		off = q - ord->short_slot * b;
	} else {
		j = (q - s) / b + 1;
		off = (q - s) % b;
	}
	if (j != ord->cache_slot) {
		ord->cache_slot = j;
		ord->cache_block = perm_fwd(&ord->bp, j);
	}
	return ord->cache_block * b + off;
}

/* Next candidate index of the part's window shuffle. */
static uint64_t window_next(gf_order *ord)
{
	for (;;) {
		if (ord->draining)
			return ord->win[ord->drained++];
		if (ord->src < ord->len) {
			uint64_t x = seq_at(ord, ord->lo + ord->src++);
			if (ord->filled < ord->w) {
				ord->win[ord->filled++] = x;
				continue;
			}
			uint64_t j = gf_uniform(&ord->rng, ord->w);
			uint64_t y = ord->win[j];
			ord->win[j] = x;
			return y;
		}
		for (uint64_t i = ord->filled; i > 1; i--) {
			uint64_t j = gf_uniform(&ord->rng, i);
			uint64_t t = ord->win[i - 1];
			ord->win[i - 1] = ord->win[j];
			ord->win[j] = t;
		}
		ord->draining = 1;
		ord->drained = 0;
	}
}

void gf_order_seek(gf_order *ord, uint64_t epoch, uint64_t pos)
{
	if (pos > ord->len)
		pos = ord->len;
	if (ord->o.shuffle) {
		if (epoch != ord->epoch && ord->nblocks) {
			perm_init(&ord->bp, ord->nblocks, gf_hash3(ord->o.seed, epoch, 1));
			ord->short_slot = perm_inv(&ord->bp, ord->nblocks - 1);
		}
		ord->cache_slot = UINT64_MAX;
		ord->rng = gf_hash3(gf_hash3(ord->o.seed, epoch, 2), ord->o.rank, 3);
		ord->src = ord->filled = ord->drained = 0;
		ord->draining = 0;
		for (uint64_t i = 0; i < pos; i++)
			window_next(ord);
	}
	ord->epoch = epoch;
	ord->emitted = pos;
}

uint64_t gf_order_next(gf_order *ord)
{
	if (ord->epoch == UINT64_MAX)
		gf_order_seek(ord, 0, 0);
	if (ord->emitted >= ord->len)
		return UINT64_MAX;
	uint64_t c = ord->o.shuffle ? window_next(ord) : ord->lo + ord->emitted;
	ord->emitted++;
	return ord->cand ? ord->cand[c] : c;
}

int gf_order_fill(gf_order *ord, uint64_t epoch, uint64_t *out)
{
	gf_order_seek(ord, epoch, 0);
	for (uint64_t i = 0; i < ord->len; i++)
		out[i] = gf_order_next(ord);
	return 0;
}

void gf_order_destroy(gf_order *ord)
{
	if (!ord)
		return;
	free(ord->cand);
	free(ord->win);
	free(ord);
}
