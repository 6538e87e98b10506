/* Layer kinds: what one kind of layer tells the engine.
 *
 * Each kind lives in one file under core/nn/layers/ (linear.c, conv.c,
 * bn.c...), which fills one const gf_layer_kind: the Lua key and the
 * arguments it takes, how it reads them, how it infers its output shape
 * and declares its parameters, buffers and saved state, its forward and
 * its backward (backend ops only: the numeric kernels stay in the
 * backends), and where it needs them its double backward (gradient
 * penalties, net_dbwd.c), initialisation, FLOP count, summary note and
 * fusions. layers/registry.c lists the kinds; the engine
 * (net_build.c for the table, net.c for the runs) walks descriptors and
 * never names a kind. docs/nn.md "Adding a layer" walks through one kind
 * end to end.
 *
 * This header is the whole interface between the engine and a kind: the
 * layer record a kind fills (struct layer, its nodes and declared
 * tensors), what it sees of its network (gf_layer_net: the backend, the
 * nodes, the three blocks, the generator), the table it fills
 * (gf_layer_kind), and the helpers it may call: argument readers and layer
 * errors, declarations, initialisation, gradients across nodes
 * (layer_kind.c), and the node and parameter accessors. The kinds include
 * nothing else of the engine; the engine (net_internal.h: gf_net, which
 * begins with its gf_layer_net) stands on them, so calls go one way:
 * net.c, net_dbwd.c -> net_build.c -> layers/registry.c -> a kind ->
 * layer_kind.c.
 * Not installed: kinds are part of libganflow, not plugins. */
#ifndef GF_NN_LAYER_KIND_H
#define GF_NN_LAYER_KIND_H

#include <stddef.h>
#include <stdint.h>

#include <ganflow/err.h>
#include <ganflow/nn.h>

typedef struct gf_layer_kind gf_layer_kind;

/* init = "torch", "dcgan", or "msr" (variance scaling: N(0, init_gain^2 /
 * fan_in) weights and zero biases, R3GAN's MSRInitializer) */
enum { INIT_TORCH = 0, INIT_DCGAN, INIT_MSR };

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
	/* double backward (gf_net_backward2, net_dbwd.c) */
	float *tan;          /* the tangent t (max_batch, shape): the adjoint of grad */
	int tzero;           /* the tangent is zero (the node is not downstream of the input) */
	int dvalid;          /* the first backward wrote grad here (else it is zero) */
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
	float init_gain;     /* INIT_MSR's gain (the entry's init_gain, default 1) */

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

/* What a layer kind sees of its network: the first member of gf_net
 * (net_internal.h, the engine's), handed to every function of the kind's
 * table. The engine fills it; a kind reads it, writes only the nodes and
 * layer records it owns, and runs its ops through be->ops. */
typedef struct gf_layer_net {
	gf_backend *be;
	int max_batch;
	int classes;
	unsigned mode;       /* of the last forward */
	gf_rng rng;          /* the network's generator (dropout, init) */
	struct layer *layers;
	int nlayers;
	struct node *nodes;
	int nnodes;
	int x_node, label_node;
	float *params, *grads, *buffers;   /* the three blocks */
	float *acc;          /* (max node) scratch for gradient accumulation */
} gf_layer_net;

/* Flags of gf_layer_kind. */
enum {
	GF_LK_STATEFUL = 1u << 0,   /* runs differently in GF_TRAIN and GF_EVAL (bn, dropout):
	                             * gf_net_backward refuses an eval forward */
	GF_LK_LABELS = 1u << 1      /* reads the i32 labels: its input defaults to them */
};

/* One table entry being parsed, for the argument readers. */
typedef struct gf_layer_args {
	const gf_value *v;   /* {"type", positional..., key = value...} */
	struct layer *l;
	int npos;            /* positional arguments after the type */
} gf_layer_args;

/* What a backward is asked for. */
typedef struct gf_layer_grad {
	float *dx;   /* write (overwrite) the gradient w.r.t. the input here; NULL: not wanted.
	              * The engine adds it into the input's gradient after backward returns;
	              * a kind that handles a second input (concat) folds dx in itself first
	              * (gf_layer_grad_done) and sets dx to NULL. */
	int dw;      /* compute the parameter gradients (into layer_grad) */
	int acc;     /* add them to the grads block instead of overwriting it */
} gf_layer_grad;

/* What a double backward step is asked for (gf_net_backward2; docs/nn.md
 * "Double backward"). The layer's backward is dx = J(x, w)^T dy; the
 * penalty's adjoint of dx is the tangent t of the input node (its tan;
 * for a second input, that node's tan), and the step adds the derivatives
 * of S = <t, J^T dy> (dy = the output's grad from the first backward). */
