//! Input: a key goes to the innermost layer's context (a pane, copy mode, an editor, a
//! question, a text entry, else the view and the shell's global keys); the mouse picks
//! tabs and tiles and its wheel scrolls; a paste goes where typing would.

use super::act::act;
use super::{command, filter, overlay, palette};
use crate::tui::action::{Action, Context};
use crate::tui::state::{Command, Overlay, Secret, State, View};
use crate::tui::{fleets, nccl, panes};
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use tui_textarea::TextArea;

/// A key, in the innermost open layer's context.
pub fn key(state: &mut State, key: KeyEvent) -> Vec<Command> {
    if key.kind == KeyEventKind::Release {
        return vec![];
    }
    let ctx = overlay::context(state);
    let action = state.keymap.lookup(ctx, &key);
    match (ctx, action) {
        (Context::Pane, _) => panes::key(state, key),
        (Context::Copy, _) => panes::copy_key(state, key),
        (Context::Editor, _) if state.view == View::Nccl => nccl::dialog_key(state, key),
        (Context::Editor, _) => fleets::editor_key(state, key),
        (Context::Confirmation, Some(a)) if matches!(state.overlay, Overlay::Ask(_)) => {
            overlay::answer_ask(state, a)
        }
        (Context::Confirmation, Some(a)) => {
            let commands = fleets::answer(state, a);
            overlay::next_question(state);
            commands
        }
        (Context::Question, Some(a)) => overlay::answer_host_key(state, a),
        (Context::Input, Some(a)) => input_action(state, a),
        (Context::Input, None) => {
            input_text(state, key);
            vec![]
        }
        (_, Some(a)) => {
            state.dirty = true;
            let had_status = ctx == Context::Global && state.status.take().is_some();
            let commands = act(state, a);
            state.dirty |= had_status;
            commands
        }
        (_, None) => vec![],
    }
}

/// The mouse: a click on a tab shows its view, on a pane's tile focuses it; the wheel
/// scrolls what j / k move (a list, a log, the help) when the pointer is over it, and
/// nothing over the tab bar, the status line or another panel (a chart, a `d` panel).
/// Only with nothing over the view, except the wheel in the help and the message history.
pub fn mouse(state: &mut State, m: crossterm::event::MouseEvent) -> Vec<Command> {
    use crossterm::event::{MouseButton, MouseEventKind};
    let scrollable = matches!(state.overlay, Overlay::Help { .. } | Overlay::Messages { .. });
    match m.kind {
        MouseEventKind::ScrollUp | MouseEventKind::ScrollDown
            if state.view == View::Panes && matches!(state.overlay, Overlay::None) =>
        {
            panes::wheel(state, m.column, m.row, m.kind == MouseEventKind::ScrollUp)
        }
        MouseEventKind::ScrollUp | MouseEventKind::ScrollDown
            if scrollable
                || (matches!(state.overlay, Overlay::None) && overlay::context(state) == Context::Global) =>
        {
            if !scrollable && !over_list(state, m.column, m.row) {
                return vec![];
            }
            let up = m.kind == MouseEventKind::ScrollUp;
            let mut out = vec![];
            for _ in 0..3 {
                out.extend(act(state, if up { Action::Up } else { Action::Down }));
            }
            state.dirty = true;
            out
        }
        MouseEventKind::Down(MouseButton::Left) if matches!(state.overlay, Overlay::None) => {
            if m.row == 0 {
                if let Some(v) = crate::tui::widgets::tabs::tab_at(m.column, state.size.0, state.view) {
                    state.dirty = true;
                    return act(state, view_action(v));
                }
                return vec![];
            }
            if state.view == View::Panes && state.panes.copy.is_none() {
                let g = panes::layout(state);
                let hit = g.cells.iter().find(|(_, r)| {
                    m.column >= r.x && m.column < r.x + r.width && m.row >= r.y && m.row < r.y + r.height
                });
                if let Some(&(i, _)) = hit {
                    state.panes.focus = i;
                    state.dirty = true;
                }
            }
            vec![]
        }
        _ => vec![],
    }
}

/// Whether cell (`x`, `y`) is over what the wheel scrolls in the view shown (each view
/// says where its list or log is).
fn over_list(state: &State, x: u16, y: u16) -> bool {
    let body = panes::body(state.size);
    let a = match state.view {
        View::Offers => crate::tui::offers::view::wheel_area(state, body),
        View::Fleets => fleets::view::wheel_area(state, body),
        View::Nodes => crate::tui::nodes::view::wheel_area(state, body),
        View::Nccl => nccl::view::wheel_area(state, body),
        View::Jobs => crate::tui::jobs::view::wheel_area(state, body),
        _ => body,
    };
    x >= a.x && x < a.x + a.width && y >= a.y && y < a.y + a.height
}

/// The action that shows view `v` (its number key).
fn view_action(v: View) -> Action {
    match v {
        View::Offers => Action::ViewOffers,
        View::Fleets => Action::ViewFleets,
        View::Nodes => Action::ViewNodes,
        View::Panes => Action::ViewPanes,
        View::Nccl => Action::ViewNccl,
        View::Jobs => Action::ViewJobs,
        View::Nics => Action::ViewNics,
        View::Doctor => Action::ViewDoctor,
    }
}

