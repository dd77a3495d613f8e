// The suites of nccl_api_test (each runs in every forked rank).
#pragma once

#include "harness.h"

namespace ntest {

int suite_colls(World& w);    // test_colls.cc: every collective x type x op
int suite_p2p(World& w);      // test_comm.cc: grouped and plain send/recv
int suite_comm(World& w);     // test_comm.cc: split, non-blocking init, finalize, revoke, ...
int suite_errors(World& w);   // test_comm.cc: error codes, strings, bad arguments
int suite_shrink(World& w);   // test_comm.cc: shrink without the last rank (which stops)
int suite_env(World& w);      // test_comm.cc: NCCL_* variables, NCCL_DEBUG=INFO output
int suite_initall(World& w);  // test_initall.cc: one thread drives every rank (ncclCommInitAll)
int suite_graphs(World& w);   // test_graphs.cc: calls captured in a CUDA graph (GPU memory)
int suite_ctas(World& w);     // test_ctas.cc: maxCTAs / NCCL_MAX_CTAS caps, bad values
int suite_agree(World& w);    // test_agree.cc: settings that must be alike on every rank
int suite_soak(World& w);     // test_soak.cc: a seeded random sequence of calls, sizes to 40 MiB
int suite_soak1(World& w);    // test_soak.cc: the same, one thread driving every rank

}  // namespace ntest
