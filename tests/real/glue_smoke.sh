#!/usr/bin/env bash
# glue_smoke.sh - the real GLUE experiments (experiments/real/*_minilm.toml) end to end in a few steps: the real
# checkpoint loads through models/all-MiniLM-L6-v2 with every encoder tensor found (only the new classifier head is
# "new"), the real MRPC (UTF-8 BOM header) and CoLA TSVs read, a dev evaluation is logged, and `bertx runs table`
# gives the dev metric and the run's wall time. Exit 77 (skip) without the linked checkpoint or the data.
#   glue_smoke.sh BERTX SOURCE_DIR SHARED_DATA_DIR
set -euo pipefail
bertx="$1"; src="$2"; data="$3"
cd "$src"
[[ -f models/all-MiniLM-L6-v2/config.json ]] || { echo "SKIP: models/all-MiniLM-L6-v2 is not linked (tools/setup links it)"; exit 77; }
[[ -d "$data/glue/MRPC" && -d "$data/glue/CoLA" ]] || { echo "SKIP: no GLUE data under $data"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
for task in mrpc cola; do
  dir=MRPC; metric=eval_accuracy
  [[ $task == cola ]] && dir=CoLA metric=eval_mcc
  log="$tmp/$task.log"
  "$bertx" run "experiments/real/${task}_minilm.toml" --set train.epochs=0.02 --set data.data_dir="$data/glue/$dir" \
    --set run.output_dir="$tmp/$task" --set run.store="$tmp/runs.db" --set train.log_freq=1 >"$log" 2>&1 ||
    { tail -n 20 "$log"; fail "bertx run experiments/real/${task}_minilm.toml failed"; }
  # 103 tensors (embeddings 5, 6 layers x 16, pooler 2) of all-MiniLM-L6-v2 loaded; the classifier's weight and bias are the only new ones.
  grep -q "initial weights from .*models/all-MiniLM-L6-v2.*: 103 tensors, 2 new (e.g. classifier\." "$log" ||
    { grep "initial weights" "$log" || true; fail "$task: the checkpoint did not load as 103 tensors + a 2-tensor classifier"; }
  name=$(sed -n 's/^name = "\(.*\)"/\1/p' "experiments/real/${task}_minilm.toml")
  table=$("$bertx" runs --store "$tmp/runs.db" table --experiment "$name" --metric "$metric" --metric wall_s --format csv)
  echo "$table"
  python3 - "$task" "$metric" <<PY || fail "$task: unexpected table"
import csv, io, sys
rows = list(csv.reader(io.StringIO("""$table""")))
assert rows[0] == ["seed", "run", sys.argv[2], "wall_s"], rows[0]
value, wall = float(rows[1][2]), float(rows[1][3])
lo = -1.0 if sys.argv[1] == "cola" else 0.0
assert lo <= value <= 1.0, value
assert 0.0 < wall < 600.0, wall
PY
done
echo "PASS: real GLUE experiments load all-MiniLM-L6-v2, train, evaluate and tabulate"
