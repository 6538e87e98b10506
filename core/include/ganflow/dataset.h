/* ganflow datasets: LMDB shards, their records and their meta record;
 * reading, writing, epoch orders and streaming them (the dataset engine of
 * libganflow, sources in core/data/; record decoding is <ganflow/decode.h>).
 *
 * On disk a dataset is a directory holding shard directories
 *     PATH/shard-00000/  PATH/shard-00001/  ...
 * each an LMDB environment (data.mdb, lock.mdb) with one unnamed database:
 *
 *   key   8-byte big-endian record index ("key"): 0 .. total-1 over the
 *         whole dataset, contiguous and ascending from shard to shard.
 *   value a 24-byte record header (gf_record_header, little-endian, see
 *         below) followed by the payload: a JPEG file (GF_ENC_JPEG) or raw
 *         pixels (GF_ENC_RAW: u8, height x width x channels, interleaved
 *         HWC, rows top to bottom).
 *
 * Every shard also holds the record with the 8-byte key "__meta__" (which
 * sorts after every index key) describing the shard and the dataset:
 * record count, class count and names, and the label -> indices index of
 * the shard's records (layout in "Meta record" below). There is no other
 * file: each shard is self-describing, and a single shard directory can be
 * opened on its own.
 *
 * Record header layout (GF_RECORD_HEADER_SIZE = 24 bytes, little-endian):
 *     0  u8[2]  magic 'G' 'F'
 *     2  u8     version (GF_RECORD_VERSION = 1)
 *     3  u8     encoding (GF_ENC_RAW = 0, GF_ENC_JPEG = 1)
 *     4  i32    label (-1: unlabelled)
 *     8  u32    height
 *    12  u32    width
 *    16  u16    channels (1 gray, 3 RGB)
 *    18  u16    flags (readers reject unknown bits):
 *                 GF_RECORD_CRC32C 0x0001: a u32 CRC-32C of the payload
 *                 follows it (every converter writes one; records without
 *                 it, from older shards, still read)
 *                 GF_RECORD_PAIR 0x0002: the image holds a pair side by
 *                 side, A the left half and B the right half (width even;
 *                 height, width and channels are the whole image's), as
 *                 `ganflow dataset paired` and `edges2fashion` write it;
 *                 jpeg_decode with paired = true decodes both halves with
 *                 the same crop, resize and flip (gf_decode_pair)
 *    20  u32    payload length (= value length - 24, - 4 with the CRC)
 * PNG input is stored as raw or JPEG; a JPEG record's height, width and
 * channels are those of the JPEG image it holds.
 *
 * Messages of the data stages (documented here because every consumer of
 * the data path needs them):
 *   lmdb_reader.samples, kind "records": t[0] u8 (payload length) = the
 *       encoded payload, pointing into the LMDB map without a copy (or into
 *       the message's buffer with direct = true), valid while the message is
 *       held (the map lives until the reader stage is destroyed);
 *       t[1] i32 (5) = { encoding, height, width, channels, flags } of the
 *       header (flags: GF_RECORD_PAIR; consumers also accept the older
 *       4-value form, flags 0);
 *       label, key (record index), epoch, pos (position in the epoch's read
 *       order of the NEXT record: resume with start_epoch = epoch,
 *       start_pos = pos), source (shard directory, owned by the stage);
 *       flags GF_MSG_LAST on the last record of an epoch.
 *   label_shard: the same "records" messages, filtered.
 *   jpeg_decode.samples, kind "samples": t[0] f32 (C, H, W) in [-1, 1]
 *       (paired = true: (2C, H, W), A's C channels then B's);
 *       label, key, epoch, pos, source and GF_MSG_LAST carried over.
 *   batch.batch, kind "batch": t[0] f32 (N, C, H, W), t[1] i32 (N) labels;
 *       epoch / pos / key of the last sample; GF_MSG_LAST when the batch
 *       ends an epoch; a batch never spans two epochs.
 *
 * Thread safety: a gf_dataset handle and everything obtained from it is
 * used by one thread at a time. Threads that read concurrently open their
 * own handle (cheap: one read-only mmap per shard, shared page cache).
 * Errors: 0 on success, -errno, an LMDB code or GF_E* (see err.h); the
 * detail naming the file, shard or key is in gf_errmsg().
 */
