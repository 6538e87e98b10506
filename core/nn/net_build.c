/* Layer tables -> layers: the table walk, the keys every layer takes,
 * the engine-level fusions and the parameter layout.
 *
 * A table entry is {"type", positional args..., key = value...}; the
 * reference is docs/nn.md. The type picks a layer kind (layers/registry.c);
 * this file handles what every layer shares (name, input, init, argument
 * count, unknown keys) and leaves the rest to the kind: its parse reads the
 * arguments, its shapes infers the output shape and declares parameters.
 * Each layer reads one node (the previous layer's output unless `input`
 * names another: "x", "label", a layer name or a 1-based table position)
 * and writes its own. Shapes are checked here, once, so forward never
 * fails on a shape: every message names the layer as "layer N (type)" with
 * N the 1-based position in the Lua table. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>

#include "net_internal.h"

/* ---- keys every layer takes ---- */

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
	else if (strcmp(s, "msr") == 0)
		*out = INIT_MSR;
	else
		return -1;
	return 0;
}

/* Every named key must be a positional index, name/input, or a key the
 * layer kind declares. */
static int check_keys(const gf_layer_args *a)
{
	if (a->v->type != GF_VMAP)
		return 0;
	for (size_t i = 0; i < a->v->u.c.len; i++) {
		const char *k = a->v->u.c.keys[i];
		char *end;
		long idx = strtol(k, &end, 10);
		if (*end == '\0' && idx >= 1 && idx <= a->npos + 1)
			continue;
		if (strcmp(k, "name") == 0 || strcmp(k, "input") == 0)
			continue;
		int known = 0;
		for (size_t j = 0; j < sizeof(a->l->kind->keys) / sizeof(a->l->kind->keys[0]) && a->l->kind->keys[j]; j++)
			known |= strcmp(k, a->l->kind->keys[j]) == 0;
		if (!known && strcmp(k, "sn") == 0)
			return gf_layer_err(GF_EPARAM, a->l, "sn is not supported on this kind");
		if (!known)
			return gf_layer_err(GF_EPARAM, a->l, "unknown key '%s'", k);
	}
	return 0;
}

static int parse_name(gf_net *net, struct layer *l, const gf_value *v)
{
	const gf_value *name = gf_value_get(v, "name");
	if (!name) {
		snprintf(l->key, sizeof(l->key), "%d", l->index);
		return 0;
	}
	if (name->type != GF_VSTR || !name->u.s[0] || strlen(name->u.s) >= sizeof(l->name))
		return gf_layer_err(GF_EPARAM, l, "name must be a non-empty string shorter than %zu", sizeof(l->name));
	if (strcmp(name->u.s, "x") == 0 || strcmp(name->u.s, "label") == 0 || strchr(name->u.s, '.'))
		return gf_layer_err(GF_EPARAM, l, "name \"%s\" is reserved or contains a dot", name->u.s);
	for (int i = 0; i < l->index; i++)
		if (strcmp(net->k.layers[i].name, name->u.s) == 0)
			return gf_layer_err(GF_EPARAM, l, "name \"%s\" already used by layer %d", name->u.s, i + 1);
	snprintf(l->name, sizeof(l->name), "%s", name->u.s);
	snprintf(l->key, sizeof(l->key), "%s", name->u.s);
	return 0;
}

/* ---- one table entry ---- */

