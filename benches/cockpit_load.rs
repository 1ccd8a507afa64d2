//! The cockpit under load: key-to-screen latency and peak memory while 64 panes receive
//! 10 MB/s together and 256 nodes send telemetry at 1 Hz.
//!
//! It runs flightdeck's own event loop (`tui::app::event_loop`: the same batching,
//! `update`, frame pacing and drawing as the cockpit) on a crossterm terminal writing into
//! a sink, in-process. The load is replayed, not live: 64 pane screens are fed by tasks
//! that write recorded output (the H200 training log and nccl-tests tables from
//! tests/fixtures) into each pane's terminal emulator and signal the loop exactly as a
//! pane's SSH session does (`feed` + a `try_send` of `PaneEvent::Output`); 256 nodes'
//! telemetry records come from `telemetry::synth` (10 NICs + 8 GPUs each, as an
//! a3-megagpu-8g) through `Msg::Nics`, as the samplers' forwarder sends them, after
//! the rings were filled with an hour of history (the memory a long session holds).
//!
//! Keys are sent at 20 to 60 ms intervals (a fast typist or a held key); a key's latency
//! runs from the moment it is queued to the end of the first frame drawn after `update`
//! applied it (the frame that shows it), measured through the loop's probe.
//!
//! Run: `cargo bench --bench cockpit_load -- [SECONDS]` (default 30 per scenario);
//! `COCKPIT_LOAD_NODES=1024` for another fleet size.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use flightdeck::paths::Paths;
use flightdeck::telemetry::service::TelemetryEvent;
use flightdeck::telemetry::synth::Synth;
use flightdeck::term::session::{PaneEvent, PaneState};
use flightdeck::tui::app::{event_loop, AppOptions, Event, Mark};
use flightdeck::tui::keymap::Keymap;
use flightdeck::tui::panes::PaneTile;
use flightdeck::tui::services::ServiceEvent;
use flightdeck::tui::state::{Msg, State};
use flightdeck::tui::theme::{Theme, EMBEDDED};
use flightdeck::tui::update::update;
use ratatui::backend::CrosstermBackend;
use ratatui::layout::Rect;
use ratatui::{Terminal, TerminalOptions, Viewport};
use std::collections::VecDeque;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

const PANES: usize = 64;
/// Nodes of telemetry: `COCKPIT_LOAD_NODES`, else 256.
fn node_count() -> usize {
    std::env::var("COCKPIT_LOAD_NODES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(256)
}
const PANE_BYTES_PER_S: u64 = 10 * 1000 * 1000;
const TICK: Duration = Duration::from_millis(25);
const NICS: [&str; 10] = [
    "lo", "enp0s12", "enp6s0", "enp7s0", "enp13s0", "enp14s0", "enp134s0", "enp135s0", "enp141s0", "enp142s0",
];

/// A sink that counts what the terminal was sent.
#[derive(Clone, Default)]
struct Counting(Arc<AtomicU64>);

impl Write for Counting {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.fetch_add(buf.len() as u64, Ordering::Relaxed);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Recorded output, as a node's shell would print it (CR LF), with colour as tools add it.
fn recorded_text() -> Vec<u8> {
    let root = env!("CARGO_MANIFEST_DIR");
    let mut text = Vec::new();
    for f in [
        "tests/fixtures/jobs/tiny-gpt-h200x2.log",
        "tests/fixtures/nccl/h200x2-all_reduce.txt",
    ] {
        let path = format!("{root}/{f}");
        let body = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        for (i, line) in body.lines().enumerate() {
            if i % 10 == 0 {
                text.extend_from_slice(format!("\x1b[1;32m{line}\x1b[0m\r\n").as_bytes());
            } else {
                text.extend_from_slice(line.as_bytes());
                text.extend_from_slice(b"\r\n");
            }
        }
    }
    text
}

fn paths(dir: &std::path::Path) -> Paths {
    Paths::resolve(|k| (k == "FLIGHTDECK_HOME").then(|| dir.to_path_buf())).expect("paths")
}

struct Figures {
    latencies_ms: Vec<f64>,
    frames: u64,
    pane_bytes: u64,
    telemetry_records: u64,
    output_signals_dropped: u64,
    cpu_s: f64,
    wall_s: f64,
    term_bytes: u64,
}

fn cpu_seconds() -> f64 {
    let mut u = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a rusage into the pointer it is given.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, u.as_mut_ptr()) };
    // SAFETY: initialised by getrusage (or zeroed).
    let u = unsafe { u.assume_init() };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1).map(|v| v.parse().unwrap_or(0)))
        })
        .unwrap_or(0)
}

