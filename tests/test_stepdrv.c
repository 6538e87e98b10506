/* The step driver (gf_stepdrv, <ganflow/train.h>): the captured-step
 * protocol every step stage runs, tested inside a one-stage graph on the
 * CPU backend as a checked device (GANFLOW_CPU_DEVICE_CHECK=1: graphs,
 * events, results read later) and as the plain host backend:
 *
 *  - each kind of step runs eagerly once, is captured the second time and
 *    replayed after; a plan that says eager runs every step eagerly;
 *  - on the device, a record's results are folded a record later (the
 *    lag), in the order the entries were queued, and finish runs once per
 *    record, after its last entry is folded; on the host, at once;
 *  - the values a step's ops leave in the slots reach fold with the
 *    entry's flags and sizes;
 *  - a replay whose ops differ fails naming the unit and step, as does a
 *    record opened while the one in its slot is still in flight;
 *  - settle(0) is a read point: nothing stays in flight. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <ganflow/err.h>
#include <ganflow/graph.h>
#include <ganflow/stage.h>
#include <ganflow/train.h>

#define STEPS 6
#define ENTRIES 2 /* per record */

/* What the test stage saw, for the test to check after the run. */
static struct {
	int check;               /* open the backend as a checked device */
	int eager;               /* the plan */
	int bad_replay;          /* step 3's second entry changes its ops */
	int reopen;              /* open a record twice */
	int nfold, nfinish;
	int64_t fold_step[64];   /* the entries in the order folded */
	double fold_val[64];
	int fold_flags[64];
	int64_t finish_step[16];
	int finish_at[16];       /* the record being queued when finish ran */
	double sums[GF_STEPDRV_RECS];
	double finish_sum[16];
	int64_t eager_n, captured, replayed;
	int deferred;
	int queuing;             /* the record whose entries are being queued */
} seen;

typedef struct tstage {
	gf_backend *be;
	gf_stepdrv *drv;
	float *x;                /* (4) device */
} tstage;

static int fold(void *self, gf_ctx *ctx, int r, const gf_stepdrv_entry *e, const double *vals)
{
	(void)self;
	(void)ctx;
	int i = seen.nfold++;
	seen.fold_step[i] = e->step;
	seen.fold_val[i] = vals[0];
	seen.fold_flags[i] = (int)e->flags + (int)e->n[0] * 100;
	seen.sums[r] += vals[0];
	return 0;
}

static int finish(void *self, gf_ctx *ctx, int r, int64_t step)
{
	(void)self;
	(void)ctx;
	int i = seen.nfinish++;
	seen.finish_step[i] = step;
	seen.finish_at[i] = seen.queuing;
	seen.finish_sum[i] = seen.sums[r];
	seen.sums[r] = 0;
	return 0;
}

struct arg {
	int64_t step;
	int entry;
};

/* x += the step's input (step + entry, uploaded before the bracket),
 * then the sum of x into value slot 0. */
static int ops(void *self, gf_ctx *ctx, void *arg)
{
	(void)ctx;
	tstage *s = self;
	const struct arg *a = arg;
	double *slot = gf_stepdrv_slots(s->drv);
	int rc = s->be->ops->axpy(s->be, s->x, s->x + 2, 2, 1.0f);
	if (!rc && seen.bad_replay && a->step == 3 && a->entry == 1)
		rc = s->be->ops->scale(s->be, s->x, 2, 1.0f); /* an op the capture did not have */
	if (!rc)
		rc = s->be->ops->reduce_dev(s->be, slot, s->x, 2, 0);
	return rc;
}

static int t_create(gf_ctx *ctx, const gf_value *p, void **self)
{
	(void)p;
	tstage *s = calloc(1, sizeof(*s));
	*self = s;
	if (!s)
		return gf_fail(ctx, "out of memory");
	gf_backend_opts o = { .threads = 1 };
	if (seen.check)
		setenv("GANFLOW_CPU_DEVICE_CHECK", "1", 1);
	int rc = gf_backend_open("cpu", &o, &s->be);
	unsetenv("GANFLOW_CPU_DEVICE_CHECK");
	if (rc || (rc = s->be->ops->alloc(s->be, (void **)&s->x, 4 * sizeof(float))) ||
	    (rc = s->be->ops->fill(s->be, s->x, 4, 0.0f)))
		return gf_fail(ctx, "backend: %s", gf_errmsg());
	gf_stepdrv_conf c = { .what = "T step", .unit = "iteration", .nvals = 1, .max_lag = ENTRIES,
	                      .graphs = 1, .self = s, .fold = fold, .finish = finish };
	if (gf_stepdrv_create(&s->drv, s->be, &c))
		return gf_fail(ctx, "driver: %s", gf_errmsg());
	return 0;
}

