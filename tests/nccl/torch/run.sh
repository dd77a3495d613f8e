#!/usr/bin/env bash
# PyTorch on mycoll's libnccl.so.2 (GPU machine): every torch.distributed
# collective, DDP and FSDP2 training compared with a run without mycoll, the
# log showing mycoll served the job, a killed rank failing the others with
# mycoll's error, and a DDP step timed with and without the preload.
#   tests/nccl/torch/run.sh BUILD_DIR OUTDIR [NPROC]
# NPROC ranks (default 2) share the GPUs: rank r uses GPU r % device_count,
# so with one GPU every rank is on cuda:0. Prints PASS/FAIL/SKIP lines and
# exits nonzero on any failure. Skips (exit 0) without PyTorch or a GPU.
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$1" && pwd)
out=$2
nproc=${3:-2}
mkdir -p "$out"
out=$(cd "$out" && pwd)
lib=$build/nccl/libnccl.so.2

if ! python3 -c "import torch, torch.distributed" 2>/dev/null; then echo "SKIP: PyTorch is not installed"; exit 0; fi
if ! python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "SKIP: no CUDA GPU"; exit 0
fi
[ -f "$lib" ] || { echo "FAIL: $lib not built"; exit 1; }
ngpu=$(python3 -c "import torch; print(torch.cuda.device_count())")
echo "PyTorch $(python3 -c 'import torch; print(torch.__version__)'), $ngpu GPU(s), $nproc rank(s)"

export NCCL_NVLS_ENABLE=0
export MYCOLL_TIMEOUT=${MYCOLL_TIMEOUT:-60}
export MYCOLL_NCCL_LIB=$lib
fails=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
port() { echo $((20000 + RANDOM % 20000)); }
run_torch() {  # run_torch LOG PRELOAD NPROC ARGS...  (PRELOAD: 1 with NCCL_DEBUG=INFO, 2 quiet, 0 none)
  local log=$1 pre=$2 np=$3; shift 3
  if [ "$pre" = 1 ]; then
    LD_PRELOAD=$lib NCCL_DEBUG=INFO timeout 600 torchrun --nproc-per-node "$np" --master-port "$(port)" "$@" >"$log" 2>&1
  elif [ "$pre" = 2 ]; then
    LD_PRELOAD=$lib timeout 600 torchrun --nproc-per-node "$np" --master-port "$(port)" "$@" >"$log" 2>&1
  else
    timeout 600 torchrun --nproc-per-node "$np" --master-port "$(port)" "$@" >"$log" 2>&1
  fi
}

# (a) every collective, (c) the log says mycoll served it
t0=$(date +%s)
if run_torch "$out/collectives.log" 1 "$nproc" "$here/collectives.py"; then
  pass "collectives ($(grep -c ' PASS ' "$out/collectives.log") checks, $(grep -c ' SKIP ' "$out/collectives.log") skipped, $(( $(date +%s) - t0 )) s)"
else
  fail "collectives (exit $?): $(grep -m5 -E ' FAIL |Error' "$out/collectives.log" | tr '\n' ' ')"
fi
# Every wait of the run must end by itself: a wait that ran out its
# MYCOLL_TIMEOUT (e.g. communicators destroyed in a different order on
# different ranks, each destroy waiting for its peers) is a failure even
# when every check passed.
if grep -q "timed out after" "$out/collectives.log"; then
  fail "collectives: a wait ran out MYCOLL_TIMEOUT: $(grep -m2 "timed out after" "$out/collectives.log" | tr '\n' ' ')"
fi
served=$(grep -c "NCCL API 2.28.9 served by mycoll" "$out/collectives.log")
colls=$(grep -c "Init COMPLETE" "$out/collectives.log")
if [ "$served" -ge "$nproc" ] && [ "$colls" -gt 0 ] && grep -q "$lib" "$out/collectives.log"; then
  pass "log: $served processes say 'served by mycoll' ($lib), $colls communicators 'Init COMPLETE'"
else
  fail "log: $served 'served by mycoll' lines (want $nproc), $colls 'Init COMPLETE' lines"
fi

# The group created with ProcessGroupNCCL.Options config.max_ctas = 2
# (collectives.py) ran capped: each rank's log line names the cap.
capped=$(grep -c "NCCL_MAX_NCHANNELS asked for 2;" "$out/collectives.log")
if [ "$capped" -ge "$nproc" ]; then
  pass "log: $capped ranks capped the max_ctas=2 group's kernels (ncclConfig_t.maxCTAs)"
elif grep -q "SKIP maxCTAs group" "$out/collectives.log"; then
  echo "SKIP log: this PyTorch cannot set ncclConfig_t.maxCTAs"
else
  fail "log: $capped lines name the max_ctas=2 cap (want $nproc)"
fi