#ifndef GANFLOW_DATASET_H
#define GANFLOW_DATASET_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- records ---- */

#define GF_RECORD_HEADER_SIZE 24
#define GF_RECORD_VERSION 1
#define GF_RECORD_MAX_DIM 65535u /* largest height or width accepted */
#define GF_META_KEY "__meta__"   /* 8 bytes, no NUL in the key */
#define GF_SHARD_NAME_FMT "shard-%05u"

typedef enum {
	GF_ENC_RAW = 0,  /* u8 pixels, HWC */
	GF_ENC_JPEG = 1, /* a JPEG file */
	GF_ENC_BGR = 2,  /* u8 pixels, planar CHW, planes B, G, R: a raw colour
	                    Datum of a Caffe LMDB (never in a ganflow shard) */
	GF_ENC_COUNT
} gf_encoding;

/* The decoded form of a record header. */
typedef struct gf_record_header {
	int32_t label;     /* class, -1 when unlabelled */
	uint32_t encoding; /* gf_encoding */
	uint32_t height;
	uint32_t width;
	uint32_t channels; /* 1 or 3 */
	uint32_t payload;  /* payload bytes following the header */
	uint32_t flags;    /* GF_RECORD_CRC32C when the value carries a checksum */
	uint32_t crc;      /* that checksum (with GF_RECORD_CRC32C) */
} gf_record_header;

#define GF_RECORD_CRC32C 0x0001u
#define GF_RECORD_PAIR 0x0002u   /* A | B side by side (see the header layout) */

/* Checks the payload of a parsed record (h from gf_record_parse, payload
 * its payload) against its CRC-32C: 0 (also for a record without one) or
 * GF_ECORRUPT "payload checksum mismatch (stored 0x..., computed 0x...)". */
int gf_record_check(const gf_record_header *h, const uint8_t *payload);

/* Name of an encoding ("raw", "jpeg", "bgr-planar"), "?" for an unknown value. */
const char *gf_encoding_name(uint32_t enc);

/* Writes the 24-byte header for h (its flags too) into out. Returns 0, or GF_EPARAM (detail
 * in gf_errmsg()) when h is not valid: unknown encoding, channels not 1 or
 * 3, a zero or too large dimension, a raw payload length that is not
 * height * width * channels, label < -1. */
int gf_record_header_write(const gf_record_header *h, uint8_t out[GF_RECORD_HEADER_SIZE]);

/* Parses and checks the header of a record value of len bytes: magic,
 * version, encoding, flags, channels, dimensions, payload length equal to
 * len - 24 (- 4 with GF_RECORD_CRC32C, whose checksum goes to h->crc; a
 * shorter value is "truncated"), and for raw records payload ==
 * height * width * channels. The checksum itself is gf_record_check's. Does not check the label against a class
 * count (gf_dataset_get does). On success fills *h and sets *payload (may be
 * NULL) to value + 24. Returns 0 or GF_ECORRUPT with the reason in
 * gf_errmsg() (no file or key: the caller adds them). Never reads outside
 * value[0, len). */
int gf_record_parse(const void *value, size_t len, gf_record_header *h, const uint8_t **payload);

/* Parses a caffe.Datum value (the values of Caffe LMDBs, see "Caffe
 * LMDBs" below) into a record header: encoded = true gives GF_ENC_JPEG with
 * the size and components read from the JPEG's frame header; raw u8 data
 * gives GF_ENC_RAW (1 channel) or GF_ENC_BGR (3 channels); label from the
 * Datum (0 when absent, as Caffe's default), flags 0. *payload (may be
 * NULL) points at the data bytes inside value. Returns 0 or GF_ECORRUPT
 * with the reason in gf_errmsg() (not a Datum, truncated, float_data,
 * sizes that disagree with the data, an encoded image that is not a JPEG).
 * Never reads outside value[0, len). */
int gf_datum_parse(const void *value, size_t len, gf_record_header *h, const uint8_t **payload);

