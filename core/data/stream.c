/* Streaming a dataset in epoch order with io_uring readahead.
 *
 * The lmdb_reader stage's engine. Records are handed out in the order of
 * gf_order (shuffle, class filter, rank part), epoch after epoch, one
 * position at a time from the order's generator (nothing per record is
 * kept). The
 * stream keeps `readahead` records located ahead of the consumer (B-tree
 * lookups only: the value pages are not touched; the B-tree pages were all
 * read at open) and makes their pages arrive before they are needed:
 *  - mmap path: IORING_OP_FADVISE(WILLNEED) over the value's page range of
 *    data.mdb, in blocks of 4 to 64 KiB (the bytes of one of the order's
 *    blocks of records, rounded up to a power of two: a shuffled order reads
 *    a run of records from each place it visits, and reading more than that
 *    run around it only fills the page cache; 64 KiB in key order), each
 *    block once while it is fresh (advised
 *    within the last `horizon` to 2 x `horizon` records: a shuffled
 *    order comes back to a block long after it read it, when the page
 *    cache may have dropped it), contiguous
 *    blocks coalesced up to 4 MiB per request, or what the kernel reads
 *    for one (advise_blocks) where that is less. A record is handed out once
 *    the request for its pages has run (the kernel has started the reads).
 *    The consumer then reads the value straight from the LMDB map (no
 *    copy; at most a minor fault, or a wait for a read under way).
 *    With readahead_bytes, enough records are located ahead to cover that
 *    many bytes of values (the disk's bandwidth times its latency, which a
 *    few records of 100 KB do not cover), up to MAP_MAX_AHEAD.
 *  - direct path: IORING_OP_READ from an O_DIRECT descriptor into 4 KiB
 *    aligned chunk buffers. Upcoming records whose values lie close
 *    together in the same shard (a sequential read) share one read of up
 *    to 1 MiB; scattered records (a shuffle) get one read each. At most
 *    NCHUNKS (8) reads are in flight, and up to 1024 records are located
 *    ahead to fill them; the page cache is bypassed, for data sets larger
 *    than memory.
 * A slot of the readahead ring holds one upcoming record; slot (seq % R)
 * is reused only after the record it held was handed out and the caller
 * came back for the next one. A chunk is reused once every record in it
 * was handed out and released the same way.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <liburing.h>

#include <ganflow/dataset.h>
#include <ganflow/err.h>
#include <ganflow/log.h>

#include "dataset_int.h"

#define MIN_SHIFT 12       /* prefetch blocks of 4 KiB .. */
#define MAX_SHIFT 16       /* .. 64 KiB: the order's blocks of records, rounded up */
#define MAX_COALESCE_BYTES (4u << 20) /* per fadvise request, at most: see advise_blocks */
#define DIRECT_ALIGN 4096u
#define NCHUNKS 8          /* direct reads in flight at most */
#define CHUNK_BYTES (1u << 20)
#define DIRECT_LOOKAHEAD 1024 /* direct: records located ahead (chunks bound the bytes) */
#define CHUNK_GAP (64u << 10) /* records this close share a read */
#define MAP_MAX_AHEAD 4096 /* mmap path: records located ahead for readahead_bytes, at most */
#define ADV_TAG (1ull << 63)  /* user_data of an fadvise request: ADV_TAG | its number */
#define ADV_WINDOW 4096       /* fadvise requests numbered beyond the completed ones, at most */
#define MIN_HORIZON 65536     /* records after which an advised block may be advised again */

typedef struct slot {
	uint64_t seq;      /* sequence number held, UINT64_MAX = none */
	uint64_t epoch, idx;
	uint64_t position; /* in the opened set, from the order */
	int loc_rc;        /* result of locating it */
	gf_record rec;
	int ci;            /* direct: its chunk, -1 none */
	uint64_t adv;      /* mmap path with io_uring: the fadvise request it waits for, 0 none */
} slot;

enum { CH_FREE = 0, CH_OPEN, CH_INFLIGHT, CH_DONE };

typedef struct chunk {
	uint8_t *buf;      /* 4 KiB aligned, grown to the largest read */
	size_t cap;
	uint32_t shard;
	uint64_t aoff;     /* file offset of buf[0] */
	size_t alen;       /* bytes to read */
	int state;         /* CH_* */
	int res;           /* bytes read or -errno */
	uint32_t users;    /* records placed in it, not yet released */
	uint64_t first_seq;
} chunk;

