//! The connection holder: one process (the cockpit while it runs, or a background
//! `flightdeck mux`) keeps one authenticated connection per node and per jump host and
//! serves other flightdeck commands over a unix socket in the state directory, as
//! OpenSSH's ControlMaster does. A command asks the holder to run a command on a route;
//! the holder opens a channel on its connection to that route (connecting, with the
//! host-key check, when it has none or the one it had died) and relays the channel's
//! stdout, stderr and exit status; stdin, its end, signals and close go the other way.
//!
//! The socket is 0600 in a 0700 directory that must be the user's own
//! ([`crate::paths::private_dir`]), and each side asks the kernel who is on the other end
//! (`SO_PEERCRED`): the holder refuses anyone but its own user before a byte is read, and
//! a client sends nothing to a holder of another user (it connects itself instead).
//!
//! Host keys: each request carries the client's known_hosts files, policy and every hop's
//! own settings (in its [`Route`]); the holder checks a new connection, and a connection
//! it already holds, under those, never under its own. It starts no command for a client
//! that has gone (the client gives up after the route's connect budget), so a command
//! reported as failed never runs later unobserved.
//!
//! The wire: frames of a kind byte, a 4-byte big-endian length and the payload. The
//! first frame from the client is a JSON [`Request`]; what follows depends on it.

use super::client::{NoPrompt, SshError, SshOptions};
use super::known_hosts::HostKeyPolicy;
use super::pool::{Pool, Route};
use crate::node::{BoxFuture, Channel, ChannelError, ChannelRead, ChannelWrite, Output, Signal};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{UnixListener, UnixStream};

/// The socket's name in the state directory.
pub const SOCKET: &str = "mux.sock";
/// The protocol's version; a holder of another version is not used (commands connect as
/// if none ran), so an upgraded flightdeck never talks past an old holder.
pub const VERSION: u32 = 2;
/// The largest frame either side accepts.
const MAX_FRAME: usize = 1 << 20;
/// How long a command waits for the holder beyond the route's connect budget
/// ([`Route::connect_budget`]): authentication and the channel's opening.
const ANSWER_MARGIN: Duration = Duration::from_secs(30);
/// The longest path a unix socket may have (`sun_path`, 108 bytes with its NUL).
pub const SUN_PATH_MAX: usize = 107;

pub mod kind {
    pub const REQUEST: u8 = b'q';
    pub const OPENED: u8 = b'o';
    pub const ERROR: u8 = b'!';
    pub const STDOUT: u8 = b'1';
    pub const STDERR: u8 = b'2';
    pub const EXIT: u8 = b'x';
    pub const STATUS: u8 = b's';
    pub const STDIN: u8 = b'i';
    pub const EOF: u8 = b'f';
    pub const SIGNAL: u8 = b'k';
    pub const CLOSE: u8 = b'c';
}

/// The socket of the state directory `state_dir`.
pub fn socket_path(state_dir: &Path) -> PathBuf {
    state_dir.join(SOCKET)
}

/// Why no holder can listen at `path`: a unix socket's path has at most
/// [`SUN_PATH_MAX`] bytes.
pub fn socket_path_problem(path: &Path) -> Option<String> {
    let n = path.as_os_str().len();
    (n > SUN_PATH_MAX).then(|| {
        format!(
            "the connection holder's socket path {} is {n} bytes, and a unix socket's path has at most {SUN_PATH_MAX} (sun_path): set FLIGHTDECK_HOME (or XDG_STATE_HOME) to a shorter directory; commands connect themselves meanwhile",
            path.display()
        )
    })
}

/// Who listens on a connected socket: `Err` with why when it is not this process's user.
fn check_peer(s: &UnixStream, path: &Path) -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    match s.peer_cred().map(|c| c.uid()) {
        Ok(uid) if uid == me => Ok(()),
        Ok(uid) => Err(format!(
            "{} is served by uid {uid}, not by you (uid {me}): another user's holder, not used",
            path.display()
        )),
        Err(e) => Err(format!(
            "{}: who serves it is unknown ({e}): not used",
            path.display()
        )),
    }
}

// One request per connection, read once: its size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Request {
    /// Run `command` on `route`. `policy`: the client's host-key policy (an unknown key
    /// it would ask about is refused, and the client, which may ask its operator,
    /// connects itself); `known_hosts`: the client's user known_hosts files, for hops the
    /// ssh config names none for (each hop of `route` carries its own otherwise, with its
    /// global files and StrictHostKeyChecking). `agent`: the client's ssh-agent socket,
    /// used for a new connection (the holder's own may be stale, as after a new login to
    /// the bastion).
    Exec {
        v: u32,
        route: Route,
        command: String,
        policy: HostKeyPolicy,
        known_hosts: Vec<PathBuf>,
        agent: Option<PathBuf>,
    },
    Status {
        v: u32,
    },
    /// Stop accepting commands and exit once the open channels end (`ssh -O stop`);
    /// `force`: close them now (`ssh -O exit`).
    Stop {
        v: u32,
        #[serde(default)]
        force: bool,
    },
}

