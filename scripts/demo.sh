#!/usr/bin/env bash
# The main job, end to end, against the local fleet: what `make demo` runs.
#
#   scripts/demo.sh [--no-wait] [BUILD_DIR]   (default build/release-werror; `make demo` builds it)
#
# Starts the fleet (examples/local-fleet.yaml) on a port the OS chooses, points the layer at it
# (examples/local-repos.yaml and the environment the fleet writes to its --env-file), then
# drives the falcon CLI through the spec's business flow: list clusters, warm up their
# credentials, select, submit, poll to completion, tail rank 0, export every rank's log, show the
# objects and collection_meta.json.
# Then the same layer as a service: starts `falcon serve` on the fleet, selects twice through it
# with `falcon --server` (the second answer from its probe cache, with each probe's age), shows
# the recorded decision from the API, prints the dashboard's URL and keeps the server up until
# Enter is pressed (not with --no-wait, nor when stdin is not a terminal), then stops it with
# SIGTERM. Stops the fleet on exit.
set -euo pipefail

wait_for_enter=1
if [[ "${1:-}" == "--no-wait" ]]; then
  wait_for_enter=0
  shift
fi
[[ -t 0 ]] || wait_for_enter=0

root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build/release-werror}" && pwd)
bin="$build/bin"
for exe in falcon falcon-fleet fleet-xpk fleet-gcloud; do
  [[ -x "$bin/$exe" ]] || { echo "demo: $bin/$exe is missing; run 'make build'" >&2; exit 1; }
done

