// Whether a GPU's primary context exists in this process. Since CUDA 12,
// cudaSetDevice creates the context of the device it names, several hundred
// MB of that GPU's memory, so switching a thread back to a device it never
// used costs every rank a context on GPU 0 (a thread without a context
// reads device 0 from cudaGetDevice). PyTorch skips such restores for the
// same reason.
#pragma once

namespace ddph {
namespace cuda {

// True when `device`'s primary context is active, or when the driver
// cannot be asked (then restoring is the safe choice). [thread-safe]
bool primary_context_active(int device) noexcept;

}  // namespace cuda
}  // namespace ddph
