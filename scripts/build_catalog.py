#!/usr/bin/env python3
"""Build flightdeck's embedded GCP GPU offers catalog.

Reads data/gcp-gpu-vms.source.csv (the GPU subset of SkyPilot's GCP catalog; see
data/README.md) and writes src/catalog/gcp_offers.csv, one row per offer: a machine type
with its GPUs in one zone, with one price per pricing model.

    python3 scripts/build_catalog.py            # (re)write the data file
    python3 scripts/build_catalog.py --check    # exit 1 if the committed file is stale

How prices combine (../shared/reference/gcp/README.md, "How to get the price of a GPU
machine"): in the source, a host-VM row prices the VM without its GPUs and a GPU row
prices the GPUs alone. An offer's price is host + GPUs of the same zone, for on-demand and
for Spot separately. When either part is missing the offer's price is unknown: the cell
stays empty, never 0. The parts are kept in their own columns so that a reader can see
what is known.

Only the Python standard library is used.
"""

import argparse
import csv
import hashlib
import io
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "data" / "gcp-gpu-vms.source.csv"
OUT = ROOT / "src" / "catalog" / "gcp_offers.csv"

SOURCE_DESCRIPTION = (
    "SkyPilot GCP catalog (skypilot-org/skypilot-catalog catalogs/v7/gcp/vms.csv "
    "@ 017e2502, GPU rows)"
)
# The date the source was retrieved (data/README.md); the upstream commit's date is unknown.
AS_OF = "2026-11-22"

# --- GPUs -------------------------------------------------------------------------------
# Source accelerator name -> (GPU model shown to users, GCE accelerator type).
# GCE names: ../shared/reference/gcp/compute-api.md section 1 ("Accelerator type names").
# H100-MEGA is the H100 80GB of a3-megagpu-8g and A100-80GB the A100 of a2-ultragpu: the
# model column says H100 / A100 and the accelerator type tells them apart (GPU memory too).
GPUS = {
    "A100": ("A100", "nvidia-tesla-a100"),
    "A100-80GB": ("A100", "nvidia-a100-80gb"),
    "B200": ("B200", "nvidia-b200"),
    "H100": ("H100", "nvidia-h100-80gb"),
    "H100-MEGA": ("H100", "nvidia-h100-mega-80gb"),
    "H200": ("H200", "nvidia-h200-141gb"),
    "L4": ("L4", "nvidia-l4"),
    "P100": ("P100", "nvidia-tesla-p100"),
    "P4": ("P4", "nvidia-tesla-p4"),
    "T4": ("T4", "nvidia-tesla-t4"),
    "V100": ("V100", "nvidia-tesla-v100"),
}

# --- Machine types with bundled GPUs -----------------------------------------------------
# machine type -> (source accelerator name, GPU count). SkyPilot's
# sky/catalog/gcp_catalog.py _ACC_INSTANCE_TYPE_DICTS (reference README), plus the A3 Edge
# and "-nolssd" variants that the source lists as host rows (same GPUs as their siblings:
# compute-api.md section 1 gives a3-edgegpu-8g H100 80GB x8).
BUNDLED = {
    "a2-highgpu-1g": ("A100", 1),
    "a2-highgpu-2g": ("A100", 2),
    "a2-highgpu-4g": ("A100", 4),
    "a2-highgpu-8g": ("A100", 8),
    "a2-megagpu-16g": ("A100", 16),
    "a2-ultragpu-1g": ("A100-80GB", 1),
    "a2-ultragpu-2g": ("A100-80GB", 2),
    "a2-ultragpu-4g": ("A100-80GB", 4),
    "a2-ultragpu-8g": ("A100-80GB", 8),
    "g2-standard-4": ("L4", 1),
    "g2-standard-8": ("L4", 1),
    "g2-standard-12": ("L4", 1),
    "g2-standard-16": ("L4", 1),
    "g2-standard-32": ("L4", 1),
    "g2-standard-24": ("L4", 2),
    "g2-standard-48": ("L4", 4),
    "g2-standard-96": ("L4", 8),
    "a3-highgpu-1g": ("H100", 1),
    "a3-highgpu-2g": ("H100", 2),
    "a3-highgpu-4g": ("H100", 4),
    "a3-highgpu-8g": ("H100", 8),
    "a3-edgegpu-8g": ("H100", 8),
    "a3-edgegpu-8g-nolssd": ("H100", 8),
    "a3-megagpu-8g": ("H100-MEGA", 8),
    "a3-ultragpu-8g": ("H200", 8),
    "a3-ultragpu-8g-nolssd": ("H200", 8),
    "a4-highgpu-8g": ("B200", 8),
}

