// The OpenAPI 3 document of the API, written by hand so that a test can hold it against the
// routes the server registers (api_server_test: every documented path is a route and every
// route is documented).
#include <nlohmann/json.hpp>

#include "serve/api_server.h"

namespace falcon {
namespace {

constexpr const char* kOpenApi = R"json({
  "openapi": "3.0.3",
  "info": {
    "title": "falcon serve",
    "version": "1",
    "description": "The Falcon cluster layer as a service: clusters with their cached probes, selection, workloads, logs, exports. Errors are {\"error\": {\"type\", \"message\", ...}}. Every route may also answer 405 (another method), 414/431/413 (over a size limit), 415 (a POST without Content-Type: application/json), 421 (a Host that is not this server's), 403 (a state-changing request from another Origin), 429 (over the caller's share, with Retry-After) and 503 (busy, with Retry-After): docs/serve.md#security. docs/serve.md is the guide."
  },
  "components": {
    "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
    "parameters": {
      "cluster": {"name": "cluster", "in": "path", "required": true, "schema": {"type": "string"}},
      "name": {"name": "name", "in": "path", "required": true, "schema": {"type": "string"}},
      "id": {"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}},
      "limit": {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1000}}
    },
    "schemas": {
      "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "object", "required": ["type", "message"], "properties": {"type": {"type": "string"}, "message": {"type": "string"}}}}},
      "ClusterProbeResult": {"type": "object", "properties": {"cluster": {"type": "string"}, "reachable": {"type": "boolean"}, "queue_depth": {"type": "integer", "nullable": true}, "running_count": {"type": "integer", "nullable": true}, "error": {"type": "string", "nullable": true}, "probed_at": {"type": "string"}}},
      "ProbeSnapshot": {"type": "object", "properties": {"result": {"$ref": "#/components/schemas/ClusterProbeResult"}, "backend": {"type": "string"}, "duration_ms": {"type": "integer"}, "age_ms": {"type": "integer"}, "consecutive_failures": {"type": "integer"}, "next_probe_at": {"type": "string", "nullable": true}, "from_cache": {"type": "boolean"}}},
      "WorkloadSpec": {"type": "object", "required": ["name", "docker_image", "command", "accelerator_type"], "additionalProperties": false, "properties": {"name": {"type": "string"}, "docker_image": {"type": "string"}, "command": {"type": "array", "items": {"type": "string"}}, "accelerator_type": {"type": "string"}, "priority": {"type": "string"}, "env": {"type": "object", "additionalProperties": {"type": "string"}}, "namespace": {"type": "string", "nullable": true}, "extra_args": {"type": "array", "items": {"type": "string"}}}},
      "WorkloadHandle": {"type": "object", "properties": {"workload_name": {"type": "string"}, "cluster": {"type": "string"}, "namespace": {"type": "string"}, "submitted_at": {"type": "string"}}}
    }
  },
  "security": [{"bearer": []}],
  "paths": {
    "/healthz": {"get": {"summary": "The process is up", "security": [], "responses": {"200": {"description": "ok"}}}},
    "/readyz": {"get": {"summary": "Every cluster has a cached probe and the state store takes writes", "security": [], "responses": {"200": {"description": "ready"}, "503": {"description": "not yet, stopping, or the state store's last write failed (the reason in the message)"}}}},
    "/": {"get": {"summary": "The dashboard (HTML; its data calls carry the bearer token the user enters)", "security": [], "responses": {"200": {"description": "the dashboard's page", "content": {"text/html": {}}}, "304": {"description": "unchanged (If-None-Match)"}}}},
    "/ui/{path}": {"get": {"summary": "The dashboard's scripts and styles, compiled into the binary; ETag and Cache-Control: no-cache", "security": [], "parameters": [{"name": "path", "in": "path", "required": true, "schema": {"type": "string"}}], "responses": {"200": {"description": "the file"}, "304": {"description": "unchanged (If-None-Match)"}, "404": {"description": "no such file"}}}},
    "/metrics": {"get": {"summary": "Prometheus text format", "responses": {"200": {"description": "metrics", "content": {"text/plain": {}}}}}},
    "/v1/openapi.json": {"get": {"summary": "This document", "responses": {"200": {"description": "OpenAPI 3"}}}},
    "/v1/whoami": {"get": {"summary": "Whether this server needs a bearer token, and the role of the caller's (read, operate, or null for a missing or unknown token; operate when none is needed). Needs no token itself", "security": [], "responses": {"200": {"description": "role, tokens_required, token (valid, missing, unknown, none)"}}}},
    "/v1/config": {"get": {"summary": "The configuration in force: source path, content hash, loaded_at, reloads and failed reloads", "responses": {"200": {"description": "config"}}}},
    "/v1/clusters": {"get": {"summary": "Every cluster with its cached probe and its age, and its circuit breakers", "responses": {"200": {"description": "clusters"}}}},
    "/v1/clusters/{name}": {"get": {"summary": "One cluster, its cached probe, its circuit breakers and its probe history", "parameters": [{"$ref": "#/components/parameters/name"}, {"name": "since", "in": "query", "description": "RFC 3339 or an age (90s, 30m, 6h, 2d); default 1h", "schema": {"type": "string"}}, {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 100000}}, {"name": "fresh", "in": "query", "description": "true: a probe no older than serve.max_probe_age_s, probed now if the cached one is older", "schema": {"type": "boolean"}}], "responses": {"200": {"description": "cluster, its probe, its circuit breakers and its probe history"}, "404": {"description": "unknown cluster"}}}},
    "/v1/select": {"post": {"summary": "Select a cluster for an accelerator type, from probes no older than serve.max_probe_age_s", "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["accelerator_type"], "additionalProperties": false, "properties": {"accelerator_type": {"type": "string"}, "explain": {"type": "boolean", "description": "true: decided afresh and answered with its explanation; default false: brief, and possibly a repeat of the standing decision on unchanged inputs (same_as names it; selection_id is that decision's own, or with serve.record_repeats a recorded repeat's; serve.select_reuse_ms)"}}}}}}, "responses": {"200": {"description": "brief: the chosen cluster, selection_id, reason, policy, every candidate's probe age (probe_age_ms: {cluster: ms}), the candidates probed now (probed_now) and those unreachable (unreachable), same_as and the explanation's path; with explain: also every candidate's probe and age and the explanation: the policy and per candidate (scores) each signal, weight, contribution and verdict"}, "503": {"description": "no available cluster"}}}},
    "/v1/selections": {"get": {"summary": "Recent decisions, newest first, each explained (limit at most 100; the answer stops short of serve.limits.max_answer_bytes with truncated: true); summary=true: without the explanations (selection_id, accelerator, selected_cluster, decided_at, policy, reason, same_as; limit at most 1000)", "parameters": [{"$ref": "#/components/parameters/limit"}, {"name": "accelerator", "in": "query", "schema": {"type": "string"}}, {"name": "summary", "in": "query", "schema": {"type": "boolean"}}], "responses": {"200": {"description": "selections"}}}},
    "/v1/selections/{id}": {"get": {"summary": "One decision, explained: the policy and each candidate's signals, weights, contributions and verdict (scores); the input of falcon cluster select --replay", "parameters": [{"$ref": "#/components/parameters/id"}], "responses": {"200": {"description": "selection"}, "404": {"description": "unknown id"}}}},
    "/v1/workloads": {
      "get": {"summary": "Submissions from the state store (filters, cursor pagination), or live=true: what each cluster's xpk lists now", "parameters": [{"name": "cluster", "in": "query", "schema": {"type": "string"}}, {"name": "state", "in": "query", "schema": {"type": "string"}}, {"name": "name", "in": "query", "description": "substring of the workload name", "schema": {"type": "string"}}, {"name": "from", "in": "query", "schema": {"type": "string"}}, {"name": "before", "in": "query", "schema": {"type": "string"}}, {"$ref": "#/components/parameters/limit"}, {"name": "cursor", "in": "query", "schema": {"type": "string"}}, {"name": "total", "in": "query", "description": "true: also answer total, the number of matching submissions on every page", "schema": {"type": "boolean"}}, {"name": "live", "in": "query", "schema": {"type": "boolean"}}], "responses": {"200": {"description": "workloads"}}},
      "post": {"summary": "Submit a workload to a cluster (or to the selected one when cluster is absent)", "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["spec"], "additionalProperties": false, "properties": {"cluster": {"type": "string"}, "selection_id": {"type": "integer", "minimum": 1, "description": "with cluster: the recorded decision that chose it, kept with the submission"}, "spec": {"$ref": "#/components/schemas/WorkloadSpec"}, "managed": {"type": "object", "description": "hand the workload to the supervisor (docs/self-healing.md); absent fields take the server's supervisor.* defaults; the name must be at most 36 characters", "additionalProperties": false, "properties": {"max_recoveries": {"type": "integer", "minimum": 0}, "stable_after_s": {"type": "number", "minimum": 0}, "recover_on_failure": {"type": "boolean"}}}}}}}}, "responses": {"201": {"description": "the handle; without cluster also the selection and its selection_id; with managed, the managed options"}, "400": {"description": "invalid spec"}, "409": {"description": "the workload exists"}, "502": {"description": "xpk failed"}}}
    },
    "/v1/workloads/{cluster}/{name}": {
      "get": {"summary": "A workload's status (asks xpk), its recorded events and its recorded deletes", "parameters": [{"$ref": "#/components/parameters/cluster"}, {"$ref": "#/components/parameters/name"}], "responses": {"200": {"description": "status"}, "404": {"description": "unknown cluster or workload"}}},
      "delete": {"summary": "Cancel a workload", "parameters": [{"$ref": "#/components/parameters/cluster"}, {"$ref": "#/components/parameters/name"}], "responses": {"200": {"description": "cancelled"}, "404": {"description": "unknown cluster or workload"}}}
    },
    "/v1/workloads/{cluster}/{name}/handle": {"get": {"summary": "The workload's handle from falcon's submission record (namespace, submission time), without asking xpk; the cluster's default namespace and an empty submitted_at for a workload falcon did not submit", "parameters": [{"$ref": "#/components/parameters/cluster"}, {"$ref": "#/components/parameters/name"}], "responses": {"200": {"description": "{handle}"}, "404": {"description": "unknown cluster"}}}},
    "/v1/workloads/{cluster}/{name}/events": {"get": {"summary": "The workload's observed state changes", "parameters": [{"$ref": "#/components/parameters/cluster"}, {"$ref": "#/components/parameters/name"}, {"name": "limit", "in": "query", "schema": {"type": "integer"}}], "responses": {"200": {"description": "events"}}}},
    "/v1/workloads/{cluster}/{name}/logs": {"get": {"summary": "One rank's log lines, text/plain one line per line (or text/event-stream with Accept: text/event-stream or format=sse); follow=true streams until the workload finished", "parameters": [{"$ref": "#/components/parameters/cluster"}, {"$ref": "#/components/parameters/name"}, {"name": "rank", "in": "query", "schema": {"type": "integer", "minimum": 0}}, {"name": "slice", "in": "query", "schema": {"type": "integer", "minimum": 0}}, {"name": "tail", "in": "query", "schema": {"type": "integer", "minimum": 1}}, {"name": "since", "in": "query", "schema": {"type": "string"}}, {"name": "grep", "in": "query", "schema": {"type": "string"}}, {"name": "follow", "in": "query", "schema": {"type": "boolean"}}, {"name": "format", "in": "query", "schema": {"type": "string", "enum": ["text", "sse"]}}], "responses": {"200": {"description": "lines", "content": {"text/plain": {}, "text/event-stream": {}}}, "502": {"description": "Cloud Logging failed"}}}},
    "/v1/managed": {"get": {"summary": "Managed workloads: name, current incarnation, its cluster, state (submitting, starting, running, recovering, completed, failed, gave_up, cancelled), recovery phase and recoveries started", "parameters": [{"name": "state", "in": "query", "schema": {"type": "string"}}], "responses": {"200": {"description": "{managed: [{name, incarnation, cluster, state, phase, recoveries, ...}]}"}, "400": {"description": "an unknown state"}}}},
    "/v1/recoveries": {"get": {"summary": "Recovery incidents, newest first: kind, cause, from/to cluster, replacement, the SVRT phase times (RFC 3339, null until reached), svrt_s and phases {detection_s, decision_s, submit_s, admission_s, stability_s}, outcome", "parameters": [{"name": "workload", "in": "query", "description": "a managed workload's name", "schema": {"type": "string"}}, {"$ref": "#/components/parameters/limit"}], "responses": {"200": {"description": "{recoveries: [...]}"}}}},
    "/v1/exports": {
      "get": {"summary": "Recent exports, newest first", "parameters": [{"$ref": "#/components/parameters/limit"}, {"name": "workload", "in": "query", "schema": {"type": "string"}}], "responses": {"200": {"description": "exports"}}},
      "post": {"summary": "Start archiving a workload's logs to GCS in the background; progress in GET /v1/exports/{id}", "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["cluster", "workload", "dest"], "additionalProperties": false, "properties": {"cluster": {"type": "string"}, "workload": {"type": "string"}, "dest": {"type": "string"}, "ranks": {"type": "array", "items": {"type": "integer"}}, "slice": {"type": "integer"}, "since": {"type": "string"}, "grep": {"type": "string"}}}}}}, "responses": {"202": {"description": "its id and state: running, or queued with its queue_position when serve.limits.max_exports run already"}, "400": {"description": "a bad field, or a rank the workload does not have"}, "429": {"description": "serve.limits.max_queued_exports wait already (Retry-After)"}}}
    },
    "/v1/exports/{id}": {"get": {"summary": "An export's state (queued with its queue_position, running, done, failed), progress and result", "parameters": [{"$ref": "#/components/parameters/id"}], "responses": {"200": {"description": "export"}, "404": {"description": "unknown id"}}}}
  }
})json";

}  // namespace

const nlohmann::json& ApiServer::openapi() {
  static const nlohmann::json document = nlohmann::json::parse(kOpenApi);
  return document;
}

}  // namespace falcon