struct gf_stream {
	gf_dataset *ds;
	gf_order *ord;
	gf_stream_opts o;
	uint64_t len;              /* records per epoch */
	uint64_t start_abs;        /* start_epoch * len + start_pos */
	uint64_t end_seq;          /* UINT64_MAX: forever */
	uint64_t emit_seq, issue_seq;
	uint32_t r;                /* readahead slots */
	slot *slots;
	uint32_t nshards;
	/* io */
	struct io_uring ring;
	int uring;
	unsigned inflight;         /* submitted, not yet reaped */
	unsigned queued;           /* prepared, not yet submitted */
	unsigned cq_cap;
	int *dfd;                  /* (nshards) O_DIRECT descriptors (direct) */
	int direct_buffered;       /* direct requested but O_DIRECT refused: pread */
	chunk chunks[NCHUNKS];     /* direct: read buffers */
	int open_ci;               /* chunk collecting records, not submitted, or -1 */
	int next_ci;               /* where the next chunk is taken (ring order) */
	int release_ci;            /* chunk of the record handed out last, or -1 */
	/* mmap-path prefetch bookkeeping */
	unsigned shift;            /* prefetch blocks of 2^shift bytes */
	uint64_t **bitmap;         /* (nshards) blocks advised: two generations of
	                              bitmap_words words each */
	unsigned *adv_blocks;      /* (nshards) blocks per fadvise request, at most */
	size_t *bitmap_words;
	uint64_t horizon;          /* records a generation lasts */
	uint64_t gen, gen_seq;     /* current generation (its half: gen & 1), its first record */
	int have_pending;
	uint32_t p_shard;
	uint64_t p_lo, p_hi;       /* blocks [p_lo, p_hi] */
	uint64_t p_seq;            /* first record that asked for it */
	/* fadvise requests through io_uring are numbered 1, 2, ...; a record is
	 * handed out only once the one its last block went into has run */
	uint64_t adv_next;         /* number of the next request */
	uint64_t adv_done;         /* requests 1..adv_done have all completed */
	uint64_t adv_bits[ADV_WINDOW / 64]; /* completed, numbers adv_done+1.. (bit n % ADV_WINDOW) */
};

/* ---- io_uring plumbing ---- */

static void handle_cqe(gf_stream *s, struct io_uring_cqe *cqe)
{
	uint64_t ud = io_uring_cqe_get_data64(cqe);
	if (ud && ud <= NCHUNKS && s->chunks[ud - 1].state == CH_INFLIGHT) {
		s->chunks[ud - 1].state = CH_DONE;
		s->chunks[ud - 1].res = cqe->res;
	}
	if (ud & ADV_TAG) { /* an fadvise ran (its result is advisory: a failure only costs a later fault) */
		uint64_t n = ud & ~ADV_TAG;
		s->adv_bits[n % ADV_WINDOW / 64] |= 1ull << (n % 64);
		for (n = s->adv_done + 1; s->adv_bits[n % ADV_WINDOW / 64] >> (n % 64) & 1; n++) {
			s->adv_bits[n % ADV_WINDOW / 64] &= ~(1ull << (n % 64));
			s->adv_done = n;
		}
	}
	io_uring_cqe_seen(&s->ring, cqe);
	s->inflight--;
}

static void reap(gf_stream *s)
{
	struct io_uring_cqe *cqe;
	while (s->inflight && io_uring_peek_cqe(&s->ring, &cqe) == 0)
		handle_cqe(s, cqe);
}

static int wait_one(gf_stream *s)
{
	struct io_uring_cqe *cqe;
	int rc;
	do
		rc = io_uring_wait_cqe(&s->ring, &cqe);
	while (rc == -EINTR);
	if (rc)
		return gf_seterr(rc, "dataset %s: io_uring wait: %s", gf_dataset_path(s->ds), strerror(-rc));
	handle_cqe(s, cqe);
	return 0;
}

static int submit(gf_stream *s)
{
	if (!s->queued)
		return 0;
	int rc;
	do
		rc = io_uring_submit(&s->ring);
	while (rc == -EINTR);
	if (rc < 0)
		return gf_seterr(rc, "dataset %s: io_uring submit: %s", gf_dataset_path(s->ds), strerror(-rc));
	s->inflight += (unsigned)rc;
	s->queued -= (unsigned)rc < s->queued ? (unsigned)rc : s->queued;
	return 0;
}

