//! The headless CLI: help for every subcommand, exit codes, config places and errors.

mod support;

use std::process::Command;
use support::{flightdeck, text};

#[test]
fn every_subcommand_has_complete_help() {
    let home = tempfile::tempdir().unwrap();
    let cases: &[(&[&str], &[&str])] = &[
        (
            &[],
            &[
                "offers",
                "fleet",
                "exec",
                "nccl",
                "nics",
                "job",
                "doctor",
                "config",
                "--theme",
                "--log-level",
            ],
        ),
        (
            &["offers"],
            &[
                "--gpu",
                "--gpus",
                "--region",
                "--zone",
                "--pricing",
                "--max-price",
                "--sort",
                "--refresh",
                "--json",
            ],
        ),
        (
            &["fleet"],
            &["validate", "plan", "apply", "list", "delete", "gc", "status"],
        ),
        (&["fleet", "validate"], &["FILES"]),
        (&["fleet", "plan"], &["--json"]),
        (&["fleet", "apply"], &["--yes"]),
        (&["fleet", "list"], &["--json"]),
        (&["fleet", "delete"], &["--yes", "NAME"]),
        (&["fleet", "gc"], &["--yes", "--json"]),
        (&["fleet", "status"], &["NAME", "--json"]),
        (
            &["exec"],
            &[
                "--nodes",
                "FLEET",
                "CMD",
                "--fanout",
                "--timeout",
                "--collapse",
                "--json",
            ],
        ),
        (
            &["nccl"],
            &["run", "parse", "attach", "history", "compare", "stragglers"],
        ),
        (
            &["nccl", "stragglers"],
            &["FLEET", "--threshold", "--mpirun", "--engine", "--json"],
        ),
        (&["nccl", "compare"], &["A", "B", "--json"]),
        (
            &["nccl", "run"],
            &[
                "--test",
                "-b",
                "-e",
                "-f",
                "-g",
                "--engine",
                "--profile",
                "--json",
                "tcpxo",
            ],
        ),
        (&["nccl", "parse"], &["FILE", "--json", "--machine-type"]),
        (&["nics"], &["--interval", "--samples", "--json"]),
        (
            &["doctor"],
            &[
                "--nodes",
                "--only",
                "--profile",
                "--machine-type",
                "--evidence",
                "--list",
                "--json",
            ],
        ),
        (&["job"], &["run", "list", "logs", "stop"]),
        (&["job", "logs"], &["--node", "--follow"]),
        (&["config"], &["path", "default", "check"]),
    ];
    for (args, expected) in cases {
        let mut full = args.to_vec();
        full.push("--help");
        let out = flightdeck(home.path(), &full);
        let help = text(&out.stdout);
        assert!(out.status.success(), "{full:?}: {}", text(&out.stderr));
        for word in *expected {
            assert!(
                help.contains(word),
                "`flightdeck {}` help lacks {word}:\n{help}",
                full.join(" ")
            );
        }
        // The global options are listed once, under their heading in `flightdeck --help`;
        // a subcommand's help points there instead of repeating them.
        if args.is_empty() {
            let (own, global) = help
                .split_once("Global options:")
                .unwrap_or_else(|| panic!("`flightdeck --help`: no Global options heading:\n{help}"));
            assert!(!own.contains("--accept-new-host-keys"), "{help}");
            assert!(
                global.contains("--theme") && global.contains("--raw") && global.contains("--no-mux"),
                "{help}"
            );
        } else {
            assert!(
                !help.contains("--accept-new-host-keys") && !help.contains("--log-level <"),
                "`flightdeck {}` repeats the global options:\n{help}",
                full.join(" ")
            );
            assert!(
                help.trim_end().ends_with(
                    "Global options (--theme, --log-level, --raw, --no-mux, ...): see `flightdeck --help`."
                ),
                "`flightdeck {}` does not point to the global options:\n{help}",
                full.join(" ")
            );
        }
    }
}

