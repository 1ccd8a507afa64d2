//! The I/O side of NCCL runs, shared by `flightdeck nccl` (run, attach, stragglers) and
//! the cockpit: node-to-node SSH for mpirun, launching a run detached on a fleet's nodes
//! ([`start`]), recording it in the state store and the history, following it, and
//! concluding it (exit codes, rows, verdict, and for a failed run the line that says why:
//! [`failure_cause`], pure like the rest of the reading).

use super::history::{self, SavedRun, SavedSpec};
use super::runner::{self, Engine, MpiHost, RunSpec, EXIT_MARKER};
use super::{human_size, nodessh, Parser, Report, Row};
use crate::exec::{self, collect, Event};
use crate::fleet::NodeTarget;
use crate::reach::Reach;
use crate::store::{self, RunNode, RunRecord, Store};
use std::collections::VecDeque;
use std::path::Path;

/// The history entry of a run about to start: what it is, its environment exactly as the
/// node scripts set it (the profile's lines, or the operator's edit of them).
pub fn saved_run(
    id: &str,
    fleet: &str,
    spec: &RunSpec,
    nodes: &[NodeTarget],
    machine: Option<(String, &str)>,
    purpose: Option<String>,
) -> SavedRun {
    SavedRun {
        id: id.to_string(),
        fleet: fleet.to_string(),
        started_at: store::now_unix(),
        spec: SavedSpec {
            collective: spec.collective.clone(),
            engine: spec.engine.name().into(),
            args: format!(
                "-b {} -e {} -f {} -g {} -n {} -w {} -d {}",
                human_size(spec.min_bytes),
                human_size(spec.max_bytes),
                spec.step_factor,
                spec.gpus.map_or("all".into(), |g| g.to_string()),
                spec.iters,
                spec.warmup,
                spec.dtype
            ),
            profile: spec.profile.name().into(),
            env: spec.env_lines(),
        },
        nodes: nodes.iter().map(|n| n.name.clone()).collect(),
        machine_type: machine.as_ref().map(|m| m.0.clone()),
        machine_type_from: machine.map(|m| m.1.to_string()),
        exit_codes: vec![None; nodes.len()],
        purpose,
        ..Default::default()
    }
}

/// Set up SSH among `nodes` (see [`nodessh`]): collect each node's keys, install them on all.
pub async fn setup_node_ssh(reach: Reach, fleet: &str, nodes: &[NodeTarget]) -> anyhow::Result<()> {
    let jobs: Vec<(NodeTarget, String)> = nodes
        .iter()
        .map(|n| (n.clone(), nodessh::collect_command(fleet, n.port())))
        .collect();
    let out = collect(reach.clone(), jobs).await;
    let mut peers = vec![];
    let mut failed = vec![];
    for (n, (code, stdout, stderr)) in nodes.iter().zip(&out) {
        match (code, nodessh::parse_collect(stdout)) {
            (0, Ok(keys)) => peers.push((peer_of(n), keys)),
            (_, Err(e)) => failed.push(format!("{}: {e} {}", n.name, stderr.trim())),
            (c, Ok(_)) => failed.push(format!("{}: exit {c} {}", n.name, stderr.trim())),
        }
    }
    if !failed.is_empty() {
        anyhow::bail!("node-to-node SSH could not be set up:\n  {}", failed.join("\n  "));
    }
    let install = nodessh::install_command(fleet, &peers);
    let jobs: Vec<(NodeTarget, String)> = nodes.iter().map(|n| (n.clone(), install.clone())).collect();
    let out = collect(reach, jobs).await;
    let failed: Vec<String> = nodes
        .iter()
        .zip(&out)
        .filter(|(_, (c, o, _))| *c != 0 || o.trim() != "installed")
        .map(|(n, (c, _, e))| format!("{}: exit {c} {}", n.name, e.trim()))
        .collect();
    if !failed.is_empty() {
        anyhow::bail!(
            "node-to-node SSH could not be installed:\n  {}",
            failed.join("\n  ")
        );
    }
    Ok(())
}

/// A node as the others reach it: its internal address, else the address flightdeck uses.
fn peer_of(n: &NodeTarget) -> nodessh::Peer {
    nodessh::Peer {
        name: n.name.clone(),
        addr: n.internal_ip.clone().unwrap_or_else(|| n.host().to_string()),
        port: n.port(),
        user: n.user().map(str::to_string),
    }
}