/* An SQE, making room in the submission and completion queues first. */
static int get_sqe(gf_stream *s, struct io_uring_sqe **out)
{
	int rc;
	while (s->inflight + s->queued + 1 > s->cq_cap) {
		if ((rc = submit(s)))
			return rc;
		if (s->inflight && (rc = wait_one(s)))
			return rc;
	}
	struct io_uring_sqe *sqe = io_uring_get_sqe(&s->ring);
	if (!sqe) {
		if ((rc = submit(s)))
			return rc;
		if (!(sqe = io_uring_get_sqe(&s->ring)))
			return gf_seterr(-EBUSY, "dataset %s: io_uring submission queue full", gf_dataset_path(s->ds));
	}
	s->queued++;
	*out = sqe;
	return 0;
}

/* ---- mmap path: advise upcoming blocks ---- */

static unsigned long sysfs_ulong(const char *path)
{
	unsigned long v = 0;
	FILE *f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "%lu", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v;
}

/* The most one fadvise(WILLNEED) on fd reads, in blocks of 2^shift bytes
 * (1 .. MAX_COALESCE_BYTES of them).
 * The kernel cuts the range to the larger of the device's readahead and
 * its largest request (force_page_cache_ra: max(io_pages, ra_pages)), and
 * with the map MADV_RANDOM each page left out becomes a synchronous 4 KiB
 * fault (16 MiB requests against this machine's 8 MiB: 36852 major faults
 * in a 300 MB pass, 80 MB/s instead of 800). Read from the queue of the
 * file's block device (its disk's, for a partition); 128 KiB, the kernel's
 * default readahead, where there is none. */
static unsigned advise_blocks(int fd, unsigned shift)
{
	struct stat st;
	unsigned long kb = 0;
	if (fstat(fd, &st) == 0)
		for (int up = 0; up < 2 && !kb; up++) {
			char p[96];
			unsigned ma = major(st.st_dev), mi = minor(st.st_dev);
			const char *dir = up ? "../queue" : "queue";
			snprintf(p, sizeof(p), "/sys/dev/block/%u:%u/%s/read_ahead_kb", ma, mi, dir);
			unsigned long ra = sysfs_ulong(p);
			snprintf(p, sizeof(p), "/sys/dev/block/%u:%u/%s/max_sectors_kb", ma, mi, dir);
			unsigned long io = sysfs_ulong(p);
			kb = ra > io ? ra : io;
		}
	if (!kb)
		kb = 128;
	unsigned long b = kb >> (shift - 10), most = MAX_COALESCE_BYTES >> shift;
	return b < 1 ? 1 : b > most ? (unsigned)most : (unsigned)b;
}

static int flush_pending(gf_stream *s)
{
	if (!s->have_pending)
		return 0;
	s->have_pending = 0;
	const gf_shard_info *si = gf_dataset_shard(s->ds, s->p_shard);
	uint64_t off = s->p_lo << s->shift, len = (s->p_hi - s->p_lo + 1) << s->shift;
	if (!s->uring) {
		posix_fadvise(si->fd, (off_t)off, (off_t)len, POSIX_FADV_WILLNEED);
		return 0;
	}
	struct io_uring_sqe *sqe;
	int rc;
	while (s->adv_next - s->adv_done >= ADV_WINDOW) { /* the completion bits would wrap */
		if ((rc = submit(s)))
			return rc;
		if ((rc = wait_one(s)))
			return rc;
	}
	if ((rc = get_sqe(s, &sqe)))
		return rc;
	io_uring_prep_fadvise(sqe, si->fd, off, (off_t)len, POSIX_FADV_WILLNEED);
	io_uring_sqe_set_data64(sqe, ADV_TAG | s->adv_next++);
	return 0;
}

