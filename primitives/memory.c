/* Memory primitives (DistDL paper section 2, appendix A) as local operators.
 *
 * The out-of-place forms are written on flat vectors exactly as the paper's
 * block matrices; each forward sits next to its adjoint in one switch so the
 * pair can be read against the matrices.  The in-place forms act on two boxes
 * of one tensor. */
#include <stdlib.h>
#include <string.h>

#include "adjoin/memory.h"
#include "op_impl.h"

typedef enum adj_memory_op_kind {
  ADJ_MEM_ALLOCATE,   /* [x_a] -> [x_a; 0_b] */
  ADJ_MEM_DEALLOCATE, /* [x_a; x_b] -> [x_a] */
  ADJ_MEM_COPY,       /* x -> [x; x] */
  ADJ_MEM_MOVE,       /* x -> x in new memory */
  ADJ_MEM_IN_PLACE    /* clear / add / copy / move between boxes */
} adj_memory_op_kind;

typedef struct adj_memory {
  adj_memory_op_kind kind;
  int64_t m, n;              /* flat sizes of the out-of-place forms */
  adj_memory_kind in_place;  /* for ADJ_MEM_IN_PLACE */
  adj_box a, b;
} adj_memory;

static size_t adj_elem(const adj_tensor *t) { return adj_dtype_size(t->dtype); }

/* First `count` elements of src into dst at element offset `at`: dst[at..] = src. */
static void adj_put(adj_tensor *dst, int64_t at, const adj_tensor *src, int64_t from, int64_t count) {
  memmove((char *)dst->data + at * (int64_t)adj_elem(dst), (const char *)src->data + from * (int64_t)adj_elem(src),
          (size_t)count * adj_elem(src));
}

static void adj_add_into(adj_tensor *dst, const adj_tensor *src, int64_t from, int64_t count) {
  adj_box d = {.rank = 1, .start = {0}, .extent = {count}};
  adj_box s = {.rank = 1, .start = {from}, .extent = {count}};
  adj_tensor_copy_box(dst, &d, src, &s, ADJ_UNPACK_ADD);
}

static int adj_memory_flat(const adj_memory *mem, adj_direction dir, const adj_tensor *in, adj_tensor *out) {
  int64_t m = mem->m, n = mem->n;
  bool fwd = dir == ADJ_FORWARD;
  switch (mem->kind) {
  case ADJ_MEM_ALLOCATE:   /* A = [I; O], A* = [I O] = D */
  case ADJ_MEM_DEALLOCATE: /* D = [I O], D* = [I; O] = A */
    if (fwd == (mem->kind == ADJ_MEM_ALLOCATE)) {
      adj_put(out, 0, in, 0, m);
      memset((char *)out->data + m * (int64_t)adj_elem(out), 0, (size_t)n * adj_elem(out));
    } else {
      adj_put(out, 0, in, 0, m);
    }
    return ADJ_SUCCESS;
  case ADJ_MEM_COPY: /* C = S A_b = [I; I], C* = D_b S_(b->a) = [I I] */
    if (fwd) {
      adj_put(out, 0, in, 0, m);
      adj_put(out, m, in, 0, m);
    } else {
      adj_put(out, 0, in, 0, m);
      adj_add_into(out, in, m, m);
    }
    return ADJ_SUCCESS;
  case ADJ_MEM_MOVE: /* M = D_a S A_b = I into new memory; M* moves back */
    adj_put(out, 0, in, 0, m);
    return ADJ_SUCCESS;
  case ADJ_MEM_IN_PLACE:
    break;
  }
  return adj_error_set(ADJ_ERR_STATE, "memory primitive: unexpected kind %d", (int)mem->kind);
}

/* In place on boxes a and b of x (in == out). */
static void adj_memory_boxes(const adj_memory *mem, adj_direction dir, adj_tensor *x) {
  bool fwd = dir == ADJ_FORWARD;
  const adj_box *a = &mem->a, *b = &mem->b;
  switch (mem->in_place) {
  case ADJ_MEMORY_CLEAR: /* K_b = K_b* */
    adj_tensor_clear_box(x, b);
    break;
  case ADJ_MEMORY_ADD: /* S_(a->b), S* = S_(b->a) */
    if (fwd) adj_tensor_copy_box(x, b, x, a, ADJ_UNPACK_ADD);
    else adj_tensor_copy_box(x, a, x, b, ADJ_UNPACK_ADD);
    break;
  case ADJ_MEMORY_COPY: /* C = S_(a->b) K_b, C* = K_b S_(b->a) */
    if (fwd) {
      adj_tensor_copy_box(x, b, x, a, ADJ_UNPACK_COPY);
    } else {
      adj_tensor_copy_box(x, a, x, b, ADJ_UNPACK_ADD);
      adj_tensor_clear_box(x, b);
    }
    break;
  case ADJ_MEMORY_MOVE: /* M = K_a S_(a->b) K_b, M* = K_b S_(b->a) K_a */
    if (fwd) {
      adj_tensor_copy_box(x, b, x, a, ADJ_UNPACK_COPY);
      adj_tensor_clear_box(x, a);
    } else {
      adj_tensor_copy_box(x, a, x, b, ADJ_UNPACK_COPY);
      adj_tensor_clear_box(x, b);
    }
    break;
  }
}

