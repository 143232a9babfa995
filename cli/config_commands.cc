// falcon config validate [PATH]
#include <fmt/format.h>

#include <iostream>

#include "cli/cli.h"

namespace falcon::cli {

void add_config_commands(CLI::App& app, Context& ctx) {
  CLI::App* config = app.add_subcommand("config", "check repos.yaml");
  config->require_subcommand(1);

  auto path = std::make_shared<std::string>();
  CLI::App* validate = config->add_subcommand(
      "validate",
      "validate a repos.yaml: prints 'ok: N clusters' (exit 0) or every problem, one per line, "
      "on stderr (exit 2). Meant for CI on pull requests that change repos.yaml");
  validate->add_option("path", *path, "the file (default: --config, $FALCON_CONFIG, ./repos.yaml)");
  validate->callback([&ctx, path] {
    ctx.action = [&ctx, path] {
      const std::string file = path->empty() ? ctx.config_path() : *path;
      const FabricConfig checked = ClusterFabric::check_config(file);
      if (ctx.json) {
        print_json({{"ok", true}, {"path", file}, {"clusters", checked.clusters.size()}});
      } else {
        std::cout << fmt::format("ok: {} cluster{}\n", checked.clusters.size(),
                                 checked.clusters.size() == 1 ? "" : "s");
      }
      return kExitOk;
    };
  });
}

}  // namespace falcon::cli
