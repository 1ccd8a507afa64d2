//! The Fleets view's share of `update`: its actions (select, apply, delete, edit,
//! cancel), the confirmation's answer, the fleet-file editor's keys, and the messages of
//! its services.

use super::{Confirm, Msg, Op};
use crate::store::FleetRecord;
use crate::tui::action::{Action, Context};
use crate::tui::state::{Ask, AskFor, Command, Overlay, State, StatusMessage, View};
use crate::tui::theme::Tone;
use crate::tui::widgets::editor::FleetEditor;
use crossterm::event::KeyEvent;

/// A message of the fleets' services.
pub fn update(state: &mut State, msg: Msg) -> Vec<Command> {
    match msg {
        Msg::Loaded(result) => loaded(state, result),
        Msg::Planned(plan) => planned(state, plan),
        Msg::Log(line) => log(state, line),
        Msg::Done { name, result } => return done(state, name, result),
        Msg::FileOpened(result) => {
            state.dirty = true;
            match result {
                Ok((path, text)) => open_editor(state, path, text),
                Err(e) => {
                    state.status = Some(StatusMessage {
                        text: e,
                        tone: Tone::Fail,
                    })
                }
            }
        }
        Msg::FileWritten(result) => {
            state.status = Some(match result {
                Ok(path) => StatusMessage {
                    text: format!("wrote {path}"),
                    tone: Tone::Pass,
                },
                Err(e) => StatusMessage {
                    text: e,
                    tone: Tone::Fail,
                },
            });
            state.dirty = true;
        }
    }
    vec![]
}

/// The fleets of the state store, (re)loaded.
fn loaded(state: &mut State, result: Result<Vec<crate::store::FleetRecord>, String>) {
    // A reload that finds what is shown draws nothing (the state watcher reloads
    // after every write, also the cockpit's own).
    let same = match &result {
        Ok(list) => *list == state.fleets && state.fleets_error.is_none(),
        Err(e) => state.fleets_error.as_ref() == Some(e),
    };
    if same {
        return;
    }
    match result {
        Ok(list) => {
            let lost = newly_lost(&state.fleets, &list);
            if !lost.is_empty() && !state.fleets.is_empty() {
                state.status = Some(StatusMessage {
                    text: format!("lost: {}", lost.join(", ")),
                    tone: Tone::Fail,
                });
            }
            state.fleets = list;
            state.fleets_error = None;
        }
        Err(e) => state.fleets_error = Some(e),
    }
    fix_selection(state);
    state.dirty = true;
}

/// Cloud nodes lost in `new` that were not in `old`: `tb-1 (preempted)`, in order.
fn newly_lost(old: &[crate::store::FleetRecord], new: &[crate::store::FleetRecord]) -> Vec<String> {
    let was_lost = |fleet: &str, name: &str| {
        old.iter()
            .filter(|f| f.name == fleet)
            .flat_map(|f| &f.resources)
            .any(|r| r.kind == "instance" && r.name == name && r.lost.is_some())
    };
    new.iter()
        .flat_map(|f| f.resources.iter().map(move |r| (f, r)))
        .filter(|(f, r)| r.kind == "instance" && !was_lost(&f.name, &r.name))
        .filter_map(|(_, r)| r.lost.as_ref().map(|why| format!("{} ({why})", r.name)))
        .collect()
}

/// The fleets the Fleets view shows: those matching its filter (any column, any case).
pub fn visible(state: &State) -> Vec<&FleetRecord> {
    let f = state.filters[View::Fleets.index()].to_lowercase();
    state
        .fleets
        .iter()
        .filter(|r| {
            f.is_empty()
                || [r.name.as_str(), r.backend.as_str()]
                    .iter()
                    .any(|c| c.to_lowercase().contains(&f))
                || r.nodes.iter().any(|n| n.host().to_lowercase().contains(&f))
        })
        .collect()
}

/// Keep the selection on a visible fleet after a reload or a filter change.
pub fn fix_selection(state: &mut State) {
    let names: Vec<String> = visible(state).iter().map(|f| f.name.clone()).collect();
    if !state.fleet_selected.as_ref().is_some_and(|s| names.contains(s)) {
        state.fleet_selected = names.first().cloned();
    }
}

