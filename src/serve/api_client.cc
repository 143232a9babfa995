// The client side of the /v1 API (cpp-httplib, as the server), for `falcon --server URL`.
#include "falcon/api_client.h"

#include <httplib.h>

#include <fmt/format.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <regex>
#include <thread>

#include "falcon/exit_codes.h"

namespace falcon {

using nlohmann::json;

namespace {

std::string type_of(const json& error) {
  if (error.is_object()) {
    if (const auto it = error.find("type"); it != error.end() && it->is_string()) {
      return it->get<std::string>();
    }
  }
  return "HttpError";
}

std::string message_of(const json& error) {
  if (error.is_object()) {
    if (const auto it = error.find("message"); it != error.end() && it->is_string()) {
      return it->get<std::string>();
    }
  }
  return "error";
}

// Up to `max` bytes of `text` on one line, for messages about answers that are not JSON.
std::string excerpt(const std::string& text, std::size_t max = 200) {
  std::string out;
  for (const char ch : text.substr(0, max)) out += (ch == '\n' || ch == '\r') ? ' ' : ch;
  if (text.size() > max) out += "...";
  return out;
}

// What a failed request's transport error means, in words.
std::string transport_failure(httplib::Error error) {
  switch (error) {
    case httplib::Error::Connection:
      return "could not connect (refused, or no route to it)";
    case httplib::Error::ConnectionTimeout:
      return "the connection timed out";
    case httplib::Error::Read:
      return "the connection failed while reading the answer (closed, or timed out)";
    case httplib::Error::Write:
      return "the connection failed while sending the request";
    case httplib::Error::SSLConnection:
      return "the TLS handshake failed";
    case httplib::Error::SSLLoadingCerts:
      return "the CA certificates could not be loaded";
    case httplib::Error::SSLServerVerification:
      return "the server's certificate could not be verified";
    case httplib::Error::Canceled:
      return "the request was cancelled";
    default:
      return fmt::format("the request failed ({})", httplib::to_string(error));
  }
}

}  // namespace

ApiError::ApiError(int status, nlohmann::json error)
    : std::runtime_error(message_of(error)),
      status_(status),
      type_(type_of(error)),
      error_(std::move(error)) {
  if (!error_.is_object()) error_ = json::object();
  error_["type"] = type_;
  error_["message"] = what();
}

ApiUnreachableError::ApiUnreachableError(std::string url, const std::string& reason)
    : std::runtime_error(fmt::format("cannot reach the falcon server at {}: {}", url, reason)),
      url_(std::move(url)) {}

struct ApiClient::Impl {
  ApiClientOptions options;
  std::string url;  // without a trailing "/"
  std::unique_ptr<httplib::Client> client;

  std::unique_ptr<httplib::Client> make_client(std::chrono::milliseconds read_timeout) const {
    auto c = std::make_unique<httplib::Client>(url);
    c->set_connection_timeout(options.connect_timeout);
    c->set_read_timeout(read_timeout);
    c->set_write_timeout(std::chrono::seconds(30));
    c->set_keep_alive(true);
    c->set_tcp_nodelay(true);
    if (!options.ca_file.empty()) c->set_ca_cert_path(options.ca_file.c_str());
    httplib::Headers headers = {{"Accept", "application/json"}};
    if (!options.token.empty()) headers.emplace("Authorization", "Bearer " + options.token);
    c->set_default_headers(std::move(headers));
    return c;
  }

  [[noreturn]] void unreachable(const std::string& method, const std::string& path,
                                httplib::Error error) const {
    std::string reason = transport_failure(error);
    if (error == httplib::Error::Connection || error == httplib::Error::ConnectionTimeout) {
      reason += " (is `falcon serve` running there?)";
    }
    throw ApiUnreachableError(url, fmt::format("{} {}: {}", method, path, reason));
  }

  // The error of an answer with status >= 400.
  ApiError error_of(const std::string& method, const std::string& path, int status,
                    const std::string& body) const {
    const json parsed = json::parse(body, nullptr, false);
    if (!parsed.is_discarded() && parsed.is_object()) {
      if (const auto it = parsed.find("error"); it != parsed.end() && it->is_object()) {
        return ApiError(status, *it);
      }
    }
    return ApiError(status, {{"type", "HttpError"},
                             {"message", fmt::format("{} {}{}: HTTP {}: {}", method, url, path,
                                                     status, excerpt(body))}});
  }

