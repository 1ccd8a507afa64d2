//! The Panes view's actions and keys: typing into panes, broadcast, zoom and pages,
//! copy mode, paste, finding a node's pane, and telling each pane its size. Moved from
//! mod.rs, so that mod.rs is the view's state and layout alone.

use super::*;
use crate::tui::action::{Action, Context};
use crate::tui::state::{Command, State, StatusMessage};
use crate::tui::theme::Tone;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

pub use crate::tui::shell::view::body;

/// The grid of the open panes at the state's terminal size.
pub fn layout(state: &State) -> Grid {
    let p = &state.panes;
    grid(body(state.size), p.tiles.len(), p.zoom.then_some(p.focus), p.page)
}

/// `/` in the Panes view: focus the first pane whose node's name contains `text` (any
/// case), on its page, so a fleet of a thousand panes is paged to by name. The grid keeps
/// every pane (broadcast still reaches all of them).
pub fn find(state: &mut State, text: &str) {
    let t = text.trim().to_lowercase();
    if t.is_empty() {
        return;
    }
    match state
        .panes
        .tiles
        .iter()
        .position(|p| p.node.to_lowercase().contains(&t))
    {
        Some(i) => {
            state.panes.zoom = false;
            state.panes.focus = i;
            let per_page = layout(state).per_page.max(1);
            state.panes.page = i / per_page;
        }
        None => {
            state.status = Some(StatusMessage {
                text: format!("no pane's node matches `{text}`"),
                tone: Tone::Warn,
            });
        }
    }
}

/// Tell every shown pane whose tile changed size its new size.
pub fn sync_sizes(state: &mut State) -> Vec<Command> {
    let g = layout(state);
    let mut out = vec![];
    for (idx, rect) in g.cells {
        let r = inner(rect);
        let size = (r.width.max(1), r.height.max(1));
        let tile = &mut state.panes.tiles[idx];
        if tile.size != size {
            tile.size = size;
            out.push(Command::PaneResize {
                id: tile.id,
                cols: size.0,
                rows: size.1,
            });
        }
    }
    out
}

/// Rows a notch of the wheel scrolls, as in tmux and most terminals.
pub const WHEEL_ROWS: usize = 3;

/// The wheel over the Panes view, as tmux's `WheelUpPane`: the pane under the pointer
/// scrolls into its scrollback (its lines wrapped to the pane), [`WHEEL_ROWS`] a notch,
/// and is live again when scrolled back to the bottom; the focus stays where it is. In
/// copy mode over its pane the cursor moves; a full-screen program gets arrow keys (as
/// xterm's alternate scroll). Over no pane the wheel does nothing.
pub fn wheel(state: &mut State, column: u16, row: u16, up: bool) -> Vec<Command> {
    let g = layout(state);
    let hit = g
        .cells
        .iter()
        .find(|(_, r)| column >= r.x && column < r.right() && row >= r.y && row < r.bottom());
    let Some(&(idx, rect)) = hit else {
        return vec![];
    };
    state.dirty = true;
    let p = &mut state.panes;
    let id = p.tiles[idx].id;
    if let Some(c) = p.copy.as_mut().filter(|c| c.pane == id) {
        let last = c.lines.len().saturating_sub(1);
        c.cursor = if up {
            c.cursor.saturating_sub(WHEEL_ROWS)
        } else {
            (c.cursor + WHEEL_ROWS).min(last)
        };
        return vec![];
    }
    let area = inner(rect);
    let (alternate, app_cursor, total) = {
        let term = p.tiles[idx].screen.read().unwrap_or_else(|e| e.into_inner());
        let screen = term.screen();
        let total = term.scrolled_rows(area.width, area.height, 0).1;
        (screen.alternate_screen(), screen.application_cursor(), total)
    };
    if alternate {
        let key = KeyEvent::new(if up { KeyCode::Up } else { KeyCode::Down }, KeyModifiers::NONE);
        let bytes = crate::term::key_to_bytes(&key, app_cursor).repeat(WHEEL_ROWS);
        return vec![Command::PaneInput { ids: vec![id], bytes }];
    }
    let max = total.saturating_sub(usize::from(area.height));
    let now = p.scrolled.get(&id).copied().unwrap_or(0);
    let next = if up {
        (now + WHEEL_ROWS).min(max)
    } else {
        now.saturating_sub(WHEEL_ROWS)
    };
    if next == 0 {
        p.scrolled.remove(&id);
    } else {
        p.scrolled.insert(id, next);
    }
    vec![]
}

