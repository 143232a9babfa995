#include "fleet/fake_xpk.h"

#include <httplib.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <istream>
#include <map>
#include <ostream>
#include <regex>
#include <thread>

#include <fmt/format.h>

#include "fleet/fleet_config.h"
#include "fleet/fleet_control.h"
#include "fleet/kubeconfig.h"
#include "fleet/pod_logs.h"
#include "fleet/xpk_args.h"
#include "fleet/xpk_output.h"

namespace falcon::fleet {
namespace {

constexpr const char* kConnectionRefused =
    "The connection to the server localhost:8080 was refused - did you specify the right host "
    "or port?\n";
constexpr const char* kPythonPrefix = "/usr/local/lib/python3.11/site-packages/xpk";

std::string zone_to_region(const std::string& zone) {
  const auto dash = zone.rfind('-');
  if (dash != std::string::npos && zone.size() - dash == 2) return zone.substr(0, dash);
  return zone;
}

std::string random_tail(std::uint64_t seed, std::size_t n) {
  static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyz0123456789_";
  std::string out;
  std::uint64_t bits = mix64(seed);
  for (std::size_t i = 0; i < n; ++i) {
    out += kChars[bits % 37];
    bits = bits / 37 ^ mix64(bits + i);
  }
  return out;
}

std::string traceback(const std::string& frames, const std::string& error) {
  return "Traceback (most recent call last):\n"
         "  File \"/usr/local/bin/xpk\", line 8, in <module>\n"
         "    sys.exit(main())\n"
         "             ^^^^^^\n" +
         fmt::format("  File \"{}/main.py\", line 80, in main\n", kPythonPrefix) +
         "    main_args.func(main_args)\n" + frames + error + "\n";
}

// A cluster as kubectl will reach it (from the current kubeconfig context).
struct Target {
  std::string project;
  std::string zone;
  std::string cluster;
  nlohmann::json ref() const {
    return {{"project", project}, {"zone", zone}, {"cluster", cluster}};
  }
};

struct Credentials {
  bool found = false;
  std::string location;
  std::optional<Target> target;  // nullopt: kubectl has no usable context
};

class Session {
 public:
  Session(const XpkArgs& args, const XpkProfile& profile, FleetApi& api, const FakeXpkEnv& env)
      : a_(args), profile_(profile), api_(api), env_(env) {}

  int run() {
    xpk("Starting xpk " + profile_.version);
    switch (a_.command) {
      case XpkCommand::kVersion:
        xpk("xpk_version: " + profile_.version);
        xpk("XPK Done.");
        return 0;
      case XpkCommand::kWorkloadList:
        return list();
      case XpkCommand::kWorkloadCreate:
        return create();
      case XpkCommand::kWorkloadDelete:
        return remove();
    }
    return 1;
  }

 private:
  void xpk(const std::string& text) { env_.out << "[XPK] " << text << "\n" << std::flush; }

  int fail(int rc) {
    xpk(fmt::format("XPK failed, error code {}", rc));
    return rc;
  }

  int clean() {
    xpk("Exiting XPK cleanly");
    return 0;
  }

  void task(const std::string& name, const std::string& command) {
    if (a_.dry_run) {
      xpk(fmt::format(
          "Task: `{}` is implemented by the following command not running since it is a dry "
          "run. \n{}",
          name, command));
    } else {
      xpk(fmt::format("Task: `{}` is implemented by `{}`", name, command));
    }
  }

  void hidden_failure(const std::string& name, int rc, const std::string& output) {
    xpk(fmt::format("Task: `{}` terminated with ERROR `{}`, printing logs", name, rc));
    xpk(std::string(80, '*'));
    xpk(python_bytes_repr(output));
    xpk(std::string(80, '*'));
  }

  // The start of a streamed kubectl step; the \r progress line stays open for kubectl's text.
  void streamed(const std::string& name, const std::string& command) {
    if (a_.dry_run) {
      task(name, command);
      return;
    }
    xpk(fmt::format("Task: `{}` is implemented by `{}`, streaming output live.", name, command));
    if (profile_.progress_lines) {
      env_.out << "[XPK] Waiting for `" << name << "`, for 0 seconds...\r" << std::flush;
    }
  }

  void validate_dependencies(bool crane) {
    if (a_.skip_validation || a_.dry_run) return;
    task("Validate KUBECTL installation.", "kubectl --help");
    task("Validate GCLOUD installation.", "gcloud version");
    if (crane) task("Validate CRANE installation.", "crane --help");
  }

