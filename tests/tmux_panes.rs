//! Issue 29 (the UX walk's ranked defects 1, 4, 6 and 8), end to end: the real binary
//! in tmux. The apply confirmation at 80x24 shows the money; opening another fleet's
//! panes keeps the open shells; pane text reflows on resize; the wheel scrolls the pane
//! under the pointer.

mod support;

use support::testbed::Testbed;
use support::tmux::{self, Tmux};

macro_rules! require_tmux {
    () => {
        if !tmux::tmux_available() {
            panic!("tmux is not installed: run ./scripts/test.sh, which installs it");
        }
    };
}

/// Type `cmd` into the focused pane and stop typing.
fn in_pane(t: &Tmux, cmd: &str) {
    t.keys(&["i"]);
    t.wait_text("TYPING");
    t.type_text(cmd);
    t.keys(&["Enter"]);
    t.keys(&["C-]"]);
    t.wait_gone("TYPING");
}

/// Columns `from..to` of each screen row.
fn columns(screen: &str, from: usize, to: usize) -> Vec<String> {
    screen
        .lines()
        .map(|l| l.chars().skip(from).take(to - from).collect())
        .collect()
}

/// Ranked 1: at 80x24 the apply confirmation of fleets/a3-mega-tcpxo.yaml (no GCP
/// project: a plan only) shows the instances with their machine type and Spot model,
/// the total and the no-project note, with the other resources counted, before `y`.
#[test]
fn apply_confirmation_at_80x24_shows_instances_total_and_notes() {
    require_tmux!();
    let t = Tmux::start(&[], &[], 80, 24);
    t.wait_text("? help");
    t.keys(&["2", ":"]);
    t.type_text(concat!(
        "apply ",
        env!("CARGO_MANIFEST_DIR"),
        "/fleets/a3-mega-tcpxo.yaml"
    ));
    t.keys(&["Enter"]);
    let screen = t.wait_text("go ahead");
    for want in [
        "instance",
        "a3-megagpu-8g",
        "SPOT",
        "total $",
        "note: no GCP project",
        "networks, ",
        "firewalls",
    ] {
        assert!(
            screen.contains(want),
            "{want:?} not on the 80x24 screen:\n{screen}"
        );
    }
    assert!(!screen.contains("not shown"), "{screen}");
    t.keys(&["n"]);
    t.wait_gone("go ahead");
}

/// Ranked 4: opening another fleet's panes keeps the open shells in the background;
/// coming back shows the same shell (same pid) with its output.
#[test]
fn another_fleets_panes_keep_the_open_shells() {
    require_tmux!();
    let t = Tmux::start(&[], &[("SHELL", "/bin/sh"), ("PS1", "$ ")], 100, 30);
    t.wait_text("? help");
    t.apply_local_named("alpha");
    t.apply_local_named("beta");
    t.keys(&["2", "r"]);
    t.wait_text("beta");
    t.keys(&["g", "Enter"]);
    t.wait_text("alpha-0 ● connected");
    in_pane(&t, "echo marker-pid-$$");
    let screen = t.wait_for("the marker", |s| s.lines().any(|l| l.contains("│marker-pid-")));
    let pid: String = screen
        .split("│marker-pid-")
        .nth(1)
        .unwrap()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    assert!(!pid.is_empty(), "{screen}");
    // Another fleet's panes: alpha's go on in the background, and it says so.
    t.keys(&["2", "G", "Enter"]);
    t.wait_text("beta-0 ● connected");
    t.wait_text("in the background");
    // Back to alpha: the same shell, its output still there.
    t.keys(&["2", "g", "Enter"]);
    let screen = t.wait_text("alpha-0 ● connected");
    assert!(screen.contains(&format!("marker-pid-{pid}")), "{screen}");
    in_pane(&t, "echo again-pid-$$");
    t.wait_text(&format!("again-pid-{pid}"));
    // q counts the background's shells too.
    t.keys(&["q"]);
    t.wait_text("2 shells open in panes");
    t.keys(&["y"]);
    assert_eq!(t.wait_exit(), 0);
}

