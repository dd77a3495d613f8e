// Compile-time checks of an nccl.h against what lib/nccl relies on: every
// enum value, sizeof(ncclUniqueId), the offset of every ncclConfig_t and
// ncclSimInfo_t field, and what NCCL_CONFIG_INITIALIZER /
// NCCL_SIM_INFO_INITIALIZER produce. Included after an nccl.h by
// check_layout.cc (the header the library is built against: the CUDA
// toolkit's when found) and check_fallback.cc (lib/nccl/include/nccl.h).
// Nothing here generates code.
#pragma once

#include <climits>
#include <cstddef>

#include "mycoll.h"

namespace mycoll_nccl_layout {

#define MYCOLL_SAME(a, b) static_assert(int(a) == int(b), #a " != " #b)
MYCOLL_SAME(NCCL_VERSION_CODE, 22809);
MYCOLL_SAME(NCCL_VERSION(2, 28, 9), 22809);
MYCOLL_SAME(NCCL_VERSION(2, 8, 4), 2804);

MYCOLL_SAME(ncclSuccess, mycollSuccess);
MYCOLL_SAME(ncclUnhandledCudaError, mycollUnhandledCudaError);
MYCOLL_SAME(ncclSystemError, mycollSystemError);
MYCOLL_SAME(ncclInternalError, mycollInternalError);
MYCOLL_SAME(ncclInvalidArgument, mycollInvalidArgument);
MYCOLL_SAME(ncclInvalidUsage, mycollInvalidUsage);
MYCOLL_SAME(ncclRemoteError, mycollRemoteError);
MYCOLL_SAME(ncclInProgress, mycollInProgress);
MYCOLL_SAME(ncclNumResults, 8);

MYCOLL_SAME(ncclSum, mycollSum);
MYCOLL_SAME(ncclProd, mycollProd);
MYCOLL_SAME(ncclMax, mycollMax);
MYCOLL_SAME(ncclMin, mycollMin);
MYCOLL_SAME(ncclAvg, mycollAvg);
MYCOLL_SAME(ncclNumOps, mycollNumOps);
MYCOLL_SAME(ncclMaxRedOp, 0x7fffffff);
static_assert(sizeof(ncclRedOp_t) == 4, "ncclRedOp_t is not 4 bytes");

MYCOLL_SAME(ncclInt8, mycollInt8);
MYCOLL_SAME(ncclChar, mycollChar);
MYCOLL_SAME(ncclUint8, mycollUint8);
MYCOLL_SAME(ncclInt32, mycollInt32);
MYCOLL_SAME(ncclInt, mycollInt);
MYCOLL_SAME(ncclUint32, mycollUint32);
MYCOLL_SAME(ncclInt64, mycollInt64);
MYCOLL_SAME(ncclUint64, mycollUint64);
MYCOLL_SAME(ncclFloat16, mycollFloat16);
MYCOLL_SAME(ncclHalf, mycollHalf);
MYCOLL_SAME(ncclFloat32, mycollFloat32);
MYCOLL_SAME(ncclFloat, mycollFloat);
MYCOLL_SAME(ncclFloat64, mycollFloat64);
MYCOLL_SAME(ncclDouble, mycollDouble);
MYCOLL_SAME(ncclBfloat16, mycollBfloat16);
MYCOLL_SAME(ncclFloat8e4m3, mycollFloat8e4m3);
MYCOLL_SAME(ncclFloat8e5m2, mycollFloat8e5m2);
MYCOLL_SAME(ncclNumTypes, mycollNumTypes);

MYCOLL_SAME(ncclScalarDevice, 0);
MYCOLL_SAME(ncclScalarHostImmediate, 1);
MYCOLL_SAME(NCCL_SPLIT_NOCOLOR, MYCOLL_SPLIT_NOCOLOR);
MYCOLL_SAME(NCCL_CONFIG_UNDEF_INT, INT_MIN);
MYCOLL_SAME(NCCL_WIN_DEFAULT, 0);
MYCOLL_SAME(NCCL_WIN_COLL_SYMMETRIC, 1);
MYCOLL_SAME(NCCL_WIN_REQUIRED_ALIGNMENT, 4096);
MYCOLL_SAME(NCCL_SHRINK_DEFAULT, 0);
MYCOLL_SAME(NCCL_SHRINK_ABORT, 1);
MYCOLL_SAME(NCCL_REVOKE_DEFAULT, 0);
MYCOLL_SAME(NCCL_CTA_POLICY_DEFAULT, 0);
MYCOLL_SAME(NCCL_CTA_POLICY_EFFICIENCY, 1);
MYCOLL_SAME(NCCL_CTA_POLICY_ZERO, 2);
MYCOLL_SAME(NCCL_UNIQUE_ID_BYTES, MYCOLL_UNIQUE_ID_BYTES);
#undef MYCOLL_SAME

static_assert(sizeof(ncclUniqueId) == 128, "sizeof(ncclUniqueId)");
static_assert(sizeof(ncclUniqueId) == sizeof(mycollUniqueId), "unique id sizes differ");

// ncclConfig_v22800 on LP64.
#define MYCOLL_AT(T, field, off) static_assert(offsetof(T, field) == (off), "offsetof(" #T ", " #field ")")
MYCOLL_AT(ncclConfig_t, size, 0);
MYCOLL_AT(ncclConfig_t, magic, 8);
MYCOLL_AT(ncclConfig_t, version, 12);
MYCOLL_AT(ncclConfig_t, blocking, 16);
MYCOLL_AT(ncclConfig_t, cgaClusterSize, 20);
MYCOLL_AT(ncclConfig_t, minCTAs, 24);
MYCOLL_AT(ncclConfig_t, maxCTAs, 28);
MYCOLL_AT(ncclConfig_t, netName, 32);
MYCOLL_AT(ncclConfig_t, splitShare, 40);
MYCOLL_AT(ncclConfig_t, trafficClass, 44);
MYCOLL_AT(ncclConfig_t, commName, 48);
MYCOLL_AT(ncclConfig_t, collnetEnable, 56);
MYCOLL_AT(ncclConfig_t, CTAPolicy, 60);
MYCOLL_AT(ncclConfig_t, shrinkShare, 64);
MYCOLL_AT(ncclConfig_t, nvlsCTAs, 68);
MYCOLL_AT(ncclConfig_t, nChannelsPerNetPeer, 72);
MYCOLL_AT(ncclConfig_t, nvlinkCentricSched, 76);
static_assert(sizeof(ncclConfig_t) == 80, "sizeof(ncclConfig_t)");
MYCOLL_AT(ncclSimInfo_t, size, 0);
MYCOLL_AT(ncclSimInfo_t, magic, 8);
MYCOLL_AT(ncclSimInfo_t, version, 12);
MYCOLL_AT(ncclSimInfo_t, estimatedTime, 16);
static_assert(sizeof(ncclSimInfo_t) == 24, "sizeof(ncclSimInfo_t)");
#undef MYCOLL_AT

constexpr ncclConfig_t kConfig = NCCL_CONFIG_INITIALIZER;
static_assert(kConfig.size == sizeof(ncclConfig_t), "NCCL_CONFIG_INITIALIZER size");
static_assert(kConfig.magic == 0xcafebeefu, "NCCL_CONFIG_INITIALIZER magic");
static_assert(kConfig.version == 22809u, "NCCL_CONFIG_INITIALIZER version");
static_assert(kConfig.blocking == INT_MIN && kConfig.cgaClusterSize == INT_MIN &&
                  kConfig.minCTAs == INT_MIN && kConfig.maxCTAs == INT_MIN &&
                  kConfig.netName == nullptr && kConfig.splitShare == INT_MIN &&
                  kConfig.trafficClass == INT_MIN && kConfig.commName == nullptr &&
                  kConfig.collnetEnable == INT_MIN && kConfig.CTAPolicy == INT_MIN &&
                  kConfig.shrinkShare == INT_MIN && kConfig.nvlsCTAs == INT_MIN &&
                  kConfig.nChannelsPerNetPeer == INT_MIN && kConfig.nvlinkCentricSched == INT_MIN,
              "NCCL_CONFIG_INITIALIZER leaves every field undefined");

constexpr ncclSimInfo_t kSimInfo = NCCL_SIM_INFO_INITIALIZER;
static_assert(kSimInfo.size == sizeof(ncclSimInfo_t) && kSimInfo.magic == 0x74685283u &&
                  kSimInfo.version == 22809u && kSimInfo.estimatedTime == -1.0f,
              "NCCL_SIM_INFO_INITIALIZER");

}  // namespace mycoll_nccl_layout
