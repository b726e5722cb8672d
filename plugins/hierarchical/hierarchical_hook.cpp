// Hierarchical reduction (Horovod's and BytePS's hierarchical allreduce, for
// any hook): a bucket is first averaged uncompressed among the ranks of one
// machine, where bandwidth is cheap; then the wrapped hook (quantization,
// powersgd, fp16, ...) runs among one leader rank per machine, so only the
// leaders' compressed traffic crosses machines; then each leader broadcasts
// the result to its machine.
//
// Numerics: machines hold equal numbers of ranks (machines.h), the first
// phase gives each leader its machine's mean, and the inner hook averages
// over the leaders, so the result is the mean over the world, as the flat
// inner hook would give it, up to the rounding of the two-level mean and
// the inner hook's own error on the machines' means.
//
// State: only the leaders create the inner hook and hold its state (error
// feedback, PowerSGD's factors). A checkpoint from a leader (rank 0 always
// is one) loads on every rank; one from another rank holds no inner state.
#include <memory>
#include <string>

#include "core/base/host.h"
#include "core/base/le_bytes.h"
#include "core/base/options.h"
#include "core/base/tensor.h"
#include "core/comm/comm_call.h"
#include "core/hook/group_comm.h"
#include "core/hook/hook_plugin.h"
#include "plugins/hierarchical/leader_status.h"
#include "plugins/hierarchical/machines.h"

namespace ddph {
namespace hierarchical {
namespace {

constexpr const char* kHook = "hierarchical/hierarchical";
constexpr char kMagic[8] = {'D', 'D', 'P', 'H', 'H', 'I', 'E', 'R'};
constexpr uint32_t kStateVersion = 2;  // 1: the checksum left the inner state out

std::vector<int> leader_colors(const Machines& m) {
  std::vector<int> colors(m.colors.size());
  for (size_t r = 0; r < colors.size(); ++r) colors[r] = m.colors[r] == int(r) ? 0 : -1;
  return colors;
}

void append_to_string(void* sink, const void* bytes, size_t n) {
  if (n != 0) static_cast<std::string*>(sink)->append(static_cast<const char*>(bytes), n);
}

const ddph_option_spec_t kSpecs[] = {
    spec_int("local_size", "-1",
             "ranks per machine (consecutive ranks: [0, n), [n, 2n), ...); -1: the ranks that "
             "share a host name (DDPH_HOSTNAME overrides it)",
             -1, 1 << 20),
};

class HierarchicalHook : public Hook {
 public:
  static constexpr HookListing kListing{
      "hierarchical",
      "averages inside each machine, runs the wrapped hook among one leader per machine, "
      "broadcasts back"};
  static constexpr uint32_t kFlags = DDPH_HOOK_NEEDS_INNER | DDPH_HOOK_MAKES_INNER;
  // Only collectives on the bucket's memory and stream, and the inner hook,
  // which answers for its own CUDA path.
  static constexpr bool kRunsOnCuda = true;
  static OptionSpecs option_specs() { return kSpecs; }

  explicit HierarchicalHook(const ddph_hook_init_t& init) : world_(init.comm) {
    Options o(init.options, init.num_options);
    // Collective from here on: every rank creates this hook with the same options.
    const Machines m = find_machines(world_, o.get_int("local_size"), kHook);
    const int rank = comm_rank(world_);
    leader_rank_ = m.colors[size_t(rank)];
    leader_ = leader_rank_ == rank;
    if (m.local_size > 1) local_ = std::make_unique<GroupComm>(world_, m.colors, kHook);
    if (!can_make_inner(init)) {
      // A loader older than 1.2 made the inner hook on the world: every rank
      // runs it on its machine's mean. The result is the same mean; only
      // the saving in traffic between machines is lost.
      log(DDPH_LOG_WARN, "hierarchical",
          "the loader cannot make the inner hook on the leaders (ABI < 1.2): it runs on every "
          "rank, so no traffic between machines is saved");
      inner_ = *init.inner;
      owns_inner_ = false;
      leader_ = true;
      check_inner();
      return;
    }
    leaders_ = std::make_unique<GroupComm>(world_, leader_colors(m), kHook);
    Outcome made;
    if (leader_) {
      made.capture([&] {
        DDPH_CALL(init.make_inner(init.inner_ctx, leaders_->get(), &inner_));
        check_inner();
      });
      made.agree(leaders_->get(), "creating the inner hook");
    }
    if (local_) made.share_from_leader(local_->get(), leader_rank_, "creating the inner hook");
    if (!made.ok()) release_inner();
    made.rethrow();
  }

  ~HierarchicalHook() override { release_inner(); }  // before the leaders' communicator

