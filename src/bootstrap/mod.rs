//! GPUDirect node bootstrap: what a fresh GCE VM needs before NCCL traffic can take its
//! GPUDirect path, as a list of named steps per flavour ([`steps`]), and the pre-flight
//! that checks a node before every NCCL run and job ([`preflight`]).
//!
//! Each step has a *check* (is it done already?) and an *action*. The script a node runs
//! ([`script`]) runs every step's check first and its action only when the check fails,
//! then the check again: a second run does nothing, and a node left half-done (a dropped
//! connection, a node restarted mid-way) is finished, never redone. The script reports
//! each step on a line of its own ([`Marker`]), which [`remote`] turns into progress per
//! node and step. Every step names the reference it follows (repository and path).
//!
//! The script is bash (`shellenv::SHEBANG`), run as root through [`AS_ROOT`]; every
//! `export` it writes comes from `shellenv::export`.
//!
//! Pure but for [`remote`]: steps and scripts are text, markers are parsed from lines.

pub mod cos;
pub mod preflight;
pub mod remote;
pub mod steps;

use crate::nccl::GpuDirect;
use crate::shellenv::{self, Value};
use std::fmt::Write as _;

pub use steps::Step;

/// The prefix of the script's progress lines.
pub const MARK: &str = "@@fd-bootstrap";

/// A progress line of the bootstrap script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Marker {
    /// The script starts: flavour, and the number of steps.
    Begin { flavour: String, steps: usize },
    /// The step's check passed before anything was done.
    Done(String),
    /// The step's check failed: its action runs now.
    Run(String),
    /// The action ran and the check passes now.
    Ok(String),
    /// The action failed (its exit code), or the check still fails after it (code 1 and
    /// a reason).
    Failed {
        step: String,
        code: i32,
        reason: Option<String>,
    },
    /// Every step is done.
    End,
}

impl Marker {
    /// The marker a line holds, if it is one.
    pub fn parse(line: &str) -> Option<Marker> {
        let rest = line.strip_prefix(MARK)?.strip_prefix(' ')?;
        let mut parts = rest.splitn(4, ' ');
        let kind = parts.next()?;
        let step = parts.next().unwrap_or("").to_string();
        Some(match kind {
            "begin" => Marker::Begin {
                flavour: step,
                steps: parts.next()?.parse().ok()?,
            },
            "done" => Marker::Done(step),
            "run" => Marker::Run(step),
            "ok" => Marker::Ok(step),
            "failed" => Marker::Failed {
                step,
                code: parts.next()?.parse().ok()?,
                reason: parts.next().map(str::to_string),
            },
            "end" => Marker::End,
            _ => return None,
        })
    }
}

/// The flavour's name as the operator writes it (`tcpx`, `tcpxo`, `rdma`), or `None` for
/// a name that is not one.
pub fn parse_flavour(name: &str) -> Option<GpuDirect> {
    match name {
        "tcpx" => Some(GpuDirect::Tcpx),
        "tcpxo" => Some(GpuDirect::Tcpxo),
        "rdma" => Some(GpuDirect::Rdma),
        _ => None,
    }
}

/// The machine families a flavour is for, for headings.
pub fn flavour_title(flavour: GpuDirect) -> &'static str {
    match flavour {
        GpuDirect::None => "no GPUDirect",
        GpuDirect::Tcpx => "GPUDirect-TCPX (A3 High, A3 Edge)",
        GpuDirect::Tcpxo => "GPUDirect-TCPXO (A3 Mega)",
        GpuDirect::Rdma => "GPUDirect RDMA over RoCE with gIB (A3 Ultra, A4)",
    }
}

/// The script a node runs for `flavour`: bash, as root. Prints [`Marker`] lines and
/// each action's output; exits with the failed action's code (or 1 for a check that
/// still fails after its action), else 0.
pub fn script(flavour: GpuDirect) -> String {
    render(flavour, &steps::steps(flavour))
}

