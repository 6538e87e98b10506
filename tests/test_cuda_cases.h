/* What the CUDA tests run that the CPU can run too: the networks they
 * build (test_cuda_nets.h); the passes that compare a backend's forward and
 * backward of them with the CPU backend's; the GEMM and convolution cases
 * with their bf16/fp16 bounds. test_cuda_net, test_cuda_graph and
 * test_cuda_ops run them on the GPU; test_cuda_cmp (a CPU test) builds
 * every network here on the CPU backend at the same batch and runs it
 * forward and backward, and runs the same passes and cases on a CPU
 * backend that rounds GEMM and convolution operands as the CUDA backend
 * does in bf16 and fp16. So a table that stops building (as
 * test_resnet_kinds's did, unnoticed until a GPU ran it) fails on every
 * machine, and so does a tolerance that rounding alone would break.
 * Header-only; everything takes the CPU backend as a parameter. */
#ifndef GF_TEST_CUDA_CASES_H
#define GF_TEST_CUDA_CASES_H

#include "test_cuda_cmp.h"
#include "test_cuda_nets.h"

/* ---- comparing whole networks ---- */

/* Network tolerances. fp32: elementwise, nn_close's relative error with
 * a floor of 1e-2 of the tensor's largest value (gradients: of the
 * layer's, grads_close), 1e-3: several layers of sums in other orders.
 * bf16 / fp16: normwise per tensor (gradients against their layer's norm,
 * grads_norm_close), 0.25 and 0.0625. No bound follows from the format for
 * a whole network (batchnorm divides by deviations of the data, and a
 * rounding can move a value across a ReLU's kink); these are about three
 * times the largest error that the formats' rounding alone gives over
 * these networks and passes, which test_cuda_cmp computes on the CPU with
 * the CUDA backend's roundings emulated, and checks against half of each
 * tolerance (net_tol_margin): the GPU's rounding is another sample of the
 * same noise. (The elementwise 1e-1 / 3e-2 these replace were below the
 * formats' unit roundoff at a tensor's near-zero elements.) */
static double net_tol_margin = 1.0;

static inline double net_tol(gf_precision p)
{
	return net_tol_margin * (p == GF_PREC_BF16 ? 0.25 : p == GF_PREC_FP16 ? 0.0625 : 1e-3);
}

/* Host arrays: got against want in precision p's measure. */
static inline int net_close(const char *what, const float *got, const float *want, size_t n, gf_precision p)
{
	return p == GF_PREC_FP32 ? nn_close(what, got, want, n, net_tol(p)) : norm_close(what, got, want, n, net_tol(p));
}

static inline gf_net *net_build_ok(gf_backend *be, const char *code, int batch)
{
	gf_net *n = NULL;
	NN_OK(nn_build(&n, be, code, batch, 0));
	return n;
}

/* Copies params and buffers of a (CPU) into b (any backend). */
static inline void copy_net(gf_net *b, gf_net *a)
{
	size_t np, nb;
	gf_net_block(a, GF_PARAMS, &np);
	gf_net_block(a, GF_BUFFERS, &nb);
	float *h = malloc((np > nb ? np : nb) * 4 + 4);
	NN_OK(gf_net_read(a, GF_PARAMS, h));
	NN_OK(gf_net_write(b, GF_PARAMS, h));
	NN_OK(gf_net_read(a, GF_BUFFERS, h));
	NN_OK(gf_net_write(b, GF_BUFFERS, h));
	free(h);
}

/* A block of got against want's, elementwise (fp32 measure, tol):
 * gradients with their layer's floor (grads_close), parameters and
 * buffers tensor by tensor (nn_close). */
