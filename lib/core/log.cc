#include "core/log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <mutex>

#include "core/config.h"

namespace mycoll {

const char* subsys_name(Subsys s) {
  switch (s) {
    case Subsys::Init: return "INIT";
    case Subsys::Coll: return "COLL";
    case Subsys::Transport: return "TRANSPORT";
    case Subsys::Bootstrap: return "BOOTSTRAP";
    case Subsys::Tuning: return "TUNING";
    case Subsys::Net: return "NET";
    case Subsys::Gpu: return "GPU";
  }
  return "?";
}

static std::string expand_path(std::string p) {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  for (size_t i; (i = p.find("%h")) != std::string::npos;) p.replace(i, 2, host);
  for (size_t i; (i = p.find("%p")) != std::string::npos;) p.replace(i, 2, std::to_string(getpid()));
  return p;
}

static std::shared_ptr<spdlog::logger> make_logger() {
  std::shared_ptr<spdlog::logger> l;
  std::string file = env_get("MYCOLL_DEBUG_FILE");
  try {
    if (!file.empty()) {
      auto sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(expand_path(file), false);
      l = std::make_shared<spdlog::logger>("mycoll", sink);
    }
  } catch (const std::exception&) {
    l.reset();  // fall back to stderr below
  }
  if (!l) l = std::make_shared<spdlog::logger>("mycoll", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  char host[64] = {};
  gethostname(host, sizeof(host) - 1);
  l->set_pattern(std::string(host) + ":%P:%t mycoll %l %v");
  std::string level = env_get("MYCOLL_DEBUG");
  std::transform(level.begin(), level.end(), level.begin(), ::toupper);
  spdlog::level::level_enum lv = spdlog::level::warn;
  if (level == "INFO") lv = spdlog::level::info;
  else if (level == "TRACE") lv = spdlog::level::trace;
  else if (level == "ERROR") lv = spdlog::level::err;
  else if (level == "OFF" || level == "NONE") lv = spdlog::level::off;
  l->set_level(lv);
  l->flush_on(spdlog::level::trace);
  if (!level.empty() && level != "WARN" && level != "INFO" && level != "TRACE" && level != "ERROR" &&
      level != "OFF" && level != "NONE")
    l->warn("[INIT] MYCOLL_DEBUG='{}' is not WARN, INFO or TRACE; using WARN", level);
  return l;
}

spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> l = make_logger();
  return *l;
}

}  // namespace mycoll
