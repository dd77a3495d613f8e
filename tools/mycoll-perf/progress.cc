#include "progress.h"

#include <unistd.h>

#include "datatypes.h"

namespace mycoll_perf {

bool stderr_is_terminal() { return isatty(STDERR_FILENO) == 1; }

void Progress::step(const std::string& what) {
  ++done_;
  if (!enabled_) return;
  // "\r" back to the line's start, ESC[K erases what a longer label left.
  std::fprintf(out_, "\r%s (%d/%d)\033[K", what.c_str(), done_, total_);
  std::fflush(out_);
  shown_ = true;
}

void Progress::clear() {
  if (!shown_) return;
  std::fprintf(out_, "\r\033[K");
  std::fflush(out_);
  shown_ = false;
}

std::string human_bytes(size_t bytes) {
  static const char* const kUnits[] = {"GiB", "MiB", "KiB"};
  for (int i = 0; i < 3; ++i) {
    const size_t unit = size_t{1} << (10 * (3 - i));
    if (bytes >= unit && bytes % unit == 0) return std::to_string(bytes / unit) + " " + kUnits[i];
  }
  return std::to_string(bytes) + " B";
}

int sweep_steps(const Options& o) {
  const size_t sizes = size_list(o).size();
  size_t n = 0;
  for (const CollInfo* c : o.colls) n += sizes * o.dtypes.size() * (c->reduces ? o.ops.size() : 1);
  return static_cast<int>(n);
}

std::string step_label(const Options& o, const CollInfo& c, mycollDataType_t t, mycollRedOp_t op,
                       size_t bytes) {
  std::string s = std::string(c.name) + " " + human_bytes(bytes);
  if (o.dtypes.size() > 1) s += std::string(" ") + dtype_name(t);
  if (c.reduces && o.ops.size() > 1) s += std::string(" ") + op_name(op);
  return s;
}

}  // namespace mycoll_perf
