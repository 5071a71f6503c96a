/* Checkpoints: a network's global parameters and its optimizer's state in one
 * versioned, checksummed file (format: docs/checkpoint.md).
 *
 * Every parameter and optimizer buffer is stored whole, in its global shape,
 * gathered through the parameter's layout (layer.h), never as a worker's
 * shard: a checkpoint written by one layout loads into any other (sequential
 * into dist4 and back), and values are stored as float64, so float32 and
 * float64 runs exchange checkpoints too (float32 -> float64 -> float32 is
 * exact).  Besides the tensors the file holds what makes a resumed run equal
 * to an uninterrupted one: the optimizer's step count, the shuffling
 * generator's state, the position (epoch, batch) in the run and the
 * network's state buffers (batch norm running mean and variance; they are
 * not parameters), stored whole like the parameters.
 *
 * Saving writes a fresh temporary file beside PATH on rank 0 (created
 * exclusively, never through a planted symlink), flushes it to disk and
 * renames it over PATH, so a crash leaves either the old or the new
 * checkpoint, never half of one; a PATH that is not a regular file is refused.  Loading checks the magic number, version, size, CRC32 and that every
 * parameter's name and global shape match the network, and that every
 * stored number is in range (counts non-negative, generator state valid,
 * values finite with |v| <= ADJ_CHECKPOINT_MAX_MAGNITUDE) before it changes
 * anything; a refused file leaves network, optimizer and generator untouched
 * (and the file on disk as it was).  Both calls are collective on the
 * network's communicator; errors (ADJ_ERR_IO for an unreadable, corrupted or
 * mismatched file, with a message naming the file and the bad value) are the
 * same on every rank. */
#ifndef ADJOIN_CHECKPOINT_H
#define ADJOIN_CHECKPOINT_H

#include <stdint.h>

#include "adjoin/layer.h"
#include "adjoin/optimizer.h"
#include "adjoin/rng.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

/* Version 2 adds the batch size to version 1's header; version 3 adds a
 * section of network state (batch norm running statistics), written only
 * for networks that hold some (others still write version 2).  All three are
 * read. */
enum { ADJ_CHECKPOINT_VERSION = 3 };
/* Largest |value| a checkpoint may hold for a parameter or optimizer state. */
#define ADJ_CHECKPOINT_MAX_MAGNITUDE 1e30

/* Where a run stands.  The shuffling generator is saved as it was at the
 * start of epoch `epoch`, so a resumed run redraws that epoch's order and
 * skips the first `batch` batches. */
typedef struct adj_checkpoint_position {
  int64_t epoch;   /* epochs completed */
  int64_t batch;   /* batches completed in the current epoch (0 at a boundary) */
  uint64_t seed;   /* the run's seed, kept for the record */
  int64_t batch_size; /* samples per batch of the run (0: not recorded, a version 1 file) */
} adj_checkpoint_position;

/* What a caller requires of a stored position, checked with everything else
 * before anything changes.  Fields <= 0 are not checked. */
typedef struct adj_checkpoint_expect {
  int64_t batches_per_epoch; /* the stored batch must be below it */
  int64_t batch_size;        /* a mid-epoch position must have been saved with this batch size */
} adj_checkpoint_expect;

/* Writes the checkpoint.  optimizer may be NULL (parameters only); rng may be
 * NULL (no generator state).  rng and position are read on rank 0. */
int adj_checkpoint_save(const char *path, adj_layer *network, adj_optimizer *optimizer, const adj_rng *rng,
                        const adj_checkpoint_position *position);

/* Reads a checkpoint into network and, when not NULL, optimizer (its kind and
 * number of state buffers must match the file's), rng (every rank's generator
 * gets the saved state) and position.  A checkpoint saved without optimizer
 * state or generator state cannot restore them: passing optimizer or rng then
 * is an error. */
int adj_checkpoint_load(const char *path, adj_layer *network, adj_optimizer *optimizer, adj_rng *rng,
                        adj_checkpoint_position *position);

/* adj_checkpoint_load that also refuses, before changing anything, a
 * position that does not fit `expect` (NULL: no requirement). */
int adj_checkpoint_load_expect(const char *path, adj_layer *network, adj_optimizer *optimizer, adj_rng *rng,
                               adj_checkpoint_position *position, const adj_checkpoint_expect *expect);

/* Whether `path` can take a checkpoint: it is a regular file or does not
 * exist yet, in an existing directory this process can write.  Not
 * collective (a run checks it on rank 0 at start, before the first epoch). */
int adj_checkpoint_check_target(const char *path);

ADJ_END_DECLS

#endif
