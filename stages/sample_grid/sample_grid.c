/* sample_grid: PNG grids of generated images as training goes.
 *
 * Takes G's weights (g_step publishes them every publish_every steps and
 * at the end) into its own copy of G and renders a grid from a FIXED batch
 * of noise, so grids of successive steps show the same latent points and
 * progress is visible. A conditional G gets one row per class (row c drawn
 * with label c). Several g_steps (per-class training: one G per class)
 * connect to the same input: each G's weights carry its class as the
 * message label, and row c is drawn by the G of class c.
 *
 * pix2pix (input `pairs` connected, G mapping images to images): the grid
 * is one row per (A, B) pair of the first batch that arrives on `pairs`
 * (a fixed set, e.g. the first test pairs), showing A | G(A) | B.
 *
 * Files: RUN_DIR/samples/step-<step>.png every `every` steps and at the
 * end, and RUN_DIR/samples/latest.png.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <ganflow/err.h>
#include <ganflow/image.h>
#include <ganflow/nn.h>
#include <ganflow/params.h>
#include <ganflow/stage.h>
#include <ganflow/tfevents.h>
#include <ganflow/train.h>

enum { IN_WEIGHTS, IN_PAIRS };

#define MAX_G 256

typedef struct gen {
	int64_t label;      /* class of the producing pair, -1 for a single G */
	int64_t step;       /* step of the weights loaded, -1 = none */
	gf_net *net;
} gen;

typedef struct grid {
	gf_backend *be;
	const gf_value *table;
	gen g[MAX_G];
	int ng;
	int nproducers;
	int rows, cols, n, zdim, classes, c, h, w;
	int64_t every;
	int64_t last_written;
	unsigned mode;      /* GF_EVAL or GF_TRAIN|GF_FREEZE_STATS */
	int paired;         /* rows of A | G(A) | B from the `pairs` input */
	float *pairs;       /* (rows, 2c, h, w) the fixed (A, B) pairs, host */
	float *z;           /* (n, zdim) fixed noise */
	int32_t *labels;    /* (n) */
	float *images;      /* (n, c, h, w) host */
	uint8_t *png;
	gf_tb *tb;          /* the run's TensorBoard events, NULL = off */
	char dir[4096];
	uint64_t seed, stream;
} grid;

static int grid_create(gf_ctx *ctx, const gf_value *p, void **self)
{
	const gf_run_info *run = gf_ctx_run(ctx);
	grid *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	*self = s;
	s->table = gf_param(p, "net");
	s->every = gf_param_int(p, "every");
	s->cols = (int)gf_param_int(p, "cols");
	s->rows = (int)gf_param_int(p, "rows");
	s->mode = !strcmp(gf_param_str(p, "bn"), "eval") ? GF_EVAL : GF_TRAIN | GF_FREEZE_STATS;
	const char *dir = gf_param_str(p, "dir");
	if (dir[0] == '/' || !run->run_dir)
		snprintf(s->dir, sizeof(s->dir), "%s", dir);
	else
		snprintf(s->dir, sizeof(s->dir), "%s/%s", run->run_dir, dir);
	if (mkdir(s->dir, 0755) && errno != EEXIST)
		return gf_fail(ctx, "cannot create '%s': %s", s->dir, strerror(errno));
	if (gf_param_bool(p, "tensorboard") && run->run_dir && gf_tb_open(run->run_dir, &s->tb))
		return gf_fail(ctx, "TensorBoard events: %s (tensorboard = false turns them off)", gf_errmsg());
	int rc = gf_train_backend(ctx, p, &s->be);
	if (rc)
		return rc;
	s->seed = run->seed;
	s->stream = gf_train_stream(ctx, "noise");
	s->last_written = -1;
	return 0;
}

/* pix2pix: the first batch of `pairs` (its first `rows` pairs, 8 by
 * default) becomes the grid's fixed rows; then the G replica. */
