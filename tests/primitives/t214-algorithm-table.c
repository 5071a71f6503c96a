/* t214: the measured algorithm table of the summing primitives: the cache
 * file's round trip, the lookup, every rank choosing what rank 0's file says
 * (the others' files are ignored), a corrupt file ignored with the fixed
 * rule in force, a FIFO or device refused at once as the table or its
 * target, and the fixed rule's choice at each size. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "algorithm_table_impl.h"
#include "broadcast_cases.h"
#include "error_impl.h"
#include "harness.h"

/* A file name private to this run, the same on every rank. */
static void table_path(adj_test *t, const char *what, char *path, size_t size) {
  long id = (long)getpid();
  MPI_Bcast(&id, 1, MPI_LONG, 0, t->comm);
  const char *tmp = getenv("TMPDIR");
  snprintf(path, size, "%s/adjoin-t214-%ld/%s", tmp && *tmp ? tmp : "/tmp", id, what);
}

static void write_text(adj_test *t, const char *path, const char *text) {
  if (t->rank == 0) {
    adj_algorithm_table empty = {0};
    ADJ_TEST_OK(t, adj_algorithm_table_write(path, &empty)); /* creates the directory */
    FILE *file = fopen(path, "w");
    ADJ_TEST_CHECK(t, file && fputs(text, file) >= 0 && fclose(file) == 0, "cannot write %s", path);
  }
  MPI_Barrier(t->comm);
}

static void check_round_trip(adj_test *t) {
  char path[512];
  table_path(t, "round-trip", path, sizeof path);
  adj_algorithm_table written = {.n = 4,
                                 .entries = {{2, 0, 1}, {2, 65536, 2}, {3, 1024, 4}, {8, 1 << 20, 3}}};
  if (t->rank == 0) ADJ_TEST_OK(t, adj_algorithm_table_write(path, &written));
  ADJ_TEST_OK(t, adj_algorithm_table_set_path(path));
  adj_algorithm_table read;
  ADJ_TEST_OK(t, adj_algorithm_table_load(t->comm, &read));
  bool same = read.n == written.n;
  for (int i = 0; same && i < read.n; i++)
    same = read.entries[i].group == written.entries[i].group && read.entries[i].bytes == written.entries[i].bytes &&
           read.entries[i].algorithm == written.entries[i].algorithm;
  ADJ_TEST_CHECK(t, same, "%s: read %d entries back, wrote %d, or they differ", path, read.n, written.n);
  int got[5] = {adj_algorithm_table_choose(&read, 2, 100), adj_algorithm_table_choose(&read, 2, 65536),
                adj_algorithm_table_choose(&read, 3, 10), adj_algorithm_table_choose(&read, 8, 1 << 30),
                adj_algorithm_table_choose(&read, 5, 100)};
  int want[5] = {1, 2, 4, 3, 0};
  for (int i = 0; i < 5; i++)
    ADJ_TEST_CHECK(t, got[i] == want[i], "lookup %d chose '%s', expected '%s'", i, adj_sum_algorithm_names[got[i]],
                   adj_sum_algorithm_names[want[i]]);
  adj_test_report(t, "round trip of %d entries through %s; lookups %s %s %s %s %s", read.n, path,
                  adj_sum_algorithm_names[got[0]], adj_sum_algorithm_names[got[1]], adj_sum_algorithm_names[got[2]],
                  adj_sum_algorithm_names[got[3]], adj_sum_algorithm_names[got[4]]);
}

/* A sum-reduce of `count` float64 over the world onto rank 0: its algorithm,
 * and the sum of ones (the world size) checked on the root. */
