// The kernels against PyTorch 1.13 itself (Debian python3-torch), run at test
// time: casts of every 16-bit pattern and of corner-case floats, division
// and addition in float16/bfloat16. NaN payloads may differ (torch's scalar
// cast makes a canonical NaN, F16C keeps the payload), so NaNs compare as NaNs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "core/kernels/cast.h"
#include "core/kernels/divide.h"
#include "core/kernels/reduce.h"
#include "core/kernels/scalar.h"
#include "tests/kernels/corner_cases.h"
#include "tests/support/torch_ref.h"

namespace {

using ddph::DType;
using namespace ddph::kernels;

const char* kScript = R"PY(
import sys, numpy as np, torch
d = sys.argv[1]
def load(name, dt): return torch.from_numpy(np.fromfile(d + '/' + name, dtype=dt).copy())
def save(name, t): t.numpy().tofile(d + '/' + name)
bits = load('bits', np.int16)
floats = load('floats', np.float32)
partner = load('partner', np.int16)
for name, low in (('f16', torch.float16), ('bf16', torch.bfloat16)):
    v = bits.view(low)
    save(name + '_up', v.float())
    save(name + '_down', floats.to(low).view(torch.int16))
    save(name + '_div3', v.clone().div_(3).view(torch.int16))
    save(name + '_castdiv3', floats.to(low).div_(3).view(torch.int16))
    save(name + '_add', (v + partner.view(low)).view(torch.int16))
)PY";

bool same(float a, float b) {
  return std::isnan(a) ? std::isnan(b) : float_bits(a) == float_bits(b);
}

TEST(KernelTorchParity, CastsDivisionAndAddition) {
  if (!ddph_test::torch_available()) GTEST_SKIP() << "/usr/bin/python3 with torch not found";
  std::vector<uint16_t> bits = ddph_test::all_16bit_patterns();
  std::vector<uint16_t> partner = bits;
  std::shuffle(partner.begin(), partner.end(), std::mt19937(5));
  std::vector<float> floats = ddph_test::float_corner_cases(1 << 18, 13);
  ddph_test::Blobs out =
      ddph_test::run_torch(kScript,
                           {{"bits", ddph_test::to_blob(bits)},
                            {"floats", ddph_test::to_blob(floats)},
                            {"partner", ddph_test::to_blob(partner)}},
                           {"f16_up", "f16_down", "f16_div3", "f16_castdiv3", "f16_add", "bf16_up",
                            "bf16_down", "bf16_div3", "bf16_castdiv3", "bf16_add"});
  for (DType low : {DType::F16, DType::BF16}) {
    const std::string p = low == DType::F16 ? "f16_" : "bf16_";
    auto up16 = [&](uint16_t h) {
      return low == DType::F16 ? f16_bits_to_f32(h) : bf16_bits_to_f32(h);
    };
    const size_t n = bits.size(), m = floats.size();

    std::vector<float> up(n);
    ddph::cast_into(low, bits.data(), DType::F32, up.data(), n);
    std::vector<float> t_up = ddph_test::from_blob<float>(out[p + "up"]);
    for (size_t i = 0; i < n; ++i) ASSERT_TRUE(same(up[i], t_up[i])) << p << "up " << i;

    std::vector<uint16_t> down(m), castdiv(m);
    ddph::cast_into(DType::F32, floats.data(), low, down.data(), m);
    ddph::cast_div_into(DType::F32, floats.data(), low, castdiv.data(), m, 3);
    std::vector<uint16_t> t_down = ddph_test::from_blob<uint16_t>(out[p + "down"]);
    std::vector<uint16_t> t_castdiv = ddph_test::from_blob<uint16_t>(out[p + "castdiv3"]);
    for (size_t i = 0; i < m; ++i) {
      ASSERT_TRUE(same(up16(down[i]), up16(t_down[i])))
          << p << "down of float bits 0x" << std::hex << float_bits(floats[i]);
      ASSERT_TRUE(same(up16(castdiv[i]), up16(t_castdiv[i])))
          << p << "cast+div of float bits 0x" << std::hex << float_bits(floats[i]);
    }

    std::vector<uint16_t> div = bits, sum(n);
    ddph::divide_inplace(low, div.data(), n, 3);
    ddph::reduce_into(DDPH_SUM, low, sum.data(), bits.data(), partner.data(), n);
    std::vector<uint16_t> t_div = ddph_test::from_blob<uint16_t>(out[p + "div3"]);
    std::vector<uint16_t> t_add = ddph_test::from_blob<uint16_t>(out[p + "add"]);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_TRUE(same(up16(div[i]), up16(t_div[i]))) << p << "div of 0x" << std::hex << i;
      ASSERT_TRUE(same(up16(sum[i]), up16(t_add[i])))
          << p << "add of 0x" << std::hex << i << " and 0x" << partner[i];
    }
  }
}

}  // namespace
