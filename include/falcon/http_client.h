// HTTP, the one seam through which the layer talks to Google (and to the local fleet). The
// libcurl implementation reuses connections, verifies TLS, honours proxy variables, accepts
// gzip and never follows redirects unless asked. Tests substitute a fake.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace falcon {

// Header list; names compare case-insensitively on lookup.
struct HttpHeaders {
  std::vector<std::pair<std::string, std::string>> items;
  void set(std::string name, std::string value);  // replaces every header of that name
  void add(std::string name, std::string value);
  std::optional<std::string> get(const std::string& name) const;
};

struct HttpRequest {
  std::string method = "GET";
  std::string url;
  HttpHeaders headers;
  std::string body;
  std::chrono::milliseconds timeout{60'000};          // whole request
  std::chrono::milliseconds connect_timeout{10'000};  // connection set-up
  bool follow_redirects = false;
  // Streamed answers (a Kubernetes watch): when set, the body of a 2xx answer is handed to it
  // piece by piece as it arrives instead of being kept in HttpResponse::body (other statuses'
  // bodies are kept as usual); returning false ends the transfer, and send() returns normally.
  std::function<bool(std::string_view piece)> on_body;
  // Polled while the request runs (at least once a second): true ends it, and send() returns the
  // status received so far (0 when none) without throwing. For long watches a stop must end.
  std::function<bool()> cancelled;
  // The largest answer body kept (0: no bound): a larger one, whatever its status, ends the
  // transfer and send() throws HttpTransportError naming the bound. Not applied to what on_body
  // takes.
  std::size_t max_body_bytes = 0;
};

struct HttpResponse {
  int status = 0;
  HttpHeaders headers;
  std::string body;
};

class HttpClient {
 public:
  virtual ~HttpClient() = default;
  // Sends the request and returns whatever status came back. Blocks. Safe to call from many
  // threads. Throws HttpTransportError when no HTTP response was received (DNS, connect, TLS,
  // timeout, reset).
  virtual HttpResponse send(const HttpRequest& request) = 0;
};

// True for the statuses that fail in passing, worth sending an idempotent request again for:
// 408 (Request Timeout), 429 (Too Many Requests), 500, 502, 503 and 504. The set Google's client
// libraries retry (google-cloud-cpp's default) and the one Kubernetes' API server and its
// proxies answer when busy or restarting. Not 501 or 505 (the server cannot do it, ever), nor
// any other status. One definition for every client that retries (gcp/retry.h, kube_client.h).
bool is_transient_http_status(int status);

class HttpTransportError : public std::runtime_error {
 public:
  HttpTransportError(const std::string& message, bool timed_out, bool too_large = false)
      : std::runtime_error(message), timed_out_(timed_out), too_large_(too_large) {}
  bool timed_out() const { return timed_out_; }
  bool too_large() const { return too_large_; }  // the answer passed max_body_bytes

 private:
  bool timed_out_;
  bool too_large_;
};

struct CurlHttpOptions {
  std::string ca_file;  // empty: the system's trust store
};
std::shared_ptr<HttpClient> make_curl_http_client(const CurlHttpOptions& options = {});

}  // namespace falcon
