/* The network's internal structures, shared by the engine's files:
 * net_build.c (the table -> layers, fusions, layout), net.c (memory,
 * forward, backward, views), net_dbwd.c (double backward), optim.c,
 * ortho.c and backend.c. Not
 * installed. The engine stands on the layer kinds: what a kind sees of a
 * network (gf_layer_net, the layer record) is declared in layer_kind.h,
 * and the kinds never include this header. */
#ifndef GF_NN_NET_INTERNAL_H
#define GF_NN_NET_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <ganflow/nn.h>

#include "layer_kind.h"

struct gf_net {
	gf_layer_net k;      /* first: what the layer kinds see (layer_kind.h) */
	unsigned flags;
	int init;            /* net-level default */
	int out_node;

	size_t nparams, nbuffers;
	gf_view *pviews, *bviews;
	size_t npviews, nbviews;

	void *work;          /* one backend allocation: activations, grads, saved state */
	size_t acc_n;        /* floats in k.acc */

	int batch;           /* of the last forward, 0 before any */
	int has_stateful;    /* bn or dropout present */

	gf_grad_hook hook;   /* gradient-ready hook (gf_net_set_grad_hook), or NULL */
	void *hook_ud;

	/* double backward (net_dbwd.c) */
	int dx_kept;         /* the last backward had GF_NEED_DX and every node's grad is as it left them */
	void *tan_work;      /* the nodes' tangents, allocated by the first gf_net_backward2 */
	int points[GF_NET_MAX_POINTS];   /* penalty_at: the nodes a penalty's gradient is at (else the input) */
	int npoints;
	float *ortho_ws;     /* gf_net_ortho_grad's workspace, kept so that a graph step sees the same buffer */
	size_t ortho_n;      /* floats */

	double done[2];      /* FLOPs run so far (gf_net_flops_done): model, exec */
};

/* net.c: adds layer l's forward FLOPs at batch B, times k, to net->done
 * (what one of its passes just ran); and an amount outside the layers
 * (ortho.c, optim.c) to both counts. */
void gf_net_count_layer(gf_net *net, const struct layer *l, int B, int k);
void gf_net_count(gf_net *net, double flops);

/* net_build.c: parses the table into net->layers and net->nodes (shapes
 * inferred, parameters laid out, fusions applied). Errors name the layer. */
int gf_net_parse(gf_net *net, const gf_value *table, const gf_net_opts *opts);

/* net.c, for net_dbwd.c: prefixes the detail message with layer l and
 * returns rc; marks which nodes a backward with these flags must reach
 * (node->needs) and clears every node's written; and the reverse walk of a
 * backward from the gradients already written (the output's, and any a
 * caller wrote), calling the gradient hook with GF_NEED_DW. */
int gf_net_layer_fail(const struct layer *l, int rc);
void gf_net_mark_needs(gf_net *net, unsigned flags);
int gf_net_backward_walk(gf_net *net, int B, unsigned flags);

/* The backend and its ops, for the engine's files (the kinds use
 * net->be of their gf_layer_net). */
#define BE(net) ((net)->k.be)
#define OPS(net) ((net)->k.be->ops)

#endif