/// Start run `id` detached: one node with nccl-tests; several through mpirun on the first
/// (only it runs a script); torch on every node. Returns the nodes that run a script,
/// with their pids.
pub async fn launch(
    reach: Reach,
    id: &str,
    spec: &RunSpec,
    nodes: &[NodeTarget],
    mpirun: &str,
) -> anyhow::Result<Vec<(NodeTarget, Option<u32>)>> {
    let master = nodes[0]
        .internal_ip
        .clone()
        .unwrap_or_else(|| nodes[0].host().to_string());
    let count = nodes.len();
    let jobs: Vec<(NodeTarget, String, Vec<u8>)> = if spec.engine == Engine::NcclTests && count > 1 {
        let hosts: Vec<MpiHost> = nodes
            .iter()
            .map(|n| {
                let p = peer_of(n);
                MpiHost {
                    addr: p.addr,
                    port: p.port,
                }
            })
            .collect();
        let script = runner::mpirun_script(spec, &hosts, mpirun);
        let (command, input) = runner::launch_command(id, &script, false);
        vec![(nodes[0].clone(), command, input)]
    } else {
        nodes
            .iter()
            .enumerate()
            .map(|(rank, n)| {
                let script = runner::node_script(spec, rank, count, &master);
                let (command, input) = runner::launch_command(id, &script, spec.engine == Engine::Torch);
                (n.clone(), command, input)
            })
            .collect()
    };
    let launched_on: Vec<NodeTarget> = jobs.iter().map(|(n, _, _)| n.clone()).collect();
    let launched = exec::collect_with_input(reach, jobs).await;
    let mut failed = vec![];
    let mut started = vec![];
    for (n, (code, out, err)) in launched_on.iter().zip(&launched) {
        if *code != 0 || !out.starts_with("started ") {
            failed.push(format!("{}: {} {}", n.name, out.trim(), err.trim()));
        }
        started.push((
            n.clone(),
            out.trim().strip_prefix("started ").and_then(|p| p.parse().ok()),
        ));
    }
    if !failed.is_empty() {
        anyhow::bail!("the run could not start:\n  {}", failed.join("\n  "));
    }
    Ok(started)
}

/// The nodes a recorded run's scripts run on, from its fleet's nodes: on a GKE fleet the
/// test pod it ran in.
pub fn run_heads(run: &store::RunRecord, fleet_nodes: &[NodeTarget]) -> Vec<NodeTarget> {
    run.nodes
        .iter()
        .filter_map(|rn| {
            let mut n = fleet_nodes.iter().find(|n| n.index == rn.node).cloned()?;
            if let (Some(k), Some(pod)) = (n.kube_mut(), &rn.pod) {
                k.pod = Some(pod.clone());
                k.container = Some(crate::cloud::gke::nccl::CONTAINER.into());
            }
            Some(n)
        })
        .collect()
}

/// Record a started run in the state store.
pub fn record_run(
    state_dir: &Path,
    fleet: &str,
    id: &str,
    started: &[(NodeTarget, Option<u32>)],
) -> anyhow::Result<()> {
    let record = RunRecord {
        id: id.to_string(),
        kind: "nccl".into(),
        fleet: fleet.to_string(),
        started_at: store::now_unix(),
        nodes: started
            .iter()
            .map(|(n, pid)| RunNode {
                node: n.index,
                pid: *pid,
                log: format!("~/{}/out.log", runner::run_dir(id)),
                exit_code: None,
                pod: n.kube().and_then(|k| k.pod.clone()),
            })
            .collect(),
    };
    Store::new(state_dir).update(|s| s.runs.push(record))?;
    Ok(())
}

/// What following a run found.
pub struct Followed {
    pub report: Report,
    /// Per node: its exit code (`None` when it printed none).
    pub codes: Vec<(usize, Option<i32>)>,
    /// The head node's last [`HEAD_TAIL_LINES`] lines (shown when the run fails).
    pub head_tail: VecDeque<String>,
    /// The other nodes' last [`OTHER_LINES`] lines, prefixed by their names.
    pub others: VecDeque<String>,
    /// What every node printed, read for the cause of a failure ([`Followed::cause`]).
    pub causes: CauseFinder,
}

