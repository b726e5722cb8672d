// The unbound buffers (and their scratch memory) of one collective call.
//
// When a collective fails on one pair, gloo's device thread keeps serving
// the others: a live peer's data can still land in a posted receive, and
// gloo signals that buffer while holding only the pair's lock. Freeing the
// buffers as the exception unwinds would race with that (a use-after-free,
// seen by TSan when a peer is killed mid-ring). So Communicator::run owns
// them and frees them only after break_with has closed every pair, which
// takes each pair's lock and stops its events.
#pragma once

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <cstddef>
#include <memory>
#include <vector>

namespace ddph {
namespace comm_gloo {

class PostedBuffers {
 public:
  explicit PostedBuffers(::gloo::Context& context) : context_(context) {}
  PostedBuffers(const PostedBuffers&) = delete;
  PostedBuffers& operator=(const PostedBuffers&) = delete;

  // An unbound buffer over [data, data + bytes), alive until the call ends.
  ::gloo::transport::UnboundBuffer& buffer(void* data, size_t bytes) {
    buffers_.push_back(context_.createUnboundBuffer(data, bytes));
    return *buffers_.back();
  }
  // Zeroed scratch memory with the same lifetime; it outlives every buffer
  // of the call, so a buffer may be made over it.
  char* scratch(size_t bytes) {
    scratch_.emplace_back(bytes);
    return scratch_.back().data();
  }
  // Whether anything may have been posted to a peer.
  bool any() const { return !buffers_.empty(); }

 private:
  ::gloo::Context& context_;
  // Destroyed after buffers_ (declared first), so no buffer outlives its memory.
  std::vector<std::vector<char>> scratch_;
  std::vector<std::unique_ptr<::gloo::transport::UnboundBuffer>> buffers_;
};

}  // namespace comm_gloo
}  // namespace ddph
