// Runs the built `falcon` binary (and other executables) for end-to-end tests.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "falcon/command_runner.h"

namespace falcon::testing {

// Runs `falcon <args...>` with `env` added to the environment; 120 s deadline.
CommandResult run_falcon(const std::vector<std::string>& args,
                         const std::map<std::string, std::string>& env = {});

// Runs any command with `env` added; 120 s deadline.
CommandResult run_command(const std::vector<std::string>& argv,
                          const std::map<std::string, std::string>& env = {});

// The path of an executable built into <build>/bin (falcon, fleet-xpk, falcon-fleet, ...).
std::string built_binary(const std::string& name);

}  // namespace falcon::testing