  // gcloud config fallbacks for --project and --zone; false after printing sys.exit's message.
  bool resolve_project_and_zone() {
    if (a_.project) {
      project_ = *a_.project;
    } else if (auto p = env_.getenv("CLOUDSDK_CORE_PROJECT"); p && !p->empty()) {
      project_ = *p;
    } else {
      env_.err << "You must specify the project in the project flag or set it with 'gcloud "
                  "config set project <project>'\n";
      return false;
    }
    if (a_.zone) {
      zone_ = *a_.zone;
    } else if (auto z = env_.getenv("CLOUDSDK_COMPUTE_ZONE"); z && !z->empty()) {
      zone_ = *z;
    } else {
      env_.err << "You must specify the zone in the zone flag or set it with 'gcloud config "
                  "set compute/zone <zone>'\n";
      return false;
    }
    xpk(fmt::format("Working on {} and {}", project_, zone_));
    return true;
  }

  std::optional<std::string> kubeconfig_path() const {
    auto k = env_.getenv("KUBECONFIG");
    if (!k || k->empty()) return std::nullopt;
    return k->substr(0, k->find(':'));
  }

  // xpk's get_cluster_credentials, then which cluster kubectl will talk to.
  Credentials credentials(const char* kind) {
    Credentials out;
    task("Find cluster region or zone",
         fmt::format("gcloud container clusters list --project={} --filter=name={} "
                     "--format=\"value(location)\"",
                     project_, a_.cluster));
    const std::optional<std::string> kubeconfig = kubeconfig_path();
    nlohmann::json body = {{"project", project_}, {"zone", zone_}, {"cluster", a_.cluster}};
    if (kubeconfig) body["kubeconfig"] = *kubeconfig;
    const nlohmann::json cred =
        a_.dry_run ? nlohmann::json{{"found", false}} : api_.call("credentials", body);
    // xpk 1.13's get_cluster_location: the cluster at --zone when there is one there, else at
    // the zone's region. So a zonal cluster is reached only through its own zone (a region as
    // --zone gets gcloud's 404), a regional one through its region or any zone of it.
    const std::string at = cred.value("location", zone_);
    out.location = cred.value("found", false) && at == zone_ ? zone_ : zone_to_region(zone_);
    out.found = cred.value("found", false) && at == out.location;
    const std::string get_task = "get-credentials-dns-endpoint to cluster " + a_.cluster;
    const auto get_credentials = [&](bool dns, bool first) {
      task(get_task,
           fmt::format("gcloud container clusters get-credentials {} --location={} {} "
                       "--project={} && kubectl config view && kubectl config set-context "
                       "--current --namespace=default",
                       a_.cluster, out.location, dns ? "--dns-endpoint" : "", project_));
      if (a_.dry_run) return true;
      if (!out.found) {
        hidden_failure(get_task, 1,
                       fmt::format("Fetching cluster endpoint and auth data.\nERROR: "
                                   "(gcloud.container.clusters.get-credentials) ResponseError: "
                                   "code=404, message=Not found: "
                                   "projects/{}/locations/{}/clusters/{}.\n",
                                   project_, out.location, a_.cluster));
        return false;
      }
      if (first) {
        const int ms = cred["latency_ms"].value(kind, 0);
        if (ms > 0) env_.sleep(std::chrono::milliseconds(ms));
      }
      if (kubeconfig) {
        try {
          const auto ctx = parse_gke_context(cred.value("context", ""));
          if (ctx) {
            write_gke_kubeconfig(
                *kubeconfig, *ctx, cred.value("server", ""),
                kubeconfig_rewrite_gap(env_.getenv("FLEET_KUBECONFIG_REWRITE_MS")));
          }
        } catch (const std::exception& e) {
          hidden_failure(get_task, 1,
                         fmt::format("ERROR: (gcloud.container.clusters.get-credentials) Unable "
                                     "to write file [{}]: {}\n",
                                     *kubeconfig, e.what()));
          return false;
        }
      }
      xpk(fmt::format("Task: `{}` succeeded.", get_task));
      return true;
    };
    bool ok = get_credentials(true, true);
    bool valid = false;
    if (ok) {
      task("Test kubectl credentials", "kubectl get pods");
      if (a_.dry_run || !cred.value("unreachable", false)) {
        if (!a_.dry_run) xpk("Task: `Test kubectl credentials` succeeded.");
        valid = true;
      } else {
        hidden_failure("Test kubectl credentials", 1, cred.value("error", ""));
      }
    }
    if (!ok || !valid) {
      xpk("Detected error. Retrying without --dns-endpoint flag...");
      ok = get_credentials(false, false);
    }
    if (ok) xpk("Finished get-credentials and kubectl setup.");
    // Which cluster kubectl reaches: the kubeconfig's current context, whatever wrote it.
    if (kubeconfig) {
      if (auto current = read_current_context(*kubeconfig)) {
        if (auto ctx = parse_gke_context(*current)) {
          out.target = Target{ctx->project, ctx->location, ctx->cluster_id};
        }
      }
    } else if (out.found) {
      out.target = Target{project_, zone_, a_.cluster};
    }
    return out;
  }

