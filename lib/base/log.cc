#include "base/log.h"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <mutex>
#include <set>
#include <thread>

#include "base/config.h"

extern char** environ;

namespace mycoll {

namespace logdetail {
std::atomic<uint32_t> g_masks[kNumLogLevels] = {{~0u}, {~0u}, {~0u}};
}  // namespace logdetail

namespace {

constexpr const char* kSubsysNames[kNumSubsys] = {
    "INIT", "COLL", "TRANSPORT", "BOOTSTRAP", "TUNING", "NET", "GPU", "ENV", "PROXY"};
constexpr const char* kLevelNames[kNumLogLevels] = {"WARN", "INFO", "TRACE"};
constexpr uint32_t kAllSubsys = (1u << kNumSubsys) - 1;
constexpr size_t kMaxPendingLines = 4096;  // %r file not open yet

// The tag LogScope makes current. Initial-exec TLS model: every API call
// sets and resets it, and the default (global-dynamic) model, which a shared
// library gets, reaches it through a __tls_get_addr call each time. The
// model puts the library's thread-local block (a few hundred bytes, strings
// and pointers) in static TLS; glibc keeps a surplus of it for libraries
// loaded with dlopen (libmycoll.so, libnccl.so.2 from Python), see
// docs/performance.md "Session 16".
thread_local const std::string* t_tag [[gnu::tls_model("initial-exec")]] = nullptr;

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

std::string hostname() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return host;
}

std::string launcher_rank() {
  for (const char* n : {"MYCOLL_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"})
    if (const char* v = std::getenv(n))
      if (*v) return v;
  return "";
}

// Writes formatted lines to a FILE* (stderr or MYCOLL_DEBUG_FILE). Not
// spdlog's file sink: that one creates missing directories.
class FileSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit FileSink(FILE* f) : f_(f) {}
  void set_file(FILE* f) {
    std::lock_guard<std::mutex> g(mutex_);
    f_ = f;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    // One write per line: ranks sharing stderr do not interleave mid-line.
    line_.assign(msg.payload.data(), msg.payload.size());
    line_ += '\n';
    std::fwrite(line_.data(), 1, line_.size(), f_);
    std::fflush(f_);
  }
  void flush_() override { std::fflush(f_); }

 private:
  FILE* f_;
  std::string line_;
};

struct State {
  std::mutex mu;
  std::atomic<bool> ready{false};
  std::shared_ptr<spdlog::logger> logger;
  std::shared_ptr<FileSink> sink;
  std::string prefix;       // "host:pid:"
  uint32_t ts_levels = 1u;  // bit per level: lines with a timestamp
  std::string ts_format = "[%F %T] ";
  std::string file_pattern;  // MYCOLL_DEBUG_FILE, while it waits for the rank
  // file_pattern is set: what emit() reads without mu.
  std::atomic<bool> file_waits{false};
  std::deque<std::string> pending;
  bool pending_dropped = false;
};

State& state() {
  static State* s = new State;  // never destroyed: logging may run during exit
  return *s;
}

std::string format_timestamp_now(const std::string& format);

// "[time] host:pid:tid mycoll INFO [COLL] " (the time only on the levels
// MYCOLL_DEBUG_TIMESTAMP_LEVELS names).
std::string line_head(const State& s, uint32_t level, const char* subsys) {
  std::string h = ((s.ts_levels >> level) & 1u) ? format_timestamp_now(s.ts_format) : "";
  return h + s.prefix + std::to_string(gettid()) + " mycoll " + kLevelNames[level] + " [" + subsys +
         "] ";
}

// A warning of this module's own (settings), formatted like every line.
std::string own_line(const State& s, const char*, const std::string& msg) {
  return line_head(s, 0, "ENV") + msg;
}

// Opens the debug file; a failure is a warning on stderr and logs stay there.
void open_file_locked(State& s, const std::string& pattern, const std::string& rank) {
  std::string path = expand_log_path(pattern, hostname(), getpid(), rank);
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) {
    std::string msg = "MYCOLL_DEBUG_FILE: cannot open '" + path + "': " + std::strerror(errno) +
                      "; logging to stderr";
    std::fprintf(stderr, "%s\n", own_line(s, "WARN", msg).c_str());
    return;
  }
  s.sink->set_file(f);
}