static int advise(gf_stream *s, const slot *sl)
{
	int rc;
	if (sl->seq - s->gen_seq >= s->horizon) { /* a new generation forgets the one before the last */
		s->gen++;
		s->gen_seq = sl->seq;
		for (uint32_t i = 0; i < s->nshards; i++)
			memset(s->bitmap[i] + (s->gen & 1) * s->bitmap_words[i], 0, s->bitmap_words[i] * sizeof(uint64_t));
	}
	uint32_t sh = sl->rec.shard;
	uint64_t b0 = sl->rec.offset >> s->shift;
	uint64_t b1 = (sl->rec.offset + sl->rec.value_len - 1) >> s->shift;
	size_t words = s->bitmap_words[sh];
	uint64_t *bm = s->bitmap[sh] + (s->gen & 1) * words, *old = s->bitmap[sh] + (~s->gen & 1) * words;
	for (uint64_t b = b0; b <= b1; b++) {
		if ((b >> 6) >= words)
			break;
		if ((bm[b >> 6] | old[b >> 6]) >> (b & 63) & 1)
			continue;
		bm[b >> 6] |= 1ull << (b & 63);
		if (s->have_pending && s->p_shard == sh && b == s->p_hi + 1 && b - s->p_lo < s->adv_blocks[sh]) {
			s->p_hi = b;
			continue;
		}
		if ((rc = flush_pending(s)))
			return rc;
		s->have_pending = 1;
		s->p_shard = sh;
		s->p_lo = s->p_hi = b;
		s->p_seq = sl->seq;
	}
	return 0;
}

/* ---- direct path ---- */

