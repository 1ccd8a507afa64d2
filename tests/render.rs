//! Views through ratatui's TestBackend: insta snapshots of every view and overlay at
//! 80x24 and 160x48, cell-level colour checks for key roles, and every widget at tiny
//! sizes without panic. States are reached through `update`, as a user would.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use flightdeck::doctor::{run::Event, Finding, Outcome, Report, CHECKS};
use flightdeck::tui::action::Context;
use flightdeck::tui::help::view as help;
use flightdeck::tui::keymap::Keymap;
use flightdeck::tui::state::{Command, Msg, Overlay, State, StatusMessage, View};
use flightdeck::tui::theme::{Theme, Tone, EMBEDDED};
use flightdeck::tui::update::update;
use flightdeck::tui::views;
use flightdeck::tui::widgets::palette::{FilterWidget, PaletteWidget};
use flightdeck::tui::widgets::status_bar::StatusBar;
use flightdeck::tui::widgets::tabs::TabBar;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier};
use ratatui::widgets::Widget;
use ratatui::Terminal;

const SIZES: [(u16, u16); 2] = [(80, 24), (160, 48)];

fn state() -> State {
    let themes = EMBEDDED.iter().map(|(n, _)| n.to_string()).collect();
    State::new(Keymap::defaults(), themes, "dark".into())
}

fn keys(s: &mut State, text: &str) {
    for c in text.chars() {
        let code = match c {
            '\t' => KeyCode::Tab,
            '\n' => KeyCode::Enter,
            c => KeyCode::Char(c),
        };
        update(s, Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)));
    }
}

fn draw(s: &State, theme: &Theme, w: u16, h: u16) -> Terminal<TestBackend> {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| views::draw(s, theme, f)).unwrap();
    t
}

/// The 80x24 screen of `s` as text, a string per row.
fn screen80(s: &State) -> Vec<String> {
    let t = draw(s, &Theme::default_theme(), 80, 24);
    (0..24)
        .map(|y| (0..80).map(|x| t.backend().buffer()[(x, y)].symbol()).collect())
        .collect()
}

fn snapshot(name: &str, s: &State) {
    let theme = Theme::default_theme();
    for (w, h) in SIZES {
        let t = draw(s, &theme, w, h);
        insta::assert_snapshot!(format!("{name}_{w}x{h}"), t.backend());
    }
}

#[test]
fn every_view() {
    for v in View::ALL {
        let mut s = state();
        keys(&mut s, &(v.index() + 1).to_string());
        assert_eq!(s.view, v);
        snapshot(&format!("view_{}", v.command()), &s);
    }
}

#[test]
fn help_overlay() {
    let mut s = state();
    keys(&mut s, "?");
    snapshot("help", &s);
    keys(&mut s, "jjjjjjjjjjjjjjjjjjjjjjjjjjjjjj");
    snapshot("help_scrolled", &s);
}

#[test]
fn command_palette() {
    let mut s = state();
    keys(&mut s, ":n\t");
    snapshot("palette", &s);
}

#[test]
fn filter_entry_and_filtered_title() {
    let mut s = state();
    keys(&mut s, "/gpu=H100 gpus>=8");
    snapshot("filter_entry", &s);
    keys(&mut s, "\n");
    snapshot("filtered", &s);
}

#[test]
fn status_message() {
    let mut s = state();
    keys(&mut s, ":bogus\n");
    snapshot("status_error", &s);
}

#[test]
fn too_small_says_so() {
    let theme = Theme::default_theme();
    let t = draw(&state(), &theme, 19, 4);
    insta::assert_snapshot!("too_small_19x4", t.backend());
    let t = draw(&state(), &theme, 20, 5);
    let text = format!("{}", t.backend());
    assert!(!text.contains("too small"), "{text}");
    assert!(text.contains("Offers"), "{text}");
}

fn fleet_record(name: &str, backend: &str, n: usize) -> flightdeck::store::FleetRecord {
    flightdeck::store::FleetRecord {
        name: name.into(),
        backend: backend.parse().unwrap(),
        file: Some(format!("/home/op/fleets/{name}.yaml").into()),
        nodes: (0..n)
            .map(|i| flightdeck::fleet::NodeTarget {
                index: i,
                name: format!("{name}-{i}"),
                internal_ip: None,
                address: flightdeck::fleet::Address::Ssh(flightdeck::fleet::SshAddress {
                    host: format!("10.88.0.{}", i + 1),
                    port: None,
                    user: Some("root".into()),
                    identity_file: None,
                    proxy_jump: Some(flightdeck::fleet::JumpTarget {
                        host: "34.1.2.3".into(),
                        port: None,
                        user: Some("ops".into()),
                        identity_file: None,
                    }),
                }),
            })
            .collect(),
        resources: vec![],
        created_at: 1_795_305_600 + 3_723,
        applied: None,
    }
}

/// A pane state with four tiles whose screens got real shell output.
fn panes_state() -> State {
    use flightdeck::term::session::{PaneEvent, PaneState};
    let mut s = state();
    update(
        &mut s,
        Msg::Fleets(flightdeck::tui::fleets::Msg::Loaded(Ok(vec![
            fleet_record("lab", "ssh", 4),
            fleet_record("local", "local", 1),
        ]))),
    );
    let tiles: Vec<flightdeck::tui::panes::PaneTile> = (0..4)
        .map(|i| {
            let screen = flightdeck::term::new_screen(24, 80);
            let out = format!(
                "\x1b[1;32mroot@node{i}\x1b[0m:\x1b[1;34m~\x1b[0m# nvidia-smi -L\r\nGPU 0: NVIDIA H200 (UUID: GPU-{i}a1)\r\nGPU 1: NVIDIA H200 (UUID: GPU-{i}b2)\r\n\x1b[1;32mroot@node{i}\x1b[0m:\x1b[1;34m~\x1b[0m# "
            );
            screen.write().unwrap().process(out.as_bytes());
            flightdeck::tui::panes::PaneTile {
                id: i,
                node: format!("lab-{i}"),
                host: format!("10.88.0.{}", i + 1),
                state: PaneState::Connected,
                marked: i == 2,
                screen,
                size: (80, 24),
            }
        })
        .collect();
    update(
        &mut s,
        Msg::Panes(flightdeck::tui::panes::Msg::Opened {
            fleet: "lab".into(),
            tiles,
        }),
    );
    update(
        &mut s,
        Msg::Panes(flightdeck::tui::panes::Msg::Event(PaneEvent::State(
            3,
            PaneState::Reconnecting {
                attempt: 2,
                delay_s: 4,
            },
        ))),
    );
    keys(&mut s, "l");
    s
}

#[test]
fn fleets_nodes_and_panes_views() {
    let mut s = panes_state();
    for (w, h) in SIZES {
        update(&mut s, Msg::Resize(w, h));
        let t = draw(&s, &Theme::default_theme(), w, h);
        insta::assert_snapshot!(format!("panes_{w}x{h}"), t.backend());
    }
    keys(&mut s, "b");
    keys(&mut s, "i");
    snapshot("panes_typing_broadcast", &s);
    update(
        &mut s,
        Msg::Key(KeyEvent::new(KeyCode::Char(']'), KeyModifiers::CONTROL)),
    );
    keys(&mut s, "z");
    snapshot("panes_zoomed", &s);
    // Broadcast is on and two of its panes are hidden by the zoom: typing asks first.
    keys(&mut s, "i");
    snapshot("panes_zoomed_broadcast_asks", &s);
    keys(&mut s, "n");
    keys(&mut s, "z[");
    let lines: Vec<String> = (0..40)
        .map(|i| format!("step {i}: loss {:.3}", 2.0 / (i as f64 + 1.0)))
        .collect();
    update(
        &mut s,
        Msg::Panes(flightdeck::tui::panes::Msg::Snapshot { id: 1, lines }),
    );
    keys(&mut s, "kkkv");
    snapshot("panes_copy_mode", &s);
    keys(&mut s, "\u{1b}");
    update(&mut s, Msg::Key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE)));
    keys(&mut s, "3");
    snapshot("nodes", &s);
    // A node picked, its details shown.
    keys(&mut s, "jd");
    snapshot("nodes_detail", &s);
    keys(&mut s, "d");
    keys(&mut s, "2");
    snapshot("fleets", &s);
    update(
        &mut s,
        Msg::HostKeyQuestion {
            id: 1,
            host: "root@10.88.0.9".into(),
            fingerprint: "SHA256:Ehb0h2r2mz3xOiyZk3zB1yXG7VjGzVf8nJm0qE6b1Zc".into(),
        },
    );
    snapshot("host_key_question", &s);
}

#[test]
fn offers_views() {
    let mut s = state();
    keys(&mut s, "/gpu=H200\n");
    snapshot("offers_h200", &s);
    keys(&mut s, "d");
    snapshot("offers_detail", &s);
    keys(&mut s, "w");
    snapshot("offers_editor", &s);
    update(&mut s, Msg::Key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE)));
    keys(&mut s, "d/");
    update(
        &mut s,
        Msg::Key(KeyEvent::new(KeyCode::Backspace, KeyModifiers::NONE)),
    );
    snapshot("offers_bad_filter", &s);
}

