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
*) echo "nvidia-smi double: no recording for: $*" >&2; exit 2 ;;
esac
cat "$D/$f"
