#!/bin/sh
# Recording shims (a test double) for the pieces of the GPUDirect bootstrap that reach
# outside a testbed node: Google's and NVIDIA's apt repositories, container pulls and
# runs, COS's GPU extension, kernel modules, udev and the NIC firewall. One script,
# called by each name (a symlink per command in the node's /usr/local/bin, which comes
# first on root's PATH). Each call is appended to /var/lib/fd-shim/calls.log; the
# effects the bootstrap's checks look for are made as the real command would make
# them (files in /var/lib/tcpx, packages known to `dpkg -s`, running containers known
# to `docker inspect`, ...), all inside the node's own directories.
#
# Faults, set by the test in the node's /var/lib/fd-shim:
#   fail/<command>   holds an exit code: the command prints an error and exits with it
#   sleep/<command>  holds seconds: the command sleeps first (to kill the node mid-step)
set -u
S=/var/lib/fd-shim
cmd=$(basename "$0")
mkdir -p "$S/pkgs" "$S/containers" "$S/images" "$S/dkms"
echo "$cmd $*" >> "$S/calls.log"
if [ -f "$S/sleep/$cmd" ]; then sleep "$(cat "$S/sleep/$cmd")"; fi
if [ -f "$S/fail/$cmd" ]; then
  echo "$cmd: simulated failure" >&2
  exit "$(cat "$S/fail/$cmd")"
fi

has() { # the argument list contains $1
  want=$1; shift
  for a in "$@"; do [ "$a" = "$want" ] && return 0; done
  return 1
}

case "$cmd" in
cos-extensions)
  mkdir -p /var/lib/nvidia/bin /var/lib/nvidia/lib64
  printf '#!/bin/sh\necho "GPU 0: NVIDIA H100 80GB HBM3"\n' > /var/lib/nvidia/bin/nvidia-smi
  chmod +x /var/lib/nvidia/bin/nvidia-smi
  for d in 0 1 2 3 4 5 6 7; do : > "/dev/nvidia$d"; done
  : > /dev/nvidia-uvm; : > /dev/nvidiactl
  echo "Installing GPU driver version 535.183.01 ... done"
  ;;
docker)
  sub=${1:-}; shift || true
  case "$sub" in
  info) [ -f "$S/docker-installed" ] ;;
  pull) : > "$S/images/$(echo "$1" | tr '/:' '__')"; echo "Status: Downloaded newer image for $1" ;;
  image)
    [ "${1:-}" = inspect ] && [ -f "$S/images/$(echo "$2" | tr '/:' '__')" ] ;;
  inspect)
    name=$(eval "echo \${$#}")
    if [ -f "$S/containers/$name" ]; then echo true; else echo "Error: No such object: $name" >&2; exit 1; fi ;;
  rm) name=$(eval "echo \${$#}"); rm -f "$S/containers/$name" ;;
  container|logs)
    [ "$sub" = container ] && shift
    echo "I1123 rxdm.cc:88] Buffer manager initialization complete" ;;
  run)
    name=""; prev=""
    for a in "$@"; do [ "$prev" = --name ] && name=$a; prev=$a; done
    if has install "$@" && has --install-nccl "$@"; then
      case "$*" in
      *gpudirect-tcpxo*)
        mkdir -p /var/lib/tcpxo/lib64
        : > /var/lib/tcpxo/lib64/libnccl-net.so; : > /var/lib/tcpxo/lib64/libnccl.so.2
        printf 'export NCCL_FASTRAK_CTRL_DEV=eth0\nexport NCCL_FASTRAK_IFNAME=eth1,eth2,eth3,eth4,eth5,eth6,eth7,eth8\n' \
          > /var/lib/tcpxo/lib64/nccl-env-profile.sh ;;
      *gpudirect-tcpx*)
        mkdir -p /var/lib/tcpx/lib64
        : > /var/lib/tcpx/lib64/libnccl-net.so; : > /var/lib/tcpx/lib64/libnccl.so.2 ;;
      esac
      echo "installed NCCL and the net plugin"
    elif has --detach "$@" && [ -n "$name" ]; then
      : > "$S/containers/$name"
      echo "0123456789ab"
    else
      # A container run (an NCCL run or a job on COS): the command after the image runs
      # here, in --workdir; the variables it names with --env are in this environment.
      wd=""; img=""
      while [ $# -gt 0 ]; do
        a=$1; shift
        case "$a" in
        --name|--volume|--device|--env|--workdir|--ulimit|-v|-e|-w)
          [ "$a" = --workdir ] && wd=$1
          shift ;;
        -*) ;;
        *) img=$a; break ;;
        esac
      done
      echo "container $img: NCCL_NET=${NCCL_NET:-} NCCL_GPUDIRECTTCPX_SOCKET_IFNAME=${NCCL_GPUDIRECTTCPX_SOCKET_IFNAME:-} LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-} cmd=$*" >> "$S/calls.log"
      [ -z "$wd" ] || cd "$wd"
      exec "$@"
    fi ;;
  *) ;;
  esac ;;
