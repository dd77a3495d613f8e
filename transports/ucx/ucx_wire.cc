// Decoders of the UCX transport's connection messages (ucx_wire.h).
#include "transports/ucx/ucx_wire.h"

#include <algorithm>
#include <cstring>

namespace mycoll {
namespace ucxwire {

mycollResult_t check_addr_lengths(const AddrInfo* info, int n, uint64_t* max_len,
                                  std::string* why) {
  uint64_t longest = 0;
  for (int r = 0; r < n; ++r) {
    if (info[r].len > kMaxAddressBytes) {
      *why = "ucx transport: rank " + std::to_string(r) + " announces a worker address of " +
             std::to_string(info[r].len) + " bytes (at most " + std::to_string(kMaxAddressBytes) +
             ")";
      return mycollRemoteError;
    }
    longest = std::max(longest, info[r].len);
  }
  if (n > 0 && longest > kMaxAddressTableBytes / static_cast<uint64_t>(n)) {
    *why = "ucx transport: the worker address table of " + std::to_string(n) + " ranks x " +
           std::to_string(longest) + " bytes exceeds " + std::to_string(kMaxAddressTableBytes) +
           " bytes";
    return mycollInvalidUsage;
  }
  *max_len = longest;
  return mycollSuccess;
}

mycollResult_t check_peer_addr(const AddrInfo& info, int peer, int me, uint64_t chunk,
                               std::string* why) {
  if (info.len == 0) {
    *why = "ucx transport: rank " + std::to_string(me) + " lists rank " + std::to_string(peer) +
           " as a peer but that rank has no UCX peers (asymmetric peer lists)";
    return mycollInvalidUsage;
  }
  if (info.chunk != chunk) {
    *why = "ucx transport: MYCOLL_UCX_CHUNK_BYTES differs: " + std::to_string(chunk) + " on rank " +
           std::to_string(me) + ", " + std::to_string(info.chunk) + " on rank " +
           std::to_string(peer);
    return mycollInvalidUsage;
  }
  return mycollSuccess;
}

void encode_hello(uint64_t bs_tag, int me, uint64_t out[2]) {
  out[0] = kHelloMagic;
  out[1] = bs_tag ^ static_cast<uint64_t>(me);
}

mycollResult_t check_hello(const void* p, size_t n, uint64_t bs_tag, int peer, int me,
                           std::string* why) {
  const std::string who =
      "ucx: rank " + std::to_string(me) + " got a bad hello from rank " + std::to_string(peer);
  if (n != kHelloBytes) {
    *why = who + " (" + std::to_string(n) + " bytes, not " + std::to_string(kHelloBytes) + ")";
    return mycollRemoteError;
  }
  uint64_t h[2];
  std::memcpy(h, p, sizeof(h));
  if (h[0] != kHelloMagic) {
    *why = who + " (bad magic)";
    return mycollRemoteError;
  }
  if (h[1] != (bs_tag ^ static_cast<uint64_t>(peer))) {
    *why = who + " (another communicator?)";
    return mycollRemoteError;
  }
  return mycollSuccess;
}

mycollResult_t check_data_message(uint64_t seq, uint64_t len, std::string* why) {
  if (len > kCreditBytes) return mycollSuccess;
  *why = "message " + std::to_string(seq) + " of " + std::to_string(len) +
         " bytes: no data after its credit (protocol violation)";
  return mycollRemoteError;
}

mycollResult_t check_credit_message(uint64_t len, std::string* why) {
  if (len == kCreditBytes) return mycollSuccess;
  *why = "credit message of " + std::to_string(len) + " bytes (protocol violation)";
  return mycollRemoteError;
}

mycollResult_t take_credit(const void* p, uint64_t sent, uint64_t* credit, std::string* why) {
  uint64_t count;
  std::memcpy(&count, p, kCreditBytes);
  if (count > sent) {
    *why = "credit of " + std::to_string(count) + " messages consumed, of " + std::to_string(sent) +
           " sent (protocol violation)";
    return mycollRemoteError;
  }
  *credit = std::max(*credit, count);
  return mycollSuccess;
}

uint64_t send_room(uint64_t sent, uint64_t credit, int window) {
  const uint64_t w = window > 0 ? static_cast<uint64_t>(window) : 0;
  const uint64_t ahead = sent - credit;
  return ahead < w ? w - ahead : 0;
}

bool credit_due(uint64_t consumed, uint64_t told, int window) {
  return consumed - told >= static_cast<uint64_t>(std::max(1, window - window / 4));
}

}  // namespace ucxwire
}  // namespace mycoll
