/* Internal: named atomic helpers, futex calls and the event count that every
 * blocking wait of the runtime sleeps on.
 *
 * The rings, message pools and the graph never use a bare atomic operation:
 * they call one of the helpers below, whose name spells the memory order,
 * and say at the call site why that order is enough (liburing's barrier.h
 * does the same for its rings). All of them are real C11 atomics, so
 * ThreadSanitizer understands every synchronisation in the runtime.
 *
 * gf_event is an event count (a futex word plus a waiter count). A thread
 * that must wait for a condition does
 *
 *	uint32_t key = gf_event_prepare(ev);
 *	if (condition now true or stopping) gf_event_cancel(ev);
 *	else gf_event_wait(ev, key, timeout);
 *
 * and the thread that makes the condition true calls gf_event_notify(ev)
 * afterwards. notify costs a compiler barrier and one load when nobody
 * sleeps (the waiter count is zero), which is what keeps the ring's hot
 * path cheap; the sleeper pays a membarrier() instead.
 */
#ifndef GF_ATOMICS_H
#define GF_ATOMICS_H

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define GF_CACHELINE 64

/* ---- loads and stores ---- */

static inline uint32_t gf_load_relaxed_u32(const atomic_uint *p)
{
	return atomic_load_explicit((atomic_uint *)p, memory_order_relaxed);
}

static inline uint32_t gf_load_acquire_u32(const atomic_uint *p)
{
	return atomic_load_explicit((atomic_uint *)p, memory_order_acquire);
}

static inline void gf_store_relaxed_u32(atomic_uint *p, uint32_t v)
{
	atomic_store_explicit(p, v, memory_order_relaxed);
}

static inline void gf_store_release_u32(atomic_uint *p, uint32_t v)
{
	atomic_store_explicit(p, v, memory_order_release);
}

static inline int gf_load_relaxed_int(const atomic_int *p)
{
	return atomic_load_explicit((atomic_int *)p, memory_order_relaxed);
}

static inline int gf_load_acquire_int(const atomic_int *p)
{
	return atomic_load_explicit((atomic_int *)p, memory_order_acquire);
}

static inline void gf_store_relaxed_int(atomic_int *p, int v)
{
	atomic_store_explicit(p, v, memory_order_relaxed);
}

static inline void gf_store_release_int(atomic_int *p, int v)
{
	atomic_store_explicit(p, v, memory_order_release);
}

static inline uint64_t gf_load_relaxed_u64(const atomic_uint_least64_t *p)
{
	return atomic_load_explicit((atomic_uint_least64_t *)p, memory_order_relaxed);
}

static inline void gf_store_relaxed_u64(atomic_uint_least64_t *p, uint64_t v)
{
	atomic_store_explicit(p, v, memory_order_relaxed);
}

static inline uint64_t gf_load_acquire_u64(const atomic_uint_least64_t *p)
{
	return atomic_load_explicit((atomic_uint_least64_t *)p, memory_order_acquire);
}

static inline void gf_store_release_u64(atomic_uint_least64_t *p, uint64_t v)
{
	atomic_store_explicit(p, v, memory_order_release);
}

static inline int64_t gf_load_relaxed_i64(const atomic_int_least64_t *p)
{
	return atomic_load_explicit((atomic_int_least64_t *)p, memory_order_relaxed);
}

static inline void gf_store_relaxed_i64(atomic_int_least64_t *p, int64_t v)
{
	atomic_store_explicit(p, v, memory_order_relaxed);
}

/* Doubles shared for statistics only (read by the monitor thread while the
 * owner updates them): bit patterns in a relaxed 64-bit atomic, so a reader
 * never sees a torn value and TSan sees no race. */
static inline double gf_load_relaxed_f64(const atomic_uint_least64_t *p)
{
	uint64_t bits = gf_load_relaxed_u64(p);
	double d;
	memcpy(&d, &bits, sizeof(d));
	return d;
}

static inline void gf_store_relaxed_f64(atomic_uint_least64_t *p, double d)
{
	uint64_t bits;
	memcpy(&bits, &d, sizeof(bits));
	gf_store_relaxed_u64(p, bits);
}

/* The same with acquire / release: a figure read together with another
 * one that must be consistent with it (a sum and the start of the wait in
 * progress, stage_api.c). */
static inline double gf_load_acquire_f64(const atomic_uint_least64_t *p)
{
	uint64_t bits = gf_load_acquire_u64(p);
	double d;
	memcpy(&d, &bits, sizeof(d));
	return d;
}

static inline void gf_store_release_f64(atomic_uint_least64_t *p, double d)
{
	uint64_t bits;
	memcpy(&bits, &d, sizeof(bits));
	gf_store_release_u64(p, bits);
}

/* ---- read-modify-write ---- */

static inline uint64_t gf_add_relaxed_u64(atomic_uint_least64_t *p, uint64_t v)
{
	return atomic_fetch_add_explicit(p, v, memory_order_relaxed);
}