pub fn act(state: &mut State, action: Action) -> Option<Vec<Command>> {
    let names: Vec<String> = visible(state).iter().map(|f| f.name.clone()).collect();
    let at = state
        .fleet_selected
        .as_ref()
        .and_then(|s| names.iter().position(|n| n == s));
    let pick = |i: usize| names.get(i).cloned();
    match action {
        Action::Up => state.fleet_selected = pick(at.map_or(0, |i| i.saturating_sub(1))),
        Action::Down => {
            state.fleet_selected = pick(at.map_or(0, |i| (i + 1).min(names.len().saturating_sub(1))))
        }
        Action::Top => state.fleet_selected = pick(0),
        Action::Bottom => state.fleet_selected = pick(names.len().saturating_sub(1)),
        Action::Reload => return Some(vec![Command::LoadFleets]),
        Action::Detail => state.fleet_ops.detail = !state.fleet_ops.detail,
        Action::Close if state.fleet_ops.detail => state.fleet_ops.detail = false,
        Action::FleetApply | Action::FleetDelete | Action::FleetEdit => return Some(fleet_op(state, action)),
        Action::JobStop => return Some(cancel_op(state)),
        Action::Select => {
            return Some(
                state
                    .fleet_selected
                    .clone()
                    .map(Command::OpenPanes)
                    .into_iter()
                    .collect(),
            )
        }
        _ => return None,
    }
    Some(vec![])
}

/// `x` in the Fleets view: cancel the running apply (a flex-start request queued for
/// capacity, say); its provisioner deletes what it made. Deletes run to the end.
fn cancel_op(state: &mut State) -> Vec<Command> {
    match state.fleet_ops.running.clone() {
        Some(what) if what.starts_with("apply ") => {
            state
                .fleet_ops
                .push(format!("cancelling {what}: what it made is deleted"));
            state.status = Some(StatusMessage {
                text: format!("cancelling {what}"),
                tone: Tone::Warn,
            });
            vec![Command::CancelFleetOp]
        }
        Some(what) => {
            state.status = Some(StatusMessage {
                text: format!("{what} runs to the end (a delete is not cancelled)"),
                tone: Tone::Warn,
            });
            vec![]
        }
        None => {
            state.status = Some(StatusMessage {
                text: "nothing to stop: x cancels a running apply here".into(),
                tone: Tone::Info,
            });
            vec![]
        }
    }
}

fn busy(state: &mut State) -> bool {
    if let Some(what) = &state.fleet_ops.running {
        state.status = Some(StatusMessage {
            text: format!("{what} is still running; its log is below"),
            tone: Tone::Warn,
        });
        return true;
    }
    false
}

/// Plan an apply of `file` (the confirmation opens when the plan is back).
pub fn start_apply(state: &mut State, file: String) -> Vec<Command> {
    if busy(state) {
        return vec![];
    }
    state.status = Some(StatusMessage {
        text: format!("planning {file}…"),
        tone: Tone::Info,
    });
    vec![Command::PlanFleet(file)]
}

/// The apply, delete and edit keys of the Fleets view.
fn fleet_op(state: &mut State, action: Action) -> Vec<Command> {
    let Some(record) = current_selected(state).cloned() else {
        state.status = Some(StatusMessage {
            text: "no fleet selected; :apply FILE applies a fleet file".into(),
            tone: Tone::Warn,
        });
        return vec![];
    };
    let file = record.file.as_ref().map(|p| p.display().to_string());
    match (action, file) {
        (Action::FleetDelete, _) => {
            if busy(state) {
                return vec![];
            }
            let mut plan = crate::cloud::inventory_for(record.backend).delete_plan(&record);
            let open = state.panes.open_shells(&record.name);
            if open > 0 {
                plan.notes.push(format!(
                    "{} open in its panes {} with it",
                    crate::words::plural(open, "shell"),
                    if open == 1 { "ends" } else { "end" }
                ));
            }
            state.overlay = Overlay::FleetConfirm(Box::new(Confirm {
                op: Op::Delete {
                    name: record.name.clone(),
                },
                plan,
            }));
            vec![]
        }
        (Action::FleetApply, Some(f)) => start_apply(state, f),
        (Action::FleetEdit, Some(f)) => vec![Command::EditFile(f)],
        (_, None) => {
            state.status = Some(StatusMessage {
                text: format!(
                    "fleet `{}` has no recorded file; :apply FILE applies one",
                    record.name
                ),
                tone: Tone::Warn,
            });
            vec![]
        }
        _ => vec![],
    }
}

fn current_selected(state: &State) -> Option<&FleetRecord> {
    let name = state.fleet_selected.as_ref()?;
    state.fleets.iter().find(|f| &f.name == name)
}

