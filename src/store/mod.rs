//! The state store: what flightdeck has brought up (fleets, their nodes and addresses,
//! cloud resources) and what it started on them (runs), in `state.json` in the state dir.
//!
//! * Atomic: a write goes to `state.json.tmp`, is synced, and renamed over `state.json`;
//!   the previous good file is kept as `state.json.bak`.
//! * Locked: every read-modify-write holds an exclusive `flock` on `state.lock`, so two
//!   flightdeck processes (the cockpit and a CLI command) never interleave writes; a read
//!   holds a shared one, so reads never wait for each other (500 concurrent `exec`s).
//!   A waiter retries for [`LOCK_WAIT`]; when it gives up, the holders' pids are read
//!   from the kernel's lock table (`/proc/locks`).
//! * Versioned: `schema` is checked; a file from a newer flightdeck is refused untouched.
//! * Recoverable: a truncated or corrupt `state.json` is moved aside to
//!   `state.json.corrupt-<unix time>` (never overwritten) and the `.bak` copy is used,
//!   with a message saying so.

use crate::fleet::NodeTarget;
pub mod watch;

use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub const SCHEMA_VERSION: u32 = 1;

/// How long a reader or writer waits for another flightdeck's lock. Holds are short (a
/// read, or a read-modify-write of one file), so a long wait means a machine so loaded
/// that failing would only make a script retry.
pub const LOCK_WAIT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct State {
    pub schema: u32,
    #[serde(default)]
    pub fleets: Vec<FleetRecord>,
    #[serde(default)]
    pub runs: Vec<RunRecord>,
    #[serde(default)]
    pub jobs: Vec<JobRecord>,
}

/// A fleet name the state does not record, with the did-you-mean hint (` (did you mean
/// `x`?)`, or empty) of the closest recorded name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no fleet `{name}` in the state{hint}")]
pub struct UnknownFleet {
    pub name: String,
    pub hint: String,
}

impl State {
    /// The recorded fleet `name`.
    pub fn fleet(&self, name: &str) -> Result<&FleetRecord, UnknownFleet> {
        self.fleets
            .iter()
            .find(|f| f.name == name)
            .ok_or_else(|| UnknownFleet {
                name: name.to_string(),
                hint: crate::yaml::did_you_mean(name, self.fleets.iter().map(|f| f.name.as_str())),
            })
    }

    /// Local fleets' nodes as this machine: state.json writes a local node in the flat
    /// shape every node has, as `host: localhost` (see [`NodeTarget`]), and only its
    /// fleet tells it from an SSH host of that name ([`crate::fleet::settle_addresses`]).
    fn local_nodes_settled(mut self) -> State {
        for f in &mut self.fleets {
            crate::fleet::settle_addresses(f.backend, &mut f.nodes);
        }
        self
    }
}

/// The state file's name in the state dir.
pub const STATE_FILE: &str = "state.json";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetRecord {
    pub name: String,
    /// The backend family (`local`, `ssh`, `gcp`, `gke` in state.json).
    pub backend: crate::fleet::BackendKind,
    /// The fleet file it was applied from.
    pub file: Option<PathBuf>,
    pub nodes: Vec<NodeTarget>,
    /// Cloud resources created for the fleet (recorded before the create call returns).
    #[serde(default)]
    pub resources: Vec<ResourceRecord>,
    /// Unix seconds.
    pub created_at: u64,
    /// The fleet file as it was applied ([`crate::fleet::applied`]): what commands run
    /// from until the next apply. `None` in records of older versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied: Option<String>,
}

/// A cloud resource of a fleet. Written with state `creating` before its create call is
/// sent, so a crash leaves it known; `created` once the create operation finished, then
/// `deleting` before its delete call. Fields past `state` were added after schema 1 and
/// are optional, so older files still read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceRecord {
    /// instance, placement_policy, network, subnetwork, firewall.
    pub kind: String,
    pub name: String,
    /// Zonal resources (instances).
    pub zone: Option<String>,
    /// creating, created, deleting.
    pub state: String,
    /// Regional resources (subnetworks, placement policies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_type: Option<String>,
    /// STANDARD, SPOT, FLEX_START.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_model: Option<String>,
    /// The node index of an instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_ip: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub internal_ip: Option<String>,
    /// `1+8 GVNIC`: the NIC layout of an instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nics: Option<String>,
    /// Price per hour in micro-USD (an integer keeps the record `Eq`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hourly_micro_usd: Option<u64>,
    /// Set when the instance was found preempted or stopped while the fleet was up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost: Option<String>,
    /// The VMs a compact placement policy was made for (its `vmCount`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_count: Option<usize>,
}

