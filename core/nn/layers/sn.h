/* Spectral normalisation, the `sn = true` key of linear, conv, tconv and
 * embedding: what those kinds call from their shapes, init, forward and
 * backward (sn.c). PyTorch's torch.nn.utils.spectral_norm(module) with
 * n_power_iterations = 1, eps = 1e-12. */
#ifndef GF_NN_LAYERS_SN_H
#define GF_NN_LAYERS_SN_H

#include "../layer_kind.h"

/* Kept in the kind's configuration. */
struct gf_sn {
	int on;        /* sn = true */
	int a, m, k;   /* the weight read as (a, m, k), normalised as the matrix (m, a*k) */
	int save;      /* save slot: w / sigma | d(w / sigma) | sigma */
	int param;     /* the weight's parameter index (0 but in cbn) */
	int buf;       /* index of its buffer u (v follows) */
};

/* Reads the `sn` key (default false). */
int gf_sn_parse(const gf_layer_args *a, struct gf_sn *sn);
/* The weight's parameter name: "weight_orig" with sn (PyTorch's
 * state_dict), else "weight". */
const char *gf_sn_weight_name(const struct gf_sn *sn);
/* In shapes, after the parameters: with sn, declares the buffers
 * weight_u (m) and weight_v (a*k) and the workspace. a = 1 normalises the
 * weight along its first dimension (PyTorch's dim = 0), a = size(0) along
 * its second (dim = 1, transposed convolutions). */
int gf_sn_shapes(gf_layer_net *net, struct layer *l, struct gf_sn *sn, int a, int m, int k);
/* The same for a layer with several normalised weights (cbn's gain and
 * bias projections): the weight is parameter `param`, its buffers are
 * named u_name and v_name (static strings) and declared next. */
int gf_sn_shapes_at(gf_layer_net *net, struct layer *l, struct gf_sn *sn, int param, const char *u_name, const char *v_name,
                    int a, int m, int k);
/* In init, after the weight and bias: u and v from the same generator. */
int gf_sn_init(gf_layer_net *net, struct layer *l, const struct gf_sn *sn, gf_rng *rng, float *host);
/* In forward: the weight to compute with, *w (the parameter itself
 * without sn). With sn: one power iteration in training forwards (with
 * GF_FREEZE_STATS on copies of u and v: the buffers stay as they are, as
 * batchnorm's running statistics), then w / sigma. */
int gf_sn_weight(gf_layer_net *net, struct layer *l, const struct gf_sn *sn, unsigned mode, const float **w);
/* The weight the last forward computed with (for the input gradient). */
const float *gf_sn_used(const gf_layer_net *net, const struct layer *l, const struct gf_sn *sn);
/* In backward: where the weight gradient goes and whether to add to it
 * (with sn, a scratch overwritten, that gf_sn_backward folds in), */
float *gf_sn_dweight(gf_layer_net *net, const struct layer *l, const struct gf_sn *sn, const gf_layer_grad *g,
                     int *accumulate);
/* then the gradient through sigma into the parameter's gradient (a no-op
 * without sn or without g->dw). */
int gf_sn_backward(gf_layer_net *net, const struct layer *l, const struct gf_sn *sn, const gf_layer_grad *g);
/* One power iteration of every spectral norm of the network, outside a
 * forward (gf_net_sn_iterate, <ganflow/nn.h>, is this for a gf_net). */
int gf_sn_iterate(gf_layer_net *net);

#endif