static inline int block_close(const char *what, gf_net *got, gf_net *want, gf_block b, double tol)
{
	size_t n;
	gf_net_block(want, b, &n);
	float *g = malloc(n * 4 + 4), *w = malloc(n * 4 + 4);
	NN_OK(gf_net_read(got, b, g));
	NN_OK(gf_net_read(want, b, w));
	size_t nv;
	const gf_view *v = gf_net_views(want, b, &nv);
	int ok = 1;
	if (b == GF_GRADS) {
		ok = grads_close(what, g, w, v, nv, tol);
	} else {
		for (size_t i = 0; i < nv; i++) {
			char name[160];
			snprintf(name, sizeof(name), "%s %s", what, v[i].name);
			ok &= nn_close(name, g + v[i].offset, w + v[i].offset, v[i].numel, tol);
		}
	}
	free(g);
	free(w);
	return ok;
}

/* A block in precision p's measure (net_tol). */
static inline int net_block_close(const char *what, gf_net *got, gf_net *want, gf_block b, gf_precision p)
{
	if (p == GF_PREC_FP32)
		return block_close(what, got, want, b, net_tol(p));
	size_t n;
	gf_net_block(want, b, &n);
	float *g = malloc(n * 4 + 4), *w = malloc(n * 4 + 4);
	NN_OK(gf_net_read(got, b, g));
	NN_OK(gf_net_read(want, b, w));
	size_t nv;
	const gf_view *v = gf_net_views(want, b, &nv);
	int ok = 1;
	if (b == GF_GRADS) {
		ok = grads_norm_close(what, g, w, v, nv, net_tol(p));
	} else {
		for (size_t i = 0; i < nv; i++) {
			char name[160];
			snprintf(name, sizeof(name), "%s %s", what, v[i].name);
			ok &= norm_close(name, g + v[i].offset, w + v[i].offset, v[i].numel, net_tol(p));
		}
	}
	free(g);
	free(w);
	return ok;
}

/* A tensor of g (its memory) against the CPU's, in precision p's measure. */
static inline int out_close(const char *what, gf_backend *g, const gf_tensor *got, const gf_tensor *want,
                            gf_precision p)
{
	size_t n = (size_t)gf_tensor_numel(want);
	float *h = host_from(g, got->data, n);
	int ok = net_close(what, h, want->data, n, p);
	free(h);
	return ok;
}

/* The backend's loss scale (fp16), 1 where it has none. */
static inline float loss_scale_of(gf_backend *g, gf_precision prec)
{
	if (prec != GF_PREC_FP16)
		return 1.0f;
	gf_backend_stats st;
	NN_OK(g->ops->stats(g, &st));
	return st.loss_scale;
}

/* One pass through G then D (train mode, dropout on, BCE), as a G step
 * followed by a D step's weight gradients, on the CPU and on g: outputs,
 * the loss, D's gradients and dx, G's gradients and running statistics,
 * G in eval mode. */
