// Decoders of the GPU proxies' frames (proxy_wire.h).
#include "engine/proxy_wire.h"

#include <cstring>

namespace mycoll {
namespace proxywire {

mycollResult_t decode_frame(const void* p, size_t n, int nch, Frame* out, std::string* why) {
  if (n != kFrameBytes) {
    *why = "a frame header of " + std::to_string(n) + " bytes";
    return mycollRemoteError;
  }
  Frame f;
  std::memcpy(&f, p, sizeof(f));
  if (f.type != kData && f.type != kCredit && f.type != kSize && f.type != kCall) {
    *why = "a malformed frame (type " + std::to_string(f.type) + ")";
    return mycollRemoteError;
  }
  if (nch <= 0 || f.channel >= static_cast<uint32_t>(nch)) {
    *why = "a malformed frame (channel " + std::to_string(f.channel) + " of " +
           std::to_string(nch) + ")";
    return mycollRemoteError;
  }
  if (f.type == kCall && f.channel != 0) {
    *why = "a malformed call frame (channel " + std::to_string(f.channel) + ")";
    return mycollRemoteError;
  }
  *out = f;
  return mycollSuccess;
}

mycollResult_t check_credit(uint64_t value, uint64_t freed, uint64_t sent, std::string* why) {
  if ((value & kCreditPoison) != 0 || (value >= freed && value <= sent)) return mycollSuccess;
  *why = "a credit of " + std::to_string(value) + " slots " +
         (value < freed ? "after " + std::to_string(freed) + " (out of order)"
                        : "for only " + std::to_string(sent) + " sent");
  return mycollRemoteError;
}

mycollResult_t check_data(uint64_t value, uint64_t slot_bytes, int nslots, uint64_t delivered,
                          uint64_t consumed, std::string* why) {
  if (value > slot_bytes) {
    *why = "a slot of " + std::to_string(value) + " bytes (slots hold " +
           std::to_string(slot_bytes) + ")";
    return mycollRemoteError;
  }
  if (consumed > delivered || delivered - consumed >= static_cast<uint64_t>(nslots)) {
    *why = "a slot of " + std::to_string(value) + " bytes without a free slot (" +
           std::to_string(delivered - consumed) + " of " + std::to_string(nslots) +
           " unread: flow control broken)";
    return mycollRemoteError;
  }
  return mycollSuccess;
}

}  // namespace proxywire
}  // namespace mycoll
