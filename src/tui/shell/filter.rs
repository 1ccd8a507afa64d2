//! The `/` filter entry of a table view: opened with the view's filter, applied as it is
//! typed, restored by Esc; the views that derive rows from their filter follow it.

use crate::tui::state::{FilterEntry, Overlay, State, View};
use crate::tui::{fleets, offers, panes};
use tui_textarea::TextArea;

/// `/`: the filter entry of the view's table (in the Panes view, it finds a node's pane
/// and its page instead: see [`filter_changed`]).
pub fn open_filter(state: &mut State) {
    let previous = state.filter().to_string();
    let mut input = TextArea::new(vec![previous.clone()]);
    input.move_cursor(tui_textarea::CursorMove::End);
    let selected = match state.view {
        View::Offers => state.offers.selected.clone(),
        View::Fleets => state.fleet_selected.clone(),
        _ => None,
    };
    state.overlay = Overlay::Filter(FilterEntry {
        input,
        previous,
        selected,
    });
}

/// The entry's text is the view's filter now.
pub fn sync_filter(state: &mut State) {
    if let Overlay::Filter(f) = &state.overlay {
        let text = f.input.lines().join(" ");
        let i = state.view.index();
        state.filters[i] = text;
    }
    filter_changed(state);
}

/// The current view's filter text changed: views that derive rows from it follow.
pub fn filter_changed(state: &mut State) {
    fleets::fix_selection(state);
    if state.view == View::Panes {
        let text = state.filter().to_string();
        panes::act::find(state, &text);
    }
    if state.view == View::Offers {
        offers::sync_filter(state);
    }
    if state.view == View::Nics {
        let filter = state.filter().to_string();
        state.nics.filter_changed(&filter);
    }
}

/// Clear the current view's filter.
pub fn clear(state: &mut State) {
    let i = state.view.index();
    state.filters[i].clear();
    filter_changed(state);
}
