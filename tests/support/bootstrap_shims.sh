#!/usr/bin/env bash
# Recording shims (a test double) for the pieces of the GPUDirect bootstrap that reach
# outside a testbed node: Google's, Docker's and NVIDIA's apt repositories and keys,
# container pulls and runs, git, COS's GPU extension, kernel modules, udev and the NIC
# firewall. One script, called by each name (a symlink per command in the node's
# /usr/local/bin, which comes first on root's PATH). Each call is appended to
# /var/lib/fd-shim/calls.log (and "UID command" to uids.log); the effects the bootstrap's
# checks look for are made as the real command would make them (files in /var/lib/tcpx,
# packages known to `dpkg -s`, running containers known to `docker inspect`, ...), all
# inside the node's own directories.
#
# The double refuses what the real tools refuse, and a little more:
#   gpg      a key file names its keys (`KEY <fingerprint>` lines, as curl serves them):
#            --show-keys --with-colons lists them, --import needs its GNUPGHOME, --export
#            FPR... writes only the keys asked for that were imported;
#   apt-get  `update` refuses (exit 100, "is not signed") a repository line in
#            sources.list.d without signed-by, with trusted=yes (real apt would take that
#            one unchecked: flightdeck never writes it), with a keyring that lacks the key
#            the repository is signed with (NO_PUBKEY), and an ar+https:// line before the
#            Artifact Registry transport is installed;
#   dkms     `build` fails without the running kernel's headers package;
#   docker   a pull records the digest the "registry" serves for the tag (derived from
#            the name); `image inspect --format '{{index .RepoDigests 0}}'` prints it; runs by
#            digest work; a container run gets only the environment docker would give it.
# The plugin libraries the installers put down are stand-ins: copies of the node's own
# libm.so.6, real ELF shared objects the dynamic loader can load (`ldd` works on them).
# Google's TCPXO profile is its real nccl-env-profile.sh, and gIB's set_nccl_env.sh a
# stand-in (tests/fixtures/reference/stand-in/README.md), both put in the node's
# /usr/local/share/fd-shim by the testbed.
#
# Faults, set by the test in the node's /var/lib/fd-shim:
#   fail/<command>   holds an exit code: the command prints an error and exits with it
#   sleep/<command>  holds seconds: the command sleeps first (to kill the node mid-step)
#   wrongkey/curl    lines of URL pieces: a key URL holding one serves another key
#   digest/docker    holds a word: every image's tag now serves another digest
#   githead/git      holds a commit: `git rev-parse HEAD` prints it
#   restarted/NAME   container NAME crashed and restarted, not initialised again
set -u
S=/var/lib/fd-shim
cmd=$(basename "$0")
if [ "$(id -u)" = 0 ]; then
  mkdir -p "$S/pkgs" "$S/containers" "$S/images" "$S/dkms"
  for f in calls.log uids.log; do
    [ -e "$S/$f" ] || { : > "$S/$f"; chmod 0666 "$S/$f"; }
  done
fi
echo "$cmd $*" >> "$S/calls.log"
echo "$(id -u) $cmd $*" >> "$S/uids.log"
if [ -f "$S/sleep/$cmd" ]; then sleep "$(cat "$S/sleep/$cmd")"; fi
if [ -f "$S/fail/$cmd" ]; then
  echo "$cmd: simulated failure" >&2
  exit "$(cat "$S/fail/$cmd")"
fi

has() { # the argument list contains $1
  local want=$1 a
  shift
  for a in "$@"; do [ "$a" = "$want" ] && return 0; done
  return 1
}

# A stand-in for a plugin library: the node's own libm.so.6, an ELF shared object the
# loader can load, under the plugin's name.
standin_so() {
  local lib="" l
  for l in /lib/x86_64-linux-gnu/libm.so.6 /usr/lib/x86_64-linux-gnu/libm.so.6 /lib64/libm.so.6; do
    if [ -f "$l" ]; then lib=$l; break; fi
  done
  [ -n "$lib" ] || lib=$(/sbin/ldconfig -p | awk '$1 == "libm.so.6" && /x86-64/ { print $NF; exit }')
  cp -L "$lib" "$1"
}

