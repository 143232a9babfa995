#include "fleet/fleet_env.h"

#include <unistd.h>

#include <filesystem>
#include <system_error>

namespace falcon::fleet {

std::string shell_quote(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string fleet_env_script(const FleetEnv& env) {
  std::string out;
  if (env.bin_dir.empty()) {
    out += "# PATH: put the directory of fleet-xpk and fleet-gcloud first\n";
  } else {
    out += "export PATH=" + shell_quote(env.bin_dir) + ":\"$PATH\"\n";
  }
  if (env.repos_file.empty()) {
    out += "# FALCON_CONFIG: the repos.yaml of this fleet's clusters (falcon-fleet --repos-file)\n";
  } else {
    out += "export FALCON_CONFIG=" + shell_quote(env.repos_file) + "\n";
  }
  for (const char* name :
       {"FALCON_FLEET_URL", "FALCON_LOGGING_ENDPOINT", "STORAGE_EMULATOR_HOST"}) {
    out += std::string("export ") + name + "=" + shell_quote(env.url) + "\n";
  }
  if (env.token_file.empty()) {
    out +=
        "# FALCON_ACCESS_TOKEN_FILE: a file with the fleet's token (falcon-fleet --token-file)\n";
  } else {
    out += "export FALCON_ACCESS_TOKEN_FILE=" + shell_quote(env.token_file) + "\n";
  }
  return out;
}

std::string fleet_bin_dir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  const std::filesystem::path dir = exe.parent_path();
  for (const char* tool : {"fleet-xpk", "fleet-gcloud"}) {
    if (::access((dir / tool).c_str(), X_OK) != 0) return "";
  }
  return dir.string();
}

}  // namespace falcon::fleet
