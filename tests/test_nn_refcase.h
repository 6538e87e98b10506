/* The case runner of the reference tests whose files come from
 * tests/ref/ref_file.py (test_nn_ref_sg2.c, test_nn_ref_r3gan.c): a network
 * built from Lua code, its parameters and buffers loaded from
 * "<case>.p.<view>" and "<case>.b.<view>", then compared with the file:
 * the output "<case>.y", and for L = <w, y> (w = "<case>.w") the input
 * gradient "<case>.dx" and every parameter's "<case>.g.<view>"; with dbwd
 * the double backward of P = 1/2 |dL/dx|^2 ("<case>.P", "<case>.dPdx",
 * "<case>.g2.<view>"). A file with "<case>.labels" (floats) has them fed
 * as the network's i32 labels. Header-only; every function is static. */
#ifndef GF_TEST_NN_REFCASE_H
#define GF_TEST_NN_REFCASE_H

#include "test_nn_util.h"

typedef struct nn_refcase {
	const gf_st_file *ref;
	gf_backend *be;
	double tol;     /* relative error allowed (nn_ref_check) */
	double worst;   /* the largest seen */
} nn_refcase;

/* a against reference `name` (nn_ref_check: relative error, floor 1e-2 of
 * the larger of the reference's largest entry and `scale`); fails the test
 * beyond rc->tol. */
static inline void nn_rc_check(nn_refcase *rc, const char *name, const float *a, size_t n, double scale)
{
	if (!nn_ref_check(rc->ref, name, a, n, scale, rc->tol, &rc->worst))
		fail();
}

/* The largest reference gradient "<c>.<what>.<view>" of the case: the
 * floor of the gradients' comparisons. */
static inline double nn_rc_grad_scale(const nn_refcase *rc, const char *c, const char *what, const gf_view *v,
                                      size_t nv)
{
	double mx = 0;
	char name[160];
	for (size_t i = 0; i < nv; i++) {
		gf_tensor t;
		snprintf(name, sizeof(name), "%s.%s.%s", c, what, v[i].name);
		if (gf_st_get(rc->ref, name, &t))
			continue;
		for (int64_t j = 0; j < gf_tensor_numel(&t); j++)
			mx = fmax(mx, fabs(((const float *)t.data)[j]));
	}
	return mx;
}

/* Writes the views of block b from "<c>.<what>.<view>": every parameter
 * must have its reference; buffers without one keep their values. */
static inline void nn_rc_load(const nn_refcase *rc, gf_net *net, const char *c, gf_block b, const char *what)
{
	size_t n, nv;
	float *host = calloc(1, (gf_net_block(net, b, &n), n ? n : 1) * sizeof(float));
	NN_OK(gf_net_read(net, b, host));
	const gf_view *v = gf_net_views(net, b, &nv);
	char name[160];
	for (size_t i = 0; i < nv; i++) {
		gf_tensor t;
		snprintf(name, sizeof(name), "%s.%s.%s", c, what, v[i].name);
		if (gf_st_get(rc->ref, name, &t)) {
			if (b == GF_PARAMS)
				fprintf(stderr, "no reference for parameter %s\n", name);
			assert_true(b == GF_BUFFERS);
			continue;
		}
		assert_int_equal(gf_tensor_numel(&t), v[i].numel);
		memcpy(host + v[i].offset, t.data, v[i].numel * sizeof(float));
	}
	NN_OK(gf_net_write(net, b, host));
	free(host);
}

static inline void nn_rc_check_grads(nn_refcase *rc, gf_net *net, const char *c, const char *what)
{
	char name[160];
	size_t nv;
	const gf_view *v = gf_net_views(net, GF_PARAMS, &nv);
	const float *g = gf_net_block(net, GF_GRADS, NULL);
	double scale = nn_rc_grad_scale(rc, c, what, v, nv);
	for (size_t i = 0; i < nv; i++) {
		snprintf(name, sizeof(name), "%s.%s.%s", c, what, v[i].name);
		nn_rc_check(rc, name, g + v[i].offset, v[i].numel, scale);
	}
}

/* Builds the network of Lua code `code` (with flags) at case c's batch,
 * loads its parameters and buffers, runs a training forward of "<c>.x"
 * (with "<c>.labels" when the file has them, kept in lab) and checks
 * "<c>.y". Returns the network. */
