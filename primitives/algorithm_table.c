/* The measured algorithm table (algorithm_table_impl.h): its file, its
 * agreement across ranks and the lookup. */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "adjoin/file.h"
#include "adjoin/parse.h"
#include "algorithm_table_impl.h"
#include "adjoin/broadcast.h"
#include "error_impl.h"
#include "setting_impl.h"

static adj_setting adj_algorithm_cache_setting = ADJ_SETTING_INIT("ADJ_ALGORITHM_CACHE");

int adj_algorithm_table_set_path(const char *path) {
  ADJ_CHECK(path, ADJ_ERR_ARG, "adj_algorithm_table_set_path: path is NULL (\"\" for the default place)");
  return adj_setting_set(&adj_algorithm_cache_setting, path);
}

int adj_algorithm_table_get_path(char *path, size_t size) {
  ADJ_CHECK(path && size > 0, ADJ_ERR_ARG, "adj_algorithm_table_get_path: no room for the path");
  adj_algorithm_table_path(path, size);
  return ADJ_SUCCESS;
}

void adj_algorithm_table_path(char *path, size_t size) {
  const char *explicit = adj_setting_text(&adj_algorithm_cache_setting), *xdg = getenv("XDG_CACHE_HOME"),
             *home = getenv("HOME");
  if (*explicit) snprintf(path, size, "%s", explicit);
  else if (xdg && *xdg) snprintf(path, size, "%s/adjoin/primitive-algorithms", xdg);
  else if (home && *home) snprintf(path, size, "%s/.cache/adjoin/primitive-algorithms", home);
  else path[0] = '\0';
}

static int adj_algorithm_index(const char *name) {
  for (int a = 1; a < ADJ_SUM_ALGORITHM_COUNT; a++)
    if (!strcmp(name, adj_sum_algorithm_names[a])) return a;
  return -1;
}

/* Whether `line` is an entry, "sum <group> <bytes> <name>", with each
 * number checked in the type it is stored in; fills *entry. */
static bool adj_algorithm_parse_entry(char *line, adj_algorithm_entry *entry) {
  char *save = NULL, *field[5] = {0};
  int n = 0;
  for (char *tok = strtok_r(line, " \t\r", &save); tok && n < 5; tok = strtok_r(NULL, " \t\r", &save)) field[n++] = tok;
  int64_t group, bytes;
  if (n != 4 || strcmp(field[0], "sum") || adj_parse_int64(field[1], 2, INT_MAX, "group", &group) ||
      adj_parse_int64(field[2], 0, INT64_MAX, "bytes", &bytes))
    return false;
  *entry = (adj_algorithm_entry){(int)group, bytes, adj_algorithm_index(field[3])};
  return entry->algorithm > 0;
}

/* One line: blank, a comment, or an entry appended to the table. */
static int adj_algorithm_parse_line(const char *path, int number, char *line, adj_algorithm_table *table) {
  line[strcspn(line, "#")] = '\0';
  if (line[strspn(line, " \t\r")] == '\0') return ADJ_SUCCESS;
  char shown[128];
  snprintf(shown, sizeof shown, "%s", line);
  adj_algorithm_entry entry;
  ADJ_CHECK(adj_algorithm_parse_entry(line, &entry), ADJ_ERR_IO,
            "%s:%d: '%s' is not 'sum <group size >= 2> <bytes> <reduce|allreduce|reduce-scatter|chain>'", path,
            number, shown);
  ADJ_CHECK(table->n < ADJ_ALGORITHM_TABLE_MAX, ADJ_ERR_IO, "%s:%d: more than %d entries", path, number,
            ADJ_ALGORITHM_TABLE_MAX);
  table->entries[table->n++] = entry;
  return ADJ_SUCCESS;
}

int adj_algorithm_table_parse(const char *text, const char *source, adj_algorithm_table *table) {
  table->n = 0;
  char *copy = strdup(text);
  ADJ_CHECK(copy, ADJ_ERR_MEM, "%s: out of memory", source);
  int status = ADJ_SUCCESS, number = 1;
  for (char *line = copy, *next; !status && line; line = next, number++) {
    next = strchr(line, '\n');
    if (next) *next++ = '\0';
    status = adj_algorithm_parse_line(source, number, line, table);
  }
  free(copy);
  if (status) table->n = 0;
  return status;
}

