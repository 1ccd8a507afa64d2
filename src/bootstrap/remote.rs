//! Running the bootstrap on a fleet's nodes: every node at once, each node's steps in
//! order, progress per node and step as the markers arrive, and a failure named with
//! its node, step, exit code and the tail of its output. A node that fails does not stop
//! the others.
//!
//! Every line a node prints, and the error of its connection, is taken through
//! [`crate::term::visible::text`] as it arrives: a step's name, reason and tail reach
//! the operator's terminal (CLI or cockpit) shown, never acted on.

use super::{Marker, AS_ROOT};
use crate::cloud::Progress;
use crate::exec::{self, Event, Stream};
use crate::fleet::NodeTarget;
use crate::nccl::GpuDirect;
use crate::reach::Reach;
use std::collections::VecDeque;
use std::time::Duration;

/// Lines of output kept per node for a failure's tail.
pub const TAIL: usize = 15;

/// How long a node's bootstrap may take (apt, container pulls and an nccl-tests build).
pub const LIMIT: Duration = Duration::from_secs(45 * 60);

/// What a step came to on one node.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepState {
    /// Its check passed: nothing to do.
    AlreadyDone,
    /// Its action ran and its check passes now.
    Done,
    /// Its action failed, or its check still fails.
    Failed,
}

/// How a node's bootstrap ended.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NodeOutcome {
    pub node: String,
    pub steps: Vec<(String, StepState)>,
    /// The script's exit status ([`exec::UNREACHABLE`] when the node could not run it).
    pub code: i32,
    /// The step that failed, when one did.
    pub failed_step: Option<String>,
    /// Why, when the script says (a check that still fails), or the connection error.
    pub reason: Option<String>,
    /// The last lines of its output, when it failed.
    pub tail: Vec<String>,
}

impl NodeOutcome {
    pub fn ok(&self) -> bool {
        self.code == 0
    }

    /// `lab-1: step rxdm failed (exit 125)` and the tail, indented.
    pub fn failure_text(&self) -> String {
        let mut s = match &self.failed_step {
            Some(step) => format!("{}: step {step} failed (exit {})", self.node, self.code),
            None if self.code == exec::UNREACHABLE => format!("{}: could not run the bootstrap", self.node),
            None => format!("{}: the bootstrap ended with exit {}", self.node, self.code),
        };
        if let Some(r) = &self.reason {
            s.push_str(&format!(": {r}"));
        }
        for l in &self.tail {
            s.push_str(&format!("\n    | {l}"));
        }
        s
    }
}

/// The per-node state while the script runs.
struct Tracker {
    name: String,
    steps: Vec<(String, StepState)>,
    current: Option<String>,
    failed: Option<(String, i32, Option<String>)>,
    tail: VecDeque<String>,
    ended: bool,
}

impl Tracker {
    fn new(name: &str) -> Tracker {
        Tracker {
            name: name.to_string(),
            steps: vec![],
            current: None,
            failed: None,
            tail: VecDeque::new(),
            ended: false,
        }
    }

    /// Take one line of output; a progress message when it is a marker worth one.
    fn line(&mut self, text: &str) -> Option<String> {
        let text = &*crate::term::visible::text(text);
        let Some(m) = Marker::parse(text) else {
            if self.tail.len() == TAIL {
                self.tail.pop_front();
            }
            self.tail.push_back(text.to_string());
            return None;
        };
        let n = &self.name;
        match m {
            Marker::Begin { flavour, steps } => Some(format!("  {n}: bootstrap {flavour}, {steps} steps")),
            Marker::Done(step) => {
                self.steps.push((step.clone(), StepState::AlreadyDone));
                Some(format!("  {n}: {step}: done already"))
            }
            Marker::Run(step) => {
                self.tail.clear();
                self.current = Some(step.clone());
                Some(format!("  {n}: {step}: running"))
            }
            Marker::Ok(step) => {
                self.steps.push((step.clone(), StepState::Done));
                self.current = None;
                Some(format!("  {n}: {step}: done"))
            }
            Marker::Failed { step, code, reason } => {
                self.steps.push((step.clone(), StepState::Failed));
                self.failed = Some((step, code, reason));
                None
            }
            Marker::End => {
                self.ended = true;
                Some(format!("  {n}: bootstrapped"))
            }
        }
    }

