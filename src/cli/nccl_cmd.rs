//! `flightdeck nccl parse FILE|- [--json]`: read nccl-tests output (a file, or stdin with
//! `-`) through the streaming parser and print an aligned table with a summary line, or
//! the JSON document of DESIGN.md.

use crate::nccl::{Parser, Report, Row};
use std::fs::File;
use std::io::{self, Read, Write};
use std::process::ExitCode;

/// Why `nccl parse` failed.
#[derive(Debug, thiserror::Error)]
pub enum NcclParseError {
    #[error("nccl parse: cannot read {name}")]
    Read {
        name: String,
        #[source]
        source: io::Error,
    },
    #[error("nccl parse: {name} is not nccl-tests output (no result rows and no column header found)")]
    NotNcclTests { name: String },
}

/// Run `nccl parse`.
pub fn parse(file: &str, json: bool) -> anyhow::Result<ExitCode> {
    let reports = read_reports(file)?;
    let text = if json {
        json_text(&reports)?
    } else {
        reports.iter().map(table).collect::<Vec<_>>().join("\n")
    };
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// Stream `file` (or stdin for `-`) through the parser; the tests it holds.
fn read_reports(file: &str) -> Result<Vec<Report>, NcclParseError> {
    let name = if file == "-" {
        "stdin".to_string()
    } else {
        file.to_string()
    };
    let read_error = |source| NcclParseError::Read {
        name: name.clone(),
        source,
    };
    let mut reader: Box<dyn Read> = if file == "-" {
        Box::new(io::stdin().lock())
    } else {
        Box::new(File::open(file).map_err(read_error)?)
    };
    let mut parser = Parser::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                parser.push_bytes(&buf[..n]);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(read_error(e)),
        }
    }
    parser.finish();
    let reports: Vec<Report> = parser
        .reports()
        .into_iter()
        .filter(Report::is_nccl_tests)
        .collect();
    if reports.is_empty() {
        return Err(NcclParseError::NotNcclTests { name });
    }
    Ok(reports)
}

/// One document for one test (the DESIGN.md contract); an array of them when the input
/// held several tests.
fn json_text(reports: &[Report]) -> serde_json::Result<String> {
    let mut text = match reports {
        [one] => serde_json::to_string_pretty(&one.document())?,
        many => serde_json::to_string_pretty(&many.iter().map(Report::document).collect::<Vec<_>>())?,
    };
    text.push('\n');
    Ok(text)
}

pub use crate::nccl::human_size;

/// A figure the way nccl-tests prints it: two decimals if they fit in `width`, then one,
/// then none.
fn figure(v: f64, width: usize) -> String {
    if !v.is_finite() {
        return v.to_string();
    }
    for decimals in [2, 1, 0] {
        let s = format!("{v:.decimals$}");
        if s.len() <= width {
            return s;
        }
    }
    format!("{v:.0}")
}

fn wrong_text(w: Option<f64>) -> String {
    match w {
        None => "N/A".to_string(),
        Some(v) if v.fract() == 0.0 => format!("{v:.0}"),
        Some(v) => format!("{v:e}"),
    }
}

const COLUMNS: [&str; 13] = [
    "size", "count", "type", "redop", "root", "time(us)", "algbw", "busbw", "wrong", "time(us)", "algbw",
    "busbw", "wrong",
];

fn cells(row: &Row) -> Vec<String> {
    let mut c = vec![
        human_size(row.size),
        row.count.to_string(),
        row.dtype.clone(),
        row.redop.clone(),
        row.root.map_or_else(|| "-".to_string(), |r| r.to_string()),
    ];
    for half in [&row.out_of_place, &row.in_place] {
        match half {
            Some(m) => c.extend([
                figure(m.time_us, 7),
                figure(m.algbw, 6),
                figure(m.busbw, 6),
                wrong_text(m.wrong),
            ]),
            None => c.extend(["-", "-", "-", "-"].map(String::from)),
        }
    }
    c
}

