/* core/nn, tensors in networks: the backends behind one vtable
 * (backend.c; cpu/, and cuda/ which builds backend_cuda.so), the layer
 * kinds (layers/, through layer_kind.h), networks (net_build.c, this file,
 * net_ckpt.c), losses, optimisers, orthogonal regularisation, the
 * counter-based generator and safetensors. It uses only core/base; the
 * training, evaluation and distributed layers use it through
 * <ganflow/nn.h> and <ganflow/backend.h>.
 *
 * Networks: memory, forward, backward, flat blocks and views.
 * See <ganflow/nn.h>; net_build.c turns the table into layers and nodes,
 * and each layer kind (layers/, layer_kind.h) computes its own forward and
 * backward: this file walks the layers, never naming a kind.
 *
 * Memory: three backend allocations hold the parameters, their gradients
 * and the buffers (running statistics), with named views; one more, the
 * workspace, holds every node's activation and gradient for max_batch and
 * what layers save for backward. Nothing is allocated after create. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>

#include "layers/sn.h"
#include "net_internal.h"

/* Prefixes the current detail message with the layer that failed. */
int gf_net_layer_fail(const struct layer *l, int rc)
{
	char msg[900];
	snprintf(msg, sizeof(msg), "%s", gf_errmsg());
	return gf_seterr(rc, "layer %d (%s): %s", l->index + 1, l->type, msg[0] ? msg : gf_strerror(rc));
}

static size_t align16(size_t n)
{
	return (n + 15) & ~(size_t)15;
}

/* ---- views ---- */

