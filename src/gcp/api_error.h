// Google API error bodies, both styles, turned into one value and into LogRetrievalError:
//   google.rpc.Status (Logging):  {"error":{"code":429,"status":"RESOURCE_EXHAUSTED",
//                                  "message":"...","details":[{"@type":"...RetryInfo",
//                                  "retryDelay":"30s"}, ...]}}
//   GCS legacy JSON API:          {"error":{"code":404,"message":"Not Found",
//                                  "errors":[{"domain":"global","reason":"notFound",...}]}}
//   OAuth token endpoint:         {"error":"invalid_grant","error_description":"..."}
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "falcon/http_client.h"

namespace falcon {
class PageTokens;  // util/page_tokens.h
}  // namespace falcon

namespace falcon::gcp {

struct ApiError {
  int http_status = 0;
  // google.rpc code name. From the body when it has one, else the canonical mapping of the HTTP
  // status (429 -> RESOURCE_EXHAUSTED, 503 -> UNAVAILABLE, ...), else empty.
  std::string status;
  std::string message;  // the server's message, or a bounded excerpt of a non-JSON body
  std::string reason;   // ErrorInfo.reason, errors[0].reason or the OAuth `error` code
  std::optional<std::chrono::milliseconds> retry_delay;  // google.rpc.RetryInfo.retryDelay
};

// Parses whatever error body came back; never throws (a malformed body becomes the message).
ApiError parse_api_error(int http_status, std::string_view body);

// The google.rpc code name that HTTP `status` maps to, or "" when there is none.
std::string status_name_for_http(int http_status);

// A protobuf Duration in JSON: "30s", "1.5s", "0.250s" (or {"seconds":30,"nanos":0}).
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);

// "entries:list for projects/p failed: HTTP 429 RESOURCE_EXHAUSTED: Quota exceeded ...".
std::string describe_api_error(const std::string& call, const ApiError& error);

// Throws LogRetrievalError(describe_api_error(...), status, status name) for `response`.
[[noreturn]] void throw_api_error(const std::string& call, const HttpResponse& response);

// After a page of `call`: throws LogRetrievalError when `next`, its nextPageToken, is one the
// list gave before (a server that does not advance would be paged forever).
void expect_new_page_token(PageTokens& tokens, const std::string& next, const std::string& call);

inline bool is_success(int http_status) { return http_status >= 200 && http_status < 300; }

}  // namespace falcon::gcp