typedef struct gf_layer_grad2 {
	float *tout; /* write J t here, the output's tangent (the forward's
	              * Jacobian product at the last forward's point); NULL: not
	              * wanted */
	int dw;      /* add dS/dw into the grads block (layer_grad: always added
	              * to; the engine zeroed it when asked to overwrite) */
	/* dS/dx holding dy, where the backward depends on its input (tanh,
	 * sigmoid, batchnorm...), goes to the input node's gradient through
	 * gf_layer_grad_dst / gf_layer_grad_done, when the node `needs` it;
	 * a kind whose backward does not depend on its input writes nothing */
} gf_layer_grad2;

struct gf_layer_kind {
	const char *name;               /* the Lua key and canonical type name: {"conv", ...} */
	const char *const *aliases;     /* other keys for it, NULL-terminated; may be NULL */
	int min_pos, max_pos;           /* positional arguments after the type */
	const char *keys[16];           /* named keys besides name and input */
	unsigned flags;                 /* GF_LK_* */
	int variant;                    /* for kinds that share one file's functions (the
	                                 * activations, poolings, dropouts): which one */

	/* Reads the entry's arguments into the layer's configuration
	 * (LAYER_CFG) and what neighbours see (as_act, as_upsample). Errors
	 * through gf_layer_err. NULL: nothing to read. */
	int (*parse)(gf_layer_net *net, struct layer *l, const gf_layer_args *a);
	/* Checks the input node(s), sets the output node's shape
	 * (gf_layer_set_shape) and declares parameters, buffers and saved
	 * state (gf_layer_param, gf_layer_buffer, gf_layer_save). The engine
	 * has already refused the labels as input unless GF_LK_LABELS. */
	int (*shapes)(gf_layer_net *net, struct layer *l);
	/* Initialises the parameters from rng (host: scratch as large as the
	 * largest parameter or buffer), drawing in the same order every time: checkpoints
	 * and references depend on it. Called only when the layer has
	 * parameters; NULL: none to initialise. */
	int (*init)(gf_layer_net *net, struct layer *l, gf_rng *rng, float *host);
	/* y = f(x) for a batch of B into the output node, through backend ops.
	 * mode: GF_TRAIN, GF_FREEZE_STATS. A failing op's rc is returned as is
	 * (the engine names the layer). */
	int (*forward)(gf_layer_net *net, struct layer *l, int B, unsigned mode);
	/* Gradients of the last forward from the output node's grad (see
	 * gf_layer_grad): the input's and the parameters' separately, so a G
	 * step can go through D without D's weight gradients. */
	int (*backward)(gf_layer_net *net, struct layer *l, int B, gf_layer_grad *g);

	/* ---- optional ---- */
	/* Double backward (see gf_layer_grad2): the derivative of the backward
	 * itself, for penalties on the input gradient (R1, WGAN-GP, path
	 * length). Called in table order after a forward and a backward that
	 * kept every node's grad, for each layer downstream of the input
	 * whose output gradient is not zero. NULL: the kind has none, and
	 * gf_net_check_backward2 refuses a network that needs it. */
	int (*backward2)(gf_layer_net *net, struct layer *l, int B, gf_layer_grad2 *g);
	/* FLOPs of one forward at batch B (exec: as this engine runs it after
	 * fusions). NULL: 0 (only convolutions and GEMMs are counted). */
	double (*flops)(const gf_layer_net *net, const struct layer *l, int B, int exec);
	/* gf_net_summary's note for the layer ("  + lrelu"), or NULL. */
	const char *(*note)(const struct layer *l);
	/* Fusions (net_build.c "fusions"): the engine offers each unnamed layer
	 * with a single consumer and that consumer. absorb_input: l may take
	 * over prev, the producer of its input (prev is then not run and l reads
	 * prev's input); absorb_output: l may take over next, the consumer of
	 * its output (next is then not run and its readers read l's output).
	 * Return 1 after recording in l's configuration how to run both, 0 to
	 * leave the pair alone. absorbed_note: the summary note of a layer this
	 * kind absorbed. */
	int (*absorb_input)(const gf_layer_net *net, struct layer *l, const struct layer *prev);
	int (*absorb_output)(const gf_layer_net *net, struct layer *l, const struct layer *next);
	const char *absorbed_note;
};

/* layers/registry.c: the kind whose name or alias is type, or NULL. */
const gf_layer_kind *gf_layer_kind_find(const char *type);

/* ---- a kind's configuration ----
 * Kept inside its struct layer (no allocation):
 *   struct conv_cfg { int cin, cout, k; ... };
 *   LAYER_CFG_FITS(struct conv_cfg);
 *   struct conv_cfg *c = LAYER_CFG(struct conv_cfg, l); */
