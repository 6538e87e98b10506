/* StyleGAN2-ADA's augmentation (the `ada` layer, backend ada_params /
 * ada_forward / ada_backward):
 *  - each transform and two compositions against PyTorch 1.13 autograd on
 *    given transform values (tests/ref/ada_ref.safetensors, written by
 *    tests/ref/make_ada_refs.py): outputs and input gradients;
 *  - the draws: p = 0 is the identity bit for bit, p = 1 turns every
 *    transform on, the gates follow p, the values follow the uniforms;
 *  - the layer: eval is the identity, the buffer "p" (its initial value,
 *    read at every forward), replay from the same generator state, the
 *    linear part (the double backward's) is the forward without the
 *    colour offset, bad tables named;
 *  - the controller of p (gf_ada, d_step's): the direction and size of
 *    each step for synthetic r_t, the interval, the clamps, 0 -> 1 in
 *    ada_kimg thousand images, a sigmoid D, and a save/restore mid-interval;
 *  - a grid of augmented images for the eye, written to
 *    $GF_BINARY_DIR/tests/out/ada_grid.png (rows: p = 0, blit, geom,
 *    color at p = 1, bgc at p = 0.5 and 1).
 * The CUDA backward's gather algorithm runs here on the host against the
 * CPU's scatter (test_gather); test_cuda_ada runs the kernels.
 * Finite differences of the backward and of R1 through the layer:
 * test_nn_gradcheck and test_nn_dbwd (test_ada, test_ada_grey). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/stat.h>
#include <cmocka.h>

#include <ganflow/image.h>
#include <ganflow/train.h>

#include "../core/nn/ada_params.h"
#include "test_nn_util.h"

static gf_st_file *ref;
static gf_backend *be;

static int setup(void **state)
{
	(void)state;
	return nn_ref_open("tests/ref/ada_ref.safetensors", &ref, &be);
}

static int teardown(void **state)
{
	(void)state;
	nn_ref_close(ref, be);
	return 0;
}

/* The transforms of gf_ada_draw from the reference's 15 values. */
static void draw_from(gf_ada_draw *d, const float *v)
{
	d->xflip = v[0], d->rot90 = v[1], d->tx = v[2], d->ty = v[3], d->scale = v[4], d->rot_pre = v[5];
	d->aniso = v[6], d->rot_post = v[7], d->fx = v[8], d->fy = v[9], d->bright = v[10], d->contrast = v[11];
	d->lumaflip = v[12], d->hue = v[13], d->sat = v[14];
}

static double worst_y, worst_dx;

static double maxabs_err(const float *a, const float *b, size_t n)
{
	double e = 0;
	for (size_t i = 0; i < n; i++)
		e = fabs((double)a[i] - b[i]) > e ? fabs((double)a[i] - b[i]) : e;
	return e;
}

static void ops_case(const char *name)
{
	char k[64];
	gf_tensor tx;
	snprintf(k, sizeof(k), "%s.x", name);
	assert_int_equal(gf_st_get(ref, k, &tx), 0);
	int n = (int)tx.shape[0], c = (int)tx.shape[1], h = (int)tx.shape[2], w = (int)tx.shape[3];
	size_t cnt = 0;
	float *x, *draw, *dy, *y, *dx;
	snprintf(k, sizeof(k), "%s.x", name), x = nn_ref(ref, k, &cnt);
	snprintf(k, sizeof(k), "%s.draw", name), draw = nn_ref(ref, k, NULL);
	snprintf(k, sizeof(k), "%s.dy", name), dy = nn_ref(ref, k, NULL);
	snprintf(k, sizeof(k), "%s.y", name), y = nn_ref(ref, k, NULL);
	snprintf(k, sizeof(k), "%s.dx", name), dx = nn_ref(ref, k, NULL);
	float *m = malloc((size_t)n * GF_ADA_M * sizeof(float)), *got = malloc(cnt * sizeof(float));
	for (int i = 0; i < n; i++) {
		gf_ada_draw d;
		draw_from(&d, draw + 15 * i);
		gf_ada_matrix(m + (size_t)i * GF_ADA_M, &d, c, h, w);
	}
	assert_int_equal(be->ops->ada_forward(be, got, x, m, n, c, h, w, 1), 0);
	double e = maxabs_err(got, y, cnt);
	worst_y = e > worst_y ? e : worst_y;
	snprintf(k, sizeof(k), "%s forward", name);
	assert_true(nn_close(k, got, y, cnt, 3e-4));
	assert_int_equal(be->ops->ada_backward(be, got, dy, m, n, c, h, w), 0);
	e = maxabs_err(got, dx, cnt);
	worst_dx = e > worst_dx ? e : worst_dx;
	snprintf(k, sizeof(k), "%s backward", name);
	assert_true(nn_close(k, got, dx, cnt, 3e-4));
	free(x), free(draw), free(dy), free(y), free(dx), free(m), free(got);
}

