//! Runs the real flightdeck binary inside tmux on a private socket per test
//! (`tmux -L flightdeck-test-<pid>-<n>`), with a hermetic environment: a fresh HOME and
//! FLIGHTDECK_HOME in a temp dir and nothing inherited but PATH. Waits are on screen
//! conditions with deadlines; on a timeout the whole screen is dumped in the panic.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// How long any one wait may take before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(10);

/// The marker the wrapper shell prints when flightdeck exits.
pub const EXIT_MARKER: &str = "flightdeck-exit:";

pub struct Tmux {
    socket: String,
    pub home: tempfile::TempDir,
}

pub fn tmux_available() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

impl Tmux {
    /// Start `flightdeck ARGS` in a `width` x `height` pane with extra env vars; a
    /// wrapper shell prints [`EXIT_MARKER`] and the exit status when it ends.
    pub fn start(args: &[&str], env: &[(&str, &str)], width: u16, height: u16) -> Tmux {
        let bin = env!("CARGO_BIN_EXE_flightdeck");
        let mut program: Vec<String> = vec![
            "sh".into(),
            "-c".into(),
            format!("\"$0\" \"$@\"; echo {EXIT_MARKER}$?; exec sleep 600"),
            bin.into(),
        ];
        program.extend(args.iter().map(|a| a.to_string()));
        Self::spawn(program, env, width, height)
    }

    /// Start an interactive bash with job control (as an operator's login would have),
    /// for flows such as Ctrl-Z and `fg`. Run flightdeck in it with [`Tmux::run_line`].
    pub fn shell(env: &[(&str, &str)], width: u16, height: u16) -> Tmux {
        let mut env = env.to_vec();
        env.push(("PS1", "$ "));
        let program = vec!["bash".into(), "--norc".into(), "--noprofile".into(), "-i".into()];
        let t = Self::spawn(program, &env, width, height);
        t.wait_text("$");
        t
    }

    /// Type `flightdeck ARGS` into the shell started by [`Tmux::shell`].
    pub fn run_flightdeck_line(&self, args: &str) {
        self.type_text(&format!("{} {args}", env!("CARGO_BIN_EXE_flightdeck")));
        self.keys(&["Enter"]);
    }

    /// In the shell, after flightdeck ended: print its exit status for [`Tmux::wait_exit`].
    /// Typed only once flightdeck has exited: until then its input thread would read the
    /// line (it restores the terminal a moment before the process ends).
    pub fn echo_exit_status(&self) {
        self.wait_for("flightdeck to end", |_| {
            self.pane("#{pane_current_command}") != "flightdeck"
        });
        self.type_text(&format!("echo {EXIT_MARKER}$?"));
        self.keys(&["Enter"]);
    }

    fn spawn(program: Vec<String>, env: &[(&str, &str)], width: u16, height: u16) -> Tmux {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let socket = format!("flightdeck-test-{}-{n}", std::process::id());
        let home = tempfile::tempdir().expect("temp HOME");
        let mut cmd = vec![
            "env".to_string(),
            "-i".into(),
            format!("HOME={}", home.path().display()),
            format!("FLIGHTDECK_HOME={}", home.path().join("fd").display()),
            format!("PATH={}", std::env::var("PATH").unwrap_or_default()),
            "TERM=screen-256color".into(),
            "LANG=C.UTF-8".into(),
        ];
        cmd.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
        cmd.extend(program);
        let t = Tmux { socket, home };
        let (w, h) = (width.to_string(), height.to_string());
        // The program starts in the temp HOME: files it writes stay out of the repository.
        let cwd = t.home.path().display().to_string();
        let mut new = vec![
            "new-session",
            "-d",
            "-s",
            "fd",
            "-x",
            &w,
            "-y",
            &h,
            "-c",
            &cwd,
            "--",
        ];
        new.extend(cmd.iter().map(String::as_str));
        t.tmux(&new);
        t
    }

    /// Run flightdeck beside the cockpit, as a second shell would: the cockpit's HOME
    /// and FLIGHTDECK_HOME (the local fleet keeps its jobs under HOME). It must succeed;
    /// its stdout.
    pub fn flightdeck(&self, args: &[&str]) -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_flightdeck"))
            .args(args)
            .env("HOME", self.home.path())
            .env("FLIGHTDECK_HOME", self.fd_home())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Apply `fleets/local.yaml` (this machine as fleet `local`) beside the cockpit.
    pub fn apply_local_fleet(&self) {
        self.flightdeck(&[
            "fleet",
            "apply",
            concat!(env!("CARGO_MANIFEST_DIR"), "/fleets/local.yaml"),
            "--yes",
        ]);
    }

    /// Apply a local fleet `name` (this machine, one node: the local backend takes no
    /// more) beside the cockpit; returns its file's path.
    pub fn apply_local_named(&self, name: &str) -> String {
        let file = self.home.path().join(format!("{name}.yaml"));
        std::fs::write(
            &file,
            format!("type: fleet\nname: {name}\nbackends: [local]\nnodes: 1\n"),
        )
        .unwrap();
        self.flightdeck(&["fleet", "apply", file.to_str().unwrap(), "--yes"]);
        file.display().to_string()
    }

