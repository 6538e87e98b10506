/* Double backward: the gradient, with respect to the parameters, of a
 * penalty P on the input gradient g of a backward (R1, WGAN-GP, path
 * length). See <ganflow/nn.h> gf_net_backward2 and docs/nn.md "Double
 * backward"; like net.c it walks the layers and never names a kind.
 *
 * Reverse-over-reverse, layer by layer. The backward computed, from the
 * output to the input, dx_l = J_l(x_l, w_l)^T dy_l for each layer l, and
 * g is the last of them. Its adjoint runs the other way: t = dP/dg is the
 * adjoint of the input's gradient, and since dx_l is linear in dy_l, the
 * adjoint of dy_l is J_l t_l, the forward-mode product (each layer's
 * backward2 writes it as its output's tangent; a node read by several
 * layers keeps one tangent, the sum of the backward becoming a copy). The
 * same layer adds, from S_l = <t_l, J_l^T dy_l>, its explicit dependence
 * on its parameters (a linear's dW += dy t^T: the weight gradient of
 * (dy, t)) and the dependence of J_l on its input activation x_l (tanh,
 * sigmoid, batchnorm; zero for linears, convolutions, ReLU, LeakyReLU,
 * poolings): those terms are gradients with respect to forward
 * activations, so one ordinary backward walk carries them to the
 * parameters upstream. A piecewise linear network (a ReLU/LeakyReLU
 * discriminator) has none, and that walk has nothing to do.
 *
 * Memory: node i's tangent is one more activation-sized buffer (the first
 * call allocates them all); the second-order terms take the nodes' grad
 * buffers, whose first-backward values are dead by then: node i's grad is
 * read only by its producer's backward2, which runs before any reader of
 * node i writes a term there. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>

#include "net_internal.h"

static size_t align16(size_t n)
{
	return (n + 15) & ~(size_t)15;
}

static int is_point(const gf_net *net, int node)
{
	for (int k = 0; k < net->npoints; k++)
		if (net->points[k] == node)
			return 1;
	return 0;
}

/* The nodes a double backward reaches: downstream of the input, or of the
 * penalty points (the layers that make a point are not run). */
static void downstream(const gf_net *net, char *down)
{
	memset(down, 0, (size_t)net->k.nnodes);
	if (!net->npoints)
		down[net->k.x_node] = 1;
	for (int k = 0; k < net->npoints; k++)
		down[net->points[k]] = 1;
	for (int i = 0; i < net->k.nlayers; i++) {
		const struct layer *l = &net->k.layers[i];
		if (!l->skip && !is_point(net, l->out))
			down[l->out] |= down[l->in] || (l->with >= 0 && down[l->with]);
	}
}

int gf_net_penalty_points(const gf_net *net)
{
	return net->npoints;
}

size_t gf_net_point_numel(const gf_net *net, int i)
{
	return i < 0 || i >= net->npoints ? 0 : (size_t)net->k.nodes[net->points[i]].numel;
}

int gf_net_point_grad(const gf_net *net, int i, gf_tensor *g)
{
	if (i < 0 || i >= net->npoints)
		return gf_seterr(GF_EPARAM, "network: no penalty point %d (penalty_at has %d)", i, net->npoints);
	if (!net->dx_kept)
		return gf_seterr(GF_EPARAM, "network: no gradient at the penalty points (a backward with GF_NEED_DX first)");
	const struct node *n = &net->k.nodes[net->points[i]];
	if (!n->grad || !n->dvalid)
		return gf_seterr(GF_EPARAM, "network: the backward did not reach penalty point %d (penalty_at[%d])", i, i + 1);
	int64_t sh[1 + MAX_SDIMS] = { net->batch };
	for (int d = 0; d < n->ndim; d++)
		sh[1 + d] = n->shape[d];
	*g = gf_tensor_make(n->grad, GF_F32, 1 + n->ndim, sh);
	g->device = BE(net)->device;
	g->device_index = BE(net)->device_index;
	return 0;
}

int gf_net_check_backward2(const gf_net *net)
{
	char *down = malloc((size_t)net->k.nnodes);
	if (!down)
		return gf_seterr(-ENOMEM, "network: out of memory");
	downstream(net, down);
	int rc = 0;
	for (int i = 0; i < net->k.nlayers && !rc; i++) {
		const struct layer *l = &net->k.layers[i];
		if (l->skip || !down[l->out] || l->kind->backward2)
			continue;
		rc = gf_layer_err(GF_EUNSUPPORTED, l,
		                  "has no double backward, which the gradient penalties (r1, gp, pl) need (docs/nn.md "
		                  "\"Double backward\" lists the kinds that have one)");
	}
	free(down);
	return rc;
}

