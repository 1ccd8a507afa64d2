//! The Jobs view's share of `update`: the messages of its services.

use super::{Msg, NodeFollow};
use crate::tui::state::{Command, State, StatusMessage, View};
use crate::tui::theme::Tone;

/// A message of the jobs' services.
pub fn update(state: &mut State, msg: Msg) -> Vec<Command> {
    match msg {
        Msg::List { jobs, now } => {
            let before = state.jobs.jobs.clone();
            state.jobs.set_jobs(jobs, now);
            state.dirty |= state.view == View::Jobs && state.jobs.jobs != before;
            vec![]
        }
        Msg::Polled { jobs, now } => {
            state.jobs.polling = false;
            let before = (state.jobs.jobs.clone(), state.jobs.now);
            match jobs {
                Some(jobs) => state.jobs.set_jobs(jobs, now),
                None => state.jobs.now = state.jobs.now.max(now),
            }
            // The running jobs' durations move with the clock.
            state.dirty |= state.view == View::Jobs && (state.jobs.jobs.clone(), state.jobs.now) != before;
            vec![]
        }
        Msg::Lines { id, lines, now } => {
            state.jobs.now = state.jobs.now.max(now);
            if let Some(shown) = state.jobs.shown.as_mut().filter(|s| s.id == id) {
                for (rank, text) in lines {
                    shown.push(rank, text);
                }
                state.dirty |= state.view == View::Jobs;
            }
            vec![]
        }
        Msg::Node { id, rank, follow } => {
            let ended = matches!(follow, NodeFollow::Exited(_));
            if let Some(shown) = state.jobs.shown.as_mut().filter(|s| s.id == id) {
                if let Some(f) = shown.follow.get_mut(rank) {
                    *f = follow;
                }
                state.dirty = true;
            }
            if ended {
                vec![Command::LoadFleets]
            } else {
                vec![]
            }
        }
        Msg::Started(result) => {
            state.dirty = true;
            match result {
                Ok(id) => {
                    state.status = Some(StatusMessage {
                        text: format!("job {id} started on every node; quitting leaves it running"),
                        tone: Tone::Pass,
                    });
                    state.view = View::Jobs;
                    state.jobs.selected = Some(id);
                    state.jobs.shown = None;
                    vec![Command::LoadFleets]
                }
                Err(e) => {
                    state.status = Some(StatusMessage {
                        text: e,
                        tone: Tone::Fail,
                    });
                    vec![]
                }
            }
        }
        Msg::Stopped { id, result } => {
            state.dirty = true;
            state.status = Some(match result {
                Ok(text) => StatusMessage {
                    text: format!("job {id}: {text}"),
                    tone: Tone::Info,
                },
                Err(e) => StatusMessage {
                    text: format!("job {id}: {e}"),
                    tone: Tone::Fail,
                },
            });
            vec![Command::LoadFleets]
        }
    }
}
