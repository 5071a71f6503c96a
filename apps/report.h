/* What adjoin-train shows a person: a progress bar per epoch (plain lines
 * when stdout is not a terminal), the metrics of every epoch as CSV, and a
 * plot of loss and accuracy against epoch as a self-contained SVG file any
 * browser opens.  Not collective: rank 0 calls these. */
#ifndef ADJOIN_EXAMPLES_LENET_REPORT_H
#define ADJOIN_EXAMPLES_LENET_REPORT_H

#include <stdbool.h>
#include <stdint.h>

/* One epoch's figures: one CSV row. */
typedef struct report_row {
  int64_t epoch;        /* 1-based */
  double loss;          /* mean training loss over the epoch */
  double train_acc;     /* fraction of training samples classified right during the epoch */
  double test_acc;      /* on the test set after the epoch */
  double seconds;       /* training time of the epoch */
  double images_per_s;  /* training samples / seconds */
} report_row;

enum { REPORT_MAX_EPOCHS = 10000 };

/* Progress of one epoch: a bar redrawn in place on a terminal, otherwise a
 * plain line at every quarter. */
typedef struct report_progress {
  bool tty;
  int64_t epoch, epochs; /* 1-based epoch shown, of epochs */
  int64_t next_line;     /* plain mode: batch at which the next line is due */
} report_progress;

void report_progress_begin(report_progress *p, int64_t epoch, int64_t epochs);
void report_progress_update(report_progress *p, int64_t batch, int64_t batches, double loss);
/* Clears the bar so the summary line replaces it. */
void report_progress_end(report_progress *p);

/* "epoch  3/10  loss 0.1234  train_acc 0.9612 ..." on stdout. */
void report_summary(const report_row *row, int64_t epochs);

/* Reads the rows of an earlier run's CSV with epoch <= max_epoch (for a
 * resumed run's plot); a missing file gives 0 rows.  Returns the count. */
int report_read_csv(const char *path, int64_t max_epoch, report_row *rows, int capacity);
/* Checks before the first epoch that report_write could write the CSV and
 * the plot beside it.  Returns 0, or -1 with a message naming the path and
 * the reason on stderr. */
int report_check_target(const char *csv_path);
/* Rewrites the whole CSV and the SVG plot beside it (PATH with .csv replaced
 * by .svg).  Returns 0, or -1 with a message naming the file and the
 * reason on stderr. */
int report_write(const char *csv_path, const report_row *rows, int n, const char *title);

#endif
