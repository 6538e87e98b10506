/* Which worker of a multi-worker stage holds message number s: the table
 * of epochs the dealer appends and the mergers read. See deal.h for the
 * protocol and why it needs no lock.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "deal.h"

int gf_deal_init(gf_deal *d, int count, int readers)
{
	memset(d, 0, sizeof(*d));
	d->capreaders = readers;
	d->taken = calloc((size_t)(readers > 0 ? readers : 1), sizeof(*d->taken));
	if (!d->taken)
		return -ENOMEM;
	for (int i = 0; i < readers; i++)
		atomic_init(&d->taken[i], 0);
	d->ep[0] = (struct gf_deal_epoch){ .from = 0, .count = count };
	d->last = count;
	atomic_init(&d->want, count);
	atomic_init(&d->n, 1);
	return 0;
}

void gf_deal_free(gf_deal *d)
{
	free(d->taken);
	d->taken = NULL;
}

int gf_deal_cursor_init(gf_deal *d, gf_deal_cursor *c, int merger)
{
	memset(c, 0, sizeof(*c));
	c->count = 1;
	if (merger) {
		if (d->nreaders == d->capreaders)
			return -ENOSPC;
		c->taken = &d->taken[d->nreaders++];
	}
	return 0;
}

int gf_deal_worker(const gf_deal *d, gf_deal_cursor *c, int64_t s)
{
	/* acquire: the epochs below n were written before it (see deal.h
	 * for why an epoch that covers s is always among them) */
	uint64_t n = gf_load_acquire_u64(&d->n);
	while (c->next < n) {
		const struct gf_deal_epoch *e = &d->ep[c->next % GF_DEAL_CAP];
		if (e->from > s)
			break;
		c->from = e->from;
		c->count = e->count;
		c->next++;
		/* release: our reads of the slot come before the dealer's
		 * reuse of it (its acquire in gf_deal_change) */
		if (c->taken)
			gf_store_release_u64(c->taken, c->next);
	}
	return (int)((s - c->from) % c->count);
}

int gf_deal_change(gf_deal *d, int64_t from, int count)
{
	uint64_t n = gf_load_relaxed_u64(&d->n); /* only we write it */
	/* slot n % CAP holds epoch n - CAP: every merger must be past it */
	for (int i = 0; i < d->nreaders && n >= GF_DEAL_CAP; i++)
		if (gf_load_acquire_u64(&d->taken[i]) < n - GF_DEAL_CAP + 1)
			return -EAGAIN;
	d->ep[n % GF_DEAL_CAP] = (struct gf_deal_epoch){ .from = from, .count = count };
	d->last = count;
	/* release: the slot before the count that makes it visible */
	gf_store_release_u64(&d->n, n + 1);
	return 0;
}
