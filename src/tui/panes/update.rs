//! The Panes view's share of `update`: the messages of its sessions.

use super::{sync_sizes, CopyMode, Msg, Panes};
use crate::tui::state::{Command, State, StatusMessage, View};
use crate::tui::theme::Tone;

/// A message of the pane sessions.
pub fn update(state: &mut State, msg: Msg) -> Vec<Command> {
    match msg {
        Msg::Opened { fleet, tiles } => {
            // Opened from the Nodes view: that node's pane, zoomed.
            let focus = state
                .focus_node
                .take()
                .and_then(|n| tiles.iter().position(|t| t.node == n));
            state.panes = Panes {
                fleet: Some(fleet.clone()),
                tiles,
                focus: focus.unwrap_or(0),
                zoom: focus.is_some(),
                ..Default::default()
            };
            state.fleet_selected = Some(fleet);
            state.view = View::Panes;
            state.dirty = true;
            sync_sizes(state)
        }
        Msg::Failed(e) => {
            state.status = Some(StatusMessage {
                text: e,
                tone: Tone::Fail,
            });
            state.dirty = true;
            vec![]
        }
        Msg::Event(event) => {
            match event {
                crate::term::session::PaneEvent::Output(_) => {}
                crate::term::session::PaneEvent::State(id, s) => {
                    if let Some(i) = state.panes.index_of(id) {
                        state.panes.tiles[i].state = s;
                    }
                }
            }
            state.dirty |= matches!(state.view, View::Panes | View::Nodes);
            vec![]
        }
        Msg::Snapshot { id, lines } => {
            if state.panes.index_of(id).is_some() {
                state.panes.copy = Some(CopyMode::new(id, lines));
                state.dirty = true;
            }
            vec![]
        }
    }
}
