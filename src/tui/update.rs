//! The one place the cockpit's state changes: `update(&mut State, Msg) -> Vec<Command>`.
//! No I/O, no clock, no terminal: tests drive whole flows by feeding messages.

use super::action::{Action, Context};
use super::help::view as help;
use super::state::{
    Ask, AskFor, Candidate, Command, FilterEntry, Msg, Overlay, Palette, State, StatusMessage, View,
};
use super::theme::Tone;
use super::{fleets, jobs, nccl, nics, offers, panes};
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use tui_textarea::TextArea;

/// Commands the palette knows, besides the view names: (name, argument, what it does).
pub const PALETTE_COMMANDS: &[(&str, &str, &str)] = &[
    ("help", "", "show the key bindings"),
    (
        "open",
        "FLEET [SEL]",
        "a pane on every node (GKE: every pod SEL picks)",
    ),
    ("close", "", "close the open panes"),
    ("run", "FILE", "start the job of a job file on its fleet"),
    (
        "apply",
        "FILE",
        "apply a fleet file: its plan and cost per hour, then confirm",
    ),
    ("filter", "TEXT", "filter the current table"),
    ("nofilter", "", "clear the current table's filter"),
    ("theme", "NAME", "switch the colour theme"),
    ("messages", "", "every status message of this session, whole"),
    ("quit", "", "quit flightdeck (also :q)"),
];

/// Apply `msg` to the state: the one mutation point. A new status message also goes
/// into the message history (`M`), where a long one can be read whole.
pub fn update(state: &mut State, msg: Msg) -> Vec<Command> {
    let before = state.status.clone();
    let mut commands = apply(state, msg);
    commands.extend(jobs::poll(state));
    if state.status != before {
        if let Some(s) = &state.status {
            if state.messages.len() == super::state::MESSAGES_KEPT {
                state.messages.pop_front();
            }
            state.messages.push_back(s.clone());
        }
    }
    commands
}