fn nccl_state() -> State {
    let mut s = state();
    let run = |id: &str, at: u64, code: Option<i32>| flightdeck::store::RunRecord {
        id: id.into(),
        kind: "nccl".into(),
        fleet: "local".into(),
        started_at: at,
        nodes: vec![flightdeck::store::RunNode {
            node: 0,
            pid: Some(42),
            log: "~/x".into(),
            exit_code: code,
            pod: None,
            started_at: None,
            ended_at: None,
        }],
    };
    update(
        &mut s,
        Msg::Nccl(flightdeck::tui::nccl::Msg::Runs(vec![
            run("nccl-all_reduce-1795316959-49e2", 1_795_316_959, Some(0)),
            run("nccl-all_gather-1795316982-2360", 1_795_316_982, None),
        ])),
    );
    keys(&mut s, "5j\n");
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/nccl/h200x2-all_reduce.txt"
    ))
    .unwrap();
    let report = flightdeck::nccl::parse_text(&text).remove(0);
    update(
        &mut s,
        Msg::Nccl(flightdeck::tui::nccl::Msg::Report {
            id: "nccl-all_reduce-1795316959-49e2".into(),
            report: Box::new(report),
        }),
    );
    update(
        &mut s,
        Msg::Nccl(flightdeck::tui::nccl::Msg::Ended {
            id: "nccl-all_reduce-1795316959-49e2".into(),
            end: Box::new(flightdeck::tui::nccl::RunEnd {
                codes: vec![("local-0".into(), Some(0))],
                tail: vec![],
            }),
        }),
    );
    s
}

/// At 80x24: prices the catalog doubts are marked `!` (with a legend), and the column the
/// table is sorted by is shown however narrow the screen.
#[test]
fn offers_mark_doubtful_prices_and_show_the_sorted_column() {
    let mut s = state();
    keys(&mut s, "/gpu=H200\n");
    let text = screen80;
    let t = text(&s);
    assert!(t[3].contains("49.36!"), "od-low, no-od: {}", t[3]);
    assert!(
        t[22].contains("! a price the catalog doubts: d tells why"),
        "{}",
        t[22]
    );
    // Sort by network bandwidth: Gbps does not fit at 80 columns unless sorted by.
    assert!(!t[2].contains("Gbps"), "{}", t[2]);
    while s.offers.sort != flightdeck::catalog::query::Field::Network {
        keys(&mut s, "s");
    }
    let t = text(&s);
    assert!(t[2].contains("Gbps"), "the sorted column is shown: {}", t[2]);
}

/// A bad Offers filter at 80x24: the caret under the typed text, the error with its
/// did-you-mean, the title naming the query the rows answer (the one in force).
#[test]
fn offers_bad_filter_shows_its_caret() {
    let mut s = state();
    keys(&mut s, "/gpu=H1OO\n");
    let text = screen80(&s);
    assert_eq!(text[23].trim_end(), "/gpu=H1OO");
    assert_eq!(
        text[22].trim_end(),
        "     ^^^^ unknown GPU `H1OO`; did you mean H100?",
        "the caret under H1OO"
    );
    // The rows are those of the filter in force before the entry opened (none: all
    // 911 offers), not of `gpu`, a valid prefix of what is typed.
    assert!(
        text[1].contains("Offers · 911 ·"),
        "the filter in force: {}",
        text[1]
    );
    assert!(!text[1].contains("· gpu "), "no prefix applied: {}", text[1]);
    assert!(!text[1].contains("H1OO"), "{}", text[1]);
    snapshot("offers_bad_filter_h1oo", &s);
}

#[test]
fn nccl_view_draws_the_curve() {
    let s = nccl_state();
    snapshot("nccl_run", &s);
}

/// A run that failed at once (nccl-tests missing, exit 127, as on a machine without
/// them): its state, each node's exit code and what it printed, not "waiting for the
/// first row"; the list says how it ended.
#[test]
fn nccl_view_shows_a_failed_run() {
    let mut s = state();
    let id = "nccl-all_reduce-1795474251-594d";
    update(
        &mut s,
        Msg::Nccl(flightdeck::tui::nccl::Msg::Runs(vec![
            flightdeck::store::RunRecord {
                id: id.into(),
                kind: "nccl".into(),
                fleet: "local".into(),
                started_at: 1_795_474_251,
                nodes: vec![flightdeck::store::RunNode {
                    node: 0,
                    pid: Some(42),
                    log: "~/x".into(),
                    exit_code: Some(127),
                    pod: None,
                    started_at: None,
                    ended_at: None,
                }],
            },
        ])),
    );
    keys(&mut s, "5\n");
    update(
        &mut s,
        Msg::Nccl(flightdeck::tui::nccl::Msg::Ended {
            id: id.into(),
            end: Box::new(flightdeck::tui::nccl::RunEnd {
                codes: vec![("local-0".into(), Some(127))],
                tail: vec![
                    "local-0: flightdeck: all_reduce_perf not found (PATH, --nccl-tests-dir, NCCL_TESTS_DIR, /opt/nccl-tests/build, ~/nccl-tests/build)".into(),
                ],
            }),
        }),
    );
    let text = format!("{:?}", draw(&s, &Theme::default_theme(), 80, 24).backend());
    for want in [
        "failed: exit 127",
        "exit codes  local-0 127",
        "all_reduce_perf not found",
        "all_reduce 22:50 exit 127",
    ] {
        assert!(text.contains(want), "{want}: {text}");
    }
    assert!(!text.contains("waiting for the first row"), "{text}");
    assert!(!text.contains("running?"), "{text}");
    snapshot("nccl_failed_run", &s);
}

/// The run dialog over the NCCL view: a fleet of a3-megagpu-8g (auto picks TCPXO), the
/// focus on the profile, one line added to its environment.
#[test]
fn nccl_run_dialog() {
    use flightdeck::nccl::GpuDirect;
    use flightdeck::tui::nccl::FleetChoice;
    let mut s = nccl_state();
    keys(&mut s, "t");
    update(
        &mut s,
        Msg::Nccl(flightdeck::tui::nccl::Msg::RunFleets(Ok(vec![
            FleetChoice {
                name: "local".into(),
                family: flightdeck::fleet::BackendKind::Local,
                nodes: 1,
                machine_type: None,
                auto: GpuDirect::None,
                auto_from: "machine type unknown".into(),
            },
            FleetChoice {
                name: "mega".into(),
                family: flightdeck::fleet::BackendKind::Gcp,
                nodes: 4,
                machine_type: Some("a3-megagpu-8g".into()),
                auto: GpuDirect::Tcpxo,
                auto_from: "machine type".into(),
            },
        ]))),
    );
    update(
        &mut s,
        Msg::Key(KeyEvent::new(KeyCode::Right, KeyModifiers::NONE)),
    );
    keys(&mut s, "\t\t\t\t\t\t\t\t\t\t\t\n");
    update(&mut s, Msg::Paste("export NCCL_DEBUG='INFO'".into()));
    assert_eq!(flightdeck::tui::update::context(&s), Context::Editor);
    snapshot("nccl_run_dialog", &s);
    // A refused start names the problem at the bottom.
    keys(&mut s, "\t\t\t\t\t");
    update(
        &mut s,
        Msg::Key(KeyEvent::new(KeyCode::Backspace, KeyModifiers::NONE)),
    );
    keys(&mut s, "1");
    update(
        &mut s,
        Msg::Key(KeyEvent::new(KeyCode::Char('s'), KeyModifiers::CONTROL)),
    );
    snapshot("nccl_run_dialog_problem", &s);
    // A data type the chosen engine does not run is marked in the failure colour.
    keys(&mut s, "\t\t\t\t");
    for code in [
        KeyCode::Left,
        KeyCode::Left,
        KeyCode::Left,
        KeyCode::Tab,
        KeyCode::Right,
    ] {
        update(&mut s, Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)));
    }
    let theme = Theme::default_theme();
    let t = draw(&s, &theme, 160, 48);
    let y = (0..48)
        .find(|y| {
            (0..160)
                .map(|x| cell(&t, x, *y).symbol().to_string())
                .collect::<String>()
                .contains("-d data type    uint32  (not one of torch's)")
        })
        .expect("the data type row, marked");
    let x = find(&t, y, "(not one of");
    assert_eq!(cell(&t, x, y).fg, theme.tone(Tone::Fail).fg.unwrap());
}

/// The last straggler finder result under the run list, the slow node named.
#[test]
fn nccl_view_shows_the_straggler_result() {
    use flightdeck::nccl::history::StragglerReport;
    let mut s = nccl_state();
    let r = StragglerReport {
        fleet: "lab".into(),
        at: 1_795_317_000,
        collective: "all_reduce".into(),
        threshold: 0.9,
        nodes: vec!["lab-0".into(), "lab-1".into(), "lab-2".into()],
        node_ranking: vec![
            ("lab-1".into(), Some(173.9)),
            ("lab-0".into(), Some(347.7)),
            ("lab-2".into(), Some(347.5)),
        ],
        link_ranking: vec![
            ("lab-1".into(), "lab-2".into(), Some(20.1)),
            ("lab-0".into(), "lab-1".into(), Some(20.3)),
            ("lab-2".into(), "lab-0".into(), Some(38.9)),
        ],
        slow_nodes: vec![(
            "lab-1".into(),
            "alone 173.90 GB/s, 50% of the usual 347.70".into(),
        )],
        slow_links: vec![],
        unresolved: vec![],
        named: Some("lab-1".into()),
    };
    update(
        &mut s,
        Msg::Nccl(flightdeck::tui::nccl::Msg::Stragglers(Some(Box::new(r)))),
    );
    snapshot("nccl_stragglers", &s);
}

fn job_record(
    id: &str,
    name: &str,
    fleet: &str,
    at: u64,
    codes: &[Option<i32>],
) -> flightdeck::store::JobRecord {
    flightdeck::store::JobRecord {
        id: id.into(),
        name: name.into(),
        fleet: fleet.into(),
        file: None,
        started_at: at,
        ended_at: codes.iter().all(Option::is_some).then_some(at + 88),
        stopped: false,
        failed_rank: None,
        nodes: codes
            .iter()
            .enumerate()
            .map(|(i, c)| flightdeck::store::RunNode {
                node: i,
                pid: Some(4000 + i as u32),
                log: format!("~/.flightdeck/jobs/{id}/{i}/out.log"),
                exit_code: *c,
                pod: None,
                started_at: None,
                ended_at: None,
            })
            .collect(),
        metrics: vec![],
        flops_per_token: None,
        peak_tflops: Some(989.0),
        profile: "none".into(),
        stop_on_failure: false,
        stop_grace: 10,
        launcher: None,
    }
}

