//! The status line and the session's message history (`M`), and the theme's loads.

use crate::tui::state::{Command, State, StatusMessage, MESSAGES_KEPT};
use crate::tui::theme::Tone;

/// A new status message (one that differs from `before`) also goes into the message
/// history, where a long one can be read whole.
pub fn keep(state: &mut State, before: Option<StatusMessage>) {
    if state.status != before {
        if let Some(s) = &state.status {
            if state.messages.len() == MESSAGES_KEPT {
                state.messages.pop_front();
            }
            state.messages.push_back(s.clone());
        }
    }
}

/// A `Command::LoadTheme` finished: the theme shown, or why it could not load.
pub fn theme_loaded(state: &mut State, result: Result<String, String>) -> Vec<Command> {
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