static int t_run(void *self, gf_ctx *ctx)
{
	tstage *s = self;
	gf_stepdrv_plan(s->drv, seen.eager);
	seen.deferred = gf_stepdrv_deferred(s->drv);
	int rc = 0;
	for (int64_t v = 0; v < STEPS && !rc; v++) {
		int r;
		seen.queuing = (int)v;
		if ((rc = gf_stepdrv_open(s->drv, ctx, v, ENTRIES, &r)))
			break;
		if (seen.reopen && v == 2 && (rc = gf_stepdrv_open(s->drv, ctx, v, 1, &r)))
			break;
		for (int k = 0; k < ENTRIES && !rc; k++) {
			struct arg a = { v, k };
			gf_stepdrv_entry e = { .step = v, .flags = (unsigned)k + 1, .n = { 7 } };
			float in[2] = { (float)(v + k), (float)(v + k) };
			if (!(rc = gf_stepdrv_begin(s->drv, ctx)) &&
			    !(rc = s->be->ops->copy(s->be, s->x + 2, in, sizeof(in), GF_COPY_H2D)) &&
			    !(rc = gf_stepdrv_run(s->drv, ctx, v, NULL, (uint64_t)k, 0, ops, &a)))
				rc = gf_stepdrv_push(s->drv, ctx, &e);
		}
		if (!rc)
			rc = gf_stepdrv_close(s->drv, ctx, v);
	}
	seen.queuing = -1;
	if (!rc)
		rc = gf_stepdrv_settle(s->drv, ctx, 0);
	gf_stepdrv_counts(s->drv, &seen.eager_n, &seen.captured, &seen.replayed);
	return rc;
}

static void t_destroy(void *self)
{
	tstage *s = self;
	gf_stepdrv_destroy(s->drv);
	if (s->x)
		s->be->ops->free(s->be, s->x);
	if (s->be)
		gf_backend_close(s->be);
	free(s);
}

static const gf_stage_desc tdesc = {
	.abi = GF_STAGE_ABI, .size = sizeof(gf_stage_desc), .name = "tstep", .doc = "",
	.create = t_create, .run = t_run, .destroy = t_destroy,
};

static int run_stage(gf_graph **out)
{
	gf_graph *g;
	assert_int_equal(gf_graph_create(&g), 0);
	int node = -1;
	assert_int_equal(gf_graph_add_desc(g, &tdesc, "t", NULL, 1, &node), 0);
	gf_run_info info = { .seed = 1, .world = 1, .backend = "cpu" };
	int rc = gf_graph_run(g, &info, GF_GRAPH_QUIET);
	*out = g;
	return rc;
}

/* The values x's sum takes: entry k of step v adds 2 (v + k). */
static double expected_value(int i)
{
	static double x;
	if (i == 0)
		x = 0;
	int v = i / ENTRIES, k = i % ENTRIES;
	x += 2.0 * (v + k);
	return x;
}

static void check_values(void)
{
	assert_int_equal(seen.nfold, STEPS * ENTRIES);
	assert_int_equal(seen.nfinish, STEPS);
	for (int i = 0; i < seen.nfold; i++) {
		assert_int_equal(seen.fold_step[i], i / ENTRIES); /* queue order */
		assert_true(seen.fold_val[i] == expected_value(i));
		assert_int_equal(seen.fold_flags[i], i % ENTRIES + 1 + 700);
	}
	for (int i = 0; i < STEPS; i++) {
		assert_int_equal(seen.finish_step[i], i);
		assert_true(seen.finish_sum[i] == seen.fold_val[2 * i] + seen.fold_val[2 * i + 1]);
	}
}

static void reset(int check, int eager)
{
	memset(&seen, 0, sizeof(seen));
	seen.check = check;
	seen.eager = eager;
}

static void test_device(void **state)
{
	(void)state;
	reset(1, 0);
	gf_graph *g;
	assert_int_equal(run_stage(&g), 0);
	gf_graph_destroy(g);
	assert_true(seen.deferred);
	check_values();
	/* two kinds of step: each eager once, captured once, replayed after */
	assert_int_equal(seen.eager_n, 2);
	assert_int_equal(seen.captured, 2);
	assert_int_equal(seen.replayed, STEPS * ENTRIES - 4);
	/* read a record later: record v finishes while v + 1 is queued */
	for (int i = 0; i < STEPS - 1; i++)
		assert_int_equal(seen.finish_at[i], i + 1);
	assert_int_equal(seen.finish_at[STEPS - 1], -1); /* the read point at the end */
}

static void test_host_and_eager(void **state)
{
	(void)state;
	/* the host backend: every result at once, and the same values */
	reset(0, 0);
	gf_graph *g;
	assert_int_equal(run_stage(&g), 0);
	gf_graph_destroy(g);
	assert_false(seen.deferred);
	check_values();
	for (int i = 0; i < STEPS; i++)
		assert_int_equal(seen.finish_at[i], i);
	assert_int_equal(seen.captured + seen.replayed, 0);
	/* a device whose plan says eager: nothing captured, read at once */
	reset(1, 1);
	assert_int_equal(run_stage(&g), 0);
	gf_graph_destroy(g);
	assert_false(seen.deferred);
	check_values();
	assert_int_equal(seen.eager_n, STEPS * ENTRIES);
	assert_int_equal(seen.captured + seen.replayed, 0);
	for (int i = 0; i < STEPS; i++)
		assert_int_equal(seen.finish_at[i], i);
}

static void test_errors(void **state)
{
	(void)state;
	gf_graph *g;
	reset(1, 0);
	seen.bad_replay = 1;
	assert_int_equal(run_stage(&g), GF_EFAIL);
	const char *e = gf_graph_error(g);
	if (!strstr(e, "iteration 3: T step: the replayed step differs from the captured one"))
		fail_msg("unexpected error: %s", e);
	gf_graph_destroy(g);

	reset(1, 0);
	seen.reopen = 1;
	assert_int_equal(run_stage(&g), GF_EFAIL);
	e = gf_graph_error(g);
	if (!strstr(e, "iteration 2: the results of iteration 2 are still in flight"))
		fail_msg("unexpected error: %s", e);
	gf_graph_destroy(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_device),
		cmocka_unit_test(test_host_and_eager),
		cmocka_unit_test(test_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
