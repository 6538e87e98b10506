/* bench_scaling: the alpha-beta cost model of data-parallel GAN training
 * with a ring all-reduce, and its calibration. tests/bench/scaling.sh runs
 * the measurements (1 vs 2 ranks) and calls this program twice:
 *
 *   mpirun -np 2 bench_scaling calibrate
 *       times MPI_Allreduce of 8 bytes and of 4 MiB between two ranks of
 *       this machine and prints "alpha_us=A beta_gbps=B" (a two-rank ring
 *       all-reduce costs 2 alpha + S / B, the same law as below at p = 2).
 *
 *   bench_scaling model t1=S alpha_us=A beta_gbps=B bucket_mb=M [measured=E]
 *       builds the seed backbones (DC-GAN and DC-CGAN of the ORNL paper's
 *       tables 1-4, Fashion-MNIST 32x32) with the nn engine, counts their
 *       parameters and FLOPs, simulates the all-reduce buckets the step
 *       stages form (gf_net_set_grad_hook order: last layer first), and
 *       prints:
 *        - the model at p = 2 on this machine with the measured one-rank
 *          step time t1 and the calibrated alpha/beta, next to the measured
 *          2-rank efficiency: E = t1 / (t1 + communication), counting every
 *          bucket of G and D (see exposed());
 *        - predictions for p = 8 ... 1024 GPUs with NCCL's ring all-reduce:
 *          T(S, p) = 2 (p - 1) alpha + 2 (p - 1) / p * S / B, intra-node
 *          NVLink (p <= 8: alpha 3 us, B 300 GB/s) and InfiniBand across
 *          nodes (alpha 8 us, B 23 GB/s: one 200 Gb/s HDR port per GPU),
 *          with a GPU step time from the FLOP count at an assumed 20
 *          TFLOP/s achieved (no GPU was measured: see docs/dist.md);
 *          per-class training (no communication) stays at 1.
 * The last line is "model: ..." (scaling.sh prints the convention line).
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ganflow/err.h>
#include <ganflow/lua.h>
#include <ganflow/nn.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- calibration (under mpirun -np 2) ---- */

static double time_allreduce(float *buf, int n, int reps)
{
	MPI_Barrier(MPI_COMM_WORLD);
	double best = 1e30;
	for (int r = 0; r < reps; r++) {
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = now();
		MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		double t = now() - t0;
		MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
		if (t < best)
			best = t;
	}
	return best;
}

static int calibrate(void)
{
	MPI_Init(NULL, NULL);
	int rank, world;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &world);
	int n = 1 << 20; /* 4 MiB */
	float *buf = calloc((size_t)n, sizeof(float));
	if (!buf)
		return 1;
	double small = time_allreduce(buf, 2, 200);
	double big = time_allreduce(buf, n, 20);
	double p = world;
	double alpha = small / (2.0 * (p - 1));
	double bytes = (double)n * sizeof(float);
	double beta = 2.0 * (p - 1) / p * bytes / (big - 2.0 * (p - 1) * alpha);
	if (rank == 0)
		printf("alpha_us=%.3f beta_gbps=%.3f\n", alpha * 1e6, beta / 1e9);
	free(buf);
	MPI_Finalize();
	return 0;
}

/* ---- the model ---- */

typedef struct backbone {
	const char *name;
	const char *g, *d;     /* Lua expressions of the layer tables */
	size_t gp, dp;         /* parameters */
	double flops;          /* one training step (G step + D step), batch 64 */
	double gb[64], db[64]; /* bytes of each all-reduce bucket of G and of D */
	int ngb, ndb;
} backbone;

static int build(gf_backend *be, const char *expr, int batch, gf_net **out)
{
	char code[512];
	snprintf(code, sizeof(code), "return %s", expr);
	gf_value t;
	int rc = gf_lua_eval(code, &t);
	if (rc)
		return rc;
	gf_net_opts o = { .max_batch = batch };
	rc = gf_net_create(out, be, &t, &o);
	gf_value_free(&t);
	return rc;
}