    fn finish(self, code: i32, error: Option<String>) -> NodeOutcome {
        let error = error.map(|e| crate::term::visible::text(&e).into_owned());
        let (failed_step, reason) = match (self.failed, code) {
            (Some((step, _, reason)), _) => (Some(step), reason),
            // Ended mid-step (the connection dropped, the node died): the step it was in.
            (None, c) if c != 0 => (self.current, error),
            (None, _) if !self.ended => (None, Some("the script ended before its last step".into())),
            (None, _) => (None, None),
        };
        let code = if code == 0 && !self.ended { 1 } else { code };
        NodeOutcome {
            node: self.name,
            steps: self.steps,
            code,
            failed_step,
            reason,
            tail: if code == 0 { vec![] } else { self.tail.into() },
        }
    }
}

/// Bootstrap `nodes` for `flavour`; one outcome per node, in the nodes' order.
pub async fn run(
    reach: Reach,
    nodes: &[NodeTarget],
    flavour: GpuDirect,
    progress: Progress<'_>,
) -> Vec<NodeOutcome> {
    let script = super::script(flavour);
    run_script(reach, nodes, &script, progress).await
}

/// Run a bootstrap `script` (as [`super::render`] makes them) on `nodes` as root, under
/// bash ([`AS_ROOT`]; a node without bash fails with exit 127 and says so in its tail).
pub async fn run_script(
    reach: Reach,
    nodes: &[NodeTarget],
    script: &str,
    progress: Progress<'_>,
) -> Vec<NodeOutcome> {
    let jobs: Vec<(NodeTarget, String, Vec<u8>)> = nodes
        .iter()
        .map(|n| (n.clone(), AS_ROOT.to_string(), script.as_bytes().to_vec()))
        .collect();
    let mut trackers: Vec<Tracker> = nodes.iter().map(|n| Tracker::new(&n.name)).collect();
    let mut results: Vec<Option<(i32, Option<String>)>> = vec![None; nodes.len()];
    let pos = |index: usize| nodes.iter().position(|n| n.index == index);
    let (tx, mut rx) = exec::channel(256);
    let task = tokio::spawn(exec::run_each_with_input(reach, jobs, 64, Some(LIMIT), tx));
    let mut finished = 0;
    progress(crate::progress::tally(0, nodes.len(), "nodes finished"));
    while let Some(ev) = rx.recv().await {
        match ev {
            Event::Line { node, text, stream } => {
                let Some(k) = pos(node) else { continue };
                let t = &mut trackers[k];
                let msg = match stream {
                    Stream::Stdout => t.line(&text),
                    Stream::Stderr => t.line(&text).and(None),
                };
                if let Some(m) = msg {
                    progress(m);
                }
            }
            Event::Done { node, result } => {
                if let Some(k) = pos(node) {
                    results[k] = Some((result.code, result.error));
                    finished += 1;
                    progress(crate::progress::tally(finished, nodes.len(), "nodes finished"));
                }
            }
        }
    }
    let _ = task.await;
    let outcomes: Vec<NodeOutcome> = trackers
        .into_iter()
        .zip(results)
        .map(|(t, r)| {
            let (code, error) = r.unwrap_or((exec::UNREACHABLE, Some("no result".into())));
            t.finish(code, error)
        })
        .collect();
    for o in outcomes.iter().filter(|o| !o.ok()) {
        progress(format!("  {}", o.failure_text()));
    }
    outcomes
}

