/* bench_feed: images/s of reader -> jpeg_decode -> batch at 64x64 RGB
 * against a PyTorch DataLoader with PIL decoding the same JPEGs from a
 * folder (tests/bench/torch_feed.py, 2 workers), in the same run, on the
 * same 2 cores.
 *
 * Data: the 3000-image ImageNet-like benchmark shards, and the same JPEG
 * bytes written once as BUILD/bench-data/imagenet-like-3000-folder/<class>/
 * for the baseline (page cache warm for both). ganflow: lmdb_reader
 * (shuffle) -> jpeg_decode (size 64, RGB, 2 workers) -> batch (64) -> a
 * sink, one epoch, timed from graph start to end. PyTorch: shuffled
 * DataLoader, batch 64, 2 workers, one epoch, timed from the first batch
 * (worker start-up not counted, in the baseline's favour). Both pinned to
 * CPUs 0-1 when the machine has more. Best of `repeats` for each.
 *
 * usage: bench_feed [repeats=3] [python=/usr/bin/python3]
 */
#include <sched.h>

#include "bench_data.h"

#define COUNT 3000

/* Writes the dataset's JPEG payloads as DIR/<label>/<key>.jpg (once). */
static const char *export_folder(const char *path)
{
	static char dir[4300];
	snprintf(dir, sizeof(dir), "%s-folder", path);
	char done[4400];
	snprintf(done, sizeof(done), "%s/.complete", dir);
	if (access(done, F_OK) == 0)
		return dir;
	gf_remove_tree(dir);
	if (mkdir(dir, 0777))
		die("%s: %s", dir, strerror(errno));
	gf_dataset *ds;
	if (gf_dataset_open(path, &ds))
		die("%s", gf_errmsg());
	const gf_dataset_meta *m = gf_dataset_metadata(ds);
	char p[4500];
	for (uint32_t c = 0; c < m->nclasses; c++) {
		snprintf(p, sizeof(p), "%s/%u", dir, c);
		mkdir(p, 0777);
	}
	for (uint64_t k = 0; k < m->count; k++) {
		gf_record r;
		if (gf_dataset_get(ds, k, &r))
			die("%s", gf_errmsg());
		snprintf(p, sizeof(p), "%s/%d/%08llu.jpg", dir, r.h.label, (unsigned long long)k);
		FILE *f = fopen(p, "wb");
		if (!f || fwrite(r.payload, 1, r.h.payload, f) != r.h.payload || fclose(f))
			die("%s: %s", p, strerror(errno));
	}
	gf_dataset_close(ds);
	FILE *f = fopen(done, "w");
	if (f)
		fclose(f);
	return dir;
}

static double feed(const char *path)
{
	bstep s[3] = {
		{ "lmdb_reader", NULL, "samples", kv("path", gf_value_str(path), "epochs", gf_value_int(1), NULL), 1 },
		{ "jpeg_decode", "records", "samples", kv("size", gf_value_int(64), "channels", gf_value_int(3), NULL), 2 },
		{ "batch", "samples", "batch", kv("size", gf_value_int(64), NULL), 1 },
	};
	double t = run_steps(s, 3, 0);
	if (sink_items != COUNT)
		die("the pipeline delivered %llu images, expected %d", (unsigned long long)sink_items, COUNT);
	return (double)sink_items / t;
}

/* Runs torch_feed.py; returns the steady images/s (and *total: with
 * start-up). */
static double torch_feed(const char *python, const char *dir, double *total)
{
	char cmd[9000];
	const char *src = getenv("GF_SOURCE_DIR");
	snprintf(cmd, sizeof(cmd), "%s %s/tests/bench/torch_feed.py %s --workers 2 --batch 64 --size 64", python,
	         src ? src : ".", dir);
	FILE *p = popen(cmd, "r");
	if (!p)
		die("cannot run %s", cmd);
	char line[512];
	double rate = -1, steady = -1;
	long n = 0;
	while (fgets(line, sizeof(line), p))
		if (sscanf(line, "images=%ld seconds=%*f images_per_s=%lf steady_images_per_s=%lf", &n, &rate, &steady) == 3)
			break;
	int st = pclose(p);
	if (st != 0 || steady <= 0 || n != COUNT)
		die("the PyTorch baseline failed (%s): exit %d, %ld images; it needs Debian's python3-torch, "
		    "python3-pil and python3-numpy (give python=PATH for another interpreter)",
		    cmd, st, n);
	*total = rate;
	return steady;
}

int main(int argc, char **argv)
{
	int repeats = 3;
	const char *python = "/usr/bin/python3";
	for (int i = 1; i < argc; i++) {
		if (!strncmp(argv[i], "python=", 7))
			python = argv[i] + 7;
		else if (sscanf(argv[i], "repeats=%d", &repeats) != 1 || repeats < 1)
			die("usage: bench_feed [repeats=N] [python=PATH]");
	}
	/* both sides on the same two CPUs */
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(0, &set);
	CPU_SET(1, &set);
	sched_setaffinity(0, sizeof(set), &set);
	const char *path = bench_dataset(COUNT);
	const char *dir = export_folder(path);
	gf_dataset *ds;
	if (gf_dataset_open(path, &ds))
		die("%s", gf_errmsg());
	warm_files(ds);
	gf_dataset_close(ds);
	double g = 0, t = 0, tt = 0;
	for (int r = 0; r < repeats; r++) {
		double x = feed(path), total;
		g = x > g ? x : g;
		double y = torch_feed(python, dir, &total);
		if (y > t)
			t = y, tt = total;
	}
	printf("feed: %d ImageNet-like JPEGs (500x375, q90) to 64x64 RGB f32 batches of 64, CPUs 0-1, best of %d\n",
	       COUNT, repeats);
	printf("%-58s %10s\n", "pipeline", "images/s");
	printf("%-58s %10.1f\n", "ganflow: lmdb_reader -> jpeg_decode x2 -> batch (whole run)", g);
	printf("%-58s %10.1f\n", "PyTorch DataLoader, PIL, 2 workers (from the first batch)", t);
	printf("%-58s %10.1f\n", "  (PyTorch including worker start-up)", tt);
	printf("feed: ratio_vs_torch=%.2f target=2.00\n", g / t);
	return 0;
}
