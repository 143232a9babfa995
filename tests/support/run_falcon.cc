#include "support/run_falcon.h"

namespace falcon::testing {

std::string built_binary(const std::string& name) {
  return std::string(FALCON_BINARY_DIR) + "/bin/" + name;
}

CommandResult run_command(const std::vector<std::string>& argv,
                          const std::map<std::string, std::string>& env) {
  static const auto runner = make_posix_command_runner();
  return runner->run({.argv = argv, .env = env, .timeout = std::chrono::seconds(120)});
}

CommandResult run_falcon(const std::vector<std::string>& args,
                         const std::map<std::string, std::string>& env) {
  std::vector<std::string> argv{FALCON_CLI_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_command(argv, env);
}

}  // namespace falcon::testing
