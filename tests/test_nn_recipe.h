/* The recipe ops of <ganflow/backend.h> (clip_dev, lecam_dev, lecam_avg,
 * ada_signs, ada_update, penalty_factors) run as a step stage runs them,
 * on any backend: the sequence test_nn_recipe.c checks on the CPU against
 * the host arithmetic they replace, and test_cuda_recipe.c on a GPU
 * against the CPU. Header-only; needs test_nn_util.h's NN_OK. */
#ifndef GF_TEST_NN_RECIPE_H
#define GF_TEST_NN_RECIPE_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/backend.h>
#include <ganflow/nn.h>

enum { R_N = 37, R_STEPS = 9, R_G = 5003, R_B = 6, R_PTS = 3, R_MAXB = 8 };

/* What the sequence leaves, on the host. */
typedef struct recipe_out {
	float dy[R_STEPS][R_N];         /* LeCam's gradient on each step's fake half (onto ones) */
	double lecam[R_STEPS][2];       /* its terms, real and fake */
	double lst[7];                  /* LeCam's state at the end */
	double ast[5], aout[R_STEPS][2]; /* ADA's state, and (p, r_t) after each step */
	float p;
	float g[R_G];                   /* a gradient clipped by its norm */
	float f[4][R_B];                /* penalty factors: square, distance (fixed), distance (moving), R1 + R2 */
	double pout[4][3], center;
} recipe_out;

static inline float *recipe_dev(gf_backend *be, const void *host, size_t bytes)
{
	void *p;
	NN_OK(be->ops->alloc(be, &p, bytes));
	NN_OK(be->ops->copy(be, p, host, bytes, GF_COPY_H2D));
	return p;
}

/* D's outputs of step i's real (fake = 0) or fake half, around 0.5. */
static inline void recipe_outputs(float *out, int i, int fake)
{
	gf_rng r;
	gf_rng_init(&r, 11, (uint64_t)(2 * i + fake));
	gf_rng_uniform(&r, out, R_N, fake ? 0.1f : 0.3f, fake ? 0.7f : 0.9f);
}

/* The sequence: R_STEPS D steps of LeCam (two halves each, the state
 * averaged after each, the iteration's last every third) and ADA (signs of
 * the real half, p updated every 4 steps, images 16 or a short 9);
 * clipping of a gradient by its own norm; the three penalty kinds on the
 * squared lengths of R_PTS points, and R1 + R2 on the two parts of a batch. When graphs: LeCam and ADA run captured
 * at step 1 and replayed after, with each step's scale and images
 * (per-step scalars); the iteration's last steps (a constant of their own)
 * run eagerly between the replays. */
