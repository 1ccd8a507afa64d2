#!/bin/sh
# A double of nvidia-smi for testbed nodes (a test double: the testbed has no GPUs). It
# replays outputs recorded on 2x H200 (tests/fixtures/doctor/h200x2), copied into the
# node's /var/lib/fd-shim/nvidia-smi/, where a test may change them to plant a fault
# (another driver version, a GPU gone, a link inactive). The file is chosen by the
# arguments; a --query-gpu must ask for exactly the recording's fields. It starts no
# process but the `cat` it becomes (a test fleet runs it on many nodes sharing a few
# cores, where the binary it stands in for is one process).
D=/var/lib/fd-shim/nvidia-smi
case "$*" in
"") f=nvidia-smi.txt ;;
"-q") f=nvidia-smi-q.txt ;;
"topo -m") f=topo-m.txt ;;
"nvlink -s") f=nvlink-s.txt ;;
--query-gpu=*" --format=csv")
  f=query-gpu.csv
  asked=${1#--query-gpu=}
  # The recording's header without its units (` [MiB]`) and with `,` for `, `.
  IFS= read -r head <"$D/$f"
  recorded=
  while :; do
    case $head in
    *" ["*"]"*) u=${head#*" ["}; head=${head%%" ["*}${u#*"]"} ;;
    *) break ;;
    esac
  done
  while :; do
    case $head in
    *", "*) recorded="$recorded${head%%", "*},"; head=${head#*", "} ;;
    *) recorded=$recorded$head; break ;;
    esac
  done
  if [ "$asked" != "$recorded" ]; then
    echo "nvidia-smi double: recorded fields $recorded, asked $asked" >&2
    exit 2
  fi ;;
--query-compute-apps=*" --format=csv,noheader"|--query-compute-apps=*" --format=csv")
  # The compute processes a test planted (TbNode::plant_gpu_process) in
  # compute-apps.csv, one a line: gpu_uuid, pid, process_name, used_gpu_memory; none
  # when there is no such file. The fields are those of `nvidia-smi
  # --help-query-compute-apps` (NVIDIA's nvidia-smi documentation); another is refused
  # as nvidia-smi refuses it.
  asked=${1#--query-compute-apps=}
  cols=
  IFS=,
  for f in $asked; do
    case $f in
    gpu_uuid) c=1 ;;
    pid) c=2 ;;
    process_name|name) c=3 ;;
    used_gpu_memory|used_memory) c=4 ;;
    timestamp|gpu_name|gpu_bus_id|gpu_serial)
      echo "nvidia-smi double: no recording of $f" >&2; exit 2 ;;
    *) echo "Field \"$f\" is not a valid field to query."; echo; echo "Run 'nvidia-smi --help-query-compute-apps' for usage information."; exit 2 ;;
    esac
    cols="$cols $c"
  done
  unset IFS
  if [ "$2" = "--format=csv" ]; then
    h=$asked out=
    while :; do
      case $h in
      *,*) out="$out${h%%,*}, "; h=${h#*,} ;;
      *) echo "$out$h"; break ;;
      esac
    done
  fi
  [ -f "$D/compute-apps.csv" ] || exit 0
  awk -F', *' -v cols="$cols" '{ n = split(cols, c, " "); s = ""; for (i = 1; i <= n; i++) s = s (i > 1 ? ", " : "") $c[i]; print s }' "$D/compute-apps.csv"
  exit 0 ;;
*) echo "nvidia-smi double: no recording for: $*" >&2; exit 2 ;;
esac
exec cat "$D/$f"
