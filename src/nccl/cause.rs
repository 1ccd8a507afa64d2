//! The line of a log that says why a run failed, read as the lines come: NCCL's own
//! first `NCCL WARN` that matters, nccl-tests' failure line, PyTorch's NCCL error or
//! watchdog timeout, flightdeck's own node-script errors, and (for a run known to have
//! failed) the last line that says anything.
//!
//! The forms, from the sources that print them:
//! - NCCL (`src/debug.cc`): `host:pid:tid [dev] NCCL WARN message`, from 2.19 with the
//!   file and line before `NCCL WARN` (`host:pid:tid [dev] init.cc:1234 NCCL WARN ...`).
//!   Some WARNs are printed by healthy runs and say nothing of a failure (a GID table
//!   change, a deprecated variable, the service thread's accept retry at teardown): they
//!   are not a cause.
//! - nccl-tests (`src/common.h`): `host: Test NCCL failure common.cu:892 'unhandled system
//!   error / ...'`, `Test CUDA failure`, `Test timeout (Ns)` (2.13.4), the trace lines
//!   ` .. host pid N: Test failure common.cu:NNN`, and `# error: ...` (2.17.3); before
//!   2.0, `NCCL failure common.cu:NNN 'x'` and `Cuda failure`.
//! - PyTorch (`ProcessGroupNCCL.cpp`, `NCCLUtils.hpp`): `[Rank N] Watchdog caught collective
//!   operation timeout: WorkNCCL(...) ran for 600000 milliseconds before timing out.`, and
//!   `NCCL error in: .../ProcessGroupNCCL.cpp:1970, unhandled system error (run with
//!   NCCL_DEBUG=INFO for details), NCCL version 2.18.1` followed by
//!   `ncclSystemError: System call (e.g. socket, malloc) or external library call failed
//!   or device error.` and `Last error:` with NCCL's last error on the next line.

/// The most characters of a cause kept (a line may be 64 KiB).
pub(crate) const MAX_CAUSE_CHARS: usize = 400;

/// NCCL WARNs that healthy runs print: never the cause.
const BENIGN_WARNS: [&str; 6] = [
    "GID table change",
    // No verbs library: NCCL goes on without IB (sockets, or a plugin).
    "Failed to open libibverbs.so",
    "is deprecated",
    "[Service thread] Accept failed Resource temporarily unavailable",
    "Could not enable P2P",
    "Unknown parameter",
];

/// How a crashed process says so: Open MPI's signal report, the shell's, the C++
/// runtime's.
const CRASHES: [&str; 6] = [
    "Signal: ",
    "Segmentation fault",
    "Bus error",
    "Aborted (core dumped)",
    "terminate called after throwing",
    "Floating point exception",
];

/// Picks the line that says why a run failed, as the lines come. Pure; holds a few lines.
#[derive(Debug, Clone, Default)]
pub struct CauseFinder {
    /// The first `NCCL WARN` line that is not [`BENIGN_WARNS`].
    warn: Option<String>,
    /// The first nccl-tests failure line.
    test: Option<String>,
    /// A process's crash: the signal that killed it.
    crash: Option<String>,
    /// PyTorch's first NCCL error or watchdog timeout, with what follows it.
    torch: Option<String>,
    /// PyTorch's error awaits the line after `Last error:`.
    torch_pending: bool,
    /// The first `flightdeck: ...` line (the node scripts' own errors).
    own: Option<String>,
    /// The last line with something to read.
    last: Option<String>,
}

impl CauseFinder {
    /// Read one line (a node's name before it, `lab-0: `, and launcher tags are fine).
    pub fn push(&mut self, line: &str) {
        let line = super::line::strip_launcher_prefixes(line.trim_end_matches(['\r', '\n']));
        self.push_stripped(line, super::line::split_debug(line).as_ref());
    }

    /// [`CauseFinder::push`] of a line whose prefixes are gone, with its NCCL debug line
    /// already split: the parser's, which has done both for itself.
    pub(crate) fn push_stripped(&mut self, line: &str, debug: Option<&super::line::DebugLine>) {
        let line = line.trim();
        if line.is_empty() || line.starts_with(super::runner::EXIT_MARKER) {
            return;
        }
        if self.torch_pending {
            self.torch_pending = false;
            if let Some(t) = &mut self.torch {
                *t = bounded(&format!("{t} {line}"));
            }
        }
        if self.warn.is_none() {
            if let Some(d) = debug.filter(|d| d.level == "WARN") {
                if !BENIGN_WARNS.iter().any(|b| d.message.contains(b)) {
                    self.warn = Some(bounded(&format!("NCCL WARN {}", d.message)));
                }
            }
        }
        if self.test.is_none() {
            self.test = test_failure(line).map(bounded);
        }
        if self.crash.is_none() {
            for key in CRASHES {
                if let Some(at) = line.find(key) {
                    self.crash = Some(bounded(&line[at..]));
                    break;
                }
            }
        }
        self.torch_line(line);
        if self.own.is_none() {
            // At the start, or after a node's name (`lab-0: flightdeck: ...`).
            let at = line
                .strip_prefix("flightdeck: ")
                .map(|_| 0)
                .or_else(|| line.find(": flightdeck: ").map(|i| i + 2));
            if let Some(at) = at {
                self.own = Some(bounded(&line[at..]));
            }
        }
        // Rules (mpirun's `-----`) and nccl-tests' bare `#` say nothing.
        if line.chars().any(char::is_alphanumeric) && line != "#" {
            self.last = Some(bounded(line));
        }
    }

