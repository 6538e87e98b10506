/* The network's internal structures, shared by layers.c (table parsing,
 * shape inference, fusion) and net.c (memory, forward, backward, views).
 * Not installed. */
#ifndef GF_NN_NET_INTERNAL_H
#define GF_NN_NET_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <ganflow/nn.h>

typedef enum {
	L_LINEAR = 0,
	L_CONV,
	L_TCONV,
	L_UPSAMPLE,
	L_BN,
	L_RELU,
	L_LRELU,
	L_TANH,
	L_SIGMOID,
	L_DROPOUT,
	L_DROPOUT2D,
	L_RESHAPE,
	L_FLATTEN,
	L_EMBEDDING,
	L_CONCAT,
	L_MAXPOOL,
	L_AVGPOOL,
	L_SOFTMAX
} layer_kind;

enum { INIT_TORCH = 0, INIT_DCGAN };

#define MAX_SDIMS (GF_MAX_DIMS - 1)   /* per-sample dimensions */

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

struct layer {
	layer_kind kind;
	const char *type;    /* canonical type name */
	int index;           /* 0-based table position */
	char key[64];        /* view prefix: the name, or the index */
	char name[48];       /* user name ("" when none) */
	int in, with, out;   /* node ids; with = -1 unless concat */

	/* hyper-parameters */
	int cin, cout, k, stride, pad, opad;   /* conv, tconv, pooling */
	int up;              /* conv: 2 when a nearest upsample x2 is fused in */
	int scale;           /* upsample */
	int fin, fout;       /* linear; embedding: fin = classes, fout = dim */
	float eps, momentum; /* bn */
	float slope;         /* lrelu */
	float p;             /* dropout */
	int bias, affine;
	int init;

	/* parameters: offsets (floats) into params/grads, -1 when absent */
	long w_off, b_off;
	int w_ndim;
	int64_t w_shape[4];
	size_t w_n, b_n;
	long rm_off, rv_off; /* bn running statistics in buffers */

	/* saved for backward (workspace) */
	float *mean, *rstd, *mask;
	int32_t *idx;

	/* fusion */
	int skip;            /* absorbed into another layer, not run */
	gf_act act;          /* bn: activation fused after the affine step */
	float act_param;
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
};

/* layers.c: parses the table into net->layers and net->nodes (shapes
 * inferred, parameters laid out, fusions applied). Errors name the layer. */
int gf_net_parse(gf_net *net, const gf_value *table, const gf_net_opts *opts);

/* Backend op call with the error check, for net.c and layers.c. */
#define BE(net) ((net)->be)
#define OPS(net) ((net)->be->ops)

#endif
