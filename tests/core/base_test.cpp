// Unit tests for core/: dtype mapping to DLPack, flat tensors, and the
// bucket validation every hook and the loader rely on.
#include <gtest/gtest.h>

#include <string>

#include "core/base/dtype.h"
#include "core/base/error.h"
#include "core/base/tensor.h"
#include "core/hook/bucket_check.h"
#include "core/hook/hook.h"
#include "core/hook/param_view.h"

namespace {

using ddph::DType;

TEST(Dtype, EverySupportedTypeRoundTripsThroughDlpack) {
  const DType all[] = {DType::F32, DType::F64, DType::F16, DType::BF16,
                       DType::I32, DType::I64, DType::U8};
  for (DType t : all) {
    DLDataType dl = ddph::dtype_to_dl(t);
    DType back;
    ASSERT_TRUE(ddph::dtype_from_dl(dl, &back)) << ddph::dtype_name(t);
    EXPECT_EQ(back, t);
    EXPECT_EQ(dl.lanes, 1);
    EXPECT_EQ(ddph::dtype_size(t) * 8, dl.bits) << ddph::dtype_name(t);  // DLPack's own width
  }
  EXPECT_EQ(ddph::dtype_to_dl(DType::BF16).code, kDLBfloat);
  EXPECT_EQ(ddph::dtype_to_dl(DType::F16).code, kDLFloat);
  EXPECT_EQ(ddph::dtype_to_dl(DType::U8).code, kDLUInt);
}

TEST(Dtype, UnsupportedTypesAreRefusedAndNamed) {
  const DLDataType refused[] = {{kDLInt, 8, 1}, {kDLUInt, 16, 1}, {kDLFloat, 32, 4},
                                {kDLComplex, 64, 1}, {kDLBfloat, 32, 1}};
  for (DLDataType dl : refused) {
    DType t;
    EXPECT_FALSE(ddph::dtype_from_dl(dl, &t)) << int(dl.code) << "/" << int(dl.bits);
  }
  char buf[32];
  EXPECT_STREQ(ddph::dl_dtype_text({kDLFloat, 32, 4}, buf), "float32x4");
  EXPECT_STREQ(ddph::dl_dtype_text({kDLInt, 8, 1}, buf), "int8");
}

TEST(FlatTensor, CopiesPointAtTheirOwnShape) {
  float data[5] = {};
  ddph::FlatTensor a(data, DType::F32, 5);
  ddph::FlatTensor b = a;
  EXPECT_EQ(b.dl()->shape, &b.dl()->shape[0]);
  EXPECT_NE(b.dl()->shape, a.dl()->shape);
  EXPECT_EQ(b.dl()->shape[0], 5);
  EXPECT_TRUE(ddph::is_flat(*b.dl()));
  EXPECT_EQ(ddph::numel(*b.dl()), 5);
}

struct Bucket {
  float data[16] = {};
  int64_t shape[1] = {16};
  int64_t pshape[2] = {2, 3};
  ddph_param_t param{};
  ddph_bucket_t b{};
  Bucket() {
    b.struct_size = sizeof b;
    b.buffer.data = data;
    b.buffer.device = {kDLCPU, 0};
    b.buffer.ndim = 1;
    b.buffer.dtype = {kDLFloat, 32, 1};
    b.buffer.shape = shape;
    param.struct_size = sizeof param;
    param.offset = 10;
    param.ndim = 2;
    param.shape = pshape;
    b.num_params = 1;
    b.params = &param;
  }
};

// What a hook without a CUDA path says to b.
std::string refusal(const ddph_bucket_t* b, ddph_code_t* code) {
  try {
    ddph::check_bucket(b, ddph::BucketMemory::kHost);
  } catch (const ddph::Error& e) {
    *code = e.code();
    return e.what();
  }
  return "";
}

TEST(BucketCheck, AcceptsAValidBucketAndReturnsItsDtype) {
  Bucket ok;
  EXPECT_EQ(ddph::check_bucket(&ok.b), DType::F32);  // the view [10, 16) ends exactly at the end
}

// A zero dimension makes a view empty, whatever its other dimensions say
// (found by tests/fuzz: the others used to be multiplied first).
TEST(BucketCheck, AViewWithAZeroDimensionIsEmpty) {
  Bucket x;
  int64_t shape[3] = {INT64_MAX - 25, INT64_MAX - 25, 0};
  x.param.ndim = 3;
  x.param.shape = shape;
  EXPECT_EQ(ddph::check_bucket(&x.b), DType::F32);
  EXPECT_EQ(ddph::view_numel(x.param), 0);
}

// Found by tests/fuzz: a host tensor's shape multiplied past int64.
TEST(FlatTensor, NumelSaturatesInsteadOfOverflowing) {
  int64_t huge[3] = {INT64_MAX - 25, INT64_MAX - 25, 3};
  DLTensor t{};
  t.ndim = 2;
  t.shape = huge;
  EXPECT_EQ(ddph::numel(t), INT64_MAX);
  huge[1] = 0;
  EXPECT_EQ(ddph::numel(t), 0);
  int64_t small[2] = {6, 7};
  t.shape = small;
  EXPECT_EQ(ddph::numel(t), 42);
}

// No pointer arithmetic on a NULL tensor (an empty bucket may have no data).
TEST(BucketCheck, DataPtrOfAnEmptyTensorWithoutDataIsNull) {
  Bucket x;
  x.shape[0] = 0;
  x.b.num_params = 0;
  x.b.buffer.data = nullptr;
  x.b.buffer.byte_offset = 8;
  EXPECT_EQ(ddph::check_bucket(&x.b), DType::F32);
  EXPECT_EQ(ddph::data_ptr(x.b.buffer), nullptr);
}

TEST(BucketCheck, CudaBucketsPassOnlyWhereTheCallerHasACudaPath) {
  Bucket x;
  x.b.buffer.device = {kDLCUDA, 1};
  EXPECT_EQ(ddph::check_bucket(&x.b, ddph::BucketMemory::kHostOrCuda), DType::F32);
  ddph_code_t code = DDPH_OK;
  EXPECT_NE(refusal(&x.b, &code).find("host memory only"), std::string::npos);
  EXPECT_EQ(code, DDPH_UNSUPPORTED);
  x.b.buffer.device = {kDLVulkan, 0};
  try {
    ddph::check_bucket(&x.b, ddph::BucketMemory::kHostOrCuda);
    ADD_FAILURE() << "a Vulkan buffer was accepted";
  } catch (const ddph::Error& e) {
    EXPECT_EQ(e.code(), DDPH_UNSUPPORTED);
    EXPECT_NE(std::string(e.what()).find("device type 7"), std::string::npos) << e.what();
  }
}

TEST(BucketCheck, EachDefectIsRefusedNamingItsField) {
  struct Case {
    const char* field;
    ddph_code_t code;
    void (*spoil)(Bucket&);
  };
  const Case cases[] = {
      {"struct_size", DDPH_INVALID_ARGUMENT, [](Bucket& x) { x.b.struct_size = 8; }},
      {"bucket.buffer.ndim", DDPH_INVALID_ARGUMENT, [](Bucket& x) { x.b.buffer.ndim = 2; }},
      {"bucket.buffer.data", DDPH_INVALID_ARGUMENT, [](Bucket& x) { x.b.buffer.data = nullptr; }},
      {"negative", DDPH_INVALID_ARGUMENT, [](Bucket& x) { x.shape[0] = -1; }},
      {"int8", DDPH_UNSUPPORTED, [](Bucket& x) { x.b.buffer.dtype = {kDLInt, 8, 1}; }},
      {"device", DDPH_UNSUPPORTED, [](Bucket& x) { x.b.buffer.device = {kDLCUDA, 0}; }},
      {"bucket.params is NULL", DDPH_INVALID_ARGUMENT, [](Bucket& x) { x.b.params = nullptr; }},
      {"params[0]", DDPH_INVALID_ARGUMENT, [](Bucket& x) { x.param.offset = 11; }},
      {"params[0].shape[1]", DDPH_INVALID_ARGUMENT, [](Bucket& x) { x.pshape[1] = -3; }},
      {"params[0].ndim", DDPH_INVALID_ARGUMENT, [](Bucket& x) { x.param.ndim = 40; }},
      // Found by tests/fuzz: counts whose products overflow int64.
      {"elements of that many bytes overflow", DDPH_INVALID_ARGUMENT,
       [](Bucket& x) { x.shape[0] = INT64_MAX / 2; }},
      {"params[0].shape overflows", DDPH_INVALID_ARGUMENT,
       [](Bucket& x) { x.pshape[0] = x.pshape[1] = INT64_MAX - 25; }},
  };
  for (const Case& c : cases) {
    Bucket x;
    c.spoil(x);
    ddph_code_t code = DDPH_OK;
    std::string message = refusal(&x.b, &code);
    EXPECT_EQ(code, c.code) << c.field << ": " << message;
    EXPECT_NE(message.find(c.field), std::string::npos) << "'" << message << "' does not name "
                                                        << c.field;
  }
  ddph_code_t code = DDPH_OK;
  EXPECT_NE(refusal(nullptr, &code).find("NULL"), std::string::npos);
}

// ABI 1.8: a bucket whose caller (the session) checked its params is not
// checked param by param again by the hook it reaches, but its buffer is,
// and a host that calls a hook directly without saying so gets every check.
TEST(BucketCheck, AHookTrustsOnlyTheParamsItsCallerSaysItChecked) {
#ifndef NDEBUG
  GTEST_SKIP() << "a debug build checks the params whatever the caller says";
#endif
  Bucket x;
  x.param.offset = 12;  // 6 elements from 12 overrun the 16 of the buffer
  ddph_code_t code = DDPH_OK;
  EXPECT_NE(refusal(&x.b, &code).find("lies outside the bucket"), std::string::npos);
  x.b.params_checked = 1;
  EXPECT_EQ(refusal(&x.b, &code), "");  // trusted: the caller vouched for them
  EXPECT_THROW(ddph::check_submitted_bucket(&x.b), ddph::Error);  // the session never trusts
  x.b.struct_size = DDPH_BUCKET_SIZE_V1_2;  // a 1.7 host's struct ends before the flag
  EXPECT_NE(refusal(&x.b, &code).find("lies outside the bucket"), std::string::npos);
  x.b.struct_size = sizeof x.b;
  x.b.buffer.ndim = 2;  // the buffer is always checked
  EXPECT_NE(refusal(&x.b, &code).find("ndim is 2"), std::string::npos);
}

// A wrapper's inner bucket keeps the flag only over a buffer of the same
// length: the params were checked against that many elements.
TEST(BucketCheck, BucketOverPassesTheCheckOnOnlyForTheSameLength) {
  Bucket x;
  x.b.params_checked = 1;
  uint16_t half[16] = {};
  int64_t same[1] = {16}, shorter[1] = {8};
  DLTensor inner = x.b.buffer;
  inner.data = half;
  inner.dtype = {kDLFloat, 16, 1};
  inner.shape = same;
  EXPECT_EQ(ddph::bucket_over(x.b, inner).params_checked, 1);
  inner.shape = shorter;
  EXPECT_EQ(ddph::bucket_over(x.b, inner).params_checked, 0);
  x.b.params_checked = 0;
  inner.shape = same;
  EXPECT_EQ(ddph::bucket_over(x.b, inner).params_checked, 0);
}

}  // namespace
