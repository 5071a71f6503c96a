/* The measured algorithm table (algorithm_table_impl.h): its file, its
 * agreement across ranks and the lookup. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

/* One line: blank, a comment, or an entry appended to the table. */
static int adj_algorithm_parse_line(const char *path, int number, char *line, adj_algorithm_table *table) {
  line[strcspn(line, "#\n")] = '\0';
  char kind[16], name[32], extra;
  int group;
  long long bytes;
  int fields = sscanf(line, "%15s %d %lld %31s %c", kind, &group, &bytes, name, &extra);
  if (fields <= 0) return ADJ_SUCCESS;
  int algorithm = fields == 4 ? adj_algorithm_index(name) : -1;
  ADJ_CHECK(fields == 4 && !strcmp(kind, "sum") && group >= 2 && bytes >= 0 && algorithm > 0, ADJ_ERR_IO,
            "%s:%d: '%s' is not 'sum <group size >= 2> <bytes> <reduce|allreduce|reduce-scatter|chain>'", path,
            number, line);
  ADJ_CHECK(table->n < ADJ_ALGORITHM_TABLE_MAX, ADJ_ERR_IO, "%s:%d: more than %d entries", path, number,
            ADJ_ALGORITHM_TABLE_MAX);
  table->entries[table->n++] = (adj_algorithm_entry){group, bytes, algorithm};
  return ADJ_SUCCESS;
}

int adj_algorithm_table_read(const char *path, adj_algorithm_table *table) {
  table->n = 0;
  FILE *file = fopen(path, "r");
  if (!file) return ADJ_SUCCESS; /* not calibrated: the fixed rule */
  char line[256];
  int status = ADJ_SUCCESS;
  for (int number = 1; !status && fgets(line, sizeof line, file); number++)
    status = adj_algorithm_parse_line(path, number, line, table);
  fclose(file);
  if (status) table->n = 0;
  return status;
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
  FILE *file = fopen(path, "w");
  ADJ_CHECK(file, ADJ_ERR_IO, "cannot write the algorithm table %s: %s", path, strerror(errno));
  fprintf(file, "# adjoin: fastest summing algorithm measured per group size and block bytes\n");
  for (int i = 0; i < table->n; i++)
    fprintf(file, "sum %d %lld %s\n", table->entries[i].group, (long long)table->entries[i].bytes,
            adj_sum_algorithm_names[table->entries[i].algorithm]);
  ADJ_CHECK(fclose(file) == 0, ADJ_ERR_IO, "cannot write the algorithm table %s", path);
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
