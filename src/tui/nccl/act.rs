//! The NCCL view's actions (follow a run, compare two, start one), the run dialog's keys
//! and what it reads (the runs the filter lets through). Moved from mod.rs, so that mod.rs
//! is the view's state alone.

use super::*;
use crate::tui::action::{Action, Context};
use crate::tui::state::{Command, State, StatusMessage, View};
use crate::tui::theme::Tone;
use crossterm::event::{KeyCode, KeyEvent};

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
        Action::Detail => v.detail = !v.detail,
        Action::NcclRun => {
            state.status = Some(StatusMessage {
                text: "reading the fleets for a new NCCL run…".into(),
                tone: Tone::Info,
            });
            return Some(vec![Command::NcclRunChoices]);
        }
        Action::NcclRunAgain => {
            let id = v.selected.clone()?;
            if !v.history.iter().any(|h| h.id == id) {
                state.status = Some(StatusMessage {
                    text: format!("run {id} has no saved settings in the history; t starts a new run"),
                    tone: Tone::Warn,
                });
                return Some(vec![]);
            }
            v.again = Some(id.clone());
            state.status = Some(StatusMessage {
                text: format!("reading the fleets to run {id} again…"),
                tone: Tone::Info,
            });
            return Some(vec![Command::NcclRunChoices]);
        }
        _ => return None,
    }
    Some(vec![])
}

/// The fleets for the run dialog arrived: open it (on the fleet selected in the Fleets
/// view when there is one), or say why not.
pub fn open_dialog(state: &mut State, fleets: Result<Vec<FleetChoice>, String>) {
    state.dirty = true;
    match fleets {
        Ok(f) if f.is_empty() => {
            state.status = Some(StatusMessage {
                text: "no fleets in the state: apply one first (flightdeck fleet apply FILE)".into(),
                tone: Tone::Warn,
            })
        }
        Ok(f) => {
            state.status = None;
            state.view = View::Nccl;
            let preferred = state.fleet_selected.as_deref();
            let v = &mut state.nccl;
            // `R`: the selected run's settings; else the dialog as last closed; else
            // `nccl run`'s defaults.
            let saved = v
                .again
                .take()
                .and_then(|id| v.history.iter().find(|h| h.id == id));
            v.dialog = Some(match (saved, v.last_dialog.take()) {
                (Some(run), _) => RunDialog::from_saved(f, run),
                (None, Some(last)) => last.reopened(f, preferred),
                (None, None) => RunDialog::new(f, preferred),
            });
        }
        Err(e) => {
            state.status = Some(StatusMessage {
                text: format!("cannot read the fleets: {e}"),
                tone: Tone::Fail,
            })
        }
    }
}

/// A key in the run dialog: esc cancels, ctrl-s starts, tab/shift-tab move between
/// fields, left/right pick a choice; the rest edits the focused text field.
pub fn dialog_key(state: &mut State, key: KeyEvent) -> Vec<Command> {
    state.dirty = true;
    let action = state.keymap.lookup(Context::Editor, &key);
    let Some(d) = state.nccl.dialog.as_mut() else {
        return vec![];
    };
    let at = Field::ALL.iter().position(|f| *f == d.focus).unwrap_or(0);
    match action {
        Some(Action::Close) => {
            state.nccl.last_dialog = state.nccl.dialog.take();
            state.status = Some(StatusMessage {
                text: "no run started".into(),
                tone: Tone::Info,
            });
        }
        Some(Action::Confirm) => match d.request() {
            Ok(req) => {
                state.status = Some(StatusMessage {
                    text: format!(
                        "starting {} on `{}` (profile {}{})…",
                        req.spec.collective,
                        req.fleet,
                        req.spec.profile.name(),
                        if d.env_edited() { ", edited" } else { "" }
                    ),
                    tone: Tone::Info,
                });
                state.nccl.last_dialog = state.nccl.dialog.take();
                return vec![Command::StartNcclRun(Box::new(req))];
            }
            Err(p) => d.problem = Some(p),
        },
        Some(Action::NextField) => {
            d.focus = Field::ALL[cycle(at, Field::ALL.len(), true)];
            d.fresh = true;
        }
        Some(Action::PrevField) => {
            d.focus = Field::ALL[cycle(at, Field::ALL.len(), false)];
            d.fresh = true;
        }
        Some(a @ (Action::Left | Action::Right)) if d.focus.is_choice() => d.choose(a == Action::Right),
        _ if d.focus.is_choice() => {
            if key.code == KeyCode::Char(' ') {
                d.choose(true);
            }
        }
        _ => {
            let multiline = d.focus == Field::Env;
            let fresh = std::mem::take(&mut d.fresh) && !multiline;
            let typed = matches!(key.code, KeyCode::Char(_))
                && !key.modifiers.intersects(
                    crossterm::event::KeyModifiers::CONTROL | crossterm::event::KeyModifiers::ALT,
                );
            if key.code == KeyCode::Enter && !multiline {
                d.focus = Field::ALL[cycle(at, Field::ALL.len(), true)];
                d.fresh = true;
            } else if let Some(t) = d.input_mut(d.focus) {
                if fresh && typed {
                    *t = line_input("");
                }
                if t.input(key) {
                    d.problem = None;
                }
            }
        }
    }
    vec![]
}

/// A run started from the dialog (or why it did not): the view follows it.
pub fn started(state: &mut State, result: Result<String, String>) -> Vec<Command> {
    state.dirty = true;
    match result {
        Ok(id) => {
            state.status = Some(StatusMessage {
                text: format!("run {id} started; quitting leaves it running"),
                tone: Tone::Pass,
            });
            state.view = View::Nccl;
            state.nccl.compare.clear();
            state.nccl.selected = Some(id.clone());
            state.nccl.shown = Some((id.clone(), Report::default(), RunStatus::Following));
            vec![Command::LoadFleets, Command::FollowRun(id)]
        }
        Err(e) => {
            state.status = Some(StatusMessage {
                text: format!("the run did not start: {e}"),
                tone: Tone::Fail,
            });
            vec![]
        }
    }
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