/// Why the holder could not do what it was asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// `host-key-unknown`, `auth`, `ssh`, `version`, `refused`, `bad-request`.
    pub kind: String,
    pub message: String,
}

/// The holder's account of itself, for `flightdeck mux status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    pub v: u32,
    /// `mux` (the background holder) or `cockpit`.
    pub holder: String,
    pub pid: u32,
    pub up_s: u64,
    /// Idle time after which it exits (the background holder only).
    pub persist_s: Option<u64>,
    pub idle_s: u64,
    /// Channels it relays now, and has relayed since it started.
    pub active: usize,
    pub served: u64,
    pub connections: Vec<Held>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Held {
    /// `user@host:port`, after the jump hosts it goes through (`a>b>c`); a jump host's
    /// own connection ends in `>`.
    pub route: String,
    pub age_s: u64,
}

async fn write_frame(w: &mut OwnedWriteHalf, kind: u8, payload: &[u8]) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(5 + payload.len());
    buf.push(kind);
    buf.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    buf.extend_from_slice(payload);
    w.write_all(&buf).await
}

/// A frame's kind and payload length from its 5-byte head; a length past [`MAX_FRAME`]
/// is refused before anything is allocated for it.
pub fn frame_head(head: &[u8; 5]) -> std::io::Result<(u8, usize)> {
    let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
    if len > MAX_FRAME {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("a frame of {len} bytes (at most {MAX_FRAME})"),
        ));
    }
    Ok((head[0], len))
}

/// What the holder or its client makes of one frame's payload, by its kind, as the
/// socket's readers do (a request, a failure, a status; stream kinds are bytes): for
/// tests and the fuzz target. Never panics.
pub fn decode_frame(kind: u8, payload: &[u8]) -> String {
    match kind {
        kind::REQUEST => format!(
            "{:?}",
            serde_json::from_slice::<Request>(payload).map_err(|e| e.to_string())
        ),
        kind::ERROR => format!("{:?}", decode_failure(payload)),
        kind::STATUS => format!(
            "{:?}",
            serde_json::from_slice::<Status>(payload).map_err(|e| e.to_string())
        ),
        _ => format!("{} bytes", payload.len()),
    }
}

async fn read_frame(r: &mut OwnedReadHalf) -> std::io::Result<Option<(u8, Vec<u8>)>> {
    let mut head = [0u8; 5];
    match r.read_exact(&mut head).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let (kind, len) = frame_head(&head)?;
    let mut payload = vec![0u8; len];
    r.read_exact(&mut payload).await?;
    Ok(Some((kind, payload)))
}

/// Tell the peer why not (its last frame on this connection).
async fn send_failure(w: &mut OwnedWriteHalf, kind: &str, message: String) {
    let f = Failure {
        kind: kind.into(),
        message,
    };
    let _ = write_frame(w, kind::ERROR, &serde_json::to_vec(&f).unwrap_or_default()).await;
}

/// Send `req` and read the holder's first answer, within `limit`.
async fn request(
    r: &mut OwnedReadHalf,
    w: &mut OwnedWriteHalf,
    req: &Request,
    limit: Duration,
) -> Result<std::io::Result<Option<(u8, Vec<u8>)>>, tokio::time::error::Elapsed> {
    let body = serde_json::to_vec(req).expect("a request serializes");
    let answer = async {
        if let Err(e) = write_frame(w, kind::REQUEST, &body).await {
            // A holder that refuses says why and closes before reading anything: the
            // write may meet the closed socket while the refusal waits to be read.
            return match read_frame(r).await {
                Ok(Some(f)) => Ok(Some(f)),
                _ => Err(e),
            };
        }
        read_frame(r).await
    };
    tokio::time::timeout(limit, answer).await
}

// ---------------------------------------------------------------------------------------
// The client side.

/// Why a request through the holder did not give a channel.
#[derive(Debug)]
pub enum MuxError {
    /// No holder answers on the socket (none runs, or it is of another version): connect
    /// as if there were none.
    Absent,
    /// The holder cannot do it but this process may (an unknown host key its operator may
    /// accept, a key passphrase only it can ask), said before anything ran: connect itself.
    Fallback(String),
    /// The holder tried and the node is not reachable (the error as it would be here):
    /// not run again.
    Failed(String),
    /// The holder went silent after the request (killed, its socket closed, a garbled
    /// answer): the command may have started on the node. Not run again, and not called
    /// unreachable.
    Unsure(String),
}