  std::optional<bool> prompt(const std::string& question, const std::string& frames) {
    for (;;) {
      env_.out << "[XPK] " << question << " (y/N): " << std::flush;
      std::string answer;
      if (!std::getline(env_.in, answer)) {
        env_.err << traceback(frames, "EOFError: EOF when reading a line") << std::flush;
        return std::nullopt;
      }
      std::string lower;
      for (char c : answer) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (lower.empty() || lower == "n" || lower == "no") return false;
      if (lower == "y" || lower == "yes") return true;
      xpk("Invalid input. Please enter: yes/no/y/n.");
    }
  }

  std::string consent_frames(const char* function, int line) const {
    return fmt::format(
        "  File \"{}/commands/workload.py\", line {}, in {}\n"
        "    if not ask_for_user_consent(\n"
        "           ^^^^^^^^^^^^^^^^^^^^^\n"
        "  File \"{}/utils/console.py\", line 62, in ask_for_user_consent\n"
        "    user_input = input(prompt) or default_option\n"
        "                 ^^^^^^^^^^^^^\n",
        kPythonPrefix, line, function, kPythonPrefix);
  }

  // --- workload list -------------------------------------------------------------------------

  std::string list_task() const {
    std::string t = "List Jobs with filter-by-status=" + a_.filter_by_status;
    if (a_.filter_by_job) t += " with filter-by-job=" + *a_.filter_by_job;
    return t;
  }

  std::string list_command() const {
    if (profile_.table_style == TableStyle::kV19) {
      return "kubectl get workloads --ignore-not-found -o=json";
    }
    return "kubectl get workloads --ignore-not-found -o=custom-columns=\"Jobset "
           "Name:.metadata.ownerReferences[0].name,Created "
           "Time:.metadata.creationTimestamp,Priority:.spec.priorityClassName,TPU VMs "
           "Needed:.spec.podSets[0].count,TPU VMs "
           "Running/Ran:.status.admission.podSetAssignments[-1].count,TPU VMs "
           "Done:.status.reclaimablePods[0].count,Status:.status.conditions[-1].type,Status "
           "Message:.status.conditions[-1].message,Status "
           "Time:.status.conditions[-1].lastTransitionTime\" | awk -e 'NR == 1 || {print $0}'";
  }

  // kubectl get workloads against `target`; nullopt after printing the failure.
  std::optional<std::vector<WorkloadRow>> fetch_rows(const std::optional<Target>& target,
                                                     const std::string& task_name) {
    nlohmann::json answer;
    if (!target) {
      answer = {{"failure", {{"stderr", kConnectionRefused}, {"exit_code", 1}}}};
    } else {
      answer = api_.call("workloads:list", target->ref());
    }
    if (answer.contains("failure") && !answer["failure"].is_null()) {
      const int rc = answer["failure"].value("exit_code", 1);
      env_.out << captured_failure(task_name, rc, answer["failure"].value("stderr", ""));
      xpk(fmt::format("List Job request returned ERROR {}", rc));
      return std::nullopt;
    }
    std::vector<WorkloadRow> rows;
    const auto get_int = [](const nlohmann::json& v) -> std::optional<int> {
      if (v.is_number_integer()) return v.get<int>();
      return std::nullopt;
    };
    const auto get_str = [](const nlohmann::json& v) -> std::optional<std::string> {
      if (v.is_string()) return v.get<std::string>();
      return std::nullopt;
    };
    for (const auto& r : answer.value("rows", nlohmann::json::array())) {
      WorkloadRow row;
      row.name = r.value("name", "");
      row.namespace_ = r.value("namespace", "default");
      row.created = r.value("created", "");
      row.priority = r.value("priority", "");
      row.vms_needed = get_int(r["vms_needed"]);
      row.vms_running = get_int(r["vms_running"]);
      row.vms_done = get_int(r["vms_done"]);
      row.status = get_str(r["status"]);
      row.message = get_str(r["message"]);
      row.status_time = get_str(r["status_time"]);
      row.state = r.value("state", "");
      if (!matches_status_filter(row, a_.filter_by_status)) continue;
      if (a_.filter_by_job &&
          !matches_job_filter(row, *a_.filter_by_job, profile_.filter_by_substring())) {
        continue;
      }
      rows.push_back(std::move(row));
    }
    return rows;
  }

