#!/bin/sh
# Adds verl (and the engine's further requirements) to a Python environment that already holds the
# accelerator stack: the base image's own (definition builds, containers/verl-venv.def.in) or a venv
# created inside the base image with --system-site-packages (SquashFS builds,
# containers/verl-venv-squashfs.sh.in). Run inside the base image.
#   add-verl.sh PYTHON STATE_DIR VERL_REQUIREMENT CONSTRAINT_FILE|- [REQUIREMENT ...]
# Writes STATE_DIR/rlvr-scaling-base-packages.txt, -keep.txt and -pip-freeze.txt.
set -eu
python=$1 state=$2 verl=$3 constraint=$4
shift 4
export PIP_NO_CACHE_DIR=1 PIP_PROGRESS_BAR=off PIP_DISABLE_PIP_VERSION_CHECK=1
# What the base brings for the accelerator stays as it is: pip may add packages around it, never
# replace it (a PyPI torch would be a CUDA or CPU build, not the base's).
"$python" -m pip --version || "$python" -m ensurepip
# The resolve check (rlvr_scaling.inputs.resolve_check) reads this line: keep it one line.
keep='^(torch|torchvision|torchaudio|vllm|megatron[-_]core|transformer[-_]engine[-_a-z0-9]*|flash[-_]attn|triton|triton[-_]rocm|pytorch[-_]triton[-_]rocm|apex|aiter|amdsmi|torchao|numpy)=='
"$python" -m pip list --format=freeze > "$state/rlvr-scaling-base-packages.txt"
grep -iE "$keep" "$state/rlvr-scaling-base-packages.txt" > "$state/rlvr-scaling-keep.txt" || true
echo "kept from the base image:"; cat "$state/rlvr-scaling-keep.txt"
grep -qi '^torch==' "$state/rlvr-scaling-keep.txt" || { echo "rlvr-scaling: the base image has no torch for $python"; exit 1; }
if [ "$constraint" = "-" ]; then lock=""; else lock="--constraint $constraint"; fi
# shellcheck disable=SC2086
"$python" -m pip install --constraint "$state/rlvr-scaling-keep.txt" $lock "$verl" "$@"
"$python" -m pip check || echo "rlvr-scaling: pip check reports conflicts (above); the preflight decides"
"$python" -m pip list --format=freeze > "$state/rlvr-scaling-pip-freeze.txt"
