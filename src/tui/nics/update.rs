//! The NICs view's share of `update`: the messages of its samplers.

use super::{ingest, refigure, Msg, NicsView};
use crate::tui::state::{Command, State};

/// A message of the samplers.
pub fn update(state: &mut State, msg: Msg) -> Vec<Command> {
    match msg {
        Msg::Started { fleet, nodes } => {
            state.nics = NicsView {
                fleet: Some(fleet),
                down: vec![None; nodes.len()],
                store: crate::telemetry::series::Telemetry::for_fleet(nodes.len()),
                nodes,
                ..Default::default()
            };
            state.dirty = true;
        }
        Msg::Sample(event) => {
            ingest(state, *event);
            refigure(state);
        }
    }
    vec![]
}
