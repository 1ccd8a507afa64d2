//! The NCCL view's share of `update`: the messages of its services.

use super::{open_dialog, started, Msg, RunStatus};
use crate::tui::state::{Command, State, View};

/// A message of the NCCL services.
pub fn update(state: &mut State, msg: Msg) -> Vec<Command> {
    match msg {
        Msg::Runs(runs) => {
            let before = state.nccl.runs.clone();
            state.nccl.set_runs(runs);
            state.dirty |= state.nccl.runs != before;
            vec![]
        }
        Msg::History(history) => {
            state.nccl.set_history(history);
            state.dirty |= state.view == View::Nccl;
            vec![]
        }
        Msg::Report { id, report } => {
            if let Some((shown, r, _)) = state.nccl.shown.as_mut().filter(|(s, _, _)| *s == id) {
                let _ = shown;
                *r = *report;
                state.dirty |= state.view == View::Nccl;
            }
            vec![]
        }
        Msg::Ended { id, end } => {
            if let Some((_, _, st)) = state.nccl.shown.as_mut().filter(|(s, _, _)| *s == id) {
                *st = RunStatus::Ended(*end);
                state.dirty = true;
            }
            vec![Command::LoadFleets]
        }
        Msg::Failed { id, error } => {
            if let Some((_, _, st)) = state.nccl.shown.as_mut().filter(|(s, _, _)| *s == id) {
                *st = RunStatus::Failed(error);
                state.dirty = true;
            }
            vec![]
        }
        Msg::RunFleets(fleets) => {
            open_dialog(state, fleets);
            vec![]
        }
        Msg::Started(result) => started(state, result),
        Msg::Stragglers(report) => {
            state.nccl.stragglers = report.map(|r| *r);
            state.dirty |= state.view == View::Nccl;
            vec![]
        }
    }
}
