//! The Nodes view's share of `update`: its actions and its messages.

use super::view::listed_nodes;
use super::Msg;
use crate::tui::action::Action;
use crate::tui::state::{Command, State, View};

/// A message of the Nodes view's services.
pub fn update(state: &mut State, msg: Msg) -> Vec<Command> {
    match msg {
        Msg::GkeSnapshot { fleet, result } => {
            let shown = state.view == View::Nodes
                && crate::tui::shell::fleet::current(state).is_some_and(|f| f.name == fleet);
            state.nodes.gke.insert(fleet, result);
            state.dirty |= shown;
            vec![]
        }
    }
}

/// Actions in the Nodes view: move the selection, Enter opens the fleet's panes with the
/// selected node's zoomed, `d` shows its details. `None`: not a Nodes action.
pub fn act(state: &mut State, action: Action) -> Option<Vec<Command>> {
    let names = listed_nodes(state);
    // Nothing picked yet: the first node is the one shown selected.
    let at = state
        .nodes
        .selected
        .as_ref()
        .and_then(|s| names.iter().position(|n| n == s))
        .or((!names.is_empty()).then_some(0));
    let last = names.len().saturating_sub(1);
    let pick = |i: usize| names.get(i).cloned();
    match action {
        Action::Up => state.nodes.selected = pick(at.map_or(0, |i| i.saturating_sub(1))),
        Action::Down => state.nodes.selected = pick(at.map_or(0, |i| (i + 1).min(last))),
        Action::Top => state.nodes.selected = pick(0),
        Action::Bottom => state.nodes.selected = pick(last),
        Action::PageUp | Action::PageDown => {
            // A screenful of the table: its area (above the `d` panel, as tall as the
            // selected node's fields) less borders and header.
            let body = crate::tui::shell::view::body(state.size);
            let list = super::view::wheel_area(state, body).height;
            let per = usize::from(list.saturating_sub(3)).max(1);
            let at = at.unwrap_or(0);
            state.nodes.selected = pick(if action == Action::PageDown {
                (at + per).min(last)
            } else {
                at.saturating_sub(per)
            });
        }
        Action::Detail => state.nodes.detail = !state.nodes.detail,
        Action::Select => {
            let node = at.and_then(pick).or_else(|| pick(0));
            let fleet = crate::tui::shell::fleet::current(state).map(|f| f.name.clone());
            let (Some(node), Some(fleet)) = (node, fleet) else {
                return Some(vec![]);
            };
            // The node's pane, zoomed: the Panes feature focuses it once the fleet's
            // panes are shown (open already, the same shells; else new ones).
            state.focus_node = Some(node);
            return Some(vec![Command::OpenPanes(fleet)]);
        }
        _ => return None,
    }
    Some(vec![])
}
