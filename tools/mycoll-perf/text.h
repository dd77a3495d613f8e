// Text of mycoll-perf's outputs: the table's cells, JSON literals, the date.
#pragma once

#include <string>

namespace mycoll_perf {

// Table cells: "N/A" for NaN (not measured) or a negative #wrong (not checked).
std::string fmt_time(double us);  // "%.2f" below 100 us, "%.1f" below 10 ms, "%.0f" above
std::string fmt_bw(double v);     // "%.2f"
std::string fmt_wrong(long long w);

// JSON values: "null" for NaN or infinity / a negative #wrong.
std::string json_num(double v);  // "%.6g"
std::string json_wrong(long long w);
// s as a JSON string literal (quotes, backslashes and control characters escaped).
std::string json_str(const std::string& s);

// printf onto the end of *out (one call writes at most 511 characters).
__attribute__((format(printf, 2, 3))) void appendf(std::string* out, const char* fmt, ...);

// Now, UTC, as ISO 8601 ("2025-01-31T12:00:00Z").
std::string utc_now();

}  // namespace mycoll_perf
