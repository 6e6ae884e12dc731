#!/usr/bin/env bash
# Real Apptainer on a Debian 12 test machine, and a small base image for the container tests.
#   tests/apptainer/install.sh [PREFIX]      (root; default prefix /opt/rlvr-apptainer)
# Debian 12 has no apptainer package: take 1.4.x from sid and a glibc >= 2.38 from trixie into a private
# prefix, point the binaries at that glibc, and leave the system libc alone. Facts and the sandbox's
# obstacles: docs/test-cluster.md.
set -euo pipefail

PREFIX=${1:-/opt/rlvr-apptainer}
BASE_IMAGE=${RLVR_APPTAINER_BASE:-/var/lib/rlvr-apptainer/bookworm-minbase.sif}
VENV_BASE_IMAGE=${RLVR_APPTAINER_VENV_BASE:-/var/lib/rlvr-apptainer/bookworm-venv-torch.sif}
log() { echo "apptainer-install: $*" >&2; }

debian_mirror() {
  # The machine's configured Debian mirror (deb822 or one-line sources), not its security archive.
  local found
  found=$(cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
    | grep -E '^(URIs:|deb )' | grep -oE 'https?://[^ ]*' | grep -v security | head -1 || true)
  echo "${found:-http://deb.debian.org/debian}"
}

