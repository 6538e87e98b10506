/* TensorBoard event files: a small protocol-buffer encoder for the few
 * messages TensorBoard reads (Event, Summary, Summary.Value, Summary.Image,
 * SummaryMetadata, TensorProto) and TFRecord framing with masked CRC32C.
 * See <ganflow/tfevents.h>.
 *
 * Field numbers are those of tensorflow/core/util/event.proto and
 * tensorflow/core/framework/summary.proto, tensor.proto: the layout
 * TensorBoard, tensorboardX and torch.utils.tensorboard write.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <ganflow/crc32c.h>
#include <ganflow/err.h>
#include <ganflow/tfevents.h>

/* TFRecord's mask, so a CRC of data holding CRCs stays well-behaved. */
static uint32_t masked(uint32_t crc)
{
	return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

/* ---- protocol-buffer encoding ---- */

typedef struct pb {
	uint8_t *b;
	size_t n, cap;
	int err;
} pb;

static void pb_raw(pb *p, const void *data, size_t n)
{
	if (p->err || n == 0)
		return;
	if (p->n + n > p->cap) {
		size_t cap = p->cap ? p->cap : 256;
		while (cap < p->n + n)
			cap *= 2;
		uint8_t *b = realloc(p->b, cap);
		if (!b) {
			p->err = -ENOMEM;
			return;
		}
		p->b = b;
		p->cap = cap;
	}
	memcpy(p->b + p->n, data, n);
	p->n += n;
}

static void pb_varint(pb *p, uint64_t v)
{
	uint8_t b[10];
	int n = 0;
	do {
		b[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	pb_raw(p, b, (size_t)n);
}

enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_BYTES = 2, WIRE_FIXED32 = 5 };

static void pb_key(pb *p, int field, int wire)
{
	pb_varint(p, (uint64_t)field << 3 | (uint64_t)wire);
}

static void pb_bytes(pb *p, int field, const void *data, size_t n)
{
	pb_key(p, field, WIRE_BYTES);
	pb_varint(p, n);
	pb_raw(p, data, n);
}

static void pb_string(pb *p, int field, const char *s)
{
	pb_bytes(p, field, s, strlen(s));
}

/* An embedded message: its encoding, then released. */
static void pb_message(pb *p, int field, pb *m)
{
	if (m->err && !p->err)
		p->err = m->err;
	pb_bytes(p, field, m->b, m->n);
	free(m->b);
	*m = (pb){ 0 };
}

static void pb_fixed32(pb *p, int field, uint32_t v)
{
	uint8_t b[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };
	pb_key(p, field, WIRE_FIXED32);
	pb_raw(p, b, 4);
}

static void pb_fixed64(pb *p, int field, uint64_t v)
{
	uint8_t b[8];
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	pb_key(p, field, WIRE_FIXED64);
	pb_raw(p, b, 8);
}

/* Event: wall_time 1 (double), step 2 (int64), file_version 3, summary 5.
 * Summary: value 1. Value: tag 1, simple_value 2 (float), image 4,
 * tensor 8, metadata 9. */
enum { EV_WALL = 1, EV_STEP = 2, EV_VERSION = 3, EV_SUMMARY = 5 };
enum { VAL_TAG = 1, VAL_SIMPLE = 2, VAL_IMAGE = 4, VAL_TENSOR = 8, VAL_META = 9 };

/* ---- the writer ---- */

struct gf_tb {
	char *dir, *path;
	int fd;
	off_t good;      /* the file's size after its last whole record */
	int err;         /* a write failed: every later one returns it */
	int refs;
	gf_tb *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* the list and every file */
static gf_tb *writers;

/* One TFRecord: length, its masked CRC, the data, its masked CRC, written
 * with write(2) at once (TensorBoard reads the file while it grows). A
 * write that fails (a full disk) may have left part of the record: the
 * file is cut back to its last whole record, so that it stays readable
 * to its end, and the writer refuses every later record. */
static int append_record(gf_tb *w, const pb *event)
{
	uint8_t head[12], tail[4];
	uint64_t n = event->n;
	for (int i = 0; i < 8; i++)
		head[i] = (uint8_t)(n >> (8 * i));
	uint32_t lc = masked(gf_crc32c(0, head, 8)), dc = masked(gf_crc32c(0, event->b, event->n));
	for (int i = 0; i < 4; i++) {
		head[8 + i] = (uint8_t)(lc >> (8 * i));
		tail[i] = (uint8_t)(dc >> (8 * i));
	}
	const struct { const uint8_t *b; size_t n; } parts[3] = { { head, 12 }, { event->b, event->n }, { tail, 4 } };
	int rc = 0;
	for (int p = 0; p < 3 && !rc; p++)
		for (size_t done = 0; done < parts[p].n;) {
			ssize_t k = write(w->fd, parts[p].b + done, parts[p].n - done);
			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0) {
				rc = k < 0 ? -errno : -EIO;
				break;
			}
			done += (size_t)k;
		}
	if (rc) {
		w->err = rc;
		if (ftruncate(w->fd, w->good))
			return gf_seterr(rc, "%s: %s (and cannot cut the torn record off: %s)", w->path, strerror(-rc),
			                 strerror(errno));
		return gf_seterr(rc, "%s: %s (the file ends at its last whole record)", w->path, strerror(-rc));
	}
	w->good += (off_t)(12 + event->n + 4);
	return 0;
}

static int start_file(gf_tb *w);

/* The file is created with the first event (its version record first):
 * a run refused while its stages are created leaves no event file. */
static int write_record(gf_tb *w, const pb *event)
{
	if (event->err)
		return event->err;
	if (w->err)
		return gf_seterr(w->err, "%s: %s (an earlier write failed)", w->path, strerror(-w->err));
	int rc = w->fd < 0 ? start_file(w) : 0;
	return rc ? rc : append_record(w, event);
}

static void event_head(pb *e, int64_t step, double wall)
{
	uint64_t bits;
	memcpy(&bits, &wall, 8);
	pb_fixed64(e, EV_WALL, bits);
	pb_key(e, EV_STEP, WIRE_VARINT);
	pb_varint(e, (uint64_t)step);
}

/* An event of step holding one Summary.Value (encoded in v), written. */
static int write_value(gf_tb *w, int64_t step, double wall, pb *v)
{
	pb e = { 0 }, s = { 0 };
	event_head(&e, step, wall);
	pb_message(&s, 1, v);
	pb_message(&e, EV_SUMMARY, &s);
	pthread_mutex_lock(&lock);
	int rc = write_record(w, &e);
	pthread_mutex_unlock(&lock);
	free(e.b);
	return rc;
}

static int start_file(gf_tb *w)
{
	struct stat st;
	if ((w->fd = open(w->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666)) < 0 || fstat(w->fd, &st)) {
		int rc = gf_seterr(-errno, "%s: %s", w->path, strerror(errno));
		if (w->fd >= 0)
			close(w->fd);
		w->fd = -1;
		return rc;
	}
	w->good = st.st_size;
	pb e = { 0 };
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	event_head(&e, 0, (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec);
	pb_string(&e, EV_VERSION, "brain.Event:2");
	int rc = e.err ? e.err : append_record(w, &e);
	free(e.b);
	return rc;
}

int gf_tb_open(const char *dir, gf_tb **out)
{
	*out = NULL;
	pthread_mutex_lock(&lock);
	for (gf_tb *w = writers; w; w = w->next)
		if (!strcmp(w->dir, dir)) {
			w->refs++;
			*out = w;
			pthread_mutex_unlock(&lock);
			return 0;
		}
	int rc = 0;
	char host[256] = "localhost";
	gethostname(host, sizeof(host) - 1);
	size_t n = strlen(dir) + strlen(host) + 64;
	gf_tb *w = calloc(1, sizeof(*w));
	if (w)
		w->fd = -1;
	if (!w || !(w->dir = strdup(dir)) || !(w->path = malloc(n))) {
		rc = -ENOMEM;
		goto fail;
	}
	snprintf(w->path, n, "%s/events.out.tfevents.%lld.%s", dir, (long long)time(NULL), host);
	/* the file itself comes with the first event (write_record) */
	if (access(dir, W_OK)) {
		rc = gf_seterr(-errno, "%s: %s", dir, strerror(errno));
		goto fail;
	}
	w->refs = 1;
	w->next = writers;
	writers = w;
	pthread_mutex_unlock(&lock);
	*out = w;
	return 0;
fail:
	pthread_mutex_unlock(&lock);
	if (w) {
		if (w->fd >= 0)
			close(w->fd);
		free(w->dir);
		free(w->path);
		free(w);
	}
	return rc;
}

void gf_tb_close(gf_tb *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&lock);
	if (--w->refs > 0) {
		pthread_mutex_unlock(&lock);
		return;
	}
	for (gf_tb **p = &writers; *p; p = &(*p)->next)
		if (*p == w) {
			*p = w->next;
			break;
		}
	pthread_mutex_unlock(&lock);
	if (w->fd >= 0)
		close(w->fd);
	free(w->dir);
	free(w->path);
	free(w);
}

const char *gf_tb_path(const gf_tb *w)
{
	return w->path;
}

int gf_tb_flush(gf_tb *w)
{
	/* every record is written when it is appended: only a failure to report */
	pthread_mutex_lock(&lock);
	int rc = w->err ? gf_seterr(w->err, "%s: %s", w->path, strerror(-w->err)) : 0;
	pthread_mutex_unlock(&lock);
	return rc;
}

int gf_tb_scalar(gf_tb *w, const char *tag, int64_t step, double wall, float value)
{
	pb v = { 0 };
	uint32_t bits;
	memcpy(&bits, &value, 4);
	pb_string(&v, VAL_TAG, tag);
	pb_fixed32(&v, VAL_SIMPLE, bits);
	return write_value(w, step, wall, &v);
}

int gf_tb_image(gf_tb *w, const char *tag, int64_t step, double wall, const void *png, size_t len, int height,
                int width, int channels)
{
	/* Summary.Image: height 1, width 2, colorspace 3, encoded_image_string 4 */
	pb v = { 0 }, im = { 0 };
	pb_key(&im, 1, WIRE_VARINT);
	pb_varint(&im, (uint64_t)height);
	pb_key(&im, 2, WIRE_VARINT);
	pb_varint(&im, (uint64_t)width);
	pb_key(&im, 3, WIRE_VARINT);
	pb_varint(&im, (uint64_t)channels);
	pb_bytes(&im, 4, png, len);
	pb_string(&v, VAL_TAG, tag);
	pb_message(&v, VAL_IMAGE, &im);
	return write_value(w, step, wall, &v);
}

int gf_tb_text(gf_tb *w, const char *tag, int64_t step, double wall, const char *text)
{
	/* metadata: SummaryMetadata.plugin_data (1) = PluginData.plugin_name (1)
	 * "text"; tensor: TensorProto dtype (1) = DT_STRING (7), tensor_shape
	 * (2) = scalar (empty), string_val (8) = the text */
	pb v = { 0 }, meta = { 0 }, plugin = { 0 }, t = { 0 }, shape = { 0 };
	pb_string(&plugin, 1, "text");
	pb_message(&meta, 1, &plugin);
	pb_key(&t, 1, WIRE_VARINT);
	pb_varint(&t, 7);
	pb_message(&t, 2, &shape);
	pb_string(&t, 8, text);
	pb_string(&v, VAL_TAG, tag);
	pb_message(&v, VAL_TENSOR, &t);
	pb_message(&v, VAL_META, &meta);
	return write_value(w, step, wall, &v);
}