static void sum_reduce_algorithm(adj_test *t, int64_t count, char *algorithm, size_t size) {
  sum_to_root w;
  sum_to_root_create(t, count, &w);
  adj_op *op = w.op;
  if (!op) {
    sum_to_root_destroy(&w);
    return;
  }
  snprintf(algorithm, size, "%s", adj_op_algorithm(op));
  adj_tensor in, out;
  adj_op_create_domain_tensor(op, &in);
  adj_op_create_range_tensor(op, &out);
  for (int64_t i = 0; i < count; i++) ((double *)in.data)[i] = 1.0;
  ADJ_TEST_OK(t, adj_op_forward(op, &in, &out));
  if (t->rank == 0)
    ADJ_TEST_CHECK(t, ((double *)out.data)[count - 1] == t->size, "sum by '%s': %g, expected %d", algorithm,
                   ((double *)out.data)[count - 1], t->size);
  adj_tensor_destroy(&in), adj_tensor_destroy(&out);
  sum_to_root_destroy(&w);
}

/* Rank 0's table says chain for this world size; every other rank points at a
 * file that does not exist, and must still sum by the chain (and copy by
 * MPI_Ibcast: the table times only the summing direction). */
static void check_every_rank_agrees(adj_test *t) {
  if (t->size < 2) return;
  char path[512], text[64], algorithm[64];
  table_path(t, "chain", path, sizeof path);
  snprintf(text, sizeof text, "sum %d 0 chain\n", t->size);
  write_text(t, path, text);
  ADJ_TEST_OK(t, adj_algorithm_table_set_path(t->rank == 0 ? path : "/nonexistent/adjoin-t214"));
  sum_reduce_algorithm(t, 10, algorithm, sizeof algorithm);
  int chain = strstr(algorithm, "sum chain") != NULL, all = 0;
  MPI_Allreduce(&chain, &all, 1, MPI_INT, MPI_SUM, t->comm);
  ADJ_TEST_CHECK(t, all == t->size, "rank 0's table says chain; %d of %d ranks chose it (this one '%s')", all,
                 t->size, algorithm);
  ADJ_TEST_CHECK(t, strstr(algorithm, "bcast,") == algorithm, "a measured chain also copies: '%s'", algorithm);
  adj_test_report(t, "table 'sum %d 0 chain' on rank 0 only: %d of %d ranks chose '%s'", t->size, all, t->size,
                  algorithm);
}

/* A malformed file: reading it names the file and line; loading ignores it
 * (a warning on stderr) and the fixed rule, reduce below 64 KB, decides. */
static void check_corrupt(adj_test *t) {
  char path[512], needle[600], algorithm[64];
  table_path(t, "corrupt", path, sizeof path);
  write_text(t, path, "sum 2 0 reduce\nsum two 65536 ring\n");
  adj_algorithm_table table;
  snprintf(needle, sizeof needle, "%s:2: 'sum two 65536 ring' is not", path);
  if (t->rank == 0) {
    int status = adj_algorithm_table_read(path, &table);
    ADJ_TEST_CHECK(t, status == ADJ_ERR_IO && strstr(adj_last_error(), needle), "reading %s: status %d, '%s'", path,
                   status, adj_last_error());
  }
  ADJ_TEST_OK(t, adj_algorithm_table_set_path(path));
  ADJ_TEST_OK(t, adj_algorithm_table_load(t->comm, &table));
  ADJ_TEST_CHECK(t, table.n == 0, "a corrupt table loaded %d entries", table.n);
  sum_reduce_algorithm(t, 10, algorithm, sizeof algorithm);
  if (t->size > 1) ADJ_TEST_CHECK(t, strstr(algorithm, "sum reduce") != NULL, "corrupt table: chose '%s'", algorithm);
  adj_test_report(t, "corrupt table ignored: %d entries, sum-reduce chose '%s'", table.n, algorithm);
}

/* Without a table (the cache names a file that does not exist) the fixed
 * rule decides by the block's bytes: reduce below 64 KB, allreduce from
 * 64 KB, reduce-scatter from 1 MB. */