static inline void gan_pass(gf_backend *cpu, gf_backend *g, gf_precision prec, const char *cfg, const char *gcode,
                            const char *dcode, int B, int zdim, int classes)
{
	gf_net *Gc = net_build_ok(cpu, gcode, B), *Dc = net_build_ok(cpu, dcode, B);
	gf_net *Gg = net_build_ok(g, gcode, B), *Dg = net_build_ok(g, dcode, B);
	gf_rng r = { 42, 0, 0 };
	NN_OK(gf_net_init(Gc, &r));
	NN_OK(gf_net_init(Dc, &r));
	copy_net(Gg, Gc);
	copy_net(Dg, Dc);
	gf_rng_init(gf_net_rng(Dc), 7, 1);
	gf_rng_init(gf_net_rng(Dg), 7, 1);
	float *z = host_rand((size_t)B * zdim, 3, -1, 1);
	int32_t lab[64];
	for (int i = 0; i < B; i++)
		lab[i] = classes ? i % classes : 0;
	gf_tensor zt = nn_tensor(z, 2, B, zdim), lt = gf_tensor_make(lab, GF_I32, 1, (int64_t[]){ B });
	const gf_tensor *labels = classes ? &lt : NULL;
	gf_tensor fc, fg, pc, pg, dxc, dxg;
	char what[128];

	NN_OK(gf_net_forward(Gc, &zt, labels, GF_TRAIN));
	NN_OK(gf_net_forward(Gg, &zt, labels, GF_TRAIN));
	NN_OK(gf_net_output(Gc, &fc));
	NN_OK(gf_net_output(Gg, &fg));
	snprintf(what, sizeof(what), "%s: G(z)", cfg);
	CHECK(out_close(what, g, &fg, &fc, prec));
	/* D on the CPU's fakes on both sides, so the comparison is D's alone */
	gf_tensor fin = fc;
	NN_OK(gf_net_forward(Dc, &fin, labels, GF_TRAIN));
	NN_OK(gf_net_forward(Dg, &fin, labels, GF_TRAIN));
	NN_OK(gf_net_output(Dc, &pc));
	NN_OK(gf_net_output(Dg, &pg));
	snprintf(what, sizeof(what), "%s: D(fake)", cfg);
	CHECK(out_close(what, g, &pg, &pc, prec));
	float *dpc = calloc((size_t)B, 4), *dpg = dev_alloc(g, (size_t)B);
	float lc, lg;
	NN_OK(gf_loss(cpu, GF_LOSS_BCE, &lc, dpc, &pc, NULL, 1.0f, 1.0f));
	NN_OK(gf_loss(g, GF_LOSS_BCE, &lg, dpg, &pg, NULL, 1.0f, 1.0f));
	snprintf(what, sizeof(what), "%s: BCE(D(fake))", cfg);
	CHECK(net_close(what, &lg, &lc, 1, prec));
	/* the loss gradient of the CPU on both sides (fp16 scales its own) */
	float scale = loss_scale_of(g, prec);
	float *dpcd = dev_from(g, dpc, (size_t)B);
	if (prec == GF_PREC_FP16)
		NN_OK(g->ops->scale(g, dpcd, (size_t)B, scale));
	NN_OK(gf_net_backward(Dc, dpc, GF_NEED_DX | GF_NEED_DW));
	NN_OK(gf_net_backward(Dg, dpcd, GF_NEED_DX | GF_NEED_DW));
	if (prec == GF_PREC_FP16) {
		size_t n;
		float *gr = gf_net_block(Dg, GF_GRADS, &n);
		NN_OK(g->ops->grad_unscale(g, gr, n));
	}
	snprintf(what, sizeof(what), "%s: D grads", cfg);
	CHECK(net_block_close(what, Dg, Dc, GF_GRADS, prec));
	NN_OK(gf_net_dx(Dc, &dxc));
	NN_OK(gf_net_dx(Dg, &dxg));
	/* dx carries the fp16 loss scale: compare G's gradients from the CPU's dx */
	size_t ndx = (size_t)gf_tensor_numel(&dxc);
	float *dxcd = dev_from(g, dxc.data, ndx);
	if (prec != GF_PREC_FP16) {
		snprintf(what, sizeof(what), "%s: dD/dx", cfg);
		CHECK(out_close(what, g, &dxg, &dxc, prec));
	} else {
		/* the GPU's dx holds the loss scale: the same numbers once divided */
		float *h = host_from(g, dxg.data, ndx);
		for (size_t i = 0; i < ndx; i++)
			h[i] /= scale;
		snprintf(what, sizeof(what), "%s: dD/dx (unscaled)", cfg);
		CHECK(net_close(what, h, dxc.data, ndx, prec));
		free(h);
		NN_OK(g->ops->scale(g, dxcd, ndx, scale));   /* G's backward in fp16 gets a scaled gradient too */
	}
	NN_OK(gf_net_backward(Gc, dxc.data, GF_NEED_DW));
	NN_OK(gf_net_backward(Gg, dxcd, GF_NEED_DW));
	if (prec == GF_PREC_FP16) {
		size_t n;
		float *gr = gf_net_block(Gg, GF_GRADS, &n);
		NN_OK(g->ops->grad_unscale(g, gr, n));
	}
	snprintf(what, sizeof(what), "%s: G grads", cfg);
	CHECK(net_block_close(what, Gg, Gc, GF_GRADS, prec));
	snprintf(what, sizeof(what), "%s: G running stats", cfg);
	CHECK(net_block_close(what, Gg, Gc, GF_BUFFERS, prec));
	/* eval mode (running statistics, no dropout) */
	NN_OK(gf_net_forward(Gc, &zt, labels, GF_EVAL));
	NN_OK(gf_net_forward(Gg, &zt, labels, GF_EVAL));
	NN_OK(gf_net_output(Gc, &fc));
	NN_OK(gf_net_output(Gg, &fg));
	snprintf(what, sizeof(what), "%s: G(z) eval", cfg);
	CHECK(out_close(what, g, &fg, &fc, prec));

	g->ops->free(g, dpg);
	g->ops->free(g, dpcd);
	g->ops->free(g, dxcd);
	free(dpc);
	free(z);
	gf_net_destroy(Gc);
	gf_net_destroy(Dc);
	gf_net_destroy(Gg);
	gf_net_destroy(Dg);
}

