/* A network: a layer that composes layers.  See include/adjoin/net.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/agree.h"
#include "adjoin/network.h"
#include "adjoin/batchnorm_layer.h"
#include "adjoin/rng.h"
#include "layer_impl.h"

typedef struct adj_network {
  int n;
  adj_layer **layers;      /* references */
  adj_tensor *activations; /* activations[i]: output of layer i, i < n-1 (views) */
  adj_tensor *gradients;   /* gradients[i]: same shapes, for backward and jvp */
  void *activation_storage, *gradient_storage;
  void *parameter_storage[3]; /* values, grads, tangents: one layout */
  int64_t parameter_volume;   /* elements on this worker */
  int first_trainable;        /* first stage with parameters (n if none) */
  adj_backward_hook *hook;    /* around each stage's backward; may be NULL */
  void *hook_ctx;
} adj_network;

/* Gives a parameter back storage of its own (a copy of the packed data), for
 * layers that outlive the network that packed them. */
static void adj_parameter_detach(adj_parameter *p) {
  adj_tensor *parts[3] = {&p->value, &p->grad, &p->tangent};
  for (int k = 0; k < 3; k++) {
    adj_tensor own;
    if (adj_tensor_create(&own, parts[k]->dtype, parts[k]->rank, parts[k]->shape)) continue;
    adj_tensor_copy(&own, parts[k]);
    *parts[k] = own;
  }
}

static void adj_network_destroy(adj_layer *layer) {
  adj_network *net = layer->impl;
  if (!net) return;
  for (int i = 0; i < net->n; i++) {
    adj_layer *child = net->layers[i];
    if (child && child->refcount > 1 && net->parameter_storage[0])
      for (int k = 0; k < child->n_parameters; k++) adj_parameter_detach(child->parameters[k]);
    adj_layer_destroy(&net->layers[i]);
  }
  free(net->layers);
  free(net->activations);
  free(net->gradients);
  free(net->activation_storage);
  free(net->gradient_storage);
  /* The layers freed above held views into these. */
  for (int k = 0; k < 3; k++) free(net->parameter_storage[k]);
  free(net);
}

/* Input of stage i in the forward chain. */
static const adj_tensor *adj_stage_input(adj_network *net, const adj_tensor *x, int i) {
  return i == 0 ? x : &net->activations[i - 1];
}

/* The stages run unchecked (their tensors match by construction) and all of
 * them run whatever an earlier stage returned on this rank, so every rank
 * makes the same collectives; the network's public call agrees once on the
 * outcome (layer_impl.h). */
static int adj_network_forward(adj_layer *layer, const adj_tensor *x, adj_tensor *y) {
  adj_network *net = layer->impl;
  int status = ADJ_SUCCESS;
  for (int i = 0; i < net->n; i++)
    status = adj_layer_forward_stage(status, net->layers[i], adj_stage_input(net, x, i),
                                     i == net->n - 1 ? y : &net->activations[i]);
  return status;
}

/* The tangent flows forward: stage i maps the tangent of its input (dx for the
 * first stage, which may be NULL) to the tangent of its output. */
static int adj_network_jvp(adj_layer *layer, const adj_tensor *dx, adj_tensor *dy) {
  adj_network *net = layer->impl;
  int status = ADJ_SUCCESS;
  for (int i = 0; i < net->n; i++) {
    const adj_tensor *in = i == 0 ? dx : &net->gradients[i - 1];
    status = adj_layer_jvp_stage(status, net->layers[i], in, i == net->n - 1 ? dy : &net->gradients[i]);
  }
  return status;
}

/* The input gradient of stage i, or NULL when no one reads it: the caller
 * asked for no dx and no stage before i has parameters.  Then stage i skips
 * its input gradient and the data movement behind it (a distributed first
 * convolution's halo adjoint, the input scatter's gather).  Parameter counts
 * are structural and a NULL dx is held to alike on every rank, so every rank
 * skips the same collectives. */
static adj_tensor *adj_stage_input_gradient(adj_network *net, adj_tensor *dx, int i) {
  if (i == 0) return dx;
  return !dx && i <= net->first_trainable ? NULL : &net->gradients[i - 1];
}

/* The data-parallel hook runs on every rank whatever its status, so its
 * collectives stay matched too. */