/// A command's way to the holder. Once the socket does not answer, every later request
/// of this process goes direct at once (no 32 failed connects for 32 nodes).
pub struct Client {
    socket: PathBuf,
    absent: AtomicBool,
}

impl Client {
    pub fn new(socket: PathBuf) -> Client {
        Client {
            socket,
            absent: AtomicBool::new(false),
        }
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    async fn connect(&self) -> Result<UnixStream, MuxError> {
        if self.absent.load(Ordering::Relaxed) {
            return Err(MuxError::Absent);
        }
        if let Some(why) = socket_path_problem(&self.socket) {
            tracing::warn!("{why}");
            self.absent.store(true, Ordering::Relaxed);
            return Err(MuxError::Absent);
        }
        match UnixStream::connect(&self.socket).await {
            Ok(s) => match check_peer(&s, &self.socket) {
                Ok(()) => Ok(s),
                Err(why) => {
                    // Nothing is sent to it: not the route, not the command, not stdin.
                    tracing::warn!("connection holder: {why}; connecting directly");
                    self.absent.store(true, Ordering::Relaxed);
                    Err(MuxError::Absent)
                }
            },
            Err(e) => {
                tracing::debug!("no connection holder at {}: {e}", self.socket.display());
                self.absent.store(true, Ordering::Relaxed);
                Err(MuxError::Absent)
            }
        }
    }

    /// Run `command` on `route` through the holder.
    pub async fn exec(&self, route: &Route, command: &str, opts: &SshOptions) -> Result<Channel, MuxError> {
        let s = self.connect().await?;
        let (mut r, mut w) = s.into_split();
        let req = Request::Exec {
            v: VERSION,
            route: route.clone(),
            command: command.to_string(),
            policy: opts.policy,
            known_hosts: opts.known_hosts.clone(),
            agent: opts.agent_path(),
        };
        // As long as the holder may take to connect (every hop's ConnectTimeout, each
        // attempt), then the margin: a command is never reported failed while the holder
        // is still connecting for it. Past it this process closes the socket, and the
        // holder, which checks before it starts a command, does not start it.
        let within = route.connect_budget() + ANSWER_MARGIN;
        // Once the request is sent the holder may have started the command: only its
        // own "cannot" (sent before it runs anything) makes this process connect itself;
        // silence, a closed socket or a garbled answer is the node's failure, never a
        // second run of the command.
        let unsure = |why: String| {
            MuxError::Unsure(format!(
                "{}: {why}; the command may have started there (not run again)",
                route.target.label()
            ))
        };
        match request(&mut r, &mut w, &req, within).await {
            Ok(Ok(Some((kind::OPENED, _)))) => Ok(Channel::new(
                StreamReader { read: r },
                StreamWriter {
                    write: tokio::sync::Mutex::new(w),
                },
            )),
            Ok(Ok(Some((kind::ERROR, body)))) => Err(failure(&body, self)),
            Ok(Ok(Some((k, _)))) => Err(unsure(format!(
                "the connection holder answered with frame {:?}",
                k as char
            ))),
            Ok(Ok(None)) => Err(unsure(
                "the connection holder closed the socket without an answer".into(),
            )),
            Ok(Err(e)) => Err(unsure(format!("the connection holder's socket: {e}"))),
            Err(_) => Err(MuxError::Failed(format!(
                "{}: the connection holder did not connect within {}s (the route's {} attempts at each hop's ConnectTimeout, and {}s more); gave up, and the holder starts no command for a client that has gone (not run again)",
                route.target.label(),
                within.as_secs(),
                super::pool::CONNECT_ATTEMPTS,
                ANSWER_MARGIN.as_secs()
            ))),
        }
    }

    /// Ask the holder for its status; `None` when none answers.
    pub async fn status(&self) -> Result<Option<Status>, String> {
        match self.ask(Request::Status { v: VERSION }).await? {
            None => Ok(None),
            Some((kind::STATUS, body)) => serde_json::from_slice(&body)
                .map(Some)
                .map_err(|e| format!("the holder's status: {e}")),
            Some((kind::ERROR, body)) => Err(decode_failure(&body).message),
            Some((k, _)) => Err(format!("the holder answered with frame {:?}", k as char)),
        }
    }

    /// Ask the holder to stop: it stops accepting commands at once and exits when its
    /// open channels have ended, or at once with `force` (their commands lose their
    /// connection). Its status as it was asked (`active`: the channels it lets finish);
    /// `None` when none runs.
    pub async fn stop(&self, force: bool) -> Result<Option<Status>, String> {
        match self.ask(Request::Stop { v: VERSION, force }).await? {
            None => Ok(None),
            Some((kind::STATUS, body)) => serde_json::from_slice(&body)
                .map(Some)
                .map_err(|e| format!("the holder's status: {e}")),
            Some((kind::ERROR, body)) => Err(decode_failure(&body).message),
            Some((k, _)) => Err(format!("the holder answered with frame {:?}", k as char)),
        }
    }

    async fn ask(&self, req: Request) -> Result<Option<(u8, Vec<u8>)>, String> {
        if let Some(why) = socket_path_problem(&self.socket) {
            return Err(why);
        }
        let s = match UnixStream::connect(&self.socket).await {
            Ok(s) => {
                check_peer(&s, &self.socket)?;
                s
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
                ) =>
            {
                return Ok(None)
            }
            Err(e) => return Err(format!("{}: {e}", self.socket.display())),
        };
        let (mut r, mut w) = s.into_split();
        match request(&mut r, &mut w, &req, Duration::from_secs(10)).await {
            Err(_) => Err("the connection holder did not answer in 10 s".into()),
            Ok(Ok(Some(f))) => Ok(Some(f)),
            // A holder that exits (idle past its persist time, or stopped) closes its
            // socket with connections still queued: those are reset or closed unanswered.
            // Once its socket is gone it is absent, not failing.
            _ if self.holder_gone().await => Ok(None),
            Ok(Err(e)) => Err(format!("{}: {e}", self.socket.display())),
            Ok(Ok(None)) => Err(format!(
                "the connection holder at {} closed the socket without an answer (is it another user's?)",
                self.socket.display()
            )),
        }
    }

    /// Whether the holder went away: its socket is gone now, or within a moment (it
    /// closes its listener just before it removes the socket).
    async fn holder_gone(&self) -> bool {
        for _ in 0..10 {
            if !self.socket.exists() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }
}

fn decode_failure(body: &[u8]) -> Failure {
    serde_json::from_slice(body).unwrap_or_else(|_| Failure {
        kind: "bad-request".into(),
        message: String::from_utf8_lossy(body).into_owned(),
    })
}

fn failure(body: &[u8], client: &Client) -> MuxError {
    let f = decode_failure(body);
    match f.kind.as_str() {
        "ssh" => MuxError::Failed(f.message),
        "version" => {
            client.absent.store(true, Ordering::Relaxed);
            MuxError::Absent
        }
        _ => MuxError::Fallback(f.message),
    }
}

/// The reading half of a channel the holder relays.
struct StreamReader {
    read: OwnedReadHalf,
}

impl ChannelRead for StreamReader {
    fn next(&mut self) -> BoxFuture<'_, Option<Output>> {
        Box::pin(async move {
            loop {
                let (k, body) = match read_frame(&mut self.read).await {
                    Ok(Some(f)) => f,
                    Ok(None) => return None,
                    Err(e) => {
                        tracing::info!("the connection holder's stream: {e}");
                        return None;
                    }
                };
                return Some(match k {
                    kind::STDOUT => Output::Stdout(body),
                    kind::STDERR => Output::Stderr(body),
                    kind::EXIT if body.len() == 4 => {
                        Output::Exit(i32::from_be_bytes([body[0], body[1], body[2], body[3]]))
                    }
                    other => {
                        tracing::info!("the connection holder sent frame {:?} mid-stream", other as char);
                        continue;
                    }
                });
            }
        })
    }
}

/// The writing half of a channel the holder relays.
struct StreamWriter {
    write: tokio::sync::Mutex<OwnedWriteHalf>,
}

impl StreamWriter {
    async fn send(&self, k: u8, body: &[u8]) -> Result<(), ChannelError> {
        let mut w = self.write.lock().await;
        for chunk in body.chunks(MAX_FRAME).chain(body.is_empty().then_some(&[][..])) {
            write_frame(&mut w, k, chunk)
                .await
                .map_err(|e| ChannelError::Failed(e.to_string()))?;
        }
        Ok(())
    }
}

impl ChannelWrite for StreamWriter {
    fn data<'a>(&'a self, bytes: &'a [u8]) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(self.send(kind::STDIN, bytes))
    }

