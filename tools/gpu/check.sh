#!/usr/bin/env bash
# tools/gpu/check.sh - the first GPU session's one command: build bertx on the device machine against its
# python3's LibTorch (2.11.0+cu130, the pin in tools/requirements-torch.txt), run golden parity on CUDA (fp32 and
# bf16), a BERT-large phase-1 AMP training benchmark and a 1-GPU pre-training smoke run; figures under $OUT.
#
# Here (a machine with Debian's registry and ../shared), once before the session:
#   tools/gpu/check.sh --stage           .debs/ (Debian -dev packages, apt-get download) and shared/ (a copy of
#                                        ../shared/{golden,data}: the device gets the checkout, not ../shared)
#   tools/gpu/check.sh --dry-run         everything but the GPU parts, with .venv's torch and build/ (no CUDA device)
# On the device (device tool: carry [".debs"]; shared/ travels by itself), within one 10-minute command:
#   tools/gpu/check.sh --debs .debs [--build build-gpu] [--batch 64] [--steps 20]
# The .debs are unpacked with dpkg -x into a private prefix (no root, no apt). Writes $OUT/check.log,
# $OUT/results.json (one JSON object: torch, GPU, parity, benchmark and smoke figures) and the bench logs.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
DEB_PACKAGES="libtomlplusplus-dev libtomlplusplus3 libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 libsqlite3-dev
  libhdf5-dev libhdf5-103-1 libhdf5-hl-100 libhdf5-cpp-103-1 libsz2 libaec0 libaec-dev libcurl4 libboost-dev
  libboost1.74-dev libcli11-dev nlohmann-json3-dev libutf8proc-dev libutf8proc2 doctest-dev libbz2-dev zlib1g-dev
  libgloo-dev"
DEBS="" BUILD="$ROOT/build-gpu" BATCH=64 STEPS=20 MODE=device
while [[ $# -gt 0 ]]; do
  case "$1" in
    --debs) DEBS="$2"; shift 2 ;;
    --build) BUILD="$2"; shift 2 ;;
    --batch) BATCH="$2"; shift 2 ;;
    --steps) STEPS="$2"; shift 2 ;;
    --stage) MODE=stage; shift ;;
    --dry-run) MODE=dry; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "tools/gpu/check.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

if [[ "$MODE" == stage ]]; then
  mkdir -p "$ROOT/.debs" "$ROOT/shared"
  (cd "$ROOT/.debs" && apt-get download $DEB_PACKAGES >/dev/null)  # word splitting intended
  cp -r "$ROOT/../shared/golden" "$ROOT/../shared/data" "$ROOT/shared/"
  grep -qx '/.debs/' "$ROOT/.git/info/exclude" 2>/dev/null || echo '/.debs/' >> "$ROOT/.git/info/exclude"
  echo "staged: .debs/ $(du -sh "$ROOT/.debs" | cut -f1), shared/ $(du -sh "$ROOT/shared" | cut -f1) (the device tree may hold 64 MiB)"
  exit 0
fi

OUT="${OUT:-$ROOT/runs/gpu-check}"
mkdir -p "$OUT"
exec > >(tee "$OUT/check.log") 2>&1
t0=$SECONDS
stamp() { echo "== $(( SECONDS - t0 )) s: $*"; }

if [[ "$MODE" == dry ]]; then
  PY="$ROOT/.venv/bin/python"
  [[ "$BUILD" == "$ROOT/build-gpu" ]] && BUILD="$ROOT/build"
else
  PY="$(command -v "${PYTHON:-python3}")"
fi
pin="$(grep -E '^torch==' "$ROOT/tools/requirements-torch.txt")"
read -r TORCH_VERSION TORCH_CUDA < <("$PY" -c 'import torch; print(torch.__version__, torch.version.cuda)') ||
  { echo "tools/gpu/check.sh: $PY cannot import torch" >&2; exit 2; }
[[ "${TORCH_VERSION%%+*}" == "${pin#torch==}" ]] ||
  { echo "tools/gpu/check.sh: $PY has torch $TORCH_VERSION, bertx pins ${pin} (tools/requirements-torch.txt)" >&2; exit 2; }
[[ "$TORCH_CUDA" != None ]] || { echo "tools/gpu/check.sh: torch $TORCH_VERSION has no CUDA" >&2; exit 2; }
stamp "torch $TORCH_VERSION (CUDA $TORCH_CUDA) from $PY"

