/* Every uniform placement of a network, visited (uniform_walk.h). */
#include "uniform_walk.h"

#include <stdio.h>

const char *const uniform_walk_networks[] = {"lenet5", "mlp", "encdec", NULL};

void uniform_walk_description(adj_test *t, const adj_description *d, int64_t batch, uniform_visit *visit) {
  adj_uniform_placement *list = NULL;
  int count = 0;
  ADJ_TEST_OK(t, adj_placement_enumerate(d, t->size, batch, &list, &count));
  for (int i = 0; i < count; i++) {
    adj_placement *p = NULL;
    char name[256];
    ADJ_TEST_OK(t, adj_placement_uniform(d, &list[i], &p));
    if (p) visit(t, d, p, adj_uniform_placement_format(&list[i], name, sizeof name));
    adj_placement_destroy(&p);
  }
  adj_uniform_placement_list_free(&list);
}

adj_description *uniform_walk(adj_test *t, const char *dir, const char *net, int64_t batch, uniform_visit *visit) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.net", dir, net);
  adj_description *d = NULL;
  ADJ_TEST_OK(t, adj_description_read(path, &d));
  if (d) uniform_walk_description(t, d, batch, visit);
  return d;
}
