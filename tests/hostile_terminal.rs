//! The cockpit draws outside text (what nodes, APIs and other users' files say) without
//! a control character in any cell (hostile review D3: ratatui hands ESC and BEL in a
//! `Span` to the terminal as they are; the Doctor view put text on the tmux clipboard and
//! set the pane title). Every view and overlay is drawn with [`EVIL`] in every field fed
//! from outside: fleet and node names and hosts (fleet files, the state), a GKE cluster's
//! pools, nodes, conditions and Kueue's words, NCCL runs (report, tail, errors, history,
//! stragglers), doctor findings and evidence, job names and logs, NIC names, host-key
//! and passphrase questions, the provisioning log and every status message. Each frame
//! is checked cell by cell; the places a node's words are read (doctor evidence, a run's
//! tail, a job's log) show them made visible (`␛]52;…`). Pane screens are a terminal
//! emulator's cells (vt100): they never hold control characters.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use flightdeck::doctor::{run::Event, Finding, Outcome, Report};
use flightdeck::tui::keymap::Keymap;
use flightdeck::tui::state::{Msg, Overlay, State};
use flightdeck::tui::theme::{Theme, EMBEDDED};
use flightdeck::tui::update::update;
use flightdeck::tui::views;
use ratatui::backend::TestBackend;
use ratatui::Terminal;

/// OSC 52 (clipboard: `rm -rf ~`), an OSC 0 title, BEL, a screen clear, SGR 8, C1 CSI.
const EVIL: &str = "\u{1b}]52;c;cm0gLXJmIH4K\u{7}\u{1b}]0;OWNED\u{7}\u{1b}[2J\u{1b}[8m\u{9b}2J\r\n\tx";

fn evil(s: &str) -> String {
    format!("{s}{EVIL}")
}

fn state() -> State {
    let themes = EMBEDDED.iter().map(|(n, _)| n.to_string()).collect();
    State::new(Keymap::defaults(), themes, "dark".into())
}

fn keys(s: &mut State, text: &str) {
    for c in text.chars() {
        let code = match c {
            '\n' => KeyCode::Enter,
            c => KeyCode::Char(c),
        };
        update(s, Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)));
    }
}

/// Draw `s` at `w`x`h`; every cell's symbol, row by row.
fn frame(s: &State, w: u16, h: u16) -> Vec<String> {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| views::draw(s, &Theme::default_theme(), f)).unwrap();
    let buf = t.backend().buffer();
    (0..h)
        .map(|y| (0..w).map(|x| buf[(x, y)].symbol()).collect())
        .collect()
}

/// No cell of `s`'s frames (two sizes) holds a control character; the rows at 160x48.
fn assert_clean(s: &State, what: &str) -> Vec<String> {
    let mut last = vec![];
    for (w, h) in [(80, 24), (160, 48)] {
        let rows = frame(s, w, h);
        for (y, row) in rows.iter().enumerate() {
            assert!(
                !row.chars().any(char::is_control),
                "{what} at {w}x{h}, row {y}: {row:?}"
            );
        }
        last = rows;
    }
    last
}

fn node(fleet: &str, i: usize) -> flightdeck::fleet::NodeTarget {
    flightdeck::fleet::NodeTarget {
        index: i,
        name: evil(&format!("{fleet}-{i}")),
        internal_ip: Some(evil("10.0.0.1")),
        address: flightdeck::fleet::Address::Ssh(flightdeck::fleet::SshAddress {
            host: evil("10.88.0.1"),
            port: None,
            user: Some(evil("root")),
            identity_file: None,
            proxy_jump: Some(flightdeck::fleet::JumpTarget {
                host: evil("34.1.2.3"),
                port: None,
                user: Some(evil("ops")),
                identity_file: None,
            }),
        }),
    }
}

fn fleet_record(name: &str, backend: &str, n: usize) -> flightdeck::store::FleetRecord {
    flightdeck::store::FleetRecord {
        name: name.into(),
        backend: backend.parse().unwrap(),
        file: Some(evil("/home/op/fleets/x.yaml").into()),
        nodes: (0..n).map(|i| node(name, i)).collect(),
        resources: vec![],
        created_at: 1_795_305_600,
        applied: None,
    }
}

