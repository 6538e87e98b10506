/* Feature statistics for FID: mean and covariance of classifier features in
 * double precision, the real-data cache file (GFSTATS1), the FNV-1a cache
 * key helpers and the n > d rule. See <ganflow/evalstats.h> and
 * docs/eval.md. The evaluator computes the real split's statistics once per
 * (split, classifier) through here and reloads them on later runs.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cblas.h>

#include <ganflow/err.h>
#include <ganflow/evalstats.h>

#include "evalstats_int.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "the GFSTATS1 cache format is written in host order: little-endian only");

/* ---- mean and covariance ---- */

/* Rows per centred block handed to dsyrk: about 4 MB of doubles, so the
 * block stays in cache whatever d, and at least 16 rows so dsyrk has work. */
static int64_t block_rows(int d)
{
	int64_t b = ((int64_t)1 << 19) / d;
	return b < 16 ? 16 : b > 1024 ? 1024 : b;
}

/* Statistics over the rows i of x (n, d) with labels == NULL or
 * labels[i] == label. Two passes (mean, then centred dsyrk) in row order,
 * so the result depends only on the data and OpenBLAS's thread count. */
static int stats_rows(const float *x, const int32_t *labels, int32_t label, int64_t n,
                      int d, gf_feat_stats *out)
{
	int rc = 0;
	double *mu = NULL, *sigma = NULL, *blk = NULL;
	int64_t m = 0;

	if (!out)
		return gf_seterr(GF_EPARAM, "feature statistics: out is NULL");
	memset(out, 0, sizeof(*out));
	if (!x || n < 0 || d < 1)
		return gf_seterr(GF_EPARAM, "feature statistics: bad input (x %s, n=%" PRId64 ", d=%d)",
		                 x ? "set" : "NULL", n, d);

	mu = calloc((size_t)d, sizeof(*mu));                       /* (d) */
	sigma = calloc((size_t)d * (size_t)d, sizeof(*sigma));     /* (d, d) */
	int64_t bmax = block_rows(d);
	blk = malloc((size_t)bmax * (size_t)d * sizeof(*blk));     /* (bmax, d) */
	if (!mu || !sigma || !blk) {
		rc = gf_seterr(-ENOMEM, "feature statistics: out of memory for d=%d", d);
		goto fail;
	}

	/* pass 1: mean, checking every value on the way */
	for (int64_t i = 0; i < n; i++) {
		if (labels && labels[i] != label)
			continue;
		const float *row = x + i * (int64_t)d;
		for (int j = 0; j < d; j++) {
			if (!isfinite(row[j])) {
				rc = gf_seterr(GF_ENONFINITE, "feature statistics: feature row %" PRId64
				               " column %d is %f", i, j, (double)row[j]);
				goto fail;
			}
			mu[j] += row[j];
		}
		m++;
	}
	if (m < 2) {
		if (labels)
			rc = gf_seterr(GF_EPARAM, "feature statistics: %" PRId64 " feature rows carry"
			               " label %d; a covariance needs at least 2", m, (int)label);
		else
			rc = gf_seterr(GF_EPARAM, "feature statistics: %" PRId64 " feature rows;"
			               " a covariance needs at least 2", m);
		goto fail;
	}
	for (int j = 0; j < d; j++)
		mu[j] /= (double)m;

	/* pass 2: sigma += centred_blk^T centred_blk, upper triangle */
	int64_t i = 0, filled = 0;
	double beta = 0.0;
	for (;;) {
		while (i < n && filled < bmax) {
			if (!labels || labels[i] == label) {
				const float *row = x + i * (int64_t)d;
				double *dst = blk + filled * d;
				for (int j = 0; j < d; j++)
					dst[j] = (double)row[j] - mu[j];
				filled++;
			}
			i++;
		}
		if (filled == 0)
			break;
		cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, d, (int)filled, 1.0,
		            blk, d, beta, sigma, d);
		beta = 1.0;
		filled = 0;
	}

	/* n - 1 denominator (numpy.cov), then mirror the upper triangle */
	double scale = 1.0 / (double)(m - 1);
	for (int r = 0; r < d; r++) {
		sigma[(size_t)r * d + r] *= scale;
		for (int c = r + 1; c < d; c++) {
			double v = sigma[(size_t)r * d + c] * scale;
			sigma[(size_t)r * d + c] = v;
			sigma[(size_t)c * d + r] = v;
		}
	}

	free(blk);
	out->d = d;
	out->n = m;
	out->mu = mu;
	out->sigma = sigma;
	return 0;
