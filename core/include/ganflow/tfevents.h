/* ganflow TensorBoard event files: what `tensorboard --logdir runs` shows
 * of a run (scalars, sample grids, the pipeline and its arguments).
 *
 * A writer appends to RUN_DIR/events.out.tfevents.<unix time>.<host>, in
 * TFRecord framing (u64 length, u32 masked CRC32C of the length bytes, the
 * data, u32 masked CRC32C of the data; little-endian) around
 * `tensorflow.Event` protocol buffers. The first event carries
 * file_version "brain.Event:2"; each later one a wall time, a step and a
 * Summary with one value: a scalar (simple_value), a PNG image
 * (Summary.Image) or a text (a DT_STRING tensor for the "text" plugin).
 *
 * The stages that write (metrics, sample_grid) share one writer per run
 * directory in a process: gf_tb_open of the same directory returns the
 * same writer with one more reference. Every call is thread-safe. Under
 * MPI only the rank that keeps the books runs those stages, so only it
 * writes.
 */
#ifndef GANFLOW_TFEVENTS_H
#define GANFLOW_TFEVENTS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gf_tb gf_tb;

/* The writer of run directory dir (which must be writable): made on the
 * first call, shared afterwards. Its event file (named at that call) is
 * created with the first event, its version event first, so a run that
 * stops before it writes anything leaves none. Returns 0, or -errno
 * naming the directory in gf_errmsg(). Release with gf_tb_close. */
int gf_tb_open(const char *dir, gf_tb **out);

/* Drops a reference; the last one closes the file. NULL is ignored. */
void gf_tb_close(gf_tb *w);

/* The event file's path; owned by the writer. */
const char *gf_tb_path(const gf_tb *w);

/* Appends one event of `step` at wall time `wall` (seconds since the
 * epoch) holding a scalar, a PNG image (the bytes of a PNG file of
 * height x width pixels, channels 1 = grey, 3 = RGB, 4 = RGBA) or a text
 * (UTF-8, shown by TensorBoard's text dashboard) under tag, written to
 * the file at once. Returns 0, -ENOMEM or -errno naming the file (a full
 * disk: "No space left on device"). A write that fails leaves the file
 * cut back to its last whole record (readable to its end) and the writer
 * refusing every later event with the same error. */
int gf_tb_scalar(gf_tb *w, const char *tag, int64_t step, double wall, float value);
int gf_tb_image(gf_tb *w, const char *tag, int64_t step, double wall, const void *png, size_t len, int height,
                int width, int channels);
int gf_tb_text(gf_tb *w, const char *tag, int64_t step, double wall, const char *text);

/* Returns 0, or the error of a write that failed (events are written when
 * they are appended; this reports, it has nothing left to write). */
int gf_tb_flush(gf_tb *w);

#ifdef __cplusplus
}
#endif
#endif
