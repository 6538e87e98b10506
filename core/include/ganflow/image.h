/* ganflow image output: PNG files and sample grids.
 *
 * Used by the sample_grid stage, `ganflow sample` and `ganflow plot`. PNG
 * files are written atomically (temporary file in the same directory, then
 * rename), so a reader never sees half a file and a failure leaves any
 * previous file intact.
 */
#ifndef GANFLOW_IMAGE_H
#define GANFLOW_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Writes an 8-bit PNG of w x h pixels with `channels` interleaved channels
 * per pixel (1 = gray, 3 = RGB, 4 = RGBA), rows top to bottom, `stride`
 * bytes apart (0 = w * channels). Returns 0, -errno (the path in
 * gf_errmsg()), or GF_EPARAM for bad sizes. */
int gf_png_write(const char *path, const uint8_t *pixels, int w, int h, int channels, size_t stride);

/* Reads an 8-bit PNG (gray, gray+alpha, RGB or RGBA; palette and 16-bit
 * images are converted) into a malloc'ed buffer of w x h x channels bytes
 * (*pixels, freed by the caller with free()). Returns 0, -errno or
 * GF_ECORRUPT with the path in gf_errmsg(). */
int gf_png_read(const char *path, uint8_t **pixels, int *w, int *h, int *channels);

/* Tiles n images of c x h x w floats in [-1, 1] (NCHW, as a generator
 * outputs them) into a grid of `cols` columns with `pad` pixels of padding
 * (value 0) around and between tiles. c is 1 (gray) or 3 (RGB). The grid is
 * gw x gh pixels x c channels, interleaved; gf_grid_size() gives its size.
 * Values are mapped with round((x + 1) * 127.5) clamped to 0..255. */
void gf_grid_size(int n, int cols, int h, int w, int pad, int *gw, int *gh);
void gf_grid_tile(uint8_t *grid, const float *images, int n, int c, int h, int w, int cols, int pad);

#ifdef __cplusplus
}
#endif
#endif
