//! The cockpit provisions a GCP fleet against the Compute Engine **double**
//! (tests/support/gce_double.rs) whose instances are bound to testbed nodes (real sshd in
//! network namespaces): `:apply FILE` → the plan's confirmation → y → the provisioning
//! log shows every attempt (a stockout, the next zone, the SSH wait) and the GPUDirect
//! bootstrap of the nodes step by step → the fleet is listed
//! → Enter opens panes on its nodes → `D` y deletes it. Driven at the update/service layer
//! (`update` + `Services`, as the event loop does), not through a terminal. One test in
//! this binary: it sets the process environment the backend reads.

mod support;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use flightdeck::paths::Paths;
use flightdeck::term::session::PaneState;
use flightdeck::tui::keymap::Keymap;
use flightdeck::tui::services::{ServiceEvent, Services};
use flightdeck::tui::state::{Command, Msg, Overlay, State, View};
use flightdeck::tui::update::{run_command, update};
use std::time::Duration;
use support::gce_double::{GceDouble, PROJECT};
use tokio::sync::mpsc;

const FLEET: &str = "type: fleet\nname: tbg\nnodes: 2\nplacement: cluster\ninstance_types: [a3-megagpu-8g]\nregions: [us-east4, us-central1]\nspot_policy: spot\nnetwork:\n  gpudirect: tcpxo\n  create: true\n";

struct Cockpit {
    state: State,
    services: Services,
    rx: mpsc::Receiver<ServiceEvent>,
}

impl Cockpit {
    fn run(&mut self, commands: Vec<Command>) {
        for c in commands {
            match c {
                Command::Quit | Command::Suspend | Command::LoadTheme(_) | Command::Yank(_) => {}
                c => self.services.run(c),
            }
        }
    }

    fn key(&mut self, c: KeyCode) {
        let cmds = update(&mut self.state, Msg::Key(KeyEvent::new(c, KeyModifiers::NONE)));
        self.run(cmds);
    }

