/* Progress bar, CSV metrics and the SVG plot of adjoin-train (see report.h). */
#include "report.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "adjoin/file.h"
#include "adjoin/status.h"

/* ---- progress ------------------------------------------------------------------------- */

enum { BAR_WIDTH = 30 };

void report_progress_begin(report_progress *p, int64_t epoch, int64_t epochs) {
  *p = (report_progress){.tty = isatty(fileno(stdout)) != 0, .epoch = epoch, .epochs = epochs, .next_line = 0};
}

void report_progress_update(report_progress *p, int64_t batch, int64_t batches, double loss) {
  if (p->tty) {
    char bar[BAR_WIDTH + 1];
    int64_t filled = batch * BAR_WIDTH / (batches ? batches : 1);
    for (int i = 0; i < BAR_WIDTH; i++) bar[i] = i < filled ? '#' : '.';
    bar[BAR_WIDTH] = '\0';
    printf("\repoch %lld/%lld [%s] %lld/%lld  loss %.4f", (long long)p->epoch, (long long)p->epochs, bar,
           (long long)batch, (long long)batches, loss);
    fflush(stdout);
    return;
  }
  /* Plain lines at every quarter of the epoch, so a log stays short. */
  if (batch < p->next_line && batch != batches) return;
  printf("epoch %lld/%lld batch %lld/%lld loss %.4f\n", (long long)p->epoch, (long long)p->epochs, (long long)batch,
         (long long)batches, loss);
  fflush(stdout);
  int64_t quarter = batches / 4 > 0 ? batches / 4 : 1;
  p->next_line = (batch / quarter + 1) * quarter;
}

void report_progress_end(report_progress *p) {
  if (p->tty) printf("\r%*s\r", BAR_WIDTH + 60, "");
}

void report_summary(const report_row *r, int64_t epochs) {
  printf("epoch %3lld/%lld  loss %.4f  train_acc %.4f  test_acc %.4f  time %.2f s  %.0f images/s\n",
         (long long)r->epoch, (long long)epochs, r->loss, r->train_acc, r->test_acc, r->seconds, r->images_per_s);
  fflush(stdout);
}

/* ---- CSV -------------------------------------------------------------------------------- */

static const char csv_header[] = "epoch,loss,train_acc,test_acc,seconds,images_per_s";

int report_read_csv(const char *path, int64_t max_epoch, report_row *rows, int capacity) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char line[512];
  int n = 0;
  while (n < capacity && fgets(line, sizeof line, f)) {
    long long epoch;
    report_row r;
    if (sscanf(line, "%lld,%lf,%lf,%lf,%lf,%lf", &epoch, &r.loss, &r.train_acc, &r.test_acc, &r.seconds,
               &r.images_per_s) != 6 || epoch < 1 || epoch > max_epoch)
      continue; /* the header, an epoch the resumed run will redo, or nonsense */
    if (!isfinite(r.loss) || !isfinite(r.train_acc) || !isfinite(r.test_acc) || !isfinite(r.seconds) ||
        !isfinite(r.images_per_s))
      continue;
    r.epoch = epoch;
    rows[n++] = r;
  }
  fclose(f);
  return n;
}

/* Closes a file written with stdio: -1 (errno set) when any write failed,
 * including one that failed while the stream was still buffering. */
static int report_close(FILE *f) {
  int failed = ferror(f), saved = errno;
  if (fclose(f)) return -1;
  if (failed) errno = saved;
  return failed ? -1 : 0;
}

static int report_write_csv(const char *path, const report_row *rows, int n) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f, "%s\n", csv_header);
  for (int i = 0; i < n; i++)
    fprintf(f, "%lld,%.6f,%.6f,%.6f,%.4f,%.1f\n", (long long)rows[i].epoch, rows[i].loss, rows[i].train_acc,
            rows[i].test_acc, rows[i].seconds, rows[i].images_per_s);
  return report_close(f);
}

/* ---- SVG plot: two panels, loss and accuracy against epoch ---------------------------------- */

typedef struct svg_axes {
  double left, top, width, height; /* the plot area in pixels */
  double xlo, xhi, ylo, yhi;       /* the data range it shows */
  double ystep;                    /* between y grid lines */
  bool legend_below;               /* legend in the bottom right corner (curves that rise) */
} svg_axes;

