// The zero hooks: ZeRO overlapped with DDP. Each rank keeps the optimizer
// state of its share of the parameters only (layout.h says which), steps
// that share with core's functional optimizers once its gradient is
// reduced, and hands the updated values to the other ranks:
// - protocol allreduce (PyTorch's ddp_zero_hook): the wrapped hook reduces
//   the whole bucket, each owner steps its parameters and broadcasts them;
// - protocol reduce_scatter (ZeRO-2): a reduce-scatter leaves each rank the
//   mean of its 1/world of the bucket, the rank steps it and an allgather
//   hands every rank every range: the bytes of one allreduce. With bits 8
//   or 4 the reduce-scatter sends quantized gradients (ZeRO++'s qgZ,
//   core/quant's codec) and the allgather float32 parameters.
// zero_step_interleaved steps each bucket as it is reduced; zero_step keeps
// the reduced gradients of its share (1/world of them) and steps every
// bucket at the step's last one, as PyTorch's hook_with_zero_step does.
// Every rank walks the same buckets, pieces and shares in the same order,
// so the collectives pair up without any ownership being sent.
//
// Host and CUDA buckets run the same code: on a GPU the copies, the codec,
// the optimizer steps (its state in device memory, device_states.h) and the
// communicator's calls are enqueued on the bucket's stream, and nothing
// waits for the GPU inside run() but a host-memory communicator's staging
// and the quantized exchange's finiteness check (core/quant/codec.h).
#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/base/phase_span.h"
#include "core/base/tensor.h"
#include "core/comm/comm_call.h"
#include "core/hook/hook.h"
#include "core/hook/param_view.h"
#include "core/kernels/on_device.h"
#include "core/memory/resident_floats.h"
#include "core/optim/device_states.h"
#include "core/quant/codec.h"
#include "core/quant/rank_header.h"
#include "core/quant/scatter.h"
#include "plugins/zero/assignment.h"
#include "plugins/zero/hooks.h"
#include "plugins/zero/layout.h"
#include "plugins/zero/options.h"
#include "plugins/zero/shard_state.h"
#include "plugins/zero/step_checks.h"

namespace ddph {
namespace zero {
namespace {

// One bucket of the current step whose pieces are stepped at its end.
struct Deferred {
  uint64_t index = 0, step = 0;
  std::vector<float*> params;    // the host's parameters, lent for the step
  const float* grads = nullptr;  // reduced gradients of bucket elements [base, ...)
  size_t base = 0;
  Where at{DLDevice{kDLCPU, 0}, nullptr};  // the bucket's memory and stream
};

// Workspace keys of the buffers the zero hooks add to core/quant's
// exchange (scatter.h reserves 2 to 99 for them).
enum : uint64_t { kShareKey = 2, kGatherKey = 3 };

void copy_floats(const Where& at, const float* from, float* to, size_t n) {
  cast_into(at, DType::F32, from, DType::F32, to, n);
}

// A fresh run id (never 0, which means "unknown"): each rank draws one, and
// the ranks take rank 0's at the first step.
uint64_t fresh_run_id() {
  std::random_device device;
  uint64_t id = 0;
  while (id == 0) id = (uint64_t(device()) << 32) ^ uint64_t(device());
  return id;
}

// What each rank tells the others before a step's parameters move
// (ZeroHook::agree_before_stepping): its run id, the run of the shards it
// loaded since the last step (0: none, or unknown), and the length of the
// problems it found (the texts follow in a second exchange when a rank has
// any).
struct Verdict {
  uint64_t run_id = 0, loaded_run = 0, problem_bytes = 0;
};
constexpr size_t kVerdictWords = 3;
static_assert(sizeof(Verdict) == kVerdictWords * sizeof(uint64_t), "exchanged as words");

template <bool kInterleaved>
class ZeroHook : public Hook {
 public:
  static constexpr uint32_t kFlags =
      DDPH_HOOK_NEEDS_INNER | DDPH_HOOK_NEEDS_PARAMS | DDPH_HOOK_STEPS_OPTIMIZER;
  static constexpr const char* kName = kInterleaved ? "zero_step_interleaved" : "zero_step";
  static constexpr bool kRunsOnCuda = true;
  static void check_options(OptionCheck& c) { check_zero_options(c, kName); }

