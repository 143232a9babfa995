// Requests from the network as `falcon serve`'s event-driven server reads them: parsing any
// bytes never crashes, a parsed request is consistent with its bytes, a refusal has one of the
// statuses the server answers, and parsing in pieces agrees with parsing at once. The answer's
// serializer (gzip included) takes any body.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "serve/event_server.h"

namespace {

constexpr std::size_t kMaxHeader = 4096;
constexpr std::size_t kMaxBody = 8192;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using falcon::serve::Exchange;
  using falcon::serve::RequestParse;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  Exchange ex;
  const RequestParse p = falcon::serve::parse_request(in, kMaxHeader, kMaxBody, ex);
  switch (p.kind) {
    case RequestParse::kRefused:
      if (p.status != 400 && p.status != 411 && p.status != 413 && p.status != 431 &&
          p.status != 505) {
        __builtin_trap();
      }
      if (p.message.empty()) __builtin_trap();
      return 0;
    case RequestParse::kIncomplete:
      // More bytes can only complete it or refuse it; the same bytes stay incomplete.
      if (p.consumed != 0) __builtin_trap();
      break;
    case RequestParse::kRequest: {
      if (p.consumed == 0 || p.consumed > size) __builtin_trap();
      if (ex.req.target.empty() || ex.req.target.front() != '/') __builtin_trap();
      if (ex.req.body.size() > kMaxBody) __builtin_trap();
      if (ex.req.method != "GET" && ex.head) __builtin_trap();
      // The request alone parses the same; what follows it does not change it.
      Exchange alone;
      const RequestParse q =
          falcon::serve::parse_request(in.substr(0, p.consumed), kMaxHeader, kMaxBody, alone);
      if (q.kind != RequestParse::kRequest || q.consumed != p.consumed) __builtin_trap();
      if (alone.req.body != ex.req.body || alone.req.path != ex.req.path) __builtin_trap();
      // A strict prefix of it is never a request (it may be incomplete, or refused for size).
      for (const std::size_t cut : {p.consumed / 2, p.consumed - 1}) {
        Exchange part;
        if (falcon::serve::parse_request(in.substr(0, cut), kMaxHeader, kMaxBody, part).kind ==
            RequestParse::kRequest) {
          __builtin_trap();
        }
      }
      break;
    }
  }
  // Any body serializes, compressed or not.
  Exchange answer;
  answer.gzip_ok = size % 2 == 0;
  answer.keep_alive = size % 3 != 0;
  answer.res.status = 200;
  answer.res.set_content(std::string(in), "application/json");
  falcon::serve::EventServer::serialize(answer);
  if (answer.wire.rfind("HTTP/1.1 200 OK\r\n", 0) != 0) __builtin_trap();
  return 0;
}
