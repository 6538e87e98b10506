/* libFuzzer target: the record header parser, the meta record parser and
 * the decode path (JPEG and raw through the same transforms).
 *
 * Input: byte 0 picks the transform (output size, channels, filter, crop,
 * flip), the rest is a record value (24-byte header + payload) and is also
 * tried as a meta record, as a caffe.Datum (Caffe LMDB value; its JPEG or
 * raw planar-BGR data then decoded) and as a bare JPEG. Built with clang
 * -fsanitize=fuzzer,address,undefined straight from the library sources
 * (tests/data.cmake), run briefly by ctest over the seed corpus in
 * tests/fuzz/corpus/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <ganflow/dataset.h>
#include <ganflow/decode.h>
#include <ganflow/err.h>

#include "../../core/data/dataset_int.h"

#define MAX_PIXELS (1u << 20) /* skip images whose full decode would be huge */

static gf_decoder *dec;
static float out[3 * 64 * 64];

static void decode(uint8_t mode, const gf_record_header *h, const uint8_t *payload)
{
	static const int sizes[4] = { 0, 7, 16, 64 };
	static const int chans[4] = { 0, 1, 3, 3 };
	gf_transform t = { .height = sizes[mode & 3], .width = sizes[mode & 3], .channels = chans[(mode >> 2) & 3],
		               .resize = (mode >> 4) & 1 ? GF_RESIZE_BILINEAR : GF_RESIZE_AREA,
		               .crop = (gf_crop_mode)(((mode >> 5) & 3) % 3), .flip = 1, .lenient = mode >> 7,
		               .fast = ((mode >> 4) ^ (mode >> 7)) & 1 };
	int c, oh, ow;
	if (gf_transform_shape(&t, h, &c, &oh, &ow))
		return;
	if ((uint64_t)c * oh * ow > sizeof(out) / sizeof(out[0]) || (uint64_t)h->width * h->height > MAX_PIXELS)
		return;
	if (gf_decode_record(dec, &t, h, payload, (uint64_t)mode * 0x9e3779b97f4a7c15ull, out,
	                     sizeof(out) / sizeof(out[0])) == 0) {
		for (int i = 0; i < c * oh * ow; i++)
			if (!(out[i] >= -1.0f && out[i] <= 1.0f))
				abort(); /* the normalised range is a promise */
	}
	const uint8_t *pix;
	int w, hh;
	gf_decode_pixels(dec, h, payload, (mode & 8) ? 1 : 0, &pix, &w, &hh);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!dec && gf_decoder_create(&dec))
		abort();
	if (size < 1)
		return 0;
	uint8_t mode = data[0];
	data++;
	size--;
	/* the meta record parser */
	gf_shard_meta m;
	if (gf_meta_decode(data, size, &m) == 0)
		gf_meta_free(&m);
	/* a record value */
	gf_record_header h;
	const uint8_t *payload;
	if (gf_record_parse(data, size, &h, &payload) == 0) {
		(void)gf_record_check(&h, payload); /* reads exactly the payload */
		decode(mode, &h, payload);
	}
	/* a Caffe Datum */
	if (gf_datum_parse(data, size, &h, &payload) == 0) {
		if (payload < data || payload + h.payload > data + size)
			abort(); /* the data lies inside the value */
		decode(mode, &h, payload);
	}
	/* the bytes as a JPEG payload with a matching header */
	int w, hh, c;
	if (size >= 4 && size <= UINT32_MAX && gf_jpeg_info(dec, data, size, &w, &hh, &c) == 0 && w > 0 && hh > 0 &&
	    (uint32_t)w <= GF_RECORD_MAX_DIM && (uint32_t)hh <= GF_RECORD_MAX_DIM) {
		gf_record_header j = { .label = 0, .encoding = GF_ENC_JPEG, .height = (uint32_t)hh, .width = (uint32_t)w,
			                   .channels = (uint32_t)c, .payload = (uint32_t)size };
		decode(mode, &j, data);
	}
	gf_clearerr();
	return 0;
}