fail:
	free(mu);
	free(sigma);
	free(blk);
	return rc;
}

int gf_feat_stats_compute(const float *x, int64_t n, int d, gf_feat_stats *out)
{
	return stats_rows(x, NULL, 0, n, d, out);
}

int gf_feat_stats_compute_label(const float *x, const int32_t *labels, int64_t n,
                                int d, int32_t label, gf_feat_stats *out)
{
	if (!labels) {
		if (out)
			memset(out, 0, sizeof(*out));
		return gf_seterr(GF_EPARAM, "feature statistics: labels is NULL");
	}
	return stats_rows(x, labels, label, n, d, out);
}

void gf_feat_stats_free(gf_feat_stats *s)
{
	if (!s)
		return;
	free(s->mu);
	free(s->sigma);
	free(s->feats);
	memset(s, 0, sizeof(*s));
}

int gf_evalstats_check_n(int64_t n, int d, const char *what)
{
	if (!what || !*what)
		what = "features";
	if (d < 1)
		return gf_seterr(GF_EPARAM, "%s: feature dimension %d", what, d);
	if (n <= d)
		return gf_seterr(GF_EPARAM, "%s: n=%" PRId64 " is not more than the feature"
		                 " dimension %d, so the covariance is singular: FID needs"
		                 " n >= %d (10000 or more is usual)", what, n, d, d + 1);
	return 0;
}

int gf_evalstats_threads(int n)
{
	if (n > 0)
		openblas_set_num_threads(n);
	return openblas_get_num_threads();
}

/* ---- cache keys ---- */

