// Flight recorder (MYCOLL_FLIGHT_RECORDER): a rank made to skip a
// collective is named by tools/flight/mycoll-flight from every rank's dump
// (the skipping rank's on request, the others' written when their
// collective failed); the ring keeps the last N ops; abort and the opt-in
// signal write dumps; with the recorder off mycollCommDump says so.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/multiproc.h"

using namespace mycoll_test;

namespace {

// Runs the analysis tool; returns its output, *status its exit status.
std::string run_tool(const std::string& args, int* status) {
  const std::string cmd =
      "python3 " + std::string(MYCOLL_SOURCE_DIR) + "/tools/flight/mycoll-flight " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return "popen failed";
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
  int st = pclose(p);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

int all_reduce(mycollComm_t comm) {
  std::vector<float> buf(16, 1.0f);
  return mycollAllReduce(buf.data(), buf.data(), buf.size(), mycollFloat32, mycollSum, comm,
                         nullptr);
}

std::string comm_id_of(const std::string& dump) {
  std::smatch m;
  static const std::regex re("\"comm\": \"([0-9a-f]{8})\"");
  return std::regex_search(dump, m, re) ? std::string(m[1]) : std::string();
}

}  // namespace

TEST(FlightRecorder, ToolNamesTheRankThatSkippedACollective) {
  const std::string dir = scratch_dir("frtest", "skip");
  LaunchOptions opt;
  opt.nranks = 3;
  opt.timeout_s = 120;
  opt.env = {{"MYCOLL_FLIGHT_RECORDER", "8"},
             {"MYCOLL_FLIGHT_RECORDER_FILE", dir + "/fr.%c.%r.json"},
             {"MYCOLL_TIMEOUT", "20"},
             {"MYCOLL_DEBUG", "NONE"}};
  auto res = run_ranks(opt, [](mycollComm_t comm, int rank, int, const mycollUniqueId&) {
    for (int i = 0; i < 20; ++i)
      if (all_reduce(comm) != mycollSuccess) return 1;
    if (rank == 2) {
      // Skips op 20: writes its recorder and leaves; the others' op 20 fails.
      return mycollCommDump(comm, nullptr) == mycollSuccess ? 0 : 2;
    }
    return all_reduce(comm) != mycollSuccess ? 0 : 3;
  });
  ASSERT_EQ(describe_failures(res), "");
  std::string id;
  for (int r = 0; r < 3; ++r) {
    std::string path;
    // The file name carries the comm id (%c): list it.
    FILE* p = popen(("ls " + dir + "/fr.*." + std::to_string(r) + ".json").c_str(), "r");
    char name[512] = {};
    ASSERT_NE(p, nullptr);
    ASSERT_NE(fgets(name, sizeof(name), p), nullptr) << "no dump from rank " << r;
    pclose(p);
    path = name;
    path.erase(path.find_last_not_of("\n") + 1);
    const std::string doc = read_text_file(path);
    if (id.empty()) id = comm_id_of(doc);
    EXPECT_EQ(comm_id_of(doc), id) << doc;
    EXPECT_EQ(path, dir + "/fr." + id + "." + std::to_string(r) + ".json");
    EXPECT_NE(doc.find("\"rank\": " + std::to_string(r) + ","), std::string::npos) << doc;
    // The ring keeps the last 8 ops only.
    EXPECT_EQ(doc.find("\"seq\": 5,"), std::string::npos) << doc;
    EXPECT_NE(doc.find("\"seq\": 19, \"coll\": \"allreduce\", \"count\": 16, \"dtype\": "
                       "\"float32\""),
              std::string::npos)
        << doc;
    if (r == 2) {
      EXPECT_NE(doc.find("\"reason\": \"request\""), std::string::npos) << doc;
      EXPECT_NE(doc.find("\"ops_issued\": 20,"), std::string::npos) << doc;
    } else {
      EXPECT_NE(doc.find("\"ops_issued\": 21,"), std::string::npos) << doc;
      EXPECT_NE(doc.find("\"seq\": 20, \"coll\": \"allreduce\""), std::string::npos) << doc;
      EXPECT_NE(doc.find("\"state\": \"failed\""), std::string::npos) << doc;
      EXPECT_NE(doc.find("\"waiting_on\": {\"peer\": "), std::string::npos) << doc;
    }
  }
  int status = -1;
  const std::string out = run_tool(dir, &status);
  EXPECT_EQ(status, 1) << out;
  EXPECT_NE(out.find("rank 2 never started op 20 allreduce count 16 float32 on comm " + id +
                     " (rank(s) 0,1 did); its last: op 19 allreduce count 16 float32, done"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("rank 0 never"), std::string::npos) << out;
  EXPECT_EQ(out.find("rank 1 never"), std::string::npos) << out;
  remove_dir(dir);
}

TEST(FlightRecorder, SignalWritesDumpsAndLevelRanksAreReportedLevel) {
  const std::string dir = scratch_dir("frtest", "signal");
  LaunchOptions opt;
  opt.nranks = 2;
  opt.env = {{"MYCOLL_FLIGHT_RECORDER", "4"},
             {"MYCOLL_FLIGHT_RECORDER_FILE", dir + "/fr.%r.json"},
             {"MYCOLL_FLIGHT_RECORDER_SIGNAL", "USR2"},
             {"MYCOLL_TIMEOUT", "30"},
             {"MYCOLL_DEBUG", "NONE"}};
  auto res = run_ranks(opt, [&](mycollComm_t comm, int rank, int, const mycollUniqueId&) {
    for (int i = 0; i < 3; ++i)
      if (all_reduce(comm) != mycollSuccess) return 1;
    const std::string path = dir + "/fr." + std::to_string(rank) + ".json";
    raise(SIGUSR2);  // a thread writes the dump: wait for it (bounded)
    for (int i = 0; i < 1000 && read_text_file(path).find("\"reason\": \"signal\"") == std::string::npos; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (read_text_file(path).find("\"reason\": \"signal\"") == std::string::npos) return 2;
    if (read_text_file(path).find("\"seq\": 2, \"coll\": \"allreduce\"") == std::string::npos) return 3;
    if (all_reduce(comm) != mycollSuccess) return 4;  // both dumps are written
    if (rank == 0) {  // level ranks: the tool finds nobody behind
      int status = -1;
      std::string out = run_tool(dir, &status);
      if (status != 0 || out.find("nobody is behind") == std::string::npos) {
        std::fprintf(stderr, "%s", out.c_str());
        return 5;
      }
    }
    return all_reduce(comm) == mycollSuccess ? 0 : 6;  // the tool has run
  });
  ASSERT_EQ(describe_failures(res), "");
  remove_dir(dir);
}

TEST(FlightRecorder, AbortWritesTheDumpAndOffMeansDumpSaysSo) {
  const std::string dir = scratch_dir("frtest", "abort1");
  LaunchOptions opt;
  opt.nranks = 1;
  opt.init_comm = false;
  opt.env = {{"MYCOLL_FLIGHT_RECORDER", "4"},
             {"MYCOLL_FLIGHT_RECORDER_FILE", dir + "/fr.%r.json"},
             {"MYCOLL_DEBUG", "NONE"}};
  auto res = run_ranks(opt, [&](mycollComm_t, int, int, const mycollUniqueId& id) {
    mycollComm_t comm = nullptr;
    if (mycollCommInitRank(&comm, 1, id, 0) != mycollSuccess) return 1;
    if (all_reduce(comm) != mycollSuccess) return 2;
    if (mycollCommAbort(comm) != mycollSuccess) return 3;
    const std::string doc = read_text_file(dir + "/fr.0.json");
    if (doc.find("\"reason\": \"abort\"") == std::string::npos ||
        doc.find("\"state\": \"done\"") == std::string::npos) {
      std::fprintf(stderr, "abort dump:\n%s\n", doc.c_str());
      return 4;
    }
    // Off: mycollCommDump is an error that says how to turn it on.
    unsetenv("MYCOLL_FLIGHT_RECORDER");
    mycollUniqueId id2;
    if (mycollGetUniqueId(&id2) != mycollSuccess) return 5;
    if (mycollCommInitRank(&comm, 1, id2, 0) != mycollSuccess) return 6;
    const mycollResult_t r = mycollCommDump(comm, nullptr);
    const std::string why = mycollGetLastError(comm);
    mycollCommDestroy(comm);
    if (r != mycollInvalidUsage || why.find("MYCOLL_FLIGHT_RECORDER=N") == std::string::npos) {
      std::fprintf(stderr, "dump with the recorder off: %d %s\n", int(r), why.c_str());
      return 7;
    }
    return 0;
  });
  ASSERT_EQ(describe_failures(res), "");
  remove_dir(dir);
}