/* The buckets the step stage forms (core/train/dist_step.c): parameter
 * ranges in reverse layout order (the order the backward pass completes
 * them), cut whenever the pending range reaches the bucket size, the rest
 * sent after the backward. Returns the number of buckets. */
static int buckets(gf_net *net, size_t bucket_floats, double *bytes, int max)
{
	size_t nv;
	const gf_view *v = gf_net_views(net, GF_PARAMS, &nv);
	size_t pending = 0;
	int n = 0;
	for (size_t i = nv; i-- > 0;) {
		pending += v[i].numel;
		if ((pending >= bucket_floats || i == 0) && n < max) {
			bytes[n++] = (double)pending * sizeof(float);
			pending = 0;
		}
	}
	return n;
}

static double ring(double bytes, int p, double alpha, double beta)
{
	if (p <= 1)
		return 0;
	return 2.0 * (p - 1) * alpha + 2.0 * (p - 1) / p * bytes / beta;
}

/* Communication a step cannot hide: every bucket of G and of D. The seed
 * backbones keep most of their parameters in the first layer (the
 * generator's linear layer), whose gradients the backward pass completes
 * last, so the overlap with the rest of the backward hides almost nothing;
 * the model counts all of it (an upper bound on the exposed time). */
static double exposed(const backbone *b, int p, double alpha, double beta)
{
	double t = 0;
	for (int k = 0; k < b->ngb; k++)
		t += ring(b->gb[k], p, alpha, beta);
	for (int k = 0; k < b->ndb; k++)
		t += ring(b->db[k], p, alpha, beta);
	return t;
}

static const char *arg(int argc, char **argv, const char *key, const char *def)
{
	size_t k = strlen(key);
	for (int i = 2; i < argc; i++)
		if (!strncmp(argv[i], key, k) && argv[i][k] == '=')
			return argv[i] + k + 1;
	return def;
}

