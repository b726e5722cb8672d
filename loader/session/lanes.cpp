#include "loader/session/lanes.h"

#include <utility>

namespace ddph {
namespace loader {

bool is_stateless(const HookChain& chain) {
  for (const auto& element : chain.elements) {
    const ddph_hook_ref_t& ref = element->ref;
    uint32_t flags = ref.hook->flags;
    // 1.9: a hook stateless with some options only says it per state.
    if (ref.hook->struct_size >= DDPH_HOOK_SIZE_V1_9 && ref.hook->state_flags != nullptr)
      flags =
          (flags & ~DDPH_HOOK_STATELESS) | (ref.hook->state_flags(ref.state) & DDPH_HOOK_STATELESS);
    if ((flags & DDPH_HOOK_STATELESS) == 0 || (flags & DDPH_HOOK_MAKES_INNER) != 0) return false;
  }
  return !chain.elements.empty();
}

void Lanes::add_first(ddph_comm_t* comm, size_t num_chains) {
  auto lane = std::make_unique<Lane>();
  lane->comm = comm;
  lane->chain_of.assign(num_chains, -1);
  lane->worker = std::make_unique<Worker>();
  lanes_.push_back(std::move(lane));
}

Lane& Lanes::add(ddph_comm_t* comm) {
  auto lane = std::make_unique<Lane>();
  lane->comm = comm;
  lane->owns_comm = true;
  lane->worker = std::make_unique<Worker>();
  lanes_.push_back(std::move(lane));
  return *lanes_.back();
}

const HookChain& Lanes::chain(const Lane& lane, size_t index, const Chains& session) const {
  if (&lane == lanes_.front().get()) return session.all()[index];
  return lane.own.all()[size_t(lane.chain_of[index])];
}

bool Lanes::on_lane_thread() const {
  for (const auto& lane : lanes_)
    if (lane->worker && lane->worker->on_worker_thread()) return true;
  return false;
}

void Lanes::drain() {
  for (auto& lane : lanes_) lane->worker.reset();
}

void Lanes::destroy() {
  drain();
  for (auto& lane : lanes_) {
    lane->own.destroy();  // outer first, before their communicator
    if (lane->owns_comm && lane->comm != nullptr && lane->comm->destroy != nullptr)
      lane->comm->destroy(lane->comm->ctx);
  }
  lanes_.clear();
}

void InOrder::finished(uint64_t number, std::function<void()> task, Worker& to) {
  std::lock_guard<std::mutex> lock(mu_);
  waiting_.emplace(number, std::move(task));
  // Posted under the lock: two lanes finishing at once post in order.
  for (auto it = waiting_.find(next_); it != waiting_.end(); it = waiting_.find(next_)) {
    to.post(std::move(it->second));
    waiting_.erase(it);
    ++next_;
  }
}

}  // namespace loader
}  // namespace ddph