/// Ranked 6: a 150-character line at 160x48, the terminal resized to 80x24 and back:
/// the whole line is in the pane both times (wrapped, then on one row again).
#[test]
fn pane_text_reflows_on_resize() {
    require_tmux!();
    let t = Tmux::start(&[], &[("SHELL", "/bin/sh"), ("PS1", "$ ")], 160, 48);
    t.wait_text("? help");
    t.apply_local_named("solo");
    t.keys(&["2", "r"]);
    t.wait_text("solo");
    t.keys(&["Enter"]);
    t.wait_text("solo-0 ● connected");
    in_pane(&t, "printf 'BEGIN-%0140d-END\\n' 7");
    let line = format!("BEGIN-{:0140}-END", 7);
    assert_eq!(line.len(), 150);
    // The pane's rows without their borders, one after the other: a wrapped line reads
    // whole across its rows.
    let joined = |screen: &str| -> String {
        screen
            .lines()
            .filter_map(|l| l.strip_prefix('│'))
            .map(|l| l.strip_suffix('│').unwrap_or(l))
            .collect()
    };
    t.wait_for("the long line", |s| s.lines().any(|l| l.contains(&line)));
    t.resize(80, 24);
    t.wait_for("the 80x24 frame", |s| {
        s.lines().all(|l| l.chars().count() <= 80) && s.contains("solo-0")
    });
    let screen = t.wait_for("the line wrapped whole at 80x24", |s| joined(s).contains(&line));
    assert!(screen.contains("7-END"), "{screen}");
    t.resize(160, 48);
    t.wait_for("the line on one row again at 160x48", |s| {
        s.lines().any(|l| l.contains(&line))
    });
}

/// Ranked 8: the wheel over a pane scrolls that pane's scrollback, not the focus; back
/// at the bottom the pane is live again. Two SSH nodes of the testbed.
#[test]
fn the_wheel_scrolls_the_pane_under_the_pointer() {
    require_tmux!();
    let Some(tb) = Testbed::new(2, 0) else { return };
    let t = Tmux::start(&[], &[], 100, 30);
    t.wait_text("? help");
    let file = t.home.path().join("duo.yaml");
    std::fs::write(&file, tb.fleet_yaml("duo")).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_flightdeck"))
        .args([
            "fleet",
            "apply",
            file.to_str().unwrap(),
            "--yes",
            "--accept-new-host-keys",
        ])
        .env("HOME", t.home.path())
        .env("FLIGHTDECK_HOME", t.fd_home())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    t.keys(&["2", "r"]);
    t.wait_text("duo");
    t.keys(&["Enter"]);
    t.wait_for("both panes connected", |s| s.matches("● connected").count() == 2);
    // History in the right pane (duo-1), then the focus back on the left one.
    t.keys(&["l"]);
    in_pane(&t, "seq 1 200");
    t.keys(&["h"]);
    let right = |s: &str| columns(s, 50, 100);
    t.wait_for("200 in duo-1", |s| {
        right(s).iter().any(|l| l.starts_with("│200 "))
    });
    // 100x30: two tiles side by side, duo-1 in columns 50..100. Wheel up over it (SGR
    // mouse report, 1-based), five notches of three rows.
    for _ in 0..5 {
        t.type_text("\x1b[<64;76;16M");
    }
    let screen = t.wait_text("[15/");
    let r = right(&screen);
    assert!(r.iter().any(|l| l.starts_with("│185 ")), "{screen}");
    assert!(!r.iter().any(|l| l.starts_with("│200 ")), "{screen}");
    // The focus stayed on duo-0: typing goes there.
    in_pane(&t, "echo typed-left");
    let screen = t.wait_text("typed-left");
    assert!(
        columns(&screen, 0, 50).iter().any(|l| l.contains("typed-left")),
        "{screen}"
    );
    // Wheel down to the bottom: duo-1 is live again.
    for _ in 0..5 {
        t.type_text("\x1b[<65;76;16M");
    }
    let screen = t.wait_for("duo-1 live again", |s| {
        right(s).iter().any(|l| l.starts_with("│200 "))
    });
    assert!(!screen.contains("[3/"), "{screen}");
}
