// The credential of a kubeconfig's `exec` plugin (gke-gcloud-auth-plugin): the plugin prints an
// ExecCredential (client.authentication.k8s.io) whose status holds a bearer token and the
// instant it expires. The cache runs the plugin once per key (a cluster), keeps the token until
// 30 s before that instant (a token without an expiry until it is rejected), and refreshes it
// under the key's lock, so concurrent probes of one cluster start one plugin process. Tokens
// never appear in errors or logs.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "falcon/clock.h"
#include "falcon/command_runner.h"
#include "kube/kubeconfig.h"

namespace falcon::kube {

struct ExecToken {
  std::string token;
  std::optional<std::chrono::system_clock::time_point> expires;
};

// Parses the plugin's stdout. Throws std::runtime_error saying what is wrong (not JSON, not an
// ExecCredential, no status.token, a bad expirationTimestamp), never quoting a token.
ExecToken parse_exec_credential(const std::string& stdout_text);

class ExecCredentialCache {
 public:
  ExecCredentialCache(std::shared_ptr<CommandRunner> runner, std::shared_ptr<Clock> clock);

  // The token for `key`: the cached one while valid, else the plugin's new one. `server` is
  // passed in KUBERNETES_EXEC_INFO when the plugin asks for cluster info. Throws
  // std::runtime_error naming the plugin when it cannot start, fails (its stderr's last line),
  // times out or prints no credential. Thread-safe.
  std::string token(const std::string& key, const ExecPlugin& plugin, const std::string& server,
                    std::chrono::milliseconds timeout);
  // Forgets `key`'s token (the server rejected it); the next token() runs the plugin.
  void invalidate(const std::string& key);
  // How many times a plugin was run (tests and benchmarks).
  int runs() const;

 private:
  struct Entry {
    std::mutex refresh;  // held while the plugin runs
    std::optional<ExecToken> token;
  };
  std::shared_ptr<Entry> entry(const std::string& key);

  std::shared_ptr<CommandRunner> runner_;
  std::shared_ptr<Clock> clock_;
  mutable std::mutex mu_;  // guards entries_, runs_, and every Entry::token
  std::map<std::string, std::shared_ptr<Entry>> entries_;
  int runs_ = 0;
};

}  // namespace falcon::kube
