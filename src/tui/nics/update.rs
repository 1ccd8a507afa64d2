//! The NICs view's share of `update`: its actions (start the samplers, move, modes,
//! window, pause) and the messages of its samplers.

use super::{move_in, step, Mode, Msg, NicsView, SPANS_MS};
use crate::telemetry::service::TelemetryEvent;
use crate::tui::action::Action;
use crate::tui::state::{Command, State, StatusMessage, View};
use crate::tui::theme::Tone;

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

/// Work the fleet mode's figures out when its second has moved on, here rather than in
/// the next frame (at 1024 nodes they take ~20 ms; a frame must take under 1).
pub fn refigure(state: &State) {
    let v = &state.nics;
    let columns = v.fleet_memo.1.get();
    if state.view == View::Nics && v.mode == Mode::Fleet && columns > 0 {
        crate::tui::nics::view::fleet_figures(v, &v.shown(state.filter()), columns);
    }
}

/// Ingest one sampler event (pure: the record carries its own clock).
pub fn ingest(state: &mut State, event: TelemetryEvent) {
    let v = &mut state.nics;
    match event {
        TelemetryEvent::Hello { node, hello } => v.store.hello(node, hello),
        TelemetryEvent::Record {
            node,
            record,
            arrived_unix_ns,
        } => {
            v.store.ingest(node, &record, arrived_unix_ns);
            if let Some(d) = v.down.get_mut(node) {
                *d = None;
            }
            if !v.paused {
                v.refresh_flags_when_due();
            }
        }
        TelemetryEvent::Down { node, error, .. } => {
            if let Some(d) = v.down.get_mut(node) {
                *d = Some(error);
            }
        }
        TelemetryEvent::Stderr { .. } => return,
    }
    state.dirty |= state.view == View::Nics && !state.nics.paused;
}

/// Global-context actions in the NICs view. `None`: not a NICs action.
pub fn act(state: &mut State, action: Action) -> Option<Vec<Command>> {
    match action {
        Action::Select | Action::Reload => {
            let Some(fleet) = crate::tui::shell::fleet::current(state).map(|f| f.name.clone()) else {
                state.status = Some(StatusMessage {
                    text: "no fleet: select one in Fleets (2) first".into(),
                    tone: Tone::Warn,
                });
                return Some(vec![]);
            };
            return Some(vec![Command::StartTelemetry(fleet)]);
        }
        _ => {}
    }
    let filter = state.filter().to_string();
    let v = &mut state.nics;
    let shown = v.shown(&filter);
    let page = usize::from(state.size.1 / 3).max(1) as isize;
    let moved: Option<isize> = match action {
        Action::Up => Some(-1),
        Action::Down => Some(1),
        Action::PageUp => Some(-page),
        Action::PageDown => Some(page),
        Action::Top => Some(isize::MIN / 2),
        Action::Bottom => Some(isize::MAX / 2),
        _ => None,
    };
    if let Some(by) = moved {
        // Fleet mode moves the selected node; the others scroll their list.
        if v.mode == Mode::Fleet {
            v.node = move_in(&shown, v.node, by, false);
        } else {
            let last = v.rows(&filter).saturating_sub(1) as isize;
            v.scroll = (v.scroll as isize).saturating_add(by).clamp(0, last) as usize;
        }
        return Some(vec![]);
    }
    match action {
        Action::PaneZoom => v.span = (v.span + 1) % SPANS_MS.len(),
        Action::PaneMark => {
            v.paused = !v.paused;
            v.frozen_at = if v.paused { v.store.now_ms() } else { None };
            if !v.paused {
                v.refresh_flags();
            }
        }
        Action::NicsMode => {
            v.mode = v.mode.next();
            v.scroll = 0;
        }
        Action::NextItem | Action::Right | Action::PrevItem | Action::Left => {
            let forward = matches!(action, Action::NextItem | Action::Right);
            match v.mode {
                Mode::Node | Mode::Fleet => {
                    v.node = move_in(&shown, v.node, if forward { 1 } else { -1 }, true);
                    if v.mode == Mode::Node {
                        v.scroll = 0;
                    }
                }
                Mode::Rail => v.rail = step(v.rail, v.rails().len(), forward),
            }
        }
        _ => return None,
    }
    Some(vec![])
}
