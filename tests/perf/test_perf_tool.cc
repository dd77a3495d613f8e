// mycoll-perf's pure parts: the command line (nccl-tests' -R, -B/--best_of, --dirty),
// the progress line, the output text and the build commit. The runs themselves are CLI tests
// (tools/mycoll-perf/CMakeLists.txt).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <regex>
#include <string>
#include <vector>

#include "build_info.h"
#include "options.h"
#include "progress.h"
#include "text.h"

namespace mycoll_perf {
namespace {

// parse_options over {"mycoll-perf", args...}; *o gets the result.
bool parse(std::vector<std::string> args, Options* o, int* code = nullptr) {
  args.insert(args.begin(), "mycoll-perf");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  int c = -1;
  const bool ok = parse_options(static_cast<int>(argv.size()), argv.data(), o, &c);
  if (code) *code = c;
  return ok;
}

TEST(PerfOptions, BestOfShortAndLong) {
  Options a, b, c;
  ASSERT_TRUE(parse({"all_reduce", "-B", "3"}, &a));
  EXPECT_EQ(a.repeats, 3);
  ASSERT_TRUE(parse({"all_reduce", "--best_of", "4"}, &b));
  EXPECT_EQ(b.repeats, 4);
  ASSERT_TRUE(parse({"all_reduce", "--best_of=5"}, &c));
  EXPECT_EQ(c.repeats, 5);
  EXPECT_EQ(a.local_register, 0);  // -B does not touch -R
}

TEST(PerfOptions, BestOfRejectsZero) {
  Options o;
  int code = 0;
  EXPECT_FALSE(parse({"all_reduce", "-B", "0"}, &o, &code));
  EXPECT_EQ(code, 2);
}

TEST(PerfOptions, RegisterTakesNcclTestsValues) {
  for (int v : {0, 1, 2}) {
    Options s, l;
    ASSERT_TRUE(parse({"all_reduce", "-R", std::to_string(v)}, &s)) << v;
    EXPECT_EQ(s.local_register, v);
    EXPECT_EQ(s.repeats, 1) << "-R must not mean best-of any more";
    ASSERT_TRUE(parse({"all_reduce", "--local_register", std::to_string(v)}, &l)) << v;
    EXPECT_EQ(l.local_register, v);
  }
}

TEST(PerfOptions, RegisterRejectsOtherValues) {
  for (const char* v : {"3", "-1", "x"}) {
    Options o;
    int code = 0;
    EXPECT_FALSE(parse({"all_reduce", "-R", v}, &o, &code)) << v;
    EXPECT_EQ(code, 2);
  }
}

TEST(PerfOptions, DescribeNamesBestOfAndRegistration) {
  Options o;
  ASSERT_TRUE(parse({"all_reduce", "-B", "3"}, &o));
  EXPECT_NE(describe_options(o).find(" -B 3 "), std::string::npos) << describe_options(o);
  EXPECT_EQ(describe_options(o).find("-R"), std::string::npos) << describe_options(o);
  Options r;
  ASSERT_TRUE(parse({"all_reduce", "-R", "2"}, &r));
  EXPECT_NE(describe_options(r).find(" -R 2"), std::string::npos) << describe_options(r);
}

TEST(PerfOptions, DirtyIsHostMemoryBesideMycollOrMpiOnly) {
  Options d;
  ASSERT_TRUE(parse({"sendrecv", "--dirty", "1", "--vs", "mpi"}, &d));
  EXPECT_EQ(d.dirty, 1);
  EXPECT_NE(describe_options(d).find(" --dirty 1"), std::string::npos) << describe_options(d);
  Options off;
  ASSERT_TRUE(parse({"sendrecv", "--dirty=0"}, &off));
  EXPECT_EQ(off.dirty, 0);
  EXPECT_EQ(describe_options(off).find("--dirty"), std::string::npos) << describe_options(off);
  for (std::vector<std::string> bad : {std::vector<std::string>{"sendrecv", "--dirty", "2"},
                                       {"sendrecv", "--dirty", "1", "--mem", "cuda"},
                                       {"sendrecv", "--dirty", "1", "--vs", "gloo"}}) {
    Options o;
    int code = 0;
    EXPECT_FALSE(parse(bad, &o, &code)) << bad.back();
    EXPECT_EQ(code, 2);
  }
}

TEST(PerfOptions, RegistrationNoticeOnlyForOneAndTwo) {
  Options o;
  EXPECT_EQ(registration_notice(o), "");
  o.local_register = 1;
  const std::string one = registration_notice(o);
  EXPECT_NE(one.find("-R 1"), std::string::npos) << one;
  EXPECT_NE(one.find("changes nothing"), std::string::npos) << one;
  EXPECT_EQ(one.find('\n'), std::string::npos) << "one line";
  o.local_register = 2;
  EXPECT_NE(registration_notice(o).find("symmetric"), std::string::npos);
}

TEST(PerfProgress, HumanBytes) {
  EXPECT_EQ(human_bytes(0), "0 B");
  EXPECT_EQ(human_bytes(8), "8 B");
  EXPECT_EQ(human_bytes(20000), "20000 B");
  EXPECT_EQ(human_bytes(64 << 10), "64 KiB");
  EXPECT_EQ(human_bytes(16 << 20), "16 MiB");
  EXPECT_EQ(human_bytes(size_t{3} << 30), "3 GiB");
  EXPECT_EQ(human_bytes((1 << 20) + 1024), "1025 KiB");
}

TEST(PerfProgress, StepsAndLabels) {
  Options o;
  ASSERT_TRUE(parse({"all", "-b", "8", "-e", "64K", "-f", "8", "-d", "all", "-o", "all"}, &o));
  // 5 sizes; 3 reducing collectives x 10 types x 5 ops, 6 others x 10 types.
  EXPECT_EQ(sweep_steps(o), 5 * (3 * 10 * 5 + 6 * 10));
  EXPECT_EQ(step_label(o, *find_coll("all_reduce"), mycollInt32, mycollMax, 16 << 20),
            "all_reduce 16 MiB int32 max");
  EXPECT_EQ(step_label(o, *find_coll("broadcast"), mycollInt32, mycollMax, 8),
            "broadcast 8 B int32");
  Options one;
  ASSERT_TRUE(parse({"all_reduce", "-b", "1M", "-e", "4M"}, &one));
  EXPECT_EQ(sweep_steps(one), 3);
  EXPECT_EQ(step_label(one, *find_coll("all_reduce"), mycollFloat32, mycollSum, 1 << 20),
            "all_reduce 1 MiB");
}

std::string contents(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  for (int ch; (ch = std::fgetc(f)) != EOF;) s += static_cast<char>(ch);
  return s;
}

TEST(PerfProgress, EnabledRewritesOneLine) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress p(f, true, 27);
    p.step("all_reduce 8 B");
    p.clear();
    p.step("all_reduce 16 MiB");
  }  // the destructor erases the last line
  EXPECT_EQ(contents(f),
            "\rall_reduce 8 B (1/27)\033[K\r\033[K\rall_reduce 16 MiB (2/27)\033[K\r\033[K");
  std::fclose(f);
}