uint64_t gf_hash64(const void *data, size_t len, uint64_t h)
{
	const unsigned char *p = data;
	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

int gf_hash64_file(const char *path, uint64_t h, uint64_t *out)
{
	if (!path || !out)
		return gf_seterr(GF_EPARAM, "gf_hash64_file: NULL argument");
	FILE *f = fopen(path, "rb");
	if (!f) {
		int e = errno;
		return gf_seterr(-e, "%s: %s", path, strerror(e));
	}
	unsigned char *buf = malloc(1 << 20);
	if (!buf) {
		fclose(f);
		return gf_seterr(-ENOMEM, "%s: out of memory", path);
	}
	size_t got;
	while ((got = fread(buf, 1, 1 << 20, f)) > 0)
		h = gf_hash64(buf, got, h);
	int rc = 0;
	if (ferror(f))
		rc = gf_seterr(-EIO, "%s: read error", path);
	free(buf);
	fclose(f);
	if (rc == 0)
		*out = h;
	return rc;
}

/* ---- the GFSTATS1 cache file ----
 *
 * little-endian, in order:
 *   char     magic[8]   "GFSTATS1"
 *   uint32   version    1
 *   uint32   d
 *   int64    n
 *   uint64   key
 *   uint32   has_feats  0 or 1
 *   uint32   reserved   0
 *   char     split[64]  NUL-padded
 *   double   mu[d]
 *   double   sigma[d*d] row-major
 *   float    feats[n*d] only when has_feats
 *   uint64   FNV-1a 64 of every byte above
 */

#define STATS_MAGIC "GFSTATS1"
#define STATS_VERSION 1u

struct stats_header {
	char magic[8];
	uint32_t version;
	uint32_t d;
	int64_t n;
	uint64_t key;
	uint32_t has_feats;
	uint32_t reserved;
	char split[64];
};
_Static_assert(sizeof(struct stats_header) == 104, "GFSTATS1 header is 104 bytes");

/* Bytes of the payload after the header, or -1 when it would overflow. */
static int64_t payload_bytes(int64_t n, int64_t d, int feats)
{
	if (d < 1 || d > (1 << 20) || n < 0 || n > ((int64_t)1 << 40))
		return -1;
	int64_t b = (d + d * d) * (int64_t)sizeof(double);
	if (feats)
		b += n * d * (int64_t)sizeof(float);
	return b;
}

static int write_all(FILE *f, const void *p, size_t len, uint64_t *h)
{
	*h = gf_hash64(p, len, *h);
	return fwrite(p, 1, len, f) == len ? 0 : -1;
}

int gf_feat_stats_save(const char *path, const gf_feat_stats *s, const float *feats)
{
	if (!path || !s || !s->mu || !s->sigma || s->d < 1 || s->n < 0)
		return gf_seterr(GF_EPARAM, "feature statistics cache %s: nothing to save",
		                 path ? path : "(NULL path)");
	if (strnlen(s->split, sizeof(s->split)) == sizeof(s->split))
		return gf_seterr(GF_EPARAM, "feature statistics cache %s: split name not terminated", path);

	struct stats_header hd;
	memset(&hd, 0, sizeof(hd));
	memcpy(hd.magic, STATS_MAGIC, 8);
	hd.version = STATS_VERSION;
	hd.d = (uint32_t)s->d;
	hd.n = s->n;
	hd.key = s->key;
	hd.has_feats = feats != NULL;
	memcpy(hd.split, s->split, sizeof(hd.split));

	size_t plen = strlen(path);
	char *tmp = malloc(plen + 32);
	if (!tmp)
		return gf_seterr(-ENOMEM, "%s: out of memory", path);
	/* unique per process and per call: ranks and threads may race to fill a cache */
	static _Atomic unsigned seq;
	snprintf(tmp, plen + 32, "%s.tmp.%ld.%u", path, (long)getpid(), seq++);

	int rc = 0;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		int e = errno;
		rc = gf_seterr(-e, "%s: cannot create: %s", tmp, strerror(e));
		free(tmp);
		return rc;
	}
	FILE *f = fdopen(fd, "wb");
	if (!f) {
		int e = errno;
		close(fd);
		rc = gf_seterr(-e, "%s: %s", tmp, strerror(e));
		goto fail;
	}
	uint64_t h = GF_HASH64_INIT;
	size_t dd = (size_t)s->d;
	errno = 0;
	if (write_all(f, &hd, sizeof(hd), &h) ||
	    write_all(f, s->mu, dd * sizeof(double), &h) ||
	    write_all(f, s->sigma, dd * dd * sizeof(double), &h) ||
	    (feats && write_all(f, feats, (size_t)s->n * dd * sizeof(float), &h)) ||
	    fwrite(&h, sizeof(h), 1, f) != 1 || fflush(f) != 0 || fsync(fileno(f)) != 0) {
		int e = errno ? errno : EIO;
		fclose(f);
		rc = gf_seterr(-e, "%s: write failed: %s", tmp, strerror(e));
		goto fail;
	}
	if (fclose(f) != 0) {
		int e = errno;
		rc = gf_seterr(-e, "%s: close failed: %s", tmp, strerror(e));
		goto fail;
	}
	if (rename(tmp, path) != 0) {
		int e = errno;
		rc = gf_seterr(-e, "%s: cannot rename to %s: %s", tmp, path, strerror(e));
		goto fail;
	}
	free(tmp);
	return 0;
fail:
	unlink(tmp);
	free(tmp);
	return rc;
}

static int read_all(FILE *f, void *p, size_t len, uint64_t *h)
{
	if (fread(p, 1, len, f) != len)
		return -1;
	*h = gf_hash64(p, len, *h);
	return 0;
}