# (b) DDP and FSDP2 training against a run without mycoll: real NCCL where
# every rank has its own GPU, else (NCCL refuses ranks sharing a GPU) the
# same training in one process on the global batch.
for mode in ddp fsdp; do
  if run_torch "$out/$mode.mycoll.log" 1 "$nproc" "$here/train.py" --mode $mode --out "$out/$mode.mycoll.json"; then
    if [ "$ngpu" -ge "$nproc" ]; then
      run_torch "$out/$mode.nccl.log" 0 "$nproc" "$here/train.py" --mode $mode --out "$out/$mode.ref.json"
      ref="NCCL"
    else
      python3 "$here/train.py" --mode single --world "$nproc" --out "$out/$mode.ref.json" >"$out/$mode.ref.log" 2>&1
      ref="one process"
    fi
    if [ -f "$out/$mode.ref.json" ]; then
      if python3 "$here/train.py" --compare "$out/$mode.mycoll.json" "$out/$mode.ref.json" "$mode vs $ref" >"$out/$mode.compare.txt"; then
        pass "$(head -1 "$out/$mode.compare.txt")"
      else
        fail "$(tr '\n' ' ' <"$out/$mode.compare.txt")"
      fi
    else
      fail "$mode: the reference run ($ref) failed: $(tail -3 "$out/$mode.ref.log" "$out/$mode.nccl.log" 2>/dev/null | tr '\n' ' ')"
    fi
  else
    fail "$mode training on mycoll: $(grep -m3 -E 'Error|error' "$out/$mode.mycoll.log" | tr '\n' ' ')"
  fi
done

# (d) a rank killed mid-training
kill_timeout=20
victim=$((nproc - 1))
mport=$(port)
rm -f "$out"/kill_rank*.json
start=$(date +%s.%N)
pids=()
for r in $(seq 0 $((nproc - 1))); do
  ( RANK=$r LOCAL_RANK=$r WORLD_SIZE=$nproc MASTER_ADDR=127.0.0.1 MASTER_PORT=$mport \
    MYCOLL_TIMEOUT=$kill_timeout LD_PRELOAD=$lib timeout 300 \
    python3 "$here/kill_rank.py" "$out" $victim 30 >"$out/kill_rank$r.log" 2>&1
    echo $? >"$out/kill_rank$r.rc"; date +%s.%N >"$out/kill_rank$r.end" ) &
  pids+=($!)
done
wait "${pids[@]}"
killed_at=$(python3 -c "import json; print(json.load(open('$out/kill_rank$victim.json'))['killed_at'])" 2>/dev/null || echo "")
if [ -z "$killed_at" ]; then
  fail "kill test: rank $victim never reached the kill step: $(tail -3 "$out/kill_rank$victim.log" | tr '\n' ' ')"
else
  for r in $(seq 0 $((victim - 1))); do
    end=$(cat "$out/kill_rank$r.end"); rc=$(cat "$out/kill_rank$r.rc")
    delay=$(python3 -c "print(f'{$end - $killed_at:.1f}')")
    named=$(grep -hoE "[^\"]{0,160}rank $victim([^0-9][^\"]{0,80}|$)" "$out/kill_rank$r.log" "$out/kill_rank$r.json" 2>/dev/null | grep -iE "mycoll|MYCOLL_TIMEOUT|timed out|remote" | head -1)
    within=$(python3 -c "print(1 if $end - $killed_at <= $kill_timeout + 40 else 0)")
    if [ "$rc" != 0 ] && [ "$rc" != 124 ] && [ -n "$named" ] && [ "$within" = 1 ]; then
      pass "kill test: rank $r failed ${delay} s after rank $victim died (MYCOLL_TIMEOUT=$kill_timeout): $named"
    else
      fail "kill test: rank $r exit $rc after ${delay} s; error naming rank $victim: '${named}' (log $out/kill_rank$r.log)"
    fi
  done
fi

# DDP step time with and without the preload, one rank per GPU (real NCCL
# cannot share a GPU between ranks).
tp=$(( ngpu >= nproc ? nproc : (ngpu >= 2 ? ngpu : 1) ))
if run_torch "$out/time.mycoll.log" 2 "$tp" "$here/train.py" --mode time --steps 50 --out "$out/time.mycoll.json" &&
   run_torch "$out/time.nccl.log" 0 "$tp" "$here/train.py" --mode time --steps 50 --out "$out/time.nccl.json"; then
  python3 - "$out" "$tp" <<'PY'
import json, sys
out, tp = sys.argv[1], sys.argv[2]
m = json.load(open(f"{out}/time.mycoll.json")); n = json.load(open(f"{out}/time.nccl.json"))
r = m["step_ms_median"] / n["step_ms_median"]
print(f"TIME DDP step ({m['params']/1e6:.0f}M params, {tp} rank(s), one per GPU): mycoll {m['step_ms_median']:.2f} ms, "
      f"NCCL {n['step_ms_median']:.2f} ms, ratio mycoll/NCCL {r:.3f}")
json.dump({"ranks": int(tp), "mycoll_ms": m["step_ms_median"], "nccl_ms": n["step_ms_median"], "ratio": r},
          open(f"{out}/ddp_step_time.json", "w"))
PY
else
  fail "DDP timing runs: $(tail -2 "$out/time.mycoll.log" "$out/time.nccl.log" | tr '\n' ' ')"
fi

echo "$fails failure(s); logs in $out"
[ "$fails" -eq 0 ]
