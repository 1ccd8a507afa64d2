//! The NICs view's state (its share of `update` is update.rs): samplers on every node of the
//! current fleet (started with Enter), their records ingested into the telemetry store
//! as they arrive, the imbalance flags, and what the operator looks at: a mode (one
//! node's NICs, one rail across the nodes, the fleet's totals), the node or rail in it,
//! a time span, pause (the window stops moving), and how far the lists are scrolled.

pub mod msg;
pub mod update;
pub mod view;

pub use msg::Msg;
pub use update::{act, ingest, refigure, update};

use crate::telemetry::imbalance::{detect_in, Flag, Rule};
use crate::telemetry::layout::Classifier;
use crate::telemetry::series::Telemetry;

/// The spans `z` steps through (ms): 1 min, 5 min, 15 min, 1 h.
pub const SPANS_MS: [u32; 4] = [60_000, 300_000, 900_000, 3_600_000];

/// What the NICs view shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// One node: a chart per NIC, its rate table, its GPU strip.
    #[default]
    Node,
    /// One rail (data NIC index) across every node: a dataset per node.
    Rail,
    /// The fleet's total over time and each node's total.
    Fleet,
}

impl Mode {
    pub const ALL: [Mode; 3] = [Mode::Node, Mode::Rail, Mode::Fleet];

    pub fn next(self) -> Mode {
        match self {
            Mode::Node => Mode::Rail,
            Mode::Rail => Mode::Fleet,
            Mode::Fleet => Mode::Node,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Mode::Node => "per node",
            Mode::Rail => "per rail",
            Mode::Fleet => "fleet",
        }
    }
}

/// The least store time between two runs of the imbalance rule while records arrive.
pub const FLAGS_EVERY_MS: u32 = 500;

#[derive(Debug, Clone, Default)]
pub struct NicsView {
    /// The fleet being sampled, and its node names by index.
    pub fleet: Option<String>,
    pub nodes: Vec<String>,
    pub store: Telemetry,
    /// Why a node's sampler is down, by node index.
    pub down: Vec<Option<String>>,
    /// Index into [`SPANS_MS`].
    pub span: usize,
    /// Frozen: records still come in, the window and the flags do not move.
    pub paused: bool,
    /// The end of the window while paused (store time, ms).
    pub frozen_at: Option<u32>,
    pub flags: Vec<Flag>,
    /// Store time of the newest sample the flags were worked out with.
    pub flags_at_ms: Option<u32>,
    /// How many times the rule ran (tests read it).
    pub rule_runs: u64,
    pub mode: Mode,
    /// The node of the per-node mode, also the one selected in the fleet mode.
    pub node: usize,
    /// The rail of the rail mode (index into [`NicsView::rails`]).
    pub rail: usize,
    /// The first NIC shown (per node) or the first node row (per rail).
    pub scroll: usize,
    /// The fleet mode's figures, worked out once per second of store time (or when the
    /// window, chart width or shown nodes change), not in every frame: at 1024 nodes they
    /// take milliseconds, a frame must take less than one.
    pub fleet_memo: FleetMemo,
}

/// A node's total rx and tx per braille column, and their now / average / peak.
#[derive(Debug, Clone)]
pub struct NodeTotals {
    pub rx: Vec<f32>,
    pub tx: Vec<f32>,
    pub srx: crate::telemetry::series::WindowStats,
    pub stx: crate::telemetry::series::WindowStats,
}

/// What the fleet figures were worked out for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetKey {
    pub second: u32,
    pub span: u32,
    pub columns: usize,
    pub shown: Vec<usize>,
    pub down: usize,
}

/// The fleet mode's figures: each shown node's totals (in `shown` order) and the
/// fleet's sums.
#[derive(Debug, Clone)]
pub struct FleetFigures {
    pub key: FleetKey,
    pub per_node: Vec<Option<NodeTotals>>,
    pub rx: Vec<f32>,
    pub tx: Vec<f32>,
    /// Nodes whose sampler runs.
    pub up: usize,
}