static inline int64_t gf_add_relaxed_i64(atomic_int_least64_t *p, int64_t v)
{
	return atomic_fetch_add_explicit(p, v, memory_order_relaxed);
}

static inline uint32_t gf_add_relaxed_u32(atomic_uint *p, uint32_t v)
{
	return atomic_fetch_add_explicit(p, v, memory_order_relaxed);
}

static inline uint32_t gf_add_release_u32(atomic_uint *p, uint32_t v)
{
	return atomic_fetch_add_explicit(p, v, memory_order_release);
}

static inline uint32_t gf_sub_release_u32(atomic_uint *p, uint32_t v)
{
	return atomic_fetch_sub_explicit(p, v, memory_order_release);
}

/* Sets bits; release so everything the caller wrote before (the last
 * pushed item before a close) is visible to whoever acquires the flags. */
static inline uint32_t gf_or_release_u32(atomic_uint *p, uint32_t bits)
{
	return atomic_fetch_or_explicit(p, bits, memory_order_release);
}

static inline int gf_or_release_int(atomic_int *p, int bits)
{
	return atomic_fetch_or_explicit(p, bits, memory_order_release);
}

static inline int gf_add_release_int(atomic_int *p, int v)
{
	return atomic_fetch_add_explicit(p, v, memory_order_release);
}

static inline uint32_t gf_sub_relaxed_u32(atomic_uint *p, uint32_t v)
{
	return atomic_fetch_sub_explicit(p, v, memory_order_relaxed);
}

static inline int gf_add_relaxed_int(atomic_int *p, int v)
{
	return atomic_fetch_add_explicit(p, v, memory_order_relaxed);
}

/* Compare-and-swap with no ordering, for statistics and "weightier value
 * wins" updates that publish nothing else. */
static inline int gf_cas_relaxed_int(atomic_int *p, int *expected, int v)
{
	return atomic_compare_exchange_weak_explicit(p, expected, v, memory_order_relaxed, memory_order_relaxed);
}

static inline int gf_cas_relaxed_i64(atomic_int_least64_t *p, int64_t *expected, int64_t v)
{
	int_least64_t e = *expected;
	int ok = atomic_compare_exchange_weak_explicit(p, &e, v, memory_order_relaxed, memory_order_relaxed);
	*expected = e;
	return ok;
}

static inline int gf_add_acq_rel_int(atomic_int *p, int v)
{
	return atomic_fetch_add_explicit(p, v, memory_order_acq_rel);
}

static inline int gf_add_seq_cst_int(atomic_int *p, int v)
{
	return atomic_fetch_add_explicit(p, v, memory_order_seq_cst);
}

/* seq_cst loads and stores of 64-bit steps and flags: the agreed stop of
 * a distributed run (graph_agree.c) needs one total order between a
 * driver publishing its step and then reading the hold flag, and the
 * responder setting the flag and then reading every driver's step (the
 * store-load pattern no weaker order covers). Rare or once per step. */
static inline int64_t gf_load_seq_cst_i64(const atomic_int_least64_t *p)
{
	return atomic_load_explicit((atomic_int_least64_t *)p, memory_order_seq_cst);
}

static inline void gf_store_seq_cst_i64(atomic_int_least64_t *p, int64_t v)
{
	atomic_store_explicit(p, v, memory_order_seq_cst);
}

static inline int gf_load_seq_cst_int(const atomic_int *p)
{
	return atomic_load_explicit((atomic_int *)p, memory_order_seq_cst);
}

static inline void gf_store_seq_cst_int(atomic_int *p, int v)
{
	atomic_store_explicit(p, v, memory_order_seq_cst);
}

/* Sets *p to v and returns the old value; seq_cst so "first one wins"
 * decisions (first failure, first stop) are totally ordered. */
static inline int gf_exchange_seq_cst_int(atomic_int *p, int v)
{
	return atomic_exchange_explicit(p, v, memory_order_seq_cst);
}

/* Compare-and-swap for the message pools' free lists: acq_rel on success
 * (publishes the envelope we link in / acquires the one we unlink),
 * acquire on failure (we re-read the new top and follow its link). */
static inline int gf_cas_acq_rel_u32(atomic_uint *p, uint32_t *expected, uint32_t v)
{
	return atomic_compare_exchange_weak_explicit(p, expected, v, memory_order_acq_rel,
	                                             memory_order_acquire);
}

#if defined(__SANITIZE_THREAD__)
#define GF_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GF_TSAN 1
#endif
#endif

/* Full barrier: orders an earlier store before a later load (the Dekker
 * pattern between "publish data, then look for sleepers" and "announce
 * sleeping, then look for data"). */
#ifdef GF_TSAN
/* ThreadSanitizer does not model standalone fences (GCC refuses them with
 * -Wtsan); a seq_cst read-modify-write is a full barrier in hardware too. */