  explicit ZeroHook(const ddph_hook_init_t& init)
      : inner_(*init.inner),
        comm_(init.comm),
        options_(parse_zero_options(init, kName)),
        rank_(comm_rank(comm_)),
        world_(comm_size(comm_)) {
    const char* inner_name = inner_.hook->name ? inner_.hook->name : "?";
    DDPH_CHECK(!(inner_.hook->flags & DDPH_HOOK_RESULT_ELSEWHERE), DDPH_UNSUPPORTED,
               kName << ": the wrapped hook '" << inner_name
                     << "' does not leave the reduced gradient in the bucket buffer "
                        "(DDPH_HOOK_RESULT_ELSEWHERE), so there is no gradient to step the "
                        "optimizer with; wrap a hook whose result lands in the bucket, e.g. "
                        "default/allreduce");
    if (options_.protocol == Protocol::kReduceScatter) {
      // The protocol averages the gradients itself; a wrapped hook that does
      // something else (compresses, skips) would be silently ignored.
      DDPH_CHECK(std::string(inner_name) == "allreduce", DDPH_INVALID_ARGUMENT,
                 kName << ": protocol reduce_scatter averages the gradients itself, as "
                          "default/allreduce does, so it wraps default/allreduce; it was given '"
                       << inner_name << "' (use protocol: allreduce to reduce with it)");
      DDPH_CHECK(options_.bits == 32 || comm_can_alltoallv(comm_), DDPH_UNSUPPORTED,
                 kName << ": bits " << options_.bits
                       << " sends each rank its range in one alltoallv, which this "
                          "communicator has not (nor send/recv); use bits: 32");
    }
  }

  void run(const ddph_bucket_t& bucket, DType dtype, const Completion& done) override {
    DDPH_CHECK(dtype == DType::F32, DDPH_UNSUPPORTED,
               kName << ": bucket dtype " << dtype_name(dtype)
                     << " is not supported: the zero hooks step float32 gradients into float32 "
                        "parameters");
    const Where at = where_of(bucket);
    require_cuda_build(at, kName);
    // The rest of a step whose earlier bucket every rank refused
    // (zero_step_interleaved) is refused too, on every rank alike and
    // without a collective, so that a failed step steps nothing.
    if (refusing_ && bucket.step == step_) {
      if (bucket.is_last) refusing_ = false;
      DDPH_FAIL(DDPH_INVALID_ARGUMENT, kName << ": bucket " << bucket.index << " of step "
                                             << bucket.step
                                             << " is not stepped: an earlier bucket of the step "
                                                "was refused on every rank");
    }
    refusing_ = false;
    // Buckets kept from a step that failed before its last bucket are
    // dropped: their parameters were lent for that step only.
    if (bucket.step != step_) {
      step_ = bucket.step;
      deferred_.clear();
      buckets_this_step_ = 0;
      problems_.clear();
    }
    // Every parameter is checked, the ones other ranks own too: this rank
    // writes their broadcast or gathered values. A parameter this rank was
    // not lent is told to every rank before anything is stepped
    // (agree_before_stepping), not here: the other ranks would wait for
    // this one in the bucket's collectives.
    params_.assign(bucket.num_params, nullptr);
    for (size_t i = 0; i < bucket.num_params; ++i) {
      try {
        params_[i] = param_f32_data(bucket, i, kName, "the parameter (its own tensor)",
                                    BucketMemory::kHostOrCuda);
      } catch (const Error& e) {
        std::string what = e.what();
        const std::string prefix = std::string(kName) + ": ";
        if (what.compare(0, prefix.size(), prefix) == 0) what.erase(0, prefix.size());
        note_problem("bucket " + std::to_string(bucket.index) + " of step " +
                     std::to_string(bucket.step) + ": " + what);
      }
    }
    count_in(uint64_t(bucket.buffer.shape[0]) * sizeof(float));
    const BucketLayout* learned = nullptr;
    try {
      learned = &learn(bucket);
    } catch (const Error&) {
      // Refused on every rank alike (the layouts are compared first).
      refusing_ = !bucket.is_last;
      throw;
    }
    const BucketLayout& layout = *learned;
    ++buckets_this_step_;

    // Both protocols leave the reduced gradients in the bucket buffer:
    // reduce_scatter this rank's range of them, in place.
    float* buffer = static_cast<float*>(data_ptr(bucket.buffer));
    const float* reduced = buffer;
    if (options_.protocol == Protocol::kAllreduce) {
      run_inner_for_step(inner_, bucket, kName);
    } else if (options_.bits < 32 && world_ > 1) {
      quantized_scatter_mean(buffer, layout, bucket.step, at);
    } else {
      reduce_scatter_mean(buffer, layout.n, at);
    }

    const bool owners_known = pieces_.count(layout.index) != 0;
    // The first step, and the first after a load or a regroup, is checked
    // whole before anything of it is stepped: zero_step_interleaved then
    // keeps its buckets for the step's last one, as zero_step does.
    const bool whole_step_checked = layout_hash_ == 0 || pending_load_;
    if (bucket.is_last && owners_known) {
      // The step's end: the kept buckets, then this one from its own
      // buffers, with no copy (all of a one-bucket step).
      agree_before_stepping(true);
      step_kept(at);
      step_and_share(layout, params_.data(), reduced, /*base=*/0, at);
      end_step();
    } else if (kInterleaved && owners_known && !whole_step_checked) {
      agree_before_stepping(false);
      step_and_share(layout, params_.data(), reduced, /*base=*/0, at);
    } else {
      Deferred d;
      d.index = layout.index;
      d.step = bucket.step;
      d.params = params_;
      d.at = at;
      // Only this rank's span is kept, unless no owner is known yet
      // (shard_buckets' first step): then the whole bucket.
      Range keep{0, layout.n};
      if (options_.protocol == Protocol::kReduceScatter)
        keep = rank_range(layout.n, world_, rank_);
      else if (owners_known)
        keep = owned_span(layout, pieces_.at(layout.index), rank_);
      d.base = keep.begin;
      // Storage kept per bucket index from step to step, in the bucket's
      // memory: a fresh vector would be faulted in page by page at every
      // step.
      ResidentFloats& kept = kept_grads_[layout.index][0];
      kept.fit(at, keep.count);
      copy_floats(at, reduced + keep.begin, kept.data(), keep.count);
      d.grads = kept.data();
      deferred_.push_back(std::move(d));
      if (bucket.is_last) {
        agree_before_stepping(true);
        step_kept(at);
        end_step();
      }
    }
    done.ok();
  }

