/* Chrome trace-event timelines across ranks (see include/adjoin/trace.h). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adjoin/agree.h"
#include "adjoin/trace.h"
#include "adjoin/wait.h"
#include "error_impl.h"

enum { CLOCK_ROUNDS = 8, TRACE_MAX_TRACKS = ADJ_TRACE_BUCKET + 4096 };

typedef struct trace_event {
  double time;      /* seconds on rank 0's clock since the trace began */
  int64_t arg;
  int track;
  char phase;       /* 'B' or 'E' */
  char name[ADJ_TRACE_NAME_MAX + 1];
} trace_event;

struct adj_trace {
  MPI_Comm comm;
  int rank, size;
  adj_wait_policy wait;
  char *path;         /* rank 0 */
  double offset;      /* rank 0's clock minus this rank's */
  double origin;      /* rank 0's clock at create */
  trace_event *events;
  int64_t count, capacity, dropped;
  /* Spans may come from a progress thread too (the reducer's buckets,
   * ADJ_PROGRESS=thread). */
  pthread_mutex_t lock;
};

/* ---- clocks -------------------------------------------------------------------------------- */

/* One round trip between rank 0 and `peer`: the peer sends its time, rank 0
 * answers with its own, the peer keeps the offset of the shortest trip. */
static int trace_clock_round(adj_trace *t, int peer, double *best_rtt) {
  double sent, reply = 0;
  MPI_Request request;
  if (t->rank == 0) {
    ADJ_CALL_MPI(MPI_Irecv(&sent, 1, MPI_DOUBLE, peer, 0, t->comm, &request));
    ADJ_CALL(adj_wait_all(1, &request, t->wait));
    reply = MPI_Wtime();
    ADJ_CALL_MPI(MPI_Isend(&reply, 1, MPI_DOUBLE, peer, 1, t->comm, &request));
    return adj_wait_all(1, &request, t->wait);
  }
  sent = MPI_Wtime();
  ADJ_CALL_MPI(MPI_Isend(&sent, 1, MPI_DOUBLE, 0, 0, t->comm, &request));
  ADJ_CALL(adj_wait_all(1, &request, t->wait));
  ADJ_CALL_MPI(MPI_Irecv(&reply, 1, MPI_DOUBLE, 0, 1, t->comm, &request));
  ADJ_CALL(adj_wait_all(1, &request, t->wait));
  double back = MPI_Wtime(), rtt = back - sent;
  if (rtt < *best_rtt) {
    *best_rtt = rtt;
    t->offset = reply - 0.5 * (sent + back);
  }
  return ADJ_SUCCESS;
}

/* Every rank's offset to rank 0's clock, then rank 0's present time as the
 * common origin. */
static int trace_align_clocks(adj_trace *t) {
  double best = 1e30;
  for (int peer = 1; peer < t->size; peer++)
    for (int round = 0; round < CLOCK_ROUNDS; round++)
      if (t->rank == 0 || t->rank == peer) ADJ_CALL(trace_clock_round(t, peer, &best));
  t->origin = MPI_Wtime();
  MPI_Request request;
  ADJ_CALL_MPI(MPI_Ibcast(&t->origin, 1, MPI_DOUBLE, 0, t->comm, &request));
  return adj_wait_all(1, &request, t->wait);
}

/* ---- create / destroy ---------------------------------------------------------------------- */

int adj_trace_create(MPI_Comm comm, const char *path, adj_trace **trace) {
  ADJ_CHECK(trace, ADJ_ERR_ARG, "trace: output pointer is NULL");
  *trace = NULL;
  adj_trace *t = calloc(1, sizeof *t);
  ADJ_CHECK(t, ADJ_ERR_MEM, "trace: out of memory");
  if (pthread_mutex_init(&t->lock, NULL) != 0) {
    free(t);
    return adj_error_set(ADJ_ERR_MEM, "trace: cannot make a mutex");
  }
  t->comm = MPI_COMM_NULL;
  int status = adj_comm_dup_with_policy(comm, &t->comm, &t->wait);
  if (status) {
    pthread_mutex_destroy(&t->lock);
    free(t);
    return status;
  }
  MPI_Comm_rank(t->comm, &t->rank);
  MPI_Comm_size(t->comm, &t->size);
  if (t->rank == 0) {
    if (!path || !*path) status = adj_error_set(ADJ_ERR_ARG, "trace: no file named to write the trace to");
    else if (!(t->path = strdup(path))) status = adj_error_set(ADJ_ERR_MEM, "trace: out of memory");
  }
  status = adj_status_agree(t->comm, status, t->wait);
  if (!status) status = adj_status_agree(t->comm, trace_align_clocks(t), t->wait);
  if (status) {
    adj_trace_destroy(&t);
    return status;
  }
  *trace = t;
  return ADJ_SUCCESS;
}