/// The Jobs view: the list, then one job opened. `h200`: the example job's real log
/// from 2x H200 (tests/fixtures/jobs); else three testbed-style nodes, node 2 slow.
fn jobs_state(h200: bool) -> State {
    let mut s = state();
    update(
        &mut s,
        Msg::Fleets(flightdeck::tui::fleets::Msg::Loaded(Ok(vec![
            fleet_record("local", "local", 1),
            fleet_record("tb", "ssh", 3),
        ]))),
    );
    update(
        &mut s,
        Msg::Jobs(flightdeck::tui::jobs::Msg::List {
            jobs: vec![
                job_record(
                    "tiny-gpt-1795323586-af0b",
                    "tiny-gpt",
                    "local",
                    1_795_323_586,
                    &[Some(0)],
                ),
                job_record(
                    "train-1795323700-1a2b",
                    "train",
                    "tb",
                    1_795_323_700,
                    &[None, None, None],
                ),
                job_record(
                    "fragile-1795323800-3c4d",
                    "fragile",
                    "tb",
                    1_795_323_800,
                    &[Some(143), Some(137), Some(143)],
                ),
            ],
            now: 1_795_323_760,
        }),
    );
    keys(&mut s, "6");
    if h200 {
        keys(&mut s, "jj\n");
        let log = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/jobs/tiny-gpt-h200x2.log"
        ))
        .unwrap();
        update(
            &mut s,
            Msg::Jobs(flightdeck::tui::jobs::Msg::Lines {
                id: "tiny-gpt-1795323586-af0b".into(),
                lines: log.lines().map(|l| (0, l.to_string())).collect(),
                now: 1_795_323_760,
            }),
        );
        update(
            &mut s,
            Msg::Jobs(flightdeck::tui::jobs::Msg::Node {
                id: "tiny-gpt-1795323586-af0b".into(),
                rank: 0,
                follow: flightdeck::tui::jobs::NodeFollow::Exited(Some(0)),
            }),
        );
    } else {
        keys(&mut s, "j\n");
        for step in 1..=40u32 {
            let lines = (0..3)
                .map(|r| {
                    let t = if r == 2 { 0.21 } else { 0.1 + 0.001 * f64::from(step % 3) };
                    let loss = 8.0 * 0.93f64.powi(step as i32) + 0.01 * r as f64;
                    (r, format!("Step: {step} | Time: {t:.3}s | TFLOPs/s/GPU: {:.1} | Tokens/s/GPU: {:.0} | Loss: {loss:.4}", 100.0 / t, 4096.0 / t))
                })
                .collect();
            update(
                &mut s,
                Msg::Jobs(flightdeck::tui::jobs::Msg::Lines {
                    id: "train-1795323700-1a2b".into(),
                    lines,
                    now: 1_795_323_760,
                }),
            );
        }
    }
    s
}

#[test]
fn jobs_view_lists_and_charts() {
    let mut s = jobs_state(false);
    snapshot("jobs_train_slow_node", &s);
    keys(&mut s, "ll");
    assert_eq!(s.jobs.shown.as_ref().unwrap().node, 2);
    update(&mut s, Msg::Key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE)));
    assert!(s.jobs.shown.is_none());
    snapshot("jobs_list", &s);
    let s = jobs_state(true);
    snapshot("jobs_tiny_gpt_h200x2", &s);
}

/// A GKE job that Kueue holds: the Jobs view says so, with why and for how long.
#[test]
fn jobs_view_shows_kueue_holding_a_gke_job() {
    use flightdeck::cloud::gke::view::{Snapshot, WorkloadRow};
    let mut s = state();
    update(
        &mut s,
        Msg::Fleets(flightdeck::tui::fleets::Msg::Loaded(Ok(vec![fleet_record(
            "a3u", "gke", 2,
        )]))),
    );
    update(
        &mut s,
        Msg::Jobs(flightdeck::tui::jobs::Msg::List {
            jobs: vec![job_record(
                "train-1795323700-1a2b",
                "train",
                "a3u",
                1_795_323_700,
                &[None, None],
            )],
            now: 1_795_323_760,
        }),
    );
    let snap = Snapshot {
        cluster: "context gke_proj_us-central1_a3u".into(),
        workloads: vec![WorkloadRow {
            name: "jobset-train-1795323700-1a2b-x7k2p".into(),
            namespace: "default".into(),
            queue: "a3u-queue".into(),
            owner: Some("JobSet/train-1795323700-1a2b".into()),
            state: "pending".into(),
            detail: "waiting for DWS capacity (admission check dws-prov: Waiting for resources.)".into(),
            age_s: Some(60),
        }],
        ..Snapshot::default()
    };
    update(
        &mut s,
        Msg::Nodes(flightdeck::tui::nodes::Msg::GkeSnapshot {
            fleet: "a3u".into(),
            result: Ok(Box::new(snap)),
        }),
    );
    keys(&mut s, "6\n");
    snapshot("jobs_gke_kueue_pending", &s);
}

/// A job that failed because its node has no torch, at 80x24: the error is read whole
/// (long lines wrap; `v` cuts them at the edge instead), and a long status message is
/// kept whole in the message history (`M`).
#[test]
fn jobs_view_wraps_the_torch_error() {
    let mut s = jobs_state(false);
    let id = s.jobs.shown.as_ref().unwrap().id.clone();
    let error = "/usr/bin/python3: Error while finding module specification for 'torch.distributed.run' (ModuleNotFoundError: No module named 'torch')";
    update(
        &mut s,
        Msg::Jobs(flightdeck::tui::jobs::Msg::Lines {
            id: id.clone(),
            lines: vec![(0, error.to_string())],
            now: 1_795_323_760,
        }),
    );
    let screen = screen80;
    // The log's rows joined (inside its border) hold the whole line.
    let joined: String = screen(&s)
        .iter()
        .filter(|r| r.starts_with('│'))
        .map(|r| {
            r.trim_start_matches('│')
                .trim_end_matches('│')
                .trim_end()
                .to_string()
        })
        .collect();
    assert!(joined.contains("No module named 'torch')"), "{joined}");
    snapshot("jobs_torch_error", &s);
    keys(&mut s, "v");
    let cut = screen(&s).join("\n");
    assert!(cut.contains("cut at the edge (v wraps)"), "{cut}");
    assert!(!cut.contains("No module named"), "{cut}");
    // A status message longer than the status bar: whole in the history.
    let long = format!("job {id}: tb-0 exited with 1: {error}");
    let _ = &long;
    s.status = None;
    update(
        &mut s,
        Msg::Jobs(flightdeck::tui::jobs::Msg::Started(Err(long.clone()))),
    );
    keys(&mut s, "M");
    let m = screen(&s).join("");
    assert!(m.contains("Messages ("), "{m}");
    assert!(
        m.contains("job train-1795323700-1a2b: tb-0 exited with 1: /usr/bin/python3"),
        "{m}"
    );
    assert!(m.contains("No module named 'torch')"), "the end of it too: {m}");
    snapshot("messages_history", &s);
}

/// History entries for the two runs of `nccl_state`: the second slowed to 80%.
fn nccl_history() -> Vec<flightdeck::nccl::history::SavedRun> {
    use flightdeck::nccl::history::{SavedRun, SavedSpec};
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/nccl/h200x2-all_reduce.txt"
    ))
    .unwrap();
    let report = flightdeck::nccl::parse_text(&text).remove(0);
    let mut slow = report.clone();
    for row in &mut slow.rows {
        for m in [row.out_of_place.as_mut(), row.in_place.as_mut()]
            .into_iter()
            .flatten()
        {
            m.busbw = (m.busbw * 80.0).round() / 100.0;
        }
    }
    let entry = |id: &str, at: u64, r: &flightdeck::nccl::Report| {
        let mut e = SavedRun {
            id: id.into(),
            fleet: "local".into(),
            started_at: at,
            spec: SavedSpec {
                collective: "all_reduce".into(),
                engine: "nccl-tests".into(),
                args: "-b 8B -e 8G -f 2 -g 2 -n 20 -w 5 -d float".into(),
                profile: "none".into(),
                env: vec![],
            },
            nodes: vec!["local-0".into()],
            machine_type: Some("2xH200".into()),
            machine_type_from: Some("nccl-tests rank list".into()),
            exit_codes: vec![Some(0)],
            ..Default::default()
        };
        e.set_report(r);
        e.verdict = Some(flightdeck::nccl::expect::judge(r, Some("2xH200"), Some(1)));
        e
    };
    vec![
        entry("nccl-all_gather-1795316982-2360", 1_795_316_982, &slow),
        entry("nccl-all_reduce-1795316959-49e2", 1_795_316_959, &report),
    ]
}

#[test]
fn nccl_view_judges_against_the_expected_curve_and_compares_two_runs() {
    let mut s = nccl_state();
    update(
        &mut s,
        Msg::Nccl(flightdeck::tui::nccl::Msg::History(nccl_history())),
    );
    snapshot("nccl_verdict", &s);
    let t = format!("{}", draw(&s, &Theme::default_theme(), 160, 48).backend());
    assert!(t.contains("PASS 100% of 347.71 GB/s at 8G"), "{t}");
    assert!(t.contains("expected (measured)"), "{t}");
    // Mark the newer run (A), then the older (B): side by side.
    keys(&mut s, "kcjc");
    assert_eq!(s.nccl.compare.len(), 2);
    snapshot("nccl_compare", &s);
    let t = format!("{}", draw(&s, &Theme::default_theme(), 160, 48).backend());
    assert!(t.contains("peak A 278.17 · B 347.71 · B/A 1.250"), "{t}");
    // c again unmarks; Enter follows the selected run and leaves the comparison.
    keys(&mut s, "c");
    assert_eq!(s.nccl.compare.len(), 1);
    keys(&mut s, "c\n");
    assert!(s.nccl.compare.is_empty());
}