  void save_state(ddph_write_fn write, void* sink) override {
    if (!full_.empty()) {
      // A loaded full state not yet cut into pieces (no step since the
      // load): saved as it came, so nothing of it is lost.
      const std::string blob = optim::encode_state(full_, options_.optim.kind);
      write(sink, blob.data(), blob.size());
      return;
    }
    Shard s;
    s.kind = options_.optim.kind;
    s.world = uint32_t(world_);
    s.rank = uint32_t(rank_);
    s.layout_hash = layout_hash_ != 0 ? layout_hash_ : shard_hash_;
    // A shard loaded since the last step is saved as the run it came from.
    s.run_id = pending_load_ ? loaded_run_ : run_agreed_ ? run_id_ : 0;
    s.pieces = states_;
    device_.download_into(&s.pieces, state_of);
    for (const auto& kv : residuals_) s.residuals[kv.first] = kv.second[kOwn].to_host();
    const std::string blob = encode_shard(s);
    write(sink, blob.data(), blob.size());
  }

  void load_state(const void* bytes, size_t n) override {
    LoadedState loaded = decode_loaded(bytes, n, options_.optim.kind, kName);
    // bits 8 or 4: this rank's own shard brings back its residuals; joined
    // shards (another world, or a consolidated state) and version 1 shards
    // start them at zero, as the first step did (docs/zero.md). Nothing
    // changes if the checkpoint is refused.
    if (loaded.single_shard) {
      const Shard& s = loaded.shard;
      DDPH_CHECK(s.world == uint32_t(world_) && s.rank == uint32_t(rank_), DDPH_INVALID_ARGUMENT,
                 kName << ": the checkpoint is the shard of rank " << s.rank << " of a world of "
                       << s.world << ", but this is rank " << rank_ << " of " << world_
                       << "; to load at another world size or rank, load every rank's shard "
                          "joined (docs/zero.md)");
      DDPH_CHECK(layout_hash_ == 0 || s.layout_hash == 0 || s.layout_hash == layout_hash_,
                 DDPH_INVALID_ARGUMENT, kName << ": " << kOtherLayout);
      device_.clear();
      states_ = s.pieces;
      residuals_.clear();
      for (const auto& kv : s.residuals) residuals_[kv.first][kOwn].set_host(kv.second);
      shard_hash_ = s.layout_hash;
      from_shard_ = true;
      full_.clear();
      loaded_run_ = s.run_id;
    } else {
      device_.clear();
      states_.clear();
      residuals_.clear();
      full_ = std::move(loaded.full);
      from_shard_ = false;
      shard_hash_ = 0;
      loaded_run_ = loaded.run_id;
    }
    // Checked at the next step's end, against the run's buckets and every
    // rank's load, before anything moves.
    pending_load_ = true;
  }

  void stats(ddph_stats_t* out) const override {
    Hook::stats(out);
    const uint64_t own = out->bytes_out;
    if (options_.protocol == Protocol::kAllreduce) {
      take_inner_bytes_out(inner_, out);
      out->bytes_out += own;
    }
  }

 private:
  static optim::ParamState& state_of(PieceState& p) { return p.state; }

  static constexpr const char* kOtherLayout =
      "the checkpoint is a shard of another bucket layout or protocol; its optimizer state "
      "belongs to other parameters. Load every rank's shard joined (docs/zero.md), which "
      "reshards to any layout";