void adj_trace_destroy(adj_trace **trace) {
  if (!trace || !*trace) return;
  adj_trace *t = *trace;
  *trace = NULL;
  if (t->comm != MPI_COMM_NULL) MPI_Comm_free(&t->comm);
  free(t->events);
  free(t->path);
  pthread_mutex_destroy(&t->lock);
  free(t);
}

/* ---- recording ----------------------------------------------------------------------------- */

static void trace_append(adj_trace *t, char phase, int track, const char *name, int64_t arg) {
  if (track < 0 || track >= TRACE_MAX_TRACKS) {
    t->dropped++;
    return;
  }
  if (t->count == t->capacity) {
    int64_t capacity = t->capacity ? 2 * t->capacity : 1024;
    trace_event *grown = realloc(t->events, (size_t)capacity * sizeof *grown);
    if (!grown) {
      t->dropped++;
      return;
    }
    t->events = grown, t->capacity = capacity;
  }
  trace_event *e = &t->events[t->count++];
  e->time = MPI_Wtime() + t->offset - t->origin;
  e->arg = arg;
  e->track = track;
  e->phase = phase;
  snprintf(e->name, sizeof e->name, "%s", name ? name : "");
}

static void trace_record(adj_trace *t, char phase, int track, const char *name, int64_t arg) {
  if (!t) return;
  pthread_mutex_lock(&t->lock);
  trace_append(t, phase, track, name, arg);
  pthread_mutex_unlock(&t->lock);
}

void adj_trace_begin(adj_trace *t, int track, const char *name, int64_t arg) {
  trace_record(t, 'B', track, name, arg);
}

void adj_trace_end(adj_trace *t, int track) { trace_record(t, 'E', track, "", 0); }

int64_t adj_trace_events(const adj_trace *t) { return t ? t->count : 0; }
int64_t adj_trace_dropped(const adj_trace *t) { return t ? t->dropped : 0; }

/* ---- writing ------------------------------------------------------------------------------- */

static const char *trace_track_name(int track, char *buffer, size_t size) {
  if (track == ADJ_TRACE_COMPUTE) return "compute";
  if (track == ADJ_TRACE_REDUCER) return "reducer wait";
  if (track >= ADJ_TRACE_BUCKET) snprintf(buffer, size, "bucket %d", track - ADJ_TRACE_BUCKET);
  else snprintf(buffer, size, "track %d", track);
  return buffer;
}

/* Names are the library's own (layer kinds, fixed words); quotes and
 * backslashes are replaced so a name can never break the JSON. */
static void trace_clean_name(const char *name, char *out, size_t size) {
  size_t i = 0;
  for (; name[i] && i + 1 < size; i++) out[i] = name[i] == '"' || name[i] == '\\' || (unsigned char)name[i] < 32 ? '_' : name[i];
  out[i] = '\0';
}

/* This rank's part of the file: its process and track names, then its spans,
 * each line ending in ",\n". */
static int trace_format(const adj_trace *t, char **text, int *length) {
  size_t room = 512 + (size_t)t->count * (ADJ_TRACE_NAME_MAX + 128), used = 0;
  char *out = malloc(room), host[64] = "?";
  ADJ_CHECK(out, ADJ_ERR_MEM, "trace: cannot format %lld spans", (long long)t->count);
  gethostname(host, sizeof host - 1);
  used += (size_t)snprintf(out + used, room - used,
                           "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"rank %d on %s\"}},\n"
                           "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"sort_index\":%d}},\n",
                           t->rank, t->rank, host, t->rank, t->rank);
  bool named[TRACE_MAX_TRACKS] = {false};
  for (int64_t i = 0; i < t->count; i++) {
    const trace_event *e = &t->events[i];
    char buffer[32], name[ADJ_TRACE_NAME_MAX + 1];
    if (!named[e->track]) {
      named[e->track] = true;
      used += (size_t)snprintf(out + used, room - used,
                               "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%s\"}},\n",
                               t->rank, e->track, trace_track_name(e->track, buffer, sizeof buffer));
    }
    if (e->phase == 'B') {
      trace_clean_name(e->name, name, sizeof name);
      used += (size_t)snprintf(out + used, room - used,
                               "{\"name\":\"%s\",\"ph\":\"B\",\"ts\":%.3f,\"pid\":%d,\"tid\":%d,\"args\":{\"arg\":%lld}},\n",
                               name, 1e6 * e->time, t->rank, e->track, (long long)e->arg);
    } else {
      used += (size_t)snprintf(out + used, room - used, "{\"ph\":\"E\",\"ts\":%.3f,\"pid\":%d,\"tid\":%d},\n",
                               1e6 * e->time, t->rank, e->track);
    }
  }
  ADJ_CHECK(used < (size_t)0x7fffffff, ADJ_ERR_SIZE, "trace: %zu bytes of spans on one rank exceed one message", used);
  *text = out;
  *length = (int)used;
  return ADJ_SUCCESS;
}

