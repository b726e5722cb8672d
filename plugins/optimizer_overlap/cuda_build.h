// A CUDA bucket in a build without CUDA is refused before anything is sent,
// on every rank alike, instead of failing midway in a copy or a collective.
#pragma once

#include <ddph/ddph.h>

namespace ddph {
namespace optimizer_overlap {

// Throws DDPH_UNSUPPORTED naming `hook` when bucket is CUDA memory and this
// build has no CUDA (DDPH_WITH_CUDA off).
void require_cuda_build(const ddph_bucket_t& bucket, const char* hook);

}  // namespace optimizer_overlap
}  // namespace ddph
