// Records a session's done callbacks for the loader's tests: which bucket
// (a token per submission), in what order, with which error; optionally
// flushing the session from inside each done, which must be refused.
#pragma once

#include <ddph/ddph.h>

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

struct Recorder {
  std::mutex mu;
  std::vector<int> order;
  std::vector<ddph_code_t> codes;
  std::vector<std::string> messages;
  std::atomic<int> calls{0};
  ddph_session_t* flush_from_done = nullptr;  // flushes from its dones when set
  std::vector<ddph_code_t> flush_codes;
  struct Token {
    Recorder* r;
    int id;
  };
  std::vector<Token> tokens;
  explicit Recorder(int n) {
    for (int i = 0; i < n; ++i) tokens.push_back({this, i});
  }
  static void done(void* user, ddph_error_t* e) {
    auto* t = static_cast<Token*>(user);
    Recorder* r = t->r;
    ddph_code_t flushed = DDPH_OK;
    if (r->flush_from_done != nullptr) {
      ddph_error_t* f = ddph_session_flush(r->flush_from_done);
      flushed = ddph_error_code(f);
      ddph_error_free(f);
    }
    std::lock_guard<std::mutex> lock(r->mu);
    r->order.push_back(t->id);
    r->codes.push_back(ddph_error_code(e));
    r->messages.push_back(ddph_error_message(e));
    r->flush_codes.push_back(flushed);
    r->calls++;
    ddph_error_free(e);
  }
};
