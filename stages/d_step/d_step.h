/* d_step's private parts: its state, shared by d_step.c (parameters, the
 * step, results and metrics), d_msgs.c (real batches and fakes to the
 * device, D's weights out) and d_reg.c (the regularisers). */
#ifndef GF_D_STEP_H
#define GF_D_STEP_H

#include <ganflow/nn.h>
#include <ganflow/stage.h>
#include <ganflow/train.h>

enum { IN_REAL, IN_FAKES, IN_REDUCED };
enum { OUT_WEIGHTS, OUT_METRICS, OUT_STATE, OUT_GRADS };

/* device slots of one entry's results (gf_stepdrv) */
enum {
	V_LOSS_REAL, V_SUM_REAL, V_LOSS_FAKE, V_SUM_FAKE, V_SUMSQ,
	V_LECAM_REAL, V_LECAM_FAKE,     /* LeCam's term on each half */
	V_R1, V_R1_MEAN, V_R2, V_R2_MEAN, /* a penalty's value and mean length (a pair batch's R2 at V_R1 + 2) */
	V_GP, V_GP_MEAN,
	V_ADA_P, V_ADA_RT,              /* ADA's p and r_t after the D step */
	NVALS
};

/* the device doubles of LeCam's and ADA's state (rst) */
enum { RST_LECAM = 0, RST_ADA = 7, RST_N = 12 };

#define MAX_LAG 63   /* micro-steps whose results may be in flight */

/* what an entry's value slots hold (gf_stepdrv_entry flags; n[0], n[1]:
 * D outputs of the real and the fake half) */
enum {
	F_NORM = 1,             /* its update left the gradient's sum of squares in V_SUMSQ */
	F_HALVES = 2,           /* a micro-step: both halves' losses and sums, LeCam's terms */
	F_R1 = 4,               /* R1 in the real half-step (V_R1, over the micro-batches) */
	F_LAZY = 8,             /* the lazy R1 step (V_R1, whole) */
	F_GP = 16,              /* WGAN-GP (V_GP) */
	F_ADA = 32,             /* ADA's p and r_t (V_ADA_P, V_ADA_RT) */
	F_R2 = 64,              /* R2 on the fakes (V_R2, over the micro-batches) */
	F_PAIR = 128,           /* a pair batch (loss = "rpgan"): one loss, in V_LOSS_REAL */
};

/* What one D iteration adds up for its metrics line. */
typedef struct sums {
	double loss, dreal, dfake, images, stale, lecam;
	double r1, r2, gp;      /* penalties: sums over the D steps that computed them */
	int nr1;                /* D steps that computed R1 */
} sums;

/* An iteration whose results are being read back (the driver's record
 * slot): what the host knows of it, and its sums. */
typedef struct rec {
	int64_t mstep;          /* its metrics step */
	int64_t stale_max;
	sums t;
	double ada_p, ada_rt;   /* after its last D step (read back) */
} rec;

/* The lazy R1 step's arg (d_r1_lazy_ops). */
typedef struct d_lazy {
	int host_update;
	int last_of_iter;       /* it ends the iteration's last D step */
	double images;          /* the D step's real images */
	gf_stepdrv_entry *e;
} d_lazy;

