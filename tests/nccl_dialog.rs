//! The cockpit's NCCL run dialog end to end on the local backend: the keys that open,
//! fill and confirm it (through `update`), the run started the way `flightdeck nccl run`
//! starts one (the service's `start_run` and `nccl::nodes::start`), the edited
//! environment saved in the history entry and in force on the node. The nccl-tests
//! binary is a DOUBLE (a shell script printing a recorded real run); the launch, the run
//! directory, the state store, the history and the parser are real.
//!
//! This binary holds one test: it points HOME at a temporary directory, which is where
//! the local node's run directories go.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use flightdeck::nccl::{history, remote};
use flightdeck::paths::Paths;
use flightdeck::reach::Reach;
use flightdeck::store::Store;
use flightdeck::tui::keymap::Keymap;
use flightdeck::tui::nccl::service as nccl_service;
use flightdeck::tui::state::{Command, Msg, State, View};
use flightdeck::tui::update::update;
use std::path::Path;

fn key(s: &mut State, code: KeyCode, mods: KeyModifiers) -> Vec<Command> {
    update(s, Msg::Key(KeyEvent::new(code, mods)))
}

fn typed(s: &mut State, text: &str) {
    for c in text.chars() {
        key(s, KeyCode::Char(c), KeyModifiers::NONE);
    }
}

