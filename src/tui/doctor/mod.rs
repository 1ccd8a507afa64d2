//! The Doctor view's state and its share of `update`: `r` (or Enter, before a run) runs
//! the doctor on the current fleet; findings arrive node by node and fill a node × check
//! matrix and the list of problems (worst first, each cause followed by what follows from
//! it); Enter shows the selected finding's evidence and fix; `v` lists every finding.

pub mod msg;
pub mod service;
pub mod update;
pub mod view;

pub use msg::Msg;
pub use update::{act, update};

use crate::doctor::{Finding, Outcome, Report};

#[derive(Debug, Clone, Default)]
pub struct DoctorView {
    /// The fleet examined (or being examined).
    pub fleet: Option<String>,
    pub report: Report,
    pub running: bool,
    /// The latest progress line (`3/4 nodes checked`, a probe round).
    pub progress: Option<String>,
    /// Why the doctor could not run.
    pub error: Option<String>,
    /// Every finding, not only the problems.
    pub all: bool,
    pub selected: usize,
    /// The selected finding's evidence and fix are shown.
    pub detail: bool,
}

impl DoctorView {
    /// The rows of the list: (depth, finding). Problems: each cause (worst first), then
    /// what follows from it one level in; all: every finding by node, then check.
    pub fn rows(&self, filter: &str) -> Vec<(usize, &Finding)> {
        let keep = |f: &Finding| {
            filter.is_empty() || {
                let t = format!(
                    "{} {} {} {}",
                    f.node.as_deref().unwrap_or("fleet"),
                    f.check,
                    f.outcome.as_str(),
                    f.what
                )
                .to_lowercase();
                t.contains(&filter.to_lowercase())
            }
        };
        if self.all {
            let mut v: Vec<&Finding> = self.report.findings.iter().filter(|f| keep(f)).collect();
            v.sort_by(|a, b| {
                let rank = |f: &Finding| crate::doctor::CHECKS.iter().position(|c| c.id == f.check);
                let node = |f: &Finding| {
                    f.node
                        .as_ref()
                        .and_then(|n| self.report.nodes.iter().position(|x| x == n))
                        .unwrap_or(usize::MAX)
                };
                node(a).cmp(&node(b)).then(rank(a).cmp(&rank(b)))
            });
            return v.into_iter().map(|f| (0, f)).collect();
        }
        let mut out = vec![];
        for (cause, after) in self.report.problems() {
            let shown: Vec<&Finding> = after.into_iter().filter(|f| keep(f)).collect();
            if keep(cause) || !shown.is_empty() {
                out.push((0, cause));
                out.extend(shown.into_iter().map(|f| (1, f)));
            }
        }
        out
    }

    /// The worst outcome of `check` on `node` so far; fleet-wide findings of the check
    /// count for every node. `None`: nothing yet.
    pub fn cell(&self, node: &str, check: &str) -> Option<Outcome> {
        let own = self
            .report
            .findings
            .iter()
            .filter(|f| f.check == check && f.node.as_deref() == Some(node))
            .map(|f| f.outcome)
            .max();
        let fleet = self
            .report
            .findings
            .iter()
            .filter(|f| f.check == check && f.node.is_none())
            .map(|f| f.outcome)
            .max();
        match (own, fleet) {
            (Some(o), _) => Some(o),
            (None, Some(f)) => Some(f),
            (None, None) => None,
        }
    }

    fn clamp(&mut self, rows: usize) {
        self.selected = self.selected.min(rows.saturating_sub(1));
        if rows == 0 {
            self.detail = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::run::Event;
    use crate::tui::keymap::Keymap;
    use crate::tui::state::{Command, Msg, State, View};
    use crate::tui::update::update;
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

    fn key(s: &mut State, c: char) -> Vec<Command> {
        update(s, Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)))
    }

    pub fn finding(node: Option<&str>, check: &'static str, outcome: Outcome, what: &str) -> Finding {
        Finding {
            check,
            node: node.map(str::to_string),
            outcome,
            what: what.to_string(),
            evidence: vec![format!("evidence of {what}")],
            fix: if outcome >= Outcome::Warn {
                format!("fix {what}")
            } else {
                String::new()
            },
            follows: None,
        }
    }

    /// A report of a 3-node fleet: node 2's eth2 down and unreachable because of it, a
    /// warning on node 0, the rest passing.
    pub fn report() -> Report {
        let mut r = Report {
            fleet: "lab".into(),
            nodes: vec!["lab-0".into(), "lab-1".into(), "lab-2".into()],
            ..Report::default()
        };
        for n in ["lab-0", "lab-1", "lab-2"] {
            r.add(vec![
                finding(Some(n), "gpus", Outcome::Pass, "8× NVIDIA H100 80GB HBM3"),
                finding(Some(n), "nics", Outcome::Pass, "2 data NICs up"),
            ]);
        }
        r.add(vec![
            finding(Some("lab-2"), "nics", Outcome::Fail, "eth2 down"),
            finding(Some("lab-0"), "sysctl", Outcome::Warn, "small TCP buffers"),
            finding(
                Some("lab-2"),
                "reach",
                Outcome::Fail,
                "eth2 unreachable: no reply on eth2 to or from any of its 2 peers",
            ),
            finding(None, "reach", Outcome::Pass, "eth1: 6 probes, 600/600 answered"),
        ]);
        r.link_causes();
        r
    }