# --- Per-machine-type facts --------------------------------------------------------------
# machine type -> (network Gbps or None, GPUDirect flavour, host NICs, GPU NICs, GPU NIC type)
#
# Sources:
# * GPUDirect flavour and NIC layout: ../shared/reference/gcp/compute-api.md section 1
#   (a3-highgpu-8g / a3-edgegpu-8g: TCPX, 1 + 4 gVNIC; a3-megagpu-8g: TCPXO, 1 + 8 gVNIC;
#   a3-ultragpu-8g / a4-highgpu-8g: RoCE RDMA, 2 gVNIC + 8 MRDMA; every other type: 1 NIC).
# * Network bandwidth: Google Cloud "Networking and GPU machines"
#   (cloud.google.com/compute/docs/gpus/gpu-network-bandwidth), overview table: A4 and
#   A3 Ultra 3,600 Gbps (8 x 400 CX-7 + 2 x 200 gVNIC), A3 Mega 1,800, A3 High 1,000,
#   A3 Edge 600; per machine type for A2, G2 and the single-NIC A3 High types (Google's
#   "Accelerator-optimized machine family" tables). ../shared/reference/anchors.md quotes
#   dstack's per-node fabric figures (A3 High 1 Tbps, A3 Mega 1.8 Tbps, A4 3.2 Tbps of GPU
#   NICs), which agree. N1 hosts: bandwidth depends on the vCPU count and the GPU model
#   (up to 32 or 100 Gbps), so it is left unknown.
MACHINE_FACTS = {
    "a2-highgpu-1g": (24, "none", 1, 0, ""),
    "a2-highgpu-2g": (32, "none", 1, 0, ""),
    "a2-highgpu-4g": (50, "none", 1, 0, ""),
    "a2-highgpu-8g": (100, "none", 1, 0, ""),
    "a2-megagpu-16g": (100, "none", 1, 0, ""),
    "a2-ultragpu-1g": (24, "none", 1, 0, ""),
    "a2-ultragpu-2g": (32, "none", 1, 0, ""),
    "a2-ultragpu-4g": (50, "none", 1, 0, ""),
    "a2-ultragpu-8g": (100, "none", 1, 0, ""),
    "g2-standard-4": (10, "none", 1, 0, ""),
    "g2-standard-8": (16, "none", 1, 0, ""),
    "g2-standard-12": (16, "none", 1, 0, ""),
    "g2-standard-16": (32, "none", 1, 0, ""),
    "g2-standard-24": (32, "none", 1, 0, ""),
    "g2-standard-32": (32, "none", 1, 0, ""),
    "g2-standard-48": (50, "none", 1, 0, ""),
    "g2-standard-96": (100, "none", 1, 0, ""),
    "a3-highgpu-1g": (25, "none", 1, 0, ""),
    "a3-highgpu-2g": (50, "none", 1, 0, ""),
    "a3-highgpu-4g": (100, "none", 1, 0, ""),
    "a3-highgpu-8g": (1000, "tcpx", 1, 4, "GVNIC"),
    "a3-edgegpu-8g": (600, "tcpx", 1, 4, "GVNIC"),
    "a3-edgegpu-8g-nolssd": (600, "tcpx", 1, 4, "GVNIC"),
    "a3-megagpu-8g": (1800, "tcpxo", 1, 8, "GVNIC"),
    "a3-ultragpu-8g": (3600, "rdma", 2, 8, "MRDMA"),
    "a3-ultragpu-8g-nolssd": (3600, "rdma", 2, 8, "MRDMA"),
    "a4-highgpu-8g": (3600, "rdma", 2, 8, "MRDMA"),
}
N1_FACTS = (None, "none", 1, 0, "")

# Shapes of machine types that have no host row in the source.
# a4-highgpu-8g: 224 vCPUs, 3,968 GB (Google "Accelerator-optimized machine family", A4).
HOST_SHAPES = {"a4-highgpu-8g": (224, 3968)}

# Machine types Google does not sell plain on-demand (reservations, flex-start or Spot):
# gpuhunt drops their on-demand offers as "not actually available on demand"
# (compute-api.md section 2.3, citing gpuhunt providers/gcp.py GCPProvider.filter).
NO_PLAIN_ON_DEMAND = {
    "a3-highgpu-1g",
    "a3-highgpu-2g",
    "a3-highgpu-4g",
    "a3-ultragpu-8g",
    "a3-ultragpu-8g-nolssd",
    "a4-highgpu-8g",
}