/* The classifier (conv-bn-relu-maxpool stages, dropout, logits) on the
 * CPU and on g, cross-entropy on both: logits, the loss, every gradient. */
static inline void classifier_pass(gf_backend *cpu, gf_backend *g, gf_precision prec)
{
	int B = 8;
	gf_net *c0 = net_build_ok(cpu, NET_CLASSIFIER, B), *c1 = net_build_ok(g, NET_CLASSIFIER, B);
	gf_rng r = { 5, 0, 0 };
	NN_OK(gf_net_init(c0, &r));
	copy_net(c1, c0);
	gf_rng_init(gf_net_rng(c0), 3, 3);
	gf_rng_init(gf_net_rng(c1), 3, 3);
	float *x = host_rand((size_t)B * 28 * 28, 9, -1, 1);
	gf_tensor xt = nn_tensor(x, 4, B, 1, 28, 28), o0, o1;
	NN_OK(gf_net_forward(c0, &xt, NULL, GF_TRAIN));
	NN_OK(gf_net_forward(c1, &xt, NULL, GF_TRAIN));
	NN_OK(gf_net_output(c0, &o0));
	NN_OK(gf_net_output(c1, &o1));
	CHECK(out_close("classifier logits", g, &o1, &o0, prec));
	int32_t lab[8] = { 0, 1, 2, 3, 4, 5, 6, 7 };
	int32_t *glab = (int32_t *)dev_alloc(g, 8);
	NN_OK(g->ops->copy(g, glab, lab, sizeof(lab), GF_COPY_H2D));
	gf_tensor lt0 = gf_tensor_make(lab, GF_I32, 1, (int64_t[]){ B }), lt1 = lt0;
	lt1.data = glab;
	lt1.device = g->device;
	float *d0 = calloc((size_t)B * 10, 4), *d1 = dev_alloc(g, (size_t)B * 10), l0, l1;
	NN_OK(gf_loss(cpu, GF_LOSS_CE, &l0, d0, &o0, &lt0, 0, 1));
	NN_OK(gf_loss(g, GF_LOSS_CE, &l1, d1, &o1, &lt1, 0, 1));
	CHECK(prec == GF_PREC_FP32 ? nn_close("classifier ce", &l1, &l0, 1, 1e-4)
	                           : net_close("classifier ce", &l1, &l0, 1, prec));
	NN_OK(gf_net_backward(c0, d0, GF_NEED_DW | GF_NEED_DX));
	NN_OK(gf_net_backward(c1, d1, GF_NEED_DW | GF_NEED_DX));
	CHECK(net_block_close("classifier grads", c1, c0, GF_GRADS, prec));
	gf_net_destroy(c0);
	gf_net_destroy(c1);
	g->ops->free(g, glab);
	g->ops->free(g, d1);
	free(d0);
	free(x);
}

