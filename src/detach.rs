//! Work started detached on a node: a directory per process group holding the script,
//! its output (`out.log`), its pid (`pid`, the session leader) and, once it has ended,
//! its exit code (`exit_code`). The commands here are POSIX sh, sent through
//! [`crate::exec`]; losing the connection that started the work never stops it, and
//! any later connection can follow, query or stop it from the directory alone.
//!
//! `dir` is relative to the login's home (or absolute).

/// The line a follow prints when the work has ended: `__flightdeck_exit__ CODE` (`?`
/// when the code is unknown).
pub const EXIT_MARKER: &str = "__flightdeck_exit__";

/// The exit code recorded for work that had to be killed (128 + SIGKILL).
pub const KILLED: i32 = 137;

/// The exit code recorded for work stopped before it started (128 + SIGTERM, as if it had
/// started and been stopped).
pub const STOPPED: i32 = 143;

/// The file a detached script's command writes in the work's directory as it starts,
/// from where it runs (inside its container on Container-Optimized OS): see
/// [`reporting_start`].
pub const CMD_STARTED: &str = "cmd_started";

/// The file a script writes first when its command reports its start
/// ([`expect_start_line`]): its wrapper then never records a clean exit without it.
pub const START_EXPECTED: &str = "start_expected";

/// The exit code recorded for work whose script ended with 0 without its command ever
/// having started (as Docker's 125: the container's command did not run).
pub const NEVER_STARTED: i32 = 125;

/// What [`NEVER_STARTED`] means, in the operator's words; the wrapper writes it as the
/// log's last line.
pub const NEVER_STARTED_WORDS: &str = "the command never started: its script ended with 0 without running it (on a container, the entrypoint of the image ran instead of the command)";

/// Shell words that run the words after them as the work's command, reporting its start:
/// `sh -c` writes `dir/cmd_started` and then `exec`s them, where they run (put after
/// `$FD_IN` it runs inside the container). `dir` is a shell word for the work's directory
/// as the script sees it (`"$PWD"`, `"$FD_JOB_DIR"`).
pub fn reporting_start(dir: &str) -> String {
    format!("sh -c ': > \"$0\" && exec \"$@\"' {dir}/{CMD_STARTED}")
}

/// The line a script whose command reports its start ([`reporting_start`]) writes first.
pub fn expect_start_line(dir: &str) -> String {
    format!(": > {dir}/{START_EXPECTED}\n")
}

pub use crate::shellenv::quote;

/// A quoted here-document of `text` (nothing in it is expanded), for after `cat >FILE `:
/// `<<'DELIM'`, the text, then `DELIM` on a line of its own, where DELIM (`__FD_{tag}__`,
/// numbered if need be) is a line the text does not have, so no line of it ends the
/// document early.
pub fn heredoc(tag: &str, text: &str) -> String {
    let mut delim = format!("__FD_{tag}__");
    let mut n = 0;
    while text.lines().any(|l| l == delim) {
        n += 1;
        delim = format!("__FD_{tag}_{n}__");
    }
    let mut s = format!("<<'{delim}'\n{text}");
    if !text.is_empty() && !text.ends_with('\n') {
        s.push('\n');
    }
    s.push_str(&delim);
    s.push('\n');
    s
}

/// `dir` as a shell word: relative paths are under `$HOME`.
pub fn dir_word(dir: &str) -> String {
    if dir.starts_with('/') {
        quote(dir)
    } else {
        format!("\"$HOME\"/{}", quote(dir))
    }
}

/// A command for a node and the bytes it reads on stdin ([`crate::exec::run_each_with_input`]).
pub type WithInput = (String, Vec<u8>);