# --- N1 hosts for attached GPUs ----------------------------------------------------------
# SkyPilot (gcp_catalog.py list_accelerators -> _get_host_instance_type) puts T4, V100,
# P100 and P4 on the cheapest n1-standard/highmem/highcpu with at least
# _NUM_ACC_TO_NUM_CPU vCPUs and 4 GB of RAM per vCPU. Without N1 prices the cheapest is
# taken as the smallest such shape (fewest vCPUs, then least RAM), which picks the same
# machine under Google's N1 per-vCPU and per-GB rates.
N1_VCPUS = {
    "V100": {1: 8, 2: 16, 4: 32, 8: 64},
    "T4": {1: 4, 2: 8, 4: 48},
    "P100": {1: 8, 2: 16, 4: 32, 8: 64},
    "DEFAULT": {1: 8, 2: 16, 4: 32, 8: 64, 16: 128},
}
N1_SIZES = (1, 2, 4, 8, 16, 32, 64, 96)
N1_GB_PER_VCPU = {"n1-standard": 3.75, "n1-highmem": 6.5, "n1-highcpu": 0.9}
ATTACHED = ("T4", "V100", "P100", "P4")

# Two price levels: when the sorted distinct per-unit prices of one GPU (or host machine
# type) have a jump larger than this factor, the values on either side are two levels.
LEVEL_GAP = 1.5

COLUMNS = [
    "machine_type",
    "gpu",
    "accelerator_type",
    "gpu_count",
    "gpus_attached",
    "gpu_memory_gb",
    "vcpus",
    "ram_gb",
    "network_gbps",
    "gpudirect",
    "host_nics",
    "gpu_nics",
    "gpu_nic_type",
    "region",
    "zone",
    "on_demand",
    "spot",
    "flex",
    "gpu_on_demand",
    "gpu_spot",
    "host_on_demand",
    "host_spot",
    "flags",
]

# Flag codes (src/catalog/model.rs `Flag` explains each one to users).
FLAG_ORDER = [
    "host_price_missing",
    "gpu_price_missing",
    "spot_price_missing",
    "on_demand_low_level",
    "spot_high_level",
    "spot_above_on_demand",
    "no_plain_on_demand",
]


def money(x):
    """A price cell: 5 decimals like the source, empty when unknown."""
    return "" if x is None else f"{x:.5f}"


def number(s):
    return None if s == "" else float(s)


def whole(s, what):
    v = float(s)
    if v != int(v):
        sys.exit(f"build_catalog: {what} {s!r} is not a whole number")
    return int(v)


def add(a, b):
    return None if a is None or b is None else round(a + b, 5)


def n1_host(acc, count):
    table = N1_VCPUS.get(acc, N1_VCPUS["DEFAULT"])
    cpus = table[count]
    shapes = []
    for family, gb in N1_GB_PER_VCPU.items():
        for n in N1_SIZES:
            ram = n * gb
            if n >= cpus and ram >= 4 * cpus:
                shapes.append((n, ram, f"{family}-{n}"))
    n, ram, name = min(shapes)
    if ram != int(ram):
        sys.exit(f"build_catalog: {name} RAM {ram} is not whole")
    return name, n, int(ram)


def split_levels(values):
    """values: {key: per-unit price}. Returns (low_keys, high_keys) when there are two levels."""
    distinct = sorted(set(values.values()))
    if len(distinct) < 2:
        return set(), set()
    ratio, i = max((distinct[j + 1] / distinct[j], j) for j in range(len(distinct) - 1))
    if ratio < LEVEL_GAP:
        return set(), set()
    cut = distinct[i]
    low = {k for k, v in values.items() if v <= cut}
    return low, set(values) - low


def odd_high(values):
    """The keys on the upper of two levels, when that level is the rarer one (a few regions
    far above the rest: the Spot oddities of the research notes, not one cheap outlier)."""
    low, high = split_levels(values)
    return high if len(high) < len(low) else set()


def read_source(text):
    rows = list(csv.DictReader(io.StringIO(text)))
    hosts, gpus = [], {}
    for r in rows:
        if r["InstanceType"]:
            hosts.append(r)
        else:
            key = (r["AcceleratorName"], int(r["AcceleratorCount"]), r["AvailabilityZone"])
            if key in gpus:
                sys.exit(f"build_catalog: duplicate GPU row {key}")
            gpus[key] = r
    return hosts, gpus