/* Rank 0 writes the gathered parts between the file's head and tail; the
 * last part's ",\n" is closed by a final metadata event. */
static int trace_save(const adj_trace *t, const char *all, int64_t length) {
  FILE *file = fopen(t->path, "w");
  ADJ_CHECK(file, ADJ_ERR_IO, "trace: cannot write '%s'", t->path);
  int failed = fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", file) < 0 ||
               fwrite(all, 1, (size_t)length, file) != (size_t)length ||
               fprintf(file, "{\"name\":\"trace_ranks\",\"ph\":\"M\",\"pid\":0,\"args\":{\"ranks\":%d}}\n]}\n",
                       t->size) < 0;
  failed |= fclose(file) != 0;
  ADJ_CHECK(!failed, ADJ_ERR_IO, "trace: writing '%s' failed (disk full?)", t->path);
  return ADJ_SUCCESS;
}

/* Gathers every rank's part on rank 0 (lengths, then the bytes). */
static int trace_gather(const adj_trace *t, const char *mine, int length, char **all, int64_t *total) {
  int *lengths = t->rank == 0 ? calloc((size_t)t->size, sizeof *lengths) : NULL;
  int *displs = t->rank == 0 ? calloc((size_t)t->size, sizeof *displs) : NULL;
  int status = t->rank != 0 || (lengths && displs) ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "trace: out of memory");
  MPI_Request request;
  if (!status && MPI_Igather(&length, 1, MPI_INT, lengths, 1, MPI_INT, 0, t->comm, &request) != MPI_SUCCESS)
    status = adj_error_set(ADJ_ERR_MPI, "trace: gathering the parts' lengths failed");
  else if (!status) status = adj_wait_all(1, &request, t->wait);
  *total = 0;
  for (int r = 0; !status && t->rank == 0 && r < t->size; r++) displs[r] = (int)*total, *total += lengths[r];
  if (!status && *total > 0x7fffffff) status = adj_error_set(ADJ_ERR_SIZE, "trace: %lld bytes exceed one gather", (long long)*total);
  if (!status && t->rank == 0 && !(*all = malloc((size_t)*total + 1))) status = adj_error_set(ADJ_ERR_MEM, "trace: out of memory");
  status = adj_status_agree(t->comm, status, t->wait);
  if (!status && MPI_Igatherv(mine, length, MPI_CHAR, *all, lengths, displs, MPI_CHAR, 0, t->comm, &request) != MPI_SUCCESS)
    status = adj_error_set(ADJ_ERR_MPI, "trace: gathering the spans failed");
  else if (!status) status = adj_wait_all(1, &request, t->wait);
  free(lengths);
  free(displs);
  return status;
}

int adj_trace_write(adj_trace *t) {
  ADJ_CHECK(t, ADJ_ERR_ARG, "trace: trace is NULL");
  char *mine = NULL, *all = NULL;
  int length = 0;
  int64_t total = 0;
  int status = t->dropped ? adj_error_set(ADJ_ERR_MEM, "trace: %lld spans of rank %d could not be recorded",
                                          (long long)t->dropped, t->rank)
                          : trace_format(t, &mine, &length);
  status = adj_status_agree(t->comm, status, t->wait);
  if (!status) status = trace_gather(t, mine, length, &all, &total);
  if (!status && t->rank == 0) status = trace_save(t, all, total);
  free(mine);
  free(all);
  return adj_status_agree(t->comm, status, t->wait);
}