fn apply(state: &mut State, msg: Msg) -> Vec<Command> {
    match msg {
        Msg::Key(key) => {
            if key.kind == KeyEventKind::Release {
                return vec![];
            }
            on_key(state, key)
        }
        Msg::Mouse(m) => mouse(state, m),
        Msg::Paste(text) if context(state) == Context::Pane => panes::paste(state, &text),
        Msg::Paste(text) if context(state) == Context::Editor => {
            if let Some(d) = state.nccl.dialog.as_mut().filter(|_| state.view == View::Nccl) {
                d.paste(&text);
            } else if let Some(e) = state.offers.editor.as_mut() {
                e.input.insert_str(&text);
            }
            state.dirty = true;
            vec![]
        }
        Msg::Paste(text) => {
            let text = text.replace(['\r', '\n'], " ");
            match &mut state.overlay {
                Overlay::Palette(p) => {
                    p.input.insert_str(&text);
                    refresh_candidates(state);
                }
                Overlay::Filter(f) => {
                    f.input.insert_str(&text);
                    sync_filter(state);
                }
                _ => return vec![],
            }
            state.dirty = true;
            vec![]
        }
        Msg::Resize(w, h) => {
            state.size = (w, h);
            state.dirty = true;
            panes::sync_sizes(state)
        }
        Msg::Fleets(result) => {
            // A reload that finds what is shown draws nothing (the state watcher reloads
            // after every write, also the cockpit's own).
            let same = match &result {
                Ok(list) => *list == state.fleets && state.fleets_error.is_none(),
                Err(e) => state.fleets_error.as_ref() == Some(e),
            };
            if same {
                return vec![];
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
            fleets::fix_selection(state);
            state.dirty = true;
            vec![]
        }
        Msg::Panes(m) => panes::update(state, m),
        Msg::HostKeyQuestion {
            id,
            host,
            fingerprint,
        } => {
            state.questions.push_back(Overlay::HostKey {
                id,
                host,
                fingerprint,
            });
            next_question(state);
            vec![]
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
            vec![]
        }
        Msg::OffersRefreshed(result) => {
            state.status = Some(match result {
                Ok((catalog, report)) => {
                    state.offers.catalog = std::sync::Arc::new(*catalog);
                    offers::sync_filter(state);
                    StatusMessage {
                        text: format!("prices refreshed: {report}"),
                        tone: Tone::Pass,
                    }
                }
                Err(e) => StatusMessage {
                    text: format!("live refresh failed (the catalog shown stays): {e}"),
                    tone: Tone::Fail,
                },
            });
            state.dirty = true;
            vec![]
        }
        Msg::Nics(m) => nics::update(state, m),
        Msg::Doctor(m) => super::doctor::update(state, m),
        Msg::Nccl(m) => nccl::update(state, m),
        Msg::StateChanged => vec![Command::ReloadState],
        Msg::GkeSnapshot { fleet, result } => {
            let shown = state.view == View::Nodes && fleets::current(state).is_some_and(|f| f.name == fleet);
            state.gke.insert(fleet, result);
            state.dirty |= shown;
            vec![]
        }
        Msg::Jobs(m) => super::jobs::update(state, m),
        Msg::FleetPlanned(plan) => {
            fleets::planned(state, plan);
            vec![]
        }
        Msg::FleetLog(line) => {
            fleets::log(state, line);
            vec![]
        }
        Msg::FleetDone { name, result } => fleets::done(state, name, result),
        Msg::FileOpened(result) => {
            state.dirty = true;
            match result {
                Ok((path, text)) => offers::open_editor(state, path, text),
                Err(e) => {
                    state.status = Some(StatusMessage {
                        text: e,
                        tone: Tone::Fail,
                    })
                }
            }
            vec![]
        }
        Msg::PassphraseQuestion { id, key } => {
            let mut input = TextArea::default();
            input.set_mask_char('•');
            state.questions.push_back(Overlay::Passphrase { id, key, input });
            next_question(state);
            vec![]
        }
        Msg::Resumed => {
            state.dirty = true;
            vec![]
        }
        Msg::ThemeLoaded(result) => {
            state.status = Some(match result {
                Ok(name) => {
                    state.theme = name.clone();
                    StatusMessage {
                        text: format!("theme: {name}"),
                        tone: Tone::Info,
                    }
                }
                Err(e) => StatusMessage {
                    text: e,
                    tone: Tone::Fail,
                },
            });
            state.dirty = true;
            vec![]
        }
    }
}

/// Show the next queued question when nothing else is asking.
/// The mouse: a click on a tab shows its view, on a pane's tile focuses it; the wheel
/// scrolls what j / k move (a list, a log, the help). Only with nothing over the view,
/// except the wheel in the help and the message history.
fn mouse(state: &mut State, m: crossterm::event::MouseEvent) -> Vec<Command> {
    use crossterm::event::{MouseButton, MouseEventKind};
    let scrollable = matches!(state.overlay, Overlay::Help { .. } | Overlay::Messages { .. });
    match m.kind {
        MouseEventKind::ScrollUp | MouseEventKind::ScrollDown
            if scrollable
                || (matches!(state.overlay, Overlay::None) && context(state) == Context::Global) =>
        {
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
                if let Some(v) = super::widgets::tabs::tab_at(m.column, state.size.0, state.view) {
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

/// y or n (Esc) to an [`Overlay::Ask`].
fn answer_ask(state: &mut State, action: Action) -> Vec<Command> {
    let Overlay::Ask(ask) = std::mem::take(&mut state.overlay) else {
        return vec![];
    };
    state.dirty = true;
    let commands = match action {
        Action::Confirm => match ask.what {
            AskFor::TypeIntoHidden => {
                state.panes.insert = true;
                vec![]
            }
            AskFor::Quit => vec![Command::Quit],
            AskFor::DiscardEdits => {
                state.offers.editor = None;
                vec![]
            }
        },
        Action::Close => vec![],
        _ => {
            state.overlay = Overlay::Ask(ask);
            return vec![];
        }
    };
    next_question(state);
    commands
}

/// Quit, asking first while shells are open in panes.
fn quit(state: &mut State) -> Vec<Command> {
    let open: Vec<&str> = state
        .panes
        .tiles
        .iter()
        .filter(|t| matches!(t.state, crate::term::session::PaneState::Connected))
        .map(|t| t.node.as_str())
        .collect();
    if open.is_empty() {
        return vec![Command::Quit];
    }
    let shells = crate::words::plural(open.len(), "shell");
    state.overlay = Overlay::Ask(Ask {
        what: AskFor::Quit,
        title: "Quit flightdeck?".into(),
        lines: vec![
            format!("{shells} open in panes ({}) end with it.", open.join(", ")),
            "Jobs and NCCL runs started from flightdeck go on without it.".into(),
        ],
    });
    vec![]
}

fn next_question(state: &mut State) {
    if matches!(state.overlay, Overlay::None) {
        if let Some(q) = state.questions.pop_front() {
            state.overlay = q;
            state.dirty = true;
        }
    }
}

/// Which key context is active: the innermost open layer decides.
pub fn context(state: &State) -> Context {
    match state.overlay {
        Overlay::None if state.view == View::Panes && state.panes.copy.is_some() => Context::Copy,
        Overlay::None if state.view == View::Panes && state.panes.insert => Context::Pane,
        Overlay::None
            if matches!(state.view, View::Offers | View::Fleets) && state.offers.editor.is_some() =>
        {
            Context::Editor
        }
        Overlay::None if state.view == View::Nccl && state.nccl.dialog.is_some() => Context::Editor,
        Overlay::None => Context::Global,
        Overlay::Help { .. } | Overlay::Messages { .. } => Context::Help,
        Overlay::Palette(_) | Overlay::Filter(_) | Overlay::Passphrase { .. } => Context::Input,
        Overlay::HostKey { .. } => Context::Question,
        Overlay::FleetConfirm(_) | Overlay::Ask(_) => Context::Confirmation,
    }
}

fn on_key(state: &mut State, key: KeyEvent) -> Vec<Command> {
    let ctx = context(state);
    let action = state.keymap.lookup(ctx, &key);
    match (ctx, action) {
        (Context::Pane, _) => panes::key(state, key),
        (Context::Copy, _) => panes::copy_key(state, key),
        (Context::Editor, _) if state.view == View::Nccl => nccl::dialog_key(state, key),
        (Context::Editor, _) => offers::editor_key(state, key),
        (Context::Confirmation, Some(a)) if matches!(state.overlay, Overlay::Ask(_)) => answer_ask(state, a),
        (Context::Confirmation, Some(a)) => {
            let commands = fleets::answer(state, a);
            next_question(state);
            commands
        }
        (Context::Question, Some(a)) => {
            let Overlay::HostKey { id, .. } = std::mem::take(&mut state.overlay) else {
                return vec![];
            };
            state.dirty = true;
            next_question(state);
            vec![Command::AnswerHostKey {
                id,
                accept: a != Action::Close,
                all: a == Action::AcceptAll,
            }]
        }
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

/// Carry out an action of the global or help context.
pub fn act(state: &mut State, action: Action) -> Vec<Command> {
    let help_page = usize::from(state.size.1.saturating_sub(4)).max(1);
    let scrollable = match &state.overlay {
        Overlay::Help { .. } => Some(help::lines(&state.keymap).len()),
        Overlay::Messages { .. } => Some(state.messages.len()),
        _ => None,
    };
    if let (Some(len), Overlay::Help { scroll } | Overlay::Messages { scroll }) =
        (scrollable, &mut state.overlay)
    {
        let max = len.saturating_sub(1);
        match action {
            Action::Close => state.overlay = Overlay::None,
            Action::Quit => {
                state.overlay = Overlay::None;
                return quit(state);
            }
            Action::Up => *scroll = scroll.saturating_sub(1),
            Action::Down => *scroll = (*scroll + 1).min(max),
            Action::Top => *scroll = 0,
            Action::Bottom => *scroll = max,
            Action::PageUp => *scroll = scroll.saturating_sub(help_page),
            Action::PageDown => *scroll = (*scroll + help_page).min(max),
            _ => {}
        }
        return vec![];
    }
    let view_specific = match state.view {
        View::Panes => panes::act(state, action),
        View::Fleets => fleets::act(state, action),
        View::Nodes => fleets::nodes_act(state, action),
        View::Offers => offers::act(state, action),
        View::Nccl => nccl::act(state, action),
        View::Nics => nics::act(state, action),
        View::Jobs => jobs::act(state, action),
        View::Doctor => super::doctor::act(state, action),
    };
    if let Some(commands) = view_specific {
        return commands;
    }
    match action {
        Action::Quit => return quit(state),
        Action::Suspend if !state.job_control => {
            state.status = Some(StatusMessage {
                text: "ctrl-z: no shell to return to (flightdeck was not started from a shell with job control); q quits".into(),
                tone: Tone::Warn,
            });
        }
        Action::Suspend => return vec![Command::Suspend],
        Action::Help => state.overlay = Overlay::Help { scroll: 0 },
        // Opened at the newest messages.
        Action::Messages => {
            state.overlay = Overlay::Messages {
                scroll: state.messages.len().saturating_sub(1),
            }
        }
        Action::Palette => {
            state.overlay = Overlay::Palette(Palette {
                input: TextArea::default(),
                candidates: vec![],
                selected: None,
            });
            refresh_candidates(state);
        }
        Action::Filter => open_filter(state),
        Action::ClearFilter => {
            let i = state.view.index();
            state.filters[i].clear();
            filter_changed(state);
        }
        Action::NextView => state.view = state.view.next(),
        Action::PrevView => state.view = state.view.prev(),
        Action::ViewOffers => state.view = View::Offers,
        Action::ViewFleets => state.view = View::Fleets,
        Action::ViewNodes => state.view = View::Nodes,
        Action::ViewPanes => state.view = View::Panes,
        Action::ViewNccl => state.view = View::Nccl,
        Action::ViewJobs => state.view = View::Jobs,
        Action::ViewNics => state.view = View::Nics,
        Action::ViewDoctor => state.view = View::Doctor,
        // Movement belongs to the views' tables; none of the views has rows yet.
        Action::Up | Action::Down | Action::Top | Action::Bottom | Action::PageUp | Action::PageDown => {
            state.dirty = false;
        }
        Action::Left
        | Action::Right
        | Action::Select
        | Action::Reload
        | Action::PaneInsert
        | Action::PaneZoom
        | Action::PaneMark
        | Action::PaneBroadcast
        | Action::PaneCopy
        | Action::Detail
        | Action::FleetApply
        | Action::FleetDelete
        | Action::FleetEdit
        | Action::Sort
        | Action::SortReverse
        | Action::Pricing
        | Action::WriteFleet
        | Action::JobStop
        | Action::Compare
        | Action::NicsMode
        | Action::NextItem
        | Action::PrevItem
        | Action::NcclRun => state.dirty = false,
        Action::Close
        | Action::Confirm
        | Action::Complete
        | Action::CompletePrev
        | Action::SearchNext
        | Action::SearchPrev
        | Action::SelectStart
        | Action::Yank
        | Action::AcceptAll
        | Action::NextField
        | Action::PrevField => {}
    }
    vec![]
}

/// `/`: the filter entry of the view's table (in the Panes view, it finds a node's pane
/// and its page instead: see [`filter_changed`]).
fn open_filter(state: &mut State) {
    let previous = state.filter().to_string();
    let mut input = TextArea::new(vec![previous.clone()]);
    input.move_cursor(tui_textarea::CursorMove::End);
    state.overlay = Overlay::Filter(FilterEntry { input, previous });
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
            Overlay::Palette(_) => refresh_candidates(state),
            Overlay::Filter(_) => sync_filter(state),
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
                    filter_changed(state);
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
                next_question(state);
                vec![Command::AnswerPassphrase { id, passphrase: None }]
            }
            Action::Confirm => {
                let text = input.lines().join("");
                next_question(state);
                vec![Command::AnswerPassphrase {
                    id,
                    passphrase: Some(super::state::Secret(text)),
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
                run_command(state, &line)
            }
            Action::Complete | Action::Down => {
                cycle(&mut p, true);
                state.overlay = Overlay::Palette(p);
                vec![]
            }
            Action::CompletePrev | Action::Up => {
                cycle(&mut p, false);
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

/// Move the palette's selection and put the selected candidate into the entry.
fn cycle(p: &mut Palette, forward: bool) {
    let n = p.candidates.len();
    if n == 0 {
        return;
    }
    let next = match (p.selected, forward) {
        (None, true) => 0,
        (None, false) => n - 1,
        (Some(i), true) => (i + 1) % n,
        (Some(i), false) => (i + n - 1) % n,
    };
    p.selected = Some(next);
    let mut line = p.candidates[next].line.clone();
    if PALETTE_COMMANDS
        .iter()
        .any(|(name, arg, _)| *name == line && !arg.is_empty())
    {
        line.push(' ');
    }
    p.input = TextArea::new(vec![line]);
    p.input.move_cursor(tui_textarea::CursorMove::End);
}

fn sync_filter(state: &mut State) {
    if let Overlay::Filter(f) = &state.overlay {
        let text = f.input.lines().join(" ");
        let i = state.view.index();
        state.filters[i] = text;
    }
    filter_changed(state);
}

/// The current view's filter text changed: views that derive rows from it follow.
fn filter_changed(state: &mut State) {
    fleets::fix_selection(state);
    if state.view == View::Panes {
        let text = state.filter().to_string();
        panes::find(state, &text);
    }
    if state.view == View::Offers {
        offers::sync_filter(state);
    }
    if state.view == View::Nics {
        let filter = state.filter().to_string();
        state.nics.filter_changed(&filter);
    }
}

fn refresh_candidates(state: &mut State) {
    let list = if let Overlay::Palette(p) = &state.overlay {
        completions(state, &p.input.lines().join(" "))
    } else {
        return;
    };
    if let Overlay::Palette(p) = &mut state.overlay {
        p.candidates = list;
        p.selected = None;
    }
}

/// Completions of a partly typed palette line: command names, then theme names after
/// `theme `. Prefix matches come first, then names that merely contain the text.
pub fn completions(state: &State, typed: &str) -> Vec<Candidate> {
    let typed = typed.trim_start();
    if let Some(arg) = typed.strip_prefix("open ") {
        return rank(
            state.fleets.iter().map(|f| {
                (
                    format!("open {}", f.name),
                    f.name.clone(),
                    format!("{} fleet, {} nodes", f.backend, f.nodes.len()),
                )
            }),
            arg.trim(),
        );
    }
    for (cmd, what) in [("apply", "fleet file"), ("run", "job file")] {
        if let Some(arg) = typed.strip_prefix(cmd).and_then(|a| a.strip_prefix(' ')) {
            return path_candidates(cmd, arg.trim_start(), what);
        }
    }
    if let Some(arg) = typed.strip_prefix("theme ") {
        let arg = arg.trim();
        return rank(
            state
                .themes
                .iter()
                .map(|t| (format!("theme {t}"), t.clone(), format!("colour theme {t}"))),
            arg,
        );
    }
    let views = View::ALL.iter().map(|v| {
        (
            v.command().to_string(),
            v.command().to_string(),
            format!("go to the {} view", v.title()),
        )
    });
    let cmds = PALETTE_COMMANDS.iter().map(|(name, arg, about)| {
        let about = if arg.is_empty() {
            about.to_string()
        } else {
            format!("<{arg}> {about}")
        };
        (name.to_string(), name.to_string(), about)
    });
    rank(views.chain(cmds), typed.trim())
}

/// Paths for `:apply` and `:run`: the folders and YAML files in the folder typed so far
/// (relative to the working directory, `~/` for home) whose names start with what
/// follows its last `/`; folders end in `/`, so Tab goes on into them. Hidden entries
/// only when the name typed starts with a dot.
fn path_candidates(cmd: &str, arg: &str, what: &str) -> Vec<Candidate> {
    let (dir, prefix) = match arg.rfind('/') {
        Some(i) => (&arg[..=i], &arg[i + 1..]),
        None => ("", arg),
    };
    let on_disk = match dir.strip_prefix("~/") {
        Some(rest) => crate::paths::home_dir().map(|h| h.join(rest)),
        None if dir.is_empty() => Some(std::path::PathBuf::from(".")),
        None => Some(std::path::PathBuf::from(dir)),
    };
    let Some(Ok(entries)) = on_disk.map(std::fs::read_dir) else {
        return vec![];
    };
    let mut found: Vec<(bool, String)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.starts_with(prefix) || (name.starts_with('.') && !prefix.starts_with('.')) {
                return None;
            }
            let is_dir = e.path().is_dir();
            let yaml = name.ends_with(".yaml") || name.ends_with(".yml");
            (is_dir || yaml).then_some((is_dir, name))
        })
        .collect();
    // Files first (what the command takes), then folders, each by name.
    found.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    found
        .into_iter()
        .take(64)
        .map(|(is_dir, name)| Candidate {
            line: format!("{cmd} {dir}{name}{}", if is_dir { "/" } else { "" }),
            about: if is_dir {
                "folder".to_string()
            } else {
                what.to_string()
            },
        })
        .collect()
}

/// Keep the (line, key, about) entries whose key starts with, then contains, `typed`.
fn rank(entries: impl Iterator<Item = (String, String, String)>, typed: &str) -> Vec<Candidate> {
    let typed = typed.to_lowercase();
    let (mut prefix, mut inner) = (vec![], vec![]);
    for (line, key, about) in entries {
        let key = key.to_lowercase();
        if key.starts_with(&typed) {
            prefix.push(Candidate { line, about });
        } else if key.contains(&typed) {
            inner.push(Candidate { line, about });
        }
    }
    prefix.extend(inner);
    prefix
}

/// Run a palette command line. Unknown commands leave an error in the status bar.
pub fn run_command(state: &mut State, line: &str) -> Vec<Command> {
    let line = line.trim();
    let (name, arg) = match line.split_once(char::is_whitespace) {
        Some((n, a)) => (n, a.trim()),
        None => (line, ""),
    };
    if name.is_empty() {
        return vec![];
    }
    let error = |state: &mut State, text: String| {
        state.status = Some(StatusMessage {
            text,
            tone: Tone::Fail,
        });
        vec![]
    };
    if let Some(v) = View::from_command(name) {
        state.view = v;
        return vec![];
    }
    match name {
        "help" => act(state, Action::Help),
        "q" | "quit" => vec![Command::Quit],
        "filter" => {
            let i = state.view.index();
            state.filters[i] = arg.to_string();
            filter_changed(state);
            vec![]
        }
        "nofilter" => act(state, Action::ClearFilter),
        "messages" => act(state, Action::Messages),
        "open" if arg.is_empty() => {
            let names: Vec<&str> = state.fleets.iter().map(|f| f.name.as_str()).collect();
            error(
                state,
                format!(
                    "open: name a fleet ({})",
                    if names.is_empty() {
                        "none applied yet".to_string()
                    } else {
                        names.join(", ")
                    }
                ),
            )
        }
        "open" => vec![Command::OpenPanes(arg.to_string())],
        "run" if arg.is_empty() => error(
            state,
            "run: give a job file, e.g. :run examples/train/job.yaml".into(),
        ),
        "run" => {
            state.status = Some(StatusMessage {
                text: format!("starting the job of {arg}…"),
                tone: Tone::Info,
            });
            vec![Command::RunJob(arg.to_string())]
        }
        "apply" if arg.is_empty() => error(
            state,
            "apply: give a fleet file, e.g. :apply fleets/local.yaml".into(),
        ),
        "apply" => fleets::start_apply(state, arg.to_string()),
        "close" => {
            state.panes = panes::Panes::default();
            vec![Command::ClosePanes]
        }
        "theme" if arg.is_empty() => error(state, format!("theme: name one of {}", state.themes.join(", "))),
        "theme" => vec![Command::LoadTheme(arg.to_string())],
        _ => {
            // A unique prefix of a command runs it (`:ni` -> `:nics`).
            let matches: Vec<Candidate> = completions(state, name)
                .into_iter()
                .filter(|c| c.line.starts_with(name))
                .collect();
            match matches.as_slice() {
                [one] => {
                    let full = if arg.is_empty() {
                        one.line.clone()
                    } else {
                        format!("{} {arg}", one.line)
                    };
                    run_command(state, &full)
                }
                [] => error(
                    state,
                    format!("unknown command `{name}`; press : then Tab to list commands"),
                ),
                many => error(
                    state,
                    format!(
                        "`{name}` is ambiguous: {}",
                        many.iter()
                            .map(|c| c.line.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ),
            }
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::keymap::Keymap;

    fn state() -> State {
        let mut s = State::new(
            Keymap::defaults(),
            vec!["dark".into(), "light".into()],
            "dark".into(),
        );
        s.dirty = false;
        s
    }

    fn press(s: &mut State, code: KeyCode) -> Vec<Command> {
        update(s, Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)))
    }

    fn ch(s: &mut State, c: char) -> Vec<Command> {
        press(s, KeyCode::Char(c))
    }

    fn typed(s: &mut State, text: &str) {
        for c in text.chars() {
            ch(s, c);
        }
    }

    #[test]
    fn apply_and_run_complete_paths() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display().to_string();
        std::fs::write(dir.path().join("a3-mega.yaml"), "").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "").unwrap();
        std::fs::write(dir.path().join(".hidden.yaml"), "").unwrap();
        std::fs::create_dir(dir.path().join("fleets")).unwrap();
        let s = state();
        let lines =
            |typed: &str| -> Vec<String> { completions(&s, typed).into_iter().map(|c| c.line).collect() };
        assert_eq!(
            lines(&format!("apply {d}/")),
            [format!("apply {d}/a3-mega.yaml"), format!("apply {d}/fleets/")]
        );
        assert_eq!(lines(&format!("run {d}/a")), [format!("run {d}/a3-mega.yaml")]);
        assert_eq!(
            lines(&format!("apply {d}/.h")),
            [format!("apply {d}/.hidden.yaml")]
        );
        assert!(lines(&format!("apply {d}/zz")).is_empty());
        assert_eq!(completions(&s, &format!("run {d}/a"))[0].about, "job file");
    }

    /// A click on a tab shows its view; the wheel moves the Offers selection as j / k.
    #[test]
    fn the_mouse_picks_tabs_and_the_wheel_scrolls() {
        use crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
        let mut s = state();
        s.size = (80, 24);
        let at = |kind, column, row| {
            Msg::Mouse(MouseEvent {
                kind,
                column,
                row,
                modifiers: KeyModifiers::NONE,
            })
        };
        // At 80 columns the tab bar drops the brand: " 1 Offers  2 Fleets  3 Nodes  4 Panes
        //  5 NCCL …": column 40 is NCCL.
        update(&mut s, at(MouseEventKind::Down(MouseButton::Left), 40, 0));
        assert_eq!(s.view, View::Nccl);
        update(&mut s, at(MouseEventKind::Down(MouseButton::Left), 3, 0));
        assert_eq!(s.view, View::Offers);
        let first = s.offers.selected.clone();
        update(&mut s, at(MouseEventKind::ScrollDown, 40, 10));
        assert_ne!(s.offers.selected, first, "moved");
        update(&mut s, at(MouseEventKind::ScrollUp, 40, 10));
        assert_eq!(s.offers.selected, first, "and back");
    }

    #[test]
    fn ctrl_z_without_job_control_says_why() {
        let mut s = state();
        let ctrl_z = |s: &mut State| {
            update(
                s,
                Msg::Key(KeyEvent::new(KeyCode::Char('z'), KeyModifiers::CONTROL)),
            )
        };
        assert_eq!(ctrl_z(&mut s), vec![Command::Suspend]);
        s.job_control = false;
        assert_eq!(ctrl_z(&mut s), vec![]);
        assert!(s
            .status
            .as_ref()
            .unwrap()
            .text
            .starts_with("ctrl-z: no shell to return to"));
    }

    /// The palette and filter take readline's keys: ctrl-w a word back, ctrl-a / ctrl-e
    /// the start / end, ctrl-u everything before the cursor.
    #[test]
    fn text_inputs_take_readline_keys() {
        let mut s = state();
        let ctrl = |s: &mut State, c: char| {
            update(
                s,
                Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)),
            )
        };
        ch(&mut s, ':');
        typed(&mut s, "theme lihgt");
        ctrl(&mut s, 'w');
        assert_eq!(palette(&s).input.lines()[0], "theme ");
        typed(&mut s, "light");
        ctrl(&mut s, 'a');
        typed(&mut s, "x");
        assert_eq!(palette(&s).input.lines()[0], "xtheme light");
        ctrl(&mut s, 'e');
        typed(&mut s, "y");
        assert_eq!(palette(&s).input.lines()[0], "xtheme lighty");
        ctrl(&mut s, 'u');
        assert_eq!(palette(&s).input.lines()[0], "");
    }

    fn palette(s: &State) -> &Palette {
        match &s.overlay {
            Overlay::Palette(p) => p,
            other => panic!("palette not open: {other:?}"),
        }
    }

    #[test]
    fn tab_digits_and_shift_tab_navigate_views() {
        let mut s = state();
        press(&mut s, KeyCode::Tab);
        assert_eq!(s.view, View::Fleets);
        assert!(s.dirty);
        press(&mut s, KeyCode::BackTab);
        press(&mut s, KeyCode::BackTab);
        assert_eq!(s.view, View::Doctor, "wraps around");
        ch(&mut s, '3');
        assert_eq!(s.view, View::Nodes);
    }

    #[test]
    fn help_opens_scrolls_and_closes() {
        let mut s = state();
        s.size = (80, 24);
        ch(&mut s, '?');
        assert!(matches!(s.overlay, Overlay::Help { scroll: 0 }));
        ch(&mut s, 'j');
        ch(&mut s, 'G');
        let max = help::lines(&s.keymap).len() - 1;
        assert!(matches!(s.overlay, Overlay::Help { scroll } if scroll == max));
        ch(&mut s, '1');
        assert_eq!(s.view, View::Offers, "view keys do nothing under help");
        press(&mut s, KeyCode::Esc);
        assert!(matches!(s.overlay, Overlay::None));
        ch(&mut s, '?');
        assert_eq!(ch(&mut s, 'q'), vec![Command::Quit], "q quits from help too");
    }

    #[test]
    fn quit_suspend_and_unbound_keys() {
        let mut s = state();
        assert_eq!(ch(&mut s, 'q'), vec![Command::Quit]);
        let ctrl = |c| Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL));
        assert_eq!(update(&mut s, ctrl('c')), vec![Command::Quit]);
        assert_eq!(update(&mut s, ctrl('z')), vec![Command::Suspend]);
        s.dirty = false;
        assert!(ch(&mut s, 'u').is_empty());
        assert!(!s.dirty, "an unbound key changes nothing on screen");
        ch(&mut s, '6');
        s.dirty = false;
        ch(&mut s, 'j');
        assert!(!s.dirty, "movement in a view without rows redraws nothing");
    }

    #[test]
    fn palette_completes_and_switches_view() {
        let mut s = state();
        ch(&mut s, ':');
        assert_eq!(
            palette(&s).candidates.len(),
            View::ALL.len() + PALETTE_COMMANDS.len()
        );
        typed(&mut s, "ni");
        let lines: Vec<&str> = palette(&s).candidates.iter().map(|c| c.line.as_str()).collect();
        assert_eq!(lines, vec!["nics"]);
        press(&mut s, KeyCode::Tab);
        assert_eq!(palette(&s).input.lines(), &["nics".to_string()]);
        press(&mut s, KeyCode::Enter);
        assert_eq!(s.view, View::Nics);
        assert!(matches!(s.overlay, Overlay::None));
    }

    #[test]
    fn palette_typed_command_unique_prefix_and_errors() {
        let mut s = state();
        ch(&mut s, ':');
        typed(&mut s, "nccl");
        press(&mut s, KeyCode::Enter);
        assert_eq!(s.view, View::Nccl);
        ch(&mut s, ':');
        typed(&mut s, "fle");
        press(&mut s, KeyCode::Enter);
        assert_eq!(s.view, View::Fleets, "a unique prefix runs the command");
        ch(&mut s, ':');
        typed(&mut s, "n");
        press(&mut s, KeyCode::Enter);
        let st = s.status.clone().unwrap();
        assert_eq!(st.tone, Tone::Fail);
        assert!(
            st.text.contains("ambiguous") && st.text.contains("nodes"),
            "{}",
            st.text
        );
        ch(&mut s, ':');
        typed(&mut s, "bogus");
        press(&mut s, KeyCode::Enter);
        assert!(s
            .status
            .as_ref()
            .unwrap()
            .text
            .contains("unknown command `bogus`"));
        ch(&mut s, 'u');
        assert!(s.status.is_some(), "an unbound key leaves the message");
        ch(&mut s, '1');
        assert!(s.status.is_none(), "the next action clears it");
        ch(&mut s, ':');
        typed(&mut s, "q");
        assert_eq!(press(&mut s, KeyCode::Enter), vec![Command::Quit]);
    }

    #[test]
    fn palette_tab_cycles_and_esc_cancels() {
        let mut s = state();
        ch(&mut s, ':');
        typed(&mut s, "n");
        let n = palette(&s).candidates.len();
        assert!(n >= 4, "nodes, nccl, nics, nofilter, ...");
        press(&mut s, KeyCode::Tab);
        let first = palette(&s).input.lines()[0].clone();
        press(&mut s, KeyCode::Tab);
        let second = palette(&s).input.lines()[0].clone();
        assert_ne!(first, second);
        assert_eq!(palette(&s).candidates.len(), n, "cycling keeps the list");
        press(&mut s, KeyCode::BackTab);
        assert_eq!(palette(&s).input.lines()[0], first);
        press(&mut s, KeyCode::Esc);
        assert!(matches!(s.overlay, Overlay::None));
        assert_eq!(s.view, View::Offers);
    }

    #[test]
    fn theme_command_completes_theme_names_and_asks_for_a_load() {
        let mut s = state();
        ch(&mut s, ':');
        typed(&mut s, "theme l");
        let lines: Vec<&str> = palette(&s).candidates.iter().map(|c| c.line.as_str()).collect();
        assert_eq!(lines, vec!["theme light"]);
        press(&mut s, KeyCode::Tab);
        assert_eq!(
            press(&mut s, KeyCode::Enter),
            vec![Command::LoadTheme("light".into())]
        );
        update(&mut s, Msg::ThemeLoaded(Ok("light".into())));
        assert_eq!(s.theme, "light");
        update(&mut s, Msg::ThemeLoaded(Err("themes/x.yaml:3:1: bad".into())));
        assert_eq!(s.status.as_ref().unwrap().tone, Tone::Fail);
        assert_eq!(s.theme, "light");
    }

    #[test]
    fn filter_edits_live_enter_keeps_esc_restores() {
        let mut s = state();
        ch(&mut s, '/');
        typed(&mut s, "gpu=H100");
        assert_eq!(s.filter(), "gpu=H100", "applied while typing");
        press(&mut s, KeyCode::Enter);
        assert!(matches!(s.overlay, Overlay::None));
        assert_eq!(s.filter(), "gpu=H100");
        ch(&mut s, '/');
        press(&mut s, KeyCode::Backspace);
        typed(&mut s, "0");
        assert_eq!(s.filter(), "gpu=H100");
        press(&mut s, KeyCode::Backspace);
        typed(&mut s, "x");
        assert_eq!(s.filter(), "gpu=H10x");
        press(&mut s, KeyCode::Esc);
        assert_eq!(s.filter(), "gpu=H100", "esc restores the filter from before");
        ch(&mut s, '2');
        assert_eq!(s.filter(), "", "filters are per view");
        ch(&mut s, '1');
        update(
            &mut s,
            Msg::Key(KeyEvent::new(KeyCode::Char('l'), KeyModifiers::CONTROL)),
        );
        assert_eq!(s.filter(), "");
    }

    #[test]
    fn slash_in_panes_finds_a_pane_and_keys_go_to_the_entry() {
        let mut s = state();
        ch(&mut s, '4');
        ch(&mut s, '/');
        assert!(
            matches!(s.overlay, Overlay::Filter(_)),
            "the Panes view's / finds a node's pane"
        );
        typed(&mut s, "x");
        update(
            &mut s,
            Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)),
        );
        assert_eq!(
            s.status.as_ref().unwrap().tone,
            Tone::Warn,
            "no pane matches (none open)"
        );
        ch(&mut s, '1');
        ch(&mut s, '/');
        typed(&mut s, "q2");
        assert_eq!(s.view, View::Offers, "digits and q are text inside the entry");
        assert_eq!(s.filter(), "q2");
        update(&mut s, Msg::Paste("a\nb".into()));
        assert_eq!(s.filter(), "q2a b", "pasted newlines become spaces");
    }

    #[test]
    fn resize_and_resume_redraw() {
        let mut s = state();
        update(&mut s, Msg::Resize(120, 40));
        assert_eq!(s.size, (120, 40));
        assert!(s.dirty);
        s.dirty = false;
        update(&mut s, Msg::Resumed);
        assert!(s.dirty);
    }

    #[test]
    fn custom_keymap_drives_update() {
        let overrides = crate::tui::keymap::Keymap::with_overrides(
            &crate::tui::keymap::parse_overrides(
                std::path::Path::new("config.yaml"),
                "keys:\n  global:\n    next_view: n\n    quit: ctrl-q\n",
            )
            .unwrap(),
        );
        let mut s = State::new(overrides, vec![], "dark".into());
        ch(&mut s, 'n');
        assert_eq!(s.view, View::Fleets);
        assert!(ch(&mut s, 'q').is_empty());
        let q = update(
            &mut s,
            Msg::Key(KeyEvent::new(KeyCode::Char('q'), KeyModifiers::CONTROL)),
        );
        assert_eq!(q, vec![Command::Quit]);
    }
}
