//! End to end: the real binary in a real terminal (tmux), driven by keys.

mod support;

use std::time::Duration;
use support::tmux::{self, Tmux};

macro_rules! require_tmux {
    () => {
        if !tmux::tmux_available() {
            panic!("tmux is not installed: run ./scripts/test.sh, which installs it");
        }
    };
}

/// The terminal is back to normal: alternate screen left, cursor visible.
fn assert_restored(t: &Tmux) {
    assert_eq!(
        t.pane("#{alternate_on}"),
        "0",
        "alternate screen left; screen:\n{}",
        t.screen()
    );
    assert_eq!(
        t.pane("#{cursor_flag}"),
        "1",
        "cursor visible; screen:\n{}",
        t.screen()
    );
}

#[test]
fn help_views_palette_and_quit() {
    require_tmux!();
    let t = Tmux::start(&[], &[], 100, 30);
    t.wait_text("1 Offers");
    t.wait_text("? help");
    assert_eq!(t.pane("#{alternate_on}"), "1");

    t.keys(&["?"]);
    t.wait_text("Help: Offers view first");
    t.keys(&["Escape"]);
    t.wait_gone("Help: Offers view first");

    t.keys(&["Tab"]);
    t.wait_text("┌ Fleets ");

    t.keys(&[":"]);
    t.wait_text("┌ command ");
    t.type_text("nics");
    t.wait_text(":nics");
    t.keys(&["Enter"]);
    t.wait_text("┌ NICs ");
    t.wait_gone("┌ command ");

    t.keys(&["q"]);
    assert_eq!(t.wait_exit(), 0);
    assert_restored(&t);
    let log = std::fs::read_to_string(t.fd_home().join("state/flightdeck.log")).unwrap();
    assert!(
        log.contains("cockpit started") && log.contains("quit"),
        "log:\n{log}"
    );
}

#[test]
fn idle_cockpit_draws_nothing_and_burns_no_cpu() {
    require_tmux!();
    let t = Tmux::start(&[], &[], 80, 24);
    t.wait_text("? help");
    let pid = t.app_pid();
    std::thread::sleep(Duration::from_millis(300));
    let (ticks0, written0) = tmux::proc_usage(pid);
    std::thread::sleep(Duration::from_secs(2));
    let (ticks1, written1) = tmux::proc_usage(pid);
    assert_eq!(
        written1, written0,
        "no bytes written (no redraw, no log) while idle"
    );
    // A busy loop would use ~200 ticks in 2 s; an idle event loop none.
    assert!(ticks1 - ticks0 <= 2, "{} CPU ticks while idle", ticks1 - ticks0);
    t.keys(&["C-c"]);
    assert_eq!(t.wait_exit(), 0);
}

#[test]
fn panic_restores_the_terminal() {
    require_tmux!();
    let t = Tmux::start(&[], &[("FLIGHTDECK_TEST_PANIC", "1")], 80, 24);
    assert_eq!(t.wait_exit(), 101);
    assert_restored(&t);
    t.wait_text("panicking after the first frame");
}

#[test]
fn ctrl_z_suspends_and_fg_resumes() {
    require_tmux!();
    let t = Tmux::shell(&[], 80, 24);
    t.run_flightdeck_line("");
    t.wait_text("? help");
    let pid = t.app_pid();
    t.keys(&["3"]);
    t.wait_text("┌ Nodes ");
    t.keys(&["C-z"]);
    t.wait_for("the process to stop", |_| tmux::proc_state(pid) == 'T');
    t.wait_text("Stopped");
    assert_restored(&t);
    t.type_text("fg");
    t.keys(&["Enter"]);
    t.wait_for("the cockpit to come back", |s| {
        s.contains("┌ Nodes ") && s.contains("? help")
    });
    assert_eq!(t.pane("#{alternate_on}"), "1");
    t.keys(&["q"]);
    t.wait_gone("? help");
    t.echo_exit_status();
    assert_eq!(t.wait_exit(), 0);
    assert_restored(&t);
}

#[test]
fn bad_config_is_reported_on_the_normal_screen() {
    require_tmux!();
    let home = tempfile::tempdir().unwrap();
    let cfg = home.path().join("config.yaml");
    tmux::write(&cfg, "theme: dark\nkeys:\n  global:\n    quit: q\n    hlep: h\n");
    let fd_home = home.path().display().to_string();
    let t = Tmux::start(&[], &[("FLIGHTDECK_HOME", &fd_home)], 120, 24);
    assert_eq!(t.wait_exit(), 1);
    let screen = t.screen();
    assert!(
        screen.contains("config.yaml:5:5: keys.global: unknown action `hlep`"),
        "{screen}"
    );
    assert!(screen.contains("did you mean `help`?"), "{screen}");
    assert_restored(&t);
}

