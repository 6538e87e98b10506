/* What a layer kind may call (layer_kind.h): layer errors, argument
 * readers, source resolution, shape and parameter declarations, and the
 * shared PyTorch/DC-GAN initialisation of linears and convolutions.
 *
 * Every message names the layer as "layer N (type)" with N the 1-based
 * position in the Lua table, and the argument as the Lua user wrote it
 * ("argument 4", "stride"). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <ganflow/err.h>

#include "layer_kind.h"

/* ---- errors ---- */

int gf_layer_err(int rc, const struct layer *l, const char *fmt, ...)
{
	char msg[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return gf_seterr(rc, "layer %d (%s): %s", l->index + 1, l->type, msg);
}

char *gf_layer_shape_str(const struct node *n, char *buf, size_t size)
{
	size_t len = (size_t)snprintf(buf, size, "(");
	for (int i = 0; i < n->ndim && len < size; i++)
		len += (size_t)snprintf(buf + len, size - len, "%s%lld", i ? ", " : "", (long long)n->shape[i]);
	if (len < size)
		snprintf(buf + len, size - len, ")");
	return buf;
}

int gf_layer_expect_image(const struct layer *l, const struct node *in, int channels)
{
	char s[96];
	if (in->is_label)
		return gf_layer_err(GF_ESHAPE, l, "cannot take the labels as input (use an embedding)");
	if (in->ndim != 3)
		return gf_layer_err(GF_ESHAPE, l, "expects an image input (C, H, W), got %s",
		                    gf_layer_shape_str(in, s, sizeof(s)));
	if (channels > 0 && in->shape[0] != channels)
		return gf_layer_err(GF_ESHAPE, l, "expects %d input channels, got %lld", channels, (long long)in->shape[0]);
	return 0;
}

int gf_layer_check_groups(const gf_layer_net *net, const struct layer *l, int groups, int cin, int cout)
{
	if (cin % groups || cout % groups)
		return gf_layer_err(GF_EPARAM, l, "groups = %d must divide the %d input and %d output channels", groups, cin,
		                    cout);
	if (groups > 1 && !(net->be->caps & GF_CAP_CONV_GROUPS))
		return gf_layer_err(GF_EUNSUPPORTED, l, "groups = %d: backend %s has no grouped convolutions", groups,
		                    net->be->ops->name);
	return 0;
}

gf_conv_desc gf_layer_conv_desc(const struct node *x, const struct node *y, int k, int stride, int pad, int B)
{
	gf_conv_desc d;
	memset(&d, 0, sizeof(d));
	d.n = B;
	d.cin = (int)x->shape[0];
	d.h = (int)x->shape[1];
	d.w = (int)x->shape[2];
	d.cout = (int)y->shape[0];
	d.hout = (int)y->shape[1];
	d.wout = (int)y->shape[2];
	d.kh = d.kw = k;
	d.sh = d.sw = stride;
	d.ph = d.pw = pad;
	d.up = 1;
	d.dtype = GF_F32;
	d.layout = GF_NCHW;
	return d;
}

/* ---- arguments ---- */

const gf_value *gf_layer_arg(const gf_layer_args *a, int i)
{
	return i >= 0 && i < a->npos ? gf_value_arg(a->v, (size_t)i + 1) : NULL;   /* i < 0: by name only */
}

int gf_layer_arg_int(const gf_layer_args *a, int i, const char *key, int def, int min, int *out)
{
	const gf_value *v = gf_layer_arg(a, i);
	const char *what = NULL;
	char buf[32];
	if (key && gf_value_get(a->v, key)) {
		if (v)
			return gf_layer_err(GF_EPARAM, a->l, "%s given both as argument %d and by name", key, i + 2);
		v = gf_value_get(a->v, key);
	}
	if (v) {
		snprintf(buf, sizeof(buf), "argument %d", i + 2);
		what = key ? key : buf;
	}
	int ok;
	int64_t x = gf_value_as_int(v, def, &ok);
	if (!ok)
		return gf_layer_err(GF_EPARAM, a->l, "%s must be an integer, got a %s", what, gf_vtype_name(v->type));
	if (x < min || x > (1 << 30))
		return gf_layer_err(GF_EPARAM, a->l, "%s = %lld is out of range (>= %d)", what ? what : key, (long long)x,
		                    min);
	*out = (int)x;
	return 0;
}

int gf_layer_arg_num(const gf_layer_args *a, int i, const char *key, double def, float *out)
{
	const gf_value *v = i >= 0 ? gf_layer_arg(a, i) : NULL;
	if (key && gf_value_get(a->v, key)) {
		if (v)
			return gf_layer_err(GF_EPARAM, a->l, "%s given both as argument %d and by name", key, i + 2);
		v = gf_value_get(a->v, key);
	}
	int ok;
	double x = gf_value_as_num(v, def, &ok);
	if (!ok)
		return gf_layer_err(GF_EPARAM, a->l, "%s must be a number, got a %s", key, gf_vtype_name(v->type));
	*out = (float)x;
	return 0;
}

int gf_layer_arg_bool(const gf_layer_args *a, const char *key, int def, int *out)
{
	const gf_value *v = gf_value_get(a->v, key);
	int ok;
	*out = gf_value_as_bool(v, def, &ok);
	if (!ok)
		return gf_layer_err(GF_EPARAM, a->l, "%s must be true or false, got a %s", key, gf_vtype_name(v->type));
	return 0;
}

/* ---- sources ---- */

int gf_layer_source(gf_layer_net *net, struct layer *l, const char *key, const gf_value *v, int *node)
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
		return gf_layer_err(GF_EPARAM, l, "%s = \"%s\" names no earlier layer (nor \"x\" or \"label\")", key, v->u.s);
	}
	int ok;
	int64_t pos1 = gf_value_as_int(v, 0, &ok);
	if (!ok || v->type == GF_VNIL)
		return gf_layer_err(GF_EPARAM, l, "%s must be a layer name or position, got a %s", key,
		                    gf_vtype_name(v->type));
	if (pos1 < 1 || pos1 > l->index)
		return gf_layer_err(GF_EPARAM, l, "%s = %lld is not an earlier layer (1..%d)", key, (long long)pos1,
		                    l->index);
	*node = net->layers[pos1 - 1].out;
	return 0;
}

