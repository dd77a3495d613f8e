// One error model: code inside throws mycoll::Error; lib/api converts it to a
// mycollResult_t at the C boundary and records the message for
// mycollGetLastError.
#pragma once

#include <stdexcept>
#include <string>
#include <type_traits>

#include "mycoll.h"

namespace mycoll {

class Error : public std::runtime_error {
 public:
  Error(mycollResult_t code, const std::string& what) : std::runtime_error(what), code_(code) {}
  mycollResult_t code() const { return code_; }

 private:
  mycollResult_t code_;
};

// Throws Error(code, message) built with fmt-style formatting.
[[noreturn]] void throw_error(mycollResult_t code, const std::string& message);

// errno-based system failure: "<what>: <strerror(errno)>".
[[noreturn]] void throw_system(const std::string& what);

// Throws Error(mycollInvalidArgument, message) unless ok. Hot paths (every
// collective call) pass a literal or a callable, so that no string is built
// while the check passes.
inline void check_arg(bool ok, const std::string& message) {
  if (!ok) throw_error(mycollInvalidArgument, message);
}
inline void check_arg(bool ok, const char* message) {
  if (__builtin_expect(!ok, 0)) throw_error(mycollInvalidArgument, message);
}
// Lazy form: make_message() (returning the message) runs only on failure,
// e.g. check_arg(n > 0, [&] { return fn + std::string(": n is ") + std::to_string(n); }).
template <typename F, typename = std::enable_if_t<std::is_invocable_r_v<std::string, F&>>>
inline void check_arg(bool ok, F&& make_message) {
  if (__builtin_expect(!ok, 0)) throw_error(mycollInvalidArgument, make_message());
}

}  // namespace mycoll
