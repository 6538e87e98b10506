/* The CPU backend as a checked device: what lets the GPU paths of the
 * step stages run, and be tested, on a machine without a GPU.
 *
 * With GANFLOW_CPU_DEVICE_CHECK=1 in the environment, every CPU backend
 * instance opened afterwards takes the ops table gf_cpu_check_ops makes
 * (backend_cpu.c asks for it): the CPU backend's ops, checked, plus the
 * ops only a device backend has (graph_begin / graph_end,
 * events, pinned and device memory, asynchronous copies, timing, stats).
 * Everything still runs eagerly on the host, so results are the CPU
 * backend's bit for bit, but the CUDA backend's rules (graph_cuda.c,
 * docs/cuda.md) are enforced as it enforces them:
 *
 *  - between graph_begin and graph_end no op may need the host: a loss
 *    with a host value, sumsq, sync, host copies (H2D, D2H, asynchronous
 *    ones), events, stats are GF_EUNSUPPORTED, and the step is refused
 *    at graph_end;
 *  - every buffer an op of a graph step reads or writes must be device
 *    memory (made by alloc or device_alloc and not freed): a message's
 *    host buffer or a stage's malloc'ed array inside a step is refused,
 *    naming the op;
 *  - the first bracket "captures": each op adds its kind, its buffers and
 *    its shapes and constants to a signature (not its per-step scalars:
 *    generator offsets, optimiser step scalars, loss targets and scales,
 *    the decay of ema, which the CUDA backend refreshes on every replay);
 *    later brackets "replay" and must give the same signature, else
 *    graph_end returns GF_EPARAM as the CUDA backend does (there the step
 *    would not run);
 *  - at most 512 ops with per-step scalars per step (the CUDA backend's
 *    slot array);
 *  - an event must have been recorded before anything waits on it (on a
 *    GPU, waiting on an event never recorded waits for nothing: a lost
 *    ordering that no test would see);
 *  - a collective (the data-parallel exchange's MPI, run when called: its
 *    kind, buffer, count and communicator enter the signature) launched
 *    inside the brackets must be waited for (GF_COLL_WAIT) before
 *    graph_end, as the CUDA backend's side stream must rejoin the step's
 *    stream before its capture ends.
 *
 * Device memory is ordinary host memory in a process-wide registry of
 * live allocations; device_free may run after the instance is closed, as
 * the CUDA backend's may (message pools outlive their stage's backend).
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>
#include <ganflow/log.h>

#include "cpu.h"

#define MAX_DYN 512   /* graph_cuda.c's MAX_SLOTS */

enum { MODE_EAGER = 0, MODE_CAPTURE, MODE_REPLAY };

struct gf_graph {
	gf_cpu *owner;
	uint64_t sig;
	int nops, ndyn;
	int valid;
	struct gf_graph *next;
};

struct gf_cpu_check {
	int mode;
	uint64_t sig;
	int nops, ndyn;
	int failed;              /* an op inside the brackets was refused */
	int unjoined;            /* a collective inside the brackets not waited for yet */
	gf_graph *cur, *all;
	int64_t ngraphs, nreplays;
	int64_t waits;           /* ops where a GPU's host waits for its device */
};

int gf_cpu_check_wanted(void)
{
	const char *v = getenv("GANFLOW_CPU_DEVICE_CHECK");
	return v && *v && strcmp(v, "0") != 0;
}

int gf_cpu_check_attach(gf_cpu *c)
{
	c->check = calloc(1, sizeof(*c->check));
	if (!c->check)
		return gf_seterr(-ENOMEM, "cpu backend: out of memory");
	gf_log(GF_LOG_DEBUG, "cpu backend: device check on (GANFLOW_CPU_DEVICE_CHECK)");
	return 0;
}

void gf_cpu_check_detach(gf_cpu *c)
{
	if (!c->check)
		return;
	while (c->check->all) {
		gf_graph *g = c->check->all;
		c->check->all = g->next;
		free(g);
	}
	free(c->check);
	c->check = NULL;
}

static struct gf_cpu_check *K(gf_backend *be)
{
	return gf_cpu_of(be)->check;
}

/* ---- the registry of device memory (process-wide) ---- */

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct span {
	uintptr_t lo, hi;
} *reg;
static size_t nreg, capreg;

static int reg_add(const void *p, size_t bytes)
{
	pthread_mutex_lock(&reg_lock);
	if (nreg == capreg) {
		size_t cap = capreg ? 2 * capreg : 64;
		struct span *r = realloc(reg, cap * sizeof(*r));
		if (!r) {
			pthread_mutex_unlock(&reg_lock);
			return -ENOMEM;
		}
		reg = r;
		capreg = cap;
	}
	reg[nreg].lo = (uintptr_t)p;
	reg[nreg].hi = (uintptr_t)p + (bytes ? bytes : 1);
	nreg++;
	pthread_mutex_unlock(&reg_lock);
	return 0;
}

static void reg_remove(const void *p)
{
	pthread_mutex_lock(&reg_lock);
	for (size_t i = 0; i < nreg; i++) {
		if (reg[i].lo == (uintptr_t)p) {
			reg[i] = reg[--nreg];
			break;
		}
	}
	if (!nreg) {
		free(reg);
		reg = NULL;
		capreg = 0;
	}
	pthread_mutex_unlock(&reg_lock);
}

static int reg_has(const void *p)
{
	uintptr_t a = (uintptr_t)p;
	int found = 0;
	pthread_mutex_lock(&reg_lock);
	for (size_t i = 0; i < nreg && !found; i++)
		found = a >= reg[i].lo && a < reg[i].hi;
	pthread_mutex_unlock(&reg_lock);
	return found;
}

/* ---- signatures ---- */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