/// ux-walk-2 item 6: under NO_COLOR the measured and the expected curve are drawn with
/// different marks, and the legend shows which mark is which.
#[test]
fn no_color_curves_are_told_apart_by_their_marks() {
    let mut s = nccl_state();
    update(
        &mut s,
        Msg::Nccl(flightdeck::tui::nccl::Msg::History(nccl_history())),
    );
    let mut mono = Theme::default_theme();
    mono.monochrome = true;
    let t = format!("{}", draw(&s, &mono, 160, 48).backend());
    // The legend's mark of each curve: three curves, three marks, each drawn.
    let mark = |name: &str| {
        let l = t
            .lines()
            .find(|l| l.contains(&format!(" {name}")))
            .unwrap_or_else(|| panic!("{name}: {t}"));
        let at = l.find(&format!(" {name}")).unwrap();
        l[..at].chars().last().unwrap()
    };
    let marks = [
        mark("out-of-place"),
        mark("in-place"),
        mark("expected (measured)"),
    ];
    assert_eq!(marks, ['⣀', '•', '▀'], "{t}");
    assert!(
        t.contains('•') && t.chars().any(|c| ('\u{2801}'..='\u{28ff}').contains(&c)),
        "{t}"
    );
    // With colour the curves are told apart by colour: the legend is the plain names.
    let t = format!("{}", draw(&s, &Theme::default_theme(), 160, 48).backend());
    assert!(
        t.contains("expected (measured)") && !t.contains("• expected"),
        "{t}"
    );
}

#[test]
fn empty_fleets_and_panes_say_what_to_do() {
    let mut s = state();
    update(
        &mut s,
        Msg::Fleets(flightdeck::tui::fleets::Msg::Loaded(Ok(vec![]))),
    );
    keys(&mut s, "2");
    let text = format!("{}", draw(&s, &Theme::default_theme(), 80, 24).backend());
    assert!(
        text.contains("flightdeck fleet apply fleets/local.yaml"),
        "{text}"
    );
    keys(&mut s, "4");
    let text = format!("{}", draw(&s, &Theme::default_theme(), 80, 24).backend());
    assert!(text.contains("No panes open"), "{text}");
}

#[test]
fn typing_puts_the_cursor_in_the_focused_pane() {
    let mut s = panes_state();
    update(&mut s, Msg::Resize(80, 24));
    let theme = Theme::default_theme();
    let mut t = Terminal::new(TestBackend::new(80, 24)).unwrap();
    t.draw(|f| views::draw(&s, &theme, f)).unwrap();
    assert!(t.get_cursor_position().is_ok());
    keys(&mut s, "i");
    let mut t = Terminal::new(TestBackend::new(80, 24)).unwrap();
    let frame = t.draw(|f| views::draw(&s, &theme, f)).unwrap();
    let _ = frame;
    let pos = t.get_cursor_position().unwrap();
    // Tile 1 is the top-right of a 2x2 grid: x from 40, y from 1; the prompt ends row 3.
    assert!(pos.x > 40 && pos.y == 1 + 1 + 3, "{pos:?}");
}

fn cell(t: &Terminal<TestBackend>, x: u16, y: u16) -> ratatui::buffer::Cell {
    t.backend().buffer()[(x, y)].clone()
}

/// The x of the first occurrence of `needle` on row `y`.
fn find(t: &Terminal<TestBackend>, y: u16, needle: &str) -> u16 {
    let row: String = (0..t.backend().buffer().area.width)
        .map(|x| cell(t, x, y).symbol().to_string())
        .collect();
    row.find(needle)
        .unwrap_or_else(|| panic!("{needle:?} not on row {y}: {row}")) as u16
}

#[test]
fn active_tab_and_key_hints_use_the_theme() {
    let mut s = state();
    keys(&mut s, "3");
    let theme = Theme::default_theme();
    let t = draw(&s, &theme, 100, 24);
    let active = cell(&t, find(&t, 0, "Nodes"), 0);
    assert_eq!(active.bg, theme.tab(true).bg.unwrap());
    assert_eq!(
        active.bg,
        Color::Rgb(0x61, 0xaf, 0xef),
        "dark theme's tab_active_bg"
    );
    let inactive = cell(&t, find(&t, 0, "Offers"), 0);
    assert_eq!(inactive.fg, theme.tab(false).fg.unwrap());
    let hint = cell(&t, find(&t, 23, "? help"), 23);
    assert_eq!(hint.fg, theme.key_hint().fg.unwrap());
    let fail = {
        keys(&mut s, ":bogus\n");
        let t = draw(&s, &theme, 100, 24);
        cell(&t, find(&t, 23, "unknown"), 23)
    };
    assert_eq!(fail.fg, theme.tone(Tone::Fail).fg.unwrap());
}

#[test]
fn no_color_is_monochrome_with_reverse_video() {
    let dir = tempfile::tempdir().unwrap();
    let paths = flightdeck::paths::Paths {
        config_dir: dir.path().into(),
        state_dir: dir.path().join("s"),
    };
    let theme = Theme::load("dark", &paths, true).unwrap();
    let mut s = state();
    keys(&mut s, "2:n\t");
    let t = draw(&s, &theme, 100, 24);
    for c in t.backend().buffer().content() {
        assert!(matches!(c.fg, Color::Reset), "colour {:?} under NO_COLOR", c.fg);
        assert!(matches!(c.bg, Color::Reset), "colour {:?} under NO_COLOR", c.bg);
    }
    assert!(
        cell(&t, find(&t, 0, "Fleets"), 0)
            .modifier
            .contains(Modifier::REVERSED),
        "active tab"
    );
    // The selected completion is the first candidate row inside the palette.
    let (row, x) = (0..24)
        .find_map(|y| {
            let text: String = (0..100).map(|x| cell(&t, x, y).symbol().to_string()).collect();
            text.find(" nodes ")
                .filter(|_| text.contains("go to the Nodes"))
                .map(|x| (y, x as u16 + 1))
        })
        .expect("selected candidate row");
    assert!(
        cell(&t, x, row).modifier.contains(Modifier::REVERSED),
        "selection by reverse video"
    );
}

/// A constructed fleet (flightdeck::telemetry::synth: no recording) of `nodes` nodes with
/// eth0 (control) and eth1..eth3 (data) and 2 GPUs each, 120 records at 1 s: data NICs
/// at 6..9 Gbit/s in a sawtooth, node 1's eth2 at a tenth (flagged), and node 1's record
/// 100 lost (a gap 20 s before the end).
fn nics_state(nodes: usize) -> State {
    use flightdeck::telemetry::service::TelemetryEvent;
    use flightdeck::telemetry::synth::Synth;
    let mut s = state();
    keys(&mut s, "7");
    update(
        &mut s,
        Msg::Nics(flightdeck::tui::nics::Msg::Started {
            fleet: "lab".into(),
            nodes: (0..nodes).map(|i| format!("lab-{i}")).collect(),
        }),
    );
    let mut synth = Synth::new(nodes, &["eth0", "eth1", "eth2", "eth3"], 2, 1000);
    for node in 0..nodes {
        let hello = synth.hello(node);
        update(
            &mut s,
            Msg::Nics(flightdeck::tui::nics::Msg::Sample(Box::new(
                TelemetryEvent::Hello { node, hello },
            ))),
        );
    }
    for seq in 1..=120u64 {
        for node in 0..nodes {
            let saw = |k: u64| ((seq + k) % 30) as f64 / 30.0;
            let record = synth.record(
                node,
                seq,
                |nic| match (node, nic) {
                    (_, 0) => (2e6 + 1e5 * saw(0), 1e6),
                    (1, 2) => (7e8, 6e8),
                    (_, k) => (6e9 + 3e9 * saw(k as u64 * 7), 6e9 + 2e9 * saw(k as u64 * 11)),
                },
                |g| {
                    (
                        40.0 + 55.0 * saw(u64::from(g) * 5) as f32,
                        200.0 + 450.0 * saw(u64::from(g) * 5) as f32,
                    )
                },
            );
            if node == 1 && seq == 100 {
                continue;
            }
            let arrived_unix_ns = record.t_ns;
            update(
                &mut s,
                Msg::Nics(flightdeck::tui::nics::Msg::Sample(Box::new(
                    TelemetryEvent::Record {
                        node,
                        record,
                        arrived_unix_ns,
                    },
                ))),
            );
        }
    }
    s
}

#[test]
fn nics_view_in_every_mode() {
    let mut s = nics_state(3);
    assert!(
        s.nics
            .flags
            .iter()
            .any(|f| f.node == 1 && f.device.as_ref().map(|d| d.label()).as_deref() == Some("eth2")),
        "{:?}",
        s.nics.flags
    );
    // Per node, on lab-1: its gap and its flagged eth2.
    keys(&mut s, "n");
    snapshot("nics_node", &s);
    let theme = Theme::default_theme();
    let t = draw(&s, &theme, 160, 48);
    let text = format!("{}", t.backend());
    for want in [
        "per node: lab-1 (2/3)",
        "eth1 data",
        "! eth2 data",
        "eth0 ctl",
        "RX peak",
        "GPU0",
        "! lab-1 eth2",
    ] {
        assert!(text.contains(want), "{want}:\n{text}");
    }
    // The rail of eth2 across the nodes.
    keys(&mut s, "vn");
    snapshot("nics_rail", &s);
    let text = format!("{}", draw(&s, &theme, 80, 24).backend());
    assert!(text.contains("per rail: eth2 (2/3)"), "{text}");
    // The fleet's totals.
    keys(&mut s, "v");
    snapshot("nics_fleet", &s);
    // Paused on 5 min, back per node: the title says so, the hints name the keys.
    keys(&mut s, "zmv");
    snapshot("nics_node_paused", &s);
    let text = format!("{}", draw(&s, &theme, 160, 48).backend());
    for want in ["5 min", "paused", "v mode", "n next", "z span", "m pause"] {
        assert!(text.contains(want), "{want}:\n{text}");
    }
}

