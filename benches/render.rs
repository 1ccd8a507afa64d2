//! Full-frame render time of the busiest screens at 160x48 and 250x70.
//!
//! Two measures per screen:
//! * `full`: clear + draw through the crossterm backend into a sink, so every cell is
//!   written as escape sequences (a first frame, a resize, a resume);
//! * `steady`: draw after a one-key state change, ratatui's diff writing only what changed.
//!
//! Run: `cargo bench --bench render`. Results go in BENCHMARKS.md.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use flightdeck::tui::keymap::Keymap;
use flightdeck::tui::state::{Msg, State};
use flightdeck::tui::theme::{Theme, EMBEDDED};
use flightdeck::tui::update::update;
use flightdeck::tui::views;
use ratatui::backend::CrosstermBackend;
use ratatui::layout::Rect;
use ratatui::{Terminal, TerminalOptions, Viewport};
use std::hint::black_box;

fn state_after(keys: &str) -> State {
    let themes = EMBEDDED.iter().map(|(n, _)| n.to_string()).collect();
    let mut s = State::new(Keymap::defaults(), themes, "dark".into());
    for c in keys.chars() {
        let code = if c == '\t' { KeyCode::Tab } else { KeyCode::Char(c) };
        update(&mut s, Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)));
    }
    s
}

/// The Panes view with `n` live-looking terminals (each fed a screenful of output).
fn panes_state(n: usize) -> State {
    let mut s = state_after("");
    let tiles = (0..n)
        .map(|i| {
            let screen = flightdeck::term::new_screen(24, 80);
            let mut out = String::new();
            for l in 0..30 {
                out.push_str(&format!(
                    "\x1b[32mnode{i}\x1b[0m step {l}: loss {:.4} tok/s 2254 \x1b[1mTFLOPs 954.4\x1b[0m\r\n",
                    1.0 / (l as f64 + 1.0)
                ));
            }
            screen.write().unwrap().process(out.as_bytes());
            flightdeck::tui::panes::PaneTile {
                id: i,
                node: format!("node-{i}"),
                host: format!("10.0.0.{i}"),
                state: flightdeck::term::session::PaneState::Connected,
                marked: false,
                screen,
                size: (80, 24),
            }
        })
        .collect();
    update(
        &mut s,
        Msg::Panes(flightdeck::tui::panes::Msg::Opened {
            fleet: "bench".into(),
            tiles,
        }),
    );
    s
}

/// The NICs view on a constructed fleet (flightdeck::telemetry::synth) of 8 nodes, each
/// with 9 NICs (a control gVNIC and 8 data gVNICs, as an a3-megagpu-8g) and 8 GPUs, an
/// hour of records at 1 s (every ring full), the span at 1 h, in mode `mode` presses of v.
fn nics_state(mode: usize) -> State {
    nics_fleet_of(8, mode)
}

/// Like [`nics_state`] over `n` nodes, the rings as long as the store keeps for that
/// fleet (`Telemetry::for_fleet`: an hour up to ~180 nodes, 682 points at 1024).
fn nics_fleet_of(n: usize, mode: usize) -> State {
    use flightdeck::telemetry::synth::Synth;
    let mut s = state_after("7");
    let nodes: Vec<String> = (0..n).map(|i| format!("a3mega-{i}")).collect();
    update(
        &mut s,
        Msg::Nics(flightdeck::tui::nics::Msg::Started {
            fleet: "bench".into(),
            nodes,
        }),
    );
    let nics = [
        "enp0s12", "enp6s0", "enp7s0", "enp13s0", "enp14s0", "enp134s0", "enp135s0", "enp141s0", "enp142s0",
    ];
    let mut synth = Synth::new(n, &nics, 8, 1000);
    synth.route = Some("enp0s12".into());
    let records = s.nics.store.capacity() as u64;
    synth.fill(
        &mut s.nics.store,
        records,
        |node, nic, seq| {
            let saw = ((seq + (node * 13 + nic * 7) as u64) % 60) as f64 / 60.0;
            if nic == 0 {
                (1e6 * (1.0 + saw), 5e5)
            } else {
                (1.5e11 + 5e10 * saw, 1.4e11 + 6e10 * saw)
            }
        },
        |_, g, seq| {
            let saw = ((seq + u64::from(g) * 9) % 40) as f32 / 40.0;
            (50.0 + 50.0 * saw, 300.0 + 400.0 * saw)
        },
        |node, seq| node == 3 && seq % 600 == 0,
    );
    let keys = format!("zzz{}", "v".repeat(mode));
    for c in keys.chars() {
        update(
            &mut s,
            Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)),
        );
    }
    s
}

fn terminal(w: u16, h: u16) -> Terminal<CrosstermBackend<std::io::Sink>> {
    Terminal::with_options(
        CrosstermBackend::new(std::io::sink()),
        TerminalOptions {
            viewport: Viewport::Fixed(Rect::new(0, 0, w, h)),
        },
    )
    .unwrap()
}

fn bench(c: &mut Criterion) {
    let theme = Theme::default_theme();
    // The busiest screens today: the help overlay over a view, and the palette open
    // with its completion list over a filtered view.
    let screens = [
        ("help", state_after("?")),
        ("palette", state_after("/gpu=H100\n:n\t")),
        ("offers+detail", state_after("d")),
        ("panes-16", panes_state(16)),
        ("panes-1024", panes_state(1024)),
        ("nics-node-8x9-1h", nics_state(0)),
        ("nics-rail-8x9-1h", nics_state(1)),
        ("nics-fleet-8x9-1h", nics_state(2)),
        ("nics-fleet-1024x9", nics_fleet_of(1024, 2)),
    ];
    let mut group = c.benchmark_group("frame");
    for (w, h) in [(160u16, 48u16), (250, 70)] {
        for (name, state) in &screens {
            // Lay the state out for this size (pane tiles follow the terminal).
            let mut state = state.clone();
            update(&mut state, Msg::Resize(w, h));
            let state = &state;
            let mut t = terminal(w, h);
            group.bench_with_input(
                BenchmarkId::new(format!("full/{name}"), format!("{w}x{h}")),
                state,
                |b, s| {
                    b.iter(|| {
                        t.clear().unwrap();
                        t.draw(|f| views::draw(black_box(s), &theme, f)).unwrap();
                    })
                },
            );
            let mut t = terminal(w, h);
            let mut other = state.clone();
            update(
                &mut other,
                Msg::Key(KeyEvent::new(KeyCode::Char('j'), KeyModifiers::NONE)),
            );
            let pair = [state.clone(), other];
            let mut i = 0usize;
            group.bench_with_input(
                BenchmarkId::new(format!("steady/{name}"), format!("{w}x{h}")),
                &pair,
                |b, p| {
                    b.iter(|| {
                        i += 1;
                        t.draw(|f| views::draw(black_box(&p[i % 2]), &theme, f)).unwrap();
                    })
                },
            );
        }
    }
    // The fleet figures worked out again (as once per second of store time): the frame
    // that pays for them.
    for (w, h) in [(160u16, 48u16)] {
        for (name, state) in screens.iter().filter(|(n, _)| n.starts_with("nics-fleet")) {
            let mut state = state.clone();
            update(&mut state, Msg::Resize(w, h));
            let mut t = terminal(w, h);
            group.bench_with_input(
                BenchmarkId::new(format!("refigure/{name}"), format!("{w}x{h}")),
                &state,
                |b, s| {
                    b.iter(|| {
                        s.nics.fleet_memo.0.borrow_mut().take();
                        t.draw(|f| views::draw(black_box(s), &theme, f)).unwrap();
                    })
                },
            );
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