/// Status messages from outside: failed loads, writes, plans, runs.
fn messages(s: &mut State) {
    update(s, Msg::ThemeLoaded(Err(evil("theme"))));
    update(
        s,
        Msg::Fleets(flightdeck::tui::fleets::Msg::FileWritten(Err(evil("write")))),
    );
    update(s, Msg::Panes(flightdeck::tui::panes::Msg::Failed(evil("panes"))));
    update(
        s,
        Msg::Jobs(flightdeck::tui::jobs::Msg::Started(Err(evil("job")))),
    );
    update(
        s,
        Msg::Nccl(flightdeck::tui::nccl::Msg::Started(Err(evil("nccl")))),
    );
    update(
        s,
        Msg::Fleets(flightdeck::tui::fleets::Msg::Planned(Err(evil("plan")))),
    );
    update(
        s,
        Msg::Offers(flightdeck::tui::offers::Msg::Refreshed(Err(evil("offers")))),
    );
}

#[test]
fn fleets_nodes_panes_and_questions() {
    let mut s = state();
    update(
        &mut s,
        Msg::Fleets(flightdeck::tui::fleets::Msg::Loaded(Ok(vec![
            fleet_record("lab", "ssh", 3),
            fleet_record("a3u", "gke", 0),
        ]))),
    );
    messages(&mut s);
    keys(&mut s, "2");
    update(
        &mut s,
        Msg::Fleets(flightdeck::tui::fleets::Msg::Log(evil("  lab-0: created"))),
    );
    update(
        &mut s,
        Msg::Fleets(flightdeck::tui::fleets::Msg::Log(evil("failed"))),
    );
    update(
        &mut s,
        Msg::Fleets(flightdeck::tui::fleets::Msg::Done {
            name: "lab".into(),
            result: Err(evil("apply")),
        }),
    );
    assert_clean(&s, "Fleets");
    keys(&mut s, "3");
    assert_clean(&s, "Nodes");
    // A GKE cluster as its API describes it.
    use flightdeck::cloud::gke::view::{NodeRow, PoolRow, QueueRow, Snapshot, WorkloadRow};
    let snap = Snapshot {
        cluster: evil("cluster"),
        pools: vec![PoolRow {
            name: evil("pool"),
            machine_type: evil("a3"),
            accelerator: Some(evil("h200")),
            provisioning: evil("spot"),
            nodes: 1,
            ready: 0,
            gpus: 8,
            gpus_used: 0,
            autoscaling: None,
        }],
        nodes: vec![NodeRow {
            name: evil("gke-node"),
            pool: evil("pool"),
            machine_type: evil("a3"),
            internal_ip: Some(evil("10.0.0.9")),
            ready: false,
            conditions: vec![evil("NotReady")],
            gpus: 8,
            gpus_used: 0,
            pods: 1,
        }],
        workloads: vec![WorkloadRow {
            name: evil("wl"),
            namespace: evil("default"),
            queue: evil("q"),
            owner: Some(evil("JobSet/x")),
            state: evil("pending"),
            detail: evil("waiting"),
            age_s: Some(60),
        }],
        queues: vec![QueueRow {
            name: evil("q"),
            cluster_queue: evil("cq"),
            pending: 1,
            admitted: 0,
        }],
        kueue: Some(evil("kueue")),
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
    for k in ["2", "j", "3", "j"] {
        keys(&mut s, k);
        assert_clean(&s, &format!("Fleets/Nodes with GKE, key {k}"));
    }
    update(
        &mut s,
        Msg::Nodes(flightdeck::tui::nodes::Msg::GkeSnapshot {
            fleet: "a3u".into(),
            result: Err(evil("gke")),
        }),
    );
    assert_clean(&s, "GKE error");

    // Panes: node names and hosts on the tiles; the screens are vt100's.
    use flightdeck::term::session::PaneState;
    let tiles: Vec<flightdeck::tui::panes::PaneTile> = (0..2)
        .map(|i| {
            let screen = flightdeck::term::new_screen(24, 80);
            screen.write().unwrap().process(EVIL.as_bytes());
            flightdeck::tui::panes::PaneTile {
                id: i,
                node: evil("lab-0"),
                host: evil("10.88.0.1"),
                state: if i == 0 {
                    PaneState::Connected
                } else {
                    PaneState::Failed(evil("refused"))
                },
                marked: false,
                screen,
                size: (80, 24),
            }
        })
        .collect();
    update(
        &mut s,
        Msg::Panes(flightdeck::tui::panes::Msg::Opened {
            fleet: evil("lab"),
            tiles,
        }),
    );
    keys(&mut s, "4");
    assert_clean(&s, "Panes");

    // Questions over any view, and the messages overlay.
    update(
        &mut s,
        Msg::HostKeyQuestion {
            id: 1,
            host: evil("host"),
            fingerprint: evil("SHA256:x"),
        },
    );
    assert_clean(&s, "host key question");
    s.overlay = Overlay::None;
    update(
        &mut s,
        Msg::PassphraseQuestion {
            id: 2,
            key: evil("/root/.ssh/id"),
        },
    );
    assert_clean(&s, "passphrase question");
    s.overlay = Overlay::Messages { scroll: 0 };
    let rows = assert_clean(&s, "messages");
    assert!(
        rows.iter().any(|r| r.contains("␛]52;c;cm0gLXJmIH4K^G")),
        "{rows:#?}"
    );
}

#[test]
fn nccl_view() {
    let mut s = state();
    let run = |id: String, code: Option<i32>| flightdeck::store::RunRecord {
        id,
        kind: "nccl".into(),
        fleet: evil("lab"),
        started_at: 1_795_316_959,
        nodes: vec![flightdeck::store::RunNode {
            node: 0,
            pid: Some(42),
            log: evil("~/x"),
            exit_code: code,
            pod: Some(evil("pod")),
            started_at: None,
            ended_at: None,
        }],
    };
    let (a, b) = (evil("nccl-a"), evil("nccl-b"));
    update(
        &mut s,
        Msg::Nccl(flightdeck::tui::nccl::Msg::Runs(vec![
            run(a.clone(), Some(1)),
            run(b.clone(), None),
        ])),
    );
    keys(&mut s, "5\n");
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/nccl/h200x2-all_reduce.txt"
    ))
    .unwrap()
    .replacen("#\n", &format!("#\nNCCL version 2.28.9{EVIL}+cuda\n"), 1)
    .replace("NVIDIA H200", &evil("NVIDIA H200"));
    let report = flightdeck::nccl::parse_text(&text).remove(0);
    for id in [&a, &b] {
        update(
            &mut s,
            Msg::Nccl(flightdeck::tui::nccl::Msg::Report {
                id: id.clone(),
                report: Box::new(report.clone()),
            }),
        );
    }
    update(
        &mut s,
        Msg::Nccl(flightdeck::tui::nccl::Msg::Ended {
            id: a.clone(),
            end: Box::new(flightdeck::tui::nccl::RunEnd {
                codes: vec![(evil("lab-0"), Some(1))],
                tail: vec![evil("lab-0:1:1 [0] NCCL WARN"), evil("tail")],
            }),
        }),
    );
    update(
        &mut s,
        Msg::Nccl(flightdeck::tui::nccl::Msg::Failed {
            id: b.clone(),
            error: evil("failed"),
        }),
    );
    let rows = assert_clean(&s, "NCCL run");
    assert!(rows.iter().any(|r| r.contains("␛]52;c;")), "{rows:#?}");
    keys(&mut s, "j");
    assert_clean(&s, "NCCL other run");
    // The history and a straggler search, as saved.
    let saved: Vec<flightdeck::nccl::history::SavedRun> = [&a, &b]
        .iter()
        .map(|id| flightdeck::nccl::history::SavedRun {
            id: (*id).clone(),
            fleet: evil("lab"),
            started_at: 1_795_316_959,
            nodes: vec![evil("lab-0")],
            machine_type: Some(evil("a3")),
            machine_type_from: Some(evil("rank list")),
            exit_codes: vec![Some(1)],
            peak_busbw: Some(100.0),
            purpose: Some(evil("stragglers")),
            ..Default::default()
        })
        .collect();
    update(&mut s, Msg::Nccl(flightdeck::tui::nccl::Msg::History(saved)));
    assert_clean(&s, "NCCL history");
    keys(&mut s, "c");
    assert_clean(&s, "NCCL compare");
    let r = flightdeck::nccl::history::StragglerReport {
        fleet: evil("lab"),
        at: 1_795_317_000,
        collective: evil("all_reduce"),
        threshold: 0.9,
        nodes: vec![evil("lab-0"), evil("lab-1")],
        node_ranking: vec![(evil("lab-0"), Some(1.0)), (evil("lab-1"), None)],
        link_ranking: vec![(evil("lab-0"), evil("lab-1"), Some(2.0))],
        slow_nodes: vec![(evil("lab-0"), evil("alone"))],
        slow_links: vec![(evil("lab-0"), evil("lab-1"), evil("pair"))],
        unresolved: vec![evil("lab-1")],
        named: Some(evil("lab-0")),
    };
    update(
        &mut s,
        Msg::Nccl(flightdeck::tui::nccl::Msg::Stragglers(Some(Box::new(r)))),
    );
    assert_clean(&s, "NCCL stragglers");
}