static int adj_network_backward(adj_layer *layer, const adj_tensor *dy, adj_tensor *dx) {
  adj_network *net = layer->impl;
  int status = ADJ_SUCCESS;
  for (int i = net->n - 1; i >= 0; i--) {
    const adj_tensor *out_grad = i == net->n - 1 ? dy : &net->gradients[i];
    adj_tensor *in_grad = adj_stage_input_gradient(net, dx, i);
    if (net->hook) {
      int hooked = net->hook(net->hook_ctx, i, ADJ_BACKWARD_BEGIN);
      if (!status) status = hooked;
    }
    status = adj_layer_backward_stage(status, net->layers[i], out_grad, in_grad);
    if (net->hook) {
      int hooked = net->hook(net->hook_ctx, i, ADJ_BACKWARD_END);
      if (!status) status = hooked;
    }
  }
  return status;
}

static int adj_network_check(int n, adj_layer *const *layers) {
  ADJ_CHECK(n >= 1 && layers, ADJ_ERR_ARG, "network: needs at least one layer, got %d", n);
  for (int i = 0; i < n; i++) ADJ_CHECK(layers[i], ADJ_ERR_ARG, "network: layer %d is NULL", i);
  for (int i = 0; i + 1 < n; i++) {
    const adj_layer *a = layers[i], *b = layers[i + 1];
    ADJ_CHECK(a->dtype == b->dtype, ADJ_ERR_DTYPE, "network: layer %d (%s) works in %s but layer %d (%s) in %s", i,
              a->name, adj_dtype_name(a->dtype), i + 1, b->name, adj_dtype_name(b->dtype));
    int same = a->output_rank == b->input_rank;
    for (int d = 0; same && d < a->output_rank; d++) same = a->output_shape[d] == b->input_shape[d];
    char s1[160], s2[160];
    ADJ_CHECK(same, ADJ_ERR_SIZE, "network: layer %d (%s) outputs local shape %s but layer %d (%s) takes %s", i,
              a->name, adj_shape_format(s1, sizeof s1, a->output_rank, a->output_shape), i + 1, b->name,
              adj_shape_format(s2, sizeof s2, b->input_rank, b->input_shape));
  }
  return ADJ_SUCCESS;
}

/* Carves n-1 tensors shaped like the layers' outputs out of one allocation. */
static int adj_network_carve(adj_network *net, adj_dtype dtype, adj_tensor *views, void **storage) {
  size_t total = 0, esize = adj_dtype_size(dtype);
  for (int i = 0; i + 1 < net->n; i++) {
    adj_tensor shape_only = {.dtype = dtype, .rank = net->layers[i]->output_rank};
    memcpy(shape_only.shape, net->layers[i]->output_shape, sizeof shape_only.shape);
    total += adj_tensor_bytes(&shape_only);
  }
  *storage = calloc(total / esize + 1, esize);
  ADJ_CHECK(*storage, ADJ_ERR_MEM, "network: cannot allocate %zu bytes of activations", total);
  char *cursor = *storage;
  for (int i = 0; i + 1 < net->n; i++) {
    adj_layer *l = net->layers[i];
    ADJ_CALL(adj_tensor_view(&views[i], dtype, l->output_rank, l->output_shape, cursor));
    cursor += adj_tensor_bytes(&views[i]);
  }
  return ADJ_SUCCESS;
}

/* Moves every parameter's value, grad and tangent into three buffers with one
 * layout (llm.c's single parameter allocation).  Values are copied over; grads
 * and tangents start at zero. */