typedef struct dstep {
	gf_trainer *tr;         /* D, its optimiser, update, state */
	gf_net *d;              /* the trainer's */
	gf_backend *be;         /* the trainer's */
	gf_gan_loss loss;
	int async;
	int64_t staleness;      /* async bound, and the weights interval */
	int d_steps, acc, max_batch, cls;
	int64_t ckpt_every;
	int64_t v;              /* iterations done (version of D's weights) */
	int64_t data_pos[2];    /* epoch, position of the last real batch used */
	int64_t stale_max;
	int64_t gseen;          /* async: G updates behind the newest fakes used */
	int64_t ckpt_basis;     /* async: gseen at the last state pushed */
	float *dpred;           /* (max_batch, D outputs) device */
	double *rst;            /* (RST_N) device: LeCam's and ADA's state */
	gf_fake_cache *cache;   /* async: recent fakes */
	const char *reader;     /* the lmdb_reader feeding `real`, NULL = none (valid while the graph is) */
	char data_classes[1024]; /* the classes that data holds, as ranges ("" = unknown or unconditional) */
	gf_lecam lecam;         /* lambda 0 = none; its state: rst's (the host copy at checkpoints) */
	/* the device side (docs/cuda.md) */
	gf_tensor din;          /* D's input shape (batch = max_batch) */
	size_t in_numel;        /* floats per sample */
	int classes;            /* D takes labels */
	float *real_dev, *fake_dev;   /* (max_batch, input) the step's inputs, fixed for graph steps */
	int32_t *rlab_dev, *flab_dev; /* (max_batch) */
	gf_stepdrv *drv;        /* captured steps, results read later */
	gf_devmsg *dm;
	rec recs[GF_STEPDRV_RECS];
	gf_staging *stg;        /* real batches on their way to real_dev / rlab_dev */
	int ahead;              /* staged slot not used yet (sync: the next iteration's first batch), -1 = none */
	int dev_weights;        /* D's weights go to g_step in device memory */
	int64_t dev_fakes;      /* fakes messages that came in device memory */
	/* gradient penalties (d_reg.c) */
	float r1, r2, gp;       /* gammas, lambda (a schedule's value of the step) */
	int r1_on, r2_on, gp_on, lecam_on; /* on: the parameter > 0 at the start */
	int pair;               /* loss = "rpgan": real and fake as one pair batch [x; G(z)] through D */
	float *pair_dev;        /* (2 max_batch, D input) the pair batch, device */
	int32_t *pair_lab;      /* (2 max_batch) its labels */
	int r1_every;           /* 1: in the D step; k > 1: lazy, a step of its own every k D steps */
	gf_penalty *pen;        /* r1 or gp */
	gf_rng gp_rng;          /* gp: the interpolation weights */
	float *eps_dev;         /* gp: (max_batch) the weights, device */
	float *xhat_dev;        /* gp: (max_batch, D input) the interpolates, device */
	int64_t r1_n;           /* lazy R1: the size of the D step's last real batch, still in real_dev */
	/* ADA (d_reg.c): p moves from the signs of D's outputs on the reals */
	float *ada_p;           /* the ada layer's buffer "p" (device), NULL: D has no ada layer */
	gf_ada ada;             /* its options; its state: rst's (the host copy at checkpoints) */
} dstep;

/* ---- d_msgs.c ---- */

/* A device tensor over one of the step's input buffers: images (D's input
 * shape) or, with labels, int32 labels; n samples. */
gf_tensor d_dev_tensor(const dstep *s, void *data, int labels, int64_t n);

/* Takes a real batch into a staging slot (*slot): on an async backend its
 * copy to the device starts at once on the copy stream. */
int d_stage_real(dstep *s, gf_ctx *ctx, gf_msg *m, int *slot);
/* The real batch of staging slot j into the step's input buffers. */
int d_use_real(dstep *s, gf_ctx *ctx, int j);
/* The slot of the next real batch: the one staged ahead, or a new one. */
int d_next_real(dstep *s, gf_ctx *ctx, int *slot);
/* Sync: the next iteration's first real batch, taken (and its copy
 * started) before the weights that let G into that iteration leave. */
int d_take_next_real(dstep *s, gf_ctx *ctx);
/* Releases the staged batches once their copies ran. */
void d_release_staged(dstep *s);
/* The fakes of this micro-step (sync: owned; async: the cache's). */
int d_get_fakes(dstep *s, gf_ctx *ctx, gf_msg **out, int64_t *stale);
/* The fakes into the step's input buffers; the message is let go. */
int d_use_fakes(dstep *s, gf_ctx *ctx, gf_msg *m);
/* D's input buffers and the real batches' staging (cbe: its copy
 * instance, or NULL; taken over), once D exists. */