  // The bucket's layout, the same as before and on every rank. A host may
  // regroup its parameters between steps (PyTorch DDP rebuilds its buckets
  // after the first step): the shards are then re-cut (relayout), provided
  // the change shows at the step's first bucket, before anything of the
  // step was stepped under the old layout.
  const BucketLayout& learn(const ddph_bucket_t& bucket) {
    BucketLayout now = layout_of(bucket);
    auto known = layouts_.find(bucket.index);
    if (known != layouts_.end() && known->second == now) return known->second;
    if (known != layouts_.end() || layout_hash_ != 0) {
      DDPH_CHECK(buckets_this_step_ == 0, DDPH_INVALID_ARGUMENT,
                 kName << ": bucket " << bucket.index
                       << (known != layouts_.end() ? " holds other parameters than at step "
                                                   : " is new since step ")
                       << first_step_
                       << ", but not at the step's first bucket; a host that regroups its "
                          "parameters must change its buckets between steps");
      relayout();
    }
    if (layouts_.empty()) first_step_ = bucket.step;
    agree_on(now);
    // The same on every rank from here on (the layouts agree).
    check_keys(now);
    const BucketLayout& l = layouts_.emplace(bucket.index, std::move(now)).first->second;
    if (options_.protocol == Protocol::kReduceScatter) {
      pieces_[l.index] = range_pieces(l, world_);
    } else if (!options_.shard_buckets) {
      const Share whole{l.index, 0, l.keys.size(), int(l.index % uint64_t(world_))};
      shares_[l.index] = {whole};
      pieces_[l.index] = share_pieces(l, shares_[l.index]);
    }
    return l;
  }

  // Ranks that disagree on a bucket would step and send different
  // parameters: every rank's layout hash is compared before any gradient
  // moves. (Their options, bits included, were compared when the session
  // opened.)
  void agree_on(const BucketLayout& l) {
    if (world_ == 1) return;
    uint64_t mine = layout_hash(l);
    std::vector<uint64_t> all(static_cast<size_t>(world_));
    FlatTensor send(&mine, DType::U8, 8);
    FlatTensor recv(all.data(), DType::U8, int64_t(8 * all.size()));
    comm_allgather(comm_, send, recv, nullptr);
    for (int r = 0; r < world_; ++r)
      DDPH_CHECK(all[size_t(r)] == mine, DDPH_INVALID_ARGUMENT,
                 kName << ": rank " << r << " and rank " << rank_ << " disagree on bucket "
                       << l.index
                       << "'s parameters (their count, sizes, offsets or ids); every rank must "
                          "hand the hook the same buckets");
  }

  // Gathers every rank's pieces into every parameter's whole state (full_),
  // to be cut again for the new layout as its pieces are first stepped, and
  // forgets the old layout. Collective: every rank meets the same changed
  // bucket (their layouts are compared right after).
  void relayout() {
    Shard mine;
    mine.kind = options_.optim.kind;
    mine.world = uint32_t(world_);
    mine.rank = uint32_t(rank_);
    mine.layout_hash = layout_hash_;
    device_.download_into(&states_, state_of);
    device_.clear();
    mine.pieces = std::move(states_);
    std::vector<Shard> shards;
    if (world_ == 1) {
      shards.push_back(std::move(mine));
    } else {
      const std::vector<std::string> blobs = allgather_blobs(comm_, world_, encode_shard(mine));
      for (const std::string& blob : blobs)
        shards.push_back(decode_shard(blob.data(), blob.size(), options_.optim.kind, kName));
    }
    optim::StateMap joined = join_pieces(shards, kName);
    // A full state loaded since the last step has not been cut yet: its
    // parameters keep it (what was stepped since wins, though nothing was).
    for (auto& kv : full_) joined.emplace(kv.first, std::move(kv.second));
    full_ = std::move(joined);
    states_.clear();
    layouts_.clear();
    pieces_.clear();
    shares_.clear();
    layout_hash_ = 0;
    from_shard_ = false;
    shard_hash_ = 0;
  }

  // The step's last bucket (in at's memory): owners of shard_buckets are
  // known now; every deferred bucket is stepped and shared, in index order,
  // on the last bucket's stream.
  void step_kept(const Where& at) {
    // agree_before_stepping() found the loaded shard's layout is this one.
    DDPH_CHECK(shard_hash_ == 0 || shard_hash_ == layout_hash_, DDPH_INTERNAL,
               kName << ": " << kOtherLayout);
    std::sort(deferred_.begin(), deferred_.end(),
              [](const Deferred& a, const Deferred& b) { return a.index < b.index; });
    for (Deferred& d : deferred_) {
      DDPH_CHECK(d.at.device.device_type == at.device.device_type &&
                     d.at.device.device_id == at.device.device_id,
                 DDPH_UNSUPPORTED,
                 kName << ": bucket " << d.index << " of step " << d.step
                       << " is in other memory (host or GPU) than the step's last bucket; a "
                          "step's buckets must all be on the host or on one GPU");
      // Its gradients were reduced and kept on its own stream.
      order_after(at, d.at, kName);
      step_and_share(layouts_.at(d.index), d.params.data(), d.grads, d.base, at);
    }
    // The next step's reduce of each kept bucket, on its own stream, must
    // not overwrite what this stream still reads.
    for (const Deferred& d : deferred_) order_after(d.at, at, kName);
    deferred_.clear();
  }

