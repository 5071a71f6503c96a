/* adjoin-plan --net: the per-layer planner over a network description
 * (plan_net.c); adjoin_plan.c hands the command line over when it names
 * --net. */
#ifndef ADJOIN_APPS_PLAN_NET_H
#define ADJOIN_APPS_PLAN_NET_H

#include <stdbool.h>

#define PLAN_NET_USAGE \
    "       mpiexec -n P adjoin-plan --net FILE --batch B [--memory BYTES] [--keep K] [--no-replicas]\n" \
    "                   [--dtype float32|float64] [--optimizer adam|sgd] [--family all|integrated]\n" \
    "                   [--exhaustive] [--write FILE] [--write-dir DIR] [--predict PLACEMENT] [--uniform]\n" \
    "       adjoin-plan --net FILE --machine MACHINE_FILE (--procs P | --sweep P0:P1) --batch B [...]\n"

/* Whether the command line names --net. */
bool plan_net_requested(int argc, char **argv);
/* The whole run of that mode; the exit status. */
int plan_net_main(int argc, char **argv);

#endif
