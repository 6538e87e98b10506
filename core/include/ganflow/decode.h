/* ganflow record decoding: JPEG / raw records to normalised float images.
 *
 * The jpeg_decode stage, the evaluator and `ganflow dataset verify` turn a
 * record (header + payload, see <ganflow/dataset.h>) into a float tensor
 * (C, H, W) in [-1, 1] through the same transforms:
 *   1. source pixels: raw records are used in place; JPEG records are
 *      decoded with TurboJPEG at the smallest DCT scale (1/8 .. 1) that
 *      keeps the crop window at least as large as the output, straight to
 *      gray (the luma plane) or RGB;
 *   2. crop window: crop = none uses the whole image (aspect not kept);
 *      center / random take the largest window of the output's aspect
 *      ratio (the shorter side scaled to the output, as torchvision's
 *      Resize + CenterCrop / RandomCrop do), at the centre or at a random
 *      offset;
 *   3. resize the window to the output: area (box filter with exact
 *      fractional coverage; bilinear where it enlarges) or bilinear
 *      (centre-aligned, 2 taps); a window already of the output's size is
 *      copied exactly;
 *   4. optional random horizontal flip; channel conversion (RGB to gray
 *      with 0.299 R + 0.587 G + 0.114 B, gray to RGB by replication);
 *   5. normalise: x / 127.5 - 1.
 * Randomness comes from a caller-supplied 64-bit value (the stage uses
 * gf_hash3(seed, key, epoch)), never from thread state, so the result of a
 * record does not depend on which worker decoded it.
 *
 * A gf_decoder holds a TurboJPEG handle and scratch buffers that grow to
 * the largest image seen; it is used by one thread at a time.
 */
#ifndef GANFLOW_DECODE_H
#define GANFLOW_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include <ganflow/dataset.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { GF_RESIZE_AREA = 0, GF_RESIZE_BILINEAR = 1 } gf_resize_mode;
typedef enum { GF_CROP_CENTER = 0, GF_CROP_RANDOM = 1, GF_CROP_NONE = 2 } gf_crop_mode;

typedef struct gf_transform {
	int height, width;     /* output size; 0 and 0: the record's own size */
	int channels;          /* 1 or 3; 0: the record's own */
	gf_resize_mode resize;
	gf_crop_mode crop;
	int flip;              /* random horizontal flip, probability 1/2 */
	int fast;              /* TJFLAG_FASTDCT | TJFLAG_FASTUPSAMPLE */
	int lenient;           /* accept JPEGs that decode with warnings
	                          (truncated, extraneous bytes); default: bad */
} gf_transform;

typedef struct gf_decoder gf_decoder;

/* Creates a decoder. Returns 0 with *out, or -ENOMEM. */
int gf_decoder_create(gf_decoder **out);

/* NULL is ignored. */
void gf_decoder_destroy(gf_decoder *d);

/* What an image file's bytes are, by their signature and never by the
 * file's name: GF_IMAGE_JPEG (FF D8 FF), GF_IMAGE_PNG (the 8-byte PNG
 * signature) or GF_IMAGE_UNKNOWN. `ganflow dataset folder` and the
 * evaluator's image folders both decide with it, so a PNG named .jpg is
 * a PNG to both. */
typedef enum { GF_IMAGE_UNKNOWN = 0, GF_IMAGE_JPEG = 1, GF_IMAGE_PNG = 2 } gf_image_kind;
gf_image_kind gf_image_sniff(const uint8_t *buf, size_t len);

/* Shape of the output for a record with header h under t. Returns 0, or
 * GF_EPARAM for a bad transform (channels not 0/1/3, one of height/width
 * zero but not both, negative sizes). */
int gf_transform_shape(const gf_transform *t, const gf_record_header *h, int *c, int *oh, int *ow);

/* Decodes a record and applies t, writing (c, oh, ow) floats to out (at
 * most out_len floats; too small: GF_ESHAPE). payload holds h->payload
 * bytes. rnd supplies the random crop offset and flip. Returns 0, or
 * GF_ECORRUPT with the reason in gf_errmsg() (corrupt or truncated JPEG,
 * a JPEG whose size disagrees with the header, unsupported colour space),
 * or -ENOMEM. Never reads outside payload[0, h->payload). */
int gf_decode_record(gf_decoder *d, const gf_transform *t, const gf_record_header *h, const uint8_t *payload,
                     uint64_t rnd, float *out, size_t out_len);

/* Pairs (records flagged GF_RECORD_PAIR: A the left half of the image, B
 * the right half). gf_pair_shape gives the output shape of ONE half under
 * t (GF_EPARAM when h is not a pair record). gf_decode_pair decodes both
 * halves with the same crop window, resize and flip (one draw of rnd, as
 * gf_decode_record would for an image the size of a half) into out:
 * (2c, oh, ow) floats, A's c planes then B's. A JPEG pair is decoded once,
 * at a DCT scale that keeps both halves whole pixels. Returns as
 * gf_decode_record. */
int gf_pair_shape(const gf_transform *t, const gf_record_header *h, int *c, int *oh, int *ow);
int gf_decode_pair(gf_decoder *d, const gf_transform *t, const gf_record_header *h, const uint8_t *payload,
                   uint64_t rnd, float *out, size_t out_len);

/* Decodes a record to u8 pixels at full size, interleaved HWC, `channels`
 * (1 or 3; 0 = the record's) per pixel. *pix points into d (raw records:
 * into payload when no conversion is needed) and is valid until the next
 * call on d. Returns 0, GF_ECORRUPT or -ENOMEM. */
int gf_decode_pixels(gf_decoder *d, const gf_record_header *h, const uint8_t *payload, int channels,
                     const uint8_t **pix, int *width, int *height);

/* Resizes u8 HWC pixels (src w x h, row stride sstride bytes, c channels)
 * to dst (dw x dh, tightly packed) with the given filter, rounding to
 * nearest. For the converters' resize option. Returns 0 or -ENOMEM. */
int gf_resize_u8(gf_decoder *d, uint8_t *dst, int dw, int dh, const uint8_t *src, int w, int h, size_t sstride,
                 int c, gf_resize_mode mode);

/* JPEG subsampling for gf_jpeg_encode. */
typedef enum { GF_SUBSAMP_420 = 0, GF_SUBSAMP_422, GF_SUBSAMP_444 } gf_subsamp;

/* Encodes u8 HWC pixels (c = 1 or 3) as a JPEG of the given quality
 * (1..100); gray images are encoded as gray JPEGs. *jpeg points into d
 * and is valid until the next encode on d. Returns 0, GF_EPARAM or
 * -ENOMEM. */
int gf_jpeg_encode(gf_decoder *d, const uint8_t *pix, int w, int h, int c, int quality, gf_subsamp subsamp,
                   const uint8_t **jpeg, size_t *len);

/* Reads a JPEG's size and channels (1 for gray, 3 otherwise) without
 * decoding it. Returns 0 or GF_ECORRUPT. */
int gf_jpeg_info(gf_decoder *d, const uint8_t *jpeg, size_t len, int *w, int *h, int *c);

#ifdef __cplusplus
}
#endif
#endif
