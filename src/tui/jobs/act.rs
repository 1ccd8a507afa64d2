//! The Jobs view's actions (open a job, its nodes, its log, stop it) and what they read
//! (the jobs the filter lets through, the shown node's log lines). Moved from mod.rs, so
//! that mod.rs is the view's state alone.

use super::*;
use crate::store::JobRecord;
use crate::tui::action::Action;
use crate::tui::state::{Command, State, StatusMessage, View};
use crate::tui::theme::Tone;

/// While the Jobs view is up and a job of the list runs: the next poll of the running
/// jobs' nodes (`Command::PollJobs`, a few seconds from now), unless one is under way.
/// Nothing while no job runs or the view is elsewhere; coming back to it polls again.
/// Called after every message ([`crate::tui::update::update`]).
pub fn poll(state: &mut State) -> Vec<Command> {
    let running = state.jobs.jobs.iter().any(|j| !j.finished());
    if state.view != View::Jobs || state.jobs.polling || !running {
        return vec![];
    }
    state.jobs.polling = true;
    vec![Command::PollJobs]
}

/// The jobs the view's filter lets through (name, id or fleet), newest first.
pub fn visible(state: &State) -> Vec<&JobRecord> {
    let f = state.filters[View::Jobs.index()].to_lowercase();
    state
        .jobs
        .jobs
        .iter()
        .filter(|j| {
            f.is_empty()
                || j.name.to_lowercase().contains(&f)
                || j.id.to_lowercase().contains(&f)
                || j.fleet.to_lowercase().contains(&f)
        })
        .collect()
}

/// The opened job's log lines of its shown node that match the filter (all without one),
/// oldest first.
pub fn log_lines(state: &State) -> Vec<&str> {
    let Some(shown) = &state.jobs.shown else {
        return vec![];
    };
    let f = state.filters[View::Jobs.index()].to_lowercase();
    shown
        .logs
        .get(shown.node)
        .map(|l| {
            l.iter()
                .filter(|t| f.is_empty() || t.to_lowercase().contains(&f))
                .map(String::as_str)
                .collect()
        })
        .unwrap_or_default()
}

/// Global-context actions in the Jobs view. `None`: not a Jobs action.
pub fn act(state: &mut State, action: Action) -> Option<Vec<Command>> {
    if action != Action::JobStop {
        state.jobs.stop_armed = None;
    }
    let page = usize::from(state.size.1.saturating_sub(8)).max(1);
    if state.jobs.shown.is_some() {
        let lines = log_lines(state).len();
        let shown = state.jobs.shown.as_mut().expect("checked");
        let nodes = shown.logs.len();
        let last = lines.saturating_sub(1);
        match (action, shown.top) {
            // Read from the top (after `g`, as in less): lines move under a fixed top.
            (Action::Up, Some(t)) => shown.top = Some(t.saturating_sub(1)),
            (Action::Down, Some(t)) => shown.top = Some((t + 1).min(last)),
            (Action::PageUp, Some(t)) => shown.top = Some(t.saturating_sub(page)),
            (Action::PageDown, Some(t)) => shown.top = Some((t + page).min(last)),
            (Action::Up, None) => shown.scroll = (shown.scroll + 1).min(last),
            (Action::Down, None) => shown.scroll = shown.scroll.saturating_sub(1),
            (Action::PageUp, None) => shown.scroll = (shown.scroll + page).min(last),
            (Action::PageDown, None) => shown.scroll = shown.scroll.saturating_sub(page),
            // `g`: the first screenful; `G`: the end, following.
            (Action::Top, _) => shown.top = Some(0),
            (Action::Bottom, _) => {
                shown.top = None;
                shown.scroll = 0;
            }
            // h / l, and n / N as in the NICs view: the previous and next node.
            (Action::Left | Action::PrevItem, _) if nodes > 0 => {
                shown.node = (shown.node + nodes - 1) % nodes;
                shown.scroll = 0;
                shown.top = None;
            }
            (Action::Right | Action::NextItem, _) if nodes > 0 => {
                shown.node = (shown.node + 1) % nodes;
                shown.scroll = 0;
                shown.top = None;
            }
            (Action::NicsMode, _) => shown.wrap = !shown.wrap,
            (Action::Close, _) => {
                state.jobs.shown = None;
                return Some(vec![Command::UnfollowJob]);
            }
            (Action::JobStop, _) => {
                let id = shown.id.clone();
                return Some(arm_or_stop(state, id));
            }
            (Action::Reload, _) => return Some(vec![Command::LoadFleets]),
            _ => return None,
        }
        return Some(vec![]);
    }
    let list: Vec<String> = visible(state).iter().map(|j| j.id.clone()).collect();
    if list.is_empty() && action != Action::Reload {
        return None;
    }
    let refs: Vec<&JobRecord> = visible(state);
    let at = state.jobs.at(&refs);
    let last = list.len().saturating_sub(1);
    let pick = |i: usize| list.get(i).cloned();
    match action {
        Action::Up => state.jobs.selected = pick(at.map_or(0, |i| i.saturating_sub(1))),
        Action::Down => state.jobs.selected = pick(at.map_or(0, |i| (i + 1).min(last))),
        Action::Top => state.jobs.selected = pick(0),
        Action::Bottom => state.jobs.selected = pick(last),
        Action::Select => {
            let id = state.jobs.selected.clone()?;
            let record = state.jobs.record(&id)?;
            state.jobs.shown = Some(ShownJob::new(record));
            return Some(vec![Command::FollowJob(id)]);
        }
        Action::JobStop => {
            let id = state.jobs.selected.clone()?;
            return Some(arm_or_stop(state, id));
        }
        Action::Detail => state.jobs.detail = !state.jobs.detail,
        Action::Reload => return Some(vec![Command::LoadFleets]),
        _ => return None,
    }
    Some(vec![])
}

/// The first `x` asks, the second stops.
fn arm_or_stop(state: &mut State, id: String) -> Vec<Command> {
    let name = state.jobs.record(&id).map_or(id.clone(), |j| j.name.clone());
    let finished = state.jobs.record(&id).is_some_and(JobRecord::finished);
    if finished {
        state.status = Some(StatusMessage {
            text: format!("job {name} has ended on every node"),
            tone: Tone::Info,
        });
        return vec![];
    }
    if state.jobs.stop_armed.as_deref() == Some(id.as_str()) {
        state.jobs.stop_armed = None;
        state.status = Some(StatusMessage {
            text: format!("stopping job {name} on every node…"),
            tone: Tone::Warn,
        });
        return vec![Command::StopJob(id)];
    }
    let key = state
        .keymap
        .chords(crate::tui::action::Context::Global, Action::JobStop)
        .first()
        .map_or("x".to_string(), |c| c.to_string());
    state.status = Some(StatusMessage {
        text: format!("stop job {name} on every node (TERM, then KILL)? press {key} again"),
        tone: Tone::Warn,
    });
    state.jobs.stop_armed = Some(id);
    vec![]
}