/// One scenario: `key` pressed in the view `view_keys` lead to, at `size`, for `secs`
/// seconds.
async fn scenario(name: &str, view_keys: &str, key: char, size: (u16, u16), secs: u64) {
    let dir = tempfile::tempdir().expect("temp dir");
    let themes = EMBEDDED.iter().map(|(n, _)| n.to_string()).collect();
    let mut state = State::new(Keymap::defaults(), themes, "dark".into());
    state.size = size;

    // 64 panes, tiled as the Panes view lays them out.
    let screens: Vec<_> = (0..PANES).map(|_| flightdeck::term::new_screen(24, 80)).collect();
    let tiles = screens
        .iter()
        .enumerate()
        .map(|(i, screen)| PaneTile {
            id: i,
            node: format!("a3mega-{i}"),
            host: format!("10.0.{}.{}", i / 250, i % 250 + 2),
            state: PaneState::Connected,
            marked: false,
            screen: screen.clone(),
            size: (80, 24),
        })
        .collect();
    for cmd in update(
        &mut state,
        Msg::Panes(flightdeck::tui::panes::Msg::Opened {
            fleet: "load".into(),
            tiles,
        }),
    ) {
        // The tiles' sizes: applied to the screens directly (no sessions run here).
        if let flightdeck::tui::state::Command::PaneResize { id, cols, rows } = cmd {
            screens[id].write().unwrap().set_size(rows, cols);
        }
    }
    // 256 nodes of telemetry (or COCKPIT_LOAD_NODES), the rings already full (an hour up
    // to ~180 nodes, less past that: `Telemetry::for_fleet`).
    let nodes: Vec<String> = (0..node_count()).map(|i| format!("a3mega-{i}")).collect();
    update(
        &mut state,
        Msg::Nics(flightdeck::tui::nics::Msg::Started {
            fleet: "load".into(),
            nodes,
        }),
    );
    let mut synth = Synth::new(node_count(), &NICS, 8, 1000);
    synth.route = Some("enp0s12".into());
    let rate = |node: usize, nic: usize, seq: u64| {
        let saw = ((seq + (node * 13 + nic * 7) as u64) % 60) as f64 / 60.0;
        if nic < 2 {
            (1e6 * (1.0 + saw), 5e5)
        } else {
            (1.5e11 + 5e10 * saw, 1.4e11 + 6e10 * saw)
        }
    };
    let gpu = |_: usize, g: u32, seq: u64| {
        let saw = ((seq + u64::from(g) * 9) % 40) as f32 / 40.0;
        (50.0 + 50.0 * saw, 300.0 + 400.0 * saw)
    };
    let records = state.nics.store.capacity() as u64;
    synth.fill(&mut state.nics.store, records, rate, gpu, |_, _| false);
    for c in view_keys.chars() {
        update(
            &mut state,
            Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)),
        );
    }
    let rss_before_kib = status_kib("VmRSS:");

    let sink = Counting::default();
    let mut tui = Terminal::with_options(
        CrosstermBackend::new(sink.clone()),
        TerminalOptions {
            viewport: Viewport::Fixed(Rect::new(0, 0, size.0, size.1)),
        },
    )
    .expect("terminal");
    let (tx, rx) = mpsc::channel::<Event>(1024);
    let stop = Arc::new(AtomicBool::new(false));
    let pane_bytes = Arc::new(AtomicU64::new(0));
    let dropped = Arc::new(AtomicU64::new(0));
    let records = Arc::new(AtomicU64::new(0));

    // Pane output: each pane its share of 10 MB/s, in pieces every 25 ms, from its own
    // place in the recording.
    let text = Arc::new(recorded_text());
    let per_tick = (PANE_BYTES_PER_S / PANES as u64 * TICK.as_millis() as u64 / 1000) as usize;
    for (id, screen) in screens.iter().enumerate() {
        let (tx, text, screen, stop, pane_bytes, dropped) = (
            tx.clone(),
            text.clone(),
            screen.clone(),
            stop.clone(),
            pane_bytes.clone(),
            dropped.clone(),
        );
        tokio::spawn(async move {
            let mut at = (id * 7919) % text.len();
            let mut tick = tokio::time::interval(TICK);
            while !stop.load(Ordering::Relaxed) {
                tick.tick().await;
                let mut left = per_tick;
                while left > 0 {
                    let n = left.min(text.len() - at);
                    screen.write().unwrap().process(&text[at..at + n]);
                    at = (at + n) % text.len();
                    left -= n;
                }
                pane_bytes.fetch_add(per_tick as u64, Ordering::Relaxed);
                let signal = Event::Service(ServiceEvent::Msg(Msg::Panes(
                    flightdeck::tui::panes::Msg::Event(PaneEvent::Output(id)),
                )));
                if tx.try_send(signal).is_err() {
                    dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }
    // Telemetry: a record from every node each second.
    {
        let (tx, stop, records) = (tx.clone(), stop.clone(), records.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            let mut seq = 3600;
            while !stop.load(Ordering::Relaxed) {
                tick.tick().await;
                seq += 1;
                for node in 0..node_count() {
                    let record = synth.record(node, seq, |nic| rate(node, nic, seq), |g| gpu(node, g, seq));
                    let t_ns = record.t_ns;
                    let e = TelemetryEvent::Record {
                        node,
                        record,
                        arrived_unix_ns: t_ns,
                    };
                    if tx
                        .send(Event::Service(ServiceEvent::Msg(Msg::Nics(
                            flightdeck::tui::nics::Msg::Sample(Box::new(e)),
                        ))))
                        .await
                        .is_err()
                    {
                        return;
                    }
                    records.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }
    // Keys: queued with their time; the probe pairs them with the loop's marks.
    let sent: Arc<Mutex<VecDeque<Instant>>> = Arc::default();
    {
        let (tx, stop, sent) = (tx.clone(), stop.clone(), sent.clone());
        tokio::spawn(async move {
            let deadline = Instant::now() + Duration::from_secs(secs);
            let mut i: u64 = 0;
            while Instant::now() < deadline {
                i += 1;
                // 20..60 ms apart, a fixed sequence.
                tokio::time::sleep(Duration::from_millis(20 + (i * 37) % 41)).await;
                sent.lock().unwrap().push_back(Instant::now());
                let k = KeyEvent::new(KeyCode::Char(key), KeyModifiers::NONE);
                if tx.send(Event::Msg(Msg::Key(k))).await.is_err() {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            stop.store(true, Ordering::Relaxed);
            let q = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
            let _ = tx.send(Event::Msg(Msg::Key(q))).await;
            // With shells open in panes, quitting asks first: yes.
            let y = KeyEvent::new(KeyCode::Char('y'), KeyModifiers::NONE);
            let _ = tx.send(Event::Msg(Msg::Key(y))).await;
        });
    }

    let opts = AppOptions {
        state,
        theme: Theme::default_theme(),
        paths: paths(dir.path()),
        monochrome: false,
        accept_new_host_keys: false,
    };
    let mut applied: Vec<Instant> = Vec::new();
    let mut latencies_ms = Vec::new();
    let mut frames = 0u64;
    let cpu0 = cpu_seconds();
    let t0 = Instant::now();
    {
        let sent = sent.clone();
        let mut probe = |m: Mark| match m {
            Mark::KeyApplied => {
                if let Some(t) = sent.lock().unwrap().pop_front() {
                    applied.push(t);
                }
            }
            Mark::FrameDrawn => {
                frames += 1;
                let now = Instant::now();
                for t in applied.drain(..) {
                    latencies_ms.push((now - t).as_secs_f64() * 1000.0);
                }
            }
        };
        event_loop(&mut tui, opts, tx, rx, &mut probe)
            .await
            .expect("event loop");
    }
    let wall_s = t0.elapsed().as_secs_f64();
    let cpu_s = cpu_seconds() - cpu0;
    let f = Figures {
        latencies_ms,
        frames,
        pane_bytes: pane_bytes.load(Ordering::Relaxed),
        telemetry_records: records.load(Ordering::Relaxed),
        output_signals_dropped: dropped.load(Ordering::Relaxed),
        cpu_s,
        wall_s,
        term_bytes: sink.0.load(Ordering::Relaxed),
    };
    report(name, &f, rss_before_kib);
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn report(name: &str, f: &Figures, rss_before_kib: u64) {
    let mut l = f.latencies_ms.clone();
    l.sort_by(|a, b| a.total_cmp(b));
    println!(
        "{name}: {} keys, key-to-screen p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; {} frames ({:.1}/s); \
         pane output {:.1} MB/s, {} output signals coalesced; {} telemetry records ({:.0}/s); \
         CPU {:.0}% of one core; terminal {:.1} MB/s; RSS {} MiB after the hour was loaded, peak {} MiB",
        l.len(),
        percentile(&l, 50.0),
        percentile(&l, 99.0),
        l.last().copied().unwrap_or(f64::NAN),
        f.frames,
        f.frames as f64 / f.wall_s,
        f.pane_bytes as f64 / f.wall_s / 1e6,
        f.output_signals_dropped,
        f.telemetry_records,
        f.telemetry_records as f64 / f.wall_s,
        100.0 * f.cpu_s / f.wall_s,
        f.term_bytes as f64 / f.wall_s / 1e6,
        rss_before_kib / 1024,
        status_kib("VmHWM:") / 1024,
    );
}

/// The scenarios: the Panes view of 64 tiles, where `l` moves the focus, at 160x48 and at
/// 80x24; the NICs view of 256 nodes per node and as the fleet (the busiest), where `n`
/// moves to the next node.
const SCENARIOS: [(&str, &str, char, (u16, u16)); 4] = [
    ("panes-160x48", "4", 'l', (160, 48)),
    ("panes-80x24", "4", 'l', (80, 24)),
    ("nics-node-160x48", "7", 'n', (160, 48)),
    ("nics-fleet-160x48", "7vv", 'n', (160, 48)),
];

fn main() {
    // `cargo bench` passes `--bench`; a number is the seconds per scenario, a name runs
    // that scenario alone. Without a name each runs in a process of its own, so that each
    // peak memory figure is its own.
    let args: Vec<String> = std::env::args().skip(1).collect();
    let secs = args.iter().find_map(|a| a.parse::<u64>().ok()).unwrap_or(30);
    let only = args.iter().find_map(|a| SCENARIOS.iter().find(|s| s.0 == a));
    let Some(&(name, view_keys, key, size)) = only else {
        for (name, ..) in SCENARIOS {
            let status = std::process::Command::new(std::env::current_exe().expect("own path"))
                .args([name, &secs.to_string()])
                .status()
                .expect("run a scenario");
            assert!(status.success(), "{name}: {status}");
        }
        return;
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(scenario(name, view_keys, key, size, secs));
}
