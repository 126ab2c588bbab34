#!/usr/bin/env bash
# What the profiler costs (docs/profiling.md, "Cost"): loom-bench built before the profiler
# (BEFORE) and with it (AFTER), off and with --profile, in alternation on the same machine in
# the same run, ROUNDS times per workload; then, per workload, the median ms_per_step of each
# and what profiling adds per recorded event: (on - off) / profile_events_per_step.
#
#   bench/profiler_cost.sh BEFORE/loom-bench AFTER/loom-bench [ROUNDS] [WORKLOAD:STEPS ...]
#
# Default: 5 rounds of seed-rnn:2000 (small ops: the per-op cost shows) and transformer-small:5.
# Every loom-bench line is printed as it comes (JSON, with "build" and "profile" added); the
# summary lines follow. The machines are shared: read the figures beside load1.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 BEFORE/loom-bench AFTER/loom-bench [ROUNDS] [WORKLOAD:STEPS ...]" >&2
  exit 2
fi
before=$1 after=$2
rounds=${3:-5}
shift $(( $# < 3 ? $# : 3 ))
workloads=("$@")
[ ${#workloads[@]} -gt 0 ] || workloads=(seed-rnn:2000 transformer-small:5)
profile_dir=$(mktemp -d)
trap 'rm -rf "$profile_dir"' EXIT
results=$(mktemp)

for round in $(seq 1 "$rounds"); do
  for w in "${workloads[@]}"; do
    name=${w%%:*} steps=${w##*:}
    for run in before after profiled; do
      case $run in
        before) line=$("$before" --threads 2 --steps "$steps" "$name") ;;
        after) line=$("$after" --threads 2 --steps "$steps" "$name") ;;
        profiled) line=$("$after" --threads 2 --steps "$steps" --profile "$profile_dir" "$name" 2>/dev/null) ;;
      esac
      line="${line%\}},\"build\":\"$run\",\"round\":$round}"
      echo "$line" | tee -a "$results"
    done
  done
done

python3 - "$results" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for name in dict.fromkeys(r["workload"] for r in rows):
    ms = {b: [r["ms_per_step"] for r in rows if r["workload"] == name and r["build"] == b]
          for b in ("before", "after", "profiled")}
    med = {b: statistics.median(v) for b, v in ms.items()}
    events = statistics.median(r["profile_events_per_step"] for r in rows
                               if r["workload"] == name and r["build"] == "profiled")
    named = statistics.median(r["profile_named_fraction"] for r in rows
                              if r["workload"] == name and r["build"] == "profiled")
    print(json.dumps({"summary": name, "rounds": len(ms["before"]),
                      "ms_per_step_before": round(med["before"], 4), "ms_per_step_after_off": round(med["after"], 4),
                      "off_vs_before": round(med["after"] / med["before"] - 1, 4),
                      "before_min_max": [min(ms["before"]), max(ms["before"])],
                      "after_off_min_max": [min(ms["after"]), max(ms["after"])],
                      "ms_per_step_profiled": round(med["profiled"], 4), "events_per_step": events,
                      "us_per_event_on": round((med["profiled"] - med["after"]) * 1e3 / events, 3),
                      "named_fraction": named}))
EOF
rm -f "$results"