# The keys a URL serves (the real key files' fingerprints), and the key a repository's
# Release file is signed with.
WRONG_KEY=DEADBEEFDEADBEEFDEADBEEFDEADBEEFDEADBEEF
key_fprs() {
  case "$1" in
  https://download.docker.com/linux/ubuntu/gpg) echo 9DC858229FC7DD38854AE2D88D81803C0EBFCD88 ;;
  https://developer.download.nvidia.com/compute/cuda/repos/*/x86_64/3bf863cc.pub) echo EB693B3035CD5710E231E123A4B469963BF863CC ;;
  https://nvidia.github.io/libnvidia-container/gpgkey) echo C95B321B61E88C1809C4F759DDCAE044F796ECB0 ;;
  # The file carries more than the keys flightdeck wants (older ones have come and gone).
  https://packages.cloud.google.com/apt/doc/apt-key.gpg)
    echo A362B822F6DEDC652817EA46B53DC80D13EDEF05 35BAA0B33E9EB396F59CA838C0BA5CE6DC6315A3 0123456789ABCDEF0123456789ABCDEF01234567 ;;
  https://us-apt.pkg.dev/doc/repo-signing-key.gpg) echo 35BAA0B33E9EB396F59CA838C0BA5CE6DC6315A3 ;;
  esac
}
repo_key() {
  case "$1" in
  *download.docker.com/*) echo 9DC858229FC7DD38854AE2D88D81803C0EBFCD88 ;;
  *developer.download.nvidia.com/compute/cuda/*) echo EB693B3035CD5710E231E123A4B469963BF863CC ;;
  *nvidia.github.io/libnvidia-container/*) echo C95B321B61E88C1809C4F759DDCAE044F796ECB0 ;;
  *packages.cloud.google.com/apt*) echo A362B822F6DEDC652817EA46B53DC80D13EDEF05 35BAA0B33E9EB396F59CA838C0BA5CE6DC6315A3 ;;
  *us-apt.pkg.dev/*) echo 35BAA0B33E9EB396F59CA838C0BA5CE6DC6315A3 ;;
  esac
}
keys_in() { # the fingerprints a key file or keyring holds
  grep -h '^KEY [0-9A-F]\{40\}$' "$@" 2>/dev/null | cut -d' ' -f2
}
serves_wrong_key() { # a fault makes this URL serve another key
  local p
  [ -f "$S/wrongkey/curl" ] || return 1
  while IFS= read -r p || [ -n "$p" ]; do
    if [ -n "$p" ] && [[ $1 == *"$p"* ]]; then return 0; fi
  done < "$S/wrongkey/curl"
  return 1
}
key_file() { # a key file of the fingerprints given
  echo "-----BEGIN PGP PUBLIC KEY BLOCK----- (fd-shim stand-in)"
  local f
  for f in "$@"; do echo "KEY $f"; done
  echo "-----END PGP PUBLIC KEY BLOCK-----"
}

# apt's refusals of a repository (see the header).
apt_sources_ok() {
  local f line opts url keyring want k found
  for f in /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    while IFS= read -r line; do
      case "$line" in deb\ *) ;; *) continue ;; esac
      opts=""
      if [[ $line =~ ^deb\ \[([^]]*)\]\ +([^ ]+) ]]; then
        opts=${BASH_REMATCH[1]}
        url=${BASH_REMATCH[2]}
      else
        url=$(echo "$line" | awk '{ print $2 }')
      fi
      case "$url" in *deb.debian.org*|*security.debian.org*|*archive.ubuntu.com*|*security.ubuntu.com*) continue ;; esac
      if [[ " $opts " == *" trusted=yes "* ]]; then
        echo "E: The repository '$url' is not signed. (the apt double refuses trusted=yes: $f)" >&2
        return 1
      fi
      keyring=""
      if [[ $opts =~ signed-by=([^ ]+) ]]; then keyring=${BASH_REMATCH[1]}; fi
      if [ -z "$keyring" ] || [ ! -r "$keyring" ]; then
        echo "E: The repository '$url' is not signed. (no signed-by keyring: $f)" >&2
        return 1
      fi
      case "$url" in
      ar+https://*)
        if [ ! -f "$S/pkgs/apt-transport-artifact-registry" ]; then
          echo "E: The method driver /usr/lib/apt/methods/ar+https could not be found." >&2
          return 1
        fi ;;
      esac
      want=$(repo_key "$url")
      if [ -n "$want" ]; then
        found=""
        for k in $want; do keys_in "$keyring" | grep -qx "$k" && found=1; done
        if [ -z "$found" ]; then
          echo "W: GPG error: $url: The following signatures couldn't be verified because the public key is not available: NO_PUBKEY ${want%% *}" >&2
          echo "E: The repository '$url' is not signed." >&2
          return 1
        fi
      fi
    done < "$f"
  done
}

slug() { echo "$1" | tr '/:@' '___'; }
# The digest reference the "registry" serves for repository:tag.
digest_of() {
  local salt=""
  [ -f "$S/digest/docker" ] && salt=$(cat "$S/digest/docker")
  printf '%s@sha256:%s\n' "${1%:*}" "$(printf '%s%s' "$1" "$salt" | sha256sum | cut -c1-64)"
}
# Pull a reference into the node's images (a tag records the digest it serves).
pull() {
  local ref=$1 d
  case "$ref" in
  *@sha256:*) echo "$ref" > "$S/images/$(slug "$ref")" ;;
  *)
    case "${ref##*/}" in *:*) ;; *) ref="$ref:latest" ;; esac
    d=$(digest_of "$ref")
    echo "$d" > "$S/images/$(slug "$ref")"
    echo "$d" > "$S/images/$(slug "$d")" ;;
  esac
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
  pull)
    ref=""
    for a in "$@"; do case "$a" in -*) ;; *) ref=$a ;; esac; done
    pull "$ref"
    echo "$ref" ;;
  image)
    [ "${1:-}" = inspect ] || exit 0
    shift
    fmt=""
    if [ "${1:-}" = --format ] || [ "${1:-}" = -f ]; then fmt=$2; shift 2; fi
    ref=${1:-}
    f="$S/images/$(slug "$ref")"
    [ -f "$f" ] || { echo "Error: No such image: $ref" >&2; exit 1; }
    case "$fmt" in
    '') echo "[{\"RepoDigests\": [\"$(cat "$f")\"]}]" ;;
    '{{index .RepoDigests 0}}') cat "$f" ;;
    *) echo "fd-shim: docker image inspect --format $fmt is not modelled" >&2; exit 2 ;;
    esac ;;
  tag)
    f="$S/images/$(slug "$1")"
    [ -f "$f" ] || { echo "Error response from daemon: No such image: $1" >&2; exit 1; }
    cp "$f" "$S/images/$(slug "$2")" ;;
  rmi) for r in "$@"; do rm -f "$S/images/$(slug "$r")"; done ;;
  inspect)
    name=${!#}
    [ -f "$S/containers/$name" ] || { echo "Error: No such object: $name" >&2; exit 1; }
    case "$*" in
    *.State.StartedAt*) started=$(cat "$S/containers/$name"); echo "${started:-2026-11-23T10:00:00.000000000Z}" ;;
    *) echo true ;;
    esac ;;
  rm) name=${!#}; rm -f "$S/containers/$name" ;;
  container|logs)
    # The RxDM's log: its ready line once it initialised. A fault file
    # restarted/NAME says the container crashed and restarted since and has not
    # initialised again: the ready line is only in the log before its current start
    # (`--since` the start leaves it out), as docker's log of a restarted container.
    [ "$sub" = container ] && shift
    since=""; prev=""
    for a in "$@"; do [ "$prev" = --since ] && since=$a; prev=$a; done
    name=${!#}
    if [ -f "$S/restarted/$name" ]; then
      [ -n "$since" ] || echo "I1123 rxdm.cc:88] Buffer manager initialization complete"
      echo "I1123 rxdm.cc:31] Starting the receive-datapath manager"
    else
      echo "I1123 rxdm.cc:88] Buffer manager initialization complete"
    fi ;;
  run)
    # docker's options, the image, then the container's command. A container gets only
    # the variables given with --env/-e (NAME=VALUE, or NAME taken from here when set)
    # and the image's PATH: the image's own bin directories first (IMGROOT below), then
    # the system's, which stand in for the image's userland (sh, env, coreutils). The
    # node's /usr/local/bin (its own tools, these shims) is not in a container.
    name=""; wd=""; img=""; detach=""; cenv=(); ep_set=""; ep=""; vols=()
    while [ $# -gt 0 ]; do
      a=$1; shift
      case "$a" in
      --env=*|-e=*) v=${a#*=} ;;
      --env|-e) v=$1; shift ;;
      --entrypoint=*) ep_set=1; ep=${a#*=}; continue ;;
      --entrypoint) ep_set=1; ep=$1; shift; continue ;;
      --volume|-v) vols+=("$1"); shift; continue ;;
      --name|--workdir|-w|--device|--ulimit|--gpus|--restart|--cap-add|--network|--shm-size|--user|-u|--mount|--label|--pull)
        case "$a" in --name) name=$1 ;; --workdir|-w) wd=$1 ;; esac
        shift; continue ;;
      --detach|-d) detach=1; continue ;;
      -*) continue ;;
      *) img=$a; break ;;
      esac
      case "$v" in
      *=*) cenv+=("$v") ;;
      *) if [[ $v =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] && [ -n "${!v+x}" ]; then cenv+=("$v=${!v}"); fi ;;
      esac
    done
    # docker run pulls an image the node does not have.
    [ -f "$S/images/$(slug "$img")" ] || pull "$img"
    # The image's filesystem: /usr/local/share/fd-shim/images/REPO (REPO its last two
    # path elements, without tag or digest: gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev), with the Dockerfile it was built from where the
    # real one is public (tests/fixtures/reference: the TCPX plugin image's, with its real
    # /scripts/container_entry.sh). Its last ENTRYPOINT and CMD (exec form) are the
    # image's; an image without a recorded Dockerfile has neither (a STAND-IN: its
    # command runs as given).
    r=${img%%@*}; case "${r##*/}" in *:*) r=${r%:*} ;; esac
    repo=${r##*/}; case "$r" in */*) rest=${r%/*}; repo=${rest##*/}/$repo ;; esac
    IMGROOT=/usr/local/share/fd-shim/images/$repo
    cenv=("PATH=$IMGROOT/usr/local/bin:$IMGROOT/usr/bin:/usr/sbin:/usr/bin:/sbin:/bin" "${cenv[@]}")
    exec_form() { # the strings of the last `$1 [...]` line of the Dockerfile
      [ -f "$IMGROOT/Dockerfile" ] || return 0
      grep "^$1 \\[" "$IMGROOT/Dockerfile" | tail -n 1 | sed 's/^[A-Z]* \[//; s/\]$//' | tr ',' '\n' | sed 's/^ *"//; s/" *$//'
    }
    entry=(); cmdv=()
    if [ -n "$ep_set" ]; then
      # --entrypoint replaces the image's, and resets its CMD; "" leaves none.
      [ -z "$ep" ] || entry=("$ep")
    else
      # (here-strings: a node's /dev has no /dev/fd for process substitution)
      while IFS= read -r l; do [ -z "$l" ] || entry+=("$l"); done <<< "$(exec_form ENTRYPOINT)"
      while IFS= read -r l; do [ -z "$l" ] || cmdv+=("$l"); done <<< "$(exec_form CMD)"
    fi
    # Words after the image replace the CMD.
    [ $# -eq 0 ] || cmdv=("$@")
    # An absolute entrypoint is a file of the image when the image has it.
    if [ ${#entry[@]} -gt 0 ] && [ -e "$IMGROOT${entry[0]}" ]; then entry[0]="$IMGROOT${entry[0]}"; fi
    argv=("${entry[@]+"${entry[@]}"}" "${cmdv[@]+"${cmdv[@]}"}")
    [ ${#argv[@]} -gt 0 ] || { echo "docker: Error response from daemon: no command specified." >&2; exit 125; }
    if [ -z "$ep_set" ] && [ "${cmdv[0]:-}" = install ] && has --install-nccl "${cmdv[@]}"; then
      # The plugin images' entrypoint's `install` subcommand (the TCPX image's real
      # container_entry.sh; the TCPXO image's, whose Dockerfile is not recorded here)
      # copies the image's build products (/third_party/nccl-netsupport, the plugin's
      # build) to the host mount; they are not here, so the double lays down stand-ins
      # where it would.
      case "$img" in
      *gpudirect-tcpxo*)
        mkdir -p /var/lib/tcpxo/lib64
        for l in libnccl-net.so libnccl.so.2 libnccl-tuner.so; do standin_so "/var/lib/tcpxo/lib64/$l"; done
        echo "# fd-shim stand-in" > /var/lib/tcpxo/lib64/a3plus_tuner_config.textproto
        echo "# fd-shim stand-in" > /var/lib/tcpxo/lib64/a3plus_guest_config.textproto
        # Google's own profile (tests/fixtures/reference), as the installer writes it.
        cp /usr/local/share/fd-shim/nccl-env-profile.sh /var/lib/tcpxo/lib64/nccl-env-profile.sh ;;
      *gpudirect-tcpx*)
        mkdir -p /var/lib/tcpx/lib64
        for l in libnccl-net.so libnccl.so.2; do standin_so "/var/lib/tcpx/lib64/$l"; done ;;
      esac
      echo "installed NCCL and the net plugin"
    elif [ -n "$detach" ] && [ -n "$name" ]; then
      date -u +%Y-%m-%dT%H:%M:%S.%NZ > "$S/containers/$name"
      echo "0123456789ab"
    else
      # A container run (an NCCL run or a job on COS): the entrypoint and command run
      # here, in --workdir, with the container's environment only.
      cval() { local e v=""; for e in "${cenv[@]}"; do [ "${e%%=*}" = "$1" ] && v=${e#*=}; done; printf '%s' "$v"; }
      echo "container $img: NCCL_NET=$(cval NCCL_NET) NCCL_GPUDIRECTTCPX_SOCKET_IFNAME=$(cval NCCL_GPUDIRECTTCPX_SOCKET_IFNAME) LD_LIBRARY_PATH=$(cval LD_LIBRARY_PATH) argv=${argv[*]}" >> "$S/calls.log"
      n=1
      while [ -e "$S/container-env.$n.log" ]; do n=$((n + 1)); done
      env -i "${cenv[@]}" env > "$S/container-env.$n.log"
      [ -z "$wd" ] || cd "$wd"
      # The volumes that put a host directory at another path (/var/lib/tcpx/lib64 at
      # /usr/local/tcpx/lib64) are bound there in a mount namespace of the container's
      # own; the mount points are made in the node's own directories. Volumes at the same
      # path are the node's files already (the container sees the node's filesystem).
      binds=""
      for vol in "${vols[@]+"${vols[@]}"}"; do
        src=${vol%%:*}; dst=${vol#*:}; dst=${dst%%:*}
        [ "$src" != "$dst" ] && [ -e "$src" ] || continue
        binds+="mkdir -p $(printf %q "$dst"); mount --bind $(printf %q "$src") $(printf %q "$dst"); "
      done
      if [ -n "$binds" ] && [ "$(id -u)" = 0 ]; then
        exec unshare --mount --propagation private -- bash -c "${binds}"'exec "$@"' container env -i "${cenv[@]}" "${argv[@]}"
      fi
      exec env -i "${cenv[@]}" "${argv[@]}"
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
  fprs=$(key_fprs "$url")
  if [ -n "$fprs" ]; then
    if serves_wrong_key "$url"; then fprs=$WRONG_KEY; fi
    # shellcheck disable=SC2086
    body=$(key_file $fprs)
  else
    body="content of $url"
  fi
  if [ -n "$out" ]; then echo "$body" > "$out"; else echo "$body"; fi ;;
gpg)
  home=${GNUPGHOME:-${HOME:-/root}/.gnupg}; out=""; mode=""; args=()
  while [ $# -gt 0 ]; do
    case "$1" in
    --homedir) home=$2; shift ;;
    -o|--output) out=$2; shift ;;
    --show-keys|--import|--export|--dearmor) mode=${1#--} ;;
    -*) ;;
    *) args+=("$1") ;;
    esac
    shift
  done
  case "$mode" in
  show-keys)
    keys=$(keys_in "${args[@]}")
    [ -n "$keys" ] || { echo "gpg: no valid OpenPGP data found." >&2; exit 2; }
    for f in $keys; do
      echo "pub:-:255:22:${f:24}:1651000000:::-:::scSC::::::ed25519:::0:"
      echo "fpr:::::::::$f:"
      echo "uid:-::::1651000000::0::fd-shim key $f::::::::::0:"
    done ;;
  import)
    [ -d "$home" ] || { echo "gpg: keyblock resource '$home/pubring.kbx': No such file or directory" >&2; exit 2; }
    if [ ${#args[@]} -gt 0 ]; then keys=$(keys_in "${args[@]}"); else keys=$(keys_in /dev/stdin); fi
    [ -n "$keys" ] || { echo "gpg: no valid OpenPGP data found." >&2; exit 2; }
    for f in $keys; do grep -qsx "$f" "$home/pubring.fd-shim" || echo "$f" >> "$home/pubring.fd-shim"; done ;;
  export)
    have=$(cat "$home/pubring.fd-shim" 2>/dev/null)
    sel=()
    for f in $have; do
      if [ ${#args[@]} -eq 0 ] || has "$f" "${args[@]}"; then sel+=("$f"); fi
    done
    [ ${#sel[@]} -gt 0 ] || echo "gpg: WARNING: nothing exported" >&2
    if [ -n "$out" ]; then key_file "${sel[@]+"${sel[@]}"}" > "$out"; else key_file "${sel[@]+"${sel[@]}"}"; fi ;;
  dearmor)
    if [ -n "$out" ]; then cat > "$out"; else cat; fi ;;
  *) echo "fd-shim: gpg $mode is not modelled" >&2; exit 2 ;;
  esac ;;
apt-get)
  sub=${1:-}; shift || true
  case "$sub" in
  update)
    apt_sources_ok || exit 100
    echo "Reading package lists... Done" ;;
  download) for p in "$@"; do : > "./${p}_1.1_amd64.deb"; done ;;
  install)
    for p in "$@"; do
      case "$p" in -*) continue ;; esac
      : > "$S/pkgs/$p"
      case "$p" in
      docker-ce) : > "$S/docker-installed" ;;
      nccl-gib)
        mkdir -p /usr/local/gib/lib64 /usr/local/gib/scripts /usr/local/gib/configs
        standin_so /usr/local/gib/lib64/libnccl-net.so
        echo "# fd-shim stand-in" > /usr/local/gib/configs/tuner_config_a3u.txtpb
        # The stand-in of Google's set_nccl_env.sh (tests/fixtures/reference/stand-in).
        cp /usr/local/share/fd-shim/set_nccl_env.sh /usr/local/gib/scripts/set_nccl_env.sh ;;
      nvidia-container-toolkit)
        printf '#!/bin/sh\n' > /usr/local/bin/nvidia-ctk; chmod +x /usr/local/bin/nvidia-ctk ;;
      esac
      echo "Setting up $p ..."
    done ;;
  esac ;;
