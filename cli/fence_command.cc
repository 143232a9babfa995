// falcon fence check: what a copy of a managed workload runs before each checkpoint write.
#include <fmt/format.h>

#include <iostream>
#include <optional>

#include "cli/cli.h"
#include "falcon/fence.h"
#include "falcon/gcs_uri.h"

namespace falcon::cli {
namespace {

struct FenceArgs {
  std::string uri;
  std::int64_t epoch = 0;
};

int run_fence_check(Context& ctx, const FenceArgs& a) {
  std::optional<FenceTicket> ticket;
  if (a.uri.empty() && a.epoch == 0) {
    try {
      ticket = fence_ticket_from_environment();
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
  } else {
    if (a.uri.empty() || a.epoch == 0) {
      throw UsageError(
          "--uri and --epoch go together (or FALCON_FENCE_URI and FALCON_FENCE_EPOCH)");
    }
    try {
      parse_gcs_uri(a.uri);
    } catch (const std::invalid_argument& e) {
      throw UsageError(fmt::format("--uri: {}", e.what()));
    }
    ticket = FenceTicket{a.uri, a.epoch};
  }
  if (!ticket) {
    // Started without supervisor.fence: nothing supersedes it by storage, so it may write.
    if (ctx.json) {
      print_json({{"fenced", false}, {"uri", nullptr}});
    } else {
      std::cout << "no fence: FALCON_FENCE_URI is not set (the copy was started without "
                   "supervisor.fence)\n";
    }
    return kExitOk;
  }
  const std::int64_t current = check_fence(*ticket);  // FencedError: exit 8
  if (ctx.json) {
    print_json(
        {{"fenced", false}, {"uri", ticket->uri}, {"epoch", ticket->epoch}, {"current", current}});
  } else {
    std::cout << fmt::format("current: {} holds epoch {}, this copy's is {}\n", ticket->uri,
                             current, ticket->epoch);
  }
  return kExitOk;
}

}  // namespace

void add_fence_command(CLI::App& app, Context& ctx) {
  CLI::App* fence = app.add_subcommand(
      "fence", "storage fencing of managed workloads (docs/self-healing.md#storage-fencing)");
  fence->require_subcommand(1);
  auto a = std::make_shared<FenceArgs>();
  CLI::App* check = fence->add_subcommand(
      "check",
      "run by a copy of a managed workload before it writes a checkpoint: exit 0 when no newer "
      "copy was started (or no fence is set), 8 when one was (it must not write)");
  check->add_option("--uri", a->uri, "the fence object (default: $FALCON_FENCE_URI)");
  check->add_option("--epoch", a->epoch, "this copy's epoch (default: $FALCON_FENCE_EPOCH)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 53));
  bind(check, ctx, a, run_fence_check);
}

}  // namespace falcon::cli