static gen *paired_gen(grid *s, gf_ctx *ctx, gen *g, int64_t label)
{
	gf_msg *m;
	if (gf_pop(ctx, IN_PAIRS, &m)) {
		gf_fail(ctx, "input 'pairs': no (A, B) batch arrived (%s)", gf_errmsg());
		return NULL;
	}
	const gf_tensor *x = &m->t[0];
	if (x->dtype != GF_F32 || x->ndim != 4 || x->shape[1] != 2 * s->c || x->shape[2] != s->h || x->shape[3] != s->w) {
		char a[96];
		gf_fail(ctx, "input 'pairs': batch %s is not (N, 2 x %d, %d, %d) (jpeg_decode paired = true)",
		        gf_tensor_shape_str(x, a, 96), s->c, s->h, s->w);
		gf_msg_release(m);
		return NULL;
	}
	int want = s->rows ? s->rows : 8;
	s->rows = (int)x->shape[0] < want ? (int)x->shape[0] : want;
	s->cols = 3;
	s->n = s->rows * 3;
	size_t per = (size_t)(s->c * s->h * s->w);
	int gw, gh;
	gf_grid_size(s->n, s->cols, s->h, s->w, 2, &gw, &gh);
	s->pairs = malloc((size_t)s->rows * 2 * per * sizeof(float));
	s->images = malloc((size_t)s->n * per * sizeof(float));
	s->png = malloc((size_t)gw * (size_t)gh * (size_t)s->c);
	if (!s->pairs || !s->images || !s->png) {
		gf_msg_release(m);
		gf_fail(ctx, "out of memory");
		return NULL;
	}
	memcpy(s->pairs, x->data, (size_t)s->rows * 2 * per * sizeof(float));
	gf_msg_release(m);
	if (gf_train_net(ctx, s->be, s->table, s->rows, "G (net)", s->seed, s->stream, &g->net))
		return NULL;
	g->label = label;
	g->step = -1;
	s->ng++;
	return g;
}

/* The G replica for a producer label, built on first use; the fixed noise
 * and buffers are set up with the first network. */
static gen *get_gen(grid *s, gf_ctx *ctx, int64_t label)
{
	for (int i = 0; i < s->ng; i++)
		if (s->g[i].label == label)
			return &s->g[i];
	if (s->ng == MAX_G) {
		gf_fail(ctx, "more than %d generators", MAX_G);
		return NULL;
	}
	gen *g = &s->g[s->ng];
	int first = s->ng == 0;
	if (first) {
		/* shapes from a probe network at batch 1, then the real batch */
		gf_net *probe;
		if (gf_train_net(ctx, s->be, s->table, 1, "G (net)", s->seed, s->stream, &probe))
			return NULL;
		gf_tensor in, out;
		gf_net_shapes(probe, &in, &out);
		s->classes = gf_net_classes(probe);
		gf_net_destroy(probe);
		if (s->paired) {
			if (in.ndim != 4 || out.ndim != 4 || in.shape[1] != out.shape[1] || in.shape[2] != out.shape[2] ||
			    in.shape[3] != out.shape[3] || (out.shape[1] != 1 && out.shape[1] != 3)) {
				gf_fail(ctx, "input 'pairs' is connected: G (net) must map 1- or 3-channel images A to images B of "
				             "the same shape");
				return NULL;
			}
			s->c = (int)out.shape[1], s->h = (int)out.shape[2], s->w = (int)out.shape[3];
			return paired_gen(s, ctx, g, label);
		}
		if (in.ndim != 2 || out.ndim != 4 || (out.shape[1] != 1 && out.shape[1] != 3)) {
			gf_fail(ctx, "G (net) must map noise vectors to 1- or 3-channel images");
			return NULL;
		}
		s->zdim = (int)in.shape[1];
		s->c = (int)out.shape[1], s->h = (int)out.shape[2], s->w = (int)out.shape[3];
		if (!s->rows)
			s->rows = s->classes ? s->classes : s->nproducers > 1 ? s->nproducers : 8;
		s->n = s->rows * s->cols;
		int gw, gh;
		gf_grid_size(s->n, s->cols, s->h, s->w, 2, &gw, &gh);
		s->z = malloc((size_t)s->n * (size_t)s->zdim * sizeof(float));
		s->labels = malloc((size_t)s->n * sizeof(int32_t));
		s->images = malloc((size_t)s->n * (size_t)(s->c * s->h * s->w) * sizeof(float));
		s->png = malloc((size_t)gw * (size_t)gh * (size_t)s->c);
		if (!s->z || !s->labels || !s->images || !s->png) {
			gf_fail(ctx, "out of memory");
			return NULL;
		}
		gf_rng r;
		gf_rng_init(&r, s->seed, s->stream);
		gf_rng_normal(&r, s->z, (size_t)s->n * (size_t)s->zdim, 0.0f, 1.0f);
		for (int i = 0; i < s->n; i++)
			s->labels[i] = s->classes ? (i / s->cols) % s->classes : 0;
	}
	/* per-class rows need the whole row count in one batch */
	if (gf_train_net(ctx, s->be, s->table, s->n, "G (net)", s->seed, s->stream, &g->net))
		return NULL;
	g->label = label;
	g->step = -1;
	s->ng++;
	return g;
}

