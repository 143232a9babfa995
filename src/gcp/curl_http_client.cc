// CurlHttpClient: the libcurl implementation of HttpClient (falcon/http_client.h).
//
// Easy handles are pooled and reused, so connections (and TLS sessions) survive between
// requests; each request borrows one handle, so many threads can send at once. TLS peers are
// verified (optionally against an extra CA file), proxies come from the environment (libcurl's
// default), gzip is accepted, redirects are followed only when asked, bodies of known length are
// never sent chunked, and `Expect: 100-continue` is suppressed.
#include <curl/curl.h>

#include <strings.h>

#include <cstring>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "falcon/http_client.h"
#include "gcp/url.h"

namespace falcon {
namespace {

void init_curl_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct CurlHandleDeleter {
  void operator()(CURL* handle) const { curl_easy_cleanup(handle); }
};
using CurlHandle = std::unique_ptr<CURL, CurlHandleDeleter>;

struct SlistDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};
using Slist = std::unique_ptr<curl_slist, SlistDeleter>;

// Where a body goes: the response, or the request's on_body for a 2xx answer.
struct BodySink {
  CURL* curl = nullptr;
  const HttpRequest* request = nullptr;
  HttpResponse* response = nullptr;
  bool stopped = false;    // on_body or cancelled ended the transfer
  bool too_large = false;  // the body passed request->max_body_bytes
};

size_t on_body(char* data, size_t size, size_t count, void* user) {
  auto* sink = static_cast<BodySink*>(user);
  const std::string_view piece(data, size * count);
  if (sink->request->on_body) {
    long status = 0;
    curl_easy_getinfo(sink->curl, CURLINFO_RESPONSE_CODE, &status);
    if (status >= 200 && status < 300) {
      if (!sink->request->on_body(piece)) {
        sink->stopped = true;
        return 0;  // CURLE_WRITE_ERROR: the caller ended it
      }
      return piece.size();
    }
  }
  const std::size_t bound = sink->request->max_body_bytes;
  if (bound > 0 && sink->response->body.size() + piece.size() > bound) {
    sink->too_large = true;
    return 0;  // CURLE_WRITE_ERROR
  }
  sink->response->body.append(piece);
  return piece.size();
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* sink = static_cast<BodySink*>(user);
  if (sink->request->cancelled && sink->request->cancelled()) {
    sink->stopped = true;
    return 1;  // CURLE_ABORTED_BY_CALLBACK
  }
  return 0;
}

size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto* headers = static_cast<HttpHeaders*>(user);
  std::string_view line(data, size * count);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  if (line.starts_with("HTTP/")) {
    headers->items.clear();  // a new response (after 100 Continue, a proxy CONNECT, a redirect)
  } else if (const auto colon = line.find(':'); colon != std::string_view::npos) {
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) {
      value.remove_prefix(1);
    }
    headers->add(std::string(line.substr(0, colon)), std::string(value));
  }
  return size * count;
}

class CurlHttpClient final : public HttpClient {
 public:
  explicit CurlHttpClient(CurlHttpOptions options) : options_(std::move(options)) {
    init_curl_once();
  }

  HttpResponse send(const HttpRequest& request) override {
    CurlHandle handle = borrow();
    HttpResponse response;
    try {
      perform(handle.get(), request, response);
    } catch (...) {
      give_back(std::move(handle));
      throw;
    }
    give_back(std::move(handle));
    return response;
  }

 private:
  CurlHandle borrow() {
    {
      std::lock_guard lock(mutex_);
      if (!idle_.empty()) {
        CurlHandle handle = std::move(idle_.back());
        idle_.pop_back();
        return handle;
      }
    }
    CurlHandle handle(curl_easy_init());
    if (!handle) throw HttpTransportError("libcurl could not create a handle", false);
    return handle;
  }

  void give_back(CurlHandle handle) {
    // reset() clears the options but keeps the live connections and the TLS session cache.
    curl_easy_reset(handle.get());
    std::lock_guard lock(mutex_);
    idle_.push_back(std::move(handle));
  }

  void perform(CURL* curl, const HttpRequest& request, HttpResponse& response) {
    char error_buffer[CURL_ERROR_SIZE] = {};
    Slist headers;
    auto append_header = [&](const std::string& line) {
      curl_slist* list = curl_slist_append(headers.get(), line.c_str());
      if (list == nullptr) throw HttpTransportError("libcurl could not add a header", false);
      headers.release();
      headers.reset(list);
    };
    bool has_content_type = false;
    for (const auto& [name, value] : request.headers.items) {
      // "Name;" is curl's way of sending a header with an empty value.
      append_header(value.empty() ? name + ";" : name + ": " + value);
      if (strcasecmp(name.c_str(), "Content-Type") == 0) has_content_type = true;
    }
    append_header("Expect:");
    if (!has_content_type) append_header("Content-Type:");  // no form-urlencoded default

    curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_buffer);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeout.count()));
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(request.connect_timeout.count()));
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);
    if (!options_.ca_file.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, options_.ca_file.c_str());
    curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, request.follow_redirects ? 1L : 0L);
    curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
    BodySink sink{curl, &request, &response};
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
    if (request.cancelled) {
      curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
      curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &sink);
      curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    }
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, &response.headers);

    const std::string& method = request.method;
    if (method == "GET") {
      curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
    } else if (method == "HEAD") {
      curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
    } else {
      // POSTFIELDS with an explicit size: a Content-Length body, never chunked, not copied.
      curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
                       static_cast<curl_off_t>(request.body.size()));
      curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.data());
      if (method != "POST") curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
      if (method == "DELETE" && request.body.empty()) {
        // No body at all (not even Content-Length: 0) on a plain DELETE.
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, nullptr);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(-1));
        curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
        curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, "DELETE");
      }
    }
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers.get());

    const CURLcode code = curl_easy_perform(curl);
    if (sink.too_large) {
      response.body.clear();
      throw HttpTransportError(fmt::format("{} {}: the answer is larger than {} bytes", method,
                                           gcp::without_query(request.url), request.max_body_bytes),
                               false, true);
    }
    if (code != CURLE_OK && sink.stopped) {
      long status = 0;
      curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
      response.status = static_cast<int>(status);
      return;
    }
    if (code != CURLE_OK) {
      const bool timed_out = code == CURLE_OPERATION_TIMEDOUT;
      const char* detail = error_buffer[0] != '\0' ? error_buffer : curl_easy_strerror(code);
      // The query (an upload id, a page token) stays out of the message.
      throw HttpTransportError(
          fmt::format("{} {}: {}", method, gcp::without_query(request.url), detail), timed_out);
    }
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    response.status = static_cast<int>(status);
  }

  CurlHttpOptions options_;
  std::mutex mutex_;
  std::vector<CurlHandle> idle_;
};

}  // namespace

std::shared_ptr<HttpClient> make_curl_http_client(const CurlHttpOptions& options) {
  return std::make_shared<CurlHttpClient>(options);
}

}  // namespace falcon
