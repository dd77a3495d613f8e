// NCCL's environment variables, mapped onto mycoll's registry at the first
// nccl* call (before mycoll parses its configuration or creates its logger):
// each mapped NCCL_X sets its MYCOLL_Y unless MYCOLL_Y is already set (a
// MYCOLL_* setting wins). Every NCCL_* variable that is set is logged once
// at INFO, as mapped or as ignored with the reason.
#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/plan.h"
#include "base/config.h"
#include "base/log.h"
#include "comm/comm.h"
#include "nccl/shim.h"

extern char** environ;

namespace mycoll {
namespace nccl {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t p = s.find(sep, start);
    out.push_back(trim(s.substr(start, p == std::string::npos ? std::string::npos : p - start)));
    if (p == std::string::npos) return out;
    start = p + 1;
  }
}

bool registered(const char* name) {
  for (const EnvVar& v : env_registry())
    if (std::strcmp(v.name, name) == 0) return true;
  return false;
}

// One translation: the MYCOLL_* settings for an NCCL value, what the shim
// does with it itself (applied), or a reason why it has no meaning here.
struct Translation {
  using Settings = std::vector<std::pair<std::string, std::string>>;
  Translation(Settings s, std::string why, std::string done = "")
      : settings(std::move(s)), why_ignored(std::move(why)), applied(std::move(done)) {}
  Settings settings;
  std::string why_ignored;
  std::string applied;
};

// NCCL_MAX_CTAS / NCCL_MAX_NCHANNELS: a positive integer, at most 64 (the
// most channels there are); 0 when it is not one.
int cta_count(const std::string& v) {
  const std::string t = trim(v);
  if (t.empty() || t.size() > 9 || !std::all_of(t.begin(), t.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c)) != 0;
      }))
    return 0;
  return std::min(std::stoi(t), 64);
}

Translation max_ctas(const std::string& v) {
  const int n = cta_count(v);
  if (n == 0) return {{}, "not a positive integer", ""};
  return {{},
          "",
          "every communicator's GPU kernels run at most " + std::to_string(n) +
              " thread blocks (at least 2 where the call check runs), so as many channels at "
              "most; ncclConfig_t.maxCTAs may lower it per communicator"};
}

Translation same_as(const char* mycoll_name, const std::string& v) {
  return Translation{{{mycoll_name, v}}, ""};
}

// NCCL_DEBUG: NONE VERSION WARN INFO ABORT TRACE.
Translation debug_level(const std::string& v) {
  const std::string l = lower(trim(v));
  const char* to = nullptr;
  if (l == "none")
    to = "OFF";
  else if (l == "version" || l == "warn" || l == "abort")
    to = "WARN";
  else if (l == "info")
    to = "INFO";
  else if (l == "trace")
    to = "TRACE";
  if (!to) return {{}, "not one of NONE, VERSION, WARN, INFO, ABORT, TRACE"};
  return same_as("MYCOLL_DEBUG", to);
}

// NCCL_ALGO: "ring", "tree", or "<coll>:<algo>;..." with one algorithm each.
// Lists of allowed algorithms, exclusions (^) and NCCL-only algorithms
// (NVLS, CollNet, PAT) have no mycoll equivalent.
Translation algo(const std::string& v) {
  auto one = [](const std::string& a) -> std::string {
    const std::string l = lower(a);
    return l == "ring" || l == "tree" ? l : "";
  };
  const std::string t = trim(v);
  std::string spec;
  if (t.find(':') == std::string::npos) {
    spec = one(t);
  } else {
    for (const std::string& entry : split(t, ';')) {
      size_t colon = entry.find(':');
      if (colon == std::string::npos) return {{}, "mixes global and per-collective entries"};
      std::string a = one(trim(entry.substr(colon + 1)));
      if (a.empty()) {
        spec.clear();
        break;
      }
      spec += (spec.empty() ? "" : ",") + lower(trim(entry.substr(0, colon))) + ":" + a;
    }
  }
  if (spec.empty())
    return {{},
            "mycoll maps only Ring and Tree, one algorithm per collective "
            "(e.g. NCCL_ALGO=Tree or allreduce:ring;broadcast:tree); automatic choice kept"};
  try {
    AlgoPolicy::parse(spec);
  } catch (const Error& e) {
    return {{}, std::string("no mycoll equivalent: ") + e.what()};
  }
  return same_as("MYCOLL_ALGO", spec);
}

// NCCL_PROTO: only "no LL" maps (mycoll's low-latency protocol and its
// single-kernel LL collectives off); LL128 does not exist here.
Translation proto(const std::string& v) {
  std::string t = lower(trim(v));
  bool exclude = !t.empty() && t[0] == '^';
  if (exclude) t = t.substr(1);
  bool ll = false, known = true;
  for (const std::string& p : split(t, ',')) {
    if (p == "ll")
      ll = true;
    else if (p != "ll128" && p != "simple")
      known = false;
  }
  if (!known) return {{}, "not a list of LL, LL128, Simple"};
  const bool ll_allowed = exclude ? !ll : ll;
  if (ll_allowed) return {{}, "mycoll chooses LL by message size (MYCOLL_GPU_LL_BYTES); kept"};
  return {{{"MYCOLL_GPU_LL_BYTES", "0"},
           {"MYCOLL_GPU_ONESHOT_BYTES", "0"},
           {"MYCOLL_GPU_TWOSHOT_BYTES", "0"},
           {"MYCOLL_GPU_LL_COLL_BYTES", "0"}},
          ""};
}

