// Logging: MYCOLL_DEBUG_SUBSYS parsing, file names, timestamps, typo
// suggestions, and that a disabled level formats nothing. Lines are read
// back from MYCOLL_DEBUG_FILE (every test runs in its own process).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "base/config.h"
#include "base/log.h"

using namespace mycoll;

namespace {

uint32_t bit(Subsys s) { return 1u << static_cast<uint32_t>(s); }

// Counts how often it is formatted.
struct Counted {
  static int formatted;
};
int Counted::formatted = 0;

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string temp_path(const char* name) {
  return "/tmp/mycoll_test_log_" + std::to_string(getpid()) + "_" + name;
}

void clear_log_env() {
  for (const auto& v : env_registry())
    if (std::string(v.name).compare(0, 12, "MYCOLL_DEBUG") == 0) unsetenv(v.name);
}

}  // namespace

template <>
struct fmt::formatter<Counted> : fmt::formatter<int> {
  template <typename Ctx>
  auto format(const Counted&, Ctx& ctx) const {
    return fmt::formatter<int>::format(++Counted::formatted, ctx);
  }
};

TEST(Log, SubsysMaskDefaultsListsAndExclusions) {
  std::string bad;
  const uint32_t def = parse_subsys_mask("", &bad);
  EXPECT_EQ(def, default_subsys_mask());
  EXPECT_EQ(def & bit(Subsys::Coll), 0u) << "per-call lines are not in the default set";
  EXPECT_NE(def & bit(Subsys::Init), 0u);
  EXPECT_NE(def & bit(Subsys::Bootstrap), 0u);
  EXPECT_EQ(parse_subsys_mask("coll", &bad), bit(Subsys::Coll));
  EXPECT_EQ(parse_subsys_mask("INIT, NET", &bad), bit(Subsys::Init) | bit(Subsys::Net));
  const uint32_t not_coll = parse_subsys_mask("^COLL", &bad);
  EXPECT_EQ(not_coll & bit(Subsys::Coll), 0u);
  EXPECT_NE(not_coll & bit(Subsys::Transport), 0u);
  EXPECT_EQ(parse_subsys_mask("^ALL", &bad), 0u);
  EXPECT_TRUE(bad.empty()) << bad;
  EXPECT_EQ(parse_subsys_mask("INIT,NETWORK", &bad), bit(Subsys::Init));
  EXPECT_EQ(bad, "NETWORK");
}

TEST(Log, FilePathPatterns) {
  EXPECT_EQ(expand_log_path("/tmp/%h.%p.%r.log", "node7", 42, "3"), "/tmp/node7.42.3.log");
  EXPECT_EQ(expand_log_path("/tmp/a%%b-%r", "h", 1, ""), "/tmp/a%b-%r");  // rank not known yet
  EXPECT_EQ(expand_log_path("/tmp/%x%", "h", 1, "0"), "/tmp/%x%");
}

TEST(Log, TimestampFormatWithFractions) {
  setenv("TZ", "UTC", 1);
  tzset();
  const int64_t ns = 1700000000LL * 1000000000LL + 123456789LL;  // 2023-11-14 22:13:20.123456789
  EXPECT_EQ(format_timestamp("[%F %T] ", ns), "[2023-11-14 22:13:20] ");
  EXPECT_EQ(format_timestamp("%T.%3f", ns), "22:13:20.123");
  EXPECT_EQ(format_timestamp("%T.%f", ns), "22:13:20.123456");
  EXPECT_EQ(format_timestamp("%9f", ns), "123456789");
}

TEST(Log, ClosestRegisteredNameForTypos) {
  EXPECT_EQ(closest_env_name("MYCOLL_TIMEOUTS"), "MYCOLL_TIMEOUT");
  EXPECT_EQ(closest_env_name("MYCOLL_TRANSPROT"), "MYCOLL_TRANSPORT");
  EXPECT_EQ(closest_env_name("MYCOLL_SOMETHING_ELSE_ENTIRELY"), "");
}

