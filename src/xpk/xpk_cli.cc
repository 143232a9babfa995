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
#include "falcon/xpk_cli.h"
#include "xpk/failure_text.h"
#include "xpk/private_kubeconfig.h"

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

std::filesystem::path resolve_runtime_dir(const XpkSettings& settings,
                                          const std::filesystem::path& state_dir) {
  if (!settings.runtime_dir.empty()) return settings.runtime_dir;
  if (const char* xdg = ::getenv("XDG_RUNTIME_DIR"); xdg != nullptr && xdg[0] == '/') {
    return std::filesystem::path(xdg) / "falcon";
  }
  struct stat st;
  if (::stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode)) {
    return fmt::format("/dev/shm/falcon-{}", ::geteuid());
  }
  return state_dir / "run";
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

XpkCli::XpkCli(std::shared_ptr<CommandRunner> runner, XpkSettings settings,
               std::shared_ptr<FabricCounters> counters)
    : runner_(std::move(runner)),
      settings_(std::move(settings)),
      counters_(std::move(counters)),
      state_dir_(resolve_state_dir(settings_)),
      runtime_dir_(resolve_runtime_dir(settings_, state_dir_)) {}

std::filesystem::path XpkCli::warmed_kubeconfig(const ClusterConfig& cluster) const {
  auto path = kubeconfig_path(state_dir_, cluster.name);
  std::lock_guard lock(mutex_);
  if (prepared_.count(cluster.name) == 0) {
    ensure_private_dir(path.parent_path());
    prepared_.insert(cluster.name);
  }
  return path;
}

const std::filesystem::path& XpkCli::calls_dir() const {
  std::lock_guard lock(mutex_);
  if (!runtime_prepared_) {
    prepare_runtime_dir(runtime_dir_);
    sweep_dead_calls(runtime_dir_);
    runtime_prepared_ = true;
  }
  return runtime_dir_;
}

std::vector<std::string> XpkCli::workload_argv(const ClusterConfig& cluster, std::string_view verb,
                                               const std::vector<std::string>& flags,
                                               const std::vector<std::string>& trailing) const {
  std::vector<std::string> argv = {settings_.binary, "workload", std::string(verb)};
  for (auto& f : cluster_flags(cluster)) argv.push_back(std::move(f));
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), settings_.extra_args.begin(), settings_.extra_args.end());
  argv.insert(argv.end(), trailing.begin(), trailing.end());
  return argv;
}

CommandResult XpkCli::run_workload(const ClusterConfig& cluster, std::string_view verb,
                                   const std::vector<std::string>& flags,
                                   const std::vector<std::string>& trailing,
                                   std::chrono::milliseconds timeout) const {
  const PrivateKubeconfig kubeconfig(calls_dir(), warmed_kubeconfig(cluster), /*seed=*/true);
  CommandSpec spec;
  spec.argv = workload_argv(cluster, verb, flags, trailing);
  spec.env = settings_.env;
  spec.env["KUBECONFIG"] = kubeconfig.path().string();
  spec.timeout = timeout;
  if (!counters_) return runner_->run(spec);
  CommandResult result;
  try {
    result = runner_->run(spec);
  } catch (const CommandStartError&) {
    counters_->xpk_call(verb, "start_error");
    throw;
  }
  counters_->xpk_call(verb, result.timed_out ? "timeout" : result.ok() ? "ok" : "failed");
  return result;
}

CommandResult XpkCli::run_refreshing_kubeconfig(const ClusterConfig& cluster,
                                                CommandSpec command) const {
  const PrivateKubeconfig kubeconfig(calls_dir(), warmed_kubeconfig(cluster), /*seed=*/false);
  std::map<std::string, std::string> env = settings_.env;
  for (auto& [key, value] : command.env) env[key] = std::move(value);
  env["KUBECONFIG"] = kubeconfig.path().string();
  command.env = std::move(env);
  CommandResult result = runner_->run(command);
  struct stat st;
  if (result.ok() && ::stat(kubeconfig.path().c_str(), &st) == 0) kubeconfig.publish();
  return result;
}

bool XpkCli::create_has_namespace_flag() const {
  std::lock_guard lock(help_mutex_);
  if (namespace_flag_) return *namespace_flag_;
  CommandSpec help;
  help.argv = {settings_.binary, "workload", "create", "--help"};
  help.env = settings_.env;
  help.timeout = std::chrono::seconds(settings_.command_timeout_s);
  const CommandResult r = runner_->run(help);
  if (!r.ok()) {
    const auto failure = describe_failure(r);
    throw XpkCommandError(
        fmt::format("`{} workload create --help` failed ({})", settings_.binary, failure.full()),
        "", r.timed_out || r.term_signal != 0 ? std::nullopt : std::optional<int>(r.exit_code),
        failure.details);
  }
  namespace_flag_ = r.stdout_text.find("--namespace") != std::string::npos ||
                    r.stderr_text.find("--namespace") != std::string::npos;
  return *namespace_flag_;
}

}  // namespace falcon::xpk

namespace falcon {

std::shared_ptr<const xpk::XpkCli> make_xpk_cli(std::shared_ptr<CommandRunner> runner,
                                                XpkSettings settings) {
  return std::make_shared<const xpk::XpkCli>(std::move(runner), std::move(settings));
}

}  // namespace falcon
