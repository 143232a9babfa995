// falcon._falcon: the C++ ClusterFabric and the C++ client of `falcon serve` (FabricClient,
// make_remote_client) for Python (pybind11). The public API is the package
// around it (python/falcon/__init__.py): this module moves the model's values as JSON text
// (model.h's to_json/from_json, so the field names are the spec's in both languages) and
// leaves the Python classes to the package.
//
// Threads and signals: every call that can block (xpk subprocesses, HTTP) runs with the GIL
// released. Callables given to follow/export are called back on the calling thread with the GIL
// held. Between lines and pages, and every ~200 ms of a follow's waits, pending signals are
// checked (PyErr_CheckSignals), so Ctrl-C interrupts a follow or a stream with
// KeyboardInterrupt; a request already in flight finishes first.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "falcon/api_client.h"
#include "falcon/client.h"
#include "falcon/errors.h"
#include "falcon/exit_codes.h"
#include "falcon/fabric.h"
#include "falcon/fence.h"

namespace py = pybind11;
using nlohmann::json;

namespace falcon {
namespace {

template <typename T>
T from_text(const std::string& text, const char* what) {
  try {
    return json::parse(text).get<T>();
  } catch (const json::exception& e) {
    throw std::invalid_argument(std::string("invalid ") + what + ": " + e.what());
  }
}

template <typename T>
std::string to_text(const T& value) {
  json j = value;
  return j.dump();
}

json settings_json(const FabricConfig& c) {
  return json{
      {"source_path", c.source_path},
      {"clusters", c.clusters},
      {"xpk",
       {{"binary", c.xpk.binary},
        {"extra_args", c.xpk.extra_args},
        {"env", c.xpk.env},
        {"namespace_flag", to_string(c.xpk.namespace_flag)},
        {"command_timeout_s", c.xpk.command_timeout_s},
        {"gcloud_binary", c.xpk.gcloud_binary},
        {"state_dir", c.xpk.state_dir}}},
      {"gcp",
       {{"logging_endpoint", c.gcp.logging_endpoint},
        {"storage_endpoint", c.gcp.storage_endpoint},
        {"token_endpoint", c.gcp.token_endpoint},
        {"metadata_host", c.gcp.metadata_host},
        {"access_token_file", c.gcp.access_token_file},
        {"ca_file", c.gcp.ca_file},
        {"logging_reads_per_minute", c.gcp.logging_reads_per_minute},
        {"http_timeout_s", c.gcp.http_timeout_s},
        {"upload_chunk_bytes", c.gcp.upload_chunk_bytes},
        {"log_archive", c.gcp.log_archive},
        {"log_archive_lag_s", c.gcp.log_archive_lag_s},
        {"log_copy", c.gcp.log_copy},
        {"log_copy_staging", c.gcp.log_copy_staging},
        {"log_copy_source", c.gcp.log_copy_source},
        {"log_copy_poll_s", c.gcp.log_copy_poll_s},
        {"log_copy_permission_wait_s", c.gcp.log_copy_permission_wait_s}}},
      {"selection", {{"max_parallel_probes", c.selection.max_parallel_probes}}},
  };
}

// Thrown through the C++ layer when a Python callable raised (or a signal is pending), so that
// the blocking call unwinds at once; the Python exception itself waits in a CallbackErrors.
struct CallbackAborted : std::exception {
  const char* what() const noexcept override { return "a Python callback raised"; }
};

// The first Python exception raised inside callbacks (or by a pending signal) during one call.
// Touched only with the GIL held.
class CallbackErrors {
 public:
  bool pending() const { return error_.has_value(); }
  // Keeps the current Python error (from a callable or PyErr_CheckSignals).
  void keep(py::error_already_set e) {
    if (!error_) error_.emplace(std::move(e));
  }
  // True when a signal handler raised (e.g. KeyboardInterrupt), which is then kept.
  bool check_signals() {
    if (PyErr_CheckSignals() != 0) {
      keep(py::error_already_set());
      return true;
    }
    return false;
  }
  // With the GIL held, after the blocking call: raises the kept exception, if any.
  void rethrow() {
    if (error_) {
      py::error_already_set e = std::move(*error_);
      error_.reset();
      throw e;
    }
  }

