# flightdeck telemetry sampler: POSIX sh, nothing to install. flightdeck runs it as
#   sh -c "<this text>" flightdeck-sampler INTERVAL_MS [LINKS] [PODNICS]
# (under bash when the node has it: see sampler.rs). It prints one hello, then every
# interval one framed record on stdout; sampler.rs documents the format. LINKS=1 adds
# the PCIe and NVLink throughput from nvidia-smi dmon (which costs about 0.7% of a
# core by itself). No single quote may appear in this text: flightdeck hands it to the
# remote login shell inside single quotes.
nl="
"
ms=${1:-1000}
links=${2:-0}
podnics=${3:-0}
case $ms in "" | *[!0-9]*) ms=1000 ;; esac
[ "$ms" -lt 100 ] && ms=100
[ "$ms" -gt 10000 ] && ms=10000
# Fractional sleep where sleep takes it (GNU, busybox, BSD); else whole seconds.
frac=0
if sleep 0.001 2>/dev/null; then
  frac=1
  s=$((ms / 1000)).$((ms % 1000 / 100))$((ms % 100 / 10))$((ms % 10))
else
  s=$(((ms + 500) / 1000))
  ms=$((s * 1000))
fi
# The clock: bash 5 gives microseconds without a fork; else date +%s%N (GNU, busybox
# with nanoseconds); else /proc/uptime (centiseconds since boot).
clock=uptime
if [ -n "${EPOCHREALTIME:-}" ]; then
  clock=us
else
  t=$(date +%s%N 2>/dev/null)
  case $t in "" | *[!0-9]*) ;; *) clock=ns ;; esac
fi
host=-
[ -r /proc/sys/kernel/hostname ] && read -r host </proc/sys/kernel/hostname
route=-
if [ -r /proc/net/route ]; then
  while read -r i dst rest; do
    [ "$dst" = 00000000 ] && [ "$route" = - ] && route=$i
  done </proc/net/route
fi
# GPUs: nvidia-smi in its own loop mode (initialising NVML once, not every sample), in
# the background; a reader keeps the latest complete batch in a file that the main loop
# copies into each record.
ng=0
gf=-
d=
gp=
pp=
if command -v nvidia-smi >/dev/null 2>&1; then
  info=$(nvidia-smi --query-gpu=index,name,uuid,memory.total,power.limit --format=csv,noheader,nounits 2>/dev/null) || info=
  gf=index,utilization.gpu,utilization.memory,memory.used,memory.total,power.draw,temperature.gpu,temperature.memory,clocks.sm
  nvidia-smi --query-gpu=$gf --format=csv,noheader,nounits >/dev/null 2>&1 || gf=index,utilization.gpu,memory.used,memory.total,power.draw,temperature.gpu,clocks.sm
  set -f
  oifs=$IFS
  IFS=$nl
  for l in $info; do
    case $l in [0-9]*) ng=$((ng + 1)) ;; esac
  done
  IFS=$oifs
  set +f
  [ "$ng" -gt 0 ] || gf=-
fi
printf "@fd 1 ms=%s clock=%s host=%s route=%s gpus=%s gpufields=%s\n" "$ms" "$clock" "$host" "$route" "$ng" "$gf" || exit 0
if [ "$ng" -gt 0 ]; then
  set -f
  IFS=$nl
  for l in $info; do
    case $l in [0-9]*) printf "@gpuinfo %s\n" "$l" ;; esac
  done
  IFS=$oifs
  set +f
fi
# The IPv4 addresses by interface, so the TCP peers of records can be told by node.
if command -v ip >/dev/null 2>&1; then
  ip -o -4 addr show 2>/dev/null | while read -r x nic fam cidr rest; do
    [ "$fam" = inet ] && printf "@addr %s %s\n" "$nic" "${cidr%/*}"
  done
fi
# TCP connections (ss -ti): whom this node sends to and receives from, by bytes (in
# every third record).
tcpss=0
command -v ss >/dev/null 2>&1 && ss -tinH state established >/dev/null 2>&1 && tcpss=1
# A private directory for the GPU batches and for the tick of bash.
if [ "$ng" -gt 0 ] || [ -n "${BASH_VERSION:-}" ]; then
  # Directories of samplers that were killed outright (SIGKILL skips the EXIT trap).
  for x in "${TMPDIR:-/tmp}"/flightdeck-sampler.*; do
    [ -O "$x" ] && ! kill -0 "${x##*.}" 2>/dev/null && rm -rf "$x"
  done
  d=${TMPDIR:-/tmp}/flightdeck-sampler.$$
  rm -rf "$d"
  mkdir -m 700 "$d" 2>/dev/null || d=
