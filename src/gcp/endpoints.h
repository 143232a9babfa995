// Where the Google clients send their requests (DESIGN D8). Each endpoint comes from the config
// if set, else from the conventional environment variable, else Google's production host. This
// is how tests and the local fleet point the real clients at loopback.
#pragma once

#include <map>
#include <string>

#include "falcon/config.h"

namespace falcon::gcp {

// A snapshot of environment variables, injectable so that tests need not touch the real one.
using Environment = std::map<std::string, std::string>;

// The calling process's environment, copied. Reads `environ`; not safe against a concurrent
// setenv() in another thread.
Environment current_environment();

// The value of `name`, or "" when unset.
std::string env_value(const Environment& env, const std::string& name);

struct GcpEndpoints {
  std::string logging;        // base URL, no trailing slash: https://logging.googleapis.com
  std::string storage;        // base URL, no trailing slash: https://storage.googleapis.com
  std::string token;          // full URL of the OAuth token endpoint (authorized_user refresh)
  std::string metadata_host;  // host[:port] of the metadata server, always spoken to over http
  bool metadata_host_explicit = false;  // set by config or env: trusted without a probe
};

inline constexpr const char* kDefaultLoggingEndpoint = "https://logging.googleapis.com";
inline constexpr const char* kDefaultStorageEndpoint = "https://storage.googleapis.com";
inline constexpr const char* kDefaultTokenEndpoint = "https://oauth2.googleapis.com/token";
inline constexpr const char* kDefaultMetadataHost = "metadata.google.internal";

// Resolves each endpoint in the order config, environment, default:
//   logging   gcp.logging_endpoint, FALCON_LOGGING_ENDPOINT
//   storage   gcp.storage_endpoint, STORAGE_EMULATOR_HOST (`host:port` means http://host:port;
//             a value with a scheme is used as it is)
//   token     gcp.token_endpoint, FALCON_TOKEN_ENDPOINT
//   metadata  gcp.metadata_host, GCE_METADATA_HOST, GCE_METADATA_ROOT
// Trailing slashes are removed from base URLs. Never throws.
GcpEndpoints resolve_endpoints(const GcpSettings& settings, const Environment& env);

}  // namespace falcon::gcp
