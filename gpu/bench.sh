#!/usr/bin/env bash
# The GPU benchmark, run on the GPU machine from the repository root (see
# ../benchmarks/README.md, "GPU run on the lent H100"). Needs, carried from the CPU machine:
# .gpu/wheelhouse/part7 (after parts 1-6 were copied to $HOME/stage), .gpu/ours, .gpu/ref-wheels.
# Settings through the environment: CONC (client counts), BS (PyLate batch sizes),
# OPEN_LOOP=0 to skip the Poisson points, EXTRA (more bench options), BUDGET (seconds).
set -o pipefail
T0=$(date +%s)
[ -d "$HOME/site/vllm" ] || {
  mkdir -p "$HOME/stage" && cp .gpu/wheelhouse/part7/* .gpu/ours/*.whl "$HOME/stage/" \
    && bash "$HOME/stage/install.sh"
} || exit 3
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$HOME/ref" \
  .gpu/ref-wheels/*.whl || exit 4
printf '#!/bin/sh\nPYTHONPATH=%s/ref exec python3 "$@"\n' "$HOME" > "$HOME/refpy"
chmod +x "$HOME/refpy"
"$HOME/refpy" -c "import pylate.models, transformers, torch; print('ref ok', transformers.__version__, torch.__version__)" || exit 5
export PYTHONPATH=$HOME/site PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
python3 -c "import vllm, matplotlib, tqdm, vllm_factory.core.testing.bench; print('vllm', vllm.__version__)" || exit 6
echo "setup took $(( $(date +%s) - T0 )) s"
OPEN=()
[ "${OPEN_LOOP:-1}" = 0 ] && OPEN=(--no-open-loop)
LEFT=$(( ${BUDGET:-575} - ($(date +%s) - T0) ))
# shellcheck disable=SC2086  # EXTRA is a list of options
timeout "$LEFT" python3 -m vllm_factory.core.testing.bench --plugin moderncolbert --device cuda \
  --concurrency "${CONC:-1,16,64,256}" --batch-sizes "${BS:-1,16,64,256}" "${OPEN[@]}" $EXTRA \
  --ref-python "$HOME/refpy" --machine h100 --out-dir "$OUT" 2>&1 | tee "$OUT/run.log"
rc=$?
tar czf "$OUT/server-logs.tgz" /tmp/vllm-server-*.log 2>/dev/null
echo "bench rc=$rc total $(( $(date +%s) - T0 )) s"
exit $rc
