//! The fleet the cockpit is about, which features read instead of asking one another:
//! the one with open panes, else the one selected in the Fleets view.

use crate::store::FleetRecord;
use crate::tui::state::State;

/// The fleet the Nodes, NICs and Doctor views describe: the one with open panes, else
/// the selected one.
pub fn current(state: &State) -> Option<&FleetRecord> {
    let name = state.panes.fleet.as_ref().or(state.fleet_selected.as_ref())?;
    state.fleets.iter().find(|f| &f.name == name)
}