TEST(PerfProgress, DisabledWritesNothing) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress p(f, false, 3);
    for (int i = 0; i < 3; ++i) p.step("all_reduce 8 B");
    p.clear();
  }
  EXPECT_EQ(contents(f), "");
  std::fclose(f);
}

TEST(PerfText, TableCells) {
  const double nan = std::nan("");
  EXPECT_EQ(fmt_time(nan), "N/A");
  EXPECT_EQ(fmt_time(7.125), "7.12");
  EXPECT_EQ(fmt_time(123.45), "123.5");
  EXPECT_EQ(fmt_time(12345.6), "12346");
  EXPECT_EQ(fmt_bw(nan), "N/A");
  EXPECT_EQ(fmt_bw(2.5), "2.50");
  EXPECT_EQ(fmt_wrong(-1), "N/A");
  EXPECT_EQ(fmt_wrong(3), "3");
}

TEST(PerfText, JsonLiterals) {
  EXPECT_EQ(json_num(std::nan("")), "null");
  EXPECT_EQ(json_num(HUGE_VAL), "null");
  EXPECT_EQ(json_num(0.25), "0.25");
  EXPECT_EQ(json_wrong(-1), "null");
  EXPECT_EQ(json_wrong(0), "0");
  EXPECT_EQ(json_str("a \"b\" c\\d\n"), "\"a \\\"b\\\" c\\\\d\\u000a\"");
  std::string row = "{";
  appendf(&row, "\"n\":%d", 42);
  EXPECT_EQ(row, "{\"n\":42");
  EXPECT_TRUE(std::regex_match(utc_now(), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")));
}

TEST(PerfBuildInfo, CommitIsAHashOrUnknown) {
  const std::string c = build_commit();
  EXPECT_TRUE(std::regex_match(c, std::regex("[0-9a-f]{4,40}(-dirty)?|unknown"))) << c;
}

}  // namespace
}  // namespace mycoll_perf