impl ResourceRecord {
    pub fn new(kind: &str, name: &str, state: &str) -> ResourceRecord {
        ResourceRecord {
            kind: kind.into(),
            name: name.into(),
            zone: None,
            state: state.into(),
            region: None,
            machine_type: None,
            provisioning_model: None,
            node: None,
            external_ip: None,
            internal_ip: None,
            nics: None,
            hourly_micro_usd: None,
            lost: None,
            vm_count: None,
        }
    }

    /// The same resource: kind, name and place.
    pub fn same(&self, other: &ResourceRecord) -> bool {
        self.kind == other.kind
            && self.name == other.name
            && self.zone == other.zone
            && self.region == other.region
    }
}

/// Something started on a fleet's nodes (an NCCL run, a job), detached there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRecord {
    pub id: String,
    pub kind: String,
    pub fleet: String,
    pub started_at: u64,
    #[serde(default)]
    pub nodes: Vec<RunNode>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunNode {
    pub node: usize,
    pub pid: Option<u32>,
    pub log: String,
    pub exit_code: Option<i32>,
    /// On a GKE fleet: the pod it runs in (an NCCL test pod), not the node's debug pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// When its run started and ended by the node's clock (unix seconds), as the job's
    /// wrapper on the node wrote them; `None` where unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<u64>,
}

/// A training job started on a fleet's nodes. Its environment is not kept here (it may
/// hold tokens); what is kept is what following and judging it needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    pub id: String,
    pub name: String,
    pub fleet: String,
    /// The job file it was started from.
    pub file: Option<PathBuf>,
    pub started_at: u64,
    /// When every node had an exit code (unix seconds).
    #[serde(default)]
    pub ended_at: Option<u64>,
    /// Stopped: by the operator (`job stop`), or by a failure with `stop_on_failure`
    /// (then `failed_rank` says whose).
    #[serde(default)]
    pub stopped: bool,
    /// The rank whose failure ended the job: under `stop_on_failure` the others were
    /// stopped because of it; a launch that could not start there stopped the rest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_rank: Option<usize>,
    /// In rank order: rank r's directory is `~/.flightdeck/jobs/<id>/<r>`.
    #[serde(default)]
    pub nodes: Vec<RunNode>,
    /// The job's metric patterns and what MFU needs.
    #[serde(default)]
    pub metrics: Vec<String>,
    #[serde(default)]
    pub flops_per_token: Option<f64>,
    #[serde(default)]
    pub peak_tflops: Option<f64>,
    /// The NCCL profile it ran with (`none`, `tcpx`, `tcpxo`, `rdma`).
    #[serde(default)]
    pub profile: String,
    #[serde(default)]
    pub stop_on_failure: bool,
    #[serde(default)]
    pub stop_grace: u32,
    /// The flightdeck process launching it, until every node has started: a launch whose
    /// launcher is gone before a node started never starts there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launcher: Option<Launcher>,
}

/// A process on this machine, told apart from a later one with the same pid by its
/// start time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Launcher {
    pub host: String,
    pub pid: u32,
    /// Clock ticks after boot when it started (`/proc/PID/stat`, field 22).
    pub start_ticks: u64,
}

impl Launcher {
    /// This process.
    pub fn this() -> Launcher {
        let pid = std::process::id();
        Launcher {
            host: this_host(),
            pid,
            start_ticks: start_ticks(pid).unwrap_or(0),
        }
    }

    /// Whether it still runs: `None` when it ran on another machine (cannot tell).
    pub fn alive(&self) -> Option<bool> {
        if self.host != this_host() {
            return None;
        }
        Some(start_ticks(self.pid).is_some_and(|t| t == self.start_ticks))
    }
}

fn this_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count from the
    // last `)`; field 22 is then the 20th word.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

impl JobRecord {
    /// Every node has an exit code.
    pub fn finished(&self) -> bool {
        !self.nodes.is_empty() && self.nodes.iter().all(|n| n.exit_code.is_some())
    }

