/* Fork-join thread team of the CPU backend. See team.h.
 *
 * One job at a time: the caller publishes (fn, arg, n, parts), bumps the
 * generation word and wakes the workers; each worker runs its part (or
 * nothing) and decrements `pending`; the caller runs part 0, then waits
 * until pending reaches 0. Every worker decrements, participating or not,
 * so that no worker can still be reading the job when the caller starts
 * writing the next one. */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "team.h"

#define SPINS 4000   /* polls before sleeping: ~20-50 us */

struct gf_team {
	int threads;
	pthread_t *th;
	_Atomic uint32_t gen;      /* job generation; workers sleep on it */
	_Atomic uint32_t pending;  /* workers yet to finish the job; the caller sleeps on it */
	_Atomic int stop;
	_Atomic int sleepers;      /* workers in (or about to enter) futex_wait on gen */
	_Atomic int caller_asleep; /* the caller is in (or about to enter) futex_wait on pending */
	/* the current job, written by the caller before the generation bump */
	gf_team_fn fn;
	void *arg;
	size_t n;
	int parts;
};

struct worker_arg {
	gf_team *p;
	int index;
};

/* ---- atomics and futexes ---- */

/* Publishing a job: the job fields are plain stores made before this
 * (release and more: seq_cst for the sleeper protocol below), so a worker
 * that acquires the new generation sees them. */
static void gen_publish(gf_team *p)
{
	atomic_fetch_add_explicit(&p->gen, 1, memory_order_seq_cst);
}

/* Acquire pairs with gen_publish. */
static uint32_t gen_load(gf_team *p)
{
	return atomic_load_explicit(&p->gen, memory_order_acquire);
}

/* A worker's release (seq_cst for the sleeper protocol): its writes to
 * the job's output happen before the caller's acquiring pending_load reads
 * 0. Returns the previous value. */
static uint32_t pending_done(gf_team *p)
{
	return atomic_fetch_sub_explicit(&p->pending, 1, memory_order_seq_cst);
}

static uint32_t pending_load(gf_team *p)
{
	return atomic_load_explicit(&p->pending, memory_order_acquire);
}

/* Sleeping without lost wake-ups: a sleeper announces itself (seq_cst)
 * before futex_wait re-checks the word; a waker changes the word (seq_cst)
 * before looking at the announcement. Whichever comes second sees the
 * other, so either the waker calls futex_wake or futex_wait returns at
 * once because the word changed. The waker skips the syscall when nobody
 * sleeps, which is the common case between back-to-back ops. */
static void announce(_Atomic int *flag, int delta)
{
	atomic_fetch_add_explicit(flag, delta, memory_order_seq_cst);
}

static int announced(_Atomic int *flag)
{
	return atomic_load_explicit(flag, memory_order_seq_cst) != 0;
}

static void futex_wait(_Atomic uint32_t *w, uint32_t val)
{
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *w, int n)
{
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* ---- parts ---- */

static void part_range(size_t n, int parts, int i, size_t *b, size_t *e)
{
	*b = n * (size_t)i / (size_t)parts;
	*e = n * (size_t)(i + 1) / (size_t)parts;
}

static void *worker(void *a)
{
	struct worker_arg *wa = a;
	gf_team *p = wa->p;
	int index = wa->index;
	free(wa);
	/* gen starts at 0 and only the caller bumps it: reading it here instead
	 * could skip a job published before this thread got to run */
	uint32_t seen = 0;
	for (;;) {
		uint32_t g;
		int spins = 0;
		while ((g = gen_load(p)) == seen) {
			if (++spins < SPINS) {
				cpu_relax();
				continue;
			}
			announce(&p->sleepers, 1);
			futex_wait(&p->gen, seen);
			announce(&p->sleepers, -1);
			spins = 0;
		}
		seen = g;
		if (atomic_load_explicit(&p->stop, memory_order_acquire))
			break;
		if (index < p->parts) {
			size_t b, e;
			part_range(p->n, p->parts, index, &b, &e);
			if (b < e)
				p->fn(p->arg, b, e);
		}
		if (pending_done(p) == 1 && announced(&p->caller_asleep))
			futex_wake(&p->pending, 1);
	}
	return NULL;
}

int gf_team_create(gf_team **out, int threads)
{
	*out = NULL;
	gf_team *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->threads = threads < 1 ? 1 : threads;
	if (p->threads > 1) {
		p->th = calloc((size_t)p->threads - 1, sizeof(*p->th));
		if (!p->th) {
			free(p);
			return -ENOMEM;
		}
	}
	for (int i = 1; i < p->threads; i++) {
		struct worker_arg *wa = malloc(sizeof(*wa));
		if (wa) {
			wa->p = p;
			wa->index = i;
		}
		int rc = wa ? pthread_create(&p->th[i - 1], NULL, worker, wa) : ENOMEM;
		if (rc) {
			free(wa);
			p->threads = i;   /* destroy joins the ones started */
			gf_team_destroy(p);
			return -rc;
		}
	}
	*out = p;
	return 0;
}

void gf_team_destroy(gf_team *p)
{
	if (!p)
		return;
	if (p->threads > 1) {
		atomic_store_explicit(&p->stop, 1, memory_order_release);
		gen_publish(p);
		futex_wake(&p->gen, INT_MAX);
		for (int i = 1; i < p->threads; i++)
			pthread_join(p->th[i - 1], NULL);
	}
	free(p->th);
	free(p);
}

int gf_team_threads(const gf_team *p)
{
	return p ? p->threads : 1;
}

void gf_team_for(gf_team *p, size_t n, size_t grain, gf_team_fn fn, void *arg)
{
	if (n == 0)
		return;
	if (grain < 1)
		grain = 1;
	size_t want = (n + grain - 1) / grain;
	int parts = !p ? 1 : want < (size_t)p->threads ? (int)want : p->threads;
	if (parts <= 1) {
		fn(arg, 0, n);
		return;
	}
	p->fn = fn;
	p->arg = arg;
	p->n = n;
	p->parts = parts;
	atomic_store_explicit(&p->pending, (uint32_t)(p->threads - 1), memory_order_relaxed);
	gen_publish(p);
	if (announced(&p->sleepers))
		futex_wake(&p->gen, INT_MAX);
	size_t b, e;
	part_range(n, parts, 0, &b, &e);
	fn(arg, b, e);
	int spins = 0;
	uint32_t left;
	while ((left = pending_load(p)) != 0) {
		if (++spins < SPINS) {
			cpu_relax();
			continue;
		}
		announce(&p->caller_asleep, 1);
		futex_wait(&p->pending, left);
		announce(&p->caller_asleep, -1);
		spins = 0;
	}
}
