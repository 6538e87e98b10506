/* CUDA convolutions (the vtable side; kernels in conv.cu): cuDNN 9 for
 * forward, backward-data and backward-filter, with the algorithm chosen
 * once per shape and cached with its descriptors. The CPU version is
 * core/nn/cpu/conv_cpu.c.
 *
 * Formats. The engine hands f32 NCHW tensors. In fp32 with the NCHW
 * layout (the default for fp32) cuDNN runs on them in place. Otherwise the
 * operands are moved into scratch in the instance's format first: bf16 or
 * f16 (precision), NHWC with channels padded to a multiple of 8 (4 for
 * f32) so cuDNN can run its tensor-core kernels (layout), in one pass that
 * casts and transposes (conv.cu); the result comes back the same way with
 * the bias added. cuDNN accumulates in f32 in every case; the parameters
 * and gradients the engine sees stay f32 (master weights).
 *
 * Fused "nearest upsample x2 + 3x3/1/1 conv" (GF_CAP_CONV_UP2), two ways:
 *  - "subpixel" (default): the four 2x2 phase kernels of the sub-pixel
 *    form (docs/nn.md) stacked into ONE cuDNN conv, 2x2, padding 1, with
 *    4k output channels over the low-resolution input; its (h+1, w+1)
 *    output holds phase (a, b) in the window starting at (a, b), which a
 *    gather kernel interleaves into y (adding the bias). Per output pixel
 *    4 taps instead of 9 over an input 4x smaller: about half the FLOPs of
 *    the plain form (16 (h+1)(w+1) vs 36 hw taps per channel pair: 0.50x
 *    at 16x16, 0.56x at 8x8), no upsampled tensor written or read, and a
 *    GEMM N dimension of 4k (512 for the DC-GAN's 128 channels) that fills
 *    tensor-core tiles well. Backward: dy scattered into the phase windows
 *    (zero elsewhere) gives dx through cuDNN's backward-data of the same
 *    conv, and the phase filter gradients (backward-filter) fold back onto
 *    the 3x3 kernel.
 *  - "upsample": an explicit nearest upsample into scratch and the plain
 *    3x3 conv (backward: the conv's dx at full size, then the upsample's
 *    backward). Kept selectable (option up2) so the choice can be measured
 *    on the target GPU; see docs/cuda.md.
 *
 * Grouped convolutions (groups = g, GF_CAP_CONV_GROUPS): cuDNN's group
 * count on the convolution descriptor and a filter of cin/g channels, in
 * every precision and layout as the dense ones; their channels are never
 * padded in NHWC (a padded channel would land in the wrong group), so
 * cuDNN picks among its kernels for the group's own width.
 *
 * Algorithms: with option benchmark = 1 (default) cuDNN times its
 * algorithms once per shape (cudnnFind*); with 0 its heuristics choose,
 * which is reproducible across runs. deterministic = 1 (default) keeps
 * only algorithms cuDNN marks deterministic. Inside a graph capture no
 * timing can run: a shape first seen there takes the heuristic choice,
 * cached like any other. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>

#include "cuda.h"

#define WS_CAP ((size_t)1 << 30)   /* largest cuDNN workspace an algorithm may ask for */

/* ---- the algorithm cache ---- */

enum { FWD = 0, BWD_DATA, BWD_FILTER };

struct conv_key {
	int dir;
	int n, c, h, w;          /* input; c padded */
	int k, kh, kw;           /* output channels (padded), kernel */
	int sh, sw, ph, pw;
	int groups;
	int dt, nhwc, tf32, det, bench;
};

#define MAX_CAND 8

struct gf_cu_conv_entry {
	struct conv_key key;
	int ho, wo;
	cudnnTensorDescriptor_t xd, yd;
	cudnnFilterDescriptor_t wd;
	cudnnConvolutionDescriptor_t cd;
	cudnnMathType_t base_math;
	/* the acceptable algorithms, best first; cur is in use (a later one is
	 * tried when cuDNN refuses to run it) */
	int cand[MAX_CAND];
	cudnnMathType_t cand_math[MAX_CAND];
	int ncand, cur;
	int algo;
	size_t ws;
};

