/* Converters into ganflow datasets: the ganflow_convert library of the
 * `ganflow dataset` command (datasets/, not installed; the tests and the
 * data benchmarks link it too). They write through the dataset engine's
 * public API (<ganflow/dataset.h>, <ganflow/decode.h>).
 *
 * Every converter runs the same engine: records are produced in chunks by
 * `workers` threads (decode, resize, encode), then appended in order by one
 * writer, with a progress bar. The order is a seeded random permutation of
 * the inputs (shuffle, the default, as convert_imageset --shuffle: a
 * dataset then reads class-mixed even in key order), or the inputs' own
 * (shuffle = 0). Inputs that cannot be read as images are skipped with a
 * warning naming the file and counted.
 */
#ifndef GANFLOW_CONVERT_H
#define GANFLOW_CONVERT_H

#include <stdint.h>

#include <ganflow/dataset.h>
#include <ganflow/decode.h>

typedef struct gf_convert_opts {
	int encoding;            /* GF_ENC_RAW or GF_ENC_JPEG */
	int quality;             /* JPEG quality 1..100; 0: 95, and source JPEGs
	                            that need no change are stored as they are */
	gf_subsamp subsamp;      /* JPEG chroma subsampling (colour images) */
	int resize_w, resize_h;  /* 0: keep the source size */
	gf_resize_mode resize_mode;
	int channels;            /* 1 or 3; 0: keep the source's */
	uint64_t shard_records;  /* see gf_writer_opts */
	uint64_t shard_bytes;
	int workers;             /* threads; 0: number of CPUs */
	int overwrite;           /* replace an existing output */
	uint64_t limit;          /* convert at most this many inputs (0: all); the
	                            first ones in the source's order */
	int shuffle;             /* write the inputs in the order gf_permute(i, n,
	                            seed) (default 1); 0: the source's order */
	uint64_t seed;           /* of that order (default 1) */
	const char *what;        /* progress bar label (NULL: the output path) */
	int quiet;               /* no progress bar, no summary */
} gf_convert_opts;

/* Defaults: raw, quality 0, 4:2:0, area resize, shuffle with seed 1,
 * everything else 0. */
void gf_convert_defaults(gf_convert_opts *o);

/* Summary of a conversion. */
typedef struct gf_convert_stats {
	uint64_t records;        /* written */
	uint64_t skipped;        /* unreadable inputs */
	uint64_t ignored;        /* files without an image extension (folder) */
	uint64_t payload_bytes;
	uint64_t bad_size;       /* paired: halves of different sizes (or an odd AB width) */
	uint64_t bad_missing;    /* paired: a file of A/ without its partner in B/, or the reverse */
	uint64_t bad_unreadable; /* paired: A, B or the AB image cannot be decoded */
	uint32_t shards;
	double seconds;
} gf_convert_stats;

/* IDX files (MNIST / Fashion-MNIST layout, gzip-compressed or not): images
 * u8 (N, rows, cols), labels u8 (N). class_names (nclasses) may be NULL:
 * then nclasses = max label + 1 (or the given nclasses when > 0). Returns
 * 0 or an error naming the file at fault (gf_errmsg()). */
int gf_convert_idx(const char *images, const char *labels, const char *out, const gf_convert_opts *o,
                   const char *const *class_names, uint32_t nclasses, gf_convert_stats *st);

/* An image-folder tree: one sub-folder per class (sorted by name, byte
 * order, as torchvision's ImageFolder), images found recursively inside
 * (.jpg .jpeg .png, any case; sorted paths: the source's order, class by
 * class). */
int gf_convert_folder(const char *dir, const char *out, const gf_convert_opts *o, gf_convert_stats *st);

/* Image files from any source, converted as the folder importer converts
 * its files (a JPEG that needs no change stored as it is, else decoded,
 * resized, re-encoded): the engine under gf_convert_folder and
 * gf_convert_dstool. */
typedef struct gf_image_source {
	/* Reads input i (0 <= i < n) into *buf (malloc'ed, grown as needed;
	 * *cap its size; the buffer is the calling worker's and is reused for
	 * its next input) and says its label. Returns 0; 1 to skip the input
	 * (unreadable; gf_seterr's message names it, and the conversion goes
	 * on); or a negative code to stop the conversion (its message names
	 * the input). Called from several threads at once. */
	int (*read)(void *ctx, uint64_t i, uint8_t **buf, size_t *cap, size_t *len, int32_t *label);
	/* Writes input i's name, as messages show it, into name (size bytes). */
	void (*name)(void *ctx, uint64_t i, char *name, size_t size);
	void *ctx;
	uint64_t n;
	/* width > 0: every image must be width x height (and, when the
	 * output keeps the source's channels, have `channels`); one that is
	 * not stops the conversion with a message naming it and `first`. */
	int width, height, channels;
	const char *first;
} gf_image_source;

int gf_convert_images(const gf_image_source *src, const char *out, const gf_convert_opts *o, uint32_t nclasses,
                      const char *const *class_names, gf_convert_stats *st);

/* A dataset as StyleGAN2-ADA's and R3GAN's dataset_tool.py writes it
 * (datasets/dstool.c): a zip (read in place, never unpacked) or a folder
 * of PNG / JPEG images with a dataset.json at its top,
 * {"labels": [["00000/img00000000.png", 6], ...]} or {"labels": null}.
 * Records follow the images' sorted names (byte order, as dataset_tool's
 * loader sorts them); labels come from dataset.json (every image needs
 * one; null labels: unlabelled records), nclasses = the largest label + 1,
 * or `classes` when > 0 (a larger label is an error). Every image must
 * have the first one's size unless o->resize_w is set. Errors name the
 * source and the member at fault. */
