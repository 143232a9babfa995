// falcon doctor
#include <fmt/format.h>

#include <iostream>

#include "cli/cli.h"

namespace falcon::cli {
namespace {

int run_doctor(Context& ctx) {
  ctx.refuse_remote("doctor",
                    "it checks this machine's xpk, gcloud, credentials and state store, which a "
                    "client does not use; the server's readiness is GET " +
                        ctx.server_url() +
                        "/readyz. Unset FALCON_SERVER (or drop --server) to check this machine");
  const auto checks = ctx.fabric().doctor();
  bool failed = false;
  for (const auto& c : checks) failed = failed || c.status == "fail";
  if (ctx.json) {
    print_json(checks);
  } else {
    for (const auto& c : checks) {
      std::cout << fmt::format("[{:<4}] {}: {}\n", c.status, c.name, c.detail);
      if (!c.fix.empty()) std::cout << fmt::format("       fix: {}\n", c.fix);
    }
  }
  return failed ? kExitUsage : kExitOk;
}

}  // namespace

void add_doctor_command(CLI::App& app, Context& ctx) {
  bind(app.add_subcommand("doctor",
                          "check this machine: xpk, gcloud, credentials, Logging and Storage "
                          "endpoints, every cluster (exit 0 when nothing fails, 2 otherwise)"),
       ctx, run_doctor);
}

}  // namespace falcon::cli