/// How many of the head node's last lines [`follow_core`] keeps.
pub const HEAD_TAIL_LINES: usize = 40;
/// How many of the other nodes' last lines [`follow_core`] keeps.
pub const OTHER_LINES: usize = 200;

/// Append `line`, dropping the oldest lines beyond `cap`.
fn push_bounded(buf: &mut VecDeque<String>, line: String, cap: usize) {
    buf.push_back(line);
    while buf.len() > cap {
        buf.pop_front();
    }
}

impl Followed {
    /// Each node's exit code by name, in the order of `nodes`.
    pub fn named_codes(&self, nodes: &[NodeTarget]) -> Vec<(String, Option<i32>)> {
        self.codes
            .iter()
            .map(|(i, c)| {
                let name = nodes
                    .iter()
                    .find(|n| n.index == *i)
                    .map_or("?", |n| n.name.as_str());
                (name.to_string(), *c)
            })
            .collect()
    }

    /// What the run printed that is not a result row, to show when it fails: the head
    /// node's last lines (nccl-tests' own `#` lines left out) and the others' last
    /// `others` lines, each prefixed by its node's name.
    pub fn error_tail(&self, head_name: &str, others: usize) -> Vec<String> {
        let mut out: Vec<String> = self
            .head_tail
            .iter()
            .filter(|l| !l.starts_with('#'))
            .map(|l| format!("{head_name}: {l}"))
            .collect();
        let skip = self.others.len().saturating_sub(others);
        out.extend(self.others.iter().skip(skip).cloned());
        out
    }

    /// The line that says why the run failed ([`failure_cause`] over every line every
    /// node printed); `None` when it printed nothing.
    pub fn cause(&self) -> Option<String> {
        self.causes.cause()
    }

    pub fn worst(&self) -> i32 {
        self.codes
            .iter()
            .map(|(_, c)| c.unwrap_or(exec::UNREACHABLE))
            .max()
            .unwrap_or(0)
    }
}

/// Stream run `id`'s output: the first node's through the parser (`on_row` for each row
/// as it comes), every node's exit code from its marker line.
pub async fn follow_core(
    reach: Reach,
    id: &str,
    nodes: &[NodeTarget],
    mut on_row: impl FnMut(&Row, &Parser),
) -> Followed {
    let head = nodes.first().map(|n| n.index);
    let jobs: Vec<(NodeTarget, String)> = nodes
        .iter()
        .map(|n| (n.clone(), runner::follow_command(id)))
        .collect();
    let mut parser = Parser::new();
    let mut f = Followed {
        report: Report::default(),
        codes: nodes.iter().map(|n| (n.index, None)).collect(),
        head_tail: VecDeque::new(),
        others: VecDeque::new(),
        causes: CauseFinder::default(),
    };
    let (tx, mut rx) = exec::channel(1024);
    let h = tokio::spawn(exec::run_each(reach, jobs, 64, tx));
    while let Some(e) = rx.recv().await {
        let Event::Line { node, text, .. } = e else {
            continue;
        };
        if let Some(code) = text.strip_prefix(EXIT_MARKER) {
            if let Some(c) = f.codes.iter_mut().find(|(n, _)| *n == node) {
                c.1 = code.trim().parse().ok();
            }
            continue;
        }
        f.causes.push(&text);
        if Some(node) != head {
            let name = nodes
                .iter()
                .find(|n| n.index == node)
                .map_or("?", |n| n.name.as_str());
            push_bounded(&mut f.others, format!("{name}: {text}"), OTHER_LINES);
            continue;
        }
        push_bounded(&mut f.head_tail, text.clone(), HEAD_TAIL_LINES);
        for ev in parser.push_line(&text) {
            if let crate::nccl::Event::Row(row) = &ev {
                on_row(row, &parser);
            }
        }
    }
    let _ = h.await;
    parser.finish();
    f.report = parser.report();
    f
}