/// One line for the end of a bootstrap: how many nodes are ready, which failed.
pub fn summary(flavour: GpuDirect, outcomes: &[NodeOutcome]) -> String {
    let failed: Vec<String> = outcomes
        .iter()
        .filter(|o| !o.ok())
        .map(|o| match &o.failed_step {
            Some(s) => format!("{} (step {s}, exit {})", o.node, o.code),
            None => format!("{} (exit {})", o.node, o.code),
        })
        .collect();
    let ready = outcomes.len() - failed.len();
    if failed.is_empty() {
        format!(
            "bootstrap {}: {} ready",
            flavour.name(),
            crate::words::plural(ready, "node")
        )
    } else {
        format!(
            "bootstrap {}: {} ready, {} failed: {}; fix and re-run `flightdeck fleet bootstrap` (finished steps are skipped)",
            flavour.name(), crate::words::plural(ready, "node"),
            failed.len(),
            failed.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_cut_off_mid_step_names_the_step_and_keeps_its_tail() {
        let mut t = Tracker::new("lab-1");
        assert!(t.line("@@fd-bootstrap begin rdma 3").is_some());
        t.line("@@fd-bootstrap done apt-repo");
        t.line("@@fd-bootstrap run nccl-gib");
        for i in 0..30 {
            assert!(t.line(&format!("Get:{i} http://packages")).is_none());
        }
        let o = t.finish(exec::UNREACHABLE, Some("connection reset".into()));
        assert!(!o.ok());
        assert_eq!(o.failed_step.as_deref(), Some("nccl-gib"));
        assert_eq!(o.tail.len(), TAIL);
        assert_eq!(o.tail.last().unwrap(), "Get:29 http://packages");
        let text = o.failure_text();
        assert!(
            text.starts_with("lab-1: step nccl-gib failed (exit 255): connection reset"),
            "{text}"
        );
        assert_eq!(o.steps, vec![("apt-repo".to_string(), StepState::AlreadyDone)]);
    }

    #[test]
    fn what_a_node_says_is_kept_shown_not_raw() {
        let osc = "\u{1b}]52;c;cm0gLXJmIH4K\u{7}\u{1b}]0;OWNED\u{7}\u{9b}2J";
        let mut t = Tracker::new("lab-0");
        t.line("@@fd-bootstrap begin rdma 1");
        assert_eq!(
            t.line(&format!("@@fd-bootstrap run step{osc}")).as_deref(),
            Some("  lab-0: step␛]52;c;cm0gLXJmIH4K^G␛]0;OWNED^G<U+009B>2J: running")
        );
        t.line(&format!("apt said {osc}"));
        t.line(&format!("@@fd-bootstrap failed step 3 because {osc}"));
        let o = t.finish(3, Some(format!("connection: {osc}")));
        let text = o.failure_text();
        assert!(text.contains("␛]52;c;"), "{text}");
        assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "{text:?}");
        let o = Tracker::new("lab-1").finish(exec::UNREACHABLE, Some(format!("refused {osc}")));
        assert!(!o.failure_text().contains('\u{1b}'));
    }

    #[test]
    fn exit_zero_without_the_end_marker_is_not_success() {
        let mut t = Tracker::new("n");
        t.line("@@fd-bootstrap begin tcpx 2");
        let o = t.finish(0, None);
        assert!(!o.ok());
        assert!(o.reason.unwrap().contains("before its last step"));
    }

    #[test]
    fn summary_names_failed_nodes_and_steps() {
        let ok = NodeOutcome {
            node: "a-0".into(),
            steps: vec![],
            code: 0,
            failed_step: None,
            reason: None,
            tail: vec![],
        };
        let bad = NodeOutcome {
            node: "a-1".into(),
            code: 100,
            failed_step: Some("docker".into()),
            ..ok.clone()
        };
        assert_eq!(
            summary(GpuDirect::Tcpxo, std::slice::from_ref(&ok)),
            "bootstrap tcpxo: 1 node ready"
        );
        let s = summary(GpuDirect::Tcpxo, &[ok, bad]);
        assert!(
            s.contains("1 node ready, 1 failed: a-1 (step docker, exit 100)"),
            "{s}"
        );
    }
}