static int model(int argc, char **argv)
{
	double t1 = atof(arg(argc, argv, "t1", "0.4"));
	double alpha = atof(arg(argc, argv, "alpha_us", "5")) * 1e-6;
	double beta = atof(arg(argc, argv, "beta_gbps", "5")) * 1e9;
	double bucket_mb = atof(arg(argc, argv, "bucket_mb", "4"));
	double measured = atof(arg(argc, argv, "measured", "-1"));
	size_t bucket = (size_t)(bucket_mb * 1048576.0 / sizeof(float));
	static backbone bb[2];
	bb[0].name = "DC-GAN";
	bb[0].g = "require('backbones.dcgan').G{z = 100, size = 32, channels = 1}";
	bb[0].d = "require('backbones.dcgan').D{size = 32, channels = 1}";
	bb[1].name = "DC-CGAN";
	bb[1].g = "require('backbones.dcgan').CG{z = 100, size = 32, channels = 1, classes = 10}";
	bb[1].d = "require('backbones.dcgan').CD{size = 32, channels = 1, classes = 10}";
	gf_backend *be;
	if (gf_backend_cpu_create(NULL, &be))
		return 1;
	const int B = 64;
	for (int i = 0; i < 2; i++) {
		gf_net *g, *d;
		if (build(be, bb[i].g, B, &g) || build(be, bb[i].d, B, &d)) {
			fprintf(stderr, "bench_scaling: %s: %s\n", bb[i].name, gf_errmsg());
			return 1;
		}
		gf_net_block(g, GF_PARAMS, &bb[i].gp);
		gf_net_block(d, GF_PARAMS, &bb[i].dp);
		double gf_, gb, df, db, ddx;
		gf_net_flops(g, B, 0, NULL, &gf_);
		gf_net_flops(g, B, GF_NEED_DW, NULL, &gb);
		gf_net_flops(d, B, 0, NULL, &df);
		gf_net_flops(d, B, GF_NEED_DW, NULL, &db);
		gf_net_flops(d, B, GF_NEED_DX, NULL, &ddx);
		/* G step: G fwd, D replica fwd + input-grad bwd, G bwd;
		 * D step: D fwd + weight bwd on real and on fake */
		bb[i].flops = gf_ + df + ddx + gb + 2 * (df + db);
		bb[i].ngb = buckets(g, bucket, bb[i].gb, 64);
		bb[i].ndb = buckets(d, bucket, bb[i].db, 64);
		gf_net_destroy(g);
		gf_net_destroy(d);
	}
	gf_backend_close(be);

	printf("\nalpha-beta model: ring all-reduce of S bytes over p ranks T(S, p) = 2(p-1) alpha + 2(p-1)/p S/B per bucket;\n"
	       "efficiency E(p) = T_step / (T_step + sum over the buckets of G and D of T(S_b, p))\n");
	printf("%-8s %10s %10s %12s %12s %9s\n", "backbone", "G params", "D params", "grad bytes", "GFLOP/step", "buckets");
	for (int i = 0; i < 2; i++)
		printf("%-8s %10zu %10zu %12.0f %12.2f %4d + %-3d\n", bb[i].name, bb[i].gp, bb[i].dp,
		       4.0 * (double)(bb[i].gp + bb[i].dp), bb[i].flops / 1e9, bb[i].ngb, bb[i].ndb);

	/* this machine, p = 2, DC-GAN */
	double ex2 = exposed(&bb[0], 2, alpha, beta);
	double e2 = t1 / (t1 + ex2);
	printf("\ncheck on this machine (CPU, MPI shared memory): alpha %.2f us, B %.2f GB/s, one-rank step %.1f ms\n",
	       alpha * 1e6, beta / 1e9, t1 * 1e3);
	printf("  DC-GAN p=2: communication %.2f ms/step -> predicted efficiency %.3f%s\n",
	       ex2 * 1e3, e2, measured >= 0 ? "" : " (no measurement given)");
	if (measured >= 0)
		printf("  measured 2-rank all-reduce efficiency %.3f (difference %+.3f: what the model leaves out, "
		       "chiefly two processes sharing the cores and the ranks' step skew)\n", measured, measured - e2);

	const double flops_rate = 20e12; /* assumed achieved on one GPU */
	printf("\npredicted weak-scaling efficiency with NCCL ring all-reduce (GPU step = FLOPs at an assumed 20 TFLOP/s;\n"
	       "p <= 8: NVLink alpha 3 us, B 300 GB/s; p > 8: InfiniBand alpha 8 us, B 23 GB/s); per-class needs no "
	       "communication: 1.000 at every p\n");
	printf("%-8s %9s", "backbone", "step ms");
	static const int ps[] = { 8, 16, 32, 64, 128, 256, 512, 1024 };
	for (size_t k = 0; k < sizeof(ps) / sizeof(ps[0]); k++)
		printf(" %7d", ps[k]);
	printf("\n");
	for (int i = 0; i < 2; i++) {
		double tc = bb[i].flops / flops_rate;
		printf("%-8s %9.2f", bb[i].name, tc * 1e3);
		for (size_t k = 0; k < sizeof(ps) / sizeof(ps[0]); k++) {
			int p = ps[k];
			double a = p <= 8 ? 3e-6 : 8e-6, b = p <= 8 ? 300e9 : 23e9;
			double ex = exposed(&bb[i], p, a, b);
			printf(" %7.3f", tc / (tc + ex));
		}
		printf("\n");
	}
	printf("model: DC-GAN p=2 predicted_efficiency=%.3f measured=%.3f\n", e2, measured);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "calibrate"))
		return calibrate();
	if (argc >= 2 && !strcmp(argv[1], "model"))
		return model(argc, argv);
	fprintf(stderr, "usage: bench_scaling calibrate | model t1= alpha_us= beta_gbps= bucket_mb= [measured=]\n");
	return 2;
}
