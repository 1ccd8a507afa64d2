#!/usr/bin/env bash
# Install the test prerequisites that are missing (as root, from Debian's packages),
# then build and run the whole test suite. This is the README's test command and what
# CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."

# The suite builds network namespaces with an sshd per node, mounts a tmpfs and runs
# commands as other users: it needs root. As anyone else it fails here, loudly, rather
# than running tests that could only fail or prove nothing.
if [ "$(id -u)" != 0 ]; then
  echo "scripts/test.sh: the test suite needs root (network namespaces with an sshd per node, a tmpfs, other users); run it as root, e.g. sudo ./scripts/test.sh" >&2
  exit 1
fi

need=()
command -v tmux >/dev/null 2>&1 || need+=(tmux)
{ command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ]; } || need+=(openssh-server)
command -v ssh-keygen >/dev/null 2>&1 || need+=(openssh-client)
command -v iperf3 >/dev/null 2>&1 || need+=(iperf3)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v ping >/dev/null 2>&1 || need+=(iputils-ping)
command -v nft >/dev/null 2>&1 || need+=(nftables)
command -v script >/dev/null 2>&1 || need+=(bsdutils)
command -v bash >/dev/null 2>&1 || need+=(bash)

if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "installing test prerequisites: ${need[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  else
    echo "missing test prerequisites: ${need[*]}" >&2
    echo "install them as root: apt-get install ${need[*]}" >&2
    exit 1
  fi
fi

# The Kubernetes API double's conformance check (tests/gke.rs) runs a real kubectl
# >= 1.30 (websocket exec): $FLIGHTDECK_TEST_KUBECTL, else google-cloud-cli's kubectl
# 1.33, else the kubectl on PATH. Debian's kubernetes-client is kubectl 1.20 (SPDY exec
# only) and cannot stand in; without one the suite stops here, saying so.
kubectl_minor() {
  "$1" version --client -o json 2>/dev/null | sed -n 's/.*"minor": *"\([0-9]*\).*/\1/p' | head -1
}
found_kubectl=""
for k in "${FLIGHTDECK_TEST_KUBECTL:-}" /usr/lib/google-cloud-sdk/bin/kubectl.1.33 "$(command -v kubectl || true)"; do
  if [ -n "$k" ] && [ -x "$k" ] && [ "$(kubectl_minor "$k")" -ge 30 ] 2>/dev/null; then
    found_kubectl="$k"
    break
  fi
done
if [ -z "$found_kubectl" ]; then
  echo "scripts/test.sh: tests/gke.rs needs kubectl >= 1.30 (websocket exec) and none was found; install google-cloud-cli's kubectl (apt-get install google-cloud-cli-kubectl from Google's apt repository) or set FLIGHTDECK_TEST_KUBECTL to one" >&2
  exit 1
fi
export FLIGHTDECK_TEST_KUBECTL="$found_kubectl"

# Snapshots never update themselves here: a changed view fails until reviewed.
export INSTA_UPDATE=no
cargo test --locked "$@"
