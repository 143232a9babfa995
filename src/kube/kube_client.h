// A client of one Kubernetes API server named by a kubeconfig file (its current context): the
// dispatcher's connection to a MultiKueue manager cluster (docs/dispatch.md). The kubeconfig is
// read when the client is made and again whenever the file changes (a rotated credential); the
// exec plugin's token (gke-gcloud-auth-plugin) is cached until its stated expiry and fetched
// again once when the server answers 401.
//
//   KubeClient manager({.kubeconfig = "/etc/falcon/manager.kubeconfig", .runner = runner,
//                       .clock = clock, .ca_dir = state_dir / "dispatch"});
//   KubeAnswer a = manager.request("GET", "/apis/kueue.x-k8s.io/v1beta2/workloads");
//   manager.watch("/apis/...workloads?watch=true&resourceVersion=12", on_line, stop);
//
// Errors: KubeError with the status (0: no answer: the server is unreachable, or the kubeconfig
// or the plugin failed) and a one-line message naming the server and the path.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>

#include "falcon/clock.h"
#include "falcon/command_runner.h"
#include "falcon/http_client.h"
#include "kube/exec_credential.h"
#include "kube/kubeconfig.h"
#include "util/page_tokens.h"

namespace falcon::kube {

// KubeError::reason() of a request that got no answer in time.
inline constexpr const char* kTimedOut = "TimedOut";
// KubeError::reason() of an answer larger than kMaxAnswer.
inline constexpr const char* kTooLarge = "TooLarge";

class KubeError : public std::runtime_error {
 public:
  KubeError(int status, std::string reason, const std::string& message)
      : std::runtime_error(message), status_(status), reason_(std::move(reason)) {}
  int status() const { return status_; }  // 0: no HTTP answer
  // A Status's reason ("Conflict", "Gone"), kTimedOut, or "".
  const std::string& reason() const { return reason_; }

 private:
  int status_;
  std::string reason_;
};

struct KubeClientOptions {
  std::filesystem::path kubeconfig;
  std::shared_ptr<CommandRunner> runner;  // runs the exec plugin
  std::shared_ptr<Clock> clock;
  std::filesystem::path ca_dir;  // where the kubeconfig's CA is written (ca.crt) for libcurl
  // The HTTP client for a CA file ("" = the system's trust store). Null: libcurl's.
  std::function<std::shared_ptr<HttpClient>(const std::string& ca_file)> http_for_ca;
  std::chrono::milliseconds timeout{10'000};  // each request (not a watch)
};

struct KubeAnswer {
  int status = 0;
  std::string body;
};

// The longest watch event line read (etcd keeps objects up to 1.5 MiB): a longer one ends the
// watch with KubeError instead of growing without bound.
inline constexpr std::size_t kMaxWatchLine = 16u << 20;

// The largest answer to one request that is not a watch (a list page of 500 Workloads is a few
// MiB): a larger one is a KubeError (status 0) naming the bound.
inline constexpr std::size_t kMaxAnswer = 64u << 20;

// The most pages one list follows (`limit=500` each: 2 million objects, far past any Kueue
// cluster); a list that goes on is a KubeError (status 0, reason kTooLarge).
inline constexpr std::size_t kMaxListPages = 4000;

// Follows a list's pages by their `metadata.continue` tokens, bounded: a token the list gave
// before (a server whose list does not advance) or a page past kMaxListPages ends the list
// with KubeError (status 0) whose message starts with `what`.
//
//   ListCursor pages("the manager's list of workloads");
//   do { ... GET with &continue=pages.token() ... } while (pages.advance(page_token));
class ListCursor {
 public:
  explicit ListCursor(std::string what) : what_(std::move(what)) {}
  // The token to send for the next page ("" for the first).
  const std::string& token() const { return token_; }
  // After a page: true when `next` (its continue token) asks for another page.
  bool advance(const std::string& next);

 private:
  std::string what_;
  std::string token_;
  PageTokens given_;
};

class KubeClient {
 public:
  // Reads the kubeconfig now: throws KubeError (status 0) naming the file when it cannot.
  explicit KubeClient(KubeClientOptions options);

  // One request; `content_type` for a body. Returns 2xx answers; throws KubeError for others
  // (with the Status's reason and message) and when no answer came.
  KubeAnswer request(const std::string& method, const std::string& path,
                     const std::string& body = "", const std::string& content_type = "");

  // A watch (`path` carries ?watch=true...): each complete line of the stream is handed to
  // `on_line` as it arrives, until the server ends the stream (returns), `on_line` returns false
  // or `stop()` turns true (returns). Throws KubeError as request() does.
  void watch(const std::string& path, const std::function<bool(std::string_view)>& on_line,
             const std::function<bool()>& stop, std::chrono::milliseconds timeout);

  std::string server() const;

 private:
  struct Target {
    std::filesystem::file_time_type mtime;
    KubeTarget kube;
    std::shared_ptr<HttpClient> http;
  };
  std::shared_ptr<const Target> target();
  std::string bearer(const Target& t);
  HttpResponse send(HttpRequest& req, const std::string& path);

  KubeClientOptions options_;
  ExecCredentialCache credentials_;
  mutable std::mutex mu_;
  std::shared_ptr<const Target> target_;
};

// One GET (not a watch) through `http`, tried once more when the first try failed in a way that
// passes: an answer is_transient_http_status counts (408, 429, 500, 502, 503, 504: API Priority
// and Fairness, an API server restarting, a load balancer between replicas), after its Retry-After
// when it gives one that ends before `deadline` (none that ends later: that answer stands), or a
// connection refused or broken before any answer (not a timeout, which spent the time already, nor
// an answer past max_body_bytes). The second try's timeout is what is left until `deadline`; with
// none left the first failure stands. A GET changes nothing, so a second one is safe; client-go
// retries a GET whose connection broke and honours Retry-After the same way. Returns the last
// answer; throws the last HttpTransportError.
HttpResponse get_retrying_once(HttpClient& http, HttpRequest& req, const Clock& clock,
                               std::chrono::steady_clock::time_point deadline);

// The server's own words: a Status object's message, else the start of the body on one line.
std::string kube_server_message(const std::string& body);

// Writes `pem` to `path` (mode 0600, through a temporary file) unless it already holds exactly
// that. Throws std::runtime_error naming the path.
void write_ca_file(const std::filesystem::path& path, const std::string& pem);

}  // namespace falcon::kube
