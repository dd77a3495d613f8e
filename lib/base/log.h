// Leveled logging with subsystems, through one spdlog logger, in NCCL's
// shape (MYCOLL_DEBUG / MYCOLL_DEBUG_SUBSYS / MYCOLL_DEBUG_FILE, see
// docs/environment.md):
//
//   host:pid:tid mycoll INFO [COLL] comm 5a1f3c2e rank 1/4: <message>
//
// Call sites stay one line: log_info(Subsys::Coll, "fmt {}", x). A line
// logged while a communicator is current on the thread (LogScope: the API
// entry points and communicator creation set it) carries that
// communicator's tag. A level or subsystem that is off costs one load and a
// branch: the arguments are formatted only when the line is printed.
#pragma once

#include <fmt/core.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>

namespace mycoll {

enum class Subsys : uint32_t { Init, Coll, Transport, Bootstrap, Tuning, Net, Gpu, Env, Proxy };
constexpr uint32_t kNumSubsys = 9;
const char* subsys_name(Subsys s);

enum class LogLevel : uint32_t { Warn = 0, Info = 1, Trace = 2 };
constexpr uint32_t kNumLogLevels = 3;

namespace logdetail {
// Per level, the bit mask of subsystems printed. Until the settings are read
// every bit is set, so the first line of each level takes the slow path,
// which reads them (MYCOLL_DEBUG*) and re-checks.
extern std::atomic<uint32_t> g_masks[kNumLogLevels];
void emit(LogLevel l, Subsys s, fmt::string_view f, fmt::format_args args);
}  // namespace logdetail

inline bool log_enabled(LogLevel l, Subsys s) {
  return (logdetail::g_masks[static_cast<uint32_t>(l)].load(std::memory_order_relaxed) >>
          static_cast<uint32_t>(s)) & 1u;
}

template <typename... Args>
void log_warn(Subsys s, fmt::format_string<Args...> f, Args&&... args) {
  if (log_enabled(LogLevel::Warn, s)) logdetail::emit(LogLevel::Warn, s, f, fmt::make_format_args(args...));
}
template <typename... Args>
void log_info(Subsys s, fmt::format_string<Args...> f, Args&&... args) {
  if (log_enabled(LogLevel::Info, s)) logdetail::emit(LogLevel::Info, s, f, fmt::make_format_args(args...));
}
template <typename... Args>
void log_trace(Subsys s, fmt::format_string<Args...> f, Args&&... args) {
  if (log_enabled(LogLevel::Trace, s)) logdetail::emit(LogLevel::Trace, s, f, fmt::make_format_args(args...));
}

// Makes `tag` ("comm 5a1f3c2e rank 1/4") the prefix of every line this
// thread logs until the scope ends (nests; the previous tag comes back).
class LogScope {
 public:
  explicit LogScope(const std::string* tag);
  ~LogScope();
  LogScope(const LogScope&) = delete;
  LogScope& operator=(const LogScope&) = delete;

 private:
  const std::string* prev_;
};

// The rank that %r in MYCOLL_DEBUG_FILE stands for, when no launcher
// variable (MYCOLL_RANK, RANK, OMPI_COMM_WORLD_RANK, PMIX_RANK, SLURM_PROCID)
// names it: the first communicator's rank. Lines logged before that are kept
// (bounded) and written once the file opens.
void log_set_rank(int rank);

// Warns once per process about every MYCOLL_* variable of the environment
// that is not in the registry (a typo such as MYCOLL_TIMEOUTS), naming the
// closest registered one.
void warn_unknown_env_once();

// Pure helpers, exposed for the unit tests.
// MYCOLL_DEBUG_SUBSYS: "INIT,COLL", "^COLL" (all but), "ALL"; unknown names
// are returned in *bad. Empty text = the default set.
uint32_t parse_subsys_mask(const std::string& text, std::string* bad);
uint32_t default_subsys_mask();
// %h host, %p pid, %r rank ("" rank: left as is), %% a percent sign.
std::string expand_log_path(const std::string& pattern, const std::string& host, long pid,
                            const std::string& rank);
// strftime format plus %Nf (N = 1..9 fraction digits; %f = 6).
std::string format_timestamp(const std::string& format, int64_t unix_ns);
// "MYCOLL_TIMEOUTS" -> "MYCOLL_TIMEOUT" (closest registered name; "" when
// nothing is close).
std::string closest_env_name(const std::string& name);
// Re-reads the settings (tests that change MYCOLL_DEBUG* in one process).
void log_reload_for_tests();

}  // namespace mycoll