  // After the step's last bucket was stepped: every owned piece took its
  // slice of a loaded or re-cut state.
  void end_step() {
    full_.clear();
    buckets_this_step_ = 0;
    problems_.clear();
  }

  void note_problem(const std::string& problem) {
    if (!problems_.empty()) problems_ += "; ";
    problems_ += problem;
  }

  // A new bucket layout (the same on every rank): parameters to step, each
  // key once in the bucket and in no other bucket of the step. Two
  // parameters under one id would share one optimizer state.
  void check_keys(const BucketLayout& now) const {
    DDPH_CHECK(!now.keys.empty(), DDPH_INVALID_ARGUMENT,
               kName << ": bucket " << now.index << " (" << now.n
                     << " gradient elements) carries no parameters, so none of its gradients "
                        "would be stepped, while the host skips its own optimizer step for "
                        "this hook; lend each bucket's parameters (ddph_bucket_t.params)");
    std::map<optim::ParamKey, size_t> seen;
    for (size_t i = 0; i < now.keys.size(); ++i) {
      const auto at = seen.emplace(now.keys[i], i);
      DDPH_CHECK(at.second, DDPH_INVALID_ARGUMENT,
                 kName << ": bucket " << now.index << " holds " << optim::key_text(now.keys[i])
                       << " twice (params[" << at.first->second << "] and params[" << i
                       << "]); each parameter needs an id of its own (ddph_bucket_t.param_ids), "
                          "or two parameters would share one optimizer state");
    }
    for (const auto& kv : layouts_) {
      if (kv.first == now.index) continue;
      for (const optim::ParamKey& k : kv.second.keys)
        DDPH_CHECK(seen.count(k) == 0, DDPH_INVALID_ARGUMENT,
                   kName << ": " << optim::key_text(k) << " is in bucket " << kv.first
                         << " and in bucket " << now.index
                         << "; each parameter needs an id of its own (ddph_bucket_t.param_ids), "
                            "or two parameters would share one optimizer state");
    }
  }

  // The layout hash of the step's buckets, once all are known (the first
  // step's last bucket); with shard_buckets the owners too.
  void fix_layout_hash() {
    if (layout_hash_ != 0) return;
    std::vector<const BucketLayout*> all;
    for (const auto& kv : layouts_) all.push_back(&kv.second);
    if (options_.protocol == Protocol::kAllreduce && options_.shard_buckets) assign_shards();
    layout_hash_ = layouts_hash(all, world_, int(options_.protocol) + 2 * options_.shard_buckets);
    if (layout_hash_ == 0) layout_hash_ = 1;  // 0 means "not known yet"
  }

  // What of a loaded checkpoint does not fit this run's buckets, or "".
  std::string loaded_problem() const {
    if (from_shard_ && shard_hash_ != 0 && shard_hash_ != layout_hash_) return kOtherLayout;
    return full_state_mismatch(full_, layouts_);
  }

  // Before any parameter of the step (or, for zero_step_interleaved's
  // steady steps, of the bucket) moves: every rank tells every other what
  // it found wrong since the last time (a parameter not lent, a loaded
  // checkpoint that does not fit) and which run its loaded shards came
  // from. Any problem on any rank fails the step on every rank alike, named
  // by rank, and nothing is stepped; otherwise the ranks take one run id.
  void agree_before_stepping(bool is_last) {
    const bool whole_step = layout_hash_ == 0 || pending_load_;
    if (whole_step) fix_layout_hash();
    std::string mine = problems_;
    problems_.clear();
    if (pending_load_) {
      const std::string loaded = loaded_problem();
      if (!loaded.empty()) mine += (mine.empty() ? "" : "; ") + loaded;
    }
    Verdict own;
    own.run_id = run_id_;
    own.loaded_run = pending_load_ ? loaded_run_ : 0;
    own.problem_bytes = mine.size();
    std::vector<Verdict> all(static_cast<size_t>(world_));
    std::vector<std::string> texts(static_cast<size_t>(world_));
    if (world_ == 1) {
      all[0] = own;
      texts[0] = mine;
    } else {
      FlatTensor send(&own, DType::U8, int64_t(sizeof own));
      FlatTensor recv(all.data(), DType::U8, int64_t(sizeof own * all.size()));
      comm_allgather(comm_, send, recv, nullptr);
      std::vector<uint64_t> lengths;
      for (const Verdict& v : all) lengths.push_back(v.problem_bytes);
      if (*std::max_element(lengths.begin(), lengths.end()) > 0)
        texts = allgather_blobs(comm_, world_, mine, lengths);
    }
    std::string why;
    for (int r = 0; r < world_; ++r)
      if (all[size_t(r)].problem_bytes > 0)
        why += (why.empty() ? "" : "; ") + ("rank " + std::to_string(r) + ": ") + texts[size_t(r)];
    // Shards of different runs: each rank's load is its own, so only the
    // ranks together can see that they do not belong together.
    int first_loaded = -1;
    for (int r = 0; r < world_; ++r) {
      const Verdict& v = all[size_t(r)];
      if (v.loaded_run == 0) continue;
      if (first_loaded < 0) {
        first_loaded = r;
      } else if (v.loaded_run != all[size_t(first_loaded)].loaded_run) {
        why += std::string(why.empty() ? "" : "; ") + "rank " + std::to_string(first_loaded) +
               " loaded the state of run " + run_id_text(all[size_t(first_loaded)].loaded_run) +
               " and rank " + std::to_string(r) + " that of run " + run_id_text(v.loaded_run) +
               ": shards of different runs do not belong together; load the shards that the "
               "ranks of one run saved at one step";
        break;
      }
    }
    if (!why.empty()) {
      // Nothing of the step was stepped: its kept buckets are dropped.
      deferred_.clear();
      buckets_this_step_ = 0;
      refusing_ = !is_last;
      DDPH_FAIL(DDPH_INVALID_ARGUMENT, kName << ": step " << step_
                                             << " refused on every rank before any parameter "
                                                "moved: "
                                             << why);
    }
    if (!whole_step) return;
    // The run goes on as the one it loaded, else as rank 0's.
    run_id_ = first_loaded >= 0 ? all[size_t(first_loaded)].loaded_run : all[0].run_id;
    run_agreed_ = true;
    pending_load_ = false;
  }

