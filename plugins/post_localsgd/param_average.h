// PyTorch's model_averaging.utils.average_parameters: every parameter of the
// bucket, flattened into one buffer, divided by the group size, summed over
// the group (one DDPH_AVG allreduce), and copied back.
#pragma once

#include <ddph/ddph.h>

#include <cstdint>
#include <vector>

namespace ddph {
namespace post_localsgd {

// Returns the payload bytes handed to the allreduce. `flat` is scratch.
uint64_t average_params(ddph_comm_t* group, const ddph_bucket_t& bucket, std::vector<float>& flat,
                        const char* hook);

}  // namespace post_localsgd
}  // namespace ddph