/// Global-context actions while the Panes view is shown. `None`: not a panes action.
pub fn act(state: &mut State, action: Action) -> Option<Vec<Command>> {
    if state.panes.tiles.is_empty() {
        return match action {
            Action::Select | Action::PaneInsert | Action::PaneZoom | Action::PaneMark | Action::PaneCopy => {
                state.status = Some(StatusMessage {
                    text: "no panes open: pick a fleet in Fleets (Enter) or :open NAME".into(),
                    tone: Tone::Warn,
                });
                Some(vec![])
            }
            _ => None,
        };
    }
    let g = layout(state);
    let p = &mut state.panes;
    let focused = p.tiles.get(p.focus).map(|t| t.id);
    let cmds = match action {
        Action::Up => {
            p.move_focus(0, -1, g.columns, g.per_page);
            vec![]
        }
        Action::Down => {
            p.move_focus(0, 1, g.columns, g.per_page);
            vec![]
        }
        Action::Left => {
            p.move_focus(-1, 0, g.columns, g.per_page);
            vec![]
        }
        Action::Right => {
            p.move_focus(1, 0, g.columns, g.per_page);
            vec![]
        }
        Action::PageDown if g.pages > 1 => {
            p.page = (p.page + 1).min(g.pages - 1);
            p.focus = (p.page * g.per_page).min(p.tiles.len() - 1);
            vec![]
        }
        Action::PageUp if g.pages > 1 => {
            p.page = p.page.saturating_sub(1);
            p.focus = p.page * g.per_page;
            vec![]
        }
        Action::Top => {
            p.focus = 0;
            p.page = 0;
            vec![]
        }
        Action::Bottom => {
            p.focus = p.tiles.len() - 1;
            p.page = p.focus / g.per_page.max(1);
            vec![]
        }
        Action::Select | Action::PaneInsert => {
            // Broadcast into panes that are not on screen (zoomed, or on another page)
            // asks first: keys must not surprise.
            let hidden = p.hidden_targets(&g);
            if hidden.is_empty() {
                p.insert = true;
            } else {
                let targets = p.targets().len();
                let why = if p.zoom { "zoomed" } else { "on other pages" };
                let lines = vec![
                    format!(
                        "Broadcast ({}) sends keys to {}; {} not on screen ({why}): {}.",
                        p.broadcast.label(),
                        crate::words::plural(targets, "pane"),
                        hidden.len(),
                        hidden.join(", ")
                    ),
                    format!("Type into all {targets}? (b turns broadcast off; z unzooms)"),
                ];
                state.overlay = crate::tui::state::Overlay::Ask(crate::tui::state::Ask {
                    what: crate::tui::state::AskFor::TypeIntoHidden,
                    title: "Type into panes not on screen?".into(),
                    lines,
                });
            }
            vec![]
        }
        Action::PaneZoom => {
            p.zoom = !p.zoom;
            vec![]
        }
        Action::PaneMark => {
            if let Some(t) = p.tiles.get_mut(p.focus) {
                t.marked = !t.marked;
            }
            vec![]
        }
        Action::PaneBroadcast => {
            p.broadcast = p.broadcast.next();
            let text = format!("broadcast: {}", p.broadcast.label());
            state.status = Some(StatusMessage {
                text,
                tone: Tone::Info,
            });
            vec![]
        }
        Action::Reload => focused.map(Command::PaneRestart).into_iter().collect(),
        Action::PaneCopy => focused.map(Command::SnapshotPane).into_iter().collect(),
        _ => return None,
    };
    let mut cmds = cmds;
    cmds.extend(sync_sizes(state));
    Some(cmds)
}