TEST(Log, DisabledLevelFormatsNothingAndEnabledOneWritesTheFile) {
  clear_log_env();
  const std::string path = temp_path("levels");
  setenv("MYCOLL_DEBUG", "INFO", 1);
  setenv("MYCOLL_DEBUG_FILE", path.c_str(), 1);
  setenv("MYCOLL_DEBUG_TIMESTAMP_LEVELS", "NONE", 1);
  log_reload_for_tests();
  EXPECT_TRUE(log_enabled(LogLevel::Info, Subsys::Init));
  EXPECT_FALSE(log_enabled(LogLevel::Info, Subsys::Coll)) << "COLL is not in the default set";
  EXPECT_FALSE(log_enabled(LogLevel::Trace, Subsys::Init));
  Counted::formatted = 0;
  for (int i = 0; i < 1000; ++i) {
    log_info(Subsys::Coll, "per call {}", Counted{});
    log_trace(Subsys::Init, "step {}", Counted{});
  }
  EXPECT_EQ(Counted::formatted, 0) << "a disabled line formatted its arguments";
  log_info(Subsys::Init, "hello {}", Counted{});
  EXPECT_EQ(Counted::formatted, 1);
  std::string tag = "comm 0000abcd rank 2/4";
  {
    LogScope scope(&tag);
    log_info(Subsys::Net, "tagged");
  }
  log_info(Subsys::Net, "untagged");
  log_warn(Subsys::Coll, "a warning ignores the subsystem mask");
  const std::string text = read_file(path);
  EXPECT_NE(text.find("mycoll INFO [INIT] hello 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("mycoll INFO [NET] comm 0000abcd rank 2/4: tagged\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("mycoll INFO [NET] untagged\n"), std::string::npos) << text;
  EXPECT_NE(text.find("mycoll WARN [COLL] a warning ignores"), std::string::npos) << text;
  EXPECT_EQ(text.find("per call"), std::string::npos) << text;
  unlink(path.c_str());
}

TEST(Log, SubsysSelectionTimestampsAndBadSettingsWarned) {
  clear_log_env();
  const std::string path = temp_path("subsys");
  setenv("MYCOLL_DEBUG", "INFO", 1);
  setenv("MYCOLL_DEBUG_SUBSYS", "COLL,BOGUS", 1);
  setenv("MYCOLL_DEBUG_FILE", path.c_str(), 1);
  setenv("MYCOLL_DEBUG_TIMESTAMP_LEVELS", "INFO", 1);
  setenv("MYCOLL_DEBUG_TIMESTAMP_FORMAT", "<%Y|%3f> ", 1);
  log_reload_for_tests();
  EXPECT_TRUE(log_enabled(LogLevel::Info, Subsys::Coll));
  EXPECT_FALSE(log_enabled(LogLevel::Info, Subsys::Init));
  log_info(Subsys::Coll, "per call");
  log_info(Subsys::Init, "init line");
  const std::string text = read_file(path);
  EXPECT_NE(text.find("MYCOLL_DEBUG_SUBSYS: unknown subsystem(s) BOGUS"), std::string::npos)
      << text;
  const size_t at = text.find("mycoll INFO [COLL] per call");
  ASSERT_NE(at, std::string::npos) << text;
  const size_t line = text.rfind('\n', at) + 1;  // npos + 1 == 0 on the first line
  EXPECT_EQ(text.compare(line, 2, "<2"), 0) << "INFO line without its timestamp: " << text;
  EXPECT_EQ(text.find("init line"), std::string::npos) << text;
  unlink(path.c_str());
}

TEST(Log, TraceWithoutSubsysShowsEverySubsystem) {
  clear_log_env();
  setenv("MYCOLL_DEBUG", "TRACE", 1);
  log_reload_for_tests();
  EXPECT_TRUE(log_enabled(LogLevel::Trace, Subsys::Coll));
  EXPECT_TRUE(log_enabled(LogLevel::Trace, Subsys::Transport));
  setenv("MYCOLL_DEBUG", "NONE", 1);
  log_reload_for_tests();
  EXPECT_FALSE(log_enabled(LogLevel::Warn, Subsys::Init));
  clear_log_env();
  log_reload_for_tests();
  EXPECT_TRUE(log_enabled(LogLevel::Warn, Subsys::Init));
  EXPECT_FALSE(log_enabled(LogLevel::Info, Subsys::Init));
}

TEST(Log, UnwritableFileIsAWarningOnStderrAndCreatesNoDirectory) {
  clear_log_env();
  const std::string dir = temp_path("no_such_dir");
  const std::string path = dir + "/sub/x.log";
  setenv("MYCOLL_DEBUG", "INFO", 1);
  setenv("MYCOLL_DEBUG_FILE", path.c_str(), 1);
  testing::internal::CaptureStderr();
  log_reload_for_tests();
  log_info(Subsys::Init, "goes to stderr instead");
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("MYCOLL_DEBUG_FILE: cannot open '" + path + "': No such file or directory"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("goes to stderr instead"), std::string::npos) << err;
  EXPECT_NE(access(dir.c_str(), F_OK), 0) << "a directory was created: " << dir;
  clear_log_env();
  log_reload_for_tests();
}

TEST(Log, DocumentedSubsystemsAreTheKnownOnes) {
  // docs/environment.md's MYCOLL_DEBUG_SUBSYS text names every subsystem.
  std::string meaning;
  for (const auto& v : env_registry())
    if (std::string(v.name) == "MYCOLL_DEBUG_SUBSYS") meaning = v.meaning;
  for (uint32_t i = 0; i < kNumSubsys; ++i)
    EXPECT_NE(meaning.find(subsys_name(static_cast<Subsys>(i))), std::string::npos)
        << subsys_name(static_cast<Subsys>(i));
}
