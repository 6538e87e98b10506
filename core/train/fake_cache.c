/* The fake cache of asynchronous D steps (ParaGAN): recent batches of
 * fakes kept for reuse, so D need not wait for G, with a bound on how many
 * D steps a batch may serve and on the staleness of the D weights it was
 * made with. See <ganflow/train.h>. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>
#include <ganflow/train.h>

struct gf_fake_cache {
	int cap, reuse, n;
	int64_t staleness;
	gf_msg **m;             /* (cap) fakes, oldest first */
	int *uses;              /* (cap) D steps each batch served */
};

int gf_fake_cache_create(gf_fake_cache **out, int capacity, int reuse, int64_t staleness)
{
	gf_fake_cache *c = calloc(1, sizeof(*c));
	*out = c;
	if (!c || capacity < 1 || !(c->m = calloc((size_t)capacity, sizeof(*c->m))) ||
	    !(c->uses = calloc((size_t)capacity, sizeof(*c->uses)))) {
		gf_fake_cache_destroy(c);
		*out = NULL;
		return capacity < 1 ? gf_seterr(GF_EPARAM, "fake cache of %d batches", capacity) : -ENOMEM;
	}
	c->cap = capacity;
	c->reuse = reuse;
	c->staleness = staleness;
	return 0;
}

void gf_fake_cache_destroy(gf_fake_cache *c)
{
	if (!c)
		return;
	for (int i = 0; i < c->n; i++)
		gf_msg_release(c->m[i]);
	free(c->m);
	free(c->uses);
	free(c);
}

void gf_fake_cache_add(gf_fake_cache *c, gf_msg *m)
{
	if (c->n == c->cap) {
		gf_msg_release(c->m[0]);
		memmove(c->m, c->m + 1, (size_t)(c->n - 1) * sizeof(c->m[0]));
		memmove(c->uses, c->uses + 1, (size_t)(c->n - 1) * sizeof(c->uses[0]));
		c->n--;
	}
	c->uses[c->n] = 0;
	c->m[c->n++] = m;
}

gf_msg *gf_fake_cache_pick(gf_fake_cache *c, int64_t version)
{
	for (int i = c->n - 1; i >= 0; i--)
		if (c->uses[i] < c->reuse && version - c->m[i]->version <= c->staleness) {
			c->uses[i]++;
			return c->m[i];
		}
	return NULL;
}