curl)
  out=""; prev=""; url=""
  for a in "$@"; do
    [ "$prev" = -o ] && out=$a
    case "$a" in http*) url=$a ;; esac
    prev=$a
  done
  case "$url" in
  *get.docker.com*) body='touch /var/lib/fd-shim/docker-installed' ;;
  *) body="content of $url" ;;
  esac
  if [ -n "$out" ]; then echo "$body" > "$out"; else echo "$body"; fi ;;
gpg)
  out=""; prev=""
  for a in "$@"; do [ "$prev" = -o ] && out=$a; prev=$a; done
  cat > "${out:-/dev/null}" ;;
apt-get)
  sub=${1:-}; shift || true
  case "$sub" in
  update) echo "Reading package lists... Done" ;;
  download) for p in "$@"; do : > "./${p}_1.1_amd64.deb"; done ;;
  install)
    for p in "$@"; do
      case "$p" in -*) continue ;; esac
      : > "$S/pkgs/$p"
      case "$p" in
      nccl-gib)
        mkdir -p /usr/local/gib/lib64 /usr/local/gib/scripts
        : > /usr/local/gib/lib64/libnccl-net.so
        echo 'export NCCL_NET=gIB' > /usr/local/gib/scripts/set_nccl_env.sh ;;
      nvidia-container-toolkit)
        printf '#!/bin/sh\n' > /usr/local/bin/nvidia-ctk; chmod +x /usr/local/bin/nvidia-ctk ;;
      esac
      echo "Setting up $p ..."
    done ;;
  esac ;;
dpkg)
  case "${1:-}" in
  -s) [ -f "$S/pkgs/$2" ] ;;
  *) ;;
  esac ;;
dpkg-deb)
  dir=$(eval "echo \${$#}")
  mkdir -p "$dir/usr/src/dmabuf-import-helper-1.1"
  echo 'MODULE_IMPORT_NS(DMA_BUF);' > "$dir/usr/src/dmabuf-import-helper-1.1/import-helper.c" ;;
dkms)
  sub=${1:-}
  case "$sub" in
  status) [ -f "$S/dkms/state" ] && echo "dmabuf-import-helper/1.1: $(cat "$S/dkms/state")" ;;
  add) echo added > "$S/dkms/state" ;;
  build) echo built > "$S/dkms/state" ;;
  install) echo installed > "$S/dkms/state" ;;
  esac ;;
modprobe)
  [ "${1:-}" = import-helper ] && : > /dev/dmabuf_import_helper ;;
udevadm)
  if [ "${1:-}" = trigger ]; then
    mkdir -p /dev/aperture_devices/0000:06:00.1 /dev/aperture_devices/0000:07:00.1
  fi ;;
iptables)
  case "${1:-}" in
  -C) [ -f "$S/iptables-accept" ] ;;
  -I) : > "$S/iptables-accept" ;;
  esac ;;
git)
  # git clone --depth 1 URL DIR
  dir=$(eval "echo \${$#}")
  mkdir -p "$dir/.git" ;;
make)
  dir=""; prev=""
  for a in "$@"; do [ "$prev" = -C ] && dir=$a; prev=$a; done
  mkdir -p "$dir/build"
  for t in all_reduce all_gather reduce_scatter alltoall broadcast reduce sendrecv; do
    printf '#!/bin/sh\necho "# nccl-tests double"\n' > "$dir/build/${t}_perf"
    chmod +x "$dir/build/${t}_perf"
  done ;;
*) ;;
esac
