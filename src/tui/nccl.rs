//! The NCCL view's state and its share of `update`: the runs of the state store, and the
//! followed run's report as its rows arrive (parsed by the service that follows it).

use super::action::Action;
use super::state::{Command, State, View};
use crate::nccl::expect::{self, Verdict};
use crate::nccl::history::{self, Comparison, SavedRun};
use crate::nccl::Report;
use crate::store::RunRecord;

#[derive(Debug, Clone, PartialEq)]
pub enum RunStatus {
    Following,
    Ended(Option<i32>),
    Failed(String),
}

#[derive(Debug, Clone, Default)]
pub struct NcclView {
    /// NCCL runs of the state store, newest first.
    pub runs: Vec<RunRecord>,
    /// The selected run, by id.
    pub selected: Option<String>,
    /// The run being shown, its report so far and its state.
    pub shown: Option<(String, Report, RunStatus)>,
    /// The history of the state dir (profile, machine type, rows, verdict per run).
    pub history: Vec<SavedRun>,
    /// Runs marked for comparison, in marking order (A, then B); two at most.
    pub compare: Vec<String>,
}

impl NcclView {
    pub fn set_runs(&mut self, mut runs: Vec<RunRecord>) {
        runs.retain(|r| r.kind == "nccl");
        runs.sort_by(|a, b| b.started_at.cmp(&a.started_at).then_with(|| b.id.cmp(&a.id)));
        self.runs = runs;
        if !self
            .selected
            .as_ref()
            .is_some_and(|s| self.runs.iter().any(|r| &r.id == s))
        {
            self.selected = self.runs.first().map(|r| r.id.clone());
        }
    }

    pub fn set_history(&mut self, history: Vec<SavedRun>) {
        self.history = history;
    }

    /// The history entry of a run.
    pub fn saved(&self, id: &str) -> Option<&SavedRun> {
        self.history.iter().find(|r| r.id == id)
    }

    /// The machine type and node count to judge run `id` by: what its history entry
    /// says, else the GPUs of nccl-tests' rank list.
    pub fn machine(&self, id: &str, report: &Report) -> Option<(String, Option<u32>)> {
        let saved = self.saved(id);
        let nodes = saved.map(|s| s.nodes.len() as u32).filter(|n| *n > 0);
        match saved.and_then(|s| s.machine_type.clone()) {
            Some(m) => Some((m, nodes)),
            None => expect::machine_from_devices(report).map(|(m, n)| (m, nodes.or(Some(n)))),
        }
    }

    /// The verdict of run `id` on its report so far (`None` before the first row).
    pub fn verdict(&self, id: &str, report: &Report) -> Option<Verdict> {
        if report.rows.is_empty() {
            return None;
        }
        let m = self.machine(id, report);
        let nodes = m.as_ref().and_then(|(_, n)| *n);
        Some(expect::judge(report, m.as_ref().map(|(m, _)| m.as_str()), nodes))
    }

    /// The two marked runs side by side, when both are in the history.
    pub fn comparison(&self) -> Option<(Comparison, &SavedRun, &SavedRun)> {
        let [a, b] = self.compare.as_slice() else {
            return None;
        };
        let (a, b) = (self.saved(a)?, self.saved(b)?);
        Some((history::compare(a, b), a, b))
    }

    fn at(&self) -> Option<usize> {
        self.selected
            .as_ref()
            .and_then(|s| self.runs.iter().position(|r| &r.id == s))
    }
}

/// Global-context actions in the NCCL view. `None`: not an NCCL action.
pub fn act(state: &mut State, action: Action) -> Option<Vec<Command>> {
    let v = &mut state.nccl;
    let last = v.runs.len().saturating_sub(1);
    let pick = |v: &mut NcclView, i: usize| v.selected = v.runs.get(i).map(|r| r.id.clone());
    match action {
        Action::Up => pick(v, v.at().map_or(0, |i| i.saturating_sub(1))),
        Action::Down => pick(v, v.at().map_or(0, |i| (i + 1).min(last))),
        Action::Top => pick(v, 0),
        Action::Bottom => pick(v, last),
        Action::Select => {
            let id = v.selected.clone()?;
            v.compare.clear();
            v.shown = Some((id.clone(), Report::default(), RunStatus::Following));
            return Some(vec![Command::FollowRun(id)]);
        }
        Action::Compare => {
            let id = v.selected.clone()?;
            if let Some(i) = v.compare.iter().position(|c| *c == id) {
                v.compare.remove(i);
            } else {
                v.compare.push(id);
                if v.compare.len() > 2 {
                    v.compare.remove(0);
                }
            }
        }
        Action::Reload => return Some(vec![Command::LoadFleets]),
        _ => return None,
    }
    Some(vec![])
}

