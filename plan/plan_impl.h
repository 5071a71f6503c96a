/* Private to plan/: what the calibrations of plan.c and machine.c share. */
#ifndef ADJOIN_PLAN_PLAN_IMPL_H
#define ADJOIN_PLAN_PLAN_IMPL_H

#include <stddef.h>

/* A calibration sweep's sizes: 8 B << 0 .. 19, 8 B to 4 MiB. */
enum { ADJ_PLAN_SIZES = 20 };

/* Least-squares line t = c0 + c1 m through the sweep's sizes 8 << i, over the
 * times' lower envelope from the right (t is changed in place). */
void adj_plan_fit_line(double *t, double *c0, double *c1);

/* Makes the directories above a file of the planner's cache (mkdir -p). */
void adj_plan_make_parent(const char *path);

/* Makes room for one more item in *items (count used of *capacity, each
 * `size` bytes), doubling from `first`; ADJ_ERR_MEM names `what`. */
int adj_plan_grow(void **items, int count, int *capacity, size_t size, int first, const char *what);

#endif
