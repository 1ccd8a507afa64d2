# flightdeck's torch.distributed benchmark: the nccl-tests sweep (sizes from -b to -e by
# -f), timed with CUDA events, printed by rank 0 in nccl-tests' format so the same parser
# reads it. Launched by flightdeck with torchrun on every node (one process per GPU).
import argparse
import os
import socket

import torch
import torch.distributed as dist

DTYPES = {"float": torch.float32, "half": torch.float16, "bfloat16": torch.bfloat16, "double": torch.float64,
          "int32": torch.int32, "int64": torch.int64, "int8": torch.int8, "uint8": torch.uint8}


def bus_factor(op, n):
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "alltoall"):
        return (n - 1) / n
    return 1.0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--op", default="all_reduce")
    p.add_argument("--minbytes", type=int, default=8)
    p.add_argument("--maxbytes", type=int, default=1 << 30)
    p.add_argument("--stepfactor", type=int, default=2)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--dtype", default="float")
    a = p.parse_args()
    dtype = DTYPES[a.dtype]
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    rank, n = dist.get_rank(), dist.get_world_size()
    elem = torch.tensor([], dtype=dtype).element_size()
    dev = torch.device("cuda", local)
    info = torch.tensor([ord(c) for c in socket.gethostname()[:30].ljust(30)] + [local], dtype=torch.int32, device=dev)
    infos = [torch.zeros_like(info) for _ in range(n)]
    dist.all_gather(infos, info)
    if rank == 0:
        v = torch.cuda.nccl.version()
        print(f"# flightdeck torch.distributed benchmark (torch {torch.__version__}, NCCL {'.'.join(map(str, v)) if isinstance(v, tuple) else v})")
        print(f"# NCCL version {'.'.join(map(str, v)) if isinstance(v, tuple) else v}")
        print(f"# Collective test starting: {a.op}_perf")
        print(f"# nThread 1 nGpus 1 minBytes {a.minbytes} maxBytes {a.maxbytes} step: {a.stepfactor}(factor) "
              f"warmup iters: {a.warmup} iters: {a.iters} agg iters: 1 validation: 1 graph: 0")
        print("#\n# Using devices")
        for r, t in enumerate(infos):
            host = "".join(chr(c) for c in t[:30].tolist()).strip()
            d = int(t[30])
            print(f"#  Rank {r:2d} Group  0 Pid {os.getpid():6d} on {host:>10} device {d:2d} [0000:00:00] {torch.cuda.get_device_name(d)}")
        print("#")
        print("#                                                              out-of-place                       in-place          ")
        print("#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong ")
        print("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)         ")
    size = a.minbytes
    total, rows = 0.0, 0
    unit = elem * (n if a.op in ("all_gather", "reduce_scatter", "alltoall") else 1)
    while size <= a.maxbytes:
        count = max(size // elem, 1)
        count -= count % (n if a.op in ("all_gather", "reduce_scatter", "alltoall") else 1)
        if count == 0:
            size *= a.stepfactor
            continue
        nbytes = count * elem
        results = []
        for inplace in (False, True):
            x = torch.full((count,), rank + 1, dtype=dtype, device=dev)
            out = x if inplace else (x.clone() if a.op == "all_reduce" else torch.empty_like(x))
            chunk = count // n if n and count >= n else count

            def run():
                if a.op == "all_reduce":
                    # torch's all_reduce works in place: both halves time it on their own
                    # buffer (a copy into a separate output would time the copy too).
                    dist.all_reduce(out if not inplace else x)
                elif a.op == "all_gather":
                    dist.all_gather_into_tensor(out, x[rank * chunk:(rank + 1) * chunk] if inplace else x[:chunk])
                elif a.op == "reduce_scatter":
                    dist.reduce_scatter_tensor(out[rank * chunk:(rank + 1) * chunk] if inplace else out[:chunk], x)
                elif a.op == "alltoall":
                    dist.all_to_all_single(out, x)
                elif a.op == "broadcast":
                    dist.broadcast(x, 0)
                elif a.op == "reduce":
                    dist.reduce(x, 0)
                elif a.op == "sendrecv":
                    peer_to, peer_from = (rank + 1) % n, (rank - 1) % n
                    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, x, peer_to), dist.P2POp(dist.irecv, out, peer_from)])
                    for r in reqs:
                        r.wait()

            for _ in range(a.warmup):
                run()
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(a.iters):
                run()
            end.record()
            torch.cuda.synchronize()
            us = start.elapsed_time(end) * 1000.0 / a.iters
            wrong = 0
            if a.op == "all_reduce" and not inplace:
                # Validation apart from timing: every rank gives rank+1, the sum is exact.
                out.fill_(rank + 1)
                dist.all_reduce(out)
                if dtype not in (torch.float16, torch.bfloat16):
                    wrong = int((out != n * (n + 1) // 2).sum().item())
            t = torch.tensor([us], dtype=torch.float64, device=dev)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            us = float(t.item())
            algbw = nbytes / us / 1e3
            results.append((us, algbw, algbw * bus_factor(a.op, n), wrong if not inplace else "N/A"))
        if rank == 0:
            op_name = "sum" if a.op in ("all_reduce", "reduce_scatter", "reduce") else "none"
            root = 0 if a.op in ("broadcast", "reduce") else -1
            cells = "".join(f" {u:8.2f} {al:7.2f} {bb:7.2f} {str(w):>7}" for (u, al, bb, w) in results)
            print(f"{nbytes:12d}  {count:12d}  {a.dtype:>8}  {op_name:>6}  {root:6d}{cells}", flush=True)
        total += results[0][2] + results[1][2]
        rows += 2
        size *= a.stepfactor
    if rank == 0:
        print("# Out of bounds values : 0 OK")
        print(f"# Avg bus bandwidth    : {total / max(rows, 1):.4f} ")
        print("#")
        print(f"# Collective test concluded: {a.op}_perf")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