static int adj_network_pack_parameters(adj_network *net, adj_layer *layer) {
  size_t esize = adj_dtype_size(layer->dtype);
  net->parameter_volume = 0;
  for (int i = 0; i < layer->n_parameters; i++) net->parameter_volume += adj_tensor_volume(&layer->parameters[i]->value);
  for (int k = 0; k < 3; k++) {
    net->parameter_storage[k] = calloc((size_t)net->parameter_volume + 1, esize);
    ADJ_CHECK(net->parameter_storage[k], ADJ_ERR_MEM, "network: cannot allocate %lld parameters",
              (long long)net->parameter_volume);
  }
  size_t offset = 0;
  for (int i = 0; i < layer->n_parameters; i++) {
    adj_parameter *p = layer->parameters[i];
    adj_tensor *parts[3] = {&p->value, &p->grad, &p->tangent};
    for (int k = 0; k < 3; k++) {
      adj_tensor moved;
      char *at = (char *)net->parameter_storage[k] + offset * esize;
      ADJ_CALL(adj_tensor_view(&moved, parts[k]->dtype, parts[k]->rank, parts[k]->shape, at));
      if (k == 0) ADJ_CALL(adj_tensor_copy(&moved, parts[k]));
      adj_tensor_destroy(parts[k]);
      *parts[k] = moved;
    }
    offset += (size_t)adj_tensor_volume(&p->value);
  }
  return ADJ_SUCCESS;
}

static int adj_network_build(adj_layer *layer, adj_network *net) {
  ADJ_CALL(adj_network_carve(net, layer->dtype, net->activations, &net->activation_storage));
  ADJ_CALL(adj_network_carve(net, layer->dtype, net->gradients, &net->gradient_storage));
  for (int i = 0; i < net->n; i++)
    for (int k = 0; k < net->layers[i]->n_parameters; k++)
      ADJ_CALL(adj_layer_share_parameter(layer, net->layers[i]->parameters[k]));
  return adj_network_pack_parameters(net, layer);
}

int adj_network_create(const char *name, int n, adj_layer *const *layers, adj_layer **network) {
  ADJ_CHECK(network, ADJ_ERR_ARG, "network: output network pointer is NULL");
  *network = NULL;
  MPI_Comm base = n >= 1 && layers && layers[0] ? layers[0]->comm : MPI_COMM_WORLD;
  ADJ_CALL(adj_status_agree(base, adj_network_check(n, layers), ADJ_WAIT_YIELD));
  adj_network *net = calloc(1, sizeof *net);
  if (net) {
    net->layers = calloc((size_t)n, sizeof *net->layers);
    net->activations = calloc((size_t)n, sizeof *net->activations);
    net->gradients = calloc((size_t)n, sizeof *net->gradients);
  }
  int status = net && net->layers && net->activations && net->gradients
                   ? ADJ_SUCCESS
                   : adj_error_set(ADJ_ERR_MEM, "network: out of memory for %d layers", n);
  status = adj_status_agree(base, status, ADJ_WAIT_YIELD);
  if (status) {
    if (net) free(net->layers), free(net->activations), free(net->gradients), free(net);
    return status;
  }
  net->n = n;
  net->first_trainable = n;
  for (int i = n - 1; i >= 0; i--) {
    net->layers[i] = adj_layer_reference(layers[i]);
    if (layers[i]->n_parameters > 0) net->first_trainable = i;
  }
  static const adj_layer_methods methods = {adj_network_forward, adj_network_jvp, adj_network_backward,
                                            adj_network_destroy};
  const adj_layer *first = layers[0], *last = layers[n - 1];
  adj_layer *layer;
  status = adj_layer_alloc(name, base, first->dtype, first->input_rank, first->input_shape, last->output_rank,
                           last->output_shape, &methods, net, &layer);
  if (status) {
    adj_layer tmp = {.impl = net};
    adj_network_destroy(&tmp);
    return status;
  }
  /* The network reads and writes what its first and last layers do. */
  adj_layer_set_layouts(layer, first->input_layout, last->output_layout);
  status = adj_status_agree(base, adj_network_build(layer, net), ADJ_WAIT_YIELD);
  if (status) {
    adj_layer_destroy(&layer);
    return status;
  }
  *network = layer;
  return ADJ_SUCCESS;
}

/* A layer is a network exactly when its methods are the network's; the impl
 * of any other layer is a different struct, so it is read only after this. */
bool adj_layer_is_network(const adj_layer *layer) { return layer && layer->methods.forward == adj_network_forward; }

/* The checked downcast: the network behind `layer`, or NULL with a message. */
static adj_network *adj_network_of(const adj_layer *layer, const char *caller) {
  if (adj_layer_is_network(layer)) return layer->impl;
  adj_error_set(ADJ_ERR_ARG, "%s: layer '%s' is not a network (adj_network_create makes one)", caller,
                layer ? layer->name : "NULL");
  return NULL;
}

