/* Logging and the live progress line. See <ganflow/log.h>. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <ganflow/log.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int level = GF_LOG_INFO;
static int tty;
static char line[512];        /* live progress line currently shown ("" = none) */
static double plain_interval = 10.0;
static double last_plain = -1e30;

static void init(void)
{
	tty = isatty(STDERR_FILENO);
	const char *e = getenv("GANFLOW_LOG");
	if (e) {
		if (!strcasecmp(e, "error")) level = GF_LOG_ERROR;
		else if (!strcasecmp(e, "warn")) level = GF_LOG_WARN;
		else if (!strcasecmp(e, "info")) level = GF_LOG_INFO;
		else if (!strcasecmp(e, "debug")) level = GF_LOG_DEBUG;
	}
}

double gf_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int gf_log_tty(void)
{
	pthread_once(&once, init);
	return tty;
}

/* Erases the live line; caller holds the lock. */
static void erase_line(void)
{
	if (tty && line[0])
		fputs("\r\033[K", stderr);
}

static void redraw_line(void)
{
	if (tty && line[0])
		fputs(line, stderr);
}

void gf_log(int l, const char *fmt, ...)
{
	pthread_once(&once, init);
	if (l > level)
		return;
	char msg[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	size_t n = strlen(msg);
	while (n && msg[n - 1] == '\n')
		msg[--n] = '\0';
	const char *prefix = l == GF_LOG_ERROR ? "ganflow: error: " : l == GF_LOG_WARN ? "ganflow: warning: " : "";
	pthread_mutex_lock(&lock);
	erase_line();
	fprintf(stderr, "%s%s\n", prefix, msg);
	redraw_line();
	fflush(stderr);
	pthread_mutex_unlock(&lock);
}

void gf_progress_set_interval(double seconds)
{
	pthread_mutex_lock(&lock);
	plain_interval = seconds;
	pthread_mutex_unlock(&lock);
}

void gf_progress(const char *text)
{
	pthread_once(&once, init);
	pthread_mutex_lock(&lock);
	if (tty) {
		snprintf(line, sizeof(line), "%s", text);
		fputs("\r\033[K", stderr);
		fputs(line, stderr);
		fflush(stderr);
	} else {
		double now = gf_now();
		if (now - last_plain >= plain_interval) {
			last_plain = now;
			fprintf(stderr, "%s\n", text);
			fflush(stderr);
		}
	}
	pthread_mutex_unlock(&lock);
}

void gf_progress_done(const char *text)
{
	pthread_once(&once, init);
	pthread_mutex_lock(&lock);
	if (tty)
		fputs("\r\033[K", stderr);
	if (text && text[0])
		fprintf(stderr, "%s\n", text);
	line[0] = '\0';
	last_plain = -1e30;
	fflush(stderr);
	pthread_mutex_unlock(&lock);
}

static void human(char *buf, size_t size, double v)
{
	if (v >= 1e6)
		snprintf(buf, size, "%.1fM", v / 1e6);
	else if (v >= 1e3)
		snprintf(buf, size, "%.1fk", v / 1e3);
	else
		snprintf(buf, size, "%.1f", v);
}

void gf_progress_bar(const char *what, uint64_t done, uint64_t total, double start)
{
	char bar[33], rate_s[32], text[256];
	double el = gf_now() - start;
	double frac = total ? (double)done / (double)total : 0.0;
	if (frac > 1.0)
		frac = 1.0;
	int fill = (int)(frac * 30.0);
	for (int i = 0; i < 30; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[30] = '\0';
	double rate = el > 0 ? (double)done / el : 0.0;
	human(rate_s, sizeof(rate_s), rate);
	double eta = rate > 0 && total > done ? (double)(total - done) / rate : 0.0;
	snprintf(text, sizeof(text), "%s [%s] %3.0f%% %llu/%llu %s/s ETA %.0fs", what, bar, frac * 100.0,
	         (unsigned long long)done, (unsigned long long)total, rate_s, eta);
	if (done >= total)
		gf_progress_done(text);
	else
		gf_progress(text);
}
