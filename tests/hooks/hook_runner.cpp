#include "tests/hooks/hook_runner.h"

#include <dlfcn.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace ddph_test {

const ddph_plugin_t* load_plugin(const char* family) {
  static std::mutex mu;
  static std::map<std::string, const ddph_plugin_t*> loaded;
  std::lock_guard<std::mutex> lock(mu);
  auto it = loaded.find(family);
  if (it != loaded.end()) return it->second;
  const std::string path = std::string(DDPH_PLUGIN_DIR) + "/libddph_" + family + ".so";
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) throw std::runtime_error("dlopen " + path + ": " + dlerror());
  auto entry = reinterpret_cast<ddph_plugin_entry_fn>(dlsym(handle, "ddph_plugin_entry"));
  if (entry == nullptr) throw std::runtime_error(path + " has no ddph_plugin_entry");
  const ddph_plugin_t* plugin = entry(ddph_host());
  if (plugin == nullptr) throw std::runtime_error(path + " refused the host table");
  loaded[family] = plugin;
  return plugin;
}

const ddph_hook_t* find_hook(const char* family, const char* name) {
  const ddph_plugin_t* p = load_plugin(family);
  for (size_t i = 0; i < p->num_hooks; ++i)
    if (std::strcmp(p->hooks[i]->name, name) == 0) return p->hooks[i];
  throw std::runtime_error(std::string("no hook ") + family + "." + name);
}

namespace {
ddph_hook_init_t make_init(ddph_comm_t* comm, const ddph_hook_ref_t* inner) {
  ddph_hook_init_t init{};
  init.struct_size = sizeof init;
  init.host = ddph_host();
  init.comm = comm;
  init.inner = inner;
  return init;
}
}  // namespace

HookInstance::HookInstance(const ddph_hook_t* hook, ddph_comm_t* comm, const ddph_hook_ref_t* inner,
                           const std::vector<ddph_option_t>& options)
    : hook_(hook) {
  ddph_hook_init_t init = make_init(comm, inner);
  init.options = options.data();
  init.num_options = options.size();
  ErrorInfo e = take_error(hook->create(&init, &state_));
  if (e.code != DDPH_OK)
    throw std::runtime_error(std::string(hook->name) + ".create failed: " + e.message);
}

HookInstance::~HookInstance() {
  if (state_ != nullptr) hook_->destroy(state_);
}

ErrorInfo try_create(const ddph_hook_t* hook, ddph_comm_t* comm, const ddph_hook_ref_t* inner) {
  const ddph_hook_init_t init = make_init(comm, inner);
  void* state = nullptr;
  ErrorInfo e = take_error(hook->create(&init, &state));
  if (state != nullptr) hook->destroy(state);
  return e;
}

BucketView::BucketView(void* data, DLDataType dtype, int64_t numel, uint64_t index, uint64_t step)
    : shape(numel), bucket{} {
  bucket.struct_size = sizeof bucket;
  bucket.index = index;
  bucket.step = step;
  bucket.is_last = 1;
  bucket.buffer.data = data;
  bucket.buffer.device = DLDevice{kDLCPU, 0};
  bucket.buffer.ndim = 1;
  bucket.buffer.dtype = dtype;
  bucket.buffer.shape = &shape;
}

namespace {
struct DoneRecord {
  std::mutex mu;
  std::condition_variable cv;
  int calls = 0;
  ErrorInfo error;
  static void on_done(void* user, ddph_error_t* error) {
    auto* d = static_cast<DoneRecord*>(user);
    std::lock_guard<std::mutex> lock(d->mu);
    if (d->calls++ == 0)
      d->error = take_error(error);
    else
      take_error(error);
    d->cv.notify_all();
  }
};
}  // namespace

RunOutcome run_bucket(const ddph_hook_ref_t& hook, const ddph_bucket_t* bucket) {
  DoneRecord record;
  RunOutcome out;
  out.returned =
      take_error(hook.hook->run_bucket(hook.state, bucket, &DoneRecord::on_done, &record));
  std::unique_lock<std::mutex> lock(record.mu);
  if (out.returned.code == DDPH_OK)
    record.cv.wait_for(lock, std::chrono::seconds(30), [&] { return record.calls > 0; });
  lock.unlock();
  std::this_thread::sleep_for(std::chrono::milliseconds(out.returned.code == DDPH_OK ? 5 : 50));
  lock.lock();
  out.done_calls = record.calls;
  out.completed = record.error;
  return out;
}

DLDataType dl(ddph::DType t) {
  return ddph::dtype_to_dl(t);
}

}  // namespace ddph_test
