// falcon: the command-line interface over ClusterFabric. Thin: parse, call, print.
#include <fmt/format.h>
#include <malloc.h>

#include <cstdlib>
#include <iostream>

#include "cli/cli.h"
#include "falcon/errors.h"
#include "falcon/workload_manager.h"

namespace falcon::cli {
namespace {

// The most of a parse error shown (it may quote a 100,000-character argument).
constexpr std::size_t kMaxParseMessageBytes = 400;

// Prints the error as the user should see it and returns the exit code for it.
int report(const Context& ctx, const std::string& type, const std::string& message, int code,
           const std::function<void(nlohmann::json&)>& details = {}) {
  std::cerr << "falcon: " << message << "\n";
  if (ctx.json) {
    nlohmann::json error = {{"type", type}, {"message", message}};
    if (details) details(error);
    print_json({{"error", error}});
  }
  return code;
}

int run_action(Context& ctx) {
  auto details_of = [](const FalconError& e) {
    return [&e](nlohmann::json& out) { e.add_details(out); };
  };
  try {
    return ctx.action();
  } catch (const ClusterConfigError& e) {
    // One problem per line, so CI logs point at each.
    if (!ctx.json) {
      for (const auto& p : e.problems()) std::cerr << "falcon: " << p << "\n";
      return kExitUsage;
    }
    return report(ctx, e.type_name(), e.what(), kExitUsage, details_of(e));
  } catch (const FalconError& e) {
    // The code from the one table the server and the remote client read too (exit_codes.h).
    const ErrorAnswer* answer = find_error_answer(e.type_name());
    return report(ctx, e.type_name(), e.what(), answer ? answer->exit_code : kExitInternal,
                  details_of(e));
  } catch (const ApiError& e) {
    // The server's error, printed as the CLI prints its own, with the same exit code.
    if (e.type() == "ClusterConfigError" && !ctx.json && e.error().contains("problems") &&
        e.error()["problems"].is_array()) {
      for (const auto& p : e.error()["problems"]) {
        std::cerr << "falcon: " << printable(p.get<std::string>(), 4096) << "\n";
      }
      return kExitUsage;
    }
    std::string message = e.what();
    if (e.status() == 401) {
      message +=
          fmt::format(" ({} answered 401: the token comes from --token-file or FALCON_TOKEN)",
                      ctx.server_url());
    }
    return report(ctx, e.type(), message, exit_code_for_api_error(e.status(), e.type()),
                  [&e, &message](nlohmann::json& out) {
                    for (const auto& [k, v] : e.error().items()) out[k] = v;
                    out["message"] = message;
                  });
  } catch (const ApiUnreachableError& e) {
    return report(ctx, "ServerUnreachableError", e.what(), kExitUnreachable,
                  [&e](nlohmann::json& out) { out["url"] = e.url(); });
  } catch (const UsageError& e) {
    return report(ctx, "UsageError", e.what(), kExitUsage);
  } catch (const std::exception& e) {
    return report(ctx, "InternalError", fmt::format("internal error: {}", e.what()), kExitInternal);
  }
}

}  // namespace
}  // namespace falcon::cli

int main(int argc, char** argv) {
  using namespace falcon::cli;
  // A fixed mmap threshold (glibc's default start value): large buffers such as a page of log
  // entries or a response body are then always mapped and returned on free. Left dynamic, glibc
  // raises the threshold after the first such buffer is freed and serves the next pages from the
  // heap, which fragments and grows with every page: a --tail of a million lines took 16% more
  // memory than one of a thousand (bench T1M), and about 5% with this.
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  Context ctx;
  CLI::App app{"falcon: the Falcon cluster layer: clusters, xpk workloads and their logs",
               "falcon"};
  app.set_version_flag("--version", "falcon " FALCON_VERSION "\n");
  app.option_defaults()->always_capture_default();
  app.add_option("--config", ctx.config_flag,
                 "repos.yaml to use (default: $FALCON_CONFIG, else ./repos.yaml)");
  app.add_flag("--json", ctx.json, "print machine-readable JSON on stdout");
  app.add_option("--server", ctx.server_flag,
                 "send every command to a falcon server's API, e.g. http://127.0.0.1:8787 "
                 "(default: $FALCON_SERVER; unset: run locally)");
  app.add_option("--token-file", ctx.token_file,
                 "file whose first line is the server's bearer token (default: $FALCON_TOKEN)");
  app.fallthrough();  // global options are accepted after the subcommand too
  app.require_subcommand(1);

  add_config_commands(app, ctx);
  add_cluster_commands(app, ctx);
  add_job_commands(app, ctx);
  add_doctor_command(app, ctx);
  add_fence_command(app, ctx);
  add_serve_command(app, ctx);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // CLI11's message quotes what was given: shown escaped and cut, as every value is.
    std::cerr << "falcon: " << falcon::printable(e.what(), kMaxParseMessageBytes)
              << "\nRun with --help for more information.\n";
    return kExitUsage;
  }
  if (!ctx.action) {
    std::cerr << app.help();
    return kExitUsage;
  }
  return run_action(ctx);
}
