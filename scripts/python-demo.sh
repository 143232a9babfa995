#!/usr/bin/env bash
# examples/business_layer.py (the spec's business flow in Python, `import falcon`) against the
# local fleet: what `make python-demo` runs.
#
#   scripts/python-demo.sh [BUILD_DIR]      (default build/release-werror; `make python-demo` builds it)
#
# Starts the fleet (examples/local-fleet.yaml, time scale 60) on a port the OS chooses, points
# the layer at it as scripts/demo.sh does, runs the example with a 240-second (4 s real) run,
# and stops the fleet on exit.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build/release-werror}" && pwd)
bin="$build/bin"
python=${PYTHON:-/usr/bin/python3}
for exe in falcon-fleet fleet-xpk fleet-gcloud; do
  [[ -x "$bin/$exe" ]] || { echo "python-demo: $bin/$exe is missing; run 'make python-build'" >&2; exit 1; }
done
ls "$build"/python/falcon/_falcon*.so >/dev/null 2>&1 ||
  { echo "python-demo: the module is missing in $build/python/falcon; run 'make python-build'" >&2; exit 1; }

work=$(mktemp -d /tmp/falcon-python-demo.XXXXXX)
fleet_pid=""
cleanup() {
  if [[ -n "$fleet_pid" ]] && kill -0 "$fleet_pid" 2>/dev/null; then
    kill -TERM "$fleet_pid" 2>/dev/null || true
    wait "$fleet_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

"$bin/falcon-fleet" --fleet "$root/examples/local-fleet.yaml" --port 0 \
  --repos-file "$root/examples/local-repos.yaml" --ready-file "$work/ready.json" \
  --env-file "$work/fleet.env" --token-file "$work/token" >"$work/fleet.log" 2>&1 &
fleet_pid=$!
for _ in $(seq 1 200); do
  [[ -s "$work/ready.json" ]] && break
  kill -0 "$fleet_pid" 2>/dev/null || { cat "$work/fleet.log" >&2; exit 1; }
  sleep 0.05
done
[[ -s "$work/ready.json" ]] || { echo "python-demo: the fleet did not start" >&2; cat "$work/fleet.log" >&2; exit 1; }
url=$("$python" -c 'import json,sys; print(json.load(sys.stdin)["url"])' <"$work/ready.json")
echo "fleet listening on $url (pid $fleet_pid)"

# The fleet's environment, as the README's quick start uses it: PATH (the build's bin/ first),
# FALCON_CONFIG, FALCON_FLEET_URL, FALCON_LOGGING_ENDPOINT, STORAGE_EMULATOR_HOST,
# FALCON_ACCESS_TOKEN_FILE.
# shellcheck source=/dev/null
source "$work/fleet.env"
XDG_STATE_HOME="$work/state" PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}" \
  "$python" "$root/examples/business_layer.py" --config "$root/examples/local-repos.yaml" \
  --env FLEET_DURATION_S=240 --poll-interval 1 "${@:2}"
