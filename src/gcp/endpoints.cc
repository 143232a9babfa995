#include "gcp/endpoints.h"

#include "gcp/url.h"

extern char** environ;

namespace falcon::gcp {
namespace {

std::string first_set(std::initializer_list<std::string> values) {
  for (const auto& value : values) {
    if (!value.empty()) return value;
  }
  return "";
}

// STORAGE_EMULATOR_HOST is `host:port` (Go's convention: http is implied) or a full URL.
std::string storage_url_from_emulator_host(const std::string& value) {
  if (value.empty() || value.find("://") != std::string::npos) return value;
  return "http://" + value;
}

// GCE_METADATA_HOST is a host[:port]; tolerate a scheme or a trailing path given by mistake.
std::string metadata_host_only(std::string value) {
  if (const auto scheme = value.find("://"); scheme != std::string::npos) {
    value.erase(0, scheme + 3);
  }
  if (const auto slash = value.find('/'); slash != std::string::npos) value.erase(slash);
  return value;
}

}  // namespace

Environment current_environment() {
  Environment env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view text(*entry);
    const auto eq = text.find('=');
    if (eq == std::string_view::npos) continue;
    env.emplace(std::string(text.substr(0, eq)), std::string(text.substr(eq + 1)));
  }
  return env;
}

std::string env_value(const Environment& env, const std::string& name) {
  const auto it = env.find(name);
  return it == env.end() ? std::string() : it->second;
}

GcpEndpoints resolve_endpoints(const GcpSettings& settings, const Environment& env) {
  GcpEndpoints out;
  out.logging = trim_trailing_slashes(
      first_set({settings.logging_endpoint, env_value(env, "FALCON_LOGGING_ENDPOINT"),
                 kDefaultLoggingEndpoint}));
  out.storage = trim_trailing_slashes(
      first_set({settings.storage_endpoint,
                 storage_url_from_emulator_host(env_value(env, "STORAGE_EMULATOR_HOST")),
                 kDefaultStorageEndpoint}));
  out.token = first_set(
      {settings.token_endpoint, env_value(env, "FALCON_TOKEN_ENDPOINT"), kDefaultTokenEndpoint});
  const std::string explicit_host =
      first_set({settings.metadata_host, env_value(env, "GCE_METADATA_HOST"),
                 env_value(env, "GCE_METADATA_ROOT")});
  out.metadata_host_explicit = !explicit_host.empty();
  out.metadata_host = metadata_host_only(first_set({explicit_host, kDefaultMetadataHost}));
  return out;
}

}  // namespace falcon::gcp
