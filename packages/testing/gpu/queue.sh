#!/usr/bin/env bash
# A queue of GPU jobs on the offline host, started detached after the staging transfers, so
# that the device calls after it only wait and fetch (packages/testing/gpu/README.md, "A queue of jobs").
#
#   REPO=$PWD setsid nohup bash packages/testing/gpu/queue.sh JOBS > $HOME/q.out 2>&1 &   # from the checkout
#   bash packages/testing/gpu/queue.sh --wait NAME SECONDS     # in each later call: wait for a job, then pack
#
# JOBS: a file of lines `NAME SECONDS COMMAND...` (blank lines and `#` comments skipped), run
# one after the other from the checkout, each under `timeout SECONDS`, with $R (the results
# folder, $HOME/res), $REFPY (the reference interpreter), PYTHONPATH=$HOME/site, py-spy (from
# the bench references) on PATH and $VLLM_FACTORY_COMMIT (the staged wheels' commit, from
# .gpu/dist/COMMIT, which the runs' file names give). First the set-up: the vLLM wheelhouse parts in $HOME/stage
# (their install.sh), our wheels in $HOME/dist, and, where present, the bench references in
# $HOME/bench-refs. Every finished job (and the set-up) adds `NAME rc CODE SECONDS` to
# $R/progress; `--wait` returns once NAME (or `all`, the end of the queue) is there or SECONDS
# have passed, and packs $R into $OUT/q.tgz (without torch-profiler traces, which are large;
# their tables stay).
set -o pipefail
R=$HOME/res
pack() {
  tar czf "$OUT/q.tgz" -C "$HOME" --exclude='*.pt.trace.json*' --exclude='*.json.gz' res
  cat "$R/progress" 2>/dev/null
}
if [ "$1" = --wait ]; then
  end=$(( $(date +%s) + ${3:-540} ))
  until grep -qE "^($2|all) " "$R/progress" 2>/dev/null || [ "$(date +%s)" -ge "$end" ]; do
    sleep 5
  done
  pack
  exit 0
fi
JOBS=$(realpath "$1") || exit 2
T0=$(date +%s)
mkdir -p "$R"
cd "${REPO:?set REPO to the checkout}" || exit 2
say() { echo "$1 rc $2 $(( $(date +%s) - T0 ))s" >> "$R/progress"; }
setup() {
  ( cd "$HOME/stage" && bash install.sh ) || return 3
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$HOME/site" \
    "$HOME"/dist/*.whl || return 4
  if [ -f "$HOME/bench-refs/install.sh" ]; then
    ( cd "$HOME/bench-refs" && bash install.sh ) || return 5
  fi
  # The bench's --py-spy finds py-spy on PATH; a --target install leaves it in $HOME/ref/bin.
  mkdir -p "$HOME/tools"
  [ -x "$HOME/ref/bin/py-spy" ] && ln -sf "$HOME/ref/bin/py-spy" "$HOME/tools/py-spy"
  printf '#!/bin/sh\nPYTHONPATH=%s/ref${PYTHONPATH:+:$PYTHONPATH} exec python3 "$@"\n' \
    "$HOME" > "$HOME/refpy"
  chmod +x "$HOME/refpy"
  PYTHONPATH=$HOME/site python3 -c "import vllm, vllm_factory.testing.bench" || return 6
  nvidia-smi || true
}
setup > "$R/setup.log" 2>&1
code=$?
say setup "$code"
[ "$code" = 0 ] || { say all "$code"; exit "$code"; }
export R REFPY=$HOME/refpy PYTHONPATH=$HOME/site PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
# Runs name the commit the staged wheels were built from (stage.py writes it), not the one of
# this copy's .git, which can lag it.
[ -f .gpu/dist/COMMIT ] && export VLLM_FACTORY_COMMIT="$(cat .gpu/dist/COMMIT)"
export PATH=$HOME/tools:$PATH
while read -r name seconds command; do
  case "$name" in '' | '#'*) continue ;; esac
  timeout "$seconds" bash -c "$command" < /dev/null > "$R/$name.log" 2>&1
  say "$name" $?
done < "$JOBS"
say all 0
