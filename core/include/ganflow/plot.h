/* ganflow plots: line charts rendered to PNG without any plotting library.
 *
 * `ganflow plot RUN_DIR` draws a run's loss curves, discriminator outputs,
 * images/s and evaluation figures from its metrics.jsonl. The renderer is a
 * small software rasteriser (lines, axes with "nice" ticks, a 5x7 bitmap
 * font) so plots work on a headless machine with nothing but libpng.
 */
#ifndef GANFLOW_PLOT_H
#define GANFLOW_PLOT_H

#ifdef __cplusplus
extern "C" {
#endif

#define GF_PLOT_MAX_SERIES 8

typedef struct gf_plot_series {
	const char *name;   /* legend text; not owned */
	const double *x;    /* (n) ascending x values; not owned */
	const double *y;    /* (n) values; NaN points are skipped (the line bridges them) */
	int n;
} gf_plot_series;

typedef struct gf_plot_panel {
	const char *title;  /* drawn above the panel; not owned */
	const char *xlabel; /* e.g. "step" */
	int nseries;
	gf_plot_series series[GF_PLOT_MAX_SERIES];
} gf_plot_panel;

/* Renders the panels stacked vertically (width x panel_height each) into
 * an RGB PNG at path (written atomically). Returns 0, GF_EPARAM when there
 * is nothing to draw, or the error of gf_png_write. */
int gf_plot_png(const char *path, const gf_plot_panel *panels, int npanels, int width, int panel_height);

#ifdef __cplusplus
}
#endif
#endif