/// The last [`FleetFigures`], kept across frames (the view draws from `&State`), and the
/// chart's width in the last frame (so `update` can work the next ones out ahead of it).
#[derive(Debug, Default)]
pub struct FleetMemo(
    pub std::cell::RefCell<Option<std::rc::Rc<FleetFigures>>>,
    pub std::cell::Cell<usize>,
);

impl Clone for FleetMemo {
    fn clone(&self) -> FleetMemo {
        FleetMemo(
            std::cell::RefCell::new(self.0.borrow().clone()),
            std::cell::Cell::new(self.1.get()),
        )
    }
}

impl FleetMemo {
    /// The figures for `key`: the kept ones when they were worked out for it, else
    /// `work()`'s, kept.
    pub fn get(
        &self,
        key: FleetKey,
        work: impl FnOnce(FleetKey) -> FleetFigures,
    ) -> std::rc::Rc<FleetFigures> {
        if let Some(f) = self.0.borrow().as_ref().filter(|f| f.key == key) {
            return f.clone();
        }
        let f = std::rc::Rc::new(work(key));
        *self.0.borrow_mut() = Some(f.clone());
        f
    }
}

impl NicsView {
    pub fn span_ms(&self) -> u32 {
        SPANS_MS[self.span % SPANS_MS.len()]
    }

    /// The window on screen: `(from, to]` in store ms, ending at the newest sample (or
    /// where pause froze it).
    pub fn window(&self) -> (u32, u32) {
        let to = self.frozen_at.or(self.store.now_ms()).unwrap_or(0);
        (to.saturating_sub(self.span_ms()), to)
    }

    /// The node indices (every node of the fleet).
    pub fn node_indices(&self) -> Vec<usize> {
        (0..self.nodes.len()).collect()
    }

    /// The rails of the fleet (data NIC labels, natural order).
    pub fn rails(&self) -> Vec<crate::telemetry::Device> {
        Classifier::auto().rails(&self.store, &self.node_indices())
    }

    /// The nodes the `/` filter lets through (its text in the name, any case; all of
    /// them for an empty filter), in order.
    pub fn shown(&self, filter: &str) -> Vec<usize> {
        let f = filter.trim().to_lowercase();
        (0..self.nodes.len())
            .filter(|&i| f.is_empty() || self.nodes[i].to_lowercase().contains(&f))
            .collect()
    }

    /// How many rows the current mode's list has: the node's charted NICs, or the nodes
    /// shown.
    pub fn rows(&self, filter: &str) -> usize {
        match self.mode {
            Mode::Node => Classifier::auto().charted(&self.store, self.node).len(),
            Mode::Rail | Mode::Fleet => self.shown(filter).len(),
        }
    }

    /// After the filter changed: the selected node is one shown (if any is), lists start
    /// at the top.
    pub fn filter_changed(&mut self, filter: &str) {
        let shown = self.shown(filter);
        if !shown.contains(&self.node) {
            self.node = shown.first().copied().unwrap_or(self.node);
        }
        self.scroll = 0;
    }

    fn refresh_flags(&mut self) {
        let nodes = self.node_indices();
        self.flags = detect_in(&self.store, &nodes, &Classifier::auto(), &Rule::default());
        self.flags_at_ms = self.store.now_ms();
        self.rule_runs += 1;
    }

    /// Work the flags out again once the store's time has moved [`FLAGS_EVERY_MS`] past
    /// the last time: every node's record would otherwise rerun the rule over the whole
    /// fleet (256 nodes at 1 Hz: 256 runs of ~2 ms a second, half a core and key-to-screen
    /// stalls of half a second, found by `benches/cockpit_load.rs`).
    fn refresh_flags_when_due(&mut self) {
        let due = match (self.flags_at_ms, self.store.now_ms()) {
            (Some(at), Some(now)) => now.saturating_sub(at) >= FLAGS_EVERY_MS || now < at,
            _ => true,
        };
        if due {
            self.refresh_flags();
        }
    }
}

