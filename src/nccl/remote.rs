//! The I/O side of NCCL runs that every launcher shares ([`super::launcher`]), used by
//! `flightdeck nccl` (run, attach, stragglers) and the cockpit: the history entry of a run
//! about to start ([`saved_run`]), its record in the state store ([`record_run`]),
//! following it ([`follow_to_end`]) and concluding it (exit codes, rows, verdict, and for
//! a failed run the line that says why: [`failure_cause`], pure like the rest of the
//! reading).

use super::history::{self, SavedRun, SavedSpec};
use super::runner::{self, human_size, RunSpec};
use super::{Parser, Report, Row};
use crate::exec::{self, Event};
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

/// The nodes of `fleet_nodes` that run `run` recorded (the ones its scripts run on), as
/// the fleet has them.
pub fn recorded_nodes(run: &RunRecord, fleet_nodes: &[NodeTarget]) -> Vec<NodeTarget> {
    run.nodes
        .iter()
        .filter_map(|rn| fleet_nodes.iter().find(|n| n.index == rn.node).cloned())
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
                started_at: None,
                ended_at: None,
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
        if let Some(exit) = crate::detach::exit_marker(&text) {
            if let Some(c) = f.codes.iter_mut().find(|(n, _)| *n == node) {
                c.1 = exit.code;
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

pub use super::cause::{failure_cause, CauseFinder};

/// The spec of a fleet: what its state record says was applied
/// ([`crate::fleet::applied`]), else (not applied) `fleet_arg` when that is a fleet file.
/// `None` when there is none or it does not load.
pub fn fleet_spec(state_dir: &Path, fleet_arg: &str, fleet: &str) -> Option<crate::fleet::FleetSpec> {
    let record = Store::new(state_dir)
        .load()
        .ok()
        .and_then(|(s, _)| s.fleet(fleet).ok().cloned());
    crate::fleet::applied::applied_or_file(record.as_ref(), fleet_arg).map(|f| f.spec)
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
        assert_eq!(c.chars().count(), super::super::cause::MAX_CAUSE_CHARS + 1);
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