/// The view's filter narrows the run list (id or fleet).
pub fn visible(state: &State) -> Vec<&RunRecord> {
    let f = state.filters[View::Nccl.index()].to_lowercase();
    state
        .nccl
        .runs
        .iter()
        .filter(|r| f.is_empty() || r.id.to_lowercase().contains(&f) || r.fleet.to_lowercase().contains(&f))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::keymap::Keymap;
    use crate::tui::state::Msg;
    use crate::tui::update::update;
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

    fn run(id: &str, at: u64) -> RunRecord {
        RunRecord {
            id: id.into(),
            kind: "nccl".into(),
            fleet: "lab".into(),
            started_at: at,
            nodes: vec![],
        }
    }

    #[test]
    fn runs_newest_first_follow_and_rows_arrive() {
        let mut s = State::new(Keymap::defaults(), vec![], "dark".into());
        update(
            &mut s,
            Msg::Runs(vec![
                run("old", 1),
                run("new", 2),
                RunRecord {
                    kind: "job".into(),
                    ..run("job", 3)
                },
            ]),
        );
        assert_eq!(
            s.nccl.runs.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
            vec!["new", "old"]
        );
        update(
            &mut s,
            Msg::Key(KeyEvent::new(KeyCode::Char('5'), KeyModifiers::NONE)),
        );
        update(
            &mut s,
            Msg::Key(KeyEvent::new(KeyCode::Char('j'), KeyModifiers::NONE)),
        );
        let cmds = update(
            &mut s,
            Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)),
        );
        assert_eq!(cmds, vec![Command::FollowRun("old".into())]);
        let report = crate::nccl::parse_text(
            &std::fs::read_to_string(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/fixtures/nccl/h200x2-all_reduce.txt"
            ))
            .unwrap(),
        )
        .remove(0);
        update(
            &mut s,
            Msg::RunReport {
                id: "old".into(),
                report: Box::new(report.clone()),
            },
        );
        update(
            &mut s,
            Msg::RunEnded {
                id: "old".into(),
                code: Some(0),
            },
        );
        let (id, r, st) = s.nccl.shown.clone().unwrap();
        assert_eq!(
            (id.as_str(), r.rows.len(), st),
            ("old", 31, RunStatus::Ended(Some(0)))
        );
        // A report for a run no longer shown is dropped.
        update(
            &mut s,
            Msg::RunReport {
                id: "other".into(),
                report: Box::new(report),
            },
        );
        assert_eq!(s.nccl.shown.as_ref().unwrap().0, "old");
    }

    #[test]
    fn compare_marks_two_runs_and_the_verdict_falls_back_to_the_rank_list() {
        let mut s = State::new(Keymap::defaults(), vec![], "dark".into());
        update(&mut s, Msg::Runs(vec![run("a", 1), run("b", 2), run("c", 3)]));
        let key = |s: &mut State, c: char| {
            update(s, Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)));
        };
        key(&mut s, '5');
        for c in ['c', 'j', 'c', 'j', 'c'] {
            key(&mut s, c);
        }
        assert_eq!(
            s.nccl.compare,
            vec!["b".to_string(), "a".into()],
            "the first mark drops out"
        );
        assert!(s.nccl.comparison().is_none(), "not in the history yet");
        let report = crate::nccl::parse_text(include_str!("../../tests/fixtures/nccl/h200x2-all_reduce.txt"))
            .remove(0);
        let entry = |id: &str| {
            let mut e = SavedRun {
                id: id.into(),
                nodes: vec!["lab-0".into()],
                ..Default::default()
            };
            e.conclude(&report, &[Some(0)], 9);
            e
        };
        update(&mut s, Msg::NcclHistory(vec![entry("a"), entry("b")]));
        let (cmp, a, b) = s.nccl.comparison().unwrap();
        assert_eq!(
            (a.id.as_str(), b.id.as_str(), cmp.peak_ratio),
            ("b", "a", Some(1.0))
        );
        // A run with no history entry is judged by the GPUs of its rank list.
        let v = s.nccl.verdict("c", &report).unwrap();
        assert_eq!(
            (v.machine_type.as_deref(), v.grade),
            (Some("2xH200"), crate::nccl::expect::Grade::Pass)
        );
        assert!(
            s.nccl.verdict("c", &Report::default()).is_none(),
            "no verdict before the first row"
        );
        key(&mut s, 'c');
        assert_eq!(
            s.nccl.compare,
            vec!["b".to_string()],
            "c on a marked run unmarks it"
        );
    }
}