static int adj_memory_begin(adj_op *op, adj_direction dir, const adj_tensor *in, adj_tensor *out) {
  const adj_memory *mem = op->impl;
  if (mem->kind != ADJ_MEM_IN_PLACE) return adj_memory_flat(mem, dir, in, out);
  adj_memory_boxes(mem, dir, out);
  return ADJ_SUCCESS;
}

static void adj_memory_destroy(adj_op *op) { free(op->impl); }

static const adj_op_methods adj_memory_methods = {adj_memory_begin, NULL, adj_memory_destroy};

static int adj_memory_make(const char *name, adj_dtype dtype, const adj_memory *mem, int domain_rank,
                           const int64_t *domain, int range_rank, const int64_t *range, adj_op **op) {
  ADJ_CHECK(op, ADJ_ERR_ARG, "%s: output operator pointer is NULL", name);
  *op = NULL;
  ADJ_CHECK(adj_dtype_valid(dtype), ADJ_ERR_DTYPE, "%s: invalid dtype %d", name, (int)dtype);
  adj_memory *impl = malloc(sizeof *impl);
  ADJ_CHECK(impl, ADJ_ERR_MEM, "%s: out of memory", name);
  *impl = *mem;
  int status = adj_op_alloc(name, MPI_COMM_SELF, dtype, domain_rank, domain, range_rank, range,
                            &adj_memory_methods, impl, op);
  if (status) {
    free(impl);
    return status;
  }
  (*op)->in_place = mem->kind == ADJ_MEM_IN_PLACE;
  return ADJ_SUCCESS;
}

static int adj_check_sizes(const char *name, int64_t m, int64_t n) {
  ADJ_CHECK(m >= 0 && n >= 0, ADJ_ERR_ARG, "%s: sizes m=%lld and n=%lld must not be negative", name, (long long)m,
            (long long)n);
  return ADJ_SUCCESS;
}

int adj_allocate_create(adj_dtype dtype, int64_t m, int64_t n, adj_op **op) {
  ADJ_CALL(adj_check_sizes("allocate", m, n));
  int64_t domain = m, range = m + n;
  return adj_memory_make("allocate", dtype, &(adj_memory){.kind = ADJ_MEM_ALLOCATE, .m = m, .n = n}, 1, &domain, 1,
                         &range, op);
}

int adj_deallocate_create(adj_dtype dtype, int64_t m, int64_t n, adj_op **op) {
  ADJ_CALL(adj_check_sizes("deallocate", m, n));
  int64_t domain = m + n, range = m;
  return adj_memory_make("deallocate", dtype, &(adj_memory){.kind = ADJ_MEM_DEALLOCATE, .m = m, .n = n}, 1, &domain,
                         1, &range, op);
}

int adj_copy_create(adj_dtype dtype, int64_t m, adj_op **op) {
  ADJ_CALL(adj_check_sizes("copy", m, 0));
  int64_t domain = m, range = 2 * m;
  return adj_memory_make("copy", dtype, &(adj_memory){.kind = ADJ_MEM_COPY, .m = m}, 1, &domain, 1, &range, op);
}

int adj_move_create(adj_dtype dtype, int64_t m, adj_op **op) {
  ADJ_CALL(adj_check_sizes("move", m, 0));
  return adj_memory_make("move", dtype, &(adj_memory){.kind = ADJ_MEM_MOVE, .m = m}, 1, &m, 1, &m, op);
}

static int adj_boxes_overlap(const adj_box *a, const adj_box *b) {
  adj_box i = adj_box_intersect(a, b);
  return adj_box_volume(&i) > 0;
}

int adj_memory_in_place_create(adj_dtype dtype, adj_memory_kind kind, int rank, const int64_t *shape,
                               const adj_box *a, const adj_box *b, adj_op **op) {
  static const char *const names[] = {"clear", "add", "copy (in place)", "move (in place)"};
  ADJ_CHECK(kind >= ADJ_MEMORY_CLEAR && kind <= ADJ_MEMORY_MOVE, ADJ_ERR_ARG, "memory primitive: unknown kind %d",
            (int)kind);
  const char *name = names[kind];
  ADJ_CHECK(b && adj_box_inside(b, rank, shape), ADJ_ERR_ARG, "%s: box b does not lie inside the tensor", name);
  adj_memory mem = {.kind = ADJ_MEM_IN_PLACE, .in_place = kind, .b = *b};
  if (kind != ADJ_MEMORY_CLEAR) {
    ADJ_CHECK(a && adj_box_inside(a, rank, shape), ADJ_ERR_ARG, "%s: box a does not lie inside the tensor", name);
    for (int i = 0; i < rank; i++)
      ADJ_CHECK(a->extent[i] == b->extent[i], ADJ_ERR_SIZE,
                "%s: boxes differ in dimension %d (extent %lld in a, %lld in b)", name, i, (long long)a->extent[i],
                (long long)b->extent[i]);
    ADJ_CHECK(!adj_boxes_overlap(a, b), ADJ_ERR_ARG, "%s: boxes a and b overlap", name);
    mem.a = *a;
  }
  return adj_memory_make(name, dtype, &mem, rank, shape, rank, shape, op);
}
