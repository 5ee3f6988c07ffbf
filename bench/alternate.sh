#!/usr/bin/env bash
# Before/after figures for a change to the pods' hot path: runs `python -m bench` (asya-pods
# only, quorum queues) on several commits of this repository in turn, A B C A B C ..., so a
# drift in the machine's speed hits every commit alike, then prints each commit's medians.
#
#   bench/alternate.sh ROUNDS REV [REV ...]      e.g. bench/alternate.sh 4 main~5 main
#
# Each commit is checked out in a worktree under $ALTERNATE_DIR (default /tmp/asya-alternate)
# and run with this checkout's .venv, its own code first on PYTHONPATH. Extra options for the
# bench go in BENCH_ARGS (default: --count 8000 --rates 20 --light-count 100 --batch-sizes ''),
# e.g. --utilisation local,pods, whose shares are then listed per commit and round too;
# not --rounds: ROUNDS is the rounds here, and each run's first is the one read.
# The JSON of every run stays in $ALTERNATE_DIR/results.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$#" -lt 2 ]; then
  sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
rounds=$1
shift
root=${ALTERNATE_DIR:-/tmp/asya-alternate}
python=$PWD/.venv/bin/python
args=${BENCH_ARGS:-"--count 8000 --rates 20 --light-count 100 --batch-sizes ''"}
mkdir -p "$root/results"
dirs=()
for rev in "$@"; do
  sha=$(git rev-parse --short "$rev")
  dir=$root/$sha
  [ -d "$dir" ] || git worktree add --detach --quiet "$dir" "$sha"
  dirs+=("$dir")
done
for round in $(seq "$rounds"); do
  for dir in "${dirs[@]}"; do
    sha=$(basename "$dir")
    echo "alternate: round $round/$rounds, $sha" >&2
    (cd "$dir" && eval PYTHONPATH="$dir:$dir/sidecar" "$python" -m bench --contenders asya-pods \
      --queue-types quorum "$args" --output "$root/results/$sha-$round.json" >/dev/null)
  done
done
"$python" - "$root/results" "${dirs[@]}" <<'EOF'
import json, pathlib, statistics, sys

results = pathlib.Path(sys.argv[1])
print("commit    runs  msgs/s median (min-max)  p50@20/s ms  CPU ms/msg: sidecar runtime worker broker")
for directory in sys.argv[2:]:
    sha = pathlib.Path(directory).name
    runs = [json.loads(p.read_text())["runs"][0] for p in sorted(results.glob(f"{sha}-*.json"))]
    rates = [r["saturation"]["per_s"] for r in runs]
    cpu = lambda role: statistics.median(r["cpu_ms_per_message"][role] for r in runs)
    # No light rate when BENCH_ARGS has --rates '': no latency to show.
    light = [r["light"][0]["p50_ms"] for r in runs if r["light"]]
    p50 = f"{statistics.median(light):14.2f}" if light else f"{'-':>14}"
    print(f"{sha:9} {len(runs):4}  {statistics.median(rates):6.0f} ({min(rates):.0f}-{max(rates):.0f})"
          f"{p50}   {cpu('sidecar'):.3f} {cpu('runtime'):.3f} {cpu('runtime-worker'):.3f}"
          f" {cpu('broker'):.3f}")
shares = {}
for directory in sys.argv[2:]:
    sha = pathlib.Path(directory).name
    for p in sorted(results.glob(f"{sha}-*.json")):
        rows = (json.loads(p.read_text()).get("utilisation") or {}).get("rows", [])
        for row in rows:
            if row.get("share") is not None:
                key = (row["path"], row["batch"], row["device_ms"])
                shares.setdefault(key, {}).setdefault(sha, []).append(row["share"])
if shares:
    print("device utilisation, share of the standalone rate in each round:")
    for (path, batch, device_ms), by_commit in sorted(shares.items()):
        for sha, values in by_commit.items():
            listed = " ".join(f"{v:.2f}" for v in values)
            print(f"  {path:6} batch {batch:<3} {device_ms:g} ms  {sha:9} {listed}")
EOF
