/* adjoin-train's network and placement (train_select.h). */
#include "train_select.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tool_output.h"

/* The shipped network files: in the source tree when it is there (a build
 * run in place), else where `ninja install` put them. */
const char *train_model_file(const char *model) {
  static const char *const models[][2] = {{"lenet", "lenet5.net"}, {"mlp", "shallowspeed.net"}, {"encdec", "encdec.net"}};
  static char path[1024];
  for (int i = 0; model && i < 3; i++) {
    if (strcmp(model, models[i][0])) continue;
    snprintf(path, sizeof path, "%s/%s", ADJ_NETWORKS_SOURCE_DIR, models[i][1]);
    if (access(path, R_OK)) snprintf(path, sizeof path, "%s/%s", ADJ_NETWORKS_INSTALL_DIR, models[i][1]);
    return path;
  }
  return NULL;
}

/* The placement names a network file has beside it, for messages (rank 0). */
static const char *select_choices(const char *net_path) {
  static char list[512], names[400];
  adj_placement_names(net_path, ", ", names, sizeof names);
  snprintf(list, sizeof list, "%ssequential, dp, RxC, window=...,fc=...", names);
  return list;
}

/* The placement when the flags name none: the network's own, or for a
 * --model what adjoin-train has always chosen for the rank count
 * (sequential on one rank, else distN, 1xN or Nx1). */
static void select_default(const train_choice *c, int ranks, char *name, size_t size) {
  int replica_ranks = c->replicas && ranks % c->replicas == 0 ? ranks / (int)c->replicas : ranks;
  name[0] = '\0';
  if (!c->model) return;
  if (replica_ranks == 1) snprintf(name, size, "sequential");
  else if (!strcmp(c->model, "lenet")) snprintf(name, size, "dist%d", replica_ranks);
  else if (!strcmp(c->model, "mlp")) snprintf(name, size, "1x%d", replica_ranks);
  else snprintf(name, size, "%dx1", replica_ranks);
}

/* adjoin-train's names that mean something else than the placement of the
 * same name: dp (a sequential replica per rank); a grid RxC with C > 1 runs
 * as C replicas of Rx1 (the same split of batch and features, the weight
 * gradients summed by the bucketed reducer, overlapped with the backward);
 * the encoder-decoder's P0xP1 is a spatial grid.  0, or 2 with a message. */
static int select_translate(const train_choice *c, int ranks, train_complain_fn *complain, char *name, size_t size,
                            int *replicas) {
  int64_t grid[2];
  *replicas = (int)c->replicas;
  if (!strcmp(name, "dp")) {
    if (c->replicas && c->replicas != ranks) {
      complain("--layout dp makes one replica per rank (%d), not --replicas %lld\n", ranks, (long long)c->replicas);
      return 2;
    }
    *replicas = ranks;
    snprintf(name, size, "sequential");
  } else if (!adj_parse_int64_pair(name, 'x', 1, ADJ_PLACE_MAX_PARTS, "layout", grid)) {
    int rows = (int)grid[0], cols = (int)grid[1];
    if (c->model && !strcmp(c->model, "encdec")) snprintf(name, size, "window=1x1x%dx%d", rows, cols);
    else if (cols > 1) {
      snprintf(name, size, "%dx1", rows);
      *replicas = (*replicas ? *replicas : 1) * cols;
    }
  }
  adj_clear_error();
  return 0;
}

/* --placement auto: the planner's best plan for these ranks, with its
 * replicas and its prediction. */
static int select_planned(const train_choice *c, int ranks, train_complain_fn *complain, train_selection *s) {
  if (c->replicas || c->passes > 1) {
    complain("--placement auto chooses the replicas and plans one pass per step; give no --replicas and no "
             "--micro-batches\n");
    return 2;
  }
  adj_plan_search_options o = {.step = {.dtype = c->dtype, .batch = c->batch, .ranks = ranks,
                                        .optimizer = c->optimizer, .momentum = c->momentum},
                               .keep = 1, .replicas = true};
  adj_plan_list list;
  if (adj_plan_choose(s->description, MPI_COMM_WORLD, &o, &list)) {
    complain("planning %s: %s\n", s->net_path, tool_error());
    return 1;
  }
  if (!list.n) {
    complain("planning %s: no placement on %d ranks fits the machine's memory\n", s->net_path, ranks);
    return 1;
  }
  s->placement = list.plans[0].placement, list.plans[0].placement = NULL;
  s->prediction = list.plans[0].prediction, list.plans[0].prediction = (adj_step_prediction){0};
  s->replicas = s->prediction.replicas, s->planned = true;
  snprintf(s->placement_name, sizeof s->placement_name, "auto: %s", list.plans[0].summary);
  adj_plan_list_free(&list);
  return 0;
}

