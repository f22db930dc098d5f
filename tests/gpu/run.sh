#!/usr/bin/env bash
# grpo-lite's GPU checks on an offline GPU machine, in one call: the GPU tests and the GPU benchmark, part by part in
# priority order, each under its own time limit, within one budget (560 s by default: one call of the GPU machine). From the checkout's root,
# with the kit built by `bash ../shared/gpu/build-kit.sh` sent along (.gpu-kit is git-ignored: name it when copying):
#
#   OUT=/path bash tests/gpu/run.sh all      # every part below, in order
#   OUT=/path bash tests/gpu/run.sh compare  # one part (or several: tests compare)
#   bash tests/gpu/run.sh plan               # the plan alone
#   GPU_DRY_RUN=1 bash tests/gpu/run.sh all  # on a CPU with this checkout's Python, no kit: the tests skip without
#                                            # CUDA, the benchmark runs its CPU rows; every step of the script runs
#
# What a reader needs lands in $OUT (default ./gpu-out), eight files: timeline.txt (each part: limit, planned and
# measured seconds, result), versions.txt, gpu-tests.log (pytest's output with --durations), gpu-tests.xml (JUnit, all
# parts), gpu-failures.log (each failing test's traceback, written as it fails), gpu_compare.json, gpu_compare.md (its
# tables) and gpu_compare.log (each row's own output).
# GPU_RUN_BUDGET_S changes the budget; a part starts with whatever is left of it, up to its own limit.
set -uo pipefail

dry_run="${GPU_DRY_RUN:-}"
out="${OUT:-gpu-out}"
budget="${GPU_RUN_BUDGET_S:-$([[ -n "$dry_run" ]] && echo 1200 || echo 560)}"  # one call of 600 s, less the kit's unpacking margin
py="${GPU_PYTHON:-python3}"
min_part_s=20  # a part is not started with less time than this left

# The plan on a GPU, in priority order. Seconds come from the GPU runs of 2026-11-27 (H200, docs/benchmarks.md, "GPU:
# plain TRL vs grpo-lite backends" and "The second GPU run of 2026-11-27"): each pytest process paid about 40 s before
# its first test (pytest, Unsloth's import and patching), so the tests share one process; load took 8 s, the Unsloth
# run's tests 147 to 167 (preview 17, six steps 76 to 88 with Unsloth's first compile, evaluate 4, export 21, resume 21),
# fp16 76 to 83. The out-of-memory test (a fresh interpreter's start-up, a load, an oversized batch, 2 steps) was cut
# off by the part's limit in both runs, so it now runs right after load. The comparison's rows took: plain TRL 31 to 43,
# Unsloth 88 (its own compile), dynamic cache 26, Unsloth's generation 39, paged 28; the compiled static cache did not
# finish in 34 s; bitsandbytes was not reached. The families took: llama-3.2 52, qwen2.5-vl through FastVisionModel 123
# (its first step 95: Unsloth's compile). On 2026-11-28 the tests part, then with fp16 in it and the episodes test new,
# passed its load tests and ran past 440 s within the Unsloth run: fp16 now runs with the families, only with time left
# over. What one call leaves out runs in a second call on the still-warm machine: `run.sh families compare`, or
# GPU_COMPARE_ROWS=grpo_lite_bnb4,gen_dynamic,... run.sh compare.
#   part          limit planned  where the planned seconds come from
PLAN="
setup           60    36   unpack the kit, versions, build the 0.5B model once for every part (23 to 36 s)
tests          400   358   start-up 40 + load 8 + out of memory 100 + episodes with a tool 60 (neither measured yet) + Unsloth run 150
compare        300   131   rows in order while time is left: plain TRL 43, Unsloth 88, then bitsandbytes and the engines
families       240     0   only with time left over: vision (qwen2.5-vl 123 s), fp16 (82 s), the chat families (llama-3.2 52 s)
"
TEST_FILES=(tests/gpu/test_gpu_load.py tests/gpu/test_gpu_out_of_memory.py tests/gpu/test_gpu_environments.py
            tests/gpu/test_gpu_train.py)
LATER_FILES=(tests/gpu/test_gpu_vision.py tests/gpu/test_gpu_t4_fp16.py tests/gpu/test_gpu_families.py)
COMPARE_ARGS=(--shape qwen2.5-0.5b --steps 2 --completion-tokens 64)

mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
start=$(date +%s)
timeline="$out/timeline.txt"

print_plan() {
  printf '%-14s %7s %9s  %s\n' part "limit s" "planned s" "planned from (on a GPU)"
  local total=0
  while read -r part limit planned why; do
    [[ -z "$part" ]] && continue
    printf '%-14s %7s %9s  %s\n' "$part" "$limit" "$planned" "$why"
    total=$((total + planned))
  done <<<"$PLAN"
  printf '%-14s %7s %9s  %s\n' total "$budget" "$total" "(the budget: GPU_RUN_BUDGET_S)"
}

stop_at() {  # stop_at LIMIT COMMAND...: COMMAND, stopped after LIMIT s as a person stops a training run: Ctrl-C, which
  # grpo-lite's trainer takes as "stop after this step", Ctrl-C again 5 s later, which interrupts it, so that pytest still
  # writes its summary, JUnit XML and durations; killed if it still runs 30 s after that. Exit 124 when stopped.
  local limit=$1 waited=0
  shift
  "$@" &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null && ((waited < limit)); do
    sleep 1
    ((waited++))
  done
  if ! kill -0 "$pid" 2>/dev/null; then
    wait "$pid"
    return
  fi
  kill -INT "$pid"
  sleep 5
  kill -INT "$pid" 2>/dev/null
  for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null && sleep 1; done
  kill -KILL "$pid" 2>/dev/null
  wait "$pid"
  return 124
}

