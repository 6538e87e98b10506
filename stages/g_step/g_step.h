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
enum { V_LOSS, V_L1, V_SUMSQ, V_PL, V_PL_LEN, V_PL_MEAN, NVALS };

#define MAX_LAG 63   /* micro-steps whose results may be in flight */

/* what an entry's value slots hold (gf_stepdrv_entry flags) */
enum {
	F_LOSS = 1,             /* a micro-step: its loss (and L1 term) in V_LOSS (V_L1) */
	F_NORM = 2,             /* its update left the gradient's sum of squares in V_SUMSQ */
	F_PL = 4,               /* the path length: its penalty, mean length and moving mean in V_PL.. */
};

/* A G step whose results are being read back (the driver's record slot). */
typedef struct rec {
	double loss, l1_sum;
	float gnorm;
	int pl_ran;             /* the path length ran in this step (read back) */
	double pl, pl_mean;
} rec;

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
	/* R3GAN's pairs (loss = "rpgan", g_rp.c) */
	int rp;
	float *rp_pair;         /* (2 batch, G output) [G(z); x] for the replica, device */
	int32_t *rp_lab;        /* (2 batch) its labels */
	size_t rp_numel;        /* G output values per sample */
	gf_tensor rp_shape;     /* G's output shape */
	int32_t *real_labels;   /* (batch) labels of the last (A, B) batch */
	int nreal;              /* samples in it */
	/* the device side (docs/cuda.md) */
	gf_stepdrv *drv;        /* captured steps, results read later */
	gf_devmsg *dm;
	int dev_fakes;          /* fakes go to d_step in device memory */
	int64_t dev_weights;    /* D weights messages that came in device memory */
	rec recs[GF_STEPDRV_RECS];
	/* path length (g_pl.c): a captured step of its own */
	float pl, pl_decay;     /* weight (0 = none), decay of its mean */
	int pl_every, pl_batch;
	int pl_acc;             /* this step's G backward adds to a path-length gradient */
	double *pl_mean_dev;    /* the moving average of the lengths (a device double) */
	gf_penalty *pen;
	float *pl_dev;          /* (pl_batch, G output) the noise y, device */
	size_t pl_n;            /* G output values per sample */
	float pl_scale;         /* 1 / sqrt(H W) */
} gstep;

/* A device tensor of the labels of the fakes (lab_dev), n of them. */
gf_tensor g_lab_tensor(const gstep *s, int n);

/* ---- g_msgs.c ---- */

/* Pushes G's current output as a fakes message: in device memory with an
 * event when d_step takes that (one device), else copied to the host. */
int g_push_fakes(gstep *s, gf_ctx *ctx);
/* Takes D's weights into the replica: in sync mode exactly the version of
 * this step, in async mode the newest available (waiting only for the
 * very first). */
int g_take_weights(gstep *s, gf_ctx *ctx);
/* G's weights to the weights port, when it is connected. */
int g_push_weights(gstep *s, gf_ctx *ctx);
/* G's checkpoint part of this step (a read point: every result in flight
 * is checked first). */
int g_push_state(gstep *s, gf_ctx *ctx);

/* ---- g_pl.c (StyleGAN2's path length) ---- */

/* pl, pl_every, pl_decay: the penalty's buffers and its mean, once G exists. */
int g_pl_setup(gstep *s, gf_ctx *ctx, const gf_value *p);
/* The path-length penalty on a batch of its own, times gain, into G's
 * gradients (written), as an entry of the step's record (its value and
 * mean read back); update: then G's update (a step of its own). */
int g_pl_step(gstep *s, gf_ctx *ctx, double gain, int update);
/* The moving mean's bits from the device (a checkpoint: a read point). */
int g_pl_mean(gstep *s, gf_ctx *ctx, int64_t *bits);

/* ---- g_rp.c (R3GAN's relativistic pairs) ---- */

/* loss = "rpgan": the pair buffers, input 'real' required. */
int g_rp_setup(gstep *s, gf_ctx *ctx, const gf_tensor *gout);
/* The real batch of the next fake batch (before G's forward): its images
 * into the pair buffer's second half, its labels G's (a conditional G). */
int g_rp_take(gstep *s, gf_ctx *ctx);
/* The ops: G's output and the labels into the pair batch [G(z); x]; *x and
 * *lab the replica's inputs. */
int g_rp_pair(gstep *s, gf_ctx *ctx, gf_tensor *x, gf_tensor *lab);

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
