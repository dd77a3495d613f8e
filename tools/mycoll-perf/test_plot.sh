#!/bin/sh
# CPU test of the JSON outputs and plot.py: mycoll-perf (2 ranks, host memory)
# writes --json and -J files; plot.py --text reads both and must print the same
# table; -J's document must parse and carry the run's metadata.
# Usage: test_plot.sh MYCOLL_PERF PLOT_PY. Prints "SKIP: ..." without python3.
set -eu
perf=$1
plot=$2
if ! command -v python3 >/dev/null 2>&1; then
  echo "SKIP: python3 not found"
  exit 0
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/mycoll-plot.XXXXXX")
trap 'rm -rf "$dir"' EXIT
"$perf" all_reduce --np 2 --minbytes 8 --maxbytes 4K --stepfactor 8 --iters 2 \
  --warmup_iters 0 --check 1 --json "$dir/r.jsonl" -J "$dir/r.json" > "$dir/perf.txt"
python3 "$plot" --text "$dir/r.jsonl" > "$dir/lines.txt"
python3 "$plot" --text "$dir/r.json" > "$dir/doc.txt"
cmp "$dir/lines.txt" "$dir/doc.txt"
cat "$dir/lines.txt"
grep -q "^# all_reduce, 2 ranks, host memory, float sum" "$dir/lines.txt"
for size in 8 64 512 4096; do
  grep -Eq "^ +$size +[0-9.]+ +[0-9.]+$" "$dir/lines.txt"
done
python3 - "$dir/r.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
m = doc["metadata"]
assert m["tool"] == "mycoll-perf" and m["nranks"] == 2 and len(m["ranks"]) == 2, m
assert "--minbytes 8" in m["command_line"] and m["date"].endswith("Z"), m
assert [r["size"] for r in doc["results"]] == [8, 64, 512, 4096], doc["results"]
assert all(r["oop_wrong"] == 0 for r in doc["results"])
PY
echo "plot.py text mode and -J document: OK"