/// The aligned table and the summary line of one test.
pub fn table(report: &Report) -> String {
    let body: Vec<Vec<String>> = report.rows.iter().map(cells).collect();
    let mut widths: Vec<usize> = COLUMNS.iter().map(|h| h.len()).collect();
    for row in &body {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let gap = "  ";
    let line = |cells: &[String]| -> String {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:>w$}"))
            .collect();
        padded.join(gap).trim_end().to_string() + "\n"
    };
    let span = |from: usize, to: usize| widths[from..to].iter().sum::<usize>() + gap.len() * (to - from - 1);
    let prefix = span(0, 5);
    let (oop, ip) = (span(5, 9), span(9, 13));
    let mut out = format!(
        "{:prefix$}{gap}{:^oop$}{gap}{:^ip$}",
        "", "out-of-place", "in-place"
    )
    .trim_end()
    .to_string();
    out.push('\n');
    out.push_str(&line(&COLUMNS.map(String::from)));
    for row in &body {
        out.push_str(&line(row));
    }
    out.push('\n');
    out.push_str(&summary(report));
    out.push('\n');
    out
}

/// `collective all_reduce, ranks 2, NCCL 2.28.9, transport NVLink P2P, avg busbw ...`.
pub fn summary(report: &Report) -> String {
    let unknown = || "unknown".to_string();
    let mut parts = vec![
        format!("collective {}", report.collective.clone().unwrap_or_else(unknown)),
        format!("ranks {}", report.ranks().map_or_else(unknown, |r| r.to_string())),
        format!("NCCL {}", report.nccl_version.clone().unwrap_or_else(unknown)),
        format!(
            "transport {}",
            match (&report.transport, report.transport_summary()) {
                (_, Some(t)) => t,
                (None, None) => "unknown (no NCCL_DEBUG=INFO lines)".to_string(),
                (Some(_), None) => unknown(),
            }
        ),
        format!(
            "avg busbw {}",
            report.avg_busbw.map_or_else(unknown, |b| format!("{b} GB/s"))
        ),
        format!(
            "peak busbw {}",
            report.peak_row().map_or_else(unknown, |r| {
                let bw = r.out_of_place.as_ref().map_or(f64::NAN, |m| m.busbw);
                format!("{bw} GB/s at {}", human_size(r.size))
            })
        ),
        format!("{} rows", report.rows.len()),
    ];
    if let Some(oob) = report.out_of_bounds.filter(|o| !o.ok || o.count > 0) {
        parts.push(format!("OUT OF BOUNDS VALUES {} FAILED", oob.count));
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_sizes() {
        for (bytes, want) in [
            (0, "0B"),
            (8, "8B"),
            (1000, "1000B"),
            (1024, "1K"),
            (1536, "1.5K"),
            (8 << 20, "8M"),
            (1 << 30, "1G"),
            (8589934592, "8G"),
            (3 << 40, "3T"),
            ((1 << 20) + 1, "1M"),
        ] {
            assert_eq!(human_size(bytes), want, "{bytes}");
        }
    }

    #[test]
    fn figures_as_nccl_tests_prints_them() {
        assert_eq!(figure(13.34, 7), "13.34");
        assert_eq!(figure(24704.0, 7), "24704.0");
        assert_eq!(figure(1412.5, 7), "1412.50");
        assert_eq!(figure(123456.0, 7), "123456");
        assert_eq!(figure(347.71, 6), "347.71");
        assert_eq!(figure(0.0, 6), "0.00");
        assert_eq!(wrong_text(None), "N/A");
        assert_eq!(wrong_text(Some(0.0)), "0");
        assert_eq!(wrong_text(Some(2e-7)), "2e-7");
    }

    #[test]
    fn table_is_aligned() {
        let text = include_str!("../../tests/fixtures/nccl/h200x2-alltoall.txt");
        let reports = crate::nccl::parse_text(text);
        let t = table(&reports[0]);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].contains("out-of-place") && lines[0].contains("in-place"));
        assert!(lines[1].trim_start().starts_with("size"));
        // Every row line ends at the same column as the header.
        let width = lines[1].len();
        for l in &lines[2..33] {
            assert_eq!(l.len(), width, "{l}");
        }
        assert!(lines[32].trim_start().starts_with("8G"));
        assert!(lines[32].ends_with("N/A"));
        assert_eq!(
            lines[34],
            "collective alltoall, ranks 2, NCCL 2.28.9, transport unknown (no NCCL_DEBUG=INFO lines), \
             avg busbw 103.213 GB/s, \
             peak busbw 338.58 GB/s at 8G, 31 rows"
        );
    }
}

// ---- nccl run / nccl attach ----

