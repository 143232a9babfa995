// falcon serve: a thin main over the Daemon (include/falcon/daemon.h). Signals are taken by
// this thread with sigwait: SIGHUP reloads, SIGTERM and SIGINT stop.
#include <pthread.h>
#include <signal.h>

#include <fmt/format.h>

#include <cstdlib>
#include <iostream>
#include <thread>

#include "cli/cli.h"
#include "falcon/daemon.h"

namespace falcon::cli {
namespace {

int run_serve(Context& ctx, const DaemonOptions& args) {
  // The server is the one that runs the commands: $FALCON_SERVER (set for the clients of this
  // shell, perhaps) is not for it; an explicit --server is a mistake.
  if (!ctx.server_flag.empty()) {
    throw UsageError(fmt::format(
        "serve: --server {} makes no sense here: `falcon serve` is the server (use --listen)",
        ctx.server_flag));
  }
  // Every thread started from here inherits the mask, so none of them is interrupted.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);  // a client that went away is a failed write, not a dead server

  DaemonOptions options = args;
  options.config_path = ctx.config_path();
  std::unique_ptr<Daemon> daemon;
  try {
    daemon = std::make_unique<Daemon>(options);
  } catch (const DaemonSetupError& e) {
    throw UsageError(e.what());
  }
  std::thread waiter([&] {
    int signal_number = 0;
    for (;;) {
      if (sigwait(&signals, &signal_number) != 0) continue;
      if (signal_number == SIGHUP) {
        daemon->reload();
        continue;
      }
      daemon->stop();
      return;
    }
  });
  int code = 0;
  try {
    code = daemon->run();
  } catch (...) {
    pthread_kill(waiter.native_handle(), SIGTERM);  // its sigwait takes it and ends
    waiter.join();
    throw;
  }
  waiter.join();
  if (daemon->abandoned_work()) {
    // Threads still run under the daemon's objects: leave without running destructors.
    std::cout.flush();
    std::_Exit(code);
  }
  return code;
}

}  // namespace

void add_serve_command(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<DaemonOptions>();
  auto* cmd = app.add_subcommand(
      "serve",
      "Run the control plane: the probe cache, the state store and the HTTP API (docs/serve.md)");
  cmd->add_option("--listen", args->listen,
                  "host:port to listen on (default serve.listen, 127.0.0.1:8787; port 0 picks one "
                  "and the first stderr line names it)");
  cmd->add_option("--state", args->state,
                  "state store URL (default serve.state, else <state_dir>/falcon.db)");
  cmd->add_option("--tokens-file", args->tokens_file,
                  "bearer tokens, lines `<token> read|operate` (default serve.tokens_file)");
  cmd->add_option("--tls-cert", args->tls_cert, "PEM certificate chain: serve HTTPS");
  cmd->add_option("--tls-key", args->tls_key, "PEM private key of --tls-cert");
  bind(cmd, ctx, args, &run_serve);
}

}  // namespace falcon::cli