// NCCL_NET: the built-in "IB" and "Socket" transports.
Translation net(const std::string& v) {
  const std::string l = lower(trim(v));
  if (l == "ib") return same_as("MYCOLL_NET", "ib");
  if (l == "socket") return same_as("MYCOLL_NET", "socket");
  return {{}, "mycoll has no network plugins (IB and Socket map)"};
}

// NCCL_DEBUG_SUBSYS maps only where mycoll's registry has a subsystem filter.
Translation debug_subsys(const std::string& v) {
  if (registered("MYCOLL_DEBUG_SUBSYS")) return same_as("MYCOLL_DEBUG_SUBSYS", v);
  return {{}, "this mycoll logs every subsystem at the chosen level"};
}

Translation translate(const std::string& name, const std::string& v) {
  if (name == "NCCL_DEBUG") return debug_level(v);
  if (name == "NCCL_DEBUG_FILE") return same_as("MYCOLL_DEBUG_FILE", v);
  if (name == "NCCL_DEBUG_SUBSYS") return debug_subsys(v);
  if (name == "NCCL_SOCKET_IFNAME") return same_as("MYCOLL_SOCKET_IFNAME", v);
  if (name == "NCCL_IB_HCA") return same_as("MYCOLL_IB_HCA", v);
  if (name == "NCCL_IB_GID_INDEX") return same_as("MYCOLL_IB_GID_INDEX", v);
  if (name == "NCCL_IB_TIMEOUT") return same_as("MYCOLL_IB_TIMEOUT", v);
  if (name == "NCCL_IB_RETRY_CNT") return same_as("MYCOLL_IB_RETRY_CNT", v);
  if (name == "NCCL_NET") return net(v);
  if (name == "NCCL_ALGO") return algo(v);
  if (name == "NCCL_PROTO") return proto(v);
  if (name == "NCCL_MAX_CTAS" || name == "NCCL_MAX_NCHANNELS") return max_ctas(v);
  if (name == "NCCL_MIN_CTAS" || name == "NCCL_MIN_NCHANNELS")
    return {{},
            "mycoll has no channel floor: it picks channels per call by message size "
            "(small messages use few)",
            ""};
  return {{}, "no meaning in mycoll"};
}

std::once_flag g_once;

void apply_once() {
  std::vector<std::string> lines;
  std::vector<std::pair<std::string, std::string>> vars;
  for (char** e = environ; e && *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (!eq || std::strncmp(*e, "NCCL_", 5) != 0) continue;
    vars.emplace_back(std::string(static_cast<const char*>(*e), eq), std::string(eq + 1));
  }
  std::sort(vars.begin(), vars.end());
  for (const auto& [name, value] : vars) {
    if (name == "NCCL_COMM_ID") {
      lines.push_back(name + "=" + value + ": rendezvous address (rank 0 serves it)");
      continue;
    }
    Translation t = translate(name, value);
    if (!t.applied.empty()) {
      lines.push_back(name + "=" + value + ": " + t.applied);
      continue;
    }
    if (t.settings.empty()) {
      lines.push_back(name + "=" + value + " ignored: " + t.why_ignored);
      continue;
    }
    for (const auto& [to, v] : t.settings) {
      if (!registered(to.c_str())) {
        lines.push_back(name + "=" + value + " ignored: " + to + " is not a mycoll setting");
      } else if (const char* have = std::getenv(to.c_str())) {
        lines.push_back(name + "=" + value + " not applied: " + to + "=" + have +
                        " is set and wins");
      } else {
        setenv(to.c_str(), v.c_str(), 0);
        lines.push_back(name + "=" + value + " -> " + to + "=" + v);
      }
    }
  }
  Dl_info info{};
  const char* path = dladdr(reinterpret_cast<void*>(&apply_nccl_env), &info) && info.dli_fname
                         ? info.dli_fname
                         : "?";
  log_info(Subsys::Init, "NCCL API {}.{}.{} served by mycoll {}.{}.{} ({})",
           kNcclVersionCode / 10000, kNcclVersionCode / 100 % 100, kNcclVersionCode % 100,
           MYCOLL_MAJOR, MYCOLL_MINOR, MYCOLL_PATCH, path);
  for (const std::string& l : lines) log_info(Subsys::Init, "{}", l);
}

}  // namespace

void apply_nccl_env() { std::call_once(g_once, apply_once); }

int nccl_env_max_ctas() {
  int cap = 0;
  for (const char* name : {"NCCL_MAX_CTAS", "NCCL_MAX_NCHANNELS"}) {
    const char* v = std::getenv(name);
    cap = tighter_cap(cap, v ? cta_count(v) : 0);
  }
  return cap;
}

std::string nccl_comm_id() {
  const char* v = std::getenv("NCCL_COMM_ID");
  return v ? trim(v) : std::string();
}

}  // namespace nccl
}  // namespace mycoll