use super::{Cli, NcclEngine, NcclProfile};
use crate::exec::{self, Event, Stream, Transport};
use crate::fleet::NodeTarget;
use crate::nccl::runner::{self, Engine, RunSpec, EXIT_MARKER};
use crate::nccl::GpuDirect;
use crate::paths::Paths;
use crate::store::{self, RunNode, RunRecord, Store};

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The fleet's name (or a fleet file).
    pub fleet: String,
    /// Collective: all_reduce, all_gather, reduce_scatter, alltoall, broadcast, reduce, sendrecv.
    #[arg(long, default_value = "all_reduce")]
    pub test: String,
    /// Smallest message size (e.g. 8, 1M).
    #[arg(short = 'b', long = "minbytes", default_value = "8")]
    pub min_bytes: String,
    /// Largest message size (e.g. 8G).
    #[arg(short = 'e', long = "maxbytes", default_value = "8G")]
    pub max_bytes: String,
    /// Size multiplication factor between steps.
    #[arg(short = 'f', long = "stepfactor", default_value_t = 2)]
    pub step_factor: u32,
    /// GPUs per node (default: all of the node's GPUs).
    #[arg(short = 'g', long = "ngpus")]
    pub gpus: Option<u32>,
    /// Timed iterations per size.
    #[arg(short = 'n', long = "iters", default_value_t = 20)]
    pub iters: u32,
    /// Warm-up iterations per size.
    #[arg(short = 'w', long = "warmup_iters", default_value_t = 5)]
    pub warmup: u32,
    /// Data type (float, half, bfloat16, double, int32, ...).
    #[arg(short = 'd', long = "datatype", default_value = "float")]
    pub dtype: String,
    /// Benchmark engine: nccl-tests binaries on the node, or flightdeck's torch.distributed benchmark.
    #[arg(long, value_enum, default_value = "nccl-tests")]
    pub engine: NcclEngine,
    /// GPUDirect environment profile (auto: none for local and SSH fleets).
    #[arg(long, value_enum, default_value = "auto")]
    pub profile: NcclProfile,
    /// Where the nccl-tests binaries are on the nodes (else PATH, NCCL_TESTS_DIR, /opt/nccl-tests/build, ~/nccl-tests/build).
    #[arg(long, value_name = "DIR")]
    pub nccl_tests_dir: Option<String>,
    /// Only these node indices, e.g. 0,1.
    #[arg(long, value_delimiter = ',', value_name = "N,N")]
    pub nodes: Vec<usize>,
    /// Print one JSON document instead of a table.
    #[arg(long)]
    pub json: bool,
}

fn spec(args: &RunArgs) -> anyhow::Result<RunSpec> {
    let s = RunSpec {
        collective: args.test.clone(),
        min_bytes: runner::parse_size(&args.min_bytes)?,
        max_bytes: runner::parse_size(&args.max_bytes)?,
        step_factor: args.step_factor,
        gpus: args.gpus,
        iters: args.iters,
        warmup: args.warmup,
        dtype: args.dtype.clone(),
        engine: match args.engine {
            NcclEngine::NcclTests => Engine::NcclTests,
            NcclEngine::Torch => Engine::Torch,
        },
        profile: match args.profile {
            NcclProfile::Auto | NcclProfile::None => GpuDirect::None,
            NcclProfile::Tcpx => GpuDirect::Tcpx,
            NcclProfile::Tcpxo => GpuDirect::Tcpxo,
            NcclProfile::Rdma => GpuDirect::Rdma,
        },
        nccl_tests_dir: args.nccl_tests_dir.clone(),
    };
    s.check()?;
    Ok(s)
}

