//! The Doctor view's share of `update`: its actions and its messages.

use super::{DoctorView, Msg};
use crate::doctor::{run::Event, Outcome, Report};
use crate::tui::action::Action;
use crate::tui::state::{Command, State, StatusMessage, View};
use crate::tui::theme::Tone;

/// A message of the doctor's service.
pub fn update(state: &mut State, msg: Msg) -> Vec<Command> {
    match msg {
        Msg::Started { fleet, nodes } => started(state, fleet, nodes),
        Msg::Event(e) => event(state, *e),
        Msg::Done { fleet, result } => done(state, fleet, result.map(|r| *r)),
    }
    vec![]
}
/// Global-context actions in the Doctor view. `None`: not a Doctor action.
pub fn act(state: &mut State, action: Action) -> Option<Vec<Command>> {
    let filter = state.filter().to_string();
    let rows = state.doctor.rows(&filter).len();
    match action {
        Action::Reload => return Some(start(state)),
        Action::Select if rows == 0 && !state.doctor.running => return Some(start(state)),
        Action::Select | Action::Detail => {
            state.doctor.detail = !state.doctor.detail && rows > 0;
        }
        Action::Close if state.doctor.detail => state.doctor.detail = false,
        Action::NicsMode => {
            state.doctor.all = !state.doctor.all;
            state.doctor.selected = 0;
        }
        Action::Down | Action::NextItem => state.doctor.selected += 1,
        Action::Up | Action::PrevItem => state.doctor.selected = state.doctor.selected.saturating_sub(1),
        Action::PageDown => state.doctor.selected += 10,
        Action::PageUp => state.doctor.selected = state.doctor.selected.saturating_sub(10),
        Action::Top => state.doctor.selected = 0,
        Action::Bottom => state.doctor.selected = rows.saturating_sub(1),
        _ => return None,
    }
    let rows = state.doctor.rows(&filter).len();
    state.doctor.clamp(rows);
    Some(vec![])
}

/// Run the doctor on the current fleet.
fn start(state: &mut State) -> Vec<Command> {
    let Some(fleet) = crate::tui::shell::fleet::current(state).map(|f| f.name.clone()) else {
        state.status = Some(StatusMessage {
            text: "no fleet: select one in Fleets (2) first".into(),
            tone: Tone::Warn,
        });
        return vec![];
    };
    if state.doctor.running && state.doctor.fleet.as_deref() == Some(fleet.as_str()) {
        state.status = Some(StatusMessage {
            text: format!("the doctor is examining {fleet} already"),
            tone: Tone::Info,
        });
        return vec![];
    }
    state.doctor = DoctorView {
        fleet: Some(fleet.clone()),
        running: true,
        all: state.doctor.all,
        ..DoctorView::default()
    };
    vec![Command::RunDoctor(fleet)]
}

/// The doctor started on `fleet`'s `nodes`.
fn started(state: &mut State, fleet: String, nodes: Vec<String>) {
    if state.doctor.fleet.as_deref() != Some(fleet.as_str()) {
        return;
    }
    state.doctor.report.fleet = fleet;
    state.doctor.report.nodes = nodes;
    state.dirty = true;
}

/// Findings or progress of the running doctor.
fn event(state: &mut State, e: Event) {
    if !state.doctor.running {
        return;
    }
    match e {
        Event::Node { findings, .. } | Event::Fleet(findings) => {
            // Causes linked as findings come, so the problems list leads with each cause
            // and nests what follows from it during the run too.
            state.doctor.report.add(findings);
            state.doctor.report.link_causes();
        }
        Event::Progress(p) => {
            state.doctor.progress = Some(match crate::progress::parse_tally(&p) {
                Some((done, total, what)) => format!("{done}/{total} {what}"),
                None => p,
            })
        }
    }
    state.dirty |= state.view == View::Doctor;
}

/// The doctor finished: the whole report (causes linked), or why it could not run.
fn done(state: &mut State, fleet: String, result: Result<Report, String>) {
    if state.doctor.fleet.as_deref() != Some(fleet.as_str()) {
        return;
    }
    state.doctor.running = false;
    state.doctor.progress = None;
    match result {
        Ok(r) => {
            let problems = r.problems();
            let count = |o: Outcome| problems.iter().filter(|(c, _)| c.outcome == o).count();
            let (fails, warns) = (count(Outcome::Fail), count(Outcome::Warn));
            let follow: usize = problems.iter().map(|(_, a)| a.len()).sum();
            state.status = Some(StatusMessage {
                text: if fails + warns == 0 {
                    format!("doctor {fleet}: no problem found")
                } else {
                    format!(
                        "doctor {fleet}: {}: {fails} failed, {warns} warned{}",
                        crate::words::plural(problems.len(), "problem"),
                        if follow > 0 {
                            format!(" ({follow} more follow from them)")
                        } else {
                            String::new()
                        }
                    )
                },
                tone: if fails > 0 {
                    Tone::Fail
                } else if warns > 0 {
                    Tone::Warn
                } else {
                    Tone::Pass
                },
            });
            drop(problems);
            state.doctor.report = r;
        }
        Err(e) => {
            state.status = Some(StatusMessage {
                text: format!("doctor {fleet}: {e}"),
                tone: Tone::Fail,
            });
            state.doctor.error = Some(e);
        }
    }
    let rows = state.doctor.rows("").len();
    state.doctor.clamp(rows);
    state.dirty = true;
}