static void test_ops(void **state)
{
	(void)state;
	static const char *const cases[] = { "xflip",    "rot90",     "xint",     "scale",      "rotate",
		                             "aniso",    "xfrac",     "brightness", "contrast", "lumaflip",
		                             "hue",      "saturation", "color_grey", "all_rgb",  "all_grey" };
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		ops_case(cases[i]);
	print_message("ada vs torch: worst |y - y_ref| %.3g, worst |dx - dx_ref| %.3g\n", worst_y, worst_dx);
	/* refusals */
	float one[GF_ADA_U] = { 0 };
	assert_int_equal(be->ops->ada_forward(be, one, one, one, 0, 1, 4, 4, 1), GF_EPARAM);
	assert_int_equal(be->ops->ada_forward(be, one, one, one, 1, 1, 1, 4, 1), GF_EPARAM);
	assert_int_equal(be->ops->ada_params(be, one, one, one, 1, 2, 4, 4, GF_ADA_COLOR), GF_EPARAM);
}

/* The draws from uniforms: p = 0 is the identity (and the forward an exact
 * copy), p = 1 turns each transform on, each gate follows p. */
static void test_params(void **state)
{
	(void)state;
	enum { N = 400, C = 3, H = 8, W = 6 };
	float *u = malloc((size_t)N * GF_ADA_U * sizeof(float)), *m = malloc((size_t)N * GF_ADA_M * sizeof(float));
	gf_rng r = { 11, 3, 0 };
	gf_rng_uniform(&r, u, (size_t)N * GF_ADA_U, 0.0f, 1.0f);
	const unsigned all = GF_ADA_BLIT | GF_ADA_GEOM | GF_ADA_COLOR;
	float p = 0.0f;
	assert_int_equal(be->ops->ada_params(be, m, u, &p, N, C, H, W, all), 0);
	for (int i = 0; i < N; i++) {
		assert_true(m[i * GF_ADA_M + ADA_M_GEOM_ON] == 0.0f && m[i * GF_ADA_M + ADA_M_COLOR_ON] == 0.0f);
		assert_true(m[i * GF_ADA_M] == 1.0f && m[i * GF_ADA_M + 4] == 1.0f && m[i * GF_ADA_M + ADA_M_COLOR] == 1.0f);
	}
	float x[4 * C * H * W], y[4 * C * H * W];
	nn_fill(x, sizeof(x) / sizeof(x[0]), 5, 1.0f, 0.0f);
	assert_int_equal(be->ops->ada_forward(be, y, x, m, 4, C, H, W, 1), 0);
	assert_memory_equal(x, y, sizeof(x));
	/* p = 1: every transform on, with the values its uniforms give */
	p = 1.0f;
	assert_int_equal(be->ops->ada_params(be, m, u, &p, N, C, H, W, all), 0);
	for (int i = 0; i < N; i++) {
		gf_ada_draw d;
		gf_ada_draw_of(&d, u + i * GF_ADA_U, 1.0f, H, W, all);
		const float *ui = u + i * GF_ADA_U;
		assert_true(d.xflip == floor(ui[ADA_U_XFLIP] * 2.0) && d.rot90 == floor(ui[ADA_U_ROT90] * 4.0));
		assert_true(fabs(d.tx) <= 1 && fabs(d.ty) <= 1); /* round(U(-1/8, 1/8) x 6 or 8) */
		assert_true(d.scale != 1.0 && d.aniso != 1.0 && d.rot_pre != 0.0 && d.rot_post != 0.0 && d.fx != 0.0);
		assert_true(d.bright != 0.0 && d.contrast != 1.0 && d.hue != 0.0 && d.sat != 1.0);
		assert_true(m[i * GF_ADA_M + ADA_M_GEOM_ON] == 1.0f && m[i * GF_ADA_M + ADA_M_COLOR_ON] == 1.0f);
		float mm[GF_ADA_M];
		gf_ada_matrix(mm, &d, C, H, W);
		assert_memory_equal(mm, m + i * GF_ADA_M, sizeof(mm));
	}
	/* p = 0.3: each gate opens for about 30% of the samples (7 of them x
	 * 400 samples: 840 expected, sd ~24); each rotation's for 1 - sqrt(0.7)
	 * = 16.3% (65 expected, sd ~7.4) */
	int on = 0, pre = 0, post = 0;
	for (int i = 0; i < N; i++) {
		gf_ada_draw d;
		gf_ada_draw_of(&d, u + i * GF_ADA_U, 0.3f, H, W, all);
		on += (d.scale != 1) + (d.aniso != 1) + (d.fx != 0) + (d.bright != 0) + (d.contrast != 1) + (d.hue != 0) +
		      (d.sat != 1);
		pre += d.rot_pre != 0;
		post += d.rot_post != 0;
	}
	assert_true(abs(on - (int)(0.3 * 7 * N)) < 4 * 25);
	assert_true(fabs(pre - N * (1 - sqrt(0.7))) < 4 * 7.4 && fabs(post - N * (1 - sqrt(0.7))) < 4 * 7.4);
	/* only the parts asked for */
	gf_ada_draw d;
	gf_ada_draw_of(&d, u, 1.0f, H, W, GF_ADA_COLOR);
	assert_true(d.scale == 1.0 && d.rot_pre == 0.0 && d.fx == 0.0 && d.tx == 0.0 && d.xflip == 0.0 && d.contrast != 1.0);
	free(u);
	free(m);
}

