// falcon doctor
#include <fmt/format.h>

#include <iostream>

#include "cli/cli.h"

namespace falcon::cli {

void add_doctor_command(CLI::App& app, Context& ctx) {
  app.add_subcommand("doctor",
                     "check this machine: xpk, gcloud, credentials, Logging and Storage "
                     "endpoints, every cluster (exit 0 when nothing fails, 2 otherwise)")
      ->callback([&ctx] {
        ctx.action = [&ctx] {
          const auto checks = ctx.fabric().doctor();
          bool failed = false;
          nlohmann::json out = nlohmann::json::array();
          for (const auto& c : checks) {
            failed = failed || c.status == "fail";
            out.push_back(
                {{"name", c.name},
                 {"status", c.status},
                 {"detail", c.detail},
                 {"fix", c.fix.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.fix)}});
          }
          if (ctx.json) {
            print_json(out);
          } else {
            for (const auto& c : checks) {
              std::cout << fmt::format("[{:<4}] {}: {}\n", c.status, c.name, c.detail);
              if (!c.fix.empty()) std::cout << fmt::format("       fix: {}\n", c.fix);
            }
          }
          return failed ? kExitUsage : kExitOk;
        };
      });
}

}  // namespace falcon::cli
