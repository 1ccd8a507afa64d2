//! Actions of the global and help contexts: the open help or message history scrolls,
//! else the view shown takes the action (one arm per view), else the shell's own (views,
//! help, palette, filter, quit, suspend).

use super::{filter, overlay, palette};
use crate::tui::action::Action;
use crate::tui::help::view as help;
use crate::tui::state::{Command, Overlay, Palette, State, StatusMessage, View};
use crate::tui::theme::Tone;
use crate::tui::{doctor, fleets, jobs, nccl, nics, nodes, offers, panes};
use tui_textarea::TextArea;

/// Carry out an action of the global or help context.
pub fn act(state: &mut State, action: Action) -> Vec<Command> {
    let help_page = usize::from(state.size.1.saturating_sub(4)).max(1);
    let scrollable = match &state.overlay {
        Overlay::Help { .. } => Some(help::max_scroll(&state.keymap, state.view, state.size) + 1),
        Overlay::Messages { .. } => Some(state.messages.len()),
        _ => None,
    };
    if let (Some(len), Overlay::Help { scroll } | Overlay::Messages { scroll }) =
        (scrollable, &mut state.overlay)
    {
        let max = len.saturating_sub(1);
        match action {
            Action::Close => state.overlay = Overlay::None,
            Action::Quit => {
                state.overlay = Overlay::None;
                return overlay::quit(state);
            }
            Action::Up => *scroll = scroll.saturating_sub(1),
            Action::Down => *scroll = (*scroll + 1).min(max),
            Action::Top => *scroll = 0,
            Action::Bottom => *scroll = max,
            Action::PageUp => *scroll = scroll.saturating_sub(help_page),
            Action::PageDown => *scroll = (*scroll + help_page).min(max),
            _ => {}
        }
        return vec![];
    }
    if let Some(commands) = view_act(state, action) {
        return commands;
    }
    match action {
        Action::Quit => return overlay::quit(state),
        Action::Suspend if !state.job_control => {
            state.status = Some(StatusMessage {
                text: "ctrl-z: no shell to return to (flightdeck was not started from a shell with job control); q quits".into(),
                tone: Tone::Warn,
            });
        }
        Action::Suspend => return vec![Command::Suspend],
        Action::Help => state.overlay = Overlay::Help { scroll: 0 },
        // Opened at the newest messages.
        Action::Messages => {
            state.overlay = Overlay::Messages {
                scroll: state.messages.len().saturating_sub(1),
            }
        }
        Action::Palette => {
            state.overlay = Overlay::Palette(Palette {
                input: TextArea::default(),
                candidates: vec![],
                selected: None,
            });
            palette::refresh_candidates(state);
        }
        Action::Filter => filter::open_filter(state),
        Action::ClearFilter => filter::clear(state),
        Action::NextView => state.view = state.view.next(),
        Action::PrevView => state.view = state.view.prev(),
        Action::ViewOffers => state.view = View::Offers,
        Action::ViewFleets => state.view = View::Fleets,
        Action::ViewNodes => state.view = View::Nodes,
        Action::ViewPanes => state.view = View::Panes,
        Action::ViewNccl => state.view = View::Nccl,
        Action::ViewJobs => state.view = View::Jobs,
        Action::ViewNics => state.view = View::Nics,
        Action::ViewDoctor => state.view = View::Doctor,
        // Movement belongs to the views' tables; none of the views has rows yet.
        Action::Up | Action::Down | Action::Top | Action::Bottom | Action::PageUp | Action::PageDown => {
            state.dirty = false;
        }
        Action::Left
        | Action::Right
        | Action::Select
        | Action::Reload
        | Action::PaneInsert
        | Action::PaneZoom
        | Action::PaneMark
        | Action::PaneBroadcast
        | Action::PaneCopy
        | Action::Detail
        | Action::FleetApply
        | Action::FleetDelete
        | Action::FleetEdit
        | Action::Sort
        | Action::SortReverse
        | Action::Pricing
        | Action::WriteFleet
        | Action::JobStop
        | Action::Compare
        | Action::NicsMode
        | Action::NextItem
        | Action::PrevItem
        | Action::NcclRun
        | Action::NcclRunAgain => state.dirty = false,
        Action::Close
        | Action::Confirm
        | Action::Complete
        | Action::CompletePrev
        | Action::SearchNext
        | Action::SearchPrev
        | Action::SelectStart
        | Action::Yank
        | Action::AcceptAll
        | Action::NextField
        | Action::PrevField => {}
    }
    vec![]
}

/// The view shown takes the action: `None` when it is not one of the view's.
fn view_act(state: &mut State, action: Action) -> Option<Vec<Command>> {
    match state.view {
        View::Offers => offers::act(state, action),
        View::Fleets => fleets::act(state, action),
        View::Nodes => nodes::act(state, action),
        View::Panes => panes::act(state, action),
        View::Nccl => nccl::act(state, action),
        View::Jobs => jobs::act(state, action),
        View::Nics => nics::act(state, action),
        View::Doctor => doctor::act(state, action),
    }
}
