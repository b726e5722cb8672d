#include "plugins/powersgd/ops_by_device.h"

namespace ddph {
namespace powersgd {

void OpsByDevice::open_gpu(const Where& at) {
  gpu_.reset();
#ifdef DDPH_HAVE_CUDA
  const int device = at.device.device_id;
  gpu_ = make_cuda_ops(device);
  device_ = device;
#else
  (void)at;
  refuse_cuda_memory("powersgd");
#endif
}

}  // namespace powersgd
}  // namespace ddph