#[test]
fn nics_view_pages_64_nodes_at_80x24() {
    let mut s = nics_state(64);
    let theme = Theme::default_theme();
    // Fleet mode: the selected node stays on the page.
    keys(&mut s, "vvG");
    let text = format!("{}", draw(&s, &theme, 80, 24).backend());
    assert!(text.contains("lab-63"), "{text}");
    assert!(!text.contains("lab-0 "), "{text}");
    // Per node: n from the last node wraps to the first.
    keys(&mut s, "vn");
    let text = format!("{}", draw(&s, &theme, 80, 24).backend());
    assert!(text.contains("per node: lab-0 (1/64)"), "{text}");
    // Per rail: the table pages with j.
    keys(&mut s, "v");
    for _ in 0..70 {
        keys(&mut s, "j");
    }
    let text = format!("{}", draw(&s, &theme, 80, 24).backend());
    assert!(text.contains("lab-63"), "{text}");
    // The filter: lab-6 and lab-60..63, in the rail table and the title.
    keys(&mut s, "/lab-6\n");
    let text = format!("{}", draw(&s, &theme, 80, 24).backend());
    assert!(text.contains("5 of 64 nodes match"), "{text}");
    assert!(text.contains("lab-60") && !text.contains("lab-59"), "{text}");
}

#[test]
fn nics_view_survives_tiny_sizes_in_every_mode() {
    let mut s = nics_state(3);
    let theme = Theme::default_theme();
    for _ in 0..3 {
        for (w, h) in [(0, 0), (1, 1), (20, 5), (2, 30), (200, 3)] {
            for (x, y) in [(0, 0), (3, 2)] {
                let area = Rect {
                    x,
                    y,
                    width: w,
                    height: h,
                };
                let mut buf = Buffer::empty(Rect {
                    x: 0,
                    y: 0,
                    width: x + w,
                    height: y + h,
                });
                flightdeck::tui::nics::view::render(&s, &theme, area, &mut buf);
                let node = s.nics.store.node(0).unwrap();
                let (from, to) = s.nics.window();
                for roomy in [true, false] {
                    flightdeck::tui::widgets::gpu_strip::GpuStrip {
                        node,
                        gpus: &[0, 1],
                        from,
                        to,
                        roomy,
                        per_row: 0,
                        theme: &theme,
                    }
                    .render(area, &mut buf);
                }
            }
        }
        keys(&mut s, "v");
    }
}

/// Render `w` into a buffer of `area`'s size (offset to test non-zero origins too).
fn render_at(area: Rect, w: impl Widget) {
    let mut buf = Buffer::empty(Rect {
        x: 0,
        y: 0,
        width: area.x + area.width,
        height: area.y + area.height,
    });
    w.render(area, &mut buf);
}

#[test]
fn every_widget_survives_tiny_sizes() {
    let mut themes: Vec<Theme> = EMBEDDED
        .iter()
        .map(|(n, _)| Theme::embedded(n).unwrap().unwrap())
        .collect();
    let mut mono = Theme::default_theme();
    mono.monochrome = true;
    themes.push(mono);
    let mut palette_state = state();
    keys(&mut palette_state, ":n\t\t");
    let Overlay::Palette(palette) = &palette_state.overlay else {
        panic!()
    };
    let mut filter_state = state();
    keys(&mut filter_state, "/abc");
    let Overlay::Filter(entry) = &filter_state.overlay else {
        panic!()
    };
    let km = Keymap::defaults();
    let msg = StatusMessage {
        text: "a long status message that will not fit".into(),
        tone: Tone::Warn,
    };
    for theme in &themes {
        for (w, h) in [(0, 0), (1, 1), (2, 1), (20, 5), (3, 20), (40, 2)] {
            for (x, y) in [(0, 0), (3, 2)] {
                let area = Rect {
                    x,
                    y,
                    width: w,
                    height: h,
                };
                render_at(
                    area,
                    TabBar {
                        active: View::Nics,
                        theme,
                    },
                );
                render_at(
                    area,
                    StatusBar {
                        theme,
                        keymap: &km,
                        context: Context::Global,
                        filterable: true,
                        view: View::Panes,
                        message: Some(&msg),
                        left: "Offers".into(),
                    },
                );
                render_at(
                    area,
                    StatusBar {
                        theme,
                        keymap: &km,
                        context: Context::Input,
                        filterable: false,
                        view: View::Nics,
                        message: None,
                        left: "x".repeat(300),
                    },
                );
                render_at(area, PaletteWidget { palette, theme });
                let values = [1e9f32, f32::NAN, 2e9, 3e9];
                render_at(
                    area,
                    flightdeck::tui::widgets::rate_chart::RateChart {
                        title: ratatui::text::Line::raw("eth1 rx"),
                        series: vec![flightdeck::tui::widgets::rate_chart::Trace {
                            values: &values,
                            style: theme.rx(),
                        }],
                        span_ms: 60_000,
                        theme,
                        rule: theme.muted(),
                        top: None,
                    },
                );
                render_at(area, FilterWidget { entry, theme });
                render_at(
                    area,
                    help::HelpOverlay {
                        keymap: &km,
                        view: flightdeck::tui::state::View::Nics,
                        scroll: 10_000,
                        theme,
                    },
                );
                for s in [
                    state(),
                    palette_state.clone(),
                    filter_state.clone(),
                    panes_state(),
                    jobs_state(false),
                    jobs_state(true),
                ] {
                    let mut buf = Buffer::empty(Rect {
                        x: 0,
                        y: 0,
                        width: x + w,
                        height: y + h,
                    });
                    views::render(&s, theme, area, &mut buf);
                }
            }
        }
    }
}

#[test]
fn gcp_fleet_in_the_fleets_and_nodes_views() {
    use flightdeck::store::ResourceRecord;
    let mut rec = fleet_record("mega", "gcp", 2);
    for n in &mut rec.nodes {
        let flightdeck::fleet::Address::Ssh(a) = &mut n.address else {
            unreachable!()
        };
        a.proxy_jump = None;
        a.user = Some("ubuntu".into());
    }
    rec.file = Some("/home/op/fleets/a3-mega-tcpxo.yaml".into());
    for i in 0..2 {
        rec.resources.push(ResourceRecord {
            zone: Some("us-east4-b".into()),
            machine_type: Some("a3-megagpu-8g".into()),
            provisioning_model: Some("SPOT".into()),
            node: Some(i),
            external_ip: Some(format!("10.88.0.{}", i + 1)),
            internal_ip: Some(format!("10.10.0.{}", i + 2)),
            nics: Some("1+8 GVNIC".into()),
            hourly_micro_usd: Some(16_598_720),
            lost: (i == 1).then(|| "preempted (TERMINATED)".to_string()),
            ..ResourceRecord::new("instance", &format!("mega-{i}"), "created")
        });
    }
    rec.resources.push(ResourceRecord {
        region: Some("us-east4".into()),
        ..ResourceRecord::new("placement_policy", "mega-placement", "created")
    });
    let mut s = state();
    update(
        &mut s,
        Msg::Fleets(flightdeck::tui::fleets::Msg::Loaded(Ok(vec![rec]))),
    );
    keys(&mut s, "2");
    snapshot("gcp_fleets", &s);
    keys(&mut s, "3");
    snapshot("gcp_nodes", &s);
}

#[test]
fn gke_fleet_pools_nodes_and_kueue_in_the_nodes_view() {
    use flightdeck::cloud::gke::view::{NodeRow, PoolRow, Snapshot, WorkloadRow};
    let mut rec = fleet_record("a3u", "gke", 2);
    for (i, n) in rec.nodes.iter_mut().enumerate() {
        n.name = format!("gke-a3u-flex-{i}");
        let flightdeck::fleet::Address::Ssh(a) = &mut n.address else {
            unreachable!()
        };
        a.host = format!("10.0.0.{}", 10 + i);
        a.proxy_jump = None;
        a.user = None;
    }
    let mut s = state();
    update(
        &mut s,
        Msg::Fleets(flightdeck::tui::fleets::Msg::Loaded(Ok(vec![rec]))),
    );
    let snap = Snapshot {
        cluster: "context gke_proj_us-central1_a3u".into(),
        pools: vec![PoolRow {
            name: "a3u-flex".into(),
            machine_type: "a3-ultragpu-8g".into(),
            accelerator: Some("nvidia-h200-141gb".into()),
            provisioning: "DWS flex-start".into(),
            nodes: 2,
            ready: 1,
            gpus: 16,
            gpus_used: 8,
            autoscaling: None,
        }],
        nodes: vec![
            NodeRow {
                name: "gke-a3u-flex-0".into(),
                pool: "a3u-flex".into(),
                machine_type: "a3-ultragpu-8g".into(),
                internal_ip: Some("10.0.0.10".into()),
                ready: true,
                conditions: vec![],
                gpus: 8,
                gpus_used: 8,
                pods: 3,
            },
            NodeRow {
                name: "gke-a3u-flex-1".into(),
                pool: "a3u-flex".into(),
                machine_type: "a3-ultragpu-8g".into(),
                internal_ip: Some("10.0.0.11".into()),
                ready: false,
                conditions: vec!["NotReady (KubeletNotReady)".into()],
                gpus: 8,
                gpus_used: 0,
                pods: 1,
            },
        ],
        workloads: vec![WorkloadRow {
            name: "jobset-train-x7k2p".into(),
            namespace: "default".into(),
            queue: "a3u-queue".into(),
            owner: Some("JobSet/train-1795".into()),
            state: "pending".into(),
            detail: "waiting for DWS capacity (admission check dws-prov: Waiting for resources.)".into(),
            age_s: Some(14 * 60),
        }],
        queues: vec![flightdeck::cloud::gke::view::QueueRow {
            name: "a3u-queue".into(),
            cluster_queue: "dws-cluster-queue".into(),
            pending: 1,
            admitted: 0,
        }],
        kueue: None,
        waiting: vec![],
        plugins: vec![],
    };
    update(
        &mut s,
        Msg::Nodes(flightdeck::tui::nodes::Msg::GkeSnapshot {
            fleet: "a3u".into(),
            result: Ok(Box::new(snap)),
        }),
    );
    keys(&mut s, "2");
    keys(&mut s, "3");
    snapshot("gke_nodes", &s);
}

