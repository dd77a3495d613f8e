#include "text.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <ctime>

namespace mycoll_perf {

std::string fmt_time(double us) {
  char b[32];
  if (std::isnan(us)) return "N/A";
  std::snprintf(b, sizeof(b), us >= 10000.0 ? "%.0f" : us >= 100.0 ? "%.1f" : "%.2f", us);
  return b;
}

std::string fmt_bw(double v) {
  if (std::isnan(v)) return "N/A";
  char b[32];
  std::snprintf(b, sizeof(b), "%.2f", v);
  return b;
}

std::string fmt_wrong(long long w) { return w < 0 ? "N/A" : std::to_string(w); }

std::string json_num(double v) {
  if (std::isnan(v) || std::isinf(v)) return "null";
  char b[40];
  std::snprintf(b, sizeof(b), "%.6g", v);
  return b;
}

std::string json_wrong(long long w) { return w < 0 ? "null" : std::to_string(w); }

std::string json_str(const std::string& s) {
  std::string out = "\"";
  for (const char ch : s) {
    const unsigned char u = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (u < 0x20) {
      char b[8];
      std::snprintf(b, sizeof(b), "\\u%04x", u);
      out += b;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

void appendf(std::string* out, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char b[512];
  const int n = std::vsnprintf(b, sizeof(b), fmt, ap);
  va_end(ap);
  if (n > 0) out->append(b, std::min<size_t>(static_cast<size_t>(n), sizeof(b) - 1));
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char b[32];
  std::strftime(b, sizeof(b), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return b;
}

}  // namespace mycoll_perf