#define LAYER_CFG(type, l) ((type *)(void *)(l)->cfg.bytes)
#define LAYER_CCFG(type, l) ((const type *)(const void *)(l)->cfg.bytes)
#define LAYER_CFG_FITS(type) \
	_Static_assert(sizeof(type) <= LAYER_CFG_BYTES, #type " does not fit in struct layer's cfg")

/* ---- errors and arguments (layer_kind.c) ---- */

/* Sets the detail message "layer N (type): <fmt>" and returns rc. */
int gf_layer_err(int rc, const struct layer *l, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* "(4, 8, 8)" into buf; returns buf. */
char *gf_layer_shape_str(const struct node *n, char *buf, size_t size);

/* GF_ESHAPE unless in is an image (C, H, W) of `channels` channels (any
 * when channels is 0). */
int gf_layer_expect_image(const struct layer *l, const struct node *in, int channels);

/* GF_EPARAM unless groups divides cin and cout; GF_EUNSUPPORTED for groups
 * > 1 on a backend without grouped convolutions (GF_CAP_CONV_GROUPS). */
int gf_layer_check_groups(const gf_layer_net *net, const struct layer *l, int groups, int cin, int cout);

/* The f32 NCHW descriptor of a square k x k convolution from image node x
 * to image node y at batch B (up = 1): conv.c runs it from its input to its
 * output, tconv.c from its output to its input. */
gf_conv_desc gf_layer_conv_desc(const struct node *x, const struct node *y, int k, int stride, int pad, int B);

/* Positional argument i (0 = the first after the type), NULL when absent. */
const gf_value *gf_layer_arg(const gf_layer_args *a, int i);

/* An integer from positional argument i or, when key is not NULL, the
 * named key (never both), def when neither; GF_EPARAM naming the argument
 * unless min <= value <= 2^30. */
int gf_layer_arg_int(const gf_layer_args *a, int i, const char *key, int def, int min, int *out);
/* A number likewise (i < 0: by name only). */
int gf_layer_arg_num(const gf_layer_args *a, int i, const char *key, double def, float *out);
/* A boolean from a named key. */
int gf_layer_arg_bool(const gf_layer_args *a, const char *key, int def, int *out);

/* The node an `input` / `with` value names: "x", "label", the name of an
 * earlier layer or its 1-based table position. Errors name the key. */
int gf_layer_source(gf_layer_net *net, struct layer *l, const char *key, const gf_value *v, int *node);

/* ---- shapes and declarations (layer_kind.c) ---- */

void gf_layer_set_shape(struct node *n, int ndim, const int64_t *shape);

/* Declares the next parameter (view "<key>.<name>", name a static string)
 * of the given shape (ndim <= GF_MAX_DIMS); parameters are laid out in
 * declaration order. */
void gf_layer_param(struct layer *l, const char *name, int ndim, const int64_t *shape);
/* Declares the next buffer (n floats, reset to fill at create and init). */
void gf_layer_buffer(struct layer *l, const char *name, size_t n, float fill);
/* Asks for n floats of workspace saved from forward to backward; returns
 * the slot: l->save[slot] points to them once the network is created. */
int gf_layer_save(struct layer *l, size_t n);

/* ---- initialisation (layer_kind.c) ---- */

/* Weight (param 0) and bias (param 1, when declared) of a linear or
 * convolution: PyTorch's default, U(+-1/sqrt(fan_in)) for both, with
 * init = "dcgan" N(0, 0.02) and a zero bias, with init = "msr"
 * N(0, (init_gain / sqrt(fan_in))^2) and a zero bias. */
int gf_layer_init_fan_in(gf_layer_net *net, struct layer *l, gf_rng *rng, float *host, double fan_in);
/* Copies host (param i's size) into parameter i. */
int gf_layer_upload(gf_layer_net *net, const struct layer *l, int i, const float *host);

/* ---- backward across nodes (layer_kind.c) ---- */

/* Where to write the gradient for node id (its grad the first time in a
 * backward, the accumulation scratch after), and the call that makes it
 * count once written. The engine uses them for every layer's input; a kind
 * with a second input uses them for that one. */
float *gf_layer_grad_dst(gf_layer_net *net, int id);
int gf_layer_grad_done(gf_layer_net *net, int id, int B);

/* ---- accessors ---- */

static inline struct node *layer_in(const gf_layer_net *net, const struct layer *l)
{
	return &net->nodes[l->in];
}

static inline struct node *layer_out(const gf_layer_net *net, const struct layer *l)
{
	return &net->nodes[l->out];
}

/* Parameter i of l, its gradient, buffer i: NULL when not declared. */
static inline float *layer_param(const gf_layer_net *net, const struct layer *l, int i)
{
	return i < l->nparam ? net->params + l->param[i].off : NULL;
}

static inline float *layer_grad(const gf_layer_net *net, const struct layer *l, int i)
{
	return i < l->nparam ? net->grads + l->param[i].off : NULL;
}

static inline float *layer_buffer(const gf_layer_net *net, const struct layer *l, int i)
{
	return i < l->nbuf ? net->buffers + l->buf[i].off : NULL;
}

#endif