static int add_view(gf_view **v, size_t *n, const char *key, const char *what, size_t off, int ndim,
                    const int64_t *shape)
{
	gf_view *nv = realloc(*v, (*n + 1) * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	*v = nv;
	gf_view *x = &nv[*n];
	memset(x, 0, sizeof(*x));
	size_t len = strlen(key) + strlen(what) + 2;
	char *name = malloc(len);
	if (!name)
		return -ENOMEM;
	snprintf(name, len, "%s.%s", key, what);
	x->name = name;
	x->offset = off;
	x->ndim = ndim;
	x->numel = 1;
	for (int i = 0; i < ndim; i++) {
		x->shape[i] = shape[i];
		x->numel *= (size_t)shape[i];
	}
	(*n)++;
	return 0;
}

static int build_views(gf_net *net)
{
	for (int i = 0; i < net->k.nlayers; i++) {
		const struct layer *l = &net->k.layers[i];
		int rc = 0;
		for (int j = 0; j < l->nparam && !rc; j++)
			rc = add_view(&net->pviews, &net->npviews, l->key, l->param[j].name, (size_t)l->param[j].off,
			              l->param[j].ndim, l->param[j].shape);
		for (int j = 0; j < l->nbuf && !rc; j++)
			rc = add_view(&net->bviews, &net->nbviews, l->key, l->buf[j].name, (size_t)l->buf[j].off,
			              l->buf[j].ndim, l->buf[j].shape);
		if (rc)
			return gf_seterr(rc, "network: out of memory");
	}
	return 0;
}

/* Running statistics and other buffers to their declared start values. */
static int reset_buffers(gf_net *net)
{
	int rc = 0;
	for (int i = 0; i < net->k.nlayers && !rc; i++) {
		const struct layer *l = &net->k.layers[i];
		for (int j = 0; j < l->nbuf && !rc; j++)
			rc = OPS(net)->fill(BE(net), layer_buffer(&net->k, l, j), l->buf[j].n, l->buf[j].fill);
	}
	return rc;
}

/* ---- create / destroy ---- */

static int materialised(const gf_net *net, int id)
{
	const struct node *n = &net->k.nodes[id];
	if (id == net->k.x_node)
		return 1;
	if (id == net->k.label_node)
		return n->consumers > 0;
	return n->producer >= 0 && !net->k.layers[n->producer].skip;
}

/* Lays out the workspace (sizes first, then pointers into one allocation). */
static int plan_workspace(gf_net *net)
{
	size_t B = (size_t)net->k.max_batch, total = 0, acc = 0;
	for (int pass = 0; pass < 2; pass++) {
		char *base = net->work;
		size_t off = 0;
#define TAKE(ptr, type, count)                                                 \
	do {                                                                   \
		if (pass)                                                      \
			(ptr) = (type *)(void *)(base + off * sizeof(float));  \
		off += align16(count);                                         \
	} while (0)
		for (int i = 0; i < net->k.nnodes; i++) {
			struct node *n = &net->k.nodes[i];
			if (!materialised(net, i))
				continue;
			TAKE(n->data, float, B * n->numel);   /* labels: i32, same size */
			if (!n->is_label) {
				TAKE(n->grad, float, B * n->numel);
				if (B * n->numel > acc)
					acc = B * n->numel;
			}
		}
		for (int i = 0; i < net->k.nlayers; i++) {
			struct layer *l = &net->k.layers[i];
			for (int j = 0; j < l->nsave && !l->skip; j++)
				TAKE(l->save[j], void, l->save_n[j]);   /* sized for max_batch by the kind */
		}
		TAKE(net->k.acc, float, acc);
#undef TAKE
		if (!pass) {
			total = off;
			net->acc_n = acc;
			void *w;
			int rc = OPS(net)->alloc(BE(net), &w, total * sizeof(float));
			if (rc)
				return rc;
			net->work = w;
		}
	}
	return 0;
}

int gf_net_create(gf_net **out, gf_backend *be, const gf_value *table, const gf_net_opts *opts)
{
	*out = NULL;
	if (!be || !opts || opts->max_batch < 1)
		return gf_seterr(GF_EPARAM, "network: needs a backend and max_batch >= 1");
	gf_net *net = calloc(1, sizeof(*net));
	if (!net)
		return gf_seterr(-ENOMEM, "network: out of memory");
	net->k.be = be;
	net->k.max_batch = opts->max_batch;
	net->flags = opts->flags;
	gf_rng_init(&net->k.rng, 0, 0);
	int rc = gf_net_parse(net, table, opts);
	if (rc)
		goto fail;
	if ((rc = build_views(net)))
		goto fail;
	void *p;
	if ((rc = OPS(net)->alloc(be, &p, (net->nparams ? net->nparams : 1) * sizeof(float))))
		goto fail;
	net->k.params = p;
	if ((rc = OPS(net)->alloc(be, &p, (net->nparams ? net->nparams : 1) * sizeof(float))))
		goto fail;
	net->k.grads = p;
	if ((rc = OPS(net)->alloc(be, &p, (net->nbuffers ? net->nbuffers : 1) * sizeof(float))))
		goto fail;
	net->k.buffers = p;
	if ((rc = plan_workspace(net)))
		goto fail;
	if ((rc = OPS(net)->fill(be, net->k.params, net->nparams, 0.0f)) ||
	    (rc = OPS(net)->fill(be, net->k.grads, net->nparams, 0.0f)) || (rc = reset_buffers(net)))
		goto fail;
	*out = net;
	return 0;
fail:
	gf_net_destroy(net);
	return rc;
}

void gf_net_destroy(gf_net *net)
{
	if (!net)
		return;
	if (net->k.params)
		OPS(net)->free(BE(net), net->k.params);
	if (net->k.grads)
		OPS(net)->free(BE(net), net->k.grads);
	if (net->k.buffers)
		OPS(net)->free(BE(net), net->k.buffers);
	if (net->work)
		OPS(net)->free(BE(net), net->work);
	if (net->tan_work)
		OPS(net)->free(BE(net), net->tan_work);
	if (net->ortho_ws)
		OPS(net)->free(BE(net), net->ortho_ws);
	for (size_t i = 0; i < net->npviews; i++)
		free((char *)net->pviews[i].name);
	for (size_t i = 0; i < net->nbviews; i++)
		free((char *)net->bviews[i].name);
	free(net->pviews);
	free(net->bviews);
	free(net->k.layers);
	free(net->k.nodes);
	free(net);
}

/* ---- initialisation ---- */

int gf_net_init(gf_net *net, gf_rng *rng)
{
	size_t maxn = 1;
	for (int i = 0; i < net->k.nlayers; i++) {
		for (int j = 0; j < net->k.layers[i].nparam; j++)
			if (net->k.layers[i].param[j].n > maxn)
				maxn = net->k.layers[i].param[j].n;
		for (int j = 0; j < net->k.layers[i].nbuf; j++)   /* a kind may draw a buffer (noise's noise_const) */
			if (net->k.layers[i].buf[j].n > maxn)
				maxn = net->k.layers[i].buf[j].n;
	}
	float *host = malloc(maxn * sizeof(float));
	if (!host)
		return gf_seterr(-ENOMEM, "network init: out of memory");
	/* buffers first: a kind may draw some of its own (sn's u and v) */
	int rc = reset_buffers(net);
	/* table order: the draws of each layer follow the previous layer's */
	for (int i = 0; i < net->k.nlayers && !rc; i++) {
		struct layer *l = &net->k.layers[i];
		if (l->nparam && l->kind->init)
			rc = l->kind->init(&net->k, l, rng, host);
	}
	free(host);
	return rc;
}

gf_rng *gf_net_rng(gf_net *net)
{
	return &net->k.rng;
}

void gf_net_shapes(const gf_net *net, gf_tensor *input, gf_tensor *output)
{
	const struct node *nodes[2] = { &net->k.nodes[net->k.x_node], &net->k.nodes[net->out_node] };
	gf_tensor *t[2] = { input, output };
	for (int k = 0; k < 2; k++) {
		if (!t[k])
			continue;
		int64_t sh[GF_MAX_DIMS];
		sh[0] = net->k.max_batch;
		for (int i = 0; i < nodes[k]->ndim; i++)
			sh[i + 1] = nodes[k]->shape[i];
		*t[k] = gf_tensor_make(NULL, GF_F32, nodes[k]->ndim + 1, sh);
		t[k]->device = net->k.be->device;
		t[k]->device_index = net->k.be->device_index;
	}
}

int gf_net_classes(const gf_net *net)
{
	return net->k.nodes[net->k.label_node].consumers > 0 ? net->k.classes : 0;
}

/* ---- forward ---- */

static int check_input(const gf_net *net, const gf_tensor *x, const gf_tensor *labels, int *batch)
{
	const struct node *xn = &net->k.nodes[net->k.x_node];
	char a[96], b[96];
	if (!x || !x->data)
		return gf_seterr(GF_EPARAM, "network forward: no input");
	if (x->dtype != GF_F32 || x->ndim != xn->ndim + 1 ||
	    (x->device != net->k.be->device && x->device != GF_CPU))
		goto shape;
	for (int i = 0; i < xn->ndim; i++)
		if (x->shape[i + 1] != xn->shape[i])
			goto shape;
	if (x->shape[0] < 1 || x->shape[0] > net->k.max_batch)
		return gf_seterr(GF_ESHAPE, "network forward: batch %lld not in 1..%d (max_batch)",
		                 (long long)x->shape[0], net->k.max_batch);
	*batch = (int)x->shape[0];
	if (net->k.nodes[net->k.label_node].consumers > 0) {
		if (!labels || !labels->data || labels->dtype != GF_I32 || labels->ndim != 1 ||
		    labels->shape[0] != x->shape[0])
			return gf_seterr(GF_EPARAM, "network forward: the network takes labels, (%lld) i32", (long long)x->shape[0]);
	}
	return 0;
shape:;
	gf_tensor want;
	gf_net_shapes(net, &want, NULL);
	want.shape[0] = x->shape[0];
	return gf_seterr(GF_ESHAPE, "network forward: input is %s%s, expected %s", gf_tensor_shape_str(x, a, sizeof(a)),
	                 x->device != net->k.be->device && x->device != GF_CPU ? " on another device" : "",
	                 gf_tensor_shape_str(&want, b, sizeof(b)));
}

int gf_net_forward(gf_net *net, const gf_tensor *x, const gf_tensor *labels, unsigned mode)
{
	int B, rc = check_input(net, x, labels, &B);
	if (rc)
		return rc;
	struct node *xn = &net->k.nodes[net->k.x_node];
	gf_copy_kind kx = x->device == net->k.be->device ? GF_COPY_D2D : GF_COPY_H2D;
	if ((rc = OPS(net)->copy(BE(net), xn->data, x->data, (size_t)B * xn->numel * sizeof(float), kx)))
		return rc;
	if (net->k.nodes[net->k.label_node].consumers > 0) {
		gf_copy_kind kl = labels->device == net->k.be->device ? GF_COPY_D2D : GF_COPY_H2D;
		if ((rc = OPS(net)->copy(BE(net), net->k.nodes[net->k.label_node].data, labels->data,
		                         (size_t)B * sizeof(int32_t), kl)))
			return rc;
	}
	net->batch = 0;
	net->dx_kept = 0;
	for (int i = 0; i < net->k.nlayers; i++) {
		struct layer *l = &net->k.layers[i];
		if (l->skip)
			continue;
		if ((rc = l->kind->forward(&net->k, l, B, mode)))
			return gf_net_layer_fail(l, rc);
		gf_net_count_layer(net, l, B, 1);
	}
	net->batch = B;
	net->k.mode = mode;
	return 0;
}

static int node_tensor(const gf_net *net, int id, float *data, gf_tensor *out)
{
	const struct node *n = &net->k.nodes[id];
	if (!net->batch)
		return gf_seterr(GF_EPARAM, "network: no forward has run yet");
	int64_t sh[GF_MAX_DIMS];
	sh[0] = net->batch;
	for (int i = 0; i < n->ndim; i++)
		sh[i + 1] = n->shape[i];
	*out = gf_tensor_make(data, GF_F32, n->ndim + 1, sh);
	out->device = net->k.be->device;
	out->device_index = net->k.be->device_index;
	return 0;
}

int gf_net_output(const gf_net *net, gf_tensor *out)
{
	return node_tensor(net, net->out_node, net->k.nodes[net->out_node].data, out);
}

int gf_net_node(const gf_net *net, const char *name, gf_tensor *out)
{
	for (int i = 0; i < net->k.nlayers; i++) {
		const struct layer *l = &net->k.layers[i];
		if (strcmp(l->name, name) == 0)
			return node_tensor(net, l->out, net->k.nodes[l->out].data, out);
	}
	return gf_seterr(GF_ENOTFOUND, "network: no layer named '%s'", name);
}

int gf_net_count_type(const gf_net *net, const char *type, char *key, size_t size)
{
	int n = 0;
	for (int i = 0; i < net->k.nlayers; i++) {
		const struct layer *l = &net->k.layers[i];
		if (strcmp(l->type, type) != 0)
			continue;
		if (!n++ && key)
			snprintf(key, size, "%s", l->key);
	}
	return n;
}

/* ---- backward ---- */

/* Where a layer writes the gradient for node id: the node's own buffer the
 * first time in this backward, the accumulation scratch after that (then
 * grad_done adds it in). */
static int has_params(const struct layer *l)
{
	return l->nparam > 0;
}

/* Which nodes want a gradient: the input when GF_NEED_DX, and the output of
 * every layer that has parameters (GF_NEED_DW) or feeds one that does. */
void gf_net_mark_needs(gf_net *net, unsigned flags)
{
	for (int i = 0; i < net->k.nnodes; i++) {
		net->k.nodes[i].needs = 0;
		net->k.nodes[i].written = 0;
	}
	net->k.nodes[net->k.x_node].needs = (flags & GF_NEED_DX) != 0;
	for (int i = 0; i < net->k.nlayers; i++) {
		struct layer *l = &net->k.layers[i];
		if (l->skip)
			continue;
		int need = ((flags & GF_NEED_DW) && has_params(l)) || net->k.nodes[l->in].needs ||
		           (l->with >= 0 && net->k.nodes[l->with].needs);
		net->k.nodes[l->out].needs |= need;
	}
}

static int backward_layer(gf_net *net, struct layer *l, int B, unsigned flags)
{
	const struct node *in = &net->k.nodes[l->in];
	gf_layer_grad g;
	g.dw = (flags & GF_NEED_DW) && has_params(l);
	g.acc = (flags & GF_ACCUMULATE) != 0;
	g.dx = in->needs && !in->is_label ? gf_layer_grad_dst(&net->k, l->in) : NULL;
	gf_net_count_layer(net, l, B, (g.dx != NULL) + g.dw); /* each gradient costs a forward */
	int rc = l->kind->backward(&net->k, l, B, &g);
	if (!rc && g.dx)
		rc = gf_layer_grad_done(&net->k, l->in, B);
	return rc ? gf_net_layer_fail(l, rc) : 0;
}

/* Tells the gradient hook that layer l's weight and bias gradients are
 * final (they are laid out back to back: weight, then bias). */
static int grads_ready(gf_net *net, const struct layer *l)
{
	size_t n = 0;
	for (int j = 0; j < l->nparam; j++)
		n += l->param[j].n;
	return net->hook(net->hook_ud, (size_t)l->param[0].off, n);
}

void gf_net_set_grad_hook(gf_net *net, gf_grad_hook fn, void *ud)
{
	net->hook = fn;
	net->hook_ud = fn ? ud : NULL;
}

int gf_net_backward_walk(gf_net *net, int B, unsigned flags)
{
	int rc, hook = (flags & GF_NEED_DW) && net->hook;
	for (int i = net->k.nlayers - 1; i >= 0; i--) {
		struct layer *l = &net->k.layers[i];
		if (l->skip || !net->k.nodes[l->out].needs)
			continue;
		if (!net->k.nodes[l->out].written) {
			/* a branch nothing downstream used: its gradient is zero */
			if ((flags & GF_NEED_DW) && !(flags & GF_ACCUMULATE))
				for (int j = 0; j < l->nparam; j++)
					if ((rc = OPS(net)->fill(BE(net), layer_grad(&net->k, l, j), l->param[j].n, 0.0f)))
						return rc;
			if (hook && has_params(l) && (rc = grads_ready(net, l)))
				return rc;
			continue;
		}
		if ((rc = backward_layer(net, l, B, flags)))
			return rc;
		if (hook && has_params(l) && (rc = grads_ready(net, l)))
			return rc;
	}
	struct node *x = &net->k.nodes[net->k.x_node];
	if ((flags & GF_NEED_DX) && !x->written &&
	    (rc = OPS(net)->fill(BE(net), x->grad, (size_t)B * x->numel, 0.0f)))
		return rc;
	return 0;
}

int gf_net_backward(gf_net *net, const float *dy, unsigned flags)
{
	int B = net->batch, rc;
	if (!B)
		return gf_seterr(GF_EPARAM, "network backward: no forward to go back through");
	if (!(net->k.mode & GF_TRAIN) && net->has_stateful)
		return gf_seterr(GF_EPARAM, "network backward: the last forward ran in eval mode (batchnorm/dropout)");
	if (!dy)
		return gf_seterr(GF_EPARAM, "network backward: no output gradient");
	net->dx_kept = 0;
	gf_net_mark_needs(net, flags);
	struct node *out = &net->k.nodes[net->out_node];
	if ((rc = OPS(net)->copy(BE(net), out->grad, dy, (size_t)B * out->numel * sizeof(float), GF_COPY_D2D)))
		return rc;
	out->written = 1;
	if ((rc = gf_net_backward_walk(net, B, flags)))
		return rc;
	/* what a double backward (net_dbwd.c) starts from: which gradients
	 * hold a value (the others are zero) */
	for (int i = 0; i < net->k.nnodes; i++)
		net->k.nodes[i].dvalid = net->k.nodes[i].written;
	net->dx_kept = (flags & GF_NEED_DX) != 0;
	return 0;
}

int gf_net_dx(const gf_net *net, gf_tensor *dx)
{
	return node_tensor(net, net->k.x_node, net->k.nodes[net->k.x_node].grad, dx);
}

/* ---- blocks ---- */

float *gf_net_block(gf_net *net, gf_block b, size_t *n)
{
	if (n)
		*n = b == GF_BUFFERS ? net->nbuffers : net->nparams;
	return b == GF_PARAMS ? net->k.params : b == GF_GRADS ? net->k.grads : net->k.buffers;
}

const gf_view *gf_net_views(const gf_net *net, gf_block b, size_t *n)
{
	if (b == GF_BUFFERS) {
		*n = net->nbviews;
		return net->bviews;
	}
	*n = net->npviews;
	return net->pviews;
}

int gf_net_read(gf_net *net, gf_block b, float *host)
{
	size_t n;
	float *src = gf_net_block(net, b, &n);
	return n ? OPS(net)->copy(BE(net), host, src, n * sizeof(float), GF_COPY_D2H) : 0;
}

int gf_net_write(gf_net *net, gf_block b, const float *host)
{
	size_t n;
	float *dst = gf_net_block(net, b, &n);
	return n ? OPS(net)->copy(BE(net), dst, host, n * sizeof(float), GF_COPY_H2D) : 0;
}

int gf_net_copy(gf_net *dst, const gf_net *src, gf_block b)
{
	size_t nd, ns, vd, vs;
	float *d = gf_net_block(dst, b, &nd);
	float *s = gf_net_block((gf_net *)src, b, &ns);
	const gf_view *a = gf_net_views(dst, b, &vd), *c = gf_net_views(src, b, &vs);
	if (dst->k.be != src->k.be && dst->k.be->device != src->k.be->device)
		return gf_seterr(GF_EUNSUPPORTED, "network copy: networks on different devices");
	if (nd != ns || vd != vs)
		return gf_seterr(GF_ESHAPE, "network copy: blocks of %zu and %zu values differ", nd, ns);
	for (size_t i = 0; i < vd; i++)
		if (strcmp(a[i].name, c[i].name) || a[i].offset != c[i].offset || a[i].numel != c[i].numel)
			return gf_seterr(GF_ESHAPE, "network copy: tensor %s differs from %s", a[i].name, c[i].name);
	return nd ? OPS(dst)->copy(BE(dst), d, s, nd * sizeof(float), GF_COPY_D2D) : 0;
}

int gf_net_zero_grad(gf_net *net)
{
	return OPS(net)->fill(BE(net), net->k.grads, net->nparams, 0.0f);
}

/* ---- FLOPs and summary ---- */

static double layer_flops(const gf_net *net, const struct layer *l, int B, int exec)
{
	return l->kind->flops ? l->kind->flops(&net->k, l, B, exec) : 0;
}

void gf_net_count_layer(gf_net *net, const struct layer *l, int B, int k)
{
	if (k <= 0 || !l->kind->flops)
		return;
	net->done[0] += k * layer_flops(net, l, B, 0);
	net->done[1] += k * layer_flops(net, l, B, 1);
}

void gf_net_count(gf_net *net, double flops)
{
	net->done[0] += flops;
	net->done[1] += flops;
}

void gf_net_flops_done(const gf_net *net, double *model, double *exec)
{
	if (model)
		*model = net->done[0];
	if (exec)
		*exec = net->done[1];
}

void gf_net_flops(const gf_net *net, int batch, unsigned flags, double *model, double *exec)
{
	double m = 0, e = 0;
	/* a layer's input gradient is needed when something upstream wants it */
	char *needs = calloc((size_t)net->k.nnodes, 1);
	if (needs) {
		needs[net->k.x_node] = (flags & GF_NEED_DX) != 0;
		for (int i = 0; i < net->k.nlayers; i++) {
			const struct layer *l = &net->k.layers[i];
			if (l->skip)
				continue;
			needs[l->out] |= ((flags & GF_NEED_DW) && has_params(l)) || needs[l->in] ||
			                 (l->with >= 0 && needs[l->with]);
		}
	}
	for (int i = 0; i < net->k.nlayers; i++) {
		const struct layer *l = &net->k.layers[i];
		if (l->skip)
			continue;
		double fm = layer_flops(net, l, batch, 0), fe = layer_flops(net, l, batch, 1);
		if (!(flags & (GF_NEED_DX | GF_NEED_DW))) {
			m += fm;
			e += fe;
			continue;
		}
		int k = 0;
		if ((flags & GF_NEED_DW) && has_params(l))
			k++;
		if (needs && needs[l->in] && !net->k.nodes[l->in].is_label)
			k++;
		m += k * fm;
		e += k * fe;
	}
	free(needs);
	if (model)
		*model = m;
	if (exec)
		*exec = e;
}

int gf_net_summary(const gf_net *net, char *buf, size_t size)
{
	size_t len = 0;
	if (size)
		buf[0] = '\0';
	for (int i = 0; i < net->k.nlayers; i++) {
		const struct layer *l = &net->k.layers[i];
		const struct node *out = &net->k.nodes[l->out];
		char sh[96];
		size_t k = (size_t)snprintf(sh, sizeof(sh), "(");
		for (int d = 0; d < out->ndim && k < sizeof(sh); d++)
			k += (size_t)snprintf(sh + k, sizeof(sh) - k, "%s%lld", d ? ", " : "", (long long)out->shape[d]);
		if (k < sizeof(sh))
			snprintf(sh + k, sizeof(sh) - k, ")");
		const char *note = l->skip ? l->absorber->kind->absorbed_note : l->kind->note ? l->kind->note(l) : NULL;
		int n = snprintf(len < size ? buf + len : NULL, len < size ? size - len : 0, "%3d %-10s %-6s -> %s%s\n", i + 1,
		                 l->type, l->key, sh, note ? note : "");
		if (n > 0)
			len += (size_t)n;
	}
	return (int)len;
}

int gf_net_sn_iterate(gf_net *net)
{
	return gf_sn_iterate(&net->k);
}
