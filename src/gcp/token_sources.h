// The sources of Application Default Credentials (see gcp/credentials.h for the search order).
// Each factory validates what it can at once and throws LogRetrievalError (UNAUTHENTICATED)
// naming the file and the problem, never its secrets. fetch() blocks on files or the network.
#pragma once

#include <memory>
#include <string>

#include "falcon/clock.h"
#include "falcon/http_client.h"
#include "gcp/credentials.h"
#include "gcp/endpoints.h"

namespace falcon::gcp {

// The scope asked for by service accounts: enough for Logging reads and Storage writes.
inline constexpr const char* kCloudPlatformScope = "https://www.googleapis.com/auth/cloud-platform";

// A file holding a bearer token (whitespace trimmed). The file is read on every fetch and the
// token given a two-minute lifetime, so Credentials re-reads it about once a minute and a token
// rotated on disk is picked up. `origin` says where the path came from, for messages.
std::unique_ptr<TokenSource> make_access_token_file_source(std::string path, std::string origin);

// A credentials JSON file, chosen by its `type`:
//   service_account  an RS256 JWT (iss, scope cloud-platform, aud = token_uri, iat, exp = iat +
//                    1 h) exchanged at the key's token_uri with the jwt-bearer grant
//   authorized_user  the refresh-token grant at `endpoints.token`; its quota_project_id is
//                    sent as x-goog-user-project
// Other types are refused. `origin` says where the path came from ("GOOGLE_APPLICATION_
// CREDENTIALS"), for messages.
std::unique_ptr<TokenSource> make_credentials_file_source(const std::string& path,
                                                          const std::string& origin,
                                                          const GcpEndpoints& endpoints,
                                                          std::shared_ptr<HttpClient> http,
                                                          std::shared_ptr<Clock> clock);

// The same from JSON text already in memory.
std::unique_ptr<TokenSource> make_credentials_json_source(const std::string& json_text,
                                                          const std::string& origin,
                                                          const GcpEndpoints& endpoints,
                                                          std::shared_ptr<HttpClient> http,
                                                          std::shared_ptr<Clock> clock);

// The metadata server's token for the instance's default service account:
// GET http://<host>/computeMetadata/v1/instance/service-accounts/default/token with
// `Metadata-Flavor: Google`. `quick_probe`: short timeouts and a single attempt, for a host
// that was not configured and may not exist.
std::unique_ptr<TokenSource> make_metadata_server_source(std::string host,
                                                         std::shared_ptr<HttpClient> http,
                                                         std::shared_ptr<Clock> clock,
                                                         bool quick_probe = false);

}  // namespace falcon::gcp
