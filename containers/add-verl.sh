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
# A conflict the install leaves (a package moved out of a kept package's range, a requirement missing)
# stops the build, named: an image whose engines' requirements are broken would fail only in a run.
# The base's own conflicts, found before the install, are the base's (it cannot change what it keeps)
# and only printed. Conflicts known to be harmless would be listed in `allowed`, one extended regex
# alternative each with its reason; there are none: the CI images (Debian venv + CPU torch) and the
# workflow's own environment pass pip check as they are.
allowed=''
check() { "$python" -m pip check > "$1" 2>&1 || true; grep -v '^No broken requirements found' "$1" > "$1.tmp" || true; mv "$1.tmp" "$1"; }
check "$state/rlvr-scaling-pip-check-base.txt"
# shellcheck disable=SC2086
"$python" -m pip install --constraint "$state/rlvr-scaling-keep.txt" $lock "$verl" "$@"
check "$state/rlvr-scaling-pip-check.txt"
grep -vxF -f "$state/rlvr-scaling-pip-check-base.txt" "$state/rlvr-scaling-pip-check.txt" > "$state/rlvr-scaling-pip-check-new.txt" || true
if [ -n "$allowed" ]; then
    grep -vE "$allowed" "$state/rlvr-scaling-pip-check-new.txt" > "$state/rlvr-scaling-pip-check-left.txt" || true
else
    cp "$state/rlvr-scaling-pip-check-new.txt" "$state/rlvr-scaling-pip-check-left.txt"
fi
if [ -s "$state/rlvr-scaling-pip-check-base.txt" ]; then
    echo "rlvr-scaling: the base's own pip check conflicts (before the install; the base's, not stopped on):"
    cat "$state/rlvr-scaling-pip-check-base.txt"
fi
if [ -s "$state/rlvr-scaling-pip-check-left.txt" ]; then
    echo "rlvr-scaling: pip check: the install left $(wc -l < "$state/rlvr-scaling-pip-check-left.txt") conflicts;" \
        "each names the package whose requirement is broken, the requirement and the version installed:"
    sed 's/^/  conflict: /' "$state/rlvr-scaling-pip-check-left.txt"
    echo "rlvr-scaling: the build stops; keep the base's version (pin it in container.requirements) or change" \
        "the install (rlvr-scaling resolve-check --site SITE names the kept packages' requirements)"
    exit 1
fi
"$python" -m pip list --format=freeze > "$state/rlvr-scaling-pip-freeze.txt"
