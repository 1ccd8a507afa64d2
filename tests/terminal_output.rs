//! A node's bytes on their way to the operator's terminal: with stdout a terminal (a
//! pty from `script`), `exec` lets colour through and shows every other control
//! sequence instead of acting on it (OSC 52 clipboard, titles, screen clears); `--raw`
//! passes them; a pipe gets every byte as it came.

mod support;

use std::path::Path;
use support::{flightdeck, text};

const PAYLOAD: &str = r"printf '\033]52;c;ZXZpbA==\007\033]0;owned\007\033[2J\033[31mred\033[0m\n'";

/// Run flightdeck with `args` on a pty (util-linux `script`); what the pty showed.
fn on_a_terminal(home: &Path, args: &[&str]) -> String {
    let bin = env!("CARGO_BIN_EXE_flightdeck");
    let cmd = std::iter::once(bin.to_string())
        .chain(args.iter().map(|a| format!("'{}'", a.replace('\'', "'\\''"))))
        .collect::<Vec<_>>()
        .join(" ");
    let out = std::process::Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .env("HOME", home)
        .env_remove("FLIGHTDECK_HOME")
        .output()
        .expect("util-linux script");
    text(&out.stdout)
}

#[test]
fn node_control_sequences_are_shown_not_acted_on() {
    let home = tempfile::tempdir().unwrap();
    support::apply_local_fleet(home.path());
    let shown = on_a_terminal(home.path(), &["exec", "local", "--", PAYLOAD]);
    assert!(shown.contains("␛]52;c;ZXZpbA==^G␛]0;owned^G␛[2J"), "{shown:?}");
    assert!(
        shown.contains("\u{1b}[31mred\u{1b}[0m"),
        "colour passes: {shown:?}"
    );
    assert!(!shown.contains("\u{1b}]52"), "{shown:?}");
    let raw = on_a_terminal(home.path(), &["--raw", "exec", "local", "--", PAYLOAD]);
    assert!(
        raw.contains("\u{1b}]52;c;ZXZpbA==\u{7}"),
        "--raw passes them: {raw:?}"
    );
    // Into a pipe: every byte as it came (a file or another program gets the real output).
    let piped = flightdeck(home.path(), &["exec", "local", "--", PAYLOAD]);
    assert!(text(&piped.stdout).contains("\u{1b}]52;c;ZXZpbA==\u{7}"));
}