fi
if [ "$ng" -gt 0 ] && [ -n "$d" ]; then
  # Each reader exits at its next batch once this shell is gone; nvidia-smi then ends on
  # SIGPIPE.
  nvidia-smi --query-gpu=$gf --format=csv,noheader,nounits -lms "$ms" 2>/dev/null | {
    k=0
    q=0
    b=
    while IFS= read -r l; do
      # A batch starts at GPU 0: a partial one (a GPU that did not answer) is dropped.
      case $l in 0,*) k=0 b= ;; esac
      b="$b$nl$l"
      k=$((k + 1))
      if [ "$k" -ge "$ng" ]; then
        q=$((q + 1))
        kill -0 $$ 2>/dev/null || exit 0
        printf "%s%s\n" "$q" "$b" >"$d/g"
        k=0
        b=
      fi
    done
  } &
  gp=$!
fi
if [ "$ng" -gt 0 ] && [ -n "$d" ] && [ "$links" = 1 ]; then
  # PCIe throughput (MB/s), and NVLink (MiB/s) where the driver has GPM metrics (Hopper
  # and later); dmon counts whole seconds.
  ds=$(((ms + 999) / 1000))
  {
    nvidia-smi dmon -s t --gpm-metrics 60,61 -d "$ds" 2>/dev/null || nvidia-smi dmon -s t -d "$ds" 2>/dev/null
  } | {
    k=0
    q=0
    b=
    h=
    while IFS= read -r l; do
      case $l in
        "#"*)
          # The two header lines (names, units), once; dmon repeats them.
          case $h in *"$nl"*) ;; "") h=$l ;; *) h="$h$nl$l" ;; esac
          continue
          ;;
      esac
      b="$b$nl$l"
      k=$((k + 1))
      if [ "$k" -ge "$ng" ]; then
        q=$((q + 1))
        kill -0 $$ 2>/dev/null || exit 0
        printf "%s\n%s%s\n" "$q" "$h" "$b" >"$d/p"
        k=0
        b=
      fi
    done
  } &
  pp=$!
fi
# NICs in other network namespaces: GKE hands the NIC of a Device network (rdma-*, vpc*)
# to the pod that names it, so from the namespace of the node it is gone while the job
# runs, when its traffic matters. Of the processes whose namespace link this shell may
# follow (all with root, as in hostPID debug pods), one per namespace that holds a NIC
# besides lo and eth0 (the veth of the pod, seen from the node already) is kept as
# PID=NAME, NAME the host name of the pod; its /proc/PID/net/dev goes into each record.
# Found again every tenth record.
nss=
nsscan() {
  nss=
  nsno=
  for p in /proc/[0-9]*; do
    [ "$p/ns/net" -ef /proc/$$/ns/net ] && continue
    [ -e "$p/ns/net" ] || continue
    seen=0
    for q in $nss $nsno; do
      [ "$p/ns/net" -ef "/proc/${q%%=*}/ns/net" ] && seen=1 && break
    done
    [ "$seen" = 1 ] && continue
    more=0
    while IFS= read -r l; do
      l=${l#"${l%%[! ]*}"}
      case $l in *"|"* | lo:* | eth0:*) ;; *:*) more=1 ;; esac
    done 2>/dev/null <"$p/net/dev"
    if [ "$more" = 0 ]; then
      nsno="$nsno ${p#/proc/}"
      continue
    fi
    h=
    [ -r "$p/root/etc/hostname" ] && read -r h 2>/dev/null <"$p/root/etc/hostname"
    case $h in "" | *[!a-zA-Z0-9.-]*) h=pid${p#/proc/} ;; esac
    nss="$nss ${p#/proc/}=$h"
  done
}
# bash waits without a fork: read -t on a FIFO that never gets a line. Elsewhere sleep.
tick=0
if [ -n "$d" ] && [ -n "${BASH_VERSION:-}" ] && [ "$frac" = 1 ] && mkfifo "$d/t" 2>/dev/null; then
  exec 3<>"$d/t"
  read -r -t 0.001 -u 3 x
  [ $? -gt 128 ] && tick=1