  void print_table(const std::vector<WorkloadRow>& rows) {
    env_.out << "[XPK] Workload List Output:\n"
             << render_workload_table(rows, profile_.table_style) << "\n"
             << std::flush;
  }

  int list() {
    validate_dependencies(false);
    xpk("Starting workload list");
    if (!resolve_project_and_zone()) return 1;
    const Credentials cred = credentials("list");
    task(list_task(), list_command());
    if (a_.dry_run) {
      print_table({});
    } else {
      auto rows = fetch_rows(cred.target, list_task());
      if (!rows) return fail(1);
      if (a_.wait_for_job_completion) return wait_for(cred, *rows);
      print_table(*rows);
    }
    xpk("See your workloads in Cloud Console: "
        "https://console.cloud.google.com/kubernetes/aiml/deployments/jobs?project=" +
        project_);
    return clean();
  }

  int wait_for(const Credentials& cred, std::vector<WorkloadRow> rows) {
    const std::string name = *a_.wait_for_job_completion;
    const auto find = [&](const std::vector<WorkloadRow>& rs) -> const WorkloadRow* {
      for (const auto& r : rs) {
        if (r.name == name) return &r;
      }
      return nullptr;
    };
    if (!find(rows)) {
      xpk(fmt::format("Workload named {} does not exist.", name));
      return fail(1);
    }
    const std::string full = fmt::format("jobset-{}-{}", name, random_tail(hash_string(name), 5));
    const long long timeout = a_.timeout.value_or(-1);
    const std::string wait_task =
        fmt::format("Wait for workload to finish with timeout of {}s", timeout);
    task(wait_task, fmt::format("kubectl wait --for=condition=Finished workload {} --timeout={}s",
                                full, timeout));
    long long waited = 0;
    for (;;) {
      const WorkloadRow* row = find(rows);
      if (!row) {
        xpk(fmt::format("Workload named {} does not exist.", name));
        return fail(1);
      }
      if (row->status == std::optional<std::string>("Finished")) {
        xpk(fmt::format("Task: `{}` terminated with code `0`", wait_task));
        const bool failed = row->state == "FAILED";
        xpk(fmt::format("Your workload finished with status: {}", failed ? "Failed" : "Completed"));
        if (failed) return fail(125);
        print_table({*row});
        return clean();
      }
      if (timeout >= 0 && waited >= timeout) {
        xpk(fmt::format("Task: `{}` terminated with code `1`", wait_task));
        xpk(fmt::format("Timed out waiting for your workload after {} seconds", timeout));
        return fail(124);
      }
      if (profile_.progress_lines) {
        env_.out << fmt::format("[XPK] Waiting for `{}`, for {} seconds...\r", wait_task, waited)
                 << std::flush;
      }
      env_.sleep(std::chrono::seconds(1));
      ++waited;
      auto next = fetch_rows(cred.target, list_task());
      if (!next) return fail(1);
      rows = std::move(*next);
    }
  }

  // --- workload create -----------------------------------------------------------------------

  // --env / --env-file as xpk's parse_env_config reads them; nullopt after a traceback.
  std::optional<std::map<std::string, std::string>> container_env() {
    std::map<std::string, std::string> env;
    static const std::regex kKey("[a-zA-Z_][a-zA-Z0-9_]*");
    const std::string frames = fmt::format(
        "  File \"{}/commands/workload.py\", line 412, in workload_create\n"
        "    container_env = get_env_container(args, system)\n"
        "                    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
        "  File \"{}/core/docker_resources.py\", line 233, in parse_env_config\n",
        kPythonPrefix, kPythonPrefix);
    const auto add = [&](const std::string& item, const std::string& source_line) {
      const auto eq = item.find('=');
      const std::string key = item.substr(0, eq);
      std::string value;
      if (eq == std::string::npos) {
        if (!a_.env_file) return false;
        auto local = env_.getenv(key);
        if (!local) return false;
        value = *local;
      } else {
        value = item.substr(eq + 1);
      }
      if (!std::regex_match(key, kKey)) return false;
      (void)source_line;
      env[key] = value;
      return true;
    };
    if (a_.env_file) {
      std::ifstream in(*a_.env_file);
      if (!in) {
        env_.err << traceback(frames + "    with open(file_path, 'r', encoding='utf-8') as file:\n",
                              fmt::format("FileNotFoundError: [Errno 2] No such file or "
                                          "directory: '{}'",
                                          *a_.env_file));
        return std::nullopt;
      }
      env_.out << "Setting container environment from " << *a_.env_file << "\n";
      std::string line;
      while (std::getline(in, line)) {
        const auto start = line.find_first_not_of(" \t");
        if (start == std::string::npos || line[start] == '#') continue;
        const auto end = line.find_last_not_of(" \t\r");
        if (!add(line.substr(start, end - start + 1), line)) {
          env_.err << traceback(frames + "    assert match, f'Invalid env line: {line}'\n",
                                "AssertionError: Invalid env line: " + line);
          return std::nullopt;
        }
      }
    }
    for (const auto& item : a_.env) {
      if (!add(item, item)) {
        env_.err << traceback(frames + "    assert match, f'Invalid env: {item}'\n",
                              "AssertionError: Invalid env: " + item);
        return std::nullopt;
      }
    }
    return env;
  }

