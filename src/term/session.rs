//! A pane's session: a task that keeps a shell running for one node (a local PTY or an
//! SSH shell channel), feeds its output into the pane's screen, and takes keystrokes and
//! resizes. When an SSH node drops, it reconnects with backoff (1 s doubling to 30 s)
//! without touching the other panes; an exited shell stays exited until restarted.

use super::{pty, SharedScreen};
use crate::ssh::client::SshError;
use crate::ssh::pool::{Pool, Route};
use std::time::Duration;
use tokio::sync::mpsc;

/// Longest wait between reconnection attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

#[derive(Clone)]
pub enum PaneTarget {
    /// A login shell on a local PTY.
    Local { shell: String },
    /// A login shell over SSH.
    Ssh { pool: Pool, route: Route },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PaneInput {
    Bytes(Vec<u8>),
    Resize {
        cols: u16,
        rows: u16,
    },
    /// Start again after an exit or a failure.
    Restart,
    Close,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PaneState {
    Connecting,
    Connected,
    /// The connection dropped; a reconnection follows.
    Lost(String),
    Reconnecting {
        attempt: u32,
        delay_s: u64,
    },
    /// The shell exited (with its status when known).
    Exited(Option<i32>),
    /// Will not retry by itself (host key, authentication): needs the operator.
    Failed(String),
}

impl PaneState {
    pub fn label(&self) -> String {
        match self {
            PaneState::Connecting => "connecting".into(),
            PaneState::Connected => "connected".into(),
            PaneState::Lost(why) => format!("lost: {why}"),
            PaneState::Reconnecting { attempt, delay_s } => {
                format!("reconnecting in {delay_s}s (attempt {attempt})")
            }
            PaneState::Exited(Some(c)) => format!("exited {c}"),
            PaneState::Exited(None) => "exited".into(),
            PaneState::Failed(why) => format!("failed: {why}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PaneEvent {
    /// New output is on the pane's screen.
    Output(usize),
    State(usize, PaneState),
}

pub struct PaneHandle {
    pub id: usize,
    pub input: mpsc::Sender<PaneInput>,
}

/// Start the session task for pane `id`.
pub fn spawn(
    id: usize,
    target: PaneTarget,
    screen: SharedScreen,
    events: mpsc::Sender<PaneEvent>,
) -> PaneHandle {
    let (tx, rx) = mpsc::channel(256);
    tokio::spawn(run(id, target, screen, events, rx));
    PaneHandle { id, input: tx }
}

enum End {
    Exited(Option<i32>),
    Lost(String),
    Closed,
}

fn fatal(e: &SshError) -> bool {
    matches!(
        e,
        SshError::HostKeyChanged { .. }
            | SshError::HostKeyRevoked { .. }
            | SshError::HostKeyUnknown { .. }
            | SshError::Auth { .. }
    )
}

fn backoff(attempt: u32) -> Duration {
    Duration::from_secs(1u64 << attempt.min(5)).min(MAX_BACKOFF)
}

fn size(screen: &SharedScreen) -> (u16, u16) {
    let p = screen.read().unwrap_or_else(|e| e.into_inner());
    let (rows, cols) = p.screen().size();
    (cols, rows)
}

fn feed(screen: &SharedScreen, data: &[u8]) {
    screen.write().unwrap_or_else(|e| e.into_inner()).process(data);
}

fn resize_screen(screen: &SharedScreen, cols: u16, rows: u16) {
    screen
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .set_size(rows.max(1), cols.max(1));
}

async fn run(
    id: usize,
    target: PaneTarget,
    screen: SharedScreen,
    events: mpsc::Sender<PaneEvent>,
    mut rx: mpsc::Receiver<PaneInput>,
) {
    let state = |s: PaneState| {
        let events = events.clone();
        async move {
            let _ = events.send(PaneEvent::State(id, s)).await;
        }
    };
    let mut attempt: u32 = 0;
    loop {
        state(PaneState::Connecting).await;
        let end = match &target {
            PaneTarget::Local { shell } => run_local(id, shell, &screen, &events, &mut rx, &state).await,
            PaneTarget::Ssh { pool, route } if route.kube.is_some() => {
                let (cols, rows) = size(&screen);
                let node = route.kube.as_ref().expect("a GKE route");
                match pool.kube().shell(node, cols, rows).await {
                    Ok(ch) => run_kube(id, ch, &screen, &events, &mut rx, &state).await,
                    Err(e) => End::Lost(e),
                }
            }
            PaneTarget::Ssh { pool, route } => {
                let (cols, rows) = size(&screen);
                match pool.shell(route, "xterm-256color", cols, rows).await {
                    // The node's shared connection: `_conn` keeps it while the shell runs.
                    Ok((_conn, ch)) => run_ssh(id, ch, &screen, &events, &mut rx, &state).await,
                    Err(e) if fatal(&e) => {
                        state(PaneState::Failed(e.to_string())).await;
                        match wait_restart(&mut rx, &screen).await {
                            true => {
                                attempt = 0;
                                continue;
                            }
                            false => return,
                        }
                    }
                    Err(e) => End::Lost(e.to_string()),
                }
            }
        };
        match end {
            End::Closed => return,
            End::Exited(code) => {
                state(PaneState::Exited(code)).await;
                if !wait_restart(&mut rx, &screen).await {
                    return;
                }
                attempt = 0;
            }
            End::Lost(why) => {
                // Said in the pane itself: what ran in the old shell is gone, and the next
                // prompt is a new one.
                feed(
                    &screen,
                    format!("\r\n\x1b[33m[flightdeck] connection lost ({why}); reconnecting: the next shell is a new one\x1b[0m\r\n").as_bytes(),
                );
                let _ = events.try_send(PaneEvent::Output(id));
                state(PaneState::Lost(why)).await;
                let delay = backoff(attempt);
                attempt += 1;
                state(PaneState::Reconnecting {
                    attempt,
                    delay_s: delay.as_secs(),
                })
                .await;
                // Wait out the backoff, still taking resizes; Close ends, Restart skips it.
                let sleep = tokio::time::sleep(delay);
                tokio::pin!(sleep);
                loop {
                    tokio::select! {
                        _ = &mut sleep => break,
                        msg = rx.recv() => match msg {
                            None | Some(PaneInput::Close) => return,
                            Some(PaneInput::Restart) => break,
                            Some(PaneInput::Resize { cols, rows }) => resize_screen(&screen, cols, rows),
                            Some(PaneInput::Bytes(_)) => {}
                        }
                    }
                }
            }
        }
    }
}

/// After an exit or failure: true on Restart, false on Close; resizes still apply.
async fn wait_restart(rx: &mut mpsc::Receiver<PaneInput>, screen: &SharedScreen) -> bool {
    loop {
        match rx.recv().await {
            None | Some(PaneInput::Close) => return false,
            Some(PaneInput::Restart) => return true,
            Some(PaneInput::Resize { cols, rows }) => resize_screen(screen, cols, rows),
            Some(PaneInput::Bytes(_)) => {}
        }
    }
}

async fn run_local<F, Fut>(
    id: usize,
    shell: &str,
    screen: &SharedScreen,
    events: &mpsc::Sender<PaneEvent>,
    rx: &mut mpsc::Receiver<PaneInput>,
    state: &F,
) -> End
where
    F: Fn(PaneState) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let (cols, rows) = size(screen);
    let (pty, mut child) = match pty::spawn(shell, &["-l"], cols, rows) {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!("cannot start {shell}: {e}");
            return End::Exited(None);
        }
    };
    state(PaneState::Connected).await;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        tokio::select! {
            r = pty.read(&mut buf) => match r {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    feed(screen, &buf[..n]);
                    let _ = events.try_send(PaneEvent::Output(id));
                }
            },
            msg = rx.recv() => match msg {
                None | Some(PaneInput::Close) => {
                    let _ = child.start_kill();
                    return End::Closed;
                }
                Some(PaneInput::Bytes(b)) => {
                    let _ = pty.write_all(&b).await;
                }
                Some(PaneInput::Resize { cols, rows }) => {
                    resize_screen(screen, cols, rows);
                    let _ = pty.resize(cols, rows);
                }
                Some(PaneInput::Restart) => {}
            }
        }
    }
    let code = child.wait().await.ok().and_then(|s| s.code());
    End::Exited(code)
}

async fn run_ssh<F, Fut>(
    id: usize,
    ch: russh::Channel<russh::client::Msg>,
    screen: &SharedScreen,
    events: &mpsc::Sender<PaneEvent>,
    rx: &mut mpsc::Receiver<PaneInput>,
    state: &F,
) -> End
where
    F: Fn(PaneState) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    state(PaneState::Connected).await;
    let (mut read, write) = ch.split();
    let mut status = None;
    loop {
        tokio::select! {
            msg = read.wait() => match msg {
                Some(russh::ChannelMsg::Data { data }) | Some(russh::ChannelMsg::ExtendedData { data, .. }) => {
                    feed(screen, &data);
                    let _ = events.try_send(PaneEvent::Output(id));
                }
                Some(russh::ChannelMsg::ExitStatus { exit_status }) => status = Some(exit_status as i32),
                Some(russh::ChannelMsg::ExitSignal { signal_name, .. }) => {
                    status = Some(128 + crate::ssh::client::signal_number(&signal_name) as i32)
                }
                Some(_) => {}
                None => break match status {
                    Some(code) => End::Exited(Some(code)),
                    None => End::Lost("the connection closed".into()),
                },
            },
            msg = rx.recv() => match msg {
                None | Some(PaneInput::Close) => {
                    let _ = write.close().await;
                    break End::Closed;
                }
                Some(PaneInput::Bytes(b)) => {
                    if write.data(&b[..]).await.is_err() {
                        break End::Lost("the connection closed".into());
                    }
                }
                Some(PaneInput::Resize { cols, rows }) => {
                    resize_screen(screen, cols, rows);
                    let _ = write.window_change(u32::from(cols), u32::from(rows), 0, 0).await;
                }
                Some(PaneInput::Restart) => {}
            }
        }
    }
}

