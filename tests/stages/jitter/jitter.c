/* jitter: a runtime test stage that passes items on after a random delay.
 *
 * Each item waits for a delay drawn from `dist`:
 *   none         exactly mean_us
 *   uniform      uniform on [0, 2 mean_us]
 *   exponential  exponential with mean mean_us
 *   bursty       mean_us, plus a pause of burst_us before every
 *                burst_every-th item (a producer that mostly keeps up but
 *                stops now and then: what adaptive depth is for)
 * seeded per worker (seed + worker), so runs repeat. The delay is a sleep
 * (the item waits, no core works); cpu_us adds work that does use a core:
 * each item burns that much of the thread's CPU time (a decoder of fixed
 * cost, for the worker-count benchmark). delay_until ends both at a key:
 * from it on items pass at once (a stage whose work drops mid-run). It
 * can run as several
 * workers (GF_STAGE_WORKERS), replace every drop_every-th item with a
 * GF_MSG_DROPPED placeholder (the merge must release it and keep order),
 * fail at a given key (failure-path tests), and stall at a given key: sit
 * busy, pushing nothing, until the graph stops (stall watchdog tests). Items are copied into this
 * stage's own envelopes: gf_push writes the sequence number, so forwarding
 * the popped envelope itself would race with other consumers of it.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include <ganflow/log.h>
#include <ganflow/params.h>
#include <ganflow/stage.h>

enum { DIST_NONE, DIST_UNIFORM, DIST_EXP, DIST_BURSTY };

typedef struct jitter {
	int dist;
	double mean, burst, cpu; /* seconds */
	int64_t burst_every, drop_every, fail_at, stall_at, until;
	uint64_t rng;
	int64_t count;
} jitter;

static const gf_port_desc inputs[] = { { "inp", "items", 0, "items to delay" } };
static const gf_port_desc outputs[] = { { "out", "items", 0, "the same items, later, in order" } };

static const gf_param_desc params[] = {
	{ "dist", GF_PARAM_STR, "none", "delay distribution: none, uniform, exponential or bursty", "none|uniform|exponential|bursty" },
	{ "mean_us", GF_PARAM_NUM, "0", "mean delay per item, microseconds", "0.." },
	{ "burst_every", GF_PARAM_INT, "0", "bursty: pause before every burst_every-th item", "0.." },
	{ "burst_us", GF_PARAM_NUM, "0", "bursty: length of the pause, microseconds", "0.." },
	{ "seed", GF_PARAM_INT, "1", "random seed (each worker adds its index)", NULL },
	{ "drop_every", GF_PARAM_INT, "0", "replace every k-th item (key % k == k - 1) by a dropped placeholder", "0.." },
	{ "fail_at", GF_PARAM_INT, "-1", "fail on the item with this key (-1: never)", NULL },
	{ "stall_at", GF_PARAM_INT, "-1", "on the item with this key, stop passing items on until the graph stops (-1: never)", NULL },
	{ "cpu_us", GF_PARAM_NUM, "0", "CPU time each item burns (thread CPU clock), microseconds", "0.." },
	{ "delay_until", GF_PARAM_INT, "-1", "items with this key or later pass without delay or CPU work (-1: never)", "-1.." },
};