  int create() {
    validate_dependencies(true);
    if (a_.docker_image && (a_.script_dir || a_.base_docker_image != "python:3.10")) {
      xpk("`--base-docker-image` and `--script-dir` can not be used with `--docker-image`.");
      return fail(1);
    }
    if (!resolve_project_and_zone()) return 1;
    const Credentials cred = credentials("create");
    if (!a_.project_number && !a_.dry_run) {
      xpk(fmt::format("Project number for project: {} is {}", project_,
                      100000000000ULL + hash_string(project_) % 900000000000ULL));
    }
    if (!a_.dry_run) {
      xpk("Creating a new service account: xpk-sa");
      xpk("Service account: xpk-sa already exists. Skipping its creation");
      xpk("Attempting to create Role: pod-reader in namespace: default");
      xpk("Role: pod-reader already exists. Skipping its creation.");
      for (const char* sa : {"default", "xpk-sa"}) {
        xpk(
            fmt::format("Attempting to create RoleBinding: {}-pod-reader-binding for Service "
                        "Account: xpk-sa to Role: pod-reader in namespace: default",
                        sa));
        xpk(
            fmt::format("RoleBinding: {}-pod-reader-binding already exists. Skipping its "
                        "creation.",
                        sa));
      }
    }
    const std::string workload = *a_.workload;
    const std::string device = a_.tpu_type ? *a_.tpu_type : *a_.device_type;
    const std::string ns = a_.namespace_.value_or("default");
    const std::string exists_task = "Check if Workload Already Exists";
    task(exists_task,
         "kubectl get workloads -o=custom-columns='Jobset:.metadata.ownerReferences[0].name'");
    bool overwrite = false;
    bool has_capacity = true;
    if (!a_.dry_run) {
      nlohmann::json got;
      if (!cred.target) {
        got = {{"failure", {{"stderr", kConnectionRefused}, {"exit_code", 1}}}};
      } else {
        nlohmann::json body = cred.target->ref();
        body["workload"] = workload;
        body["namespace"] = ns;
        body["device_type"] = device;
        got = api_.call("workloads:get", body);
      }
      if (got.contains("failure") && !got["failure"].is_null()) {
        env_.out << captured_failure(exists_task, got["failure"].value("exit_code", 1),
                                     got["failure"].value("stderr", ""));
        return fail(1);
      }
      has_capacity = got.value("has_capacity", true);
      if (got.value("exists", false)) {
        const std::string refuse = fmt::format(
            "{} already exists, XPK will not create this workload. Please pick a new workload "
            "name",
            workload);
        if (!profile_.prompts_on_duplicate()) {
          xpk(refuse);
          return fail(1);
        }
        if (a_.quiet) {
          overwrite = true;
        } else {
          const auto yes =
              prompt(fmt::format("{} already exists, do you want to overwrite it?", workload),
                     consent_frames("workload_create", 346));
          if (!yes) return 1;
          if (!*yes) {
            xpk(refuse);
            return fail(1);
          }
          xpk(fmt::format("Deleting {} to overwrite it...", workload));
          overwrite = true;
        }
      }
    }
    for (const char* map : {"resources", "metadata"}) {
      task(
          "GKE Cluster Get ConfigMap",
          fmt::format("kubectl get configmap {}-{}-configmap -o=custom-columns=\"ConfigData:data\" "
                      "--no-headers=true",
                      a_.cluster, map));
    }
    if (a_.dry_run) {
      xpk("Skipping workload scheduling validation in dry run.");
    } else if (!has_capacity) {
      xpk(
          fmt::format("Workload scheduling validation failed. XPK will not create the workload "
                      "{}.",
                      workload));
      return fail(1);
    }
    xpk("Starting workload create");
    const auto env = container_env();
    if (!env) return 1;
    xpk("No gcsfuse Storages to add detected");
    xpk("No gcp filestore instances to add detected.");
    xpk("No gcp parallelstore instances to add detected.");
    xpk("No gce persistent disk instances to add detected.");
    xpk("No managed lustre instances to add detected.");
    std::string image;
    if (a_.docker_image) {
      image = *a_.docker_image;
    } else {
      const std::string dir = a_.script_dir.value_or(env_.getenv("PWD").value_or("."));
      const std::string archive = random_tail(hash_string(workload + dir), 16);
      const std::string user = env_.getenv("USER").value_or("root");
      image = fmt::format("gcr.io/{}/{}-runner:{}", project_, user,
                          random_tail(hash_string(workload), 4));
      xpk(fmt::format("Adding {} to container image archive {}", dir, archive));
      task("Upload Container Image",
           fmt::format("crane mutate {} --append {} --platform linux/amd64 --tag {} --workdir "
                       "/app",
                       a_.base_docker_image, archive, image));
      xpk(fmt::format("Deleting container image archive {}", archive));
    }
    const std::string manifest = "/tmp/tmp" + random_tail(hash_string(workload + project_), 8);
    const std::string apply_task = "Creating Workload";
    streamed(apply_task, "kubectl apply -f " + manifest);
    if (!a_.dry_run) {
      int rc = 0;
      std::string kubectl_err;
      std::string kubectl_out;
      bool quoted_value = false;
      for (const auto& [k, v] : *env) {
        quoted_value =
            quoted_value || v.find('"') != std::string::npos || v.find('\\') != std::string::npos;
      }
      if (quoted_value) {
        // xpk pastes values into `value: "{value}"` unescaped; kubectl cannot read the result.
        rc = 1;
        kubectl_err = fmt::format(
            "error: error parsing {}: error converting YAML to JSON: yaml: "
            "line 58: did not find expected key\n",
            manifest);
      } else if (!cred.target) {
        rc = 1;
        kubectl_err = kConnectionRefused;
      } else {
        nlohmann::json body = cred.target->ref();
        body.update({{"overwrite", overwrite},
                     {"workload", workload},
                     {"device_type", device},
                     {"tpu_type_flag", a_.tpu_type.has_value()},
                     {"num_slices", a_.num_slices},
                     {"num_nodes", a_.num_nodes},
                     {"priority", a_.priority},
                     {"command", a_.command_text},
                     {"docker_image", image},
                     {"docker_name", a_.docker_name},
                     {"namespace", ns},
                     {"env", *env},
                     {"ttl_seconds_after_finished", a_.ttl_seconds_after_finished}});
        const nlohmann::json created = api_.call("workloads:create", body);
        if (created.contains("failure") && !created["failure"].is_null()) {
          rc = created["failure"].value("exit_code", 1);
          kubectl_err = created["failure"].value("stderr", "");
        } else {
          const std::string result = created.value("result", "");
          if (result == "exists") {
            kubectl_out = fmt::format("jobset.jobset.x-k8s.io/{} unchanged\n", workload);
          } else if (result == "no_capacity") {
            rc = 1;
            kubectl_err = fmt::format(
                "Error from server (Forbidden): error when creating \"{}\": admission webhook "
                "denied the request: no node pool for {}\n",
                manifest, device);
          } else {
            kubectl_out = fmt::format("jobset.jobset.x-k8s.io/{} created\n", workload);
          }
        }
      }
      env_.out << kubectl_out << std::flush;
      env_.err << kubectl_err << std::flush;
      xpk(fmt::format("Task: `{}` terminated with code `{}`", apply_task, rc));
      if (rc != 0) {
        xpk(fmt::format("Create Workload request returned ERROR {}", rc));
        return fail(rc);
      }
    }
    const std::string location = cred.found ? cred.location : zone_to_region(zone_);
    if (a_.tpu_type || (a_.device_type && device.rfind("tpu", 0) == 0)) {
      task("GKE Dashboard List",
           fmt::format("gcloud monitoring dashboards list --project={} --filter=\"displayName:'GKE "
                       "- TPU Monitoring Dashboard'\" --format=\"value(name)\" --verbosity=error",
                       project_));
      xpk(
          fmt::format("Check statistics and outlier mode of GKE metrics here: "
                      "https://console.cloud.google.com/monitoring/dashboards/builder/"
                      "0?project={}&f.rlabel.cluster_name.ClusterName={}. To view the metric "
                      "data for your workload, select {} from the JobName filter on the "
                      "dashboard.",
                      project_, a_.cluster, workload));
    }
    xpk(
        fmt::format("Follow your workload here: "
                    "https://console.cloud.google.com/kubernetes/service/{}/{}/{}/{}/"
                    "details?project={}",
                    location, a_.cluster, ns, workload, project_));
    xpk(fmt::format(
        "Follow your worker 0, slice 0 logs here: Adjust the pod name "
        "([prefix]-slice-job-[slice_number]-[worker_number]) after clicking the url if you want "
        "other worker logs. "
        "https://console.cloud.google.com/logs/"
        "query;query=resource.type%3D%22k8s_container%22%0Aresource.labels.project_id%3D%22{}%"
        "22%0Aresource.labels.location%3D%22{}%22%0Aresource.labels.cluster_name%3D%22{}%22%"
        "0Aresource.labels.namespace_name%3D%22{}%22%0Aresource.labels.pod_name%3A%22{}-slice-"
        "job-0-0-%22%0Aseverity%3E%3DDEFAULT;storageScope=project;duration=P1D?project={}",
        project_, location, a_.cluster, ns, workload, project_));
    return clean();
  }