    /// The rank where the job went wrong: the one recorded as ending it, else the node
    /// that failed first by its own clock, a failure of its own before one that was only
    /// stopped (128 + SIGTERM or SIGKILL). `None` while every ended node succeeded.
    pub fn culprit(&self) -> Option<usize> {
        if self.failed_rank.is_some() {
            return self.failed_rank;
        }
        let killed = |c: i32| c == 143 || c == 137;
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.exit_code.is_some_and(|c| c != 0))
            .min_by_key(|(_, n)| (n.exit_code.is_some_and(killed), n.ended_at.unwrap_or(u64::MAX)))
            .map(|(rank, _)| rank)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("state: {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("state: another flightdeck ({holder}) holds {path}; waited {waited:?}")]
    Locked {
        path: PathBuf,
        holder: String,
        waited: Duration,
    },
    #[error("state: {path} has schema {found}, newer than this flightdeck's {SCHEMA_VERSION}; upgrade flightdeck (the file was left as it is)")]
    TooNew { path: PathBuf, found: u32 },
    #[error("state: {path} is corrupt ({reason}) and there is no backup; it was moved to {aside}")]
    CorruptNoBackup {
        path: PathBuf,
        aside: PathBuf,
        reason: String,
    },
}

/// What loading found, besides the state: a note for the operator when the state was
/// recovered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovery {
    pub message: String,
}

#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// `YYYY-MM-DD HH:MM` (UTC) for unix seconds.
pub fn format_utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}", rem / 3600, rem % 3600 / 60)
}

pub fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// A lock on `state.lock`, released on drop (the file is closed).
struct Lock {
    _file: File,
}

/// A shared lock (reads) or an exclusive one (read-modify-write, recovery).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    Read,
    Write,
}

