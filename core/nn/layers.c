/* Layer tables -> layers: parsing, shape inference, parameter layout and
 * the engine-level fusions.
 *
 * A table entry is {"type", positional args..., key = value...}; the
 * reference is docs/nn.md. Each layer reads one node (the previous layer's
 * output unless `input` names another: "x", "label", a layer name or a
 * 1-based table position) and writes its own; concat reads a second one
 * (`with`). Shapes are checked here, once, so forward never fails on a
 * shape: every message names the layer as "layer N (type)" with N the
 * 1-based position in the Lua table. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>

#include "net_internal.h"

/* ---- layer types ---- */

struct spec {
	const char *name;
	layer_kind kind;
	int min_pos, max_pos;       /* positional arguments after the type */
	const char *keys[8];        /* named keys besides name/input */
};

static const struct spec specs[] = {
	{ "linear", L_LINEAR, 2, 2, { "bias", "init" } },
	{ "conv", L_CONV, 3, 5, { "stride", "pad", "bias", "init" } },
	{ "tconv", L_TCONV, 3, 6, { "stride", "pad", "output_padding", "bias", "init" } },
	{ "upsample", L_UPSAMPLE, 0, 1, { "scale", "mode" } },
	{ "bn", L_BN, 1, 3, { "eps", "momentum", "affine", "init" } },
	{ "relu", L_RELU, 0, 0, { 0 } },
	{ "lrelu", L_LRELU, 0, 1, { "slope" } },
	{ "tanh", L_TANH, 0, 0, { 0 } },
	{ "sigmoid", L_SIGMOID, 0, 0, { 0 } },
	{ "dropout", L_DROPOUT, 0, 1, { "p" } },
	{ "dropout2d", L_DROPOUT2D, 0, 1, { "p" } },
	{ "reshape", L_RESHAPE, 1, MAX_SDIMS, { 0 } },
	{ "flatten", L_FLATTEN, 0, 0, { 0 } },
	{ "embedding", L_EMBEDDING, 2, 2, { "init" } },
	{ "concat", L_CONCAT, 0, 0, { "with" } },
	{ "maxpool", L_MAXPOOL, 1, 3, { "stride", "pad" } },
	{ "avgpool", L_AVGPOOL, 1, 3, { "stride", "pad" } },
	{ "softmax", L_SOFTMAX, 0, 0, { 0 } },
};

static const struct {
	const char *alias, *name;
} aliases[] = {
	{ "conv2d", "conv" }, { "deconv", "tconv" }, { "convtranspose", "tconv" },
	{ "conv_transpose", "tconv" }, { "batchnorm", "bn" }, { "bn1d", "bn" }, { "bn2d", "bn" },
	{ "leaky_relu", "lrelu" }, { "leakyrelu", "lrelu" }, { "view", "reshape" },
	{ "embed", "embedding" }, { "cat", "concat" },
};

static const struct spec *find_spec(const char *type)
{
	for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
		if (strcmp(type, aliases[i].alias) == 0)
			type = aliases[i].name;
	for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++)
		if (strcmp(type, specs[i].name) == 0)
			return &specs[i];
	return NULL;
}

/* ---- errors ---- */

