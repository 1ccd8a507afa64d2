//! The Fleets and Nodes views' share of `update`: the fleets of the state store, filtered,
//! with the selection kept by name so a reload does not move it.

use super::action::Action;
use super::state::{Command, State, View};
use crate::store::FleetRecord;

/// The fleets the Fleets view shows: those matching its filter (any column, any case).
pub fn visible(state: &State) -> Vec<&FleetRecord> {
    let f = state.filters[View::Fleets.index()].to_lowercase();
    state
        .fleets
        .iter()
        .filter(|r| {
            f.is_empty()
                || [r.name.as_str(), r.backend.as_str()]
                    .iter()
                    .any(|c| c.to_lowercase().contains(&f))
                || r.nodes.iter().any(|n| n.host.to_lowercase().contains(&f))
        })
        .collect()
}

/// The fleet the Nodes view describes: the one with open panes, else the selected one.
pub fn current(state: &State) -> Option<&FleetRecord> {
    let name = state.panes.fleet.as_ref().or(state.fleet_selected.as_ref())?;
    state.fleets.iter().find(|f| &f.name == name)
}

/// Keep the selection on a visible fleet after a reload or a filter change.
pub fn fix_selection(state: &mut State) {
    let names: Vec<String> = visible(state).iter().map(|f| f.name.clone()).collect();
    if !state.fleet_selected.as_ref().is_some_and(|s| names.contains(s)) {
        state.fleet_selected = names.first().cloned();
    }
}

/// Global-context actions in the Fleets view. `None`: not a fleets action.
pub fn act(state: &mut State, action: Action) -> Option<Vec<Command>> {
    let names: Vec<String> = visible(state).iter().map(|f| f.name.clone()).collect();
    let at = state
        .fleet_selected
        .as_ref()
        .and_then(|s| names.iter().position(|n| n == s));
    let pick = |i: usize| names.get(i).cloned();
    match action {
        Action::Up => state.fleet_selected = pick(at.map_or(0, |i| i.saturating_sub(1))),
        Action::Down => {
            state.fleet_selected = pick(at.map_or(0, |i| (i + 1).min(names.len().saturating_sub(1))))
        }
        Action::Top => state.fleet_selected = pick(0),
        Action::Bottom => state.fleet_selected = pick(names.len().saturating_sub(1)),
        Action::Reload => return Some(vec![Command::LoadFleets]),
        Action::Select => {
            return Some(
                state
                    .fleet_selected
                    .clone()
                    .map(Command::OpenPanes)
                    .into_iter()
                    .collect(),
            )
        }
        _ => return None,
    }
    Some(vec![])
}
