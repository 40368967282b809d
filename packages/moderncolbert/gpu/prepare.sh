#!/usr/bin/env bash
# Prepare, on the CPU machine, everything a GPU parity run needs, under <repo>/.gpu/ (ignored):
#   .gpu/wheelhouse/part1..partN  CUDA vLLM 0.26.0 + its extra wheels, in <=58 MiB parts
#                                 (the last part holds install.sh), from
#                                 /work/shared/gpu/prepare-wheelhouse.sh
#   .gpu/ours/                    our 5 wheels (core, kernels, modernbert, colbert, moderncolbert)
#   .gpu/data/                    the tiny PyLate checkpoint, the PyLate CPU reference, the corpus
# Usage: packages/moderncolbert/gpu/prepare.sh [--skip-wheelhouse]
#   --skip-wheelhouse  keep an existing .gpu/wheelhouse (rebuild only our wheels and data)
# Env: PIP (default /work/venvs/serve/bin/pip), WHEELHOUSE_SCRIPT, ARTIFACTS.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../../.." && pwd)
pip=${PIP:-/work/venvs/serve/bin/pip}
wheelhouse_script=${WHEELHOUSE_SCRIPT:-/work/shared/gpu/prepare-wheelhouse.sh}
artifacts=${ARTIFACTS:-$repo/.artifacts/moderncolbert}
gpu=$repo/.gpu
cd "$repo"

# .gpu/ must never travel by accident nor be committed.
mkdir -p .git/info
grep -qxF '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude

if [ "${1:-}" != "--skip-wheelhouse" ] || [ ! -d "$gpu/wheelhouse" ]; then
  rm -rf "$gpu/wheelhouse"
  bash "$wheelhouse_script" "$gpu/wheelhouse"
fi

rm -rf "$gpu/ours" "$gpu/data"
mkdir -p "$gpu/ours" "$gpu/data"
for p in core kernels-pkg packages/modernbert packages/colbert packages/moderncolbert; do
  "$pip" wheel -q --no-deps --no-build-isolation -w "$gpu/ours" "$repo/$p" 2>/dev/null \
    || "$pip" wheel -q --no-deps -w "$gpu/ours" "$repo/$p"
done
n=$(ls "$gpu/ours"/*.whl | wc -l)
[ "$n" -eq 5 ] || { echo "expected 5 wheels in $gpu/ours, found $n" >&2; exit 1; }

cp -r "$artifacts/checkpoint" "$gpu/data/checkpoint"
cp "$artifacts/ref-pylate.npz" "$gpu/data/ref-pylate.npz"
cp "$repo/packages/moderncolbert/reference/corpus.json" "$gpu/data/corpus.json"

echo "== prepared under $gpu"
du -sh "$gpu"/wheelhouse/part* "$gpu/ours" "$gpu/data"
ls "$gpu/ours"
# What travels with every call besides carried paths (must stay well under 64 MiB):
echo "working tree that travels: $(git ls-files -co --exclude-standard -z | du -cb --files0-from=- | tail -1 | cut -f1) bytes"
