/* Internals shared by the evaluation statistics (core/eval/ sources): the LAPACK
 * routines called through their Fortran symbols, and small helpers.
 * Not installed; see <ganflow/evalstats.h> for the public API.
 */
#ifndef GANFLOW_EVALSTATS_INT_H
#define GANFLOW_EVALSTATS_INT_H

#include <stddef.h>
#include <stdint.h>

/* LAPACK (from libopenblas on Debian) with 32-bit integers and gfortran's
 * hidden string lengths passed last, by value. */
void dsyevd_(const char *jobz, const char *uplo, const int *n, double *a, const int *lda,
             double *w, double *work, const int *lwork, int *iwork, const int *liwork,
             int *info, size_t jobz_len, size_t uplo_len);

/* Eigenvalues (ascending, into w (n)) and, when vectors is 1, eigenvectors
 * of the symmetric matrix a (n, n) (either triangle is read: a is symmetric
 * and row- and column-major coincide). With vectors, row j of a on return
 * is the unit eigenvector of w[j]; without, a is destroyed.
 * Returns 0, -ENOMEM or GF_EFAIL (no convergence) with a message naming
 * what (e.g. "covariance of 'train'"). */
int gf_eval_syev(double *a, int n, double *w, int vectors, const char *what);

/* splitmix64: the KID subset sampler's generator (docs/eval.md). */
static inline uint64_t gf_eval_splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Uniform integer in [0, bound), bound >= 1, by rejection: draws below
 * 2^64 mod bound are redrawn so every value is equally likely. */
static inline uint64_t gf_eval_uniform(uint64_t *state, uint64_t bound)
{
	uint64_t threshold = (0 - bound) % bound;
	for (;;) {
		uint64_t r = gf_eval_splitmix64(state);
		if (r >= threshold)
			return r % bound;
	}
}

#endif
