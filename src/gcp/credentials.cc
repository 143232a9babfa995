// The token cache and the Application Default Credentials search. The sources themselves are in
// token_sources.cc.
#include "gcp/credentials.h"

#include <filesystem>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "falcon/errors.h"
#include "gcp/token_sources.h"

namespace falcon::gcp {

using std::chrono::seconds;

Credentials::Credentials(std::unique_ptr<TokenSource> source, std::shared_ptr<Clock> clock)
    : source_(std::move(source)), clock_(std::move(clock)) {}

std::string Credentials::token() {
  std::unique_lock lock(mutex_);
  const auto now = clock_->steady_now();
  if (!token_.empty() && now < refresh_at_) return token_;
  if (refreshing_) {
    if (!token_.empty() && now < expires_at_) return token_;  // still valid: don't wait
    const std::uint64_t generation = generation_;
    refreshed_.wait(lock, [&] { return generation_ != generation; });
    if (last_error_) std::rethrow_exception(last_error_);
    return token_;
  }

  refreshing_ = true;
  lock.unlock();
  AccessToken fresh;
  std::string quota_project;
  std::exception_ptr error;
  try {
    fresh = source_->fetch();
    quota_project = source_->quota_project();
  } catch (...) {
    error = std::current_exception();
  }
  lock.lock();
  refreshing_ = false;
  ++generation_;
  last_error_ = error;
  if (!error) {
    // Times count from before the fetch, so network latency only makes us refresh earlier.
    const auto lifetime = std::max(fresh.lifetime, seconds(0));
    const auto margin = std::min<std::chrono::nanoseconds>(kRefreshMargin, lifetime / 2);
    token_ = std::move(fresh.value);
    quota_project_ = std::move(quota_project);
    expires_at_ = now + lifetime;
    refresh_at_ = expires_at_ - margin;
  }
  refreshed_.notify_all();
  if (error) std::rethrow_exception(error);
  return token_;
}

void Credentials::authorize(HttpHeaders& headers) {
  const std::string value = "Bearer " + token();
  headers.set("Authorization", value);
  std::string quota_project;
  {
    std::lock_guard lock(mutex_);
    quota_project = quota_project_;
  }
  if (!quota_project.empty()) headers.set("x-goog-user-project", quota_project);
}

void Credentials::invalidate() {
  std::lock_guard lock(mutex_);
  token_.clear();
  refresh_at_ = {};
  expires_at_ = {};
}

std::string Credentials::description() const { return source_->description(); }

namespace {

class FixedTokenSource final : public TokenSource {
 public:
  explicit FixedTokenSource(std::string token) : token_(std::move(token)) {}
  AccessToken fetch() override { return {token_, std::chrono::hours(24 * 365)}; }
  std::string description() const override { return "a fixed access token"; }