static void entry_free(struct gf_cu_conv_entry *e)
{
	if (e->xd)
		cudnnDestroyTensorDescriptor(e->xd);
	if (e->yd)
		cudnnDestroyTensorDescriptor(e->yd);
	if (e->wd)
		cudnnDestroyFilterDescriptor(e->wd);
	if (e->cd)
		cudnnDestroyConvolutionDescriptor(e->cd);
}

void gf_cu_conv_cache_destroy(gf_cuda *c)
{
	for (size_t i = 0; i < c->nconv; i++)
		entry_free(&c->conv[i]);
	free(c->conv);
	c->conv = NULL;
	c->nconv = c->cap_conv = 0;
}

static cudnnDataType_t dnn_type(gf_cu_dtype dt)
{
	return dt == GF_CU_BF16 ? CUDNN_DATA_BFLOAT16 : dt == GF_CU_F16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
}

static int pick_ok(gf_cuda *c, cudnnStatus_t st, cudnnDeterminism_t det, size_t mem)
{
	return st == CUDNN_STATUS_SUCCESS && (!c->deterministic || det == CUDNN_DETERMINISTIC) && mem <= WS_CAP;
}

/* Makes candidate k of e the algorithm in use: its math type and workspace. */
static int select_algo(gf_cuda *c, struct gf_cu_conv_entry *e, int k)
{
	cudnnHandle_t h = c->cudnn;
	e->cur = k;
	e->algo = e->cand[k];
	/* strict fp32 keeps FMA math whatever the search reported: no TF32 */
	DNN_CHECK(cudnnSetConvolutionMathType(e->cd, e->base_math == CUDNN_FMA_MATH ? CUDNN_FMA_MATH : e->cand_math[k]));
	switch (e->key.dir) {
	case FWD:
		DNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(h, e->xd, e->wd, e->cd, e->yd,
		                                                  (cudnnConvolutionFwdAlgo_t)e->algo, &e->ws));
		break;
	case BWD_DATA:
		DNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(h, e->wd, e->yd, e->cd, e->xd,
		                                                       (cudnnConvolutionBwdDataAlgo_t)e->algo, &e->ws));
		break;
	default:
		DNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(h, e->xd, e->yd, e->cd, e->wd,
		                                                         (cudnnConvolutionBwdFilterAlgo_t)e->algo, &e->ws));
		break;
	}
	return 0;
}

#define ADD_CANDIDATES(perf, n)                                                                         \
	do {                                                                                            \
		for (int i_ = 0; i_ < (n) && e->ncand < MAX_CAND; i_++)                                  \
			if (pick_ok(c, (perf)[i_].status, (perf)[i_].determinism, (perf)[i_].memory)) { \
				e->cand[e->ncand] = (int)(perf)[i_].algo;                               \
				e->cand_math[e->ncand++] = (perf)[i_].mathType;                         \
			}                                                                               \
	} while (0)

/* Ranks the algorithms of e (timed or heuristic) and selects the best. */
static int choose(gf_cuda *c, struct gf_cu_conv_entry *e)
{
	int timed = e->key.bench && c->gmode != GF_CU_CAPTURE;
	int n = 0;
	cudnnHandle_t h = c->cudnn;
	e->ncand = 0;
	switch (e->key.dir) {
	case FWD: {
		cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
		if (timed)
			DNN_CHECK(cudnnFindConvolutionForwardAlgorithm(h, e->xd, e->wd, e->cd, e->yd,
			                                               CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf));
		else
			DNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, e->xd, e->wd, e->cd, e->yd,
			                                                 CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf));
		ADD_CANDIDATES(perf, n);
		break;
	}
	case BWD_DATA: {
		cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
		if (timed)
			DNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithm(h, e->wd, e->yd, e->cd, e->xd,
			                                                    CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, perf));
		else
			DNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, e->wd, e->yd, e->cd, e->xd,
			                                                      CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, perf));
		ADD_CANDIDATES(perf, n);
		break;
	}
	default: {
		cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
		if (timed)
			DNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithm(h, e->xd, e->yd, e->cd, e->wd,
			                                                      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, perf));
		else
			DNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, e->xd, e->yd, e->cd, e->wd,
			                                                        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n,
			                                                        perf));
		ADD_CANDIDATES(perf, n);
		break;
	}
	}
	if (!e->ncand)
		return gf_seterr(GF_EUNSUPPORTED, "cuda conv: cuDNN has no %salgorithm for %s of (%d, %d, %d, %d) * "
		                 "(%d, %d, %d, %d) stride %d pad %d in %s %s",
		                 c->deterministic ? "deterministic " : "",
		                 e->key.dir == FWD ? "the forward" : e->key.dir == BWD_DATA ? "backward-data" : "backward-filter",
		                 e->key.n, e->key.c, e->key.h, e->key.w, e->key.k, e->key.c, e->key.kh, e->key.kw, e->key.sh,
		                 e->key.ph, e->key.dt == GF_CU_BF16 ? "bf16" : e->key.dt == GF_CU_F16 ? "fp16" : "fp32",
		                 e->key.nhwc ? "NHWC" : "NCHW");
	return select_algo(c, e, 0);
}

