#!/usr/bin/env bash
# The GPU check: run every CUDA test of the reference set, build and test fresh C++ projects, and
# time the CUDA kernels against PyTorch, writing the results to one folder.
#
#   bench/gpu_check.sh [OUT]    # from the repository root; OUT defaults to $OUT, else gpu_check_out
#
# It expects the reference set's library already built with CUDA kernels for this GPU, on any
# machine with nvcc (a CPU torch is enough):
#   cd generated_example && TORCH_CUDA_ARCH_LIST="9.0+PTX" opgen build
# and does not rebuild it: its tests then also prove that a stable-ABI library built on one torch
# runs on this machine's torch. Wheels in .whl/ (for instance black, which a machine without a
# package index may lack) are installed into a private folder first.
#
# GPU_CHECK_BUDGET (seconds, default 420) bounds the whole run; each step gets at most what is left,
# so the most important steps come first. GPU_CHECK_DRY=1 runs the same steps on a machine
# without a GPU (the CUDA tests are then skipped by pytest, the bench runs on the CPU at small sizes).
set -uo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
out="${1:-${OUT:-gpu_check_out}}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
budget="${GPU_CHECK_BUDGET:-420}"
started=$SECONDS
summary="$out/summary.txt"
: >"$summary"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$work/site" .whl/*.whl
fi
if ! python3 -c "import typer" 2>/dev/null && compgen -G ".whl/opt/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$work/site" .whl/opt/*.whl
fi
export PYTHONPATH="$work/site:$repo${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$work/bin"
printf '#!/bin/sh\nexec python3 -m opgen "$@"\n' >"$work/bin/opgen"
chmod +x "$work/bin/opgen"
export PATH="$work/bin:$PATH" PYTHONUNBUFFERED=1

workers=$(nproc)
((workers > 8)) && workers=8
xdist=""
python3 -c "import xdist" 2>/dev/null && xdist="-n $workers"
export work workers xdist

# step NAME MAX_SECONDS COMMAND...: run COMMAND with at most MAX_SECONDS or what the budget has left.
step() {
  local name=$1 limit=$2 left rc begun
  shift 2
  left=$((budget - (SECONDS - started)))
  ((left < limit)) && limit=$left
  if ((limit < 15)); then
    echo "$name: not run (the budget of ${budget} s is spent)" | tee -a "$summary"
    return
  fi
  begun=$SECONDS
  timeout -k 10 "$limit" bash -c '"$@"' "$name" "$@"
  rc=$?
  echo "$name: exit $rc after $((SECONDS - begun)) s (limit ${limit} s)" | tee -a "$summary"
}

environment() {
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
  python3 - <<'EOF'
import platform, torch
print("python", platform.python_version(), "| torch", torch.__version__, "| CUDA", torch.version.cuda)
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print(p.name, f"sm_{p.major}{p.minor},", p.multi_processor_count, "SMs,", p.total_memory >> 30, "GiB")
for name in ("triton", "torchvision", "black", "typer", "jinja2", "xdist"):
    try:
        module = __import__(name)
        print(name, getattr(module, "__version__", "?"))
    except ImportError as exc:
        print(name, "missing:", exc)
EOF
  nvcc --version 2>&1 | tail -n 2
  cuobjdump --list-elf generated_example/example_ops/_C.abi3.so 2>&1 | sed -n '1,4p'
  cuobjdump --list-ptx generated_example/example_ops/_C.abi3.so 2>&1 | sed -n '1,2p'
}

# The reference set, its library as carried: CUDA first (the new ground), then CPU.
reference_tests() {
  local select=$1
  # each pytest worker compiles in its own process: no pool of compile processes per worker
  cd generated_example &&
    TORCHINDUCTOR_COMPILE_THREADS=1 python3 -m pytest tests -q -p no:cacheprovider -m "not distributed" -k "$select" -rfE $xdist
}

# A fresh op in an empty folder, built and tested here: `opgen new` to a passing `opgen test`.
fresh_project() {
  local target=$1 folder
  folder="$work/fresh-$target"
  mkdir -p "$folder" && cd "$folder" || return 1
  if [ "$target" = triton ]; then
    echo "== fresh triton project: opgen new mylib::foo --backend triton --devices cpu,cuda"
    opgen new mylib::foo --backend triton --devices cpu,cuda || return 1
    opgen test -rfE
    return
  fi
  echo "== fresh $target project: opgen new mylib::foo --backend cpp --devices cpu,cuda"
  printf '[project]\nnamespace = "mylib"\npackage = "mylib"\n\n[options]\ncpp_target = "%s"\n' \
    "$target" >opgen.toml
  opgen new mylib::foo --backend cpp --devices cpu,cuda || return 1
  opgen build -j "$workers" || return 1
  opgen test -rfE
}

arch=$(python3 -c "import torch; print('%d.%d' % torch.cuda.get_device_capability())" 2>/dev/null)
[ -n "$arch" ] && export TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-$arch}"
bench_args=(--json "$out/bench.json")
[ "${GPU_CHECK_DRY:-0}" = 1 ] && bench_args+=(--device cpu --quick --no-compile)

export -f environment reference_tests fresh_project
step environment 60 environment >"$out/environment.txt" 2>&1
step "reference set, CUDA tests" 170 reference_tests cuda >"$out/reference_cuda.log" 2>&1
step "kernel check" 45 python3 bench/gpu_kernel_check.py >"$out/kernel_check.log" 2>&1
step "fresh stable-ABI project" 150 fresh_project stable >"$out/fresh.log" 2>&1
if grep -q '"triton"' opgen/spec/*.py 2>/dev/null; then
  step "fresh triton project" 60 fresh_project triton >"$out/fresh_triton.log" 2>&1
fi
step "bench" 120 python3 bench/gpu_bench.py "${bench_args[@]}" >"$out/bench.md" 2>&1
step "fresh classic project" 120 fresh_project classic >>"$out/fresh.log" 2>&1
step "reference set, CPU tests" 180 reference_tests "not cuda" >"$out/reference_cpu.log" 2>&1
# pytest's closing line of each test run ("12 passed, 3 skipped in 4.56s")
for log in reference_cuda reference_cpu fresh fresh_triton; do
  [ -f "$out/$log.log" ] && grep -E ' in [0-9.]+s( \([0-9:]+\))?$' "$out/$log.log" | sed "s/^/$log: /" >>"$summary"
done
cat "$summary"
