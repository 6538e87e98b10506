/* ganflow logging and the live progress line.
 *
 * Every line ganflow prints to the terminal goes through here, so warnings
 * from stages, converters and the runtime never tear the live progress line:
 * when stderr is a terminal the progress line is erased, the message is
 * printed, and the progress line is drawn again. When stderr is not a
 * terminal, progress is printed as plain periodic lines instead.
 * All functions are thread-safe.
 */
#ifndef GANFLOW_LOG_H
#define GANFLOW_LOG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { GF_LOG_ERROR = 0, GF_LOG_WARN, GF_LOG_INFO, GF_LOG_DEBUG };

/* Prints one line to stderr ("ganflow: warning: ..." style prefixes for
 * errors and warnings), above the live progress line if one is shown.
 * Lines above the level the GANFLOW_LOG environment variable names
 * (error, warn, info, debug; default info) are dropped. A trailing newline
 * in fmt is optional. */
void gf_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* 1 when stderr is a terminal (live progress lines), else 0. */
int gf_log_tty(void);

/* Replaces the live progress line with text (no newline). On a terminal
 * it is redrawn in place; otherwise the text is printed as a plain line
 * only when at least `plain_interval` seconds passed since the last plain
 * progress line (see gf_progress_set_interval; default 10 s). */
void gf_progress(const char *text);

/* Ends the live progress line: prints it one last time followed by a
 * newline (terminal), or prints it as a final plain line. */
void gf_progress_done(const char *text);

/* Interval between plain (non-terminal) progress lines, in seconds. */
void gf_progress_set_interval(double seconds);

/* Progress bar for long work (dataset conversion, verification, feature
 * extraction): "what [#####.....] 51% 30600/60000 12.3k/s ETA 2s".
 * start is the gf_now() of the work's start. */
void gf_progress_bar(const char *what, uint64_t done, uint64_t total, double start);

/* Monotonic clock in seconds. */
double gf_now(void);

#ifdef __cplusplus
}
#endif
#endif