 private:
  std::optional<py::error_already_set> error_;
};

// The lines of one rank as a Python iterator: a page is read (GIL released) only when the
// lines before it are used up; close() or dropping the iterator stops reading.
class LogStream {
 public:
  explicit LogStream(LogLines lines) : lines_(std::make_unique<LogLines>(std::move(lines))) {}

  std::string next() {
    std::optional<std::string> line;
    {
      py::gil_scoped_release release;
      std::lock_guard lock(mutex_);
      if (lines_) line = lines_->next();
      if (!line) lines_.reset();
    }
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    if (!line) throw py::stop_iteration();
    return std::move(*line);
  }

  void close() {
    py::gil_scoped_release release;
    std::lock_guard lock(mutex_);
    lines_.reset();
  }

  bool closed() {
    py::gil_scoped_release release;
    std::lock_guard lock(mutex_);
    return lines_ == nullptr;
  }

 private:
  std::mutex mutex_;  // one reader at a time: next() runs without the GIL
  std::unique_ptr<LogLines> lines_;
};

FollowOptions follow_options(double poll_interval_s, double lookback_s, double visibility_s) {
  auto ms = [](double s, const char* name) {
    if (!(s >= 0)) throw std::invalid_argument(std::string(name) + " must be >= 0 seconds");
    return std::chrono::milliseconds(static_cast<std::int64_t>(s * 1000));
  };
  FollowOptions o;
  o.poll_interval = ms(poll_interval_s, "poll_interval");
  o.lookback = ms(lookback_s, "lookback");
  o.visibility_delay = ms(visibility_s, "visibility_delay");
  return o;
}

using LineCallback = std::function<void(const std::string&)>;

// on_line for the C++ layer: calls the Python callable with the GIL; a raise aborts the call.
LineCallback line_callback(const py::function& on_line, CallbackErrors& errors) {
  return [&on_line, &errors](const std::string& line) {
    py::gil_scoped_acquire acquire;
    if (errors.pending()) throw CallbackAborted();
    try {
      on_line(py::str(line));
    } catch (py::error_already_set& e) {
      errors.keep(std::move(e));
      throw CallbackAborted();
    }
  };
}

// A stop predicate: true once a Python error is kept, a signal is pending, or `user()` says so.
std::function<bool()> stop_predicate(const py::object& user, CallbackErrors& errors) {
  return [&user, &errors]() {
    py::gil_scoped_acquire acquire;
    if (errors.pending() || errors.check_signals()) return true;
    if (user.is_none()) return false;
    try {
      return static_cast<bool>(py::bool_(user()));
    } catch (py::error_already_set& e) {
      errors.keep(std::move(e));
      return true;
    }
  };
}

// Runs `fn` without the GIL; a Python exception kept by a callback wins over the
// CallbackAborted (or any error) it caused.
template <typename Fn>
void run_blocking(CallbackErrors& errors, Fn&& fn) {
  try {
    py::gil_scoped_release release;
    fn();
  } catch (const CallbackAborted&) {
    errors.rethrow();
    throw std::logic_error("a callback aborted without a Python exception");
  } catch (...) {
    errors.rethrow();
    throw;
  }
  errors.rethrow();
}

// An export's progress for the C++ layer: `progress` (None: nobody listens) gets a dict per
// rank that changed; a raise in it, or Ctrl-C, aborts the call.
std::function<void(const ExportProgress&)> progress_callback(const py::object& progress,
                                                             CallbackErrors& errors) {
  return [&progress, &errors](const ExportProgress& p) {
    py::gil_scoped_acquire acquire;
    if (errors.pending() || errors.check_signals()) throw CallbackAborted();
    if (progress.is_none()) return;
    try {
      py::dict d;
      d["rank"] = p.rank;
      d["lines"] = p.lines;
      d["bytes"] = p.bytes;
      d["done"] = p.done;
      progress(d);
    } catch (py::error_already_set& e) {
      errors.keep(std::move(e));
      throw CallbackAborted();
    }
  };
}

ExportVia export_via(const std::string& via) {
  const std::optional<ExportVia> parsed = parse_export_via(via);
  if (!parsed) {
    throw py::value_error("via must be 'auto', 'read', 'copy' or 'sink', not '" + via + "'");
  }
  return *parsed;
}

class PyFabric {
 public:
  explicit PyFabric(const std::string& path) {
    py::gil_scoped_release release;
    fabric_ = std::make_unique<ClusterFabric>(path);
  }