fn mega_plan() -> flightdeck::cloud::Plan {
    use flightdeck::cloud::{Change, CloudDetail, NicSummary, Plan};
    let mut changes = vec![Change {
        action: "create",
        kind: "placement_policy",
        name: "mega-placement".into(),
        place: "us-east4".into(),
        cloud: Some(CloudDetail {
            region: Some("us-east4".into()),
            ..Default::default()
        }),
    }];
    for i in 0..2 {
        changes.push(Change {
            action: "create",
            kind: "instance",
            name: format!("mega-{i}"),
            place: "us-east4-a".into(),
            cloud: Some(CloudDetail {
                zone: Some("us-east4-a".into()),
                machine_type: Some("a3-megagpu-8g".into()),
                nics: Some(NicSummary {
                    count: 9,
                    types: vec!["GVNIC".into(); 9],
                    layout: "1+8 GVNIC".into(),
                }),
                provisioning_model: Some("SPOT".into()),
                hourly_usd: Some(16.59872),
                ..Default::default()
            }),
        });
    }
    Plan {
        fleet: "mega".into(),
        backend: flightdeck::fleet::BackendKind::Gcp,
        changes,
        hourly_usd: Some(Some(33.19744)),
        fallbacks: vec!["us-east4-b".into(), "us-central1-a".into()],
        notes: vec!["VM service account: the project's Compute Engine default service account".into()],
    }
}

#[test]
fn fleet_apply_confirmation_provisioning_log_and_delete_confirmation() {
    use flightdeck::tui::fleets::{Confirm, Op};
    let mut s = state();
    update(
        &mut s,
        Msg::Fleets(flightdeck::tui::fleets::Msg::Loaded(Ok(vec![fleet_record(
            "lab", "ssh", 2,
        )]))),
    );
    keys(&mut s, "2");
    update(
        &mut s,
        Msg::Fleets(flightdeck::tui::fleets::Msg::Planned(Ok(Box::new(Confirm {
            op: Op::Apply {
                file: "fleets/mega.yaml".into(),
                reviewed: String::new(),
            },
            plan: mega_plan(),
        })))),
    );
    snapshot("fleet_apply_confirm", &s);
    keys(&mut s, "y");
    for line in [
        "try 1: a3-megagpu-8g SPOT in us-east4-a ($33.20/h for 2)",
        "  placement_policy mega-placement: created",
        "  instance mega-0: ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS: no a3-megagpu-8g left",
        "  us-east4-a: out of capacity; rolling back 1 instance",
        "  us-east4-a: ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS; trying the next zone",
        "try 2: a3-megagpu-8g SPOT in us-east4-b ($33.20/h for 2)",
        "  instance mega-0: created",
        "  instance mega-1: created",
        "  mega-0: RUNNING at 34.1.2.3, waiting for SSH",
    ] {
        update(
            &mut s,
            Msg::Fleets(flightdeck::tui::fleets::Msg::Log(line.into())),
        );
    }
    // How far it has got: a gauge over the log (the tally is not a log line).
    update(
        &mut s,
        Msg::Fleets(flightdeck::tui::fleets::Msg::Log(flightdeck::progress::tally(
            1, 2, "nodes up",
        ))),
    );
    let text = screen80(&s).join("\n");
    assert!(text.contains("1/2 nodes up · 0:0"), "{text}");
    assert!(!text.contains("@@fd-tally"), "{text}");
    // The elapsed time changes from run to run: the snapshot is taken without it.
    s.fleet_ops.started = None;
    snapshot("fleet_provisioning_log", &s);
    update(
        &mut s,
        Msg::Fleets(flightdeck::tui::fleets::Msg::Done {
            name: "lab".into(),
            result: Ok("fleet `lab`: 2 nodes ready; Enter opens their panes".into()),
        }),
    );
    keys(&mut s, "D");
    snapshot("fleet_delete_confirm", &s);
}

/// ux-walk-2 item 3: why an apply failed, and its fix, are read whole at 80x24: the
/// provisioning log wraps, the status bar takes rows for a long failure.
#[test]
fn a_failed_apply_is_read_whole_at_80_columns() {
    let mut s = state();
    keys(&mut s, "2");
    s.fleet_ops.running = Some("apply fleets/a3-mega-tcpxo.yaml".into());
    let why = "no Google Cloud access token, nothing was changed: credentials: the GCE metadata server is not reachable; run `gcloud auth application-default login` or set GOOGLE_APPLICATION_CREDENTIALS to a service-account key file";
    update(
        &mut s,
        Msg::Fleets(flightdeck::tui::fleets::Msg::Done {
            name: "mega".into(),
            result: Err(format!("{why}\nnothing was recorded")),
        }),
    );
    let rows = screen80(&s);
    let words = |text: &str| text.split_whitespace().map(str::to_string).collect::<Vec<_>>();
    let all: Vec<String> = rows
        .iter()
        .flat_map(|r| words(r.trim_matches(['│', ' '])))
        .collect();
    let joined = all.join(" ");
    assert!(
        joined.contains(&format!("failed: {why}")),
        "the log has it whole:\n{}",
        rows.join("\n")
    );
    let bar: Vec<String> = rows[20..].iter().flat_map(|r| words(r)).collect();
    assert!(
        bar.join(" ").ends_with("a service-account key file"),
        "the status bar keeps the fix:\n{}",
        rows.join("\n")
    );
    assert!(
        !rows.iter().any(|r| r.contains('…')),
        "nothing cut:\n{}",
        rows.join("\n")
    );
}

/// ux-walk-2 item 7: deleting an SSH fleet reads as forgetting it (its hosts stay as
/// they are), names the shells open in its panes, and closes those panes once done.
#[test]
fn forgetting_an_ssh_fleet_says_so_and_closes_its_panes() {
    let mut s = panes_state();
    keys(&mut s, "2");
    s.fleet_selected = Some("lab".into());
    keys(&mut s, "D");
    let text = screen80(&s).join("\n");
    assert!(text.contains("Forget lab"), "{text}");
    assert!(text.contains("the hosts below stay as they are"), "{text}");
    assert!(text.contains("forget host"), "{text}");
    assert!(!text.contains("delete"), "{text}");
    // Three of its four panes hold a connected shell (the fourth reconnects).
    assert!(text.contains("3 shells open in its panes end with it"), "{text}");
    assert_eq!(
        update(
            &mut s,
            Msg::Key(KeyEvent::new(KeyCode::Char('y'), KeyModifiers::NONE))
        ),
        vec![Command::DeleteFleet("lab".into())]
    );
    let after = update(
        &mut s,
        Msg::Fleets(flightdeck::tui::fleets::Msg::Done {
            name: "lab".into(),
            result: Ok("lab: SSH fleet forgotten (the hosts are yours and stay as they are)".into()),
        }),
    );
    assert!(after.contains(&Command::ClosePanesOf("lab".into())), "{after:?}");
    assert!(!s.panes.is_open("lab"));
}

/// Deleting a GKE fleet from the Fleets view asks under its backend's name (it said
/// "unknown backend" while the record's backend was a string matched in the cockpit).
#[test]
fn gke_fleet_delete_confirmation_names_its_backend() {
    let mut s = state();
    update(
        &mut s,
        Msg::Fleets(flightdeck::tui::fleets::Msg::Loaded(Ok(vec![fleet_record(
            "b200", "gke", 2,
        )]))),
    );
    keys(&mut s, "2");
    keys(&mut s, "D");
    let text = screen80(&s).join("\n");
    assert!(text.contains("gke backend"), "{text}");
    assert!(!text.contains("unknown"), "{text}");
}

fn finding(
    node: Option<&str>,
    check: &'static str,
    outcome: Outcome,
    what: &str,
    evidence: &[&str],
    fix: &str,
) -> Finding {
    Finding {
        check,
        node: node.map(str::to_string),
        outcome,
        what: what.into(),
        evidence: evidence.iter().map(|s| s.to_string()).collect(),
        fix: fix.into(),
        follows: None,
    }
}