/// A key while typing into panes: Ctrl-] (the `pane` context's close) leaves; anything
/// else becomes terminal bytes for the target panes.
pub fn key(state: &mut State, key: KeyEvent) -> Vec<Command> {
    if state.keymap.lookup(Context::Pane, &key) == Some(Action::Close) {
        state.panes.insert = false;
        state.dirty = true;
        return vec![];
    }
    let p = &state.panes;
    let app_cursor = p
        .tiles
        .get(p.focus)
        .map(|t| {
            t.screen
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .screen()
                .application_cursor()
        })
        .unwrap_or(false);
    let bytes = crate::term::key_to_bytes(&key, app_cursor);
    if bytes.is_empty() {
        return vec![];
    }
    let ids = p.targets();
    if ids.is_empty() {
        return vec![];
    }
    // Typing into a scrolled pane shows its bottom again, as a terminal does.
    for id in &ids {
        state.panes.scrolled.remove(id);
    }
    vec![Command::PaneInput { ids, bytes }]
}

/// Pasted text while typing into panes, bracketed when the program asked for it.
pub fn paste(state: &mut State, text: &str) -> Vec<Command> {
    let p = &state.panes;
    let ids = p.targets();
    if ids.is_empty() {
        return vec![];
    }
    let bracketed = p.tiles.get(p.focus).is_some_and(|t| {
        t.screen
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .screen()
            .bracketed_paste()
    });
    let bytes = if bracketed {
        format!("\x1b[200~{text}\x1b[201~").into_bytes()
    } else {
        text.replace('\n', "\r").into_bytes()
    };
    vec![Command::PaneInput { ids, bytes }]
}

/// A key in copy mode.
pub fn copy_key(state: &mut State, key: KeyEvent) -> Vec<Command> {
    state.dirty = true;
    let page = usize::from(state.size.1.saturating_sub(4)).max(1);
    let Some(c) = state.panes.copy.as_mut() else {
        return vec![];
    };
    if let Some(typing) = c.typing.as_mut() {
        match key.code {
            KeyCode::Esc => c.typing = None,
            KeyCode::Enter => {
                c.search = c.typing.take();
                if !c.find(true) {
                    let text = format!("not found: {}", c.search.clone().unwrap_or_default());
                    state.status = Some(StatusMessage {
                        text,
                        tone: Tone::Warn,
                    });
                }
            }
            KeyCode::Backspace => {
                typing.pop();
            }
            KeyCode::Char(ch) if !key.modifiers.contains(KeyModifiers::CONTROL) => typing.push(ch),
            _ => {}
        }
        return vec![];
    }
    let last = c.lines.len().saturating_sub(1);
    match state.keymap.lookup(Context::Copy, &key) {
        Some(Action::Close) => state.panes.copy = None,
        Some(Action::Up) => c.cursor = c.cursor.saturating_sub(1),
        Some(Action::Down) => c.cursor = (c.cursor + 1).min(last),
        Some(Action::PageUp) => c.cursor = c.cursor.saturating_sub(page),
        Some(Action::PageDown) => c.cursor = (c.cursor + page).min(last),
        Some(Action::Top) => c.cursor = 0,
        Some(Action::Bottom) => c.cursor = last,
        Some(Action::Filter) => c.typing = Some(String::new()),
        Some(Action::SearchNext) => {
            c.find(true);
        }
        Some(Action::SearchPrev) => {
            c.find(false);
        }
        Some(Action::SelectStart) => c.anchor = if c.anchor.is_some() { None } else { Some(c.cursor) },
        Some(Action::Yank) => {
            let text = c.selected_text();
            let n = c.selection().count();
            state.panes.copy = None;
            state.status = Some(StatusMessage {
                text: format!(
                    "copied {n} line{} to your clipboard (OSC 52)",
                    if n == 1 { "" } else { "s" }
                ),
                tone: Tone::Info,
            });
            return vec![Command::Yank(text)];
        }
        _ => state.dirty = false,
    }
    vec![]
}
