//! Shared test harnesses.
#![allow(dead_code)]

pub mod gce_double;
pub mod gcp_double;
pub mod http_double;
pub mod k8s_double;
pub mod nccl_double;
pub mod testbed;
pub mod tmux;

/// A test that cannot run on this machine fails, saying why and what it needs: it never
/// passes without having run (as root, `./scripts/test.sh` installs what is missing).
#[track_caller]
pub fn cannot_run(why: &str) -> ! {
    panic!("this test cannot run here: {why}. The suite runs as root with ./scripts/test.sh, which installs what it needs")
}

/// Run the flightdeck binary with a clean environment: only PATH, and HOME = `home`.
pub fn flightdeck(home: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_flightdeck"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run flightdeck")
}

/// Start the flightdeck binary like [`flightdeck`], in the background (to kill or
/// interrupt it mid-way); its stderr is a pipe to read when it ends.
pub fn spawn_flightdeck(home: &std::path::Path, args: &[&str]) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_flightdeck"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start flightdeck")
}

/// Apply `fleets/local.yaml` (this machine as a one-node fleet `local`) in `home`.
pub fn apply_local_fleet(home: &std::path::Path) {
    let local = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fleets/local.yaml");
    let out = flightdeck(home, &["fleet", "apply", local.to_str().unwrap(), "--yes"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Run the flightdeck binary with a clean environment plus `env`.
pub fn flightdeck_env(home: &std::path::Path, args: &[&str], env: &[(&str, String)]) -> std::process::Output {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_flightdeck"));
    c.args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .stdin(std::process::Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run flightdeck")
}