/* A y range [lo', hi'] holding [lo, hi], cut into at most 6 intervals of a
 * round step (1, 2 or 5 times a power of ten), so tick labels read well. */
static void svg_nice_range(svg_axes *a, double lo, double hi) {
  static const double multiples[] = {1, 2, 5, 10};
  double span = hi > lo ? hi - lo : 1, base = pow(10, floor(log10(span / 6))), step = 10 * base;
  for (int i = 0; i < 4 && step == 10 * base; i++)
    if (span / (base * multiples[i]) <= 6) step = base * multiples[i];
  a->ystep = step;
  a->ylo = floor(lo / step) * step;
  a->yhi = ceil(hi / step) * step;
  if (a->yhi <= a->ylo) a->yhi = a->ylo + step;
}

static double svg_x(const svg_axes *a, double v) { return a->left + (v - a->xlo) / (a->xhi - a->xlo) * a->width; }
static double svg_y(const svg_axes *a, double v) {
  return a->top + a->height - (v - a->ylo) / (a->yhi - a->ylo) * a->height;
}

static double row_field(const report_row *r, size_t offset) { return *(const double *)((const char *)r + offset); }

/* Box, grid lines with tick labels (every ystep on y, whole epochs on x) and
 * axis titles. */
static void svg_frame(FILE *f, const svg_axes *a, const char *title, const char *ylabel, const char *yformat) {
  fprintf(f, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='white' stroke='#444'/>\n", a->left, a->top,
          a->width, a->height);
  double ratio = (a->yhi - a->ylo) / a->ystep;
  int intervals = isfinite(ratio) && ratio < 12 ? (int)lround(ratio) : 0;
  for (int i = 0; i <= intervals; i++) {
    double v = a->ylo + a->ystep * i, y = svg_y(a, v);
    fprintf(f, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#ddd'/>\n", a->left, y, a->left + a->width, y);
    fprintf(f, "<text x='%.1f' y='%.1f' text-anchor='end' font-size='12'>", a->left - 6, y + 4);
    fprintf(f, yformat, v);
    fprintf(f, "</text>\n");
  }
  /* At most 11 epoch labels whatever the range: the loop counts labels, not
   * epochs, so no range (even one a hand-edited CSV gives) makes it long. */
  double first = ceil(a->xlo), span = a->xhi - first, step = span > 10 ? ceil(span / 10) : 1;
  for (int i = 0; i <= 10 && first + step * i <= a->xhi; i++)
    fprintf(f, "<text x='%.1f' y='%.1f' text-anchor='middle' font-size='12'>%.0f</text>\n",
            svg_x(a, first + step * i), a->top + a->height + 16, first + step * i);
  fprintf(f, "<text x='%.1f' y='%.1f' text-anchor='middle' font-size='14'>epoch</text>\n", a->left + a->width / 2,
          a->top + a->height + 36);
  fprintf(f, "<text transform='translate(%.1f,%.1f) rotate(-90)' text-anchor='middle' font-size='14'>%s</text>\n",
          a->left - 52, a->top + a->height / 2, ylabel);
  fprintf(f, "<text x='%.1f' y='%.1f' text-anchor='middle' font-size='15' font-weight='bold'>%s</text>\n",
          a->left + a->width / 2, a->top - 12, title);
}

/* A line with markers through one field of the rows, and its legend entry
 * (slot 0, 1, ... from the top right of the panel). */
static void svg_series(FILE *f, const svg_axes *a, const report_row *rows, int n, size_t offset, const char *color,
                       const char *name, int slot) {
  fprintf(f, "<polyline fill='none' stroke='%s' stroke-width='2' points='", color);
  for (int i = 0; i < n; i++)
    fprintf(f, "%.1f,%.1f ", svg_x(a, (double)rows[i].epoch), svg_y(a, row_field(&rows[i], offset)));
  fprintf(f, "'/>\n");
  for (int i = 0; i < n; i++)
    fprintf(f, "<circle cx='%.1f' cy='%.1f' r='3' fill='%s'/>\n", svg_x(a, (double)rows[i].epoch),
            svg_y(a, row_field(&rows[i], offset)), color);
  double lx = a->left + a->width - 110, ly = (a->legend_below ? a->top + a->height - 40 : a->top + 18) + 18 * slot;
  fprintf(f, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='%s' stroke-width='2'/>\n", lx, ly - 4, lx + 20,
          ly - 4, color);
  fprintf(f, "<text x='%.1f' y='%.1f' font-size='12'>%s</text>\n", lx + 26, ly, name);
}

/* The range of one or two fields over the rows. */
static void row_range(const report_row *rows, int n, size_t a, size_t b, double *lo, double *hi) {
  *lo = INFINITY, *hi = -INFINITY;
  for (int i = 0; i < n; i++) {
    *lo = fmin(*lo, fmin(row_field(&rows[i], a), row_field(&rows[i], b)));
    *hi = fmax(*hi, fmax(row_field(&rows[i], a), row_field(&rows[i], b)));
  }
}

static int report_write_svg(const char *path, const report_row *rows, int n, const char *title) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  double first = n ? (double)rows[0].epoch : 1, last = n ? (double)rows[n - 1].epoch : 1;
  double xlo = last > first ? first : first - 0.5, xhi = last > first ? last : last + 0.5;
  double lo, hi;
  row_range(rows, n, offsetof(report_row, loss), offsetof(report_row, loss), &lo, &hi);
  svg_axes loss = {.left = 80, .top = 60, .width = 380, .height = 260, .xlo = xlo, .xhi = xhi};
  svg_nice_range(&loss, 0, n && hi > 0 ? hi : 1);
  row_range(rows, n, offsetof(report_row, train_acc), offsetof(report_row, test_acc), &lo, &hi);
  svg_axes acc = {.left = 570, .top = 60, .width = 380, .height = 260, .xlo = xlo, .xhi = xhi, .legend_below = true};
  svg_nice_range(&acc, n ? fmin(lo, 0.9) : 0, 1);
  fprintf(f, "<svg xmlns='http://www.w3.org/2000/svg' width='1000' height='380' font-family='sans-serif'>\n");
  fprintf(f, "<rect width='1000' height='380' fill='#fafafa'/>\n");
  fprintf(f, "<text x='500' y='22' text-anchor='middle' font-size='16'>%s</text>\n", title);
  svg_frame(f, &loss, "training loss", "loss", "%.3g");
  svg_series(f, &loss, rows, n, offsetof(report_row, loss), "#c0392b", "train loss", 0);
  svg_frame(f, &acc, "accuracy", "accuracy", "%.3g");
  svg_series(f, &acc, rows, n, offsetof(report_row, train_acc), "#2471a3", "train", 0);
  svg_series(f, &acc, rows, n, offsetof(report_row, test_acc), "#1e8449", "test", 1);
  fprintf(f, "</svg>\n");
  return report_close(f);
}

