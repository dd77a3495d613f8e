// What the UCX transport receives from its peers while connecting, and its
// pure decoders (no UCX, no I/O: built with or without UCX; tests/fuzz
// runs them on arbitrary bytes):
//   - AddrInfo, allgathered per rank: the length of its packed worker
//     address and its chunk size; the addresses themselves then go round
//     in a table of nranks slots of the longest length, so every length
//     is checked before that table is allocated;
//   - the hello each side sends on a new endpoint;
// and what it receives once connected: the credit word at the head of every
// data message and alone in a credit message (flow control, ucx_impl.h).
// The worker address bytes are UCX's own format, handed to ucp_ep_create.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "mycoll.h"

namespace mycoll {
namespace ucxwire {

struct AddrInfo {  // allgathered per rank
  uint64_t len;    // packed worker address bytes (0: no UCX peers)
  uint64_t chunk;  // MYCOLL_UCX_CHUNK_BYTES
};

// Largest worker address accepted (UCX's are a few hundred bytes to a few
// KiB, more with many devices), and largest table of them.
constexpr uint64_t kMaxAddressBytes = 64 * 1024;
constexpr uint64_t kMaxAddressTableBytes = 1ull << 30;

constexpr uint64_t kHelloMagic = 0x4f4c4c4548584355ull;  // "UCXHELLO"
constexpr size_t kHelloBytes = 16;                       // magic, bootstrap tag ^ sender rank

// Checks the lengths of the n ranks' entries (the same on every rank, so
// every rank refuses together, before the address table is gathered). On
// success *max_len is the longest (0: no rank has UCX peers). Otherwise
// mycollRemoteError for a length above kMaxAddressBytes, mycollInvalidUsage
// for a table above kMaxAddressTableBytes; *why names the rank and length.
mycollResult_t check_addr_lengths(const AddrInfo* info, int n, uint64_t* max_len, std::string* why);

// Checks the entry of peer rank `peer` as rank `me` connecting with chunk
// size `chunk` sees it: a worker address (else the peer lists have not been
// symmetric) and the same chunk size. mycollInvalidUsage and *why if not.
mycollResult_t check_peer_addr(const AddrInfo& info, int peer, int me, uint64_t chunk,
                               std::string* why);

// The hello sent by rank `me` of the communicator whose bootstrap tag is
// bs_tag (kHelloBytes at out).
void encode_hello(uint64_t bs_tag, int me, uint64_t out[2]);
// Checks a hello of n bytes at p from rank `peer`: its size, magic and tag.
// mycollRemoteError and *why if it is not the one expected.
mycollResult_t check_hello(const void* p, size_t n, uint64_t bs_tag, int peer, int me,
                           std::string* why);

// Flow control (transports/ucx/ucx_impl.h, "Flow control"): every data message
// starts with a credit word, the count of messages its sender has consumed
// of the other direction; a credit message is that word alone. A sender
// posts message k only while k < credit + window.
constexpr size_t kCreditBytes = sizeof(uint64_t);

// Data message number `seq` of `len` bytes: its credit word and at least one
// byte of data. mycollRemoteError and *why if not.
mycollResult_t check_data_message(uint64_t seq, uint64_t len, std::string* why);
// A credit message of `len` bytes: the word alone. mycollRemoteError and
// *why if not.
mycollResult_t check_credit_message(uint64_t len, std::string* why);
// The credit word at p (kCreditBytes, as received) from a peer this rank has
// sent `sent` messages: a count above `sent` is mycollRemoteError (*why);
// otherwise *credit becomes the larger of the two (credits arrive out of
// order between data and credit messages: the largest stands).
mycollResult_t take_credit(const void* p, uint64_t sent, uint64_t* credit, std::string* why);
// Messages a sender that has posted `sent` may still post with `credit`
// consumed (take_credit keeps credit <= sent): window - (sent - credit), 0
// when the window is full (or a window below 1).
uint64_t send_room(uint64_t sent, uint64_t credit, int window);
// Whether a reader that has consumed `consumed` messages and last told the
// count `told` (in a data message or a credit message) sends a credit
// message now: when three quarters of a window (at least one) went untold,
// so the sender keeps a quarter to send while the credit travels.
bool credit_due(uint64_t consumed, uint64_t told, int window);

}  // namespace ucxwire
}  // namespace mycoll
