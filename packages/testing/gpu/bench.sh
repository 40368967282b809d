#!/usr/bin/env bash
# A plugin's benchmark on an offline GPU host, run there from the repository root after the
# wheelhouse parts reached $HOME/stage (see packages/testing/gpu/README.md). Carried from the CPU machine:
# .gpu/wheelhouse/part<last> (unless vLLM is already in $HOME/site), .gpu/dist (our wheels,
# `python packages/testing/gpu/stage.py`), .gpu/ref-wheels (the reference library's wheels for the in-process
# baseline; packages/testing/gpu/README.md lists how to download them; for the GLiNER family the
# `--gliner-serve` parts installed into $HOME/ref instead).
# Settings through the environment: PLUGIN (default moderncolbert), REF_IMPORT (a module the
# reference wheels must provide, default pylate.models), CONC (client counts), BS (reference
# batch sizes), OPEN_LOOP=0 to skip the Poisson points, EXTRA (more bench options), BUDGET
# (seconds for the whole script), MACHINE (results folder name, default h100).
set -o pipefail
T0=$(date +%s)
PLUGIN=${PLUGIN:-moderncolbert}
if [ ! -d "$HOME/site/vllm" ]; then
  last=$(ls -d .gpu/wheelhouse/part* | sort -V | tail -1)
  mkdir -p "$HOME/stage" && cp "$last"/* "$HOME/stage/" && bash "$HOME/stage/install.sh" || exit 3
fi
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$HOME/site" \
  .gpu/dist/*.whl || exit 3
# .gpu/ref-wheels: optional where $HOME/ref was filled before (the GLiNER family's
# `packages/testing/gpu/stage.py --gliner-serve` parts, packages/testing/gpu/README.md); REF_IMPORT below checks either way.
if compgen -G ".gpu/ref-wheels/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$HOME/ref" \
    .gpu/ref-wheels/*.whl || exit 4
fi
# The reference wrapper puts the reference wheels first and keeps what the caller adds (the
# bench runs the checkpoint builder with the kit's scripts on PYTHONPATH).
printf '#!/bin/sh\nPYTHONPATH=%s/ref${PYTHONPATH:+:$PYTHONPATH} exec python3 "$@"\n' "$HOME" > "$HOME/refpy"
chmod +x "$HOME/refpy"
"$HOME/refpy" -c "import ${REF_IMPORT:-pylate.models}, transformers, torch; print('ref ok', transformers.__version__, torch.__version__)" || exit 5
export PYTHONPATH=$HOME/site PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
python3 -c "import vllm, matplotlib, tqdm, vllm_factory.testing.bench; print('vllm', vllm.__version__)" || exit 6
echo "setup took $(( $(date +%s) - T0 )) s"
OPEN=()
[ "${OPEN_LOOP:-1}" = 0 ] && OPEN=(--no-open-loop)
LEFT=$(( ${BUDGET:-575} - ($(date +%s) - T0) ))
# shellcheck disable=SC2086  # EXTRA is a list of options
timeout "$LEFT" python3 -m vllm_factory.testing.bench --plugin "$PLUGIN" --device cuda \
  --concurrency "${CONC:-1,16,64,256}" --batch-sizes "${BS:-1,16,64,256}" "${OPEN[@]}" $EXTRA \
  --ref-python "$HOME/refpy" --machine "${MACHINE:-h100}" --out-dir "$OUT" 2>&1 | tee "$OUT/run.log"
rc=$?
echo "bench rc=$rc total $(( $(date +%s) - T0 )) s"
exit $rc
