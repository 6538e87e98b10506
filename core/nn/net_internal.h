/* The network's internal structures, shared by net_build.c (the table ->
 * layers, fusions, layout), net.c (memory, forward, backward, views), the
 * layer kinds under layers/ (through layer_kind.h) and optim.c. Not
 * installed. */
#ifndef GF_NN_NET_INTERNAL_H
#define GF_NN_NET_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <ganflow/nn.h>

typedef struct gf_layer_kind gf_layer_kind;   /* layer_kind.h */

enum { INIT_TORCH = 0, INIT_DCGAN };

#define MAX_SDIMS (GF_MAX_DIMS - 1)   /* per-sample dimensions */
#define LAYER_MAX_TENSORS 8           /* parameters, buffers, saved tensors: each per layer (cbn: 4, 6, 4) */
#define LAYER_MAX_SN 4                /* spectral norms per layer (attention: 4) */
#define LAYER_CFG_BYTES 160           /* room for a kind's own configuration */

/* A value flowing between layers: the net input "x", the labels, or the
 * output of a layer. Shapes are per sample; buffers hold max_batch. */
struct node {
	int ndim;
	int64_t shape[MAX_SDIMS];
	size_t numel;        /* per sample */
	int is_label;        /* i32 labels, no gradient */
	int consumers;       /* layers reading it */
	int producer;        /* layer index, -1 for net inputs */
	float *data;         /* (max_batch, shape), NULL when not materialised */
	float *grad;         /* same size */
	int written;         /* backward: grad holds a value */
	int needs;           /* backward: a gradient is wanted here */
};

/* A parameter or buffer a layer declares: its view is "<key>.<name>". */
struct ltensor {
	const char *name;    /* "weight", "bias", "running_mean"... (static) */
	int ndim;
	int64_t shape[GF_MAX_DIMS];
	size_t n;
	long off;            /* floats into the params (or buffers) block */
	float fill;          /* buffers: value at create and gf_net_init */
};

struct gf_sn;   /* layers/sn.h */

struct layer {
	const gf_layer_kind *kind;
	const char *type;    /* canonical type name */
	int index;           /* 0-based table position */
	char key[64];        /* view prefix: the name, or the index */
	char name[48];       /* user name ("" when none) */
	int in, with, out;   /* node ids; with = -1 unless the kind reads a second input */
	int init;            /* INIT_*: the entry's init key, else the network's */

	/* declared by the kind's shapes (gf_layer_param, _buffer, _save) and
	 * laid out by net_build.c (offsets) and net.c (saved workspace) */
	struct ltensor param[LAYER_MAX_TENSORS];   /* params block, in this order */
	int nparam;
	struct ltensor buf[LAYER_MAX_TENSORS];     /* buffers block */
	int nbuf;
	size_t save_n[LAYER_MAX_TENSORS];          /* floats saved for backward (max_batch) */
	void *save[LAYER_MAX_TENSORS];             /* their place in the workspace */
	int nsave;

	/* its spectral norms (sn.c registers them from the kind's shapes; the
	 * structs live in cfg below), for gf_net_sn_iterate */
	const struct gf_sn *sn[LAYER_MAX_SN];
	int nsn;

	/* what the layer is, for a neighbour's fusion (set by its kind's parse) */
	gf_act as_act;       /* a pointwise activation act(x; as_act_param) */
	float as_act_param;
	int as_upsample;     /* a nearest upsample by this factor */

	/* fusion */
	int skip;            /* absorbed into another layer, not run */
	const struct layer *absorber;   /* the layer that absorbed it */

	/* the kind's own configuration (LAYER_CFG in layer_kind.h) */
	union {
		unsigned char bytes[LAYER_CFG_BYTES];
		double d_;
		int64_t i_;
		void *p_;
	} cfg;
};

struct gf_net {
	gf_backend *be;
	int max_batch;
	unsigned flags;
	int init;            /* net-level default */
	int classes;

	struct layer *layers;
	int nlayers;
	struct node *nodes;
	int nnodes;
	int x_node, label_node, out_node;

	float *params, *grads, *buffers;
	size_t nparams, nbuffers;
	gf_view *pviews, *bviews;
	size_t npviews, nbviews;

	void *work;          /* one backend allocation: activations, grads, saved state */
	float *acc;          /* (max node) scratch for gradient accumulation */
	size_t acc_n;

	int batch;           /* of the last forward, 0 before any */
	unsigned mode;       /* of the last forward */
	int has_stateful;    /* bn or dropout present */
	gf_rng rng;

	gf_grad_hook hook;   /* gradient-ready hook (gf_net_set_grad_hook), or NULL */
	void *hook_ud;

	float *ortho_ws;     /* gf_net_ortho_grad's workspace, kept so that a graph step sees the same buffer */
	size_t ortho_n;      /* floats */
};

/* net_build.c: parses the table into net->layers and net->nodes (shapes
 * inferred, parameters laid out, fusions applied). Errors name the layer. */
int gf_net_parse(gf_net *net, const gf_value *table, const gf_net_opts *opts);

/* The backend and its ops, for net.c and the layer kinds. */
#define BE(net) ((net)->be)
#define OPS(net) ((net)->be->ops)

#endif
