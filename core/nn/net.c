/* Networks: memory, forward, backward, flat blocks and views.
 * See <ganflow/nn.h>; layers.c turns the table into layers and nodes.
 *
 * Memory: three backend allocations hold the parameters, their gradients
 * and the buffers (running statistics), with named views; one more, the
 * workspace, holds every node's activation and gradient for max_batch and
 * what layers save for backward. Nothing is allocated after create. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>

#include "net_internal.h"

/* Prefixes the current detail message with the layer that failed. */
static int layer_fail(const struct layer *l, int rc)
{
	char msg[900];
	snprintf(msg, sizeof(msg), "%s", gf_errmsg());
	return gf_seterr(rc, "layer %d (%s): %s", l->index + 1, l->type, msg[0] ? msg : gf_strerror(rc));
}

#define TRY(l, call)                                   \
	do {                                           \
		int rc_ = (call);                      \
		if (rc_)                               \
			return layer_fail((l), rc_);   \
	} while (0)

static float *P(gf_net *net, long off)
{
	return off < 0 ? NULL : net->params + off;
}

static float *G(gf_net *net, long off)
{
	return off < 0 ? NULL : net->grads + off;
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
	for (int i = 0; i < net->nlayers; i++) {
		struct layer *l = &net->layers[i];
		int64_t c[1];
		int rc = 0;
		if (l->w_off >= 0)
			rc = add_view(&net->pviews, &net->npviews, l->key, "weight", (size_t)l->w_off, l->w_ndim, l->w_shape);
		if (!rc && l->b_off >= 0) {
			c[0] = (int64_t)l->b_n;
			rc = add_view(&net->pviews, &net->npviews, l->key, "bias", (size_t)l->b_off, 1, c);
		}
		if (!rc && l->rm_off >= 0) {
			c[0] = l->cin;
			rc = add_view(&net->bviews, &net->nbviews, l->key, "running_mean", (size_t)l->rm_off, 1, c);
			if (!rc)
				rc = add_view(&net->bviews, &net->nbviews, l->key, "running_var", (size_t)l->rv_off, 1, c);
		}
		if (rc)
			return gf_seterr(rc, "network: out of memory");
	}
	return 0;
}

/* ---- create / destroy ---- */

static int materialised(const gf_net *net, int id)
{
	const struct node *n = &net->nodes[id];
	if (id == net->x_node)
		return 1;
	if (id == net->label_node)
		return n->consumers > 0;
	return n->producer >= 0 && !net->layers[n->producer].skip;
}