/// Launch the run on the nodes, record it, and follow it.
pub fn run(args: &RunArgs, cli: &Cli, paths: &Paths) -> anyhow::Result<ExitCode> {
    let spec = spec(args)?;
    let (fleet, all, transport) = super::exec_cmd::resolve_fleet(&args.fleet, cli, paths)?;
    let mut nodes: Vec<NodeTarget> = if args.nodes.is_empty() {
        all.clone()
    } else {
        all.iter()
            .filter(|n| args.nodes.contains(&n.index))
            .cloned()
            .collect()
    };
    if nodes.is_empty() {
        anyhow::bail!("no nodes selected");
    }
    if spec.engine == Engine::NcclTests && nodes.len() > 1 {
        anyhow::bail!(
            "nccl-tests across {} nodes needs mpirun between them, which is not in this build: use --engine torch, or one node with --nodes 0",
            nodes.len()
        );
    }
    let master = nodes[0]
        .internal_ip
        .clone()
        .unwrap_or_else(|| nodes[0].host.clone());
    let id = runner::new_id(&spec.collective, store::now_unix());
    let count = nodes.len();
    let jobs: Vec<(NodeTarget, String)> = nodes
        .iter()
        .enumerate()
        .map(|(rank, n)| {
            let script = runner::node_script(&spec, rank, count, &master);
            (
                n.clone(),
                runner::launch_command(&id, &script, spec.engine == Engine::Torch),
            )
        })
        .collect();
    let rt = super::fleet_cmd::runtime()?;
    let launched = rt.block_on(collect(transport.clone(), jobs))?;
    let mut failed = vec![];
    for (n, (code, out, err)) in nodes.iter().zip(&launched) {
        if *code != 0 || !out.starts_with("started ") {
            failed.push(format!("{}: {} {}", n.name, out.trim(), err.trim()));
        }
    }
    if !failed.is_empty() {
        anyhow::bail!("the run could not start:\n  {}", failed.join("\n  "));
    }
    let record = RunRecord {
        id: id.clone(),
        kind: "nccl".into(),
        fleet: fleet.clone(),
        started_at: store::now_unix(),
        nodes: nodes
            .iter()
            .zip(&launched)
            .map(|(n, (_, out, _))| RunNode {
                node: n.index,
                pid: out.trim().strip_prefix("started ").and_then(|p| p.parse().ok()),
                log: format!("~/{}/out.log", runner::run_dir(&id)),
                exit_code: None,
            })
            .collect(),
    };
    Store::new(&paths.state_dir).update(|s| s.runs.push(record))?;
    eprintln!("run {id} started on {count} node(s) of `{fleet}`; it survives this terminal: `flightdeck nccl attach {id}` follows it again");
    nodes.truncate(count);
    follow(&rt, transport, &fleet, &id, &nodes, args.json, paths)
}

/// Follow a recorded run from its first line.
pub fn attach(id: Option<&str>, json: bool, cli: &Cli, paths: &Paths) -> anyhow::Result<ExitCode> {
    let (state, _) = Store::new(&paths.state_dir).load()?;
    let runs: Vec<&RunRecord> = state.runs.iter().filter(|r| r.kind == "nccl").collect();
    let run = match id {
        Some(id) => runs.iter().find(|r| r.id == id).copied().ok_or_else(|| {
            let hint = crate::yaml::closest(id, runs.iter().map(|r| r.id.as_str()))
                .map(|h| format!("; did you mean `{h}`?"))
                .unwrap_or_default();
            anyhow::anyhow!("no NCCL run `{id}` in the state{hint}")
        })?,
        None => runs
            .iter()
            .max_by_key(|r| r.started_at)
            .copied()
            .ok_or_else(|| anyhow::anyhow!("no NCCL runs yet"))?,
    };
    let (fleet, all, transport) = super::exec_cmd::resolve_fleet(&run.fleet, cli, paths)?;
    let nodes: Vec<NodeTarget> = run
        .nodes
        .iter()
        .filter_map(|rn| all.iter().find(|n| n.index == rn.node).cloned())
        .collect();
    let rt = super::fleet_cmd::runtime()?;
    follow(&rt, transport, &fleet, &run.id, &nodes, json, paths)
}

/// Run one command per node and collect (exit code, stdout, stderr) in node order.
async fn collect(
    transport: Transport,
    jobs: Vec<(NodeTarget, String)>,
) -> anyhow::Result<Vec<(i32, String, String)>> {
    let order: Vec<usize> = jobs.iter().map(|(n, _)| n.index).collect();
    let (tx, mut rx) = tokio::sync::mpsc::channel(1024);
    let h = tokio::spawn(exec::run_each(transport, jobs, 64, tx));
    let mut out: Vec<(i32, String, String)> =
        vec![(exec::UNREACHABLE, String::new(), String::new()); order.len()];
    while let Some(e) = rx.recv().await {
        match e {
            Event::Line { node, stream, text } => {
                let k = order.iter().position(|i| *i == node).expect("known node");
                let buf = if stream == Stream::Stdout {
                    &mut out[k].1
                } else {
                    &mut out[k].2
                };
                buf.push_str(&text);
                buf.push('\n');
            }
            Event::Done { node, result } => {
                let k = order.iter().position(|i| *i == node).expect("known node");
                out[k].0 = result.code;
                if let Some(err) = result.error {
                    out[k].2.push_str(&err);
                }
            }
        }
    }
    h.await?;
    Ok(out)
}