PREFIX_PATH=""
if [[ -n "$DEBS" ]]; then  # the carried .debs, unpacked into a private prefix
  SYSROOT="$BUILD/debroot"
  mkdir -p "$SYSROOT"
  for deb in "$DEBS"/*.deb; do dpkg -x "$deb" "$SYSROOT"; done
  PREFIX_PATH="$SYSROOT/usr;$SYSROOT/usr/lib/x86_64-linux-gnu/cmake"
  export CPATH="$SYSROOT/usr/include:$SYSROOT/usr/include/hdf5/serial${CPATH:+:$CPATH}"
  export LIBRARY_PATH="$SYSROOT/usr/lib/x86_64-linux-gnu${LIBRARY_PATH:+:$LIBRARY_PATH}"
  export LD_LIBRARY_PATH="$SYSROOT/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PKG_CONFIG_PATH="$SYSROOT/usr/lib/x86_64-linux-gnu/pkgconfig:$SYSROOT/usr/share/pkgconfig"
fi
SHARED="$ROOT/shared"
[[ -d "$SHARED/golden" ]] || SHARED="$ROOT/../shared"
[[ -d "$SHARED/golden" ]] || { echo "tools/gpu/check.sh: no golden data in $ROOT/shared or ../shared (run --stage here first)" >&2; exit 2; }
export CUDACXX="${CUDACXX:-${CUDA_HOME:-/usr/local/cuda}/bin/nvcc}"
# The same settings as the `default` preset (CMakePresets.json), with the device's python3 and without the slow
# e2e tests; TORCH_CUDA_ARCH_LIST 9.0 is the H200 (bertx compiles no .cu files: it only steers Caffe2's set-up).
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBERTX_TORCH_PYTHON="$PY" \
  -DTORCH_CUDA_ARCH_LIST=9.0 -DBERTX_SHARED_DIR="$SHARED" ${PREFIX_PATH:+-DCMAKE_PREFIX_PATH="$PREFIX_PATH"} \
  $([[ "$MODE" == dry ]] || echo -DBERTX_SLOW_TESTS=OFF) >/dev/null
cmake --build "$BUILD" -j "$(nproc)"
BERTX="$BUILD/bin/bertx"
stamp "built: $("$BERTX" --version)"

status() { [[ $1 == 0 ]] && echo true || echo false; }
# Golden parity on every device the tests see (tests/golden: device x dtype; CUDA in fp32 and bf16 when present).
set +e
ctest --test-dir "$BUILD" -L golden --output-on-failure -j 4 > "$OUT/golden.log" 2>&1
golden=$?
set -e
stamp "golden parity: $(grep -E 'tests passed|tests failed' "$OUT/golden.log" | tail -1)"

if [[ "$MODE" == dry ]]; then
  # No GPU here: the GPU steps must refuse with one line, not crash.
  set +e
  "$BERTX" bench train --model bert-large-uncased --seq-len 128 --max-preds 20 --batch 2 --steps 1 --warmup 0 \
    --precision amp --optimizer lamb --device cuda --out "$OUT/phase1" --store "$OUT/runs.db" > "$OUT/phase1.log" 2>&1
  rc=$?
  set -e
  [[ $rc != 0 ]] && grep -q "CUDA" "$OUT/phase1.log" ||
    { echo "tools/gpu/check.sh: --dry-run: bench train --device cuda did not refuse plainly:"; cat "$OUT/phase1.log"; exit 1; }
  stamp "dry run: bench train --device cuda refused with: $(tail -1 "$OUT/phase1.log")"
  [[ $golden == 0 ]] || exit 1
  exit 0
fi

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
bench() {  # name, extra arguments: one bertx bench train, its JSON line kept
  local name=$1; shift
  "$BERTX" bench train --model bert-large-uncased --seq-len 128 --max-preds 20 --batch "$BATCH" --steps "$STEPS" \
    --warmup 5 --optimizer lamb --device cuda --out "$OUT/$name" --store "$OUT/runs.db" "$@" > "$OUT/$name.log" 2>&1 &&
    tail -1 "$OUT/$name.log" || echo null
}
stamp "BERT-large phase 1 (seq 128, 20 predictions, batch $BATCH, LAMB), AMP fp16"
phase1_amp="$(bench phase1-amp --precision amp)"
stamp "the same in bf16 autocast"
phase1_bf16="$(bench phase1-bf16 --precision amp-bf16)"
stamp "1-GPU pre-training smoke: experiments/phase1_gpu_smoke.toml (BERT-large phase 1, AMP, 60 steps, synthetic)"
set +e
"$BERTX" run "$ROOT/experiments/phase1_gpu_smoke.toml" --set run.output_dir="$OUT/smoke" \
  --set run.store="$OUT/runs.db" > "$OUT/smoke.log" 2>&1
smoke=$?
set -e
[[ -f "$OUT/smoke/bert/phase1/60/model.safetensors" ]] || smoke=1  # the final checkpoint
stamp "smoke run exit $smoke, last lines:"
tail -3 "$OUT/smoke.log"
cat > "$OUT/results.json" <<EOF
{"date": "$(date -u +%FT%TZ)", "gpu": "$(head -1 "$OUT/gpu.txt")", "torch": "$TORCH_VERSION", "bertx": "$("$BERTX" --version)",
 "golden_passed": $(status $golden), "smoke_passed": $(status $smoke), "phase1_amp": ${phase1_amp:-null}, "phase1_bf16": ${phase1_bf16:-null},
 "seconds": $(( SECONDS - t0 ))}
EOF
stamp "figures in $OUT/results.json (copy them into docs/performance.md with the machine and command)"