/// y or n on the confirmation overlay.
pub fn answer(state: &mut State, action: Action) -> Vec<Command> {
    let Overlay::FleetConfirm(c) = std::mem::take(&mut state.overlay) else {
        return vec![];
    };
    state.dirty = true;
    if action != Action::Confirm {
        state.status = Some(StatusMessage {
            text: "nothing changed".into(),
            tone: Tone::Info,
        });
        return vec![];
    }
    let ops = &mut state.fleet_ops;
    ops.log.clear();
    ops.outcome = None;
    state.view = View::Fleets;
    let (what, command) = match c.op {
        Op::Apply { file, reviewed } => (format!("apply {file}"), Command::ApplyFleet { file, reviewed }),
        Op::Delete { name } => (format!("delete {name}"), Command::DeleteFleet(name)),
    };
    ops.push(format!("{what}: started"));
    ops.tally = None;
    ops.started = Some(std::time::Instant::now());
    ops.running = Some(what);
    vec![command]
}

/// A line of the running apply or delete.
fn log(state: &mut State, line: String) {
    state.fleet_ops.push(line);
    state.dirty = true;
}

/// The apply or delete ended: the fleets reload; a new fleet is selected (Enter opens
/// its panes).
fn done(state: &mut State, name: String, result: Result<String, String>) -> Vec<Command> {
    let what = state.fleet_ops.running.take().unwrap_or_default();
    match &result {
        Ok(summary) => {
            // The log's last line already says how it ended (the shared lifecycle's).
            state.status = Some(StatusMessage {
                text: summary.clone(),
                tone: Tone::Pass,
            });
            if what.starts_with("apply") {
                state.fleet_selected = Some(name.clone());
            }
        }
        Err(e) => {
            state.fleet_ops.push(format!("failed: {e}"));
            state.status = Some(StatusMessage {
                text: format!("{what} failed: {}", e.lines().next().unwrap_or("")),
                tone: Tone::Fail,
            });
        }
    }
    let deleted = what.starts_with("delete") && result.is_ok();
    state.fleet_ops.outcome = Some(result);
    state.dirty = true;
    let mut commands = vec![Command::LoadFleets];
    // A deleted fleet's panes go with it: no shells left under a fleet the list lacks.
    if deleted && state.panes.close_fleet(&name) {
        commands.push(Command::ClosePanesOf(name));
    }
    commands
}

/// The plan for an apply came back: ask.
fn planned(state: &mut State, plan: Result<Box<Confirm>, String>) {
    state.dirty = true;
    match plan {
        Ok(c) if matches!(state.overlay, Overlay::None) => {
            state.status = None;
            state.overlay = Overlay::FleetConfirm(c);
        }
        Ok(c) => state.questions.push_back(Overlay::FleetConfirm(c)),
        Err(e) => {
            state.status = Some(StatusMessage {
                text: format!("cannot plan: {}", e.lines().next().unwrap_or("")),
                tone: Tone::Fail,
            });
            state.fleet_ops.outcome = Some(Err(e.clone()));
            state.fleet_ops.log.clear();
            state.fleet_ops.push(format!("plan failed: {e}"));
        }
    }
}

/// Open an existing fleet file in the editor (the Fleets view's `e`).
pub fn open_editor(state: &mut State, path: String, text: String) {
    state.editor = Some(FleetEditor::new(path, &text, Some(text.clone())));
}

/// Text pasted into the open editor.
pub fn editor_paste(state: &mut State, text: &str) {
    if let Some(e) = state.editor.as_mut() {
        e.input.insert_str(text);
    }
}

/// A key in the fleet-file editor: esc closes, ctrl-s writes, the rest edits.
pub fn editor_key(state: &mut State, key: KeyEvent) -> Vec<Command> {
    state.dirty = true;
    let action = state.keymap.lookup(Context::Editor, &key);
    let Some(editor) = state.editor.as_mut() else {
        return vec![];
    };
    match action {
        Some(Action::Close) => {
            if editor.changed() {
                state.overlay = Overlay::Ask(Ask {
                    what: AskFor::DiscardEdits,
                    title: format!("Discard changes to {}?", editor.path),
                    lines: vec!["The editor has changes that are not written (ctrl-s writes them).".into()],
                });
            } else {
                state.editor = None;
            }
            vec![]
        }
        Some(Action::Confirm) => {
            editor.validate();
            if let Some(p) = &editor.problem {
                state.status = Some(StatusMessage {
                    text: format!("not written: {p}"),
                    tone: Tone::Fail,
                });
                return vec![];
            }
            let text = editor.input.lines().join("\n") + "\n";
            let path = editor.path.clone();
            let original = editor.original.clone();
            state.editor = None;
            match original {
                None => vec![Command::WriteFile { path, text }],
                Some(original) => vec![Command::SaveFile { path, text, original }],
            }
        }
        _ => {
            if editor.input.input(key) {
                editor.validate();
            }
            vec![]
        }
    }
}