static float *layer_p(gf_net *n)
{
	char key[64], view[80];
	assert_int_equal(gf_net_count_type(n, "ada", key, sizeof(key)), 1);
	snprintf(view, sizeof(view), "%s.p", key);
	size_t nv;
	const gf_view *v = gf_net_views(n, GF_BUFFERS, &nv);
	for (size_t i = 0; i < nv; i++)
		if (!strcmp(v[i].name, view))
			return gf_net_block(n, GF_BUFFERS, NULL) + v[i].offset;
	fail_msg("no buffer %s", view);
	return NULL;
}

static void test_layer(void **state)
{
	(void)state;
	gf_net *n;
	enum { B = 6, NX = 3 * 8 * 8 };
	assert_int_equal(nn_build(&n, be, "return { input_shape = {3, 8, 8}, {'ada', 'bgc', p = 0.25, name = 'aug'} }", B, 0),
	                 0);
	float *p = layer_p(n);
	assert_true(*p == 0.25f);
	assert_int_equal(gf_net_count_type(n, "conv", NULL, 0), 0);
	float x[B * NX], a[B * NX], b[B * NX];
	gf_rng r = { 1, 2, 0 };
	gf_rng_normal(&r, x, B * NX, 0, 1);
	gf_tensor tx = nn_tensor(x, 4, B, 3, 8, 8), out;
	gf_rng_init(gf_net_rng(n), 5, 0);
	assert_int_equal(gf_net_forward(n, &tx, NULL, GF_EVAL), 0);
	gf_net_output(n, &out);
	assert_memory_equal(out.data, x, sizeof(x));
	assert_int_equal(gf_net_rng(n)->offset, 0);
	/* p = 0 (the buffer, as d_step sets it): the identity, bit for bit */
	*p = 0.0f;
	gf_rng start = *gf_net_rng(n);
	assert_int_equal(gf_net_forward(n, &tx, NULL, GF_TRAIN), 0);
	gf_net_output(n, &out);
	assert_memory_equal(out.data, x, sizeof(x));
	assert_true(gf_net_rng(n)->offset > start.offset);
	/* p = 1: every sample changed; the same generator state, the same images */
	*p = 1.0f;
	start = *gf_net_rng(n);
	assert_int_equal(gf_net_forward(n, &tx, NULL, GF_TRAIN), 0);
	gf_net_output(n, &out);
	memcpy(a, out.data, sizeof(a));
	for (int i = 0; i < B; i++)
		assert_true(memcmp(a + i * NX, x + i * NX, NX * sizeof(float)) != 0);
	*gf_net_rng(n) = start;
	assert_int_equal(gf_net_forward(n, &tx, NULL, GF_TRAIN | GF_FREEZE_STATS), 0);
	gf_net_output(n, &out);
	memcpy(b, out.data, sizeof(b));
	assert_memory_equal(a, b, sizeof(a));
	/* the linear part (the double backward's J t) differs by the offset only:
	 * f(x) - f(0) = J x */
	float zero[B * NX] = { 0 }, lin[B * NX];
	gf_tensor tz = nn_tensor(zero, 4, B, 3, 8, 8);
	*gf_net_rng(n) = start;
	assert_int_equal(gf_net_forward(n, &tz, NULL, GF_TRAIN), 0);
	gf_net_output(n, &out);
	memcpy(b, out.data, sizeof(b));
	*gf_net_rng(n) = start;
	assert_int_equal(gf_net_forward(n, &tx, NULL, GF_TRAIN), 0);
	/* J x through the op, on the transforms the layer drew from `start` */
	float u[B * GF_ADA_U], m[B * GF_ADA_M];
	assert_int_equal(be->ops->rng_uniform(be, u, B * GF_ADA_U, 0.0f, 1.0f, &start), 0);
	assert_int_equal(be->ops->ada_params(be, m, u, p, B, 3, 8, 8, GF_ADA_BLIT | GF_ADA_GEOM | GF_ADA_COLOR), 0);
	assert_int_equal(be->ops->ada_forward(be, lin, x, m, B, 3, 8, 8, 0), 0);
	for (int i = 0; i < B * NX; i++)
		assert_true(fabsf(a[i] - b[i] - lin[i]) <= 1e-5f * (1.0f + fabsf(a[i])));
	gf_net_destroy(n);
}