/* ---- meta record ----
 *
 * Value of "__meta__" in each shard (little-endian):
 *     0  char[4] "GFMD"
 *     4  u32     version (1)
 *     8  u64     total records in the dataset
 *    16  u32     shards in the dataset
 *    20  u32     this shard's number
 *    24  u64     first: key of this shard's first record
 *    32  u64     count: records in this shard (keys first .. first+count-1)
 *    40  u32     nclasses (0: unlabelled dataset)
 *    44  u32     0
 *    48  u64[2]  records per encoding in this shard (raw, jpeg)
 *    64  u64     payload bytes in this shard (headers excluded)
 *    72  u32[6]  min height, max height, min width, max width, min channels,
 *                max channels in this shard (0 when count is 0)
 *    96  class names: nclasses x (u16 length, bytes; no NUL)
 *        label index: nclasses x (u64 n, n x u32 key - first, ascending)
 *        u64     records of this shard with label -1
 *   end  u32     CRC-32 (zlib) of every byte before it
 */

/* ---- Caffe LMDBs ----
 *
 * A Caffe LMDB (convert_imageset and its kin: one LMDB environment, keys of
 * the tool's choosing, caffe.Datum values) opens as a one-shard dataset of
 * format GF_FORMAT_CAFFE: positions are the keys in LMDB (byte) order, and
 * a record's "key" is its position (the LMDB key itself is in error
 * messages). Opening walks every key and parses every Datum once (the
 * class index, sizes and counts a ganflow shard keeps in "__meta__"), so it
 * reads a little of every value: seconds per 100k records from a cold
 * disk. Classes are 0 .. the largest label, named by their number. A value
 * that is not a readable Datum stays in the positions, is left out of the
 * class index, and fails as GF_ECORRUPT naming shard and key when read.
 */

/* ---- opening a dataset ---- */

typedef struct gf_dataset gf_dataset;

typedef enum {
	GF_FORMAT_AUTO = 0,    /* ganflow when a shard holds "__meta__", else Caffe
	                          when its first value is a Datum */
	GF_FORMAT_GANFLOW = 1, /* shards written by ganflow's converters */
	GF_FORMAT_CAFFE = 2,   /* one LMDB of caffe.Datum values */
} gf_dataset_format;

/* "auto", "ganflow", "caffe"; "?" for an unknown value. */
const char *gf_dataset_format_name(gf_dataset_format f);

/* What a dataset (or the part of it that was opened) holds. Positions are
 * 0 .. count-1 in the opened set; for a whole dataset the position of a
 * record equals its key. */
typedef struct gf_dataset_meta {
	uint64_t count;        /* records in the opened set */
	uint64_t total;        /* records in the whole dataset */
	uint32_t nshards;      /* shards opened */
	uint32_t nclasses;     /* 0 for an unlabelled dataset */
	const char *const *class_names;      /* (nclasses) NUL-terminated */
	const uint64_t *class_count;         /* (nclasses) records per class (their
	                                        positions: gf_dataset_class_positions) */
	uint64_t unlabelled;   /* records with label -1 */
	uint64_t enc_count[GF_ENC_COUNT]; /* records per encoding */
	uint64_t payload_bytes;
	uint32_t min_height, max_height, min_width, max_width;
	uint32_t min_channels, max_channels;
} gf_dataset_meta;

/* One shard of an opened dataset. */
typedef struct gf_shard_info {
	const char *path;      /* shard directory */
	const char *file;      /* its data.mdb */
	uint32_t number;       /* shard number in the dataset (from its meta) */
	uint64_t first;        /* key of its first record */
	uint64_t count;        /* records */
	uint64_t base;         /* position of its first record in the opened set */
	int fd;                /* data.mdb opened O_RDONLY (for readahead), owned */
	const uint8_t *map;    /* base of the read-only LMDB map */
	size_t map_size;
	uint64_t file_size;    /* bytes of data.mdb (its length: LMDB files may be sparse) */
	uint64_t disk_bytes;   /* bytes of data.mdb allocated on disk (st_blocks) */
} gf_shard_info;

