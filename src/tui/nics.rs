//! The NICs view's state and its share of `update`: samplers on every node of the
//! current fleet (started with Enter), their records ingested into the telemetry store
//! as they arrive, a time span to look at, pause, and the imbalance flags.

use super::action::Action;
use super::state::{Command, State, StatusMessage};
use super::theme::Tone;
use crate::telemetry::imbalance::{detect_in, Flag, Rule};
use crate::telemetry::layout::Classifier;
use crate::telemetry::series::Telemetry;
use crate::telemetry::service::TelemetryEvent;

/// The spans `z` steps through (ms): 1 min, 5 min, 15 min, 1 h.
pub const SPANS_MS: [u32; 4] = [60_000, 300_000, 900_000, 3_600_000];

#[derive(Debug, Clone, Default)]
pub struct NicsView {
    /// The fleet being sampled, and its node names by index.
    pub fleet: Option<String>,
    pub nodes: Vec<String>,
    pub store: Telemetry,
    /// Why a node's sampler is down, by node index.
    pub down: Vec<Option<String>>,
    pub span: usize,
    /// Frozen: records still come in, the view does not move.
    pub paused: bool,
    pub flags: Vec<Flag>,
    pub scroll: usize,
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
            let nodes: Vec<usize> = (0..v.nodes.len()).collect();
            v.flags = detect_in(&v.store, &nodes, &Classifier::auto(), &Rule::default());
        }
        TelemetryEvent::Down { node, error, .. } => {
            if let Some(d) = v.down.get_mut(node) {
                *d = Some(error);
            }
        }
        TelemetryEvent::Stderr { .. } => return,
    }
    state.dirty |= state.view == super::state::View::Nics && !state.nics.paused;
}

/// Global-context actions in the NICs view. `None`: not a NICs action.
pub fn act(state: &mut State, action: Action) -> Option<Vec<Command>> {
    match action {
        Action::Select | Action::Reload => {
            let Some(fleet) = super::fleets::current(state).map(|f| f.name.clone()) else {
                state.status = Some(StatusMessage {
                    text: "no fleet: select one in Fleets (2) first".into(),
                    tone: Tone::Warn,
                });
                return Some(vec![]);
            };
            return Some(vec![Command::StartTelemetry(fleet)]);
        }
        Action::PaneZoom => state.nics.span = (state.nics.span + 1) % SPANS_MS.len(),
        Action::PaneMark => state.nics.paused = !state.nics.paused,
        Action::Up => state.nics.scroll = state.nics.scroll.saturating_sub(1),
        Action::Down => state.nics.scroll += 1,
        Action::Top => state.nics.scroll = 0,
        _ => return None,
    }
    Some(vec![])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::keymap::Keymap;
    use crate::tui::state::Msg;
    use crate::tui::update::update;

    #[test]
    fn recorded_samples_become_rates_and_enter_starts_sampling() {
        let mut s = State::new(Keymap::defaults(), vec![], "dark".into());
        s.nics.nodes = vec!["tb-0".into()];
        s.nics.down = vec![None];
        // A recorded sampler capture (see tests/fixtures/telemetry/README.md).
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/telemetry/sampler-testbed-node.txt"
        ))
        .unwrap();
        let n = s.nics.store.ingest_text(0, &text);
        assert!(n > 2, "records ingested");
        assert!(s.nics.store.node(0).is_some_and(|n| !n.devices().is_empty()));
        update(
            &mut s,
            Msg::Telemetry(Box::new(TelemetryEvent::Down {
                node: 0,
                error: "gone".into(),
                retry_in: None,
            })),
        );
        assert_eq!(s.nics.down[0].as_deref(), Some("gone"));
        update(
            &mut s,
            Msg::Key(crossterm::event::KeyEvent::new(
                crossterm::event::KeyCode::Char('7'),
                crossterm::event::KeyModifiers::NONE,
            )),
        );
        let cmds = update(
            &mut s,
            Msg::Key(crossterm::event::KeyEvent::new(
                crossterm::event::KeyCode::Enter,
                crossterm::event::KeyModifiers::NONE,
            )),
        );
        assert!(cmds.is_empty() && s.status.is_some(), "no fleet yet: says so");
    }
}
