#include <string.h>

#include "adjoin/dtype.h"
#include "adjoin/status.h"
#include "error_impl.h"

size_t adj_dtype_size(adj_dtype dtype) {
  switch (dtype) {
  case ADJ_FLOAT32: return sizeof(float);
  case ADJ_FLOAT64: return sizeof(double);
  }
  return 0;
}

const char *adj_dtype_name(adj_dtype dtype) {
  switch (dtype) {
  case ADJ_FLOAT32: return "float32";
  case ADJ_FLOAT64: return "float64";
  }
  return "invalid";
}

int adj_dtype_valid(adj_dtype dtype) { return dtype == ADJ_FLOAT32 || dtype == ADJ_FLOAT64; }

int adj_dtype_parse(const char *text, adj_dtype *dtype) {
  if (text && (!strcmp(text, "f32") || !strcmp(text, "float32"))) {
    *dtype = ADJ_FLOAT32;
    return ADJ_SUCCESS;
  }
  if (text && (!strcmp(text, "f64") || !strcmp(text, "float64"))) {
    *dtype = ADJ_FLOAT64;
    return ADJ_SUCCESS;
  }
  return adj_error_set(ADJ_ERR_ARG, "unknown dtype '%s' (expected f32 or f64)", text ? text : "(null)");
}
