// ApiClient: a client of `falcon serve`'s HTTP API (docs/serve.md), what `falcon --server URL`
// sends every command through. JSON in and out; an error answer of the server is thrown as an
// ApiError carrying the server's error object ({"type", "message", ...details}, the CLI's JSON
// error shape) and its HTTP status; a server that cannot be reached is an ApiUnreachableError
// naming the URL.
//
//   falcon::ApiClient client({.url = "http://127.0.0.1:8787", .token = token});
//   nlohmann::json decision = client.post("/v1/select", {{"accelerator_type", "tpu-v4-64"}});
//   client.stream_lines("/v1/workloads/tpu-b/run-1/logs?follow=true",
//                       [](const std::string& line) { std::cout << line << "\n"; },
//                       [] { return interrupted.load(); });
//
// exit_code_for_api_error() is the inverse of the server's mapping from errors to statuses:
// the CLI in client mode exits with the code the same command has locally.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace falcon {

// The server answered with an error status. error() is the object inside {"error": ...}: at
// least "type" and "message", plus the error's details (cluster, workload, probe_results, ...).
class ApiError : public std::runtime_error {
 public:
  // `status` 0: not an HTTP answer (an export's recorded failure, a stream that broke off).
  ApiError(int status, nlohmann::json error);
  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const nlohmann::json& error() const { return error_; }

 private:
  int status_;
  std::string type_;
  nlohmann::json error_;
};

// The server could not be reached: connection refused, connect timeout, the connection broke
// before an answer, a TLS failure. The message names the URL.
class ApiUnreachableError : public std::runtime_error {
 public:
  ApiUnreachableError(std::string url, const std::string& reason);
  const std::string& url() const { return url_; }

 private:
  std::string url_;
};

struct ApiClientOptions {
  // "http://host:port" or "https://host:port" (a trailing "/" is allowed; no path).
  std::string url;
  std::string token;  // empty: no Authorization header
  std::chrono::milliseconds connect_timeout{5000};
  // For one JSON answer (a selection may probe stale clusters first: up to their timeouts).
  std::chrono::milliseconds read_timeout{300000};
  // HTTPS: a CA bundle to verify the server with (empty: the system's).
  std::string ca_file;
};

class ApiClient {
 public:
  // Throws std::invalid_argument for a URL that is not http(s)://host[:port][/].
  explicit ApiClient(ApiClientOptions options);
  ~ApiClient();
  ApiClient(const ApiClient&) = delete;
  ApiClient& operator=(const ApiClient&) = delete;

  // The URL as given, without a trailing "/": for messages.
  const std::string& url() const;

  // One request with a JSON answer. `path` includes the query (see query()). Throws ApiError
  // for a status >= 400, ApiUnreachableError when there is no answer, and ApiError with type
  // "InvalidResponse" (status as received) for an answer that is not JSON.
  nlohmann::json get(const std::string& path);
  nlohmann::json post(const std::string& path, const nlohmann::json& body);
  nlohmann::json del(const std::string& path);

  // GET of a text/plain body, one line per line, each handed to on_line as it arrives (without
  // its "\n"). `stop` is polled about every 100 ms, also while no data comes (from a thread of
  // its own as well): when it returns true the connection is closed and this returns normally.
  // An exception thrown by on_line closes the connection and is rethrown. No read timeout applies
  // (a follow may be silent for long). Throws as get() before the body starts; a body that breaks
  // off without `stop` is an ApiError of type "LogRetrievalError" naming the URL.
  void stream_lines(const std::string& path, const std::function<void(const std::string&)>& on_line,
                    const std::function<bool()>& stop = {});

  // "?a=1&b=x%20y" from the pairs whose value is set (percent-encoded); "" when none is.
  static std::string query(
      const std::vector<std::pair<std::string, std::optional<std::string>>>& params);
  // One path segment, percent-encoded.
  static std::string segment(const std::string& text);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The CLI's exit code (exit_codes.h) for a server's error answer: by the error's type when it is
// one of the layer's errors (NoAvailableClusterError 4, ClusterUnreachableError 7, both 503),
// else by the status: 400/401/403/413 usage (2), 404 not found (3), 409 and 502 xpk (5), 503
// unreachable (7), anything else internal (1).
int exit_code_for_api_error(int status, const std::string& type);

}  // namespace falcon