static int select_read(const train_choice *c, int ranks, train_complain_fn *complain, train_selection *s) {
  const char *path = c->net ? c->net : train_model_file(c->model);
  snprintf(s->net_path, sizeof s->net_path, "%s", path ? path : "");
  if (adj_description_read_all(MPI_COMM_WORLD, s->net_path, &s->description)) {
    complain("%s\n", tool_error());
    return 1;
  }
  if (c->placement && !strcmp(c->placement, "auto")) return select_planned(c, ranks, complain, s);
  char name[128];
  bool by_default = s->by_default = !c->placement;
  if (by_default) select_default(c, ranks, name, sizeof name);
  else snprintf(name, sizeof name, "%s", c->placement);
  snprintf(s->placement_name, sizeof s->placement_name, "%s", name[0] ? name : "own");
  int status = select_translate(c, ranks, complain, name, sizeof name, &s->replicas);
  if (status) return status;
  snprintf(s->translated, sizeof s->translated, "%s", name[0] ? name : "own");
  if (!adj_placement_find(MPI_COMM_WORLD, s->description, s->net_path, name, &s->placement)) return 0;
  if (by_default)
    complain("no default %s layout for %d ranks%s; give --layout (%s)\n", s->description->name, ranks,
             c->replicas > 1 ? " per replica" : "", select_choices(s->net_path));
  else complain("%s\nplacements of %s: %s\n", tool_error(), s->net_path, select_choices(s->net_path));
  return 2;
}

/* Replicas from the flags, else the placement's, else the description's. */
static int select_replicas(const train_selection *s) {
  if (s->replicas) return s->replicas;
  if (s->placement->replicas) return s->placement->replicas;
  return s->description->replicas ? s->description->replicas : 1;
}

int train_select(const train_choice *c, int ranks, train_complain_fn *complain, train_selection *s) {
  *s = (train_selection){0};
  int status = select_read(c, ranks, complain, s);
  if (status) return status;
  s->replicas = select_replicas(s);
  if (ranks % s->replicas) {
    char asked[96];
    if (c->replicas) snprintf(asked, sizeof asked, "--replicas %lld of", (long long)c->replicas);
    else snprintf(asked, sizeof asked, "%d replicas of", s->replicas);
    if (strcmp(s->translated, s->placement_name))
      complain("%d ranks do not divide into %s layout %s (%d replicas of %s: its columns run as replicas)\n", ranks,
               asked, s->placement_name, s->replicas, s->translated);
    else complain("%d ranks do not divide into %s layout %s\n", ranks, asked, s->placement_name);
    return 2;
  }
  /* Every pass of a step (a micro-batch on a replica) takes a share of the
   * batch: more passes than samples would leave passes empty. */
  int64_t passes_per_step;
  if (adj_int64_mul(s->replicas, c->passes, "replicas x micro-batches", &passes_per_step) || passes_per_step > c->batch) {
    complain("--micro-batches %lld on %d replica%s makes more passes per step than the %lld samples of --batch\n",
             (long long)c->passes, s->replicas, s->replicas == 1 ? "" : "s", (long long)c->batch);
    return 2;
  }
  int64_t passes = (int64_t)s->replicas * c->passes, local = (c->batch + passes - 1) / passes;
  adj_network_layout layout;
  if (adj_placement_resolve(s->description, s->placement, local, &layout)) {
    if (s->by_default)
      complain("no default %s layout for %d ranks; give --layout (%s)\n  (the default %s: %s)\n",
               s->description->name, ranks, select_choices(s->net_path), s->placement_name, adj_last_error());
    else complain("layout %s: %s\n", s->placement_name, tool_error());
    return 2;
  }
  s->ranks = layout.ranks;
  adj_network_layout_free(&layout);
  if (s->ranks > ranks / s->replicas) {
    complain("layout %s needs %d ranks per replica; run %d replicas with mpiexec.mpich -n %d\n", s->placement_name,
             s->ranks, s->replicas, s->ranks * s->replicas);
    return 2;
  }
  return 0;
}

void train_selection_free(train_selection *s) {
  adj_description_destroy(&s->description);
  adj_placement_destroy(&s->placement);
  adj_step_prediction_free(&s->prediction);
}