  void assign_shards() {
    std::vector<std::vector<size_t>> numels;
    std::vector<uint64_t> indices;
    for (const auto& kv : layouts_) {
      numels.push_back(kv.second.numels);
      indices.push_back(kv.first);
    }
    const std::vector<Share> shares = assign_buckets(numels, world_, true);
    for (Share s : shares) {
      s.bucket = indices[s.bucket];
      shares_[s.bucket].push_back(s);
    }
    for (const auto& kv : shares_)
      pieces_[kv.first] = share_pieces(layouts_.at(kv.first), kv.second);
  }

  // Steps this rank's pieces of a bucket (reduced holds its gradient
  // elements from `base` on), then hands every rank every piece; all of it
  // in at's memory.
  void step_and_share(const BucketLayout& l, float* const* params, const float* reduced,
                      size_t base, const Where& at) {
    const std::vector<Piece>& pieces = pieces_.at(l.index);
    {
      // A bucket kept for the step's last one is its span in the trace.
      PhaseSpan span(DDPH_PHASE_OPTIMIZER_STEP);
      for (const Piece& p : pieces) {
        if (p.rank != rank_) continue;
        const size_t first = l.offsets[p.param] + p.begin;
        step_piece(l, p, params[p.param] + p.begin, reduced + (first - base), at);
      }
    }
    if (world_ == 1) return;
    if (options_.protocol == Protocol::kAllreduce)
      broadcast_shares(l, params, at);
    else
      gather_ranges(l, pieces, params, at);
  }

  // On a GPU a kernel on at's stream over the piece's device slots.
  void step_piece(const BucketLayout& l, const Piece& p, float* param, const float* grad,
                  const Where& at) {
    const PieceKey key{l.keys[p.param], p.begin};
    PieceState& st = state_for(key, l.numels[p.param], p);
    device_.step(key, st.state, options_.optim, at, param, grad, p.count);
  }

  PieceState& state_for(const PieceKey& key, size_t numel, const Piece& p) {
    auto found = states_.find(key);
    if (found != states_.end()) {
      DDPH_CHECK(found->second.count == p.count, DDPH_INVALID_ARGUMENT,
                 kName << ": " << kOtherLayout);
      return found->second;
    }
    DDPH_CHECK(!from_shard_ || states_.empty(), DDPH_INVALID_ARGUMENT,
               kName << ": " << kOtherLayout);
    PieceState fresh;
    fresh.count = p.count;
    auto whole = full_.find(key.param);
    if (whole != full_.end()) fresh = slice_state(whole->second, numel, p.begin, p.count, kName);
    return states_.emplace(key, std::move(fresh)).first->second;
  }

  // protocol allreduce: each share from its owner, in assignment order.
  void broadcast_shares(const BucketLayout& l, float* const* params, const Where& at) {
    for (const Share& s : shares_.at(l.index)) {
      size_t n = 0;
      for (size_t i = s.first; i < s.first + s.count; ++i) n += l.numels[i];
      const ScratchBuffers::Lease lease = scratch_.get(at, kShareKey, n * sizeof(float));
      float* buffer = static_cast<float*>(lease.data());
      if (s.rank == rank_) copy_params(l, s, params, buffer, /*into_buffer=*/true, at);
      FlatTensor buf(buffer, DType::F32, int64_t(n), at.device);
      comm_broadcast(comm_, buf, s.rank, at.stream);
      count_out(n * sizeof(float));
      if (s.rank != rank_) copy_params(l, s, params, buffer, /*into_buffer=*/false, at);
    }
  }

