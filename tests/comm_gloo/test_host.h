// A minimal ddph_host_t for tests that load comm_gloo directly. It stands in
// for the loader's ddph_host() until libddph.so exists; swap it there.
#pragma once

#include <ddph/ddph.h>

namespace comm_gloo_test {

const ddph_host_t* test_host();

}  // namespace comm_gloo_test
