#include "support/fake_http_client.h"

#include <gtest/gtest.h>

namespace falcon::testing {

void FakeHttpClient::on(std::string method, std::string url_part, Handler handler) {
  std::lock_guard lock(mutex_);
  always_.push_back({std::move(method), std::move(url_part), std::move(handler)});
}

void FakeHttpClient::enqueue(std::string method, std::string url_part, HttpResponse response) {
  enqueue_handler(std::move(method), std::move(url_part),
                  [response = std::move(response)](const HttpRequest&) { return response; });
}

void FakeHttpClient::enqueue_transport_error(std::string method, std::string url_part,
                                             std::string message, bool timed_out) {
  enqueue_handler(std::move(method), std::move(url_part),
                  [message = std::move(message), timed_out](const HttpRequest&) -> HttpResponse {
                    throw HttpTransportError(message, timed_out);
                  });
}

void FakeHttpClient::enqueue_handler(std::string method, std::string url_part, Handler handler) {
  std::lock_guard lock(mutex_);
  once_.push_back({std::move(method), std::move(url_part), std::move(handler)});
}

bool FakeHttpClient::matches(const Rule& rule, const HttpRequest& request) {
  return (rule.method == "*" || rule.method == request.method) &&
         request.url.find(rule.url_part) != std::string::npos;
}

HttpResponse FakeHttpClient::send(const HttpRequest& request) {
  Handler handler;
  {
    std::lock_guard lock(mutex_);
    requests_.push_back(request);
    for (auto it = once_.begin(); it != once_.end(); ++it) {
      if (matches(*it, request)) {
        handler = std::move(it->handler);
        once_.erase(it);
        break;
      }
    }
    if (!handler) {
      for (auto it = always_.rbegin(); it != always_.rend(); ++it) {
        if (matches(*it, request)) {
          handler = it->handler;
          break;
        }
      }
    }
  }
  if (!handler) {
    ADD_FAILURE() << "FakeHttpClient: no response scripted for " << request.method << " "
                  << request.url;
    return json_response(599, R"({"error":{"code":599,"message":"not scripted"}})");
  }
  return handler(request);  // outside the lock: handlers may block or send again
}

std::vector<HttpRequest> FakeHttpClient::requests() const {
  std::lock_guard lock(mutex_);
  return requests_;
}

std::size_t FakeHttpClient::count(const std::string& method, const std::string& url_part) const {
  std::lock_guard lock(mutex_);
  std::size_t n = 0;
  for (const auto& request : requests_) {
    if (matches({method, url_part, nullptr}, request)) ++n;
  }
  return n;
}

std::size_t FakeHttpClient::pending() const {
  std::lock_guard lock(mutex_);
  return once_.size();
}

HttpResponse json_response(int status, std::string body) {
  HttpResponse response;
  response.status = status;
  response.headers.set("Content-Type", "application/json; charset=UTF-8");
  response.body = std::move(body);
  return response;
}

HttpResponse empty_response(int status, HttpHeaders headers) {
  HttpResponse response;
  response.status = status;
  response.headers = std::move(headers);
  return response;
}

}  // namespace falcon::testing