extern atomic_uint gf_tsan_fence_word;
static inline void gf_fence_seq_cst(void)
{
	atomic_fetch_add_explicit(&gf_tsan_fence_word, 0, memory_order_seq_cst);
}
#else
static inline void gf_fence_seq_cst(void)
{
	atomic_thread_fence(memory_order_seq_cst);
}
#endif

/* ---- asymmetric fences ----
 *
 * Every wake-up in the runtime is a Dekker pattern between a fast side
 * (a push or pop that publishes data, then looks for a sleeper) and a slow
 * side (a thread about to sleep that announces itself, then looks for data
 * once more). With membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) available,
 * the slow side pays for both: it makes every running thread of the
 * process pass a full barrier, so the fast side only needs a compiler
 * barrier instead of a fence that waits for its stores to drain on every
 * push (the same pairing as liburcu's sys_membarrier and folly's
 * asymmetric fences). Where membarrier is not available (old kernel,
 * seccomp) and under ThreadSanitizer, both sides use full fences. */
extern atomic_int gf_asym_fences; /* 1 when membarrier is registered (atomics.c) */

/* Fast side: orders an earlier store before a later load, given that the
 * other side uses gf_fence_heavy. */
static inline void gf_fence_light(void)
{
#ifdef GF_TSAN
	gf_fence_seq_cst();
#else
	/* relaxed: set once when the library loads, before any graph runs */
	if (__builtin_expect(atomic_load_explicit(&gf_asym_fences, memory_order_relaxed), 1))
		atomic_signal_fence(memory_order_seq_cst);
	else
		gf_fence_seq_cst();
#endif
}

/* Slow side: a full barrier on this thread and every running thread of the
 * process (atomics.c). */
void gf_fence_heavy(void);

static inline void gf_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

/* ---- futex ---- */

/* Sleeps while *word == val, at most timeout_s seconds (< 0: no limit).
 * Returns 0 when woken (or spuriously), -EAGAIN when *word != val,
 * -ETIMEDOUT, -EINTR. */
static inline int gf_futex_wait(atomic_uint *word, uint32_t val, double timeout_s)
{
	struct timespec ts, *tp = NULL;
	if (timeout_s >= 0) {
		ts.tv_sec = (time_t)timeout_s;
		ts.tv_nsec = (long)((timeout_s - (double)ts.tv_sec) * 1e9);
		tp = &ts;
	}
	long rc = syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, val, tp, NULL, 0);
	return rc == 0 ? 0 : -errno;
}

static inline void gf_futex_wake_all(atomic_uint *word)
{
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* ---- event count ---- */

typedef struct gf_event {
	atomic_uint seq;     /* bumped by every notify that saw a waiter */
	atomic_uint waiters; /* threads between prepare and wait/cancel */
} gf_event;

static inline void gf_event_init(gf_event *ev)
{
	atomic_init(&ev->seq, 0);
	atomic_init(&ev->waiters, 0);
}

/* Announces a waiter and returns the key to wait on. The seq_cst increment
 * and the heavy fence order the announcement before the caller's re-check
 * of its condition; gf_event_notify's light fence orders publishing the
 * condition before reading the waiter count (see the asymmetric fences). So either the notifier sees the waiter (and
 * bumps seq, which makes the wait return) or the waiter's re-check sees the
 * condition: a wake-up cannot be lost. */
static inline uint32_t gf_event_prepare(gf_event *ev)
{
	atomic_fetch_add_explicit(&ev->waiters, 1, memory_order_seq_cst);
	gf_fence_heavy();
	return atomic_load_explicit(&ev->seq, memory_order_acquire);
}

static inline void gf_event_cancel(gf_event *ev)
{
	atomic_fetch_sub_explicit(&ev->waiters, 1, memory_order_relaxed);
}

/* Sleeps until a notify after prepare() (returns at once if one happened
 * already), a signal or the timeout (< 0: none); then leaves the waiters. */
static inline void gf_event_wait(gf_event *ev, uint32_t key, double timeout_s)
{
	gf_futex_wait(&ev->seq, key, timeout_s);
	atomic_fetch_sub_explicit(&ev->waiters, 1, memory_order_relaxed);
}

/* Wakes every waiter unconditionally (stop paths, rare events). The release
 * increment makes everything written before it visible to a woken waiter. */
static inline void gf_event_wake(gf_event *ev)
{
	atomic_fetch_add_explicit(&ev->seq, 1, memory_order_release);
	gf_futex_wake_all(&ev->seq);
}

/* Call after making a waited-for condition true. The fence orders that
 * store before the load of the waiter count (see gf_event_prepare); when
 * nobody waits this is the whole cost. */
static inline void gf_event_notify(gf_event *ev)
{
	gf_fence_light();
	if (atomic_load_explicit(&ev->waiters, memory_order_relaxed))
		gf_event_wake(ev);
}

#endif
