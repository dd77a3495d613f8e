#!/bin/sh
# CPU test of the JSON outputs and plot.py: mycoll-perf (2 ranks, host memory)
# writes --json and -J files; plot.py --text reads both and must print the same
# table; -J's document must parse and carry the run's metadata, and a document
# of the older metadata (no commit, best-of spelled -R) reads the same; --only
# and --median reproduce a docs/performance.md column from docs/perf/.
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
assert m["best_of"] == 1 and m["local_register"] == 0 and m["commit"], m
# The same document as mycoll-perf wrote it before -B and the commit existed.
del m["commit"], m["best_of"], m["local_register"]
m["options"] = m["options"].replace("-B ", "-R ")
json.dump(doc, open(sys.argv[1].replace(".json", "-old.json"), "w"))
PY
python3 "$plot" --text "$dir/r-old.json" > "$dir/old.txt"
cmp "$dir/lines.txt" "$dir/old.txt"
# --only and --median over a kept result: the 2-rank host all_reduce, median of
# its 5 sweeps (docs/performance.md's table: 1.39 at 8 B, 3.39 at 64 MiB).
kept=$(dirname "$plot")/../../docs/perf/host-shm-2ranks-all-vs-mpi.jsonl
python3 "$plot" --text --only collective=all_reduce --median "$kept" > "$dir/median.txt"
cat "$dir/median.txt"
[ "$(grep -c '^#' "$dir/median.txt")" = 1 ]
grep -q "^# all_reduce, 2 ranks, host memory, float sum: median of 5 runs" "$dir/median.txt"
grep -Eq "^ +8 +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +1\.39$" "$dir/median.txt"
grep -Eq "^ +67108864 .* 3\.39$" "$dir/median.txt"
echo "plot.py text mode and -J document: OK"
