#!/usr/bin/env bash
# The container test: builds the CPU-only image of the Containerfile from this checkout and
# tests it, on a machine that reaches no container registry (docs/container.md, "Testing the
# image"). Needs root (debootstrap, podman's storage) and Debian's archive.
#   scripts/container-test.sh   # 11 min with its base and packages kept and ccache warm, 16 on a fresh
#                               # machine after scripts/test.sh (2 shared cores); a cold ccache adds
#                               # the whole compile (over half an hour there)
#
#  1. podman and debootstrap, installed with apt-get when missing (the quick start needs neither).
#  2. The base image localhost/loom-base:debian12: `debootstrap --variant=minbase bookworm` from
#     the Debian mirror this machine's apt is configured with, given the same apt sources
#     (bookworm, -updates, -security) and TLS trust (extra CA certificates, /etc/pip.conf),
#     imported with `podman import`. Made once and kept (LOOM_FRESH_BASE=1 makes it again).
#  3. podman build --isolation chroot --build-arg CUDA= --build-arg BASE=<that image> --target
#     smoke: the build stage installs the dependencies, builds Loom, runs the whole test suite
#     (a failing test fails the build) and installs /opt/loom; the runtime stage makes the
#     image; the smoke stage, in that image, prints loom-info, runs the flagship's smoke test,
#     trains the flagship in full (it prints its held-out accuracy) and builds a program
#     against the installed Loom. A build stage and not `podman run`, which fails here
#     (crun: setrlimit RLIMIT_NPROC: Operation not permitted).
#  4. The runtime stage tagged localhost/loom:cpu (from the build's cache), which must be
#     under 400 MB. Untagged layers of earlier runs are pruned (podman image prune).
# The host's ccache folder is mounted into the build (podman build -v), and the sources sit at
# this checkout's own path in it (SOURCE_DIR) with the host's LANG (both go into ccache's
# hashes), so the objects that the host's cpu preset compiled (scripts/test.sh) are found.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
start=$SECONDS
base=localhost/loom-base:debian12
image=localhost/loom:cpu
max_bytes=400000000  # 400 MB, as podman counts

say() { echo "container-test: $* ($(( (SECONDS - start) / 60 ))m$(( (SECONDS - start) % 60 ))s)"; }

# ---- 1. tools ----
missing=()
command -v podman >/dev/null 2>&1 || missing+=(podman)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# ---- 2. the base image ----
if [ "${LOOM_FRESH_BASE:-0}" = 1 ] || ! podman image exists "$base"; then
  # The Debian 12 suites this machine's apt reads, as sources.list lines; their mirror.
  sources=$(apt-get indextargets --format 'deb $(REPO_URI) $(RELEASE) $(COMPONENT)' 2>/dev/null |
            awk '$3 ~ /^bookworm(-updates|-security)?$/' | sort -u)
  mirror=$(awk '$3 == "bookworm" { print $2; exit }' <<<"$sources")
  if [ -z "$mirror" ]; then
    mirror=http://deb.debian.org/debian
    sources="deb $mirror bookworm main"
    say "this machine's apt has no Debian 12 mirror: using $mirror"
  fi
  root=build/container-test/rootfs
  rm -rf "$root"
  mkdir -p "$root"
  say "debootstrap --variant=minbase bookworm from $mirror"
  debootstrap --variant=minbase bookworm "$root" "$mirror" > build/container-test/debootstrap.log 2>&1 ||
    { tail -n 20 build/container-test/debootstrap.log; exit 1; }
  echo "$sources" > "$root/etc/apt/sources.list"
  # This machine's TLS trust, for pip (PyPI's tensorboard, in install-deps.sh) behind a proxy
  # that re-signs: its extra CA certificates (the image's ca-certificates package adds them to
  # its bundle when installed) and pip's configuration, which points pip at that bundle.
  if compgen -G "/usr/local/share/ca-certificates/*.crt" > /dev/null; then
    mkdir -p "$root/usr/local/share/ca-certificates"
    cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  fi
  if [ -f /etc/pip.conf ]; then cp /etc/pip.conf "$root/etc/pip.conf"; fi
  # What an image needs no copy of: the package lists and .debs (the build updates first),
  # documentation and translations.
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb \
         "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/locale/*
  tar -C "$root" -c . | podman import -q --change 'CMD=/bin/bash' - "$base" > /dev/null
  rm -rf "$root"
  say "made $base"
fi

# ---- 3. build, test inside, smoke-test the image ----
if command -v ccache >/dev/null 2>&1; then
  ccache_dir=$(ccache -k cache_dir)
else
  ccache_dir=$PWD/build/container-test/ccache
fi
mkdir -p "$ccache_dir"
build=(podman build --isolation chroot --build-arg CUDA= --build-arg "BASE=$base"
       --build-arg "SOURCE_DIR=$PWD" --build-arg "LANG=${LANG:-C.UTF-8}"
       -v "$ccache_dir:/root/.cache/ccache" -f Containerfile)
say "building (build stage, whole test suite, runtime stage, smoke stage)"
"${build[@]}" --target smoke -t "$image-smoke" .

# ---- 4. the image ----
"${build[@]}" -t "$image" . > /dev/null
podman images --filter reference=localhost/loom
size=$(podman image inspect --format '{{.Size}}' "$image")
say "$image is $(( size / 1000000 )) MB"
if [ "$size" -ge "$max_bytes" ]; then
  echo "container-test: $image is over $(( max_bytes / 1000000 )) MB" >&2
  exit 1
fi
# What the next run reuses stays (the base image, the packages' layer tagged $image-deps, the
# images); the rest goes: `podman image prune` removes the untagged layers that each run leaves
# behind (a copy of the sources and the build stage's layers, about 1 GB).
"${build[@]}" --target deps -t "$image-deps" . > /dev/null
podman image prune -f > /dev/null
say "passed"
