/* adjoin: distributed deep learning where every data movement is a linear
 * operator with a coherent adjoint.  This header includes every public module. */
#ifndef ADJOIN_ADJOIN_H
#define ADJOIN_ADJOIN_H

#include "adjoin/status.h"
#include "adjoin/dtype.h"
#include "adjoin/tensor.h"
#include "adjoin/rng.h"
#include "adjoin/wait.h"
#include "adjoin/threads.h"
#include "adjoin/partition.h"
#include "adjoin/decomposition.h"
#include "adjoin/op.h"
#include "adjoin/memory.h"
#include "adjoin/send_receive.h"
#include "adjoin/broadcast.h"
#include "adjoin/all_sum_reduce.h"
#include "adjoin/all_gather.h"
#include "adjoin/repartition.h"
#include "adjoin/kernels.h"
#include "adjoin/halo_geometry.h"
#include "adjoin/halo.h"
#include "adjoin/layer.h"
#include "adjoin/layers.h"
#include "adjoin/conv_layer.h"
#include "adjoin/norm_layer.h"
#include "adjoin/losses.h"
#include "adjoin/upsample_layer.h"
#include "adjoin/net.h"
#include "adjoin/loss_layer.h"
#include "adjoin/lenet.h"
#include "adjoin/checkpoint.h"
#include "adjoin/train.h"
#include "adjoin/adjoint_test.h"
#include "adjoin/dataset.h"

#endif