/* Opens a dataset read-only: path is a dataset directory (holding
 * shard-NNNNN/ directories) or one shard directory (holding data.mdb).
 * Every shard is opened with MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS |
 * MDB_NORDAHEAD (the reader stage does its own readahead), its meta record
 * is read and checked (CRC, shard numbers, contiguous keys, totals), and
 * the dataset's meta is assembled. One read transaction per shard stays
 * open until gf_dataset_close, so record pointers stay valid that long.
 * Returns 0 with *out, or: -ENOENT (path missing), GF_ENOTFOUND (no shard
 * in the directory, a shard missing from the numbering, a shard without
 * meta record), GF_ECORRUPT (meta record bad or inconsistent), an LMDB
 * code such as MDB_INVALID (a data.mdb that is not LMDB), each with the
 * path at fault in gf_errmsg(). */
int gf_dataset_open(const char *path, gf_dataset **out);

/* gf_dataset_open with the format given (GF_FORMAT_AUTO: as
 * gf_dataset_open). A Caffe LMDB is a directory holding data.mdb; naming
 * the wrong format fails with GF_ECORRUPT saying what the path holds. */
int gf_dataset_open_as(const char *path, gf_dataset_format format, gf_dataset **out);

/* The format of an opened dataset (never GF_FORMAT_AUTO). */
gf_dataset_format gf_dataset_format_of(const gf_dataset *ds);

/* Records of an opened Caffe LMDB that are not a readable Datum (found
 * when it was opened); 0 for ganflow datasets. */
uint64_t gf_dataset_unreadable(const gf_dataset *ds);

/* Closes the dataset: ends the transactions, unmaps every shard. Every
 * pointer obtained from it becomes invalid. NULL is ignored. */
void gf_dataset_close(gf_dataset *ds);

/* The dataset's meta; owned by ds, valid until gf_dataset_close. */
const gf_dataset_meta *gf_dataset_metadata(const gf_dataset *ds);

/* Writes the positions of class c's records, ascending, into out
 * (class_count[c] of them). Read from the shards' meta records (a Caffe
 * LMDB's index is built when it is opened): an opened dataset keeps no
 * per-record index of its own. Returns 0 or GF_EPARAM (c out of range). */
int gf_dataset_class_positions(const gf_dataset *ds, uint32_t c, uint64_t *out);

/* Path given to gf_dataset_open; owned by ds. */
const char *gf_dataset_path(const gf_dataset *ds);

/* Shard i (0 <= i < nshards) of the opened set, or NULL; owned by ds. */
const gf_shard_info *gf_dataset_shard(const gf_dataset *ds, uint32_t i);

/* A record located in a dataset. */
typedef struct gf_record {
	uint64_t key;            /* record index in the dataset */
	uint64_t position;       /* position in the opened set */
	uint32_t shard;          /* index of its shard in the opened set */
	const uint8_t *value;    /* header + payload */
	size_t value_len;
	uint64_t offset;         /* byte offset of value in the shard's data.mdb */
	gf_record_header h;      /* filled by gf_dataset_get, not by _locate */
	const uint8_t *payload;  /* value + 24 (a Caffe Datum: its data); set by gf_dataset_get */
} gf_record;

/* Finds the record at position pos without touching its value's pages
 * (only the B-tree pages leading to it): fills key, position, shard, value,
 * value_len and offset. The value pointer points into the read-only LMDB
 * map and is valid until gf_dataset_close. Returns 0, GF_ENOTFOUND (pos out
 * of range, or the key missing from its shard: "shard ... key N: missing")
 * or an LMDB code. */
int gf_dataset_locate(gf_dataset *ds, uint64_t pos, gf_record *rec);

/* gf_dataset_locate + gf_record_parse + label check (label < nclasses, or
 * -1): fills every field. Returns 0, or GF_ECORRUPT with "SHARD key N: ..."
 * in gf_errmsg() for a bad record (rec's key/shard fields are still set),
 * or the errors of gf_dataset_locate. */
int gf_dataset_get(gf_dataset *ds, uint64_t pos, gf_record *rec);

/* gf_dataset_get + the payload's CRC-32C (gf_record_check), as the
 * training data path checks it: a mismatch is GF_ECORRUPT with "SHARD key
 * N: payload checksum mismatch ..." in gf_errmsg(). For readers outside a
 * stream (ganflow eval, a classifier's test split). */