dpkg)
  case "${1:-}" in
  -s) [ -f "$S/pkgs/$2" ] ;;
  --print-architecture) echo amd64 ;;
  *) ;;
  esac ;;
dpkg-deb)
  dir=${!#}
  mkdir -p "$dir/usr/src/dmabuf-import-helper-1.1"
  echo 'MODULE_IMPORT_NS(DMA_BUF);' > "$dir/usr/src/dmabuf-import-helper-1.1/import-helper.c" ;;
dkms)
  sub=${1:-}
  case "$sub" in
  status) [ -f "$S/dkms/state" ] && echo "dmabuf-import-helper/1.1: $(cat "$S/dkms/state")" ;;
  add) echo added > "$S/dkms/state" ;;
  build)
    k=$(uname -r)
    if [ ! -f "$S/pkgs/linux-headers-$k" ]; then
      echo "Error! Your kernel headers for kernel $k cannot be found at /lib/modules/$k/build or /lib/modules/$k/source." >&2
      exit 1
    fi
    echo built > "$S/dkms/state" ;;
  install) echo installed > "$S/dkms/state" ;;
  esac ;;
modprobe)
  [ "${1:-}" = import-helper ] && : > /dev/dmabuf_import_helper ;;
udevadm)
  if [ "${1:-}" = trigger ]; then
    mkdir -p /dev/aperture_devices/0000:06:00.1 /dev/aperture_devices/0000:07:00.1
  fi ;;