def build(text):
    hosts, gpus = read_source(text)
    unknown = {r["InstanceType"] for r in hosts} - set(BUNDLED)
    if unknown:
        sys.exit(f"build_catalog: host types without a GPU mapping: {sorted(unknown)}")
    unknown = {k[0] for k in gpus} - set(GPUS)
    if unknown:
        sys.exit(f"build_catalog: GPU names without facts: {sorted(unknown)}")

    offers = []

    def offer(machine, acc, count, attached, vcpus, ram, region, zone, host, gpu_row):
        model, acc_type = GPUS[acc]
        facts = N1_FACTS if attached else MACHINE_FACTS[machine]
        gbps, gpudirect, host_nics, gpu_nics, nic_type = facts
        mem_mib = None
        if gpu_row is not None:
            mem_mib = int(gpu_row["GpuInfo"].split("'SizeInMiB':")[1].split("}")[0])
        host_od = number(host["Price"]) if host else None
        host_spot = number(host["SpotPrice"]) if host else None
        gpu_od = number(gpu_row["Price"]) if gpu_row else None
        gpu_spot = number(gpu_row["SpotPrice"]) if gpu_row else None
        offers.append(
            {
                "machine_type": machine,
                "acc": acc,
                "gpu": model,
                "accelerator_type": acc_type,
                "gpu_count": count,
                "gpus_attached": 1 if attached else 0,
                "mem_mib": mem_mib,
                "vcpus": vcpus,
                "ram_gb": ram,
                "network_gbps": gbps,
                "gpudirect": gpudirect,
                "host_nics": host_nics,
                "gpu_nics": gpu_nics,
                "gpu_nic_type": nic_type,
                "region": region,
                "zone": zone,
                "has_host": host is not None,
                "has_gpu": gpu_row is not None,
                "host_on_demand": host_od,
                "host_spot": host_spot,
                "gpu_on_demand": gpu_od,
                "gpu_spot": gpu_spot,
                "on_demand": add(host_od, gpu_od),
                "spot": add(host_spot, gpu_spot),
                "flags": set(),
            }
        )

    # 1. Machine types with a host row: one offer per host row, joined with the GPU row of
    #    the same zone (A2, A3 and G2).
    for h in hosts:
        machine = h["InstanceType"]
        acc, count = BUNDLED[machine]
        g = gpus.get((acc, count, h["AvailabilityZone"]))
        offer(
            machine,
            acc,
            count,
            False,
            whole(h["vCPUs"], "vCPUs"),
            whole(h["MemoryGiB"], "MemoryGiB"),
            h["Region"],
            h["AvailabilityZone"],
            h,
            g,
        )

    # 2. Bundled machine types with GPU rows but no host row anywhere in the source
    #    (a4-highgpu-8g): one offer per GPU zone, host price unknown.
    with_host = {h["InstanceType"] for h in hosts}
    for machine, (acc, count) in BUNDLED.items():
        if machine in with_host:
            continue
        vcpus, ram = HOST_SHAPES[machine]
        for (name, n, zone), g in sorted(gpus.items()):
            if name == acc and n == count:
                offer(machine, acc, count, False, vcpus, ram, g["Region"], zone, None, g)

    # 3. GPUs attached to N1 hosts: one offer per GPU row, host price unknown (the source
    #    has no N1 rows).
    for (name, n, zone), g in sorted(gpus.items()):
        if name in ATTACHED:
            machine, vcpus, ram = n1_host(name, n)
            offer(machine, name, n, True, vcpus, ram, g["Region"], zone, None, g)

    # GPU rows of bundled GPUs left unused: their machine type is not listed in that zone
    # (SkyPilot: "Some regions may not have the host VM available, although the GPU is
    # offered"), so they are not offers.
    used = {(o["acc"], o["gpu_count"], o["zone"]) for o in offers if o["has_gpu"]}
    skipped = sorted(k for k in gpus if k not in used)

    # GPU memory comes from the GPU row; an offer without one takes it from a sibling.
    mem = {o["acc"]: o["mem_mib"] for o in offers if o["mem_mib"] is not None}
    for o in offers:
        if o["mem_mib"] is None:
            o["mem_mib"] = mem.get(o["acc"])

    flag(offers)
    return offers, skipped


