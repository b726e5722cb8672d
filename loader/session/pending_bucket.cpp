#include "loader/session/pending_bucket.h"

#include "core/hook/bucket_check.h"

namespace ddph {
namespace loader {
namespace {

// The session whose host done callback this thread is running, if any.
thread_local const void* t_in_done_of = nullptr;

}  // namespace

PendingBucket::PendingBucket(const ddph_bucket_t* b, ddph_done_fn d, void* u) : done(d), user(u) {
  check_submitted_bucket(b);
  fingerprint = fingerprint_of(*b);
  bytes = bucket_bytes(*b);
  // Copy only the fields this loader knows; a newer, longer struct is fine.
  bucket.struct_size = sizeof bucket;
  bucket.index = b->index;
  bucket.step = b->step;
  bucket.is_last = b->is_last;
  bucket.buffer = b->buffer;
  bucket.stream = b->stream;
  // What the hooks need not check again (ABI 1.8); a host's own claim in
  // *b is not read.
  bucket.params_checked = 1;
  buffer_shape_ = b->buffer.shape[0];
  bucket.buffer.shape = &buffer_shape_;
  if (b->buffer.strides != nullptr) {
    buffer_stride_ = b->buffer.strides[0];
    bucket.buffer.strides = &buffer_stride_;
  }
  params_.resize(b->num_params);
  shapes_.reserve(b->num_params * 3);
  for (size_t i = 0; i < b->num_params; ++i) {
    const ddph_param_t& src = b->params[i];
    ddph_param_t& dst = params_[i];
    dst = ddph_param_t{};
    dst.struct_size = sizeof dst;
    dst.offset = src.offset;
    dst.ndim = src.ndim;
    dst.data = src.data;
    dst.shape = copy(src.shape, src.ndim);
    if (src.data.data != nullptr) {
      dst.data.shape = const_cast<int64_t*>(copy(src.data.shape, src.data.ndim));
      dst.data.strides = const_cast<int64_t*>(copy(src.data.strides, src.data.ndim));
    }
  }
  bucket.num_params = params_.size();
  bucket.params = params_.empty() ? nullptr : params_.data();
  // A 1.0/1.1 host's struct ends before param_ids: it has none.
  if (b->struct_size >= DDPH_BUCKET_SIZE_V1_2 && b->param_ids != nullptr && !params_.empty()) {
    param_ids_.assign(b->param_ids, b->param_ids + b->num_params);
    bucket.param_ids = param_ids_.data();
  }
}

const int64_t* PendingBucket::copy(const int64_t* values, int32_t n) {
  if (values == nullptr || n <= 0) return values;
  shapes_.emplace_back(values, values + n);
  return shapes_.back().data();
}

void call_done(const PendingBucket& pending, ddph_error_t* error, const void* session) {
  const void* outer = t_in_done_of;
  t_in_done_of = session;
  pending.done(pending.user, error);
  t_in_done_of = outer;
}

bool in_done_of(const void* session) {
  return t_in_done_of == session;
}

}  // namespace loader
}  // namespace ddph