/* ---- shapes and declarations ---- */

void gf_layer_set_shape(struct node *n, int ndim, const int64_t *shape)
{
	n->ndim = ndim;
	n->numel = 1;
	for (int i = 0; i < ndim; i++) {
		n->shape[i] = shape[i];
		n->numel *= (size_t)shape[i];
	}
}

/* A kind that declares more than LAYER_MAX_TENSORS of one sort is counted
 * but not stored: net_build.c then refuses the layer (a bug in the kind,
 * caught by the first test that builds it). */
static struct ltensor *next_slot(struct ltensor *t, int *n)
{
	if (*n >= LAYER_MAX_TENSORS) {
		(*n)++;
		return NULL;
	}
	struct ltensor *x = &t[(*n)++];
	memset(x, 0, sizeof(*x));
	x->off = -1;
	return x;
}

void gf_layer_param(struct layer *l, const char *name, int ndim, const int64_t *shape)
{
	struct ltensor *t = next_slot(l->param, &l->nparam);
	if (!t)
		return;
	t->name = name;
	t->ndim = ndim;
	t->n = 1;
	for (int i = 0; i < ndim; i++) {
		t->shape[i] = shape[i];
		t->n *= (size_t)shape[i];
	}
}

void gf_layer_buffer(struct layer *l, const char *name, size_t n, float fill)
{
	struct ltensor *t = next_slot(l->buf, &l->nbuf);
	if (!t)
		return;
	t->name = name;
	t->ndim = 1;
	t->shape[0] = (int64_t)n;
	t->n = n;
	t->fill = fill;
}

int gf_layer_save(struct layer *l, size_t n)
{
	if (l->nsave < LAYER_MAX_TENSORS)
		l->save_n[l->nsave] = n;
	return l->nsave++;
}

/* ---- initialisation ---- */

int gf_layer_upload(gf_layer_net *net, const struct layer *l, int i, const float *host)
{
	return net->be->ops->copy(net->be, layer_param(net, l, i), host, l->param[i].n * sizeof(float), GF_COPY_H2D);
}

int gf_layer_init_fan_in(gf_layer_net *net, struct layer *l, gf_rng *rng, float *host, double fan_in)
{
	/* PyTorch: kaiming_uniform(a = sqrt 5) = U(+-1/sqrt(fan_in)), the bias likewise */
	size_t nw = l->param[0].n, nb = l->nparam > 1 ? l->param[1].n : 0;
	float bound = (float)(1.0 / sqrt(fan_in));
	if (l->init == INIT_DCGAN)
		gf_rng_normal(rng, host, nw, 0.0f, 0.02f);
	else if (l->init == INIT_MSR)   /* drawn even at gain 0 (R3GAN's zero layers): later layers draw the same */
		gf_rng_normal(rng, host, nw, 0.0f, (float)(l->init_gain / sqrt(fan_in)));
	else
		gf_rng_uniform(rng, host, nw, -bound, bound);
	int rc = gf_layer_upload(net, l, 0, host);
	if (rc || !nb)
		return rc;
	if (l->init == INIT_DCGAN || l->init == INIT_MSR)
		return net->be->ops->fill(net->be, layer_param(net, l, 1), nb, 0.0f);
	gf_rng_uniform(rng, host, nb, -bound, bound);
	return gf_layer_upload(net, l, 1, host);
}

/* ---- backward across nodes ---- */

float *gf_layer_grad_dst(gf_layer_net *net, int id)
{
	struct node *n = &net->nodes[id];
	return n->written ? net->acc : n->grad;
}

int gf_layer_grad_done(gf_layer_net *net, int id, int B)
{
	struct node *n = &net->nodes[id];
	if (n->written)
		return net->be->ops->axpy(net->be, n->grad, net->acc, (size_t)B * n->numel, 1.0f);
	n->written = 1;
	return 0;
}
