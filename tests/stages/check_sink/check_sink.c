/* check_sink: a runtime test stage that checks what arrives.
 *
 * Items must arrive in key order start, start + 1, ... (keys k with
 * k % drop_every == drop_every - 1 are expected to be missing: the jitter
 * stage drops those), each with a sequence number above the previous one
 * and, when it carries a tensor, every element equal to its key. A gap, a
 * repeat or a wrong value fails the stage with a message naming the item.
 * At the end of the data it checks the count against `expect`. It reports
 * every item as a step (gf_report_step), can take a fixed service time per
 * item (a consumer of known speed for the depth benchmark), and publishes
 * "sink_items" and "sink_sum" (sum of keys) with gf_report_value. Its
 * flush can compute for a while (`flush_cpu_s`: a final evaluation, as
 * classifier_step's test pass), to test that a graceful stop waits for it.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>

#include <ganflow/log.h>
#include <ganflow/params.h>
#include <ganflow/stage.h>

typedef struct check_sink {
	int64_t expect, start, drop_every;
	double service, flush_cpu;
	int report;
	int64_t count, sum, last_seq;
} check_sink;

static const gf_port_desc inputs[] = { { "inp", "items", 0, "items to check" } };

static const gf_param_desc params[] = {
	{ "expect", GF_PARAM_INT, "-1", "number of items expected at the end of the data (-1: any)", "-1.." },
	{ "start", GF_PARAM_INT, "0", "key of the first item", NULL },
	{ "drop_every", GF_PARAM_INT, "0", "keys k with k % drop_every == drop_every - 1 are expected missing", "0.." },
	{ "service_us", GF_PARAM_NUM, "0", "fixed time spent on each item, microseconds", "0.." },
	{ "report", GF_PARAM_BOOL, "true", "report every item as a step (drives the step target)", NULL },
	{ "flush_cpu_s", GF_PARAM_NUM, "0", "CPU seconds flush() computes before it reports", "0.." },
};

static int create(gf_ctx *ctx, const gf_value *p, void **self)
{
	check_sink *s = calloc(1, sizeof(*s));
	if (!s)
		return gf_fail(ctx, "out of memory");
	*self = s;
	s->expect = gf_param_int(p, "expect");
	s->start = gf_param_int(p, "start");
	s->drop_every = gf_param_int(p, "drop_every");
	s->service = gf_param_num(p, "service_us") * 1e-6;
	s->report = gf_param_bool(p, "report");
	s->flush_cpu = gf_param_num(p, "flush_cpu_s");
	s->last_seq = -1;
	return 0;
}

static int64_t next_key(const check_sink *s, int64_t k)
{
	k++;
	while (s->drop_every > 0 && k % s->drop_every == s->drop_every - 1)
		k++;
	return k;
}

static void serve(double d)
{
	if (d <= 0)
		return;
	double end = gf_now() + d;
	if (d > 300e-6) {
		double sl = d - 100e-6;
		struct timespec ts = { (time_t)sl, (long)((sl - (double)(time_t)sl) * 1e9) };
		nanosleep(&ts, NULL);
	}
	while (gf_now() < end)
		;
}

static int run(void *self, gf_ctx *ctx)
{
	check_sink *s = self;
	int64_t want = s->start;
	if (s->drop_every > 0 && want % s->drop_every == s->drop_every - 1)
		want = next_key(s, want);
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	for (;;) {
		gf_msg *m;
		int rc = gf_pop(ctx, 0, &m);
		if (rc == GF_EEOF)
			break;
		if (rc)
			return rc;
		int64_t key = (int64_t)m->key, seq = m->seq;
		int bad = 0;
		for (int t = 0; t < m->ntensors && !bad; t++) {
			const float *x = m->t[t].data;
			int64_t n = gf_tensor_numel(&m->t[t]);
			for (int64_t i = 0; i < n; i++) {
				if (x[i] != (float)key) {
					gf_msg_release(m);
					return gf_fail(ctx, "item %" PRId64 ": tensor %d element %" PRId64 " is %g, expected %" PRId64,
					               key, t, i, (double)x[i], key);
				}
			}
		}
		gf_msg_release(m);
		if (key != want)
			return gf_fail(ctx, "gap in the items: expected item %" PRId64 ", got item %" PRId64 " (after %" PRId64 " items)",
			               want, key, s->count);
		if (seq <= s->last_seq)
			return gf_fail(ctx, "item %" PRId64 ": sequence number %" PRId64 " not above the previous %" PRId64, key,
			               seq, s->last_seq);
		s->last_seq = seq;
		want = next_key(s, want);
		serve(s->service);
		s->count++;
		s->sum += key;
		if (s->report)
			gf_report_step(ctx, s->count, 1);
	}
	if (s->expect >= 0 && s->count != s->expect && !gf_should_stop(ctx))
		return gf_fail(ctx, "expected %" PRId64 " items, got %" PRId64, s->expect, s->count);
	return 0;
}

static int flush(void *self, gf_ctx *ctx)
{
	check_sink *s = self;
	/* thread CPU time, so that a loaded machine only makes it longer */
	struct timespec t0, t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
	volatile double x = 0;
	do {
		for (int i = 0; i < 100000; i++)
			x += 1e-9 * i;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	} while ((double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec) < s->flush_cpu);
	gf_report_value(ctx, "sink_items", (double)s->count);
	gf_report_value(ctx, "sink_sum", (double)s->sum);
	return 0;
}

static void destroy(void *self)
{
	free(self);
}

GF_STAGE_EXPORT const gf_stage_desc ganflow_stage = {
	.abi = GF_STAGE_ABI,
	.size = sizeof(gf_stage_desc),
	.name = "check_sink",
	.doc = "checks that items arrive complete and in order (runtime test stage)",
	.inputs = inputs,
	.ninputs = 1,
	.params = params,
	.nparams = sizeof(params) / sizeof(params[0]),
	.create = create,
	.run = run,
	.flush = flush,
	.destroy = destroy,
};
