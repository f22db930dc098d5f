#!/usr/bin/env bash
# The GPU tests and the GPU benchmark on an offline GPU machine, from the checkout's root, with the kit built by
# `bash ../shared/gpu/build-kit.sh` sent along (.gpu-kit is git-ignored: name it when copying the checkout).
#
#   bash tests/gpu/run.sh tests      # python -m pytest -m gpu -rs tests/gpu (more pytest arguments may follow:
#                                    # tests/gpu/test_gpu_train.py, -k t4, ... to split it over calls of 10 minutes)
#   bash tests/gpu/run.sh compare    # benchmarks/gpu_compare.py on a Qwen2.5-1.5B-shaped model, into docs/benchmarks.md
#
# Output goes to $OUT (or ./gpu-out): the pytest log and junit XML, the benchmark's JSON and docs/benchmarks.md.
set -euo pipefail
what="${1:-tests}"
shift || true
if [[ "$what" != tests && "$what" != compare ]]; then
  echo "usage: bash tests/gpu/run.sh tests [pytest arguments] | compare" >&2
  exit 2
fi
out="${OUT:-gpu-out}"
mkdir -p "$out" /tmp/site
tar xzf .gpu-kit/site.tar.gz -C /tmp/site
export PYTHONPATH="/tmp/site:$PWD" HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
python3 -c "import unsloth, trl, bitsandbytes, datasets, peft, transformers, torch; print('device', torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU', 'torch', torch.__version__, 'cuda', torch.version.cuda, 'unsloth', unsloth.__version__, 'trl', trl.__version__, 'transformers', transformers.__version__, 'peft', peft.__version__, 'bitsandbytes', bitsandbytes.__version__, 'datasets', datasets.__version__)" | tail -1 | tee "$out/versions.txt"
case "$what" in
  tests)
    python3 -m pytest -m gpu -rs -p no:cacheprovider -o addopts="" --junitxml="$out/gpu-tests.xml" -s "${@:-tests/gpu}" 2>&1 | tee "$out/gpu-tests.log"
    ;;
  compare)
    python3 benchmarks/gpu_compare.py --shape qwen2.5-1.5b --steps 4 --completion-tokens 256 --write-docs --json "$out/gpu_compare.json" 2>&1 | tee "$out/gpu_compare.log"
    cp docs/benchmarks.md "$out/"
    ;;
esac