  void run(const ddph_bucket_t& bucket, DType dtype, const Completion& done) override {
    const int64_t n = bucket.buffer.shape[0];
    const uint64_t bytes = uint64_t(n) * dtype_size(dtype);
    count_in(bytes);
    FlatTensor buf(data_ptr(bucket.buffer), dtype, n, bucket.buffer.device);
    ddph_comm_t* local = local_ ? local_->get() : nullptr;
    if (local != nullptr) {
      count_out(bytes);
      comm_allreduce(local, buf, DDPH_AVG, bucket.stream);
    }
    Outcome inner;
    if (leader_) inner.capture([&] { run_hook_blocking(inner_, bucket); });
    if (local != nullptr && owns_inner_) {
      // A small host message, which every communicator carries (NCCL stages
      // it through the GPU), so a GPU bucket's failure is named too.
      inner.share_from_leader(local, leader_rank_, "the inner hook");
      inner.rethrow();
      count_out(bytes);
      comm_broadcast(local, buf, 0, bucket.stream);
    }
    inner.rethrow();
    done.ok();
  }

  // Bytes out: this rank's own collectives, plus the inner hook's on a leader.
  void stats(ddph_stats_t* out) const override {
    Hook::stats(out);
    if (inner_.hook == nullptr) return;
    ddph_stats_t s{};
    s.struct_size = sizeof s;
    take_inner_bytes_out(inner_, &s);
    out->bytes_out += s.bytes_out;
  }

  // The blob: core's checksummed frame (magic DDPHHIER, version 2) around
  // u8 has_inner, u64 inner size and the inner chain's own blob, so that the
  // checksum covers the inner bytes too, also on a rank that skips them.
  void save_state(ddph_write_fn write, void* sink) override {
    std::string inner;
    // A loader-made inner hook (ABI < 1.2) is checkpointed by the loader.
    const bool has = owns_inner_ && inner_.hook != nullptr && inner_.hook->save_state != nullptr;
    if (has) DDPH_CALL(inner_.hook->save_state(inner_.state, &append_to_string, &inner));
    LeWriter w;
    put_frame_header(w, kMagic, kStateVersion);
    w.put(has ? 1 : 0, 1);
    w.put(inner.size(), 8);
    w.put_bytes(inner.data(), inner.size());
    const std::string blob = finish_frame(w);
    write(sink, blob.data(), blob.size());
  }

  void load_state(const void* bytes, size_t n) override {
    LeReader r =
        open_frame(bytes, n, kMagic, kStateVersion, "hierarchical state", "the hierarchical hook");
    const uint64_t has = r.get(1, "has_inner");
    const uint64_t size = r.get(8, "inner size");
    DDPH_CHECK(has <= 1 && (has == 1 || size == 0), DDPH_INVALID_ARGUMENT,
               kHook << " state: has_inner is " << has << " with " << size
                     << " bytes of inner state; it is 1, or 0 with none");
    DDPH_CHECK(size == r.left(), DDPH_INVALID_ARGUMENT,
               kHook << " state: the inner hook's state should be " << size << " bytes, but "
                     << r.left() << " follow the header");
    const uint8_t* inner = r.take(size_t(size), "the inner state");
    const bool wants = owns_inner_ && inner_.hook != nullptr && inner_.hook->load_state != nullptr;
    if (!wants) return;  // not a leader, or a stateless inner hook
    DDPH_CHECK(has == 1, DDPH_INVALID_ARGUMENT,
               kHook << " state: this blob holds no state of the inner hook (it was saved on a "
                        "rank that is not a machine leader); save the checkpoint on rank 0");
    DDPH_CALL(inner_.hook->load_state(inner_.state, inner, size_t(size)));
  }

 private:
  // Inner hooks that work on the parameters would touch them on the leaders
  // only; their result must land in the bucket for the broadcast to carry it.
  void check_inner() const {
    const char* name = inner_.hook->name != nullptr ? inner_.hook->name : "?";
    DDPH_CHECK(!(inner_.hook->flags & (DDPH_HOOK_NEEDS_PARAMS | DDPH_HOOK_RESULT_ELSEWHERE)),
               DDPH_UNSUPPORTED,
               kHook << ": the inner hook '" << name
                     << "' works on the parameters or leaves its result outside the bucket, "
                        "which only the machine leaders would see; wrap hierarchical inside it "
                        "instead (e.g. hook_then_optimizer around hierarchical)");
  }

  void release_inner() {
    if (owns_inner_ && inner_.hook != nullptr && inner_.state != nullptr)
      inner_.hook->destroy(inner_.state);
    inner_ = ddph_hook_ref_t{};
  }

  ddph_comm_t* world_;
  int leader_rank_ = 0;  // world rank of this machine's leader
  bool leader_ = false;
  std::unique_ptr<GroupComm> local_;    // this machine's ranks; NULL with one rank per machine
  std::unique_ptr<GroupComm> leaders_;  // one rank per machine; get() is NULL off the leaders
  ddph_hook_ref_t inner_{};             // leaders only: made on leaders_, owned here
  bool owns_inner_ = true;              // false: the loader's, made on the world (ABI < 1.2)
};

}  // namespace

}  // namespace hierarchical
}  // namespace ddph

DDPH_DEFINE_HOOK_PLUGIN("hierarchical", "0.1.0",
                        &ddph::hook_table<ddph::hierarchical::HierarchicalHook>())