def flag(offers):
    for o in offers:
        f = o["flags"]
        if not o["has_host"]:
            f.add("host_price_missing")
        if not o["has_gpu"]:
            f.add("gpu_price_missing")
        if o["has_gpu"] and o["gpu_spot"] is None:
            f.add("spot_price_missing")
        if o["machine_type"] in NO_PLAIN_ON_DEMAND:
            f.add("no_plain_on_demand")
        od, spot = o["on_demand"], o["spot"]
        if od is None or spot is None:
            od, spot = o["gpu_on_demand"], o["gpu_spot"]
        if od is not None and spot is not None and spot > od:
            f.add("spot_above_on_demand")

    # Two price levels, per GPU (per-GPU price by region) and per host machine type.
    def per_unit(group, part, unit):
        by = defaultdict(dict)
        for o in offers:
            v = o[part]
            if v is not None:
                by[o[group]][o["region"]] = round(v / unit(o), 5)
        return by

    gpu_od = per_unit("acc", "gpu_on_demand", lambda o: o["gpu_count"])
    gpu_spot = per_unit("acc", "gpu_spot", lambda o: o["gpu_count"])
    host_od = per_unit("machine_type", "host_on_demand", lambda o: 1)
    host_spot = per_unit("machine_type", "host_spot", lambda o: 1)
    # On-demand: the lower level is the suspect one (the fetcher takes the first SKU whose
    # description matches, which can be a DWS or commitment SKU). Spot: a rarer upper level.
    low_od = {g: split_levels(v)[0] for g, v in gpu_od.items()}
    low_host_od = {g: split_levels(v)[0] for g, v in host_od.items()}
    high_spot = {g: odd_high(v) for g, v in gpu_spot.items()}
    high_host_spot = {g: odd_high(v) for g, v in host_spot.items()}
    for o in offers:
        r = o["region"]
        if o["gpu_on_demand"] is not None and r in low_od[o["acc"]]:
            o["flags"].add("on_demand_low_level")
        if o["host_on_demand"] is not None and r in low_host_od[o["machine_type"]]:
            o["flags"].add("on_demand_low_level")
        if o["gpu_spot"] is not None and r in high_spot[o["acc"]]:
            o["flags"].add("spot_high_level")
        if o["host_spot"] is not None and r in high_host_spot[o["machine_type"]]:
            o["flags"].add("spot_high_level")


def render(offers, source_text):
    sha = hashlib.sha256(source_text.encode()).hexdigest()
    out = io.StringIO()
    out.write(
        "# flightdeck GCP GPU offers. Generated by scripts/build_catalog.py from "
        "data/gcp-gpu-vms.source.csv: do not edit.\n"
    )
    out.write(f"# source: {SOURCE_DESCRIPTION}\n")
    out.write(f"# as_of: {AS_OF}\n")
    out.write(f"# source_sha256: {sha}\n")
    out.write(
        "# Prices: USD per hour; empty = unknown (never 0). on_demand/spot/flex = host + GPUs; "
        "gpu_* and host_* = the parts.\n"
    )
    out.write(",".join(COLUMNS) + "\n")
    for o in offers:
        mem = "" if o["mem_mib"] is None else str(o["mem_mib"] // 1024)
        cells = {
            **o,
            "gpu_memory_gb": mem,
            "network_gbps": "" if o["network_gbps"] is None else str(o["network_gbps"]),
            "flex": "",
            "flags": "|".join(x for x in FLAG_ORDER if x in o["flags"]),
        }
        for k in ("on_demand", "spot", "gpu_on_demand", "gpu_spot", "host_on_demand", "host_spot"):
            cells[k] = money(o[k])
        row = [str(cells[c]) for c in COLUMNS]
        for c in row:
            if "," in c or "\n" in c:
                sys.exit(f"build_catalog: cell {c!r} would need quoting")
        out.write(",".join(row) + "\n")
    return out.getvalue()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=SOURCE)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument(
        "--check", action="store_true", help="compare with the existing file instead of writing it"
    )
    args = ap.parse_args()
    source_text = args.source.read_text(encoding="utf-8")
    offers, skipped = build(source_text)
    text = render(offers, source_text)
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if current != text:
            print(
                f"build_catalog: {args.out} is not what scripts/build_catalog.py makes from "
                f"{args.source}; run python3 scripts/build_catalog.py",
                file=sys.stderr,
            )
            return 1
        print(f"build_catalog: {args.out} is up to date ({len(offers)} offers)", file=sys.stderr)
        return 0
    args.out.write_text(text, encoding="utf-8")
    counts = defaultdict(int)
    for o in offers:
        for f in o["flags"]:
            counts[f] += 1
    print(f"build_catalog: wrote {len(offers)} offers to {args.out}", file=sys.stderr)
    print(
        f"build_catalog: {len(skipped)} GPU rows have no host machine type in their zone "
        "(not offers)",
        file=sys.stderr,
    )
    for f in FLAG_ORDER:
        print(f"build_catalog:   {f}: {counts[f]} offers", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