fn finding(node: Option<&str>, check: &'static str, outcome: Outcome) -> Finding {
    Finding {
        check,
        node: node.map(evil),
        outcome,
        what: evil("what"),
        evidence: vec![evil("net.core.rmem_max = 4194304"), evil("[  812.1] NVRM: Xid")],
        fix: evil("fix"),
        follows: None,
    }
}

/// The review's experiment D3 in the cockpit: the Doctor view, a problem opened.
#[test]
fn doctor_view() {
    let mut s = state();
    s.fleets = vec![fleet_record("lab", "ssh", 2)];
    s.fleet_selected = Some("lab".into());
    keys(&mut s, "8r");
    update(
        &mut s,
        Msg::Doctor(flightdeck::tui::doctor::Msg::Started {
            fleet: "lab".into(),
            nodes: vec![evil("lab-0"), evil("lab-1")],
        }),
    );
    update(
        &mut s,
        Msg::Doctor(flightdeck::tui::doctor::Msg::Event(Box::new(Event::Node {
            node: evil("lab-0"),
            findings: vec![finding(Some("lab-0"), "sysctl", Outcome::Warn)],
        }))),
    );
    update(
        &mut s,
        Msg::Doctor(flightdeck::tui::doctor::Msg::Event(Box::new(Event::Progress(
            evil("progress"),
        )))),
    );
    assert_clean(&s, "Doctor running");
    let mut r = Report::default();
    r.add(vec![
        finding(Some("lab-0"), "sysctl", Outcome::Warn),
        finding(Some("lab-1"), "xid", Outcome::Fail),
        finding(None, "reach", Outcome::Fail),
    ]);
    update(
        &mut s,
        Msg::Doctor(flightdeck::tui::doctor::Msg::Done {
            fleet: "lab".into(),
            result: Ok(Box::new(r)),
        }),
    );
    assert_clean(&s, "Doctor problems");
    keys(&mut s, "\n");
    let rows = assert_clean(&s, "Doctor detail");
    assert!(
        rows.iter().any(|r| r.contains("␛]52;c;cm0gLXJmIH4K^G")),
        "the evidence is shown: {rows:#?}"
    );
    keys(&mut s, "v");
    assert_clean(&s, "Doctor every finding");
    update(
        &mut s,
        Msg::Doctor(flightdeck::tui::doctor::Msg::Done {
            fleet: "lab".into(),
            result: Err(evil("doctor")),
        }),
    );
    assert_clean(&s, "Doctor error");
}