/// The command that writes `bytes` (its stdin) to `path` (relative to `dir`, or absolute)
/// on a node: to a temporary file moved into place at the end only when every byte
/// arrived, so a reader never sees half a file and an upload cut short (flightdeck
/// killed, the connection dropped) leaves the node's earlier copy as it was and no
/// part file behind. `mode` is octal (e.g. 0o644).
///
/// The part file is made by `mktemp` in the target's directory (`.fdpart.XXXXXX`: a new
/// file of a name nobody could guess, `O_EXCL`, mode 0600, the login's own), so in a
/// shared directory such as /tmp another user can neither plant a link or a file where
/// the bytes go nor read them on their way.
pub fn upload_command(dir: &str, path: &str, bytes: &[u8], mode: u32) -> WithInput {
    let d = dir_word(dir);
    let target = if path.starts_with('/') {
        quote(path)
    } else {
        format!("{d}/{}", quote(path))
    };
    let len = bytes.len();
    let shown = path.replace(['\'', '"', '\\', '$', '`', '\n'], "_");
    let command = format!(
        "set -e; umask 077\nmkdir -p {d} \"$(dirname {target})\"\nFD_PART=\n\
         trap '[ -z \"$FD_PART\" ] || rm -f \"$FD_PART\"' EXIT\n\
         trap '[ -z \"$FD_PART\" ] || rm -f \"$FD_PART\"; exit 129' HUP INT TERM PIPE\n\
         FD_PART=$(mktemp \"$(dirname {target})/.fdpart.XXXXXX\")\n\
         cat > \"$FD_PART\"\n\
         n=$(wc -c < \"$FD_PART\")\n\
         if [ \"$n\" -ne {len} ]; then echo \"upload of {shown} cut short: $n of {len} bytes; the earlier copy is kept\" >&2; exit 1; fi\n\
         chmod {mode:o} \"$FD_PART\"; mv -f \"$FD_PART\" {target}\n"
    );
    (command, bytes.to_vec())
}

/// The command that starts `script` detached in `dir` (created if needed; refused if
/// it already holds a started run) and prints `started PID`. The node's clock times of
/// the start and the end go to `started_at` and `ended_at` (unix seconds), so a run's
/// duration is the node's, whenever flightdeck looks. The script runs under bash
/// (the profiles it may source are bash; [`crate::shellenv`]). The script travels on stdin,
/// so it never shows in the node's process list, and is written with mode 0700; new
/// files are private (umask 077): a job's environment may hold tokens.
pub fn launch_command(dir: &str, script: &str) -> WithInput {
    let d = dir_word(dir);
    // The outer shell outlives a stop (TERM to the session) to record the exit code; a
    // trap (not an ignore) so the work itself still gets the default action. It writes
    // its pid once the trap is set and it leads its session: from then on a stop reaches
    // the whole group.
    let command = format!(
        "set -e; umask 077; mkdir -p {d}; cd {d}\n\
         if [ -e pid ] || [ -e run.sh ]; then echo \"flightdeck: $PWD already holds a run\" >&2; exit 1; fi\n\
         if [ -e stop ]; then echo \"flightdeck: stopped before it started\" >&2; exit 1; fi\n\
         mkdir claim 2>/dev/null || {{ echo \"flightdeck: stopped before it started\" >&2; exit 1; }}\n\
         cat > run.sh\n\
         chmod 700 run.sh\n\
         setsid sh -c 'trap true TERM INT HUP; echo $$ > pid.tmp; mv pid.tmp pid; date +%s > started_at; if command -v bash >/dev/null 2>&1; then bash ./run.sh; else echo \"flightdeck: bash not found on this node (flightdeck runs its node scripts under bash)\"; (exit 127); fi > out.log 2>&1; c=$?; if [ $c = 0 ] && [ -e {START_EXPECTED} ] && [ ! -e {CMD_STARTED} ]; then echo \"flightdeck: {NEVER_STARTED_WORDS}\" >> out.log; c={NEVER_STARTED}; fi; date +%s > ended_at; echo $c > exit_code.tmp; mv exit_code.tmp exit_code' < /dev/null > /dev/null 2>&1 &\n\
         i=0; while [ ! -f pid ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done\n\
         echo \"started $(cat pid)\"\n"
    );
    (command, script.as_bytes().to_vec())
}

/// The command that prints the output from line `from` (1 = the start), follows it
/// until the work ends, then prints the [`EXIT_MARKER`] line. Re-attaching later is the
/// same command with the count of lines already seen plus one.
pub fn follow_command(dir: &str, from: usize) -> String {
    let d = dir_word(dir);
    let from = from.max(1);
    format!(
        "cd {d} 2>/dev/null || {{ echo \"{EXIT_MARKER} ?\"; exit 1; }}\n\
         touch out.log\n\
         if [ -f exit_code ]; then tail -n +{from} out.log; else tail -n +{from} -F --pid=\"$(cat pid)\" out.log 2>/dev/null; fi\n\
         i=0; while [ ! -f exit_code ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done\n\
         echo \"{EXIT_MARKER} $(cat exit_code 2>/dev/null || echo ?) $(cat started_at 2>/dev/null || echo -) $(cat ended_at 2>/dev/null || date -r exit_code +%s 2>/dev/null || echo -)\"\n"
    )
}

