/* The recipe ops of the CUDA backend (recipe_cuda.c, recipe.cu: clip_dev,
 * lecam_dev, lecam_avg, ada_signs, ada_update, penalty_factors) against
 * the CPU backend's, which test_nn_recipe checks against the host
 * arithmetic the step stages used before: the sequence of
 * test_nn_recipe.h run eagerly and captured (replayed with other per-step
 * scalars) on the GPU, every value within the fp32/fp64 rounding of sums
 * taken in another order; ADA's decisions (p, r_t, counts) exact. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "test_cuda_util.h"
#include "test_nn_util.h"
#include "test_nn_recipe.h"

static int near(const char *what, const double *got, const double *want, size_t n, double tol)
{
	for (size_t i = 0; i < n; i++) {
		double d = fabs(got[i] - want[i]), m = fabs(want[i]) > 1 ? fabs(want[i]) : 1;
		if ((isnan(got[i]) != isnan(want[i])) || d > tol * m) {
			printf("%s[%zu]: %.17g, want %.17g\n", what, i, got[i], want[i]);
			return 0;
		}
	}
	return 1;
}

static int nearf(const char *what, const float *got, const float *want, size_t n, double tol)
{
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)got[i] - want[i]), m = fabs(want[i]) > 1 ? fabs(want[i]) : 1;
		if (d > tol * m) {
			printf("%s[%zu]: %.9g, want %.9g\n", what, i, got[i], want[i]);
			return 0;
		}
	}
	return 1;
}

static void compare(const recipe_out *g, const recipe_out *c)
{
	CHECK(nearf("dy", &g->dy[0][0], &c->dy[0][0], R_STEPS * R_N, 1e-6));
	CHECK(near("lecam", &g->lecam[0][0], &c->lecam[0][0], R_STEPS * 2, 1e-12));
	CHECK(near("lecam state", g->lst, c->lst, 7, 1e-12));
	CHECK(near("ada (p, r_t)", &g->aout[0][0], &c->aout[0][0], R_STEPS * 2, 0));
	CHECK(near("ada state", g->ast, c->ast, 5, 0));
	CHECK(g->p == c->p);
	CHECK(nearf("clipped", g->g, c->g, R_G, 1e-6));
	CHECK(nearf("factors", &g->f[0][0], &c->f[0][0], 4 * R_B, 1e-6));
	CHECK(near("penalties", &g->pout[0][0], &c->pout[0][0], 12, 1e-12));
	CHECK(near("center", &g->center, &c->center, 1, 1e-12));
}

static void test_recipe(void **state)
{
	(void)state;
	gf_backend *cpu = cpu_open(), *be = cuda_open(GF_PREC_FP32, GF_LAYOUT_AUTO);
	recipe_out *c = malloc(sizeof(*c)), *g = malloc(sizeof(*g));
	recipe_run(cpu, 0, c);
	recipe_run(be, 0, g);
	compare(g, c);
	recipe_run(be, 1, g);
	compare(g, c);
	gf_backend_stats st;
	NN_OK(be->ops->stats(be, &st));
	CHECK_EQ(st.replays, 4);
	free(c);
	free(g);
	gf_backend_close(be);
	gf_backend_close(cpu);
	checks_done();
}

int main(void)
{
	cuda_require_device("test_cuda_recipe");
	const struct CMUnitTest tests[] = {
		CHECKED_TEST(test_recipe),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
