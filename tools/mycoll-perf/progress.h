// Progress of a long sweep on stderr: one line rewritten in place,
// "all_reduce 16 MiB (12/27)", shown only when stderr is a terminal, so logs,
// pipes and tests see nothing. The line is erased before the table's next
// line reaches stdout, and when the sweep ends.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>

#include "colls.h"
#include "options.h"

namespace mycoll_perf {

class Progress {
 public:
  // Writes to `out` only when `enabled`; `total` is the sweep's number of steps.
  Progress(std::FILE* out, bool enabled, int total) : out_(out), enabled_(enabled), total_(total) {}
  ~Progress() { clear(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  bool enabled() const { return enabled_; }
  // The next step begins: shows "<what> (<step>/<total>)".
  void step(const std::string& what);
  // Erases the line, if one is shown.
  void clear();

 private:
  std::FILE* out_ = nullptr;
  bool enabled_ = false;
  int total_ = 0;
  int done_ = 0;
  bool shown_ = false;
};

// Whether stderr is a terminal (isatty): where Progress should be enabled.
bool stderr_is_terminal();

// "8 B", "64 KiB", "16 MiB", "1 GiB"; "20000 B" when not a whole unit.
std::string human_bytes(size_t bytes);

// Steps of a whole run: sizes x types x ops (reducing collectives) per collective.
int sweep_steps(const Options& o);

// "all_reduce 16 MiB", with the type when -d gives several and the op when
// -o gives several.
std::string step_label(const Options& o, const CollInfo& c, mycollDataType_t t, mycollRedOp_t op,
                       size_t bytes);

}  // namespace mycoll_perf