fi
trap "kill $gp $pp 2>/dev/null; [ -n \"$d\" ] && rm -rf \"$d\"" EXIT
trap "exit 0" HUP INT TERM PIPE
n=0
next=
while :; do
  n=$((n + 1))
  case $clock in
    us)
      t=$EPOCHREALTIME
      u=${t%[.,]*}${t#*[.,]}
      ;;
    ns)
      t=$(date +%s%N)
      u=$((t / 1000))
      ;;
    *) read -r t rest </proc/uptime ;;
  esac
  r="@s $n $t"
  while IFS= read -r l; do r="$r$nl$l"; done </proc/net/dev
  [ "$podnics" = 1 ] && [ $((n % 10)) = 1 ] && nsscan
  for q in $nss; do
    [ -r "/proc/${q%%=*}/net/dev" ] || continue
    r="$r$nl@ns ${q#*=}"
    while IFS= read -r l; do r="$r$nl$l"; done 2>/dev/null <"/proc/${q%%=*}/net/dev"
  done
  r="$r$nl@ib"
  for c in /sys/class/infiniband/*/ports/*/counters; do
    [ -r "$c/port_xmit_data" ] || continue
    p=${c%/counters}
    port=${p##*/}
    dev=${p%/ports/*}
    dev=${dev##*/}
    x=- y=- xp=- yp=-
    read -r x <"$c/port_xmit_data"
    read -r y <"$c/port_rcv_data"
    [ -r "$c/port_xmit_packets" ] && read -r xp <"$c/port_xmit_packets"
    [ -r "$c/port_rcv_packets" ] && read -r yp <"$c/port_rcv_packets"
    nd=-
    for nn in /sys/class/infiniband/$dev/device/net/*; do [ -e "$nn" ] && nd=${nn##*/}; done
    r="$r$nl$dev $port $x $y $xp $yp $nd"
  done
  # Every third record: the pairs change slowly, and ss costs a fork and an exec.
  if [ "$tcpss" = 1 ] && [ $((n % 3)) = 1 ]; then
    # ss prints a connection line (queues, local, peer) then its info line; one line
    # out per connection with bytes: local peer acked received (no ports, no loopback).
    tl=$(ss -tinH state established 2>/dev/null | {
      lp=
      while read -r a b c e rest; do
        case $a in
          [0-9]*) lp=${c%:*} pp=${e%:*} ;;
          *)
            sa=0 sr=0
            for w in $a $b $c $e $rest; do
              case $w in bytes_acked:*) sa=${w#*:} ;; bytes_received:*) sr=${w#*:} ;; esac
            done
            case $lp in "" | 127.* | *::1*) ;; *) [ "$sa$sr" != 00 ] && printf "%s %s %s %s\n" "$lp" "$pp" "$sa" "$sr" ;; esac
            lp=
            ;;
        esac
      done
    })
    [ -n "$tl" ] && r="$r$nl@tcp$nl$tl"
  fi
  if [ "$ng" -gt 0 ] && [ -n "$d" ]; then
    [ -r "$d/g" ] && { IFS= read -r q && r="$r$nl@gpu $q" && while IFS= read -r l; do r="$r$nl$l"; done; } <"$d/g"
    [ -r "$d/p" ] && { IFS= read -r q && r="$r$nl@dmon $q" && while IFS= read -r l; do r="$r$nl$l"; done; } <"$d/p"
  fi
  printf "%s\n@e %s\n" "$r" "$n" 2>/dev/null || exit 0
  if [ "$frac" = 1 ] && [ "$clock" != uptime ]; then
    # Sleep to the next deadline (start + n intervals), so that the time the loop takes does
    # not stretch the period; a late or jumped clock starts a new schedule.
    [ -z "$next" ] && next=$u
    next=$((next + ms * 1000))
    w=$((next - u))
    if [ "$w" -le 0 ] || [ "$w" -gt $((ms * 1000)) ]; then
      next=$((u + ms * 1000))
      w=$((ms * 1000))
    fi
    f=$((w % 1000000 + 1000000))
    s=$((w / 1000000)).${f#1}
  fi
  if [ "$tick" = 1 ]; then
    read -r -t "$s" -u 3 x
  else
    sleep $s || exit 0
  fi
done