install_host_packages() {
  local missing=()
  for tool in mksquashfs newuidmap patchelf mkfs.ext4 fuse2fs squashfuse fuse-overlayfs debootstrap; do
    command -v "$tool" >/dev/null || missing+=("$tool")
  done
  [ ${#missing[@]} -eq 0 ] && return
  apt-get update -qq
  apt-get install -y -qq squashfs-tools uidmap patchelf e2fsprogs fuse2fs squashfuse fuse-overlayfs \
    debootstrap >/dev/null
}

install_apptainer() {
  if [ -e "$PREFIX/.installed" ]; then
    return
  fi
  local work mirror
  work=$(mktemp -d)
  mirror=$(debian_mirror)
  # A throwaway apt state: the machine's own package lists stay on bookworm.
  mkdir -p "$work"/{lists/partial,cache/partial,debs}
  cat > "$work/sources.list" <<SRC
deb [trusted=yes] $mirror sid main
deb [trusted=yes] $mirror trixie main
SRC
  local opts=(-o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o "Dir::Etc::SourceList=$work/sources.list"
    -o "Dir::Etc::SourceParts=-" -o "APT::Get::List-Cleanup=0" -o "Acquire::AllowInsecureRepositories=1")
  apt-get "${opts[@]}" update -qq
  (cd "$work/debs" && apt-get "${opts[@]}" download apptainer "libc6/trixie" >/dev/null)
  rm -rf "$PREFIX" && mkdir -p "$PREFIX"
  for deb in "$work"/debs/*.deb; do dpkg-deb -x "$deb" "$PREFIX"; done
  local loader=$PREFIX/usr/lib64/ld-linux-x86-64.so.2
  [ -e "$loader" ] || loader=$PREFIX/lib64/ld-linux-x86-64.so.2
  local libc_dir=$PREFIX/usr/lib/x86_64-linux-gnu
  [ -e "$libc_dir/libc.so.6" ] || libc_dir=$PREFIX/lib/x86_64-linux-gnu
  for binary in "$PREFIX/usr/bin/apptainer" $(find "$PREFIX/usr" -path '*/apptainer/bin/starter*' -type f); do
    patchelf --set-interpreter "$loader" --force-rpath --set-rpath "$libc_dir:/lib/x86_64-linux-gnu" "$binary"
  done
  # The starter looks for its configuration one level off from where the package puts it.
  mv "$PREFIX/etc" "$PREFIX/usr/etc"
  ln -sfn ../etc "$PREFIX/usr/lib/etc"
  mv "$PREFIX/var" "$PREFIX/usr/var"
  ln -sfn ../var "$PREFIX/usr/lib/var"
  ln -sfn apptainer "$PREFIX/usr/bin/singularity"
  rm -rf "$work"
  touch "$PREFIX/.installed"
}

configure() {
  # This sandbox's bounding set lacks CAP_SYS_RESOURCE: root gets file capabilities only.
  local conf=$PREFIX/usr/etc/apptainer/apptainer.conf
  sed -i 's/^root default capabilities = .*/root default capabilities = file/' "$conf"
  grep -q '^root default capabilities = file' "$conf"
  # ...and then needs these explicitly: unpacking a base image chowns its files, a %post installs.
  "$PREFIX/usr/bin/apptainer" capability add --user root \
    CAP_CHOWN,CAP_DAC_OVERRIDE,CAP_FOWNER,CAP_FSETID,CAP_KILL,CAP_SETGID,CAP_SETUID,CAP_SETPCAP,CAP_NET_BIND_SERVICE,CAP_NET_RAW,CAP_SYS_CHROOT,CAP_MKNOD,CAP_AUDIT_WRITE,CAP_SETFCAP \
    2>/dev/null
  # --fakeroot builds need a subordinate id range for root.
  for file in /etc/subuid /etc/subgid; do
    grep -q '^root:' "$file" 2>/dev/null || echo "root:100000:65536" >> "$file"
  done
  ln -sfn "$PREFIX/usr/bin/apptainer" /usr/local/bin/apptainer
  ln -sfn "$PREFIX/usr/bin/apptainer" /usr/local/bin/singularity
}

build_base_image() {
  # Debian 12 (the host's glibc) and the libraries Python needs: the test containers bind the host's
  # Python environment in.
  [ -s "$BASE_IMAGE" ] && return
  local rootfs
  rootfs=$(mktemp -d)
  # The shared libraries a CPython build (pyenv's included) links against beyond minbase.
  debootstrap --variant=minbase \
    --include=libssl3,libffi8,libsqlite3-0,liblzma5,libbz2-1.0,zlib1g,libncursesw6,libreadline8,libuuid1,libgdbm6,ca-certificates,procps \
    bookworm "$rootfs" "$(debian_mirror)" >/dev/null
  rm -rf "${rootfs:?}/dev" && mkdir "$rootfs/dev"
  mkdir -p "$(dirname "$BASE_IMAGE")"
  apptainer build --force "$BASE_IMAGE" "$rootfs" >/dev/null
  rm -rf "$rootfs"
}

build_venv_torch_base() {
  # The test machine's stand-in for a LUMI AI Factory image: a Python of its own (Debian's 3.11.2, so
  # any mix with the host's 3.11.x fails loudly) in /opt/venv with torch already installed. The
  # workflow adds verl and Ray on top with the same definition as on LUMI (containers/verl-venv.def.in).
  [ -s "$VENV_BASE_IMAGE" ] && return
  local wheels=${PIP_FIND_LINKS:-/opt/wheels} def
  def=$(mktemp --suffix=.def)
  cat > "$def" <<DEF
Bootstrap: localimage
From: $BASE_IMAGE

%labels
    org.rlvr-scaling.role venv-torch-base
    org.rlvr-scaling.torch 2.13.0+cpu

%post
    set -eu
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends python3 python3-venv >/dev/null
    apt-get clean
    rm -rf /var/lib/apt/lists/*
    python3 -m venv /opt/venv
    # /mnt: the machine's CPU torch wheel (pip install torch==2.13.0 takes it; anything else is GBs).
    PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 /opt/venv/bin/pip install -q --find-links /mnt torch==2.13.0

%environment
    export PATH=/opt/venv/bin:\$PATH
DEF
  # The host's CA bundle at build time only: this network intercepts TLS (not baked into the image).
  apptainer build --fakeroot --force --bind "$wheels:/mnt" \
    --bind /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt \
    --mksquashfs-args "-comp zstd -Xcompression-level 3" "$VENV_BASE_IMAGE" "$def" >/dev/null
  rm -f "$def"
}

install_host_packages
install_apptainer
configure
build_base_image
build_venv_torch_base
apptainer --version
apptainer exec "$BASE_IMAGE" /bin/true
apptainer exec "$VENV_BASE_IMAGE" /opt/venv/bin/python -W ignore -c 'import torch; print("venv base: torch", torch.__version__)'
log "ready: $(command -v apptainer), base images $BASE_IMAGE $VENV_BASE_IMAGE"