int gf_dataset_get_checked(gf_dataset *ds, uint64_t pos, gf_record *rec);

/* Parses the value of rec (value, len: in the map or a copy read with
 * O_DIRECT) as a record of the dataset's format (gf_record_parse, or
 * gf_datum_parse for a Caffe LMDB), checks it against the dataset (label
 * range), fills *h and sets *payload to the payload inside value. Sets the
 * "SHARD key N: ..." detail (with the LMDB key of a Caffe record). Used by
 * gf_dataset_get and by the stream. Returns 0 or GF_ECORRUPT. */
int gf_dataset_check(const gf_dataset *ds, const gf_record *rec, const uint8_t *value, size_t len,
                     gf_record_header *h, const uint8_t **payload);

/* ---- writing a dataset ---- */

typedef struct gf_dataset_writer gf_dataset_writer;

typedef struct gf_writer_opts {
	uint64_t shard_records; /* records per shard, 0 = no limit */
	uint64_t shard_bytes;   /* value bytes per shard, 0 = no limit; when both
	                           are 0, shards are cut at 1 GiB */
	uint32_t nclasses;      /* labels must be < nclasses (or -1) */
	const char *const *class_names; /* (nclasses) or NULL: "0", "1", ... */
	int overwrite;          /* replace an existing OUT (else -EEXIST) */
} gf_writer_opts;

/* Starts writing a dataset to directory out: everything is built in
 * "OUT.tmp" (removed first if left over) and renamed to OUT by
 * gf_dataset_writer_finish, so OUT is either the previous dataset or the
 * complete new one. Returns 0 with *w, -EEXIST (OUT exists and overwrite
 * is 0), GF_EPARAM, -errno or an LMDB code, with the path in gf_errmsg(). */
int gf_dataset_writer_open(const char *out, const gf_writer_opts *o, gf_dataset_writer **w);

/* Appends a record with key = the number of records added before it. h
 * describes payload (h->payload bytes); it is checked as by
 * gf_record_header_write, and its label against nclasses (GF_EPARAM naming
 * the record index). A new shard starts when the current one reached
 * shard_records or when the record would take it past shard_bytes.
 * payload is copied; the caller keeps ownership. Returns 0 or an error. */
int gf_dataset_writer_add(gf_dataset_writer *w, const gf_record_header *h, const void *payload);

/* Appends a value verbatim (not checked: tools that copy records, and tests
 * that need corrupt data); label goes into the meta index (-1: none). */
int gf_dataset_writer_add_value(gf_dataset_writer *w, int32_t label, const void *value, size_t len);

/* Records added so far. */
uint64_t gf_dataset_writer_count(const gf_dataset_writer *w);

/* Writes the meta record into every shard, syncs, closes and renames
 * OUT.tmp to OUT (replacing OUT when overwrite was set). Frees w whatever
 * the outcome; on failure OUT.tmp is removed. Returns 0 or an error. */
int gf_dataset_writer_finish(gf_dataset_writer *w);

/* Abandons the dataset: removes OUT.tmp and frees w. NULL is ignored. */
void gf_dataset_writer_abort(gf_dataset_writer *w);

/* Removes a directory tree (the shard directories of a dataset, a
 * leftover OUT.tmp). Returns 0 (also when path does not exist) or -errno. */
int gf_remove_tree(const char *path);

/* Joins a directory and a name with one '/' into a malloc'ed path (the
 * caller frees it); NULL on ENOMEM. */
char *gf_path_join(const char *dir, const char *name);