  void reload() {
    py::gil_scoped_release release;
    fabric_->reload();
  }
  std::string list_clusters() const { return to_text(fabric_->list_clusters()); }
  std::string get_cluster(const std::string& name) const {
    return to_text(fabric_->get_cluster(name));
  }
  std::string get_cluster_status(const std::string& name) const {
    py::gil_scoped_release release;
    return to_text(fabric_->get_cluster_status(name));
  }
  std::string select_cluster(const std::string& accelerator) const {
    py::gil_scoped_release release;
    return to_text(fabric_->select_cluster(accelerator));
  }
  std::string warm_up() const {
    py::gil_scoped_release release;
    return to_text(fabric_->warm_up());
  }
  std::string submit_workload(const std::string& cluster, const std::string& spec_json) {
    auto spec = from_text<WorkloadSpec>(spec_json, "WorkloadSpec");
    py::gil_scoped_release release;
    return to_text(fabric_->submit_workload(cluster, spec));
  }
  // {"handle", "selection"}: ClusterFabric::select_and_submit.
  std::string select_and_submit(const std::string& spec_json) {
    auto spec = from_text<WorkloadSpec>(spec_json, "WorkloadSpec");
    py::gil_scoped_release release;
    const PlacedWorkload placed = fabric_->select_and_submit(spec);
    return nlohmann::json{{"handle", placed.handle}, {"selection", placed.selection}}.dump();
  }
  std::string get_workload_status(const std::string& handle_json) const {
    auto handle = from_text<WorkloadHandle>(handle_json, "WorkloadHandle");
    py::gil_scoped_release release;
    return to_text(fabric_->get_workload_status(handle));
  }
  bool cancel_workload(const std::string& handle_json) {
    auto handle = from_text<WorkloadHandle>(handle_json, "WorkloadHandle");
    py::gil_scoped_release release;
    return fabric_->cancel_workload(handle);
  }
  std::string list_workloads(const std::string& cluster,
                             const std::optional<std::string>& state_filter) const {
    py::gil_scoped_release release;
    return to_text(fabric_->list_workloads(cluster, state_filter));
  }
  std::string handle_for(const std::string& cluster, const std::string& name) const {
    py::gil_scoped_release release;
    return to_text(fabric_->handle_for(cluster, name));
  }

  std::unique_ptr<LogStream> stream_pod_log(const std::string& handle_json, int rank,
                                            const std::string& filter_json, int slice) const {
    auto handle = from_text<WorkloadHandle>(handle_json, "WorkloadHandle");
    auto filter = from_text<LogFilter>(filter_json, "LogFilter");
    py::gil_scoped_release release;
    return std::make_unique<LogStream>(fabric_->stream_pod_log(handle, rank, filter, slice));
  }