static inline void recipe_run(gf_backend *be, int graphs, recipe_out *o)
{
	const gf_backend_ops *x = be->ops;
	memset(o, 0, sizeof(*o));
	double lst0[7] = { 0 }, ast0[5] = { 0, 0, 0, 0, NAN };
	double *lst = (double *)recipe_dev(be, lst0, sizeof(lst0)), *ast = (double *)recipe_dev(be, ast0, sizeof(ast0));
	double *val = (double *)recipe_dev(be, lst0, 4 * sizeof(double));
	float p0 = 0.5f, ones[R_N], out[2][R_N];
	for (int i = 0; i < R_N; i++)
		ones[i] = 1.0f;
	float *p = recipe_dev(be, &p0, sizeof(p0)), *dy = recipe_dev(be, ones, sizeof(ones));
	float *dout[2] = { recipe_dev(be, ones, sizeof(ones)), recipe_dev(be, ones, sizeof(ones)) };
	gf_graph *g = NULL;
	for (int i = 0; i < R_STEPS; i++) {
		recipe_outputs(out[0], i, 0);
		recipe_outputs(out[1], i, 1);
		NN_OK(x->copy(be, dout[0], out[0], sizeof(out[0]), GF_COPY_H2D));
		NN_OK(x->copy(be, dout[1], out[1], sizeof(out[1]), GF_COPY_H2D));
		NN_OK(x->copy(be, dy, ones, sizeof(ones), GF_COPY_H2D));
		int captured = graphs && i > 0 && i % 3 != 2; /* LeCam's last steps: eagerly between replays */
		if (captured)
			NN_OK(x->graph_begin(be, &g));
		float scale = 0.5f / (float)(1 + i % 2);
		NN_OK(x->ada_signs(be, ast, dout[0], R_N, 0.5f));
		NN_OK(x->lecam_dev(be, dy, val, lst, dout[0], R_N, 0, 0.3f, scale, 2));
		NN_OK(x->lecam_dev(be, dy, val + 1, lst, dout[1], R_N, 1, 0.3f, scale, 2));
		NN_OK(x->ada_update(be, p, ast, val + 2, i == 6 ? 9.0 : 16.0, 4, 0.6, 0.05));
		NN_OK(x->lecam_avg(be, lst, 0.9f, i % 3 == 2));
		if (captured)
			NN_OK(x->graph_end(be, g));
		NN_OK(x->copy(be, o->dy[i], dy, sizeof(o->dy[i]), GF_COPY_D2H));
		NN_OK(x->copy(be, o->lecam[i], val, 2 * sizeof(double), GF_COPY_D2H));
		NN_OK(x->copy(be, o->aout[i], val + 2, 2 * sizeof(double), GF_COPY_D2H));
	}
	if (g)
		x->graph_destroy(be, g);
	NN_OK(x->copy(be, o->lst, lst, sizeof(o->lst), GF_COPY_D2H));
	NN_OK(x->copy(be, o->ast, ast, sizeof(o->ast), GF_COPY_D2H));
	NN_OK(x->copy(be, &o->p, p, sizeof(o->p), GF_COPY_D2H));

	/* clipping: a gradient of norm about 10 to 3 */
	float *gh = malloc(R_G * sizeof(float));
	gf_rng r;
	gf_rng_init(&r, 12, 0);
	gf_rng_normal(&r, gh, R_G, 0.0f, 0.15f);
	float *gd = recipe_dev(be, gh, R_G * sizeof(float));
	NN_OK(x->reduce_dev(be, val, gd, R_G, 1));
	NN_OK(x->clip_dev(be, gd, R_G, val, 3.0f));
	NN_OK(x->copy(be, o->g, gd, sizeof(o->g), GF_COPY_D2H));
	free(gh);

	/* penalties: R_PTS rows of R_MAXB squared lengths, R_B of them used */
	float sq[R_PTS * R_MAXB];
	gf_rng_uniform(&r, sq, R_PTS * R_MAXB, 0.0f, 2.0f);
	sq[R_MAXB + 2] = sq[2] = sq[2 * R_MAXB + 2] = 0.0f; /* a zero length: the subgradient 0 */
	float *sqd = recipe_dev(be, sq, sizeof(sq)), *fd = recipe_dev(be, sq, sizeof(sq));
	double c0 = 0.25;
	double *cd = (double *)recipe_dev(be, &c0, sizeof(c0));
	gf_penalty_desc d[4] = {
		{ .distance = 0, .weight = 10.0, .scale = 0.25 },
		{ .distance = 1, .weight = 10.0, .center = 1.0, .scale = 1.0 },
		{ .distance = 1, .weight = 2.0, .decay = 0.01, .scale = 4.0 },
		{ .distance = 0, .weight = 0.05, .scale = 0.5, .split = 4, .weight2 = 0.03 },
	};
	for (int k = 0; k < 4; k++) {
		NN_OK(x->penalty_factors(be, fd, val, k == 2 ? cd : NULL, sqd, R_B, R_MAXB, k == 2 ? R_PTS : 1, &d[k]));
		NN_OK(x->copy(be, o->f[k], fd, sizeof(o->f[k]), GF_COPY_D2H));
		NN_OK(x->copy(be, o->pout[k], val, (k == 3 ? 3 : 2) * sizeof(double), GF_COPY_D2H));
	}
	NN_OK(x->copy(be, &o->center, cd, sizeof(double), GF_COPY_D2H));
	void *all[] = { lst, ast, val, p, dy, dout[0], dout[1], gd, sqd, fd, cd };
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		x->free(be, all[i]);
}

#endif
