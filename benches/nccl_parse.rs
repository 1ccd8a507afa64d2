//! `nccl parse` on a 100 MB log (or `NCCL_PARSE_BENCH_MB`) of 16 ranks interleaved, as
//! mpirun --tag-output gives one with NCCL_DEBUG=INFO on every rank: each rank's NCCL
//! lines (channels, rings, trees), nccl-tests' tables of rank 0 in between, a row cut
//! by a debug line now and then, test after test. The parser reads it in 64 KiB
//! chunks, as `nccl parse` does; the time is the median of 3 passes, with the rate,
//! the tests and rows read, and the process's peak memory. Side by side: `awk` counting
//! the same rows and `grep -c` finding the NCCL lines, the line scan an operator would
//! otherwise run.
//!
//! Run: `cargo bench --bench nccl_parse` (release).

use flightdeck::nccl::Parser;
use std::fmt::Write as _;
use std::io::Write as _;
use std::time::Instant;

fn log(bytes: usize) -> String {
    let ranks = 16;
    let mut s = String::with_capacity(bytes + 4096);
    let mut test = 0;
    while s.len() < bytes {
        test += 1;
        let _ = writeln!(
            s,
            "[1,0]<stdout>:# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809"
        );
        let _ = writeln!(s, "[1,0]<stdout>:# Collective test starting: all_reduce_perf");
        let _ = writeln!(s, "[1,0]<stdout>:# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0");
        for r in 0..ranks {
            let _ = writeln!(
                s,
                "[1,0]<stdout>:#  Rank {r:2} Group  0 Pid {:6} on node-{} device  {} [0000:{:02x}:00] NVIDIA H200",
                1000 + r,
                r / 8,
                r % 8,
                r + 6
            );
        }
        for r in 0..ranks {
            let h = r / 8;
            let _ = writeln!(s, "[1,{r}]<stdout>:node-{h}:{}:{} [{}] NCCL INFO comm 0x55d0 rank {r} nRanks {ranks} nNodes 2 localRanks 8 localRank {} MNNVL 0", 1000 + r, 2000 + r, r % 8, r % 8);
            for c in 0..8 {
                let _ = writeln!(s, "[1,{r}]<stdout>:node-{h}:{}:{} [{}] NCCL INFO Channel {c:02}/0 : {r}[{}] -> {}[{}] [send] via NET/IB/{}/GDRDMA", 1000 + r, 2000 + r, r % 8, r % 8, (r + 8) % ranks, r % 8, c % 8);
            }
        }
        let _ = writeln!(s, "[1,0]<stdout>:#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong");
        let _ = writeln!(s, "[1,0]<stdout>:#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)");
        let mut size: u64 = 8;
        let mut k = 0;
        while size <= 8 << 30 {
            let t = 20.0 + size as f64 / 4.0e5;
            let alg = size as f64 / t / 1e3;
            let bus = alg * 2.0 * 15.0 / 16.0;
            k += 1;
            if k % 7 == 0 {
                // A debug line lands inside the row, as nccl-tests prints it in pieces.
                let _ = write!(
                    s,
                    "[1,0]<stdout>:{size:>12}  {:>12}     float     sum      -1",
                    size / 4
                );
                let _ = writeln!(s, "node-0:1000:2000 [0] NCCL INFO Connected all trees");
                let _ = writeln!(s, "[1,0]<stdout>:  {t:7.2} {alg:7.2} {bus:7.2}       0  {t:7.2} {alg:7.2} {bus:7.2}       0");
            } else {
                let _ = writeln!(s, "[1,0]<stdout>:{size:>12}  {:>12}     float     sum      -1  {t:7.2} {alg:7.2} {bus:7.2}       0  {t:7.2} {alg:7.2} {bus:7.2}       0", size / 4);
            }
            // The other ranks' lines between rows.
            for r in (1..ranks).step_by(5) {
                let _ = writeln!(s, "[1,{r}]<stdout>:node-{}:{}:{} [{}] NCCL INFO AllReduce: opCount {k} sendbuff 0x7f00 recvbuff 0x7f00 count {} datatype 7 op 0 root 0 comm 0x55d0 [nranks={ranks}] stream 0x55e0", r / 8, 1000 + r, 2000 + r, r % 8, size / 4);
            }
            size *= 2;
        }
        let _ = writeln!(s, "[1,0]<stdout>:# Out of bounds values : 0 OK");
        let _ = writeln!(s, "[1,0]<stdout>:# Avg bus bandwidth    : {}.5 ", 100 + test % 50);
        let _ = writeln!(s, "[1,0]<stdout>:# Collective test concluded: all_reduce_perf");
    }
    s
}

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

fn main() {
    let mb: usize = std::env::var("NCCL_PARSE_BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let text = log(mb << 20);
    let bytes = text.as_bytes();
    println!(
        "log: {:.1} MB, {} lines, 16 ranks interleaved",
        bytes.len() as f64 / 1e6,
        bytecount(bytes)
    );
    let mut times = vec![];
    let mut summary = String::new();
    for _ in 0..3 {
        let t = Instant::now();
        let mut p = Parser::new();
        let mut rows = 0usize;
        for chunk in bytes.chunks(64 << 10) {
            rows += p
                .push_bytes(chunk)
                .iter()
                .filter(|e| matches!(e, flightdeck::nccl::Event::Row(_)))
                .count();
        }
        p.finish();
        let reports = p.reports();
        times.push(t.elapsed().as_secs_f64());
        summary = format!(
            "{} tests kept, {rows} rows streamed, ranks {:?}, transport {:?}",
            reports.len(),
            reports[0].ranks(),
            reports[0].transport_summary()
        );
    }
    times.sort_by(f64::total_cmp);
    let median = times[1];
    println!(
        "flightdeck parser: median {median:.2} s (min {:.2}, max {:.2}), {:.0} MB/s; {summary}; peak RSS {:.0} MiB (the log itself is {:.0} MiB of it)",
        times[0],
        times[2],
        bytes.len() as f64 / 1e6 / median,
        peak_rss_mib(),
        bytes.len() as f64 / (1 << 20) as f64
    );
    // Side by side: the line scans an operator would run on the same file.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.txt");
    std::fs::File::create(&path).unwrap().write_all(bytes).unwrap();
    for (name, cmd) in [
        (
            "awk counting rows",
            format!(
                "awk '/^\\[1,0\\]<stdout>: *[0-9]/ {{n++}} END {{print n}}' {}",
                path.display()
            ),
        ),
        (
            "grep -c NCCL INFO",
            format!("grep -c 'NCCL INFO' {}", path.display()),
        ),
    ] {
        let t = Instant::now();
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(&cmd)
            .output()
            .unwrap();
        println!(
            "{name}: {:.2} s ({})",
            t.elapsed().as_secs_f64(),
            String::from_utf8_lossy(&out.stdout).trim()
        );
    }
}

fn bytecount(b: &[u8]) -> usize {
    b.iter().filter(|&&c| c == b'\n').count()
}