/// The doctor's report of a 4-node A3 Mega fleet with the faults the testbed plants.
fn doctor_report() -> Report {
    let nodes: Vec<String> = (0..4).map(|i| format!("lab-{i}")).collect();
    let mut r = Report {
        fleet: "lab".into(),
        nodes: nodes.clone(),
        elapsed_ms: 23_400,
        ..Report::default()
    };
    for n in &nodes {
        for c in CHECKS
            .iter()
            .filter(|c| !matches!(c.id, "reach" | "placement" | "rdma"))
        {
            r.add(vec![finding(Some(n), c.id, Outcome::Pass, "ok", &[], "")]);
        }
        r.add(vec![finding(
            Some(n),
            "rdma",
            Outcome::Skip,
            "no RDMA ports on this node",
            &[],
            "",
        )]);
    }
    r.add(vec![
        finding(Some("lab-1"), "versions", Outcome::Fail, "driver 575.57.08 where 3 other nodes have 580.159.04",
            &["driver: 575.57.08", "CUDA: 13.0", "NCCL: 2.28.9+cuda13.0 (/var/lib/tcpxo/lib64/libnccl.so.2)"],
            "install the same driver, CUDA and NCCL on every node (`flightdeck fleet bootstrap FLEET`, or rebuild the node from the fleet's image); mismatched NCCL versions hang or fail collectives"),
        finding(Some("lab-2"), "xid", Outcome::Fail, "Xid 79 (GPU has fallen off the bus) on PCI:0000:00:07",
            &["[  812.113418] NVRM: Xid (PCI:0000:00:07): 79, pid=4242, name=python3, GPU has fallen off the bus."],
            "drain the node and reset the GPU (`nvidia-smi -r -i N` with no process on it) or reboot; if it comes back, replace the VM"),
        finding(Some("lab-2"), "gpus", Outcome::Fail, "7× NVIDIA H100 80GB HBM3 where 3 other nodes have 8× NVIDIA H100 80GB HBM3", &[], ""),
        finding(Some("lab-2"), "nics", Outcome::Fail, "enp7s0 down",
            &["enp0s12 up 1460 - 0", "enp6s0 up 8244 200000 0", "enp7s0 down 8244 - 0", "enp13s0 up 8244 200000 0"],
            "bring the NIC up (`sudo ip link set NIC up`); if it stays down, the VM lost the NIC: recreate it"),
        finding(Some("lab-2"), "reach", Outcome::Fail, "enp7s0 unreachable: no reply on enp7s0 to or from any of its 3 peers", &[], ""),
        finding(Some("lab-3"), "reach", Outcome::Warn, "enp6s0 slow: round trip 5.112 ms on enp6s0 with its 3 peers, where the NIC usually takes 0.180 ms", &[], "check `tc qdisc show dev NIC`"),
        finding(Some("lab-0"), "sysctl", Outcome::Warn, "small TCP buffers: net.core.rmem_max 4 MiB, net.core.wmem_max 4 MiB and 1 more",
            &["net.core.rmem_max = 4194304"], "raise them in /etc/sysctl.d/"),
        finding(None, "reach", Outcome::Pass, "enp13s0: 12 probes, 1200/1200 answered, median 0.181 ms", &[], ""),
        finding(None, "placement", Outcome::Pass, "in a COLLOCATED placement policy", &[], ""),
    ]);
    r.link_causes();
    r
}

#[test]
fn doctor_view_problems_detail_and_every_finding() {
    let mut s = state();
    s.fleets = vec![fleet_record("lab", "gcp", 4)];
    s.fleet_selected = Some("lab".into());
    keys(&mut s, "8");
    snapshot("doctor_ready", &s);
    keys(&mut s, "r");
    update(
        &mut s,
        Msg::Doctor(flightdeck::tui::doctor::Msg::Started {
            fleet: "lab".into(),
            nodes: (0..4).map(|i| format!("lab-{i}")).collect(),
        }),
    );
    let partial: Vec<Finding> = doctor_report()
        .findings
        .into_iter()
        .filter(|f| f.node.as_deref() == Some("lab-2"))
        .collect();
    update(
        &mut s,
        Msg::Doctor(flightdeck::tui::doctor::Msg::Event(Box::new(Event::Node {
            node: "lab-2".into(),
            findings: partial,
        }))),
    );
    update(
        &mut s,
        Msg::Doctor(flightdeck::tui::doctor::Msg::Event(Box::new(Event::Progress(
            flightdeck::progress::tally(1, 4, "nodes checked"),
        )))),
    );
    snapshot("doctor_running", &s);
    update(
        &mut s,
        Msg::Doctor(flightdeck::tui::doctor::Msg::Done {
            fleet: "lab".into(),
            result: Ok(Box::new(doctor_report())),
        }),
    );
    snapshot("doctor_problems", &s);
    let screen = screen80(&s);
    // The run has ended: no cell waits any more, and the legend says what a bare one is.
    assert!(
        screen
            .iter()
            .filter(|l| l.starts_with("│lab-"))
            .all(|l| !l.contains('…')),
        "{screen:#?}"
    );
    assert!(screen.iter().any(|l| l.contains("- not checked")), "{screen:#?}");
    assert!(
        screen
            .iter()
            .any(|l| l.contains("FAIL lab-2 nics      enp7s0 down")),
        "{screen:#?}"
    );
    assert!(
        screen
            .iter()
            .any(|l| l.contains("  └  lab-2 reach     enp7s0 unreachable")),
        "{screen:#?}"
    );
    keys(&mut s, "\n");
    snapshot("doctor_detail", &s);
    keys(&mut s, "v");
    snapshot("doctor_all", &s);
}

#[test]
fn doctor_view_waits_on_nothing_once_the_run_has_ended() {
    let mut s = state();
    s.fleets = vec![fleet_record("lab", "gcp", 4)];
    s.fleet_selected = Some("lab".into());
    keys(&mut s, "8");
    keys(&mut s, "r");
    update(
        &mut s,
        Msg::Doctor(flightdeck::tui::doctor::Msg::Started {
            fleet: "lab".into(),
            nodes: (0..4).map(|i| format!("lab-{i}")).collect(),
        }),
    );
    // lab-3 never answered: one finding says so, and no check ran on it.
    let mut r = doctor_report();
    r.findings.retain(|f| f.node.as_deref() != Some("lab-3"));
    r.add(vec![Finding {
        check: "reach",
        node: Some("lab-3".into()),
        outcome: Outcome::Fail,
        what: "could not run the checks: connection timed out".into(),
        evidence: vec![],
        fix: String::new(),
        follows: None,
    }]);
    let row = |s: &State| {
        screen80(s)
            .into_iter()
            .find(|l| l.starts_with("│lab-3"))
            .expect("lab-3's row")
    };
    assert!(row(&s).contains('…'), "waiting while it runs: {}", row(&s));
    update(
        &mut s,
        Msg::Doctor(flightdeck::tui::doctor::Msg::Done {
            fleet: "lab".into(),
            result: Ok(Box::new(r)),
        }),
    );
    let done = row(&s);
    assert!(!done.contains('…'), "{done}");
    assert!(done.contains("-  -  -") && done.contains('✗'), "{done}");
}

#[test]
fn nics_view_says_which_flag_follows_from_which() {
    use flightdeck::telemetry::imbalance::{Cause, Direction, Flag};
    use flightdeck::telemetry::Device;
    let mut s = nics_state(3);
    let eth2 = Some(Device::Nic { name: "eth2".into() });
    let flag = |node, direction, follows| Flag {
        node,
        device: eth2.clone(),
        direction,
        bps: 8e8,
        reasons: vec![],
        follows,
    };
    // The consequence first in the list: the rule still leads with the cause.
    s.nics.flags = vec![
        flag(
            0,
            Direction::Rx,
            Some(Cause {
                node: 1,
                device: eth2.clone(),
                direction: Direction::Tx,
                share: 1.0,
            }),
        ),
        flag(1, Direction::Tx, None),
    ];
    let screen = screen80(&s);
    let bottom = &screen[22];
    assert!(
        bottom.contains("! lab-1 eth2 tx: 800 Mbit/s under half its peers, starving lab-0 eth2 rx "),
        "{bottom}"
    );
}

/// The rows of `s`'s screen at `w`x`h` as text.
fn screen_at(s: &State, w: u16, h: u16) -> Vec<String> {
    let t = draw(s, &Theme::default_theme(), w, h);
    (0..h)
        .map(|y| (0..w).map(|x| t.backend().buffer()[(x, y)].symbol()).collect())
        .collect()
}

const LONG_FLEET: &str = "research-h200-us-central1-a-spot-fleet01";