int adj_network_depth(const adj_layer *network) {
  const adj_network *net = adj_network_of(network, "adj_network_depth");
  return net ? net->n : -1;
}

adj_layer *adj_network_layer(adj_layer *network, int index) {
  adj_network *net = adj_network_of(network, "adj_network_layer");
  if (!net) return NULL;
  if (index < 0 || index >= net->n) {
    adj_error_set(ADJ_ERR_ARG, "adj_network_layer: stage %d of network '%s' is outside 0..%d", index, network->name,
                  net->n - 1);
    return NULL;
  }
  return net->layers[index];
}

int adj_network_flat_parameters(adj_layer *network, adj_tensor *values, adj_tensor *grads) {
  adj_network *net = adj_network_of(network, "adj_network_flat_parameters");
  if (!net) return ADJ_ERR_ARG;
  int64_t n = net->parameter_volume;
  ADJ_CALL(adj_tensor_view(values, network->dtype, 1, &n, net->parameter_storage[0]));
  return adj_tensor_view(grads, network->dtype, 1, &n, net->parameter_storage[1]);
}

int adj_network_stage_parameters(const adj_layer *network, int index, int *first, int *count) {
  const adj_network *net = adj_network_of(network, "adj_network_stage_parameters");
  if (!net) return ADJ_ERR_ARG;
  ADJ_CHECK(first && count, ADJ_ERR_ARG, "adj_network_stage_parameters: network '%s': first and count are required",
            network->name);
  ADJ_CHECK(index >= 0 && index < net->n, ADJ_ERR_ARG, "network %s: stage %d is outside 0..%d", network->name, index,
            net->n - 1);
  int before = 0;
  for (int i = 0; i < index; i++) before += net->layers[i]->n_parameters;
  *first = before;
  *count = net->layers[index]->n_parameters;
  return ADJ_SUCCESS;
}

int adj_network_set_backward_hook(adj_layer *network, adj_backward_hook *hook, void *ctx) {
  adj_network *net = adj_network_of(network, "adj_network_set_backward_hook");
  if (!net) return ADJ_ERR_ARG;
  net->hook = hook;
  net->hook_ctx = ctx;
  return ADJ_SUCCESS;
}

int adj_network_set_training(adj_layer *network, bool training) {
  adj_network *net = adj_network_of(network, "adj_network_set_training");
  if (!net) return ADJ_ERR_ARG;
  for (int i = 0; i < net->n; i++) {
    adj_layer *stage = net->layers[i];
    if (adj_layer_is_batchnorm(stage)) ADJ_CALL(adj_batchnorm_layer_set_training(stage, training));
    else if (adj_layer_is_network(stage)) ADJ_CALL(adj_network_set_training(stage, training));
  }
  return ADJ_SUCCESS;
}

/* ---- initialisation (PyTorch's default uniform) ---------------------------------------- */

/* The uniform bound of parameter p: 1/sqrt(fan_in), where a weight's fan_in
 * is its volume per output and a bias takes its weight's (*fan_in). */
static double uniform_bound(const adj_parameter *p, int64_t *fan_in) {
  const int64_t *shape = adj_decomposition_global_shape(p->layout);
  if (strcmp(p->name, "bias")) {
    *fan_in = 1;
    for (int d = 1; d < adj_decomposition_rank(p->layout); d++) *fan_in *= shape[d];
  }
  return 1.0 / sqrt((double)(*fan_in > 0 ? *fan_in : 1));
}

static const int64_t *global_shape(adj_layer *layer, int index) {
  return adj_decomposition_global_shape(adj_layer_parameter(layer, index)->layout);
}

/* A phantom layer's parameters (phantom_layer.h: local L, compressor C
 * (k, n_in), decompressor D (n_out, (p-1) k), bias), drawn so the layer
 * starts like the dense n_out x n_in layer it stands for: each output's
 * variance that of PyTorch's default, 1/(3 n_in) per weight times n_in
 * inputs.  L takes the dense layer's bound 1/sqrt(n_in) (its n_in/p inputs
 * give 1/p of that variance); C takes the fan-in of its own compressed input
 * block, n_in/p, so each ghost keeps the scale its inputs give a dense
 * output; D, whose (p-1) k ghosts must give the other (p-1)/p, takes
 * sqrt(3/(p k)); the bias the dense layer's.  (The general rule would read
 * L as one-dimensional, fan-in 1, and draw it from U(-1, 1).)  False for
 * any other parameter. */