/// [`script`] of given steps (tests make failing ones).
pub fn render(flavour: GpuDirect, steps: &[Step]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}", shellenv::SHEBANG);
    let _ = writeln!(
        s,
        "# flightdeck GPUDirect bootstrap: {}, {} steps.",
        flavour_title(flavour),
        steps.len()
    );
    s.push_str(
        "# Each step has a check (done already?) and an action; the action runs only when\n\
         # the check fails, and the check must pass after it. Running this again does\n\
         # nothing on a finished node and finishes a half-done one. Runs as root, in bash.\n\
         # Re-run with `flightdeck fleet bootstrap FLEET`.\n",
    );
    s.push_str(shellenv::HEADER);
    let _ = writeln!(
        s,
        "{}",
        shellenv::export("DEBIAN_FRONTEND", Value::Literal("noninteractive"))
    );
    let _ = writeln!(
        s,
        "{}",
        shellenv::export("PATH", Value::Expr("$PATH:/usr/local/sbin:/usr/sbin:/sbin"))
    );
    let _ = writeln!(s, "fd_mark() {{ echo \"{MARK} $*\"; }}");
    // One bootstrap at a time per node: a run whose flightdeck was killed goes on (its
    // session has no terminal to hang up), and a second run waits for it instead of
    // meeting it in apt's lock.
    s.push_str(
        "if command -v flock >/dev/null 2>&1 && true 2>/dev/null >>/run/flightdeck-bootstrap.lock; then\n\
         \x20 exec 9>>/run/flightdeck-bootstrap.lock\n\
         \x20 flock -n 9 || { echo \"another bootstrap of this node is running: waiting for it\"; flock -w 3600 9 || exit 75; }\n\
         fi\n",
    );
    s.push_str(
        "fd_step() {\n\
         \x20 if ( \"check_$2\" ) >/dev/null 2>&1; then fd_mark done \"$1\"; return 0; fi\n\
         \x20 fd_mark run \"$1\"\n\
         \x20 ( set -e; \"action_$2\" ) 2>&1\n\
         \x20 rc=$?\n\
         \x20 if [ \"$rc\" -ne 0 ]; then fd_mark failed \"$1\" \"$rc\" the action failed; exit \"$rc\"; fi\n\
         \x20 if ! ( \"check_$2\" ) >/dev/null 2>&1; then fd_mark failed \"$1\" 1 the check still fails after the action; exit 1; fi\n\
         \x20 fd_mark ok \"$1\"\n\
         }\n",
    );
    s.push_str(steps::HELPERS);
    for (i, step) in steps.iter().enumerate() {
        let _ = writeln!(s, "\n# --- step {}: {} --- {}", i + 1, step.name, step.what);
        for src in step.source.split("; ") {
            let _ = writeln!(s, "# source: {src}");
        }
        let _ = writeln!(s, "check_{i}() {{\n{}\n}}", indent(&step.check));
        let _ = writeln!(s, "action_{i}() {{\n{}\n}}", indent(&step.action));
    }
    let _ = writeln!(s, "\nfd_mark begin {} {}", flavour.name(), steps.len());
    for (i, step) in steps.iter().enumerate() {
        let _ = writeln!(s, "fd_step {} {i}", step.name);
    }
    let _ = writeln!(s, "fd_mark end");
    s
}

/// A step's body as it goes in its function: not indented, as heredocs in it end at a
/// line of their own.
fn indent(body: &str) -> String {
    body.trim_end().to_string()
}