/// Write the exit codes to the state store; fill and save the history entry (machine
/// type from the rank list when nothing else named it, verdict); returns it.
pub fn conclude(state_dir: &Path, fleet: &str, id: &str, nodes: &[NodeTarget], f: &Followed) -> SavedRun {
    let recorded = f.codes.clone();
    let _ = Store::new(state_dir).update(|s| {
        if let Some(r) = s.runs.iter_mut().find(|r| r.id == id) {
            for rn in &mut r.nodes {
                if let Some((_, Some(c))) = recorded.iter().find(|(n, _)| *n == rn.node) {
                    rn.exit_code = Some(*c);
                }
            }
        }
    });
    let mut saved = history::load(state_dir, id)
        .ok()
        .flatten()
        .unwrap_or_else(|| SavedRun {
            id: id.to_string(),
            fleet: fleet.to_string(),
            nodes: nodes.iter().map(|n| n.name.clone()).collect(),
            spec: SavedSpec {
                collective: f.report.collective.clone().unwrap_or_default(),
                ..Default::default()
            },
            ..Default::default()
        });
    let codes: Vec<Option<i32>> = f.codes.iter().map(|c| c.1).collect();
    let cause = (f.worst() != 0).then(|| f.cause()).flatten();
    saved.conclude(&f.report, &codes, cause.as_deref(), store::now_unix());
    if let Err(e) = history::save(state_dir, &saved) {
        tracing::warn!(error = %e, "nccl history");
    }
    saved
}

/// Follow run `id` to its end ([`follow_core`]) and record what it found
/// ([`conclude`]): what `nccl run`, `nccl attach` and each group of `nccl stragglers` do.
pub async fn follow_to_end(
    state_dir: &Path,
    reach: Reach,
    fleet: &str,
    id: &str,
    nodes: &[NodeTarget],
    on_row: impl FnMut(&Row, &Parser),
) -> (Followed, SavedRun) {
    let f = follow_core(reach, id, nodes, on_row).await;
    let saved = conclude(state_dir, fleet, id, nodes, &f);
    (f, saved)
}

/// The most characters of a cause kept (a line may be 64 KiB).
const MAX_CAUSE_CHARS: usize = 400;

/// Picks the line that says why a run failed from its output, as the lines come
/// ([`failure_cause`]). Pure; holds four lines at most.
#[derive(Debug, Clone, Default)]
pub struct CauseFinder {
    /// The first `NCCL WARN` line.
    warn: Option<String>,
    /// The first nccl-tests `Test NCCL failure` / `Test CUDA failure` line.
    test: Option<String>,
    /// The first `flightdeck: ...` line (the node scripts' own errors).
    own: Option<String>,
    /// The last line with something to read.
    last: Option<String>,
}

impl CauseFinder {
    /// Read one line (a node's name before it, `lab-0: `, and launcher tags are fine).
    pub fn push(&mut self, line: &str) {
        let line = super::line::strip_launcher_prefixes(line.trim_end_matches(['\r', '\n'])).trim();
        if line.is_empty() || line.starts_with(super::runner::EXIT_MARKER) {
            return;
        }
        if self.warn.is_none() {
            if let Some(at) = line.find("NCCL WARN ") {
                self.warn = Some(bounded(&line[at..]));
            }
        }
        if self.test.is_none() {
            for key in ["Test NCCL failure ", "Test CUDA failure "] {
                if let Some(at) = line.find(key) {
                    self.test = Some(bounded(&line[at..]));
                    break;
                }
            }
        }
        if self.own.is_none() {
            // At the start, or after a node's name (`lab-0: flightdeck: ...`).
            let at = line
                .strip_prefix("flightdeck: ")
                .map(|_| 0)
                .or_else(|| line.find(": flightdeck: ").map(|i| i + 2));
            if let Some(at) = at {
                self.own = Some(bounded(&line[at..]));
            }
        }
        // Rules (mpirun's `-----`) and nccl-tests' bare `#` say nothing.
        if line.chars().any(char::is_alphanumeric) && line != "#" {
            self.last = Some(bounded(line));
        }
    }

    /// The cause: NCCL's own `NCCL WARN` line first, then nccl-tests' `Test NCCL
    /// failure` line, then flightdeck's own `flightdeck: ...` line, then the last line
    /// that says anything.
    pub fn cause(&self) -> Option<String> {
        self.warn
            .clone()
            .or_else(|| self.test.clone())
            .or_else(|| self.own.clone())
            .or_else(|| self.last.clone())
    }
}

/// `line`, cut to [`MAX_CAUSE_CHARS`].
fn bounded(line: &str) -> String {
    match line.char_indices().nth(MAX_CAUSE_CHARS) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_string(),
    }
}