static void check_fixed_rule(adj_test *t) {
  if (t->size < 2) return;
  char path[512], algorithm[64];
  table_path(t, "missing", path, sizeof path);
  ADJ_TEST_OK(t, adj_algorithm_table_set_path(path));
  const int64_t counts[] = {10, 8191, 8192, 131071, 131072};
  const char *const want[] = {"reduce", "reduce", "allreduce", "allreduce", "reduce-scatter"};
  for (int i = 0; i < 5; i++) {
    sum_reduce_algorithm(t, counts[i], algorithm, sizeof algorithm);
    const char *sum = strstr(algorithm, "sum ");
    ADJ_TEST_CHECK(t, sum && !strcmp(sum + 4, want[i]), "no table, %lld float64: chose '%s', expected 'sum %s'",
                   (long long)counts[i], algorithm, want[i]);
    adj_test_report(t, "no table, %lld float64 (%lld bytes): '%s'", (long long)counts[i], (long long)counts[i] * 8,
                    algorithm);
  }
}

/* A table that is a FIFO with no writer, or a device, is refused at once
 * (rank 0 would otherwise wait for a writer while the others wait for it),
 * and a writer onto a FIFO or /dev/full is refused before it writes. */
static void check_special_files(adj_test *t) {
  char path[512];
  table_path(t, "fifo", path, sizeof path);
  if (t->rank == 0) {
    adj_algorithm_table empty = {0}, table;
    ADJ_TEST_OK(t, adj_algorithm_table_write(path, &empty)); /* creates the directory */
    remove(path);
    ADJ_TEST_CHECK(t, mkfifo(path, 0600) == 0, "mkfifo %s", path);
    int status = adj_algorithm_table_read(path, &table);
    ADJ_TEST_CHECK(t, status == ADJ_ERR_IO && strstr(adj_last_error(), "is a FIFO, not a regular file"),
                   "reading a FIFO: status %d, '%s'", status, adj_last_error());
    status = adj_algorithm_table_read("/dev/zero", &table);
    ADJ_TEST_CHECK(t, status == ADJ_ERR_IO && strstr(adj_last_error(), "is a character device"),
                   "reading /dev/zero: status %d, '%s'", status, adj_last_error());
    status = adj_algorithm_table_write(path, &empty);
    ADJ_TEST_CHECK(t, status == ADJ_ERR_IO && strstr(adj_last_error(), "exists and is a FIFO"),
                   "writing onto a FIFO: status %d, '%s'", status, adj_last_error());
    status = adj_algorithm_table_write("/dev/full", &empty);
    ADJ_TEST_CHECK(t, status == ADJ_ERR_IO && strstr(adj_last_error(), "/dev/full"),
                   "writing onto /dev/full: status %d, '%s'", status, adj_last_error());
  }
  MPI_Barrier(t->comm);
  setenv("ADJ_ALGORITHM_CACHE", path, 1);
  adj_algorithm_table table;
  ADJ_TEST_OK(t, adj_algorithm_table_load(t->comm, &table));
  ADJ_TEST_CHECK(t, table.n == 0, "a FIFO as the table loaded %d entries", table.n);
  adj_test_report(t, "a FIFO as the table: ignored at once, %d entries", table.n);
}

/* Removes this run's files and their directory. */
static void remove_files(adj_test *t) {
  MPI_Barrier(t->comm);
  char path[512];
  const char *names[] = {"round-trip", "chain", "corrupt", "fifo"};
  for (int i = 0; i < 4; i++) {
    table_path(t, names[i], path, sizeof path); /* collective */
    if (t->rank == 0) remove(path);
  }
  *strrchr(path, '/') = '\0';
  if (t->rank == 0) rmdir(path);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t214-algorithm-table");
  ADJ_TEST_OK(&t, adj_sum_algorithm_set_default(ADJ_SUM_AUTO));
  check_round_trip(&t);
  check_every_rank_agrees(&t);
  check_corrupt(&t);
  check_special_files(&t);
  check_fixed_rule(&t);
  remove_files(&t);
  return adj_test_finish(&t);
}