/// Stream the run's output: the first node's through the parser (rows shown as they
/// come), every node's exit code from its marker line.
fn follow(
    rt: &tokio::runtime::Runtime,
    transport: Transport,
    fleet: &str,
    id: &str,
    nodes: &[NodeTarget],
    json: bool,
    paths: &Paths,
) -> anyhow::Result<ExitCode> {
    let head = nodes
        .first()
        .map(|n| n.index)
        .ok_or_else(|| anyhow::anyhow!("the run has no nodes"))?;
    let jobs: Vec<(NodeTarget, String)> = nodes
        .iter()
        .map(|n| (n.clone(), runner::follow_command(id)))
        .collect();
    let mut parser = Parser::new();
    let mut codes: Vec<(usize, Option<i32>)> = nodes.iter().map(|n| (n.index, None)).collect();
    let mut others: Vec<String> = vec![];
    // The head node's last lines, shown when the run fails.
    let mut head_tail: Vec<String> = vec![];
    rt.block_on(async {
        let (tx, mut rx) = tokio::sync::mpsc::channel(4096);
        let h = tokio::spawn(exec::run_each(transport, jobs, 64, tx));
        while let Some(e) = rx.recv().await {
            let Event::Line { node, text, .. } = e else {
                continue;
            };
            if let Some(code) = text.strip_prefix(EXIT_MARKER) {
                if let Some(c) = codes.iter_mut().find(|(n, _)| *n == node) {
                    c.1 = code.trim().parse().ok();
                }
                continue;
            }
            if node != head {
                others.push(format!(
                    "{}: {text}",
                    nodes
                        .iter()
                        .find(|n| n.index == node)
                        .map_or("?", |n| n.name.as_str())
                ));
                continue;
            }
            head_tail.push(text.clone());
            if head_tail.len() > 40 {
                head_tail.remove(0);
            }
            for ev in parser.push_line(&text) {
                if let (crate::nccl::Event::Row(row), false) = (&ev, json) {
                    let oop = row.out_of_place.as_ref();
                    eprintln!(
                        "{:>8}  busbw {:>8} GB/s  algbw {:>8} GB/s  {:>10} us",
                        human_size(row.size),
                        oop.map_or("-".into(), |m| format!("{:.2}", m.busbw)),
                        oop.map_or("-".into(), |m| format!("{:.2}", m.algbw)),
                        oop.map_or("-".into(), |m| format!("{:.1}", m.time_us)),
                    );
                }
            }
        }
        let _ = h.await;
    });
    parser.finish();
    let report = parser.report();
    // Record the exit codes.
    let recorded = codes.clone();
    let _ = Store::new(&paths.state_dir).update(|s| {
        if let Some(r) = s.runs.iter_mut().find(|r| r.id == id) {
            for rn in &mut r.nodes {
                if let Some((_, Some(c))) = recorded.iter().find(|(n, _)| *n == rn.node) {
                    rn.exit_code = Some(*c);
                }
            }
        }
    });
    if let Some(w) = crate::nccl::fallback_warning(GpuDirect::None, report.transport.as_ref()) {
        eprintln!("{w}");
    }
    let worst = codes
        .iter()
        .map(|(_, c)| c.unwrap_or(exec::UNREACHABLE))
        .max()
        .unwrap_or(0);
    if json {
        let mut doc = serde_json::to_value(report.document())?;
        doc["run"] = serde_json::json!({
            "id": id,
            "fleet": fleet,
            "exit_codes": codes.iter().map(|(n, c)| serde_json::json!({"node": n, "exit_code": c})).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else if !report.rows.is_empty() {
        print!("{}", table(&report));
    }
    if worst != 0 {
        eprintln!(
            "run {id}: exit codes {:?}",
            codes
                .iter()
                .map(|(n, c)| (n, c.unwrap_or(exec::UNREACHABLE)))
                .collect::<Vec<_>>()
        );
        let head_name = nodes[0].name.as_str();
        for l in head_tail.iter().filter(|l| !l.starts_with('#')) {
            eprintln!("{head_name}: {l}");
        }
        for l in others.iter().rev().take(20).rev() {
            eprintln!("{l}");
        }
    }
    if report.rows.is_empty() && worst == 0 {
        eprintln!("run {id}: finished without rows of nccl-tests output");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::from(worst.clamp(0, 255) as u8))
}
