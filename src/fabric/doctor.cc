// `falcon doctor`: checks a machine against what the layer needs (README "Running it for real")
// and says, per item, what is missing and how to fix it.
#include <fmt/format.h>

#include <functional>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "fabric/fabric_impl.h"
#include "falcon/errors.h"
#include "falcon/gcs_uri.h"
#include "gcp/credentials.h"
#include "gcp/endpoints.h"
#include "gcp/logging_admin_client.h"
#include "gcp/logging_client.h"
#include "gcp/storage_client.h"
#include "logs/export_paths.h"
#include "process/bounded_parallel.h"
#include "util/time_format.h"

namespace falcon {

void to_json(nlohmann::json& j, const DoctorCheck& v) {
  j = nlohmann::json{{"name", v.name},
                     {"status", v.status},
                     {"detail", v.detail},
                     {"fix", v.fix.empty() ? nlohmann::json(nullptr) : nlohmann::json(v.fix)}};
}

namespace {

constexpr std::chrono::seconds kToolTimeout{60};

DoctorCheck ok(std::string name, std::string detail) {
  return {std::move(name), "ok", std::move(detail), ""};
}
DoctorCheck fail(std::string name, std::string detail, std::string fix) {
  return {std::move(name), "fail", std::move(detail), std::move(fix)};
}
DoctorCheck warn(std::string name, std::string detail, std::string fix) {
  return {std::move(name), "warn", std::move(detail), std::move(fix)};
}

std::string first_line(const std::string& text) {
  const auto start = text.find_first_not_of(" \r\n");
  if (start == std::string::npos) return "";
  const auto end = text.find_first_of("\r\n", start);
  return text.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

// Runs `argv` and returns its output, or a failure description.
struct ToolRun {
  bool ran = false;
  CommandResult result;
  std::string error;
};

ToolRun run_tool(CommandRunner& runner, std::vector<std::string> argv,
                 const std::map<std::string, std::string>& env) {
  ToolRun run;
  try {
    run.result = runner.run({.argv = std::move(argv), .env = env, .timeout = kToolTimeout});
    run.ran = true;
  } catch (const std::exception& e) {
    run.error = e.what();
  }
  return run;
}

DoctorCheck check_xpk(CommandRunner& runner, const XpkSettings& xpk) {
  const ToolRun run = run_tool(runner, {xpk.binary, "version"}, xpk.env);
  const std::string fix =
      "install xpk (python3 -m venv ~/xpk && ~/xpk/bin/pip install xpk) and set xpk.binary in "
      "repos.yaml to its path";
  if (!run.ran) return fail("xpk", run.error, fix);
  const std::string out = run.result.stdout_text + run.result.stderr_text;
  static const std::regex kVersion(R"((?:xpk_version:|Starting xpk)\s+v?([0-9][0-9A-Za-z.\-+]*))");
  std::smatch m;
  if (!run.result.ok()) {
    return fail("xpk",
                fmt::format("'{} version' exited with {}: {}", xpk.binary, run.result.exit_code,
                            first_line(out)),
                fix);
  }
  if (!std::regex_search(out, m, kVersion)) {
    return warn("xpk", fmt::format("'{} version' printed no version", xpk.binary),
                "check that xpk.binary is the xpk CLI");
  }
  return ok("xpk", fmt::format("{} (version {})", xpk.binary, m[1].str()));
}

DoctorCheck check_gcloud(CommandRunner& runner, const XpkSettings& xpk) {
  const ToolRun run = run_tool(runner, {xpk.gcloud_binary, "version"}, xpk.env);
  const std::string fix =
      "install the Google Cloud SDK (https://cloud.google.com/sdk/docs/install); xpk needs gcloud "
      "to fetch cluster credentials";
  if (!run.ran) return fail("gcloud", run.error, fix);
  if (!run.result.ok()) {
    return fail("gcloud",
                fmt::format("'{} version' failed: {}", xpk.gcloud_binary,
                            first_line(run.result.stderr_text)),
                fix);
  }
  return ok("gcloud", first_line(run.result.stdout_text));
}

// kubectl and the GKE auth plugin: xpk (>= 1.7) downloads kubectl itself, and the plugin is only
// needed by kubectl against real GKE clusters, so their absence is a warning.
DoctorCheck check_optional_tool(CommandRunner& runner, const std::string& name,
                                std::vector<std::string> argv, const std::string& fix) {
  const ToolRun run = run_tool(runner, std::move(argv), {});
  if (!run.ran) return warn(name, run.error, fix);
  if (!run.result.ok()) {
    return warn(name,
                fmt::format("exited with {}: {}", run.result.exit_code,
                            first_line(run.result.stderr_text + run.result.stdout_text)),
                fix);
  }
  return ok(name, first_line(run.result.stdout_text + run.result.stderr_text));
}

// Runs one call of a Google client and turns its outcome into a check: `ok_detail` on success,
// else the client's error with `permission_fix` for a 401/403 and `not_found_fix` (when given)
// for a 404.
DoctorCheck check_endpoint(const std::string& name, const std::string& ok_detail,
                           const std::string& permission_fix, const std::function<void()>& call,
                           const std::string& not_found_fix = "") {
  try {
    call();
    return ok(name, ok_detail);
  } catch (const LogRetrievalError& e) {
    if (e.http_status() == 404 && !not_found_fix.empty())
      return fail(name, e.what(), not_found_fix);
    return fail(name, e.what(),
                e.http_status() == 401 || e.http_status() == 403
                    ? permission_fix
                    : "check the endpoint configuration (gcp: in repos.yaml) and network access");
  } catch (const std::exception& e) {
    return fail(name, e.what(),
                "check the endpoint configuration (gcp: in repos.yaml), network access and "
                "credentials");
  }
}

// Doctor asks once and reports what it sees: no retries, no waiting out a quota.
gcp::RetryPolicy single_attempt(const GcpSettings& gcp) {
  gcp::RetryPolicy policy;
  policy.max_attempts = 1;
  policy.deadline = std::chrono::seconds(gcp.http_timeout_s);
  return policy;
}

// The binaries xpk needs, in the order doctor prints them.
void check_tools(CommandRunner& runner, const XpkSettings& xpk, std::vector<DoctorCheck>& checks) {
  checks.push_back(check_xpk(runner, xpk));
  checks.push_back(check_gcloud(runner, xpk));
  checks.push_back(check_optional_tool(
      runner, "kubectl", {"kubectl", "version", "--client"},
      "xpk >= 1.7 downloads kubectl itself; otherwise install it (apt-get install kubectl from "
      "the Google Cloud SDK repository)"));
  checks.push_back(
      check_optional_tool(runner, "gke-gcloud-auth-plugin", {"gke-gcloud-auth-plugin", "--version"},
                          "gcloud components install gke-gcloud-auth-plugin (or apt-get install "
                          "google-cloud-cli-gke-gcloud-auth-plugin); kubectl needs it for GKE"));
}

// Which credential source resolves, and that it hands out a token (never printed). Null when
// none does; the endpoint checks then send no Authorization header.
std::shared_ptr<gcp::Credentials> check_credentials(const FabricConfig& config,
                                                    const gcp::Environment& env,
                                                    const FabricDependencies& deps,
                                                    std::vector<DoctorCheck>& checks) {
  try {
    auto source = gcp::find_default_token_source(config.gcp, env, deps.http, deps.clock);
    auto credentials = std::make_shared<gcp::Credentials>(std::move(source), deps.clock);
    credentials->token();
    checks.push_back(ok("credentials", credentials->description()));
    return credentials;
  } catch (const std::exception& e) {
    checks.push_back(
        fail("credentials", e.what(),
             "on GKE use Workload Identity; on a VM attach a service account; on a laptop run "
             "`gcloud auth application-default login`; or set GOOGLE_APPLICATION_CREDENTIALS to a "
             "service-account key"));
    return nullptr;
  }
}

// One entries:list of a page of one entry in the first cluster's project.
DoctorCheck check_logging(const FabricConfig& config, const gcp::GcpEndpoints& endpoints,
                          const FabricDependencies& deps,
                          std::shared_ptr<gcp::Credentials> credentials) {
  const ClusterConfig& first = config.clusters.front();
  const gcp::LoggingClient logging(
      {.endpoint = endpoints.logging,
       .http = deps.http,
       .credentials = std::move(credentials),
       .clock = deps.clock,
       .reads_per_minute = config.gcp.logging_reads_per_minute,
       .retry = single_attempt(config.gcp),
       .request_timeout = std::chrono::seconds(config.gcp.http_timeout_s)});
  gcp::ListLogEntriesRequest request;
  request.resource_names = {"projects/" + first.project};
  request.filter =
      fmt::format("timestamp>=\"{}\"", format_iso8601(deps.clock->now() - std::chrono::minutes(1)));
  request.page_size = 1;
  return check_endpoint(
      "logging", fmt::format("{}/v2/entries:list answered", endpoints.logging),
      fmt::format("grant roles/logging.viewer (Logs Viewer) on project {} to this identity",
                  first.project),
      [&] { (void)logging.list_entries_page(request); });
}

// A list of at most one object in every bucket the clusters export to.
void check_buckets(const FabricConfig& config, const gcp::GcpEndpoints& endpoints,
                   const FabricDependencies& deps, std::shared_ptr<gcp::Credentials> credentials,
                   std::vector<DoctorCheck>& checks) {
  const gcp::StorageClient storage(
      {.endpoint = endpoints.storage,
       .http = deps.http,
       .credentials = std::move(credentials),
       .clock = deps.clock,
       .retry = single_attempt(config.gcp),
       .request_timeout = std::chrono::seconds(config.gcp.http_timeout_s)});
  std::set<std::string> buckets;
  for (const auto& c : config.clusters) {
    if (!c.gcs_bucket.empty()) buckets.insert(parse_gcs_uri(c.gcs_bucket).bucket);
  }
  for (const auto& bucket : buckets) {
    checks.push_back(check_endpoint(
        "storage gs://" + bucket,
        fmt::format("{}/storage/v1/b/{}/o answered", endpoints.storage, bucket),
        fmt::format("grant roles/storage.objectAdmin (Storage Object Admin) on gs://{} to this "
                    "identity",
                    bucket),
        [&] { (void)storage.list_objects(bucket, "", 1); },
        fmt::format("the bucket does not exist (or is in another project): create it "
                    "(gcloud storage buckets create gs://{}) or correct gcs_bucket in repos.yaml",
                    bucket)));
  }
}

// The export paths past the read quota (docs/log-export.md): for each cluster's project, that
// entries:copy can copy its log bucket (no CMEK) into gcp.log_copy_staging (the project's Logging
// service account may create objects there); and that gcp.log_archive can be listed.
void check_export_paths(const FabricConfig& config, const gcp::GcpEndpoints& endpoints,
                        const FabricDependencies& deps,
                        std::shared_ptr<gcp::Credentials> credentials,
                        std::vector<DoctorCheck>& checks) {
  const GcpSettings& s = config.gcp;
  const gcp::StorageClient storage({.endpoint = endpoints.storage,
                                    .http = deps.http,
                                    .credentials = credentials,
                                    .clock = deps.clock,
                                    .retry = single_attempt(s),
                                    .request_timeout = std::chrono::seconds(s.http_timeout_s)});
  const gcp::LoggingAdminClient admin({.endpoint = endpoints.logging,
                                       .http = deps.http,
                                       .credentials = credentials,
                                       .clock = deps.clock,
                                       .retry = single_attempt(s),
                                       .request_timeout = std::chrono::seconds(s.http_timeout_s)});
  if (s.log_copy && s.log_copy_staging.empty()) {
    checks.push_back(fail("log copy", "gcp.log_copy is true but gcp.log_copy_staging is not set",
                          "set gcp.log_copy_staging: gs://BUCKET/PREFIX, the bucket entries:copy "
                          "writes to (docs/log-export.md)"));
  }
  if (!s.log_copy_staging.empty()) {
    const GcsUri staging = parse_gcs_uri(s.log_copy_staging);
    std::set<std::string> projects;
    for (const auto& c : config.clusters) projects.insert(c.project);
    const auto slash = s.log_copy_source.find('/');
    for (const std::string& project : projects) {
      const std::string name = "log copy " + project;
      const std::string source =
          fmt::format("projects/{}/locations/{}/buckets/{}", project,
                      s.log_copy_source.substr(0, slash), s.log_copy_source.substr(slash + 1));
      try {
        const gcp::LogBucketInfo bucket = admin.get_log_bucket(source);
        if (!bucket.kms_key_name.empty()) {
          checks.push_back(fail(name,
                                fmt::format("{} is encrypted with the customer-managed key {}: "
                                            "entries:copy cannot copy it",
                                            source, bucket.kms_key_name),
                                "export this project's logs with --via read, or from a sink "
                                "archive (gcp.log_archive, --via sink)"));
          continue;
        }
      } catch (const LogRetrievalError& e) {
        if (e.http_status() == 404) {
          checks.push_back(fail(name, e.what(),
                                "set gcp.log_copy_source to LOCATION/BUCKET_ID of the log bucket "
                                "holding the clusters' logs"));
          continue;
        }
        checks.push_back(warn(name, fmt::format("cannot read {}: {}", source, e.what()),
                              fmt::format("grant roles/logging.viewer on project {} to this "
                                          "identity to check for CMEK",
                                          project)));
        continue;
      }
      try {
        const std::string account = admin.logging_service_account(project);
        const std::string member = "serviceAccount:" + account;
        bool may = false;
        for (const auto& b : storage.get_bucket_iam_bindings(staging.bucket)) {
          if (!gcp::role_creates_objects(b.role)) continue;
          for (const auto& m : b.members) may = may || m == member;
        }
        if (!may) {
          checks.push_back(
              fail(name,
                   fmt::format("entries:copy writes as {}, which may not create objects in gs://{}",
                               account, staging.bucket),
                   logs::grant_command(staging.bucket, member)));
        } else {
          checks.push_back(ok(name, fmt::format("entries:copy from {} into {} (writer {})", source,
                                                s.log_copy_staging, account)));
        }
      } catch (const LogRetrievalError& e) {
        checks.push_back(
            warn(name, fmt::format("cannot check the staging bucket's IAM policy: {}", e.what()),
                 fmt::format("grant storage.buckets.getIamPolicy on gs://{} to this "
                             "identity; else a copy waiting for permissions tells",
                             staging.bucket)));
      }
    }
  }
  if (!s.log_archive.empty()) {
    const GcsUri archive = parse_gcs_uri(s.log_archive);
    std::string prefix = archive.object;
    if (!prefix.empty() && prefix.back() != '/') prefix += '/';
    try {
      const bool any = !storage.list_objects(archive.bucket, prefix + "stdout/", 1).empty();
      if (any) {
        checks.push_back(ok("log archive", fmt::format("{} holds a sink's hourly stdout files "
                                                       "(complete after gcp.log_archive_lag_s: "
                                                       "{} s)",
                                                       s.log_archive, s.log_archive_lag_s)));
      } else {
        checks.push_back(warn(
            "log archive", fmt::format("{} has no stdout/ files yet", s.log_archive),
            fmt::format("route the clusters' logs to it with a Log Router sink (gcloud logging "
                        "sinks create falcon-archive storage.googleapis.com/{} "
                        "--log-filter='resource.type=\"k8s_container\"' --project=PROJECT) "
                        "and grant its writer identity roles/storage.objectCreator; files "
                        "arrive hourly, 2-3 hours late",
                        archive.bucket)));
      }
    } catch (const LogRetrievalError& e) {
      checks.push_back(fail("log archive", e.what(),
                            fmt::format("grant roles/storage.objectViewer on gs://{} to this "
                                        "identity, or fix gcp.log_archive",
                                        archive.bucket)));
    }
  }
}

// Every cluster, probed in parallel on the selector's bound, reported in file order.
void check_clusters(const FabricConfig& config, const ClusterProber& prober,
                    std::vector<DoctorCheck>& checks) {
  std::vector<ClusterProbeResult> probes(config.clusters.size());
  run_bounded_parallel(probes.size(), config.selection.max_parallel_probes, [&](std::size_t i) {
    try {
      probes[i] = prober.probe(config.clusters[i]);
    } catch (const std::exception& e) {
      probes[i].cluster = config.clusters[i].name;
      probes[i].error = e.what();
    }
  });
  for (std::size_t i = 0; i < probes.size(); ++i) {
    checks.push_back(cluster_check(config.clusters[i], probes[i]));
  }
}

}  // namespace

DoctorCheck cluster_check(const ClusterConfig& c, const ClusterProbeResult& r) {
  const std::string name = "cluster " + c.name;
  if (r.reachable) {
    const std::string counts = fmt::format("reachable: {} queued, {} running",
                                           r.queue_depth.value_or(0), r.running_count.value_or(0));
    if (r.capacity_error) {
      return warn(name, fmt::format("{}; capacity not known: {}", counts, *r.capacity_error),
                  fmt::format("grant get and list on kueue.x-k8s.io clusterqueues in cluster {} "
                              "to this identity (docs/deployment.md), so that selection can "
                              "count its free chips",
                              c.cluster_id));
    }
    return ok(name, counts);
  }
  return fail(
      name, r.error.value_or("unreachable"),
      fmt::format("check that cluster {} exists in {} / {} (gcloud container clusters describe "
                  "{} --project={} --location={}) and that this identity has "
                  "roles/container.developer and roles/compute.viewer on {}",
                  c.cluster_id, c.project, c.gke_location(), c.cluster_id, c.project,
                  c.gke_location(), c.project));
}

std::vector<DoctorCheck> ClusterFabric::doctor() const {
  const auto m = impl_->current();
  const FabricConfig& config = *m->config;
  const FabricDependencies& deps = impl_->deps;
  std::vector<DoctorCheck> checks;
  checks.push_back(
      ok("config", fmt::format("{} clusters from {}", config.clusters.size(), config.source_path)));
  check_tools(*deps.runner, config.xpk, checks);
  const gcp::Environment env = gcp::current_environment();
  const auto credentials = check_credentials(config, env, deps, checks);
  const gcp::GcpEndpoints endpoints = gcp::resolve_endpoints(config.gcp, env);
  if (!config.clusters.empty())
    checks.push_back(check_logging(config, endpoints, deps, credentials));
  check_buckets(config, endpoints, deps, credentials, checks);
  check_export_paths(config, endpoints, deps, credentials, checks);
  check_clusters(config, *m->prober, checks);
  return checks;
}

}  // namespace falcon