static void test_bad(void **state)
{
	(void)state;
	gf_net *n;
	assert_int_equal(nn_build(&n, be, "return { input_shape = {3, 8, 8}, {'ada', 'bgcf'} }", 2, 0), GF_EPARAM);
	assert_non_null(strstr(gf_errmsg(), "layer 1 (ada): pipe \"bgcf\": unknown part 'f'"));
	assert_int_equal(nn_build(&n, be, "return { input_shape = {3, 8, 8}, {'ada', ''} }", 2, 0), GF_EPARAM);
	assert_int_equal(nn_build(&n, be, "return { input_shape = {3, 8, 8}, {'ada', 'bb'} }", 2, 0), GF_EPARAM);
	assert_int_equal(nn_build(&n, be, "return { input_shape = {3, 8, 8}, {'ada', p = 1.5} }", 2, 0), GF_EPARAM);
	assert_non_null(strstr(gf_errmsg(), "layer 1 (ada): p = 1.5 is out of range"));
	assert_int_equal(nn_build(&n, be, "return { input_shape = {3, 8, 8}, {'ada', 'bg', pipe = 'c'} }", 2, 0), GF_EPARAM);
	assert_int_equal(nn_build(&n, be, "return { input_shape = {2, 8, 8}, {'ada', 'bgc'} }", 2, 0), GF_ESHAPE);
	assert_non_null(strstr(gf_errmsg(), "need 1 or 3 channels"));
	assert_int_equal(nn_build(&n, be, "return { input_shape = {2, 8, 8}, {'ada', 'bg'} }", 2, 0), 0); /* no colour: any */
	gf_net_destroy(n);
	assert_int_equal(nn_build(&n, be, "return { input_shape = {12}, {'ada'} }", 2, 0), GF_ESHAPE);
	assert_int_equal(nn_build(&n, be, "return { input_shape = {1, 1, 8}, {'ada'} }", 2, 0), GF_ESHAPE);
	assert_non_null(strstr(gf_errmsg(), "2 pixels or more"));
}

