// ABI 1.10: the loader's take_residuals asks every hook of a chain that
// offers take_residual (a 1.10-sized table, the entry not NULL), outer
// first, and returns the first error without asking the hooks after it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "loader/session/hook_chain.h"

namespace {

using ddph::loader::ChainElement;
using ddph::loader::ChainElements;

std::vector<std::string> g_calls;  // the states asked, in order

ddph_error_t* adds_one(void* state, const ddph_bucket_t* bucket) {
  g_calls.push_back(static_cast<const char*>(state));
  static_cast<float*>(bucket->buffer.data)[0] += 1;
  return nullptr;
}

ddph_error_t* fails(void* state, const ddph_bucket_t*) {
  g_calls.push_back(static_cast<const char*>(state));
  return ddph_host()->error_new(DDPH_INVALID_ARGUMENT, "no residual of this layout");
}

// A table of the given size whose take_residual is fn.
ddph_hook_t table(size_t size, ddph_error_t* (*fn)(void*, const ddph_bucket_t*)) {
  ddph_hook_t t{};
  t.struct_size = size;
  t.name = "fake";
  t.take_residual = fn;
  return t;
}

void add(ChainElements& chain, const ddph_hook_t* t, const char* name) {
  auto e = std::make_unique<ChainElement>();
  e->ref.hook = t;
  e->ref.state = const_cast<char*>(name);
  chain.push_back(std::move(e));
}

struct Bucket {
  float value = 0;
  int64_t shape = 1;
  ddph_bucket_t b{};
  Bucket() {
    b.struct_size = sizeof b;
    b.buffer.data = &value;
    b.buffer.ndim = 1;
    b.buffer.dtype = DLDataType{kDLFloat, 32, 1};
    b.buffer.shape = &shape;
  }
};

TEST(TakeResiduals, AsksEveryHookThatOffersItOuterFirst) {
  const ddph_hook_t v1_10 = table(DDPH_HOOK_SIZE_V1_10, &adds_one);
  // A 1.9 table ends before take_residual: whatever lies there is not read.
  const ddph_hook_t v1_9 = table(DDPH_HOOK_SIZE_V1_9, &fails);
  const ddph_hook_t none = table(DDPH_HOOK_SIZE_V1_10, nullptr);
  ChainElements chain;
  add(chain, &v1_10, "outer");
  add(chain, &v1_9, "older");
  add(chain, &none, "none");
  add(chain, &v1_10, "inner");
  Bucket bucket;
  g_calls.clear();
  EXPECT_EQ(ddph::loader::take_residuals(chain, bucket.b), nullptr);
  EXPECT_EQ(g_calls, (std::vector<std::string>{"outer", "inner"}));
  EXPECT_EQ(bucket.value, 2.0f);
}

TEST(TakeResiduals, StopsAtTheFirstError) {
  const ddph_hook_t failing = table(DDPH_HOOK_SIZE_V1_10, &fails);
  const ddph_hook_t adding = table(DDPH_HOOK_SIZE_V1_10, &adds_one);
  ChainElements chain;
  add(chain, &failing, "outer");
  add(chain, &adding, "inner");
  Bucket bucket;
  g_calls.clear();
  ddph_error_t* e = ddph::loader::take_residuals(chain, bucket.b);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(ddph_error_code(e), DDPH_INVALID_ARGUMENT);
  EXPECT_STREQ(ddph_error_message(e), "no residual of this layout");
  ddph_error_free(e);
  EXPECT_EQ(g_calls, (std::vector<std::string>{"outer"}));
  EXPECT_EQ(bucket.value, 0.0f);
}

}  // namespace
