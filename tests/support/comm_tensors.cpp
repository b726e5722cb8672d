#include "tests/support/comm_tensors.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ddph_test {
namespace {

uint16_t float_to_half_exact(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  if ((u & 0x7fffffffu) == 0) return sign;
  int exp = int((u >> 23) & 0xff) - 127 + 15;
  uint32_t man = u & 0x7fffffu;
  if (exp <= 0 || exp >= 31 || (man & 0x1fffu) != 0) {
    std::fprintf(stderr, "test bug: %g is not a normal half\n", double(f));
    std::abort();
  }
  return uint16_t(sign | (exp << 10) | (man >> 13));
}

float half_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  int exp = (h >> 10) & 0x1f;
  uint32_t man = h & 0x3ffu;
  if (exp == 0 && man == 0) {
    float f;
    std::memcpy(&f, &sign, 4);
    return f;
  }
  uint32_t u = sign | (uint32_t(exp - 15 + 127) << 23) | (man << 13);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t float_to_bf16_exact(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0xffffu) != 0) {
    std::fprintf(stderr, "test bug: %g is not a bfloat16\n", double(f));
    std::abort();
  }
  return uint16_t(u >> 16);
}

float bf16_to_float(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

Tensor::Tensor(DLDataType dtype, int64_t numel)
    : bytes_(size_t(numel) * dtype.bits / 8 + 1), numel_(numel) {
  dl_.data = bytes_.data();
  dl_.device = DLDevice{kDLCPU, 0};
  dl_.ndim = 1;
  dl_.dtype = dtype;
  dl_.shape = &numel_;
  dl_.strides = nullptr;
  dl_.byte_offset = 0;
}

DLTensor view(Tensor& t, int64_t offset, int64_t* shape_storage) {
  DLTensor v = *t.dl();
  v.shape = shape_storage;
  v.byte_offset = size_t(offset) * v.dtype.bits / 8;
  return v;
}

double get(Tensor& t, int64_t i) {
  DLDataType d = t.dl()->dtype;
  if (d.code == kDLFloat && d.bits == 32) return t.as<float>()[i];
  if (d.code == kDLFloat && d.bits == 64) return t.as<double>()[i];
  if (d.code == kDLFloat && d.bits == 16) return half_to_float(t.as<uint16_t>()[i]);
  if (d.code == kDLBfloat) return bf16_to_float(t.as<uint16_t>()[i]);
  if (d.code == kDLInt && d.bits == 32) return t.as<int32_t>()[i];
  if (d.code == kDLInt && d.bits == 64) return double(t.as<int64_t>()[i]);
  if (d.code == kDLUInt && d.bits == 8) return t.as<uint8_t>()[i];
  if (d.code == kDLInt && d.bits == 8) return t.as<int8_t>()[i];
  std::abort();
}

void set(Tensor& t, int64_t i, double v) {
  DLDataType d = t.dl()->dtype;
  if (d.code == kDLFloat && d.bits == 32)
    t.as<float>()[i] = float(v);
  else if (d.code == kDLFloat && d.bits == 64)
    t.as<double>()[i] = v;
  else if (d.code == kDLFloat && d.bits == 16)
    t.as<uint16_t>()[i] = float_to_half_exact(float(v));
  else if (d.code == kDLBfloat)
    t.as<uint16_t>()[i] = float_to_bf16_exact(float(v));
  else if (d.code == kDLInt && d.bits == 32)
    t.as<int32_t>()[i] = int32_t(v);
  else if (d.code == kDLInt && d.bits == 64)
    t.as<int64_t>()[i] = int64_t(v);
  else if (d.code == kDLUInt && d.bits == 8)
    t.as<uint8_t>()[i] = uint8_t(v);
  else if (d.code == kDLInt && d.bits == 8)
    t.as<int8_t>()[i] = int8_t(v);
  else
    std::abort();
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
double seconds_since(double start) {
  return now_s() - start;
}

}  // namespace ddph_test
