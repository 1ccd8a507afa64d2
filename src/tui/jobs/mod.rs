//! The Jobs view's state (its actions are act.rs, its messages update.rs): the jobs of the state store, and
//! the opened job followed on every node: per-node logs (bounded), metrics parsed as
//! lines arrive, each node's state.

pub mod act;
pub mod msg;
pub mod service;
pub mod update;
pub mod view;

pub use act::{act, log_lines, poll, visible};
pub use msg::Msg;
pub use update::update;

use crate::jobs::{metrics, JobMetrics};
use crate::store::JobRecord;
use std::collections::VecDeque;

/// Log lines kept per node of the opened job.
pub const LOG_LINES: usize = 5000;

/// How following one node of the opened job goes.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeFollow {
    Following,
    Exited(Option<i32>),
    /// The connection dropped; the service follows again from the last line seen.
    Lost(String),
}

#[derive(Debug, Clone)]
pub struct ShownJob {
    pub id: String,
    /// Per rank, the last [`LOG_LINES`] lines.
    pub logs: Vec<VecDeque<String>>,
    /// Per rank, how many lines have arrived (to resume after a lost connection).
    pub seen: Vec<usize>,
    pub follow: Vec<NodeFollow>,
    pub metrics: JobMetrics,
    /// The node whose log is shown.
    pub node: usize,
    /// Lines scrolled up from the newest (0: following the tail).
    pub scroll: usize,
    /// Read from the top (`g`): the index of the first line shown, among the lines the
    /// filter lets through; `None`: anchored at the newest (`scroll`).
    pub top: Option<usize>,
    /// Long lines wrap (`v`) instead of being cut at the edge.
    pub wrap: bool,
}

impl ShownJob {
    pub fn new(record: &JobRecord) -> ShownJob {
        let n = record.nodes.len();
        let patterns = record
            .metrics
            .iter()
            .filter_map(|p| metrics::Pattern::new(p).ok())
            .collect();
        ShownJob {
            id: record.id.clone(),
            logs: vec![VecDeque::new(); n],
            seen: vec![0; n],
            follow: vec![NodeFollow::Following; n],
            metrics: JobMetrics::new(patterns, record.flops_per_token, record.peak_tflops),
            // Open on the node where it went wrong, not on one that was only stopped.
            node: record.culprit().unwrap_or(0),
            scroll: 0,
            top: None,
            wrap: true,
        }
    }