static int parse_layer(gf_net *net, struct layer *l, const gf_value *v)
{
	gf_layer_args a = { v, l, 0 };
	int rc;
	l->type = "?";
	if (v->type != GF_VLIST && v->type != GF_VMAP)
		return gf_layer_err(GF_EPARAM, l, "is a %s, not a table {\"type\", args...}", gf_vtype_name(v->type));
	const gf_value *t = gf_value_arg(v, 0);
	if (!t || t->type != GF_VSTR)
		return gf_layer_err(GF_EPARAM, l, "has no type name as its first item");
	l->type = t->u.s;
	const gf_layer_kind *k = gf_layer_kind_find(t->u.s);
	if (!k)
		return gf_layer_err(GF_EPARAM, l, "unknown layer type");
	l->type = k->name;
	l->kind = k;
	a.npos = (int)gf_value_nargs(v) - 1;
	if (a.npos < k->min_pos || a.npos > k->max_pos) {
		if (k->min_pos == k->max_pos)
			return gf_layer_err(GF_EPARAM, l, "takes %d argument%s, got %d", k->min_pos,
			                    k->min_pos == 1 ? "" : "s", a.npos);
		return gf_layer_err(GF_EPARAM, l, "takes %d to %d arguments, got %d", k->min_pos, k->max_pos, a.npos);
	}
	if ((rc = check_keys(&a)) || (rc = parse_name(net, l, v)))
		return rc;

	/* sources: a kind that reads the labels reads them unless told otherwise */
	const gf_value *src = gf_value_get(v, "input");
	if (src) {
		if ((rc = gf_layer_source(&net->k, l, "input", src, &l->in)))
			return rc;
	} else if (k->flags & GF_LK_LABELS) {
		l->in = net->k.label_node;
	} else {
		l->in = l->index ? net->k.layers[l->index - 1].out : net->k.x_node;
	}
	l->with = -1;
	l->out = 2 + l->index;
	net->k.nodes[l->out].producer = l->index;

	l->init = net->init;
	const gf_value *init = gf_value_get(v, "init");
	if (init && parse_init(init, net->init, &l->init))
		return gf_layer_err(GF_EPARAM, l, "init must be \"torch\", \"dcgan\" or \"msr\"");
	/* init_gain: a key of the kinds whose init knows "msr" (check_keys) */
	if ((rc = gf_layer_arg_num(&a, -1, "init_gain", 1.0, &l->init_gain)))
		return rc;
	if (gf_value_get(v, "init_gain") && l->init != INIT_MSR)
		return gf_layer_err(GF_EPARAM, l, "init_gain needs init = \"msr\"");
	if (!(l->init_gain >= 0.0f))
		return gf_layer_err(GF_EPARAM, l, "init_gain = %g must be >= 0", (double)l->init_gain);
	if (k->parse && (rc = k->parse(&net->k, l, &a)))
		return rc;

	if (net->k.nodes[l->in].is_label && !(k->flags & GF_LK_LABELS))
		return gf_layer_err(GF_ESHAPE, l, "cannot take the labels as input (use an embedding)");
	if ((rc = k->shapes(&net->k, l)))
		return rc;
	if (l->nparam > LAYER_MAX_TENSORS || l->nbuf > LAYER_MAX_TENSORS || l->nsave > LAYER_MAX_TENSORS)
		return gf_layer_err(GF_EUNSUPPORTED, l, "declares more than %d tensors of one sort (LAYER_MAX_TENSORS)",
		                    LAYER_MAX_TENSORS);
	net->k.nodes[l->in].consumers++;
	if (l->with >= 0)
		net->k.nodes[l->with].consumers++;
	return 0;
}

/* ---- fusions ----
 *
 * Each layer a with a single consumer b (b reading it as its first input)
 * is offered to the kinds: b may absorb a (b->kind->absorb_input: the
 * sub-pixel conv takes over a nearest upsample x2), or a may absorb b
 * (a->kind->absorb_output: batchnorm applies the following ReLU/LeakyReLU
 * itself). A named producer is never fused: its output node disappears or
 * changes meaning, and gf_net_node may read it. The network's output is
 * never absorbed either. */