static int lerr(int rc, const struct layer *l, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int lerr(int rc, const struct layer *l, const char *fmt, ...)
{
	char msg[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return gf_seterr(rc, "layer %d (%s): %s", l->index + 1, l->type, msg);
}

static char *shape_str(const struct node *n, char *buf, size_t size)
{
	size_t len = (size_t)snprintf(buf, size, "(");
	for (int i = 0; i < n->ndim && len < size; i++)
		len += (size_t)snprintf(buf + len, size - len, "%s%lld", i ? ", " : "", (long long)n->shape[i]);
	if (len < size)
		snprintf(buf + len, size - len, ")");
	return buf;
}

/* ---- argument reading ---- */

struct entry {
	const gf_value *v;
	const struct spec *spec;
	struct layer *l;
	int npos;   /* positional arguments after the type */
};

static const gf_value *pos(const struct entry *e, int i)
{
	return i < e->npos ? gf_value_arg(e->v, (size_t)i + 1) : NULL;
}

static int get_int(const struct entry *e, int i, const char *key, int def, int min, int *out)
{
	const gf_value *v = pos(e, i);
	const char *what = NULL;
	char buf[32];
	if (key && gf_value_get(e->v, key)) {
		if (v)
			return lerr(GF_EPARAM, e->l, "%s given both as argument %d and by name", key, i + 2);
		v = gf_value_get(e->v, key);
	}
	if (v) {
		snprintf(buf, sizeof(buf), "argument %d", i + 2);
		what = key ? key : buf;
	}
	int ok;
	int64_t x = gf_value_as_int(v, def, &ok);
	if (!ok)
		return lerr(GF_EPARAM, e->l, "%s must be an integer, got a %s", what, gf_vtype_name(v->type));
	if (x < min || x > (1 << 30))
		return lerr(GF_EPARAM, e->l, "%s = %lld is out of range (>= %d)", what ? what : key, (long long)x, min);
	*out = (int)x;
	return 0;
}

static int get_num(const struct entry *e, int i, const char *key, double def, float *out)
{
	const gf_value *v = i >= 0 ? pos(e, i) : NULL;
	if (key && gf_value_get(e->v, key)) {
		if (v)
			return lerr(GF_EPARAM, e->l, "%s given both as argument %d and by name", key, i + 2);
		v = gf_value_get(e->v, key);
	}
	int ok;
	double x = gf_value_as_num(v, def, &ok);
	if (!ok)
		return lerr(GF_EPARAM, e->l, "%s must be a number, got a %s", key, gf_vtype_name(v->type));
	*out = (float)x;
	return 0;
}

static int get_bool(const struct entry *e, const char *key, int def, int *out)
{
	const gf_value *v = gf_value_get(e->v, key);
	int ok;
	*out = gf_value_as_bool(v, def, &ok);
	if (!ok)
		return lerr(GF_EPARAM, e->l, "%s must be true or false, got a %s", key, gf_vtype_name(v->type));
	return 0;
}

static int parse_init(const gf_value *v, int def, int *out)
{
	int ok;
	const char *s = gf_value_as_str(v, NULL, &ok);
	if (!ok)
		return -1;
	if (!s)
		*out = def;
	else if (strcmp(s, "torch") == 0 || strcmp(s, "default") == 0)
		*out = INIT_TORCH;
	else if (strcmp(s, "dcgan") == 0 || strcmp(s, "normal") == 0)
		*out = INIT_DCGAN;
	else
		return -1;
	return 0;
}

/* Every named key must be a positional index, name/input, or a key the
 * layer type declares. */
static int check_keys(const struct entry *e)
{
	if (e->v->type != GF_VMAP)
		return 0;
	for (size_t i = 0; i < e->v->u.c.len; i++) {
		const char *k = e->v->u.c.keys[i];
		char *end;
		long idx = strtol(k, &end, 10);
		if (*end == '\0' && idx >= 1 && idx <= e->npos + 1)
			continue;
		if (strcmp(k, "name") == 0 || strcmp(k, "input") == 0)
			continue;
		int known = 0;
		for (int j = 0; j < 8 && e->spec->keys[j]; j++)
			known |= strcmp(k, e->spec->keys[j]) == 0;
		if (!known)
			return lerr(GF_EPARAM, e->l, "unknown key '%s'", k);
	}
	return 0;
}

/* ---- sources ---- */

/* A node id for an `input` / `with` value: "x", "label", the name of an
 * earlier layer or its 1-based table position. */
static int resolve_source(gf_net *net, struct layer *l, const char *key, const gf_value *v, int *node)
{
	if (v->type == GF_VSTR) {
		if (strcmp(v->u.s, "x") == 0) {
			*node = net->x_node;
			return 0;
		}
		if (strcmp(v->u.s, "label") == 0 || strcmp(v->u.s, "labels") == 0) {
			*node = net->label_node;
			return 0;
		}
		for (int i = 0; i < l->index; i++) {
			if (strcmp(net->layers[i].name, v->u.s) == 0) {
				*node = net->layers[i].out;
				return 0;
			}
		}
		return lerr(GF_EPARAM, l, "%s = \"%s\" names no earlier layer (nor \"x\" or \"label\")", key, v->u.s);
	}
	int ok;
	int64_t pos1 = gf_value_as_int(v, 0, &ok);
	if (!ok || v->type == GF_VNIL)
		return lerr(GF_EPARAM, l, "%s must be a layer name or position, got a %s", key, gf_vtype_name(v->type));
	if (pos1 < 1 || pos1 > l->index)
		return lerr(GF_EPARAM, l, "%s = %lld is not an earlier layer (1..%d)", key, (long long)pos1, l->index);
	*node = net->layers[pos1 - 1].out;
	return 0;
}

/* ---- shape inference ---- */

static void set_shape(struct node *n, int ndim, const int64_t *shape)
{
	n->ndim = ndim;
	n->numel = 1;
	for (int i = 0; i < ndim; i++) {
		n->shape[i] = shape[i];
		n->numel *= (size_t)shape[i];
	}
}

static int expect_image(struct layer *l, const struct node *in, int channels)
{
	char s[96];
	if (in->is_label)
		return lerr(GF_ESHAPE, l, "cannot take the labels as input (use an embedding)");
	if (in->ndim != 3)
		return lerr(GF_ESHAPE, l, "expects an image input (C, H, W), got %s", shape_str(in, s, sizeof(s)));
	if (channels > 0 && in->shape[0] != channels)
		return lerr(GF_ESHAPE, l, "expects %d input channels, got %lld", channels, (long long)in->shape[0]);
	return 0;
}

static int infer(gf_net *net, struct layer *l)
{
	struct node *in = &net->nodes[l->in];
	struct node *out = &net->nodes[l->out];
	char s[96], s2[96];
	int64_t sh[MAX_SDIMS];

	if (in->is_label && l->kind != L_EMBEDDING)
		return lerr(GF_ESHAPE, l, "cannot take the labels as input (use an embedding)");
	switch (l->kind) {
	case L_LINEAR:
		if (in->ndim != 1)
			return lerr(GF_ESHAPE, l, "expects a flat input of %d features, got %s (add a flatten)", l->fin,
			            shape_str(in, s, sizeof(s)));
		if (in->shape[0] != l->fin)
			return lerr(GF_ESHAPE, l, "expects %d input features, got %lld", l->fin, (long long)in->shape[0]);
		sh[0] = l->fout;
		set_shape(out, 1, sh);
		l->w_ndim = 2;
		l->w_shape[0] = l->fout;
		l->w_shape[1] = l->fin;
		l->b_n = l->bias ? (size_t)l->fout : 0;
		break;
	case L_CONV:
	case L_TCONV: {
		int rc = expect_image(l, in, l->cin);
		if (rc)
			return rc;
		int64_t h = in->shape[1], w = in->shape[2], ho, wo;
		if (l->kind == L_CONV) {
			ho = (h + 2 * l->pad - l->k) / l->stride + 1;
			wo = (w + 2 * l->pad - l->k) / l->stride + 1;
			if (h + 2 * l->pad < l->k || w + 2 * l->pad < l->k)
				return lerr(GF_ESHAPE, l, "kernel %d does not fit the padded input %s", l->k,
				            shape_str(in, s, sizeof(s)));
		} else {
			if (l->opad >= l->stride && l->opad >= 1)
				return lerr(GF_EPARAM, l, "output_padding %d must be smaller than the stride %d", l->opad,
				            l->stride);
			ho = (h - 1) * l->stride - 2 * l->pad + l->k + l->opad;
			wo = (w - 1) * l->stride - 2 * l->pad + l->k + l->opad;
			if (ho < 1 || wo < 1)
				return lerr(GF_ESHAPE, l, "output would be empty for input %s", shape_str(in, s, sizeof(s)));
		}
		sh[0] = l->cout;
		sh[1] = ho;
		sh[2] = wo;
		set_shape(out, 3, sh);
		l->w_ndim = 4;
		l->w_shape[0] = l->kind == L_CONV ? l->cout : l->cin;
		l->w_shape[1] = l->kind == L_CONV ? l->cin : l->cout;
		l->w_shape[2] = l->w_shape[3] = l->k;
		l->b_n = l->bias ? (size_t)l->cout : 0;
		break;
	}
	case L_UPSAMPLE: {
		int rc = expect_image(l, in, 0);
		if (rc)
			return rc;
		sh[0] = in->shape[0];
		sh[1] = in->shape[1] * l->scale;
		sh[2] = in->shape[2] * l->scale;
		set_shape(out, 3, sh);
		break;
	}
	case L_BN:
		if (in->ndim < 1 || in->ndim > 3)
			return lerr(GF_ESHAPE, l, "expects (C), (C, L) or (C, H, W) input, got %s", shape_str(in, s, sizeof(s)));
		if (in->shape[0] != l->cin)
			return lerr(GF_ESHAPE, l, "expects %d channels, got %lld", l->cin, (long long)in->shape[0]);
		set_shape(out, in->ndim, in->shape);
		if (l->affine) {
			l->w_ndim = 1;
			l->w_shape[0] = l->cin;
			l->b_n = (size_t)l->cin;
		}
		break;
	case L_DROPOUT2D:
		if (in->ndim < 2)
			return lerr(GF_ESHAPE, l, "expects (C, H, W) or (C, L) input, got %s", shape_str(in, s, sizeof(s)));
		/* fall through */
	case L_RELU:
	case L_LRELU:
	case L_TANH:
	case L_SIGMOID:
	case L_DROPOUT:
		set_shape(out, in->ndim, in->shape);
		break;
	case L_SOFTMAX:
		if (in->ndim != 1)
			return lerr(GF_ESHAPE, l, "expects a flat input, got %s", shape_str(in, s, sizeof(s)));
		set_shape(out, 1, in->shape);
		break;
	case L_FLATTEN:
		sh[0] = (int64_t)in->numel;
		set_shape(out, 1, sh);
		break;
	case L_RESHAPE: {
		/* out->shape was filled by the parser; one -1 is inferred */
		int64_t known = 1;
		int infer_at = -1;
		for (int i = 0; i < out->ndim; i++) {
			if (out->shape[i] == -1) {
				if (infer_at >= 0)
					return lerr(GF_EPARAM, l, "only one dimension may be -1");
				infer_at = i;
			} else {
				known *= out->shape[i];
			}
		}
		if (infer_at >= 0 && known > 0 && in->numel % (size_t)known == 0)
			out->shape[infer_at] = (int64_t)in->numel / known;
		int64_t tmp[MAX_SDIMS];
		memcpy(tmp, out->shape, sizeof(tmp));
		set_shape(out, out->ndim, tmp);
		if (out->numel != in->numel)
			return lerr(GF_ESHAPE, l, "cannot reshape %s (%zu values) to %s", shape_str(in, s, sizeof(s)),
			            in->numel, shape_str(out, s2, sizeof(s2)));
		break;
	}
	case L_EMBEDDING:
		if (!in->is_label)
			return lerr(GF_ESHAPE, l, "expects the labels as input (input = \"label\")");
		if (net->classes && net->classes != l->fin)
			return lerr(GF_ESHAPE, l, "has %d classes but the network has %d", l->fin, net->classes);
		net->classes = l->fin;
		sh[0] = l->fout;
		set_shape(out, 1, sh);
		l->w_ndim = 2;
		l->w_shape[0] = l->fin;
		l->w_shape[1] = l->fout;
		break;
	case L_CONCAT: {
		const struct node *b = &net->nodes[l->with];
		if (b->is_label)
			return lerr(GF_ESHAPE, l, "cannot concatenate the labels (use an embedding)");
		if (b->ndim != in->ndim)
			return lerr(GF_ESHAPE, l, "cannot concatenate %s and %s", shape_str(in, s, sizeof(s)),
			            shape_str(b, s2, sizeof(s2)));
		for (int i = 1; i < in->ndim; i++)
			if (b->shape[i] != in->shape[i])
				return lerr(GF_ESHAPE, l, "cannot concatenate %s and %s along the channels",
				            shape_str(in, s, sizeof(s)), shape_str(b, s2, sizeof(s2)));
		memcpy(sh, in->shape, sizeof(sh));
		sh[0] = in->shape[0] + b->shape[0];
		set_shape(out, in->ndim, sh);
		break;
	}
	case L_MAXPOOL:
	case L_AVGPOOL: {
		int rc = expect_image(l, in, 0);
		if (rc)
			return rc;
		if (2 * l->pad > l->k)
			return lerr(GF_EPARAM, l, "pad %d must be at most half the kernel %d", l->pad, l->k);
		int64_t h = in->shape[1], w = in->shape[2];
		if (h + 2 * l->pad < l->k || w + 2 * l->pad < l->k)
			return lerr(GF_ESHAPE, l, "window %d does not fit the input %s", l->k, shape_str(in, s, sizeof(s)));
		sh[0] = in->shape[0];
		sh[1] = (h + 2 * l->pad - l->k) / l->stride + 1;
		sh[2] = (w + 2 * l->pad - l->k) / l->stride + 1;
		set_shape(out, 3, sh);
		break;
	}
	}
	if (l->w_ndim) {
		l->w_n = 1;
		for (int i = 0; i < l->w_ndim; i++)
			l->w_n *= (size_t)l->w_shape[i];
	}
	return 0;
}

/* ---- one table entry ---- */

static int parse_layer(gf_net *net, struct layer *l, const gf_value *v)
{
	struct entry e = { v, NULL, l, 0 };
	int rc;
	l->type = "?";
	if (v->type != GF_VLIST && v->type != GF_VMAP)
		return lerr(GF_EPARAM, l, "is a %s, not a table {\"type\", args...}", gf_vtype_name(v->type));
	const gf_value *t = gf_value_arg(v, 0);
	if (!t || t->type != GF_VSTR)
		return lerr(GF_EPARAM, l, "has no type name as its first item");
	l->type = t->u.s;
	e.spec = find_spec(t->u.s);
	if (!e.spec)
		return lerr(GF_EPARAM, l, "unknown layer type");
	l->type = e.spec->name;
	l->kind = e.spec->kind;
	e.npos = (int)gf_value_nargs(v) - 1;
	if (e.npos < e.spec->min_pos || e.npos > e.spec->max_pos) {
		if (e.spec->min_pos == e.spec->max_pos)
			return lerr(GF_EPARAM, l, "takes %d argument%s, got %d", e.spec->min_pos,
			            e.spec->min_pos == 1 ? "" : "s", e.npos);
		return lerr(GF_EPARAM, l, "takes %d to %d arguments, got %d", e.spec->min_pos, e.spec->max_pos, e.npos);
	}
	if ((rc = check_keys(&e)))
		return rc;

	/* name and sources */
	const gf_value *name = gf_value_get(v, "name");
	if (name) {
		if (name->type != GF_VSTR || !name->u.s[0] || strlen(name->u.s) >= sizeof(l->name))
			return lerr(GF_EPARAM, l, "name must be a non-empty string shorter than %zu", sizeof(l->name));
		if (strcmp(name->u.s, "x") == 0 || strcmp(name->u.s, "label") == 0 || strchr(name->u.s, '.'))
			return lerr(GF_EPARAM, l, "name \"%s\" is reserved or contains a dot", name->u.s);
		for (int i = 0; i < l->index; i++)
			if (strcmp(net->layers[i].name, name->u.s) == 0)
				return lerr(GF_EPARAM, l, "name \"%s\" already used by layer %d", name->u.s, i + 1);
		snprintf(l->name, sizeof(l->name), "%s", name->u.s);
		snprintf(l->key, sizeof(l->key), "%s", name->u.s);
	} else {
		snprintf(l->key, sizeof(l->key), "%d", l->index);
	}
	l->in = l->index ? net->layers[l->index - 1].out : net->x_node;
	l->with = -1;
	const gf_value *src = gf_value_get(v, "input");
	if (src && (rc = resolve_source(net, l, "input", src, &l->in)))
		return rc;
	l->out = 2 + l->index;
	net->nodes[l->out].producer = l->index;

	/* hyper-parameters */
	l->init = net->init;
	const gf_value *init = gf_value_get(v, "init");
	if (init && parse_init(init, net->init, &l->init))
		return lerr(GF_EPARAM, l, "init must be \"torch\" or \"dcgan\"");
	l->bias = 1;
	l->affine = 1;
	l->stride = 1;
	l->up = 1;
	switch (l->kind) {
	case L_LINEAR:
		if ((rc = get_int(&e, 0, NULL, 0, 1, &l->fin)) || (rc = get_int(&e, 1, NULL, 0, 1, &l->fout)) ||
		    (rc = get_bool(&e, "bias", 1, &l->bias)))
			return rc;
		break;
	case L_CONV:
	case L_TCONV:
		if ((rc = get_int(&e, 0, NULL, 0, 1, &l->cin)) || (rc = get_int(&e, 1, NULL, 0, 1, &l->cout)) ||
		    (rc = get_int(&e, 2, NULL, 0, 1, &l->k)) || (rc = get_int(&e, 3, "stride", 1, 1, &l->stride)) ||
		    (rc = get_int(&e, 4, "pad", 0, 0, &l->pad)) || (rc = get_bool(&e, "bias", 1, &l->bias)))
			return rc;
		if (l->kind == L_TCONV && (rc = get_int(&e, 5, "output_padding", 0, 0, &l->opad)))
			return rc;
		break;
	case L_UPSAMPLE: {
		if ((rc = get_int(&e, 0, "scale", 2, 1, &l->scale)))
			return rc;
		int ok;
		const char *mode = gf_value_as_str(gf_value_get(v, "mode"), "nearest", &ok);
		if (!ok || strcmp(mode, "nearest") != 0)
			return lerr(GF_EPARAM, l, "only mode = \"nearest\" is supported");
		break;
	}
	case L_BN:
		if ((rc = get_int(&e, 0, NULL, 0, 1, &l->cin)) || (rc = get_num(&e, 1, "eps", 1e-5, &l->eps)) ||
		    (rc = get_num(&e, 2, "momentum", 0.1, &l->momentum)) || (rc = get_bool(&e, "affine", 1, &l->affine)))
			return rc;
		if (!(l->eps > 0.0f) || !(l->momentum >= 0.0f && l->momentum <= 1.0f))
			return lerr(GF_EPARAM, l, "needs eps > 0 and momentum in [0, 1]");
		break;
	case L_LRELU:
		if ((rc = get_num(&e, 0, "slope", 0.01, &l->slope)))
			return rc;
		if (!(l->slope >= 0.0f))
			return lerr(GF_EPARAM, l, "negative slope %g must be >= 0", (double)l->slope);
		break;
	case L_DROPOUT:
	case L_DROPOUT2D:
		if ((rc = get_num(&e, 0, "p", 0.5, &l->p)))
			return rc;
		if (!(l->p >= 0.0f && l->p < 1.0f))
			return lerr(GF_EPARAM, l, "p = %g must be in [0, 1)", (double)l->p);
		break;
	case L_RESHAPE: {
		struct node *out = &net->nodes[l->out];
		out->ndim = e.npos;
		for (int i = 0; i < e.npos; i++) {
			int ok;
			int64_t d = gf_value_as_int(pos(&e, i), 0, &ok);
			if (!ok || (d < 1 && d != -1))
				return lerr(GF_EPARAM, l, "argument %d must be a positive size or -1", i + 2);
			out->shape[i] = d;
		}
		break;
	}
	case L_EMBEDDING:
		if ((rc = get_int(&e, 0, NULL, 0, 1, &l->fin)) || (rc = get_int(&e, 1, NULL, 0, 1, &l->fout)))
			return rc;
		if (!src)
			l->in = net->label_node;   /* an embedding reads the labels unless told otherwise */
		break;
	case L_CONCAT: {
		const gf_value *with = gf_value_get(v, "with");
		if (!with)
			return lerr(GF_EPARAM, l, "needs with = <layer name, position, \"x\">");
		if ((rc = resolve_source(net, l, "with", with, &l->with)))
			return rc;
		break;
	}
	case L_MAXPOOL:
	case L_AVGPOOL:
		if ((rc = get_int(&e, 0, NULL, 0, 1, &l->k)) || (rc = get_int(&e, 1, "stride", l->k, 1, &l->stride)) ||
		    (rc = get_int(&e, 2, "pad", 0, 0, &l->pad)))
			return rc;
		break;
	default:
		break;
	}
	if ((rc = infer(net, l)))
		return rc;
	net->nodes[l->in].consumers++;
	if (l->with >= 0)
		net->nodes[l->with].consumers++;
	return 0;
}

/* ---- fusions ---- */

static void replace_node(gf_net *net, int from, int to)
{
	for (int i = 0; i < net->nlayers; i++) {
		struct layer *l = &net->layers[i];
		if (l->skip)
			continue;
		if (l->in == from)
			l->in = to;
		if (l->with == from)
			l->with = to;
	}
	if (net->out_node == from)
		net->out_node = to;
}

static void fuse(gf_net *net)
{
	for (int i = 0; i + 1 < net->nlayers; i++) {
		struct layer *a = &net->layers[i];
		if (a->skip)
			continue;
		struct node *ao = &net->nodes[a->out];
		if (ao->consumers != 1 || net->out_node == a->out)
			continue;
		/* the single consumer */
		struct layer *b = NULL;
		for (int j = i + 1; j < net->nlayers; j++)
			if (!net->layers[j].skip && (net->layers[j].in == a->out || net->layers[j].with == a->out))
				b = &net->layers[j];
		if (!b || b->with == a->out)
			continue;
		/* nearest upsample x2 -> 3x3/1/1 conv: sub-pixel conv */
		if (a->kind == L_UPSAMPLE && a->scale == 2 && !a->name[0] && b->kind == L_CONV && b->k == 3 &&
		    b->stride == 1 && b->pad == 1 && b->up == 1 && (net->be->caps & GF_CAP_CONV_UP2)) {
			a->skip = 1;
			b->in = a->in;
			b->up = 2;
			ao->consumers = 0;
			continue;
		}
		/* batchnorm -> relu/lrelu: activation fused into the normalisation */
		if (a->kind == L_BN && !a->name[0] && a->act == GF_ACT_NONE && (b->kind == L_RELU || b->kind == L_LRELU)) {
			a->act = b->kind == L_RELU ? GF_ACT_RELU : GF_ACT_LRELU;
			a->act_param = b->kind == L_RELU ? 0.0f : b->slope;
			b->skip = 1;
			net->nodes[b->out].consumers = 0;
			int old = b->out;
			b->out = a->out;
			ao->consumers = 0;
			replace_node(net, old, a->out);
			/* consumers of the activation now read the batchnorm's node */
			for (int j = 0; j < net->nlayers; j++) {
				struct layer *l = &net->layers[j];
				if (l->skip)
					continue;
				ao->consumers += (l->in == a->out) + (l->with == a->out);
			}
		}
	}
}

/* ---- the whole table ---- */

static const char *const net_keys[] = { "input_shape", "classes", "init", "name", NULL };

int gf_net_parse(gf_net *net, const gf_value *table, const gf_net_opts *opts)
{
	if (!table || (table->type != GF_VLIST && table->type != GF_VMAP))
		return gf_seterr(GF_EPARAM, "network: the layer table must be a table of layers");
	size_t n = gf_value_nargs(table);
	if (n == 0)
		return gf_seterr(GF_EPARAM, "network: the layer table has no layers");
	if (table->type == GF_VMAP) {
		for (size_t i = 0; i < table->u.c.len; i++) {
			const char *k = table->u.c.keys[i];
			char *end;
			long idx = strtol(k, &end, 10);
			if (*end == '\0' && idx >= 1 && (size_t)idx <= n)
				continue;
			int known = 0;
			for (int j = 0; net_keys[j]; j++)
				known |= strcmp(k, net_keys[j]) == 0;
			if (!known)
				return gf_seterr(GF_EPARAM, "network: unknown key '%s' in the layer table", k);
		}
	}
	if (parse_init(gf_value_get(table, "init"), INIT_TORCH, &net->init))
		return gf_seterr(GF_EPARAM, "network: init must be \"torch\" or \"dcgan\"");
	int ok;
	net->classes = (int)gf_value_as_int(gf_value_get(table, "classes"), 0, &ok);
	if (!ok || net->classes < 0)
		return gf_seterr(GF_EPARAM, "network: classes must be a non-negative integer");

	net->nlayers = (int)n;
	net->nnodes = 2 + (int)n;
	net->layers = calloc(n, sizeof(*net->layers));
	net->nodes = calloc((size_t)net->nnodes, sizeof(*net->nodes));
	if (!net->layers || !net->nodes)
		return gf_seterr(-ENOMEM, "network: out of memory");
	net->x_node = 0;
	net->label_node = 1;
	for (int i = 0; i < net->nnodes; i++)
		net->nodes[i].producer = -1;

	/* input shape: the options, else the table's input_shape */
	struct node *x = &net->nodes[0];
	if (opts->input_ndim > 0) {
		if (opts->input_ndim > MAX_SDIMS)
			return gf_seterr(GF_EPARAM, "network: input has more than %d dimensions", MAX_SDIMS);
		set_shape(x, opts->input_ndim, opts->input_shape);
	} else {
		const gf_value *is = gf_value_get(table, "input_shape");
		size_t nd = gf_value_len(is);
		if (!is || is->type != GF_VLIST || nd < 1 || nd > MAX_SDIMS)
			return gf_seterr(GF_EPARAM, "network: no input shape (give input_shape = {...} in the table)");
		int64_t sh[MAX_SDIMS];
		for (size_t i = 0; i < nd; i++) {
			sh[i] = gf_value_as_int(gf_value_at(is, i), 0, &ok);
			if (!ok || sh[i] < 1)
				return gf_seterr(GF_EPARAM, "network: input_shape[%zu] must be a positive integer", i + 1);
		}
		set_shape(x, (int)nd, sh);
	}
	for (int i = 0; i < x->ndim; i++)
		if (x->shape[i] < 1)
			return gf_seterr(GF_EPARAM, "network: input dimension %d is %lld", i, (long long)x->shape[i]);
	struct node *lab = &net->nodes[1];
	lab->is_label = 1;
	lab->ndim = 0;
	lab->numel = 1;

	for (int i = 0; i < net->nlayers; i++) {
		net->layers[i].index = i;
		int rc = parse_layer(net, &net->layers[i], gf_value_arg(table, (size_t)i));
		if (rc)
			return rc;
	}
	net->out_node = net->layers[net->nlayers - 1].out;
	if (net->nodes[net->out_node].is_label)
		return gf_seterr(GF_EPARAM, "network: the output cannot be the labels");
	if (!(opts->flags & GF_NET_NOFUSE))
		fuse(net);

	/* parameter and buffer layout, in table order */
	size_t p = 0, b = 0;
	for (int i = 0; i < net->nlayers; i++) {
		struct layer *l = &net->layers[i];
		l->w_off = l->b_off = l->rm_off = l->rv_off = -1;
		if (l->w_n) {
			l->w_off = (long)p;
			p += l->w_n;
		}
		if (l->b_n) {
			l->b_off = (long)p;
			p += l->b_n;
		}
		if (l->kind == L_BN) {
			l->rm_off = (long)b;
			l->rv_off = (long)(b + (size_t)l->cin);
			b += 2 * (size_t)l->cin;
		}
		if (l->kind == L_BN || l->kind == L_DROPOUT || l->kind == L_DROPOUT2D)
			net->has_stateful = 1;
	}
	net->nparams = p;
	net->nbuffers = b;
	return 0;
}