work=$(mktemp -d /tmp/falcon-demo.XXXXXX)
fleet_pid=""
serve_pid=""
cleanup() {
  if [[ -n "$serve_pid" ]] && kill -0 "$serve_pid" 2>/dev/null; then
    kill -TERM "$serve_pid" 2>/dev/null || true
    wait "$serve_pid" 2>/dev/null || true
  fi
  if [[ -n "$fleet_pid" ]] && kill -0 "$fleet_pid" 2>/dev/null; then
    kill -TERM "$fleet_pid" 2>/dev/null || true
    wait "$fleet_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

bold=$'\e[1m'; dim=$'\e[2m'; reset=$'\e[0m'
[[ -t 1 ]] || { bold=""; dim=""; reset=""; }
say() { printf '\n%s== %s%s\n' "$bold" "$*" "$reset"; }
# Prints the command as a shell would read it back (each argument quoted when it needs to be),
# so that it can be copied, then runs it.
run() {
  local shown=() arg
  for arg in "$@"; do
    if [[ "$arg" =~ ^[A-Za-z0-9_./:=,@%+-]+$ ]]; then shown+=("$arg"); else shown+=("'${arg//\'/\'\\\'\'}'"); fi
  done
  printf '%s$ %s%s\n' "$dim" "${shown[*]}" "$reset"
  "$@"
}
json_field() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(eval("d"+sys.argv[1]))' "$1"; }

say "Starting the local fleet (4 simulated GKE clusters, Cloud Logging, Cloud Storage, OAuth)"
"$bin/falcon-fleet" --fleet "$root/examples/local-fleet.yaml" --port 0 \
  --repos-file "$root/examples/local-repos.yaml" --ready-file "$work/ready.json" \
  --env-file "$work/fleet.env" --token-file "$work/token" >"$work/fleet.log" 2>&1 &
fleet_pid=$!
for _ in $(seq 1 200); do
  [[ -s "$work/ready.json" ]] && break
  kill -0 "$fleet_pid" 2>/dev/null || { cat "$work/fleet.log" >&2; exit 1; }
  sleep 0.05
done
[[ -s "$work/ready.json" ]] || { echo "demo: the fleet did not start" >&2; cat "$work/fleet.log" >&2; exit 1; }
url=$(json_field '["url"]' <"$work/ready.json")
echo "fleet listening on $url (pid $fleet_pid)"

# PATH (the build's bin/ first: fleet-xpk, fleet-gcloud, falcon), FALCON_CONFIG,
# FALCON_FLEET_URL, FALCON_LOGGING_ENDPOINT, STORAGE_EMULATOR_HOST, FALCON_ACCESS_TOKEN_FILE.
echo "the fleet's environment ($work/fleet.env):"
sed 's/^/  /' "$work/fleet.env"
# shellcheck source=/dev/null
source "$work/fleet.env"
export XDG_STATE_HOME="$work/state"

say "1. The registry: repos.yaml is validated, then listed"
run falcon config validate
run falcon cluster list
say "   then warmed up: each cluster's credentials fetched into its own kubeconfig, in parallel"
run falcon cluster warm-up

say "2. Choose the best cluster for tpu-v4-64 (all candidates probed in parallel)"
run falcon cluster select --accelerator tpu-v4-64

name="demo-$(date +%H%M%S)"
say "3. Submit $name (falcon selects the cluster, then runs xpk workload create)"
printf '%s$ falcon job submit --accelerator tpu-v4-64 --name %s --image gcr.io/falcon/llama-bench:1 --env FLEET_DURATION_S=240 -- python3 train.py --steps 100%s\n' "$dim" "$name" "$reset"
falcon --json job submit --accelerator tpu-v4-64 --name "$name" \
  --image gcr.io/falcon/llama-bench:1 --env FLEET_DURATION_S=240 \
  -- python3 train.py --steps 100 >"$work/submit.json"
cluster=$(json_field '["handle"]["cluster"]' <"$work/submit.json")
echo "$(json_field '["selection"]["reason"]' <"$work/submit.json")"
echo "handle: $(python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["handle"]))' <"$work/submit.json")"

say "4. Poll its status until it finishes"
state=""
for _ in $(seq 1 60); do
  state=$(falcon --json job status --cluster "$cluster" "$name" | json_field '["state"]')
  printf '  %s  %s\n' "$(date +%T)" "$state"
  [[ "$state" == COMPLETED || "$state" == FAILED ]] && break
  sleep 1
done
run falcon job status --cluster "$cluster" "$name"
[[ "$state" == COMPLETED ]] || { echo "demo: the workload ended $state" >&2; exit 1; }

say "5. The last 10 lines of rank 0's log (one Cloud Logging request)"
run falcon job logs --cluster "$cluster" "$name" --tail 10
say "   and only steps 9 and 90-99, filtered by Cloud Logging on the server"
run falcon job logs --cluster "$cluster" "$name" --grep 'textPayload:"step=9"'

dest="gs://falcon-logs/profiles/$name/logs"
say "6. Export every rank's log to $dest/"
run falcon job export-logs --cluster "$cluster" "$name" --dest "$dest/"

say "7. What is in the bucket"
python3 - "$url" "$work/token" "profiles/$name/logs/" <<'PY'
import json, sys, urllib.parse, urllib.request
url, token_file, prefix = sys.argv[1], sys.argv[2], sys.argv[3]
token = open(token_file).read().strip()
def get(path):
    req = urllib.request.Request(url + path, headers={"Authorization": "Bearer " + token})
    with urllib.request.urlopen(req) as r:
        return r.read()
listing = json.loads(get("/storage/v1/b/falcon-logs/o?prefix=" + urllib.parse.quote(prefix)))
for item in listing.get("items", []):
    print(f"  gs://falcon-logs/{item['name']:<60} {int(item['size']):>9} bytes")
meta = get("/storage/v1/b/falcon-logs/o/" + urllib.parse.quote(prefix + "collection_meta.json", safe="") + "?alt=media")
print("\ncollection_meta.json:")
print(json.dumps(json.loads(meta), indent=2))
PY

say "8. The same layer as a service: falcon serve (health loop, probe cache, state store, HTTP API)"
printf '%s$ falcon serve --listen 127.0.0.1:0%s\n' "$dim" "$reset"
falcon serve --listen 127.0.0.1:0 2>"$work/serve.log" &
serve_pid=$!
server=""
for _ in $(seq 1 400); do
  first=$(head -n 1 "$work/serve.log" 2>/dev/null || true)
  if [[ "$first" == "listening on http://"* ]]; then server=${first#listening on }; break; fi
  kill -0 "$serve_pid" 2>/dev/null || { cat "$work/serve.log" >&2; exit 1; }
  sleep 0.05
done
[[ -n "$server" ]] || { echo "demo: falcon serve did not start" >&2; cat "$work/serve.log" >&2; exit 1; }
echo "falcon serve listening on $server (pid $serve_pid); its first stderr line said so"

say "   select through it: the CLI as a client (--server, or FALCON_SERVER)"
run falcon --server "$server" cluster select --accelerator tpu-v4-64
say "   and again: answered from the server's probe cache (PROBE_AGE, SOURCE)"
printf '%s$ falcon --server %s cluster select --accelerator tpu-v4-64%s\n' "$dim" "$server" "$reset"
falcon --server "$server" cluster select --accelerator tpu-v4-64 | tee "$work/select2.txt"
id=$(sed -n 's/^decision recorded as selection \([0-9]*\)$/\1/p' "$work/select2.txt")
[[ -n "$id" ]] || { echo "demo: the selection was not recorded" >&2; exit 1; }

say "   the decision, explained by the API: GET /v1/selections/$id"
printf '%sGET %s/v1/selections/%s%s\n' "$dim" "$server" "$id" "$reset"
python3 -c 'import json, sys, urllib.request
print(json.dumps(json.load(urllib.request.urlopen(sys.argv[1])), indent=2))' "$server/v1/selections/$id"

say "   the dashboard: the fleet, the workloads, the decisions and the logs in a browser"
echo "dashboard: $server/"
if ((wait_for_enter)); then
  read -r -p "falcon serve and the fleet stay up; open the URL above, then press Enter to stop. " _ || true
fi

say "   stop it: SIGTERM (stops accepting, finishes requests in flight, stops the health loop)"
kill -TERM "$serve_pid"
serve_rc=0
wait "$serve_pid" || serve_rc=$?
serve_pid=""
echo "falcon serve exited $serve_rc; its last log line:"
tail -n 1 "$work/serve.log"
[[ "$serve_rc" == 0 ]] || { echo "demo: falcon serve exited $serve_rc" >&2; cat "$work/serve.log" >&2; exit 1; }

say "9. Stopping the fleet"
kill -TERM "$fleet_pid"
wait "$fleet_pid" 2>/dev/null || true
fleet_pid=""
echo "done: the whole flow ran against the local fleet."