/* The grid just written to path, as an image event "samples" of step; a
 * failure is warned about and ends the event file, not the run. */
static void tb_image(grid *s, gf_ctx *ctx, const char *path, int64_t step, int gw, int gh)
{
	if (!s->tb)
		return;
	FILE *f = fopen(path, "rb");
	long n = -1;
	uint8_t *png = NULL;
	if (f && !fseek(f, 0, SEEK_END) && (n = ftell(f)) > 0 && !fseek(f, 0, SEEK_SET) && (png = malloc((size_t)n)) &&
	    fread(png, 1, (size_t)n, f) == (size_t)n) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		if (!gf_tb_image(s->tb, "samples", step, (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec, png, (size_t)n, gh,
		                 gw, s->c) &&
		    !gf_tb_flush(s->tb))
			n = 0;
	}
	if (n)
		gf_warn(ctx, "TensorBoard events: grid %s not written (%s); no more images are",
		        path, n < 0 || !png ? strerror(errno) : gf_errmsg());
	if (n) {
		gf_tb_close(s->tb);
		s->tb = NULL;
	}
	free(png);
	if (f)
		fclose(f);
}

/* pix2pix rows: A | G(A) | B. */
static int render_pairs(grid *s, gf_ctx *ctx)
{
	size_t per = (size_t)(s->c * s->h * s->w);
	for (int r = 0; r < s->rows; r++) { /* A into the batch G runs on: the first half of each pair */
		memcpy(s->images + (size_t)(3 * r) * per, s->pairs + (size_t)(2 * r) * per, per * sizeof(float));
		memcpy(s->images + (size_t)(3 * r + 2) * per, s->pairs + (size_t)(2 * r + 1) * per, per * sizeof(float));
	}
	float *a = malloc((size_t)s->rows * per * sizeof(float));
	if (!a)
		return gf_fail(ctx, "out of memory");
	for (int r = 0; r < s->rows; r++)
		memcpy(a + (size_t)r * per, s->pairs + (size_t)(2 * r) * per, per * sizeof(float));
	int64_t as[4] = { s->rows, s->c, s->h, s->w };
	gf_tensor at = gf_tensor_make(a, GF_F32, 4, as), out;
	int rc = gf_net_forward(s->g[0].net, &at, NULL, s->mode);
	free(a);
	if (rc)
		return gf_fail(ctx, "G forward: %s", gf_errmsg());
	gf_net_output(s->g[0].net, &out);
	for (int r = 0; r < s->rows && !rc; r++)
		rc = s->be->ops->copy(s->be, s->images + (size_t)(3 * r + 1) * per, (const float *)out.data + (size_t)r * per,
		                      per * sizeof(float), GF_COPY_D2H);
	return rc ? gf_fail(ctx, "%s", gf_errmsg()) : 0;
}

/* Renders every row and writes the grid for `step`. */
static int render(grid *s, gf_ctx *ctx, int64_t step)
{
	if (s->paired) {
		int rc = render_pairs(s, ctx);
		if (rc)
			return rc;
		goto write;
	}
	{
	int64_t zs[2] = { s->n, s->zdim }, ls[1] = { s->n };
	gf_tensor z = gf_tensor_make(s->z, GF_F32, 2, zs);
	gf_tensor lab = gf_tensor_make(s->labels, GF_I32, 1, ls);
	size_t per = (size_t)(s->c * s->h * s->w);
	/* one G: every row from it; several (per class): row r from the G of class r */
	for (int i = 0; i < s->ng; i++) {
		gen *g = &s->g[i];
		int rc = gf_net_forward(g->net, &z, s->classes ? &lab : NULL, s->mode);
		if (rc)
			return gf_fail(ctx, "G forward: %s", gf_errmsg());
		gf_tensor out;
		gf_net_output(g->net, &out);
		for (int r = 0; r < s->rows; r++) {
			if (s->ng > 1 && g->label != r)
				continue;
			size_t off = (size_t)r * (size_t)s->cols * per;
			rc = s->be->ops->copy(s->be, s->images + off, (const float *)out.data + off,
			                      (size_t)s->cols * per * sizeof(float), GF_COPY_D2H);
			if (rc)
				return gf_fail(ctx, "%s", gf_errmsg());
		}
	}
	}
write:;
	int gw, gh;
	gf_grid_size(s->n, s->cols, s->h, s->w, 2, &gw, &gh);
	gf_grid_tile(s->png, s->images, s->n, s->c, s->h, s->w, s->cols, 2);
	char path[4200];
	snprintf(path, sizeof(path), "%s/step-%08" PRId64 ".png", s->dir, step);
	if (gf_png_write(path, s->png, gw, gh, s->c, 0))
		return gf_fail(ctx, "%s", gf_errmsg());
	tb_image(s, ctx, path, step, gw, gh);
	snprintf(path, sizeof(path), "%s/latest.png", s->dir);
	if (gf_png_write(path, s->png, gw, gh, s->c, 0))
		return gf_fail(ctx, "%s", gf_errmsg());
	s->last_written = step;
	return 0;
}