/* The CUDA backward's gather (gf_ada_gather, run here on the host)
 * against the CPU backend's scatter, on drawn transforms (p = 1 and 0.5)
 * of square and oblong images, grey, RGB and 2 channels without colour. */
static void test_gather(void **state)
{
	(void)state;
	static const struct {
		int n, c, h, w;
		unsigned what;
		float p;
	} cases[] = { { 16, 3, 8, 8, GF_ADA_BLIT | GF_ADA_GEOM | GF_ADA_COLOR, 1.0f },
		      { 16, 1, 7, 12, GF_ADA_BLIT | GF_ADA_GEOM | GF_ADA_COLOR, 1.0f },
		      { 12, 2, 9, 5, GF_ADA_BLIT | GF_ADA_GEOM, 0.5f },
		      { 8, 3, 2, 6, GF_ADA_GEOM | GF_ADA_COLOR, 1.0f } };
	double worst = 0;
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		int n = cases[k].n, c = cases[k].c, h = cases[k].h, w = cases[k].w;
		size_t hw = (size_t)h * w, cnt = (size_t)n * c * hw;
		float *u = malloc((size_t)n * GF_ADA_U * sizeof(float)), *m = malloc((size_t)n * GF_ADA_M * sizeof(float));
		float *dy = malloc(cnt * sizeof(float)), *dx = malloc(cnt * sizeof(float)), *g = malloc(cnt * sizeof(float));
		gf_rng r = { 40 + k, 1, 0 };
		gf_rng_uniform(&r, u, (size_t)n * GF_ADA_U, 0.0f, 1.0f);
		gf_rng_normal(&r, dy, cnt, 0.0f, 1.0f);
		assert_int_equal(be->ops->ada_params(be, m, u, &cases[k].p, n, c, h, w, cases[k].what), 0);
		assert_int_equal(be->ops->ada_backward(be, dx, dy, m, n, c, h, w), 0);
		for (int i = 0; i < n; i++) {
			const float *mi = m + i * GF_ADA_M;
			int color = mi[ADA_M_COLOR_ON] != 0.0f && (c == 1 || c == 3);
			for (int ch = 0; ch < c; ch++)
				for (size_t q = 0; q < hw; q++)
					g[(size_t)i * c * hw + ch * hw + q] =
					    mi[ADA_M_GEOM_ON] != 0.0f
					        ? gf_ada_gather(mi, dy + (size_t)i * c * hw, color, c, h, w, ch, (int)(q / w), (int)(q % w))
					        : gf_ada_colour_t(dy + (size_t)i * c * hw, mi + ADA_M_COLOR, color, c, ch, hw, q);
		}
		double e = maxabs_err(g, dx, cnt);
		worst = e > worst ? e : worst;
		assert_true(nn_close("gather vs scatter", g, dx, cnt, 1e-5));
		free(u), free(m), free(dy), free(dx), free(g);
	}
	print_message("ada backward, gather vs scatter: worst |difference| %.3g\n", worst);
}

