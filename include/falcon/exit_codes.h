// The exit codes of the `falcon` CLI (README "Exit codes"), shared by the CLI and by the API
// client, which turns a server's error answer back into the code the same command exits with
// locally (api_client.h).
#pragma once

namespace falcon {

enum ExitCode : int {
  kExitOk = 0,
  kExitInternal = 1,
  kExitUsage = 2,     // usage or configuration error
  kExitNotFound = 3,  // unknown cluster or workload
  kExitNoCluster = 4,
  kExitXpkFailed = 5,
  kExitLogs = 6,
  kExitUnreachable = 7,  // a cluster, or the falcon server (--server), cannot be reached
};

}  // namespace falcon