/// The command that prints the last `lines` lines of the output (all with `None`).
pub fn tail_command(dir: &str, lines: Option<usize>) -> String {
    let d = dir_word(dir);
    match lines {
        Some(n) => format!("cd {d} && tail -n {n} out.log"),
        None => format!("cd {d} && cat out.log"),
    }
}

/// The line of work that ended: `exited CODE STARTED ENDED`, the times the node's (unix
/// seconds, `-` when unknown: stopped before it started, or started by an older
/// flightdeck; the end is then when the exit code was written).
const EXITED: &str = "echo \"exited $(cat exit_code) $(cat started_at 2>/dev/null || echo -) $(cat ended_at 2>/dev/null || date -r exit_code +%s 2>/dev/null || echo -)\"";

/// What [`status_command`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Running {
        pid: u32,
    },
    Exited {
        code: i32,
        /// When it started and ended, by the node's clock (unix seconds), where known.
        started: Option<u64>,
        ended: Option<u64>,
    },
    /// The directory is there without a pid yet, and something in it changed within
    /// [`STARTING_MAX_MIN`] minutes: the work is being uploaded or launched.
    Starting,
    /// The directory is there but its process is gone without an exit code (the node
    /// rebooted, or the leader was killed), or it has had no pid for longer than
    /// [`STARTING_MAX_MIN`] minutes (its launch never finished).
    Vanished,
    /// No such directory on the node.
    Missing,
}

/// How long a directory without a pid counts as [`Status::Starting`] after its last
/// change (an uploaded file, the script, the pid file), in minutes.
pub const STARTING_MAX_MIN: u32 = 10;

/// The command that reports the work's [`Status`] as one line.
pub fn status_command(dir: &str) -> String {
    let d = dir_word(dir);
    format!(
        "cd {d} 2>/dev/null || {{ echo missing; exit 0; }}\n\
         if [ -f exit_code ]; then {EXITED}; \
         elif [ -f pid ] && kill -0 \"$(cat pid)\" 2>/dev/null; then echo \"running $(cat pid)\"; \
         elif [ ! -f pid ] && [ -n \"$(find . -mmin -{STARTING_MAX_MIN} 2>/dev/null | head -n 1)\" ]; then echo starting; \
         else echo vanished; fi\n"
    )
}

/// Read the line [`status_command`] printed.
pub fn parse_status(line: &str) -> Option<Status> {
    let mut w = line.split_whitespace();
    match (w.next()?, w.next()) {
        ("running", Some(p)) => p.parse().ok().map(|pid| Status::Running { pid }),
        ("exited", Some(c)) => {
            let mut time = || w.next().and_then(|t| t.parse::<u64>().ok());
            let (started, ended) = (time(), time());
            c.parse().ok().map(|code| Status::Exited { code, started, ended })
        }
        ("starting", None) => Some(Status::Starting),
        ("vanished", None) => Some(Status::Vanished),
        ("missing", None) => Some(Status::Missing),
        _ => None,
    }
}

/// The command that stops the work: TERM to its process group and to every descendant
/// (launchers such as torchrun start workers in sessions of their own), KILL to all of
/// them after `grace_s` seconds, and an exit code of [`KILLED`] recorded if the group
/// had to be killed before it could record one. Work still starting (files uploaded, no
/// pid yet) is marked so that its launch refuses to start it; when no pid appears within
/// 3 s (a launch past that check writes one at once), [`STOPPED`] is recorded. Prints
/// the status afterwards.
pub fn stop_command(dir: &str, grace_s: u32) -> String {
    let d = dir_word(dir);
    format!(
        "cd {d} 2>/dev/null || {{ echo missing; exit 0; }}\n\
         if [ ! -f pid ] && [ ! -f exit_code ]; then\n\
           [ -n \"$(find . -mmin -{STARTING_MAX_MIN} 2>/dev/null | head -n 1)\" ] || {{ echo vanished; exit 0; }}\n\
         {claim}\
         fi\n\
         {rest}",
        claim = claim_or_wait(),
        rest = stop_started(grace_s)
    )
}