  void follow_pod_log(const std::string& handle_json, int rank, const std::string& filter_json,
                      int slice, double poll_interval_s, double lookback_s,
                      double visibility_delay_s, const py::object& should_stop,
                      const py::function& on_line) const {
    auto handle = from_text<WorkloadHandle>(handle_json, "WorkloadHandle");
    auto filter = from_text<LogFilter>(filter_json, "LogFilter");
    FollowOptions options = follow_options(poll_interval_s, lookback_s, visibility_delay_s);
    CallbackErrors errors;
    options.should_stop = stop_predicate(should_stop, errors);
    const LineCallback lines = line_callback(on_line, errors);
    run_blocking(errors,
                 [&] { fabric_->follow_pod_log(handle, rank, filter, slice, options, lines); });
  }

  void follow_pod_log_until_finished(const std::string& handle_json, int rank,
                                     const std::string& filter_json, int slice,
                                     double poll_interval_s, double lookback_s,
                                     double visibility_delay_s, const py::object& interrupted,
                                     const py::function& on_line) const {
    auto handle = from_text<WorkloadHandle>(handle_json, "WorkloadHandle");
    auto filter = from_text<LogFilter>(filter_json, "LogFilter");
    FollowOptions options = follow_options(poll_interval_s, lookback_s, visibility_delay_s);
    CallbackErrors errors;
    const std::function<bool()> stop = stop_predicate(interrupted, errors);
    const LineCallback lines = line_callback(on_line, errors);
    run_blocking(errors, [&] {
      fabric_->follow_pod_log_until_finished(handle, rank, filter, slice, options, stop, lines);
    });
  }

  std::string export_pod_logs(const std::string& handle_json, const std::string& filter_json,
                              const std::string& gcs_dest, int slice, const py::object& progress,
                              const std::string& via, bool keep_staging) const {
    auto handle = from_text<WorkloadHandle>(handle_json, "WorkloadHandle");
    auto filter = from_text<LogFilter>(filter_json, "LogFilter");
    CallbackErrors errors;
    // A raise in `progress`, or Ctrl-C, aborts the export (its uploads are cancelled).
    const auto on_progress = progress_callback(progress, errors);
    ExportOptions how;
    how.via = export_via(via);
    how.keep_staging = keep_staging;
    // Ctrl-C (or a raise in `progress`) cancels a copy operation and deletes its staged objects.
    how.cancelled = [&errors] {
      py::gil_scoped_acquire acquire;
      return errors.pending() || errors.check_signals();
    };
    std::string out;
    run_blocking(errors, [&] {
      out = to_text(fabric_->export_pod_logs(handle, filter, gcs_dest, slice, how, on_progress));
    });
    return out;
  }

  std::string doctor() const {
    py::gil_scoped_release release;
    return to_text(fabric_->doctor());
  }
  std::string config() const { return settings_json(*fabric_->config()).dump(); }

 private:
  std::unique_ptr<ClusterFabric> fabric_;
};

// The lines of a FabricClient::read_logs as a LogLineSource: a thread runs the read and hands
// lines over a small queue, so that the caller pulls them one by one (LogStream). Dropping it
// stops the read (its `stop` is polled about every 100 ms) and joins the thread.
class PumpedLines final : public LogLineSource {
 public:
  using Read = std::function<void(const std::function<void(const std::string&)>& on_line,
                                  const std::function<bool()>& stop)>;

  explicit PumpedLines(Read read) {
    thread_ = std::thread([this, read = std::move(read)] {
      std::exception_ptr error;
      try {
        read([this](const std::string& line) { push(line); }, [this] { return stopping(); });
      } catch (...) {
        error = std::current_exception();
      }
      std::lock_guard lock(mutex_);
      error_ = error;
      done_ = true;
      changed_.notify_all();
    });
  }

  ~PumpedLines() override {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
      changed_.notify_all();
    }
    thread_.join();
  }