    fn torch_line(&mut self, line: &str) {
        match &mut self.torch {
            None => {
                for key in [
                    "DistBackendError: ",
                    "Watchdog caught collective operation timeout",
                    "NCCL error in: ",
                    "NCCL communicator was aborted",
                    "ProcessGroupNCCL's watchdog got stuck",
                ] {
                    if let Some(at) = line.find(key) {
                        self.torch = Some(bounded(&line[at..]));
                        break;
                    }
                }
            }
            Some(t) if t.starts_with("NCCL error in: ") || t.starts_with("DistBackendError: ") => {
                // What NCCL's error code means, and its last error (on the next line).
                if line.starts_with("nccl") && line.contains("Error: ") && !t.contains(line) {
                    *t = bounded(&format!("{t}; {line}"));
                }
                if line.ends_with("Last error:") && !t.contains("Last error:") {
                    *t = bounded(&format!("{t}; Last error:"));
                    self.torch_pending = true;
                }
            }
            Some(_) => {}
        }
    }

    /// The cause of a run known to have failed: NCCL's own `NCCL WARN` line first, then
    /// nccl-tests' failure line, then PyTorch's, then flightdeck's own `flightdeck: ...`
    /// line, then the last line that says anything.
    pub fn cause(&self) -> Option<String> {
        self.error()
            .or_else(|| self.own.clone())
            .or_else(|| self.last.clone())
    }

    /// What the log itself says went wrong (NCCL's WARN, nccl-tests' or PyTorch's error),
    /// without guessing from its last line: `None` for a log that reports no error.
    pub fn error(&self) -> Option<String> {
        self.warn
            .clone()
            .or_else(|| self.test.clone())
            .or_else(|| self.crash.clone())
            .or_else(|| self.torch.clone())
    }

    /// nccl-tests' or PyTorch's error line, whatever NCCL warned.
    pub fn reported(&self) -> Option<&str> {
        self.test.as_deref().or(self.torch.as_deref())
    }
}

/// nccl-tests' failure line of any version, from where it starts.
fn test_failure(line: &str) -> Option<&str> {
    for key in [
        "Test NCCL failure ",
        "Test CUDA failure ",
        "Test timeout ",
        "Test failure ",
    ] {
        if let Some(at) = line.find(key) {
            return Some(&line[at..]);
        }
    }
    if let Some(rest) = line.strip_prefix("# error: ").filter(|r| !r.trim().is_empty()) {
        return Some(rest.trim());
    }
    // Before 2.0: `NCCL failure common.cu:123 'unhandled system error'`.
    for key in ["NCCL failure ", "Cuda failure "] {
        if let Some(rest) = line.strip_prefix(key) {
            if rest.contains(".cu:") {
                return Some(line);
            }
        }
    }
    None
}

/// `line`, cut to [`MAX_CAUSE_CHARS`].
fn bounded(line: &str) -> String {
    match line.char_indices().nth(MAX_CAUSE_CHARS) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_string(),
    }
}

/// The line of a failed run's output that says why it failed (see
/// [`CauseFinder::cause`] for the order); `None` when the lines say nothing. The text is
/// as the node printed it: pass it through [`crate::term::visible`] before a terminal.
pub fn failure_cause<'a>(lines: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let mut f = CauseFinder::default();
    for l in lines {
        f.push(l);
    }
    f.cause()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(lines: &[&str]) -> Option<String> {
        let mut f = CauseFinder::default();
        for l in lines {
            f.push(l);
        }
        f.error()
    }

    #[test]
    fn benign_warnings_are_not_the_cause() {
        assert_eq!(
            error(&[
                "vm:1:2 [0] NCCL WARN NET/IB : Got async event : GID table change",
                "vm:1:2 [0] NCCL WARN NET/Socket : Connect to 10.0.0.2<43210> failed : Connection refused",
            ])
            .as_deref(),
            Some("NCCL WARN NET/Socket : Connect to 10.0.0.2<43210> failed : Connection refused")
        );
        assert_eq!(
            error(&["vm:1:2 [0] NCCL WARN NCCL_SOCKET_NTHREADS is deprecated"]),
            None
        );
    }

    #[test]
    fn every_nccl_tests_failure_form() {
        for (line, want) in [
            ("node1: Test NCCL failure common.cu:892 'unhandled system error / '", "Test NCCL failure common.cu:892 'unhandled system error / '"),
            ("     1048576        262144     float     sum      -1node1: Test CUDA failure common.cu:514 'out of memory'", "Test CUDA failure common.cu:514 'out of memory'"),
            ("node1: Test timeout (30s) common.cu:404", "Test timeout (30s) common.cu:404"),
            (" .. node1 pid 1234: Test failure common.cu:1102", "Test failure common.cu:1102"),
            ("# error: 4 out of bounds values", "4 out of bounds values"),
            ("NCCL failure common.cu:185 'unhandled cuda error'", "NCCL failure common.cu:185 'unhandled cuda error'"),
        ] {
            assert_eq!(error(&[line]).as_deref(), Some(want), "{line}");
        }
        assert_eq!(error(&["# error: "]), None);
    }

    #[test]
    fn pytorch_errors_with_what_follows() {
        let log = [
            "[rank1]: Traceback (most recent call last):",
            "[rank1]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5",
            "[rank1]: ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. ",
            "[rank1]: Last error:",
            "[rank1]: socketStartConnect: Connect to 10.1.0.3<35555> failed : Software caused connection abort",
        ];
        let e = error(&log).unwrap();
        assert!(e.starts_with("DistBackendError: NCCL error in: "), "{e}");
        assert!(e.contains("; ncclSystemError: System call"), "{e}");
        assert!(e.ends_with("Last error: socketStartConnect: Connect to 10.1.0.3<35555> failed : Software caused connection abort"), "{e}");
        let e = error(&["[rank0]:[E1104 12:00:00.000 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600013 milliseconds before timing out."]).unwrap();
        assert!(
            e.starts_with(
                "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE"
            ),
            "{e}"
        );
    }
}