/// The line of a failed run's output that says why it failed (see
/// [`CauseFinder::cause`] for the order); `None` when the lines say nothing. The text is
/// as the node printed it: pass it through [`crate::term::visible`] before a terminal.
pub fn failure_cause<'a>(lines: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let mut f = CauseFinder::default();
    for l in lines {
        f.push(l);
    }
    f.cause()
}

/// Where and how a run starts.
pub struct Start {
    pub fleet: String,
    /// The nodes, head first.
    pub nodes: Vec<NodeTarget>,
    pub reach: Reach,
    pub spec: RunSpec,
    /// The head node's mpirun (nccl-tests on several nodes).
    pub mpirun: String,
    /// The machine type the verdict is judged for, and where it came from.
    pub machine: Option<(String, String)>,
    /// Why the run is made when not by hand (the straggler finder's groups).
    pub purpose: Option<String>,
    /// Set up node-to-node SSH first when the run goes through mpirun (the straggler
    /// finder does it once for all its groups).
    pub node_ssh: bool,
    /// Check the GPUDirect pieces of every node first ([`crate::bootstrap::preflight`]).
    pub preflight: bool,
}

/// A started run: its id, the nodes that run a script (the ones to follow), and its
/// history entry as saved.
pub struct Started {
    pub id: String,
    pub heads: Vec<NodeTarget>,
    pub saved: SavedRun,
}

/// Start a run: node-to-node SSH when mpirun needs it, the launch on the nodes, then
/// the record in the state store and the history entry (with the environment the nodes
/// got). `flightdeck nccl run`, the straggler finder and the cockpit's run dialog all
/// start runs here. `progress` hears each step.
pub async fn start(
    state_dir: &Path,
    s: &Start,
    progress: &(dyn Fn(String) + Sync),
) -> anyhow::Result<Started> {
    if s.nodes.is_empty() {
        anyhow::bail!("no nodes selected");
    }
    s.spec.check()?;
    if s.preflight {
        crate::bootstrap::preflight::check_nodes(
            s.reach.clone(),
            &s.nodes,
            s.spec.profile,
            &s.spec.env_lines(),
            progress,
        )
        .await
        .map_err(anyhow::Error::msg)?;
    }
    if s.node_ssh && s.spec.engine == Engine::NcclTests && s.nodes.len() > 1 {
        progress(format!(
            "setting up SSH between the {} nodes for mpirun",
            s.nodes.len()
        ));
        setup_node_ssh(s.reach.clone(), &s.fleet, &s.nodes).await?;
    }
    let id = runner::new_id(&s.spec.collective, store::now_unix());
    let machine = s.machine.as_ref().map(|(m, f)| (m.clone(), f.as_str()));
    let saved = saved_run(&id, &s.fleet, &s.spec, &s.nodes, machine, s.purpose.clone());
    let started = launch(s.reach.clone(), &id, &s.spec, &s.nodes, &s.mpirun).await?;
    let (dir, fleet, rid, st, entry) = (
        state_dir.to_path_buf(),
        s.fleet.clone(),
        id.clone(),
        started.clone(),
        saved.clone(),
    );
    tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
        record_run(&dir, &fleet, &rid, &st)?;
        history::save(&dir, &entry)?;
        Ok(())
    })
    .await??;
    progress(format!(
        "run {id} started on {} of `{}`",
        crate::words::plural(s.nodes.len(), "node"),
        s.fleet
    ));
    Ok(Started {
        id,
        heads: started.into_iter().map(|(n, _)| n).collect(),
        saved,
    })
}

