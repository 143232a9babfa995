#include "fleet/xpk_args.h"

#include <sys/stat.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include <fmt/format.h>

#include "common/names.h"
#include "fleet/device_types.h"
#include "fleet/fleet_config.h"

namespace falcon::fleet {
namespace {

enum class Kind { kValue, kAppend, kStoreTrue, kBoolOpt };
enum class Type { kString, kName, kInt, kChoice, kDir };

struct Opt {
  std::vector<std::string>
      flags;  // as argparse's option_strings, e.g. {"-tgps", "--termination-..."}
  Kind kind = Kind::kValue;
  Type type = Type::kString;
  std::vector<std::string> choices;
  bool required = false;
  int group = 0;  // mutually exclusive group, 0 for none
  std::string help;
  std::function<void(XpkArgs&, const std::string&)> set;  // kValue, kAppend
  std::function<void(XpkArgs&, bool)> set_flag;           // kStoreTrue, kBoolOpt

  // How argparse names the action in messages: '/'.join(option_strings).
  std::string display() const {
    std::string out;
    for (const auto& f : flags) out += (out.empty() ? "" : "/") + f;
    return out;
  }
  std::string metavar() const {
    if (type == Type::kChoice) {
      std::string out = "{";
      for (std::size_t i = 0; i < choices.size(); ++i) out += (i ? "," : "") + choices[i];
      return out + "}";
    }
    std::string dest = flags.back().substr(2);
    std::string upper;
    for (char c : dest) upper += c == '-' ? '_' : static_cast<char>(std::toupper(c));
    return upper;
  }
};

struct Group {
  int id;
  bool required;
};

struct Parser {
  std::string prog;
  std::vector<Opt> opts;
  std::vector<Group> groups;
};

const std::vector<std::string> kStatusChoices = {"EVERYTHING", "FINISHED", "RUNNING",
                                                 "QUEUED",     "FAILED",   "SUCCESSFUL"};
const std::vector<std::string> kPriorityChoices = {"very-low", "low", "medium", "high",
                                                   "very-high"};
const std::vector<std::string> kTopCommands = {"cluster", "workload",  "storage", "job",
                                               "info",    "inspector", "run",     "batch",
                                               "shell",   "kind",      "version", "config"};

Opt value(std::string flag, std::function<void(XpkArgs&, const std::string&)> set, std::string help,
          Type type = Type::kString) {
  Opt o;
  o.flags = {std::move(flag)};
  o.kind = Kind::kValue;
  o.type = type;
  o.set = std::move(set);
  o.help = std::move(help);
  return o;
}

Opt flag(std::string name, std::function<void(XpkArgs&, bool)> set, std::string help) {
  Opt o;
  o.flags = {std::move(name)};
  o.kind = Kind::kStoreTrue;
  o.set_flag = std::move(set);
  o.help = std::move(help);
  return o;
}

Opt bool_opt(const std::string& name, std::function<void(XpkArgs&, bool)> set, std::string help) {
  Opt o;
  o.flags = {"--" + name, "--no-" + name};
  o.kind = Kind::kBoolOpt;
  o.set_flag = std::move(set);
  o.help = std::move(help);
  return o;
}

Opt ignored_value(std::string name, std::string help) {
  return value(
      std::move(name), [](XpkArgs&, const std::string&) {}, std::move(help));
}

Opt ignored_flag(std::string name, std::string help) {
  return flag(
      std::move(name), [](XpkArgs&, bool) {}, std::move(help));
}

void add_shared(std::vector<Opt>& opts, const XpkParseOptions& options) {
  opts.push_back(value(
      "--project", [](XpkArgs& a, const std::string& v) { a.project = v; },
      "GCE project name, defaults to \"gcloud config project.\""));
  opts.push_back(value(
      "--project-number", [](XpkArgs& a, const std::string& v) { a.project_number = v; },
      "GCE project number. If provided, skips the Cloud Resource Manager API call."));
  opts.push_back(value(
      "--zone", [](XpkArgs& a, const std::string& v) { a.zone = v; },
      "GCE zone, e.g. us-central2-b, defaults to \"gcloud config "
      "compute/zone.\""));
  opts.push_back(bool_opt(
      "dry-run", [](XpkArgs& a, bool v) { a.dry_run = v; },
      "If given `--dry-run`, xpk will print the commands it wants to run "
      "but not run them."));
  opts.push_back(bool_opt(
      "skip-validation", [](XpkArgs& a, bool v) { a.skip_validation = v; },
      "Skip dependency validation checks (kubectl, gcloud, docker, etc)."));
  opts.push_back(bool_opt(
      "quiet", [](XpkArgs& a, bool v) { a.quiet = v; },
      "Disables prompting before unintended destructive actions."));
  opts.push_back(bool_opt(
      "sandbox-kubeconfig", [](XpkArgs& a, bool v) { a.sandbox_kubeconfig = v; },
      "Use a temporary kubeconfig for this run."));
  if (options.dependency_auto_download_flag) {
    opts.push_back(bool_opt(
        "dependency-auto-download", [](XpkArgs&, bool) {},
        "Automatically download missing dependencies (default: true)."));
  }
}

Parser list_parser(const XpkParseOptions& options) {
  Parser p{"xpk workload list", {}, {}};
  Opt cluster = value(
      "--cluster", [](XpkArgs& a, const std::string& v) { a.cluster = v; },
      "The name of the cluster to list jobs on.", Type::kName);
  cluster.required = true;
  p.opts.push_back(cluster);
  Opt status = value(
      "--filter-by-status", [](XpkArgs& a, const std::string& v) { a.filter_by_status = v; },
      "Filters the arguments based on status. Selected filters are listed above. FAILED and "
      "SUCCESSFUL are sub-states of FINISHED.",
      Type::kChoice);
  status.choices = kStatusChoices;
  p.opts.push_back(status);
  p.opts.push_back(value(
      "--filter-by-job", [](XpkArgs& a, const std::string& v) { a.filter_by_job = v; },
      "Filters the arguments based on job name. Provide a regex expressionto parse jobs that "
      "match the pattern or provide a job name to view a single job."));
  p.opts.push_back(value(
      "--wait-for-job-completion",
      [](XpkArgs& a, const std::string& v) { a.wait_for_job_completion = v; },
      "The name of the job to wait on."));
  p.opts.push_back(value(
      "--timeout", [](XpkArgs& a, const std::string& v) { a.timeout = std::stoll(v); },
      "Amount of time to wait for job in seconds. Default is the max wait time, 1 week.",
      Type::kInt));
  add_shared(p.opts, options);
  return p;
}

Parser delete_parser(const XpkParseOptions& options) {
  Parser p{"xpk workload delete", {}, {}};
  add_shared(p.opts, options);
  Opt cluster = value(
      "--cluster", [](XpkArgs& a, const std::string& v) { a.cluster = v; },
      "The name of the cluster to delete the job on.", Type::kName);
  cluster.required = true;
  p.opts.push_back(cluster);
  p.opts.push_back(value(
      "--workload", [](XpkArgs& a, const std::string& v) { a.workload = v; },
      "The name of the workload to delete. If the workload is not "
      "specified, all workloads will be deleted from the cluster.",
      Type::kName));
  p.opts.push_back(value(
      "--filter-by-job", [](XpkArgs& a, const std::string& v) { a.filter_by_job = v; },
      "Filters the arguments based on job name. Provide a regex expressionto parse jobs that "
      "match the pattern or provide a job name to delete a single job."));
  Opt status = value(
      "--filter-by-status", [](XpkArgs& a, const std::string& v) { a.filter_by_status = v; },
      "Filters the arguments based on status. Selected filters are listed above. FAILED and "
      "SUCCESSFUL are sub-states of FINISHED.",
      Type::kChoice);
  status.choices = kStatusChoices;
  p.opts.push_back(status);
  p.opts.push_back(flag(
      "--force", [](XpkArgs& a, bool v) { a.force = v; },
      "Forces workload deletion command to run without additional approval."));
  return p;
}

Parser create_parser(const XpkParseOptions& options) {
  Parser p{"xpk workload create", {}, {{1, true}, {2, false}}};
  auto& o = p.opts;
  Opt command = value(
      "--command", [](XpkArgs& a, const std::string& v) { a.command_text = v; },
      "Main command to run on each VM. This script runs within the docker "
      "container.");
  command.required = true;
  o.push_back(command);
  Opt tpu = value(
      "--tpu-type", [](XpkArgs& a, const std::string& v) { a.tpu_type = v; },
      "The tpu type to use, v5litepod-16, etc.");
  tpu.group = 1;
  o.push_back(tpu);
  Opt device = value(
      "--device-type", [](XpkArgs& a, const std::string& v) { a.device_type = v; },
      "The device type to use (can be tpu or gpu or cpu), v5litepod-16, "
      "h100-80gb-8, n2-standard-32-4 etc.");
  device.group = 1;
  o.push_back(device);
  Opt workload = value(
      "--workload", [](XpkArgs& a, const std::string& v) { a.workload = v; },
      "The name of the workload to run.", Type::kName);
  workload.required = true;
  o.push_back(workload);
  Opt cluster = value(
      "--cluster", [](XpkArgs& a, const std::string& v) { a.cluster = v; },
      "The name of the cluster to run the job on.", Type::kName);
  cluster.required = true;
  o.push_back(cluster);
  Opt storage = ignored_value("--storage", "Names of storages the workload uses");
  storage.kind = Kind::kAppend;
  o.push_back(storage);
  o.push_back(value(
      "--num-nodes", [](XpkArgs& a, const std::string& v) { a.num_nodes = std::stoi(v); },
      "The number of nodes to use, default=1.", Type::kInt));
  o.push_back(ignored_value("--scheduler",
                            "Which scheduler you want to use. Defaults to "
                            "`default-scheduler`."));
  o.push_back(ignored_value("--debug-dump-gcs",
                            "GCS bucket or a directory within a bucket where debugging "
                            "information such as HLO dumps are uploaded"));
  o.push_back(ignored_flag("--deploy-stacktrace-sidecar",
                           "Deploy a sidecar container that forwards stack traces to Cloud "
                           "Logging."));
  o.push_back(ignored_flag("--use-pathways",
                           "Please use `xpk workload create-pathways` "
                           "instead to create Pathways workloads."));
  o.push_back(ignored_flag("--on-demand", "Sets autoprovisioning to use on-demand resources."));
  o.push_back(ignored_value("--reservation",
                            "Sets autoprovisioning to use reservation "
                            "resources for the workload request."));
  o.push_back(ignored_flag("--spot", "Sets autoprovisioning to use spot resources."));
  o.push_back(ignored_flag("--flex", "Sets autoprovisioning to use flex-start resources."));
  add_shared(o, options);
  o.push_back(value(
      "--docker-name", [](XpkArgs& a, const std::string& v) { a.docker_name = v; },
      "The name of the docker-image to use, default and typically `jax-tpu`."));
  o.push_back(value(
      "--num-slices", [](XpkArgs& a, const std::string& v) { a.num_slices = std::stoi(v); },
      "The number of slices to use, default=1.", Type::kInt));
  Opt priority = value(
      "--priority", [](XpkArgs& a, const std::string& v) { a.priority = v; },
      "A priority, one of `very-low`, `low`, `medium`, `high` or `very-high`. "
      "Defaults to `medium`.",
      Type::kChoice);
  priority.choices = kPriorityChoices;
  o.push_back(priority);
  o.push_back(value(
      "--max-restarts", [](XpkArgs& a, const std::string& v) { a.max_restarts = v; },
      "Maximum number of times the JobSet will be restarted upon failure. "
      "Defaults to 0."));
  o.push_back(value(
      "--ttl-seconds-after-finished",
      [](XpkArgs& a, const std::string& v) { a.ttl_seconds_after_finished = std::stoll(v); },
      "Set the number of seconds to clean up finished Jobsets (either Complete or Failed). "
      "This is by default set to 12 hours.",
      Type::kInt));
  Opt tgps = ignored_value("--termination-grace-period-seconds",
                           "Maximum wait time for a workload Pod to wrap up after a disruption "
                           "event or deletion request.Defaults to 30 seconds.");
  tgps.flags = {"-tgps", "--termination-grace-period-seconds"};
  o.push_back(tgps);
  o.push_back(
      ignored_value("--colocated-python-sidecar-image", "Colocated Python sidecar server image."));
  o.push_back(ignored_flag("--enable-debug-logs",
                           "Set this flag to get verbose logging to investigate the issue in "
                           "the workload."));
  o.push_back(ignored_value("--restart-on-exit-codes",
                            "Additional user-defined exit codes that allow restarting the "
                            "workload when --max-restarts is set to a value greater than 0."));
  o.push_back(
      ignored_value("--ramdisk-directory", "The directory of the locally mounted RAM disk."));
  o.push_back(ignored_flag("--mtc-enabled", "Enable multi-tier checkpointing."));
  o.push_back(ignored_value("--docker-image-pull-secret",
                            "Name of the secret used to pull the docker image."));
  o.push_back(ignored_value("--output-manifest-file", "Write the JobSet manifest to this file."));
  o.push_back(bool_opt(
      "use-parallel-containers", [](XpkArgs&, bool) {}, "Run one container per TPU chip."));
  Opt env_file = value(
      "--env-file", [](XpkArgs& a, const std::string& v) { a.env_file = v; },
      "Environment file to be applied to the container. This file should use "
      "the syntax <variable>=value (which sets the variable to the given "
      "value) or <variable> (which takes the value from the local "
      "environment), and # for comments.");
  env_file.group = 2;
  o.push_back(env_file);
  Opt env = value(
      "--env", [](XpkArgs& a, const std::string& v) { a.env.push_back(v); },
      "Environment variable to set in the container environment. The format is "
      "<variable>=value");
  env.kind = Kind::kAppend;
  env.group = 2;
  o.push_back(env);
  o.push_back(value(
      "--base-docker-image", [](XpkArgs& a, const std::string& v) { a.base_docker_image = v; },
      "The base docker-image to use, default python:3.10."));
  o.push_back(value(
      "--script-dir", [](XpkArgs& a, const std::string& v) { a.script_dir = v; },
      "The local location of the directory to copy to the docker image and run "
      "the main command from. Defaults to current working directory.",
      options.check_script_dir ? Type::kDir : Type::kString));
  o.push_back(value(
      "--docker-image", [](XpkArgs& a, const std::string& v) { a.docker_image = v; },
      "The version of the docker-image to use. Set this argument if the user "
      "wants the docker image to be used directly by the xpk workload."));
  o.push_back(ignored_flag("--use-vertex-tensorboard",
                           "Set this flag to view workload data on Vertex Tensorboard."));
  o.push_back(ignored_value("--experiment-name", "The name of Vertex Experiment to create."));
  if (options.supports_namespace) {
    o.push_back(value(
        "--namespace", [](XpkArgs& a, const std::string& v) { a.namespace_ = v; },
        "The Kubernetes namespace to create the workload in (default: default)."));
  }
  return p;
}

std::string wrap_usage(const std::string& prog, const std::vector<std::string>& parts) {
  const std::string head = "usage: " + prog + " ";
  const std::size_t width = 78;
  std::string out = head;
  std::size_t line_len = head.size();
  const std::string indent(head.size(), ' ');
  bool first = true;
  for (const auto& part : parts) {
    if (!first && line_len + 1 + part.size() > width) {
      out += "\n" + indent;
      line_len = indent.size();
      first = true;
    }
    if (!first) {
      out += ' ';
      ++line_len;
    }
    out += part;
    line_len += part.size();
    first = false;
  }
  return out + "\n";
}

std::string usage(const Parser& p) {
  std::vector<std::string> parts = {"[-h]"};
  std::set<int> groups_done;
  for (const auto& o : p.opts) {
    const auto one = [&](const Opt& x, bool bracket) {
      std::string s;
      if (x.kind == Kind::kBoolOpt) {
        s = x.flags[0] + " | " + x.flags[1];
      } else if (x.kind == Kind::kStoreTrue) {
        s = x.flags[0];
      } else {
        s = x.flags[0] + " " + x.metavar();
      }
      return bracket ? "[" + s + "]" : s;
    };
    if (o.group != 0) {
      if (!groups_done.insert(o.group).second) continue;
      bool required = false;
      for (const auto& g : p.groups) required = required || (g.id == o.group && g.required);
      std::string s;
      for (const auto& x : p.opts) {
        if (x.group == o.group) s += (s.empty() ? "" : " | ") + one(x, false);
      }
      parts.push_back(required ? "(" + s + ")" : "[" + s + "]");
      continue;
    }
    parts.push_back(one(o, !o.required));
  }
  return wrap_usage(p.prog, parts);
}

std::string help(const Parser& p) {
  std::string out = usage(p) + "\noptions:\n";
  const auto entry = [&](const std::string& invocation, const std::string& text) {
    if (invocation.size() <= 20) {
      out += fmt::format("  {:<22}{}\n", invocation, text);
    } else {
      out += fmt::format("  {}\n  {:<22}{}\n", invocation, "", text);
    }
  };
  entry("-h, --help", "show this help message and exit");
  for (const auto& o : p.opts) {
    std::string invocation;
    for (const auto& f : o.flags) {
      if (!invocation.empty()) invocation += ", ";
      invocation += f;
      if (o.kind == Kind::kValue || o.kind == Kind::kAppend)
        invocation.append(" ").append(o.metavar());
    }
    entry(invocation, o.help);
  }
  return out;
}

std::string top_usage() {
  std::string cmds;
  for (const auto& c : kTopCommands) cmds += (cmds.empty() ? "" : ",") + c;
  return "usage: xpk [-h] {" + cmds + "} ...\n";
}

std::string top_help() {
  std::string out = top_usage() +
                    "\nxpk command\n\noptions:\n  -h, --help            show this help message "
                    "and exit\n\nxpk subcommands:\n";
  out += "  {cluster,workload,storage,job,info,inspector,run,batch,shell,kind,version,config}\n";
  out += "                        Top level commands\n";
  out += "    workload            commands around workload management\n";
  out += "    version             Command to get xpk version\n";
  return out;
}

std::string workload_usage() {
  return "usage: xpk workload [-h] {create,create-pathways,list,delete} ...\n";
}

std::string error(const std::string& usage_text, const std::string& prog,
                  const std::string& message) {
  return usage_text + prog + ": error: " + message + "\n";
}

std::string quoted_choices(const std::vector<std::string>& choices) {
  std::string out;
  for (const auto& c : choices) out += (out.empty() ? "'" : ", '") + c + "'";
  return out;
}

bool is_negative_number(const std::string& s) {
  if (s.size() < 2 || s[0] != '-') return false;
  bool digit = false;
  for (std::size_t i = 1; i < s.size(); ++i) {
    if (std::isdigit(static_cast<unsigned char>(s[i]))) {
      digit = true;
    } else if (s[i] != '.') {
      return false;
    }
  }
  return digit;
}

struct Match {
  const Opt* opt = nullptr;
  std::string flag;  // the option string matched
  std::optional<std::string> explicit_value;
  bool unknown = false;
  std::optional<std::string> ambiguous;  // the error message
};

// argparse's _parse_optional: nullopt when `arg` is a positional (a value).
std::optional<Match> classify(const Parser& p, const std::string& arg) {
  if (arg.empty() || arg[0] != '-' || arg == "-") return std::nullopt;
  const auto exact = [&](const std::string& s) -> const Opt* {
    for (const auto& o : p.opts) {
      for (const auto& f : o.flags) {
        if (f == s) return &o;
      }
    }
    return nullptr;
  };
  if (arg == "-h" || arg == "--help") return Match{nullptr, "--help", std::nullopt, false, {}};
  if (const Opt* o = exact(arg)) return Match{o, arg, std::nullopt, false, {}};
  std::string name = arg;
  std::optional<std::string> explicit_value;
  if (const auto eq = arg.find('='); eq != std::string::npos) {
    name = arg.substr(0, eq);
    explicit_value = arg.substr(eq + 1);
    if (const Opt* o = exact(name)) return Match{o, name, explicit_value, false, {}};
  }
  if (name.rfind("--", 0) == 0 && name.size() > 2) {
    std::vector<std::pair<const Opt*, std::string>> hits;
    if (std::string("--help").rfind(name, 0) == 0) hits.emplace_back(nullptr, "--help");
    for (const auto& o : p.opts) {
      for (const auto& f : o.flags) {
        if (f.rfind(name, 0) == 0) hits.emplace_back(&o, f);
      }
    }
    if (hits.size() > 1) {
      std::string list;
      for (const auto& h : hits) list += (list.empty() ? "" : ", ") + h.second;
      Match m;
      m.ambiguous = fmt::format("ambiguous option: {} could match {}", name, list);
      return m;
    }
    if (hits.size() == 1) return Match{hits[0].first, hits[0].second, explicit_value, false, {}};
  }
  if (is_negative_number(arg)) return std::nullopt;
  if (arg.find(' ') != std::string::npos) return std::nullopt;
  Match m;
  m.unknown = true;
  return m;
}

std::optional<std::string> convert(const Opt& o, const std::string& v) {
  switch (o.type) {
    case Type::kString:
      return xpk_accelerator_choice_error(o.flags.back(), v);  // --tpu-type, --device-type
    case Type::kName:
      if (tools::is_xpk_name(v)) return std::nullopt;
      return tools::xpk_name_error(v);
    case Type::kInt: {
      std::size_t used = 0;
      try {
        std::string t = v;
        while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
        (void)std::stoll(t, &used);
        if (used == t.size() && !t.empty()) {
          if (o.flags.back() == "--num-slices" || o.flags.back() == "--num-nodes") {
            (void)std::stoi(t);
          }
          return std::nullopt;
        }
      } catch (const std::exception&) {
      }
      return fmt::format("invalid int value: '{}'", v);
    }
    case Type::kChoice:
      if (std::find(o.choices.begin(), o.choices.end(), v) != o.choices.end()) {
        return std::nullopt;
      }
      return fmt::format("invalid choice: '{}' (choose from {})", v, quoted_choices(o.choices));
    case Type::kDir: {
      struct stat st {};
      if (::stat(v.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return std::nullopt;
      return fmt::format("Directory path is invalid. User provided path was {}", v);
    }
  }
  return std::nullopt;
}

XpkParse parse_sub(const Parser& p, XpkCommand command, const std::vector<std::string>& args) {
  XpkParse result;
  XpkArgs out;
  out.command = command;
  std::vector<std::string> extras;
  std::set<const Opt*> seen;
  std::map<int, const Opt*> group_seen;
  const std::string usage_text = usage(p);
  const auto fail = [&](const std::string& message) {
    result.error_text = error(usage_text, p.prog, message);
    return result;
  };
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      extras.insert(extras.end(), args.begin() + static_cast<long>(i) + 1, args.end());
      break;
    }
    const std::optional<Match> m = classify(p, arg);
    if (!m) {
      extras.push_back(arg);
      continue;
    }
    if (m->ambiguous) return fail(*m->ambiguous);
    if (m->unknown) {
      extras.push_back(arg);
      continue;
    }
    if (!m->opt) {  // -h / --help
      result.help_text = help(p);
      return result;
    }
    const Opt& o = *m->opt;
    if (o.group != 0) {
      auto [it, inserted] = group_seen.emplace(o.group, &o);
      if (!inserted && it->second != &o) {
        return fail(fmt::format("argument {}: not allowed with argument {}", o.display(),
                                it->second->display()));
      }
    }
    seen.insert(&o);
    if (o.kind == Kind::kStoreTrue || o.kind == Kind::kBoolOpt) {
      if (m->explicit_value) {
        return fail(fmt::format("argument {}: ignored explicit argument '{}'", o.display(),
                                *m->explicit_value));
      }
      o.set_flag(out, m->flag.rfind("--no-", 0) != 0);
      continue;
    }
    std::string v;
    if (m->explicit_value) {
      v = *m->explicit_value;
    } else if (i + 1 < args.size() && args[i + 1] != "--" && !classify(p, args[i + 1])) {
      v = args[++i];
    } else {
      return fail(fmt::format("argument {}: expected one argument", o.display()));
    }
    if (auto problem = convert(o, v)) {
      return fail(fmt::format("argument {}: {}", o.display(), *problem));
    }
    o.set(out, v);
  }
  std::string missing;
  for (const auto& o : p.opts) {
    if (o.required && !seen.count(&o)) missing += (missing.empty() ? "" : ", ") + o.display();
  }
  if (!missing.empty()) return fail("the following arguments are required: " + missing);
  for (const auto& g : p.groups) {
    if (!g.required || group_seen.count(g.id)) continue;
    std::string names;
    for (const auto& o : p.opts) {
      if (o.group == g.id) names += (names.empty() ? "" : " ") + o.display();
    }
    return fail("one of the arguments " + names + " is required");
  }
  if (!extras.empty()) {
    std::string list;
    for (const auto& e : extras) list += (list.empty() ? "" : " ") + e;
    result.error_text = error(top_usage(), "xpk", "unrecognized arguments: " + list);
    return result;
  }
  result.args = std::move(out);
  return result;
}

}  // namespace

XpkParse parse_xpk_args(const std::vector<std::string>& argv, const XpkParseOptions& options) {
  XpkParse result;
  if (argv.empty() || argv[0] == "-h" || argv[0] == "--help") {
    result.help_text = top_help();
    return result;
  }
  const std::string& top = argv[0];
  if (std::find(kTopCommands.begin(), kTopCommands.end(), top) == kTopCommands.end()) {
    if (top[0] == '-') {
      result.error_text = error(top_usage(), "xpk", "unrecognized arguments: " + top);
    } else {
      result.error_text =
          error(top_usage(), "xpk",
                fmt::format("argument xpk_subcommands: invalid choice: '{}' (choose from {})", top,
                            quoted_choices(kTopCommands)));
    }
    return result;
  }
  const std::vector<std::string> rest(argv.begin() + 1, argv.end());
  if (top == "version") {
    Parser p{"xpk version", {}, {}};
    return parse_sub(p, XpkCommand::kVersion, rest);
  }
  if (top != "workload") {
    result.unsupported_text = fmt::format(
        "fleet-xpk: `xpk {}` is not simulated by the local fleet; only `xpk "
        "workload create|list|delete` and `xpk version` are.\n",
        top);
    return result;
  }
  static const std::vector<std::string> kWorkloadCommands = {"create", "create-pathways", "list",
                                                             "delete"};
  if (rest.empty() || rest[0] == "-h" || rest[0] == "--help") {
    result.help_text = workload_usage() +
                       "\noptions:\n  -h, --help            show this help message and exit\n"
                       "\nworkload subcommands:\n  {create,create-pathways,list,delete}\n"
                       "                        `create`, `create-pathways`, `list` and "
                       "`delete` workloads on clusters\n";
    return result;
  }
  const std::vector<std::string> sub_args(rest.begin() + 1, rest.end());
  if (rest[0] == "create") {
    return parse_sub(create_parser(options), XpkCommand::kWorkloadCreate, sub_args);
  }
  if (rest[0] == "list") {
    return parse_sub(list_parser(options), XpkCommand::kWorkloadList, sub_args);
  }
  if (rest[0] == "delete") {
    return parse_sub(delete_parser(options), XpkCommand::kWorkloadDelete, sub_args);
  }
  if (rest[0] == "create-pathways") {
    result.unsupported_text =
        "fleet-xpk: `xpk workload create-pathways` is not simulated by the local fleet.\n";
    return result;
  }
  if (rest[0][0] == '-') {
    result.error_text = error(top_usage(), "xpk", "unrecognized arguments: " + rest[0]);
    return result;
  }
  result.error_text =
      error(workload_usage(), "xpk workload",
            fmt::format("argument xpk_workload_subcommands: invalid choice: '{}' (choose from {})",
                        rest[0], quoted_choices(kWorkloadCommands)));
  return result;
}

}  // namespace falcon::fleet
