#!/bin/sh
# A double of nvidia-smi for testbed nodes (a test double: the testbed has no GPUs). It
# replays outputs recorded on 2x H200 (tests/fixtures/doctor/h200x2), copied into the
# node's /var/lib/fd-shim/nvidia-smi/, where a test may change them to plant a fault
# (another driver version, a GPU gone, a link inactive). The file is chosen by the
# arguments; a --query-gpu must ask for exactly the recording's fields.
D=/var/lib/fd-shim/nvidia-smi
case "$*" in
"") f=nvidia-smi.txt ;;
"-q") f=nvidia-smi-q.txt ;;
"topo -m") f=topo-m.txt ;;
"nvlink -s") f=nvlink-s.txt ;;
--query-gpu=*" --format=csv")
  f=query-gpu.csv
  asked=${1#--query-gpu=}
  recorded=$(head -n 1 "$D/$f" | sed 's/ \[[^]]*\]//g; s/, /,/g')
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
  for f in $(echo "$asked" | tr , ' '); do
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
  [ "$2" = "--format=csv" ] && echo "$asked" | sed 's/,/, /g'
  [ -f "$D/compute-apps.csv" ] || exit 0
  awk -F', *' -v cols="$cols" '{ n = split(cols, c, " "); s = ""; for (i = 1; i <= n; i++) s = s (i > 1 ? ", " : "") $c[i]; print s }' "$D/compute-apps.csv"
  exit 0 ;;
*) echo "nvidia-smi double: no recording for: $*" >&2; exit 2 ;;
esac
cat "$D/$f"
