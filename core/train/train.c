/* Helpers shared by the training stages: backends, networks, weights and
 * state messages, restoring from checkpoints. See <ganflow/train.h>. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>
#include <ganflow/safetensors.h>
#include <ganflow/train.h>

/* ---- backends and networks ---- */

static int open_backend(gf_ctx *ctx, const gf_value *params, int threads, gf_backend **out)
{
	const gf_run_info *run = gf_ctx_run(ctx);
	const char *name = gf_value_as_str(gf_value_get(params, "backend"), "", NULL);
	if (!name[0])
		name = run->backend && run->backend[0] ? run->backend : "auto";
	gf_backend_opts opts = { .threads = threads > 0 ? threads : run->threads };
	const char *prec = gf_value_as_str(gf_value_get(params, "precision"), "fp32", NULL);
	const char *layout = gf_value_as_str(gf_value_get(params, "layout"), "auto", NULL);
	if (gf_precision_parse(prec, &opts.precision) || gf_layout_parse(layout, &opts.layout))
		return gf_fail(ctx, "%s", gf_errmsg());
	int rc = gf_backend_open(name, &opts, out);
	if (rc)
		return gf_fail(ctx, "backend '%s': %s", name, gf_errmsg()[0] ? gf_errmsg() : gf_strerror(rc)), rc;
	return 0;
}

int gf_train_backend(gf_ctx *ctx, const gf_value *params, gf_backend **out)
{
	return open_backend(ctx, params, (int)gf_value_as_int(gf_value_get(params, "threads"), 0, NULL), out);
}

int gf_train_copy_backend(gf_ctx *ctx, const gf_value *params, gf_backend **out)
{
	return open_backend(ctx, params, 1, out);
}

int gf_train_async(const gf_backend *be)
{
	return GF_BACKEND_HAS(be, event_create) && GF_BACKEND_HAS(be, event_record) && GF_BACKEND_HAS(be, event_wait) &&
	       GF_BACKEND_HAS(be, event_sync) && GF_BACKEND_HAS(be, copy_async) && GF_BACKEND_HAS(be, pinned_alloc) &&
	       GF_BACKEND_HAS(be, device_alloc) && GF_BACKEND_HAS(be, loss_dev) && GF_BACKEND_HAS(be, reduce_dev);
}

int gf_train_pinned_allocator(gf_backend *be, gf_allocator *out)
{
	if (!GF_BACKEND_HAS(be, pinned_alloc) || !GF_BACKEND_HAS(be, pinned_free))
		return GF_EUNSUPPORTED;
	*out = (gf_allocator){ be->ops->pinned_alloc, be->ops->pinned_free, be };
	return 0;
}

int gf_train_device_allocator(gf_backend *be, gf_allocator *out)
{
	if (!GF_BACKEND_HAS(be, device_alloc) || !GF_BACKEND_HAS(be, device_free))
		return GF_EUNSUPPORTED;
	*out = (gf_allocator){ be->ops->device_alloc, be->ops->device_free, be };
	return 0;
}

int gf_train_net(gf_ctx *ctx, gf_backend *be, const gf_value *table, int max_batch, const char *what,
                 uint64_t seed, uint64_t stream, gf_net **out)
{
	gf_net_opts o = { .max_batch = max_batch };
	gf_rng rng;
	int rc = gf_net_create(out, be, table, &o);
	if (rc)
		return gf_fail(ctx, "%s: %s", what, gf_errmsg()), rc;
	gf_rng_init(&rng, seed, stream);
	rc = gf_net_init(*out, &rng);
	if (rc) {
		gf_fail(ctx, "%s: %s", what, gf_errmsg());
		gf_net_destroy(*out);
		*out = NULL;
		return rc;
	}
	gf_rng_init(gf_net_rng(*out), seed, stream ^ 0x9e3779b97f4a7c15ull);
	return 0;
}

uint64_t gf_train_stream(gf_ctx *ctx, const char *purpose)
{
	uint64_t h = 1469598103934665603ull;
	const char *parts[3] = { gf_ctx_name(ctx), "/", purpose };
	for (int i = 0; i < 3; i++)
		for (const unsigned char *p = (const unsigned char *)parts[i]; *p; p++)
			h = (h ^ *p) * 1099511628211ull;
	return h;
}

/* ---- weights messages ---- */