/* cuDNN refused to run the algorithm in use (st): move to the next
 * candidate outside captures (1: retry), or report. */
static int next_algo(gf_cuda *c, struct gf_cu_conv_entry *e, cudnnStatus_t st, const char *what)
{
	if (c->gmode == GF_CU_EAGER && e->cur + 1 < e->ncand &&
	    (st == CUDNN_STATUS_NOT_SUPPORTED || st == CUDNN_STATUS_BAD_PARAM || st == CUDNN_STATUS_EXECUTION_FAILED)) {
		cudaGetLastError();
		TRY(select_algo(c, e, e->cur + 1));
		return 1;
	}
	return gf_cu_fail_dnn(st, what, __FILE__, __LINE__);
}

static int get_entry(gf_cuda *c, const struct conv_key *key, struct gf_cu_conv_entry **out)
{
	for (size_t i = 0; i < c->nconv; i++) {
		if (!memcmp(&c->conv[i].key, key, sizeof(*key))) {
			*out = &c->conv[i];
			return 0;
		}
	}
	if (c->nconv == c->cap_conv) {
		size_t cap = c->cap_conv ? 2 * c->cap_conv : 16;
		struct gf_cu_conv_entry *a = realloc(c->conv, cap * sizeof(*a));
		if (!a)
			return gf_seterr(-ENOMEM, "cuda conv: out of memory");
		c->conv = a;
		c->cap_conv = cap;
	}
	struct gf_cu_conv_entry e;
	memset(&e, 0, sizeof(e));
	e.key = *key;
	cudnnTensorFormat_t fmt = key->nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
	cudnnDataType_t dt = dnn_type((gf_cu_dtype)key->dt);
	cudnnMathType_t math = key->dt != GF_CU_F32 ? CUDNN_TENSOR_OP_MATH : key->tf32 ? CUDNN_DEFAULT_MATH
	                                                                               : CUDNN_FMA_MATH;
	int n, k, ho, wo, rc;
	cudnnStatus_t s;
#define E_CHECK(call)                                                              \
	do {                                                                       \
		if ((s = (call)) != CUDNN_STATUS_SUCCESS) {                        \
			rc = gf_cu_fail_dnn(s, #call, __FILE__, __LINE__);         \
			goto fail;                                                 \
		}                                                                  \
	} while (0)
	E_CHECK(cudnnCreateTensorDescriptor(&e.xd));
	E_CHECK(cudnnCreateTensorDescriptor(&e.yd));
	E_CHECK(cudnnCreateFilterDescriptor(&e.wd));
	E_CHECK(cudnnCreateConvolutionDescriptor(&e.cd));
	E_CHECK(cudnnSetTensor4dDescriptor(e.xd, fmt, dt, key->n, key->c, key->h, key->w));
	E_CHECK(cudnnSetFilter4dDescriptor(e.wd, dt, fmt, key->k, key->c / key->groups, key->kh, key->kw));
	E_CHECK(cudnnSetConvolution2dDescriptor(e.cd, key->ph, key->pw, key->sh, key->sw, 1, 1, CUDNN_CROSS_CORRELATION,
	                                        CUDNN_DATA_FLOAT));
	E_CHECK(cudnnSetConvolutionGroupCount(e.cd, key->groups));
	E_CHECK(cudnnSetConvolutionMathType(e.cd, math));
	E_CHECK(cudnnGetConvolution2dForwardOutputDim(e.cd, e.xd, e.wd, &n, &k, &ho, &wo));
	E_CHECK(cudnnSetTensor4dDescriptor(e.yd, fmt, dt, n, k, ho, wo));
#undef E_CHECK
	e.ho = ho;
	e.wo = wo;
	e.base_math = math;
	if ((rc = choose(c, &e)))
		goto fail;
	c->conv[c->nconv] = e;
	*out = &c->conv[c->nconv++];
	return 0;
fail:
	entry_free(&e);
	return rc;
}

/* ---- problems ---- */

/* One cuDNN convolution as this backend runs it. */
struct prob {
	gf_cu_fmt f;
	int direct;               /* f32 NCHW: the engine's tensors are used in place */
	int n, c, cp, h, w;       /* input: channels and padded channels */
	int k, kp, ho, wo;        /* output */
	int kh, kw, sh, sw, ph, pw;
	int g;                    /* groups: the filter has c / g (cp / g) channels */
};

static int pad_to(int c, int a)
{
	return (c + a - 1) / a * a;
}

static size_t esize(const struct prob *p)
{
	return p->f.dt == GF_CU_F32 ? 4 : 2;
}

static struct prob make_prob(const gf_cuda *c, int n, int cin, int h, int w, int cout, int ho, int wo, int kh, int kw,
                             int sh, int sw, int ph, int pw, int g)
{
	struct prob p;
	memset(&p, 0, sizeof(p));
	p.f.dt = c->prec == GF_PREC_BF16 ? GF_CU_BF16 : c->prec == GF_PREC_FP16 ? GF_CU_F16 : GF_CU_F32;
	p.f.nhwc = c->nhwc;
	p.direct = p.f.dt == GF_CU_F32 && !p.f.nhwc;
	int align = p.f.dt == GF_CU_F32 ? 4 : 8;
	p.n = n;
	p.c = cin;
	p.g = g;
	p.cp = p.f.nhwc && g == 1 ? pad_to(cin, align) : cin;
	p.h = h;
	p.w = w;
	p.k = cout;
	p.kp = p.f.nhwc && g == 1 ? pad_to(cout, align) : cout;
	p.ho = ho;
	p.wo = wo;
	p.kh = kh;
	p.kw = kw;
	p.sh = sh;
	p.sw = sw;
	p.ph = ph;
	p.pw = pw;
	return p;
}

static int entry_for(gf_cuda *c, const struct prob *p, int dir, struct gf_cu_conv_entry **e)
{
	struct conv_key key;
	memset(&key, 0, sizeof(key));
	key.dir = dir;
	key.n = p->n;
	key.c = p->cp;
	key.h = p->h;
	key.w = p->w;
	key.k = p->kp;
	key.kh = p->kh;
	key.kw = p->kw;
	key.sh = p->sh;
	key.sw = p->sw;
	key.ph = p->ph;
	key.pw = p->pw;
	key.groups = p->g;
	key.dt = p->f.dt;
	key.nhwc = p->f.nhwc;
	key.tf32 = p->f.dt == GF_CU_F32 && c->tf32;
	key.det = c->deterministic;
	key.bench = c->benchmark;
	TRY(get_entry(c, &key, e));
	if ((*e)->ho != p->ho || (*e)->wo != p->wo)
		return gf_seterr(GF_ESHAPE, "cuda conv: cuDNN computes a %dx%d output, the layer expects %dx%d", (*e)->ho,
		                 (*e)->wo, p->ho, p->wo);
	return 0;
}

/* ---- the three cuDNN calls ---- */

static const float one = 1.0f, zero = 0.0f;

static int run_fwd(gf_cuda *c, const struct prob *p, void *y, const void *x, const void *w)
{
	struct gf_cu_conv_entry *e;
	TRY(entry_for(c, p, FWD, &e));
	for (;;) {
		void *ws = gf_cu_workspace(c, e->ws);
		if (!ws)
			return -ENOMEM;
		cudnnStatus_t st = cudnnConvolutionForward(c->cudnn, &one, e->xd, x, e->wd, w, e->cd,
		                                           (cudnnConvolutionFwdAlgo_t)e->algo, ws, e->ws, &zero, e->yd, y);
		if (st == CUDNN_STATUS_SUCCESS)
			return 0;
		int rc = next_algo(c, e, st, "cudnnConvolutionForward");
		if (rc != 1)
			return rc;
	}
}

static int run_bwd_data(gf_cuda *c, const struct prob *p, void *dx, const void *w, const void *dy)
{
	struct gf_cu_conv_entry *e;
	TRY(entry_for(c, p, BWD_DATA, &e));
	for (;;) {
		void *ws = gf_cu_workspace(c, e->ws);
		if (!ws)
			return -ENOMEM;
		cudnnStatus_t st = cudnnConvolutionBackwardData(c->cudnn, &one, e->wd, w, e->yd, dy, e->cd,
		                                                (cudnnConvolutionBwdDataAlgo_t)e->algo, ws, e->ws, &zero,
		                                                e->xd, dx);
		if (st == CUDNN_STATUS_SUCCESS)
			return 0;
		int rc = next_algo(c, e, st, "cudnnConvolutionBackwardData");
		if (rc != 1)
			return rc;
	}
}

static int run_bwd_filter(gf_cuda *c, const struct prob *p, void *dw, const void *x, const void *dy, int acc)
{
	struct gf_cu_conv_entry *e;
	TRY(entry_for(c, p, BWD_FILTER, &e));
	for (;;) {
		void *ws = gf_cu_workspace(c, e->ws);
		if (!ws)
			return -ENOMEM;
		cudnnStatus_t st = cudnnConvolutionBackwardFilter(c->cudnn, &one, e->xd, x, e->yd, dy, e->cd,
		                                                  (cudnnConvolutionBwdFilterAlgo_t)e->algo, ws, e->ws,
		                                                  acc ? &one : &zero, e->wd, dw);
		if (st == CUDNN_STATUS_SUCCESS)
			return 0;
		int rc = next_algo(c, e, st, "cudnnConvolutionBackwardFilter");
		if (rc != 1)
			return rc;
	}
}

/* Looks the entries up before any scratch is taken (a timed search may
 * allocate), so that one scratch acquisition serves the whole op. */
static int warm(gf_cuda *c, const struct prob *p, int fwd, int bdata, int bfilter)
{
	struct gf_cu_conv_entry *e;
	if (fwd)
		TRY(entry_for(c, p, FWD, &e));
	if (bdata)
		TRY(entry_for(c, p, BWD_DATA, &e));
	if (bfilter)
		TRY(entry_for(c, p, BWD_FILTER, &e));
	return 0;
}

/* ---- plain convolutions ---- */

static size_t plain_need(const struct prob *p, int fwd, int dx, int dw)
{
	if (p->direct)
		return 0;
	size_t e = esize(p), x = gf_cu_round((size_t)p->n * p->cp * p->h * p->w * e);
	size_t y = gf_cu_round((size_t)p->n * p->kp * p->ho * p->wo * e);
	size_t w = gf_cu_round((size_t)p->kp * (p->cp / p->g) * p->kh * p->kw * e);
	if (fwd)
		return x + w + y;
	return y + (dx ? w + x : 0) + (dw ? x + w : 0);
}

static int plain_fwd(gf_cuda *c, const struct prob *p, char *scr, float *y, const float *x, const float *w,
                     const float *b)
{
	if (p->direct) {
		TRY(run_fwd(c, p, y, x, w));
		if (b)
			CU_LAUNCH(gf_cu_bias_add_launch(c->stream, y, b, p->n, p->k, p->ho * p->wo));
		return 0;
	}
	size_t e = esize(p);
	void *xs = gf_cu_carve(&scr, (size_t)p->n * p->cp * p->h * p->w * e);
	void *ws = gf_cu_carve(&scr, (size_t)p->kp * (p->cp / p->g) * p->kh * p->kw * e);
	void *ys = gf_cu_carve(&scr, (size_t)p->n * p->kp * p->ho * p->wo * e);
	CU_LAUNCH(gf_cu_pack_launch(c->stream, xs, p->f, x, p->n, p->c, p->cp, p->h * p->w));
	CU_LAUNCH(gf_cu_pack_filter_launch(c->stream, ws, p->f, w, p->k, p->c / p->g, p->kp, p->cp / p->g, p->kh, p->kw));
	TRY(run_fwd(c, p, ys, xs, ws));
	CU_LAUNCH(gf_cu_unpack_launch(c->stream, y, ys, p->f, p->n, p->k, p->kp, p->ho * p->wo, b, 0));
	return 0;
}

static int plain_bwd(gf_cuda *c, const struct prob *p, char *scr, float *dx, float *dw, const float *dy,
                     const float *x, const float *w, int acc)
{
	if (p->direct) {
		if (dx)
			TRY(run_bwd_data(c, p, dx, w, dy));
		if (dw)
			TRY(run_bwd_filter(c, p, dw, x, dy, acc));
		return 0;
	}
	size_t e = esize(p);
	size_t xb = (size_t)p->n * p->cp * p->h * p->w * e, wb = (size_t)p->kp * (p->cp / p->g) * p->kh * p->kw * e;
	void *dys = gf_cu_carve(&scr, (size_t)p->n * p->kp * p->ho * p->wo * e);
	CU_LAUNCH(gf_cu_pack_launch(c->stream, dys, p->f, dy, p->n, p->k, p->kp, p->ho * p->wo));
	if (dx) {
		void *ws = gf_cu_carve(&scr, wb), *dxs = gf_cu_carve(&scr, xb);
		CU_LAUNCH(gf_cu_pack_filter_launch(c->stream, ws, p->f, w, p->k, p->c / p->g, p->kp, p->cp / p->g, p->kh,
		                                   p->kw));
		TRY(run_bwd_data(c, p, dxs, ws, dys));
		CU_LAUNCH(gf_cu_unpack_launch(c->stream, dx, dxs, p->f, p->n, p->c, p->cp, p->h * p->w, NULL, 0));
	}
	if (dw) {
		void *xs = gf_cu_carve(&scr, xb), *dws = gf_cu_carve(&scr, wb);
		CU_LAUNCH(gf_cu_pack_launch(c->stream, xs, p->f, x, p->n, p->c, p->cp, p->h * p->w));
		TRY(run_bwd_filter(c, p, dws, xs, dys, 0));
		CU_LAUNCH(gf_cu_unpack_filter_launch(c->stream, dw, dws, p->f, p->k, p->c / p->g, p->kp, p->cp / p->g, p->kh,
		                                     p->kw, acc));
	}
	return 0;
}

/* ---- the sub-pixel form ---- */

/* The stacked phase conv over the low-resolution input of d. */
static struct prob phase_prob(const gf_cuda *c, const gf_conv_desc *d)
{
	struct prob p = make_prob(c, d->n, d->cin, d->h, d->w, 4 * d->cout, d->h + 1, d->w + 1, 2, 2, 1, 1, 1, 1, 1);
	return p;
}

static size_t phase_need(const struct prob *p, int fwd, int dx, int dw)
{
	size_t e = esize(p);
	size_t x = p->direct ? 0 : gf_cu_round((size_t)p->n * p->cp * p->h * p->w * e);
	size_t y = gf_cu_round((size_t)p->n * p->kp * p->ho * p->wo * e);
	size_t w = gf_cu_round((size_t)p->kp * p->cp * 4 * e);
	if (fwd)
		return x + w + y;
	return y + (dx ? w + x : 0) + (dw ? x + w : 0);
}

static int phase_fwd(gf_cuda *c, const struct prob *p, int k, char *scr, float *y, const float *x, const float *w,
                     const float *b)
{
	size_t e = esize(p);
	const void *xs = x;
	if (!p->direct) {
		void *t = gf_cu_carve(&scr, (size_t)p->n * p->cp * p->h * p->w * e);
		CU_LAUNCH(gf_cu_pack_launch(c->stream, t, p->f, x, p->n, p->c, p->cp, p->h * p->w));
		xs = t;
	}
	void *wp = gf_cu_carve(&scr, (size_t)p->kp * p->cp * 4 * e);
	void *ys = gf_cu_carve(&scr, (size_t)p->n * p->kp * p->ho * p->wo * e);
	CU_LAUNCH(gf_cu_phase_filter_launch(c->stream, wp, p->f, w, k, p->c, p->kp, p->cp));
	TRY(run_fwd(c, p, ys, xs, wp));
	CU_LAUNCH(gf_cu_phase_gather_launch(c->stream, y, ys, p->f, p->n, k, p->kp, p->h, p->w, b));
	return 0;
}

static int phase_bwd(gf_cuda *c, const struct prob *p, int k, char *scr, float *dx, float *dw, const float *dy,
                     const float *x, const float *w, int acc)
{
	size_t e = esize(p);
	size_t xb = (size_t)p->n * p->cp * p->h * p->w * e, wb = (size_t)p->kp * p->cp * 4 * e;
	void *dys = gf_cu_carve(&scr, (size_t)p->n * p->kp * p->ho * p->wo * e);
	CU_LAUNCH(gf_cu_phase_scatter_launch(c->stream, dys, p->f, dy, p->n, k, p->kp, p->h, p->w));
	if (dx) {
		void *wp = gf_cu_carve(&scr, wb);
		CU_LAUNCH(gf_cu_phase_filter_launch(c->stream, wp, p->f, w, k, p->c, p->kp, p->cp));
		if (p->direct) {
			TRY(run_bwd_data(c, p, dx, wp, dys));
		} else {
			void *dxs = gf_cu_carve(&scr, xb);
			TRY(run_bwd_data(c, p, dxs, wp, dys));
			CU_LAUNCH(gf_cu_unpack_launch(c->stream, dx, dxs, p->f, p->n, p->c, p->cp, p->h * p->w, NULL, 0));
		}
	}
	if (dw) {
		const void *xs = x;
		if (!p->direct) {
			void *t = gf_cu_carve(&scr, xb);
			CU_LAUNCH(gf_cu_pack_launch(c->stream, t, p->f, x, p->n, p->c, p->cp, p->h * p->w));
			xs = t;
		}
		void *dws = gf_cu_carve(&scr, wb);
		TRY(run_bwd_filter(c, p, dws, xs, dys, 0));
		CU_LAUNCH(gf_cu_phase_fold_launch(c->stream, dw, dws, p->f, k, p->c, p->kp, p->cp, acc));
	}
	return 0;
}

/* ---- the ops ---- */

static int check_desc(const gf_conv_desc *d)
{
	if (d->dtype != GF_F32 || d->layout != GF_NCHW)
		return gf_seterr(GF_EUNSUPPORTED, "cuda conv: the engine's tensors must be f32 NCHW (precision and layout "
		                 "are backend options)");
	if (d->up != 1 && d->up != 2)
		return gf_seterr(GF_EUNSUPPORTED, "cuda conv: upsample factor %d", d->up);
	if (d->up == 2 && !(d->kh == 3 && d->kw == 3 && d->sh == 1 && d->sw == 1 && d->ph == 1 && d->pw == 1 &&
	                    d->hout == 2 * d->h && d->wout == 2 * d->w))
		return gf_seterr(GF_EUNSUPPORTED, "cuda conv: fused upsample needs a 3x3 stride-1 pad-1 conv");
	if (d->n < 1 || d->cin < 1 || d->cout < 1 || d->h < 1 || d->w < 1 || d->hout < 1 || d->wout < 1)
		return gf_seterr(GF_EPARAM, "cuda conv: empty tensor");
	int g = gf_conv_groups(d);
	if (g > 1 && (d->cin % g || d->cout % g || d->up != 1))
		return gf_seterr(GF_EUNSUPPORTED, "cuda conv: %d groups of %d -> %d channels%s", g, d->cin, d->cout,
		                 d->up != 1 ? " with a fused upsample" : "");
	return 0;
}

static int sig_conv(gf_cuda *c, int op, const void *a, const void *b, const void *x, const void *w, const void *e,
                    const gf_conv_desc *d, int acc)
{
	int rc = GF_CU_SIG(c, op, GF_CU_P(a), GF_CU_P(b), GF_CU_P(x), GF_CU_P(w), GF_CU_P(e), (uint64_t)acc,
	                   (uint64_t)c->prec, (uint64_t)c->nhwc, (uint64_t)c->up2_upsample);
	gf_cu_sig_bytes(c, d, sizeof(*d));
	return rc;
}

int gf_cu_conv2d_forward(gf_backend *be, float *y, const float *x, const float *w, const float *b,
                         const gf_conv_desc *d)
{
	gf_cuda *c = gf_cu(be);
	TRY(check_desc(d));
	TRY(gf_cu_enter(c));
	int rc = sig_conv(c, GF_CU_OP_CONV_FWD, y, x, w, b, NULL, d, 0);
	if (rc)
		return rc == GF_CU_SKIP ? 0 : rc;
	if (d->up == 2 && !c->up2_upsample) {
		struct prob p = phase_prob(c, d);
		TRY(warm(c, &p, 1, 0, 0));
		char *scr = gf_cu_scratch(c, phase_need(&p, 1, 0, 0));
		if (!scr)
			return -ENOMEM;
		return phase_fwd(c, &p, d->cout, scr, y, x, w, b);
	}
	int up = d->up;
	struct prob p = make_prob(c, d->n, d->cin, d->h * up, d->w * up, d->cout, d->hout, d->wout, d->kh, d->kw, d->sh,
	                          d->sw, d->ph, d->pw, gf_conv_groups(d));
	TRY(warm(c, &p, 1, 0, 0));
	size_t xu = up == 2 ? gf_cu_round((size_t)d->n * d->cin * p.h * p.w * sizeof(float)) : 0;
	char *scr = gf_cu_scratch(c, xu + plain_need(&p, 1, 0, 0));
	if (!scr)
		return -ENOMEM;
	const float *xin = x;
	if (up == 2) {
		float *t = gf_cu_carve(&scr, xu);
		CU_LAUNCH(gf_cu_up_fwd_launch(c->stream, t, x, d->n * d->cin, d->h, d->w, 2));
		xin = t;
	}
	return plain_fwd(c, &p, scr, y, xin, w, b);
}

int gf_cu_conv2d_backward(gf_backend *be, float *dx, float *dw, float *db, const float *dy, const float *x,
                          const float *w, const gf_conv_desc *d, int accumulate)
{
	gf_cuda *c = gf_cu(be);
	TRY(check_desc(d));
	TRY(gf_cu_enter(c));
	int rc = sig_conv(c, GF_CU_OP_CONV_BWD, dx, dw, db, dy, x, d, accumulate);
	gf_cu_sig_bytes(c, &w, sizeof(w));
	if (rc)
		return rc == GF_CU_SKIP ? 0 : rc;
	size_t P = (size_t)d->hout * d->wout;
	size_t part = db ? gf_cu_round((size_t)d->cout * gf_cu_chunks((size_t)d->n * P) * sizeof(double)) : 0;
	if (d->up == 2 && !c->up2_upsample) {
		struct prob p = phase_prob(c, d);
		TRY(warm(c, &p, 0, dx != NULL, dw != NULL));
		char *scr = gf_cu_scratch(c, part + phase_need(&p, 0, dx != NULL, dw != NULL));
		if (!scr)
			return -ENOMEM;
		if (db)
			CU_LAUNCH(gf_cu_channel_sum(c->stream, db, (double *)(void *)scr, dy, d->n, d->cout, (int)P, accumulate));
		if (!dx && !dw)
			return 0;
		return phase_bwd(c, &p, d->cout, scr + part, dx, dw, dy, x, w, accumulate);
	}
	int up = d->up;
	struct prob p = make_prob(c, d->n, d->cin, d->h * up, d->w * up, d->cout, d->hout, d->wout, d->kh, d->kw, d->sh,
	                          d->sw, d->ph, d->pw, gf_conv_groups(d));
	TRY(warm(c, &p, 0, dx != NULL, dw != NULL));
	size_t big = up == 2 ? gf_cu_round((size_t)d->n * d->cin * p.h * p.w * sizeof(float)) : 0;
	size_t need = part + (up == 2 ? 2 * big : 0) + plain_need(&p, 0, dx != NULL, dw != NULL);
	char *scr = gf_cu_scratch(c, need);
	if (!scr)
		return -ENOMEM;
	if (db)
		CU_LAUNCH(gf_cu_channel_sum(c->stream, db, (double *)(void *)scr, dy, d->n, d->cout, (int)P, accumulate));
	scr += part;
	if (!dx && !dw)
		return 0;
	if (up == 1)
		return plain_bwd(c, &p, scr, dx, dw, dy, x, w, accumulate);
	/* explicit upsample: the conv's gradients at full size, then back */
	float *xu = gf_cu_carve(&scr, big), *dxu = gf_cu_carve(&scr, big);
	if (dw)
		CU_LAUNCH(gf_cu_up_fwd_launch(c->stream, xu, x, d->n * d->cin, d->h, d->w, 2));
	TRY(plain_bwd(c, &p, scr, dx ? dxu : NULL, dw, dy, xu, w, accumulate));
	if (dx)
		CU_LAUNCH(gf_cu_up_bwd_launch(c->stream, dx, dxu, d->n * d->cin, d->h, d->w, 2));
	return 0;
}