/* The plot's path: the CSV's with .csv replaced by .svg (or .svg appended). */
static void report_svg_path(const char *csv_path, char *svg_path, size_t size) {
  size_t len = strlen(csv_path);
  bool csv_suffix = len >= 4 && !strcmp(csv_path + len - 4, ".csv");
  snprintf(svg_path, size, "%.*s.svg", (int)(csv_suffix ? len - 4 : len), csv_path);
}

/* Says on stderr that the `what` at path cannot be written, and why; -1. */
static int report_failed(const char *what, const char *path, const char *why) {
  fprintf(stderr, "adjoin-train: cannot write the %s %s: %s\n", what, path, why);
  return -1;
}

/* The path must take the file (file.h): a writable regular file, or absent
 * in a directory that takes new files; a FIFO or a device is refused, as
 * opening one would block or write elsewhere. */
static int report_check_one(const char *what, const char *path) {
  if (!adj_file_check_output(path, what)) return 0;
  fprintf(stderr, "adjoin-train: cannot write the %s\n", adj_last_error());
  return -1;
}

int report_check_target(const char *csv_path) {
  char svg_path[4096];
  report_svg_path(csv_path, svg_path, sizeof svg_path);
  if (report_check_one("metrics file", csv_path)) return -1;
  return report_check_one("plot", svg_path);
}

int report_write(const char *csv_path, const report_row *rows, int n, const char *title) {
  char svg_path[4096];
  report_svg_path(csv_path, svg_path, sizeof svg_path);
  if (report_write_csv(csv_path, rows, n)) return report_failed("metrics file", csv_path, strerror(errno));
  if (report_write_svg(svg_path, rows, n, title)) return report_failed("plot", svg_path, strerror(errno));
  return 0;
}