  void copy_params(const BucketLayout& l, const Share& s, float* const* params, float* buffer,
                   bool into_buffer, const Where& at) {
    for (size_t i = s.first; i < s.first + s.count; ++i) {
      if (into_buffer)
        copy_floats(at, params[i], buffer, l.numels[i]);
      else
        copy_floats(at, buffer, params[i], l.numels[i]);
      buffer += l.numels[i];
    }
  }

  // protocol reduce_scatter: the mean of this rank's range of the bucket,
  // left in place in the bucket buffer (whose other elements become
  // scratch): the communicator's in-place reduce-scatter (the mean,
  // divide-first as default/allreduce averages) of W blocks of
  // floor(n / W), and an allreduce of the few elements left over, which the
  // last rank owns. Nothing of bucket size is allocated or copied.
  void reduce_scatter_mean(float* buffer, size_t n, const Where& at) {
    if (world_ == 1) return;  // the mean of one rank's gradient is itself
    const size_t width = block_width(n, world_), blocks = width * size_t(world_);
    if (width > 0) {
      FlatTensor send(buffer, DType::F32, int64_t(blocks), at.device);
      FlatTensor recv(buffer + size_t(rank_) * width, DType::F32, int64_t(width), at.device);
      comm_reduce_scatter(comm_, send, recv, DDPH_AVG, at.stream);
      count_out(blocks * sizeof(float));
    }
    if (blocks < n) {
      FlatTensor tail(buffer + blocks, DType::F32, int64_t(n - blocks), at.device);
      comm_allreduce(comm_, tail, DDPH_AVG, at.stream);
      count_out((n - blocks) * sizeof(float));
    }
  }

  // protocol reduce_scatter, bits 8 or 4: the mean of this rank's range,
  // from quantized gradients, left in place as reduce_scatter_mean leaves
  // it. Each rank quantizes range j of its bucket (channels of
  // channel_size, its error feedback added) and sends it to rank j
  // (core/quant/scatter.h); each rank then decodes the world's encodings of
  // its range and averages them, summing in float32 in rank order. Only the
  // gradients are quantized: the parameters are all-gathered exact. A
  // bucket with NaN or Inf on any rank takes the exact path instead, on
  // every rank alike, so the step sees what torch's would, and the
  // residuals stay as they were.
  void quantized_scatter_mean(float* buffer, const BucketLayout& l, uint64_t step,
                              const Where& at) {
    using namespace quantization;
    std::vector<Chunk> chunks(static_cast<size_t>(world_));
    for (int r = 0; r < world_; ++r) {
      const Range range = rank_range(l.n, world_, r);
      chunks[size_t(r)] =
          Chunk{range.begin, Segment{range.count, std::min(options_.channel_size, range.count)}};
    }
    ScatterJob job;
    job.data = buffer;
    job.n = l.n;
    job.rank = rank_;
    job.world = world_;
    job.index = l.index;
    job.step = step;
    job.at = at;
    if (options_.error_feedback) {
      // Zeros at first, and whenever the bucket's length changed
      // (relayout); taken along when the bucket changed memory.
      ResidentTable<uint64_t, 2>::Arrays& r = residuals_[l.index];
      ResidentFloats &kept = r[kOwn], &spare = r[kSpare];
      kept.move_to(at);
      kept.fit(at, l.n);
      spare.fit(at, l.n);
      job.residual_in = kept.data();
      job.residual = spare.data();
    }
    const OwnEncoding encoding{options_.bits, false, 0};
    const ScatterLayout layout =
        lay_out_scatter(chunks, options_.channel_size, options_.bits, rank_,
                        scatter_slice_count(job, options_.channel_size, 0));
    Codec codec(job.at, scratch_, options_.bits, layout.longest, layout.most_channels,
                layout.slices.size() * size_t(world_));
    const Scattered traded = scatter_encoded(comm_, encoding, job, layout, codec, scratch_);
    // What it handed to the exchange, its own range's encoding included,
    // as reduce_scatter_mean counts its whole send buffer (docs/metrics.md:
    // bytes given to collectives).
    count_out(layout.send_bytes);
    if (!traded.nonfinite_ranks.empty()) {
      reduce_scatter_mean(buffer, l.n, at);
      return;
    }
    for (const ScatterSlice& sl : layout.slices) {
      const Chunk& piece = sl.pieces[size_t(rank_)];
      codec.decode_mean(traded.contributions(sl) + kRankHeaderBytes, sl.mine_bytes, size_t(world_),
                        piece.seg, options_.bits, world_, buffer + piece.begin);
    }
    if (options_.error_feedback) {
      ResidentTable<uint64_t, 2>::Arrays& r = residuals_[l.index];
      std::swap(r[kOwn], r[kSpare]);
    }
  }

