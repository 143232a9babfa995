// Shared pieces of the falcon CLI: global options, the lazily built facade, output helpers.
// The CLI only parses arguments, calls ClusterFabric and prints; no logic lives here.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "falcon/client.h"
#include "falcon/exit_codes.h"
#include "falcon/fabric.h"
#include "falcon/values.h"

namespace falcon::cli {

// The exit codes (exit_codes.h), also as falcon::cli names.
using falcon::kExitInternal;
using falcon::kExitLogs;
using falcon::kExitNoCluster;
using falcon::kExitNotFound;
using falcon::kExitOk;
using falcon::kExitUnreachable;
using falcon::kExitUsage;
using falcon::kExitXpkFailed;

// A bad argument value found after parsing (exit 2).
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Context {
  std::string config_flag;  // --config as given (empty: $FALCON_CONFIG, else ./repos.yaml)
  bool json = false;
  std::string server_flag;  // --server as given (empty: $FALCON_SERVER, else local mode)
  std::string token_file;   // --token-file (empty: $FALCON_TOKEN)
  // Set by a subcommand's callback; run by main() inside the error handler. Returns the exit
  // code.
  std::function<int()> action;

  // The configuration path in force.
  std::string config_path() const;
  // The facade, built on first use from config_path(): for what runs only on this machine
  // (config, doctor, warm-up, serve, the weights of a replay).
  ClusterFabric& fabric();
  // What every other command calls: through the server in client mode (server_url(), with the
  // bearer token from --token-file, else $FALCON_TOKEN), else over fabric(). Built on first use;
  // throws UsageError for a bad URL or an unreadable token file.
  FabricClient& client();

  // Client mode (docs/serve.md "The CLI as a client"): the server URL in force, --server, else
  // $FALCON_SERVER; empty: local mode.
  std::string server_url() const;
  bool remote() const { return !server_url().empty(); }
  // Throws UsageError saying why `command` does not run through a server, in client mode.
  void refuse_remote(const std::string& command, const std::string& why) const;

 private:
  std::shared_ptr<ClusterFabric> fabric_;
  std::unique_ptr<FabricClient> client_;
};

// Prints `value` as indented JSON on stdout.
void print_json(const nlohmann::json& value);

// A plain text table: a header row and rows, columns aligned, two spaces apart. Cells are shown
// escaped and cut (values.h printable), so that each row is one line.
void print_table(const std::vector<std::string>& header,
                 const std::vector<std::vector<std::string>>& rows);

// "-" for an absent value.
std::string or_dash(const std::optional<std::string>& value);
std::string or_dash(const std::optional<int>& value);

// Makes `handler` the action of subcommand `cmd`: once `cmd` is parsed, main() runs
// handler(ctx, *args). Registration only declares options (into *args) and binds a handler.
template <typename Args>
void bind(CLI::App* cmd, Context& ctx, std::shared_ptr<Args> args,
          int (*handler)(Context&, const Args&)) {
  cmd->callback([&ctx, args = std::move(args), handler] {
    ctx.action = [&ctx, args, handler] { return handler(ctx, *args); };
  });
}

// The same for a subcommand without options of its own.
inline void bind(CLI::App* cmd, Context& ctx, int (*handler)(Context&)) {
  cmd->callback([&ctx, handler] { ctx.action = [&ctx, handler] { return handler(ctx); }; });
}

void add_config_commands(CLI::App& app, Context& ctx);
void add_cluster_commands(CLI::App& app, Context& ctx);
void add_job_commands(CLI::App& app, Context& ctx);
void add_doctor_command(CLI::App& app, Context& ctx);
void add_fence_command(CLI::App& app, Context& ctx);
void add_serve_command(CLI::App& app, Context& ctx);

}  // namespace falcon::cli