  // Blocks until the first line or the end: a read that fails before its first line throws here.
  void wait_for_start() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [this] { return !lines_.empty() || done_; });
    if (lines_.empty()) rethrow();
  }

  std::optional<std::string> next() override {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [this] { return !lines_.empty() || done_; });
    if (lines_.empty()) {
      rethrow();
      return std::nullopt;
    }
    std::string line = std::move(lines_.front());
    lines_.pop_front();
    changed_.notify_all();
    return line;
  }

 private:
  static constexpr std::size_t kQueuedLines = 4096;

  void push(const std::string& line) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [this] { return lines_.size() < kQueuedLines || stop_; });
    if (!stop_) lines_.push_back(line);
    changed_.notify_all();
  }
  bool stopping() {
    std::lock_guard lock(mutex_);
    return stop_;
  }
  // At the end, with mutex_ held: the read's error, once.
  void rethrow() {
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::string> lines_;
  bool stop_ = false;
  bool done_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

LogRequest log_request(const WorkloadHandle& handle, int rank, const LogFilter& filter, int slice) {
  LogRequest r;
  r.cluster = handle.cluster;
  r.workload = handle.workload_name;
  r.rank = rank;
  r.slice = slice;
  r.since = filter.since;
  r.grep = filter.grep;
  r.tail = filter.tail_lines.value_or(0);
  return r;
}

// falcon.Client's calls through a `falcon serve`: make_remote_client, the CLI's own client.
class PyClient {
 public:
  PyClient(const std::string& url, const std::string& token, double timeout_s,
           const std::string& ca_file) {
    if (!(timeout_s > 0)) throw std::invalid_argument("timeout must be > 0 seconds");
    ApiClientOptions options;
    options.url = url;
    options.token = token;
    const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(timeout_s * 1000));
    options.read_timeout = timeout;
    options.connect_timeout = std::min(options.connect_timeout, timeout);
    options.ca_file = ca_file;
    client_ = make_remote_client(std::move(options));
  }

  std::string list_clusters() const {
    py::gil_scoped_release release;
    return to_text(configs());
  }
  std::string get_cluster(const std::string& name) const {
    py::gil_scoped_release release;
    std::vector<ClusterConfig> all = configs();
    std::vector<std::string> names;
    for (ClusterConfig& c : all) {
      if (c.name == name) return to_text(c);
      names.push_back(c.name);
    }
    throw UnknownClusterError(name, names);
  }
  std::string get_cluster_status(const std::string& name) const {
    py::gil_scoped_release release;
    return to_text(client_->cluster_health(name).probe);
  }
  std::string select_cluster(const std::string& accelerator) const {
    py::gil_scoped_release release;
    return to_text(client_->select({.accelerator_type = accelerator, .explain = true}).selection);
  }
  // {"handle", "selection"}: a named cluster, or (empty) the one selected now.
  std::string submit(const std::string& spec_json, const std::string& cluster) const {
    SubmitRequest request{.spec = from_text<WorkloadSpec>(spec_json, "WorkloadSpec"),
                          .cluster = cluster};
    py::gil_scoped_release release;
    return to_text(client_->submit(request));
  }
  std::string get_workload_status(const std::string& cluster, const std::string& name) const {
    py::gil_scoped_release release;
    return to_text(client_->status(cluster, name));
  }
  bool cancel_workload(const std::string& cluster, const std::string& name) const {
    py::gil_scoped_release release;
    return client_->cancel(cluster, name).cancelled;
  }
  std::string list_workloads(const std::string& cluster,
                             const std::optional<std::string>& state) const {
    py::gil_scoped_release release;
    return to_text(client_->list_workloads(cluster, state));
  }
  std::string handle_for(const std::string& cluster, const std::string& name) const {
    py::gil_scoped_release release;
    return to_text(client_->handle_for(cluster, name));
  }

  std::unique_ptr<LogStream> stream_pod_log(const std::string& handle_json, int rank,
                                            const std::string& filter_json, int slice) const {
    const LogRequest request =
        log_request(from_text<WorkloadHandle>(handle_json, "WorkloadHandle"), rank,
                    from_text<LogFilter>(filter_json, "LogFilter"), slice);
    py::gil_scoped_release release;
    auto source = std::make_unique<PumpedLines>(
        [client = client_, request](const auto& on_line, const auto& stop) {
          client->read_logs(request, on_line, stop);
        });
    source->wait_for_start();
    return std::make_unique<LogStream>(LogLines(std::move(source)));
  }

  void follow_pod_log_until_finished(const std::string& handle_json, int rank,
                                     const std::string& filter_json, int slice,
                                     const py::object& interrupted,
                                     const py::function& on_line) const {
    LogRequest request = log_request(from_text<WorkloadHandle>(handle_json, "WorkloadHandle"), rank,
                                     from_text<LogFilter>(filter_json, "LogFilter"), slice);
    if (request.tail > 0) {
      throw py::value_error("filter.tail_lines is not supported with a follow");
    }
    request.follow = true;
    CallbackErrors errors;
    const std::function<bool()> stop = stop_predicate(interrupted, errors);
    const LineCallback lines = line_callback(on_line, errors);
    run_blocking(errors, [&] { client_->read_logs(request, lines, stop); });
  }

  std::string export_pod_logs(const std::string& handle_json, const std::string& filter_json,
                              const std::string& gcs_dest, int slice, const py::object& progress,
                              const std::string& via, bool keep_staging) const {
    const auto handle = from_text<WorkloadHandle>(handle_json, "WorkloadHandle");
    const auto filter = from_text<LogFilter>(filter_json, "LogFilter");
    ExportRequest request{.cluster = handle.cluster,
                          .workload = handle.workload_name,
                          .dest = gcs_dest,
                          .ranks = filter.ranks,
                          .slice = slice,
                          .since = filter.since,
                          .grep = filter.grep,
                          .via = export_via(via),
                          .keep_staging = keep_staging};
    CallbackErrors errors;
    ExportObserver observer;
    observer.on_progress = progress_callback(progress, errors);
    // Ctrl-C (or a raise in `progress`) stops waiting; the export goes on in the server.
    observer.cancelled = [&errors] {
      py::gil_scoped_acquire acquire;
      return errors.pending() || errors.check_signals();
    };
    std::string out;
    run_blocking(errors, [&] { out = to_text(client_->export_logs(request, observer)); });
    return out;
  }

 private:
  std::vector<ClusterConfig> configs() const {
    std::vector<ClusterConfig> out;
    for (ClusterEntry& e : client_->list_clusters()) out.push_back(std::move(e.config));
    return out;
  }

  std::shared_ptr<FabricClient> client_;
};

