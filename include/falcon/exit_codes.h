// The exit codes of the `falcon` CLI (README "Exit codes") and the one table that answers each
// of the layer's errors: the exit code the CLI exits with and the HTTP status the API answers.
// The CLI, the server, the remote client (which turns a server's answer back into the code the
// same command exits with locally) and the Python module (which has a class for every row) all
// read it.
//
//   const falcon::ErrorAnswer* a = falcon::find_error_answer(e.type_name());
//   int code = a ? a->exit_code : falcon::kExitInternal;
#pragma once

#include <string_view>
#include <vector>

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
  kExitFenced = 8,       // `falcon fence check`: a newer copy of the managed workload exists
};

// How one type of error is answered.
struct ErrorAnswer {
  std::string_view type;  // FalconError::type_name(), or the CLI's and API's own
  ExitCode exit_code;     // of the CLI
  int http_status;        // of the API
  bool falcon_error;      // a FalconError subclass (the Python module has a class for it)
};

// Every row: each FalconError subclass's type_name(), plus UsageError (bad arguments) and
// InternalError (anything else). A type not in the table is answered as InternalError.
const std::vector<ErrorAnswer>& error_answers();

// The row of `type`, or nullptr.
const ErrorAnswer* find_error_answer(std::string_view type);

}  // namespace falcon