/// A shell on a TTY in a GKE node's debug pod, over the Kubernetes exec API.
async fn run_kube<F, Fut>(
    id: usize,
    ch: crate::cloud::gke::exec::KubeChannel,
    screen: &SharedScreen,
    events: &mpsc::Sender<PaneEvent>,
    rx: &mut mpsc::Receiver<PaneInput>,
    state: &F,
) -> End
where
    F: Fn(PaneState) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    use crate::ssh::stream::Output;
    state(PaneState::Connected).await;
    let (mut read, write) = ch.split();
    let mut status = None;
    loop {
        tokio::select! {
            msg = read.next() => match msg {
                Some(Output::Stdout(data)) | Some(Output::Stderr(data)) => {
                    feed(screen, &data);
                    let _ = events.try_send(PaneEvent::Output(id));
                }
                Some(Output::Exit(code)) => status = Some(code),
                None => break match status {
                    Some(code) => End::Exited(Some(code)),
                    None => End::Lost("the exec stream closed".into()),
                },
            },
            msg = rx.recv() => match msg {
                None | Some(PaneInput::Close) => {
                    let _ = write.close().await;
                    break End::Closed;
                }
                Some(PaneInput::Bytes(b)) => {
                    if write.data(&b[..]).await.is_err() {
                        break End::Lost("the exec stream closed".into());
                    }
                }
                Some(PaneInput::Resize { cols, rows }) => {
                    resize_screen(screen, cols, rows);
                    let _ = write.resize(cols, rows).await;
                }
                Some(PaneInput::Restart) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_a_cap() {
        let secs: Vec<u64> = (0..8).map(|a| backoff(a).as_secs()).collect();
        assert_eq!(secs, vec![1, 2, 4, 8, 16, 30, 30, 30]);
    }

    async fn wait_for(events: &mut mpsc::Receiver<PaneEvent>, screen: &SharedScreen, want: &str) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            if screen.read().unwrap().screen().contents().contains(want) {
                return;
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if tokio::time::timeout(left, events.recv()).await.is_err() {
                panic!(
                    "{want:?} never appeared:\n{}",
                    screen.read().unwrap().screen().contents()
                );
            }
        }
    }

    #[tokio::test]
    async fn local_pane_runs_a_shell_resizes_and_exits() {
        let screen = super::super::new_screen(10, 60);
        let (etx, mut erx) = mpsc::channel(1024);
        let h = spawn(0, PaneTarget::Local { shell: "sh".into() }, screen.clone(), etx);
        h.input
            .send(PaneInput::Bytes(b"echo hello-$((6*7))\n".to_vec()))
            .await
            .unwrap();
        wait_for(&mut erx, &screen, "hello-42").await;
        h.input
            .send(PaneInput::Resize { cols: 50, rows: 7 })
            .await
            .unwrap();
        h.input
            .send(PaneInput::Bytes(b"stty size\n".to_vec()))
            .await
            .unwrap();
        wait_for(&mut erx, &screen, "7 50").await;
        h.input
            .send(PaneInput::Bytes(b"exit 3\n".to_vec()))
            .await
            .unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let e = tokio::time::timeout_at(deadline, erx.recv())
                .await
                .expect("exit in time")
                .unwrap();
            if e == PaneEvent::State(0, PaneState::Exited(Some(3))) {
                break;
            }
        }
        h.input.send(PaneInput::Restart).await.unwrap();
        h.input
            .send(PaneInput::Bytes(b"echo again\n".to_vec()))
            .await
            .unwrap();
        wait_for(&mut erx, &screen, "again").await;
        h.input.send(PaneInput::Close).await.unwrap();
    }
}