/* A network of 12 inputs and 10 outputs (NET_ALL_LAYERS, NET_RESNET_KINDS,
 * NET_CBN_PROJ) on the CPU and on g in precision prec, least squares on
 * both: output, every gradient, dx, the loss. */
static inline void net_pass(gf_backend *cpu, gf_backend *g, gf_precision prec, const char *name, const char *code,
                            int classes)
{
	char what[64], msg[128];
	snprintf(what, sizeof(what), "%s (%s)", name, prec_name(prec));
	int B = 6;
	gf_net *a = net_build_ok(cpu, code, B), *b = net_build_ok(g, code, B);
	gf_rng r = { 8, 0, 0 };
	NN_OK(gf_net_init(a, &r));
	copy_net(b, a);
	gf_rng_init(gf_net_rng(a), 4, 4);
	gf_rng_init(gf_net_rng(b), 4, 4);
	float *x = host_rand((size_t)B * 12, 17, -1, 1), *t = host_rand((size_t)B * 10, 18, 0, 0.2f);
	gf_tensor xt = nn_tensor(x, 2, B, 12), oa, ob, dxa, dxb;
	int32_t lab[6];
	for (int i = 0; i < B; i++)
		lab[i] = (i * 3 + 1) % (classes ? classes : 1);
	gf_tensor lt = gf_tensor_make(lab, GF_I32, 1, (int64_t[]){ B });
	NN_OK(gf_net_forward(a, &xt, classes ? &lt : NULL, GF_TRAIN));
	NN_OK(gf_net_forward(b, &xt, classes ? &lt : NULL, GF_TRAIN));
	NN_OK(gf_net_output(a, &oa));
	NN_OK(gf_net_output(b, &ob));
	snprintf(msg, sizeof(msg), "%s: output", what);
	CHECK(out_close(msg, g, &ob, &oa, prec));
	float *da = calloc((size_t)B * 10, 4), *db = dev_alloc(g, (size_t)B * 10), *gt = dev_from(g, t, (size_t)B * 10);
	gf_tensor ta = nn_tensor(t, 2, B, 10), tb = ta;
	tb.data = gt;
	tb.device = g->device;
	NN_OK(gf_loss(cpu, GF_LOSS_LS, NULL, da, &oa, &ta, 0, 1));
	float *dac = dev_from(g, da, (size_t)B * 10);   /* the CPU's loss gradient on both sides */
	NN_OK(gf_net_backward(a, da, GF_NEED_DW | GF_NEED_DX));
	NN_OK(gf_net_backward(b, dac, GF_NEED_DW | GF_NEED_DX));
	snprintf(msg, sizeof(msg), "%s: grads", what);
	CHECK(net_block_close(msg, b, a, GF_GRADS, prec));
	NN_OK(gf_net_dx(a, &dxa));
	NN_OK(gf_net_dx(b, &dxb));
	snprintf(msg, sizeof(msg), "%s: dx", what);
	CHECK(out_close(msg, g, &dxb, &dxa, prec));
	/* the backend's own loss matches too */
	float la, lb;
	NN_OK(gf_loss(cpu, GF_LOSS_LS, &la, NULL, &oa, &ta, 0, 1));
	NN_OK(gf_loss(g, GF_LOSS_LS, &lb, db, &ob, &tb, 0, 1));
	snprintf(msg, sizeof(msg), "%s: loss", what);
	CHECK(net_close(msg, &lb, &la, 1, prec));
	g->ops->free(g, db);
	g->ops->free(g, gt);
	g->ops->free(g, dac);
	free(da);
	free(x);
	free(t);
	gf_net_destroy(a);
	gf_net_destroy(b);
}

/* ---- GEMM and convolution cases ---- */

