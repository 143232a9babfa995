// The environment that points the falcon CLI at a running fleet, as shell `export` lines: what
// `falcon-fleet --env-file` writes and its banner prints, so a newcomer can `source` the file (or
// paste the lines) and run `falcon cluster list` against the fleet.
//
//   export PATH='/src/build/release/bin':"$PATH"
//   export FALCON_CONFIG='/src/examples/local-repos.yaml'
//   export FALCON_FLEET_URL='http://127.0.0.1:41234'
//   export FALCON_LOGGING_ENDPOINT='http://127.0.0.1:41234'
//   export STORAGE_EMULATOR_HOST='http://127.0.0.1:41234'
//   export FALCON_ACCESS_TOKEN_FILE='/tmp/fleet.env.token'
#pragma once

#include <string>
#include <string_view>

namespace falcon::fleet {

// What the lines are made of. An empty field gives a comment saying what is missing instead of
// its line.
struct FleetEnv {
  std::string url;         // the fleet's URL: fleet-xpk's, Logging's and Storage's endpoint
  std::string bin_dir;     // where fleet-xpk and fleet-gcloud (and the build's falcon) are
  std::string repos_file;  // the layer's repos.yaml naming this fleet's clusters
  std::string token_file;  // a file holding a bearer token the fleet accepts
};

// The six lines (PATH first, with the existing PATH after bin_dir), each ending in a newline.
// Values are single-quoted for sh, so any path is safe.
std::string fleet_env_script(const FleetEnv& env);

// `text` as one sh word: in single quotes, a quote inside written '\''.
std::string shell_quote(std::string_view text);

// The directory of the running executable when fleet-xpk and fleet-gcloud are executables
// there (the build's bin/), else "".
std::string fleet_bin_dir();

}  // namespace falcon::fleet