/// Who holds the lock on the file of inode `ino`, from the kernel's table of locks
/// (`/proc/locks`: `1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234 0 EOF`): `pid 4242`,
/// `pids 1, 2 (reading)`, or `a process this one cannot see` when none is listed (in
/// another pid namespace, or released meanwhile).
fn holders(ino: u64) -> String {
    let table = fs::read_to_string("/proc/locks").unwrap_or_default();
    let mut pids: Vec<(String, bool)> = table
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            // A waiter's line is marked `->` and shifts the fields by one.
            (w.len() >= 6 && w[1] == "FLOCK" && w[5].rsplit(':').next() == Some(&ino.to_string()))
                .then(|| (w[4].to_string(), w[3] == "WRITE"))
        })
        .collect();
    pids.dedup();
    match pids.as_slice() {
        [] => "a process this one cannot see".into(),
        [(p, true)] => format!("pid {p}, writing"),
        [(p, false)] => format!("pid {p}, reading"),
        many => format!(
            "pids {}",
            many.iter()
                .map(|(p, w)| format!("{p} ({})", if *w { "writing" } else { "reading" }))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

impl Store {
    pub fn new(state_dir: &Path) -> Store {
        Store {
            dir: state_dir.to_path_buf(),
        }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.join(STATE_FILE)
    }

    fn backup(&self) -> PathBuf {
        self.dir.join("state.json.bak")
    }

    fn lock(&self, access: Access) -> Result<Lock, StoreError> {
        self.lock_within(access, LOCK_WAIT)
    }

    fn lock_within(&self, access: Access, wait: Duration) -> Result<Lock, StoreError> {
        crate::paths::private_dir(&self.dir).map_err(io(&self.dir))?;
        let path = self.dir.join("state.lock");
        let f = crate::paths::private_file(false).open(&path).map_err(io(&path))?;
        let op = match access {
            Access::Read => libc::LOCK_SH,
            Access::Write => libc::LOCK_EX,
        };
        let start = Instant::now();
        // Retries back off from 2 ms to 50 ms, spread by the pid so that many waiters
        // do not retry in step.
        let mut pause = Duration::from_millis(2 + u64::from(std::process::id() % 5));
        loop {
            // SAFETY: flock on a file descriptor we own; no memory is shared.
            let r = unsafe { libc::flock(f.as_raw_fd(), op | libc::LOCK_NB) };
            if r == 0 {
                return Ok(Lock { _file: f });
            }
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(StoreError::Io { path, source: err });
            }
            if start.elapsed() >= wait {
                use std::os::unix::fs::MetadataExt;
                let holder = f.metadata().map(|m| holders(m.ino())).unwrap_or_default();
                return Err(StoreError::Locked {
                    path,
                    holder,
                    waited: start.elapsed(),
                });
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }

    /// Read the state, under a shared lock: readers do not wait for each other. A state
    /// that needs recovering (moving a corrupt file aside) is read again under the
    /// exclusive lock, so one process recovers it.
    pub fn load(&self) -> Result<(State, Option<Recovery>), StoreError> {
        {
            let _lock = self.lock(Access::Read)?;
            match read_state(&self.path())? {
                Read::Good(s) => return Ok((s, None)),
                // Nothing recorded yet (no backup either): the empty state.
                Read::Missing if matches!(read_state(&self.backup())?, Read::Missing) => {
                    return Ok((
                        State {
                            schema: SCHEMA_VERSION,
                            ..State::default()
                        },
                        None,
                    ))
                }
                _ => {}
            }
        }
        let _lock = self.lock(Access::Write)?;
        self.read_unlocked()
    }

    fn read_unlocked(&self) -> Result<(State, Option<Recovery>), StoreError> {
        let path = self.path();
        match read_state(&path)? {
            Read::Missing => match read_state(&self.backup())? {
                // A crash between writes can leave only the backup.
                Read::Good(s) => Ok((
                    s,
                    Some(Recovery {
                        message: format!(
                            "state: {} was missing; recovered from {}",
                            path.display(),
                            self.backup().display()
                        ),
                    }),
                )),
                _ => Ok((
                    State {
                        schema: SCHEMA_VERSION,
                        ..State::default()
                    },
                    None,
                )),
            },
            Read::Good(s) => Ok((s, None)),
            Read::Bad(reason) => {
                let aside = self.dir.join(format!("state.json.corrupt-{}", now_unix()));
                let aside = unique(aside);
                fs::rename(&path, &aside).map_err(io(&path))?;
                match read_state(&self.backup())? {
                    Read::Good(s) => {
                        let damaged =
                            String::from_utf8_lossy(&fs::read(&aside).unwrap_or_default()).into_owned();
                        let lost = lost_in_backup(&damaged, &s);
                        let what = if lost.is_empty() {
                            "it names no fleet the backup lacks".to_string()
                        } else {
                            format!(
                                "the backup is one write behind and lacks {} the damaged file names ({}): what they made in a cloud is not in the state now; `flightdeck fleet gc` finds it",
                                crate::words::plural(lost.len(), "fleet"),
                                lost.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
                            )
                        };
                        Ok((
                            s,
                            Some(Recovery {
                                message: format!(
                                    "state: {} was corrupt ({reason}); moved it to {} and recovered from {}; {what}",
                                    path.display(),
                                    aside.display(),
                                    self.backup().display()
                                ),
                            }),
                        ))
                    }
                    _ => Err(StoreError::CorruptNoBackup { path, aside, reason }),
                }
            }
        }
    }

    /// Read, change and write the state under one lock. Returns what `f` returned.
    pub fn update<T>(&self, f: impl FnOnce(&mut State) -> T) -> Result<(T, Option<Recovery>), StoreError> {
        let _lock = self.lock(Access::Write)?;
        let (mut state, recovery) = self.read_unlocked()?;
        let out = f(&mut state);
        state.schema = SCHEMA_VERSION;
        self.write_unlocked(&state)?;
        Ok((out, recovery))
    }

    fn write_unlocked(&self, state: &State) -> Result<(), StoreError> {
        let path = self.path();
        let tmp = self.dir.join("state.json.tmp");
        let text = serde_json::to_string_pretty(state).expect("state serializes");
        // A new file of our own (whatever was at the name, a planted link included, is
        // removed, not followed), 0600; a write that fails (a full disk) leaves none.
        let _ = fs::remove_file(&tmp);
        let written = (|| -> std::io::Result<()> {
            use std::os::unix::fs::OpenOptionsExt;
            let mut f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.write_all(b"\n")?;
            f.sync_all()
        })();
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(StoreError::Io { path: tmp, source: e });
        }
        if path.exists() {
            // Keep the last good state: a hard link is atomic and copies nothing.
            let bak_tmp = self.dir.join("state.json.bak.tmp");
            let _ = fs::remove_file(&bak_tmp);
            fs::hard_link(&path, &bak_tmp)
                .or_else(|_| fs::copy(&path, &bak_tmp).map(|_| ()))
                .map_err(io(&path))?;
            fs::rename(&bak_tmp, self.backup()).map_err(io(&bak_tmp))?;
        }
        fs::rename(&tmp, &path).map_err(io(&path))?;
        if let Ok(dir) = File::open(&self.dir) {
            let _ = dir.sync_all();
        }
        Ok(())
    }
}

/// The fleets a damaged state file (`damaged`, cut short or garbled, so not JSON) still
/// names that `backup` lacks: what recovering from the backup loses. A fleet record is
/// written `"name": "N", "backend": …`, as no other record is.
fn lost_in_backup(damaged: &str, backup: &State) -> Vec<String> {
    let re = regex::Regex::new(r#""name":\s*"((?:[^"\\]|\\.)*)",\s*"backend":"#).expect("a valid pattern");
    let mut lost: Vec<String> = re
        .captures_iter(damaged)
        .map(|c| c[1].to_string())
        .filter(|n| !backup.fleets.iter().any(|f| &f.name == n))
        .collect();
    lost.dedup();
    lost
}

fn unique(path: PathBuf) -> PathBuf {
    if !path.exists() {
        return path;
    }
    (1..)
        .map(|i| PathBuf::from(format!("{}.{i}", path.display())))
        .find(|p| !p.exists())
        .expect("a free name")
}

enum Read {
    Missing,
    Good(State),
    Bad(String),
}

fn read_state(path: &Path) -> Result<Read, StoreError> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Read::Missing),
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => return Ok(Read::Bad("not UTF-8".into())),
        Err(source) => {
            return Err(StoreError::Io {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    #[derive(Deserialize)]
    struct Version {
        schema: u32,
    }
    let version: Version = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => return Ok(Read::Bad(format!("{e}"))),
    };
    if version.schema > SCHEMA_VERSION {
        return Err(StoreError::TooNew {
            path: path.to_path_buf(),
            found: version.schema,
        });
    }
    match serde_json::from_str::<State>(&text) {
        Ok(s) => Ok(Read::Good(s.local_nodes_settled())),
        Err(e) => Ok(Read::Bad(format!("{e}"))),
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_launcher_is_alive_until_it_ends_and_a_reused_pid_is_not_it() {
        let me = Launcher::this();
        assert!(me.start_ticks > 0);
        assert_eq!(me.alive(), Some(true));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let them = Launcher {
            start_ticks: start_ticks(pid).unwrap_or(1),
            ..Launcher::this()
        };
        let them = Launcher { pid, ..them };
        child.wait().unwrap();
        assert_eq!(them.alive(), Some(false), "ended");
        let reused = Launcher {
            start_ticks: me.start_ticks + 1,
            ..me.clone()
        };
        assert_eq!(reused.alive(), Some(false), "same pid, another start");
        let elsewhere = Launcher {
            host: "another-host".into(),
            ..me
        };
        assert_eq!(elsewhere.alive(), None, "cannot tell");
    }
    use super::*;

    fn fleet(name: &str) -> FleetRecord {
        FleetRecord {
            name: name.into(),
            backend: crate::fleet::BackendKind::Local,
            file: None,
            nodes: vec![],
            resources: vec![],
            created_at: 1,
            applied: None,
        }
    }

    #[test]
    fn utc_dates() {
        assert_eq!(format_utc(0), "1970-01-01 00:00");
        assert_eq!(format_utc(951_782_400), "2000-02-29 00:00");
        assert_eq!(format_utc(1_795_305_600 + 3_660), "2026-11-22 01:01");
    }

    /// state.json's nodes keep their flat shape: a local fleet's node is written as
    /// before and read back as this machine, while an SSH host named localhost stays
    /// an SSH host.
    #[test]
    fn local_nodes_read_back_from_the_flat_shape() {
        use crate::fleet::{Address, NodeTarget, SshAddress};
        let old = r#"{"schema":1,"fleets":[
            {"name":"l","backend":"local","file":null,"created_at":1,"nodes":[{"index":0,"name":"l-0","host":"localhost","port":null,"user":null,"identity_file":null,"proxy_jump":null,"internal_ip":null}]},
            {"name":"s","backend":"ssh","file":null,"created_at":1,"nodes":[{"index":0,"name":"s-0","host":"localhost","port":2222,"user":"root","identity_file":null,"proxy_jump":null,"internal_ip":null}]}]}"#;
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        fs::write(store.path(), old).unwrap();
        let (s, _) = store.load().unwrap();
        assert_eq!(s.fleets[0].nodes, vec![NodeTarget::local(0, "l-0")]);
        let ssh = SshAddress {
            port: Some(2222),
            user: Some("root".into()),
            ..SshAddress::new("localhost")
        };
        assert_eq!(s.fleets[1].nodes[0].address, Address::Ssh(ssh));
        let written: serde_json::Value = serde_json::to_value(&s).unwrap();
        let read: serde_json::Value = serde_json::from_str(old).unwrap();
        assert_eq!(written["fleets"][0]["nodes"], read["fleets"][0]["nodes"]);
        assert_eq!(written["fleets"][1]["nodes"], read["fleets"][1]["nodes"]);
    }

    #[test]
    fn round_trip_and_backup() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let (s, rec) = store.load().unwrap();
        assert!(s.fleets.is_empty() && rec.is_none());
        store.update(|s| s.fleets.push(fleet("a"))).unwrap();
        store.update(|s| s.fleets.push(fleet("b"))).unwrap();
        let (s, _) = store.load().unwrap();
        assert_eq!(
            s.fleets.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(),
            vec!["a", "b"]
        );
        assert_eq!(s.schema, SCHEMA_VERSION);
        let bak: State =
            serde_json::from_str(&fs::read_to_string(dir.path().join("state.json.bak")).unwrap()).unwrap();
        assert_eq!(bak.fleets.len(), 1, "the backup is the previous state");
        assert!(!dir.path().join("state.json.tmp").exists());
    }

    #[test]
    fn truncated_file_is_moved_aside_and_backup_used() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        store.update(|s| s.fleets.push(fleet("a"))).unwrap();
        store.update(|s| s.fleets.push(fleet("b"))).unwrap();
        let good = fs::read_to_string(store.path()).unwrap();
        fs::write(store.path(), &good[..good.len() / 2]).unwrap();
        let (s, rec) = store.load().unwrap();
        assert_eq!(s.fleets.len(), 1, "recovered from the backup");
        let msg = rec.unwrap().message;
        assert!(
            msg.contains("was corrupt") && msg.contains("state.json.corrupt-"),
            "{msg}"
        );
        let aside: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("state.json.corrupt-"))
            .collect();
        assert_eq!(aside.len(), 1);
        assert!(
            msg.contains("recovered from") && msg.ends_with("it names no fleet the backup lacks")
                || msg.contains("lacks 1 fleet"),
            "{msg}"
        );
        assert_eq!(
            fs::read_to_string(aside[0].path()).unwrap(),
            &good[..good.len() / 2],
            "kept byte for byte"
        );
    }

    /// Hostile review 3, L3: the backup is one write behind; recovering from it says
    /// which fleets the damaged file names that it lacks, and where their cloud
    /// resources are found.
    #[test]
    fn recovery_names_the_fleets_the_backup_lacks() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        store.update(|s| s.fleets.push(fleet("g1"))).unwrap();
        store.update(|s| s.fleets.push(fleet("g4"))).unwrap();
        let good = fs::read_to_string(store.path()).unwrap();
        fs::write(store.path(), &good[..good.len() - 8]).unwrap();
        let (s, rec) = store.load().unwrap();
        assert_eq!(
            s.fleets.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(),
            ["g1"]
        );
        let msg = rec.unwrap().message;
        assert!(
            msg.ends_with("the backup is one write behind and lacks 1 fleet the damaged file names (`g4`): what they made in a cloud is not in the state now; `flightdeck fleet gc` finds it"),
            "{msg}"
        );
    }

    #[test]
    fn corrupt_without_backup_is_an_error_and_keeps_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        fs::write(store.path(), "{\"schema\": 1, \"fleets\": [").unwrap();
        let e = store.load().unwrap_err().to_string();
        assert!(
            e.contains("is corrupt") && e.contains("no backup") && e.contains("state.json.corrupt-"),
            "{e}"
        );
        assert!(!store.path().exists());
        // The next write starts afresh without touching the file set aside.
        store.update(|s| s.fleets.push(fleet("new"))).unwrap();
        assert_eq!(store.load().unwrap().0.fleets.len(), 1);
    }

    #[test]
    fn resource_records_of_the_first_shape_still_read() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        fs::write(
            store.path(),
            r#"{"schema": 1, "fleets": [{"name": "g", "backend": "gcp", "file": null, "nodes": [],
               "resources": [{"kind": "instance", "name": "g-0", "zone": "us-east4-b", "state": "created"}],
               "created_at": 5}]}"#,
        )
        .unwrap();
        let (s, _) = store.load().unwrap();
        let r = &s.fleets[0].resources[0];
        assert_eq!((r.name.as_str(), r.region.as_ref(), r.node), ("g-0", None, None));
        store.update(|_| ()).unwrap();
        let text = fs::read_to_string(store.path()).unwrap();
        assert!(!text.contains("machine_type"), "unset fields stay out: {text}");
    }

    #[test]
    fn newer_schema_is_refused_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        fs::write(store.path(), "{\"schema\": 99, \"fleets\": []}").unwrap();
        let e = store.update(|s| s.fleets.clear()).unwrap_err().to_string();
        assert!(e.contains("schema 99"), "{e}");
        assert_eq!(
            fs::read_to_string(store.path()).unwrap(),
            "{\"schema\": 99, \"fleets\": []}"
        );
    }

    #[test]
    fn the_state_is_private_and_planted_links_are_not_followed() {
        use std::os::unix::fs::PermissionsExt;
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("state");
        // An older flightdeck made it 0755.
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let victim = base.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        std::os::unix::fs::symlink(&victim, dir.join("state.json.tmp")).unwrap();
        let store = Store::new(&dir);
        store.update(|s| s.fleets.clear()).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join("state.json")), 0o600);
        assert_eq!(mode(&dir.join("state.lock")), 0o600);
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(!dir.join("state.json.tmp").exists());
        // A link planted at the lock: refused, its target untouched.
        std::fs::remove_file(dir.join("state.lock")).unwrap();
        std::os::unix::fs::symlink(&victim, dir.join("state.lock")).unwrap();
        assert!(store.update(|s| s.fleets.clear()).is_err());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    }

    #[test]
    fn a_second_process_waits_for_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let held = store.lock(Access::Write).unwrap();
        // flock locks belong to the open file description: a second open conflicts
        // as a second process would.
        let other = Store::new(dir.path());
        let t = std::thread::spawn(move || other.update(|s| s.fleets.push(fleet("late"))).map(|_| ()));
        std::thread::sleep(Duration::from_millis(200));
        assert!(!t.is_finished(), "the writer waits while the lock is held");
        drop(held);
        t.join().unwrap().unwrap();
        assert_eq!(store.load().unwrap().0.fleets[0].name, "late");
    }

    /// Hostile review 3, M4: reads share the lock (500 concurrent `exec`s read the state
    /// at once), a writer still excludes them, and a waiter that gives up names the
    /// holder's pid from the kernel's lock table.
    #[test]
    fn readers_share_the_lock_and_a_waiter_names_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        store.update(|s| s.fleets.push(fleet("a"))).unwrap();
        let reading = store.lock(Access::Read).unwrap();
        let other = Store::new(dir.path());
        other.lock_within(Access::Read, Duration::ZERO).unwrap();
        assert_eq!(other.load().unwrap().0.fleets[0].name, "a");
        let e = other
            .lock_within(Access::Write, Duration::ZERO)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains(&format!("(pid {}, reading) holds", std::process::id())),
            "{e}"
        );
        drop(reading);
        let writing = store.lock(Access::Write).unwrap();
        let e = other
            .lock_within(Access::Read, Duration::ZERO)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains(&format!("(pid {}, writing) holds", std::process::id())),
            "{e}"
        );
        drop(writing);
        other.lock_within(Access::Write, Duration::ZERO).unwrap();
    }

    /// Many processes at once, reading and writing: every write lands (none is lost to
    /// an interleaving), every read sees a whole state.
    #[test]
    fn concurrent_readers_and_writers_lose_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let threads: Vec<_> = (0..16)
            .map(|t| {
                let store = Store::new(dir.path());
                std::thread::spawn(move || {
                    for i in 0..10 {
                        store
                            .update(|s| s.fleets.push(fleet(&format!("f{t}-{i}"))))
                            .unwrap();
                        let n = store.load().unwrap().0.fleets.len();
                        assert!(n > i);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(Store::new(dir.path()).load().unwrap().0.fleets.len(), 160);
    }
}
