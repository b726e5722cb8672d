#include "plugins/comm_gloo/communicator.h"

#include <gloo/rendezvous/context.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/tcp/device.h>

#include "core/base/host.h"
#include "core/comm/rendezvous/gloo/gloo_store.h"

namespace ddph {
namespace comm_gloo {

Communicator::Communicator(const CommConfig& config, std::shared_ptr<rendezvous::KvStore> store,
                           std::shared_ptr<WireBytes> wire)
    : config_(config),
      store_(std::move(store)),
      wire_(std::move(wire)),
      send_seq_(size_t(config.world), 0),
      recv_seq_(size_t(config.world), 0) {
  ::gloo::transport::tcp::attr attr;
  if (!config_.iface.empty())
    attr.iface = config_.iface;
  else
    attr.hostname = config_.hostname;
  try {
    // The device's event-loop thread starts here and inherits the blocked
    // SIGPIPE, so its writes to a dead peer cannot kill the process either.
    gloo_call("creating the TCP device", rank(),
              [&] { device_ = ::gloo::transport::tcp::CreateDevice(attr); });
  } catch (const Error& e) {
    const std::string value = config_.iface.empty() ? config_.hostname : config_.iface;
    const std::string source = !config_.address_source.empty()
                                   ? "environment variable " + config_.address_source
                               : config_.iface.empty() ? std::string("option 'hostname'")
                                                       : std::string("option 'iface'");
    DDPH_FAIL(DDPH_INVALID_ARGUMENT, "rank " << rank() << ": " << source << " ('" << value
                                             << "') cannot be used to listen: " << e.what());
  }

  prefix_store_.reset(
      new rendezvous::GlooStore(store_, config_.prefix, config_.timeout, config_.world));
  auto context = std::make_shared<::gloo::rendezvous::Context>(config_.rank, config_.world);
  context->setTimeout(config_.timeout);

  // The new sockets that appear while connecting are this context's pairs.
  FdSnapshot before = FdSnapshot::take();
  std::ostringstream what;
  what << "rendezvous of " << config_.world << " ranks (prefix '" << config_.prefix << "', timeout "
       << config_.timeout.count() << " ms)";
  const std::string what_text = what.str();
  gloo_call(what_text.c_str(), rank(), [&] { context->connectFullMesh(*prefix_store_, device_); });
  prefix_store_->restart_deadline();  // reading the socket ends gets a timeout of its own
  const std::vector<SocketEnds> ends = wire_->track_new_sockets(before, FdSnapshot::take(), this);
  context_ = std::move(context);
  attribute_sockets(ends);
  // Before the barrier: no peer sends to the mailboxes until every rank
  // has registered them.
  if (size() > 1 && small_allreduce_limit(size()) > 0)
    gloo_call("registering the mailboxes", rank(), [&] {
      mailboxes_.reset(new Mailboxes(*context_, rank(), size(), mailbox_bytes(size())));
    });
  // connectFullMesh can return on one side of a pair before the other side
  // has finished its handshake; a rank that then closed at once (a session
  // that never communicates) broke its peers' rendezvous. A barrier makes
  // creation collective: nobody returns before everybody is connected.
  barrier();
  if (mailboxes_) {
    gloo_call("priming the mailboxes", rank(), [&] { mailboxes_->prime(); });
    // gloo set each pair's send buffer for the primer, and the kernel no
    // longer tunes it (mailboxes.h): give it room for the ring's segments
    // in flight on a fast link.
    wire_->set_send_buffer(this, kPairSendBufferBytes);
  }
}

Communicator::~Communicator() {
  SigpipeBlock block;
  try {
    // Buffered sends must reach the wire before the sockets close; a broken
    // communicator has nobody left to deliver them to.
    bool healthy;
    {
      std::lock_guard<std::mutex> lock(broken_mutex_);
      healthy = broken_.empty();
    }
    if (healthy) drain_sends("destroy");
  } catch (...) {
    // destroy cannot report; the peer will see its recv fail.
  }
  try {
    // The last reading of this communicator's sockets, and our duplicates
    // closed before gloo closes the pairs (else peers would not see it): the
    // count is shared with the communicator this one was split from.
    wire_->release(this);
    pending_sends_.clear();
    // The mailboxes' buffers refer to the pairs, and the pairs to the
    // device: the mailboxes go first, then the context.
    mailboxes_.reset();
    context_.reset();
    device_.reset();
  } catch (...) {
    // Tearing down after a failure may complain; nothing useful to do.
  }
}

void Communicator::check_not_broken(const char* what) {
  std::lock_guard<std::mutex> lock(broken_mutex_);
  DDPH_CHECK(broken_.empty(), DDPH_COMM_FAILURE,
             what << " on rank " << rank() << ": communicator is broken since " << broken_);
}

void Communicator::break_with(const Error& e) {
  {
    std::lock_guard<std::mutex> lock(broken_mutex_);
    if (!broken_.empty()) return;
    broken_ = std::string(code_name(e.code())) + ": " + e.what();
  }
  log(DDPH_LOG_ERROR, "comm_gloo", std::string("communicator broken: ") + e.what());
  // Hard-close every pair (RST): peers still blocked on this rank then fail
  // at once instead of waiting out their own timeout. Our duplicates of the
  // sockets go first, or the close would not reach the peers.
  wire_->release(this);
  SigpipeBlock block;
  for (int peer = 0; peer < size(); ++peer) {
    if (peer == rank()) continue;
    try {
      auto& pair = context_->getPair(peer);
      if (pair) pair->close();
    } catch (...) {
    }
  }
}

}  // namespace comm_gloo
}  // namespace ddph
