/* Message envelopes and their pools. See <ganflow/msg.h>.
 *
 * A pool is an array of envelopes plus a lock-free free list (a Treiber
 * stack of indices). Any thread may release an envelope (push onto the
 * stack); only the pool's owner takes from it (pop). With a single popper
 * the stack has no ABA problem: an index on top can only leave the stack
 * through this one thread. The stack is LIFO, so a port whose edges run
 * shallow keeps reusing the same few envelopes and the others never grow
 * buffers: memory follows the active depth, not the capacity.
 */
#include <errno.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/msg.h>

#include "../base/atomics.h"

#define NONE 0u /* free-list links hold index + 1; 0 ends the list */

struct gf_msg_pool {
	alignas(GF_CACHELINE) atomic_uint top; /* index + 1 of the first free envelope */
	atomic_uint nfree;
	uint32_t n;
	gf_allocator alloc;
	void (*on_release)(void *ud);
	void *on_release_ud;
	atomic_uint *next;  /* (n) free-list links, index + 1 */
	gf_msg *msgs;       /* (n) envelopes */
};

/* ---- default allocator: 64-byte aligned malloc ---- */

static void *default_alloc(void *ud, size_t bytes)
{
	(void)ud;
	size_t rounded = (bytes + 63) / 64 * 64;
	return aligned_alloc(64, rounded ? rounded : 64);
}

static void default_free(void *ud, void *p)
{
	(void)ud;
	free(p);
}

/* ---- pools ---- */

static void push_free(gf_msg_pool *pool, uint32_t index)
{
	uint32_t old = gf_load_relaxed_u32(&pool->top);
	do {
		/* relaxed: the link is published by the release half of the CAS */
		gf_store_relaxed_u32(&pool->next[index], old);
	} while (!gf_cas_acq_rel_u32(&pool->top, &old, index + 1));
	gf_add_release_u32(&pool->nfree, 1);
}

int gf_msg_pool_create(uint32_t n, const gf_allocator *alloc, gf_msg_pool **out)
{
	*out = NULL;
	if (n == 0)
		return -EINVAL;
	gf_msg_pool *pool = aligned_alloc(GF_CACHELINE, (sizeof(*pool) + GF_CACHELINE - 1) / GF_CACHELINE * GF_CACHELINE);
	if (!pool)
		return -ENOMEM;
	memset(pool, 0, sizeof(*pool));
	pool->n = n;
	pool->next = calloc(n, sizeof(*pool->next));
	size_t bytes = ((size_t)n * sizeof(gf_msg) + GF_CACHELINE - 1) / GF_CACHELINE * GF_CACHELINE;
	pool->msgs = aligned_alloc(GF_CACHELINE, bytes);
	if (!pool->next || !pool->msgs) {
		free(pool->next);
		free(pool->msgs);
		free(pool);
		return -ENOMEM;
	}
	memset(pool->msgs, 0, bytes);
	if (alloc && alloc->alloc && alloc->free)
		pool->alloc = *alloc;
	else
		pool->alloc = (gf_allocator){ default_alloc, default_free, NULL };
	atomic_init(&pool->top, NONE);
	atomic_init(&pool->nfree, 0);
	/* Push in reverse so the first get returns envelope 0. */
	for (uint32_t i = n; i-- > 0;) {
		gf_msg *m = &pool->msgs[i];
		atomic_init(&m->refs_, 0);
		m->pool_ = pool;
		m->index_ = i;
		atomic_init(&pool->next[i], NONE);
		push_free(pool, i);
	}
	*out = pool;
	return 0;
}

int gf_msg_pool_set_allocator(gf_msg_pool *pool, const gf_allocator *alloc)
{
	if (!alloc || !alloc->alloc || !alloc->free)
		return -EINVAL;
	if (pool->alloc.alloc == alloc->alloc && pool->alloc.free == alloc->free)
		return 0; /* asked twice (two consumers on one device): keep the first */
	if (pool->alloc.alloc != default_alloc)
		return -EEXIST;
	for (uint32_t i = 0; i < pool->n; i++)
		for (int s = 0; s < GF_MSG_MAX_TENSORS; s++)
			if (pool->msgs[i].buf_[s])
				return -EBUSY;
	pool->alloc = *alloc;
	return 0;
}

void gf_msg_pool_destroy(gf_msg_pool *pool)
{
	if (!pool)
		return;
	for (uint32_t i = 0; i < pool->n; i++)
		for (int s = 0; s < GF_MSG_MAX_TENSORS; s++)
			if (pool->msgs[i].buf_[s])
				pool->alloc.free(pool->alloc.ud, pool->msgs[i].buf_[s]);
	free(pool->next);
	free(pool->msgs);
	free(pool);
}