uint32_t parse_level_set(const std::string& text, std::string* bad) {
  uint32_t m = 0;
  size_t pos = 0;
  const std::string t = upper(text);
  while (pos <= t.size()) {
    size_t comma = t.find(',', pos);
    std::string name =
        trim(t.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    pos = comma == std::string::npos ? t.size() + 1 : comma + 1;
    if (name.empty()) continue;
    if (name == "ALL")
      m = (1u << kNumLogLevels) - 1;
    else if (name == "NONE")
      m = 0;
    else {
      bool found = false;
      for (uint32_t l = 0; l < kNumLogLevels; ++l)
        if (name == kLevelNames[l]) m |= 1u << l, found = true;
      if (!found) *bad += (bad->empty() ? "" : ",") + name;
    }
  }
  return m;
}

void setup_locked(State& s) {
  s.prefix = hostname() + ":" + std::to_string(getpid()) + ":";
  if (!s.sink) {
    s.sink = std::make_shared<FileSink>(stderr);
    s.logger = std::make_shared<spdlog::logger>("mycoll", s.sink);
    s.logger->set_pattern("%v");
    s.logger->set_level(spdlog::level::trace);
  }
  std::vector<std::string> warnings;
  std::string level = upper(trim(env_get("MYCOLL_DEBUG")));
  int lv = 0;  // 0 warn, 1 info, 2 trace, -1 off
  if (level == "INFO")
    lv = 1;
  else if (level == "TRACE")
    lv = 2;
  else if (level == "OFF" || level == "NONE")
    lv = -1;
  else if (!level.empty() && level != "WARN" && level != "ERROR" && level != "VERSION")
    warnings.push_back("MYCOLL_DEBUG='" + level + "' is not WARN, INFO, TRACE or NONE; using WARN");
  std::string bad;
  const std::string subsys_text = env_get("MYCOLL_DEBUG_SUBSYS");
  uint32_t subsys = parse_subsys_mask(subsys_text, &bad);
  if (trim(subsys_text).empty() && lv == 2) subsys = kAllSubsys;  // TRACE: every step
  if (!bad.empty())
    warnings.push_back("MYCOLL_DEBUG_SUBSYS: unknown subsystem(s) " + bad +
                       " ignored (known: "
                       "INIT,COLL,TRANSPORT,BOOTSTRAP,TUNING,NET,GPU,ENV,PROXY,ALL)");
  bad.clear();
  s.ts_levels = parse_level_set(env_get("MYCOLL_DEBUG_TIMESTAMP_LEVELS"), &bad);
  if (!bad.empty())
    warnings.push_back("MYCOLL_DEBUG_TIMESTAMP_LEVELS: unknown level(s) " + bad + " ignored");
  s.ts_format = env_get("MYCOLL_DEBUG_TIMESTAMP_FORMAT");

  const std::string file = env_get("MYCOLL_DEBUG_FILE");
  s.file_pattern.clear();
  if (!file.empty() && lv >= 0) {
    std::string rank = launcher_rank();
    if (file.find("%r") != std::string::npos && rank.empty())
      s.file_pattern = file;  // log_set_rank
    else
      open_file_locked(s, file, rank);
  }
  s.file_waits.store(!s.file_pattern.empty(), std::memory_order_release);
  logdetail::g_masks[0].store(lv >= 0 ? kAllSubsys : 0, std::memory_order_relaxed);
  logdetail::g_masks[1].store(lv >= 1 ? subsys : 0, std::memory_order_relaxed);
  logdetail::g_masks[2].store(lv >= 2 ? subsys : 0, std::memory_order_relaxed);
  s.ready.store(true, std::memory_order_release);
  for (const auto& w : warnings) s.logger->log(spdlog::level::warn, own_line(s, "WARN", w));
}

void ensure_ready() {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  if (!s.ready) setup_locked(s);
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

const char* subsys_name(Subsys s) {
  uint32_t i = static_cast<uint32_t>(s);
  return i < kNumSubsys ? kSubsysNames[i] : "?";
}

uint32_t default_subsys_mask() { return kAllSubsys & ~(1u << uint32_t(Subsys::Coll)); }

uint32_t parse_subsys_mask(const std::string& text, std::string* bad) {
  std::string t = upper(trim(text));
  if (t.empty()) return default_subsys_mask();
  bool invert = t[0] == '^';
  if (invert) t.erase(0, 1);
  uint32_t m = 0;
  size_t pos = 0;
  while (pos <= t.size()) {
    size_t comma = t.find(',', pos);
    std::string name =
        trim(t.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    pos = comma == std::string::npos ? t.size() + 1 : comma + 1;
    if (name.empty()) continue;
    if (name == "ALL") {
      m = kAllSubsys;
      continue;
    }
    bool found = false;
    for (uint32_t i = 0; i < kNumSubsys; ++i)
      if (name == kSubsysNames[i]) m |= 1u << i, found = true;
    if (!found && bad) *bad += (bad->empty() ? "" : ",") + name;
  }
  return invert ? kAllSubsys & ~m : m;
}

std::string expand_log_path(const std::string& pattern, const std::string& host, long pid,
                            const std::string& rank) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    char c = pattern[++i];
    if (c == 'h')
      out += host;
    else if (c == 'p')
      out += std::to_string(pid);
    else if (c == 'r' && !rank.empty())
      out += rank;
    else if (c == '%')
      out += '%';
    else
      out += std::string("%") + c;
  }
  return out;
}

std::string format_timestamp(const std::string& format, int64_t unix_ns) {
  // %Nf / %f first (strftime knows no fractions), then strftime.
  std::string f;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] == '%' && i + 1 < format.size()) {
      size_t j = i + 1;
      int digits = 6;
      if (std::isdigit(static_cast<unsigned char>(format[j])) && j + 1 < format.size() &&
          format[j + 1] == 'f')
        digits = std::max(1, format[j] - '0'), ++j;
      if (format[j] == 'f') {
        char frac[16];
        std::snprintf(frac, sizeof(frac), "%09lld", static_cast<long long>(unix_ns % 1000000000));
        f += std::string(frac, std::min(digits, 9));
        i = j;
        continue;
      }
      f += format[i];
      f += format[++i];
      continue;
    }
    f += format[i];
  }
  time_t secs = static_cast<time_t>(unix_ns / 1000000000);
  struct tm tmv;
  localtime_r(&secs, &tmv);
  char buf[256];
  size_t n = std::strftime(buf, sizeof(buf), f.c_str(), &tmv);
  return std::string(buf, n);
}