iptables)
  # Rules are lines of CHAIN and match in $S/iptables.rules, as given.
  op=${1:-}; shift || true
  rule="$*"
  touch "$S/iptables.rules"
  case "$op" in
  -C)
    grep -qxF -- "$rule" "$S/iptables.rules" || { echo "iptables: Bad rule (does a matching rule exist in that chain?)." >&2; exit 1; } ;;
  -I|-A) echo "$rule" >> "$S/iptables.rules" ;;
  -D)
    grep -qxF -- "$rule" "$S/iptables.rules" || { echo "iptables: Bad rule (does a matching rule exist in that chain?)." >&2; exit 1; }
    awk -v r="$rule" '!done && $0 == r { done = 1; next } { print }' "$S/iptables.rules" > "$S/iptables.rules.new"
    mv "$S/iptables.rules.new" "$S/iptables.rules" ;;
  esac ;;
git)
  # clone URL DIR; -C DIR checkout [--quiet] [--detach] COMMIT; -C DIR rev-parse HEAD
  dir=""
  if [ "${1:-}" = -C ]; then dir=$2; shift 2; fi
  sub=${1:-}; shift || true
  pos=()
  for a in "$@"; do case "$a" in -*) ;; *) pos+=("$a") ;; esac; done
  case "$sub" in
  clone)
    dest=${pos[1]}
    if [ -n "$(ls -A "$dest" 2>/dev/null)" ]; then
      echo "fatal: destination path '$dest' already exists and is not an empty directory." >&2
      exit 128
    fi
    mkdir -p "$dest/.git" || exit 128
    # The remote's default branch, somewhere past the pinned commit.
    echo 1111111111111111111111111111111111111111 > "$dest/.git/HEAD"
    echo "# nccl-tests Makefile (fd-shim)" > "$dest/Makefile" ;;
  checkout)
    [ -d "$dir/.git" ] || { echo "fatal: not a git repository: $dir" >&2; exit 128; }
    echo "${pos[0]}" > "$dir/.git/HEAD" ;;
  rev-parse)
    [ -d "$dir/.git" ] || { echo "fatal: not a git repository: $dir" >&2; exit 128; }
    if [ -f "$S/githead/git" ]; then cat "$S/githead/git"; else cat "$dir/.git/HEAD"; fi ;;
  esac ;;
make)
  dir=""; prev=""
  for a in "$@"; do [ "$prev" = -C ] && dir=$a; prev=$a; done
  if [ ! -f "$dir/Makefile" ]; then
    echo "make: *** No targets specified and no makefile found.  Stop." >&2
    exit 2
  fi
  mkdir -p "$dir/build" || exit 2
  for t in all_reduce all_gather reduce_scatter alltoall broadcast reduce sendrecv; do
    printf '#!/bin/sh\necho "# nccl-tests double"\n' > "$dir/build/${t}_perf"
    chmod +x "$dir/build/${t}_perf"
  done ;;
*) ;;
esac