int d_dev_buffers(dstep *s, gf_ctx *ctx, gf_backend *cbe);
/* D's checkpoint part of iteration v (a read point: every result in
 * flight is checked first), and the part when one is due. */
int d_push_state(dstep *s, gf_ctx *ctx);
int d_maybe_state(dstep *s, gf_ctx *ctx);
/* D's weights (version v) to g_step: a device copy behind an event on one
 * device, else packed on the host; with the fakes g_step must make per
 * step. */
int d_push_weights(dstep *s, gf_ctx *ctx);

/* ---- d_reg.c: the regularisers (ADA, LeCam, R1, WGAN-GP) ---- */

/* r1, r1_every, gp: what they may be combined with. */
int d_penalty_conf(dstep *s, gf_ctx *ctx, const gf_value *p);
/* At an iteration's start: the scheduled weights and ADA's p. */
int d_schedules(dstep *s, gf_ctx *ctx);
/* After set-up: a scheduled option must be on; a scheduled p stops ADA's
 * controller; R3GAN's pairs share a label (no async conditional rpgan). */
int d_setup_check(dstep *s, gf_ctx *ctx);
/* The penalty's buffers and generator, once D and its input buffers exist;
 * the device doubles of LeCam and ADA. */
int d_penalty_setup(dstep *s, gf_ctx *ctx);
/* ADA: the ada layer of D, its p, the controller's options and state. */
int d_ada_setup(dstep *s, gf_ctx *ctx, const gf_value *p);
/* LeCam's and ADA's state between the host (checkpoints, resume) and the
 * device doubles: to the device, or back at a read point. */
int d_reg_state(dstep *s, gf_ctx *ctx, int to_dev);
/* The ops that end a D step (ADA's p, LeCam's averages), in its last
 * captured step, whose entry e they mark. */
int d_step_tail(dstep *s, gf_ctx *ctx, double images, int last_of_iter, gf_stepdrv_entry *e);
/* The penalty of D's last forward, weighted like a half of D's loss times
 * gain, its gradient added to D's (or written: accumulate 0), with dy (may
 * be NULL) walked in the same pass; its value and mean length into out (2
 * device doubles). */
int d_penalty(dstep *s, gf_ctx *ctx, int distance, float weight, double gain, const float *dy, unsigned accumulate,
              double *out);
/* R3GAN's gamma/2 (R1 + R2) on the pair batch of D's last forward (n reals
 * then n fakes): r1 on the reals, r2 on the fakes, each part's mean, weight
 * 1 / accumulate (the pair loss is not halved), walked with dy; values
 * into the R1 slots (R2 at V_R1 + 2). */
int d_pair_penalty(dstep *s, gf_ctx *ctx, int64_t n, const float *dy, unsigned accumulate);
/* R3GAN's pair batch (loss = "rpgan"): [x; G(z)] through D at once, the
 * relativistic loss on the pairs, the halves' sums, ADA's signs on the
 * reals, R1 + R2 or the plain backward in the same walk. *nout: D's
 * outputs of one half. */
int d_pair_step(dstep *s, gf_ctx *ctx, int64_t n, unsigned accumulate, size_t *nout);
/* WGAN-GP on one micro-batch: D's gradient norm at the interpolates of xr
 * and xf pulled to 1; its value into the GP slots. */
int d_gp_step(dstep *s, gf_ctx *ctx, const gf_tensor *xr, const gf_tensor *lr, const gf_tensor *xf);
/* The lazy R1 step after a D step, captured as an entry of its own; it
 * ends the D step (ADA, LeCam: last_of_iter, the D step's images). */
int d_lazy_step(dstep *s, gf_ctx *ctx, int last_of_iter, double images);
/* StyleGAN2's lazy R1 step (gf_stepdrv_ops, arg: d_lazy) on the last D
 * step's real batch: the penalty times r1_every, an optimiser update. */
int d_r1_lazy_ops(void *self, gf_ctx *ctx, void *arg);

#endif
