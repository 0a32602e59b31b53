#!/usr/bin/env bash
# tools/gpu/check.sh - build bertx on a GPU machine against the LibTorch inside its Python PyTorch (CUDA),
# run the parity tests, and benchmark a BERT-large phase-1 training step (AMP) and SQuAD inference.
#
# GPU machines may have no package registry: fetch the Debian -dev packages beforehand on a machine with one
#   tools/gpu/check.sh --fetch-debs debs/      (apt-get download of the list below, with dependencies)
# and carry debs/ over; this script unpacks them into a prefix with dpkg -x (no root, no apt) and builds:
#   tools/gpu/check.sh --debs debs/ [--build build-gpu] [--batch 256] [--steps 20]
# Prints the figures and appends them to docs/performance.md's log file runs/gpu-check/results.jsonl.
# Needs: python3 with torch (CUDA build, C++11 ABI), nvcc (CUDA_HOME or /usr/local/cuda), cmake >= 3.22, ninja or make.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
DEB_PACKAGES="libtomlplusplus-dev libtomlplusplus3 libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 libsqlite3-dev
  libhdf5-dev libhdf5-103-1 libhdf5-hl-100 libsz2 libaec0 libcurl4 libboost-dev libboost1.74-dev libcli11-dev
  nlohmann-json3-dev libutf8proc-dev libutf8proc2 doctest-dev libbz2-dev zlib1g-dev libgloo-dev"
DEBS="" BUILD="$ROOT/build-gpu" BATCH=256 STEPS=20 FETCH=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --debs) DEBS="$2"; shift 2 ;;
    --build) BUILD="$2"; shift 2 ;;
    --batch) BATCH="$2"; shift 2 ;;
    --steps) STEPS="$2"; shift 2 ;;
    --fetch-debs) FETCH="$2"; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "tools/gpu/check.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

if [[ -n "$FETCH" ]]; then  # on a machine with Debian's registry
  mkdir -p "$FETCH" && cd "$FETCH"
  # shellcheck disable=SC2086
  apt-get download $DEB_PACKAGES
  echo "fetched $(ls ./*.deb | wc -l) packages into $FETCH: carry it to the GPU machine and pass --debs"
  exit 0
fi

PY="${PYTHON:-python3}"
TORCH_PREFIX="$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null)" ||
  { echo "tools/gpu/check.sh: $PY cannot import torch: install PyTorch with CUDA (or set PYTHON)" >&2; exit 2; }
read -r TORCH_VERSION TORCH_CUDA ABI < <("$PY" -c 'import torch; print(torch.__version__, torch.version.cuda, int(torch._C._GLIBCXX_USE_CXX11_ABI))')
[[ "$TORCH_CUDA" != "None" ]] || { echo "tools/gpu/check.sh: torch $TORCH_VERSION has no CUDA" >&2; exit 2; }
[[ "$ABI" == "1" ]] || { echo "tools/gpu/check.sh: torch $TORCH_VERSION uses the pre-C++11 ABI; Debian's libraries need the C++11 ABI (use torch >= 2.7 wheels)" >&2; exit 2; }
echo "torch $TORCH_VERSION (CUDA $TORCH_CUDA) at $TORCH_PREFIX"

PREFIX_PATH="$TORCH_PREFIX"
if [[ -n "$DEBS" ]]; then  # unpack the carried .debs into a private prefix
  SYSROOT="$BUILD/debroot"
  mkdir -p "$SYSROOT"
  for deb in "$DEBS"/*.deb; do dpkg -x "$deb" "$SYSROOT"; done
  PREFIX_PATH="$PREFIX_PATH;$SYSROOT/usr;$SYSROOT/usr/lib/x86_64-linux-gnu/cmake"
  export CPATH="$SYSROOT/usr/include:$SYSROOT/usr/include/hdf5/serial${CPATH:+:$CPATH}"
  export LIBRARY_PATH="$SYSROOT/usr/lib/x86_64-linux-gnu${LIBRARY_PATH:+:$LIBRARY_PATH}"
  export LD_LIBRARY_PATH="$SYSROOT/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PKG_CONFIG_PATH="$SYSROOT/usr/lib/x86_64-linux-gnu/pkgconfig:$SYSROOT/usr/share/pkgconfig"
fi
export CUDACXX="${CUDACXX:-${CUDA_HOME:-/usr/local/cuda}/bin/nvcc}"
GEN=$(command -v ninja >/dev/null && echo Ninja || echo "Unix Makefiles")
cmake -S "$ROOT" -B "$BUILD" -G "$GEN" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PREFIX_PATH" \
  -DBERTX_SLOW_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=native
cmake --build "$BUILD" -j "$(nproc)"

echo "== parity tests (golden label)"
ctest --test-dir "$BUILD" -L golden --output-on-failure -j 4

OUT="$ROOT/runs/gpu-check"
mkdir -p "$OUT"
echo "== BERT-large phase-1 step (seq 128, 20 predictions, batch $BATCH, AMP fp16, LAMB)"
"$BUILD/bin/bertx" bench train --model bert-large-uncased --seq-len 128 --max-preds 20 --batch "$BATCH" --steps "$STEPS" \
  --warmup 5 --precision amp --optimizer lamb --device cuda --out "$OUT/phase1" --store "$OUT/runs.db" | tee "$OUT/phase1.log"
echo "== the same in bf16 autocast"
"$BUILD/bin/bertx" bench train --model bert-large-uncased --seq-len 128 --max-preds 20 --batch "$BATCH" --steps "$STEPS" \
  --warmup 5 --precision amp-bf16 --optimizer lamb --device cuda --out "$OUT/phase1-bf16" --store "$OUT/runs.db" | tee "$OUT/phase1-bf16.log"
echo "== SQuAD inference (BERT-large, seq 384, batch 8, fp16)"
"$BUILD/bin/bertx" bench infer --task squad --model bert-large-uncased --seq-len 384 --batch 8 --steps 50 --precision fp16 \
  --device cuda | tee "$OUT/squad.log"
{
  echo "{\"date\": \"$(date -u +%FT%TZ)\", \"gpu\": \"$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)\", \"torch\": \"$TORCH_VERSION\","
  echo " \"phase1_amp\": $(tail -1 "$OUT/phase1.log"), \"phase1_bf16\": $(tail -1 "$OUT/phase1-bf16.log"), \"squad_fp16\": $(tail -1 "$OUT/squad.log")}"
} | tr -d '\n' >> "$OUT/results.jsonl"
echo >> "$OUT/results.jsonl"
echo "figures appended to $OUT/results.jsonl (copy them into docs/performance.md with the machine and command)"