/* C = alpha op(A) op(B) + beta C on g against the CPU: fp32 within
 * TOL_FP32, bf16/fp16 within the format's bound (test_cuda_cmp.h). */
static inline void gemm_case(gf_backend *cpu, gf_backend *g, gf_precision prec, int ta, int tb, int m, int n, int k,
                             float alpha, float beta)
{
	int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 2, ldc = n + 1;
	size_t na = (size_t)(ta ? k : m) * lda, nb = (size_t)(tb ? n : k) * ldb, nc = (size_t)m * ldc;
	float *a = host_rand(na, 1, -1, 1), *b = host_rand(nb, 2, -1, 1), *c = host_rand(nc, 3, -1, 1);
	float *da = dev_from(g, a, na), *db = dev_from(g, b, nb), *dc = dev_from(g, c, nc);
	double *bound = prec == GF_PREC_FP32 ? NULL : gemm_bounds(cpu, prec, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
	NN_OK(cpu->ops->gemm(cpu, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc));
	NN_OK(g->ops->gemm(g, ta, tb, m, n, k, alpha, da, lda, db, ldb, beta, dc, ldc));
	char what[96];
	snprintf(what, sizeof(what), "gemm %s ta=%d tb=%d %dx%dx%d alpha=%g beta=%g", prec_name(prec), ta, tb, m, n, k,
	         (double)alpha, (double)beta);
	CHECK(bound ? dev_bound_close(what, g, dc, c, bound, nc) : dev_close(what, g, dc, c, nc, TOL_FP32));
	g->ops->free(g, da);
	g->ops->free(g, db);
	g->ops->free(g, dc);
	free(a);
	free(b);
	free(c);
	free(bound);
}

/* test_cuda_ops's GEMMs: every transpose, alpha/beta, D's head, k = 0. */
static inline void gemm_cases(gf_backend *cpu, gf_backend *g, gf_precision prec)
{
	for (int t = 0; t < 4; t++) {
		gemm_case(cpu, g, prec, t >> 1, t & 1, 37, 53, 29, 1.0f, 0.0f);
		gemm_case(cpu, g, prec, t >> 1, t & 1, 37, 53, 29, 0.7f, 1.3f);
	}
	gemm_case(cpu, g, prec, 0, 1, 64, 1, 512, 1.0f, 0.0f);   /* D's head */
	gemm_case(cpu, g, prec, 0, 0, 5, 7, 0, 1.0f, 0.0f);      /* k = 0: C = 0 */
	gemm_case(cpu, g, prec, 0, 0, 5, 7, 0, 1.0f, 2.0f);      /* k = 0: C = 2C */
}

/* A device result against the CPU's: bf16/fp16 within bound, fp32 within
 * TOL_FP32. */
static inline int conv_close(const char *what, gf_backend *g, const float *dev, const float *want, size_t n,
                             const double *bound)
{
	return bound ? dev_bound_close(what, g, dev, want, bound, n) : dev_close(what, g, dev, want, n, TOL_FP32);
}

/* One convolution (of `groups` groups) on g against the CPU: forward with
 * and without bias, backward (dx, dw, db; then accumulating), dx alone (the
 * transposed conv's use, x NULL) and dw alone. bf16/fp16 results within
 * their bounds, db (an f32 sum on both backends) within TOL_FP32. */
static inline void conv_case(gf_backend *cpu, gf_backend *g, gf_precision prec, const char *cfg, int n, int cin,
                             int h, int w, int cout, int k, int s, int p, int up, int groups)
{
	gf_conv_desc d;
	memset(&d, 0, sizeof(d));
	d.n = n;
	d.cin = cin;
	d.h = h;
	d.w = w;
	d.cout = cout;
	d.kh = d.kw = k;
	d.sh = d.sw = s;
	d.ph = d.pw = p;
	d.up = up;
	d.hout = (h * up + 2 * p - k) / s + 1;
	d.wout = (w * up + 2 * p - k) / s + 1;
	d.dtype = GF_F32;
	d.layout = GF_NCHW;
	d.groups = groups;
	int lp = prec != GF_PREC_FP32;
	size_t nx = (size_t)n * cin * h * w, nw = (size_t)cout * (cin / groups) * k * k;
	size_t ny = (size_t)n * cout * d.hout * d.wout;
	float *x = host_rand(nx, 11, -1, 1), *wt = host_rand(nw, 12, -0.5f, 0.5f), *b = host_rand((size_t)cout, 13, -1, 1);
	float *dyv = host_rand(ny, 14, -1, 1);
	float *y = calloc(ny, 4), *dx = calloc(nx, 4), *dw = host_rand(nw, 15, -1, 1), *db = host_rand((size_t)cout, 16, -1, 1);
	float *gx = dev_from(g, x, nx), *gw = dev_from(g, wt, nw), *gb = dev_from(g, b, (size_t)cout);
	float *gdy = dev_from(g, dyv, ny), *gy = dev_alloc(g, ny), *gdx = dev_alloc(g, nx);
	float *gdw = dev_from(g, dw, nw), *gdb = dev_from(g, db, (size_t)cout);
	double *by = lp ? conv_bounds_y(cpu, prec, &d, x, wt, b) : NULL;
	double *by0 = lp ? conv_bounds_y(cpu, prec, &d, x, wt, NULL) : NULL;
	double *bdx = lp ? conv_bounds_dx(cpu, prec, &d, dyv, wt) : NULL;
	double *bdw = lp ? conv_bounds_dw(cpu, prec, &d, dyv, x, wt, NULL) : NULL, *bdw_acc = NULL;
	char what[160];
	snprintf(what, sizeof(what), "conv %s n%d c%d %dx%d -> %d k%d s%d p%d up%d groups %d", cfg, n, cin, h, w, cout, k, s,
	         p, up, groups);
	char sub[200];

	NN_OK(cpu->ops->conv2d_forward(cpu, y, x, wt, b, &d));
	NN_OK(g->ops->conv2d_forward(g, gy, gx, gw, gb, &d));
	snprintf(sub, sizeof(sub), "%s: y", what);
	CHECK(conv_close(sub, g, gy, y, ny, by));
	/* without bias */
	NN_OK(cpu->ops->conv2d_forward(cpu, y, x, wt, NULL, &d));
	NN_OK(g->ops->conv2d_forward(g, gy, gx, gw, NULL, &d));
	snprintf(sub, sizeof(sub), "%s: y (no bias)", what);
	CHECK(conv_close(sub, g, gy, y, ny, by0));
	for (int acc = 0; acc < 2; acc++) {
		if (lp && acc) {
			/* dw += dw(this): the previous result's own difference adds up */
			double *b1 = conv_bounds_dw(cpu, prec, &d, dyv, x, wt, dw);
			for (size_t i = 0; i < nw; i++)
				b1[i] += bdw[i];
			bdw_acc = b1;
		}
		NN_OK(cpu->ops->conv2d_backward(cpu, dx, dw, db, dyv, x, wt, &d, acc));
		NN_OK(g->ops->conv2d_backward(g, gdx, gdw, gdb, gdy, gx, gw, &d, acc));
		snprintf(sub, sizeof(sub), "%s: dx (acc %d)", what, acc);
		CHECK(conv_close(sub, g, gdx, dx, nx, bdx));
		snprintf(sub, sizeof(sub), "%s: dw (acc %d)", what, acc);
		CHECK(conv_close(sub, g, gdw, dw, nw, acc ? bdw_acc : bdw));
		snprintf(sub, sizeof(sub), "%s: db (acc %d)", what, acc);
		CHECK(dev_close(sub, g, gdb, db, (size_t)cout, TOL_FP32));
	}
	/* each output alone (the transposed conv uses dx only, x NULL) */
	memset(dx, 0, nx * 4);
	NN_OK(cpu->ops->conv2d_backward(cpu, dx, NULL, NULL, dyv, NULL, wt, &d, 0));
	NN_OK(g->ops->conv2d_backward(g, gdx, NULL, NULL, gdy, NULL, gw, &d, 0));
	snprintf(sub, sizeof(sub), "%s: dx alone", what);
	CHECK(conv_close(sub, g, gdx, dx, nx, bdx));
	NN_OK(cpu->ops->conv2d_backward(cpu, NULL, dw, NULL, dyv, x, wt, &d, 0));
	NN_OK(g->ops->conv2d_backward(g, NULL, gdw, NULL, gdy, gx, gw, &d, 0));
	snprintf(sub, sizeof(sub), "%s: dw alone", what);
	CHECK(conv_close(sub, g, gdw, dw, nw, bdw));

	float *gp[] = { gx, gw, gb, gdy, gy, gdx, gdw, gdb };
	for (size_t i = 0; i < sizeof(gp) / sizeof(gp[0]); i++)
		g->ops->free(g, gp[i]);
	float *hp[] = { x, wt, b, dyv, y, dx, dw, db };
	for (size_t i = 0; i < sizeof(hp) / sizeof(hp[0]); i++)
		free(hp[i]);
	double *bp[] = { by, by0, bdx, bdw, bdw_acc };
	for (size_t i = 0; i < sizeof(bp) / sizeof(bp[0]); i++)
		free(bp[i]);
}

/* test_cuda_ops's convolutions, in one configuration (cfg names it). */
static inline void conv_cases(gf_backend *cpu, gf_backend *g, gf_precision prec, const char *cfg)
{
	conv_case(cpu, g, prec, cfg, 3, 5, 9, 7, 6, 3, 1, 1, 1, 1);     /* 3x3 same */
	conv_case(cpu, g, prec, cfg, 3, 5, 9, 8, 6, 3, 2, 1, 1, 1);     /* D's stride-2 blocks */
	conv_case(cpu, g, prec, cfg, 2, 4, 8, 8, 5, 4, 2, 1, 1, 1);     /* 4x4 stride 2 (DCGAN's originals) */
	conv_case(cpu, g, prec, cfg, 2, 6, 5, 5, 3, 1, 1, 0, 1, 1);     /* 1x1 */
	conv_case(cpu, g, prec, cfg, 3, 8, 8, 8, 1, 3, 1, 1, 1, 1);     /* one output channel (G's last) */
	conv_case(cpu, g, prec, cfg, 2, 1, 10, 9, 4, 5, 1, 2, 1, 1);    /* one input channel, 5x5 */
	conv_case(cpu, g, prec, cfg, 2, 3, 7, 6, 4, 3, 1, 0, 1, 1);     /* valid */
	conv_case(cpu, g, prec, cfg, 3, 6, 5, 4, 7, 3, 1, 1, 2, 1);     /* fused upsample x2 */
	conv_case(cpu, g, prec, cfg, 2, 16, 8, 8, 16, 3, 1, 1, 2, 1);   /* fused, channels already aligned */
	conv_case(cpu, g, prec, cfg, 3, 12, 7, 7, 12, 3, 1, 1, 1, 4);   /* grouped 3x3 (R3GAN's blocks) */
	conv_case(cpu, g, prec, cfg, 2, 32, 8, 8, 32, 3, 1, 1, 1, 2);   /* grouped, 16 channels a group */
	conv_case(cpu, g, prec, cfg, 2, 6, 9, 8, 12, 3, 2, 1, 1, 3);    /* grouped, stride 2 */
	conv_case(cpu, g, prec, cfg, 3, 6, 6, 6, 6, 3, 1, 1, 1, 6);     /* depthwise */
	conv_case(cpu, g, prec, cfg, 3, 8, 4, 4, 8, 4, 1, 0, 1, 8);     /* depthwise 4x4 -> 1x1 (R3GAN's D basis) */
}

#endif