/* ---- epoch orders: shuffle, class filter, rank partition ----
 *
 * The order of an epoch is computed from (seed, epoch) alone, so it repeats
 * under the same seed, differs between epochs, and a reader resumed at
 * (epoch, pos) continues exactly. Nothing in it grows with the data: a
 * part's order is generated record by record with `window` slots of
 * memory (a class filter adds its candidate list).
 *  1. candidates: every position of the opened set, or with a class filter
 *     the union of those classes' index lists; ascending.
 *  2. without shuffle the sequence is the candidates in order. With
 *     shuffle the candidates are cut into blocks of `block` consecutive
 *     ones (the last block may be short) and the blocks are put in a
 *     random order over the whole set: a keyed bijection of the block
 *     numbers (a 6-round Feistel network over the next even power of two,
 *     cycle-walked into range, keyed by rng(seed, epoch, 1)). On
 *     class-sorted data (a folder import, a Caffe LMDB made without
 *     --shuffle) any stretch of the sequence then holds blocks from all
 *     over the set, so batches mix classes as uniform sampling does.
 *  3. partition: with M candidates and world parts, L = floor(M / world);
 *     part r takes the sequence's positions [r L, r L + L): parts are
 *     disjoint and of equal length, and the M mod world positions at the
 *     end are left out of that epoch (different records each epoch when
 *     shuffled). With spread_remainder, part r takes [floor(r M / world),
 *     floor((r + 1) M / world)) instead: lengths differ by one at most and
 *     every record is read exactly once per epoch.
 *  4. with shuffle, each part streams its slice through a shuffle window
 *     of `window` slots (0 or >= the part's length: the whole part): the
 *     first `window` fill it; each further record replaces the slot
 *     j = uniform(window), whose occupant is emitted; the slots left at
 *     the end are Fisher-Yates shuffled and emitted (rng(seed, epoch, part)).
 *     The window breaks the blocks up: a batch draws from about
 *     window / block blocks.
 * rng(...) is splitmix64 seeded with a hash of its arguments; uniform(n)
 * is Lemire's multiply-shift with rejection (exact).
 *
 * What block and window cost: a block is read as one run of the file
 * (records of 64 KiB of values at most, by default), so every value is
 * read once per epoch in runs of about that size, from anywhere in the
 * file; a record stays in the page cache from its block's read until the
 * window emits it (about `window` records later). A larger block reads in
 * longer runs but mixes fewer places per batch; a smaller window needs
 * less page cache but mixes fewer blocks.
 */

typedef struct gf_order_opts {
	int shuffle;
	uint64_t window;          /* shuffle window in records, 0 = the whole part */
	uint64_t block;           /* records per block; 0: the records in 64 KiB of
	                             values (the mean record size), at most
	                             max(1, window / 8192) so that a window holds
	                             8192 blocks or more (window 0: the part) */
	uint64_t seed;
	uint32_t rank, world;     /* world 0 or 1: no partition */
	int spread_remainder;     /* parts of length floor or ceil(M / world): every
	                             record once per epoch (else equal parts, the
	                             M mod world last ones left out) */
	const int64_t *classes;   /* (nclasses) class filter, NULL = every record */
	uint32_t nclasses;
} gf_order_opts;

typedef struct gf_order gf_order;

/* Prepares epoch orders over ds (which must outlive the order). Returns 0
 * with *out; GF_EPARAM for a class not in the dataset, a filter on an
 * unlabelled dataset, rank >= world; -ENOMEM. */
int gf_order_create(const gf_dataset *ds, const gf_order_opts *o, gf_order **out);

/* Records per epoch for the rank (L above; with spread_remainder its own
 * part's length). */
uint64_t gf_order_len(const gf_order *ord);

/* Candidate count M before partition. */
uint64_t gf_order_candidates(const gf_order *ord);

/* The block size in use (the option, or the automatic one). */
uint64_t gf_order_block(const gf_order *ord);

/* Positions the order at record pos (0 .. len) of epoch `epoch`: the next
 * gf_order_next returns that record. O(pos) time (the window is replayed). */
void gf_order_seek(gf_order *ord, uint64_t epoch, uint64_t pos);

/* The position (in the opened set) of the next record of the epoch sought,
 * or UINT64_MAX past its end. */
uint64_t gf_order_next(gf_order *ord);

/* Writes the rank's order of epoch `epoch` (gf_order_len positions) into
 * out (gf_order_seek + gf_order_next). Returns 0. */
int gf_order_fill(gf_order *ord, uint64_t epoch, uint64_t *out);

void gf_order_destroy(gf_order *ord);

