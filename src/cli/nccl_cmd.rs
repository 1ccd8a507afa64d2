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
    #[error("nccl parse: {name} is not an NCCL log (no nccl-tests table, banner or rank list, no NCCL debug line, no PyTorch NCCL error)")]
    NotNcclTests { name: String },
}

/// The machine type a test is judged for, how many nodes, and where that came from.
type Machine = (String, Option<u32>, &'static str);

/// Run `nccl parse`. Each test gets a verdict (`verdict` in the JSON document, a last
/// line in the table) against the machine type given, or else the one its rank list
/// names (`2xH200` for one host with two H200s), as the run history does; with a
/// GPUDirect profile (given, or the machine type's) the transport is judged as a run's.
/// A run that did not finish says so and how far it got. Exit 1 when one did not
/// finish or a verdict failed.
pub fn parse(
    file: &str,
    json: bool,
    machine_type: Option<&str>,
    nodes: Option<u32>,
    profile: NcclProfile,
) -> anyhow::Result<ExitCode> {
    let reports = read_reports(file)?;
    let gd = profile.flavour_or(machine_type.map_or(GpuDirect::None, crate::cloud::gcp::layout::flavour));
    let machines: Vec<Option<Machine>> = reports
        .iter()
        .map(|r| match machine_type {
            Some(m) => Some((m.to_string(), nodes, "--machine-type")),
            None => crate::nccl::expect::machine_from_devices(r)
                .map(|(m, n)| (m, nodes.or(Some(n)), "nccl-tests rank list")),
        })
        .collect();
    let verdicts: Vec<Option<crate::nccl::expect::Verdict>> = reports
        .iter()
        .zip(&machines)
        .map(|(r, m)| {
            if m.is_none() && gd == GpuDirect::None {
                return None;
            }
            let (name, n) = match m {
                Some((name, n, _)) => (Some(name.as_str()), *n),
                None => (None, nodes),
            };
            Some(crate::nccl::expect::judge_run(r, name, n, gd))
        })
        .collect();
    let failed = reports.iter().any(|r| !r.finished())
        || verdicts
            .iter()
            .flatten()
            .any(|v| v.grade == crate::nccl::expect::Grade::Fail);
    let text = if json {
        json_text(&reports, &verdicts, &machines)?
    } else {
        reports
            .iter()
            .zip(verdicts.iter().zip(&machines))
            .map(|(r, (v, m))| {
                let mut out = if r.is_nccl_tests() {
                    table(r)
                } else {
                    summary(r) + "\n"
                };
                if let Some(v) = v {
                    out.push_str(&verdict_line(v, m.as_ref().map(|m| m.2)));
                    out.push('\n');
                }
                if let Some(u) = r.unfinished() {
                    out.push_str(&u);
                    out.push('\n');
                }
                out
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    // The file may be anybody's: its words (data types, reductions) are shown, never
    // acted on.
    let text = crate::term::visible::text(&text);
    let mut out = io::stdout().lock();
    // shown
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(e.into()),
        _ if failed => Ok(ExitCode::FAILURE),
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
        .filter(Report::says_anything)
        .collect();
    if reports.is_empty() {
        return Err(NcclParseError::NotNcclTests { name });
    }
    Ok(reports)
}

/// One document for one test (the DESIGN.md contract); an array of them when the input
/// held several tests.
fn json_text(
    reports: &[Report],
    verdicts: &[Option<crate::nccl::expect::Verdict>],
    machines: &[Option<Machine>],
) -> serde_json::Result<String> {
    /// The document of DESIGN.md, its keys in order, then the machine type it was judged
    /// for (and where that came from) and the verdict.
    #[derive(serde::Serialize)]
    struct Judged<'a> {
        #[serde(flatten)]
        doc: crate::nccl::Document<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        machine_type: Option<serde_json::Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        verdict: Option<&'a crate::nccl::expect::Verdict>,
        /// How a run that did not finish ended, in a sentence.
        #[serde(skip_serializing_if = "Option::is_none")]
        unfinished: Option<String>,
    }
    let docs: Vec<Judged> = reports
        .iter()
        .zip(verdicts.iter().zip(machines))
        .map(|(r, (v, m))| Judged {
            doc: r.document(),
            machine_type: m
                .as_ref()
                .map(|(name, _, from)| serde_json::json!({"name": name, "from": from})),
            verdict: v.as_ref(),
            unfinished: r.unfinished(),
        })
        .collect();
    let mut text = match docs.as_slice() {
        [one] => serde_json::to_string_pretty(one)?,
        many => serde_json::to_string_pretty(many)?,
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

/// `collective all_reduce, ranks 2, NCCL 2.28.9, transport NVLink P2P, avg busbw ...`;
/// a log without a table (NCCL's or PyTorch's) starts with its kind and has no figures.
pub fn summary(report: &Report) -> String {
    let unknown = || "unknown".to_string();
    let collective = match (
        &report.collective,
        report.collective_from,
        &report.collective_choices,
    ) {
        (Some(c), Some("the table"), _) => format!("{c} (inferred from the table)"),
        (Some(c), Some("NCCL's collective lines"), _) => format!("{c} (from NCCL's collective lines)"),
        (Some(c), _, _) => c.clone(),
        (None, _, Some(choices)) => format!("unknown (the table fits {choices})"),
        (None, _, None) => unknown(),
    };
    let mut transport = match (&report.transport, report.transport_summary()) {
        (_, Some(t)) => t,
        (None, None) => "unknown (no NCCL_DEBUG=INFO lines)".to_string(),
        (Some(_), None) => unknown(),
    };
    if let Some(t) = &report.transport {
        let plugin = match (&t.plugin, &t.no_plugin_found, &t.net_error) {
            (_, _, Some(e)) => Some(format!("NCCL: {e}")),
            (Some(p), _, _) => Some(format!("plugin {p}")),
            (None, Some(l), _) if l.is_empty() => Some("no net plugin found".to_string()),
            (None, Some(l), _) => Some(format!("no net plugin found: {l}")),
            (None, None, None) => None,
        };
        if let Some(p) = plugin {
            transport = format!("{transport} ({p})");
        }
    }
    let mut parts = vec![];
    if !report.is_nccl_tests() {
        parts.push(format!("{} log", report.kind()));
    }
    parts.push(format!("collective {collective}"));
    parts.push(format!(
        "ranks {}",
        report.ranks().map_or_else(unknown, |r| r.to_string())
    ));
    if !report.hosts.is_empty() {
        parts.push(crate::words::plural(report.hosts.len(), "host"));
    }
    parts.push(format!(
        "NCCL {}",
        report.nccl_version.clone().unwrap_or_else(unknown)
    ));
    if let Some(v) = &report.tests_version {
        parts.push(format!("nccl-tests {v}"));
    }
    parts.push(format!("transport {transport}"));
    if report.is_nccl_tests() {
        parts.push(format!(
            "avg busbw {}",
            report.avg_busbw.map_or_else(unknown, |b| format!("{b} GB/s"))
        ));
        parts.push(format!(
            "peak busbw {}",
            report.peak_row().map_or_else(unknown, |r| {
                let bw = r.out_of_place.as_ref().map_or(f64::NAN, |m| m.busbw);
                format!("{bw} GB/s at {}", human_size(r.size))
            })
        ));
        parts.push(crate::words::plural(report.rows.len(), "row"));
    }
    if let Some(oob) = report.out_of_bounds.filter(|o| !o.ok || o.count > 0) {
        parts.push(format!("OUT OF BOUNDS VALUES {} FAILED", oob.count));
    }
    parts.join(", ")
}

// ---- nccl run / nccl attach ----

use super::{BenchArgs, Cli, NcclEngine, NcclProfile, RunArgs};
use crate::fleet::{BackendKind, NodeTarget};
use crate::nccl::expect::Verdict;
use crate::nccl::history::{self, SavedRun};
use crate::nccl::launcher::Start;
use crate::nccl::remote;
use crate::nccl::runner::{self, Engine, RunSpec};
use crate::nccl::{pods, profile, GpuDirect};
use crate::paths::Paths;
use crate::reach::Reach;
use crate::store::{self, RunRecord, Store};

/// The profile's lines for a fleet of family `kind` ([`profile::env_lines`]: a VM's or a
/// pod's) with `--env KEY=VALUE` settings after them; `None` without any.
fn edited_env(
    kind: BackendKind,
    profile: GpuDirect,
    settings: &[String],
) -> anyhow::Result<Option<Vec<String>>> {
    if settings.is_empty() {
        return Ok(None);
    }
    let mut lines = profile::env_lines(kind, profile);
    for kv in settings {
        let Some((k, v)) = kv.split_once('=') else {
            anyhow::bail!("--env {kv}: expected KEY=VALUE");
        };
        if !crate::shellenv::is_name(k) {
            anyhow::bail!(
                "--env {kv}: `{k}` is not a variable name (letters, digits and _, not first a digit)"
            );
        }
        lines.push(crate::shellenv::export(k, crate::shellenv::Value::Literal(v)));
    }
    Ok(Some(lines))
}

/// What a run is, planned from the flags and the fleet: its spec, the machine type the
/// verdict is judged for (and where it came from), and why the profile is what it is.
pub(super) struct Plan {
    pub spec: RunSpec,
    pub machine: Option<(String, String)>,
    pub why: String,
}

/// Plan a run on a fleet of family `kind`: the machine type from `--machine-type`, else
/// the fleet file's instance_types; `--profile auto` picks [`profile::auto_profile`]'s
/// (the fleet file's `network.gpudirect` first, then the machine type's flavour).
pub(super) fn plan(
    b: &BenchArgs,
    fleet_arg: &str,
    fleet: &str,
    kind: BackendKind,
    paths: &Paths,
) -> anyhow::Result<Plan> {
    let fleet_spec = remote::fleet_spec(&paths.state_dir, fleet_arg, fleet);
    // A GKE fleet's machine type is its nodes' (or node pools'): GKE fleet files name none.
    let gke_machine = match (kind, &fleet_spec, &b.machine_type) {
        (BackendKind::Gke, Some(spec), None) => super::runtime()?.block_on(profile::gke_machine_type(
            &crate::cloud::gke::Clients::default(),
            spec,
        )),
        _ => None,
    };
    let (machine_type, auto, source) = profile::machine_and_profile(
        fleet_spec.as_ref(),
        b.machine_type
            .clone()
            .or(gke_machine.as_ref().map(|(m, _)| m.clone())),
    );
    let machine: Option<(String, String)> = machine_type.map(|m| {
        let from = match (&b.machine_type, &gke_machine) {
            (Some(_), _) => "--machine-type",
            (None, Some((_, from))) => from,
            (None, None) => "fleet instance_types",
        };
        (m, from.to_string())
    });
    let why = match (b.profile, source, &machine) {
        (NcclProfile::Auto, profile::Source::FleetNetwork, _) => {
            "auto, from the fleet file's network.gpudirect".to_string()
        }
        (NcclProfile::Auto, profile::Source::MachineType, Some((m, _))) => format!("auto, for {m}"),
        (NcclProfile::Auto, _, _) => "auto; the machine type is unknown".to_string(),
        _ => "--profile".to_string(),
    };
    let mut spec = RunSpec {
        collective: b.test.to_string(),
        min_bytes: runner::parse_size(&b.min_bytes)?,
        max_bytes: runner::parse_size(&b.max_bytes)?,
        step_factor: b.step_factor,
        gpus: b.gpus,
        iters: b.iters,
        warmup: b.warmup,
        dtype: b.dtype.clone(),
        engine: match b.engine {
            NcclEngine::NcclTests => Engine::NcclTests,
            NcclEngine::Torch => Engine::Torch,
        },
        profile: b.profile.flavour_or(auto),
        nccl_tests_dir: b.nccl_tests_dir.clone(),
        env: None,
    };
    spec.env = edited_env(kind, spec.profile, &b.env)?;
    spec.check()?;
    Ok(Plan { spec, machine, why })
}

/// The profile, shown before a run on a fleet of family `kind`: the lines as edited, else
/// the family's ([`profile::env_lines`]).
fn show_profile(spec: &RunSpec, kind: BackendKind, why: &str) {
    let env = spec
        .env
        .clone()
        .unwrap_or_else(|| profile::env_lines(kind, spec.profile));
    if env.is_empty() {
        errln!("NCCL profile none ({why}): NCCL's defaults, no variables set");
    } else {
        errln!("NCCL profile {} ({why}), set on every node:", spec.profile.name());
        for l in env {
            errln!("  {l}");
        }
    }
}

/// Launch the run on the fleet (through its family's [`crate::nccl::RunLauncher`]),
/// record it, follow it, and remove what it left.
pub fn run(args: &RunArgs, cli: &Cli, paths: &Paths) -> anyhow::Result<ExitCode> {
    // The nodes the cloud has now (a GKE pool emptied since `fleet apply`: gke review
    // H1); a dry run asks no cluster.
    let (fleet, kind, all, reach) = if args.dry_run {
        super::resolve_fleet_kind(&args.fleet, cli, paths)?
    } else {
        super::resolve_fleet_kind_now(&args.fleet, cli, paths)?
    };
    let mut plan = plan(&args.bench, &args.fleet, &fleet, kind, paths)?;
    let schedule = (kind == BackendKind::Gke).then(|| {
        let spec = remote::fleet_spec(&paths.state_dir, &args.fleet, &fleet);
        let count = args.node_count.map(|n| n as usize);
        let ranks = gke_ranks(&fleet, &args.fleet, &all, &args.nodes, count, spec.as_ref());
        let mut at = pods::Schedule::of(spec.as_ref());
        at.queue_wait = args.wait.map(std::time::Duration::from_secs);
        (at, ranks)
    });
    let nodes: Vec<NodeTarget> = match &schedule {
        Some((_, ranks)) => ranks.clone().map_err(anyhow::Error::msg)?,
        None if args.dry_run => anyhow::bail!(
            "--dry-run prints the Kubernetes objects of a run on a GKE fleet; `{fleet}` is {}",
            kind.a_fleet()
        ),
        None if args.node_count.is_some() => {
            let n = args.node_count.unwrap_or(1) as usize;
            if n > all.len() {
                return Err(super::usage(format!(
                    "--node-count {n}: fleet `{fleet}` has {}",
                    crate::words::plural(all.len(), "node")
                )));
            }
            all[..n].to_vec()
        }
        None if args.nodes.is_empty() => all.clone(),
        None => {
            crate::fleet::select_nodes(&all, &args.nodes).map_err(|e| super::usage(format!("--nodes {e}")))?
        }
    };
    if nodes.is_empty() {
        anyhow::bail!("no nodes selected");
    }
    if let (true, Some((at, _))) = (args.dry_run, &schedule) {
        outln!("{}", dry_run(&fleet, &nodes, &plan, at)?.trim_end());
        return Ok(ExitCode::SUCCESS);
    }
    show_profile(&plan.spec, kind, &plan.why);
    let rt = super::runtime()?;
    // Pods the scheduler places have no node to count GPUs on: a recorded node of the
    // fleet (the pool's) says how many a node has, and its machine type.
    let first_recorded = all.iter().find_map(|n| n.kube().filter(|k| !k.node.is_empty()));
    if let (true, None, Some(k)) = (pods::scheduled(&nodes), plan.spec.gpus, first_recorded) {
        let (machine, gpus) = rt
            .block_on(crate::cloud::gke::nccl::machine(reach.kube(), k))
            .map_err(anyhow::Error::msg)?;
        plan.spec.gpus = Some(gpus.max(1) as u32);
        if plan.machine.is_none() {
            plan.machine = machine.map(|m| (m, "the fleet's node's GKE label".to_string()));
        }
    }
    let launcher = crate::nccl::launcher_for(kind);
    let start = Start {
        fleet: fleet.clone(),
        nodes,
        reach: reach.clone(),
        spec: plan.spec,
        mpirun: args.bench.mpirun.clone(),
        machine: plan.machine,
        purpose: None,
        node_ssh: true,
        preflight: !args.bench.no_preflight,
    };
    let started = match &schedule {
        // The placement read from the fleet as given (a name or a file), not only as
        // the state records it.
        Some((at, _)) => rt
            .block_on(pods::start_with(&paths.state_dir, &start, at, &|m| errln!("{m}")))
            .map_err(anyhow::Error::msg)?,
        None => rt.block_on(launcher.start(&paths.state_dir, &start, &|m| errln!("{m}")))?,
    };
    let id = started.id;
    let stays = launcher
        .leaves()
        .map(|what| format!(" ({what} stay until then)"))
        .unwrap_or_default();
    errln!("it survives this terminal: `flightdeck nccl attach {id}` follows it again{stays}");
    let code = follow(&rt, reach.clone(), &fleet, &id, &started.heads, args.json, paths);
    clean_up(&rt, launcher, &reach, &id, &started.heads);
    code
}

/// The ranks of a run on GKE fleet `fleet` (`fleet_arg` as given), `all` the nodes it has
/// now. `--nodes` picks among them, and the test pods are pinned there: only on that
/// explicit request (gke review M1: a number once meant a count on an empty fleet and an
/// index otherwise). Otherwise the scheduler places the pods (review H4: Cluster
/// Autoscaler scales the pool up, Kueue admits them) on ranks that name no node, as many
/// as `--node-count` says, else as many as the nodes the fleet has now when it has a
/// Kueue queue, else the fleet file's `nodes`; with neither a queue nor `--node-count`,
/// every node the fleet has now, pinned (nothing admits pods there but the scheduler).
fn gke_ranks(
    fleet: &str,
    fleet_arg: &str,
    all: &[NodeTarget],
    picked: &[String],
    count: Option<usize>,
    spec: Option<&crate::fleet::FleetSpec>,
) -> Result<Vec<NodeTarget>, String> {
    let gke = spec.and_then(|s| s.gke.as_ref());
    let queue = gke.and_then(|g| g.queue.as_ref());
    // The fleet file, when the fleet was given by one.
    let src = if fleet_arg != fleet {
        format!(" ({fleet_arg})")
    } else {
        String::new()
    };
    if !picked.is_empty() {
        if all.is_empty() {
            return Err(format!(
                "--nodes {}: fleet `{fleet}`{src} has no nodes now (a pool at zero) to pick: give how many nodes the test runs on (--node-count N)",
                picked.join(",")
            ));
        }
        return crate::fleet::select_nodes(all, picked).map_err(|e| format!("--nodes {e}"));
    }
    if count.is_none() && queue.is_none() && !all.is_empty() {
        return Ok(all.to_vec());
    }
    let Some(g) = gke else {
        return Err(format!(
            "fleet `{fleet}`: no fleet file to read its cluster from (`{fleet_arg}`): give the fleet file"
        ));
    };
    let n = match count {
        Some(n) => n,
        None if !all.is_empty() => all.len(),
        None => spec
            .and_then(|s| s.nodes.as_ref())
            .and_then(|r| r.min.or(r.max))
            .filter(|n| *n > 0)
            .map(|n| n as usize)
            .ok_or_else(|| {
                format!(
                    "fleet `{fleet}`{src} has no nodes now (a pool at zero): give how many nodes the test runs on (--node-count N, or `nodes:` in the fleet file)"
                )
            })?,
    };
    Ok(crate::cloud::gke::backend::Target::from_gke(g).pad(fleet, &[], n))
}

/// `nccl run --dry-run` on a GKE fleet: the objects the run would create
/// ([`pods::run_objects`], which the run itself creates), as YAML. No cluster is asked:
/// the GPUs a node has come from -g, else the machine type.
fn dry_run(fleet: &str, nodes: &[NodeTarget], plan: &Plan, at: &pods::Schedule) -> anyhow::Result<String> {
    let spec = &plan.spec;
    let gpus = spec
        .gpus
        .or_else(|| plan.machine.as_ref().and_then(|(m, _)| crate::nccl::expect::gpus_per_node(m)))
        .ok_or_else(|| {
            anyhow::anyhow!(
                "--dry-run asks no cluster how many GPUs a node has: give -g/--ngpus, or the machine type (--machine-type, or `instance_types` in the fleet file)"
            )
        })?;
    pods::script_takes(spec, spec.profile, gpus).map_err(anyhow::Error::msg)?;
    if let Some(note) = pods::script_ignores(spec, spec.profile) {
        errln!("{note}");
    }
    let id = runner::new_id(&spec.collective, store::now_unix());
    let mut objects =
        pods::run_objects(fleet, &id, nodes, spec.profile, gpus, at).map_err(anyhow::Error::msg)?;
    let owner = crate::cloud::gke::Owner::of_process();
    for o in &mut objects {
        crate::cloud::gke::stamp_owner(&owner, o);
    }
    Ok(pods::objects_yaml(&objects))
}

/// Remove what a finished run left on its fleet (a GKE run's test pods), saying so.
fn clean_up(
    rt: &tokio::runtime::Runtime,
    launcher: &dyn crate::nccl::RunLauncher,
    reach: &Reach,
    id: &str,
    heads: &[NodeTarget],
) {
    match rt.block_on(launcher.cleanup(reach, id, heads)) {
        Ok(Some(removed)) => errln!("{removed}"),
        Ok(None) => {}
        Err(e) => errln!("flightdeck: warning: {e}"),
    }
}

/// Follow a recorded run from its first line.
pub fn attach(id: Option<&str>, json: bool, cli: &Cli, paths: &Paths) -> anyhow::Result<ExitCode> {
    let (state, _) = Store::new(&paths.state_dir).load()?;
    let runs: Vec<&RunRecord> = state.runs.iter().filter(|r| r.kind == "nccl").collect();
    let run = match id {
        Some(id) => runs.iter().find(|r| r.id == id).copied().ok_or_else(|| {
            let hint = crate::yaml::did_you_mean(id, runs.iter().map(|r| r.id.as_str()));
            anyhow::anyhow!("no NCCL run `{id}` in the state{hint}")
        })?,
        None => runs
            .iter()
            .max_by_key(|r| (r.started_at, r.id.clone()))
            .copied()
            .ok_or_else(|| anyhow::anyhow!("no NCCL runs yet"))?,
    };
    let (fleet, kind, mut all, reach) = super::resolve_fleet_kind(&run.fleet, cli, paths)?;
    if kind == BackendKind::Gke {
        // A run the scheduler placed may be on ranks past the recorded nodes (a pool
        // at zero when the fleet was applied): they are the cluster's, reached in their
        // recorded pods.
        let ranks = run.nodes.iter().map(|n| n.node + 1).max().unwrap_or(0);
        if ranks > all.len() {
            let record = super::resolve_record(&run.fleet, paths)?;
            let t = crate::cloud::gke::backend::Target::of_record(&record).map_err(anyhow::Error::msg)?;
            all = t.pad(&fleet, &all, ranks);
        }
    }
    let launcher = crate::nccl::launcher_for(kind);
    let nodes = launcher.heads(run, &all);
    let rt = super::runtime()?;
    let code = follow(&rt, reach.clone(), &fleet, &run.id, &nodes, json, paths);
    clean_up(&rt, launcher, &reach, &run.id, &nodes);
    code
}

/// The verdict line of the text output.
pub(super) fn verdict_line(v: &Verdict, from: Option<&str>) -> String {
    let machine = match (&v.machine_type, from) {
        (Some(m), Some(f)) => format!(" [{m}, from {f}]"),
        (Some(m), None) => format!(" [{m}]"),
        _ => String::new(),
    };
    format!(
        "verdict {}: {}{machine}",
        v.grade.as_str().to_uppercase(),
        v.reason
    )
}

/// Follow run `id` and print it (rows live on stderr, then the table or the JSON).
fn follow(
    rt: &tokio::runtime::Runtime,
    reach: Reach,
    fleet: &str,
    id: &str,
    nodes: &[NodeTarget],
    json: bool,
    paths: &Paths,
) -> anyhow::Result<ExitCode> {
    if nodes.is_empty() {
        anyhow::bail!("the run has no nodes");
    }
    let on_row = |row: &Row, _: &crate::nccl::Parser| {
        if !json {
            let oop = row.out_of_place.as_ref();
            errln!(
                "{:>8}  busbw {:>8} GB/s  algbw {:>8} GB/s  {:>10} us",
                human_size(row.size),
                oop.map_or("-".into(), |m| format!("{:.2}", m.busbw)),
                oop.map_or("-".into(), |m| format!("{:.2}", m.algbw)),
                oop.map_or("-".into(), |m| format!("{:.1}", m.time_us)),
            );
        }
    };
    let (f, saved) = rt.block_on(remote::follow_to_end(
        &paths.state_dir,
        reach,
        fleet,
        id,
        nodes,
        on_row,
    ));
    let report = &f.report;
    // The run's own profile (what its nodes were set up with), one rule with the verdict.
    let nodes_run = u32::try_from(saved.nodes.len()).ok().filter(|n| *n > 0);
    if let Some(w) = crate::nccl::fallback_warning(saved.profile(), report.transport.as_ref(), nodes_run) {
        errln!("{w}");
    }
    let worst = f.worst();
    if json {
        let mut doc = serde_json::to_value(report.document())?;
        doc["run"] = serde_json::json!({
            "id": id,
            "fleet": fleet,
            "nodes": saved.nodes,
            "exit_codes": f.codes.iter().map(|(n, c)| serde_json::json!({"node": n, "exit_code": c})).collect::<Vec<_>>(),
        });
        doc["machine_type"] =
            serde_json::json!({"name": saved.machine_type, "from": saved.machine_type_from});
        doc["profile"] = serde_json::json!({"name": saved.spec.profile, "env": saved.spec.env});
        doc["verdict"] = serde_json::to_value(&saved.verdict)?;
        outln!("{}", serde_json::to_string_pretty(&doc)?);
    } else if !report.rows.is_empty() {
        out!("{}", table(report));
        if let Some(v) = &saved.verdict {
            let line = verdict_line(v, saved.machine_type_from.as_deref());
            outln!("{line}");
        }
    }
    if worst != 0 {
        let codes: Vec<String> = f
            .named_codes(nodes)
            .iter()
            .map(|(n, c)| format!("{n} {}", c.map_or("lost".into(), |c| c.to_string())))
            .collect();
        errln!("run {id} failed: exit code {}", codes.join(", "));
        // The same cause the verdict names (read from every line, not only the tail).
        let cause = saved
            .verdict
            .as_ref()
            .and_then(|v| v.cause.clone())
            .or_else(|| f.cause());
        if let Some(c) = cause {
            errln!("cause: {c}");
        }
        for l in f.error_tail(&nodes[0].name, 20) {
            errln!("{l}");
        }
    }
    if report.rows.is_empty() && worst == 0 {
        errln!("run {id}: finished without rows of nccl-tests output");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::from(worst.clamp(0, 255) as u8))
}

// ---- nccl history / nccl compare ----

/// `nccl history`: the runs of the history, newest first, with runs of the state store
/// that have no history entry (started by an older flightdeck) listed too.
pub fn history_list(json: bool, paths: &Paths) -> anyhow::Result<ExitCode> {
    let mut runs = history::load_all(&paths.state_dir)?;
    if let Ok((state, _)) = Store::new(&paths.state_dir).load() {
        for r in state.runs.iter().filter(|r| r.kind == "nccl") {
            if !runs.iter().any(|s| s.id == r.id) {
                runs.push(SavedRun {
                    id: r.id.clone(),
                    fleet: r.fleet.clone(),
                    started_at: r.started_at,
                    exit_codes: r.nodes.iter().map(|n| n.exit_code).collect(),
                    ..Default::default()
                });
            }
        }
    }
    history::sort_newest_first(&mut runs);
    if json {
        let docs: Vec<serde_json::Value> = runs
            .iter()
            .map(|r| {
                serde_json::json!({
                    "id": r.id, "fleet": r.fleet, "started_at": r.started_at, "ended_at": r.ended_at,
                    "collective": r.spec.collective, "engine": r.spec.engine, "args": r.spec.args,
                    "profile": r.spec.profile, "nodes": r.nodes, "machine_type": r.machine_type,
                    "exit_code": r.exit_code(), "peak_busbw": r.peak_busbw, "avg_busbw": r.avg_busbw,
                    "verdict": r.verdict.as_ref().map(|v| v.grade), "purpose": r.purpose,
                    "verdict_reason": r.verdict.as_ref().map(|v| v.reason.clone()),
                    "cause": r.verdict.as_ref().and_then(|v| v.cause.clone()),
                    "exit_codes": r.nodes.iter().zip(&r.exit_codes).map(|(n, c)| serde_json::json!({"node": n, "exit_code": c})).collect::<Vec<_>>(),
                })
            })
            .collect();
        outln!("{}", serde_json::to_string_pretty(&docs)?);
        return Ok(ExitCode::SUCCESS);
    }
    if runs.is_empty() {
        errln!("no NCCL runs yet (flightdeck nccl run FLEET)");
        return Ok(ExitCode::SUCCESS);
    }
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|r| {
            vec![
                r.id.clone(),
                store::format_utc(r.started_at),
                r.fleet.clone(),
                if r.spec.collective.is_empty() {
                    "-".into()
                } else {
                    r.spec.collective.clone()
                },
                r.nodes.len().to_string(),
                r.machine_type.clone().unwrap_or_else(|| "-".into()),
                if r.spec.profile.is_empty() {
                    "-".into()
                } else {
                    r.spec.profile.clone()
                },
                r.peak_busbw.map_or("-".into(), |b| format!("{b:.2}")),
                r.grade().into(),
                r.exit_code().map_or("-".into(), |c| c.to_string()),
            ]
        })
        .collect();
    use super::table::{render, stdout_width, Col};
    let cols = [
        // The id stays whole (`nccl attach ID`); it names the collective too, so that
        // column goes first.
        Col::left("ID"),
        Col::left("STARTED (UTC)").drop(6),
        Col::left("FLEET").drop(5),
        Col::left("COLLECTIVE").drop(1),
        Col::right("NODES").drop(4),
        Col::left("MACHINE").drop(3),
        Col::left("PROFILE").drop(2),
        Col::right("PEAK GB/s"),
        Col::left("VERDICT"),
        Col::right("EXIT"),
    ];
    out!("{}", render(&cols, &rows, stdout_width()));
    // Why the newest failed runs failed, with where to read their output.
    for r in runs
        .iter()
        .filter(|r| r.exit_code().is_some_and(|c| c != 0))
        .take(5)
    {
        let why = r.verdict.as_ref().map_or("", |v| v.reason.as_str());
        let line = format!(
            "{}: {why}; `flightdeck nccl attach {}` shows its output",
            r.id, r.id
        );
        outln!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}

/// `nccl compare A B`: busbw per size of both runs and B/A.
pub fn compare(a: &str, b: &str, json: bool, paths: &Paths) -> anyhow::Result<ExitCode> {
    let all = history::load_all(&paths.state_dir)?;
    let find = |id: &str| {
        all.iter().find(|r| r.id == id).ok_or_else(|| {
            let hint = crate::yaml::did_you_mean(id, all.iter().map(|r| r.id.as_str()));
            anyhow::anyhow!("no NCCL run `{id}` in the history{hint}")
        })
    };
    let (ra, rb) = (find(a)?, find(b)?);
    let c = history::compare(ra, rb);
    if json {
        outln!("{}", serde_json::to_string_pretty(&c)?);
        return Ok(ExitCode::SUCCESS);
    }
    let f = |v: Option<f64>| v.map_or("-".into(), |x| format!("{x:.2}"));
    let rows: Vec<Vec<String>> = c
        .rows
        .iter()
        .map(|r| {
            vec![
                human_size(r.size),
                f(r.a),
                f(r.b),
                r.ratio.map_or("-".into(), |x| format!("{x:.3}")),
            ]
        })
        .collect();
    outln!(
        "A {}  ({}, {})",
        ra.id,
        ra.spec.collective,
        ra.machine_type.as_deref().unwrap_or("machine unknown")
    );
    outln!(
        "B {}  ({}, {})",
        rb.id,
        rb.spec.collective,
        rb.machine_type.as_deref().unwrap_or("machine unknown")
    );
    let cols = ["SIZE", "A busbw", "B busbw", "B/A"].map(super::table::Col::left);
    out!(
        "{}",
        super::table::render(&cols, &rows, super::table::stdout_width())
    );
    outln!(
        "peak: A {} GB/s, B {} GB/s, B/A {}",
        f(c.peak_a),
        f(c.peak_b),
        c.peak_ratio.map_or("-".into(), |x| format!("{x:.3}"))
    );
    for n in &c.notes {
        outln!("note: {n}");
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_settings_follow_the_profile_and_bad_ones_are_refused() {
        assert_eq!(edited_env(BackendKind::Gcp, GpuDirect::Rdma, &[]).unwrap(), None);
        let lines = edited_env(
            BackendKind::Gcp,
            GpuDirect::Rdma,
            &["NCCL_SOCKET_IFNAME=lo".into(), "X=a b'c".into()],
        )
        .unwrap()
        .unwrap();
        let n = runner::profile_env(GpuDirect::Rdma).len();
        assert_eq!(
            lines[n..],
            ["export NCCL_SOCKET_IFNAME='lo'", "export X='a b'\\''c'"]
        );
        assert_eq!(
            crate::shellenv::exported_value(&lines, "NCCL_SOCKET_IFNAME").as_deref(),
            Some("lo"),
            "the last setting is the one the pre-flight reads"
        );
        for bad in ["NOVALUE", "1X=2", "A-B=3"] {
            assert!(
                edited_env(BackendKind::Gcp, GpuDirect::None, &[bad.into()]).is_err(),
                "{bad}"
            );
        }
    }

    /// `--env` on a GKE fleet edits the GKE pod profile: no VM line reaches the head pod.
    #[test]
    fn env_settings_on_gke_start_from_the_pod_profile() {
        for flavour in [GpuDirect::Tcpx, GpuDirect::Tcpxo, GpuDirect::Rdma] {
            let lines = edited_env(BackendKind::Gke, flavour, &["NCCL_DEBUG=INFO".into()])
                .unwrap()
                .unwrap();
            let pod = crate::nccl::profile::pod_env(flavour);
            assert_eq!(lines[..pod.len()], pod[..], "{flavour:?}");
            assert_eq!(lines[pod.len()..], ["export NCCL_DEBUG='INFO'"]);
            let text = lines.join("\n");
            for vm_only in ["enp", "/var/lib/tcpxo", "gIB'"] {
                assert!(!text.contains(vm_only), "{flavour:?}: {text}");
            }
        }
        assert_eq!(edited_env(BackendKind::Gke, GpuDirect::Rdma, &[]).unwrap(), None);
    }

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
            "collective alltoall, ranks 2, 1 host, NCCL 2.28.9, nccl-tests 2.19.6, transport unknown (no NCCL_DEBUG=INFO lines), \
             avg busbw 103.213 GB/s, \
             peak busbw 338.58 GB/s at 8G, 31 rows"
        );
    }
}