static uint64_t next_u64(uint64_t *s)
{
	/* splitmix64 */
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double uniform01(uint64_t *s)
{
	return (double)(next_u64(s) >> 11) * 0x1.0p-53;
}

static int create(gf_ctx *ctx, const gf_value *p, void **self)
{
	jitter *j = calloc(1, sizeof(*j));
	if (!j)
		return gf_fail(ctx, "out of memory");
	*self = j;
	const char *dist = gf_param_str(p, "dist");
	j->dist = !strcmp(dist, "uniform")       ? DIST_UNIFORM
	          : !strcmp(dist, "exponential") ? DIST_EXP
	          : !strcmp(dist, "bursty")      ? DIST_BURSTY
	                                         : DIST_NONE;
	j->mean = gf_param_num(p, "mean_us") * 1e-6;
	j->burst = gf_param_num(p, "burst_us") * 1e-6;
	j->burst_every = gf_param_int(p, "burst_every");
	j->drop_every = gf_param_int(p, "drop_every");
	j->fail_at = gf_param_int(p, "fail_at");
	j->stall_at = gf_param_int(p, "stall_at");
	j->cpu = gf_param_num(p, "cpu_us") * 1e-6;
	j->until = gf_param_int(p, "delay_until");
	j->rng = (uint64_t)gf_param_int(p, "seed") + (uint64_t)gf_ctx_worker(ctx);
	return 0;
}

/* Waits d seconds: sleeps for the bulk, spins for the last stretch, so
 * short delays are exact and long ones cost no CPU. */
static void delay(double d)
{
	if (d <= 0)
		return;
	double end = gf_now() + d;
	if (d > 300e-6) {
		double s = d - 100e-6;
		struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
		nanosleep(&ts, NULL);
	}
	while (gf_now() < end)
		;
}

static double thread_cpu(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Works for d seconds of this thread's CPU time: on a busy machine it
 * takes longer, never less work. */
static void burn(double d)
{
	if (d <= 0)
		return;
	volatile uint64_t x = 1;
	double end = thread_cpu() + d;
	do {
		for (int i = 0; i < 2000; i++)
			x = x * 6364136223846793005ull + 1442695040888963407ull;
	} while (thread_cpu() < end);
}

static double draw(jitter *j, int64_t key)
{
	switch (j->dist) {
	case DIST_UNIFORM:
		return 2.0 * j->mean * uniform01(&j->rng);
	case DIST_EXP:
		return -j->mean * log(1.0 - uniform01(&j->rng));
	case DIST_BURSTY:
		return j->mean + (j->burst_every > 0 && key % j->burst_every == j->burst_every - 1 ? j->burst : 0.0);
	default:
		return j->mean;
	}
}

static int run(void *self, gf_ctx *ctx)
{
	jitter *j = self;
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0); /* sleeps as exact as the kernel can */
	for (;;) {
		gf_msg *in, *out;
		int rc = gf_pop(ctx, 0, &in);
		if (rc)
			return rc;
		int64_t key = (int64_t)in->key;
		if (key == j->fail_at) {
			gf_msg_release(in);
			return gf_fail(ctx, "injected failure at item %lld", (long long)key);
		}
		if (key == j->stall_at) {
			gf_msg_release(in);
			while (!gf_should_stop(ctx))
				delay(0.01);
			return 0;
		}
		if (j->until < 0 || key < j->until) {
			delay(draw(j, key));
			burn(j->cpu);
		}
		if ((rc = gf_msg_get(ctx, 0, &out))) {
			gf_msg_release(in);
			return rc;
		}
		out->key = in->key;
		out->step = in->step;
		out->label = in->label;
		for (int t = 0; t < in->ntensors; t++) {
			void *dst = gf_msg_tensor(out, t, in->t[t].dtype, in->t[t].ndim, in->t[t].shape);
			if (!dst) {
				gf_msg_release(in);
				gf_msg_release(out);
				return gf_fail(ctx, "out of memory");
			}
			memcpy(dst, in->t[t].data, gf_tensor_bytes(&in->t[t]));
		}
		if (j->drop_every > 0 && key % j->drop_every == j->drop_every - 1)
			out->flags |= GF_MSG_DROPPED;
		gf_msg_release(in);
		if ((rc = gf_push(ctx, 0, out)))
			return rc;
		j->count++;
	}
}

static void destroy(void *self)
{
	free(self);
}

GF_STAGE_EXPORT const gf_stage_desc ganflow_stage = {
	.abi = GF_STAGE_ABI,
	.size = sizeof(gf_stage_desc),
	.name = "jitter",
	.doc = "passes items on after a random delay (runtime test stage)",
	.inputs = inputs,
	.ninputs = 1,
	.outputs = outputs,
	.noutputs = 1,
	.params = params,
	.nparams = sizeof(params) / sizeof(params[0]),
	.flags = GF_STAGE_WORKERS,
	.create = create,
	.run = run,
	.destroy = destroy,
};
