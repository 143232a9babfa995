// One xpk (or gcloud) invocation's own kubeconfig (DESIGN D3, docs/deployment.md).
//
// xpk runs `gcloud container clusters get-credentials` and `kubectl config set-context` on
// every call, and both rewrite $KUBECONFIG in place (truncate, then write), not atomically. Two
// calls sharing one file can read it half-written, and kubectl then falls back to
// localhost:8080 ("The connection to the server localhost:8080 was refused"): a reachable
// cluster reads as unreachable. So no two invocations ever share a file, within one process or
// across processes:
//
//   <state_dir>/kube/<cluster>/config      the cluster's warmed kubeconfig, written only by
//                                          `cluster warm-up`, always replaced by rename(2)
//   <runtime_dir>/<pid>-<n>/config         one invocation's private copy
//
// The private copies live in the runtime directory (resolve_runtime_dir: memory-backed by
// default), not on the state disk: every xpk call writes its kubeconfig, so with the copies on
// the state disk a full disk made every probe fail and took every cluster out of selection
// (issue 27). The warmed file is only read by a call.
//
// A PrivateKubeconfig makes the second (mode 0600, directory 0700), seeded with a copy of the
// first when it exists, and its destructor removes the directory. `publish()` makes the private
// file the cluster's warmed kubeconfig: a copy next to it, then one rename, so a reader copying
// the warmed file sees either the old or the new one, never a mix. Directories left by a
// process that died (its pid no longer runs) are removed by sweep_dead_calls().
#pragma once

#include <filesystem>
#include <string>

namespace falcon::xpk {

class PrivateKubeconfig {
 public:
  // Creates <runtime_dir>/<pid>-<n>/ and, when `seed` is true and `warmed` exists, copies it
  // to config there. `runtime_dir` must exist (prepare_runtime_dir). Throws FalconError naming
  // the path and the errno text when it cannot.
  PrivateKubeconfig(const std::filesystem::path& runtime_dir, const std::filesystem::path& warmed,
                    bool seed);
  ~PrivateKubeconfig();
  PrivateKubeconfig(const PrivateKubeconfig&) = delete;
  PrivateKubeconfig& operator=(const PrivateKubeconfig&) = delete;

  // The file to pass as KUBECONFIG (it may not exist yet: gcloud creates it).
  const std::filesystem::path& path() const { return path_; }

  // Replaces `warmed` with this invocation's file: copied to a temporary file beside `warmed`
  // (0600), then renamed over it. Throws FalconError when the file does not exist or cannot be
  // copied or renamed (a full state disk); `warmed` is then left as it was.
  void publish() const;

 private:
  std::filesystem::path warmed_;
  std::filesystem::path dir_;
  std::filesystem::path path_;
};

// Makes `dir` (and missing parents, 0700) and checks that it is private: a directory, not a
// symbolic link, owned by this user, no access for group or others (a directory of ours with
// wider modes is narrowed to 0700). A shared place like /dev/shm is writable by every user, so
// a directory someone else made there, or a link, is refused. Throws FalconError naming the
// directory and what is wrong.
void prepare_runtime_dir(const std::filesystem::path& dir);

// Removes <runtime_dir>/<pid>-<n> directories whose pid is not a running process (left by a
// falcon process that was killed). Never throws; best effort.
void sweep_dead_calls(const std::filesystem::path& runtime_dir);

}  // namespace falcon::xpk