  json answer(const std::string& method, const std::string& path, const httplib::Result& r) const {
    if (!r) unreachable(method, path, r.error());
    if (r->status >= 400) throw error_of(method, path, r->status, r->body);
    if (r->body.empty()) return json();
    json parsed = json::parse(r->body, nullptr, false);
    if (parsed.is_discarded()) {
      throw ApiError(r->status, {{"type", "InvalidResponse"},
                                 {"message", fmt::format("{} {}{}: the answer is not JSON: {}",
                                                         method, url, path, excerpt(r->body))}});
    }
    return parsed;
  }
};

ApiClient::ApiClient(ApiClientOptions options) : impl_(std::make_unique<Impl>()) {
  static const std::regex kUrl(
      R"(^(https?)://([A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?/?$)");
  if (!std::regex_match(options.url, kUrl)) {
    throw std::invalid_argument(fmt::format(
        "'{}' is not a falcon server URL: http://HOST:PORT or https://HOST:PORT", options.url));
  }
  impl_->url = options.url;
  if (impl_->url.back() == '/') impl_->url.pop_back();
  impl_->options = std::move(options);
  impl_->client = impl_->make_client(impl_->options.read_timeout);
}

ApiClient::~ApiClient() = default;

const std::string& ApiClient::url() const { return impl_->url; }

nlohmann::json ApiClient::get(const std::string& path) {
  return impl_->answer("GET", path, impl_->client->Get(path.c_str()));
}

nlohmann::json ApiClient::post(const std::string& path, const nlohmann::json& body) {
  return impl_->answer("POST", path,
                       impl_->client->Post(path.c_str(), body.dump(), "application/json"));
}

nlohmann::json ApiClient::del(const std::string& path) {
  return impl_->answer("DELETE", path, impl_->client->Delete(path.c_str()));
}

void ApiClient::stream_lines(const std::string& path,
                             const std::function<void(const std::string&)>& on_line,
                             const std::function<bool()>& stop) {
  // Its own connection: stopping closes it.
  const auto client = impl_->make_client(std::chrono::hours(24));
  client->set_default_headers({{"Accept", "text/plain"}});
  if (!impl_->options.token.empty()) {
    client->set_default_headers(
        {{"Accept", "text/plain"}, {"Authorization", "Bearer " + impl_->options.token}});
  }
  int status = 0;
  std::string error_body;
  std::string partial;
  std::exception_ptr line_error;  // on_line's: the read ends, then it is rethrown
  std::atomic<bool> stopped{false};
  auto should_stop = [&] {
    if (stopped) return true;
    if (stop && stop()) stopped = true;
    return stopped.load();
  };

  std::mutex mutex;
  std::condition_variable cv;
  bool finished = false;
  std::thread watcher;
  if (stop) {
    watcher = std::thread([&] {
      std::unique_lock lock(mutex);
      while (!finished) {
        cv.wait_for(lock, std::chrono::milliseconds(100));
        // Shuts the socket down: the read below returns. Again each round, in case the
        // connection was not open yet.
        if (!finished && should_stop()) client->stop();
      }
    });
  }
  const auto result = client->Get(
      path.c_str(),
      [&](const httplib::Response& response) {
        status = response.status;
        return true;
      },
      [&](const char* data, std::size_t n) {
        if (status >= 400) {
          if (error_body.size() < (1 << 20)) error_body.append(data, n);
          return true;
        }
        partial.append(data, n);
        std::size_t start = 0;
        for (std::size_t nl; (nl = partial.find('\n', start)) != std::string::npos;
             start = nl + 1) {
          if (should_stop()) return false;
          try {
            on_line(partial.substr(start, nl - start));
          } catch (...) {
            line_error = std::current_exception();
            return false;
          }
        }
        partial.erase(0, start);
        return !should_stop();
      });
  {
    std::lock_guard lock(mutex);
    finished = true;
  }
  cv.notify_all();
  if (watcher.joinable()) watcher.join();

  if (line_error) std::rethrow_exception(line_error);
  if (stopped) return;
  if (!result && status == 0) impl_->unreachable("GET", path, result.error());
  if (status >= 400) throw impl_->error_of("GET", path, status, error_body);
  if (!result) {
    throw ApiError(0, {{"type", "LogRetrievalError"},
                       {"message", fmt::format("the log stream from {}{} broke off: {}", impl_->url,
                                               path, transport_failure(result.error()))}});
  }
  if (!partial.empty()) on_line(partial);
}

std::string ApiClient::segment(const std::string& text) {
  std::string out;
  for (const unsigned char ch : text) {
    if (std::isalnum(ch) != 0 || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
      out += static_cast<char>(ch);
    } else {
      out += fmt::format("%{:02X}", ch);
    }
  }
  return out;
}

std::string ApiClient::query(
    const std::vector<std::pair<std::string, std::optional<std::string>>>& params) {
  std::string out;
  for (const auto& [key, value] : params) {
    if (!value) continue;
    out += out.empty() ? "?" : "&";
    out += segment(key) + "=" + segment(*value);
  }
  return out;
}

int exit_code_for_api_error(int status, const std::string& type) {
  // The layer's errors, as the CLI's own handler maps them (exit_codes.h).
  if (const ErrorAnswer* answer = find_error_answer(type)) return answer->exit_code;
  // Otherwise by the status: the inverse of the server's mapping (api_server.h).
  switch (status) {
    case 400:
    case 401:
    case 403:
    case 413:
      return kExitUsage;
    case 404:
      return kExitNotFound;
    case 409:
    case 502:
      return kExitXpkFailed;
    case 503:
      return kExitUnreachable;
    default:
      return kExitInternal;
  }
}

}  // namespace falcon