    /// The FLIGHTDECK_HOME of this test (config and state).
    pub fn fd_home(&self) -> PathBuf {
        self.home.path().join("fd")
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .expect("run tmux");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Send tmux key names (`Escape`, `Tab`, `C-z`, `q`).
    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "fd"];
        args.extend(keys);
        self.tmux(&args);
    }

    /// Type literal text.
    pub fn type_text(&self, text: &str) {
        self.tmux(&["send-keys", "-t", "fd", "-l", text]);
    }

    pub fn screen(&self) -> String {
        // -J joins lines the terminal wrapped, so long messages read whole.
        self.tmux(&["capture-pane", "-p", "-J", "-t", "fd"])
    }

    /// The screen with its colour and attribute escapes (`capture-pane -e`), as tmux
    /// keeps them: what the program sent, not what a terminal made of it.
    pub fn screen_escapes(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-e", "-t", "fd"])
    }

    /// Resize the terminal flightdeck runs in to `width` x `height`.
    pub fn resize(&self, width: u16, height: u16) {
        let (w, h) = (width.to_string(), height.to_string());
        self.tmux(&["resize-window", "-t", "fd", "-x", &w, "-y", &h]);
    }

    /// Set a tmux server option.
    pub fn set_option(&self, name: &str, value: &str) {
        self.tmux(&["set-option", "-s", name, value]);
    }

    /// The newest tmux paste buffer (where OSC 52 clipboard writes land with
    /// `set-clipboard on`); waits for one to exist.
    pub fn buffer(&self) -> String {
        let start = Instant::now();
        loop {
            let out = Command::new("tmux")
                .args(["-L", &self.socket, "show-buffer"])
                .output()
                .expect("run tmux");
            if out.status.success() {
                return String::from_utf8_lossy(&out.stdout).into_owned();
            }
            assert!(
                start.elapsed() < DEADLINE,
                "no tmux buffer appeared; screen:\n{}",
                self.screen()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// A tmux format about the pane, e.g. `#{alternate_on}`.
    pub fn pane(&self, format: &str) -> String {
        self.tmux(&["display-message", "-p", "-t", "fd", format])
            .trim()
            .to_string()
    }

    /// Wait until `cond(screen)` holds; panic with the screen after [`DEADLINE`].
    ///
    /// The screen returned is a whole frame: tmux can be caught while a frame is still
    /// arriving (the top of a dialog drawn, its bottom not yet), so once `cond` holds the
    /// screen is taken again until two captures 30 ms apart agree (a few tries: a screen
    /// with live output never rests) and `cond` still holds on the last.
    pub fn wait_for(&self, what: &str, cond: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let mut screen = self.screen();
            if cond(&screen) {
                for _ in 0..5 {
                    std::thread::sleep(Duration::from_millis(30));
                    let again = self.screen();
                    let rested = again == screen;
                    screen = again;
                    if rested {
                        break;
                    }
                }
                if cond(&screen) {
                    return screen;
                }
            }
            if start.elapsed() > DEADLINE {
                panic!(
                    "timed out after {DEADLINE:?} waiting for {what}; the screen:\n{screen}\n(end of screen)"
                );
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    pub fn wait_text(&self, text: &str) -> String {
        self.wait_for(&format!("{text:?} on screen"), |s| s.contains(text))
    }

    pub fn wait_gone(&self, text: &str) -> String {
        self.wait_for(&format!("{text:?} to leave the screen"), |s| !s.contains(text))
    }

    /// Wait for flightdeck to exit; returns its exit status.
    pub fn wait_exit(&self) -> i32 {
        let status = |screen: &str| {
            screen.match_indices(EXIT_MARKER).find_map(|(i, _)| {
                let digits: String = screen[i + EXIT_MARKER.len()..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                digits.parse::<i32>().ok()
            })
        };
        let screen = self.wait_for("flightdeck to exit", |s| status(s).is_some());
        status(&screen).unwrap()
    }

    /// The pid of flightdeck: the process running our binary under this pane.
    pub fn app_pid(&self) -> u32 {
        let shell: u32 = self.pane("#{pane_pid}").parse().unwrap();
        let bin = std::fs::canonicalize(env!("CARGO_BIN_EXE_flightdeck")).unwrap();
        let start = Instant::now();
        loop {
            let children =
                std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children")).unwrap_or_default();
            let found = children
                .split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok())
                .find(|p| std::fs::read_link(format!("/proc/{p}/exe")).is_ok_and(|e| e == bin));
            if let Some(pid) = found {
                return pid;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "flightdeck never started under pid {shell}"
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

/// The process state letter of `pid` (R, S, T, ...), from /proc/pid/stat.
pub fn proc_state(pid: u32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit_once(") ")
        .and_then(|(_, rest)| rest.chars().next())
        .unwrap_or('?')
}

/// (user+system CPU ticks, bytes written) of `pid`.
pub fn proc_usage(pid: u32) -> (u64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat.rsplit_once(") ").unwrap().1.split_whitespace().collect();
    // Fields after the command: state is index 0, so utime (14th overall) is index 11.
    let ticks = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap();
    let wchar = io
        .lines()
        .find_map(|l| l.strip_prefix("wchar: "))
        .unwrap()
        .parse()
        .unwrap();
    (ticks, wchar)
}

pub fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}
