// The error the fake services throw to answer a request with an HTTP error. The HTTP layer
// renders it in the style of the API that raised it (google.rpc.Status for Logging, the legacy
// `errors[]` shape for Storage, RFC 6749 `error` for OAuth).
#pragma once

#include <stdexcept>
#include <string>

namespace falcon::fake {

class ApiError : public std::runtime_error {
 public:
  // `http_status` (400), canonical `status` ("INVALID_ARGUMENT"), storage `reason`
  // ("invalid"), and the message shown to the client.
  ApiError(int http_status, std::string status, std::string reason, const std::string& message)
      : std::runtime_error(message),
        http_status_(http_status),
        status_(std::move(status)),
        reason_(std::move(reason)) {}

  int http_status() const { return http_status_; }
  const std::string& status() const { return status_; }
  const std::string& reason() const { return reason_; }

  static ApiError invalid_argument(const std::string& message) {
    return ApiError(400, "INVALID_ARGUMENT", "invalid", message);
  }
  static ApiError not_found(const std::string& message) {
    return ApiError(404, "NOT_FOUND", "notFound", message);
  }

 private:
  int http_status_;
  std::string status_;
  std::string reason_;
};

}  // namespace falcon::fake
