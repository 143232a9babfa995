// The xpk adapter: how falcon runs xpk (DESIGN D3). One XpkCli per configuration, shared by the
// prober and the workload manager (the facade builds it); it holds what they share: the runner,
// the `xpk:` settings, the state directory, and the answer of `xpk workload create --help`.
//
// Every call is argv (never a shell), with the `xpk:` settings applied:
//   <binary> workload <verb> --cluster=<cluster_id> --project=<project> --zone=<zone>
//            <verb's own flags> <xpk.extra_args...> <trailing args (create: spec.extra_args)>
// and the environment xpk.env plus KUBECONFIG=<a kubeconfig of this invocation's own>
// (private_kubeconfig.h): xpk rewrites its kubeconfig on every call, not atomically, so no two
// invocations may share one, in one process or across processes. Our KUBECONFIG wins over one
// set in xpk.env.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "falcon/command_runner.h"
#include "falcon/config.h"
#include "falcon/fabric_counters.h"
#include "falcon/model.h"

namespace falcon::xpk {

// The state directory: settings.state_dir when set, else $XDG_STATE_HOME/falcon (when that is
// an absolute path), else ~/.local/state/falcon (HOME, or the passwd entry). Reads the
// environment; creates nothing.
std::filesystem::path resolve_state_dir(const XpkSettings& settings);

// Where each xpk call's private kubeconfig is made (private_kubeconfig.h): settings.runtime_dir
// when set, else $XDG_RUNTIME_DIR/falcon (when that is an absolute path), else
// /dev/shm/falcon-<uid> (when /dev/shm is a directory: memory, not the state disk), else
// <state_dir>/run. Reads the environment; creates nothing.
std::filesystem::path resolve_runtime_dir(const XpkSettings& settings,
                                          const std::filesystem::path& state_dir);

// Creates `dir` and any missing parents with mode 0700. Throws FalconError naming the directory
// and the errno text when it cannot, or when `dir` exists and is not a directory.
void ensure_private_dir(const std::filesystem::path& dir);

// <state_dir>/kube/<cluster name>/config: the cluster's warmed kubeconfig. Characters other
// than [A-Za-z0-9._-] in the name are written as %XX, so any registry name maps to one
// directory of its own.
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
  // Resolves the state and runtime directories now (resolve_state_dir, resolve_runtime_dir);
  // creates them lazily. Throws
  // FalconError only if no state directory can be determined.
  // `counters` (may be null) counts every run_workload by verb and result.
  XpkCli(std::shared_ptr<CommandRunner> runner, XpkSettings settings,
         std::shared_ptr<FabricCounters> counters = nullptr);

  const XpkSettings& settings() const { return settings_; }
  const std::filesystem::path& state_dir() const { return state_dir_; }
  const std::filesystem::path& runtime_dir() const { return runtime_dir_; }

  // The argv of `xpk workload <verb>` on `cluster`, laid out as in the file comment.
  std::vector<std::string> workload_argv(const ClusterConfig& cluster, std::string_view verb,
                                         const std::vector<std::string>& flags,
                                         const std::vector<std::string>& trailing) const;

  // Runs `xpk workload <verb>` (workload_argv) with xpk.env and a private kubeconfig seeded
  // from the cluster's warmed one, removed when the call returns. Blocks up to `timeout` (plus
  // the runner's kill grace). Throws FalconError when the state or kube directories cannot be
  // made, CommandStartError when the binary cannot be started.
  CommandResult run_workload(const ClusterConfig& cluster, std::string_view verb,
                             const std::vector<std::string>& flags,
                             const std::vector<std::string>& trailing,
                             std::chrono::milliseconds timeout) const;

  // Runs `command` (its env gets xpk.env under it) with KUBECONFIG set to a fresh private
  // kubeconfig for `cluster`, not seeded; when the command succeeds and wrote that file, the
  // file becomes the cluster's warmed kubeconfig (one rename). Used by credential warm-up.
  // Throws as run_workload, and FalconError when the new kubeconfig cannot be put in place.
  CommandResult run_refreshing_kubeconfig(const ClusterConfig& cluster, CommandSpec command) const;

  // Whether `<binary> workload create --help` mentions --namespace. Asked once per XpkCli (a
  // second caller waits for the first answer); a failed ask is not remembered. Blocks up to
  // xpk.command_timeout_s the first time. Throws XpkCommandError (exit code and what xpk
  // printed) when the help call fails, CommandStartError when the binary cannot be started.
  bool create_has_namespace_flag() const;

  // Runs `command` as is (see CommandRunner::run: blocks; throws CommandStartError).
  CommandResult run(const CommandSpec& command) const { return runner_->run(command); }

 private:
  // <state_dir>/kube/<cluster>/config; its directory made (0700) once per cluster.
  std::filesystem::path warmed_kubeconfig(const ClusterConfig& cluster) const;
  // runtime_dir_, made and checked (prepare_runtime_dir) and swept of dead calls once.
  const std::filesystem::path& calls_dir() const;

  std::shared_ptr<CommandRunner> runner_;
  XpkSettings settings_;
  std::shared_ptr<FabricCounters> counters_;
  std::filesystem::path state_dir_;
  std::filesystem::path runtime_dir_;
  mutable std::mutex mutex_;
  mutable std::set<std::string> prepared_;  // clusters whose kube directory exists
  mutable bool runtime_prepared_ = false;
  mutable std::mutex help_mutex_;  // held while the --help answer is read
  mutable std::optional<bool> namespace_flag_;
};

}  // namespace falcon::xpk