uint32_t gf_msg_pool_size(const gf_msg_pool *pool)
{
	return pool->n;
}

gf_msg *gf_msg_pool_get(gf_msg_pool *pool)
{
	/* acquire: the releasing thread's last writes to the envelope (and the
	 * link we follow) happen before we reuse it */
	uint32_t top = gf_load_acquire_u32(&pool->top);
	for (;;) {
		if (top == NONE)
			return NULL;
		uint32_t next = gf_load_relaxed_u32(&pool->next[top - 1]);
		if (gf_cas_acq_rel_u32(&pool->top, &top, next))
			break;
	}
	/* relaxed: nfree is a statistic; the CAS above did the handover */
	gf_sub_relaxed_u32(&pool->nfree, 1);
	gf_msg *m = &pool->msgs[top - 1];
	gf_msg_reset(m);
	/* relaxed: the envelope is not shared until it is pushed, and the push
	 * publishes it with a release store */
	gf_store_relaxed_int(&m->refs_, 1);
	return m;
}

uint32_t gf_msg_pool_free_count(const gf_msg_pool *pool)
{
	return gf_load_relaxed_u32(&pool->nfree);
}

void gf_msg_pool_on_release(gf_msg_pool *pool, void (*fn)(void *ud), void *ud)
{
	pool->on_release = fn;
	pool->on_release_ud = ud;
}

/* ---- envelopes ---- */

void gf_msg_reset(gf_msg *m)
{
	m->seq = -1;
	m->step = -1;
	m->version = -1;
	m->key = 0;
	m->label = -1;
	m->epoch = -1;
	m->pos = 0;
	m->flags = 0;
	m->source = NULL;
	m->ntensors = 0;
	memset(m->t, 0, sizeof(m->t));
	m->nscalars = 0;
	m->event = NULL;
}

void gf_msg_retain(gf_msg *m)
{
	/* relaxed: the caller already holds a reference, so the envelope
	 * cannot go back to the pool concurrently; handing the new reference
	 * to another thread goes through a ring (release/acquire) */
	gf_add_relaxed_int(&m->refs_, 1);
}

void gf_msg_release(gf_msg *m)
{
	if (!m)
		return;
	/* acq_rel: every holder's reads and writes of the envelope happen
	 * before the last holder returns it to the pool */
	if (gf_add_acq_rel_int(&m->refs_, -1) != 1)
		return;
	gf_msg_pool *pool = m->pool_;
	push_free(pool, m->index_);
	if (pool->on_release)
		pool->on_release(pool->on_release_ud);
}

void *gf_msg_buffer(gf_msg *m, int slot, size_t bytes)
{
	if (slot < 0 || slot >= GF_MSG_MAX_TENSORS)
		return NULL;
	if (m->cap_[slot] >= bytes && m->buf_[slot])
		return m->buf_[slot];
	gf_allocator *a = &m->pool_->alloc;
	if (m->buf_[slot])
		a->free(a->ud, m->buf_[slot]);
	m->buf_[slot] = a->alloc(a->ud, bytes ? bytes : 1);
	m->cap_[slot] = m->buf_[slot] ? bytes : 0;
	return m->buf_[slot];
}

void *gf_msg_tensor(gf_msg *m, int slot, gf_dtype dtype, int ndim, const int64_t *shape)
{
	if (ndim < 0 || ndim > GF_MAX_DIMS || slot < 0 || slot >= GF_MSG_MAX_TENSORS)
		return NULL;
	gf_tensor t = gf_tensor_make(NULL, dtype, ndim, shape);
	void *p = gf_msg_buffer(m, slot, gf_tensor_bytes(&t));
	if (!p)
		return NULL;
	t.data = p;
	m->t[slot] = t;
	if (m->ntensors < slot + 1)
		m->ntensors = slot + 1;
	return p;
}

int gf_msg_set_scalar(gf_msg *m, const char *name, double value)
{
	char key[GF_MSG_SCALAR_NAME];
	snprintf(key, sizeof(key), "%s", name);
	for (int i = 0; i < m->nscalars; i++) {
		if (strcmp(m->scalars[i].name, key) == 0) {
			m->scalars[i].value = value;
			return 0;
		}
	}
	if (m->nscalars >= GF_MSG_MAX_SCALARS)
		return -ENOSPC;
	memcpy(m->scalars[m->nscalars].name, key, sizeof(key));
	m->scalars[m->nscalars++].value = value;
	return 0;
}

double gf_msg_scalar(const gf_msg *m, const char *name, double def)
{
	char key[GF_MSG_SCALAR_NAME];
	snprintf(key, sizeof(key), "%s", name);
	for (int i = 0; i < m->nscalars; i++)
		if (strcmp(m->scalars[i].name, key) == 0)
			return m->scalars[i].value;
	return def;
}