    fn with_fleet() -> State {
        let mut s = State::new(Keymap::defaults(), vec![], "dark".into());
        s.fleets = vec![crate::store::FleetRecord {
            name: "lab".into(),
            backend: crate::fleet::BackendKind::Ssh,
            file: None,
            nodes: vec![],
            resources: vec![],
            created_at: 0,
            applied: None,
        }];
        s.fleet_selected = Some("lab".into());
        s
    }

    #[test]
    fn r_runs_the_doctor_and_findings_fill_the_view_as_they_come() {
        let mut s = with_fleet();
        key(&mut s, '8');
        assert_eq!(s.view, View::Doctor);
        assert_eq!(key(&mut s, 'r'), vec![Command::RunDoctor("lab".into())]);
        assert!(s.doctor.running);
        update(
            &mut s,
            Msg::Doctor(crate::tui::doctor::Msg::Started {
                fleet: "lab".into(),
                nodes: vec!["lab-0".into(), "lab-1".into()],
            }),
        );
        update(
            &mut s,
            Msg::Doctor(crate::tui::doctor::Msg::Event(Box::new(Event::Node {
                node: "lab-1".into(),
                findings: vec![finding(
                    Some("lab-1"),
                    "gpus",
                    Outcome::Fail,
                    "7 GPUs, a3-megagpu-8g has 8",
                )],
            }))),
        );
        update(
            &mut s,
            Msg::Doctor(crate::tui::doctor::Msg::Event(Box::new(Event::Progress(
                crate::progress::tally(1, 2, "nodes checked"),
            )))),
        );
        assert_eq!(s.doctor.progress.as_deref(), Some("1/2 nodes checked"));
        assert_eq!(s.doctor.cell("lab-1", "gpus"), Some(Outcome::Fail));
        assert_eq!(s.doctor.cell("lab-0", "gpus"), None, "not answered yet");
        assert_eq!(s.doctor.rows("").len(), 1);
        // A second r while it runs starts nothing.
        assert!(key(&mut s, 'r').is_empty());
        update(
            &mut s,
            Msg::Doctor(crate::tui::doctor::Msg::Done {
                fleet: "lab".into(),
                result: Ok(Box::new(report())),
            }),
        );
        assert!(!s.doctor.running);
        assert_eq!(
            s.status.as_ref().unwrap().text,
            "doctor lab: 2 problems: 1 failed, 1 warned (1 more follow from them)"
        );
    }

    #[test]
    fn problems_lead_with_the_cause_and_enter_shows_the_evidence() {
        let mut s = with_fleet();
        s.view = View::Doctor;
        s.doctor = DoctorView {
            fleet: Some("lab".into()),
            report: report(),
            ..DoctorView::default()
        };
        let rows: Vec<(usize, String)> = s
            .doctor
            .rows("")
            .iter()
            .map(|(d, f)| (*d, format!("{} {}", f.node.as_deref().unwrap(), f.check)))
            .collect();
        assert_eq!(
            rows,
            vec![
                (0, "lab-2 nics".into()),
                (1, "lab-2 reach".into()),
                (0, "lab-0 sysctl".into())
            ]
        );
        update(
            &mut s,
            Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)),
        );
        assert!(s.doctor.detail);
        key(&mut s, 'j');
        assert_eq!(s.doctor.selected, 1, "the detail follows the selection");
        key(&mut s, 'G');
        assert_eq!(s.doctor.selected, 2);
        update(&mut s, Msg::Key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE)));
        assert!(!s.doctor.detail);
        // v: every finding, by node then check.
        key(&mut s, 'v');
        assert!(s.doctor.all);
        assert_eq!(s.doctor.rows("").len(), s.doctor.report.findings.len());
        // The filter narrows the rows.
        assert_eq!(s.doctor.rows("sysctl").len(), 1);
        // The fleet's reach pass counts for the nodes without a reach finding.
        assert_eq!(s.doctor.cell("lab-0", "reach"), Some(Outcome::Pass));
        assert_eq!(s.doctor.cell("lab-2", "reach"), Some(Outcome::Fail));
    }

    #[test]
    fn without_a_fleet_r_says_where_to_pick_one() {
        let mut s = State::new(Keymap::defaults(), vec![], "dark".into());
        s.view = View::Doctor;
        assert!(key(&mut s, 'r').is_empty());
        assert_eq!(
            s.status.as_ref().unwrap().text,
            "no fleet: select one in Fleets (2) first"
        );
    }
}