    fn eof(&self) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(self.send(kind::EOF, &[]))
    }

    /// By its name; the holder signals its channel.
    fn signal(&self, sig: Signal) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(async move { self.send(kind::SIGNAL, sig.name().as_bytes()).await })
    }

    /// The holder relays commands without a terminal: nothing to resize.
    fn resize(&self, _cols: u16, _rows: u16) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(async { Ok(()) })
    }

    fn close(&self) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(self.send(kind::CLOSE, &[]))
    }
}

// ---------------------------------------------------------------------------------------
// The holder side.

const CLIENT_GONE: &str = "the client has gone";

/// Peek at the client's socket without reading: `Ok(0)` at its end, `Ok(n)` when it sent
/// something, `WouldBlock` while it waits quietly.
fn peek(s: &UnixStream) -> std::io::Result<usize> {
    use std::os::fd::AsRawFd;
    let mut b = [0u8; 1];
    // SAFETY: recv into a 1-byte buffer we own, on a socket we hold open.
    let n = unsafe {
        libc::recv(
            s.as_raw_fd(),
            b.as_mut_ptr().cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Whether the client has gone (closed its socket) or sent anything before its channel
/// opened (it sends nothing then unless it gives up).
fn client_left(r: &OwnedReadHalf) -> bool {
    match peek(r.as_ref()) {
        Ok(_) => true,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    }
}

/// Returns once the client has gone (see [`client_left`]).
async fn client_gone(r: &OwnedReadHalf) {
    loop {
        if r.readable().await.is_err() {
            return;
        }
        let s: &UnixStream = r.as_ref();
        match s.try_io(tokio::io::Interest::READABLE, || peek(s)) {
            Ok(_) => return,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(_) => return,
        }
    }
}

/// Who holds: the background `flightdeck mux` or the cockpit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HolderKind {
    Mux,
    Cockpit,
}

impl HolderKind {
    fn name(self) -> &'static str {
        match self {
            HolderKind::Mux => "mux",
            HolderKind::Cockpit => "cockpit",
        }
    }
}

/// The holder's state, shared by its connection handlers.
pub struct Holder {
    pool: Pool,
    kind: HolderKind,
    started: Instant,
    persist: Option<Duration>,
    served: AtomicU64,
    active: AtomicUsize,
    /// When the last channel ended (or the holder started), for the idle time.
    idle_since: std::sync::Mutex<Instant>,
    stop: tokio::sync::Notify,
    /// Asked to stop with its channels cut (`mux stop --force`).
    force: AtomicBool,
    uid: u32,
}

/// The socket bound, ready to serve: [`bind`] then [`Holder::serve`].
pub struct Bound {
    listener: UnixListener,
    path: PathBuf,
}

impl Drop for Bound {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Bind the holder's socket at `path` (its directory made 0700, the socket 0600). `Ok(None)`
/// when another holder already answers there; a socket file left by a holder that died
/// is replaced.
pub fn bind(path: &Path) -> std::io::Result<Option<Bound>> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(why) = socket_path_problem(path) {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, why));
    }
    if let Some(dir) = path.parent() {
        crate::paths::private_dir(dir)?;
    }
    if path.symlink_metadata().is_ok() {
        match std::os::unix::net::UnixStream::connect(path) {
            Ok(_) => return Ok(None),
            Err(_) => std::fs::remove_file(path)?,
        }
    }
    // Bound with no permission for others from the start (umask), then 0600.
    // SAFETY: umask only changes this process's file creation mask.
    let old = unsafe { libc::umask(0o177) };
    let bound = std::os::unix::net::UnixListener::bind(path);
    unsafe { libc::umask(old) };
    let std_listener = match bound {
        Ok(l) => l,
        // Two holders starting together: the other won.
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => return Ok(None),
        Err(e) => return Err(e),
    };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    std_listener.set_nonblocking(true)?;
    let listener = UnixListener::from_std(std_listener)?;
    Ok(Some(Bound {
        listener,
        path: path.to_path_buf(),
    }))
}