static int pread_all(int fd, uint8_t *buf, size_t len, uint64_t off)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = pread(fd, buf + done, len - done, (off_t)(off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (int)done;
}

/* Sends the open chunk's read. */
static int submit_chunk(gf_stream *s, int ci)
{
	chunk *c = &s->chunks[ci];
	if (ci == s->open_ci)
		s->open_ci = -1;
	if (c->alen > c->cap) {
		/* grows to the largest read (1 MiB, or one larger value): after
		 * the first few chunks nothing is allocated */
		size_t cap = (c->alen + DIRECT_ALIGN - 1) & ~(size_t)(DIRECT_ALIGN - 1);
		if (cap < CHUNK_BYTES)
			cap = CHUNK_BYTES;
		void *nb = NULL;
		if (posix_memalign(&nb, DIRECT_ALIGN, cap))
			return -ENOMEM;
		free(c->buf);
		c->buf = nb;
		c->cap = cap;
	}
	int fd = s->dfd[c->shard];
	if (!s->uring || s->direct_buffered) {
		c->res = pread_all(fd, c->buf, c->alen, c->aoff);
		c->state = CH_DONE;
		return 0;
	}
	struct io_uring_sqe *sqe;
	int rc = get_sqe(s, &sqe);
	if (rc)
		return rc;
	io_uring_prep_read(sqe, fd, c->buf, (unsigned)c->alen, c->aoff);
	io_uring_sqe_set_data64(sqe, (uint64_t)ci + 1);
	c->state = CH_INFLIGHT;
	return 0;
}

/* Places a located record in the open chunk or a new one. Returns 0, 1
 * when every chunk is busy (try again after the consumer moved on), or an
 * error. */
static int place_direct(gf_stream *s, slot *sl)
{
	int rc;
	uint64_t a0 = sl->rec.offset & ~(uint64_t)(DIRECT_ALIGN - 1);
	uint64_t a1 = (sl->rec.offset + sl->rec.value_len + DIRECT_ALIGN - 1) & ~(uint64_t)(DIRECT_ALIGN - 1);
	if (s->open_ci >= 0) {
		chunk *c = &s->chunks[s->open_ci];
		if (c->shard == sl->rec.shard && a0 >= c->aoff && a0 <= c->aoff + c->alen + CHUNK_GAP &&
		    a1 - c->aoff <= CHUNK_BYTES) {
			if (a1 - c->aoff > c->alen)
				c->alen = (size_t)(a1 - c->aoff);
			c->users++;
			sl->ci = s->open_ci;
			return 0;
		}
		if ((rc = submit_chunk(s, s->open_ci)))
			return rc;
	}
	chunk *c = &s->chunks[s->next_ci];
	if (c->users)
		return 1;
	c->shard = sl->rec.shard;
	c->aoff = a0;
	c->alen = (size_t)(a1 - a0);
	c->users = 1;
	c->state = CH_OPEN;
	c->res = 0;
	c->first_seq = sl->seq;
	sl->ci = s->open_ci = s->next_ci;
	s->next_ci = (s->next_ci + 1) % NCHUNKS;
	return 0;
}

/* Waits for a record's chunk and returns its value, or an error. */
static int direct_value(gf_stream *s, const slot *sl, const uint8_t **value)
{
	int rc;
	chunk *c = &s->chunks[sl->ci];
	if (c->state == CH_OPEN && (rc = submit_chunk(s, sl->ci)))
		return rc;
	if (s->uring && (rc = submit(s)))
		return rc;
	while (c->state == CH_INFLIGHT)
		if ((rc = wait_one(s)))
			return rc;
	uint64_t need = sl->rec.offset + sl->rec.value_len - c->aoff;
	if (c->res >= 0 && (size_t)c->res < c->alen && c->res % DIRECT_ALIGN == 0) {
		/* a short read: finish it synchronously */
		int n = pread_all(s->dfd[c->shard], c->buf + c->res, c->alen - (size_t)c->res, c->aoff + (uint64_t)c->res);
		c->res = n < 0 ? n : c->res + n;
	}
	if (c->res < 0 || (uint64_t)c->res < need)
		return gf_seterr(c->res < 0 ? c->res : -EIO, "dataset %s: %s: read of %zu bytes at %llu: %s",
		                 gf_dataset_path(s->ds), gf_dataset_shard(s->ds, c->shard)->file, c->alen,
		                 (unsigned long long)c->aoff, c->res < 0 ? strerror(-c->res) : "short read");
	*value = c->buf + (sl->rec.offset - c->aoff);
	return 0;
}

/* ---- issuing ---- */

/* Locates record seq and starts bringing its value in. Returns 0, 1 when
 * the direct path has no free chunk (seq stays unissued, and comes here
 * again), or an error. Records are issued in sequence, so the order's
 * generator runs forward only (sought at the start and at each epoch). */
static int issue(gf_stream *s, uint64_t seq)
{
	slot *sl = &s->slots[seq % s->r];
	if (sl->seq != seq) {
		uint64_t abs = s->start_abs + seq;
		sl->seq = seq;
		sl->epoch = abs / s->len;
		sl->idx = abs % s->len;
		if (seq == 0 || sl->idx == 0)
			gf_order_seek(s->ord, sl->epoch, sl->idx);
		sl->position = gf_order_next(s->ord);
	}
	sl->ci = -1;
	sl->adv = 0;
	sl->loc_rc = gf_dataset_locate(s->ds, sl->position, &sl->rec);
	if (sl->loc_rc)
		return 0; /* reported as a bad record when its turn comes */
	if (s->o.direct)
		return place_direct(s, sl);
	int rc = advise(s, sl);
	/* its last block went into the pending range (the next request) or a
	 * request already sent */
	if (s->uring)
		sl->adv = s->have_pending ? s->adv_next : s->adv_next - 1;
	return rc;
}

static int issue_ahead(gf_stream *s)
{
	int rc;
	uint64_t lim = s->emit_seq + s->r;
	if (lim > s->end_seq)
		lim = s->end_seq;
	while (s->issue_seq < lim) {
		if ((rc = issue(s, s->issue_seq)) < 0)
			return rc;
		if (rc > 0)
			break; /* every chunk busy */
		s->issue_seq++;
	}
	/* a partly grown fadvise range or chunk goes out before its first
	 * record gets close */
	if (s->have_pending && (s->p_seq <= s->emit_seq + s->r / 2 || s->issue_seq >= s->end_seq))
		if ((rc = flush_pending(s)))
			return rc;
	if (s->open_ci >= 0 &&
	    (s->chunks[s->open_ci].first_seq <= s->emit_seq + s->r / 2 || s->issue_seq >= s->end_seq ||
	     s->chunks[s->open_ci].alen >= CHUNK_BYTES - CHUNK_GAP))
		if ((rc = submit_chunk(s, s->open_ci)))
			return rc;
	if (s->uring) {
		if ((rc = submit(s)))
			return rc;
		reap(s);
	}
	return 0;
}

/* ---- public ---- */

int gf_stream_open(gf_dataset *ds, const gf_stream_opts *o, gf_stream **out)
{
	int rc;
	*out = NULL;
	gf_stream *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->ds = ds;
	s->o = *o;
	s->o.order.classes = NULL;
	s->nshards = gf_dataset_metadata(ds)->nshards;
	s->ring.ring_fd = -1;
	if ((rc = gf_order_create(ds, &o->order, &s->ord)))
		goto fail;
	s->len = gf_order_len(s->ord);
	if (s->len == 0) {
		rc = gf_seterr(GF_EPARAM, "dataset %s: nothing to read (%llu records selected, %u ranks)",
		               gf_dataset_path(ds), (unsigned long long)gf_order_candidates(s->ord),
		               o->order.world ? o->order.world : 1);
		goto fail;
	}
	if (o->start_pos > s->len) {
		rc = gf_seterr(GF_EPARAM, "dataset %s: start_pos %llu beyond the epoch's %llu records", gf_dataset_path(ds),
		               (unsigned long long)o->start_pos, (unsigned long long)s->len);
		goto fail;
	}
	s->start_abs = o->start_epoch * s->len + o->start_pos;
	if (o->epochs) {
		uint64_t end = o->epochs * s->len;
		s->end_seq = end > s->start_abs ? end - s->start_abs : 0;
	} else {
		s->end_seq = UINT64_MAX;
	}
	s->r = o->readahead ? o->readahead : 64;
	if (o->direct && s->r < DIRECT_LOOKAHEAD)
		s->r = DIRECT_LOOKAHEAD;
	const gf_dataset_meta *dm = gf_dataset_metadata(ds);
	if (!o->direct && o->readahead_bytes && dm->count) {
		uint64_t mean = dm->payload_bytes / dm->count + 1, want = o->readahead_bytes / mean + 1;
		if (want > MAP_MAX_AHEAD)
			want = MAP_MAX_AHEAD;
		if (s->r < want)
			s->r = (uint32_t)want;
	}
	if (s->r > s->len) /* the window then spans at most two epochs */
		s->r = (uint32_t)s->len;
	/* prefetch blocks: a block of the order's records, 4 to 64 KiB */
	s->shift = MAX_SHIFT;
	if (o->order.shuffle && dm->count) {
		uint64_t run = gf_order_block(s->ord) * (dm->payload_bytes / dm->count + GF_RECORD_HEADER_SIZE + 4);
		for (s->shift = MIN_SHIFT; s->shift < MAX_SHIFT && (1ull << s->shift) < run; s->shift++)
			;
	}
	s->slots = calloc(s->r, sizeof(slot));
	s->bitmap = calloc(s->nshards, sizeof(uint64_t *));
	s->bitmap_words = calloc(s->nshards, sizeof(size_t));
	s->adv_blocks = calloc(s->nshards, sizeof(unsigned));
	s->dfd = calloc(s->nshards, sizeof(int));
	if (!s->slots || !s->bitmap || !s->bitmap_words || !s->adv_blocks || !s->dfd) {
		rc = -ENOMEM;
		goto fail;
	}
	for (uint32_t i = 0; i < s->r; i++) {
		s->slots[i].seq = UINT64_MAX;
		s->slots[i].ci = -1;
	}
	s->open_ci = s->release_ci = -1;
	for (uint32_t i = 0; i < s->nshards; i++)
		s->dfd[i] = -1;
	for (uint32_t i = 0; i < s->nshards; i++) {
		const gf_shard_info *si = gf_dataset_shard(ds, i);
		s->bitmap_words[i] = (size_t)((si->file_size >> s->shift) / 64 + 1);
		if (!(s->bitmap[i] = calloc(2 * s->bitmap_words[i], sizeof(uint64_t)))) {
			rc = -ENOMEM;
			goto fail;
		}
		if (!o->direct) {
			s->adv_blocks[i] = advise_blocks(si->fd, s->shift);
			continue;
		}
		s->dfd[i] = open(si->file, O_RDONLY | O_DIRECT | O_CLOEXEC);
		if (s->dfd[i] < 0 && errno == EINVAL) {
			if (!s->direct_buffered)
				gf_log(GF_LOG_WARN, "dataset %s: %s does not support O_DIRECT; direct reads go through "
				                    "the page cache", gf_dataset_path(ds), si->file);
			s->direct_buffered = 1;
			s->dfd[i] = open(si->file, O_RDONLY | O_CLOEXEC);
		}
		if (s->dfd[i] < 0) {
			rc = gf_seterr(-errno, "dataset %s: %s: %s", gf_dataset_path(ds), si->file, strerror(errno));
			goto fail;
		}
	}
	s->horizon = 4ull * s->r > MIN_HORIZON ? 4ull * s->r : MIN_HORIZON;
	s->adv_next = 1;
	/* on a cold cache, a leaf page read while the readahead fills the disk
	 * queue waits behind it: read them all now, on an idle queue */
	gf_dataset_touch_index(ds);
	if (!o->no_uring) {
		unsigned entries = 64;
		while (entries < s->r + 32 && entries < 4096)
			entries *= 2;
		rc = io_uring_queue_init(entries, &s->ring, 0);
		if (rc == 0) {
			s->uring = 1;
			s->cq_cap = entries; /* completions <= 2 * entries; stay within */
		} else {
			gf_log(GF_LOG_WARN, "dataset %s: io_uring unavailable (%s); reading ahead with %s",
			       gf_dataset_path(ds), strerror(-rc), o->direct ? "pread" : "posix_fadvise");
		}
	}
	*out = s;
	return 0;
fail:
	gf_stream_close(s);
	return rc;
}

int gf_stream_next(gf_stream *s, gf_stream_item *it)
{
	int rc;
	if (s->release_ci >= 0) { /* the caller is done with the last value */
		s->chunks[s->release_ci].users--;
		s->release_ci = -1;
	}
	if (s->emit_seq >= s->end_seq)
		return GF_EEOF;
	if ((rc = issue_ahead(s)))
		return rc;
	uint64_t seq = s->emit_seq++;
	slot *sl = &s->slots[seq % s->r];
	it->epoch = sl->epoch;
	it->pos = sl->idx + 1;
	it->last = sl->idx + 1 == s->len;
	it->rec = sl->rec;
	if (sl->loc_rc) {
		/* locate again for the message naming shard and key */
		rc = gf_dataset_locate(s->ds, sl->position, &it->rec);
		return rc == GF_ENOTFOUND || rc == 0 || rc < -4095 ? GF_ECORRUPT : rc;
	}
	/* Through io_uring, the advice runs in a kernel worker; on a loaded
	 * machine it can fall behind the consumer, and every page not yet
	 * requested when the consumer gets there became a synchronous 4 KiB
	 * read (the map is MADV_RANDOM): hundreds of major faults in a cold
	 * pass. So a record waits for its request to have run (the kernel has
	 * then started the reads; the consumer waits on them at most). */
	if (sl->adv > s->adv_done) {
		if ((rc = submit(s)))
			return rc;
		while (sl->adv > s->adv_done)
			if ((rc = wait_one(s)))
				return rc;
	}
	const uint8_t *value = sl->rec.value;
	if (s->o.direct) {
		s->release_ci = sl->ci;
		if ((rc = direct_value(s, sl, &value)))
			return rc;
		it->rec.value = value;
	}
	if ((rc = gf_dataset_check(s->ds, &it->rec, value, it->rec.value_len, &it->rec.h, &it->rec.payload)))
		return rc;
	if (!s->o.no_checksum && (rc = gf_record_check(&it->rec.h, it->rec.payload))) {
		/* GF_ECORRUPT: the reader counts and skips it like any bad record */
		char why[256];
		snprintf(why, sizeof(why), "%s", gf_errmsg());
		return gf_seterr(rc, "shard %s key %llu: %s", gf_dataset_shard(s->ds, it->rec.shard)->path,
		                 (unsigned long long)it->rec.key, why);
	}
	return 0;
}

int gf_stream_uring(const gf_stream *s)
{
	return s->uring;
}

uint32_t gf_stream_window(const gf_stream *s)
{
	return s->r;
}

void gf_stream_close(gf_stream *s)
{
	if (!s)
		return;
	if (s->uring) {
		/* reads may still target chunk buffers: drain before freeing them */
		submit(s);
		while (s->inflight && wait_one(s) == 0)
			;
		io_uring_queue_exit(&s->ring);
	}
	for (int i = 0; i < NCHUNKS; i++)
		free(s->chunks[i].buf);
	free(s->slots);
	if (s->bitmap)
		for (uint32_t i = 0; i < s->nshards; i++)
			free(s->bitmap[i]);
	free(s->bitmap);
	free(s->bitmap_words);
	free(s->adv_blocks);
	if (s->dfd)
		for (uint32_t i = 0; i < s->nshards; i++)
			if (s->dfd[i] >= 0)
				close(s->dfd[i]);
	free(s->dfd);
	gf_order_destroy(s->ord);
	free(s);
}