static uint64_t fb(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

/* An op with buffers p (np, NULL entries allowed) and signature values v
 * (nv); dyn: it has per-step scalars. Eagerly nothing is checked.
 * Inside the brackets every buffer must be device memory. */
static int op(gf_backend *be, int id, const char *name, const void *const *p, int np, const uint64_t *v, int nv,
              int dyn)
{
	struct gf_cpu_check *k = K(be);
	if (k->mode == MODE_EAGER)
		return 0;
	for (int i = 0; i < np; i++) {
		if (p[i] && !reg_has(p[i])) {
			k->failed = 1;
			return gf_seterr(GF_EUNSUPPORTED, "cpu device check: %s inside a graph step reads or writes %p, which "
			                 "is not device memory (a host buffer: copy it to a device buffer before graph_begin)",
			                 name, p[i]);
		}
	}
	k->sig = fnv(k->sig, &id, sizeof(id));
	for (int i = 0; i < np; i++)
		k->sig = fnv(k->sig, &p[i], sizeof(p[i]));
	k->sig = fnv(k->sig, v, (size_t)nv * sizeof(*v));
	k->nops++;
	if (dyn && ++k->ndyn > MAX_DYN) {
		k->failed = 1;
		return gf_seterr(GF_EUNSUPPORTED, "cpu device check: more than %d ops with per-step scalars in one graph "
		                 "step (the CUDA backend's limit)", MAX_DYN);
	}
	return 0;
}

static void sig_bytes(gf_backend *be, const void *p, size_t n)
{
	struct gf_cpu_check *k = K(be);
	if (k->mode != MODE_EAGER)
		k->sig = fnv(k->sig, p, n);
}

/* GF_EUNSUPPORTED for an op that needs the host, inside the brackets. */
static int host_op(gf_backend *be, const char *what)
{
	struct gf_cpu_check *k = K(be);
	if (k->mode == MODE_EAGER)
		return 0;
	k->failed = 1;
	return gf_seterr(GF_EUNSUPPORTED, "cpu device check: %s is not allowed between graph_begin and graph_end (it "
	                 "needs the host; do it outside the captured step)", what);
}

#define P(...) (const void *const[]){ __VA_ARGS__ }, (int)(sizeof((const void *const[]){ __VA_ARGS__ }) / sizeof(void *))
#define V(...) (const uint64_t[]){ __VA_ARGS__ }, (int)(sizeof((const uint64_t[]){ __VA_ARGS__ }) / sizeof(uint64_t))
#define U(x) ((uint64_t)(x))
#define TRY(call)                         \
	do {                              \
		int rc_ = (call);         \
		if (rc_)                  \
			return rc_;       \
	} while (0)

enum {
	OP_FILL = 1, OP_COPY, OP_GEMM, OP_BIAS_ADD, OP_BIAS_GRAD, OP_AXPY, OP_SCALE, OP_COPY2D, OP_CONV_FWD, OP_CONV_BWD,
	OP_BN_TRAIN, OP_BN_EVAL, OP_BN_BWD, OP_ACT_FWD, OP_ACT_BWD, OP_UP_FWD, OP_UP_BWD, OP_DROP_FWD, OP_DROP_BWD,
	OP_POOL_FWD, OP_POOL_BWD, OP_SOFTMAX_FWD, OP_SOFTMAX_BWD, OP_EMB_FWD, OP_EMB_BWD, OP_LOSS, OP_OPTIM,
	OP_RNG_UNIFORM, OP_RNG_NORMAL, OP_SN_FWD, OP_SN_BWD, OP_ROW_DOT, OP_ROW_SCALE, OP_CBN_FWD, OP_CBN_BWD,
	OP_AUG_FWD, OP_AUG_BWD, OP_GEMM_BATCHED, OP_REDUCE, OP_ACT_BWD2, OP_BN_BWD2, OP_POOL_GATHER, OP_AUG_LIN,
	OP_MBSTD_FWD, OP_MBSTD_BWD, OP_MBSTD_BWD2, OP_BIAS_ACT_FWD, OP_BIAS_ACT_BWD, OP_RSQRT_EPS, OP_FIR_FWD, OP_FIR_BWD,
	OP_ADA_PARAMS, OP_ADA_FWD, OP_ADA_BWD, OP_STYLE_MIX, OP_EMA,
	OP_CLIP_DEV, OP_LECAM_DEV, OP_LECAM_AVG, OP_ADA_SIGNS, OP_ADA_UPDATE, OP_PENALTY_FACTORS
};

/* ---- memory and copies ---- */

static int k_alloc(gf_backend *be, void **ptr, size_t bytes)
{
	TRY(gf_cpu_alloc_plain(be, ptr, bytes));
	if (reg_add(*ptr, bytes)) {
		gf_cpu_free_plain(be, *ptr);
		*ptr = NULL;
		return gf_seterr(-ENOMEM, "cpu device check: out of memory");
	}
	return 0;
}

static void k_free(gf_backend *be, void *ptr)
{
	if (!ptr)
		return;
	reg_remove(ptr);
	gf_cpu_free_plain(be, ptr);
}

static int copy_rules(gf_backend *be, void *dst, const void *src, size_t bytes, gf_copy_kind kind, const char *what)
{
	if (kind != GF_COPY_D2D) {
		char m[96];
		snprintf(m, sizeof(m), "%s %s", what,
		         kind == GF_COPY_H2D ? "from host memory (upload inputs before graph_begin)"
		         : kind == GF_COPY_D2H ? "to host memory" : "between host buffers");
		return host_op(be, m);
	}
	return op(be, OP_COPY, what, P(dst, src), V(U(bytes)), 0);
}

static int k_copy(gf_backend *be, void *dst, const void *src, size_t bytes, gf_copy_kind kind)
{
	if (!bytes || dst == src)
		return 0;
	TRY(copy_rules(be, dst, src, bytes, kind, "a copy"));
	K(be)->waits += kind == GF_COPY_D2H;
	return gf_cpu_copy_plain(be, dst, src, bytes, kind);
}

static int k_copy_async(gf_backend *be, void *dst, const void *src, size_t bytes, gf_copy_kind kind)
{
	if (!bytes || dst == src)
		return 0;
	if (kind != GF_COPY_D2D)
		TRY(host_op(be, "an asynchronous host copy"));
	TRY(copy_rules(be, dst, src, bytes, kind, "an asynchronous copy"));
	return gf_cpu_copy_plain(be, dst, src, bytes, kind);
}

static int k_sync(gf_backend *be)
{
	K(be)->waits++;
	return host_op(be, "sync");
}

static int64_t k_host_waits(gf_backend *be)
{
	return K(be)->waits;
}

static void *k_pinned_alloc(void *ud, size_t bytes)
{
	(void)ud;
	void *p = NULL;
	return posix_memalign(&p, 64, bytes ? (bytes + 63) / 64 * 64 : 64) ? NULL : p;
}

static void k_pinned_free(void *ud, void *p)
{
	(void)ud;
	free(p);
}

static void *k_device_alloc(void *ud, size_t bytes)
{
	(void)ud;
	void *p = k_pinned_alloc(NULL, bytes);
	if (p && reg_add(p, bytes)) {
		free(p);
		return NULL;
	}
	return p;
}

static void k_device_free(void *ud, void *p)
{
	(void)ud;
	if (!p)
		return;
	reg_remove(p);
	free(p);
}

/* ---- events ---- */

#define EV_MAGIC 0x65766e74u

struct ev {
	uint32_t magic;
	int timed, recorded;
	double t;               /* seconds, when recorded (timed) */
};

static int ev_new(gf_backend *be, void **event, int timed)
{
	(void)be;
	struct ev *e = calloc(1, sizeof(*e));
	*event = e;
	if (!e)
		return gf_seterr(-ENOMEM, "cpu device check: out of memory");
	e->magic = EV_MAGIC;
	e->timed = timed;
	return 0;
}

static int k_event_create(gf_backend *be, void **event)
{
	return ev_new(be, event, 0);
}

static int k_event_create_timed(gf_backend *be, void **event)
{
	return ev_new(be, event, 1);
}

static void k_event_destroy(gf_backend *be, void *event)
{
	(void)be;
	struct ev *e = event;
	if (e)
		e->magic = 0;
	free(e);
}

static struct ev *ev_of(void *event)
{
	struct ev *e = event;
	return e && e->magic == EV_MAGIC ? e : NULL;
}

static int k_event_record(gf_backend *be, void *event)
{
	TRY(host_op(be, "event_record"));
	struct ev *e = ev_of(event);
	if (!e)
		return gf_seterr(GF_EPARAM, "cpu device check: event_record on something that is not an event");
	e->recorded = 1;
	e->t = gf_now();
	return 0;
}

static int ev_waitable(void *event, const char *what)
{
	struct ev *e = ev_of(event);
	if (!e)
		return gf_seterr(GF_EPARAM, "cpu device check: %s on something that is not an event", what);
	if (!e->recorded)
		return gf_seterr(GF_EPARAM, "cpu device check: %s on an event never recorded (on a GPU it would wait for "
		                 "nothing)", what);
	return 0;
}

static int k_event_wait(gf_backend *be, void *event)
{
	TRY(host_op(be, "event_wait"));
	return ev_waitable(event, "event_wait");
}

static int k_event_sync(gf_backend *be, void *event)
{
	TRY(host_op(be, "event_sync"));
	K(be)->waits++;
	return ev_waitable(event, "event_sync");
}

static int k_event_elapsed(gf_backend *be, void *start, void *end, float *ms)
{
	TRY(host_op(be, "event_elapsed"));
	struct ev *a = ev_of(start), *b = ev_of(end);
	if (!a || !b || !a->timed || !b->timed || !a->recorded || !b->recorded)
		return gf_seterr(GF_EPARAM, "cpu device check: event_elapsed needs two recorded timed events");
	*ms = (float)((b->t - a->t) * 1e3);
	return 0;
}

static int k_stats(gf_backend *be, gf_backend_stats *out)
{
	TRY(host_op(be, "stats"));
	memset(out, 0, sizeof(*out));
	out->precision = GF_PREC_FP32;
	out->layout = GF_LAYOUT_NCHW;
	out->loss_scale = 1.0f;
	out->graphs = K(be)->ngraphs;
	out->replays = K(be)->nreplays;
	out->deterministic = 1;
	snprintf(out->device_name, sizeof(out->device_name), "cpu (device check)");
	return 0;
}

/* ---- graphs ---- */

static int k_graph_begin(gf_backend *be, gf_graph **graph)
{
	struct gf_cpu_check *k = K(be);
	if (k->mode != MODE_EAGER)
		return gf_seterr(GF_EPARAM, "cpu device check: graph_begin inside another graph_begin/graph_end");
	k->sig = 1469598103934665603ull;
	k->nops = k->ndyn = 0;
	k->failed = 0;
	k->unjoined = 0;
	if (*graph) {
		gf_graph *g = *graph;
		if (g->owner != gf_cpu_of(be))
			return gf_seterr(GF_EPARAM, "cpu device check: the graph belongs to another backend instance");
		if (!g->valid)
			return gf_seterr(GF_EPARAM, "cpu device check: this graph's capture failed; destroy it and capture again");
		k->cur = g;
		k->mode = MODE_REPLAY;
		return 0;
	}
	gf_graph *g = calloc(1, sizeof(*g));
	if (!g)
		return gf_seterr(-ENOMEM, "cpu device check: out of memory");
	g->owner = gf_cpu_of(be);
	g->next = k->all;
	k->all = g;
	k->cur = g;
	k->mode = MODE_CAPTURE;
	*graph = g;
	return 0;
}

static int k_graph_end(gf_backend *be, gf_graph *g)
{
	struct gf_cpu_check *k = K(be);
	if (k->mode == MODE_EAGER || k->cur != g || !g)
		return gf_seterr(GF_EPARAM, "cpu device check: graph_end without the matching graph_begin");
	int mode = k->mode;
	k->mode = MODE_EAGER;
	k->cur = NULL;
	if (k->unjoined && !k->failed) {
		k->failed = 1;
		gf_seterr(GF_EUNSUPPORTED, "cpu device check: a collective of this step was not waited for (collective "
		          "GF_COLL_WAIT) before graph_end: on a GPU its stream would be left unjoined and the capture fail");
	}
	if (mode == MODE_CAPTURE) {
		if (k->failed)
			return gf_seterr(GF_EUNSUPPORTED, "cpu device check: the step was not captured: an op was refused (%s)",
			                 gf_errmsg());
		g->sig = k->sig;
		g->nops = k->nops;
		g->ndyn = k->ndyn;
		g->valid = 1;
		k->ngraphs++;
		return 0;
	}
	if (k->failed)
		return gf_seterr(GF_EUNSUPPORTED, "cpu device check: the step was not run: an op was refused (%s)",
		                 gf_errmsg());
	if (k->nops != g->nops || k->ndyn != g->ndyn || k->sig != g->sig)
		return gf_seterr(GF_EPARAM, "cpu device check: this step differs from the captured one (%d ops, %d per-step "
		                 "scalars; captured %d ops, %d scalars%s): on a GPU it would not run; destroy the graph and "
		                 "capture the new step", k->nops, k->ndyn, g->nops, g->ndyn,
		                 k->nops == g->nops ? ", other buffers, shapes or constants" : "");
	k->nreplays++;
	return 0;
}

static void k_graph_destroy(gf_backend *be, gf_graph *g)
{
	struct gf_cpu_check *k = K(be);
	if (!g || g->owner != gf_cpu_of(be) || k->cur == g)
		return;
	for (gf_graph **p = &k->all; *p; p = &(*p)->next) {
		if (*p == g) {
			*p = g->next;
			break;
		}
	}
	free(g);
}

/* ---- the CPU ops, checked ---- */

static int k_fill(gf_backend *be, float *x, size_t n, float value)
{
	TRY(op(be, OP_FILL, "fill", P(x), V(U(n), fb(value)), 0));
	return gf_cpu_fill(be, x, n, value);
}

static int k_gemm(gf_backend *be, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                  const float *b, int ldb, float beta, float *c, int ldc)
{
	TRY(op(be, OP_GEMM, "gemm", P(a, b, c),
	       V(U(ta), U(tb), U(m), U(n), U(k), fb(alpha), U(lda), U(ldb), fb(beta), U(ldc)), 0));
	return gf_cpu_gemm(be, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static int k_bias_add(gf_backend *be, float *y, const float *b, int n, int c, int hw)
{
	TRY(op(be, OP_BIAS_ADD, "bias_add", P(y, b), V(U(n), U(c), U(hw)), 0));
	return gf_cpu_bias_add(be, y, b, n, c, hw);
}

static int k_bias_grad(gf_backend *be, float *db, const float *dy, int n, int c, int hw, int acc)
{
	TRY(op(be, OP_BIAS_GRAD, "bias_grad", P(db, dy), V(U(n), U(c), U(hw), U(acc)), 0));
	return gf_cpu_bias_grad(be, db, dy, n, c, hw, acc);
}

static int k_axpy(gf_backend *be, float *y, const float *x, size_t n, float alpha)
{
	TRY(op(be, OP_AXPY, "axpy", P(y, x), V(U(n), fb(alpha)), 0));
	return gf_cpu_axpy(be, y, x, n, alpha);
}

static int k_scale(gf_backend *be, float *x, size_t n, float s)
{
	TRY(op(be, OP_SCALE, "scale", P(x), V(U(n), fb(s)), 0));
	return gf_cpu_scale(be, x, n, s);
}

/* decay changes from step to step (StyleGAN2's ramp): a per-step scalar */
static int k_ema(gf_backend *be, float *avg, const float *w, size_t n, float decay)
{
	TRY(op(be, OP_EMA, "ema", P(avg, w), V(U(n)), 1));
	return gf_cpu_ema(be, avg, w, n, decay);
}

/* ---- the recipe ops (state in device memory, nothing on the host) ---- */

static int k_clip_dev(gf_backend *be, float *g, size_t n, const double *sumsq, float max_norm)
{
	TRY(op(be, OP_CLIP_DEV, "clip_dev", P(g, sumsq), V(U(n), fb(max_norm)), 0));
	return gf_cpu_clip_dev(be, g, n, sumsq, max_norm);
}

/* lambda and scale may follow a schedule: per-step scalars */
static int k_lecam_dev(gf_backend *be, float *dy, double *value, double *st, const float *out, size_t n, int fake,
                       float lambda, float scale, int acc)
{
	TRY(op(be, OP_LECAM_DEV, "lecam_dev", P(dy, value, st, out), V(U(n), U(fake), U(acc)), 1));
	return gf_cpu_lecam_dev(be, dy, value, st, out, n, fake, lambda, scale, acc);
}

static int k_lecam_avg(gf_backend *be, double *st, float decay, int last)
{
	TRY(op(be, OP_LECAM_AVG, "lecam_avg", P(st), V(fb(decay), U(last)), 0));
	return gf_cpu_lecam_avg(be, st, decay, last);
}

static int k_ada_signs(gf_backend *be, double *st, const float *out, size_t n, float mid)
{
	TRY(op(be, OP_ADA_SIGNS, "ada_signs", P(st, out), V(U(n), fb(mid)), 0));
	return gf_cpu_ada_signs(be, st, out, n, mid);
}

/* the step's real images (a short last batch) are a per-step scalar */
static int k_ada_update(gf_backend *be, float *p, double *st, double *out, double images, int interval,
                        double target, double kimg)
{
	uint64_t t, k;
	memcpy(&t, &target, sizeof(t));
	memcpy(&k, &kimg, sizeof(k));
	TRY(op(be, OP_ADA_UPDATE, "ada_update", P(p, st, out), V(U(interval), t, k), 1));
	return gf_cpu_ada_update(be, p, st, out, images, interval, target, kimg);
}

/* weight and scale may follow a schedule: per-step scalars */
static int k_penalty_factors(gf_backend *be, float *f, double *out, double *center_st, const float *sq, int b,
                             int max_batch, int npts, const gf_penalty_desc *d)
{
	uint64_t c, dc;
	memcpy(&c, &d->center, sizeof(c));
	memcpy(&dc, &d->decay, sizeof(dc));
	TRY(op(be, OP_PENALTY_FACTORS, "penalty_factors", P(f, out, center_st, sq),
	       V(U(b), U(max_batch), U(npts), U(d->distance), c, dc, U(d->split)), 1));
	return gf_cpu_penalty_factors(be, f, out, center_st, sq, b, max_batch, npts, d);
}

static int k_copy2d(gf_backend *be, float *dst, size_t ldd, const float *src, size_t lds, size_t rows, size_t cols,
                    int acc)
{
	TRY(op(be, OP_COPY2D, "copy2d", P(dst, src), V(U(ldd), U(lds), U(rows), U(cols), U(acc)), 0));
	return gf_cpu_copy2d(be, dst, ldd, src, lds, rows, cols, acc);
}

static int k_conv_fwd(gf_backend *be, float *y, const float *x, const float *w, const float *b, const gf_conv_desc *d)
{
	TRY(op(be, OP_CONV_FWD, "conv2d_forward", P(y, x, w, b), V(0), 0));
	sig_bytes(be, d, sizeof(*d));
	return gf_cpu_conv2d_forward(be, y, x, w, b, d);
}

static int k_conv_bwd(gf_backend *be, float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
                      const gf_conv_desc *d, int acc)
{
	TRY(op(be, OP_CONV_BWD, "conv2d_backward", P(dx, dw, db, dy, x, w), V(U(acc)), 0));
	sig_bytes(be, d, sizeof(*d));
	return gf_cpu_conv2d_backward(be, dx, dw, db, dy, x, w, d, acc);
}

static int k_bn_train(gf_backend *be, float *y, float *mean, float *rstd, float *run_mean, float *run_var,
                      const float *x, const float *gamma, const float *beta, const gf_bn_desc *d)
{
	TRY(op(be, OP_BN_TRAIN, "bn_forward_train", P(y, mean, rstd, run_mean, run_var, x, gamma, beta), V(0), 0));
	sig_bytes(be, d, sizeof(*d));
	return gf_cpu_bn_forward_train(be, y, mean, rstd, run_mean, run_var, x, gamma, beta, d);
}

static int k_bn_eval(gf_backend *be, float *y, const float *x, const float *gamma, const float *beta,
                     const float *run_mean, const float *run_var, const gf_bn_desc *d)
{
	TRY(op(be, OP_BN_EVAL, "bn_forward_eval", P(y, x, gamma, beta, run_mean, run_var), V(0), 0));
	sig_bytes(be, d, sizeof(*d));
	return gf_cpu_bn_forward_eval(be, y, x, gamma, beta, run_mean, run_var, d);
}

static int k_bn_bwd(gf_backend *be, float *dx, float *dgamma, float *dbeta, const float *dy, const float *y,
                    const float *x, const float *gamma, const float *mean, const float *rstd, const gf_bn_desc *d,
                    int acc)
{
	TRY(op(be, OP_BN_BWD, "bn_backward", P(dx, dgamma, dbeta, dy, y, x, gamma, mean, rstd), V(U(acc)), 0));
	sig_bytes(be, d, sizeof(*d));
	return gf_cpu_bn_backward(be, dx, dgamma, dbeta, dy, y, x, gamma, mean, rstd, d, acc);
}

static int k_act_fwd(gf_backend *be, float *y, const float *x, size_t n, gf_act act, float param)
{
	TRY(op(be, OP_ACT_FWD, "act_forward", P(y, x), V(U(n), U(act), fb(param)), 0));
	return gf_cpu_act_forward(be, y, x, n, act, param);
}

static int k_act_bwd(gf_backend *be, float *dx, const float *dy, const float *y, size_t n, gf_act act, float param)
{
	TRY(op(be, OP_ACT_BWD, "act_backward", P(dx, dy, y), V(U(n), U(act), fb(param)), 0));
	return gf_cpu_act_backward(be, dx, dy, y, n, act, param);
}

static int k_up_fwd(gf_backend *be, float *y, const float *x, int planes, int h, int w, int s)
{
	TRY(op(be, OP_UP_FWD, "upsample_forward", P(y, x), V(U(planes), U(h), U(w), U(s)), 0));
	return gf_cpu_upsample_forward(be, y, x, planes, h, w, s);
}

static int k_up_bwd(gf_backend *be, float *dx, const float *dy, int planes, int h, int w, int s)
{
	TRY(op(be, OP_UP_BWD, "upsample_backward", P(dx, dy), V(U(planes), U(h), U(w), U(s)), 0));
	return gf_cpu_upsample_backward(be, dx, dy, planes, h, w, s);
}

static int k_drop_fwd(gf_backend *be, float *y, float *mask, const float *x, size_t groups, size_t group, float p,
                      const gf_rng *rng)
{
	TRY(op(be, OP_DROP_FWD, "dropout_forward", P(y, mask, x), V(U(groups), U(group), fb(p)), 1));
	return gf_cpu_dropout_forward(be, y, mask, x, groups, group, p, rng);
}

static int k_drop_bwd(gf_backend *be, float *dx, const float *dy, const float *mask, size_t groups, size_t group)
{
	TRY(op(be, OP_DROP_BWD, "dropout_backward", P(dx, dy, mask), V(U(groups), U(group)), 0));
	return gf_cpu_dropout_backward(be, dx, dy, mask, groups, group);
}

static int k_pool_fwd(gf_backend *be, float *y, int32_t *idx, const float *x, const gf_pooling_desc *d)
{
	TRY(op(be, OP_POOL_FWD, "pooling_forward", P(y, idx, x), V(0), 0));
	sig_bytes(be, d, sizeof(*d));
	return gf_cpu_pooling_forward(be, y, idx, x, d);
}

static int k_pool_bwd(gf_backend *be, float *dx, const float *dy, const int32_t *idx, const gf_pooling_desc *d)
{
	TRY(op(be, OP_POOL_BWD, "pooling_backward", P(dx, dy, idx), V(0), 0));
	sig_bytes(be, d, sizeof(*d));
	return gf_cpu_pooling_backward(be, dx, dy, idx, d);
}

static int k_softmax_fwd(gf_backend *be, float *y, const float *x, int rows, int cols)
{
	TRY(op(be, OP_SOFTMAX_FWD, "softmax_forward", P(y, x), V(U(rows), U(cols)), 0));
	return gf_cpu_softmax_forward(be, y, x, rows, cols);
}

static int k_softmax_bwd(gf_backend *be, float *dx, const float *dy, const float *y, int rows, int cols)
{
	TRY(op(be, OP_SOFTMAX_BWD, "softmax_backward", P(dx, dy, y), V(U(rows), U(cols)), 0));
	return gf_cpu_softmax_backward(be, dx, dy, y, rows, cols);
}

static int k_emb_fwd(gf_backend *be, float *y, const float *table, const int32_t *idx, int n, int dim, int num)
{
	TRY(op(be, OP_EMB_FWD, "embedding_forward", P(y, table, idx), V(U(n), U(dim), U(num)), 0));
	return gf_cpu_embedding_forward(be, y, table, idx, n, dim, num);
}

static int k_emb_bwd(gf_backend *be, float *dtable, const float *dy, const int32_t *idx, int n, int dim, int num,
                     int acc)
{
	TRY(op(be, OP_EMB_BWD, "embedding_backward", P(dtable, dy, idx), V(U(n), U(dim), U(num), U(acc)), 0));
	return gf_cpu_embedding_backward(be, dtable, dy, idx, n, dim, num, acc);
}

/* Targets and labels: the CUDA backend copies host ones in eagerly and
 * refuses them in a graph step, as the device-memory rule does here. */
static int loss_sig(gf_backend *be, const char *name, float *out, float *dx, const float *x, const float *target,
                    const int32_t *labels, const gf_loss_desc *d)
{
	return op(be, OP_LOSS, name, P(out, dx, x, target, labels), V(U(d->kind), U(d->n), U(d->k)), 1);
}

static int k_loss(gf_backend *be, float *loss_host, float *dx, const float *x, const float *target,
                  const int32_t *labels, const gf_loss_desc *d)
{
	if (loss_host) {
		TRY(host_op(be, "loss with a host value (use loss_dev)"));
		K(be)->waits++;
	}
	TRY(loss_sig(be, "loss", NULL, dx, x, target, labels, d));
	return gf_cpu_loss(be, loss_host, dx, x, target, labels, d);
}

static int k_loss_dev(gf_backend *be, float *loss_dev, float *dx, const float *x, const float *target,
                      const int32_t *labels, const gf_loss_desc *d)
{
	TRY(loss_sig(be, "loss_dev", loss_dev, dx, x, target, labels, d));
	return gf_cpu_loss_dev(be, loss_dev, dx, x, target, labels, d);
}

static int k_optim(gf_backend *be, float *p, const float *g, float *state, size_t n, const gf_optim_args *a)
{
	TRY(op(be, OP_OPTIM, "optim_step", P(p, g, state), V(U(n), U(a->kind)), 1));
	return gf_cpu_optim_step(be, p, g, state, n, a);
}

static int k_sumsq(gf_backend *be, double *out, const float *x, size_t n)
{
	TRY(host_op(be, "sumsq (it returns a host value; reduce_dev keeps it on the device)"));
	K(be)->waits++;
	return gf_cpu_sumsq(be, out, x, n);
}

static int k_reduce(gf_backend *be, double *out, const float *x, size_t n, int squares)
{
	TRY(op(be, OP_REDUCE, "reduce_dev", P(out, x), V(U(n), U(squares)), 0));
	return gf_cpu_reduce_dev(be, out, x, n, squares);
}

static int k_rng_uniform(gf_backend *be, float *out, size_t n, float lo, float hi, const gf_rng *rng)
{
	TRY(op(be, OP_RNG_UNIFORM, "rng_uniform", P(out), V(U(n), fb(lo), fb(hi)), 1));
	return gf_cpu_rng_uniform(be, out, n, lo, hi, rng);
}

static int k_rng_normal(gf_backend *be, float *out, size_t n, float mean, float std, const gf_rng *rng)
{
	TRY(op(be, OP_RNG_NORMAL, "rng_normal", P(out), V(U(n), fb(mean), fb(std)), 1));
	return gf_cpu_rng_normal(be, out, n, mean, std, rng);
}

static int k_sn_fwd(gf_backend *be, float *w_sn, float *sigma, float *u, float *v, const float *w, int a, int m, int k,
                    float eps, int iterate)
{
	TRY(op(be, OP_SN_FWD, "sn_forward", P(w_sn, sigma, u, v, w), V(U(a), U(m), U(k), fb(eps), U(iterate)), 0));
	return gf_cpu_sn_forward(be, w_sn, sigma, u, v, w, a, m, k, eps, iterate);
}

static int k_sn_bwd(gf_backend *be, float *dw, const float *g, const float *w, const float *sigma, const float *u,
                    const float *v, int a, int m, int k, int acc)
{
	TRY(op(be, OP_SN_BWD, "sn_backward", P(dw, g, w, sigma, u, v), V(U(a), U(m), U(k), U(acc)), 0));
	return gf_cpu_sn_backward(be, dw, g, w, sigma, u, v, a, m, k, acc);
}

static int k_row_dot(gf_backend *be, float *out, const float *a, const float *b, int n, int k, int acc)
{
	TRY(op(be, OP_ROW_DOT, "row_dot", P(out, a, b), V(U(n), U(k), U(acc)), 0));
	return gf_cpu_row_dot(be, out, a, b, n, k, acc);
}

static int k_row_scale(gf_backend *be, float *y, const float *s, const float *x, int n, int k, int acc)
{
	TRY(op(be, OP_ROW_SCALE, "row_scale", P(y, s, x), V(U(n), U(k), U(acc)), 0));
	return gf_cpu_row_scale(be, y, s, x, n, k, acc);
}

static int k_cbn_fwd(gf_backend *be, float *y, float *mean, float *rstd, float *run_mean, float *run_var,
                     const float *x, const float *gamma, const float *beta, const gf_bn_desc *d, int train)
{
	TRY(op(be, OP_CBN_FWD, "cbn_forward", P(y, mean, rstd, run_mean, run_var, x, gamma, beta), V(U(train)), 0));
	sig_bytes(be, d, sizeof(*d));
	return gf_cpu_cbn_forward(be, y, mean, rstd, run_mean, run_var, x, gamma, beta, d, train);
}

static int k_cbn_bwd(gf_backend *be, float *dx, float *dgamma, float *dbeta, const float *dy, const float *y,
                     const float *x, const float *gamma, const float *mean, const float *rstd, const gf_bn_desc *d)
{
	TRY(op(be, OP_CBN_BWD, "cbn_backward", P(dx, dgamma, dbeta, dy, y, x, gamma, mean, rstd), V(0), 0));
	sig_bytes(be, d, sizeof(*d));
	return gf_cpu_cbn_backward(be, dx, dgamma, dbeta, dy, y, x, gamma, mean, rstd, d);
}

static int k_aug_fwd(gf_backend *be, float *y, const float *x, const float *u, int n, int c, int h, int w,
                     unsigned what)
{
	TRY(op(be, OP_AUG_FWD, "augment_forward", P(y, x, u), V(U(n), U(c), U(h), U(w), U(what)), 0));
	return gf_cpu_augment_forward(be, y, x, u, n, c, h, w, what);
}

static int k_aug_bwd(gf_backend *be, float *dx, const float *dy, const float *u, int n, int c, int h, int w,
                     unsigned what)
{
	TRY(op(be, OP_AUG_BWD, "augment_backward", P(dx, dy, u), V(U(n), U(c), U(h), U(w), U(what)), 0));
	return gf_cpu_augment_backward(be, dx, dy, u, n, c, h, w, what);
}

static int k_gemm_batched(gf_backend *be, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                          int64_t stride_a, const float *b, int ldb, int64_t stride_b, float beta, float *c, int ldc,
                          int64_t stride_c, int batch)
{
	TRY(op(be, OP_GEMM_BATCHED, "gemm_batched", P(a, b, c),
	       V(U(ta), U(tb), U(m), U(n), U(k), fb(alpha), U(lda), U(stride_a), U(ldb), U(stride_b), fb(beta), U(ldc),
	         U(stride_c), U(batch)),
	       0));
	return gf_cpu_gemm_batched(be, ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc, stride_c,
	                           batch);
}

/* the double backward's ops (gf_net_backward2): the step stages run their
 * penalties eagerly, but the ops obey the rules as every other */
static int k_act_bwd2(gf_backend *be, float *dx, const float *t, const float *dy, const float *y, size_t n, gf_act act,
                      float param)
{
	TRY(op(be, OP_ACT_BWD2, "act_backward2", P(dx, t, dy, y), V(U(n), U(act), fb(param)), 0));
	return gf_cpu_act_backward2(be, dx, t, dy, y, n, act, param);
}

static int k_bn_bwd2(gf_backend *be, float *ty, float *dx, float *dgamma, const float *t, const float *dy,
                     const float *y, const float *x, const float *gamma, const float *mean, const float *rstd,
                     const gf_bn_desc *d, int acc)
{
	TRY(op(be, OP_BN_BWD2, "bn_backward2", P(ty, dx, dgamma, t, dy, y, x, gamma, mean, rstd), V(U(acc)), 0));
	sig_bytes(be, d, sizeof(*d));
	return gf_cpu_bn_backward2(be, ty, dx, dgamma, t, dy, y, x, gamma, mean, rstd, d, acc);
}

static int k_pool_gather(gf_backend *be, float *y, const float *x, const int32_t *idx, const gf_pooling_desc *d)
{
	TRY(op(be, OP_POOL_GATHER, "pooling_gather", P(y, x, idx), V(0), 0));
	sig_bytes(be, d, sizeof(*d));
	return gf_cpu_pooling_gather(be, y, x, idx, d);
}

static int k_aug_lin(gf_backend *be, float *y, const float *x, const float *u, int n, int c, int h, int w,
                     unsigned what)
{
	TRY(op(be, OP_AUG_LIN, "augment_linear", P(y, x, u), V(U(n), U(c), U(h), U(w), U(what)), 0));
	return gf_cpu_augment_linear(be, y, x, u, n, c, h, w, what);
}

static int k_mbstd_fwd(gf_backend *be, float *y, const float *x, const gf_mbstd_desc *d)
{
	TRY(op(be, OP_MBSTD_FWD, "mbstd_forward", P(y, x), V(0), 0));
	sig_bytes(be, d, sizeof(*d));
	return gf_cpu_mbstd_forward(be, y, x, d);
}

static int k_mbstd_bwd(gf_backend *be, float *dx, const float *dy, const float *x, const gf_mbstd_desc *d)
{
	TRY(op(be, OP_MBSTD_BWD, "mbstd_backward", P(dx, dy, x), V(0), 0));
	sig_bytes(be, d, sizeof(*d));
	return gf_cpu_mbstd_backward(be, dx, dy, x, d);
}

static int k_mbstd_bwd2(gf_backend *be, float *ty, float *dx, const float *t, const float *dy, const float *x,
                        const gf_mbstd_desc *d)
{
	TRY(op(be, OP_MBSTD_BWD2, "mbstd_backward2", P(ty, dx, t, dy, x), V(0), 0));
	sig_bytes(be, d, sizeof(*d));
	return gf_cpu_mbstd_backward2(be, ty, dx, t, dy, x, d);
}

/* StyleGAN2's ops (bias_act, modconv, fir) and ADA's */
static int k_bias_act_fwd(gf_backend *be, float *y, const float *x, const float *b, const gf_bias_act_desc *d)
{
	TRY(op(be, OP_BIAS_ACT_FWD, "bias_act_forward", P(y, x, b), V(0), 0));
	sig_bytes(be, d, sizeof(*d));
	return gf_cpu_bias_act_forward(be, y, x, b, d);
}

static int k_bias_act_bwd(gf_backend *be, float *dx, const float *dy, const float *y, const gf_bias_act_desc *d)
{
	TRY(op(be, OP_BIAS_ACT_BWD, "bias_act_backward", P(dx, dy, y), V(0), 0));
	sig_bytes(be, d, sizeof(*d));
	return gf_cpu_bias_act_backward(be, dx, dy, y, d);
}

static int k_rsqrt_eps(gf_backend *be, float *y, const float *x, size_t n, float eps)
{
	TRY(op(be, OP_RSQRT_EPS, "rsqrt_eps", P(y, x), V(U(n), fb(eps)), 0));
	return gf_cpu_rsqrt_eps(be, y, x, n, eps);
}

static int k_fir_fwd(gf_backend *be, float *y, const float *x, const gf_fir_desc *d)
{
	TRY(op(be, OP_FIR_FWD, "fir_forward", P(y, x), V(0), 0));
	sig_bytes(be, d, sizeof(*d));
	return gf_cpu_fir_forward(be, y, x, d);
}

static int k_fir_bwd(gf_backend *be, float *dx, const float *dy, const gf_fir_desc *d)
{
	TRY(op(be, OP_FIR_BWD, "fir_backward", P(dx, dy), V(0), 0));
	sig_bytes(be, d, sizeof(*d));
	return gf_cpu_fir_backward(be, dx, dy, d);
}

static int k_ada_params(gf_backend *be, float *m, const float *u, const float *p, int n, int c, int h, int w,
                        unsigned what)
{
	TRY(op(be, OP_ADA_PARAMS, "ada_params", P(m, u, p), V(U(n), U(c), U(h), U(w), U(what)), 0));
	return gf_cpu_ada_params(be, m, u, p, n, c, h, w, what);
}

static int k_ada_fwd(gf_backend *be, float *y, const float *x, const float *m, int n, int c, int h, int w, int affine)
{
	TRY(op(be, OP_ADA_FWD, "ada_forward", P(y, x, m), V(U(n), U(c), U(h), U(w), U(affine)), 0));
	return gf_cpu_ada_forward(be, y, x, m, n, c, h, w, affine);
}

static int k_ada_bwd(gf_backend *be, float *dx, const float *dy, const float *m, int n, int c, int h, int w)
{
	TRY(op(be, OP_ADA_BWD, "ada_backward", P(dx, dy, m), V(U(n), U(c), U(h), U(w)), 0));
	return gf_cpu_ada_backward(be, dx, dy, m, n, c, h, w);
}

static int k_style_mix(gf_backend *be, float *y, const float *x, const float *u, int n, int c, int index, int num_ws,
                       float prob, int adjoint)
{
	TRY(op(be, OP_STYLE_MIX, "style_mix", P(y, x, u), V(U(n), U(c), U(index), U(num_ws), fb(prob), U(adjoint)), 0));
	return gf_cpu_style_mix(be, y, x, u, n, c, index, num_ws, prob, adjoint);
}

/* The data-parallel exchange's collectives: run when called, as on the
 * plain CPU backend; inside the brackets they are ops of the signature
 * and must be waited for before graph_end. */
enum { OP_COLL = 1000 };

static int k_collective(gf_backend *be, const gf_comm *comm, gf_coll_op cop, void *x, size_t n)
{
	struct gf_cpu_check *k = K(be);
	TRY(op(be, OP_COLL, "collective", P(x), V(U(cop), U(n), U((uintptr_t)comm)), 0));
	if (k->mode != MODE_EAGER)
		k->unjoined = cop != GF_COLL_WAIT;
	return gf_cpu_collective(be, comm, cop, x, n);
}

void gf_cpu_check_ops(gf_backend_ops *ops)
{
	ops->alloc = k_alloc;
	ops->free = k_free;
	ops->copy = k_copy;
	ops->fill = k_fill;
	ops->sync = k_sync;
	ops->gemm = k_gemm;
	ops->bias_add = k_bias_add;
	ops->bias_grad = k_bias_grad;
	ops->axpy = k_axpy;
	ops->scale = k_scale;
	ops->ema = k_ema;
	ops->clip_dev = k_clip_dev;
	ops->lecam_dev = k_lecam_dev;
	ops->lecam_avg = k_lecam_avg;
	ops->ada_signs = k_ada_signs;
	ops->ada_update = k_ada_update;
	ops->penalty_factors = k_penalty_factors;
	ops->host_waits = k_host_waits;
	ops->copy2d = k_copy2d;
	ops->conv2d_forward = k_conv_fwd;
	ops->conv2d_backward = k_conv_bwd;
	ops->bn_forward_train = k_bn_train;
	ops->bn_forward_eval = k_bn_eval;
	ops->bn_backward = k_bn_bwd;
	ops->act_forward = k_act_fwd;
	ops->act_backward = k_act_bwd;
	ops->upsample_forward = k_up_fwd;
	ops->upsample_backward = k_up_bwd;
	ops->dropout_forward = k_drop_fwd;
	ops->dropout_backward = k_drop_bwd;
	ops->pooling_forward = k_pool_fwd;
	ops->pooling_backward = k_pool_bwd;
	ops->softmax_forward = k_softmax_fwd;
	ops->softmax_backward = k_softmax_bwd;
	ops->embedding_forward = k_emb_fwd;
	ops->embedding_backward = k_emb_bwd;
	ops->loss = k_loss;
	ops->optim_step = k_optim;
	ops->sumsq = k_sumsq;
	ops->rng_uniform = k_rng_uniform;
	ops->rng_normal = k_rng_normal;
	ops->stats = k_stats;
	ops->copy_async = k_copy_async;
	ops->pinned_alloc = k_pinned_alloc;
	ops->pinned_free = k_pinned_free;
	ops->event_create = k_event_create;
	ops->event_destroy = k_event_destroy;
	ops->event_record = k_event_record;
	ops->event_wait = k_event_wait;
	ops->event_sync = k_event_sync;
	ops->loss_dev = k_loss_dev;
	ops->graph_begin = k_graph_begin;
	ops->graph_end = k_graph_end;
	ops->graph_destroy = k_graph_destroy;
	ops->sn_forward = k_sn_fwd;
	ops->sn_backward = k_sn_bwd;
	ops->row_dot = k_row_dot;
	ops->row_scale = k_row_scale;
	ops->cbn_forward = k_cbn_fwd;
	ops->cbn_backward = k_cbn_bwd;
	ops->augment_forward = k_aug_fwd;
	ops->augment_backward = k_aug_bwd;
	ops->act_backward2 = k_act_bwd2;
	ops->bn_backward2 = k_bn_bwd2;
	ops->pooling_gather = k_pool_gather;
	ops->augment_linear = k_aug_lin;
	ops->mbstd_forward = k_mbstd_fwd;
	ops->mbstd_backward = k_mbstd_bwd;
	ops->mbstd_backward2 = k_mbstd_bwd2;
	ops->gemm_batched = k_gemm_batched;
	ops->reduce_dev = k_reduce;
	ops->device_alloc = k_device_alloc;
	ops->device_free = k_device_free;
	ops->event_create_timed = k_event_create_timed;
	ops->event_elapsed = k_event_elapsed;
	ops->bias_act_forward = k_bias_act_fwd;
	ops->bias_act_backward = k_bias_act_bwd;
	ops->rsqrt_eps = k_rsqrt_eps;
	ops->fir_forward = k_fir_fwd;
	ops->fir_backward = k_fir_bwd;
	ops->ada_params = k_ada_params;
	ops->ada_forward = k_ada_fwd;
	ops->ada_backward = k_ada_bwd;
	ops->style_mix = k_style_mix;
	ops->collective = k_collective;
}
