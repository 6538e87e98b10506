/* The recipe ops that keep a step off the host (<ganflow/backend.h>:
 * clip_dev, lecam_dev, lecam_avg, ada_signs, ada_update,
 * penalty_factors), on the CPU backend:
 *
 *  - each equals, bit for bit, the host arithmetic it replaces in the step
 *    stages: gf_net_clip_grad_norm's coefficient, gf_lecam_grad and
 *    gf_lecam_average on the means d_step added up, gf_ada_observe and
 *    gf_ada_step, and the per-sample factors gf_penalty computed on the
 *    host (square, distance to 1, distance to a moving mean over points);
 *  - run inside captured steps on the checked device
 *    (GANFLOW_CPU_DEVICE_CHECK=1), replayed with other per-step scalars
 *    (LeCam's scale, ADA's images), they give the same bits as eagerly;
 *    a constant that changes (LeCam's `last`) is refused at graph_end. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <ganflow/err.h>
#include <ganflow/nn.h>
#include <ganflow/train.h>

#include "test_nn_util.h"
#include "test_nn_recipe.h"

/* The host side's results for recipe_run's sequence, as the step stages
 * computed them before the ops existed. */
static void host_reference(gf_backend *be, recipe_out *o)
{
	memset(o, 0, sizeof(*o));
	gf_lecam l = { .lambda = 0.3f, .decay = 0.9f };
	gf_ada a = { .target = 0.6, .interval = 4, .kimg = 0.05, .rt = NAN };
	float p = 0.5f, out[2][R_N], gr[R_N];
	double run[2] = { 0, 0 }, base[2] = { 0, 0 };
	for (int i = 0; i < R_STEPS; i++) {
		float scale = 0.5f / (float)(1 + i % 2);
		for (int h = 0; h < 2; h++) {
			recipe_outputs(out[h], i, h);
			if (h == 0)
				gf_ada_observe(&a, out[0], R_N, 1);
			o->lecam[i][h] = gf_lecam_grad(&l, out[h], R_N, h, scale, gr);
			for (int k = 0; k < R_N; k++)
				o->dy[i][k] = (h ? o->dy[i][k] : 1.0f) + (l.set ? gr[k] : 0.0f);
			/* d_step's running means: the iteration's sum of each
			 * micro-step's mean / accumulate */
			double s = 0;
			for (int k = 0; k < R_N; k++)
				s += out[h][k];
			run[h] += s / (double)R_N / 2;
		}
		gf_ada_step(&a, i == 6 ? 9 : 16, &p);
		o->aout[i][0] = p;
		o->aout[i][1] = a.rt;
		gf_lecam_average(&l, run[0] - base[0], run[1] - base[1]);
		int last = i % 3 == 2;
		for (int h = 0; h < 2; h++) {
			base[h] = last ? 0 : run[h];
			run[h] = last ? 0 : run[h];
		}
	}
	o->lst[0] = l.set;
	o->lst[1] = l.ema[0];
	o->lst[2] = l.ema[1];
	o->lst[3] = run[0];
	o->lst[4] = run[1];
	o->lst[5] = base[0];
	o->lst[6] = base[1];
	o->ast[0] = (double)a.signs;
	o->ast[1] = (double)a.count;
	o->ast[2] = (double)a.images;
	o->ast[3] = (double)a.steps;
	o->ast[4] = a.rt;
	o->p = p;

	/* gf_net_clip_grad_norm */
	float *g = malloc(R_G * sizeof(float));
	gf_rng r;
	gf_rng_init(&r, 12, 0);
	gf_rng_normal(&r, g, R_G, 0.0f, 0.15f);
	double ss;
	NN_OK(be->ops->sumsq(be, &ss, g, R_G));
	double coef = 3.0 / (sqrt(ss) + 1e-6);
	assert_true(coef < 1.0); /* the case where it clips */
	for (int i = 0; i < R_G; i++)
		o->g[i] = g[i] * (float)coef;
	free(g);

	/* gf_penalty's host arithmetic before penalty_factors */
	float sq[R_PTS * R_MAXB];
	gf_rng_uniform(&r, sq, R_PTS * R_MAXB, 0.0f, 2.0f);
	sq[R_MAXB + 2] = sq[2] = sq[2 * R_MAXB + 2] = 0.0f;
	double center = 0.25;
	for (int k = 0; k < 4; k++) {
		int npts = k == 2 ? R_PTS : 1, distance = k == 1 || k == 2, part = k == 3 ? 4 : R_B;
		double weight = k == 3 ? 0.05 : k == 2 ? 2.0 : 10.0, scale = k == 0 ? 0.25 : k == 1 ? 1.0 : k == 2 ? 4.0 : 0.5;
		double len[R_B], s = 0;
		for (int i = 0; i < R_B; i++) {
			len[i] = 0;
			for (int j = 0; j < npts; j++)
				len[i] += (double)sq[j * R_MAXB + i];
			len[i] = sqrt(npts > 1 ? len[i] / npts : len[i]);
			s += len[i];
		}
		double mean = s / R_B, c = 1.0, v = 0, v2 = 0;
		if (k == 2) {
			center += 0.01 * (mean - center);
			c = center;
		}
		for (int i = 0; i < R_B; i++) {
			double x;
			if (!distance && i >= part) { /* R2: the second part, weight 0.03, its own mean */
				v2 += 0.5 * len[i] * len[i];
				x = 0.03 / (R_B - part);
			} else if (!distance) {
				v += 0.5 * len[i] * len[i];
				x = weight / part;
			} else {
				v += (len[i] - c) * (len[i] - c);
				x = len[i] > 0 ? 2.0 * weight * (len[i] - c) / (len[i] * R_B) : 0.0;
			}
			if (npts > 1)
				x /= npts;
			o->f[k][i] = (float)(scale * x);
		}
		o->pout[k][0] = weight * v / part;
		o->pout[k][1] = mean;
		if (k == 3)
			o->pout[k][2] = 0.03 * v2 / (R_B - part);
	}
	o->center = center;
}

