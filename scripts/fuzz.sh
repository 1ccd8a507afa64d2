#!/usr/bin/env bash
# Fuzz every parser of outside data with cargo-fuzz (libFuzzer): SECONDS per target
# (default 600), as many targets at once as there are cores (or FUZZ_JOBS), no allocation
# over 256 MB.
# Corpora are seeded from the repository's recorded outputs and example files. A crash
# leaves its input in fuzz/artifacts/<target>/; make it a regression test.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#
# Needs a nightly toolchain (`rustup toolchain install nightly`) and cargo-fuzz
# (`cargo install cargo-fuzz`); flightdeck itself builds on stable.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-600}
shift || true
command -v cargo-fuzz >/dev/null || { echo "cargo-fuzz missing: cargo install cargo-fuzz" >&2; exit 2; }
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cd fuzz && cargo +nightly fuzz list)
fi

seed() { # target, files...
  local dir="fuzz/corpus/$1"; shift
  mkdir -p "$dir"
  for f in "$@"; do [ -f "$f" ] && cp -f "$f" "$dir/$(echo "$f" | tr '/' '_')"; done
  return 0
}
shared=../shared/fixtures
seed nccl_output tests/fixtures/nccl/*.txt tests/fixtures/nccl/composed/*.txt tests/fixtures/nccl/public/*.txt tests/fixtures/nccl/layouts/*.txt $shared/nccl/* 2>/dev/null || true
seed telemetry_records tests/fixtures/telemetry/*
seed fleet_yaml fleets/*.yaml tests/fixtures/dstack/*
seed job_yaml examples/*/*.yaml
seed config_theme_yaml themes/*.yaml
seed job_metrics tests/fixtures/jobs/*.log
seed compute_json tests/fixtures/gcp/*.json
seed node_lines tests/support/bootstrap_shims.sh
seed doctor_output tests/fixtures/doctor/h200x2/* tests/fixtures/doctor/h200x1/*
# A node's whole answer, as the doctor's script sections it.
for s in smi:nvidia-smi.txt gpus:query-gpu.csv topo:topo-m.txt nvlink:nvlink-s.txt sysctl:sysctl.txt xid:dmesg-xid.txt; do
  printf '@@fd-doctor begin %s\n' "${s%%:*}"
  cat "tests/fixtures/doctor/h200x2/${s#*:}"
  printf '@@fd-doctor end %s 0\n' "${s%%:*}"
done > fuzz/corpus/doctor_output/sections
printf '@@fd-probe 1 eth1 10.0.1.2\n100 packets transmitted, 98 received, 2%% packet loss, time 512ms\nrtt min/avg/max/mdev = 0.031/0.047/0.101/0.012 ms\n@@fd-probe-end\n' > fuzz/corpus/doctor_output/probe
mkdir -p fuzz/corpus/offers_query fuzz/corpus/ssh_files fuzz/corpus/pane_bytes
printf 'gpu=H100 gpus>=8 region=us-* spot<25 gpudirect=rdma' > fuzz/corpus/offers_query/seed
printf 'Host gpu-*\n  User ops\n  ProxyJump bastion\n  IdentityFile ~/.ssh/id_%%r\n' > fuzz/corpus/ssh_files/config
printf '10.0.0.1,gpu-* ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMJ2m3mOI0dyYsL8H9ZIhaaH1jb6pmSnkuqLK4glV3dJ\n' > fuzz/corpus/ssh_files/known
printf '\033[31mred\033[0m\r\n\033[?1049h\033[Hvim\r\n\033]52;c;eA==\007' > fuzz/corpus/pane_bytes/seed

(cd fuzz && cargo +nightly fuzz build -O -s none)
jobs=${FUZZ_JOBS:-$(nproc)}
results=fuzz/results.txt
: > "$results"
run() {
  local t=$1
  local log="fuzz/artifacts/$t.log"
  mkdir -p "fuzz/artifacts/$t"
  if (cd fuzz && cargo +nightly fuzz run -O -s none "$t" -- \
        -max_total_time="$secs" -rss_limit_mb=256 -malloc_limit_mb=256 -max_len=65536 \
        -artifact_prefix="artifacts/$t/" >"../$log" 2>&1); then
    status=ok
  else
    status=CRASH
  fi
  execs=$(grep -o 'Done [0-9]* runs' "$log" | grep -o '[0-9]*' || true)
  [ -n "$execs" ] || execs=$(grep -o '^#[0-9]*' "$log" | tail -1 | tr -d '#')
  rss=$(grep -o 'rss: [0-9]*Mb' "$log" | tail -1 | grep -o '[0-9]*' || true)
  echo "$t $status ${secs}s ${execs:-?} runs, peak rss ${rss:-?} MB" | tee -a "$results"
}
export -f run
export secs results
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'run {}'
! grep -q CRASH "$results"
