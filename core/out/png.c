/* core/out, what runs write for people: PNG images and sample grids
 * (this file), plots (plot.c) and TensorBoard event files (tfevents.c).
 * It uses only core/base; the output stages, core/eval and the command
 * use it.
 *
 * PNG writing and reading through libpng, and sample-grid tiling.
 * See <ganflow/image.h>. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ganflow/err.h>
#include <ganflow/image.h>

/* ---- writing ----
 *
 * libpng encodes into memory and the file is written here with write(2):
 * libpng's own stdio writer reports any failure as "Write Error" (and
 * prints it), which hides the cause; write(2) says it (a full disk is
 * "No space left on device"). */

struct png_out {
	uint8_t *b;
	size_t n, cap;
	char err[128];   /* libpng's message when it gave up */
};

static void out_write(png_structp png, png_bytep data, size_t n)
{
	struct png_out *o = png_get_io_ptr(png);
	if (o->n + n > o->cap) {
		size_t cap = o->cap ? o->cap : 65536;
		while (cap < o->n + n)
			cap *= 2;
		uint8_t *b = realloc(o->b, cap);
		if (!b)
			png_error(png, "out of memory");
		o->b = b;
		o->cap = cap;
	}
	memcpy(o->b + o->n, data, n);
	o->n += n;
}

static void out_flush(png_structp png)
{
	(void)png;
}

/* libpng's errors: kept for our message instead of printed on stderr. */
static void out_error(png_structp png, png_const_charp msg)
{
	struct png_out *o = png_get_error_ptr(png);
	snprintf(o->err, sizeof(o->err), "%s", msg);
	png_longjmp(png, 1);
}

static void out_warning(png_structp png, png_const_charp msg)
{
	(void)png;
	(void)msg;
}

/* The PNG of pixels into o (o->b malloc'ed, also after a failure).
 * Returns 0, -ENOMEM or GF_EFAIL with libpng's message in o->err. */
static int encode(struct png_out *o, const uint8_t *pixels, int w, int h, int channels, size_t stride)
{
	png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, o, out_error, out_warning);
	png_infop info = png ? png_create_info_struct(png) : NULL;
	if (!info) {
		png_destroy_write_struct(&png, NULL);
		return -ENOMEM;
	}
	if (setjmp(png_jmpbuf(png))) {
		png_destroy_write_struct(&png, &info);
		return strcmp(o->err, "out of memory") ? GF_EFAIL : -ENOMEM;
	}
	static const int types[] = { 0, PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA, PNG_COLOR_TYPE_RGB,
	                             PNG_COLOR_TYPE_RGB_ALPHA };
	png_set_write_fn(png, o, out_write, out_flush);
	png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, types[channels], PNG_INTERLACE_NONE,
	             PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
	png_write_info(png, info);
	for (int y = 0; y < h; y++)
		png_write_row(png, (png_const_bytep)(pixels + (size_t)y * stride));
	png_write_end(png, NULL);
	png_destroy_write_struct(&png, &info);
	return 0;
}

/* All of b into a new file tmp; 0 or -errno (the file then removed). */
static int write_all(const char *tmp, const uint8_t *b, size_t n)
{
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (fd < 0)
		return -errno;
	int rc = 0;
	while (n > 0) {
		ssize_t k = write(fd, b, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			rc = k < 0 ? -errno : -EIO;
			break;
		}
		b += k;
		n -= (size_t)k;
	}
	if (close(fd) && !rc)
		rc = -errno;
	if (rc)
		unlink(tmp);
	return rc;
}

int gf_png_write(const char *path, const uint8_t *pixels, int w, int h, int channels, size_t stride)
{
	if (w <= 0 || h <= 0 || channels < 1 || channels > 4)
		return gf_seterr(GF_EPARAM, "%s: bad PNG size %dx%dx%d", path, w, h, channels);
	if (!stride)
		stride = (size_t)w * (size_t)channels;
	struct png_out o = { 0 };
	int rc = encode(&o, pixels, w, h, channels, stride);
	if (rc) {
		free(o.b);
		if (rc == GF_EFAIL)
			return gf_seterr(rc, "%s: cannot encode PNG: %s", path, o.err);
		return gf_seterr(rc, "%s: cannot write PNG: %s", path, strerror(-rc));
	}
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	rc = write_all(tmp, o.b, o.n);
	free(o.b);
	if (rc == 0 && rename(tmp, path) != 0) {
		rc = -errno;
		unlink(tmp);
	}
	if (rc) /* the user's path in the message: the temporary name is ours */
		return gf_seterr(rc, "%s: cannot write PNG: %s", path, strerror(-rc));
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