/* ---- the controller ---- */

/* One D step of a batch of 64 real outputs whose mean sign is r (r = 1 -
 * 2 neg / 64), for a D ending in a sigmoid or not. */
static int ctrl_step(gf_ada *a, int neg, int sigmoid, float *p)
{
	float out[64];
	for (int i = 0; i < 64; i++)
		out[i] = (i < neg ? -1.5f : 2.0f) * (sigmoid ? 0.1f : 1.0f) + (sigmoid ? 0.5f : 0.0f);
	gf_ada_observe(a, out, 64, sigmoid);
	return gf_ada_step(a, 64, p);
}

static void test_controller(void **state)
{
	(void)state;
	gf_ada a = { .target = 0.6, .interval = 4, .kimg = 500, .rt = NAN };
	const float step = 4 * 64 / 500e3f; /* batch x interval / (kimg x 1000) */
	float p = 0.0f;
	/* r_t = 1 > 0.6: up by one step every 4 D steps, not in between */
	for (int i = 1; i <= 3; i++) {
		assert_int_equal(ctrl_step(&a, 0, 0, &p), 0);
		assert_true(p == 0.0f && isnan(a.rt));
	}
	assert_int_equal(ctrl_step(&a, 0, 0, &p), 1);
	assert_true(a.rt == 1.0 && fabsf(p - step) < 1e-9f);
	/* r_t = 1 - 2 * 19/64 = 0.40625 < 0.6: down, and clamped at 0 */
	for (int i = 0; i < 4; i++)
		ctrl_step(&a, 19, 0, &p);
	assert_true(fabs(a.rt - 0.40625) < 1e-12 && p == 0.0f);
	for (int i = 0; i < 8; i++)
		ctrl_step(&a, 40, 0, &p);
	assert_true(p == 0.0f && a.rt < 0);
	/* r_t at the target: p stays */
	p = 0.5f;
	a.target = 0.5;
	for (int i = 0; i < 4; i++)
		ctrl_step(&a, 16, 0, &p);
	assert_true(a.rt == 0.5 && p == 0.5f);
	a.target = 0.6;
	/* clamped at 1 */
	p = 0.9999f;
	for (int i = 0; i < 4; i++)
		ctrl_step(&a, 0, 0, &p);
	assert_true(p == 1.0f);
	/* the paper's speed: 0 -> 1 in 500k images (7813 batches of 64) */
	p = 0.0f;
	int steps = 0;
	while (p < 1.0f && steps < 100000)
		ctrl_step(&a, 0, 0, &p), steps++;
	assert_true(steps * 64 >= 500000 && steps * 64 <= 500000 + 4 * 64);
	/* a D ending in a sigmoid: the sign of out - 1/2 */
	p = 0.0f;
	for (int i = 0; i < 4; i++)
		ctrl_step(&a, 8, 1, &p);
	assert_true(a.rt == 0.75 && p > 0.0f);
	/* kimg 0: r_t measured, p left alone */
	a.kimg = 0;
	p = 0.3f;
	for (int i = 0; i < 4; i++)
		ctrl_step(&a, 0, 0, &p);
	assert_true(p == 0.3f && a.rt == 1.0);
	/* save mid-interval, restore into a fresh controller: the same p after */
	a.kimg = 500;
	p = 0.2f;
	ctrl_step(&a, 3, 0, &p);
	ctrl_step(&a, 5, 0, &p);
	int64_t st[5];
	gf_ada_save(&a, st);
	gf_ada b = { .target = 0.6, .interval = 4, .kimg = 500 };
	gf_ada_load(&b, st);
	float pa = p, pb = p;
	for (int i = 0; i < 6; i++)
		assert_int_equal(ctrl_step(&a, 60, 0, &pa), ctrl_step(&b, 60, 0, &pb));
	assert_true(pa == pb && pa < 0.2f && a.rt == b.rt);
}

