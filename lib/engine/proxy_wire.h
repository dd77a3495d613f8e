// The frames GPU proxies exchange over a host transport (gpu_proxy.h), and
// their pure decoders (no I/O; tests/fuzz runs them on arbitrary bytes).
// On the wire: a 16-byte header {type, channel, value}, then for data
// `value` payload bytes. Data carries one FIFO slot (value <= slot size);
// a credit returns the count of slots the receiving kernel consumed so far,
// or, with kCreditPoison set, that the receiving kernel refused a
// point-to-point message of another size (its own bytes below the bit). A
// size frame carries the byte count of the point-to-point message whose
// first slot is the channel's next data frame (the kernel's size line,
// kernels/prims/p2p_size.cuh); a call frame the signature of the sender's
// next checked collective call (its call line, kernels/prims/call_check.cuh),
// on channel 0.
// Every field comes from the peer: the channel indexes per-channel state,
// the value becomes a write length into a slot and a counter, so each is
// checked against what this proxy knows before use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/device_plan.h"
#include "mycoll.h"

namespace mycoll {
namespace proxywire {

constexpr uint32_t kData = 0x31445850U;    // "PXD1"
constexpr uint32_t kCredit = 0x31435850U;  // "PXC1"
constexpr uint32_t kSize = 0x31535850U;    // "PXS1"
constexpr uint32_t kCall = 0x314b5850U;    // "PXK1"
using ::mycoll::kCreditPoison;             // kernels/device_plan.h

struct Frame {
  uint32_t type;
  uint32_t channel;
  uint64_t value;  // data: payload bytes; credit: slots consumed so far
};
constexpr size_t kFrameBytes = 16;
static_assert(sizeof(Frame) == kFrameBytes, "frame header layout");

// Decodes a frame header (n bytes at p) for a proxy with nch channels: its
// size, type and channel. mycollRemoteError and *why if malformed.
mycollResult_t decode_frame(const void* p, size_t n, int nch, Frame* out, std::string* why);

// A credit of `value` slots consumed on a channel where the peer had freed
// `freed` of the `sent` slots sent to it: credits never go back nor past
// what was sent; a poisoned credit (kCreditPoison set: the receiver refused
// a message) passes whatever its low bits. mycollRemoteError and *why
// otherwise.
mycollResult_t check_credit(uint64_t value, uint64_t freed, uint64_t sent, std::string* why);

// A data frame of `value` bytes on a channel of nslots slots of slot_bytes
// where `delivered` slots arrived and the kernel consumed `consumed`: it
// must fit a slot and a slot must be free (the sender's flow control).
// mycollRemoteError and *why otherwise.
mycollResult_t check_data(uint64_t value, uint64_t slot_bytes, int nslots, uint64_t delivered,
                          uint64_t consumed, std::string* why);

}  // namespace proxywire
}  // namespace mycoll