  // --- workload delete -----------------------------------------------------------------------

  // kubectl delete jobset; prints kubectl's text; returns its exit code.
  int delete_one(const std::optional<Target>& target, const std::string& workload) {
    if (a_.dry_run) return 0;
    if (!target) {
      env_.err << kConnectionRefused << std::flush;
      return 1;
    }
    nlohmann::json body = target->ref();
    body["workload"] = workload;
    const nlohmann::json answer = api_.call("workloads:delete", body);
    if (answer.contains("failure") && !answer["failure"].is_null()) {
      env_.err << answer["failure"].value("stderr", "") << std::flush;
      return answer["failure"].value("exit_code", 1);
    }
    if (!answer.value("deleted", false)) {
      env_.err << fmt::format(
                      "Error from server (NotFound): jobsets.jobset.x-k8s.io \"{}\" not "
                      "found\n",
                      workload)
               << std::flush;
      return 1;
    }
    env_.out << fmt::format("jobset.jobset.x-k8s.io \"{}\" deleted\n", workload) << std::flush;
    return 0;
  }

  void pathways_check() {
    task(fmt::format("Check if PathwaysJob is installed on {}", a_.cluster),
         "kubectl get pods -n pathways-job-system --no-headers -o "
         "custom-columns=NAME:.metadata.name");
    if (a_.dry_run) {
      xpk("check_if_pathways_job_is_installed 0 0");
      return;
    }
    xpk("check_if_pathways_job_is_installed 0 ");
    xpk("You are using a new version of XPK, which uses PathwaysJob for Pathways workloads. "
        "PathwaysJob is not installed on this cluster, so Pathways workloads cannot be deleted "
        "with it.");
  }

