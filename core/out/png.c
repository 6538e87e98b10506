/* core/out, what runs write for people: PNG images and sample grids
 * (this file), plots (plot.c) and TensorBoard event files (tfevents.c).
 * It uses only core/base; the output stages, core/eval and the command
 * use it.
 *
 * PNG writing and reading through libpng, and sample-grid tiling.
 * See <ganflow/image.h>. */
#include <errno.h>
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ganflow/err.h>
#include <ganflow/image.h>

/* ---- writing ---- */

static int write_file(FILE *f, const uint8_t *pixels, int w, int h, int channels, size_t stride)
{
	png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
	png_infop info = png ? png_create_info_struct(png) : NULL;
	if (!info) {
		png_destroy_write_struct(&png, NULL);
		return -ENOMEM;
	}
	if (setjmp(png_jmpbuf(png))) {
		png_destroy_write_struct(&png, &info);
		return -EIO;
	}
	static const int types[] = { 0, PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA, PNG_COLOR_TYPE_RGB,
	                             PNG_COLOR_TYPE_RGB_ALPHA };
	png_init_io(png, f);
	png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, types[channels], PNG_INTERLACE_NONE,
	             PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
	png_write_info(png, info);
	for (int y = 0; y < h; y++)
		png_write_row(png, (png_const_bytep)(pixels + (size_t)y * stride));
	png_write_end(png, NULL);
	png_destroy_write_struct(&png, &info);
	return 0;
}

int gf_png_write(const char *path, const uint8_t *pixels, int w, int h, int channels, size_t stride)
{
	if (w <= 0 || h <= 0 || channels < 1 || channels > 4)
		return gf_seterr(GF_EPARAM, "%s: bad PNG size %dx%dx%d", path, w, h, channels);
	if (!stride)
		stride = (size_t)w * (size_t)channels;
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	FILE *f = fopen(tmp, "wb");
	if (!f) /* the user's path in the message: the temporary name is ours */
		return gf_seterr(-errno, "%s: cannot write PNG: %s", path, strerror(errno));
	int rc = write_file(f, pixels, w, h, channels, stride);
	if (fflush(f) != 0 && rc == 0)
		rc = -errno;
	if (fclose(f) != 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, path) != 0)
		rc = -errno;
	if (rc) {
		unlink(tmp);
		return gf_seterr(rc, "%s: cannot write PNG: %s", path, strerror(-rc));
	}
	return 0;
}

/* ---- reading ---- */

int gf_png_read(const char *path, uint8_t **pixels, int *w, int *h, int *channels)
{
	*pixels = NULL;
	FILE *f = fopen(path, "rb");
	if (!f)
		return gf_seterr(-errno, "%s: %s", path, strerror(errno));
	png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
	png_infop info = png ? png_create_info_struct(png) : NULL;
	uint8_t *volatile buf = NULL;
	if (!info) {
		png_destroy_read_struct(&png, NULL, NULL);
		fclose(f);
		return -ENOMEM;
	}
	if (setjmp(png_jmpbuf(png))) {
		png_destroy_read_struct(&png, &info, NULL);
		fclose(f);
		free(buf);
		return gf_seterr(GF_ECORRUPT, "%s: not a readable PNG file", path);
	}
	png_init_io(png, f);
	png_read_info(png, info);
	png_set_expand(png);
	png_set_strip_16(png);
	png_read_update_info(png, info);
	int pw = (int)png_get_image_width(png, info), ph = (int)png_get_image_height(png, info);
	int pc = png_get_channels(png, info);
	size_t rowbytes = png_get_rowbytes(png, info);
	buf = malloc(rowbytes * (size_t)ph);
	if (!buf)
		png_error(png, "out of memory");
	for (int y = 0; y < ph; y++)
		png_read_row(png, buf + (size_t)y * rowbytes, NULL);
	png_read_end(png, NULL);
	png_destroy_read_struct(&png, &info, NULL);
	fclose(f);
	*pixels = buf;
	*w = pw;
	*h = ph;
	*channels = pc;
	return 0;
}

/* ---- grids ---- */

void gf_grid_size(int n, int cols, int h, int w, int pad, int *gw, int *gh)
{
	if (cols < 1)
		cols = 1;
	int rows = (n + cols - 1) / cols;
	*gw = cols * (w + pad) + pad;
	*gh = rows * (h + pad) + pad;
}

void gf_grid_tile(uint8_t *grid, const float *images, int n, int c, int h, int w, int cols, int pad)
{
	int gw, gh;
	gf_grid_size(n, cols, h, w, pad, &gw, &gh);
	memset(grid, 0, (size_t)gw * (size_t)gh * (size_t)c);
	for (int i = 0; i < n; i++) {
		int ox = pad + (i % cols) * (w + pad), oy = pad + (i / cols) * (h + pad);
		const float *img = images + (size_t)i * (size_t)(c * h * w);
		for (int y = 0; y < h; y++) {
			uint8_t *row = grid + ((size_t)(oy + y) * (size_t)gw + (size_t)ox) * (size_t)c;
			for (int x = 0; x < w; x++)
				for (int ch = 0; ch < c; ch++) {
					float v = roundf((img[((size_t)ch * h + y) * w + x] + 1.0f) * 127.5f);
					row[(size_t)x * c + ch] = (uint8_t)(v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v);
				}
		}
	}
}