/* One (max_batch, shape) tangent per materialised node but the labels. */
static int plan_tangents(gf_net *net)
{
	size_t B = (size_t)net->k.max_batch, total = 0;
	for (int pass = 0; pass < 2; pass++) {
		size_t off = 0;
		for (int i = 0; i < net->k.nnodes; i++) {
			struct node *n = &net->k.nodes[i];
			if (!n->grad)   /* not materialised, or the labels */
				continue;
			if (pass)
				n->tan = (float *)net->tan_work + off;
			off += align16(B * n->numel);
		}
		if (!pass) {
			total = off;
			void *w;
			int rc = OPS(net)->alloc(BE(net), &w, (total ? total : 1) * sizeof(float));
			if (rc)
				return rc;
			net->tan_work = w;
		}
	}
	return 0;
}

/* A zero tangent read by a layer that runs (concat's second input from the
 * labels): materialised once per pass. */
static int zero_tangent(gf_net *net, struct node *n, int B)
{
	if (!n->tzero || n->is_label)
		return 0;
	n->tzero = 0;
	return OPS(net)->fill(BE(net), n->tan, (size_t)B * n->numel, 0.0f);
}

int gf_net_backward2(gf_net *net, const float *t, const float *dy, unsigned flags)
{
	int B = net->batch, rc;
	if (!B || !net->dx_kept)
		return gf_seterr(GF_EPARAM, "network double backward: needs a forward and then a backward with "
		                            "GF_NEED_DX (whose input gradient the penalty is on)");
	if (!t)
		return gf_seterr(GF_EPARAM, "network double backward: no tangent (dP/dg)");
	/* once: the network's layers do not change */
	if (!net->tan_work && ((rc = gf_net_check_backward2(net)) || (rc = plan_tangents(net))))
		return rc;
	net->dx_kept = 0;   /* the node gradients are about to be overwritten */
	if ((flags & GF_NEED_DW) && !(flags & GF_ACCUMULATE) && (rc = gf_net_zero_grad(net)))
		return rc;
	unsigned walk = flags | ((flags & GF_NEED_DW) ? GF_ACCUMULATE : 0);
	gf_net_mark_needs(net, walk);   /* where the final walk goes; no gradient written yet */
	for (int i = 0; i < net->k.nnodes; i++)
		net->k.nodes[i].tzero = 1;
	if (!net->npoints) {
		struct node *x = &net->k.nodes[net->k.x_node];
		if ((rc = OPS(net)->copy(BE(net), x->tan, t, (size_t)B * x->numel * sizeof(float), GF_COPY_D2D)))
			return rc;
		x->tzero = 0;
	}
	/* penalty points: their blocks of t, and the pass starts there */
	for (int k = 0; k < net->npoints; k++) {
		struct node *p = &net->k.nodes[net->points[k]];
		if ((rc = OPS(net)->copy(BE(net), p->tan, t, (size_t)B * p->numel * sizeof(float), GF_COPY_D2D)))
			return rc;
		t += (size_t)B * p->numel;
		p->tzero = 0;
	}

	/* from the input to the output: tangents, parameter terms, second-order terms */
	for (int i = 0; i < net->k.nlayers; i++) {
		struct layer *l = &net->k.layers[i];
		struct node *in = &net->k.nodes[l->in], *w = l->with >= 0 ? &net->k.nodes[l->with] : NULL,
		            *out = &net->k.nodes[l->out];
		int active = !in->tzero || (w && !w->tzero);
		/* an output gradient of zero (nothing downstream reaches the
		 * output) makes every term of the layer and of its readers zero */
		if (l->skip || !active || !out->dvalid || is_point(net, l->out))
			continue;
		if ((rc = zero_tangent(net, in, B)) || (w && (rc = zero_tangent(net, w, B))))
			return rc;
		gf_layer_grad2 g = { .tout = l->out == net->out_node ? NULL : out->tan,
		                     .dw = (flags & GF_NEED_DW) && l->nparam > 0 };
		if ((rc = l->kind->backward2(&net->k, l, B, &g)))
			return gf_net_layer_fail(l, rc);
		gf_net_count_layer(net, l, B, (g.tout != NULL) + g.dw); /* J t and dW each cost a forward */
		out->tzero = 0;
	}

	/* the second-order terms (and dy) back to the parameters */
	struct node *out = &net->k.nodes[net->out_node];
	if (dy) {
		if ((rc = OPS(net)->copy(BE(net), out->grad, dy, (size_t)B * out->numel * sizeof(float), GF_COPY_D2D)))
			return rc;
		out->written = 1;
	}
	return gf_net_backward_walk(net, B, walk);
}