int gf_convert_dstool(const char *src, const char *out, const gf_convert_opts *o, uint32_t classes,
                      gf_convert_stats *st);

/* ---- zip archives (datasets/zip.c) ----
 * Opened in place: the central directory is read once; members are read
 * with pread (from any thread at once), stored or deflated, and checked
 * against their CRC-32. Zip64 archives are read too; split, encrypted
 * and other compression methods are refused. */
typedef struct gf_zip gf_zip;

/* Opens the zip at path. Returns 0, -errno, or GF_ECORRUPT naming path. */
int gf_zip_open(const char *path, gf_zip **out);
void gf_zip_close(gf_zip *z);

/* Members in central directory order: their count, names (owned by z,
 * valid until close) and the path the zip was opened with. */
size_t gf_zip_count(const gf_zip *z);
const char *gf_zip_name(const gf_zip *z, size_t i);
const char *gf_zip_path(const gf_zip *z);

/* Reads member i whole into *buf (malloc'ed or grown; *cap its size, at
 * least one byte more than *len, so text can be NUL-terminated in place).
 * Returns 0, -ENOMEM, -errno, or GF_ECORRUPT naming the zip and the
 * member (truncated, bad CRC-32, corrupt deflate data, encrypted, another
 * method). */
int gf_zip_read(const gf_zip *z, size_t i, uint8_t **buf, size_t *cap, size_t *len);

typedef struct gf_synth_opts {
	uint64_t count;
	int width, height;       /* 500 x 375 */
	int quality;             /* 90 */
	uint32_t classes;        /* 10 */
	uint64_t seed;           /* 1 */
} gf_synth_opts;

/* ImageNet-like benchmark data: photo-like JPEGs (smooth gradients,
 * multi-scale noise, shapes, fine texture; ~100 KB at 500 x 375, q 90,
 * ~3 KB at 64 x 64), or raw pixels with o->encoding = GF_ENC_RAW. The
 * source's order is class by class (input i has label i * classes /
 * count, as a folder import), written shuffled unless o->shuffle is 0.
 * Deterministic in seed. Refuses (GF_EPARAM, with the figures) a set the
 * free space of OUT's file system cannot hold, estimated from a few
 * rendered records before anything is written. */
int gf_convert_synth(const char *out, const gf_synth_opts *so, const gf_convert_opts *o, gf_convert_stats *st);

/* Renders synthetic image i (u8 HWC RGB, w x h) into pix. */
void gf_synth_image(uint8_t *pix, int w, int h, uint64_t seed, uint64_t i, uint32_t label);

/* Decodes an image file's bytes (JPEG or PNG, found by their magic bytes)
 * to u8 HWC with `channels` (0: the file's own, 1 or 3). *pix is malloc'ed
 * or grown (in/out *cap); returns 0, GF_ECORRUPT (not an image, corrupt)
 * or -ENOMEM, the reason in gf_errmsg(). *is_jpeg tells the type. */
int gf_image_file_decode(gf_decoder *d, const uint8_t *buf, size_t len, int channels, uint8_t **pix, size_t *cap,
                         int *w, int *h, int *c, int *is_jpeg);

/* Reads a whole file (through zlib: .gz is decompressed, other files read
 * as they are) into a malloc'ed buffer. Returns 0 or -errno / GF_ECORRUPT
 * naming the path. */
int gf_read_file(const char *path, int gunzip, uint8_t **buf, size_t *len);

/* Checks an IDX header (magic, unsigned bytes, ndim dimensions, data
 * length) and reads its dimensions into dims. Returns 0 or GF_ECORRUPT
 * naming path. */
int gf_idx_parse(const char *path, const uint8_t *b, size_t len, int ndim, uint32_t *dims);

/* ---- paired data (pix2pix; datasets/paired.c) ----
 *
 * Records flagged GF_RECORD_PAIR: one image holding A (left half) and B
 * (right half), of the same size and channels, unlabelled (paired) or with
 * the source's labels (edges2fashion). Bad pairs are skipped, each named in
 * a warning and counted by kind in the stats (bad_size, bad_missing,
 * bad_unreadable; skipped is their sum): never silently dropped. */

/* src is either a folder of AB images (A left, B right: facades, maps,
 * edges2shoes), or a folder holding sub-folders A/ and B/ whose images are
 * matched by file name without its extension (A/12.png with B/12.jpg).
 * btoa swaps the halves (direction = BtoA: B is the network's input). The
 * converter options apply per half (resize = the size of A and of B).
 * Records in a seeded random order (o->shuffle), else in the order of the
 * names (sorted file names). Returns 0 or an
 * error naming the file at fault; no pair at all is GF_ENOTFOUND. */
int gf_convert_paired(const char *src, const char *out, const gf_convert_opts *o, int btoa, gf_convert_stats *st);

/* (edge map, image) pairs from IDX images (Fashion-MNIST): A is the edge
 * map of the image (gf_edge_map), B the image; labels kept; in the IDX
 * order, or shuffled with o->shuffle. */
int gf_convert_edges(const char *images, const char *labels, const char *out, const gf_convert_opts *o,
                     const char *const *class_names, uint32_t nclasses, gf_convert_stats *st);

/* The edge map of a gray image (w x h u8) into edges (w x h): Sobel
 * gradient magnitude (borders replicated) above `threshold` drawn black (0)
 * on white (255), as the line drawings of edges2shoes. */
void gf_edge_map(uint8_t *edges, const uint8_t *gray, int w, int h, double threshold);

/* Writes u8 HWC pixels as a PNG file (for export). */
int gf_png_save(const char *path, const uint8_t *pix, int w, int h, int c);

#endif