#[test]
fn theme_flag_and_user_theme() {
    require_tmux!();
    let t = Tmux::start(&["--theme", "nope"], &[], 100, 24);
    assert_eq!(t.wait_exit(), 2, "a usage error");
    t.wait_text("unknown theme `nope`");
    let t = Tmux::start(&["--theme", "light"], &[], 250, 24);
    t.wait_text("? help");
    // A user theme dropped into the config dir is offered by :theme and loaded.
    let dark = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/themes/dark.yaml")).unwrap();
    tmux::write(&t.fd_home().join("themes/mine.yaml"), &dark);
    tmux::write(
        &t.fd_home().join("themes/broken.yaml"),
        &dark.replace("rx: ", "rxx: "),
    );
    t.keys(&[":"]);
    t.type_text("theme mine");
    t.keys(&["Enter"]);
    t.wait_text("theme: mine");
    t.keys(&[":"]);
    t.type_text("theme broken");
    t.keys(&["Enter"]);
    t.wait_text("unknown field `rxx`");
    t.wait_text("broken.yaml:");
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(), 0);
}

#[test]
fn local_fleet_panes_type_copy_and_yank() {
    require_tmux!();
    let t = Tmux::start(&[], &[("SHELL", "/bin/sh")], 100, 30);
    t.wait_text("? help");
    // Apply the local fleet with the same FLIGHTDECK_HOME, then reload the Fleets view.
    t.apply_local_fleet();
    t.keys(&["2"]);
    t.keys(&["r"]);
    t.wait_text("local local   1");
    t.keys(&["Enter"]);
    t.wait_text("local-0 ● connected");
    t.keys(&["i"]);
    t.wait_text("TYPING");
    t.type_text("echo pane-$((6*7))");
    t.keys(&["Enter"]);
    t.wait_text("pane-42");
    t.keys(&["C-]"]);
    t.wait_gone("TYPING");
    // Copy mode: search the line, yank it; tmux with set-clipboard on keeps OSC 52 text.
    t.set_option("set-clipboard", "on");
    t.keys(&["["]);
    t.wait_text("COPY ");
    t.keys(&["/"]);
    t.type_text("pane-42");
    t.keys(&["Enter", "y"]);
    t.wait_text("copied 1 line");
    let buffer = t.buffer();
    assert_eq!(
        buffer, "pane-42",
        "the OSC 52 yank reached the terminal's clipboard"
    );
    // A shell is open in a pane: q asks first.
    t.keys(&["q"]);
    t.wait_text("Quit flightdeck?");
    t.keys(&["y"]);
    assert_eq!(t.wait_exit(), 0);
    assert_restored(&t);
}

/// The interface and gateway of this machine's IPv4 default route (/proc/net/route).
fn default_route() -> Option<(String, std::net::Ipv4Addr)> {
    let text = std::fs::read_to_string("/proc/net/route").ok()?;
    text.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 3 || f[1] != "00000000" {
            return None;
        }
        let gw = u32::from_str_radix(f[2], 16).ok()?;
        (gw != 0).then(|| (f[0].to_string(), std::net::Ipv4Addr::from(gw.to_le_bytes())))
    })
}

