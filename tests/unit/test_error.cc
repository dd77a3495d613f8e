// check_arg's forms (eager string, literal, lazy callable) and the exact
// messages of the per-call argument checks, which build their text only
// when a check fails.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "base/error.h"
#include "comm/comm.h"
#include "comm/enqueue.h"
#include "engine/device_engine.h"

using namespace mycoll;

namespace {

// The message and code of the Error f throws ("" if it throws none).
template <typename F>
std::string message_of(F&& f, mycollResult_t* code = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (code) *code = e.code();
    return e.what();
  }
  return "";
}

}  // namespace

TEST(CheckArg, LazyMessageIsBuiltOnlyOnFailure) {
  int built = 0;
  auto make = [&] {
    ++built;
    return std::string("f: x is ") + std::to_string(7);
  };
  EXPECT_NO_THROW(check_arg(true, make));
  EXPECT_EQ(built, 0);
  mycollResult_t code = mycollSuccess;
  EXPECT_EQ(message_of([&] { check_arg(false, make); }, &code), "f: x is 7");
  EXPECT_EQ(code, mycollInvalidArgument);
  EXPECT_EQ(built, 1);
}

TEST(CheckArg, LiteralAndStringForms) {
  EXPECT_NO_THROW(check_arg(true, "f: p is NULL"));
  EXPECT_EQ(message_of([] { check_arg(false, "f: p is NULL"); }), "f: p is NULL");
  const std::string s = "f: n " + std::to_string(-1) + " must be >= 1";
  EXPECT_NO_THROW(check_arg(true, s));
  EXPECT_EQ(message_of([&] { check_arg(false, s); }), s);
}

// The texts callers and tests rely on: function, bad value, valid range.
TEST(ValidateCall, MessagesNameFunctionValueAndRange) {
  mycollComm comm;
  comm.nranks = 3;
  comm.rank = 0;
  float a[4] = {}, b[4] = {};
  auto msg = [&](mycollComm* c, Call call, const char* fn) {
    return message_of([&] { validate_call(c, call, fn); });
  };
  Call ok;
  ok.coll = Coll::AllReduce, ok.send = a, ok.recv = b, ok.count = 4;
  EXPECT_EQ(msg(&comm, ok, "mycollAllReduce"), "");
  ok.recv = a;  // in place
  EXPECT_EQ(msg(&comm, ok, "mycollAllReduce"), "");
  ok.recv = b;

  EXPECT_EQ(msg(nullptr, ok, "mycollAllReduce"), "mycollAllReduce: comm is NULL");
  Call c = ok;
  c.dtype = static_cast<mycollDataType_t>(42);
  EXPECT_EQ(msg(&comm, c, "mycollAllReduce"),
            "mycollAllReduce: datatype 42 is not a mycollDataType_t (0..11)");
  c = ok;
  c.op = static_cast<mycollRedOp_t>(9);
  EXPECT_EQ(msg(&comm, c, "mycollAllReduce"),
            "mycollAllReduce: op 9 is not a mycollRedOp_t (0..4)");
  c = ok;
  c.coll = Coll::Broadcast, c.root = 3;
  EXPECT_EQ(msg(&comm, c, "mycollBroadcast"), "mycollBroadcast: root 3 is out of range [0, 3)");
  c = ok;
  c.coll = Coll::SendRecv, c.is_send = true, c.peer = -1;
  EXPECT_EQ(msg(&comm, c, "mycollSend"), "mycollSend: peer -1 is out of range [0, 3)");
  c = ok;
  c.coll = Coll::AllGather, c.count = SIZE_MAX / 2;
  EXPECT_EQ(msg(&comm, c, "mycollAllGather"),
            "mycollAllGather: count " + std::to_string(SIZE_MAX / 2) + " overflows the byte size");
  c = ok;
  c.count = size_t(1) << 60;
  EXPECT_EQ(msg(&comm, c, "mycollAllReduce"), "mycollAllReduce: count " +
                                                  std::to_string(size_t(1) << 60) +
                                                  " is larger than any buffer can be");
  c = ok;
  c.send = nullptr;
  EXPECT_EQ(msg(&comm, c, "mycollAllReduce"), "mycollAllReduce: sendbuff is NULL");
  c = ok;
  c.recv = nullptr;
  EXPECT_EQ(msg(&comm, c, "mycollAllReduce"), "mycollAllReduce: recvbuff is NULL");
  c = ok;
  c.send = nullptr, c.count = 0;  // nothing to move: no buffer needed
  EXPECT_EQ(msg(&comm, c, "mycollAllReduce"), "");

  comm.magic = 0;
  EXPECT_EQ(msg(&comm, ok, "mycollAllReduce"),
            "mycollAllReduce: comm is not a valid communicator (destroyed?)");
}

// The count limits at their exact boundaries: the whole message's bytes
// (count x element size x blocks) must not overflow and must be at most
// 2^56.
TEST(ValidateCall, CountLimitsAtTheirBoundaries) {
  mycollComm comm;
  comm.nranks = 3;
  comm.rank = 0;
  float a[4] = {}, b[12] = {};
  auto msg = [&](Coll coll, mycollDataType_t t, size_t count) {
    Call c;
    c.coll = coll, c.dtype = t, c.send = a, c.recv = b, c.count = count;
    return message_of([&] { validate_call(&comm, c, "f"); });
  };
  auto count_msg = [](size_t count, const char* what) {
    return "f: count " + std::to_string(count) + " " + what;
  };
  const size_t lim = size_t(1) << 56;
  // all-gather of float32 on 3 ranks: 12 bytes per element of count.
  EXPECT_EQ(msg(Coll::AllGather, mycollFloat32, SIZE_MAX / 12 + 1),
            count_msg(SIZE_MAX / 12 + 1, "overflows the byte size"));
  EXPECT_EQ(msg(Coll::AllGather, mycollFloat32, SIZE_MAX / 12),
            count_msg(SIZE_MAX / 12, "is larger than any buffer can be"));
  EXPECT_EQ(msg(Coll::AllGather, mycollFloat32, lim / 12 + 1),
            count_msg(lim / 12 + 1, "is larger than any buffer can be"));
  EXPECT_EQ(msg(Coll::AllGather, mycollFloat32, lim / 12).find("count"), std::string::npos);
  // all-reduce of float64: 8 bytes per element.
  EXPECT_EQ(msg(Coll::AllReduce, mycollFloat64, lim / 8 + 1),
            count_msg(lim / 8 + 1, "is larger than any buffer can be"));
  EXPECT_EQ(msg(Coll::AllReduce, mycollFloat64, lim / 8).find("count"), std::string::npos);
  EXPECT_EQ(msg(Coll::AllReduce, mycollInt8, SIZE_MAX),
            count_msg(SIZE_MAX, "is larger than any buffer can be"));
}
