/* Internal: which worker of a multi-worker stage holds message number s.
 *
 * The upstream stage (the dealer, in gf_push) hands message s of a link to
 * one worker of a GF_STAGE_WORKERS stage; each downstream stage that
 * merges the workers' outputs (a merger, in gf_pop) must pop message s
 * from that same worker's ring, or order is lost. Both ask this table.
 *
 * The table is a list of epochs: from message `from` on, `count` workers,
 * message s going to worker (s - from) % count. A fixed count is one
 * epoch (plain round-robin). With workers = "auto" the dealer appends an
 * epoch when the controller asks for another count, always starting at
 * the message after the one it is dealing (gf_deal_change(d, s + 1, n)
 * before pushing s). That is what makes the two sides agree without a
 * lock: a merger asks about message s + 1 only after it popped message
 * s, which the dealer pushed after appending the epoch; the release of the
 * epoch count, the ring pushes and pops between (worker in, worker out,
 * each a release/acquire pair) and the merger's acquire of the epoch count
 * order the epoch before the merger's question. A merger waiting for
 * message s may wait on a worker's ring before the dealer has dealt s, so
 * the epoch that covers s must exist by then: it does, since it was
 * appended before s - 1 was dealt.
 *
 * Epochs live in a ring of GF_DEAL_CAP slots: the dealer reuses a slot
 * only once every merger has taken its epoch in (gf_deal_change returns
 * -EAGAIN otherwise and the dealer tries again at its next message).
 *
 * Threads: gf_deal_change from the one dealer thread (gf_deal_set_want
 * from any thread); gf_deal_worker from the thread that owns the cursor.
 */
#ifndef GF_DEAL_H
#define GF_DEAL_H

#include <stdint.h>

#include "../base/atomics.h"

#define GF_DEAL_CAP 64

struct gf_deal_epoch {
	int64_t from; /* first message of the epoch */
	int count;    /* workers that get messages */
};

typedef struct gf_deal {
	atomic_uint_least64_t n;           /* epochs appended (release: the dealer) */
	struct gf_deal_epoch ep[GF_DEAL_CAP]; /* epoch i in ep[i % GF_DEAL_CAP] */
	int nreaders, capreaders;
	atomic_uint_least64_t *taken;      /* (capreaders) epochs each merger has taken in */
	atomic_int want;                   /* the count the controller asks for */
	int last;                          /* the dealer's: count of the latest epoch */
} gf_deal;

/* A reader's place in the table: the epoch it is in. */
typedef struct gf_deal_cursor {
	uint64_t next; /* next epoch to take in */
	int64_t from;
	int count;
	atomic_uint_least64_t *taken; /* a merger's slot in gf_deal.taken, NULL for the dealer */
} gf_deal_cursor;

/* Sets up a table of one epoch (from 0, `count` workers) for at most
 * `readers` mergers. Returns 0 or -ENOMEM. */
int gf_deal_init(gf_deal *d, int count, int readers);

void gf_deal_free(gf_deal *d);

/* Places a cursor at the start; merger = 1 gives it one of the reader
 * slots (the dealer's cursor takes none). Before any thread uses d.
 * Returns 0, or -ENOSPC when every reader slot is taken. */
int gf_deal_cursor_init(gf_deal *d, gf_deal_cursor *c, int merger);

/* The worker that holds message s. s never decreases between calls on
 * one cursor. */
int gf_deal_worker(const gf_deal *d, gf_deal_cursor *c, int64_t s);

/* Dealer: from message `from` on, `count` workers (the dealer has dealt
 * message from - 1 or is about to, and no later one). Returns 0, or
 * -EAGAIN when a merger has not yet taken in the epoch whose slot the new
 * one needs. */
int gf_deal_change(gf_deal *d, int64_t from, int count);

/* The count the controller asks for (the dealer applies it with
 * gf_deal_change at its next message). Any thread. */
static inline void gf_deal_set_want(gf_deal *d, int n)
{
	gf_store_relaxed_int(&d->want, n);
}

static inline int gf_deal_want(gf_deal *d)
{
	return gf_load_relaxed_int(&d->want);
}

#endif