static void test_host_arithmetic(void **state)
{
	(void)state;
	gf_backend *be = nn_cpu_dev(1, 0);
	recipe_out *got = malloc(sizeof(*got)), *want = malloc(sizeof(*want));
	recipe_run(be, 0, got);
	host_reference(be, want);
	assert_memory_equal(got->dy, want->dy, sizeof(got->dy));
	assert_memory_equal(got->lecam, want->lecam, sizeof(got->lecam));
	assert_memory_equal(got->lst, want->lst, sizeof(got->lst));
	assert_true(got->lst[0] == 1 && got->lecam[R_STEPS - 1][0] > 0); /* LeCam on, with a term */
	assert_memory_equal(got->aout, want->aout, sizeof(got->aout));
	assert_memory_equal(got->ast, want->ast, sizeof(got->ast));
	assert_true(got->p != 0.5f); /* p moved */
	assert_memory_equal(got->g, want->g, sizeof(got->g));
	assert_memory_equal(got->f, want->f, sizeof(got->f));
	assert_memory_equal(got->pout, want->pout, sizeof(got->pout));
	assert_true(got->center == want->center && got->f[1][2] == 0.0f);
	free(got);
	free(want);
	gf_backend_close(be);
}

static void test_captured(void **state)
{
	(void)state;
	gf_backend *plain = nn_cpu_dev(1, 0), *dev = nn_cpu_dev(1, 1);
	recipe_out *eager = malloc(sizeof(*eager)), *graph = malloc(sizeof(*graph));
	recipe_run(plain, 0, eager);
	recipe_run(dev, 1, graph); /* captured at step 1, replayed with other scales and images */
	assert_memory_equal(eager, graph, sizeof(*eager));
	gf_backend_stats st;
	NN_OK(dev->ops->stats(dev, &st));
	assert_int_equal(st.replays, 4);
	/* LeCam's `last` is part of the step, not a per-step scalar */
	double *lst;
	NN_OK(dev->ops->alloc(dev, (void **)&lst, 7 * sizeof(double)));
	gf_graph *g = NULL;
	for (int i = 0; i < 2; i++) {
		NN_OK(dev->ops->graph_begin(dev, &g));
		NN_OK(dev->ops->lecam_avg(dev, lst, 0.9f, i));
		assert_int_equal(dev->ops->graph_end(dev, g), i == 0 ? 0 : GF_EPARAM);
	}
	dev->ops->graph_destroy(dev, g);
	dev->ops->free(dev, lst);
	free(eager);
	free(graph);
	gf_backend_close(plain);
	gf_backend_close(dev);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_host_arithmetic),
		cmocka_unit_test(test_captured),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