    /// Take lines of node `rank` (in order).
    pub fn push(&mut self, rank: usize, text: String) {
        let Some(log) = self.logs.get_mut(rank) else {
            return;
        };
        self.metrics.push_line(rank, &text);
        if log.len() == LOG_LINES {
            log.pop_front();
            if rank == self.node {
                // Read from the top: the same lines stay at the top.
                self.top = self.top.map(|t| t.saturating_sub(1));
            }
        }
        log.push_back(text);
        self.seen[rank] += 1;
        if rank == self.node && self.scroll > 0 {
            // Stay on the same lines while scrolled back.
            self.scroll = (self.scroll + 1).min(log.len().saturating_sub(1));
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct JobsView {
    /// Jobs of the state store, newest first.
    pub jobs: Vec<JobRecord>,
    pub selected: Option<String>,
    pub shown: Option<ShownJob>,
    /// `x` was pressed once for this job: the next `x` stops it.
    pub stop_armed: Option<String>,
    /// Unix seconds, as of the last report (durations of running jobs).
    pub now: u64,
    /// A `Command::PollJobs` is under way.
    pub polling: bool,
    /// The list's `d` panel: the selected job's every field, under the list.
    pub detail: bool,
}

impl JobsView {
    pub fn set_jobs(&mut self, mut jobs: Vec<JobRecord>, now: u64) {
        jobs.sort_by(|a, b| b.started_at.cmp(&a.started_at).then_with(|| b.id.cmp(&a.id)));
        self.jobs = jobs;
        self.now = self.now.max(now);
        if !self
            .selected
            .as_ref()
            .is_some_and(|s| self.jobs.iter().any(|j| &j.id == s))
        {
            self.selected = self.jobs.first().map(|j| j.id.clone());
        }
    }

    pub fn record(&self, id: &str) -> Option<&JobRecord> {
        self.jobs.iter().find(|j| j.id == id)
    }

    fn at(&self, list: &[&JobRecord]) -> Option<usize> {
        self.selected
            .as_ref()
            .and_then(|s| list.iter().position(|j| &j.id == s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::RunNode;
    use crate::tui::keymap::Keymap;
    use crate::tui::state::Msg;
    use crate::tui::state::{Command, State, View};
    use crate::tui::update::update;
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

    pub fn record(id: &str, name: &str, at: u64, nodes: usize) -> JobRecord {
        JobRecord {
            id: id.into(),
            name: name.into(),
            fleet: "lab".into(),
            file: None,
            started_at: at,
            ended_at: None,
            stopped: false,
            failed_rank: None,
            nodes: (0..nodes)
                .map(|i| RunNode {
                    node: i,
                    pid: Some(100 + i as u32),
                    log: String::new(),
                    exit_code: None,
                    pod: None,
                    started_at: None,
                    ended_at: None,
                })
                .collect(),
            metrics: vec![],
            flops_per_token: None,
            peak_tflops: Some(989.0),
            profile: "none".into(),
            stop_on_failure: false,
            stop_grace: 10,
            launcher: None,
        }
    }

    fn key(s: &mut State, c: KeyCode) -> Vec<Command> {
        update(s, Msg::Key(KeyEvent::new(c, KeyModifiers::NONE)))
    }

    fn state() -> State {
        let mut s = State::new(Keymap::defaults(), vec![], "dark".into());
        s.view = View::Jobs;
        update(
            &mut s,
            Msg::Jobs(crate::tui::jobs::Msg::List {
                jobs: vec![record("a-1", "a", 1, 2), record("b-2", "b", 2, 3)],
                now: 10,
            }),
        );
        s
    }

    /// ux-walk-2 item 2: rank 1 crashed under stop_on_failure and the others were
    /// stopped (143): the job is `failed`, not `stopped` like one the operator ended, and
    /// its follow view opens on rank 1. Without a recorded rank, the first to fail on its
    /// own comes first; an operator's stop stays `stopped`.
    #[test]
    fn a_crash_that_stopped_the_others_is_a_failure_and_opens_where_it_happened() {
        let mut j = record("c-3", "crash", 3, 4);
        for (n, (code, at)) in j.nodes.iter_mut().zip([(143, 9), (1, 5), (143, 9), (143, 8)]) {
            n.exit_code = Some(code);
            n.ended_at = Some(at);
        }
        j.stopped = true;
        assert_eq!(j.culprit(), Some(1), "the node's own failure, before the stops");
        j.failed_rank = Some(1);
        assert_eq!(crate::jobs::state_word(&j), "failed");
        assert_eq!(ShownJob::new(&j).node, 1);
        let mut by_hand = j.clone();
        by_hand.failed_rank = None;
        by_hand.nodes[1].exit_code = Some(143);
        assert_eq!(crate::jobs::state_word(&by_hand), "stopped");
        let mut ok = record("d-4", "fine", 4, 2);
        ok.nodes.iter_mut().for_each(|n| n.exit_code = Some(0));
        assert_eq!((ok.culprit(), ShownJob::new(&ok).node), (None, 0));
    }

    #[test]
    fn open_follow_scroll_switch_nodes_and_close() {
        let mut s = state();
        assert_eq!(s.jobs.selected.as_deref(), Some("b-2"), "newest first");
        key(&mut s, KeyCode::Down);
        assert_eq!(s.jobs.selected.as_deref(), Some("a-1"));
        key(&mut s, KeyCode::Up);
        assert_eq!(
            key(&mut s, KeyCode::Enter),
            vec![Command::FollowJob("b-2".into())]
        );
        for i in 1..=12 {
            let lines = (0..3)
                .map(|r| {
                    (
                        r,
                        format!(
                            "Step: {i} | Time: {}s | Loss: {}",
                            1.0 + r as f64,
                            10.0 - i as f64
                        ),
                    )
                })
                .collect();
            update(
                &mut s,
                Msg::Jobs(crate::tui::jobs::Msg::Lines {
                    id: "b-2".into(),
                    lines,
                    now: 20,
                }),
            );
        }
        let shown = s.jobs.shown.as_ref().unwrap();
        assert_eq!(shown.seen, [12, 12, 12]);
        assert_eq!(shown.metrics.summary().steps, Some(12));
        assert_eq!(s.jobs.now, 20);
        // Lines for another job are not this one's.
        update(
            &mut s,
            Msg::Jobs(crate::tui::jobs::Msg::Lines {
                id: "a-1".into(),
                lines: vec![(0, "x".into())],
                now: 21,
            }),
        );
        assert_eq!(s.jobs.shown.as_ref().unwrap().seen, [12, 12, 12]);
        key(&mut s, KeyCode::Up);
        key(&mut s, KeyCode::Up);
        assert_eq!(s.jobs.shown.as_ref().unwrap().scroll, 2);
        // New lines keep the scrolled view on the same lines.
        update(
            &mut s,
            Msg::Jobs(crate::tui::jobs::Msg::Lines {
                id: "b-2".into(),
                lines: vec![(0, "late".into())],
                now: 22,
            }),
        );
        assert_eq!(s.jobs.shown.as_ref().unwrap().scroll, 3);
        key(&mut s, KeyCode::End);
        assert_eq!(s.jobs.shown.as_ref().unwrap().scroll, 0);
        key(&mut s, KeyCode::Right);
        key(&mut s, KeyCode::Right);
        assert_eq!(s.jobs.shown.as_ref().unwrap().node, 2);
        key(&mut s, KeyCode::Right);
        assert_eq!(s.jobs.shown.as_ref().unwrap().node, 0);
        key(&mut s, KeyCode::Left);
        assert_eq!(s.jobs.shown.as_ref().unwrap().node, 2);
        update(
            &mut s,
            Msg::Jobs(crate::tui::jobs::Msg::Node {
                id: "b-2".into(),
                rank: 1,
                follow: NodeFollow::Exited(Some(137)),
            }),
        );
        assert_eq!(
            s.jobs.shown.as_ref().unwrap().follow[1],
            NodeFollow::Exited(Some(137))
        );
        assert_eq!(key(&mut s, KeyCode::Esc), vec![Command::UnfollowJob]);
        assert!(s.jobs.shown.is_none());
    }

    #[test]
    fn the_filter_searches_the_log() {
        let mut s = state();
        key(&mut s, KeyCode::Enter);
        update(
            &mut s,
            Msg::Jobs(crate::tui::jobs::Msg::Lines {
                id: "b-2".into(),
                lines: vec![(0, "loading".into()), (0, "NCCL WARN x".into()), (0, "ok".into())],
                now: 1,
            }),
        );
        assert_eq!(log_lines(&s).len(), 3);
        s.filters[View::Jobs.index()] = "warn".into();
        assert_eq!(log_lines(&s), ["NCCL WARN x"]);
    }

    #[test]
    fn logs_are_bounded() {
        let mut j = ShownJob::new(&record("a", "a", 0, 1));
        for i in 0..(LOG_LINES + 10) {
            j.push(0, i.to_string());
        }
        assert_eq!(j.logs[0].len(), LOG_LINES);
        assert_eq!(j.logs[0].front().map(String::as_str), Some("10"));
        assert_eq!(j.seen[0], LOG_LINES + 10);
    }

    #[test]
    fn stop_asks_first() {
        let mut s = state();
        assert!(key(&mut s, KeyCode::Char('x')).is_empty());
        assert!(s.status.as_ref().unwrap().text.contains("press x again"));
        assert_eq!(
            key(&mut s, KeyCode::Char('x')),
            vec![Command::StopJob("b-2".into())]
        );
        // Any other key disarms.
        key(&mut s, KeyCode::Char('x'));
        key(&mut s, KeyCode::Down);
        assert!(key(&mut s, KeyCode::Char('x')).is_empty());
    }

    fn screen(s: &State, w: u16, h: u16) -> String {
        use ratatui::buffer::Buffer;
        use ratatui::layout::Rect;
        let area = Rect::new(0, 0, w, h);
        let mut buf = Buffer::empty(area);
        view::render(s, &crate::tui::theme::Theme::default_theme(), area, &mut buf);
        (0..h)
            .map(|y| (0..w).map(|x| buf[(x, y)].symbol()).collect::<String>())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Ranked defect 14: `g` shows the first screenful of the log (not its first line
    /// over an empty panel), `j` moves down from there, `G` the end again, following.
    #[test]
    fn g_shows_the_first_screenful_and_capital_g_the_end() {
        let mut s = state();
        s.size = (80, 24);
        key(&mut s, KeyCode::Enter);
        let lines = (1..=200).map(|i| (0, format!("line {i:03}"))).collect();
        update(
            &mut s,
            Msg::Jobs(crate::tui::jobs::Msg::Lines {
                id: "b-2".into(),
                lines,
                now: 20,
            }),
        );
        let tail = screen(&s, 80, 22);
        assert!(tail.contains("line 200") && !tail.contains("line 001"), "{tail}");
        key(&mut s, KeyCode::Char('g'));
        let top = screen(&s, 80, 22);
        let shown: Vec<&str> = top.matches("line 0").collect();
        assert!(top.contains("line 001") && top.contains("line 002"), "{top}");
        assert!(shown.len() >= 5, "a screenful, not one line: {top}");
        assert!(!top.contains("line 200"), "{top}");
        key(&mut s, KeyCode::Char('j'));
        let down = screen(&s, 80, 22);
        assert!(!down.contains("line 001") && down.contains("line 002"), "{down}");
        // New lines keep the top where it is.
        update(
            &mut s,
            Msg::Jobs(crate::tui::jobs::Msg::Lines {
                id: "b-2".into(),
                lines: vec![(0, "line 201".into())],
                now: 21,
            }),
        );
        assert!(screen(&s, 80, 22).contains("line 002"));
        key(&mut s, KeyCode::Char('G'));
        let end = screen(&s, 80, 22);
        assert!(end.contains("line 201") && !end.contains("line 002"), "{end}");
        assert_eq!(s.jobs.shown.as_ref().unwrap().scroll, 0);
    }
}