#[test]
fn jobs_view() {
    let mut s = state();
    update(
        &mut s,
        Msg::Fleets(flightdeck::tui::fleets::Msg::Loaded(Ok(vec![fleet_record(
            "tb", "ssh", 2,
        )]))),
    );
    let job = |id: &str| flightdeck::store::JobRecord {
        id: id.into(),
        name: evil("train"),
        fleet: evil("tb"),
        file: Some(evil("/x.yaml").into()),
        started_at: 1_795_323_700,
        ended_at: None,
        stopped: false,
        failed_rank: None,
        nodes: (0..2)
            .map(|i| flightdeck::store::RunNode {
                node: i,
                pid: Some(4000),
                log: evil("~/log"),
                exit_code: None,
                pod: Some(evil("pod")),
                started_at: None,
                ended_at: None,
            })
            .collect(),
        metrics: vec![],
        flops_per_token: None,
        peak_tflops: None,
        profile: evil("none"),
        stop_on_failure: false,
        stop_grace: 10,
        launcher: None,
    };
    let id = "train-1795323700-1a2b";
    update(
        &mut s,
        Msg::Jobs(flightdeck::tui::jobs::Msg::List {
            jobs: vec![job(id)],
            now: 1_795_323_760,
        }),
    );
    keys(&mut s, "6");
    assert_clean(&s, "Jobs list");
    keys(&mut s, "\n");
    update(
        &mut s,
        Msg::Jobs(flightdeck::tui::jobs::Msg::Lines {
            id: id.into(),
            lines: (0..2)
                .flat_map(|r| {
                    [
                        (r, evil("Step: 1 | Loss: 9.0")),
                        (r, "\u{1b}[31mStep: 2 | Loss: 8.5\u{1b}[0m".to_string()),
                    ]
                })
                .collect(),
            now: 1_795_323_760,
        }),
    );
    update(
        &mut s,
        Msg::Jobs(flightdeck::tui::jobs::Msg::Node {
            id: id.into(),
            rank: 1,
            follow: flightdeck::tui::jobs::NodeFollow::Lost(evil("lost")),
        }),
    );
    let rows = assert_clean(&s, "Jobs log");
    assert!(rows.iter().any(|r| r.contains("␛]52;c;")), "{rows:#?}");
    keys(&mut s, "w");
    assert_clean(&s, "Jobs log wrapped");
    keys(&mut s, "l");
    assert_clean(&s, "Jobs node 1");
}

