//! Issue 29, the UX walk's point 17 (wording and small cuts), at 80x24 in a real terminal
//! (tmux): the status bar's line is whole where the walk saw it cut.

mod support;

use support::tmux::{self, Tmux};

/// The walk: "At 80 columns the status bar cuts `broadcast: marked pan…`". The hints give
/// way to the mode line, which is whole on the bottom row.
#[test]
fn the_broadcast_mode_is_whole_in_the_status_bar_at_80x24() {
    if !tmux::tmux_available() {
        panic!("tmux is not installed: run ./scripts/test.sh, which installs it");
    }
    let t = Tmux::start(&[], &[("SHELL", "/bin/sh"), ("PS1", "$ ")], 80, 24);
    t.wait_text("? help");
    t.apply_local_named("four");
    t.keys(&["2"]);
    t.wait_text("four");
    t.keys(&["Enter"]);
    t.wait_text("four-0 ●");
    t.keys(&["b", "b"]);
    t.wait_text("broadcast: marked panes");
    // Typing into the panes: the bar's mode line says so, and where the keys go.
    t.keys(&["i"]);
    let screen = t.wait_for("the Panes mode line in the status bar", |s| {
        s.lines().last().is_some_and(|l| l.contains("TYPING"))
    });
    let bottom = screen.lines().last().unwrap_or("");
    assert!(
        bottom.contains("Panes four (1 node)  TYPING (ctrl-] stops)  broadcast: marked panes"),
        "whole at 80 columns: {bottom:?}\n{screen}"
    );
    t.keys(&["C-]"]);
    t.wait_gone("TYPING");
    t.keys(&["q"]);
    t.wait_text("open in panes");
    t.keys(&["y"]);
    assert_eq!(t.wait_exit(), 0);
}
