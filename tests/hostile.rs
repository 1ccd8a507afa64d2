//! Hostile strings in every field that reaches a node's shell, through the real binary:
//! fleet-file values are refused where they are written (FILE:LINE:COL), and what is
//! allowed through (job env values, working_dir, file names, commands, nccl flags)
//! arrives literally: no command substitution runs. Each attempt tries to create a
//! marker file; none may exist afterwards.

mod support;

use std::path::Path;
use support::{flightdeck, text};

const MARK: &str = "fd-hostile-marker";

/// A value that, expanded by a shell, creates `$dir/MARK`.
fn evil(dir: &Path) -> String {
    format!("x$(touch {}/{MARK})", dir.display())
}

fn marker(dir: &Path) -> bool {
    dir.join(MARK).exists()
}

#[test]
fn fleet_values_that_reach_a_shell_are_refused_at_their_place() {
    let home = tempfile::tempdir().unwrap();
    let e = evil(home.path());
    let cases: Vec<(String, &str, &str)> = vec![
        (
            format!("type: fleet\nname: lab\nssh_config:\n  hosts:\n    - hostname: 10.0.0.1\n      internal_ip: \"10.0.0.1{e}\"\n"),
            "5:7: ssh_config.hosts.0: internal_ip `10.0.0.1x$(touch",
            "internal_ip",
        ),
        (
            format!("type: fleet\nname: lab\nssh_config:\n  hosts:\n    - \"{e}\"\n"),
            "5:7: ssh_config.hosts.0: `x$(touch",
            "bare host",
        ),
        (
            "type: fleet\nname: lab\nssh_config:\n  hosts:\n    - hostname: \"h; rm -rf /\"\n".to_string(),
            "5:7: ssh_config.hosts.0: `h; rm -rf /` is not a host name or IP address",
            "hostname",
        ),
        (
            format!("type: fleet\nname: lab\nssh_config:\n  user: \"{e}\"\n  hosts: [10.0.0.1]\n"),
            "4:3: ssh_config.user: user `x$(touch",
            "user",
        ),
        (
            "type: fleet\nname: lab\nssh_config:\n  proxy_jump:\n    hostname: \"b\\nProxyCommand sh\"\n  hosts: [10.0.0.1]\n".to_string(),
            "5:5: ssh_config.proxy_jump.hostname: `b\\nProxyCommand sh` is not a host name",
            "proxy_jump with a newline",
        ),
        (
            format!("type: fleet\nname: \"lab{e}\"\nbackends: [local]\n"),
            "2:1: name: `lab",
            "fleet name",
        ),
    ];
    for (i, (yaml, want, what)) in cases.iter().enumerate() {
        let file = home.path().join(format!("f{i}.yaml"));
        std::fs::write(&file, yaml).unwrap();
        let out = flightdeck(home.path(), &["fleet", "validate", file.to_str().unwrap()]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{what}: {err}");
        assert!(
            err.contains(&format!("{}:{want}", file.display())),
            "{what}: want `{want}` in\n{err}"
        );
    }
    assert!(!marker(home.path()));
}

#[test]
fn nccl_and_job_values_arrive_literally() {
    let home = tempfile::tempdir().unwrap();
    let e = evil(home.path());
    support::apply_local_fleet(home.path());
    // --nccl-tests-dir is a path, not shell.
    let out = flightdeck(
        home.path(),
        &[
            "nccl",
            "run",
            "local",
            "-g",
            "1",
            "--nccl-tests-dir",
            &e,
            "--profile",
            "none",
        ],
    );
    assert!(!out.status.success());
    assert!(
        !marker(home.path()),
        "--nccl-tests-dir was expanded: {}",
        text(&out.stderr)
    );

    // A job: hostile env value, working_dir and file name; a command line equal to the
    // script's old delimiter, then a line that must run only as one of the commands.
    let dir = home.path().join("job");
    std::fs::create_dir_all(&dir).unwrap();
    let name = "a$(touch x)b.txt".to_string();
    std::fs::write(dir.join(&name), "payload\n").unwrap();
    let file = dir.join("job.yaml");
    std::fs::write(
        &file,
        format!(
            "type: task\nname: hostile\nfleet: local\nfiles: [\"{name}\"]\nworking_dir: \"wd{e}\"\nenv:\n  - TOKEN={e}\ncommands:\n  - printf 'token=%s\\n' \"$TOKEN\"\n  - echo __FD_COMMANDS__\n  - |\n    cat <<'EOT'\n    __FD_COMMANDS__\n    EOT\n  - echo last line ran as a command\n",
        ),
    )
    .unwrap();
    let out = flightdeck(
        home.path(),
        &["job", "run", file.to_str().unwrap(), "--no-preflight"],
    );
    let stdout = text(&out.stdout);
    let err = text(&out.stderr);
    assert!(!marker(home.path()), "a job value was expanded:\n{stdout}{err}");
    assert!(
        stdout.contains(&format!("token={e}")),
        "the env value arrives as written:\n{stdout}{err}"
    );
    assert!(stdout.contains("last line ran as a command"), "{stdout}{err}");
    assert!(stdout.matches("__FD_COMMANDS__").count() >= 2, "{stdout}");
}

/// A job file from a shared repository takes local files only from its own folder (links
/// inside an uploaded folder are refused); the operator can say yes on the command line.
#[test]
fn job_files_stay_in_the_job_folder_unless_the_operator_says_so() {
    let home = tempfile::tempdir().unwrap();
    support::apply_local_fleet(home.path());
    std::fs::write(home.path().join("secret.txt"), "not for the nodes\n").unwrap();
    let dir = home.path().join("repo");
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let file = dir.join("job.yaml");
    let write = |files: &str| {
        std::fs::write(
            &file,
            format!("type: task\nname: outside\nfleet: local\nfiles: [{files}]\ncommands:\n  - ls\n"),
        )
        .unwrap();
    };
    write("\"../secret.txt:s.txt\"");
    let out = flightdeck(home.path(), &["job", "run", file.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("files.0: `../secret.txt` is outside the job file's folder")
            && err.contains("--files-outside"),
        "{err}"
    );
    let out = flightdeck(
        home.path(),
        &["job", "run", file.to_str().unwrap(), "--files-outside"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("s.txt"), "{}", text(&out.stdout));
    // A link inside an uploaded folder is not followed off the machine.
    std::os::unix::fs::symlink(home.path().join("secret.txt"), dir.join("data/innocent.txt")).unwrap();
    write("data");
    let out = flightdeck(home.path(), &["job", "run", file.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("innocent.txt is a symbolic link: not uploaded"),
        "{err}"
    );
}
