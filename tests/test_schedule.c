/* Schedules (gf_schedule, <ganflow/train.h>): gf_schedule_at against the
 * values of R3GAN's own cosine_decay_with_warmup (tests/ref/schedule_ref.txt,
 * written by tests/ref/make_schedule_ref.py from the authors'
 * training/training_loop.py) for its CIFAR-10 presets and a setting with a
 * warm-up and a hold; the table form gf.cosine{} makes, and its refusals
 * naming the option and key; which metrics names are scheduled values. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <ganflow/err.h>
#include <ganflow/lua.h>
#include <ganflow/train.h>

#include "test_nn_util.h"

static void test_r3gan_values(void **state)
{
	(void)state;
	FILE *f = fopen(nn_src("tests/ref/schedule_ref.txt"), "r");
	assert_non_null(f);
	char line[512];
	int rows = 0;
	double worst = 0;
	while (fgets(line, sizeof(line), f)) {
		if (line[0] == '#')
			continue;
		double from, to, total, wf, w, hold, nimg, want;
		assert_int_equal(sscanf(line, "%lf %lf %lf %lf %lf %lf %lf %lf", &from, &to, &total, &wf, &w, &hold, &nimg,
		                        &want), 8);
		gf_schedule s = { .on = 1, .from = from, .to = to, .total = total, .warmup_from = wf, .warmup = w,
		                  .hold = hold };
		double got = gf_schedule_at(&s, nimg), err = fabs(got - want) / fmax(fabs(want), 1e-30);
		if (err > 1e-14)
			fail_msg("%s -> %.17g", line, got);
		worst = fmax(worst, err);
		rows++;
	}
	fclose(f);
	assert_int_equal(rows, 90);
	print_message("%d values of R3GAN's cosine_decay_with_warmup, largest relative difference %.3g\n", rows, worst);
}

/* A table as gf.cosine{} makes it, from Lua text. */
static gf_value table(const char *lua)
{
	gf_value v;
	if (gf_lua_eval(lua, &v))
		fail_msg("lua: %s", gf_errmsg());
	return v;
}

static void test_parse(void **state)
{
	(void)state;
	gf_schedule s;
	gf_value v = table("return { kind = 'cosine', from = 2e-4, to = 5e-5, kimg = 20000 }");
	assert_int_equal(gf_schedule_parse(&v, "lr", &s), 0);
	assert_true(s.on && s.total == 2e7 && s.warmup == 0 && s.hold == 0);
	assert_true(gf_schedule_at(&s, 0) == 2e-4 && gf_schedule_at(&s, 3e7) == 5e-5);
	gf_value_free(&v);
	v = table("return { kind = 'cosine', from = 1, to = 0, kimg = 10, warmup_kimg = 1, hold_kimg = 2, warmup_from = 0.5 }");
	assert_int_equal(gf_schedule_parse(&v, "r1", &s), 0);
	assert_true(s.warmup == 1000 && s.hold == 2000 && gf_schedule_at(&s, 500) == 0.75 && gf_schedule_at(&s, 2500) == 1);
	gf_value_free(&v);
	const struct {
		const char *lua, *what;
	} bad[] = {
		{ "return { kind = 'cosine', from = 1, to = 0 }", "schedule of 'x': from, to and kimg are required" },
		{ "return { kind = 'linear', from = 1, to = 0, kimg = 1 }", "unknown kind 'linear'" },
		{ "return { kind = 'cosine', from = 1, to = 0, kimg = 1, steps = 5 }", "unknown key 'steps'" },
		{ "return { kind = 'cosine', from = 1, to = 0, kimg = 1, warmup_kimg = 1 }", "warmup_kimg + hold_kimg < kimg" },
		{ "return { kind = 'cosine', from = 'a', to = 0, kimg = 1 }", "from must be a number" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		v = table(bad[i].lua);
		assert_int_equal(gf_schedule_parse(&v, "x", &s), GF_EPARAM);
		if (!strstr(gf_errmsg(), bad[i].what))
			fail_msg("'%s': got '%s'", bad[i].lua, gf_errmsg());
		gf_value_free(&v);
	}
}

/* The names gf_trainer_metrics gives scheduled values, and only those: the
 * metrics stage reports them as their latest value, not a line's mean. */
static void test_schedule_metric(void **state)
{
	(void)state;
	static const char *const yes[] = { "lr_g", "lr_d", "lr_c", "beta2_d", "ema_kimg_g", "r1_d", "r2_d", "gp_d",
	                                   "lecam_d", "ada_p_d", "pl_g" };
	static const char *const no[] = { "lr", "r1", "r2", "pl", "ada_p", "pl_mean", "loss_d", "loss_g", "lr_x",
	                                  "ada_p_", "_d", "comm_wait_d", "grad_norm_g", "lrx_d", "" };
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		if (!gf_train_schedule_metric(yes[i]))
			fail_msg("'%s' is a scheduled value", yes[i]);
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		if (gf_train_schedule_metric(no[i]))
			fail_msg("'%s' is not a scheduled value", no[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_r3gan_values),
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_schedule_metric),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