int adj_algorithm_table_read(const char *path, adj_algorithm_table *table) {
  table->n = 0;
  struct stat st;
  if (stat(path, &st) != 0 && errno == ENOENT) return ADJ_SUCCESS; /* not calibrated: the fixed rule */
  char *text;
  ADJ_CALL(adj_file_read_text(path, "algorithm table", ADJ_ALGORITHM_TABLE_BYTES, &text, NULL));
  int status = adj_algorithm_table_parse(text, path, table);
  free(text);
  ADJ_CALL(status);
  return ADJ_SUCCESS;
}

/* mkdir -p of the directory above path. */
static void adj_algorithm_make_parent(const char *path) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s", path);
  for (char *p = dir + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    mkdir(dir, 0755);
    *p = '/';
  }
}

int adj_algorithm_table_write(const char *path, const adj_algorithm_table *table) {
  ADJ_CHECK(path && *path, ADJ_ERR_ARG, "no path for the algorithm table: set ADJ_ALGORITHM_CACHE (adj_algorithm_table_set_path) or HOME");
  adj_algorithm_make_parent(path);
  FILE *file;
  ADJ_CALL(adj_file_open_output(path, "algorithm table", &file));
  fprintf(file, "# adjoin: fastest summing algorithm measured per group size and block bytes\n");
  for (int i = 0; i < table->n; i++)
    fprintf(file, "sum %d %lld %s\n", table->entries[i].group, (long long)table->entries[i].bytes,
            adj_sum_algorithm_names[table->entries[i].algorithm]);
  ADJ_CALL(adj_file_close_output(file, path, "algorithm table"));
  return ADJ_SUCCESS;
}

int adj_algorithm_table_load(MPI_Comm comm, adj_algorithm_table *table) {
  int rank;
  MPI_Comm_rank(comm, &rank);
  table->n = 0;
  if (rank == 0) {
    char path[1024];
    adj_algorithm_table_path(path, sizeof path);
    if (path[0] && adj_algorithm_table_read(path, table))
      fprintf(stderr, "adjoin: warning: ignoring the algorithm table (%s); using the fixed rule by block size\n",
              adj_last_error());
  }
  ADJ_CALL_MPI(MPI_Bcast(&table->n, 1, MPI_INT, 0, comm));
  if (table->n > 0)
    ADJ_CALL_MPI(MPI_Bcast(table->entries, (int)(sizeof table->entries[0]) * table->n, MPI_BYTE, 0, comm));
  return ADJ_SUCCESS;
}

int adj_algorithm_table_choose(const adj_algorithm_table *table, int group, int64_t bytes) {
  const adj_algorithm_entry *below = NULL, *smallest = NULL;
  for (int i = 0; i < table->n; i++) {
    const adj_algorithm_entry *e = &table->entries[i];
    if (e->group != group) continue;
    if (!smallest || e->bytes < smallest->bytes) smallest = e;
    if (e->bytes <= bytes && (!below || e->bytes > below->bytes)) below = e;
  }
  return below ? below->algorithm : smallest ? smallest->algorithm : 0;
}

int adj_algorithm_table_set_group(adj_algorithm_table *table, int group, int n, const adj_algorithm_entry *entry) {
  int kept = 0;
  for (int i = 0; i < table->n; i++)
    if (table->entries[i].group != group) table->entries[kept++] = table->entries[i];
  ADJ_CHECK(kept + n <= ADJ_ALGORITHM_TABLE_MAX, ADJ_ERR_ARG, "algorithm table: %d entries, more than %d", kept + n,
            ADJ_ALGORITHM_TABLE_MAX);
  memcpy(table->entries + kept, entry, sizeof *entry * (size_t)n);
  table->n = kept + n;
  return ADJ_SUCCESS;
}
