// Prints docs/environment.md from the registry of MYCOLL_* variables.
#include <cstdio>

#include "base/config.h"

int main() {
  std::fputs(mycoll::environment_markdown().c_str(), stdout);
  return 0;
}