/// What ends a launch cut off by the death of its launcher, on a node: like
/// [`stop_command`], and where the work's directory is not there yet (a start may still be
/// on its way to the node) it is made and fenced, so that the start refuses.
pub fn fence_command(dir: &str, grace_s: u32) -> String {
    let d = dir_word(dir);
    format!(
        "umask 077; mkdir -p {d} && cd {d} || {{ echo missing; exit 0; }}\n\
         if [ ! -f pid ] && [ ! -f exit_code ]; then\n\
         {claim}\
         fi\n\
         {rest}",
        claim = claim_or_wait(),
        rest = stop_started(grace_s)
    )
}

/// A start not begun: `stop` for a start that has not checked yet, then the `claim` a
/// start makes just before it begins (mkdir, atomic): taken here, the start never
/// begins (exit code STOPPED); taken by the start, its pid is moments away.
fn claim_or_wait() -> String {
    format!(
        "  touch stop\n\
           if mkdir claim 2>/dev/null; then echo {STOPPED} > exit_code; echo \"exited {STOPPED}\"; exit 0; fi\n\
           i=0; while [ ! -f pid ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done\n\
           [ -f pid ] || {{ echo {STOPPED} > exit_code; echo \"exited {STOPPED}\"; exit 0; }}\n"
    )
}

/// TERM to a started work's group and descendants, KILL after `grace_s`.
fn stop_started(grace_s: u32) -> String {
    format!(
        "[ -f pid ] || {{ {EXITED}; exit 0; }}\n\
         P=$(cat pid)\n\
         desc() {{ for c in $(pgrep -P \"$1\" 2>/dev/null); do echo \"$c\"; desc \"$c\"; done; }}\n\
         if [ ! -f exit_code ]; then\n\
           D=$(desc \"$P\")\n\
           kill -TERM -\"$P\" $D 2>/dev/null\n\
           i=0; while [ ! -f exit_code ] && kill -0 \"$P\" 2>/dev/null && [ $i -lt {n} ]; do sleep 0.1; i=$((i+1)); done\n\
           D=\"$D $(desc \"$P\")\"\n\
           if [ ! -f exit_code ]; then kill -KILL -\"$P\" $D 2>/dev/null; sleep 0.2; [ -f exit_code ] || echo {KILLED} > exit_code; \
           else kill -KILL $D 2>/dev/null; fi\n\
         fi\n\
         {EXITED}\n",
        n = grace_s.max(1) * 10
    )
}

/// How a followed work ended, from the [`EXIT_MARKER`] line: its code (`None` when it
/// could not be read) and when it started and ended by the node's clock, where known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit {
    pub code: Option<i32>,
    pub started: Option<u64>,
    pub ended: Option<u64>,
}

/// Parse the [`EXIT_MARKER`] line of a follow (`None` for any other line).
pub fn exit_marker(line: &str) -> Option<Exit> {
    let mut w = line.strip_prefix(EXIT_MARKER)?.split_whitespace();
    let code = w.next().and_then(|c| c.parse().ok());
    let mut time = || w.next().and_then(|t| t.parse::<u64>().ok());
    let (started, ended) = (time(), time());
    Some(Exit { code, started, ended })
}

/// What one of flightdeck's own exit codes means ([`NEVER_STARTED`]); `None` for any
/// other code, which is the command's own.
pub fn code_cause(code: i32) -> Option<&'static str> {
    (code == NEVER_STARTED).then_some(NEVER_STARTED_WORDS)
}

/// An exit code in the operator's words: `exited CODE`, with what flightdeck's own codes
/// mean ([`NEVER_STARTED`]).
pub fn exit_words(code: i32) -> String {
    match code_cause(code) {
        Some(why) => format!("exited {code}: {why}"),
        None => format!("exited {code}"),
    }
}

impl Status {
    /// Ended with `code`, its times unknown.
    pub fn exited(code: i32) -> Status {
        Status::Exited {
            code,
            started: None,
            ended: None,
        }
    }

