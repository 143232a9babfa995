// A scriptable HttpClient for unit tests of the Google clients. Responses are matched by method
// and a URL substring; every request is recorded. Thread-safe.
//
//   FakeHttpClient http;
//   http.enqueue("POST", "/v2/entries:list", json_response(429, kQuotaBody));  // once, first
//   http.on("POST", "/v2/entries:list", [](const HttpRequest&) { return json_response(200, "{}");
//   });
//   ... code under test ...
//   EXPECT_EQ(http.count("POST", "/v2/entries:list"), 2);
//
// A request matches the oldest one-shot response (enqueue) for its method and URL first, then
// the most recently added handler (on). A request nothing matches fails the test (ADD_FAILURE)
// and gets a 599 response.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "falcon/http_client.h"

namespace falcon::testing {

class FakeHttpClient final : public HttpClient {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;

  // `method` "*" matches any method; `url_part` "" matches any URL.
  void on(std::string method, std::string url_part, Handler handler);
  void enqueue(std::string method, std::string url_part, HttpResponse response);
  // The next matching request throws HttpTransportError(message, timed_out).
  void enqueue_transport_error(std::string method, std::string url_part, std::string message,
                               bool timed_out = false);
  // The next matching request is handled by `handler` (once).
  void enqueue_handler(std::string method, std::string url_part, Handler handler);

  HttpResponse send(const HttpRequest& request) override;

  // Every request sent so far, in order (bodies included).
  std::vector<HttpRequest> requests() const;
  // How many requests matched `method` ("*": any) and contain `url_part`.
  std::size_t count(const std::string& method, const std::string& url_part = "") const;
  // One-shot responses not used yet.
  std::size_t pending() const;

 private:
  struct Rule {
    std::string method;
    std::string url_part;
    Handler handler;
  };
  static bool matches(const Rule& rule, const HttpRequest& request);

  mutable std::mutex mutex_;
  std::deque<Rule> once_;
  std::vector<Rule> always_;
  std::vector<HttpRequest> requests_;
};

// A response with `body` and Content-Type: application/json.
HttpResponse json_response(int status, std::string body);
// A response with `status`, no body, and the given headers.
HttpResponse empty_response(int status, HttpHeaders headers = {});

}  // namespace falcon::testing
