// The xpk adapter: how falcon runs xpk (DESIGN D3).
//
// Every call is argv (never a shell), with the `xpk:` settings applied:
//   <binary> workload <verb> --cluster=<cluster_id> --project=<project> --zone=<zone>
//            <verb's own flags> <xpk.extra_args...> <trailing args (create: spec.extra_args)>
// and the environment xpk.env plus KUBECONFIG=<state_dir>/kube/<cluster name>/config, so that
// parallel calls against different clusters never share (and race on) one kubeconfig. Our
// KUBECONFIG wins over one set in xpk.env.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "falcon/command_runner.h"
#include "falcon/config.h"
#include "falcon/model.h"

namespace falcon::xpk {

// The state directory: settings.state_dir when set, else $XDG_STATE_HOME/falcon (when that is
// an absolute path), else ~/.local/state/falcon (HOME, or the passwd entry). Reads the
// environment; creates nothing.
std::filesystem::path resolve_state_dir(const XpkSettings& settings);

// Creates `dir` and any missing parents with mode 0700. Throws FalconError naming the directory
// and the errno text when it cannot, or when `dir` exists and is not a directory.
void ensure_private_dir(const std::filesystem::path& dir);

// <state_dir>/kube/<cluster name>/config. Characters other than [A-Za-z0-9._-] in the name are
// written as %XX, so any registry name maps to one directory of its own.
std::filesystem::path kubeconfig_path(const std::filesystem::path& state_dir,
                                      const std::string& cluster_name);

// POSIX shell quoting: words made only of safe characters stay bare, anything else is put in
// single quotes (a ' inside becomes '\''). shell_join quotes each word and joins with spaces,
// e.g. {"python3", "-c", "print('hi there')"} -> python3 -c 'print('\''hi there'\'')'.
std::string shell_quote(std::string_view word);
std::string shell_join(const std::vector<std::string>& words);

// --cluster=<cluster_id> --project=<project> --zone=<zone>
std::vector<std::string> cluster_flags(const ClusterConfig& cluster);

class XpkCli {
 public:
  // Resolves the state directory now (see resolve_state_dir); creates it lazily.
  XpkCli(std::shared_ptr<CommandRunner> runner, XpkSettings settings);

  const XpkSettings& settings() const { return settings_; }
  const std::filesystem::path& state_dir() const { return state_dir_; }
  CommandRunner& runner() const { return *runner_; }

  // The command for `xpk workload <verb>` on `cluster`, laid out as in the file comment, with
  // cluster_environment(cluster). Throws FalconError when the kube directory cannot be made.
  CommandSpec workload_command(const ClusterConfig& cluster, std::string_view verb,
                               const std::vector<std::string>& flags,
                               const std::vector<std::string>& trailing,
                               std::chrono::milliseconds timeout) const;

  // xpk.env plus this cluster's KUBECONFIG. Creates the state and kube directories (0700) the
  // first time per cluster; throws FalconError when it cannot.
  std::map<std::string, std::string> cluster_environment(const ClusterConfig& cluster) const;

  // Runs `command` (see CommandRunner::run: blocks; throws CommandStartError).
  CommandResult run(const CommandSpec& command) const { return runner_->run(command); }

 private:
  std::shared_ptr<CommandRunner> runner_;
  XpkSettings settings_;
  std::filesystem::path state_dir_;
  mutable std::mutex mutex_;
  mutable std::set<std::string> prepared_;  // clusters whose kube directory exists
};

}  // namespace falcon::xpk
