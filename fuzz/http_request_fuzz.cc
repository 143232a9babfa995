// Requests from the network as `falcon serve` reads and routes them: the bytes go through the
// same parser, limits and checks as a connection's (serve::parse_request_bytes, Boost.Beast's
// parser underneath), then through the router with the API's routes. Nothing crashes; a
// refusal has one of the statuses the server answers and a message; a request is consistent
// with its bytes and within the limits; parsing it alone gives the same request; routing never
// fails on any path, however long (no regular expressions, no recursion).
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "serve/http_server.h"
#include "serve/router.h"

namespace {

using falcon::serve::HttpLimits;
using falcon::serve::Router;

HttpLimits limits() {
  HttpLimits l;
  l.max_target_bytes = 2048;
  l.max_header_bytes = 4096;
  l.max_header_fields = 32;
  l.max_body_bytes = 8192;
  return l;
}

const Router& router() {
  static const Router r = [] {
    Router out;
    for (const char* path :
         {"/healthz", "/readyz", "/", "/metrics", "/v1/openapi.json", "/v1/whoami", "/v1/config",
          "/v1/clusters", "/v1/clusters/{name}", "/v1/selections", "/v1/selections/{id}",
          "/v1/workloads", "/v1/workloads/{cluster}/{name}",
          "/v1/workloads/{cluster}/{name}/events", "/v1/workloads/{cluster}/{name}/logs",
          "/v1/managed", "/v1/recoveries", "/v1/exports", "/v1/exports/{id}"}) {
      out.add("GET", path);
    }
    out.add("GET", "/ui/{path}", true);
    out.add("POST", "/v1/select");
    out.add("POST", "/v1/workloads");
    out.add("POST", "/v1/exports");
    out.add("DELETE", "/v1/workloads/{cluster}/{name}");
    return out;
  }();
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const HttpLimits l = limits();
  const auto parsed = falcon::serve::parse_request_bytes(in, l);
  if (!parsed) return 0;  // not a whole request yet
  if (parsed->refused) {
    static const std::set<int> kStatuses = {400, 411, 413, 414, 431, 501, 505};
    if (!kStatuses.contains(parsed->refusal.status)) __builtin_trap();
    if (parsed->refusal.message.empty()) __builtin_trap();
    return 0;
  }
  const auto& req = parsed->request;
  if (parsed->consumed == 0 || parsed->consumed > size) __builtin_trap();
  if (req.target.empty() || req.target.front() != '/') __builtin_trap();
  if (req.target.size() > l.max_target_bytes) __builtin_trap();
  if (req.body.size() > l.max_body_bytes) __builtin_trap();
  if (req.headers.items().size() > l.max_header_fields) __builtin_trap();
  if (req.head && req.method != "GET") __builtin_trap();
  for (const std::string& segment : req.segments) {
    for (const char c : segment) {
      if (c == '/' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) __builtin_trap();
    }
  }
  // The request alone parses the same; what follows it does not change it.
  const auto alone = falcon::serve::parse_request_bytes(in.substr(0, parsed->consumed), l);
  if (!alone || alone->refused || alone->consumed != parsed->consumed) __builtin_trap();
  if (alone->request.body != req.body || alone->request.path != req.path) __builtin_trap();
  // Routing any path ends, with a route, a wrong method or none.
  std::vector<std::string> params;
  const auto m = router().match(req.method, req.segments, params);
  if (m.kind == Router::Match::kFound) {
    if (m.route >= router().size()) __builtin_trap();
    if (router().method(m.route) != req.method) __builtin_trap();
    for (const std::string& p : params) {
      if (p.empty()) __builtin_trap();
    }
  } else if (!params.empty()) {
    __builtin_trap();
  }
  return 0;
}