/// The NICs view on this machine (fleets/local.yaml): Enter starts the sampler, a braille
/// chart of a real NIC's live rates appears, and the mode keys switch views.
#[test]
fn local_fleet_nics_view_charts_live_traffic() {
    require_tmux!();
    let t = Tmux::start(&[], &[], 120, 40);
    t.wait_text("? help");
    t.apply_local_fleet();
    t.keys(&["2"]);
    t.keys(&["r"]);
    t.wait_text("local local   1");
    t.keys(&[":"]);
    t.type_text("nics");
    t.keys(&["Enter"]);
    t.wait_text("No samplers running.");
    t.keys(&["Enter"]);
    t.wait_text("per node: local-0 (1/1)");
    // A chart of a real NIC (control or data: whatever this machine has) with its axis,
    // and braille drawn from the samples as they arrive: the rates of two samples.
    let braille = |s: &str| s.chars().any(|c| ('\u{2801}'..='\u{28ff}').contains(&c));
    let screen = t.wait_for("a chart with live samples", |s| {
        (s.contains(" ctl rx ") || s.contains(" data rx ")) && s.contains("now") && braille(s)
    });
    assert!(screen.contains("RX now"), "the rate table: {screen}");
    // Real traffic out of the default route's NIC (UDP to the gateway's discard port,
    // ~1.6 Mbit/s for a few seconds): its chart title shows a tx rate in Mbit/s.
    if let Some((dev, gateway)) = default_route() {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sender = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let sock = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
                let payload = [0u8; 1000];
                for _ in 0..2000 {
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        break;
                    }
                    let _ = sock.send_to(&payload, (gateway, 9));
                    std::thread::sleep(Duration::from_millis(5));
                }
            })
        };
        let want = format!("{dev} ctl rx ");
        t.wait_for("a tx rate in Mbit/s on the default route's NIC", |s| {
            s.lines()
                .any(|l| l.contains(&want) && l.contains(" Mbit/s") && l.contains(" tx "))
        });
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        sender.join().unwrap();
    }
    t.keys(&["v"]);
    t.wait_text("· per rail");
    t.keys(&["v"]);
    t.wait_text("fleet total of 1 node ");
    t.keys(&["z", "m"]);
    t.wait_text("· 5 min · 1 node · paused");
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(), 0);
    assert_restored(&t);
}

#[test]
fn offers_filter_sort_detail_and_write_a_fleet_file() {
    require_tmux!();
    let t = Tmux::start(&[], &[], 160, 40);
    t.wait_text("Offers ·");
    t.keys(&["/"]);
    t.type_text("gpu=H10");
    t.wait_text("did you mean H100?");
    t.type_text("0 gpus>=8 spot<25");
    t.keys(&["Enter"]);
    t.wait_gone("bad filter");
    t.wait_text("a3-highgpu-8g");
    t.keys(&["p"]);
    t.wait_text("· spot · by spot ↑");
    t.keys(&["S"]);
    t.wait_text("by spot ↓");
    t.keys(&["d"]);
    t.wait_text("Published NCCL busbw");
    t.keys(&["w"]);
    t.wait_text("valid · ctrl-s writes");
    t.keys(&["C-s"]);
    let screen = t.wait_text("wrote fleets/");
    let name = screen
        .split("wrote ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    let written = t.home.path().join(&name);
    let text = std::fs::read_to_string(&written).unwrap_or_else(|e| panic!("{}: {e}", written.display()));
    assert!(
        text.contains("gpu: H100:8") && text.contains("spot_policy: spot"),
        "{text}"
    );
    // What it wrote is a valid fleet file.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_flightdeck"))
        .args(["fleet", "validate"])
        .arg(&written)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Writing the same offer again refuses to overwrite.
    t.keys(&["w"]);
    t.wait_text("valid · ctrl-s writes");
    t.keys(&["C-s"]);
    t.wait_text("exists already");
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(), 0);
}

#[test]
fn a_job_started_in_the_cockpit_survives_quit_and_is_followed_again() {
    require_tmux!();
    let t = Tmux::shell(&[], 120, 32);
    let home = t.fd_home().parent().unwrap().to_path_buf();
    t.apply_local_fleet();
    let job = home.join("ticker.yaml");
    tmux::write(
        &job,
        "type: task\nname: ticker\nfleet: local\ncommands:\n  - |\n    for i in $(seq 1 300); do echo \"Step: $i | Time: 0.2s | Loss: $((1000 - i))\"; sleep 0.2; done\n",
    );
    t.run_flightdeck_line("");
    t.wait_text("? help");
    t.keys(&[":"]);
    t.type_text(&format!("run {}", job.display()));
    t.keys(&["Enter"]);
    t.wait_text("started on every node");
    t.wait_text("┌ Jobs (1) ");
    t.keys(&["Enter"]);
    t.wait_text("Step: 3 |");
    // Quit: the job goes on without the cockpit.
    t.keys(&["q"]);
    t.wait_gone("? help");
    t.echo_exit_status();
    assert_eq!(t.wait_exit(), 0);
    let state = std::fs::read_to_string(t.fd_home().join("state/state.json")).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&state).unwrap();
    let id = doc["jobs"][0]["id"].as_str().unwrap().to_string();
    let dir = home.join(format!(".flightdeck/jobs/{id}/0"));
    let pid: u32 = std::fs::read_to_string(dir.join("pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_ne!(
        tmux::proc_state(pid),
        '?',
        "the job's process lives on after quit"
    );
    assert!(!dir.join("exit_code").exists());

    // Again: the Jobs view lists it running; Enter follows it from its first line.
    t.type_text("clear");
    t.keys(&["Enter"]);
    t.run_flightdeck_line("");
    t.wait_text("? help");
    t.keys(&["6"]);
    t.wait_for("the job listed as running", |s| {
        s.contains("ticker") && s.contains("running")
    });
    t.keys(&["Enter"]);
    t.wait_text("following");
    t.wait_for("new steps after the restart", |s| {
        s.contains("step ") && !s.contains("Step: 3 |")
    });
    t.keys(&["g"]);
    t.wait_text("Step: 1 |");
    // Stop it from the cockpit: x asks, x again stops.
    t.keys(&["G", "x"]);
    t.wait_text("press x again");
    t.keys(&["x"]);
    t.wait_text("exited 143");
    assert_eq!(
        std::fs::read_to_string(dir.join("exit_code")).unwrap().trim(),
        "143"
    );
    t.keys(&["q"]);
    t.wait_gone("? help");
    t.echo_exit_status();
    assert_eq!(t.wait_exit(), 0);
}