namespace {
std::string format_timestamp_now(const std::string& format) {
  auto now = std::chrono::system_clock::now().time_since_epoch();
  return format_timestamp(format,
                          std::chrono::duration_cast<std::chrono::nanoseconds>(now).count());
}
}  // namespace

std::string closest_env_name(const std::string& name) {
  std::string best;
  size_t best_d = 4;  // at most 3 edits
  for (const auto& v : env_registry()) {
    size_t d = edit_distance(name, v.name);
    if (d < best_d) best_d = d, best = v.name;
  }
  return best;
}

namespace logdetail {

void emit(LogLevel l, Subsys s, fmt::string_view f, fmt::format_args args) {
  State& st = state();
  if (!st.ready.load(std::memory_order_acquire)) {
    ensure_ready();
    if (!log_enabled(l, s)) return;
  }
  std::string line = line_head(st, static_cast<uint32_t>(l), subsys_name(s));
  if (t_tag) line += *t_tag + ": ";
  try {
    fmt::vformat_to(std::back_inserter(line), f, args);
  } catch (const std::exception& e) {
    line += std::string("(bad log format: ") + e.what() + ")";
  }
  if (st.file_waits.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> g(st.mu);
    if (!st.file_pattern.empty()) {  // %r: the file opens with the first communicator
      if (st.pending.size() < kMaxPendingLines)
        st.pending.push_back(std::move(line));
      else
        st.pending_dropped = true;
      return;
    }
  }
  st.logger->log(spdlog::level::info, line);
}

}  // namespace logdetail

LogScope::LogScope(const std::string* tag) : prev_(t_tag) { t_tag = tag; }
LogScope::~LogScope() { t_tag = prev_; }

void log_set_rank(int rank) {
  ensure_ready();
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  if (s.file_pattern.empty()) return;
  open_file_locked(s, s.file_pattern, std::to_string(rank));
  s.file_pattern.clear();
  s.file_waits.store(false, std::memory_order_release);
  for (const auto& line : s.pending) s.logger->log(spdlog::level::info, line);
  if (s.pending_dropped)
    s.logger->log(spdlog::level::info, own_line(s, "WARN",
                                                "earlier lines dropped while the %r "
                                                "debug file waited for a rank"));
  s.pending.clear();
  s.pending_dropped = false;
}

void warn_unknown_env_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::set<std::string> known;
    for (const auto& v : env_registry()) known.insert(v.name);
    for (char** e = environ; e && *e; ++e) {
      std::string kv = *e;
      if (kv.compare(0, 7, "MYCOLL_") != 0) continue;
      std::string name = kv.substr(0, kv.find('='));
      // The tools' and examples' own variables.
      if (name.compare(0, 12, "MYCOLL_PERF_") == 0 || name == "MYCOLL_LOCAL_RANK") continue;
      if (known.count(name)) continue;
      std::string near = closest_env_name(name);
      log_warn(Subsys::Env,
               "{} is not a mycoll variable{}; ignored (docs/environment.md lists "
               "them all)",
               name, near.empty() ? "" : " (did you mean " + near + "?)");
    }
  });
}

void log_reload_for_tests() {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  s.ready.store(false);
  if (s.sink) s.sink->set_file(stderr);
  setup_locked(s);
}

}  // namespace mycoll
