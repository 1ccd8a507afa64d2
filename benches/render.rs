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
        Msg::PanesOpened {
            fleet: "bench".into(),
            tiles,
        },
    );
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
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