static void replace_node(gf_net *net, int from, int to)
{
	for (int i = 0; i < net->k.nlayers; i++) {
		struct layer *l = &net->k.layers[i];
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
	for (int i = 0; i + 1 < net->k.nlayers; i++) {
		struct layer *a = &net->k.layers[i];
		if (a->skip || a->name[0])
			continue;
		struct node *ao = &net->k.nodes[a->out];
		if (ao->consumers != 1 || net->out_node == a->out)
			continue;
		/* the single consumer */
		struct layer *b = NULL;
		for (int j = i + 1; j < net->k.nlayers; j++)
			if (!net->k.layers[j].skip && (net->k.layers[j].in == a->out || net->k.layers[j].with == a->out))
				b = &net->k.layers[j];
		if (!b || b->with == a->out)
			continue;
		/* b takes over a: b reads a's input */
		if (b->kind->absorb_input && b->kind->absorb_input(&net->k, b, a)) {
			a->skip = 1;
			a->absorber = b;
			b->in = a->in;
			ao->consumers = 0;
			continue;
		}
		/* a takes over b: b's readers read a's output */
		if (a->kind->absorb_output && a->kind->absorb_output(&net->k, a, b)) {
			b->skip = 1;
			b->absorber = a;
			net->k.nodes[b->out].consumers = 0;
			int old = b->out;
			b->out = a->out;
			ao->consumers = 0;
			replace_node(net, old, a->out);
			for (int j = 0; j < net->k.nlayers; j++) {
				struct layer *l = &net->k.layers[j];
				if (l->skip)
					continue;
				ao->consumers += (l->in == a->out) + (l->with == a->out);
			}
		}
	}
}

/* ---- the whole table ---- */

/* penalty_at = { layer names }: the outputs a gradient penalty takes its
 * gradient at, in place of the input (StyleGAN2's ws: docs/train.md
 * "Gradient penalties"). Each names an earlier layer with a flat output. */
static int parse_points(gf_net *net, const gf_value *v)
{
	if (!v)
		return 0;
	size_t n = gf_value_len(v);
	if (v->type != GF_VLIST || n < 1 || n > GF_NET_MAX_POINTS)
		return gf_seterr(GF_EPARAM, "network: penalty_at must be a list of 1..%d layer names", GF_NET_MAX_POINTS);
	for (size_t i = 0; i < n; i++) {
		int ok, id = -1;
		const char *name = gf_value_as_str(gf_value_at(v, i), "", &ok);
		for (int j = 0; ok && j < net->k.nlayers; j++)
			if (strcmp(net->k.layers[j].name, name) == 0)
				id = j;
		if (!ok || id < 0)
			return gf_seterr(GF_EPARAM, "network: penalty_at[%zu] = \"%s\" names no layer", i + 1, ok ? name : "?");
		const struct node *o = &net->k.nodes[net->k.layers[id].out];
		if (o->is_label || o->ndim != 1)
			return gf_seterr(GF_EPARAM, "network: penalty_at[%zu]: layer %s's output is not a flat vector", i + 1,
			                 name);
		net->points[i] = net->k.layers[id].out;
	}
	net->npoints = (int)n;
	return 0;
}

static const char *const net_keys[] = { "input_shape", "classes", "init", "name", "penalty_at", NULL };

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
		return gf_seterr(GF_EPARAM, "network: init must be \"torch\", \"dcgan\" or \"msr\"");
	int ok;
	net->k.classes = (int)gf_value_as_int(gf_value_get(table, "classes"), 0, &ok);
	if (!ok || net->k.classes < 0)
		return gf_seterr(GF_EPARAM, "network: classes must be a non-negative integer");

	net->k.nlayers = (int)n;
	net->k.nnodes = 2 + (int)n;
	net->k.layers = calloc(n, sizeof(*net->k.layers));
	net->k.nodes = calloc((size_t)net->k.nnodes, sizeof(*net->k.nodes));
	if (!net->k.layers || !net->k.nodes)
		return gf_seterr(-ENOMEM, "network: out of memory");
	net->k.x_node = 0;
	net->k.label_node = 1;
	for (int i = 0; i < net->k.nnodes; i++)
		net->k.nodes[i].producer = -1;

	/* input shape: the options, else the table's input_shape */
	struct node *x = &net->k.nodes[0];
	if (opts->input_ndim > 0) {
		if (opts->input_ndim > MAX_SDIMS)
			return gf_seterr(GF_EPARAM, "network: input has more than %d dimensions", MAX_SDIMS);
		gf_layer_set_shape(x, opts->input_ndim, opts->input_shape);
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
		gf_layer_set_shape(x, (int)nd, sh);
	}
	for (int i = 0; i < x->ndim; i++)
		if (x->shape[i] < 1)
			return gf_seterr(GF_EPARAM, "network: input dimension %d is %lld", i, (long long)x->shape[i]);
	struct node *lab = &net->k.nodes[1];
	lab->is_label = 1;
	lab->ndim = 0;
	lab->numel = 1;

	for (int i = 0; i < net->k.nlayers; i++) {
		net->k.layers[i].index = i;
		int rc = parse_layer(net, &net->k.layers[i], gf_value_arg(table, (size_t)i));
		if (rc)
			return rc;
	}
	net->out_node = net->k.layers[net->k.nlayers - 1].out;
	if (net->k.nodes[net->out_node].is_label)
		return gf_seterr(GF_EPARAM, "network: the output cannot be the labels");
	int rc = parse_points(net, gf_value_get(table, "penalty_at"));
	if (rc)
		return rc;
	if (!(opts->flags & GF_NET_NOFUSE))
		fuse(net);

	/* parameter and buffer layout, in table order then declaration order:
	 * each layer's parameters are contiguous (the gradient hook's ranges) */
	size_t p = 0, b = 0;
	for (int i = 0; i < net->k.nlayers; i++) {
		struct layer *l = &net->k.layers[i];
		for (int j = 0; j < l->nparam; j++) {
			l->param[j].off = (long)p;
			p += l->param[j].n;
		}
		for (int j = 0; j < l->nbuf; j++) {
			l->buf[j].off = (long)b;
			b += l->buf[j].n;
		}
		if (l->kind->flags & GF_LK_STATEFUL)
			net->has_stateful = 1;
	}
	net->nparams = p;
	net->nbuffers = b;
	return 0;
}
