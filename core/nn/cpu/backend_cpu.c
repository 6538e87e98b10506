/* The CPU backend: host memory, OpenBLAS for GEMMs, a small thread team
 * for everything else. Fills the gf_backend_ops vtable (<ganflow/backend.h>)
 * from the op files of this folder (ops_cpu.c, conv_cpu.c, bn_cpu.c). The
 * top of the folder: the op files stand on device_cpu.c (scratch) and
 * team.c, never on this file. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cblas.h>

#include <ganflow/err.h>
#include <ganflow/nn.h>

#include "cpu.h"

/* OpenBLAS extensions (declared by its cblas.h too, repeated here so that
 * another CBLAS header still compiles). */
void openblas_set_num_threads(int num_threads);

static int cpu_sync(gf_backend *be)
{
	(void)be;
	return 0;
}

static void cpu_destroy(gf_backend *be)
{
	gf_cpu *c = gf_cpu_of(be);
	gf_cpu_check_detach(c);
	gf_team_destroy(c->team);
	free(c->scratch);
	free(c);
}

/* ---- the vtable ---- */

static const gf_backend_ops cpu_ops = {
	.abi = GF_BACKEND_ABI,
	.size = sizeof(gf_backend_ops),
	.name = "cpu",
	.destroy = cpu_destroy,
	.alloc = gf_cpu_alloc_plain,
	.free = gf_cpu_free_plain,
	.copy = gf_cpu_copy_plain,
	.fill = gf_cpu_fill,
	.sync = cpu_sync,
	.gemm = gf_cpu_gemm,
	.bias_add = gf_cpu_bias_add,
	.bias_grad = gf_cpu_bias_grad,
	.axpy = gf_cpu_axpy,
	.scale = gf_cpu_scale,
	.copy2d = gf_cpu_copy2d,
	.conv2d_forward = gf_cpu_conv2d_forward,
	.conv2d_backward = gf_cpu_conv2d_backward,
	.bn_forward_train = gf_cpu_bn_forward_train,
	.bn_forward_eval = gf_cpu_bn_forward_eval,
	.bn_backward = gf_cpu_bn_backward,
	.act_forward = gf_cpu_act_forward,
	.act_backward = gf_cpu_act_backward,
	.upsample_forward = gf_cpu_upsample_forward,
	.upsample_backward = gf_cpu_upsample_backward,
	.dropout_forward = gf_cpu_dropout_forward,
	.dropout_backward = gf_cpu_dropout_backward,
	.pooling_forward = gf_cpu_pooling_forward,
	.pooling_backward = gf_cpu_pooling_backward,
	.softmax_forward = gf_cpu_softmax_forward,
	.softmax_backward = gf_cpu_softmax_backward,
	.embedding_forward = gf_cpu_embedding_forward,
	.embedding_backward = gf_cpu_embedding_backward,
	.loss = gf_cpu_loss,
	.optim_step = gf_cpu_optim_step,
	.sumsq = gf_cpu_sumsq,
	.rng_uniform = gf_cpu_rng_uniform,
	.rng_normal = gf_cpu_rng_normal,
	.sn_forward = gf_cpu_sn_forward,
	.sn_backward = gf_cpu_sn_backward,
	.row_dot = gf_cpu_row_dot,
	.row_scale = gf_cpu_row_scale,
	.cbn_forward = gf_cpu_cbn_forward,
	.cbn_backward = gf_cpu_cbn_backward,
	.augment_forward = gf_cpu_augment_forward,
	.augment_backward = gf_cpu_augment_backward,
	.gemm_batched = gf_cpu_gemm_batched,
	.act_backward2 = gf_cpu_act_backward2,
	.bn_backward2 = gf_cpu_bn_backward2,
	.pooling_gather = gf_cpu_pooling_gather,
	.augment_linear = gf_cpu_augment_linear,
	.mbstd_forward = gf_cpu_mbstd_forward,
	.mbstd_backward = gf_cpu_mbstd_backward,
	.mbstd_backward2 = gf_cpu_mbstd_backward2,
	.loss_dev = gf_cpu_loss_dev,
	.reduce_dev = gf_cpu_reduce_dev,
	.bias_act_forward = gf_cpu_bias_act_forward,
	.bias_act_backward = gf_cpu_bias_act_backward,
	.rsqrt_eps = gf_cpu_rsqrt_eps,
	.fir_forward = gf_cpu_fir_forward,
	.fir_backward = gf_cpu_fir_backward,
	.ada_params = gf_cpu_ada_params,
	.ada_forward = gf_cpu_ada_forward,
	.ada_backward = gf_cpu_ada_backward,
	.style_mix = gf_cpu_style_mix,
	.ema = gf_cpu_ema,
	.clip_dev = gf_cpu_clip_dev,
	.lecam_dev = gf_cpu_lecam_dev,
	.lecam_avg = gf_cpu_lecam_avg,
	.ada_signs = gf_cpu_ada_signs,
	.ada_update = gf_cpu_ada_update,
	.penalty_factors = gf_cpu_penalty_factors,
	.peak_flops = gf_cpu_peak_flops,
	.collective = gf_cpu_collective,
};

/* The table of an instance under GANFLOW_CPU_DEVICE_CHECK=1: this one with
 * graph_cpu.c's checked ops over it, made once. */
static gf_backend_ops check_ops;
static pthread_once_t check_once = PTHREAD_ONCE_INIT;

static void make_check_ops(void)
{
	check_ops = cpu_ops;
	gf_cpu_check_ops(&check_ops);
}


int gf_backend_cpu_create(const gf_backend_opts *opts, gf_backend **out)
{
	*out = NULL;
	/* tf32 is fp32 with tensor-core rounding on a GPU: here plain fp32 */
	if (opts && opts->precision != GF_PREC_FP32 && opts->precision != GF_PREC_TF32)
		return gf_seterr(GF_EUNSUPPORTED, "cpu backend: precision %s is not supported (fp32 and tf32, which "
		                                  "computes fp32 here; bf16/fp16 need backend = \"cuda\")",
		                 opts->precision == GF_PREC_BF16 ? "bf16" : "fp16");
	int threads = opts ? opts->threads : 0;
	if (threads <= 0) {
		const char *env = getenv("GANFLOW_THREADS");
		threads = env ? atoi(env) : 0;
	}
	if (threads <= 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		threads = n > 0 ? (int)n : 1;
	}
	gf_cpu *c = calloc(1, sizeof(*c));
	if (!c)
		return gf_seterr(-ENOMEM, "cpu backend: out of memory");
	int rc = gf_team_create(&c->team, threads);
	if (rc) {
		free(c);
		return gf_seterr(rc, "cpu backend: cannot start %d threads", threads);
	}
	/* GEMMs are split over the team, one single-threaded OpenBLAS call per
	 * thread: OpenBLAS's own workers would spin (sched_yield) against the
	 * team's between GEMMs and cost a quarter of the CPU time */
	openblas_set_num_threads(1);
	c->be.ops = &cpu_ops;
	if (gf_cpu_check_wanted()) {
		if ((rc = gf_cpu_check_attach(c))) {
			gf_team_destroy(c->team);
			free(c);
			return rc;
		}
		pthread_once(&check_once, make_check_ops);
		c->be.ops = &check_ops;
	}
	c->be.device = GF_CPU;
	c->be.device_index = 0;
	c->be.threads = threads;
	c->be.caps = GF_CAP_CONV_UP2 | GF_CAP_CONV_GROUPS;
	c->be.impl = c;
	*out = &c->be;
	return 0;
}
