// One error model: code inside throws mycoll::Error; lib/api converts it to a
// mycollResult_t at the C boundary and records the message for
// mycollGetLastError.
#pragma once

#include <stdexcept>
#include <string>

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

inline void check_arg(bool ok, const std::string& message) {
  if (!ok) throw_error(mycollInvalidArgument, message);
}

}  // namespace mycoll