/// Column widths use free space and names keep their distinguishing end: a 40-character
/// fleet name whole at 160x48 and its end at 80x24, its nodes told apart by their index,
/// NCCL run ids that differ only in their last character, and a job's four exit codes.
#[test]
fn long_names_and_near_identical_ids_keep_their_distinguishing_part() {
    assert_eq!(LONG_FLEET.len(), 40);
    let mut s = state();
    let mut long = fleet_record(LONG_FLEET, "ssh", 2);
    if let flightdeck::fleet::Address::Ssh(a) = &mut long.nodes[0].address {
        a.host = "a3mega-training-node-0123456789.us-central1-a.c.my-research-project.internal".into();
    }
    update(
        &mut s,
        Msg::Fleets(flightdeck::tui::fleets::Msg::Loaded(Ok(vec![
            long,
            fleet_record("local", "local", 1),
        ]))),
    );
    keys(&mut s, "2");
    let wide = screen_at(&s, 160, 48);
    assert!(wide.iter().any(|l| l.contains(LONG_FLEET)), "{wide:#?}");
    let narrow = screen_at(&s, 80, 24);
    let row = narrow
        .iter()
        .find(|l| l.contains("spot-fleet01 "))
        .unwrap_or_else(|| panic!("the name's end at 80 columns: {narrow:#?}"));
    assert!(row.contains('…') && row.contains("ssh"), "{row}");
    // Nodes: both nodes' names keep their index.
    keys(&mut s, "3");
    for (w, h) in SIZES {
        let screen = screen_at(&s, w, h);
        for i in 0..2 {
            assert!(
                screen.iter().any(|l| l.contains(&format!("fleet01-{i} "))),
                "node {i} at {w}x{h}: {screen:#?}"
            );
        }
    }
    // The node's detail panel wraps its SSH target rather than cutting it.
    keys(&mut s, "d");
    let screen = screen80(&s).join("\n");
    assert!(screen.contains("internal"), "the whole SSH target: {screen}");
    keys(&mut s, "d");
    // NCCL: two ids alike but for the last character stay apart at both sizes.
    let run = |id: &str| flightdeck::store::RunRecord {
        id: id.into(),
        kind: "nccl".into(),
        fleet: LONG_FLEET.into(),
        started_at: 1_795_316_959,
        nodes: vec![],
    };
    update(
        &mut s,
        Msg::Nccl(flightdeck::tui::nccl::Msg::Runs(vec![
            run("nccl-all_reduce-1795316959-49e2"),
            run("nccl-all_reduce-1795316959-49e3"),
        ])),
    );
    keys(&mut s, "5");
    for (w, h) in [(160, 48)] {
        let screen = screen_at(&s, w, h);
        for id in ["59-49e2", "59-49e3"] {
            assert!(
                screen.iter().any(|l| l.contains(id)),
                "{id} at {w}x{h}: {screen:#?}"
            );
        }
    }
    // Jobs: the exit codes are never cut while the id has room to give.
    update(
        &mut s,
        Msg::Jobs(flightdeck::tui::jobs::Msg::List {
            jobs: vec![job_record(
                "train-long-name-1795323800-3c4d",
                "train-long-name",
                LONG_FLEET,
                1_795_323_800,
                &[Some(255), Some(143), Some(255), Some(143)],
            )],
            now: 1_795_323_900,
        }),
    );
    keys(&mut s, "6");
    for (w, h) in SIZES {
        let screen = screen_at(&s, w, h);
        assert!(
            screen.iter().any(|l| l.contains("255,143,255,143")),
            "exit codes at {w}x{h}: {screen:#?}"
        );
    }
}

/// Pane titles at 80 columns keep the node's index and the pane's state (the common
/// start of the names goes), and under NO_COLOR the focused pane is marked in its title.
#[test]
fn pane_titles_keep_index_and_state_and_mark_focus_without_colour() {
    use flightdeck::term::session::PaneState;
    let mut s = state();
    update(
        &mut s,
        Msg::Fleets(flightdeck::tui::fleets::Msg::Loaded(Ok(vec![fleet_record(
            LONG_FLEET, "ssh", 4,
        )]))),
    );
    let tiles: Vec<flightdeck::tui::panes::PaneTile> = (0..4)
        .map(|i| flightdeck::tui::panes::PaneTile {
            id: i,
            node: format!("{LONG_FLEET}-{i}"),
            host: format!("10.88.0.{}", i + 1),
            state: if i == 1 {
                PaneState::Exited(Some(0))
            } else {
                PaneState::Connected
            },
            marked: false,
            screen: flightdeck::term::new_screen(24, 80),
            size: (40, 12),
        })
        .collect();
    update(
        &mut s,
        Msg::Panes(flightdeck::tui::panes::Msg::Opened {
            fleet: LONG_FLEET.into(),
            tiles,
        }),
    );
    keys(&mut s, "4");
    update(&mut s, Msg::Resize(80, 24));
    let screen = screen_at(&s, 80, 24).join("\n");
    for i in 0..4 {
        assert!(screen.contains(&format!("fleet01-{i} ")), "index {i}: {screen}");
    }
    assert!(screen.contains("✖ exited 0"), "{screen}");
    let dir = tempfile::tempdir().unwrap();
    let paths = flightdeck::paths::Paths {
        config_dir: dir.path().into(),
        state_dir: dir.path().join("s"),
    };
    let mono = Theme::load("dark", &paths, true).unwrap();
    let t = draw(&s, &mono, 80, 24);
    let text = format!("{}", t.backend());
    assert_eq!(text.matches('▶').count(), 1, "one focused pane marked: {text}");
}

/// At 80x24 a Spot filter shows the SPOT column, and the two notes of the bottom border
/// both read whole.
#[test]
fn offers_spot_filter_shows_spot_prices_and_both_notes_at_80() {
    let mut s = state();
    keys(&mut s, "/gpu=H200 spot<40\n");
    let screen = screen80(&s);
    let header = screen.iter().find(|l| l.contains("MACHINE")).unwrap();
    assert!(header.contains("SPOT"), "{screen:#?}");
    let bottom = screen.iter().find(|l| l.starts_with('└')).unwrap();
    assert!(
        bottom.contains("offers left out: their price is unknown"),
        "{bottom}"
    );
    assert!(bottom.contains("d tells why"), "{bottom}");
}

/// A GCP plan as `fleets/a3-mega-tcpxo.yaml` makes it: nine networks, ten firewalls, nine
/// subnetworks, a placement policy and two Spot instances, with the notes.
fn a3_mega_plan() -> flightdeck::cloud::Plan {
    use flightdeck::cloud::Change;
    let mut plan = mega_plan();
    let global = |kind: &'static str, name: String| Change {
        action: "create",
        kind,
        name,
        place: "global".into(),
        cloud: None,
    };
    let mut changes = vec![global("network", "a3-mega-net".into())];
    changes.extend((1..=8).map(|i| global("network", format!("a3-mega-data-{i}"))));
    changes.push(global("firewall", "a3-mega-net-ssh".into()));
    changes.push(global("firewall", "a3-mega-net-internal".into()));
    changes.extend((1..=8).map(|i| global("firewall", format!("a3-mega-data-{i}-internal"))));
    changes.extend((0..=8).map(|i| Change {
        place: "us-east4".into(),
        ..global("subnetwork", format!("a3-mega-sub-{i}"))
    }));
    changes.extend(plan.changes.drain(..).map(|mut c| {
        if c.kind == "instance" {
            c.name = c.name.replace("mega-", "a3-mega-");
        }
        c
    }));
    plan.changes = changes;
    plan.notes = vec![
        "no GCP project found: this plan writes `PROJECT` where the project goes; apply needs one (gcp.project_id in the config, GOOGLE_CLOUD_PROJECT, or `gcloud config set project`)".into(),
        "VM service account: the project's Compute Engine default service account, cloud-platform scope (gcp.vm_service_account names another): the GPUDirect bootstrap pulls from Artifact Registry with it".into(),
    ];
    plan
}

/// Issue 29 (UX walk ranked 1): at 80x24 the apply confirmation of a 31-resource GCP
/// plan shows what costs money (the instances, their machine type and Spot model, the
/// total, the notes) and counts the rest per kind, above the keys; nothing is cut.
#[test]
fn apply_confirmation_at_80x24_shows_the_money_and_counts_the_rest() {
    use flightdeck::tui::fleets::{Confirm, Op};
    let mut s = state();
    keys(&mut s, "2");
    update(
        &mut s,
        Msg::Fleets(flightdeck::tui::fleets::Msg::Planned(Ok(Box::new(Confirm {
            op: Op::Apply {
                file: "fleets/a3-mega-tcpxo.yaml".into(),
                reviewed: String::new(),
            },
            plan: a3_mega_plan(),
        })))),
    );
    let text = screen80(&s).join("\n");
    for want in [
        "instance         a3-mega-0",
        "instance         a3-mega-1",
        "a3-megagpu-8g",
        "SPOT",
        "total $33.20/h",
        "note: no GCP project found",
        "create  9 networks, 10 firewalls, 9 subnetworks, 1 placement policy",
        "y go ahead",
    ] {
        assert!(
            text.contains(want),
            "{want:?} is not on the 80x24 screen:\n{text}"
        );
    }
    assert!(!text.contains("not shown"), "everything fits counted:\n{text}");
    // The money comes before the counted resources.
    let at = |w: &str| text.find(w).unwrap();
    assert!(at("a3-mega-0") < at("total $33.20/h"));
    assert!(at("total $33.20/h") < at("9 networks"));
    // At 160x48 every resource has its own line.
    let big = draw(&s, &Theme::default_theme(), 160, 48);
    let big: String = (0..48)
        .map(|y| {
            (0..160)
                .map(|x| big.backend().buffer()[(x, y)].symbol())
                .collect::<String>()
                + "\n"
        })
        .collect();
    assert!(big.contains("a3-mega-data-8-internal"), "{big}");
    assert!(big.contains("total $33.20/h"), "{big}");
    // Smaller still, what does not fit is said to be cut, above the keys.
    let small = draw(&s, &Theme::default_theme(), 80, 14);
    let small: String = (0..14)
        .map(|y| {
            (0..80)
                .map(|x| small.backend().buffer()[(x, y)].symbol())
                .collect::<String>()
                + "\n"
        })
        .collect();
    assert!(
        small.contains("of the plan not shown: a taller terminal"),
        "{small}"
    );
    assert!(
        small.contains("total $33.20/h") && small.contains("y go ahead"),
        "{small}"
    );
}

/// The Fleets view's `◆` (a fleet whose panes are open) is explained in its title, and
/// only while some fleet has open panes (ux walk §17: a `◆` without a legend).
#[test]
fn the_fleets_diamond_has_a_legend() {
    let mut s = state();
    update(
        &mut s,
        Msg::Fleets(flightdeck::tui::fleets::Msg::Loaded(Ok(vec![
            fleet_record("lab", "ssh", 2),
            fleet_record("local", "local", 1),
        ]))),
    );
    keys(&mut s, "2");
    let closed = screen80(&s).join("\n");
    assert!(!closed.contains('◆'), "{closed}");
    s.panes.fleet = Some("lab".into());
    let open = screen80(&s).join("\n");
    assert!(open.contains("Fleets (2) · ◆ panes open"), "{open}");
    assert!(open.contains("lab ◆"), "{open}");
}