impl Holder {
    /// A holder of `pool`'s connections (a pool made with [`Pool::holding`]).
    pub fn new(pool: Pool, kind: HolderKind, persist: Option<Duration>) -> Arc<Holder> {
        Arc::new(Holder {
            pool,
            kind,
            started: Instant::now(),
            persist,
            served: AtomicU64::new(0),
            active: AtomicUsize::new(0),
            idle_since: std::sync::Mutex::new(Instant::now()),
            stop: tokio::sync::Notify::new(),
            force: AtomicBool::new(false),
            // SAFETY: geteuid has no preconditions.
            uid: unsafe { libc::geteuid() },
        })
    }

    pub fn status(&self) -> Status {
        let idle = if self.active.load(Ordering::Relaxed) > 0 {
            Duration::ZERO
        } else {
            self.idle_since.lock().expect("idle lock").elapsed()
        };
        Status {
            v: VERSION,
            holder: self.kind.name().into(),
            pid: std::process::id(),
            up_s: self.started.elapsed().as_secs(),
            persist_s: self.persist.map(|p| p.as_secs()),
            idle_s: idle.as_secs(),
            active: self.active.load(Ordering::Relaxed),
            served: self.served.load(Ordering::Relaxed),
            connections: self
                .pool
                .held()
                .into_iter()
                .map(|(route, age)| Held {
                    route,
                    age_s: age.as_secs(),
                })
                .collect(),
        }
    }

