/* Orthogonal regularisation of BigGAN (Brock et al. 2019, section 3.1):
 * R(W) = beta * ||W W^T (.) (1 - I)||_F^2 over every parameter W of two or
 * more dimensions, viewed as a (rows = shape[0], cols = rest) matrix, so
 * that the filters (rows) of a layer are pushed towards orthogonality
 * without constraining their norms. See gf_net_ortho_grad in <ganflow/nn.h>.
 *
 * The gradient added is the one BigGAN-PyTorch's training code adds,
 * 2 beta (W W^T (.) (1 - I)) W (half the derivative of R as written in
 * the paper), so that a beta taken from its configurations (1e-4) means
 * the same here.
 *
 * Two ways to the same matrix, picked by shape so the cost stays
 * 4 rows cols min(rows, cols) FLOPs:
 *  - rows <= cols: M = W W^T (rows x rows), its diagonal zeroed, dW += 2 beta M W;
 *  - rows > cols (a linear layer from a small z chunk to a wide 4x4 map):
 *    W W^T W = W (W^T W) with a cols x cols Gram matrix, and the diagonal
 *    term diag(||w_i||^2) W taken back block by block of cols rows
 *    (each block's own Gram matrix supplies its squared norms).
 * Only gemm, fill and copy2d are used, so every backend has it.
 */
#include <stdio.h>
#include <string.h>

#include <ganflow/err.h>
#include <ganflow/nn.h>

#include "net_internal.h"

/* 1 when the layer part of a view name ("blocks.3" of "blocks.3.weight")
 * is listed in skip (comma separated layer names, may be NULL). */
static int skipped(const char *view, const char *skip)
{
	const char *dot = strrchr(view, '.');
	size_t len = dot ? (size_t)(dot - view) : strlen(view);
	while (skip && *skip) {
		const char *end = strchr(skip, ',');
		size_t n = end ? (size_t)(end - skip) : strlen(skip);
		if (n == len && !strncmp(skip, view, n))
			return 1;
		skip = end ? end + 1 : NULL;
	}
	return 0;
}

/* Workspace in floats for one (r, c) matrix. */
static size_t ws_need(size_t r, size_t c)
{
	if (r <= c)
		return r * r + r;               /* M, a row of zeros */
	return c * c + 2 * c * c + c;       /* Gram, block Gram, block diagonal, its diagonal */
}

static int one(gf_backend *be, float *g, const float *w, int r, int c, float beta, float *ws)
{
	const gf_backend_ops *o = be->ops;
	int rc;
	float a = 2.0f * beta;
	if (r <= c) {
		float *m = ws, *zero = ws + (size_t)r * r;
		if ((rc = o->gemm(be, 0, 1, r, r, c, 1.0f, w, c, w, c, 0.0f, m, r)) ||
		    (rc = o->fill(be, zero, (size_t)r, 0.0f)) ||
		    (rc = o->copy2d(be, m, (size_t)r + 1, zero, 1, (size_t)r, 1, 0)))
			return rc;
		return o->gemm(be, 0, 0, r, c, r, a, m, r, w, c, 1.0f, g, c);
	}
	float *gram = ws, *bg = ws + (size_t)c * c, *diag = bg + (size_t)c * c, *d = diag + (size_t)c * c;
	if ((rc = o->gemm(be, 1, 0, c, c, r, 1.0f, w, c, w, c, 0.0f, gram, c)) ||
	    (rc = o->gemm(be, 0, 0, r, c, c, a, w, c, gram, c, 1.0f, g, c)))
		return rc;
	for (int i0 = 0; i0 < r; i0 += c) {
		int b = r - i0 < c ? r - i0 : c;
		const float *wb = w + (size_t)i0 * c;
		if ((rc = o->gemm(be, 0, 1, b, b, c, 1.0f, wb, c, wb, c, 0.0f, bg, b)) ||
		    (rc = o->copy2d(be, d, 1, bg, (size_t)b + 1, (size_t)b, 1, 0)) ||
		    (rc = o->fill(be, diag, (size_t)b * b, 0.0f)) ||
		    (rc = o->copy2d(be, diag, (size_t)b + 1, d, 1, (size_t)b, 1, 0)) ||
		    (rc = o->gemm(be, 0, 0, b, c, b, -a, diag, b, wb, c, 1.0f, g + (size_t)i0 * c, c)))
			return rc;
	}
	return 0;
}

int gf_net_ortho_grad(gf_net *net, float beta, const char *skip)
{
	if (beta == 0.0f)
		return 0;
	gf_backend *be = net->k.be;
	size_t nv, np;
	const gf_view *v = gf_net_views(net, GF_PARAMS, &nv);
	float *p = gf_net_block(net, GF_PARAMS, &np);
	float *g = gf_net_block(net, GF_GRADS, &np);
	size_t need = 0;
	for (size_t i = 0; i < nv; i++) {
		if (v[i].ndim < 2 || skipped(v[i].name, skip))
			continue;
		size_t r = (size_t)v[i].shape[0], c = v[i].numel / r, n = ws_need(r, c);
		if (n > need)
			need = n;
	}
	if (!need)
		return 0;
	/* kept with the network: the first call allocates, later ones (a
	 * captured step's replays among them) reuse the same buffer */
	if (need > net->ortho_n) {
		float *ws;
		int rc = be->ops->alloc(be, (void **)&ws, need * sizeof(float));
		if (rc)
			return gf_seterr(rc, "orthogonal regularisation: no memory for %zu floats of workspace", need);
		if (net->ortho_ws)
			be->ops->free(be, net->ortho_ws);
		net->ortho_ws = ws;
		net->ortho_n = need;
	}
	float *ws = net->ortho_ws;
	int rc = 0;
	for (size_t i = 0; i < nv && !rc; i++) {
		if (v[i].ndim < 2 || skipped(v[i].name, skip))
			continue;
		int r = (int)v[i].shape[0], c = (int)(v[i].numel / (size_t)r);
		gf_net_count(net, 4.0 * r * c * (r < c ? r : c));
		if ((rc = one(be, g + v[i].offset, p + v[i].offset, r, c, beta, ws))) {
			char why[256];
			snprintf(why, sizeof(why), "%s", gf_errmsg());
			gf_seterr(rc, "orthogonal regularisation of %s: %s", v[i].name, why);
		}
	}
	return rc;
}
