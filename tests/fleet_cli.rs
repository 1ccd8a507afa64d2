//! `flightdeck fleet ...` and `flightdeck exec` through the real binary: the local
//! backend everywhere, SSH fleets on the testbed (root only).

mod support;

use std::path::Path;
use support::testbed::Testbed;
use support::{flightdeck, text};

#[test]
fn validate_reports_every_error_with_its_place() {
    let home = tempfile::tempdir().unwrap();
    let bad = home.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "type: fleet\nname: lab\nssh_config:\n  hosts:\n    - hostname: a\n      usr: x\n",
    )
    .unwrap();
    let bad2 = home.path().join("bad2.yaml");
    std::fs::write(&bad2, "type: fleet\nname: Lab\nbackends: [local]\nnodes: 2\n").unwrap();
    let good = Path::new(env!("CARGO_MANIFEST_DIR")).join("fleets/ssh-hosts.yaml");
    let out = flightdeck(
        home.path(),
        &[
            "fleet",
            "validate",
            bad.to_str().unwrap(),
            good.to_str().unwrap(),
            bad2.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(2), "a wrong file is wrong input");
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!(
            "{}:6:7: ssh_config.hosts[0]: unknown field `usr`",
            bad.display()
        )),
        "{err}"
    );
    assert!(err.contains("did you mean `user`?"), "{err}");
    assert!(
        err.contains(&format!(
            "{}:2:1: name: `Lab` is not a valid fleet name",
            bad2.display()
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "{}:4:1: nodes: the local backend is this one machine",
            bad2.display()
        )),
        "{err}"
    );
    assert!(text(&out.stdout).contains("ssh-hosts.yaml: ok (ssh fleet `lab`, 2 nodes)"));
}

