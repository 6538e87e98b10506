/* Strided batched GEMM on the CPU (<ganflow/backend.h> gemm_batched): the
 * per-sample products of self-attention and its 1x1 convolutions. The
 * CUDA version is core/nn/cuda/gemm_batched_cuda.c.
 *
 * OpenBLAS runs single-threaded (backend_cpu.c) and the team hands out
 * whole products: batch items, each cut into column blocks only when the
 * batch is too short to keep every thread busy. Every element of every C_b
 * comes from one SGEMM call over the whole K.
 *
 * Summing over the batch (stride_c = 0, a weight gradient) splits C
 * instead, by column (or row) blocks: each part runs the batch in order,
 * C = alpha P_0 + beta C, then C = alpha P_b + C, so each element is summed
 * in batch order by one thread whatever the thread count. */
#include <ganflow/err.h>

#include <cblas.h>

#include "cpu.h"

#define BLK 32   /* columns (or rows) per block of C */

struct bg_args {
	int ta, tb, m, n, k, lda, ldb, ldc;
	int64_t sa, sb, sc;
	float alpha, beta;
	const float *a, *b;
	float *c;
	int batch;
	int nblk;      /* column blocks per batch item (not summing) */
	int split_n;   /* summing: split C by columns (1) or rows (0) */
};

/* Rows [r0, r1) and columns [c0, c1) of C_item = alpha op(A_item) op(B_item) + beta C_item. */
static void product(const struct bg_args *g, int item, int r0, int r1, int c0, int c1, float beta, float *c)
{
	const float *a = g->a + (int64_t)item * g->sa, *b = g->b + (int64_t)item * g->sb;
	a += g->ta ? (size_t)r0 : (size_t)r0 * g->lda;
	b += g->tb ? (size_t)c0 * g->ldb : (size_t)c0;
	cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans, g->tb ? CblasTrans : CblasNoTrans, r1 - r0,
	            c1 - c0, g->k, g->alpha, a, g->lda, b, g->ldb, beta, c + (size_t)r0 * g->ldc + c0, g->ldc);
}

static void batch_part(void *p, size_t begin, size_t end)
{
	const struct bg_args *g = p;
	int w = (g->n + g->nblk - 1) / g->nblk;
	for (size_t i = begin; i < end; i++) {
		int item = (int)(i / (size_t)g->nblk), j = (int)(i % (size_t)g->nblk);
		int c0 = j * w, c1 = c0 + w < g->n ? c0 + w : g->n;
		if (c1 > c0)
			product(g, item, 0, g->m, c0, c1, g->beta, g->c + (int64_t)item * g->sc);
	}
}

static void sum_part(void *p, size_t begin, size_t end)
{
	const struct bg_args *g = p;
	int lim = g->split_n ? g->n : g->m;
	int lo = (int)begin * BLK, hi = (int)end * BLK < lim ? (int)end * BLK : lim;
	if (hi <= lo)
		return;
	for (int item = 0; item < g->batch; item++) {
		float beta = item ? 1.0f : g->beta;
		if (g->split_n)
			product(g, item, 0, g->m, lo, hi, beta, g->c);
		else
			product(g, item, lo, hi, 0, g->n, beta, g->c);
	}
}

int gf_cpu_gemm_batched(gf_backend *be, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                        int64_t stride_a, const float *b, int ldb, int64_t stride_b, float beta, float *c, int ldc,
                        int64_t stride_c, int batch)
{
	if (m < 0 || n < 0 || k < 0 || batch < 0)
		return gf_seterr(GF_EPARAM, "gemm_batched: negative size (m %d, n %d, k %d, batch %d)", m, n, k, batch);
	if (m == 0 || n == 0 || batch == 0)
		return 0;
	gf_cpu *cp = gf_cpu_of(be);
	if (k == 0) {
		/* C = beta C (once when summing): the plain GEMM says it plainly */
		int items = stride_c ? batch : 1;
		for (int i = 0; i < items; i++)
			gf_cpu_gemm(be, ta, tb, m, n, 0, alpha, a, lda, b, ldb, beta, c + (int64_t)i * stride_c, ldc);
		return 0;
	}
	struct bg_args g = { ta, tb, m, n, k, lda, ldb, ldc, stride_a, stride_b, stride_c, alpha, beta,
	                     a,  b,  c, batch, 1, n >= m };
	double flops = 2.0 * m * n * k;
	if (stride_c == 0) {
		int dim = g.split_n ? n : m;
		size_t blocks = ((size_t)dim + BLK - 1) / BLK;
		/* parts of at least ~4 MFLOP over the whole batch */
		size_t per_block = (size_t)(flops * batch / (double)blocks) + 1;
		gf_team_for(cp->team, blocks, (size_t)(4e6 / (double)per_block) + 1, sum_part, &g);
		return 0;
	}
	/* a short batch of large products: cut each into column blocks so that
	 * every thread gets work (at least BLK columns a block) */
	int threads = gf_team_threads(cp->team);
	if (batch < 2 * threads && flops >= 4e6) {
		int want = (2 * threads + batch - 1) / batch, most = (n + BLK - 1) / BLK;
		g.nblk = want < most ? want : most;
	}
	size_t items = (size_t)batch * (size_t)g.nblk;
	double per_item = flops / g.nblk;
	gf_team_for(cp->team, items, (size_t)(1e6 / per_item) + 1, batch_part, &g);
	return 0;
}
