/* g_step's private parts: its state, shared by g_step.c (parameters, the
 * step, results and metrics) and g_paired.c (pix2pix's (A, B) batches and
 * its L1 term). */
#ifndef GF_G_STEP_H
#define GF_G_STEP_H

#include <ganflow/nn.h>
#include <ganflow/stage.h>
#include <ganflow/train.h>

enum { IN_DW, IN_REDUCED, IN_REAL };
enum { OUT_FAKES, OUT_WEIGHTS, OUT_METRICS, OUT_STATE, OUT_GRADS };

/* device slots of one micro-step's results (gf_readback) */
enum { V_LOSS, V_L1, V_SUMSQ, NVALS };

#define RECS 4       /* steps whose results may be in flight */
#define MAX_LAG 63   /* micro-steps whose results may be in flight */

/* A G step whose results are being read back. */
typedef struct rec {
	int64_t step;           /* 0-based step, -1 = free */
	int folded, closed;
	int need;               /* entries of the step: its micro-steps, and its update when that runs apart */
	double loss, l1_sum;
	float gnorm;
	int pl_ran;             /* the path length ran in this step (host values) */
	double pl, pl_mean;
} rec;

/* A micro-step whose results are in flight (readback order). */
typedef struct pend {
	int64_t step;
	int loss;               /* a micro-step: its loss (and L1 term) in V_LOSS (V_L1) */
	int norm;               /* its update left the gradient's sum of squares in V_SUMSQ */
} pend;

typedef struct gstep {
	gf_trainer *tr;         /* G, its optimiser, update, state */
	gf_net *g, *d;          /* G (the trainer's) and the replica of D */
	gf_backend *be;         /* the trainer's */
	gf_rng noise;           /* z and labels */
	gf_ctx *ctx;            /* during run() */
	gf_loss_kind loss;      /* G's loss on D's output */
	int async;
	int batch, zdim, classes, acc;
	int cls;                /* class of a per-class pair, or -1 */
	int64_t publish_every;
	int64_t ckpt_every;
	int64_t step;           /* G updates done */
	int64_t dver;           /* version of the replica's weights, -1 = none yet */
	int64_t fakes_per_step; /* what d_step consumes per G step */
	gf_labels *draw;        /* labels of the fakes */
	float *z;               /* (batch, zdim) host: data-parallel slices */
	int32_t *labels;        /* (batch) host */
	float *z_dev;           /* (batch, zdim) G's input, device */
	int32_t *lab_dev;       /* (batch) labels of the fakes, device */
	float *dpred;           /* (batch, outputs of D) device */
	/* paired (pix2pix) */
	int paired;
	float l1;               /* weight of the L1 term */
	int ca, cb;             /* channels of A and of B (= G's output) */
	int64_t plane;          /* H x W */
	gf_tensor gout;         /* G's output shape (batch = max), for the device of our tensors */
	float *real_dev;        /* (batch, ca + cb, H, W) the (A, B) batch, device */
	float *a_dev, *b_dev;   /* (batch, ca, H, W), (batch, cb, H, W) device */
	float *fake_dev;        /* (batch, ca + cb, H, W) (A, G(A)) device */
	float *dga;             /* (batch, cb, H, W) G's output gradient, device */
	int32_t *real_labels;   /* (batch) labels of the last (A, B) batch */
	int nreal;              /* samples in it */
	/* the device side (docs/cuda.md) */
	gf_stepgraph *sg;
	gf_readback *rb;
	gf_devmsg *dm;
	int lag;                /* entries whose results stay in flight (0: read at once) */
	int deferred;           /* results may stay in flight (a backend with events, no host in the step) */
	int eager;              /* a feature needs the host inside the step */
	int dev_fakes;          /* fakes go to d_step in device memory */
	int64_t dev_weights;    /* D weights messages that came in device memory */
	pend pend[MAX_LAG + 1];
	int pend_head, npend;
	rec recs[RECS];
	/* path length (g_step.c): its lengths come to the host, so a step that
	 * computes it runs eagerly */
	float pl, pl_decay;     /* weight (0 = none), decay of its mean */
	int pl_every, pl_batch;
	int pl_acc;             /* this step's G backward adds to a path-length gradient */
	double pl_mean;         /* the moving average of the lengths */
	gf_penalty *pen;
	float *pl_y;            /* (pl_batch, G output) host noise */
	float *pl_dev;          /* and device */
	size_t pl_n;            /* G output values per sample */
	float pl_scale;         /* 1 / sqrt(H W) */
} gstep;

/* ---- g_paired.c (pix2pix) ---- */

/* G takes A (ca, H, W), gives B (cb, H, W); D takes (A, B): checks the
 * shapes, allocates the device buffers. */
int g_paired_setup(gstep *s, gf_ctx *ctx, const gf_tensor *gin, const gf_tensor *gout, const gf_tensor *din);
/* A device tensor of G's output's device over data (n, c, H, W). */
gf_tensor g_dev_tensor(const gstep *s, float *data, int n, int c);
/* The next (A, B) batch to the device, before the step. */
int g_take_paired(gstep *s, gf_ctx *ctx);
/* The ops of G's forward on A, (A, G(A)) into fake_dev. */
int g_generate_paired_ops(gstep *s, gf_ctx *ctx);
/* G's output gradient: the L1 term (its loss into *l1_slot) plus the
 * G(A) channels of the replica's input gradient. */
int g_paired_grad(gstep *s, gf_ctx *ctx, const gf_tensor *dfake, float *l1_slot);

#endif
