// libFuzzer target: the protocol codec (env/protocol/protocol.h) on arbitrary bytes, as the
// server decodes requests and a client decodes replies. Beyond "no crash, no sanitizer
// error, no leak": every refusal names its field, and a request that decodes survives an
// encode / decode round trip with the same op and id.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "env/protocol/protocol.h"

using namespace tiergym::env::protocol;  // NOLINT: a fuzz target's one namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view payload(reinterpret_cast<const char*>(data), size);
  DecodeLimits limits;
  limits.max_batch = 1024;
  const DecodedRequest d = DecodeRequest(payload, limits);
  if (d.error) {
    const Error& e = *d.error;
    if (e.field.empty() || e.message.compare(0, e.field.size() + 2, e.field + ": ") != 0) {
      std::abort();  // a refusal that does not name its field
    }
    (void)EncodeReply(Reply{d.request.id, e});
  } else {
    const DecodedRequest again = DecodeRequest(EncodeRequest(d.request), limits);
    if (again.error || again.request.op != d.request.op || again.request.id != d.request.id) {
      std::abort();  // what decodes must re-encode to the same request
    }
  }
  (void)PeekRequestOp(payload);
  (void)PeekReplyId(payload);
  (void)DecodeReply(payload, size == 0 ? Op::kHello : static_cast<Op>(data[0] % kNumOps));
  return 0;
}