static inline gf_net *nn_rc_forward(nn_refcase *rc, const char *c, const char *code, unsigned flags, int32_t lab[64])
{
	char name[160];
	gf_tensor x, lf, labels = { 0 };
	snprintf(name, sizeof(name), "%s.x", c);
	NN_OK(gf_st_get(rc->ref, name, &x));
	int B = (int)x.shape[0];
	snprintf(name, sizeof(name), "%s.labels", c);
	if (!gf_st_get(rc->ref, name, &lf)) {
		assert_true(B <= 64 && gf_tensor_numel(&lf) == B);
		for (int i = 0; i < B; i++)
			lab[i] = (int32_t)((const float *)lf.data)[i];
		labels = gf_tensor_make(lab, GF_I32, 1, (int64_t[]){ B });
	}
	gf_net *net;
	NN_OK(nn_build(&net, rc->be, code, B, flags));
	nn_rc_load(rc, net, c, GF_PARAMS, "p");
	nn_rc_load(rc, net, c, GF_BUFFERS, "b");
	NN_OK(gf_net_forward(net, &x, labels.data ? &labels : NULL, GF_TRAIN));
	gf_tensor out;
	gf_net_output(net, &out);
	snprintf(name, sizeof(name), "%s.y", c);
	nn_rc_check(rc, name, out.data, (size_t)gf_tensor_numel(&out), 0);
	return net;
}

/* After a backward that left g = dL/dx in gf_net_dx: P = 1/2 |g|^2 against
 * "<c>.P", its double backward (t = g) against "<c>.dPdx" and every
 * "<c>.<what>.<view>". */
static inline void nn_rc_dbwd(nn_refcase *rc, gf_net *net, const char *c, const char *what)
{
	char name[160];
	gf_tensor dx;
	NN_OK(gf_net_dx(net, &dx));
	size_t nx = (size_t)gf_tensor_numel(&dx);
	float *t = malloc(nx * sizeof(float));
	double pen = 0;
	for (size_t i = 0; i < nx; i++) {
		t[i] = ((const float *)dx.data)[i];
		pen += 0.5 * (double)t[i] * t[i];
	}
	float pf = (float)pen;
	snprintf(name, sizeof(name), "%s.P", c);
	nn_rc_check(rc, name, &pf, 1, 0);
	NN_OK(gf_net_backward2(net, t, NULL, GF_NEED_DW | GF_NEED_DX));
	NN_OK(gf_net_dx(net, &dx));
	snprintf(name, sizeof(name), "%s.dPdx", c);
	nn_rc_check(rc, name, dx.data, nx, 0);
	nn_rc_check_grads(rc, net, c, what);
	free(t);
}

/* After nn_rc_forward: the backward of L = <w, y> against "<c>.dx" and
 * every "<c>.g.<view>", and with dbwd the double backward. */
static inline void nn_rc_backward(nn_refcase *rc, gf_net *net, const char *c, int dbwd)
{
	char name[160];
	gf_tensor out, dx;
	gf_net_output(net, &out);
	size_t nw;
	snprintf(name, sizeof(name), "%s.w", c);
	float *w = nn_ref(rc->ref, name, &nw);
	assert_int_equal(nw, (size_t)gf_tensor_numel(&out));
	NN_OK(gf_net_backward(net, w, GF_NEED_DX | GF_NEED_DW));
	NN_OK(gf_net_dx(net, &dx));
	size_t nx = (size_t)gf_tensor_numel(&dx);
	snprintf(name, sizeof(name), "%s.dx", c);
	nn_rc_check(rc, name, dx.data, nx, 0);
	nn_rc_check_grads(rc, net, c, "g");
	if (dbwd) {
		NN_OK(gf_net_check_backward2(net));
		nn_rc_dbwd(rc, net, c, "g2");
	}
	free(w);
}

/* Runs case c on the network of Lua code `code` (built with flags). */
static inline void nn_rc_run(nn_refcase *rc, const char *c, const char *code, int dbwd, unsigned flags)
{
	int32_t lab[64];
	gf_net *net = nn_rc_forward(rc, c, code, flags, lab);
	nn_rc_backward(rc, net, c, dbwd);
	gf_net_destroy(net);
}

#endif