  // protocol reduce_scatter: every rank's stepped range to every rank: an
  // allgather of the W blocks, then the last rank's leftover elements
  // broadcast, into a buffer that ends with the whole bucket's updated
  // values.
  void gather_ranges(const BucketLayout& l, const std::vector<Piece>& pieces, float* const* params,
                     const Where& at) {
    const size_t width = block_width(l.n, world_), blocks = width * size_t(world_);
    const Range mine = rank_range(l.n, world_, rank_);
    const ScratchBuffers::Lease lease = scratch_.get(at, kGatherKey, l.n * sizeof(float));
    float* all = static_cast<float*>(lease.data());
    // This rank's range goes straight into its place in `all` (an in-place
    // allgather); elements between parameters are zeros.
    zero_bytes(at, all + mine.begin, mine.count * sizeof(float), kName);
    for (const Piece& p : pieces)
      if (p.rank == rank_)
        copy_floats(at, params[p.param] + p.begin, all + l.offsets[p.param] + p.begin, p.count);
    if (width > 0) {
      FlatTensor send(all + mine.begin, DType::F32, int64_t(width), at.device);
      FlatTensor recv(all, DType::F32, int64_t(blocks), at.device);
      comm_allgather(comm_, send, recv, at.stream);
      count_out(width * sizeof(float));
    }
    if (blocks < l.n) {
      FlatTensor buf(all + blocks, DType::F32, int64_t(l.n - blocks), at.device);
      comm_broadcast(comm_, buf, world_ - 1, at.stream);
      count_out((l.n - blocks) * sizeof(float));
    }
    for (const Piece& p : pieces)
      if (p.rank != rank_)
        copy_floats(at, all + l.offsets[p.param] + p.begin, params[p.param] + p.begin, p.count);
  }

  ddph_hook_ref_t inner_;
  ddph_comm_t* comm_;
  ZeroOptions options_;
  int rank_, world_;
  // Fixed at the first step: every bucket's layout, its pieces and (protocol
  // allreduce) its shares, and their hash once the first step ended.
  std::map<uint64_t, BucketLayout> layouts_;
  std::map<uint64_t, std::vector<Piece>> pieces_;
  std::map<uint64_t, std::vector<Share>> shares_;
  uint64_t layout_hash_ = 0, first_step_ = 0;
  // The optimizer state of this rank's pieces: each piece's step count,
  // and its buffers unless a GPU has them (device_).
  PieceMap states_;
  optim::DeviceStates<PieceKey> device_{kName};
  // A loaded checkpoint: every parameter's whole state, sliced into pieces
  // as they are first stepped; or (from_shard_) a shard, whose layout hash
  // must match.
  optim::StateMap full_;
  bool from_shard_ = false;
  uint64_t shard_hash_ = 0;
  std::vector<Deferred> deferred_;
  // This run's id, drawn at create and agreed (rank 0's, or the loaded
  // shards') at the first step; saved in every shard.
  uint64_t run_id_ = fresh_run_id();
  bool run_agreed_ = false;
  // Since the last load, until the step that checked it: the loaded
  // shards' run (0: unknown).
  bool pending_load_ = false;
  uint64_t loaded_run_ = 0;
  // What this rank found wrong since the ranks last agreed (a parameter not
  // lent), told to every rank before anything is stepped.
  std::string problems_;
  // The ranks refused a bucket of step_ before its last: its other buckets
  // are refused too.
  bool refusing_ = false;
  ResidentTable<uint64_t, 1> kept_grads_{kName};  // by bucket index
  uint64_t step_ = 0;                             // the step of the buckets being run
  size_t buckets_this_step_ = 0;                  // buckets of it run so far
  // Reused from bucket to bucket.
  std::vector<float*> params_;
  // bits 8 or 4, by bucket index, in the bucket's memory: the error
  // feedback (kOwn) and a spare the next residual is written into (kSpare),
  // kept only when the bucket was finite.
  enum { kOwn = 0, kSpare = 1 };
  ResidentTable<uint64_t, 2> residuals_{kName};
  // The quantized exchange's buffers, and the broadcast and gather
  // buffers (kShareKey, kGatherKey).
  ScratchBuffers scratch_;
};

template <bool kInterleaved>
const ddph_hook_t& zero_table(const char* summary) {
  static const ddph_hook_t table = [summary] {
    size_t n = 0;
    const ddph_option_spec_t* specs = zero_specs(&n);
    return hook_table<ZeroHook<kInterleaved>>(ZeroHook<kInterleaved>::kName, summary, specs, n,
                                              /*keeps_state=*/true);
  }();
  return table;
}

}  // namespace

const ddph_hook_t& zero_step_hook() {
  return zero_table<false>(
      "ZeRO: each rank keeps and steps the optimizer state of 1/world of the parameters, at "
      "the step's last bucket, and shares the updated parameters");
}

const ddph_hook_t& zero_step_interleaved_hook() {
  return zero_table<true>(
      "ZeRO: each rank keeps and steps the optimizer state of 1/world of the parameters, "
      "bucket by bucket as each is reduced, and shares the updated parameters");
}

}  // namespace zero
}  // namespace ddph
