// PyTorch's model_averaging.utils.average_parameters: every parameter of the
// bucket, flattened into one buffer, divided by the group size, summed over
// the group (one DDPH_AVG allreduce), and copied back.
//
// One code path for host and CUDA buckets: the flat buffer is scratch in the
// bucket's memory and the copies are on_device.h's same-dtype casts, so on a
// GPU everything is enqueued on the bucket's stream.
#pragma once

#include <ddph/ddph.h>

#include <cstdint>

#include "core/kernels/on_device.h"

namespace ddph {
namespace post_localsgd {

// Returns the payload bytes handed to the allreduce.
uint64_t average_params(ddph_comm_t* group, const ddph_bucket_t& bucket, ScratchBuffers& scratch,
                        const char* hook);

}  // namespace post_localsgd
}  // namespace ddph
