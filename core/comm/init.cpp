#include "core/comm/init.h"

#include "core/base/error.h"
#include "core/comm/rendezvous_url.h"

namespace ddph {

void check_comm_init(const ddph_comm_init_t* init, const char* who, Rendezvous rendezvous) {
  DDPH_CHECK(init != nullptr, DDPH_INVALID_ARGUMENT, who << ": init is NULL");
  DDPH_CHECK(init->struct_size >= DDPH_COMM_INIT_SIZE_V1_0, DDPH_INVALID_ARGUMENT,
             who << ": init.struct_size " << init->struct_size << " is smaller than the v1.0 size "
                 << DDPH_COMM_INIT_SIZE_V1_0);
  DDPH_CHECK(init->world_size >= 1, DDPH_INVALID_ARGUMENT,
             who << ": init.world_size " << init->world_size << " must be >= 1");
  DDPH_CHECK(init->rank >= 0 && init->rank < init->world_size, DDPH_INVALID_ARGUMENT,
             who << ": init.rank " << init->rank << " is outside [0, " << init->world_size << ")");
  DDPH_CHECK(init->timeout_ms > 0, DDPH_INVALID_ARGUMENT,
             who << ": init.timeout_ms " << init->timeout_ms << " must be > 0");
  DDPH_CHECK(init->num_options == 0 || init->options != nullptr, DDPH_INVALID_ARGUMENT,
             who << ": init.options is NULL but init.num_options is " << init->num_options);
  if (init->store != nullptr) {
    const ddph_store_t* s = init->store;
    DDPH_CHECK(s->struct_size >= DDPH_STORE_SIZE_V1_0, DDPH_INVALID_ARGUMENT,
               who << ": init.store->struct_size " << s->struct_size
                   << " is smaller than the v1.0 size " << DDPH_STORE_SIZE_V1_0);
    DDPH_CHECK(s->set != nullptr && s->get != nullptr, DDPH_INVALID_ARGUMENT,
               who << ": init.store->set and init.store->get must both be set");
    return;
  }
  const bool has_url = init->rendezvous != nullptr && init->rendezvous[0] != '\0';
  // A world of one meets nobody (open_init_store gives it a store in memory).
  if (rendezvous == Rendezvous::kRequired && init->world_size > 1)
    DDPH_CHECK(has_url, DDPH_INVALID_ARGUMENT,
               who << ": " << init->world_size
                   << " ranks need a rendezvous: set comm.rendezvous in the YAML "
                      "(file:///dir, redis://host:port, tcp://host:port or env://), or lend "
                      "the host's store "
                      "(comm.rendezvous: host); neither init.rendezvous nor init.store is set");
  if (has_url) parse_rendezvous_url(init->rendezvous);
}

}  // namespace ddph
