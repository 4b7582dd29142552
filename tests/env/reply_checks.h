// Checks of a decoded reply's body for the service tests: a request's round trip, the body
// of a successful reply, or the error reply a request must get (its code, its field, and a
// message that starts with the field).
#ifndef TIERGYM_TESTS_ENV_REPLY_CHECKS_H_
#define TIERGYM_TESTS_ENV_REPLY_CHECKS_H_

#include <string>
#include <variant>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "env/protocol/protocol.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tiergym::env::testing {

// The body of the reply to `request`, sent as a client sends it (encoded) to `handle` (a
// connection's Service::Handle, say) and decoded; fails the calling test, and gives an empty
// Error, when the reply does not decode.
template <typename Handle>
protocol::ReplyBody RoundTrip(Handle&& handle, const protocol::Request& request) {
  absl::StatusOr<protocol::Reply> r =
      protocol::DecodeReply(handle(protocol::EncodeRequest(request)), request.op);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return protocol::Error{};
  return r->body;
}

// The body of type T of a successful reply; fails the calling test on an error reply.
template <typename T>
T OkBody(const protocol::ReplyBody& b) {
  if (const auto* e = std::get_if<protocol::Error>(&b)) {
    ADD_FAILURE() << "error reply: " << e->message;
    return T{};
  }
  return std::get<T>(b);
}

// The error of an error reply, checked to have `code` and `field` and a message starting
// with "FIELD: "; fails the calling test otherwise.
inline protocol::Error ErrorBody(const protocol::ReplyBody& b, absl::StatusCode code,
                                 const std::string& field) {
  const auto* e = std::get_if<protocol::Error>(&b);
  if (e == nullptr) {
    ADD_FAILURE() << "expected an error reply";
    return {};
  }
  EXPECT_EQ(e->code, code) << e->message;
  EXPECT_EQ(e->field, field) << e->message;
  EXPECT_THAT(e->message, ::testing::StartsWith(field + ": "));
  return *e;
}

}  // namespace tiergym::env::testing

#endif  // TIERGYM_TESTS_ENV_REPLY_CHECKS_H_