/// A run that fails at once (no nccl-tests on this machine: exit 127 in a tenth of a
/// second) shows that it failed, each node's exit code and its error, in the view; the
/// list says how it ended, and the history has the verdict with its reason.
#[test]
fn a_failed_nccl_run_shows_its_exit_code_and_error() {
    require_tmux!();
    let t = Tmux::start(
        &[],
        &[("SHELL", "/bin/sh"), ("NCCL_TESTS_DIR", "/nonexistent")],
        80,
        24,
    );
    t.wait_text("? help");
    t.apply_local_fleet();
    t.keys(&["5", "t"]);
    // The dialog itself (the tab bar's "2 Fleets" is on screen before it opens).
    t.wait_text(" new NCCL run ");
    t.keys(&["C-s"]);
    t.wait_text("failed: exit 127");
    t.wait_text("exit codes  local-0 127");
    t.wait_text("all_reduce_perf not");
    t.wait_text("exit 127 fail");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_flightdeck"))
        .args(["nccl", "history", "--json"])
        .env("FLIGHTDECK_HOME", t.fd_home())
        .output()
        .unwrap();
    let h: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(h[0]["exit_code"], 127, "{h}");
    assert_eq!(h[0]["verdict"], "fail", "{h}");
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(), 0);
}

/// A job started from the command line shows up in an open cockpit's Jobs view without
/// `r`: the cockpit watches the state file.
#[test]
fn the_jobs_view_sees_a_job_started_from_the_command_line() {
    require_tmux!();
    let t = Tmux::start(&[], &[("SHELL", "/bin/sh")], 100, 30);
    t.wait_text("? help");
    let fd = |args: &[&str]| t.flightdeck(args);
    t.apply_local_fleet();
    t.keys(&["6"]);
    t.wait_text("Jobs (0)");
    let job = t.fd_home().parent().unwrap().join("from-cli.yaml");
    tmux::write(
        &job,
        "type: task\nname: from-cli\nfleet: local\ncommands:\n  - sleep 2\n",
    );
    fd(&["job", "run", job.to_str().unwrap(), "--detach"]);
    t.wait_text("from-cli");
    t.wait_text("Jobs (1)");
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(), 0);
}

/// The Doctor view on the local fleet, with a planted fault in the cockpit's environment
/// (which the local fleet's commands inherit): `r` examines, the problem is listed, Enter
/// shows its evidence and fix.
#[test]
fn the_doctor_view_names_a_planted_fault_and_shows_its_fix() {
    require_tmux!();
    let t = Tmux::start(&[], &[("SHELL", "/bin/sh"), ("NCCL_P2P_DISABLE", "1")], 80, 24);
    t.wait_text("? help");
    t.apply_local_fleet();
    t.keys(&["8"]);
    t.wait_text("r examines every node of local (1 node).");
    t.keys(&["r"]);
    t.wait_text("FAIL local-0 nccl-env  NCCL_P2P_DISABLE=1 in the login environment");
    t.wait_text("doctor local: 1 problem: 1 failed, 0 warned");
    t.keys(&["Enter"]);
    t.wait_text("remove the variable from the node's environment");
    t.wait_text("env NCCL_P2P_DISABLE=1");
    t.keys(&["Escape"]);
    t.wait_text("Problems (1)");
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(), 0);
    assert_restored(&t);
}