  int remove() {
    validate_dependencies(false);
    xpk("Starting Workload delete");
    if (!resolve_project_and_zone()) return 1;
    const Credentials cred = credentials("delete");
    std::vector<std::string> names;
    if (a_.workload) {
      names.push_back(*a_.workload);
    } else {
      task(list_task(), list_command());
      if (!a_.dry_run) {
        auto rows = fetch_rows(cred.target, list_task());
        if (!rows) return fail(1);
        for (const auto& r : *rows) names.push_back(r.name);
      }
      if (names.empty()) {
        xpk("There are no workloads to delete matching the filter in the cluster.");
        return clean();
      }
      if (!a_.quiet && !a_.force) {
        std::string list;
        for (const auto& n : names) list += (list.empty() ? "'" : ", '") + n + "'";
        const auto yes = prompt(fmt::format("Planning to delete {} workloads in the cluster {} "
                                            "including [{}]. \nDo you wish to delete?",
                                            names.size(), a_.cluster, list),
                                consent_frames("workload_delete", 684));
        if (!yes) return 1;
        if (!*yes) {
          xpk("Skipping delete command.");
          return clean();
        }
      }
    }
    pathways_check();
    const std::string delete_task = "Delete Workload";
    if (names.size() == 1) {
      streamed(delete_task, fmt::format("kubectl delete jobset {} -n default", names.front()));
      const int rc = delete_one(cred.target, names.front());
      if (!a_.dry_run) xpk(fmt::format("Task: `{}` terminated with code `{}`", delete_task, rc));
      if (rc != 0) {
        xpk(fmt::format("Delete Workload request returned ERROR {}", rc));
        return fail(rc);
      }
      return clean();
    }
    xpk(fmt::format("Breaking up a total of {} commands into 1 batches", names.size()));
    if (a_.dry_run) {
      xpk("Pretending all the jobs succeeded");
      return clean();
    }
    xpk("Dispatching batch 0/1");
    int worst = 0;
    std::size_t done = 0;
    for (const auto& name : names) {
      worst = std::max(worst, delete_one(cred.target, name));
      ++done;
    }
    xpk(fmt::format("[t=0.00, {}] Completed {}/{}", delete_task, done, names.size()));
    if (worst != 0) {
      xpk(fmt::format("Delete Workload request returned ERROR {}", worst));
      return fail(worst);
    }
    return clean();
  }