    /// What a node's answer to a stop or status means, in the operator's words (the CLI
    /// and the cockpit say the same).
    pub fn words(&self) -> String {
        match self {
            Status::Exited { code, .. } => exit_words(*code),
            Status::Missing => "no such job on the node".into(),
            Status::Vanished => "gone without an exit code".into(),
            Status::Starting => "still starting (no pid yet)".into(),
            Status::Running { pid } => format!("still running (pid {pid})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn sh(cmd: &str, home: &std::path::Path) -> String {
        sh_in(&(cmd.to_string(), vec![]), home)
    }

    /// Run a command with its input on stdin, as exec does.
    fn sh_in((cmd, input): &WithInput, home: &std::path::Path) -> String {
        use std::io::Write;
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .env("HOME", home)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("sh runs");
        let mut stdin = child.stdin.take().unwrap();
        // A launch that refuses (a reused directory, a stop) exits before it reads its
        // input: the pipe may be closed by then.
        let _ = stdin.write_all(input);
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    #[test]
    fn statuses_parse() {
        assert_eq!(parse_status("running 42"), Some(Status::Running { pid: 42 }));
        assert_eq!(parse_status("exited 0"), Some(Status::exited(0)));
        assert_eq!(parse_status("exited 143\n"), Some(Status::exited(143)));
        assert_eq!(
            parse_status("exited 3 1795620600 1795620601"),
            Some(Status::Exited {
                code: 3,
                started: Some(1795620600),
                ended: Some(1795620601)
            })
        );
        assert_eq!(
            parse_status("exited 137 - 1795620601").map(|s| s == Status::exited(137)),
            Some(false)
        );
        assert_eq!(parse_status("vanished"), Some(Status::Vanished));
        assert_eq!(parse_status("starting"), Some(Status::Starting));
        assert_eq!(parse_status("starting 12"), None);
        assert_eq!(parse_status("missing"), Some(Status::Missing));
        // Said in words, never as the variant's name (the cockpit once showed `Missing`).
        assert_eq!(Status::Missing.words(), "no such job on the node");
        assert_eq!(Status::exited(143).words(), "exited 143");
        assert_eq!(parse_status("exited ?"), None);
        assert_eq!(parse_status(""), None);
        let exit = |code, started, ended| Some(Exit { code, started, ended });
        assert_eq!(exit_marker("__flightdeck_exit__ 3"), exit(Some(3), None, None));
        assert_eq!(exit_marker("__flightdeck_exit__ ?"), exit(None, None, None));
        assert_eq!(
            exit_marker("__flightdeck_exit__ 3 1795620600 1795620601"),
            exit(Some(3), Some(1795620600), Some(1795620601))
        );
        assert_eq!(
            exit_marker("__flightdeck_exit__ 143 - 1795620601"),
            exit(Some(143), None, Some(1795620601))
        );
        assert_eq!(exit_marker("Step: 1"), None);
    }

    #[test]
    fn quoting_survives_quotes() {
        let home = tempfile::tempdir().unwrap();
        let out = sh(
            &format!("printf '%s' {}", quote("it's a \"test\" $HOME")),
            home.path(),
        );
        assert_eq!(out, "it's a \"test\" $HOME");
    }

    #[test]
    fn upload_is_byte_exact_and_out_of_the_command_line() {
        let home = tempfile::tempdir().unwrap();
        // A megabyte of every byte value, and a quote in the name.
        let bytes: Vec<u8> = (0..(1 << 20) + 17).map(|i| (i * 7 % 256) as u8).collect();
        let up = upload_command("jobs/x/0", "sub/it's.bin", &bytes, 0o640);
        assert!(up.0.len() < 600, "the bytes are not in the command");
        sh_in(&up, home.path());
        let path = home.path().join("jobs/x/0/sub/it's.bin");
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o640
        );
        assert!(parts(&home.path().join("jobs/x/0/sub")).is_empty());
        // An empty file still lands.
        sh_in(&upload_command("jobs/x/0", "empty", b"", 0o644), home.path());
        assert_eq!(std::fs::read(home.path().join("jobs/x/0/empty")).unwrap(), b"");
    }

    #[test]
    fn an_upload_cut_short_keeps_the_earlier_copy_and_leaves_no_part() {
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join("jobs/x/0/data.bin");
        sh_in(
            &upload_command("jobs/x/0", "data.bin", b"the earlier copy", 0o644),
            home.path(),
        );
        // flightdeck killed mid-upload: the node's shell gets only the first bytes, then
        // end of input (the channel closed).
        let full = vec![b'x'; 100_000];
        let (command, _) = upload_command("jobs/x/0", "data.bin", &full, 0o644);
        let out = Command::new("sh")
            .arg("-c")
            .arg(&command)
            .env("HOME", home.path())
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                c.stdin.take().unwrap().write_all(&full[..4096])?;
                c.wait_with_output()
            })
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        assert!(
            String::from_utf8_lossy(&out.stderr)
                .contains("upload of data.bin cut short: 4096 of 100000 bytes"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(std::fs::read(&path).unwrap(), b"the earlier copy");
        assert!(parts(&home.path().join("jobs/x/0")).is_empty());
    }

    /// The part files (`.fdpart.*`) in `dir`.
    fn parts(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(".fdpart."))
            })
            .collect()
    }

    /// Hostile review D12: in a shared directory (sticky and world-writable, as /tmp),
    /// another user plants a link (or a file of their own) at the name an upload used to
    /// write to (`TARGET.fdpart`). The upload neither follows nor writes it, and its own
    /// part file, while the bytes arrive, is the login's alone (0600, a fresh name).
    #[test]
    fn an_upload_into_a_shared_directory_follows_no_planted_name_and_leaks_nothing() {
        use std::io::Write;
        use std::os::unix::fs::PermissionsExt;
        let home = tempfile::tempdir().unwrap();
        let shared = home.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let victim = home.path().join("victim");
        std::fs::write(&victim, b"the victim's own file").unwrap();
        std::os::unix::fs::symlink(&victim, shared.join("data.txt.fdpart")).unwrap();
        let planted = shared.join("other.txt.fdpart");
        std::fs::write(&planted, b"").unwrap();
        std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o666)).unwrap();
        let target = shared.join("data.txt");
        let secret = b"TOP SECRET DATASET LINE\n";
        let up = upload_command("jobs/x/0", target.to_str().unwrap(), secret, 0o600);
        sh_in(&up, home.path());
        assert_eq!(std::fs::read(&target).unwrap(), secret);
        assert_eq!(std::fs::read(&victim).unwrap(), b"the victim's own file");
        assert!(std::fs::symlink_metadata(shared.join("data.txt.fdpart"))
            .unwrap()
            .file_type()
            .is_symlink());
        let other = shared.join("other.txt");
        sh_in(
            &upload_command("jobs/x/0", other.to_str().unwrap(), secret, 0o600),
            home.path(),
        );
        assert_eq!(std::fs::read(&other).unwrap(), secret);
        assert_eq!(
            std::fs::read(&planted).unwrap(),
            b"",
            "the planted file got nothing"
        );
        assert!(parts(&shared).is_empty());

        // Mid-upload, with a lax umask: the part file is new, in the target's directory,
        // and nobody else's to read; cut short, it goes.
        let slow = shared.join("slow.bin");
        let full = vec![b's'; 100_000];
        let (command, _) = upload_command("jobs/x/0", slow.to_str().unwrap(), &full, 0o644);
        let mut c = Command::new("sh")
            .arg("-c")
            .arg(format!("umask 000; {command}"))
            .env("HOME", home.path())
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = c.stdin.take().unwrap();
        stdin.write_all(&full[..4096]).unwrap();
        stdin.flush().unwrap();
        let t0 = std::time::Instant::now();
        let part = loop {
            let found = parts(&shared);
            if let Some(p) = found
                .iter()
                .find(|p| std::fs::metadata(p).is_ok_and(|m| m.len() == 4096))
            {
                break p.clone();
            }
            assert!(
                t0.elapsed().as_secs() < 10,
                "no part file with the first bytes: {found:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let meta = std::fs::symlink_metadata(&part).unwrap();
        assert!(meta.file_type().is_file());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600, "{part:?}");
        assert_ne!(part, shared.join("slow.bin.fdpart"));
        drop(stdin);
        let out = c.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        assert!(!slow.exists());
        assert!(parts(&shared).is_empty(), "{:?}", parts(&shared));
    }

    #[test]
    fn heredocs_end_only_at_their_own_delimiter() {
        let home = tempfile::tempdir().unwrap();
        let text = "line one\n__FD_X__\necho escaped > \"$HOME/marker\"\n__FD_X_1__\n";
        let out = sh(&format!("cat {}", heredoc("X", text)), home.path());
        assert_eq!(out, text);
        assert!(!home.path().join("marker").exists());
        assert_eq!(sh(&format!("cat {}", heredoc("X", "")), home.path()), "");
        assert_eq!(
            sh(&format!("cat {}", heredoc("X", "no newline")), home.path()),
            "no newline\n"
        );
    }

    /// A script whose command reports its start: a clean exit without the report is
    /// [`NEVER_STARTED`] with the cause as the log's last line; with it, the command's own
    /// code (0 or 3) stands.
    #[test]
    fn a_clean_exit_without_the_commands_start_is_never_started() {
        let home = tempfile::tempdir().unwrap();
        let run = |dir: &str, command: &str| {
            let script = format!("{}{command}\n", expect_start_line("\"$PWD\""));
            assert!(sh_in(&launch_command(dir, &script), home.path()).starts_with("started "));
            let followed = sh(&follow_command(dir, 1), home.path());
            let (log, marker) = followed.rsplit_once(EXIT_MARKER).expect("a marker");
            let exit = exit_marker(&format!("{EXIT_MARKER}{marker}")).unwrap();
            (log.to_string(), exit.code)
        };
        // What an image's entrypoint does with a command it does not know: a usage text, 0.
        let (log, code) = run("r/swallowed", "echo 'Usage:  <subcommand> [options]'; exit 0");
        assert_eq!(code, Some(NEVER_STARTED), "{log}");
        assert!(
            log.ends_with(&format!("flightdeck: {NEVER_STARTED_WORDS}\n")),
            "{log}"
        );
        assert!(exit_words(NEVER_STARTED).contains("never started"));
        let started = format!("exec {} echo ran", reporting_start("\"$PWD\""));
        assert_eq!(run("r/ran", &started), ("ran\n".to_string(), Some(0)));
        let failed = format!("exec {} sh -c 'exit 3'", reporting_start("\"$PWD\""));
        assert_eq!(run("r/three", &failed).1, Some(3));
        // A script that does not ask for the report keeps its 0.
        let home2 = tempfile::tempdir().unwrap();
        assert!(sh_in(&launch_command("r/plain", "true\n"), home2.path()).starts_with("started "));
        let followed = sh(&follow_command("r/plain", 1), home2.path());
        assert!(followed.starts_with(&format!("{EXIT_MARKER} 0 ")), "{followed}");
    }

    #[test]
    fn launch_follow_status_stop_on_this_machine() {
        let home = tempfile::tempdir().unwrap();
        let dir = "jobs/t/0";
        let launch = launch_command(dir, "echo one\necho two\nexit 3\n");
        assert!(
            !launch.0.contains("echo two"),
            "the script is not in the command line"
        );
        let out = sh_in(&launch, home.path());
        assert!(out.starts_with("started "), "{out}");
        let followed = sh(&follow_command(dir, 1), home.path());
        let (lines, marker) = followed.rsplit_once(EXIT_MARKER).expect("a marker");
        assert_eq!(lines, "one\ntwo\n");
        // The node's times of the start and the end come with the code: it ran at once.
        let now = crate::store::now_unix();
        let exit = exit_marker(&format!("{EXIT_MARKER}{marker}")).expect("the marker parses");
        assert_eq!(exit.code, Some(3), "{followed}");
        let (started, ended) = (exit.started.expect("a start"), exit.ended.expect("an end"));
        assert!(
            started <= ended && ended - started <= 1 && now.abs_diff(ended) < 30,
            "{followed}"
        );
        // From line 2: only what was not seen yet.
        let followed = sh(&follow_command(dir, 2), home.path());
        assert!(
            followed.starts_with(&format!("two\n{EXIT_MARKER} 3 ")),
            "{followed}"
        );
        assert_eq!(
            parse_status(&sh(&status_command(dir), home.path())),
            Some(Status::Exited {
                code: 3,
                started: Some(started),
                ended: Some(ended)
            })
        );
        // A directory holding a run is never reused.
        let again = sh_in(&launch_command(dir, "true\n"), home.path());
        assert!(!again.starts_with("started"), "{again}");
        assert_eq!(
            parse_status(&sh(&status_command("jobs/none"), home.path())),
            Some(Status::Missing)
        );

        // A directory being uploaded (no pid yet) is starting, not ended; one left
        // without a pid for longer than STARTING_MAX_MIN minutes has vanished.
        let dir = "jobs/t/up";
        sh_in(&upload_command(dir, "payload.bin", b"half", 0o600), home.path());
        assert_eq!(
            parse_status(&sh(&status_command(dir), home.path())),
            Some(Status::Starting)
        );
        let old = format!("{} minutes ago", STARTING_MAX_MIN + 5);
        let full = home.path().join(dir);
        for p in [full.join("payload.bin"), full.clone()] {
            let ok = std::process::Command::new("touch")
                .arg("-d")
                .arg(&old)
                .arg(&p)
                .status()
                .expect("touch runs");
            assert!(ok.success());
        }
        assert_eq!(
            parse_status(&sh(&status_command(dir), home.path())),
            Some(Status::Vanished)
        );

        // Stopped while still starting (uploaded, no pid yet): 143 is recorded and the
        // launch that comes after refuses to start it.
        let dir = "jobs/t/early";
        sh_in(&upload_command(dir, "f", b"x", 0o600), home.path());
        assert_eq!(
            sh(&stop_command(dir, 1), home.path()).trim(),
            format!("exited {STOPPED}")
        );
        let never = parse_status(&sh(&status_command(dir), home.path()));
        assert!(
            matches!(
                never,
                Some(Status::Exited {
                    code: STOPPED,
                    started: None,
                    ended: Some(_)
                })
            ),
            "never started, ended when the stop wrote its code: {never:?}"
        );
        let late = sh_in(&launch_command(dir, "echo ran > ran\n"), home.path());
        assert!(!late.starts_with("started"), "{late}");
        assert!(!home.path().join(dir).join("ran").exists());
        assert!(matches!(
            parse_status(&sh(&status_command(dir), home.path())),
            Some(Status::Exited { code: STOPPED, .. })
        ));

        // A long run, stopped: TERM reaches it, the code is 143.
        let dir = "jobs/t/1";
        sh_in(&launch_command(dir, "echo up\nsleep 30\n"), home.path());
        let st = parse_status(&sh(&status_command(dir), home.path()));
        assert!(matches!(st, Some(Status::Running { .. })), "{st:?}");
        let stopped = sh(&stop_command(dir, 5), home.path());
        assert!(
            matches!(
                parse_status(stopped.trim()),
                Some(Status::Exited {
                    code: 143,
                    started: Some(_),
                    ended: Some(_)
                })
            ),
            "{stopped}"
        );

        // A run that ignores TERM is killed after the grace period and recorded as 137,
        // its child too.
        let dir = "jobs/t/2";
        sh_in(
            &launch_command(dir, "trap '' TERM\nsleep 31 &\necho $! > child\nwait\n"),
            home.path(),
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
        let child: u32 = std::fs::read_to_string(home.path().join(dir).join("child"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let stopped = sh(&stop_command(dir, 1), home.path());
        assert!(
            matches!(
                parse_status(stopped.trim()),
                Some(Status::Exited {
                    code: KILLED,
                    ended: Some(_),
                    ..
                })
            ),
            "{stopped}"
        );
        // Gone, or a zombie waiting for init to reap it.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
        let state = stat.rsplit(") ").next().and_then(|r| r.chars().next());
        assert!(
            matches!(state, None | Some('Z') | Some('X')),
            "the child {child} outlived the stop: {stat}"
        );
    }
}

#[cfg(test)]
mod fence_tests {
    use super::*;

    fn sh(script: &str, dir: &std::path::Path) -> String {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(script)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// A start still on its way when its launcher died: the fence makes the directory,
    /// claims it, and the start then refuses; a start that claimed first is waited for
    /// and stopped.
    #[test]
    fn a_fenced_directory_refuses_a_late_start_and_a_claimed_one_is_stopped() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("job-a");
        let d = dir.to_str().unwrap();
        assert_eq!(sh(&fence_command(d, 1), t.path()), format!("exited {STOPPED}"));
        let (launch, script) = launch_command(d, "sleep 30\n");
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(&launch)
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                c.stdin.take().unwrap().write_all(&script)?;
                c.wait_with_output()
            })
            .unwrap();
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("stopped before it started"));
        // A start that got its claim first runs, and the fence stops it.
        let dir = t.path().join("job-b");
        let d = dir.to_str().unwrap();
        let (launch, script) = launch_command(d, "sleep 30\n");
        let mut c = std::process::Command::new("sh")
            .arg("-c")
            .arg(&launch)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(&script).unwrap();
        }
        let out = c.wait_with_output().unwrap();
        assert!(String::from_utf8_lossy(&out.stdout).starts_with("started "));
        let end = sh(&fence_command(d, 1), t.path());
        assert!(end.starts_with("exited "), "{end}");
        // It had started (its pid is there) and its session is gone.
        let pid: u32 = std::fs::read_to_string(dir.join("pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                s.rsplit(')')
                    .next()
                    .and_then(|r| r.split_whitespace().next())
                    .map(str::to_string)
            });
        assert!(
            matches!(state.as_deref(), None | Some("Z")),
            "pid {pid} still runs: {state:?}"
        );
    }
}
