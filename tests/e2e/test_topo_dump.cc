// MYCOLL_TOPO_DUMP_FILE: every rank writes valid JSON naming itself, the
// hosts, and every peer with the transport that serves it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/multiproc.h"

using namespace mycoll_test;

namespace {

// Minimal JSON syntax checker (RFC 8259 grammar, no semantic checks).
class JsonChecker {
 public:
  explicit JsonChecker(const std::string& s) : s_(s) {}
  bool valid() {
    ws();
    if (!value()) return false;
    ws();
    return i_ == s_.size();
  }
  size_t where() const { return i_; }

 private:
  void ws() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool lit(const char* w) {
    size_t n = std::char_traits<char>::length(w);
    if (s_.compare(i_, n, w) != 0) return false;
    i_ += n;
    return true;
  }
  bool str() {
    if (i_ >= s_.size() || s_[i_] != '"') return false;
    for (++i_; i_ < s_.size(); ++i_) {
      unsigned char c = s_[i_];
      if (c == '"') {
        ++i_;
        return true;
      }
      if (c < 0x20) return false;
      if (c == '\\') {
        if (++i_ >= s_.size()) return false;
        char e = s_[i_];
        if (e == 'u') {
          for (int k = 0; k < 4; ++k)
            if (++i_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[i_])))
              return false;
        } else if (std::string("\"\\/bfnrt").find(e) == std::string::npos) {
          return false;
        }
      }
    }
    return false;
  }
  bool num() {
    size_t b = i_;
    if (i_ < s_.size() && s_[i_] == '-') ++i_;
    while (i_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[i_])) ||
                              s_[i_] == '.' || s_[i_] == 'e' || s_[i_] == 'E' || s_[i_] == '+'))
      ++i_;
    return i_ > b && std::isdigit(static_cast<unsigned char>(s_[i_ - 1]));
  }
  bool value() {
    if (i_ >= s_.size()) return false;
    char c = s_[i_];
    if (c == '{') return container('}', true);
    if (c == '[') return container(']', false);
    if (c == '"') return str();
    if (c == 't') return lit("true");
    if (c == 'f') return lit("false");
    if (c == 'n') return lit("null");
    return num();
  }
  bool container(char close, bool object) {
    ++i_;
    ws();
    if (i_ < s_.size() && s_[i_] == close) {
      ++i_;
      return true;
    }
    for (;;) {
      ws();
      if (object) {
        if (!str()) return false;
        ws();
        if (i_ >= s_.size() || s_[i_++] != ':') return false;
        ws();
      }
      if (!value()) return false;
      ws();
      if (i_ >= s_.size()) return false;
      char c = s_[i_++];
      if (c == close) return true;
      if (c != ',') return false;
    }
  }
  const std::string& s_;
  size_t i_ = 0;
};

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool has(const std::string& doc, const std::string& what) {
  return doc.find(what) != std::string::npos;
}

void run_dump(const std::string& transport) {
  const int n = 3;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string dir = "/tmp/mycoll_topo_" + std::to_string(getpid()) + "_" + transport;
  ASSERT_EQ(std::system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()), 0);
  LaunchOptions opt;
  opt.nranks = n;
  opt.env = {{"MYCOLL_TRANSPORT", transport},
             {"MYCOLL_TIMEOUT", "30"},
             {"MYCOLL_TOPO_DUMP_FILE", dir + "/topo_%h_%r.json"}};
  auto res = run_ranks(opt, [](mycollComm_t, int, int, const mycollUniqueId&) { return 0; });
  ASSERT_EQ(describe_failures(res), "");

  for (int r = 0; r < n; ++r) {
    std::string path = dir + "/topo_" + host + "_" + std::to_string(r) + ".json";
    std::string doc = slurp(path);
    ASSERT_FALSE(doc.empty()) << "missing or empty " << path;
    JsonChecker jc(doc);
    EXPECT_TRUE(jc.valid()) << path << " is not valid JSON near byte " << jc.where() << ":\n"
                            << doc;
    EXPECT_TRUE(has(doc, "\"rank\": " + std::to_string(r) + ",")) << doc;
    EXPECT_TRUE(has(doc, "\"nranks\": 3,")) << doc;
    EXPECT_TRUE(has(doc, "\"hostname\": \"" + std::string(host) + "\"")) << doc;
    EXPECT_TRUE(has(doc, "\"ranks\": [0, 1, 2]")) << "one host with every rank:\n" << doc;
    EXPECT_TRUE(has(doc, "\"gpu\": null")) << doc;
    EXPECT_TRUE(has(doc, "\"nics\": [")) << doc;
    EXPECT_TRUE(has(doc, "\"name\": \"lo\"")) << "loopback listed among the NICs:\n" << doc;
    EXPECT_TRUE(has(doc, "\"127.0.0.1\"")) << doc;
    EXPECT_TRUE(has(doc, "\"rdma_devices\": [")) << doc;
    for (int p = 0; p < n; ++p) {
      std::string entry = "{\"rank\": " + std::to_string(p) + ", ";
      if (p == r) {
        EXPECT_FALSE(has(doc, entry)) << "self listed as a peer:\n" << doc;
        continue;
      }
      size_t at = doc.find(entry);
      ASSERT_NE(at, std::string::npos) << "peer " << p << " missing in " << path << ":\n" << doc;
      std::string line = doc.substr(at, doc.find('}', at) - at);
      EXPECT_TRUE(has(line, "\"transport\": \"" + transport + "\"")) << line;
      EXPECT_TRUE(has(line, "\"connection\": \"" + transport)) << line;
      EXPECT_TRUE(has(line, "\"same_host\": true")) << line;
    }
  }
  std::system(("rm -rf " + dir).c_str());
}

TEST(TopoDump, ShmPeers) { run_dump("shm"); }
TEST(TopoDump, SocketPeers) { run_dump("socket"); }
#if MYCOLL_HAVE_UCX
TEST(TopoDump, UcxPeers) { run_dump("ucx"); }
#endif

}  // namespace