/// The main subcommands' help ends with examples, each a command line of that subcommand.
#[test]
fn main_subcommands_help_has_examples() {
    let home = tempfile::tempdir().unwrap();
    let cases: &[&[&str]] = &[
        &["offers"],
        &["fleet"],
        &["fleet", "plan"],
        &["fleet", "apply"],
        &["fleet", "delete"],
        &["exec"],
        &["nccl"],
        &["nccl", "run"],
        &["nics"],
        &["job"],
        &["job", "run"],
        &["doctor"],
        &["config"],
        &["mux"],
    ];
    for args in cases {
        let mut full = args.to_vec();
        full.push("--help");
        let out = flightdeck(home.path(), &full);
        let help = text(&out.stdout);
        let (_, examples) = help
            .split_once("\nExamples:\n")
            .unwrap_or_else(|| panic!("`flightdeck {}` has no examples:\n{help}", full.join(" ")));
        let lines: Vec<&str> = examples.lines().take_while(|l| !l.trim().is_empty()).collect();
        assert!(lines.len() >= 2, "{help}");
        let prefix = format!("  flightdeck {}", args[0]);
        assert!(
            lines.iter().all(|l| l.starts_with(&prefix)),
            "`flightdeck {}`: an example of another command:\n{help}",
            full.join(" ")
        );
    }
    // `nccl run` says which exit code a failed run gives.
    let help = text(&flightdeck(home.path(), &["nccl", "run", "--help"]).stdout);
    assert!(
        help.contains("Exit: the worst exit code of the nodes' runs"),
        "{help}"
    );
}