static int ready(const grid *s, int64_t step)
{
	int n = 0;
	for (int i = 0; i < s->ng; i++)
		n += s->g[i].step == step;
	return n == (s->nproducers > 0 ? s->nproducers : 1);
}

static int grid_run(void *self, gf_ctx *ctx)
{
	grid *s = self;
	s->nproducers = gf_port_edges(ctx, 0, IN_WEIGHTS);
	s->paired = gf_port_edges(ctx, 0, IN_PAIRS) > 0;
	if (s->paired && s->nproducers > 1)
		return gf_fail(ctx, "input 'pairs' (pix2pix grids) takes one G, not %d", s->nproducers);
	int64_t latest = -1;
	for (;;) {
		gf_msg *m;
		int rc = gf_pop(ctx, IN_WEIGHTS, &m);
		if (rc == GF_EEOF)
			break;
		if (rc)
			return rc == GF_ESTOP ? 0 : rc;
		gen *g = get_gen(s, ctx, s->nproducers > 1 ? m->label : -1);
		if (!g) {
			gf_msg_release(m);
			return GF_EFAIL;
		}
		if ((rc = gf_weights_unpack(g->net, m))) {
			gf_msg_release(m);
			return gf_fail(ctx, "G weights: %s", gf_errmsg());
		}
		g->step = m->step;
		latest = m->step > latest ? m->step : latest;
		gf_msg_release(m);
		while (s->paired && gf_try_pop(ctx, IN_PAIRS, &m) == 0) /* later pairs are not used: let them go */
			gf_msg_release(m);
		if (g->step % s->every == 0 && ready(s, g->step) && (rc = render(s, ctx, g->step)))
			return rc;
	}
	if (s->ng > 0 && latest != s->last_written)
		return render(s, ctx, latest);
	return 0;
}

static void grid_destroy(void *self)
{
	grid *s = self;
	for (int i = 0; i < s->ng; i++)
		gf_net_destroy(s->g[i].net);
	gf_backend_close(s->be);
	free(s->z);
	free(s->labels);
	free(s->pairs);
	free(s->images);
	free(s->png);
	gf_tb_close(s->tb);
	free(s);
}

static const gf_port_desc inputs[] = {
	{ "weights", "g_weights", GF_PORT_MULTI, "G's weights from g_step (one edge per G in per-class training)" },
	{ "pairs", "batch", GF_PORT_OPTIONAL, "pix2pix: (A, B) batches; the first one's pairs are the grid's rows, "
	                                      "shown as A | G(A) | B" },
};

static const gf_param_desc params[] = {
	{ "net", GF_PARAM_TABLE, NULL, "G's layer table (the one g_step trains)", NULL },
	{ "every", GF_PARAM_INT, "500", "write a grid every this many steps (and at the end)", "1.." },
	{ "cols", GF_PARAM_INT, "8", "images per row", "1.." },
	{ "rows", GF_PARAM_INT, "0", "rows (0: one per class, else 8)", "0.." },
	{ "bn", GF_PARAM_STR, "eval", "batchnorm in G: eval (running statistics) or batch (the grid's statistics)", "eval|batch" },
	{ "tensorboard", GF_PARAM_BOOL, "true", "also put each grid in the run's TensorBoard event file", NULL },
	{ "dir", GF_PARAM_STR, "samples", "directory for the PNG files, relative to the run directory", NULL },
	{ "backend", GF_PARAM_STR, "", "cpu, cuda or auto (default: the run's backend)", NULL },
	{ "threads", GF_PARAM_INT, "0", "compute threads (0: the run's threads setting)", "0.." },
};

GF_STAGE_EXPORT const gf_stage_desc ganflow_stage = {
	.abi = GF_STAGE_ABI,
	.size = sizeof(gf_stage_desc),
	.name = "sample_grid",
	.doc = "PNG grids from a fixed noise batch every N steps (one row per class for conditional/per-class models)",
	.inputs = inputs,
	.ninputs = sizeof(inputs) / sizeof(inputs[0]),
	.params = params,
	.nparams = sizeof(params) / sizeof(params[0]),
	.create = grid_create,
	.run = grid_run,
	.destroy = grid_destroy,
};
