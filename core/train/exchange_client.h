/* The step side of the gradient exchange (<ganflow/dist.h>): what a
 * trainer (<ganflow/train.h>, gf_trainer) does to train its network across
 * data-parallel ranks through an `exchange` stage, whose communicator its
 * backend's `collective` op runs among the step's own ops. Private to
 * core/train: step stages reach it only through their gf_trainer. */
#ifndef GANFLOW_EXCHANGE_CLIENT_H
#define GANFLOW_EXCHANGE_CLIENT_H

#include <ganflow/dist.h>
#include <ganflow/nn.h>
#include <ganflow/train.h>

/* ---- the step side of the exchange protocol ----
 *
 * What gf_trainer calls; with the ports unconnected every call does
 * exactly what a single-process step does (the same backend calls in the
 * same order), so results are bit-identical to a build without it. */
typedef struct gf_exchange_client gf_exchange_client;

/* Creates the helper of a step stage (create()): grads_port / reduced_port
 * are the stage's port indices; net the network it trains; *opt its
 * optimiser (the helper may replace it: ZeRO-1 keeps only the rank's
 * shard of the state); what names the network in messages ("G", "D").
 * Errors are set on ctx. */
int gf_exchange_client_create(gf_exchange_client **out, gf_ctx *ctx, int grads_port, int reduced_port, gf_net *net,
                        gf_optim **opt, const char *what);
void gf_exchange_client_destroy(gf_exchange_client *d);

/* Start of run(): the HELLO handshake, which hands over the exchange's
 * communicator (no-op without an exchange). */
int gf_exchange_client_start(gf_exchange_client *d);

/* The mode agreed with the exchange (GF_DIST_NONE before start or
 * without one), and the run's rank and world. */
gf_dist_mode gf_exchange_client_mode(const gf_exchange_client *d);

/* Right before the LAST backward with GF_NEED_DW of an update (the last
 * micro-batch; D: its fake half), in the same graph step as the update:
 * all-reduce mode arms the network's gradient hook, so buckets are
 * all-reduced while the backward goes on. An update without it
 * all-reduces the whole block in gf_exchange_client_reduce. */
void gf_exchange_client_arm(gf_exchange_client *d, int64_t step);

/* After that backward, for update `step`: all-reduces what is left
 * (all-reduce) or reduce-scatters the block (ZeRO-1), and waits for it
 * (GF_COLL_WAIT: in stream order on a GPU). Device ops only. */
int gf_exchange_client_reduce(gf_exchange_client *d, int64_t step);

/* The range [*off, *off + *count) of the gradient block this rank
 * updates: its ZeRO-1 shard, or the whole block. */
void gf_exchange_client_range(const gf_exchange_client *d, size_t *off, size_t *count);

/* ZeRO-1: *sumsq (a double in the backend's memory, the range's sum of
 * squares) <- its sum over the ranks, the whole gradient's; other modes:
 * nothing. Device ops only. */
int gf_exchange_client_sumsq(gf_exchange_client *d, double *sumsq);

/* After the optimiser step: ZeRO-1 all-gathers the parameters, gossip
 * averages them with the ring neighbours (and waits). Device ops only. */
int gf_exchange_client_after(gf_exchange_client *d);

/* The update on the host (clipping), after gf_exchange_client_reduce:
 * clip (max_norm > 0) and optimiser update as the mode requires:
 * none / all-reduce: gf_net_clip_grad_norm + gf_optim_step; ZeRO-1: clip
 * the shard with the global norm, update the shard, all-gather the
 * parameters; gossip: local clip and update, then the averaging rounds.
 * *norm receives the gradient norm before clipping. Returns 0,
 * GF_ENONFINITE (the caller reports it), GF_ESTOP, GF_EFAIL (already
 * reported through gf_fail), or another code with gf_errmsg() set. */
int gf_exchange_client_update(gf_exchange_client *d, float max_norm, float *norm);

/* Adds the network and its optimiser to a checkpoint state under prefix
 * (gf_state_add_net). ZeRO-1: the optimiser state is first gathered from
 * every rank's shard into a temporary full optimiser, so the checkpoint
 * looks like a single-process one: COLLECTIVE, every rank must call it at
 * the same steps; a rank that saves nothing passes s = NULL. Returns 0,
 * GF_EFAIL / GF_ESTOP (reported), or a code with gf_errmsg() set. */
int gf_exchange_client_state(gf_exchange_client *d, gf_state *s, const char *prefix);

/* Seconds the last update's collectives held this stage's thread: on the
 * CPU the collectives themselves (the other ranks' lateness included), on
 * a GPU only queuing them (the device waits in stream order). */
double gf_exchange_client_wait(const gf_exchange_client *d);

/* Data-parallel ranks draw different noise (slices of one world-sized
 * draw, gf_dist_normal_slice): 1 when this step should, i.e. a mode other
 * than none with world > 1. */
int gf_exchange_client_sliced(const gf_exchange_client *d);

#endif
