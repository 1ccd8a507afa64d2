//! Running a `:` palette line: a view's name shows it, a command does what
//! `shell::palette::PALETTE_COMMANDS` says, a unique prefix stands for its command.

use super::act::act;
use super::{filter, palette};
use crate::tui::action::Action;
use crate::tui::state::{Candidate, Command, State, StatusMessage, View};
use crate::tui::theme::Tone;
use crate::tui::{fleets, panes};

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
            filter::filter_changed(state);
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
            let matches: Vec<Candidate> = palette::completions(state, name)
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