/* Lays out the workspace (sizes first, then pointers into one allocation). */
static int plan_workspace(gf_net *net)
{
	size_t B = (size_t)net->max_batch, total = 0, acc = 0;
	for (int pass = 0; pass < 2; pass++) {
		char *base = net->work;
		size_t off = 0;
#define TAKE(ptr, type, count)                                                 \
	do {                                                                   \
		if (pass)                                                      \
			(ptr) = (type *)(void *)(base + off * sizeof(float));  \
		off += align16(count);                                         \
	} while (0)
		for (int i = 0; i < net->nnodes; i++) {
			struct node *n = &net->nodes[i];
			if (!materialised(net, i))
				continue;
			TAKE(n->data, float, B * n->numel);   /* labels: i32, same size */
			if (!n->is_label) {
				TAKE(n->grad, float, B * n->numel);
				if (B * n->numel > acc)
					acc = B * n->numel;
			}
		}
		for (int i = 0; i < net->nlayers; i++) {
			struct layer *l = &net->layers[i];
			struct node *in = &net->nodes[l->in], *out = &net->nodes[l->out];
			if (l->skip)
				continue;
			if (l->kind == L_BN) {
				TAKE(l->mean, float, (size_t)l->cin);
				TAKE(l->rstd, float, (size_t)l->cin);
			} else if (l->kind == L_DROPOUT) {
				TAKE(l->mask, float, B * in->numel);
			} else if (l->kind == L_DROPOUT2D) {
				TAKE(l->mask, float, B * (size_t)in->shape[0]);
			} else if (l->kind == L_MAXPOOL) {
				TAKE(l->idx, int32_t, B * out->numel);
			}
		}
		TAKE(net->acc, float, acc);
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
	net->be = be;
	net->max_batch = opts->max_batch;
	net->flags = opts->flags;
	gf_rng_init(&net->rng, 0, 0);
	int rc = gf_net_parse(net, table, opts);
	if (rc)
		goto fail;
	if ((rc = build_views(net)))
		goto fail;
	void *p;
	if ((rc = OPS(net)->alloc(be, &p, (net->nparams ? net->nparams : 1) * sizeof(float))))
		goto fail;
	net->params = p;
	if ((rc = OPS(net)->alloc(be, &p, (net->nparams ? net->nparams : 1) * sizeof(float))))
		goto fail;
	net->grads = p;
	if ((rc = OPS(net)->alloc(be, &p, (net->nbuffers ? net->nbuffers : 1) * sizeof(float))))
		goto fail;
	net->buffers = p;
	if ((rc = plan_workspace(net)))
		goto fail;
	if ((rc = OPS(net)->fill(be, net->params, net->nparams, 0.0f)) ||
	    (rc = OPS(net)->fill(be, net->grads, net->nparams, 0.0f)))
		goto fail;
	for (int i = 0; i < net->nlayers; i++) {
		struct layer *l = &net->layers[i];
		if (l->rm_off >= 0 && ((rc = OPS(net)->fill(be, net->buffers + l->rm_off, (size_t)l->cin, 0.0f)) ||
		                       (rc = OPS(net)->fill(be, net->buffers + l->rv_off, (size_t)l->cin, 1.0f))))
			goto fail;
	}
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
	if (net->params)
		OPS(net)->free(BE(net), net->params);
	if (net->grads)
		OPS(net)->free(BE(net), net->grads);
	if (net->buffers)
		OPS(net)->free(BE(net), net->buffers);
	if (net->work)
		OPS(net)->free(BE(net), net->work);
	for (size_t i = 0; i < net->npviews; i++)
		free((char *)net->pviews[i].name);
	for (size_t i = 0; i < net->nbviews; i++)
		free((char *)net->bviews[i].name);
	free(net->pviews);
	free(net->bviews);
	free(net->layers);
	free(net->nodes);
	free(net);
}

/* ---- initialisation ---- */

int gf_net_init(gf_net *net, gf_rng *rng)
{
	size_t maxn = 1;
	for (int i = 0; i < net->nlayers; i++)
		if (net->layers[i].w_n > maxn)
			maxn = net->layers[i].w_n;
	float *host = malloc(maxn * sizeof(float));
	if (!host)
		return gf_seterr(-ENOMEM, "network init: out of memory");
	int rc = 0;
	for (int i = 0; i < net->nlayers && !rc; i++) {
		struct layer *l = &net->layers[i];
		if (l->w_off < 0)
			continue;
		size_t nw = l->w_n, nb = l->b_n;
		switch (l->kind) {
		case L_LINEAR:
		case L_CONV:
		case L_TCONV: {
			/* PyTorch: kaiming_uniform(a = sqrt 5) = U(+-1/sqrt(fan_in)), the bias
			 * likewise; fan_in = weight.size(1) * receptive field */
			double fan_in = (double)l->w_shape[1] * (l->w_ndim == 4 ? l->k * l->k : 1);
			float bound = (float)(1.0 / sqrt(fan_in));
			if (l->init == INIT_DCGAN)
				gf_rng_normal(rng, host, nw, 0.0f, 0.02f);
			else
				gf_rng_uniform(rng, host, nw, -bound, bound);
			rc = OPS(net)->copy(BE(net), P(net, l->w_off), host, nw * sizeof(float), GF_COPY_H2D);
			if (rc || !nb)
				break;
			if (l->init == INIT_DCGAN) {
				rc = OPS(net)->fill(BE(net), P(net, l->b_off), nb, 0.0f);
			} else {
				gf_rng_uniform(rng, host, nb, -bound, bound);
				rc = OPS(net)->copy(BE(net), P(net, l->b_off), host, nb * sizeof(float), GF_COPY_H2D);
			}
			break;
		}
		case L_BN:
			if (l->init == INIT_DCGAN) {
				gf_rng_normal(rng, host, nw, 1.0f, 0.02f);
				rc = OPS(net)->copy(BE(net), P(net, l->w_off), host, nw * sizeof(float), GF_COPY_H2D);
			} else {
				rc = OPS(net)->fill(BE(net), P(net, l->w_off), nw, 1.0f);
			}
			if (!rc)
				rc = OPS(net)->fill(BE(net), P(net, l->b_off), nb, 0.0f);
			break;
		case L_EMBEDDING:
			gf_rng_normal(rng, host, nw, 0.0f, 1.0f);
			rc = OPS(net)->copy(BE(net), P(net, l->w_off), host, nw * sizeof(float), GF_COPY_H2D);
			break;
		default:
			break;
		}
	}
	free(host);
	for (int i = 0; i < net->nlayers && !rc; i++) {
		struct layer *l = &net->layers[i];
		if (l->rm_off >= 0 && !(rc = OPS(net)->fill(BE(net), net->buffers + l->rm_off, (size_t)l->cin, 0.0f)))
			rc = OPS(net)->fill(BE(net), net->buffers + l->rv_off, (size_t)l->cin, 1.0f);
	}
	return rc;
}

gf_rng *gf_net_rng(gf_net *net)
{
	return &net->rng;
}

void gf_net_shapes(const gf_net *net, gf_tensor *input, gf_tensor *output)
{
	const struct node *nodes[2] = { &net->nodes[net->x_node], &net->nodes[net->out_node] };
	gf_tensor *t[2] = { input, output };
	for (int k = 0; k < 2; k++) {
		if (!t[k])
			continue;
		int64_t sh[GF_MAX_DIMS];
		sh[0] = net->max_batch;
		for (int i = 0; i < nodes[k]->ndim; i++)
			sh[i + 1] = nodes[k]->shape[i];
		*t[k] = gf_tensor_make(NULL, GF_F32, nodes[k]->ndim + 1, sh);
		t[k]->device = net->be->device;
		t[k]->device_index = net->be->device_index;
	}
}

int gf_net_classes(const gf_net *net)
{
	return net->nodes[net->label_node].consumers > 0 ? net->classes : 0;
}

/* ---- forward ---- */

static gf_conv_desc conv_desc(const gf_net *net, const struct layer *l, int batch)
{
	const struct node *in = &net->nodes[l->in], *out = &net->nodes[l->out];
	gf_conv_desc d;
	memset(&d, 0, sizeof(d));
	d.n = batch;
	d.cin = (int)in->shape[0];
	d.h = (int)in->shape[1];
	d.w = (int)in->shape[2];
	d.cout = (int)out->shape[0];
	d.hout = (int)out->shape[1];
	d.wout = (int)out->shape[2];
	d.kh = d.kw = l->k;
	d.sh = d.sw = l->stride;
	d.ph = d.pw = l->pad;
	d.up = l->up ? l->up : 1;
	d.dtype = GF_F32;
	d.layout = GF_NCHW;
	return d;
}

/* The transposed conv as the conv it is the data gradient of. */
static gf_conv_desc tconv_desc(const gf_net *net, const struct layer *l, int batch)
{
	const struct node *in = &net->nodes[l->in], *out = &net->nodes[l->out];
	gf_conv_desc d = conv_desc(net, l, batch);
	d.cin = (int)out->shape[0];
	d.h = (int)out->shape[1];
	d.w = (int)out->shape[2];
	d.cout = (int)in->shape[0];
	d.hout = (int)in->shape[1];
	d.wout = (int)in->shape[2];
	d.up = 1;
	return d;
}

static gf_bn_desc bn_desc(const gf_net *net, const struct layer *l, int batch)
{
	const struct node *in = &net->nodes[l->in];
	gf_bn_desc d;
	memset(&d, 0, sizeof(d));
	d.n = batch;
	d.c = l->cin;
	d.hw = (int)(in->numel / (size_t)l->cin);
	d.eps = l->eps;
	d.momentum = l->momentum;
	d.act = l->act;
	d.slope = l->act_param;
	d.dtype = GF_F32;
	d.layout = GF_NCHW;
	return d;
}

static gf_pooling_desc pooling_desc(const gf_net *net, const struct layer *l, int batch)
{
	const struct node *in = &net->nodes[l->in], *out = &net->nodes[l->out];
	gf_pooling_desc d = { batch, (int)in->shape[0], (int)in->shape[1], (int)in->shape[2], (int)out->shape[1],
	                   (int)out->shape[2], l->k, l->k, l->stride, l->stride, l->pad, l->pad,
	                   l->kind == L_MAXPOOL };
	return d;
}

static gf_act act_of(layer_kind k)
{
	switch (k) {
	case L_RELU: return GF_ACT_RELU;
	case L_LRELU: return GF_ACT_LRELU;
	case L_TANH: return GF_ACT_TANH;
	case L_SIGMOID: return GF_ACT_SIGMOID;
	default: return GF_ACT_NONE;
	}
}

static int forward_layer(gf_net *net, struct layer *l, int B, unsigned mode)
{
	gf_backend *be = BE(net);
	const gf_backend_ops *o = OPS(net);
	struct node *in = &net->nodes[l->in], *out = &net->nodes[l->out];
	float *x = in->data, *y = out->data;
	size_t nin = (size_t)B * in->numel;
	int train = (mode & GF_TRAIN) != 0;

	switch (l->kind) {
	case L_LINEAR:
		TRY(l, o->gemm(be, 0, 1, B, l->fout, l->fin, 1.0f, x, l->fin, P(net, l->w_off), l->fin, 0.0f, y, l->fout));
		if (l->b_off >= 0)
			TRY(l, o->bias_add(be, y, P(net, l->b_off), B, l->fout, 1));
		return 0;
	case L_CONV: {
		gf_conv_desc d = conv_desc(net, l, B);
		TRY(l, o->conv2d_forward(be, y, x, P(net, l->w_off), P(net, l->b_off), &d));
		return 0;
	}
	case L_TCONV: {
		gf_conv_desc d = tconv_desc(net, l, B);
		TRY(l, o->conv2d_backward(be, y, NULL, NULL, x, NULL, P(net, l->w_off), &d, 0));
		if (l->b_off >= 0)
			TRY(l, o->bias_add(be, y, P(net, l->b_off), B, l->cout, (int)(out->numel / (size_t)l->cout)));
		return 0;
	}
	case L_UPSAMPLE:
		TRY(l, o->upsample_forward(be, y, x, B * (int)in->shape[0], (int)in->shape[1], (int)in->shape[2],
		                           l->scale));
		return 0;
	case L_BN: {
		gf_bn_desc d = bn_desc(net, l, B);
		float *g = P(net, l->w_off), *b = P(net, l->b_off);
		if (train) {
			int freeze = (mode & GF_FREEZE_STATS) != 0;
			TRY(l, o->bn_forward_train(be, y, l->mean, l->rstd, freeze ? NULL : net->buffers + l->rm_off,
			                           freeze ? NULL : net->buffers + l->rv_off, x, g, b, &d));
		} else {
			TRY(l, o->bn_forward_eval(be, y, x, g, b, net->buffers + l->rm_off, net->buffers + l->rv_off, &d));
		}
		return 0;
	}
	case L_RELU:
	case L_LRELU:
	case L_TANH:
	case L_SIGMOID:
		TRY(l, o->act_forward(be, y, x, nin, act_of(l->kind), l->slope));
		return 0;
	case L_DROPOUT:
	case L_DROPOUT2D: {
		if (!train || l->p == 0.0f) {
			TRY(l, o->copy(be, y, x, nin * sizeof(float), GF_COPY_D2D));
			return 0;
		}
		size_t groups = l->kind == L_DROPOUT ? nin : (size_t)B * (size_t)in->shape[0];
		TRY(l, o->dropout_forward(be, y, l->mask, x, groups, nin / groups, l->p, &net->rng));
		net->rng.offset += gf_rng_blocks(groups);
		return 0;
	}
	case L_RESHAPE:
	case L_FLATTEN:
		TRY(l, o->copy(be, y, x, nin * sizeof(float), GF_COPY_D2D));
		return 0;
	case L_EMBEDDING:
		TRY(l, o->embedding_forward(be, y, P(net, l->w_off), (const int32_t *)(void *)x, B, l->fout, l->fin));
		return 0;
	case L_CONCAT: {
		struct node *w = &net->nodes[l->with];
		TRY(l, o->copy2d(be, y, out->numel, x, in->numel, (size_t)B, in->numel, 0));
		TRY(l, o->copy2d(be, y + in->numel, out->numel, w->data, w->numel, (size_t)B, w->numel, 0));
		return 0;
	}
	case L_MAXPOOL:
	case L_AVGPOOL: {
		gf_pooling_desc d = pooling_desc(net, l, B);
		TRY(l, o->pooling_forward(be, y, l->idx, x, &d));
		return 0;
	}
	case L_SOFTMAX:
		TRY(l, o->softmax_forward(be, y, x, B, (int)in->numel));
		return 0;
	}
	return gf_seterr(GF_EPARAM, "layer %d: unknown kind", l->index + 1);
}

static int check_input(const gf_net *net, const gf_tensor *x, const gf_tensor *labels, int *batch)
{
	const struct node *xn = &net->nodes[net->x_node];
	char a[96], b[96];
	if (!x || !x->data)
		return gf_seterr(GF_EPARAM, "network forward: no input");
	if (x->dtype != GF_F32 || x->ndim != xn->ndim + 1 ||
	    (x->device != net->be->device && x->device != GF_CPU))
		goto shape;
	for (int i = 0; i < xn->ndim; i++)
		if (x->shape[i + 1] != xn->shape[i])
			goto shape;
	if (x->shape[0] < 1 || x->shape[0] > net->max_batch)
		return gf_seterr(GF_ESHAPE, "network forward: batch %lld not in 1..%d (max_batch)",
		                 (long long)x->shape[0], net->max_batch);
	*batch = (int)x->shape[0];
	if (net->nodes[net->label_node].consumers > 0) {
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
	                 x->device != net->be->device && x->device != GF_CPU ? " on another device" : "",
	                 gf_tensor_shape_str(&want, b, sizeof(b)));
}

int gf_net_forward(gf_net *net, const gf_tensor *x, const gf_tensor *labels, unsigned mode)
{
	int B, rc = check_input(net, x, labels, &B);
	if (rc)
		return rc;
	struct node *xn = &net->nodes[net->x_node];
	gf_copy_kind kx = x->device == net->be->device ? GF_COPY_D2D : GF_COPY_H2D;
	if ((rc = OPS(net)->copy(BE(net), xn->data, x->data, (size_t)B * xn->numel * sizeof(float), kx)))
		return rc;
	if (net->nodes[net->label_node].consumers > 0) {
		gf_copy_kind kl = labels->device == net->be->device ? GF_COPY_D2D : GF_COPY_H2D;
		if ((rc = OPS(net)->copy(BE(net), net->nodes[net->label_node].data, labels->data,
		                         (size_t)B * sizeof(int32_t), kl)))
			return rc;
	}
	net->batch = 0;
	for (int i = 0; i < net->nlayers; i++) {
		struct layer *l = &net->layers[i];
		if (!l->skip && (rc = forward_layer(net, l, B, mode)))
			return rc;
	}
	net->batch = B;
	net->mode = mode;
	return 0;
}

static int node_tensor(const gf_net *net, int id, float *data, gf_tensor *out)
{
	const struct node *n = &net->nodes[id];
	if (!net->batch)
		return gf_seterr(GF_EPARAM, "network: no forward has run yet");
	int64_t sh[GF_MAX_DIMS];
	sh[0] = net->batch;
	for (int i = 0; i < n->ndim; i++)
		sh[i + 1] = n->shape[i];
	*out = gf_tensor_make(data, GF_F32, n->ndim + 1, sh);
	out->device = net->be->device;
	out->device_index = net->be->device_index;
	return 0;
}

int gf_net_output(const gf_net *net, gf_tensor *out)
{
	return node_tensor(net, net->out_node, net->nodes[net->out_node].data, out);
}

int gf_net_node(const gf_net *net, const char *name, gf_tensor *out)
{
	for (int i = 0; i < net->nlayers; i++) {
		const struct layer *l = &net->layers[i];
		if (strcmp(l->name, name) == 0)
			return node_tensor(net, l->out, net->nodes[l->out].data, out);
	}
	return gf_seterr(GF_ENOTFOUND, "network: no layer named '%s'", name);
}

/* ---- backward ---- */

/* Where a layer writes the gradient for node id: the node's own buffer the
 * first time in this backward, the accumulation scratch after that (then
 * grad_done adds it in). */
static float *grad_dst(gf_net *net, int id)
{
	struct node *n = &net->nodes[id];
	return n->written ? net->acc : n->grad;
}

static int grad_done(gf_net *net, int id, int B)
{
	struct node *n = &net->nodes[id];
	if (n->written)
		return OPS(net)->axpy(BE(net), n->grad, net->acc, (size_t)B * n->numel, 1.0f);
	n->written = 1;
	return 0;
}

static int has_params(const struct layer *l)
{
	return l->w_off >= 0 || l->b_off >= 0;
}

/* Which nodes want a gradient: the input when GF_NEED_DX, and the output of
 * every layer that has parameters (GF_NEED_DW) or feeds one that does. */
static void mark_needs(gf_net *net, unsigned flags)
{
	for (int i = 0; i < net->nnodes; i++) {
		net->nodes[i].needs = 0;
		net->nodes[i].written = 0;
	}
	net->nodes[net->x_node].needs = (flags & GF_NEED_DX) != 0;
	for (int i = 0; i < net->nlayers; i++) {
		struct layer *l = &net->layers[i];
		if (l->skip)
			continue;
		int need = ((flags & GF_NEED_DW) && has_params(l)) || net->nodes[l->in].needs ||
		           (l->with >= 0 && net->nodes[l->with].needs);
		net->nodes[l->out].needs |= need;
	}
}

static int backward_layer(gf_net *net, struct layer *l, int B, unsigned flags)
{
	gf_backend *be = BE(net);
	const gf_backend_ops *o = OPS(net);
	struct node *in = &net->nodes[l->in], *out = &net->nodes[l->out];
	const float *dy = out->grad;
	int dw = (flags & GF_NEED_DW) && has_params(l);
	int acc = (flags & GF_ACCUMULATE) != 0;
	int want_dx = in->needs && !in->is_label;
	float *dx = want_dx ? grad_dst(net, l->in) : NULL;
	size_t nin = (size_t)B * in->numel;

	switch (l->kind) {
	case L_LINEAR:
		if (dw) {
			TRY(l, o->gemm(be, 1, 0, l->fout, l->fin, B, 1.0f, dy, l->fout, in->data, l->fin, acc ? 1.0f : 0.0f,
			               G(net, l->w_off), l->fin));
			if (l->b_off >= 0)
				TRY(l, o->bias_grad(be, G(net, l->b_off), dy, B, l->fout, 1, acc));
		}
		if (dx)
			TRY(l, o->gemm(be, 0, 0, B, l->fin, l->fout, 1.0f, dy, l->fout, P(net, l->w_off), l->fin, 0.0f, dx,
			               l->fin));
		break;
	case L_CONV: {
		gf_conv_desc d = conv_desc(net, l, B);
		TRY(l, o->conv2d_backward(be, dx, dw ? G(net, l->w_off) : NULL, dw ? G(net, l->b_off) : NULL, dy,
		                          in->data, P(net, l->w_off), &d, acc));
		break;
	}
	case L_TCONV: {
		gf_conv_desc d = tconv_desc(net, l, B);
		if (dw) {
			TRY(l, o->conv2d_backward(be, NULL, G(net, l->w_off), NULL, in->data, dy, P(net, l->w_off), &d, acc));
			if (l->b_off >= 0)
				TRY(l, o->bias_grad(be, G(net, l->b_off), dy, B, l->cout, (int)(out->numel / (size_t)l->cout), acc));
		}
		if (dx)
			TRY(l, o->conv2d_forward(be, dx, dy, P(net, l->w_off), NULL, &d));
		break;
	}
	case L_UPSAMPLE:
		if (dx)
			TRY(l, o->upsample_backward(be, dx, dy, B * (int)in->shape[0], (int)in->shape[1], (int)in->shape[2],
			                            l->scale));
		break;
	case L_BN: {
		gf_bn_desc d = bn_desc(net, l, B);
		TRY(l, o->bn_backward(be, dx, dw ? G(net, l->w_off) : NULL, dw ? G(net, l->b_off) : NULL, dy, out->data,
		                      in->data, P(net, l->w_off), l->mean, l->rstd, &d, acc));
		break;
	}
	case L_RELU:
	case L_LRELU:
	case L_TANH:
	case L_SIGMOID:
		if (dx)
			TRY(l, o->act_backward(be, dx, dy, out->data, nin, act_of(l->kind), l->slope));
		break;
	case L_DROPOUT:
	case L_DROPOUT2D:
		if (!dx)
			break;
		if (!(net->mode & GF_TRAIN) || l->p == 0.0f) {
			TRY(l, o->copy(be, dx, dy, nin * sizeof(float), GF_COPY_D2D));
		} else {
			size_t groups = l->kind == L_DROPOUT ? nin : (size_t)B * (size_t)in->shape[0];
			TRY(l, o->dropout_backward(be, dx, dy, l->mask, groups, nin / groups));
		}
		break;
	case L_RESHAPE:
	case L_FLATTEN:
		if (dx)
			TRY(l, o->copy(be, dx, dy, nin * sizeof(float), GF_COPY_D2D));
		break;
	case L_EMBEDDING:
		if (dw)
			TRY(l, o->embedding_backward(be, G(net, l->w_off), dy, (const int32_t *)(void *)in->data, B, l->fout,
			                             l->fin, acc));
		break;
	case L_CONCAT: {
		struct node *w = &net->nodes[l->with];
		if (dx) {
			TRY(l, o->copy2d(be, dx, in->numel, dy, out->numel, (size_t)B, in->numel, 0));
			TRY(l, grad_done(net, l->in, B));
			dx = NULL;
		}
		if (w->needs && !w->is_label) {
			float *dw2 = grad_dst(net, l->with);
			TRY(l, o->copy2d(be, dw2, w->numel, dy + in->numel, out->numel, (size_t)B, w->numel, 0));
			TRY(l, grad_done(net, l->with, B));
		}
		break;
	}
	case L_MAXPOOL:
	case L_AVGPOOL:
		if (dx) {
			gf_pooling_desc d = pooling_desc(net, l, B);
			TRY(l, o->pooling_backward(be, dx, dy, l->idx, &d));
		}
		break;
	case L_SOFTMAX:
		if (dx)
			TRY(l, o->softmax_backward(be, dx, dy, out->data, B, (int)in->numel));
		break;
	}
	if (dx)
		TRY(l, grad_done(net, l->in, B));
	return 0;
}

/* Tells the gradient hook that layer l's weight and bias gradients are
 * final (they are laid out back to back: weight, then bias). */
static int grads_ready(gf_net *net, const struct layer *l)
{
	size_t lo = l->w_off >= 0 ? (size_t)l->w_off : (size_t)l->b_off;
	size_t n = (l->w_off >= 0 ? l->w_n : 0) + (l->b_off >= 0 ? l->b_n : 0);
	return net->hook(net->hook_ud, lo, n);
}

void gf_net_set_grad_hook(gf_net *net, gf_grad_hook fn, void *ud)
{
	net->hook = fn;
	net->hook_ud = fn ? ud : NULL;
}

int gf_net_backward(gf_net *net, const float *dy, unsigned flags)
{
	int B = net->batch, rc;
	if (!B)
		return gf_seterr(GF_EPARAM, "network backward: no forward to go back through");
	if (!(net->mode & GF_TRAIN) && net->has_stateful)
		return gf_seterr(GF_EPARAM, "network backward: the last forward ran in eval mode (batchnorm/dropout)");
	if (!dy)
		return gf_seterr(GF_EPARAM, "network backward: no output gradient");
	mark_needs(net, flags);
	int hook = (flags & GF_NEED_DW) && net->hook;
	struct node *out = &net->nodes[net->out_node];
	if ((rc = OPS(net)->copy(BE(net), out->grad, dy, (size_t)B * out->numel * sizeof(float), GF_COPY_D2D)))
		return rc;
	out->written = 1;
	for (int i = net->nlayers - 1; i >= 0; i--) {
		struct layer *l = &net->layers[i];
		if (l->skip || !net->nodes[l->out].needs)
			continue;
		if (!net->nodes[l->out].written) {
			/* a branch nothing downstream used: its gradient is zero */
			if ((flags & GF_NEED_DW) && !(flags & GF_ACCUMULATE) && has_params(l)) {
				if (l->w_off >= 0 && (rc = OPS(net)->fill(BE(net), G(net, l->w_off), l->w_n, 0.0f)))
					return rc;
				if (l->b_off >= 0 && (rc = OPS(net)->fill(BE(net), G(net, l->b_off), l->b_n, 0.0f)))
					return rc;
			}
			if (hook && has_params(l) && (rc = grads_ready(net, l)))
				return rc;
			continue;
		}
		if ((rc = backward_layer(net, l, B, flags)))
			return rc;
		if (hook && has_params(l) && (rc = grads_ready(net, l)))
			return rc;
	}
	struct node *x = &net->nodes[net->x_node];
	if ((flags & GF_NEED_DX) && !x->written &&
	    (rc = OPS(net)->fill(BE(net), x->grad, (size_t)B * x->numel, 0.0f)))
		return rc;
	return 0;
}

int gf_net_dx(const gf_net *net, gf_tensor *dx)
{
	return node_tensor(net, net->x_node, net->nodes[net->x_node].grad, dx);
}

/* ---- blocks ---- */

float *gf_net_block(gf_net *net, gf_block b, size_t *n)
{
	if (n)
		*n = b == GF_BUFFERS ? net->nbuffers : net->nparams;
	return b == GF_PARAMS ? net->params : b == GF_GRADS ? net->grads : net->buffers;
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
	if (dst->be != src->be && dst->be->device != src->be->device)
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
	return OPS(net)->fill(BE(net), net->grads, net->nparams, 0.0f);
}

/* ---- FLOPs and summary ---- */

static double layer_flops(const gf_net *net, const struct layer *l, int B, int exec)
{
	const struct node *in = &net->nodes[l->in], *out = &net->nodes[l->out];
	switch (l->kind) {
	case L_LINEAR:
		return 2.0 * B * l->fin * l->fout;
	case L_CONV: {
		double taps = (exec && l->up == 2) ? 4.0 : (double)l->k * l->k;
		return 2.0 * B * (double)out->numel * l->cin * taps;
	}
	case L_TCONV:
		return 2.0 * B * (double)in->numel * l->cout * l->k * l->k;
	default:
		return 0;
	}
}

void gf_net_flops(const gf_net *net, int batch, unsigned flags, double *model, double *exec)
{
	double m = 0, e = 0;
	/* a layer's input gradient is needed when something upstream wants it */
	char *needs = calloc((size_t)net->nnodes, 1);
	if (needs) {
		needs[net->x_node] = (flags & GF_NEED_DX) != 0;
		for (int i = 0; i < net->nlayers; i++) {
			const struct layer *l = &net->layers[i];
			if (l->skip)
				continue;
			needs[l->out] |= ((flags & GF_NEED_DW) && has_params(l)) || needs[l->in] ||
			                 (l->with >= 0 && needs[l->with]);
		}
	}
	for (int i = 0; i < net->nlayers; i++) {
		const struct layer *l = &net->layers[i];
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
		if (needs && needs[l->in] && !net->nodes[l->in].is_label)
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
	for (int i = 0; i < net->nlayers; i++) {
		const struct layer *l = &net->layers[i];
		const struct node *out = &net->nodes[l->out];
		char sh[96];
		size_t k = (size_t)snprintf(sh, sizeof(sh), "(");
		for (int d = 0; d < out->ndim && k < sizeof(sh); d++)
			k += (size_t)snprintf(sh + k, sizeof(sh) - k, "%s%lld", d ? ", " : "", (long long)out->shape[d]);
		if (k < sizeof(sh))
			snprintf(sh + k, sizeof(sh) - k, ")");
		const char *note = l->skip ? (l->kind == L_UPSAMPLE ? "  fused into the next conv" : "  fused into the batchnorm")
		                 : l->up == 2 ? "  sub-pixel (upsample fused)"
		                 : l->act == GF_ACT_LRELU ? "  + lrelu" : l->act == GF_ACT_RELU ? "  + relu" : "";
		int n = snprintf(len < size ? buf + len : NULL, len < size ? size - len : 0, "%3d %-10s %-6s -> %s%s\n", i + 1,
		                 l->type, l->key, sh, note);
		if (n > 0)
			len += (size_t)n;
	}
	return (int)len;
}
