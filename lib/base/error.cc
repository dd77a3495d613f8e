#include "base/error.h"

#include <cerrno>
#include <cstring>

namespace mycoll {

void throw_error(mycollResult_t code, const std::string& message) { throw Error(code, message); }

void throw_system(const std::string& what) {
  int e = errno;
  throw Error(mycollSystemError, what + ": " + std::strerror(e));
}

}  // namespace mycoll