void set_python_error(const py::object& exc) {
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
}

// FalconError -> the package's exception class of the same name (falcon/_errors.py), built from
// the message and the error's details (errors.h add_details); a server's other errors ->
// falcon.ServiceError, an unreachable server -> falcon.ServiceUnavailableError.
void translate(std::exception_ptr p) {
  try {
    if (p) std::rethrow_exception(p);
  } catch (const FalconError& e) {
    json details = json::object();
    e.add_details(details);
    if (const auto* store = dynamic_cast<const StateStoreError*>(&e)) {
      details["db_message"] = store->db_message();
    }
    set_python_error(py::module_::import("falcon._errors")
                         .attr("_from_native")(e.type_name(), e.what(), details.dump()));
  } catch (const ApiError& e) {
    // A server's answer the remote client did not type: by its type's name when the package has
    // that class, else a ServiceError (or ValueError for a 400).
    set_python_error(py::module_::import("falcon._errors")
                         .attr("_from_service")(e.status(), e.type(),
                                                e.error().value("message", e.what()),
                                                e.error().dump()));
  } catch (const ApiUnreachableError& e) {
    set_python_error(py::module_::import("falcon._errors").attr("_unreachable")(e.what()));
  }
}

}  // namespace
}  // namespace falcon

PYBIND11_MODULE(_falcon, m) {
  using namespace falcon;
  m.doc() = "The C++ cluster fabric; use the package `falcon`, not this module.";
  m.attr("__version__") = FALCON_VERSION;
  // The type names of the layer's errors (exit_codes.h), so that a test can check that the
  // package has a class for each.
  m.def("_error_types", [] {
    std::vector<std::string> out;
    for (const ErrorAnswer& a : error_answers()) {
      if (a.falcon_error) out.emplace_back(a.type);
    }
    return out;
  });
  py::register_exception_translator(&translate);

  py::class_<LogStream>(m, "LogStream")
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__", &LogStream::next)
      .def("close", &LogStream::close)
      .def_property_readonly("closed", &LogStream::closed);

  py::class_<PyFabric>(m, "Fabric")
      .def(py::init<const std::string&>(), py::arg("config_path"))
      .def("reload", &PyFabric::reload)
      .def("list_clusters", &PyFabric::list_clusters)
      .def("get_cluster", &PyFabric::get_cluster)
      .def("get_cluster_status", &PyFabric::get_cluster_status)
      .def("select_cluster", &PyFabric::select_cluster)
      .def("warm_up", &PyFabric::warm_up)
      .def("submit_workload", &PyFabric::submit_workload)
      .def("select_and_submit", &PyFabric::select_and_submit)
      .def("get_workload_status", &PyFabric::get_workload_status)
      .def("cancel_workload", &PyFabric::cancel_workload)
      .def("list_workloads", &PyFabric::list_workloads)
      .def("handle_for", &PyFabric::handle_for)
      // The stream keeps the fabric alive: its lines are read through the fabric's clients.
      .def("stream_pod_log", &PyFabric::stream_pod_log, py::keep_alive<0, 1>())
      .def("follow_pod_log", &PyFabric::follow_pod_log)
      .def("follow_pod_log_until_finished", &PyFabric::follow_pod_log_until_finished)
      .def("export_pod_logs", &PyFabric::export_pod_logs)
      .def("doctor", &PyFabric::doctor)
      .def("config", &PyFabric::config);

  py::class_<PyClient>(m, "Client")
      .def(py::init<const std::string&, const std::string&, double, const std::string&>(),
           py::arg("url"), py::arg("token"), py::arg("timeout_s"), py::arg("ca_file"))
      .def("list_clusters", &PyClient::list_clusters)
      .def("get_cluster", &PyClient::get_cluster)
      .def("get_cluster_status", &PyClient::get_cluster_status)
      .def("select_cluster", &PyClient::select_cluster)
      .def("submit", &PyClient::submit)
      .def("get_workload_status", &PyClient::get_workload_status)
      .def("cancel_workload", &PyClient::cancel_workload)
      .def("list_workloads", &PyClient::list_workloads)
      .def("handle_for", &PyClient::handle_for)
      .def("stream_pod_log", &PyClient::stream_pod_log)
      .def("follow_pod_log_until_finished", &PyClient::follow_pod_log_until_finished)
      .def("export_pod_logs", &PyClient::export_pod_logs);

  m.def(
      "check_config",
      [](const std::string& path) {
        FabricConfig c;
        {
          py::gil_scoped_release release;
          c = ClusterFabric::check_config(path);
        }
        return settings_json(c).dump();
      },
      py::arg("config_path"));
  // falcon.fence.check(): the epoch the fence object holds, FencedError when newer. Without
  // uri and epoch, the ticket of the environment (0 without one: nothing to check).
  m.def(
      "check_fence",
      [](const std::optional<std::string>& uri, std::optional<std::int64_t> epoch) {
        std::optional<FenceTicket> ticket;
        if (!uri && !epoch) {
          ticket = fence_ticket_from_environment();
        } else if (uri && epoch) {
          ticket = FenceTicket{*uri, *epoch};
        } else {
          throw std::invalid_argument("uri and epoch go together");
        }
        if (!ticket) return std::int64_t{0};
        py::gil_scoped_release release;
        return check_fence(*ticket);
      },
      py::arg("uri") = py::none(), py::arg("epoch") = py::none());
}