int gf_weights_pack(gf_msg *m, gf_net *net, int64_t version)
{
	size_t np, nb;
	gf_net_block(net, GF_PARAMS, &np);
	gf_net_block(net, GF_BUFFERS, &nb);
	int64_t sp[1] = { (int64_t)np }, sb[1] = { (int64_t)nb };
	float *p = gf_msg_tensor(m, 0, GF_F32, 1, sp);
	float *b = gf_msg_tensor(m, 1, GF_F32, 1, sb);
	if (!p || !b)
		return gf_seterr(-ENOMEM, "weights message: out of memory");
	int rc = gf_net_read(net, GF_PARAMS, p);
	if (!rc && nb)
		rc = gf_net_read(net, GF_BUFFERS, b);
	m->version = version;
	return rc;
}

int gf_weights_pack_dev(gf_msg *m, gf_net *net, int64_t version)
{
	gf_backend *be = gf_net_backend(net);
	size_t np, nb;
	float *sp = gf_net_block(net, GF_PARAMS, &np), *sb = gf_net_block(net, GF_BUFFERS, &nb);
	int64_t shp[1] = { (int64_t)np }, shb[1] = { (int64_t)nb };
	float *p = gf_msg_tensor(m, 0, GF_F32, 1, shp);
	float *b = gf_msg_tensor(m, 1, GF_F32, 1, shb);
	if (!p || !b)
		return gf_seterr(-ENOMEM, "weights message: out of device memory");
	for (int i = 0; i < 2; i++) {
		m->t[i].device = be->device;
		m->t[i].device_index = be->device_index;
	}
	int rc = be->ops->copy(be, p, sp, np * sizeof(float), GF_COPY_D2D);
	if (!rc && nb)
		rc = be->ops->copy(be, b, sb, nb * sizeof(float), GF_COPY_D2D);
	m->version = version;
	return rc;
}

int gf_weights_unpack(gf_net *net, const gf_msg *m)
{
	size_t np, nb;
	gf_net_block(net, GF_PARAMS, &np);
	gf_net_block(net, GF_BUFFERS, &nb);
	if (m->ntensors < 2 || m->t[0].dtype != GF_F32 || gf_tensor_numel(&m->t[0]) != (int64_t)np ||
	    gf_tensor_numel(&m->t[1]) != (int64_t)nb)
		return gf_seterr(GF_ESHAPE,
		                 "weights message holds %lld parameters and %lld buffer values, the network has %zu and %zu "
		                 "(are both ends built from the same layer table?)",
		                 m->ntensors > 0 ? (long long)gf_tensor_numel(&m->t[0]) : 0LL,
		                 m->ntensors > 1 ? (long long)gf_tensor_numel(&m->t[1]) : 0LL, np, nb);
	if (m->event) {
		/* device memory of the producer's device: ordered after its event
		 * on this network's backend, copied without the host */
		gf_backend *be = gf_net_backend(net);
		if (!GF_BACKEND_HAS(be, event_wait))
			return gf_seterr(GF_EPARAM, "weights message in device memory reached a backend without events (%s)",
			                 be->ops->name);
		int rc = be->ops->event_wait(be, m->event);
		if (!rc)
			rc = be->ops->copy(be, gf_net_block(net, GF_PARAMS, NULL), m->t[0].data, np * sizeof(float),
			                   GF_COPY_D2D);
		if (!rc && nb)
			rc = be->ops->copy(be, gf_net_block(net, GF_BUFFERS, NULL), m->t[1].data, nb * sizeof(float),
			                   GF_COPY_D2D);
		return rc;
	}
	int rc = gf_net_write(net, GF_PARAMS, m->t[0].data);
	if (!rc && nb)
		rc = gf_net_write(net, GF_BUFFERS, m->t[1].data);
	return rc;
}

/* ---- state messages ---- */

struct gf_state {
	gf_st_entry *e;     /* (n) entries; names and data owned */
	size_t n, cap;
	char **meta;        /* key, value, ..., NULL; owned */
	size_t nmeta;
};

int gf_state_create(gf_state **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

void gf_state_clear(gf_state *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free((char *)s->e[i].name);
		free(s->e[i].t.data);
	}
	s->n = 0;
	for (size_t i = 0; i < s->nmeta; i++)
		free(s->meta[i]);
	s->nmeta = 0;
	if (s->meta)
		s->meta[0] = NULL;
}

void gf_state_destroy(gf_state *s)
{
	if (!s)
		return;
	gf_state_clear(s);
	free(s->e);
	free(s->meta);
	free(s);
}

/* Appends an entry, copying name and data. */
static int add(gf_state *s, const char *name, gf_dtype dt, int ndim, const int64_t *shape, const void *data)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 32;
		gf_st_entry *e = realloc(s->e, cap * sizeof(*e));
		if (!e)
			return -ENOMEM;
		s->e = e;
		s->cap = cap;
	}
	gf_tensor t = gf_tensor_make(NULL, dt, ndim, shape);
	size_t bytes = gf_tensor_bytes(&t);
	char *nm = strdup(name);
	void *d = malloc(bytes ? bytes : 1);
	if (!nm || !d) {
		free(nm);
		free(d);
		return -ENOMEM;
	}
	memcpy(d, data, bytes);
	t.data = d;
	s->e[s->n].name = nm;
	s->e[s->n].t = t;
	s->n++;
	return 0;
}