run_part() {  # run_part PART LIMIT: the part's commands, under `timeout`
  local part=$1 limit=$2
  case "$part" in
    setup)
      if [[ -z "$dry_run" ]]; then
        mkdir -p /tmp/site && tar xzf .gpu-kit/site.tar.gz -C /tmp/site || return
      fi
      timeout -k 10 "$limit" "$py" benchmarks/gpu_compare.py --versions | tee "$out/versions.txt" &&
        timeout -k 10 "$limit" "$py" -c "import sys; sys.modules['unsloth'] = None  # building a model needs none of it
from grpo_lite.model.tiny import build_tiny_model
build_tiny_model(sys.argv[1], **({} if sys.argv[2] else {'like': 'qwen2.5-0.5b', 'dtype': 'bfloat16'}))" "$work/model" "$dry_run"
      ;;
    tests | families)
      local files=("${TEST_FILES[@]}")
      [[ $part == families ]] && files=("${LATER_FILES[@]}")
      if [[ ! -f ${files[0]} ]]; then
        echo "no ${files[0]}"
        return 3
      fi
      stop_at "$limit" "$py" -m pytest -m gpu -rA -s -p no:cacheprovider -o addopts="" --durations=0 \
        --junitxml="$work/$part.xml" "${files[@]}" > >(tee -a "$out/gpu-tests.log") 2>&1
      ;;
    compare)
      local compare=("${COMPARE_ARGS[@]}")
      [[ -n "$dry_run" ]] && compare=(--dry-run)
      [[ -n "${GPU_COMPARE_ROWS:-}" ]] && compare+=(--variants "$GPU_COMPARE_ROWS")
      timeout -k 20 "$limit" "$py" benchmarks/gpu_compare.py "${compare[@]}" --model-dir "$work/model" \
        --budget-s $((limit - 15)) --json "$out/gpu_compare.json" --table "$out/gpu_compare.md" 2>"$out/gpu_compare.log"
      ;;
  esac
}

if [[ $# -eq 0 || ( $1 != all && $1 != plan && ! " $(awk 'NF {print $1}' <<<"$PLAN" | tr '\n' ' ') " =~ " $1 " ) ]]; then
  echo "usage: bash tests/gpu/run.sh all | plan | PART... (parts: $(awk 'NF {print $1}' <<<"$PLAN" | tr '\n' ' '))" >&2
  exit 2
fi
if [[ $1 == plan ]]; then
  print_plan
  exit 0
fi
parts=("$@")
[[ $1 == all ]] && mapfile -t parts < <(awk 'NF {print $1}' <<<"$PLAN")
[[ " ${parts[*]} " == *" setup "* ]] || parts=(setup "${parts[@]}")  # every part needs the kit and the model

if [[ -n "$dry_run" ]]; then
  export PYTHONPATH="$PWD" GRPO_LITE_GPU_MODEL="$work/model"
  echo "dry run on this machine's CPU with $("$py" -c 'import sys; print(sys.executable)'): tiny model, no kit"
else
  export PYTHONPATH="/tmp/site:$PWD" GRPO_LITE_GPU_MODEL="$work/model"
fi
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
echo "plan: $budget s in all"
print_plan
: >"$out/gpu-tests.log"
export GRPO_LITE_GPU_FAILURES="$out/gpu-failures.log"  # each failing test's traceback, written as it fails (tests/gpu/conftest.py)
: >"$GRPO_LITE_GPU_FAILURES"
{ echo "what each part took (bash tests/gpu/run.sh $*: ${dry_run:+dry run on a CPU, }budget $budget s)"
  printf '%-14s %7s %9s %10s  %s\n' part "limit s" "planned s" "measured s" result; } >"$timeline"

status=0
for part in "${parts[@]}"; do
  read -r _ limit planned _ < <(awk -v p="$part" '$1 == p' <<<"$PLAN")
  left=$((budget - ($(date +%s) - start)))
  if ((left < min_part_s)); then
    printf '%-14s %7s %9s %10s  %s\n' "$part" "$limit" "$planned" - "not run: ${left} s of the budget left" | tee -a "$timeline"
    continue
  fi
  ((limit > left)) && limit=$left
  echo "== $part (limit $limit s, planned $planned s on a GPU)"
  part_start=$(date +%s.%N)
  run_part "$part" "$limit"
  rc=$?
  took=$(awk -v a="$part_start" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
  case $rc in
    0) result=ok ;;
    3) result="not run: its test file does not exist" ;;
    124 | 137) result="timed out at $limit s" ;;
    *) result="failed (exit $rc)" ;;
  esac
  [[ $rc == 0 || $rc == 3 ]] || status=1
  printf '%-14s %7s %9s %10s  %s\n' "$part" "$limit" "$planned" "$took" "$result" | tee -a "$timeline"
done

# One JUnit file for all the parts
"$py" - "$out/gpu-tests.xml" "$work"/*.xml <<'EOF'
import sys
import xml.etree.ElementTree as ET
merged = ET.Element("testsuites")
for path in sys.argv[2:]:
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        continue
    merged.extend(root.findall("testsuite") if root.tag == "testsuites" else [root])
ET.ElementTree(merged).write(sys.argv[1], encoding="unicode", xml_declaration=True)
EOF
echo "total $(($(date +%s) - start)) s of $budget; results in $out: $(ls "$out" | tr '\n' ' ')" >>"$timeline"
cat "$timeline"
exit $status