 private:
  std::string token_;
};

LogRetrievalError credentials_error(const std::string& message) {
  return LogRetrievalError(message, 0, "UNAUTHENTICATED");
}

// What the search found: the source and, when finding it meant fetching, the first token.
struct Resolved {
  std::unique_ptr<TokenSource> source;
  std::optional<AccessToken> first_token;
};

Resolved resolve_default(const GcpSettings& settings, const Environment& env,
                         const std::shared_ptr<HttpClient>& http,
                         const std::shared_ptr<Clock>& clock) {
  const GcpEndpoints endpoints = resolve_endpoints(settings, env);
  std::vector<std::string> tried;

  // 1. An explicit access-token file.
  std::string token_file = settings.access_token_file;
  std::string token_file_origin = "gcp.access_token_file";
  if (token_file.empty()) {
    token_file = env_value(env, "FALCON_ACCESS_TOKEN_FILE");
    token_file_origin = "FALCON_ACCESS_TOKEN_FILE";
  }
  if (!token_file.empty()) {
    auto source = make_access_token_file_source(token_file, token_file_origin);
    AccessToken first = source->fetch();  // a broken explicit choice is an error, no fall-through
    return {std::move(source), std::move(first)};
  }
  tried.push_back("access token file (gcp.access_token_file, FALCON_ACCESS_TOKEN_FILE): not set");

  // 2. GOOGLE_APPLICATION_CREDENTIALS.
  if (const std::string path = env_value(env, "GOOGLE_APPLICATION_CREDENTIALS"); !path.empty()) {
    return {make_credentials_file_source(path, "GOOGLE_APPLICATION_CREDENTIALS", endpoints, http,
                                         clock),
            std::nullopt};
  }
  tried.push_back("GOOGLE_APPLICATION_CREDENTIALS: not set");

  // 3. The gcloud well-known file.
  std::string config_dir = env_value(env, "CLOUDSDK_CONFIG");
  if (config_dir.empty() && !env_value(env, "HOME").empty()) {
    config_dir = env_value(env, "HOME") + "/.config/gcloud";
  }
  if (config_dir.empty()) {
    tried.push_back("gcloud well-known file: neither CLOUDSDK_CONFIG nor HOME is set");
  } else {
    const std::string path = config_dir + "/application_default_credentials.json";
    std::error_code ec;
    if (std::filesystem::exists(path, ec)) {
      return {
          make_credentials_file_source(path, "the gcloud well-known file", endpoints, http, clock),
          std::nullopt};
    }
    tried.push_back(fmt::format("gcloud well-known file {}: not found", path));
  }

  // 4. The metadata server: only a token proves it is there.
  auto metadata = make_metadata_server_source(endpoints.metadata_host, http, clock,
                                              /*quick_probe=*/!endpoints.metadata_host_explicit);
  try {
    AccessToken first = metadata->fetch();
    return {std::move(metadata), std::move(first)};
  } catch (const LogRetrievalError& e) {
    tried.push_back(e.what());
  }

  std::string message = "no Google credentials found; tried, in order:";
  for (std::size_t i = 0; i < tried.size(); ++i) {
    message += fmt::format("\n  {}. {}", i + 1, tried[i]);
  }
  message +=
      "\nSet gcp.access_token_file or GOOGLE_APPLICATION_CREDENTIALS, or run `gcloud auth "
      "application-default login`.";
  throw credentials_error(message);
}

// ADC resolved on the first fetch; Credentials serializes fetch(), the mutex guards readers of
// description() and quota_project().
class DefaultTokenSource final : public TokenSource {
 public:
  DefaultTokenSource(GcpSettings settings, Environment env, std::shared_ptr<HttpClient> http,
                     std::shared_ptr<Clock> clock)
      : settings_(std::move(settings)),
        env_(std::move(env)),
        http_(std::move(http)),
        clock_(std::move(clock)) {}

  AccessToken fetch() override {
    TokenSource* source;
    {
      std::lock_guard lock(mutex_);
      source = chosen_.get();
    }
    if (source == nullptr) {
      Resolved resolved = resolve_default(settings_, env_, http_, clock_);
      std::lock_guard lock(mutex_);
      chosen_ = std::move(resolved.source);
      if (resolved.first_token) return std::move(*resolved.first_token);
      source = chosen_.get();
    }
    return source->fetch();
  }

  std::string description() const override {
    std::lock_guard lock(mutex_);
    return chosen_ ? chosen_->description() : "application default credentials (not resolved yet)";
  }

  std::string quota_project() const override {
    std::lock_guard lock(mutex_);
    return chosen_ ? chosen_->quota_project() : "";
  }

 private:
  GcpSettings settings_;
  Environment env_;
  std::shared_ptr<HttpClient> http_;
  std::shared_ptr<Clock> clock_;
  mutable std::mutex mutex_;
  std::unique_ptr<TokenSource> chosen_;
};

}  // namespace

std::shared_ptr<Credentials> make_fixed_credentials(std::string token) {
  return std::make_shared<Credentials>(std::make_unique<FixedTokenSource>(std::move(token)),
                                       make_system_clock());
}

std::unique_ptr<TokenSource> find_default_token_source(const GcpSettings& settings,
                                                       const Environment& env,
                                                       std::shared_ptr<HttpClient> http,
                                                       std::shared_ptr<Clock> clock) {
  return resolve_default(settings, env, http, clock).source;
}

std::shared_ptr<Credentials> make_default_credentials(const GcpSettings& settings,
                                                      const Environment& env,
                                                      std::shared_ptr<HttpClient> http,
                                                      std::shared_ptr<Clock> clock) {
  auto source = std::make_unique<DefaultTokenSource>(settings, env, http, clock);
  return std::make_shared<Credentials>(std::move(source), std::move(clock));
}

}  // namespace falcon::gcp