#[test]
fn a_run_started_from_the_dialog_records_the_edited_environment() {
    let home = tempfile::tempdir().unwrap();
    // SAFETY of the test: the only test of this binary, before any thread reads HOME.
    std::env::set_var("HOME", home.path());
    let local = Path::new(env!("CARGO_MANIFEST_DIR")).join("fleets/local.yaml");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_flightdeck"))
        .args(["fleet", "apply", local.to_str().unwrap(), "--yes"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let paths = Paths::resolve(|k| (k == "HOME").then(|| home.path().to_path_buf())).unwrap();

    // The DOUBLE of all_reduce_perf, in a directory only the edited environment names.
    let bin_dir = home.path().join("only-named-by-the-edit");
    std::fs::create_dir_all(&bin_dir).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nccl/h200x2-all_reduce.txt");
    std::fs::write(
        bin_dir.join("all_reduce_perf"),
        format!(
            "#!/bin/sh\n# DOUBLE of nccl-tests' all_reduce_perf: prints a recorded run of the real one.\n\
             echo \"args: $*\" >&2\necho \"FD_EDITED=$FD_EDITED\" >&2\ncat '{}'\n",
            fixture.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        bin_dir.join("all_reduce_perf"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();

    // n in the NCCL view asks for the fleets; they open the dialog.
    let mut s = State::new(Keymap::defaults(), vec![], "dark".into());
    typed(&mut s, "5");
    assert_eq!(s.view, View::Nccl);
    assert_eq!(
        key(&mut s, KeyCode::Char('t'), KeyModifiers::NONE),
        vec![Command::NcclRunChoices]
    );
    let choices = nccl_service::choices(&paths.state_dir).unwrap();
    assert_eq!(choices.len(), 1);
    assert_eq!(choices[0].name, "local");
    update(
        &mut s,
        Msg::Nccl(flightdeck::tui::nccl::Msg::RunFleets(Ok(choices))),
    );
    let d = s.nccl.dialog.as_ref().expect("the dialog is open");
    assert!(
        d.env_lines().is_empty(),
        "no GPUDirect on this machine: no variables"
    );

    // -e 1G, -g 2, -n 7, -w 2, -d bfloat16 and two lines of environment.
    for _ in 0..3 {
        key(&mut s, KeyCode::Tab, KeyModifiers::NONE);
    }
    key(&mut s, KeyCode::Backspace, KeyModifiers::NONE);
    key(&mut s, KeyCode::Backspace, KeyModifiers::NONE);
    typed(&mut s, "1G");
    key(&mut s, KeyCode::Tab, KeyModifiers::NONE);
    key(&mut s, KeyCode::Tab, KeyModifiers::NONE);
    typed(&mut s, "2");
    key(&mut s, KeyCode::Tab, KeyModifiers::NONE);
    key(&mut s, KeyCode::Backspace, KeyModifiers::NONE);
    key(&mut s, KeyCode::Backspace, KeyModifiers::NONE);
    typed(&mut s, "7");
    key(&mut s, KeyCode::Tab, KeyModifiers::NONE);
    key(&mut s, KeyCode::Backspace, KeyModifiers::NONE);
    typed(&mut s, "2");
    key(&mut s, KeyCode::Tab, KeyModifiers::NONE);
    key(&mut s, KeyCode::Right, KeyModifiers::NONE);
    key(&mut s, KeyCode::Right, KeyModifiers::NONE);
    for _ in 0..3 {
        key(&mut s, KeyCode::Tab, KeyModifiers::NONE);
    }
    let lines = vec![
        format!("export NCCL_TESTS_DIR='{}'", bin_dir.display()),
        "export FD_EDITED='from the dialog'".to_string(),
    ];
    update(&mut s, Msg::Paste(lines.join("\n")));
    assert!(s.nccl.dialog.as_ref().unwrap().env_edited());
    let cmds = key(&mut s, KeyCode::Char('s'), KeyModifiers::CONTROL);
    assert!(s.nccl.dialog.is_none(), "ctrl-s closes the dialog");
    let [Command::StartNcclRun(req)] = cmds.as_slice() else {
        panic!("expected a start, got {cmds:?}");
    };
    assert_eq!(req.fleet, "local");
    assert_eq!(req.spec.env.as_ref(), Some(&lines));
    assert_eq!((req.spec.max_bytes, req.spec.gpus), (1 << 30, Some(2)));
    assert_eq!(
        (req.spec.iters, req.spec.warmup, req.spec.dtype.as_str()),
        (7, 2, "bfloat16")
    );

    // Started the shared way, on this machine.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let id = rt
        .block_on(nccl_service::start_run(&paths.state_dir, (**req).clone(), |_| {
            Ok(Reach::without_ssh())
        }))
        .unwrap();
    assert_eq!(
        update(
            &mut s,
            Msg::Nccl(flightdeck::tui::nccl::Msg::Started(Ok(id.clone())))
        ),
        vec![Command::LoadFleets, Command::FollowRun(id.clone())],
        "the view follows the new run"
    );
    assert_eq!(s.nccl.selected.as_deref(), Some(id.as_str()));

    // The history entry holds the edited environment from the start.
    let saved = history::load(&paths.state_dir, &id)
        .unwrap()
        .expect("history entry");
    assert_eq!(saved.spec.env, lines);
    assert_eq!(saved.spec.profile, "none");
    assert!(
        saved.spec.args == "-b 8B -e 1G -f 2 -g 2 -n 7 -w 2 -d bfloat16",
        "{}",
        saved.spec.args
    );

    // Followed to its end: the binary was found through the edited environment, which
    // was in force on the node.
    let (state, _) = Store::new(&paths.state_dir).load().unwrap();
    let nodes = state.fleets[0].nodes.clone();
    let f = rt.block_on(remote::follow_core(Reach::without_ssh(), &id, &nodes, |_, _| {}));
    assert_eq!(f.worst(), 0, "{:?}", f.head_tail);
    assert_eq!(f.report.rows.len(), 31);
    let log = std::fs::read_to_string(home.path().join(format!(".flightdeck/runs/{id}/out.log"))).unwrap();
    assert!(log.contains("FD_EDITED=from the dialog"), "{log}");
    assert!(
        log.contains("args: -b 8 -e 1073741824 -f 2 -g 2 -n 7 -w 2 -d bfloat16"),
        "{log}"
    );
    let done = remote::conclude(&paths.state_dir, "local", &id, &nodes, &f);
    assert_eq!(done.spec.env, lines, "kept when the run is concluded");
    assert_eq!(done.peak_busbw, Some(347.71));
    assert_eq!(done.exit_codes, vec![Some(0)]);
}