#[test]
fn nics_and_offers_views() {
    use flightdeck::telemetry::service::TelemetryEvent;
    use flightdeck::telemetry::synth::Synth;
    let mut s = state();
    keys(&mut s, "7");
    update(
        &mut s,
        Msg::Nics(flightdeck::tui::nics::Msg::Started {
            fleet: evil("lab"),
            nodes: vec![evil("lab-0"), evil("lab-1")],
        }),
    );
    let (a, b) = (evil("eth"), "e\u{1b}]0;X\u{7}".to_string());
    let mut synth = Synth::new(2, &["eth0", &a, &b], 2, 1000);
    for node in 0..2 {
        let hello = synth.hello(node);
        update(
            &mut s,
            Msg::Nics(flightdeck::tui::nics::Msg::Sample(Box::new(
                TelemetryEvent::Hello { node, hello },
            ))),
        );
    }
    for seq in 1..=5u64 {
        for node in 0..2 {
            let record = synth.record(node, seq, |_| (1e9, 1e9), |_| (50.0, 300.0));
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
    update(
        &mut s,
        Msg::Nics(flightdeck::tui::nics::Msg::Sample(Box::new(
            TelemetryEvent::Stderr {
                node: 1,
                text: evil("stderr"),
            },
        ))),
    );
    for k in ["", "v", "v", "v", "j\n"] {
        keys(&mut s, k);
        assert_clean(&s, &format!("NICs, keys {k:?}"));
    }
    messages(&mut s);
    keys(&mut s, "1");
    assert_clean(&s, "Offers");
}