  const XpkArgs& a_;
  const XpkProfile& profile_;
  FleetApi& api_;
  const FakeXpkEnv& env_;
  std::string project_;
  std::string zone_;
};

XpkProfile profile_from(const nlohmann::json& j) {
  XpkProfile p;
  p.version = j.value("version", p.version);
  p.table_style =
      j.value("table_style", std::string("v1.9")) == "v1.7" ? TableStyle::kV17 : TableStyle::kV19;
  p.supports_namespace = j.value("supports_namespace", false);
  p.progress_lines = j.value("progress_lines", true);
  return p;
}

}  // namespace

std::unique_ptr<FleetApi> fleet_api_from_environment() {
  const char* url = std::getenv("FALCON_FLEET_URL");
  if (url == nullptr || *url == '\0') return nullptr;
  return std::make_unique<HttpFleetApi>(url);
}

FakeXpkEnv process_env() {
  return FakeXpkEnv{std::cout, std::cerr, std::cin,
                    [](const std::string& name) -> std::optional<std::string> {
                      const char* value = std::getenv(name.c_str());
                      if (value == nullptr) return std::nullopt;
                      return std::string(value);
                    },
                    [](std::chrono::milliseconds d) { std::this_thread::sleep_for(d); }};
}

HttpFleetApi::HttpFleetApi(std::string base_url) : base_url_(std::move(base_url)) {
  while (!base_url_.empty() && base_url_.back() == '/') base_url_.pop_back();
}

nlohmann::json HttpFleetApi::call(const std::string& route, const nlohmann::json& body) {
  httplib::Client client(base_url_);
  client.set_connection_timeout(std::chrono::seconds(5));
  client.set_read_timeout(std::chrono::seconds(120));
  const auto res = client.Post("/fleet/v1/" + route, body.dump(), "application/json");
  if (!res) {
    throw FleetApiError(fmt::format("cannot reach the local fleet at {} ({})", base_url_,
                                    httplib::to_string(res.error())));
  }
  nlohmann::json answer = nlohmann::json::parse(res->body, nullptr, false);
  if (res->status != 200 || answer.is_discarded()) {
    std::string message = res->body;
    if (!answer.is_discarded() && answer.contains("error")) {
      message = answer["error"].value("message", message);
    }
    throw FleetApiError(fmt::format("the local fleet at {} answered {} to {}: {}", base_url_,
                                    res->status, route, message));
  }
  return answer;
}

nlohmann::json LocalFleetApi::call(const std::string& route, const nlohmann::json& body) {
  try {
    return control_.handle(route, body);
  } catch (const ControlError& e) {
    throw FleetApiError(
        fmt::format("the local fleet answered {} to {}: {}", e.status(), route, e.what()));
  }
}

int run_fake_xpk(const std::vector<std::string>& args, FleetApi* api, const FakeXpkEnv& env) {
  std::optional<XpkProfile> profile;
  std::string fleet_problem;
  if (!api) {
    fleet_problem =
        "FALCON_FLEET_URL is not set. Start the local fleet (falcon-fleet --fleet "
        "examples/local-fleet.yaml) and set FALCON_FLEET_URL to the URL it prints.";
  } else {
    try {
      profile = profile_from(api->call("xpk", nlohmann::json::object()));
    } catch (const FleetApiError& e) {
      fleet_problem = e.what();
    }
  }
  XpkParseOptions options;
  options.supports_namespace = profile && profile->supports_namespace;
  options.dependency_auto_download_flag = env.getenv("DEPENDENCY_AUTO_DOWNLOAD") != "false";
  const XpkParse parsed = parse_xpk_args(args, options);
  if (parsed.error_text) {
    env.err << *parsed.error_text << std::flush;
    return 2;
  }
  if (parsed.help_text) {
    env.out << *parsed.help_text << std::flush;
    return 0;
  }
  if (parsed.unsupported_text) {
    env.err << *parsed.unsupported_text << std::flush;
    return 1;
  }
  if (!profile) {
    env.out << "[XPK] fleet-xpk: " << fleet_problem << "\n[XPK] XPK failed, error code 1\n"
            << std::flush;
    env.err << "fleet-xpk: " << fleet_problem << "\n" << std::flush;
    return 1;
  }
  try {
    Session session(*parsed.args, *profile, *api, env);
    return session.run();
  } catch (const FleetApiError& e) {
    env.out << "\n[XPK] fleet-xpk: " << e.what() << "\n[XPK] XPK failed, error code 1\n"
            << std::flush;
    env.err << "fleet-xpk: " << e.what() << "\n" << std::flush;
    return 1;
  }
}

}  // namespace falcon::fleet