/// `--nodes` means the same everywhere and says so in the same words; every long flag
/// has a kebab-case spelling.
#[test]
fn nodes_is_described_once_and_flags_are_kebab_case() {
    let home = tempfile::tempdir().unwrap();
    let nodes_help = |args: &[&str]| -> String {
        let mut full = args.to_vec();
        full.push("--help");
        let help = text(&flightdeck(home.path(), &full).stdout);
        let at = help
            .find("--nodes <NODES>")
            .unwrap_or_else(|| panic!("{args:?}: no --nodes <NODES>:\n{help}"));
        // The same first sentence (clap drops the full stop of a one-sentence help).
        let words = help[at..]
            .split_whitespace()
            .take(18)
            .collect::<Vec<_>>()
            .join(" ");
        words.trim_end_matches('.').to_string()
    };
    let exec = nodes_help(&["exec"]);
    assert!(
        exec.contains("indices (0,2), ranges (0-3), names or hosts (lab-2), or patterns with * (lab-1*)"),
        "{exec}"
    );
    for args in [&["doctor"][..], &["fleet", "bootstrap"], &["nccl", "run"]] {
        assert_eq!(nodes_help(args), exec, "{args:?}");
    }
    let help = text(&flightdeck(home.path(), &["nccl", "run", "--help"]).stdout);
    assert!(help.contains("--warmup-iters"), "{help}");
    let out = flightdeck(home.path(), &["nccl", "run", "nosuch", "--warmup-iters", "2"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "parsed; the fleet is unknown: {}",
        text(&out.stderr)
    );
}

/// A global option given after a subcommand still reaches it (the subcommands take them
/// though their help does not list them), and a bad value is a usage error everywhere.
#[test]
fn global_options_work_after_any_subcommand() {
    let home = tempfile::tempdir().unwrap();
    let out = flightdeck(home.path(), &["config", "check", "--theme", "light"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("theme: light"),
        "{}",
        text(&out.stdout)
    );
    let out = flightdeck(home.path(), &["offers", "--theme", "ligth"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(out.stdout.is_empty());
    assert!(
        text(&out.stderr).contains("--theme: unknown theme `ligth`; did you mean `light`?"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn doctor_lists_its_checks_and_names_what_is_wrong_with_its_arguments() {
    let home = tempfile::tempdir().unwrap();
    let out = flightdeck(home.path(), &["doctor", "--list"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let ids: Vec<String> = text(&out.stdout)
        .lines()
        .map(|l| l.split_whitespace().next().unwrap_or("").to_string())
        .collect();
    assert_eq!(ids.len(), 18, "{ids:?}");
    assert!(ids.contains(&"nccl-init".to_string()), "{ids:?}");
    assert!(ids.contains(&"reach".to_string()) && ids.contains(&"placement".to_string()));
    assert!(ids.contains(&"procs".to_string()), "{ids:?}");
    // No fleet: usage; an unknown fleet and an unknown check: failures that say why.
    assert_eq!(flightdeck(home.path(), &["doctor"]).status.code(), Some(2));
    let out = flightdeck(home.path(), &["doctor", "nosuch"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("no fleet `nosuch` in the state"),
        "{}",
        text(&out.stderr)
    );
    let out = flightdeck(home.path(), &["doctor", "nosuch", "--only", "xids"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--only xids: no such check; did you mean `xid`?"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn job_list_on_a_new_machine_is_empty() {
    let home = tempfile::tempdir().unwrap();
    let out = flightdeck(home.path(), &["job", "list", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "[]");
    let out = flightdeck(home.path(), &["job", "list"]);
    assert!(out.status.success());
    assert!(text(&out.stdout).starts_with("NAME "), "{}", text(&out.stdout));
    assert_eq!(text(&out.stdout).lines().count(), 1);
}

#[test]
fn usage_errors_exit_2() {
    let home = tempfile::tempdir().unwrap();
    let out = flightdeck(home.path(), &["offers", "--pricing", "cheap"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("on-demand"));
    assert_eq!(
        flightdeck(home.path(), &["fleet", "validate"]).status.code(),
        Some(2)
    );
    assert_eq!(
        flightdeck(home.path(), &["--log-level", "loud"]).status.code(),
        Some(2)
    );
    // Values that parse but name nothing are usage errors too (clap's convention), with
    // the same message as before.
    let out = flightdeck(home.path(), &["offers", "--filter", "gpu=H1OO"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("did you mean H100?"),
        "{}",
        text(&out.stderr)
    );
    let out = flightdeck(home.path(), &["--theme", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("unknown theme `nope`"),
        "{}",
        text(&out.stderr)
    );
    support::apply_local_fleet(home.path());
    let out = flightdeck(home.path(), &["exec", "local", "--nodes", "9", "--", "true"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("--nodes `9` is no node of the fleet"),
        "{}",
        text(&out.stderr)
    );
    // The doctor's flags likewise.
    for args in [
        &["doctor", "local", "--only", "nope"][..],
        &["doctor", "local", "--nodes", "9"][..],
    ] {
        let out = flightdeck(home.path(), args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out.stderr));
    }
    // A failure that is not about the command line stays 1.
    let out = flightdeck(home.path(), &["exec", "nosuch", "--", "true"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
}

/// One prefix for what goes wrong, whichever command (ux walk point 17): an error that
/// ends a command starts `flightdeck: `, never `flightdeck offers: ` or `fleet plan: `;
/// clap's own usage errors keep clap's `error: `.
#[test]
fn errors_start_with_one_prefix() {
    let home = tempfile::tempdir().unwrap();
    support::apply_local_fleet(home.path());
    for args in [
        &["offers", "--filter", "gpu=H1OO"][..],
        &["nics", "local", "--samples", "0"],
        &["nics", "local", "--interval", "1y"],
        &["exec", "nosuch", "--", "true"],
        &["doctor", "local", "--only", "nope"],
    ] {
        let out = flightdeck(home.path(), args);
        let err = text(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        let first = err.lines().next().unwrap_or("");
        assert!(
            first.starts_with("flightdeck: ") && !first.starts_with("flightdeck: flightdeck"),
            "{args:?}: {err}"
        );
        for l in err.lines() {
            let cmd = args[0];
            assert!(!l.starts_with(&format!("flightdeck {cmd}:")), "{args:?}: {err}");
            assert!(!l.starts_with(&format!("{cmd} ")), "{args:?}: {err}");
        }
    }
}

/// `flightdeck ... | head`: when the reader has gone, the command ends as a Unix filter
/// does, killed by SIGPIPE and saying nothing, not with "Broken pipe" (exit 1) or a panic
/// (exit 101, when stderr is the same pipe: `2>&1 | head`).
#[test]
fn a_reader_that_went_away_ends_the_command_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let home = tempfile::tempdir().unwrap();
    let run = |both: bool| {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_flightdeck"));
        cmd.arg("offers")
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", home.path())
            .stdin(std::process::Stdio::null());
        if both {
            cmd.stderr(writer.try_clone().unwrap());
        } else {
            cmd.stderr(std::process::Stdio::piped());
        }
        cmd.stdout(writer).output().unwrap()
    };
    let out = run(false);
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGPIPE),
        "{:?}: {}",
        out.status,
        text(&out.stderr)
    );
    let err = text(&out.stderr);
    assert!(
        !err.contains("Broken pipe") && !err.contains("flightdeck:"),
        "{err}"
    );
    let out = run(true);
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{:?}", out.status);
}

#[test]
fn config_paths_follow_the_environment() {
    let home = tempfile::tempdir().unwrap();
    let out = flightdeck(home.path(), &["config", "path"]);
    assert_eq!(
        text(&out.stdout).trim(),
        home.path()
            .join(".config/flightdeck/config.yaml")
            .display()
            .to_string()
    );
    let out = flightdeck(home.path(), &["config", "path", "--log"]);
    assert_eq!(
        text(&out.stdout).trim(),
        home.path()
            .join(".local/state/flightdeck/flightdeck.log")
            .display()
            .to_string()
    );
    let out = Command::new(env!("CARGO_BIN_EXE_flightdeck"))
        .args(["config", "path", "--state"])
        .env("FLIGHTDECK_HOME", "/fd")
        .env("XDG_STATE_HOME", "/xdg")
        .output()
        .unwrap();
    assert_eq!(text(&out.stdout).trim(), "/fd/state");
}

#[test]
fn config_default_and_check() {
    let home = tempfile::tempdir().unwrap();
    let out = flightdeck(home.path(), &["config", "default"]);
    assert!(out.status.success());
    let default = text(&out.stdout);
    assert!(
        default.contains("# theme: dark") && default.contains("#     quit: [q, ctrl-c]"),
        "{default}"
    );

    let out = flightdeck(home.path(), &["config", "check"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report = text(&out.stdout);
    assert!(
        report.contains("(absent: defaults)") && report.contains("colorblind"),
        "{report}"
    );

    let cfg = home.path().join(".config/flightdeck/config.yaml");
    std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    std::fs::write(&cfg, &default).unwrap();
    assert!(
        flightdeck(home.path(), &["config", "check"]).status.success(),
        "the default file is valid"
    );

    std::fs::write(
        &cfg,
        "theme: dark\nkeys:\n  global:\n    quit: [q, x]\n    help: x\n",
    )
    .unwrap();
    let out = flightdeck(home.path(), &["config", "check"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!(
            "{}:5:11: keys.global.help: duplicate chord `x` for `help`",
            cfg.display()
        )),
        "{err}"
    );

    std::fs::write(&cfg, "theme: solarized\n").unwrap();
    let err = text(&flightdeck(home.path(), &["config", "check"]).stderr);
    assert!(
        err.contains("unknown theme `solarized`; available: colorblind, dark, high-contrast, light"),
        "{err}"
    );
}

#[test]
fn the_cockpit_needs_a_terminal() {
    let home = tempfile::tempdir().unwrap();
    let out = flightdeck(home.path(), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("the cockpit needs a terminal"));
}

/// ux-walk-2 item 12: a file that cannot be read is the command's error, `flightdeck: `
/// first as every other (a finding at a place in a file is `FILE:LINE:COL: ...`).
#[test]
fn an_unreadable_file_is_the_commands_error() {
    let home = tempfile::tempdir().unwrap();
    for args in [
        &["fleet", "validate", "nope.yaml"][..],
        &["fleet", "apply", "nope.yaml"],
        &["job", "run", "nope.yaml"],
    ] {
        let out = flightdeck(home.path(), args);
        assert!(!out.status.success(), "{args:?}");
        assert!(
            text(&out.stderr).starts_with("flightdeck: nope.yaml: cannot read: "),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}