/// The command that runs a script read on stdin as root, under bash: directly when the
/// login is root, else through `sudo -n` (GCE images give the login user sudo without a
/// password). A node without bash is told so (exit 127).
pub const AS_ROOT: &str = "if ! command -v bash >/dev/null 2>&1; then echo \"flightdeck: bash not found on this node (the bootstrap script is bash)\" >&2; exit 127; fi; \
                           if [ \"$(id -u)\" -eq 0 ]; then exec bash -s; else exec sudo -n bash -s; fi";

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn step(name: &'static str, check: &str, action: &str) -> Step {
        Step {
            name,
            what: "a test step",
            source: "nowhere",
            check: check.into(),
            action: action.into(),
        }
    }

    /// Run a bootstrap script under bash, as nodes run it.
    fn sh(script: &str) -> (i32, String) {
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(script)
            .output()
            .expect("bash runs");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }

    /// Run `script` with `sh -s`, the script on stdin (the POSIX sh scripts of the doctor
    /// and the pre-flight, which other modules' tests run through this).
    pub(crate) fn sh_stdin(script: &str) -> std::process::Output {
        use std::io::Write;
        let mut child = std::process::Command::new("sh")
            .arg("-s")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("sh runs");
        child.stdin.take().unwrap().write_all(script.as_bytes()).unwrap();
        child.wait_with_output().unwrap()
    }

    fn markers(out: &str) -> Vec<Marker> {
        out.lines().filter_map(Marker::parse).collect()
    }

    #[test]
    fn markers_parse_and_other_lines_are_not_markers() {
        assert_eq!(
            Marker::parse("@@fd-bootstrap begin tcpxo 7"),
            Some(Marker::Begin {
                flavour: "tcpxo".into(),
                steps: 7
            })
        );
        assert_eq!(
            Marker::parse("@@fd-bootstrap failed rxdm 125 the action failed"),
            Some(Marker::Failed {
                step: "rxdm".into(),
                code: 125,
                reason: Some("the action failed".into())
            })
        );
        assert_eq!(
            Marker::parse("@@fd-bootstrap ok rxdm"),
            Some(Marker::Ok("rxdm".into()))
        );
        assert_eq!(Marker::parse("@@fd-bootstrapx ok rxdm"), None);
        assert_eq!(Marker::parse("echo @@fd-bootstrap ok"), None);
        assert_eq!(Marker::parse("@@fd-bootstrap weird x"), None);
    }

    #[test]
    fn a_second_run_does_nothing_and_a_half_done_run_is_finished() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        let steps = vec![
            step(
                "one",
                &format!("[ -f {d}/one ]"),
                &format!("echo making one; touch {d}/one"),
            ),
            step("two", &format!("[ -f {d}/two ]"), &format!("touch {d}/two")),
        ];
        // Half done: step two's result exists already.
        std::fs::write(dir.path().join("two"), "").unwrap();
        let (code, out) = sh(&render(GpuDirect::Tcpxo, &steps));
        assert_eq!(code, 0, "{out}");
        assert_eq!(
            markers(&out),
            vec![
                Marker::Begin {
                    flavour: "tcpxo".into(),
                    steps: 2
                },
                Marker::Run("one".into()),
                Marker::Ok("one".into()),
                Marker::Done("two".into()),
                Marker::End
            ]
        );
        assert!(out.contains("making one"), "the action's output is shown: {out}");
        let (code, out) = sh(&render(GpuDirect::Tcpxo, &steps));
        assert_eq!(code, 0);
        assert!(markers(&out)
            .iter()
            .all(|m| !matches!(m, Marker::Run(_) | Marker::Ok(_))));
    }

    #[test]
    fn a_failing_action_stops_the_script_with_its_code_and_a_check_that_still_fails_too() {
        let steps = vec![
            step("bad", "false", "echo oops >&2; exit 42"),
            step("never", "false", "true"),
        ];
        let (code, out) = sh(&render(GpuDirect::Rdma, &steps));
        assert_eq!(code, 42);
        assert!(
            out.contains("oops"),
            "stderr of the action is in the output: {out}"
        );
        let m = markers(&out);
        assert!(m.contains(&Marker::Failed {
            step: "bad".into(),
            code: 42,
            reason: Some("the action failed".into())
        }));
        assert!(!m.contains(&Marker::Run("never".into())));
        // A step whose action "succeeds" without doing what its check wants.
        let (code, out) = sh(&render(GpuDirect::Rdma, &[step("liar", "false", "true")]));
        assert_eq!(code, 1);
        assert!(out.contains("failed liar 1 the check still fails"), "{out}");
    }

    #[test]
    fn every_flavour_script_is_valid_bash_and_names_its_sources() {
        for f in [GpuDirect::Tcpx, GpuDirect::Tcpxo, GpuDirect::Rdma] {
            let text = script(f);
            assert!(text.starts_with(&format!(
                "{}\n# flightdeck GPUDirect bootstrap: ",
                shellenv::SHEBANG
            )));
            let out = std::process::Command::new("bash")
                .args(["-n", "-c", &text])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{f:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let steps = steps::steps(f);
            assert!(steps.len() >= 4, "{f:?}");
            let mut names: Vec<&str> = steps.iter().map(|s| s.name).collect();
            names.sort();
            names.dedup();
            assert_eq!(names.len(), steps.len(), "step names are unique in {f:?}");
            for s in &steps {
                assert!(
                    s.source.contains('/') && !s.check.trim().is_empty() && !s.action.trim().is_empty(),
                    "{f:?} {}",
                    s.name
                );
                assert!(text.contains(&format!("fd_step {} ", s.name)));
            }
            assert!(steps.iter().any(|s| s.name == "nccl-tests"), "{f:?}");
        }
        assert!(steps::steps(GpuDirect::None).is_empty());
    }

    /// Every `export` line of every script is one `shellenv::export` writes: the script's
    /// own, and those it writes into profiles.
    #[test]
    fn every_export_comes_from_shellenv() {
        let known = [
            shellenv::export("DEBIAN_FRONTEND", Value::Literal("noninteractive")),
            shellenv::export("PATH", Value::Expr("$PATH:/usr/local/sbin:/usr/sbin:/sbin")),
            shellenv::export(
                "NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY",
                Value::Literal("/dev/aperture_devices"),
            ),
            shellenv::export("LD_LIBRARY_PATH", Value::Prepend("/var/lib/tcpxo/lib64")),
            shellenv::export("LD_LIBRARY_PATH", Value::Prepend("/usr/local/gib/lib64")),
        ];
        for f in [GpuDirect::Tcpx, GpuDirect::Tcpxo, GpuDirect::Rdma] {
            let text = script(f);
            let exports: Vec<&str> = text
                .lines()
                .map(str::trim)
                .filter(|l| l.starts_with("export "))
                .collect();
            assert!(exports.len() >= 2, "{f:?}");
            for l in exports {
                assert!(known.iter().any(|k| k == l), "{f:?}: {l}");
            }
        }
    }

    /// The profile lines the TCPXO step appends, sourced under `set -u` after Google's
    /// own LD_LIBRARY_PATH line with LD_LIBRARY_PATH unset: no error, no empty entry.
    #[test]
    fn the_tcpxo_profile_lines_source_under_set_u() {
        let script = format!(
            "set -u\nset +u\nexport LD_LIBRARY_PATH=\"/lib/dir:${{LD_LIBRARY_PATH}}\"\nset -u\n{}\nprintf '%s|%s' \"$LD_LIBRARY_PATH\" \"$NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY\"\n",
            steps::tcpxo_profile_lines()
        );
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(&script)
            .env_remove("LD_LIBRARY_PATH")
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "/var/lib/tcpxo/lib64:/lib/dir|/dev/aperture_devices",
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The command that runs the script: bash, and a node without bash is told so.
    #[test]
    fn as_root_runs_bash_and_says_when_there_is_none() {
        use std::io::Write;
        let run = |path: &str| {
            let mut child = std::process::Command::new("/bin/sh")
                .arg("-c")
                .arg(AS_ROOT)
                .env("PATH", path)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            // A shell that exits before reading (no bash) closes the pipe.
            let _ = child
                .stdin
                .take()
                .unwrap()
                .write_all(b"[[ -n \"$BASH_VERSION\" ]] && echo in-bash\n");
            let out = child.wait_with_output().unwrap();
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        };
        let empty = tempfile::tempdir().unwrap();
        let (code, _, err) = run(empty.path().to_str().unwrap());
        assert_eq!(code, Some(127));
        assert!(err.contains("flightdeck: bash not found on this node"), "{err}");
        if unsafe { libc::geteuid() } == 0 {
            let (code, out, err) = run("/usr/bin:/bin");
            assert_eq!((code, out.as_str()), (Some(0), "in-bash\n"), "{err}");
        }
    }
}
