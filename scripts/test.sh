#!/usr/bin/env bash
# Install the test prerequisites that are missing (as root, from Debian's packages),
# then build and run the whole test suite. This is the README's test command and what
# CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."

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

# The Kubernetes API double's conformance check (tests/gke.rs) runs kubectl >= 1.30
# (websocket exec): google-cloud-cli's kubectl 1.33, which this machine image ships.
# Debian's kubernetes-client is kubectl 1.20 (SPDY exec only) and cannot stand in.
if [ ! -x /usr/lib/google-cloud-sdk/bin/kubectl.1.33 ]; then
  echo "missing kubectl 1.33 (/usr/lib/google-cloud-sdk/bin/kubectl.1.33, from google-cloud-cli): tests/gke.rs will fail" >&2
fi

# Snapshots never update themselves here: a changed view fails until reviewed.
export INSTA_UPDATE=no
cargo test --locked "$@"