int gf_feat_stats_load(const char *path, uint64_t key, const char *split, gf_feat_stats *out)
{
	if (!out)
		return gf_seterr(GF_EPARAM, "gf_feat_stats_load: out is NULL");
	memset(out, 0, sizeof(*out));
	if (!path)
		return gf_seterr(GF_EPARAM, "gf_feat_stats_load: path is NULL");

	int rc = 0;
	double *mu = NULL, *sigma = NULL;
	float *feats = NULL;
	FILE *f = fopen(path, "rb");
	if (!f) {
		int e = errno;
		return gf_seterr(-e, "feature statistics cache %s: %s", path, strerror(e));
	}
	struct stat st;
	if (fstat(fileno(f), &st) != 0) {
		int e = errno;
		rc = gf_seterr(-e, "%s: %s", path, strerror(e));
		goto fail;
	}

	struct stats_header hd;
	uint64_t h = GF_HASH64_INIT;
	if (read_all(f, &hd, sizeof(hd), &h) || memcmp(hd.magic, STATS_MAGIC, 8) != 0) {
		rc = gf_seterr(GF_ECORRUPT, "%s: not a ganflow feature statistics file"
		               " (no GFSTATS1 header)", path);
		goto fail;
	}
	if (hd.version != STATS_VERSION) {
		rc = gf_seterr(GF_ECORRUPT, "%s: feature statistics format version %u,"
		               " this build reads %u", path, hd.version, STATS_VERSION);
		goto fail;
	}
	int64_t pb = hd.has_feats > 1 ? -1 : payload_bytes(hd.n, hd.d, (int)hd.has_feats);
	if (pb < 0 || hd.split[sizeof(hd.split) - 1] != '\0' ||
	    (int64_t)st.st_size != (int64_t)sizeof(hd) + pb + 8) {
		rc = gf_seterr(GF_ECORRUPT, "%s: feature statistics file is %lld bytes, its header"
		               " (d=%u, n=%" PRId64 ", features %u) says otherwise: truncated or damaged",
		               path, (long long)st.st_size, hd.d, hd.n, hd.has_feats);
		goto fail;
	}
	if (key != 0 && hd.key != key) {
		rc = gf_seterr(GF_ENOTFOUND, "%s: cached statistics have key %016" PRIx64
		               ", wanted %016" PRIx64 " (other classifier or split): stale cache",
		               path, hd.key, key);
		goto fail;
	}
	if (split && strcmp(split, hd.split) != 0) {
		rc = gf_seterr(GF_ENOTFOUND, "%s: cached statistics are of split '%s', wanted '%s'",
		               path, hd.split, split);
		goto fail;
	}

	size_t dd = hd.d;
	mu = malloc(dd * sizeof(*mu));                  /* (d) */
	sigma = malloc(dd * dd * sizeof(*sigma));       /* (d, d) */
	if (hd.has_feats)
		feats = malloc((size_t)hd.n * dd * sizeof(*feats) + 1);  /* (n, d) */
	if (!mu || !sigma || (hd.has_feats && !feats)) {
		rc = gf_seterr(-ENOMEM, "%s: out of memory for d=%u", path, hd.d);
		goto fail;
	}
	uint64_t stored;
	if (read_all(f, mu, dd * sizeof(*mu), &h) ||
	    read_all(f, sigma, dd * dd * sizeof(*sigma), &h) ||
	    (feats && read_all(f, feats, (size_t)hd.n * dd * sizeof(*feats), &h)) ||
	    fread(&stored, sizeof(stored), 1, f) != 1) {
		rc = gf_seterr(GF_ECORRUPT, "%s: short read", path);
		goto fail;
	}
	if (stored != h) {
		rc = gf_seterr(GF_ECORRUPT, "%s: checksum mismatch (stored %016" PRIx64
		               ", computed %016" PRIx64 "): damaged file", path, stored, h);
		goto fail;
	}
	fclose(f);
	out->d = (int)hd.d;
	out->n = hd.n;
	out->mu = mu;
	out->sigma = sigma;
	out->feats = feats;
	out->key = hd.key;
	memcpy(out->split, hd.split, sizeof(out->split));
	return 0;
fail:
	fclose(f);
	free(mu);
	free(sigma);
	free(feats);
	return rc;
}
