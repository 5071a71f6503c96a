/* Private: the measured algorithm table of the summing primitives.
 *
 * A table maps (group size, block bytes) to the algorithm measured fastest on
 * this machine (bench-primitives --calibrate writes it).  It is a text file,
 * one entry a line, "sum <group size> <bytes> <algorithm name>", '#' starting
 * a comment, kept where adj_algorithm_table_set_path says (broadcast.h), else
 * at $ADJ_ALGORITHM_CACHE, else
 * $XDG_CACHE_HOME/adjoin/primitive-algorithms, else
 * $HOME/.cache/adjoin/primitive-algorithms.  An entry holds from its byte
 * count up to the next entry of the same group size; below the smallest it is
 * the smallest's. */
#ifndef ADJOIN_PRIMITIVES_ALGORITHM_TABLE_IMPL_H
#define ADJOIN_PRIMITIVES_ALGORITHM_TABLE_IMPL_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

enum { ADJ_ALGORITHM_TABLE_MAX = 64 };

typedef struct adj_algorithm_entry {
  int group;
  int64_t bytes;
  int algorithm; /* index into the caller's list of names */
} adj_algorithm_entry;

typedef struct adj_algorithm_table {
  int n;
  adj_algorithm_entry entries[ADJ_ALGORITHM_TABLE_MAX];
} adj_algorithm_table;

/* The algorithm names of the summing primitives, in adj_sum_algorithm order
 * (primitives/broadcast.c); index 0 is "auto". */
extern const char *const adj_sum_algorithm_names[];
enum { ADJ_SUM_ALGORITHM_COUNT = 5 };

/* The cache file's path; an empty path when no variable names a place. */
void adj_algorithm_table_path(char *path, size_t size);

/* Reads path.  A missing file is an empty table; a malformed one is
 * ADJ_ERR_IO naming the file, line and text, and one that is not a regular
 * file (a FIFO, a device, a directory) or holds more than
 * ADJ_ALGORITHM_TABLE_BYTES is refused at once (file.h). */
enum { ADJ_ALGORITHM_TABLE_BYTES = 1 << 16 };
int adj_algorithm_table_read(const char *path, adj_algorithm_table *table);
/* The same from text; `source` names it in messages. */
int adj_algorithm_table_parse(const char *text, const char *source, adj_algorithm_table *table);

/* Writes the table to path, creating the directory above it; a path that
 * is not a regular file, or a write that fails, is an error (file.h). */
int adj_algorithm_table_write(const char *path, const adj_algorithm_table *table);

/* Collective on comm: rank 0 reads the cache file and broadcasts the table,
 * so every rank chooses from the same one.  A malformed file is ignored with
 * a warning on rank 0's stderr (the table is then empty). */
int adj_algorithm_table_load(MPI_Comm comm, adj_algorithm_table *table);

/* The algorithm for a group of `group` members summing `bytes`, or 0 (auto)
 * when the table has no entry for that group size. */
int adj_algorithm_table_choose(const adj_algorithm_table *table, int group, int64_t bytes);

/* Replaces the entries of one group size by `entry` (n of them). */
int adj_algorithm_table_set_group(adj_algorithm_table *table, int group, int n, const adj_algorithm_entry *entry);

#endif
