// One xpk (or gcloud) invocation's own kubeconfig (DESIGN D3, docs/deployment.md).
//
// xpk runs `gcloud container clusters get-credentials` and `kubectl config set-context` on
// every call, and both rewrite $KUBECONFIG in place (truncate, then write), not atomically. Two
// calls sharing one file can read it half-written, and kubectl then falls back to
// localhost:8080 ("The connection to the server localhost:8080 was refused"): a reachable
// cluster reads as unreachable. So no two invocations ever share a file, within one process or
// across processes:
//
//   <state_dir>/kube/<cluster>/config                    the cluster's warmed kubeconfig,
//                                                        written only by `cluster warm-up`,
//                                                        always replaced by rename(2)
//   <state_dir>/kube/<cluster>/calls/<pid>-<n>/config    one invocation's private copy
//
// A PrivateKubeconfig makes the second (mode 0600, directories 0700), seeded with a copy of the
// first when it exists, and its destructor removes the directory. `publish()` makes the private
// file the cluster's warmed kubeconfig with one rename, so a reader copying the warmed file sees
// either the old or the new one, never a mix. Directories left by a process that died (its pid
// no longer runs) are removed by sweep_dead_calls().
#pragma once

#include <filesystem>
#include <string>

namespace falcon::xpk {

class PrivateKubeconfig {
 public:
  // Creates <cluster_dir>/calls/<pid>-<n>/ and, when `seed` is true and <cluster_dir>/config
  // exists, copies it to config there. `cluster_dir` is kubeconfig_path(...).parent_path() and
  // must exist. Throws FalconError naming the path and the errno text when it cannot.
  PrivateKubeconfig(const std::filesystem::path& cluster_dir, bool seed);
  ~PrivateKubeconfig();
  PrivateKubeconfig(const PrivateKubeconfig&) = delete;
  PrivateKubeconfig& operator=(const PrivateKubeconfig&) = delete;

  // The file to pass as KUBECONFIG (it may not exist yet: gcloud creates it).
  const std::filesystem::path& path() const { return path_; }

  // Atomically replaces <cluster_dir>/config with this invocation's file. Throws FalconError
  // when the file does not exist or the rename fails.
  void publish() const;

 private:
  std::filesystem::path cluster_dir_;
  std::filesystem::path dir_;
  std::filesystem::path path_;
};

// Removes <cluster_dir>/calls/<pid>-<n> directories whose pid is not a running process (left
// by a falcon process that was killed). Never throws; best effort.
void sweep_dead_calls(const std::filesystem::path& cluster_dir);

}  // namespace falcon::xpk
