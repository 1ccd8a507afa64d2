//! The layers over the view: which one gets the keys (the key context), the questions
//! that wait their turn (host keys, passphrases, plans to confirm), yes/no questions
//! (`Overlay::Ask`) and quitting.

use crate::tui::action::{Action, Context};
use crate::tui::state::{Ask, AskFor, Command, Overlay, State, View};
use tui_textarea::TextArea;

/// Which key context is active: the innermost open layer decides.
pub fn context(state: &State) -> Context {
    match state.overlay {
        Overlay::None if state.view == View::Panes && state.panes.copy.is_some() => Context::Copy,
        Overlay::None if state.view == View::Panes && state.panes.insert => Context::Pane,
        Overlay::None if matches!(state.view, View::Offers | View::Fleets) && state.editor.is_some() => {
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

/// Show the next queued question when nothing else is asking.
pub fn next_question(state: &mut State) {
    if matches!(state.overlay, Overlay::None) {
        if let Some(q) = state.questions.pop_front() {
            state.overlay = q;
            state.dirty = true;
        }
    }
}

/// An SSH host offered a key known_hosts does not have: asked in turn.
pub fn host_key_question(state: &mut State, id: u64, host: String, fingerprint: String) -> Vec<Command> {
    if state.accept_all_host_keys {
        return vec![Command::AnswerHostKey {
            id,
            accept: true,
            all: true,
        }];
    }
    state.questions.push_back(Overlay::HostKey {
        id,
        host,
        fingerprint,
    });
    next_question(state);
    vec![]
}

/// An encrypted key file needs its passphrase: asked in turn, typed masked.
pub fn passphrase_question(state: &mut State, id: u64, key: String) -> Vec<Command> {
    let mut input = TextArea::default();
    input.set_mask_char('•');
    state.questions.push_back(Overlay::Passphrase { id, key, input });
    next_question(state);
    vec![]
}

/// y, n or a (every host) to the host-key question.
pub fn answer_host_key(state: &mut State, a: Action) -> Vec<Command> {
    let Overlay::HostKey { id, .. } = std::mem::take(&mut state.overlay) else {
        return vec![];
    };
    state.dirty = true;
    let all = a == Action::AcceptAll;
    let mut answers = vec![Command::AnswerHostKey {
        id,
        accept: a != Action::Close,
        all,
    }];
    if all {
        state.accept_all_host_keys = true;
        // "Accept all new keys" answers the hosts already waiting in the queue too: a
        // 64-node fleet asks 64 questions at once, before the first answer arrives.
        state.questions.retain(|q| match q {
            Overlay::HostKey { id, .. } => {
                answers.push(Command::AnswerHostKey {
                    id: *id,
                    accept: true,
                    all: true,
                });
                false
            }
            _ => true,
        });
        let n = answers.len();
        if n > 1 {
            state.status = Some(crate::tui::state::StatusMessage {
                text: format!(
                    "accepted the new keys of {} (and every new one this session)",
                    crate::words::plural(n, "host")
                ),
                tone: crate::tui::theme::Tone::Info,
            });
        }
    }
    next_question(state);
    answers
}

/// y or n (Esc) to an [`Overlay::Ask`].
pub fn answer_ask(state: &mut State, action: Action) -> Vec<Command> {
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
                state.editor = None;
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
pub fn quit(state: &mut State) -> Vec<Command> {
    let open: Vec<&str> = state
        .panes
        .all_tiles()
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