static bool phantom_bound(adj_layer *layer, int index, double *bound, int64_t *fan_in) {
  const char *name = adj_layer_parameter(layer, index)->name;
  int count = adj_layer_parameter_count(layer), first = index;
  if (!strcmp(name, "compressor")) first = index - 1;
  else if (!strcmp(name, "decompressor")) first = index - 2;
  else if (!strcmp(name, "bias") && index >= 3 && !strcmp(adj_layer_parameter(layer, index - 1)->name, "decompressor"))
    first = index - 3;
  else if (strcmp(name, "local")) return false;
  if (first < 0 || first + 2 >= count || strcmp(adj_layer_parameter(layer, first)->name, "local")) return false;
  int64_t k = global_shape(layer, first + 1)[0], n_in = global_shape(layer, first + 1)[1];
  int64_t p = k > 0 ? global_shape(layer, first + 2)[1] / k + 1 : 1;
  *fan_in = n_in;
  if (!strcmp(name, "compressor")) *bound = 1 / sqrt((double)n_in / (double)p);
  else if (!strcmp(name, "decompressor")) *bound = sqrt(3.0 / (double)(p * k));
  else *bound = 1 / sqrt((double)n_in);
  return true;
}

/* Whether parameter `index` of a network belongs to a batch norm stage. */
static bool in_batchnorm(adj_layer *network, int index) {
  for (int i = 0; adj_layer_is_network(network) && i < adj_network_depth(network); i++) {
    int first, count;
    if (!adj_network_stage_parameters(network, i, &first, &count) && index >= first && index < first + count)
      return adj_layer_is_batchnorm(adj_network_layer(network, i));
  }
  return false;
}

/* Draws the whole parameter on rank 0 and scatters it.  Batch norm's weight
 * and bias take PyTorch's 1 and 0 and draw nothing, so a network without
 * batch norm draws what it always did. */
static int init_parameter_uniform(adj_layer *network, int index, adj_rng *rng, int64_t *fan_in) {
  adj_parameter *p = adj_layer_parameter(network, index);
  bool constant = in_batchnorm(network, index);
  double bound = 0, value = strcmp(p->name, "weight") ? 0 : 1;
  if (!constant && !phantom_bound(network, index, &bound, fan_in)) bound = uniform_bound(p, fan_in);
  adj_tensor whole = {0};
  int status = ADJ_SUCCESS;
  if (rng) {
    status = adj_tensor_create(&whole, adj_layer_dtype(network), adj_decomposition_rank(p->layout),
                               adj_decomposition_global_shape(p->layout));
    for (int64_t e = 0; !status && constant && e < adj_tensor_volume(&whole); e++) adj_tensor_set(&whole, e, value);
    if (!status && !constant) adj_rng_fill_uniform(rng, &whole, -bound, bound);
  }
  status = adj_status_agree(adj_layer_comm(network), status, ADJ_WAIT_YIELD);
  if (!status) status = adj_layer_set_parameter(network, index, 0, rng ? &whole : NULL);
  adj_tensor_destroy(&whole);
  return status;
}

/* Any layer is accepted, not only a network (network.h): a lone layer's
 * parameters are drawn the same way, one by one in order. */
int adj_network_init_uniform(adj_layer *network, uint64_t seed) {
  ADJ_CHECK(network, ADJ_ERR_ARG, "adj_network_init_uniform: layer is NULL");
  int rank;
  MPI_Comm_rank(adj_layer_comm(network), &rank);
  adj_rng *rng = NULL;
  int status = rank == 0 ? adj_rng_create(seed, &rng) : ADJ_SUCCESS;
  status = adj_status_agree(adj_layer_comm(network), status, ADJ_WAIT_YIELD);
  int64_t fan_in = 1;
  for (int i = 0; !status && i < adj_layer_parameter_count(network); i++)
    status = init_parameter_uniform(network, i, rng, &fan_in);
  adj_rng_destroy(&rng);
  return status;
}