#[test]
fn validate_reports_every_shape_error_at_once() {
    // Three independent errors (an unknown top-level field, a wrong type inside a block,
    // a wrong value in a host of the list) and one more in a second host: serde stops at
    // the first, the operator is told all four, each at its place, and nothing is written.
    let home = tempfile::tempdir().unwrap();
    let bad = home.path().join("three.yaml");
    std::fs::write(
        &bad,
        "type: fleet\nname: lab\nnodez: 2\nssh_config:\n  user: ubuntu\n  port: many\n  hosts:\n    - hostname: a\n      port: twenty\n    - hostname: b\n      usr: x\nspot_policy: sometimes\n",
    )
    .unwrap();
    let out = flightdeck(home.path(), &["fleet", "validate", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    let f = bad.display();
    for want in [
        format!("{f}:3:1: unknown field `nodez`"),
        format!("{f}:6:9: ssh_config.port: expected a whole number (0 or more), found the text \"many\""),
        format!("{f}:9:13: ssh_config.hosts[0].port: expected a whole number (0 or more), found the text \"twenty\""),
        format!("{f}:11:7: ssh_config.hosts[1]: unknown field `usr`"),
        format!("{f}:12:14: spot_policy: unknown value `sometimes`"),
    ] {
        assert!(err.contains(&want), "want `{want}` in\n{err}");
    }
    assert_eq!(err.lines().count(), 5, "one line each, no repeats:\n{err}");
    assert!(text(&out.stdout).is_empty());
    let state = flightdeck(home.path(), &["fleet", "list", "--json"]);
    assert_eq!(text(&state.stdout).trim(), "[]", "nothing recorded");
}

#[test]
fn local_fleet_apply_exec_list_delete() {
    let home = tempfile::tempdir().unwrap();
    let local = Path::new(env!("CARGO_MANIFEST_DIR")).join("fleets/local.yaml");
    let local = local.to_str().unwrap();
    let out = flightdeck(home.path(), &["fleet", "apply", local]);
    assert_eq!(out.status.code(), Some(1), "no terminal and no --yes: refuse");
    assert!(text(&out.stderr).contains("pass --yes"), "{}", text(&out.stderr));

    let plan = flightdeck(home.path(), &["fleet", "plan", local, "--json"]);
    let plan: serde_json::Value = serde_json::from_slice(&plan.stdout).unwrap();
    assert_eq!(plan["changes"][0]["action"], "create");
    assert_eq!(plan["changes"][0]["place"], "localhost");

    let out = flightdeck(home.path(), &["fleet", "apply", local, "--yes"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("  create  node  local-0"),
        "apply's plan on stdout: {}",
        text(&out.stdout)
    );
    let list: serde_json::Value =
        serde_json::from_slice(&flightdeck(home.path(), &["fleet", "list", "--json"]).stdout).unwrap();
    assert_eq!(list[0]["name"], "local");
    assert_eq!(list[0]["backend"], "local");

    // The plan is the command's output: on stdout (`> plan.txt`, `| less`).
    let plan = flightdeck(home.path(), &["fleet", "plan", local]);
    assert!(
        text(&plan.stdout).contains("  keep    node  local-0"),
        "{}",
        text(&plan.stdout)
    );
    assert!(plan.stderr.is_empty(), "{}", text(&plan.stderr));

    let out = flightdeck(home.path(), &["exec", "local", "--", "echo", "hi;", "exit", "4"]);
    assert_eq!(out.status.code(), Some(4));
    assert_eq!(text(&out.stdout), "local-0: hi\n");
    assert!(
        text(&out.stderr).contains("1 node: 1 exit 4 (local-0)"),
        "{}",
        text(&out.stderr)
    );

    let out = flightdeck(home.path(), &["exec", "locl", "--", "true"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("did you mean `local`?"));

    let out = flightdeck(home.path(), &["fleet", "delete", "local", "--yes"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("  forget  node  local-0"),
        "what goes, on stdout: {}",
        text(&out.stdout)
    );
    let list: serde_json::Value =
        serde_json::from_slice(&flightdeck(home.path(), &["fleet", "list", "--json"]).stdout).unwrap();
    assert_eq!(list, serde_json::json!([]));
}

#[test]
fn corrupt_state_is_reported_and_recovered() {
    let home = tempfile::tempdir().unwrap();
    let local = Path::new(env!("CARGO_MANIFEST_DIR")).join("fleets/local.yaml");
    assert!(
        flightdeck(home.path(), &["fleet", "apply", local.to_str().unwrap(), "--yes"])
            .status
            .success()
    );
    assert!(
        flightdeck(home.path(), &["fleet", "apply", local.to_str().unwrap(), "--yes"])
            .status
            .success()
    );
    let state = home.path().join(".local/state/flightdeck/state.json");
    std::fs::write(&state, "{\"schema\": 1, \"fle").unwrap();
    let out = flightdeck(home.path(), &["fleet", "list", "--json"]);
    assert!(out.status.success());
    assert!(text(&out.stderr).contains("was corrupt"), "{}", text(&out.stderr));
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list[0]["name"], "local", "recovered from the backup");
}

#[test]
fn ssh_fleet_on_the_testbed_apply_exec_collapse_json() {
    let Some(tb) = Testbed::new(4, 0) else { return };
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("tb.yaml");
    std::fs::write(&file, tb.fleet_yaml("tb")).unwrap();
    let file = file.to_str().unwrap();

    // Unknown hosts, no terminal to ask: refused, nothing recorded.
    let out = flightdeck(home.path(), &["fleet", "apply", file, "--yes"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("unknown host key SHA256:"),
        "{}",
        text(&out.stderr)
    );
    assert!(text(&out.stderr).contains("nothing was recorded"));

    let out = flightdeck(
        home.path(),
        &["fleet", "apply", file, "--yes", "--accept-new-host-keys"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("fleet `tb`: 4 nodes ready"));
    let known = std::fs::read_to_string(home.path().join(".ssh/known_hosts")).unwrap();
    assert_eq!(
        known.lines().count(),
        5,
        "bastion and four nodes learned:\n{known}"
    );

    // Now strict checking passes without the flag.
    let cmd = "case $(ip -4 -o addr show eth0) in *10.88.0.2/*) echo odd; exit 2;; esac; echo same";
    let out = flightdeck(home.path(), &["exec", "tb", "--collapse", "--", cmd]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("tb-1 (1 node)\n") && stdout.contains("tb-[0,2-3] (3 nodes)\n"),
        "{stdout}"
    );
    assert!(
        text(&out.stderr).contains("4 nodes: 3 exit 0, 1 exit 2 (tb-1)"),
        "{}",
        text(&out.stderr)
    );

    let out = flightdeck(
        home.path(),
        &["exec", "tb", "--nodes", "0,3", "--json", "--", "echo", "$((6*7))"],
    );
    assert!(out.status.success());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["exit_code"], 0);
    assert_eq!(doc["nodes"].as_array().unwrap().len(), 2);
    assert_eq!(doc["nodes"][1]["node"], "tb-3");
    assert_eq!(doc["nodes"][1]["stdout"], "42\n");

    // A node whose command hangs is stopped at --timeout and reported; the others are
    // not held up. Nodes picked by range and by name.
    let marker = format!("sleep 31{}", std::process::id() % 1000);
    let hang =
        format!("echo before; case $(ip -4 -o addr show eth0) in *10.88.0.3/*) {marker};; esac; echo after");
    let out = flightdeck(
        home.path(),
        &["exec", "tb", "--nodes", "1-2,tb-3", "--timeout", "2", "--", &hang],
    );
    assert_eq!(out.status.code(), Some(124), "{}", text(&out.stderr));
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(
        stdout.contains("tb-2: before\n") && !stdout.contains("tb-2: after"),
        "{stdout}"
    );
    assert!(
        stdout.contains("tb-1: after\n") && stdout.contains("tb-3: after\n"),
        "{stdout}"
    );
    assert!(
        stderr.contains("3 nodes: 2 exit 0, 1 timed out (tb-2)"),
        "{stderr}"
    );
    // What the hung command started is gone from the node too.
    let start = std::time::Instant::now();
    while tb
        .node_run(2, &["pgrep", "-f", &marker])
        .is_ok_and(|p| !p.trim().is_empty())
    {
        assert!(start.elapsed().as_secs() < 10, "`{marker}` still runs on tb-2");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let out = flightdeck(home.path(), &["exec", "tb", "--nodes", "tb-9", "--", "true"]);
    assert_eq!(out.status.code(), Some(2), "a usage error");
    assert!(
        text(&out.stderr).contains("--nodes `tb-9` is no node of the fleet"),
        "{}",
        text(&out.stderr)
    );
}

/// `fleet plan` calls no API, so it plans without a GCP project too: the project's place
/// holds a placeholder, and the plan says so (apply still needs one).
#[test]
fn a_gcp_plan_needs_no_project() {
    let home = tempfile::tempdir().unwrap();
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("fleets/a3-mega-tcpxo.yaml");
    let out = flightdeck(home.path(), &["fleet", "plan", file.to_str().unwrap()]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    // The plan is the command's output: on stdout, as `--json`'s document.
    assert!(stdout.contains("create  instance"), "{stdout}");
    assert!(
        stdout.contains(
            "note: no GCP project found: this plan writes `PROJECT` where the project goes; apply needs one"
        ),
        "{stdout}"
    );
    assert!(stderr.is_empty(), "{stderr}");
    let json = flightdeck(home.path(), &["fleet", "plan", file.to_str().unwrap(), "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert!(
        doc["notes"][0]
            .as_str()
            .unwrap()
            .starts_with("no GCP project found"),
        "{doc}"
    );
}

/// `fleet delete --forget` drops a fleet's record and touches nothing else: it shows what
/// it forgets, asks (no terminal: `--yes` needed), and names an unknown fleet.
#[test]
fn delete_forget_drops_the_record_only() {
    let home = tempfile::tempdir().unwrap();
    support::apply_local_fleet(home.path());
    let out = flightdeck(home.path(), &["fleet", "delete", "local", "--forget"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("pass --yes"), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("  forget  node  local-0"),
        "{}",
        text(&out.stdout)
    );
    let list = |home: &Path| -> serde_json::Value {
        serde_json::from_slice(&flightdeck(home, &["fleet", "list", "--json"]).stdout).unwrap()
    };
    assert_eq!(list(home.path())[0]["name"], "local", "asked, not answered: kept");

    let out = flightdeck(home.path(), &["fleet", "delete", "local", "--forget", "--yes"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("fleet `local` forgotten: its record left the state, nothing was deleted"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(list(home.path()), serde_json::json!([]));

    let out = flightdeck(home.path(), &["fleet", "delete", "local", "--forget", "--yes"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("no fleet `local` in the state"),
        "{}",
        text(&out.stderr)
    );
}

/// `fleet apply` on a terminal, an unknown host key: the status line's ticker stops and
/// leaves the line while the question is open (it used to redraw `fleet apply tb · 0:04`
/// over `Accept and remember it?`), and comes back after the answer.
#[test]
fn the_status_line_leaves_the_host_key_question_alone() {
    if !support::tmux::tmux_available() {
        support::cannot_run("tmux is not installed");
    }
    let Some(tb) = Testbed::new(1, 0) else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tb.yaml");
    std::fs::write(&file, tb.fleet_yaml("tb")).unwrap();
    let t = support::tmux::Tmux::start(&["fleet", "apply", file.to_str().unwrap()], &[], 80, 24);
    t.wait_text("Apply fleet `tb`? [y/N]");
    t.type_text("y");
    t.keys(&["Enter"]);
    t.wait_text("Accept and remember it? [y]es / [N]o / [a]ll new keys this run:");
    // The ticker redraws every 250 ms: two seconds on, the question is still whole and
    // no status line is on the screen.
    std::thread::sleep(std::time::Duration::from_secs(2));
    let screen = t.screen();
    assert!(
        screen.contains("Accept and remember it? [y]es / [N]o / [a]ll new keys this run:"),
        "the question was overwritten:\n{screen}"
    );
    assert!(
        !screen.contains("fleet apply tb ·"),
        "the status line is drawn while the question is open:\n{screen}"
    );
    let question = screen
        .lines()
        .find(|l| l.contains("unknown host key SHA256:"))
        .unwrap_or_else(|| panic!("no host key line:\n{screen}"));
    assert!(
        question.starts_with("root@"),
        "the question starts its own line: {question:?}\n{screen}"
    );
    t.type_text("a");
    t.keys(&["Enter"]);
    t.wait_text("fleet `tb`: 1 node ready");
    assert_eq!(t.wait_exit(), 0, "{}", t.screen());
}

/// ux-walk-2 item 11: on a bastion with only the binary, the example fleet files are
/// built in: listed, printed byte for byte as the repository's, and each one valid.
#[test]
fn the_example_fleets_are_built_in_and_valid() {
    let home = tempfile::tempdir().unwrap();
    let out = flightdeck(home.path(), &["fleet", "example"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let names: Vec<String> = text(&out.stdout)
        .lines()
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect();
    let mut files: Vec<String> = std::fs::read_dir("fleets")
        .unwrap()
        .map(|e| {
            e.unwrap()
                .file_name()
                .to_string_lossy()
                .trim_end_matches(".yaml")
                .to_string()
        })
        .collect();
    files.sort();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(sorted, files, "every file of fleets/ is built in");
    for name in &names {
        let out = flightdeck(home.path(), &["fleet", "example", name]);
        let repo = std::fs::read_to_string(format!("fleets/{name}.yaml")).unwrap();
        assert_eq!(text(&out.stdout), repo, "{name}");
        let copy = home.path().join(format!("{name}.yaml"));
        std::fs::write(&copy, &out.stdout).unwrap();
        let v = flightdeck(home.path(), &["fleet", "validate", copy.to_str().unwrap()]);
        assert!(v.status.success(), "{name}: {}", text(&v.stderr));
    }
    let out = flightdeck(home.path(), &["fleet", "example", "loca"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("did you mean `local`?"),
        "{}",
        text(&out.stderr)
    );
}