/// The fleet file of a fleet: its state record's `file`, else `fleet_arg` when that is a
/// fleet file. `None` when there is none or it does not load.
pub fn fleet_spec(state_dir: &Path, fleet_arg: &str, fleet: &str) -> Option<crate::fleet::FleetSpec> {
    let file = Store::new(state_dir)
        .load()
        .ok()
        .and_then(|(s, _)| s.fleets.into_iter().find(|f| f.name == fleet))
        .and_then(|f| f.file)
        .or_else(|| Path::new(fleet_arg).is_file().then(|| fleet_arg.into()))?;
    crate::fleet::load(&file).ok().map(|f| f.spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NO_GIB: &str =
        include_str!("../../tests/fixtures/nccl/composed/nccl2.27.7-rdma-no-gib-all_reduce.txt");

    /// NCCL's own WARN first, then nccl-tests' failure, then flightdeck's, then the last
    /// line; node names and launcher tags before them are fine.
    #[test]
    fn the_cause_of_a_failed_run() {
        // NCCL 2.27 with NCCL_NET=gIB and no gIB (composed from its source strings).
        assert_eq!(
            failure_cause(NO_GIB.lines()).as_deref(),
            Some("NCCL WARN Failed to initialize any NET plugin")
        );
        // Through mpirun --tag-output, and as the follower keeps them (`lab-0: ...`).
        let tagged: Vec<String> = NO_GIB
            .lines()
            .map(|l| format!("lab-0: [1,0]<stdout>:{l}"))
            .collect();
        assert_eq!(
            failure_cause(tagged.iter().map(String::as_str)).as_deref(),
            Some("NCCL WARN Failed to initialize any NET plugin")
        );
        // NCCL up to 2.26 names the network.
        let old = [
            "vm:1:2 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.",
            "",
            "vm:1:2 [0] net.cc:937 NCCL WARN Error: network gIB not found.",
            "vm:1:2 [0] NCCL INFO init.cc:345 -> 5",
            "vm: Test NCCL failure common.cu:1123 'invalid usage (run with NCCL_DEBUG=WARN for details) / Error: network gIB not found.'",
        ];
        assert_eq!(
            failure_cause(old).as_deref(),
            Some("NCCL WARN Error: network gIB not found.")
        );
        // Without NCCL_DEBUG: nccl-tests' own line.
        let quiet: Vec<&str> = NO_GIB
            .lines()
            .filter(|l| !l.contains(" NCCL INFO ") && !l.contains(" NCCL WARN "))
            .collect();
        assert_eq!(
            failure_cause(quiet).as_deref(),
            Some("Test NCCL failure common.cu:1123 'invalid usage (run with NCCL_DEBUG=WARN for details) / Failed to initialize any NET plugin'")
        );
        // flightdeck's node scripts.
        assert_eq!(
            failure_cause([
                "local-0: flightdeck: all_reduce_perf not found (PATH, --nccl-tests-dir)",
                "local-0: done"
            ])
            .as_deref(),
            Some("flightdeck: all_reduce_perf not found (PATH, --nccl-tests-dir)")
        );
        // Else the last line that says something (not mpirun's rules, not the marker).
        assert_eq!(
            failure_cause([
                "Primary job  terminated normally, but 1 process returned",
                "a non-zero exit code. Per user-direction, the job has been aborted.",
                "--------------------------------------------------------------------------",
                "__flightdeck_exit__ 1",
                "",
            ])
            .as_deref(),
            Some("a non-zero exit code. Per user-direction, the job has been aborted.")
        );
        assert_eq!(failure_cause(["", "  ", "#"]), None);
        // A line of any length is cut.
        let long = format!("NCCL WARN {}", "x".repeat(10_000));
        let c = failure_cause([long.as_str()]).unwrap();
        assert_eq!(c.chars().count(), MAX_CAUSE_CHARS + 1);
        assert!(c.ends_with('…'));
    }

    #[test]
    fn bounded_buffers_keep_the_newest_lines_in_order() {
        let mut buf = VecDeque::new();
        for i in 0..OTHER_LINES + 50 {
            push_bounded(&mut buf, format!("line {i}"), OTHER_LINES);
            assert_eq!(buf.len(), (i + 1).min(OTHER_LINES));
        }
        assert_eq!(buf.front().map(String::as_str), Some("line 50"));
        assert_eq!(
            buf.back().map(String::as_str),
            Some(format!("line {}", OTHER_LINES + 49).as_str())
        );
        assert!(buf.iter().zip(buf.iter().skip(1)).all(|(a, b)| {
            let n = |s: &str| s.trim_start_matches("line ").parse::<usize>().unwrap();
            n(b) == n(a) + 1
        }));

        let mut head = VecDeque::new();
        for i in 0..3 {
            push_bounded(&mut head, i.to_string(), HEAD_TAIL_LINES);
        }
        assert_eq!(head, ["0", "1", "2"]);
    }
}