/* A seeded bijection of [0, n) (n > 0; i < n): the Feistel permutation
 * the orders use, keyed by seed. The converters write records in the order
 * gf_permute(0..n-1, n, seed) of their inputs. */
uint64_t gf_permute(uint64_t i, uint64_t n, uint64_t seed);

/* Counter-based random numbers: a well-mixed 64-bit value of (a, b, c)
 * (splitmix64 finaliser chain). Same inputs, same value, on any thread. */
uint64_t gf_hash3(uint64_t a, uint64_t b, uint64_t c);

/* ---- streaming with readahead (the lmdb_reader stage's engine) ---- */

typedef struct gf_stream gf_stream;

typedef struct gf_stream_opts {
	gf_order_opts order;
	uint64_t epochs;       /* epochs to read, 0 = forever */
	uint64_t start_epoch;  /* resume: first epoch and position in it */
	uint64_t start_pos;
	uint32_t readahead;    /* records located and prefetched ahead (0: 64) */
	uint64_t readahead_bytes; /* mmap path: also keep this many bytes of values
	                             ahead (by the mean value size, at most 4096
	                             records); 0: records only */
	int direct;            /* read values with O_DIRECT into stream buffers */
	int no_uring;          /* use posix_fadvise / pread instead of io_uring */
	int no_checksum;       /* skip the payload CRC-32C check (gf_record_check) */
} gf_stream_opts;

typedef struct gf_stream_item {
	gf_record rec;    /* value / payload: in the LMDB map (valid until the
	                     dataset is closed), or with direct = 1 in a stream
	                     buffer valid until the next gf_stream_next */
	uint64_t epoch;
	uint64_t pos;     /* position in the epoch order of the NEXT record */
	int last;         /* 1 on the last record of its epoch */
} gf_stream_item;

/* Starts streaming ds (which must outlive the stream). Readahead: the
 * values of the next `readahead` records are located and prefetched with
 * io_uring: IORING_OP_FADVISE(WILLNEED) on the shard file for the page
 * ranges of upcoming values (coalesced; in blocks of 64 KiB, or with
 * shuffle the bytes of the order's block of records rounded up to 4-64
 * KiB; a block is advised again once its advice is over 65536 records
 * old), or with direct = 1 IORING_OP_READ of block-aligned ranges
 * from an O_DIRECT descriptor into 4096-aligned buffers (neighbouring
 * values share reads of up to 1 MiB, 8 in flight; at least 1024 records
 * are located ahead). First it walks the shards' B-trees (their pages, a
 * few KiB per thousand records, are then cached: locating never waits for
 * the disk behind the readahead), unless a shard's values live in its
 * leaves (small records: the leaves are the data). When io_uring cannot be set up (or
 * no_uring) it falls back to posix_fadvise / pread and says so once
 * through gf_log. Returns 0 with *out, GF_EPARAM (bad options, start_pos
 * beyond the epoch, empty order), -errno. */
int gf_stream_open(gf_dataset *ds, const gf_stream_opts *o, gf_stream **out);

/* Next record. Returns 0 with *it filled; GF_ECORRUPT for a bad record
 * (it->rec.key/shard, epoch, pos are set, the reason naming shard and key
 * is in gf_errmsg(); the caller counts it and goes on); GF_EEOF after the
 * last epoch; -errno for an I/O failure (fatal, file named in gf_errmsg()). */
int gf_stream_next(gf_stream *s, gf_stream_item *it);

/* 1 when io_uring is in use. */
int gf_stream_uring(const gf_stream *s);

/* Records located ahead of the consumer, at most: readahead, raised to
 * cover readahead_bytes (mmap path) or to 1024 (direct), at most the
 * epoch's length. */
uint32_t gf_stream_window(const gf_stream *s);

void gf_stream_close(gf_stream *s);

/* ---- bad-record accounting ---- */

/* 1 when `bad` of `seen` records exceeds max_fraction and either seen >=
 * min_seen or `final` is set (end of an epoch / of the data), else 0. */
int gf_bad_exceeded(uint64_t bad, uint64_t seen, double max_fraction, uint64_t min_seen, int final);

#ifdef __cplusplus
}
#endif
#endif
