// falcon config validate [PATH]
#include <fmt/format.h>

#include <iostream>

#include "cli/cli.h"

namespace falcon::cli {
namespace {

struct ValidateArgs {
  std::string path;  // empty: the configuration in force
};

// What `config validate --json` prints for a valid file.
struct ValidateOutcome {
  std::string path;
  std::size_t clusters = 0;
};

void to_json(nlohmann::json& j, const ValidateOutcome& v) {
  j = {{"ok", true}, {"path", v.path}, {"clusters", v.clusters}};
}

int run_config_validate(Context& ctx, const ValidateArgs& a) {
  const std::string file = a.path.empty() ? ctx.config_path() : a.path;
  const ValidateOutcome out{file, ClusterFabric::check_config(file).clusters.size()};
  if (ctx.json) {
    print_json(out);
  } else {
    std::cout << fmt::format("ok: {} cluster{}\n", out.clusters, out.clusters == 1 ? "" : "s");
  }
  return kExitOk;
}

}  // namespace

void add_config_commands(CLI::App& app, Context& ctx) {
  CLI::App* config = app.add_subcommand("config", "check repos.yaml");
  config->require_subcommand(1);

  auto args = std::make_shared<ValidateArgs>();
  CLI::App* validate = config->add_subcommand(
      "validate",
      "validate a repos.yaml: prints 'ok: N clusters' (exit 0) or every problem, one per line, "
      "on stderr (exit 2). Meant for CI on pull requests that change repos.yaml");
  validate->add_option("path", args->path,
                       "the file (default: --config, $FALCON_CONFIG, ./repos.yaml)");
  bind(validate, ctx, args, run_config_validate);
}

}  // namespace falcon::cli
