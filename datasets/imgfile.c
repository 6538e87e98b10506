/* Image files for the converters: reading (gzip-transparent), decoding
 * JPEG / PNG bytes to pixels, and writing PNG files for `dataset export`.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <png.h>
#include <zlib.h>

#include <ganflow/err.h>

#include "convert.h"

int gf_read_file(const char *path, int gunzip, uint8_t **bufp, size_t *lenp)
{
	*bufp = NULL;
	*lenp = 0;
	if (!gunzip) {
		FILE *f = fopen(path, "rb");
		if (!f)
			return gf_seterr(-errno, "%s: %s", path, strerror(errno));
		size_t cap = 1 << 16, len = 0;
		uint8_t *b = malloc(cap);
		while (b) {
			size_t n = fread(b + len, 1, cap - len, f);
			len += n;
			if (len < cap)
				break;
			uint8_t *nb = realloc(b, cap * 2);
			if (!nb) {
				free(b);
				b = NULL;
				break;
			}
			b = nb;
			cap *= 2;
		}
		int err = ferror(f);
		fclose(f);
		if (!b)
			return -ENOMEM;
		if (err) {
			free(b);
			return gf_seterr(-EIO, "%s: read error", path);
		}
		*bufp = b;
		*lenp = len;
		return 0;
	}
	gzFile g = gzopen(path, "rb");
	if (!g)
		return gf_seterr(errno ? -errno : -ENOMEM, "%s: %s", path, errno ? strerror(errno) : "cannot open");
	gzbuffer(g, 1 << 18);
	size_t cap = 1 << 20, len = 0;
	uint8_t *b = malloc(cap);
	int rc = 0;
	while (b) {
		unsigned want = (unsigned)((cap - len) > (1u << 30) ? (1u << 30) : (cap - len));
		int n = gzread(g, b + len, want);
		if (n < 0) {
			int e;
			const char *msg = gzerror(g, &e);
			rc = gf_seterr(GF_ECORRUPT, "%s: %s", path, e == Z_ERRNO ? strerror(errno) : msg);
			break;
		}
		len += (size_t)n;
		if (n == 0)
			break;
		if (len == cap) {
			uint8_t *nb = realloc(b, cap * 2);
			if (!nb) {
				free(b);
				b = NULL;
				break;
			}
			b = nb;
			cap *= 2;
		}
	}
	gzclose(g);
	if (!b)
		return -ENOMEM;
	if (rc) {
		free(b);
		return rc;
	}
	*bufp = b;
	*lenp = len;
	return 0;
}

static int grow_pix(uint8_t **pix, size_t *cap, size_t need)
{
	if (need <= *cap)
		return 0;
	uint8_t *n = realloc(*pix, need);
	if (!n)
		return -ENOMEM;
	*pix = n;
	*cap = need;
	return 0;
}

int gf_image_file_decode(gf_decoder *d, const uint8_t *buf, size_t len, int channels, uint8_t **pix, size_t *cap,
                         int *w, int *h, int *c, int *is_jpeg)
{
	int rc;
	*is_jpeg = 0;
	gf_image_kind kind = gf_image_sniff(buf, len);
	if (kind == GF_IMAGE_JPEG) {
		*is_jpeg = 1;
		int jc;
		if ((rc = gf_jpeg_info(d, buf, len, w, h, &jc)))
			return rc;
		*c = channels ? channels : jc;
		if ((uint32_t)*w > GF_RECORD_MAX_DIM || (uint32_t)*h > GF_RECORD_MAX_DIM)
			return gf_seterr(GF_ECORRUPT, "image %dx%d too large", *w, *h);
		gf_record_header hd = { .label = -1, .encoding = GF_ENC_JPEG, .height = (uint32_t)*h,
		                        .width = (uint32_t)*w, .channels = (uint32_t)jc, .payload = (uint32_t)len };
		const uint8_t *px;
		int ww, hh;
		if ((rc = gf_decode_pixels(d, &hd, buf, *c, &px, &ww, &hh)))
			return rc;
		size_t n = (size_t)ww * hh * *c;
		if ((rc = grow_pix(pix, cap, n)))
			return rc;
		memcpy(*pix, px, n);
		return 0;
	}
	if (kind == GF_IMAGE_PNG) {
		png_image img;
		memset(&img, 0, sizeof(img));
		img.version = PNG_IMAGE_VERSION;
		if (!png_image_begin_read_from_memory(&img, buf, len))
			return gf_seterr(GF_ECORRUPT, "corrupt PNG: %s", img.message);
		int src_c = (img.format & PNG_FORMAT_FLAG_COLOR) ? 3 : 1;
		*c = channels ? channels : src_c;
		*w = (int)img.width;
		*h = (int)img.height;
		if (img.width > GF_RECORD_MAX_DIM || img.height > GF_RECORD_MAX_DIM) {
			png_image_free(&img);
			return gf_seterr(GF_ECORRUPT, "image %ux%u too large", img.width, img.height);
		}
		img.format = *c == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
		if ((rc = grow_pix(pix, cap, PNG_IMAGE_SIZE(img)))) {
			png_image_free(&img);
			return rc;
		}
		if (!png_image_finish_read(&img, NULL, *pix, 0, NULL)) {
			rc = gf_seterr(GF_ECORRUPT, "corrupt PNG: %s", img.message);
			png_image_free(&img);
			return rc;
		}
		return 0;
	}
	return gf_seterr(GF_ECORRUPT, "neither a JPEG nor a PNG file");
}

int gf_png_save(const char *path, const uint8_t *pix, int w, int h, int c)
{
	png_image img;
	memset(&img, 0, sizeof(img));
	img.version = PNG_IMAGE_VERSION;
	img.width = (png_uint_32)w;
	img.height = (png_uint_32)h;
	img.format = c == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
	if (!png_image_write_to_file(&img, path, 0, pix, 0, NULL))
		return gf_seterr(-EIO, "%s: %s", path, img.message);
	return 0;
}
