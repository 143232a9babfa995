#include "xpk/xpk_cli.h"

#include <errno.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

#include "falcon/errors.h"

namespace falcon::xpk {
namespace {

std::string home_directory() {
  if (const char* home = ::getenv("HOME"); home != nullptr && home[0] != '\0') return home;
  if (const passwd* pw = ::getpwuid(::getuid()); pw != nullptr && pw->pw_dir != nullptr) {
    return pw->pw_dir;
  }
  throw FalconError(
      "cannot find a state directory: HOME is not set and the user has no home directory; "
      "set xpk.state_dir in repos.yaml");
}

bool is_safe_shell_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("@%+=:,./-_").find(c) != std::string_view::npos;
}

bool is_safe_path_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

}  // namespace

std::filesystem::path resolve_state_dir(const XpkSettings& settings) {
  if (!settings.state_dir.empty()) return settings.state_dir;
  if (const char* xdg = ::getenv("XDG_STATE_HOME"); xdg != nullptr && xdg[0] == '/') {
    return std::filesystem::path(xdg) / "falcon";
  }
  return std::filesystem::path(home_directory()) / ".local" / "state" / "falcon";
}

void ensure_private_dir(const std::filesystem::path& dir) {
  std::filesystem::path current;
  for (const auto& part : dir) {
    current /= part;
    if (part == "/" || part.empty()) continue;
    struct stat st;
    if (::stat(current.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) {
        throw FalconError(fmt::format("cannot create directory '{}': '{}' is not a directory",
                                      dir.string(), current.string()));
      }
      continue;
    }
    if (::mkdir(current.c_str(), 0700) != 0 && errno != EEXIST) {
      throw FalconError(
          fmt::format("cannot create directory '{}': {}", current.string(), ::strerror(errno)));
    }
    ::chmod(current.c_str(), 0700);  // whatever the umask
  }
}

std::filesystem::path kubeconfig_path(const std::filesystem::path& state_dir,
                                      const std::string& cluster_name) {
  std::string safe;
  for (char c : cluster_name) {
    if (is_safe_path_char(c)) {
      safe += c;
    } else {
      safe += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    }
  }
  if (safe.empty() || safe == "." || safe == "..") {
    std::string encoded;
    for (char c : safe) encoded += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    safe = encoded.empty() ? "%" : encoded;
  }
  return state_dir / "kube" / safe / "config";
}

std::string shell_quote(std::string_view word) {
  if (!word.empty() &&
      std::all_of(word.begin(), word.end(), [](char c) { return is_safe_shell_char(c); })) {
    return std::string(word);
  }
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  out += '\'';
  return out;
}

std::string shell_join(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) {
    if (!out.empty()) out += ' ';
    out += shell_quote(w);
  }
  return out;
}

std::vector<std::string> cluster_flags(const ClusterConfig& cluster) {
  return {"--cluster=" + cluster.cluster_id, "--project=" + cluster.project,
          "--zone=" + cluster.zone};
}

XpkCli::XpkCli(std::shared_ptr<CommandRunner> runner, XpkSettings settings)
    : runner_(std::move(runner)),
      settings_(std::move(settings)),
      state_dir_(resolve_state_dir(settings_)) {}

std::map<std::string, std::string> XpkCli::cluster_environment(const ClusterConfig& cluster) const {
  const auto kubeconfig = kubeconfig_path(state_dir_, cluster.name);
  {
    std::lock_guard lock(mutex_);
    if (prepared_.count(cluster.name) == 0) {
      ensure_private_dir(kubeconfig.parent_path());
      prepared_.insert(cluster.name);
    }
  }
  auto env = settings_.env;
  env["KUBECONFIG"] = kubeconfig.string();
  return env;
}

CommandSpec XpkCli::workload_command(const ClusterConfig& cluster, std::string_view verb,
                                     const std::vector<std::string>& flags,
                                     const std::vector<std::string>& trailing,
                                     std::chrono::milliseconds timeout) const {
  CommandSpec spec;
  spec.argv = {settings_.binary, "workload", std::string(verb)};
  for (auto& f : cluster_flags(cluster)) spec.argv.push_back(std::move(f));
  spec.argv.insert(spec.argv.end(), flags.begin(), flags.end());
  spec.argv.insert(spec.argv.end(), settings_.extra_args.begin(), settings_.extra_args.end());
  spec.argv.insert(spec.argv.end(), trailing.begin(), trailing.end());
  spec.env = cluster_environment(cluster);
  spec.timeout = timeout;
  return spec;
}

}  // namespace falcon::xpk