/// One step forward or back in a list of `n`, wrapping.
fn step(i: usize, n: usize, forward: bool) -> usize {
    match (n, forward) {
        (0, _) => 0,
        (n, true) => (i + 1) % n,
        (n, false) => (i % n + n - 1) % n,
    }
}

/// The node `by` places from `node` among `shown` (clamped, or wrapping by one).
fn move_in(shown: &[usize], node: usize, by: isize, wrap: bool) -> usize {
    if shown.is_empty() {
        return node;
    }
    let at = shown.iter().position(|&i| i == node);
    let n = shown.len();
    let at = match (at, wrap) {
        (Some(a), true) => step(a, n, by > 0),
        (Some(a), false) => (a as isize + by).clamp(0, n as isize - 1) as usize,
        // Not shown (filtered out): start from the first.
        (None, _) => 0,
    };
    shown[at]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::service::TelemetryEvent;
    use crate::tui::keymap::Keymap;
    use crate::tui::state::Msg;
    use crate::tui::state::{Command, State};
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
            Msg::Nics(crate::tui::nics::Msg::Sample(Box::new(TelemetryEvent::Down {
                node: 0,
                error: "gone".into(),
                retry_in: None,
            }))),
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

    fn key(s: &mut State, c: char) -> Vec<Command> {
        update(
            s,
            Msg::Key(crossterm::event::KeyEvent::new(
                crossterm::event::KeyCode::Char(c),
                crossterm::event::KeyModifiers::NONE,
            )),
        )
    }

    /// Records `from..=to` of a constructed 3-node fleet (eth0 control, eth1..3 data),
    /// sent through `update` as a sampler's events; node 1's eth2 runs at a tenth.
    fn feed(s: &mut State, synth: &mut crate::telemetry::synth::Synth, from: u64, to: u64) {
        for seq in from..=to {
            for node in 0..3 {
                let record = synth.record(
                    node,
                    seq,
                    |nic| match (node, nic) {
                        (_, 0) => (1e6, 1e6),
                        (1, 2) => (8e8, 8e8),
                        _ => (8e9, 8e9),
                    },
                    |_| (90.0, 600.0),
                );
                let arrived_unix_ns = record.t_ns;
                update(
                    s,
                    Msg::Nics(crate::tui::nics::Msg::Sample(Box::new(TelemetryEvent::Record {
                        node,
                        record,
                        arrived_unix_ns,
                    }))),
                );
            }
        }
    }

    fn lab() -> (State, crate::telemetry::synth::Synth) {
        let mut s = State::new(Keymap::defaults(), vec![], "dark".into());
        s.view = super::super::state::View::Nics;
        let nodes: Vec<String> = (0..3).map(|i| format!("lab-{i}")).collect();
        update(
            &mut s,
            Msg::Nics(crate::tui::nics::Msg::Started {
                fleet: "lab".into(),
                nodes,
            }),
        );
        let mut synth = crate::telemetry::synth::Synth::new(3, &["eth0", "eth1", "eth2", "eth3"], 2, 1000);
        for node in 0..3 {
            let hello = synth.hello(node);
            update(
                &mut s,
                Msg::Nics(crate::tui::nics::Msg::Sample(Box::new(TelemetryEvent::Hello {
                    node,
                    hello,
                }))),
            );
        }
        feed(&mut s, &mut synth, 1, 10);
        (s, synth)
    }

    #[test]
    fn modes_cycle_and_each_keeps_its_own_place() {
        let (mut s, _) = lab();
        assert_eq!(s.nics.mode, Mode::Node);
        assert_eq!(s.nics.rails().len(), 3, "eth1..eth3; eth0 is control");
        // Per node: n / N (and the arrows) step through the nodes, wrapping.
        key(&mut s, 'n');
        assert_eq!(s.nics.node, 1);
        key(&mut s, 'N');
        key(&mut s, 'N');
        assert_eq!(s.nics.node, 2, "wraps backwards");
        key(&mut s, 'l');
        assert_eq!(s.nics.node, 0, "right is next, wrapping forwards");
        // j scrolls the node's NICs, no further than the last of its 4.
        for _ in 0..10 {
            key(&mut s, 'j');
        }
        assert_eq!(s.nics.scroll, 3);
        key(&mut s, 'g');
        assert_eq!(s.nics.scroll, 0);
        key(&mut s, 'j');
        // v: per rail; the list starts at the top again, n steps through the rails.
        key(&mut s, 'v');
        assert_eq!((s.nics.mode, s.nics.scroll), (Mode::Rail, 0));
        key(&mut s, 'n');
        key(&mut s, 'n');
        assert_eq!(s.nics.rail, 2);
        key(&mut s, 'n');
        assert_eq!(s.nics.rail, 0, "3 rails, wrapping");
        assert_eq!(s.nics.node, 0, "the node stays");
        // v: the fleet; j / k move the selected node (clamped), G to the last.
        key(&mut s, 'v');
        assert_eq!(s.nics.mode, Mode::Fleet);
        key(&mut s, 'j');
        assert_eq!(s.nics.node, 1);
        key(&mut s, 'G');
        key(&mut s, 'j');
        assert_eq!(s.nics.node, 2);
        // Back to per node, on the node selected in the fleet.
        key(&mut s, 'v');
        assert_eq!((s.nics.mode, s.nics.node), (Mode::Node, 2));
        assert!(s.status.is_none(), "no key complained");
    }

    #[test]
    fn span_and_pause_work_in_every_mode() {
        let (mut s, mut synth) = lab();
        let mut seq = 10;
        for mode in Mode::ALL {
            assert_eq!(s.nics.mode, mode);
            let span = s.nics.span;
            key(&mut s, 'z');
            assert_eq!(s.nics.span, (span + 1) % SPANS_MS.len());
            let (from, to) = s.nics.window();
            assert_eq!(to - from.min(to), SPANS_MS[s.nics.span].min(to));
            // Paused: records still come in, the window and the flags stay.
            key(&mut s, 'm');
            assert!(s.nics.paused);
            let flags = s.nics.flags.clone();
            let window = s.nics.window();
            s.dirty = false;
            feed(&mut s, &mut synth, seq + 1, seq + 5);
            seq += 5;
            assert_eq!(s.nics.window(), window, "frozen");
            assert_eq!(s.nics.flags, flags);
            assert!(!s.dirty, "nothing to redraw while paused");
            assert_eq!(s.nics.store.node(0).unwrap().records, seq, "records kept coming");
            // Unpaused: the window jumps to the newest sample.
            key(&mut s, 'm');
            assert!(!s.nics.paused);
            assert_eq!(s.nics.window().1, s.nics.store.now_ms().unwrap());
            assert!(s.nics.window().1 > window.1);
            key(&mut s, 'v');
        }
    }

    #[test]
    fn the_fleet_figures_are_worked_out_once_a_second_ahead_of_the_frame() {
        let (mut s, mut synth) = lab();
        key(&mut s, 'v');
        key(&mut s, 'v');
        assert_eq!(s.nics.mode, Mode::Fleet);
        // Nothing is worked out before a frame has said how wide the chart is.
        assert!(s.nics.fleet_memo.0.borrow().is_none());
        let theme = crate::tui::theme::Theme::default_theme();
        let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(160, 48)).unwrap();
        t.draw(|f| crate::tui::views::draw(&s, &theme, f)).unwrap();
        let drawn = s.nics.fleet_memo.0.borrow().clone().unwrap();
        assert_eq!(drawn.up, 3);
        assert!(drawn.rx.iter().any(|v| v.is_finite()));
        // The next second's records: update works the figures out, the frame only draws.
        feed(&mut s, &mut synth, 11, 11);
        let ahead = s.nics.fleet_memo.0.borrow().clone().unwrap();
        assert_eq!(ahead.key.second, drawn.key.second + 1);
        assert_eq!(ahead.key.columns, drawn.key.columns);
        t.draw(|f| crate::tui::views::draw(&s, &theme, f)).unwrap();
        assert!(std::rc::Rc::ptr_eq(
            &ahead,
            s.nics.fleet_memo.0.borrow().as_ref().unwrap()
        ));
        // A filter is another set of nodes: worked out again for it.
        for c in "/lab-2\n".chars() {
            key(&mut s, c);
        }
        t.draw(|f| crate::tui::views::draw(&s, &theme, f)).unwrap();
        assert_eq!(s.nics.fleet_memo.0.borrow().as_ref().unwrap().key.shown, vec![2]);
    }

    #[test]
    fn the_rule_runs_once_per_round_of_records_not_once_per_node() {
        let (mut s, mut synth) = lab();
        let before = s.nics.rule_runs;
        feed(&mut s, &mut synth, 11, 20);
        // 10 rounds of 3 nodes at 1 s: one run per round, not one per record (30).
        assert_eq!(s.nics.rule_runs - before, 10);
        // A node that slows down is flagged by the next round.
        let slow = |s: &State| s.nics.flags.iter().any(|f| f.node == 1);
        assert!(slow(&s), "{:?}", s.nics.flags);
    }

    #[test]
    fn the_slow_nic_is_flagged_in_every_mode() {
        let (mut s, _) = lab();
        let want = |s: &State| {
            s.nics
                .flags
                .iter()
                .any(|f| f.node == 1 && f.device == Some(crate::telemetry::Device::nic("eth2")))
        };
        for _ in Mode::ALL {
            assert!(want(&s), "{:?}: {:?}", s.nics.mode, s.nics.flags);
            key(&mut s, 'v');
        }
    }

    #[test]
    fn mode_keys_are_hinted_in_the_nics_view_only() {
        use super::super::state::View;
        let km = Keymap::defaults();
        let nics = km.hints_in(crate::tui::action::Context::Global, View::Nics);
        for want in [("v", "mode"), ("n", "next"), ("z", "span"), ("m", "pause")] {
            assert!(
                nics.contains(&(want.0.to_string(), want.1)),
                "{want:?} in {nics:?}"
            );
        }
        let offers = km.hints_in(crate::tui::action::Context::Global, View::Offers);
        assert!(
            offers
                .iter()
                .all(|(_, l)| !matches!(*l, "mode" | "next" | "span" | "pause" | "type")),
            "{offers:?}"
        );
        let panes = km.hints_in(crate::tui::action::Context::Global, View::Panes);
        assert!(panes.contains(&("i".to_string(), "type")), "{panes:?}");
    }

    #[test]
    fn the_filter_narrows_every_mode_to_the_matching_nodes() {
        let (mut s, _) = lab();
        for c in "/lab-2".chars() {
            key(&mut s, c);
        }
        update(
            &mut s,
            Msg::Key(crossterm::event::KeyEvent::new(
                crossterm::event::KeyCode::Enter,
                crossterm::event::KeyModifiers::NONE,
            )),
        );
        assert_eq!(s.filter(), "lab-2");
        assert_eq!(s.nics.shown(s.filter()), vec![2]);
        assert_eq!(s.nics.node, 2, "the selection moved to the one node shown");
        key(&mut s, 'n');
        assert_eq!(s.nics.node, 2, "n stays among the nodes shown");
        key(&mut s, 'v');
        assert_eq!(s.nics.rows(s.filter()), 1, "the rail table lists one node");
        key(&mut s, 'v');
        key(&mut s, 'k');
        assert_eq!(s.nics.node, 2);
        // Cleared: all three again, the selection stays.
        update(
            &mut s,
            Msg::Key(crossterm::event::KeyEvent::new(
                crossterm::event::KeyCode::Char('l'),
                crossterm::event::KeyModifiers::CONTROL,
            )),
        );
        assert_eq!(s.nics.shown(s.filter()).len(), 3);
        key(&mut s, 'k');
        assert_eq!(s.nics.node, 1);
    }
}