/* ---- the grid for the eye ---- */

/* A 32x32 RGB test card in [-1, 1]: a diagonal colour ramp, a white ring,
 * an off-centre dark square and a red bar along the top (orientation). */
static void test_card(float *img)
{
	const int S = 32;
	for (int r = 0; r < S; r++)
		for (int c = 0; c < S; c++) {
			double dr = r - 15.5, dc = c - 15.5, rad = sqrt(dr * dr + dc * dc);
			double v[3] = { -0.8 + 1.2 * c / S, -0.8 + 1.2 * r / S, 0.4 - 0.8 * (r + c) / (2.0 * S) };
			if (rad > 9 && rad < 12)
				v[0] = v[1] = v[2] = 0.9;
			if (r >= 6 && r < 12 && c >= 18 && c < 24)
				v[0] = v[1] = v[2] = -0.9;
			if (r < 4 && c < 20)
				v[0] = 0.9, v[1] = v[2] = -0.7;
			for (int k = 0; k < 3; k++)
				img[k * S * S + r * S + c] = (float)v[k];
		}
}

static void test_grid(void **state)
{
	(void)state;
	enum { COLS = 8, ROWS = 6, S = 32, NX = 3 * S * S };
	static float x[COLS * NX], all[ROWS * COLS * NX];
	for (int i = 0; i < COLS; i++)
		test_card(x + i * NX);
	static const struct {
		const char *pipe;
		float p;
	} rows[ROWS] = { { "bgc", 0.0f }, { "b", 1.0f }, { "g", 1.0f }, { "c", 1.0f }, { "bgc", 0.5f }, { "bgc", 1.0f } };
	for (int r = 0; r < ROWS; r++) {
		char code[160];
		gf_net *n;
		snprintf(code, sizeof(code), "return { input_shape = {3, %d, %d}, {'ada', '%s', p = %g} }", S, S, rows[r].pipe,
		         (double)rows[r].p);
		assert_int_equal(nn_build(&n, be, code, COLS, 0), 0);
		gf_rng_init(gf_net_rng(n), 2026, (uint64_t)r);
		gf_tensor tx = nn_tensor(x, 4, COLS, 3, S, S), out;
		assert_int_equal(gf_net_forward(n, &tx, NULL, GF_TRAIN), 0);
		gf_net_output(n, &out);
		memcpy(all + (size_t)r * COLS * NX, out.data, sizeof(float) * COLS * NX);
		if (rows[r].p == 0.0f)
			assert_memory_equal(out.data, x, sizeof(x));
		gf_net_destroy(n);
	}
	int gw, gh;
	gf_grid_size(ROWS * COLS, COLS, S, S, 2, &gw, &gh);
	uint8_t *grid = malloc((size_t)gw * gh * 3);
	gf_grid_tile(grid, all, ROWS * COLS, 3, S, S, COLS, 2);
	const char *bin = getenv("GF_BINARY_DIR");
	char dir[512], path[600];
	snprintf(dir, sizeof(dir), "%s/tests/out", bin ? bin : ".");
	mkdir(dir, 0755);
	snprintf(path, sizeof(path), "%s/ada_grid.png", dir);
	assert_int_equal(gf_png_write(path, grid, gw, gh, 3, (size_t)gw * 3), 0);
	print_message("ada grid: %s (rows: p = 0; blit, geom, color at p = 1; bgc at p = 0.5, 1)\n", path);
	free(grid);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ops),
		cmocka_unit_test(test_params),
		cmocka_unit_test(test_layer),
		cmocka_unit_test(test_bad),
		cmocka_unit_test(test_gather),
		cmocka_unit_test(test_controller),
		cmocka_unit_test(test_grid),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
