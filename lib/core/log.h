// Leveled logging with subsystems, through one spdlog logger.
// MYCOLL_DEBUG = WARN (default) | INFO | TRACE; MYCOLL_DEBUG_FILE = path
// (%h -> hostname, %p -> pid) instead of stderr.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

namespace mycoll {

enum class Subsys { Init, Coll, Transport, Bootstrap, Tuning, Net, Gpu };
const char* subsys_name(Subsys s);

// The library's logger (created on first use from the config registry).
spdlog::logger& logger();

template <typename... Args>
void log_info(Subsys s, fmt::format_string<Args...> f, Args&&... args) {
  auto& l = logger();
  if (l.should_log(spdlog::level::info))
    l.info("[{}] {}", subsys_name(s), fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void log_warn(Subsys s, fmt::format_string<Args...> f, Args&&... args) {
  auto& l = logger();
  if (l.should_log(spdlog::level::warn))
    l.warn("[{}] {}", subsys_name(s), fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void log_trace(Subsys s, fmt::format_string<Args...> f, Args&&... args) {
  auto& l = logger();
  if (l.should_log(spdlog::level::trace))
    l.trace("[{}] {}", subsys_name(s), fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace mycoll
