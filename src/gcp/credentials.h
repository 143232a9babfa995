// Google credentials (DESIGN D7): where a bearer token comes from, and a cache that refreshes it
// five minutes before it expires, one refresh at a time however many threads ask.
//
//   auto credentials = make_default_credentials(settings, current_environment(), http, clock);
//   credentials->authorize(request.headers);  // Authorization: Bearer ... (+ x-goog-user-project)
//
// Application Default Credentials are looked for in this order:
//   1. an access-token file: gcp.access_token_file, else FALCON_ACCESS_TOKEN_FILE
//   2. GOOGLE_APPLICATION_CREDENTIALS (a service_account or authorized_user JSON file)
//   3. the gcloud well-known file: $CLOUDSDK_CONFIG/application_default_credentials.json, else
//      ~/.config/gcloud/application_default_credentials.json
//   4. the metadata server (GCE_METADATA_HOST, GCE_METADATA_ROOT, metadata.google.internal)
// A source that is configured but broken (unreadable or malformed file) is an error at once; the
// search does not fall through past it. When no source works, the error lists every source
// tried and why it failed.
//
// Tokens never appear in error messages, logs or description() texts.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <string>

#include "falcon/clock.h"
#include "falcon/config.h"
#include "falcon/http_client.h"
#include "gcp/endpoints.h"

namespace falcon::gcp {

struct AccessToken {
  std::string value;
  std::chrono::seconds lifetime{3600};  // how long the token is valid from when it was fetched
};

// One way of obtaining a new token. Implementations block on files or the network. Credentials
// never calls fetch() from two threads at once.
class TokenSource {
 public:
  virtual ~TokenSource() = default;
  // A new token. Throws LogRetrievalError (status UNAUTHENTICATED for credential problems, or
  // the token endpoint's HTTP status) when none can be had.
  virtual AccessToken fetch() = 0;
  // What this source is, for messages: "service account key /k.json
  // (sa@p.iam.gserviceaccount.com)".
  virtual std::string description() const = 0;
  // The project to bill for quota (x-goog-user-project), or "". Valid after a fetch().
  virtual std::string quota_project() const { return ""; }
};

// A token cache over one TokenSource. Thread-safe.
class Credentials {
 public:
  static constexpr std::chrono::minutes kRefreshMargin{5};

  // `clock` times the cache (steady time).
  Credentials(std::unique_ptr<TokenSource> source, std::shared_ptr<Clock> clock);

  // A token valid for at least the refresh margin (or half its lifetime, if shorter). Blocks
  // while it fetches. When several threads need a refresh, one fetches and the others wait for
  // its result (and share its error, if it fails); a thread that finds a refresh in progress while
  // the old token is still valid uses the old one. Throws what the source throws.
  std::string token();

  // Sets `Authorization: Bearer <token>` and, when the source has a quota project,
  // `x-goog-user-project`. Throws as token().
  void authorize(HttpHeaders& headers);

  // Forgets the cached token (after a 401); the next token() fetches a new one.
  void invalidate();

  std::string description() const;

 private:
  std::unique_ptr<TokenSource> source_;
  std::shared_ptr<Clock> clock_;
  mutable std::mutex mutex_;
  std::condition_variable refreshed_;
  bool refreshing_ = false;
  std::uint64_t generation_ = 0;   // bumped when a refresh ends, ok or not
  std::exception_ptr last_error_;  // of the refresh that ended at generation_
  std::string token_;
  std::string quota_project_;
  std::chrono::steady_clock::time_point refresh_at_{};
  std::chrono::steady_clock::time_point expires_at_{};
};

// Credentials that always return `token` and never expire: for tests and for the local fleet.
std::shared_ptr<Credentials> make_fixed_credentials(std::string token);

// The individual sources are in gcp/token_sources.h.

// Application Default Credentials, resolved now in the order above: returns the first source
// that is configured (steps 1-3) or, for the metadata server, that hands out a token. Throws
// LogRetrievalError (UNAUTHENTICATED) for a broken configured source, or listing every source
// tried when none works.
std::unique_ptr<TokenSource> find_default_token_source(const GcpSettings& settings,
                                                       const Environment& env,
                                                       std::shared_ptr<HttpClient> http,
                                                       std::shared_ptr<Clock> clock);

// Application Default Credentials, resolved lazily on the first token() (so building clients
// never blocks or fails); a failed resolution is retried on the next call.
std::shared_ptr<Credentials> make_default_credentials(const GcpSettings& settings,
                                                      const Environment& env,
                                                      std::shared_ptr<HttpClient> http,
                                                      std::shared_ptr<Clock> clock);

}  // namespace falcon::gcp