int gf_state_add_net(gf_state *s, const char *prefix, gf_net *net, gf_optim *opt)
{
	gf_ckpt_part part = { prefix, net, opt };
	gf_ckpt_entries ce;
	int rc = gf_ckpt_collect(&part, 1, &ce);
	for (size_t i = 0; i < ce.n && !rc; i++)
		rc = add(s, ce.e[i].name, ce.e[i].t.dtype, ce.e[i].t.ndim, ce.e[i].t.shape, ce.e[i].t.data);
	gf_ckpt_entries_free(&ce);
	return rc;
}

int gf_state_add_i64(gf_state *s, const char *name, const int64_t *v, int n)
{
	int64_t shape[1] = { n };
	return add(s, name, GF_I64, 1, shape, v);
}

int gf_state_add_rng(gf_state *s, const char *name, const gf_rng *r)
{
	int64_t v[3] = { (int64_t)r->seed, (int64_t)r->stream, (int64_t)r->offset };
	return gf_state_add_i64(s, name, v, 3);
}

int gf_state_meta(gf_state *s, const char *key, const char *value)
{
	char **m = realloc(s->meta, (s->nmeta + 3) * sizeof(*m));
	if (!m)
		return -ENOMEM;
	s->meta = m;
	m[s->nmeta] = strdup(key);
	m[s->nmeta + 1] = strdup(value);
	if (!m[s->nmeta] || !m[s->nmeta + 1]) {
		free(m[s->nmeta]);
		free(m[s->nmeta + 1]);
		m[s->nmeta] = NULL;
		return -ENOMEM;
	}
	s->nmeta += 2;
	m[s->nmeta] = NULL;
	return 0;
}

int gf_state_push(gf_state *s, gf_ctx *ctx, int port, int64_t step)
{
	void *img = NULL;
	size_t len = 0;
	int rc = gf_st_encode(s->e, s->n, (const char *const *)s->meta, &img, &len);
	if (rc)
		return gf_fail(ctx, "checkpoint state: %s", gf_errmsg());
	gf_msg *m;
	rc = gf_msg_get(ctx, port, &m);
	if (rc) {
		free(img);
		return rc;
	}
	int64_t shape[1] = { (int64_t)len };
	uint8_t *dst = gf_msg_tensor(m, 0, GF_U8, 1, shape);
	if (!dst) {
		free(img);
		gf_msg_release(m);
		return gf_fail(ctx, "checkpoint state: out of memory (%zu bytes)", len);
	}
	memcpy(dst, img, len);
	free(img);
	m->step = step;
	m->source = gf_ctx_name(ctx);
	gf_state_clear(s);
	return gf_push(ctx, port, m);
}

const char *gf_train_key(gf_ctx *ctx, const char *suffix, char *buf, size_t size)
{
	snprintf(buf, size, "%s.%s", gf_ctx_name(ctx), suffix);
	return buf;
}

int gf_state_describe(gf_state *s, gf_ctx *ctx, const char *role, const char *table, int cls)
{
	char k[160], c[32];
	snprintf(c, sizeof(c), "%d", cls);
	int rc = gf_state_meta(s, gf_train_key(ctx, "role", k, sizeof(k)), role);
	if (!rc)
		rc = gf_state_meta(s, gf_train_key(ctx, "table", k, sizeof(k)), table);
	if (!rc)
		rc = gf_state_meta(s, gf_train_key(ctx, "class", k, sizeof(k)), c);
	return rc;
}

/* ---- finite checks ---- */

enum { FINITE_CHUNK = 1024 };

/* 1 when one of FINITE_CHUNK values is NaN or infinite: the largest
 * magnitude bit pattern has every exponent bit set. A fixed trip count of
 * integer max operations, which GCC's -O2 vectoriser takes. */
static int chunk_nonfinite(const float *x)
{
	uint32_t top = 0;
	for (size_t j = 0; j < FINITE_CHUNK; j++) {
		uint32_t u;
		memcpy(&u, x + j, sizeof(u));
		u &= 0x7fffffffu;
		top = u > top ? u : top;
	}
	return top >= 0x7f800000u;
}

size_t gf_finite_find(const float *x, size_t n)
{
	size_t i = 0;
	for (; i + FINITE_CHUNK <= n; i += FINITE_CHUNK)
		if (chunk_nonfinite(x + i))
			break;
	for (; i < n; i++)
		if (!isfinite(x[i]))
			return i;
	return n;
}

