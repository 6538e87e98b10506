/* Helpers shared by the data-path tests: temporary directories, small
 * synthetic datasets with known contents, and an in-program sink stage that
 * records what reaches it. Header-only (static functions).
 */
#ifndef GANFLOW_TEST_SHARD_UTIL_H
#define GANFLOW_TEST_SHARD_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <ganflow/dataset.h>
#include <ganflow/decode.h>
#include <ganflow/err.h>

/* Helpers a test file may not use. */
#define TEST_FN static __attribute__((unused))

/* ---- temporary directories ---- */

TEST_FN char *tmpdir_make(void)
{
	const char *base = getenv("TMPDIR");
	char tmpl[4096];
	snprintf(tmpl, sizeof(tmpl), "%s/gf-data-test-XXXXXX", base && base[0] ? base : "/tmp");
	char *d = mkdtemp(tmpl);
	assert_non_null(d);
	return strdup(d);
}

TEST_FN char *path_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
TEST_FN char *path_fmt(const char *fmt, ...)
{
	char buf[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return strdup(buf);
}

/* ---- known contents ---- */

/* Pixel i of the raw record with key k. */
static inline uint8_t raw_px(uint64_t k, size_t i)
{
	return (uint8_t)((k * 31u + i * 7u + (i >> 5)) & 255u);
}

/* Label of record k in the synthetic datasets. */
static inline int32_t label_of(uint64_t k, uint32_t nclasses)
{
	return nclasses ? (int32_t)((k * 3u + k / 11u) % nclasses) : -1;
}

/* A smooth image for JPEG records: gradients, so quality 95 keeps PSNR high. */
TEST_FN void smooth_image(uint8_t *pix, int w, int h, int c, uint64_t k)
{
	for (int y = 0; y < h; y++)
		for (int x = 0; x < w; x++)
			for (int ch = 0; ch < c; ch++)
				pix[((size_t)y * w + x) * c + ch] =
				    (uint8_t)(128 + 100 * sin(0.05 * x + 0.3 * ch + 0.01 * (double)k) * cos(0.04 * y));
}

typedef struct ds_spec {
	uint64_t n;
	uint32_t nclasses;
	uint64_t shard_records;
	int encoding;
	int w, h, c;
	int class_sorted; /* labels k * nclasses / n (as a folder import) instead of label_of */
} ds_spec;

/* The label of record k of a dataset made by make_dataset. */
static inline int32_t spec_label(const ds_spec *s, uint64_t k)
{
	return s->class_sorted && s->nclasses ? (int32_t)(k * s->nclasses / s->n) : label_of(k, s->nclasses);
}

/* Writes a dataset of s->n records: raw records hold raw_px(key, i), JPEG
 * records smooth_image(key) at quality 95; label spec_label(s, key). */
TEST_FN void make_dataset(const char *out, const ds_spec *s)
{
	gf_writer_opts wo = { .shard_records = s->shard_records, .nclasses = s->nclasses, .overwrite = 1 };
	gf_dataset_writer *w;
	assert_int_equal(gf_dataset_writer_open(out, &wo, &w), 0);
	size_t n = (size_t)s->w * s->h * s->c;
	uint8_t *pix = malloc(n);
	gf_decoder *d;
	assert_int_equal(gf_decoder_create(&d), 0);
	for (uint64_t k = 0; k < s->n; k++) {
		gf_record_header h = { .label = spec_label(s, k), .encoding = (uint32_t)s->encoding,
		                       .height = (uint32_t)s->h, .width = (uint32_t)s->w, .channels = (uint32_t)s->c };
		if (s->encoding == GF_ENC_RAW) {
			for (size_t i = 0; i < n; i++)
				pix[i] = raw_px(k, i);
			h.payload = (uint32_t)n;
			assert_int_equal(gf_dataset_writer_add(w, &h, pix), 0);
		} else {
			const uint8_t *jpg;
			size_t len;
			smooth_image(pix, s->w, s->h, s->c, k);
			assert_int_equal(gf_jpeg_encode(d, pix, s->w, s->h, s->c, 95, GF_SUBSAMP_444, &jpg, &len), 0);
			h.payload = (uint32_t)len;
			assert_int_equal(gf_dataset_writer_add(w, &h, jpg), 0);
		}
	}
	gf_decoder_destroy(d);
	free(pix);
	assert_int_equal(gf_dataset_writer_finish(w), 0);
}

TEST_FN double psnr_u8(const uint8_t *a, const uint8_t *b, size_t n)
{
	double se = 0;
	for (size_t i = 0; i < n; i++) {
		double d = (double)a[i] - b[i];
		se += d * d;
	}
	if (se == 0)
		return 1e9;
	return 10 * log10(255.0 * 255.0 / (se / (double)n));
}

/* Runs a shell command; returns its exit status (-1 when it did not exit). */
TEST_FN int run_cmd(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
TEST_FN int run_cmd(const char *fmt, ...)
{
	char buf[8192];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	int st = system(buf);
	return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Contents of a small file (NUL-terminated, malloc'ed). */
TEST_FN char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	char *b = malloc(1 << 20);
	size_t n = fread(b, 1, (1 << 20) - 1, f);
	b[n] = '\0';
	fclose(f);
	return b;
}

/* The ganflow command of this build. */
TEST_FN const char *ganflow_bin(void)
{
	static char buf[4096];
	const char *bd = getenv("GF_BINARY_DIR");
	snprintf(buf, sizeof(buf), "%s/ganflow", bd ? bd : ".");
	return buf;
}

/* ---- an in-program sink stage and pipelines ending in it ---- */

#include <ganflow/graph.h>
#include <ganflow/stage.h>

typedef struct got {
	uint64_t key, pos;
	int64_t label, epoch;
	uint32_t flags;
	const char *source;
	int ntensors;
	gf_tensor t0;
	uint64_t sum;       /* FNV-1a of t[0]'s bytes */
	int32_t hdr[4];     /* t[1] of record messages */
	int32_t labels[64]; /* t[1] of batch messages (first 64) */
} got;

static got *sink_items;
static size_t sink_n, sink_cap;
/* optional check of every message; returns 0 or a failure text */
static const char *(*sink_check)(const gf_msg *m);
static size_t sink_bad;
static char sink_why[512];

static uint64_t fnv1a(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

static int sink_create(gf_ctx *ctx, const gf_value *p, void **self)
{
	(void)ctx;
	(void)p;
	*self = NULL;
	return 0;
}

static int sink_run(void *self, gf_ctx *ctx)
{
	(void)self;
	for (;;) {
		gf_msg *m;
		int rc = gf_pop(ctx, 0, &m);
		if (rc)
			return rc;
		if (sink_n == sink_cap) {
			sink_cap = sink_cap ? 2 * sink_cap : 1024;
			sink_items = realloc(sink_items, sink_cap * sizeof(got));
		}
		got *g = &sink_items[sink_n++];
		memset(g, 0, sizeof(*g));
		g->key = m->key;
		g->pos = m->pos;
		g->label = m->label;
		g->epoch = m->epoch;
		g->flags = m->flags;
		g->source = m->source;
		g->ntensors = m->ntensors;
		if (m->ntensors > 0) {
			g->t0 = m->t[0];
			g->sum = fnv1a(m->t[0].data, gf_tensor_bytes(&m->t[0]));
		}
		if (m->ntensors > 1 && m->t[1].dtype == GF_I32) {
			const int32_t *v = m->t[1].data;
			int64_t n = gf_tensor_numel(&m->t[1]);
			for (int64_t i = 0; i < n && i < 64; i++) {
				if (i < 4)
					g->hdr[i] = v[i];
				g->labels[i] = v[i];
			}
		}
		if (sink_check) {
			const char *why = sink_check(m);
			if (why && !sink_bad++)
				snprintf(sink_why, sizeof(sink_why), "key %llu: %s", (unsigned long long)m->key, why);
		}
		gf_msg_release(m);
	}
}

static const gf_port_desc sink_inputs[] = { { "in", "any", 0, "anything" } };

static const gf_stage_desc sink_desc = {
	.abi = GF_STAGE_ABI,
	.size = sizeof(gf_stage_desc),
	.name = "test_sink",
	.doc = "records what reaches it",
	.inputs = sink_inputs,
	.ninputs = 1,
	.create = sink_create,
	.run = sink_run,
};

TEST_FN void sink_reset(void)
{
	free(sink_items);
	sink_items = NULL;
	sink_n = sink_cap = 0;
	sink_bad = 0;
	sink_why[0] = '\0';
	sink_check = NULL;
}

typedef struct step {
	const char *stage;   /* stage name */
	const char *in, *out;/* ports */
	gf_value params;     /* GF_VMAP (freed by run_chain) */
	int workers;
} step;

/* Runs steps[0] -> steps[1] -> ... -> sink; returns gf_graph_run's result
 * and the graph's error in err. */
TEST_FN int run_chain(step *steps, int n, const gf_run_info *info, char *err, size_t errsize)
{
	gf_graph *g;
	int rc, prev = -1, node;
	err[0] = '\0';
	assert_int_equal(gf_graph_create(&g), 0);
	for (int i = 0; i < n; i++) {
		char name[32];
		snprintf(name, sizeof(name), "%s%d", steps[i].stage, i);
		rc = gf_graph_add(g, steps[i].stage, name, &steps[i].params, steps[i].workers ? steps[i].workers : 1, &node);
		gf_value_free(&steps[i].params);
		if (rc)
			goto out;
		if (prev >= 0 && (rc = gf_graph_connect(g, prev, steps[i - 1].out, node, steps[i].in, NULL)))
			goto out;
		prev = node;
	}
	if ((rc = gf_graph_add_desc(g, &sink_desc, "sink", NULL, 1, &node)) ||
	    (rc = gf_graph_connect(g, prev, steps[n - 1].out, node, "in", NULL)))
		goto out;
	gf_run_info def = { .rank = 0, .world = 1, .seed = 1 };
	rc = gf_graph_run(g, info ? info : &def, GF_GRAPH_QUIET);
out:
	for (int i = 0; i < n; i++)
		gf_value_free(&steps[i].params);
	snprintf(err, errsize, "%s", gf_graph_error(g));
	gf_graph_destroy(g);
	return rc;
}

/* Map builder: kv("path", gf_value_str(p), "epochs", gf_value_int(1), NULL). */
TEST_FN gf_value kv(const char *key, ...)
{
	gf_value m = gf_value_map();
	va_list ap;
	va_start(ap, key);
	for (const char *k = key; k; k = va_arg(ap, const char *)) {
		gf_value v = va_arg(ap, gf_value);
		assert_int_equal(gf_value_set(&m, k, v), 0);
	}
	va_end(ap);
	return m;
}

TEST_FN gf_value int_list(int n, const int64_t *v)
{
	gf_value l = gf_value_list();
	for (int i = 0; i < n; i++)
		gf_value_append(&l, gf_value_int(v[i]));
	return l;
}

#endif
