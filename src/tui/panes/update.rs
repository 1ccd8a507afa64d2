//! The Panes view's share of `update`: the messages of its sessions.

use super::{sync_sizes, CopyMode, Msg};
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
            let before = state.panes.fleet.clone().filter(|f| *f != fleet);
            state.panes.open(fleet.clone(), tiles, focus);
            if let Some(before) = before {
                say_in_background(state, &before);
            }
            state.fleet_selected = Some(fleet);
            state.view = View::Panes;
            state.dirty = true;
            sync_sizes(state)
        }
        Msg::Shown { fleet } => {
            let before = state.panes.fleet.clone().filter(|f| *f != fleet);
            if !state.panes.bring_forward(&fleet) {
                state.status = Some(StatusMessage {
                    text: format!("{fleet}'s panes are closed: :open {fleet} opens new shells"),
                    tone: Tone::Warn,
                });
                state.dirty = true;
                return vec![];
            }
            if let Some(before) = before {
                say_in_background(state, &before);
            }
            // Opened from Nodes (or Fleets on a node): that node's pane, zoomed.
            let p = &mut state.panes;
            if let Some(i) = state
                .focus_node
                .take()
                .and_then(|n| p.tiles.iter().position(|t| t.node == n))
            {
                p.focus = i;
                p.zoom = true;
            }
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
                    if let Some(t) = state.panes.tile_mut(id) {
                        t.state = s;
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

/// Says where the panes of `fleet` went when another fleet's were shown.
fn say_in_background(state: &mut State, fleet: &str) {
    let n = state
        .panes
        .background
        .iter()
        .find(|b| b.fleet.as_deref() == Some(fleet))
        .map_or(0, |b| b.tiles.len());
    state.status = Some(StatusMessage {
        text: format!(
            "{fleet}'s {} go on in the background: Enter on {fleet} in Fleets (or :open {fleet}) shows them again",
            crate::words::plural(n, "pane")
        ),
        tone: Tone::Info,
    });
}