    /// Feed service events into `update` until `done` holds (a guard of 180 s against a
    /// hang; not a timing assertion).
    async fn until(&mut self, what: &str, done: impl Fn(&State) -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
        while !done(&self.state) {
            let e = tokio::time::timeout_at(deadline, self.rx.recv())
                .await
                .unwrap_or_else(|_| {
                    panic!(
                        "waiting for {what}; status {:?}; log:\n{}",
                        self.state.status,
                        self.state
                            .fleet_ops
                            .log
                            .iter()
                            .cloned()
                            .collect::<Vec<_>>()
                            .join("\n")
                    )
                })
                .expect("services alive");
            let msg = match e {
                ServiceEvent::Msg(m) => m,
                ServiceEvent::OpenPanes(record) => match self.services.open_panes(&record) {
                    Ok(tiles) => Msg::Panes(flightdeck::tui::panes::Msg::Opened {
                        fleet: record.name.clone(),
                        tiles,
                    }),
                    Err(e) => Msg::Panes(flightdeck::tui::panes::Msg::Failed(e)),
                },
            };
            let cmds = update(&mut self.state, msg);
            self.run(cmds);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cockpit_plans_applies_opens_panes_and_deletes_a_gcp_fleet() {
    let Some(tb) = tokio::task::spawn_blocking(|| support::testbed::Testbed::new_machines(2, 0))
        .await
        .unwrap()
    else {
        unreachable!("Testbed::new_machines fails the test when it cannot build one")
    };
    let d = GceDouble::start().await;
    // The first zone is out of capacity: the log must show the failover.
    d.stockout("us-east4-a");
    let addrs: Vec<String> = tb.nodes.iter().map(|n| n.addr.clone()).collect();
    let refs: Vec<&str> = addrs.iter().map(String::as_str).collect();
    d.internal_pool(&refs);

    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().to_path_buf();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::create_dir_all(home.join("fd")).unwrap();
    std::fs::write(home.join("adc.json"), d.credentials().to_string()).unwrap();
    let key = tb.user_key.display();
    std::fs::write(
        home.join("fd/config.yaml"),
        format!(
            "gcp:\n  project_id: {PROJECT}\n  owner: tester\n  operation_poll_secs: 0.02\n  health_check_secs: 1\n  ssh_wait_secs: 30\n  public_ips: false\n  ssh_user: root\n  ssh_public_key: {key}.pub\n  identity_file: {key}\n  proxy_jump:\n    hostname: {b}\n    user: root\n    identity_file: {key}\n",
            b = tb.bastion.addr
        ),
    )
    .unwrap();
    std::fs::copy(&tb.known_hosts, home.join(".ssh/known_hosts")).unwrap();
    let file = home.join("tbg.yaml");
    std::fs::write(&file, FLEET).unwrap();
    let file = file.display().to_string();
    // This binary's only test: the backend reads these from the environment.
    std::env::set_var("HOME", &home);
    std::env::set_var("FLIGHTDECK_HOME", home.join("fd"));
    std::env::set_var("GOOGLE_APPLICATION_CREDENTIALS", home.join("adc.json"));
    std::env::set_var("FLIGHTDECK_GCP_COMPUTE_URL", d.origin());
    std::env::set_var("USER", "tester");
    let paths = Paths::from_env().unwrap();

    let (tx, rx) = mpsc::channel(4096);
    let mut c = Cockpit {
        state: State::new(Keymap::defaults(), vec![], "dark".into()),
        services: Services::new(tx, paths, true),
        rx,
    };
    c.state.view = View::Fleets;

    // :apply FILE → the plan comes back as a confirmation with the price per hour.
    let cmds = run_command(&mut c.state, &format!("apply {file}"));
    assert_eq!(cmds, vec![Command::PlanFleet(file.clone())]);
    c.run(cmds);
    c.until("the plan", |s| matches!(s.overlay, Overlay::FleetConfirm(_)))
        .await;
    let Overlay::FleetConfirm(confirm) = &c.state.overlay else {
        unreachable!()
    };
    let instances: Vec<_> = confirm
        .plan
        .changes
        .iter()
        .filter(|ch| ch.action == "create" && ch.kind == "instance")
        .collect();
    assert_eq!(instances.len(), 2, "{:?}", confirm.plan);
    for i in &instances {
        let d = i.cloud.as_ref().unwrap();
        assert_eq!(d.machine_type.as_deref(), Some("a3-megagpu-8g"));
        assert_eq!(d.provisioning_model.as_deref(), Some("SPOT"));
    }
    assert!(
        matches!(confirm.plan.hourly_usd, Some(Some(p)) if p > 0.0),
        "{:?}",
        confirm.plan
    );
    assert!(d.instance_inserts().is_empty(), "planning changes nothing");

    // y → apply; the log streams every attempt; the fleet is listed and selected.
    c.key(KeyCode::Char('y'));
    assert!(c.state.fleet_ops.running.is_some());
    c.until("the apply", |s| s.fleet_ops.running.is_none()).await;
    let log = c
        .state
        .fleet_ops
        .log
        .iter()
        .cloned()
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        matches!(c.state.fleet_ops.outcome, Some(Ok(_))),
        "{:?}\n{log}",
        c.state.fleet_ops.outcome
    );
    assert!(log.contains("try 1: a3-megagpu-8g SPOT in us-east4-a"), "{log}");
    assert!(log.contains("ZONE_RESOURCE_POOL_EXHAUSTED"), "{log}");
    assert!(log.contains("trying the next zone"), "{log}");
    assert!(log.contains("try 2: a3-megagpu-8g SPOT in us-east4-b"), "{log}");
    assert!(log.contains("SSH login works"), "{log}");
    // Then the GPUDirect bootstrap of the nodes (testbed machines with the recording
    // shims), step by step in the same log.
    assert!(
        log.contains("bootstrapping 2 nodes for GPUDirect-TCPXO (A3 Mega)"),
        "{log}"
    );
    assert!(
        log.contains("tbg-0: rxdm: done") && log.contains("tbg-1: nccl-tests: done"),
        "{log}"
    );
    assert!(log.contains("bootstrap tcpxo: 2 nodes ready"), "{log}");
    eprintln!("provisioning log:\n{log}");
    c.until("the fleet listed", |s| {
        s.fleets.iter().any(|f| f.name == "tbg" && f.nodes.len() == 2)
    })
    .await;
    assert_eq!(c.state.fleet_selected.as_deref(), Some("tbg"));

    // Enter opens a pane on each node, over SSH through the bastion.
    c.key(KeyCode::Enter);
    c.until("panes connected", |s| {
        s.panes.fleet.as_deref() == Some("tbg")
            && s.panes.tiles.len() == 2
            && s.panes.tiles.iter().all(|t| t.state == PaneState::Connected)
    })
    .await;
    let cmds = run_command(&mut c.state, "close");
    c.run(cmds);

    // The background check (every second here) ran through the apply without calling a
    // node being made lost; a Spot node preempted now shows without a reload.
    let lost = |s: &State| {
        s.fleets
            .iter()
            .flat_map(|f| &f.resources)
            .filter(|r| r.lost.is_some())
            .count()
    };
    assert_eq!(lost(&c.state), 0, "{:?}", c.state.fleets);
    assert!(
        !c.state
            .status
            .as_ref()
            .is_some_and(|m| m.text.starts_with("lost")),
        "{:?}",
        c.state.status
    );
    d.preempt_spot_after(Duration::ZERO);
    c.until("the preemption found in the background", |s| {
        lost(s) == 2 && s.status.as_ref().is_some_and(|m| m.text.starts_with("lost: "))
    })
    .await;
    let status = c.state.status.clone().unwrap().text;
    assert!(status.contains("preempted"), "{status}");

    // D shows what goes; y deletes; nothing is left at the double.
    c.state.view = View::Fleets;
    c.key(KeyCode::Char('D'));
    let Overlay::FleetConfirm(confirm) = &c.state.overlay else {
        panic!("no delete confirmation: {:?}", c.state.overlay)
    };
    assert_eq!(
        confirm
            .plan
            .changes
            .iter()
            .filter(|ch| ch.kind == "instance" && ch.action == "delete")
            .count(),
        2
    );
    c.key(KeyCode::Char('y'));
    c.until("the delete", |s| s.fleet_ops.running.is_none()).await;
    assert!(
        matches!(c.state.fleet_ops.outcome, Some(Ok(_))),
        "{:?}",
        c.state.fleet_ops.log
    );
    c.until("the fleet gone", |s| !s.fleets.iter().any(|f| f.name == "tbg"))
        .await;
    assert!(d.existing("instances").is_empty());
    drop(c);
    drop(tb);
}
