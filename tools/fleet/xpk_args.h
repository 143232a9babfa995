// xpk's command line, parsed the way Python's argparse parses it for xpk v1.13.1
// (src/xpk/parser/workload.py, common.py, validators.py): `--flag=value` and `--flag value`,
// unique-prefix abbreviations, store_true and --x/--no-x flags, repeatable --env, name and
// choice validation, the --tpu-type/--device-type and --env/--env-file exclusive groups, and
// the same error texts. Errors are reported as argparse does: usage and `<prog>: error: ...` on
// stderr, exit code 2, nothing on stdout. Unrecognized arguments are reported by the top-level
// parser (`xpk: error: unrecognized arguments: ...`) after the subcommand parsed cleanly.
//
// Only `workload create|list|delete`, `version` and -h/--help are simulated; other xpk
// commands are recognised and refused with exit 1.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace falcon::fleet {

enum class XpkCommand { kWorkloadCreate, kWorkloadList, kWorkloadDelete, kVersion };

struct XpkArgs {
  XpkCommand command = XpkCommand::kWorkloadList;
  // shared
  std::optional<std::string> project;
  std::optional<std::string> zone;
  std::optional<std::string> project_number;
  bool dry_run = false;
  bool skip_validation = false;
  bool quiet = false;
  bool sandbox_kubeconfig = false;
  // create, list, delete
  std::string cluster;
  std::optional<std::string> workload;  // required for create
  // create
  std::string command_text;  // --command
  std::optional<std::string> tpu_type;
  std::optional<std::string> device_type;
  int num_slices = 1;
  int num_nodes = 1;
  std::string priority = "medium";
  std::vector<std::string> env;  // --env items, verbatim
  std::optional<std::string> env_file;
  std::optional<std::string> docker_image;
  std::string base_docker_image = "python:3.10";
  std::optional<std::string> script_dir;
  std::string docker_name = "jax-tpu";
  std::optional<std::string> namespace_;  // only when the xpk supports it
  std::string max_restarts = "0";
  long long ttl_seconds_after_finished = 43200;
  // list, delete
  std::string filter_by_status = "EVERYTHING";
  std::optional<std::string> filter_by_job;
  std::optional<std::string> wait_for_job_completion;
  std::optional<long long> timeout;
  bool force = false;
};

// What parse_xpk_args decided. Exactly one of `args`, `error_text`, `help_text`,
// `unsupported_text` is set.
struct XpkParse {
  std::optional<XpkArgs> args;
  std::optional<std::string> error_text;        // for stderr; exit 2
  std::optional<std::string> help_text;         // for stdout; exit 0
  std::optional<std::string> unsupported_text;  // a real xpk command the fleet does not
                                                // simulate; for stderr, exit 1
};

struct XpkParseOptions {
  bool supports_namespace = false;  // --namespace exists on `workload create`
  // DEPENDENCY_AUTO_DOWNLOAD=false in the environment removes that flag, as in xpk.
  bool dependency_auto_download_flag = true;
  // --script-dir must name an existing directory, as xpk's directory_path_type checks.
  bool check_script_dir = true;
};

// Parses argv without the program name, e.g. {"workload", "list", "--cluster=c"}.
XpkParse parse_xpk_args(const std::vector<std::string>& argv, const XpkParseOptions& options);

}  // namespace falcon::fleet