/// Pasted text: into the shells of the panes typed into, the open editor, or the
/// palette or filter entry (on one line).
pub fn paste(state: &mut State, text: String) -> Vec<Command> {
    match overlay::context(state) {
        Context::Pane => return panes::paste(state, &text),
        Context::Editor => {
            if let Some(d) = state.nccl.dialog.as_mut().filter(|_| state.view == View::Nccl) {
                d.paste(&text);
            } else {
                fleets::editor_paste(state, &text);
            }
        }
        _ => {
            let text = text.replace(['\r', '\n'], " ");
            match &mut state.overlay {
                Overlay::Palette(p) => {
                    p.input.insert_str(&text);
                    palette::refresh_candidates(state);
                }
                Overlay::Filter(f) => {
                    f.input.insert_str(&text);
                    filter::sync_filter(state);
                }
                _ => return vec![],
            }
        }
    }
    state.dirty = true;
    vec![]
}

fn input_text(state: &mut State, key: KeyEvent) {
    let changed = match &mut state.overlay {
        Overlay::Palette(p) => single_line_input(&mut p.input, key),
        Overlay::Filter(f) => single_line_input(&mut f.input, key),
        // A passphrase changes nothing else (and is never echoed anywhere).
        Overlay::Passphrase { input, .. } => {
            single_line_input(input, key);
            false
        }
        _ => false,
    };
    // Cursor movement changes the screen too.
    state.dirty = true;
    if changed {
        match state.overlay {
            Overlay::Palette(_) => palette::refresh_candidates(state),
            Overlay::Filter(_) => filter::sync_filter(state),
            _ => {}
        }
    }
}

/// Feed a key to a one-line text area; returns whether the text changed. Readline's keys
/// work: ctrl-a / ctrl-e to the start / end, ctrl-w deletes the word before the cursor
/// (tui-textarea's own), and ctrl-u deletes to the start (tui-textarea would undo).
fn single_line_input(input: &mut TextArea<'static>, key: KeyEvent) -> bool {
    if key.code == KeyCode::Char('u') && key.modifiers == KeyModifiers::CONTROL {
        return input.delete_line_by_head();
    }
    let changed = input.input(key);
    if input.lines().len() > 1 {
        let joined = input.lines().join(" ");
        *input = TextArea::new(vec![joined]);
        input.move_cursor(tui_textarea::CursorMove::End);
    }
    changed
}

fn input_action(state: &mut State, action: Action) -> Vec<Command> {
    state.dirty = true;
    let overlay = std::mem::take(&mut state.overlay);
    match overlay {
        Overlay::Filter(f) => {
            match action {
                Action::Close => {
                    let i = state.view.index();
                    state.filters[i] = f.previous;
                    filter::filter_changed(state);
                    // Back where it was before the preview moved it.
                    match (state.view, f.selected) {
                        (View::Offers, Some(id)) => state.offers.select_id(&id),
                        (View::Fleets, Some(name)) if state.fleets.iter().any(|r| r.name == name) => {
                            state.fleet_selected = Some(name)
                        }
                        _ => {}
                    }
                }
                // A query with an error is never applied: the entry stays open with the
                // error and its caret until it is fixed (or Esc puts the last one back).
                Action::Confirm if state.view == View::Offers && state.offers.error.is_some() => {
                    state.overlay = Overlay::Filter(f)
                }
                Action::Confirm => {}
                _ => state.overlay = Overlay::Filter(f),
            }
            vec![]
        }
        Overlay::Passphrase { id, key, input } => match action {
            Action::Close => {
                overlay::next_question(state);
                vec![Command::AnswerPassphrase { id, passphrase: None }]
            }
            Action::Confirm => {
                let text = input.lines().join("");
                overlay::next_question(state);
                vec![Command::AnswerPassphrase {
                    id,
                    passphrase: Some(Secret(text)),
                }]
            }
            _ => {
                state.overlay = Overlay::Passphrase { id, key, input };
                vec![]
            }
        },
        Overlay::Palette(mut p) => match action {
            Action::Close => vec![],
            Action::Confirm => {
                let typed = p.input.lines().join(" ").trim().to_string();
                let line = if typed.is_empty() {
                    p.selected
                        .and_then(|i| p.candidates.get(i))
                        .map(|c| c.line.clone())
                        .unwrap_or_default()
                } else {
                    typed
                };
                command::run_command(state, &line)
            }
            Action::Complete | Action::Down => {
                palette::cycle(&mut p, true);
                state.overlay = Overlay::Palette(p);
                vec![]
            }
            Action::CompletePrev | Action::Up => {
                palette::cycle(&mut p, false);
                state.overlay = Overlay::Palette(p);
                vec![]
            }
            _ => {
                state.overlay = Overlay::Palette(p);
                vec![]
            }
        },
        other => {
            state.overlay = other;
            vec![]
        }
    }
}