/* "nan", "inf" or "-inf" */
static const char *nonfinite_str(float v)
{
	return isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
}

int gf_train_check_block(const gf_net *net, gf_block b, const float *host, const char *prefix)
{
	size_t n, nv;
	gf_net_block((gf_net *)net, b, &n);
	size_t i = gf_finite_find(host, n);
	if (i == n)
		return 0;
	const gf_view *v = gf_net_views(net, b, &nv);
	const char *dot = prefix && prefix[0] ? "." : "";
	prefix = prefix ? prefix : "";
	for (size_t k = 0; k < nv; k++)
		if (i >= v[k].offset && i < v[k].offset + v[k].numel)
			return gf_seterr(GF_ENONFINITE, "%s%s%s[%zu] is %s", prefix, dot, v[k].name, i - v[k].offset,
			                 nonfinite_str(host[i]));
	return gf_seterr(GF_ENONFINITE, "%s%s%s value %zu is %s", prefix, dot, b == GF_BUFFERS ? "buffer" : "parameter",
	                 i, nonfinite_str(host[i]));
}

int gf_train_check_net(gf_net *net, const char *prefix)
{
	static const gf_block blocks[2] = { GF_PARAMS, GF_BUFFERS };
	int rc = 0;
	for (int k = 0; k < 2 && !rc; k++) {
		size_t n;
		gf_net_block(net, blocks[k], &n);
		if (!n)
			continue;
		float *host = malloc(n * sizeof(float));
		if (!host)
			return gf_seterr(-ENOMEM, "finite check: out of memory");
		rc = gf_net_read(net, blocks[k], host);
		if (!rc)
			rc = gf_train_check_block(net, blocks[k], host, prefix);
		free(host);
	}
	return rc;
}

int gf_state_check_finite(const gf_state *s)
{
	for (size_t k = 0; k < s->n; k++) {
		const gf_tensor *t = &s->e[k].t;
		if (t->dtype != GF_F32)
			continue;
		size_t n = (size_t)gf_tensor_numel(t), i = gf_finite_find(t->data, n);
		if (i < n)
			return gf_seterr(GF_ENONFINITE, "%s[%zu] is %s", s->e[k].name, i,
			                 nonfinite_str(((const float *)t->data)[i]));
	}
	return 0;
}

/* ---- restoring ---- */

int gf_train_resume(gf_ctx *ctx, gf_net *net, gf_optim *opt, int64_t *step)
{
	const char *path = gf_ctx_run(ctx)->resume;
	char k[160];
	if (!path)
		return 0;
	int rc = gf_state_load_net(path, gf_train_key(ctx, "net", k, sizeof(k)), net, opt);
	if (rc)
		return gf_fail(ctx, "resume from %s: %s", path, gf_errmsg()), rc;
	return gf_train_resume_i64(ctx, "step", step, 1);
}

int gf_train_resume_i64(gf_ctx *ctx, const char *suffix, int64_t *v, int n)
{
	const char *path = gf_ctx_run(ctx)->resume;
	char k[160];
	if (!path)
		return 0;
	int rc = gf_state_read_i64(path, gf_train_key(ctx, suffix, k, sizeof(k)), v, n);
	if (rc)
		return gf_fail(ctx, "resume: %s", gf_errmsg()), rc;
	return 0;
}

int gf_train_resume_rng(gf_ctx *ctx, const char *suffix, gf_rng *r)
{
	int64_t v[3] = { (int64_t)r->seed, (int64_t)r->stream, (int64_t)r->offset };
	int rc = gf_train_resume_i64(ctx, suffix, v, 3);
	if (rc == 0) {
		r->seed = (uint64_t)v[0];
		r->stream = (uint64_t)v[1];
		r->offset = (uint64_t)v[2];
	}
	return rc;
}

int gf_state_load_net(const char *path, const char *prefix, gf_net *net, gf_optim *opt)
{
	gf_ckpt_part part = { prefix, net, opt };
	return gf_ckpt_load(path, &part, 1, NULL, NULL);
}

int gf_state_read_i64(const char *path, const char *name, int64_t *v, int n)
{
	gf_st_file *f;
	int64_t shape[1] = { n };
	int rc = gf_st_open(&f, path);
	if (rc)
		return rc;
	rc = gf_st_read(f, name, GF_I64, 1, shape, v);
	if (rc == GF_ENOTFOUND)
		gf_seterr(rc, "checkpoint %s: no tensor '%s'", path, name);
	gf_st_close(f);
	return rc;
}