    /// Serve on `bound` until asked to stop or, with a persist time, idle that long.
    pub async fn serve(self: Arc<Self>, bound: Bound) {
        // One ticker for the holder's life: a status request every few hundred ms must not
        // keep restarting the idle check.
        let mut ticker = tokio::time::interval(Duration::from_millis(500));
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                accepted = bound.listener.accept() => match accepted {
                    Ok((stream, _)) => {
                        let me = self.clone();
                        tokio::spawn(async move { me.handle(stream).await });
                    }
                    Err(e) => {
                        tracing::warn!("mux socket: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                },
                _ = self.stop.notified() => break,
                _ = ticker.tick(), if self.persist.is_some() => {
                    let idle = self.idle_since.lock().expect("idle lock").elapsed();
                    let persist = self.persist.unwrap_or_default();
                    if self.active.load(Ordering::Relaxed) == 0 && idle >= persist {
                        tracing::info!("connection holder idle for {persist:?}: exiting");
                        break;
                    }
                }
            }
        }
        // The socket goes first: new commands connect themselves from now on.
        drop(bound);
        if !self.force.load(Ordering::Relaxed) {
            // As `ssh -O stop`: the channels that are open run to their end.
            let mut said = false;
            while self.active.load(Ordering::Relaxed) > 0 {
                if !said {
                    tracing::info!(
                        "connection holder stopping: waiting for {} open channel(s)",
                        self.active.load(Ordering::Relaxed)
                    );
                    said = true;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }

    async fn handle(self: Arc<Self>, stream: UnixStream) {
        // Who is on the other end, from the kernel: only this holder's own user is served.
        let peer = stream.peer_cred().map(|c| c.uid());
        let (mut r, mut w) = stream.into_split();
        match peer {
            Ok(uid) if uid == self.uid => {}
            other => {
                let who = other.map_or_else(|e| format!("unknown ({e})"), |u| format!("uid {u}"));
                tracing::warn!(
                    "mux socket: refused {who}; the holder serves uid {} only",
                    self.uid
                );
                // Said to the peer before closing, but nothing of its is read.
                let why = format!("refused: the connection holder serves its own user only (you are {who})");
                send_failure(&mut w, "refused", why).await;
                return;
            }
        }
        let req = match tokio::time::timeout(Duration::from_secs(10), read_frame(&mut r)).await {
            Ok(Ok(Some((kind::REQUEST, body)))) => serde_json::from_slice::<Request>(&body),
            _ => return,
        };
        let req = match req {
            Ok(req) => req,
            Err(e) => {
                let why = format!("a request this holder does not know ({e}); it speaks version {VERSION}");
                send_failure(&mut w, "version", why).await;
                return;
            }
        };
        let v = match &req {
            Request::Exec { v, .. } | Request::Status { v } | Request::Stop { v, .. } => *v,
        };
        if v != VERSION {
            send_failure(
                &mut w,
                "version",
                format!("version {v} asked, this holder speaks {VERSION}"),
            )
            .await;
            return;
        }
        match req {
            Request::Status { .. } => {
                let s = serde_json::to_vec(&self.status()).unwrap_or_default();
                let _ = write_frame(&mut w, kind::STATUS, &s).await;
            }
            Request::Stop { force, .. } => {
                if self.kind == HolderKind::Cockpit {
                    let why = "the cockpit holds the connections while it runs: quit it to close them";
                    send_failure(&mut w, "refused", why.into()).await;
                    return;
                }
                if force {
                    self.force.store(true, Ordering::Relaxed);
                }
                let s = serde_json::to_vec(&self.status()).unwrap_or_default();
                let _ = write_frame(&mut w, kind::STATUS, &s).await;
                tracing::info!(
                    force,
                    active = self.active.load(Ordering::Relaxed),
                    "connection holder asked to stop"
                );
                self.stop.notify_one();
            }
            Request::Exec {
                route,
                command,
                policy,
                known_hosts,
                agent,
                ..
            } => {
                self.active.fetch_add(1, Ordering::Relaxed);
                self.served.fetch_add(1, Ordering::Relaxed);
                self.relay(route, command, policy, known_hosts, agent, r, w).await;
                *self.idle_since.lock().expect("idle lock") = Instant::now();
                self.active.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    /// Open the channel and relay it until it ends or the client goes.
    #[allow(clippy::too_many_arguments)]
    async fn relay(
        &self,
        route: Route,
        command: String,
        policy: HostKeyPolicy,
        known_hosts: Vec<PathBuf>,
        agent: Option<PathBuf>,
        mut r: OwnedReadHalf,
        mut w: OwnedWriteHalf,
    ) {
        // The client's known_hosts files and host-key policy, never the holder's own: an
        // unknown key is refused unless the client would accept it without asking (then
        // the client asks its operator, or not); a changed key is refused always. Nobody
        // is asked anything here.
        let mut opts = self.pool.options().clone();
        opts.policy = policy;
        opts.known_hosts = known_hosts;
        opts.prompter = Arc::new(NoPrompt);
        if agent.is_some() {
            opts.agent_socket = agent;
        }
        let label = route.target.label();
        let opening = self.pool.channel_with(&route, &opts, |c| {
            let command = command.clone();
            let r = &r;
            async move {
                // The last moment before the command starts: not for a client that left.
                if client_left(r) {
                    return Err(SshError::Channel {
                        target: c.target.label(),
                        what: "exec".into(),
                        reason: CLIENT_GONE.into(),
                    });
                }
                c.exec(&command).await
            }
        });
        let opened = tokio::select! {
            opened = opening => opened,
            // The client gave up (its deadline, an interrupt) while the holder connected:
            // the connection attempt is dropped and the command never starts.
            _ = client_gone(&r) => {
                tracing::info!("{label}: the client left before its command started: not started");
                return;
            }
        };
        let (conn, channel) = match opened {
            Ok(c) => c,
            Err(SshError::Channel { reason, .. }) if reason == CLIENT_GONE => {
                tracing::info!("{label}: the client left before its command started: not started");
                return;
            }
            Err(e) => {
                let kind = match e {
                    SshError::HostKeyUnknown { strict: false, .. } => "host-key-unknown",
                    SshError::Auth { .. } => "auth",
                    _ => "ssh",
                };
                send_failure(&mut w, kind, e.to_string()).await;
                return;
            }
        };
        if write_frame(&mut w, kind::OPENED, &[]).await.is_err() {
            return;
        }
        let (mut reader, writer) = super::stream::channel(conn, channel).split();
        let to_client = async {
            while let Some(out) = reader.next().await {
                let sent = match out {
                    Output::Stdout(b) => write_frame(&mut w, kind::STDOUT, &b).await,
                    Output::Stderr(b) => write_frame(&mut w, kind::STDERR, &b).await,
                    Output::Exit(code) => write_frame(&mut w, kind::EXIT, &code.to_be_bytes()).await,
                };
                if sent.is_err() {
                    return false;
                }
            }
            let _ = w.shutdown().await;
            true
        };
        let from_client = async {
            loop {
                match read_frame(&mut r).await {
                    Ok(Some((kind::STDIN, b))) => {
                        let _ = writer.data(&b).await;
                    }
                    Ok(Some((kind::EOF, _))) => {
                        let _ = writer.eof().await;
                    }
                    Ok(Some((kind::SIGNAL, b))) => {
                        let _ = writer
                            .signal(Signal::from_name(&String::from_utf8_lossy(&b)))
                            .await;
                    }
                    Ok(Some((kind::CLOSE, _))) => {
                        let _ = writer.close().await;
                    }
                    Ok(Some(_)) => {}
                    // The client is gone: the channel is closed, as ssh's would be when
                    // ssh dies; the command sees its pipes close.
                    Ok(None) | Err(_) => {
                        let _ = writer.close().await;
                        return;
                    }
                }
            }
        };
        tokio::select! {
            _ = to_client => {}
            // The client went: let the channel end (closed above), reading what is left.
            _ = from_client => {}
        }
    }
}

#[cfg(test)]
mod tests {

    /// A holder that exits while a `mux status` is queued on its socket resets that
    /// connection; the client reads it as no holder (it failed `mux status` under load).
    #[tokio::test]
    async fn a_holder_exiting_under_a_queued_request_is_absent() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("mux.sock");
        let listener = tokio::net::UnixListener::bind(&sock).unwrap();
        let path = sock.clone();
        let holder = tokio::spawn(async move {
            let (s, _) = listener.accept().await.unwrap();
            // Let the request arrive unread, then go as an exiting holder does.
            tokio::time::sleep(Duration::from_millis(100)).await;
            drop(listener);
            std::fs::remove_file(&path).unwrap();
            drop(s);
        });
        let client = Client::new(sock.clone());
        assert_eq!(client.status().await.map(|s| s.is_none()), Ok(true));
        holder.await.unwrap();
        // A holder that is still there but closes unanswered is still an error.
        let listener = tokio::net::UnixListener::bind(&sock).unwrap();
        let closer = tokio::spawn(async move {
            let (s, _) = listener.accept().await.unwrap();
            drop(s);
            listener
        });
        let e = client.status().await.unwrap_err();
        assert!(e.contains("without an answer") || e.contains("mux.sock"), "{e}");
        drop(closer.await.unwrap());
    }
    use super::*;

    /// Random streams of bytes, split into frames as the readers split them: nothing
    /// panics and no length past the cap is taken (a cheap stand-in run in every test
    /// run; `fuzz/fuzz_targets/mux_frames.rs` is the coverage-guided one).
    #[test]
    fn random_byte_streams_split_into_frames_without_panic() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..20_000 {
            let len = (next() % 96) as usize;
            let mut data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            // Now and then a well-formed head before the noise, of a kind the peer reads.
            if next() % 3 == 0 {
                let kinds = [kind::REQUEST, kind::ERROR, kind::STATUS, kind::STDOUT];
                let k = kinds[(next() % 4) as usize];
                let body_len = (next() % 40) as u32;
                let mut framed = vec![k];
                framed.extend_from_slice(&body_len.to_be_bytes());
                framed.extend(data);
                data = framed;
            }
            let mut rest = &data[..];
            while rest.len() >= 5 {
                let head: [u8; 5] = rest[..5].try_into().unwrap();
                let Ok((kind, len)) = frame_head(&head) else { break };
                assert!(len <= MAX_FRAME);
                let Some(payload) = rest.get(5..5 + len) else {
                    break;
                };
                let _ = decode_frame(kind, payload);
                rest = &rest[5 + len..];
            }
        }
    }

    #[test]
    fn frame_heads_and_payloads_from_anyone_are_decoded_never_trusted() {
        let mut head = [kind::REQUEST, 0, 0, 0, 3];
        assert_eq!(frame_head(&head).unwrap(), (kind::REQUEST, 3));
        head[1..].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(
            frame_head(&head).is_err(),
            "an oversized frame is refused before allocation"
        );
        assert!(decode_frame(kind::REQUEST, b"{not json").starts_with("Err("));
        assert!(decode_frame(kind::STATUS, &[0xff, 0xfe]).starts_with("Err("));
        assert!(decode_frame(kind::ERROR, b"\x1b]52;c;aGk=\x07").contains("bad-request"));
        assert_eq!(decode_frame(kind::STDOUT, b"abc"), "3 bytes");
    }

    #[tokio::test]
    async fn frames_round_trip_and_oversized_ones_are_refused() {
        let (a, b) = UnixStream::pair().unwrap();
        let (_ar, mut aw) = a.into_split();
        let (mut br, _bw) = b.into_split();
        write_frame(&mut aw, kind::STDOUT, b"hello").await.unwrap();
        write_frame(&mut aw, kind::EOF, b"").await.unwrap();
        assert_eq!(
            read_frame(&mut br).await.unwrap(),
            Some((kind::STDOUT, b"hello".to_vec()))
        );
        assert_eq!(read_frame(&mut br).await.unwrap(), Some((kind::EOF, vec![])));
        let mut head = vec![kind::STDIN];
        head.extend_from_slice(&((MAX_FRAME as u32) + 1).to_be_bytes());
        aw.write_all(&head).await.unwrap();
        assert!(read_frame(&mut br).await.is_err());
        drop(aw);
        assert_eq!(read_frame(&mut br).await.unwrap(), None);
    }

    #[test]
    fn a_request_reads_back() {
        let route = Route {
            jumps: vec![],
            target: Box::new(crate::ssh::client::Target {
                identity_files: vec!["/home/op/.ssh/id_ed25519".into()],
                keepalive: Some(Duration::from_secs(15)),
                user_known_hosts: Some(vec!["/home/op/.ssh/kh_cluster".into()]),
                strict: Some(crate::ssh::config::Strict::Yes),
                ..crate::ssh::client::Target::new("10.0.0.2", 22, "op")
            }),
        };
        let req = Request::Exec {
            v: VERSION,
            route: route.clone(),
            command: "true".into(),
            policy: HostKeyPolicy::Ask,
            known_hosts: vec!["/home/op/.ssh/known_hosts".into()],
            agent: None,
        };
        let back: Request = serde_json::from_slice(&serde_json::to_vec(&req).unwrap()).unwrap();
        match back {
            Request::Exec { route: r, .. } => assert_eq!(r, route),
            other => panic!("{other:?}"),
        }
    }
}
