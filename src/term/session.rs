//! A pane's session: a task that keeps a shell running for one node (its login shell on
//! a terminal, from [`Reach::shell`]: a local PTY, an SSH shell channel, a TTY in a pod),
//! feeds its output into the pane's screen, and takes keystrokes and resizes. When a
//! remote node drops, it reconnects with backoff (1 s doubling to 30 s) without touching
//! the other panes; an exited shell stays exited until restarted.

use super::SharedScreen;
use crate::fleet::NodeTarget;
use crate::node::{Channel, Output};
use crate::reach::{Reach, ReachError};
use std::time::Duration;
use tokio::sync::mpsc;

/// Longest wait between reconnection attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

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

/// Start the session task for pane `id`: a shell on `node`.
pub fn spawn(
    id: usize,
    reach: Reach,
    node: NodeTarget,
    screen: SharedScreen,
    events: mpsc::Sender<PaneEvent>,
) -> PaneHandle {
    let (tx, rx) = mpsc::channel(256);
    tokio::spawn(run(id, reach, node, screen, events, rx));
    PaneHandle { id, input: tx }
}

enum End {
    Exited(Option<i32>),
    Lost(String),
    Closed,
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

/// Resize the pane's screen and say so: the screen is rebuilt (reflowed) at the new
/// size, and the cockpit must draw it again even when the shell prints nothing on
/// SIGWINCH (sh does not), else the frame drawn at the new size keeps the old rows, cut.
fn resize_screen(screen: &SharedScreen, cols: u16, rows: u16, events: &mpsc::Sender<PaneEvent>, id: usize) {
    screen
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .set_size(rows.max(1), cols.max(1));
    let _ = events.try_send(PaneEvent::Output(id));
}

async fn run(
    id: usize,
    reach: Reach,
    node: NodeTarget,
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
        let (cols, rows) = size(&screen);
        let end = match reach.shell(&node, cols, rows).await {
            Ok(ch) => run_shell(id, ch, &screen, &events, &mut rx, &state).await,
            Err(e) if e.needs_operator() => {
                state(PaneState::Failed(e.to_string())).await;
                match wait_restart(&mut rx, &screen, &events, id).await {
                    true => {
                        attempt = 0;
                        continue;
                    }
                    false => return,
                }
            }
            // This machine cannot start the shell: trying again will not help.
            Err(e @ ReachError::Local { .. }) => {
                tracing::warn!("{e}");
                End::Exited(None)
            }
            Err(e) => End::Lost(e.to_string()),
        };
        match end {
            End::Closed => return,
            End::Exited(code) => {
                state(PaneState::Exited(code)).await;
                if !wait_restart(&mut rx, &screen, &events, id).await {
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
                            Some(PaneInput::Resize { cols, rows }) => resize_screen(&screen, cols, rows, &events, id),
                            Some(PaneInput::Bytes(_)) => {}
                        }
                    }
                }
            }
        }
    }
}

/// After an exit or failure: true on Restart, false on Close; resizes still apply.
async fn wait_restart(
    rx: &mut mpsc::Receiver<PaneInput>,
    screen: &SharedScreen,
    events: &mpsc::Sender<PaneEvent>,
    id: usize,
) -> bool {
    loop {
        match rx.recv().await {
            None | Some(PaneInput::Close) => return false,
            Some(PaneInput::Restart) => return true,
            Some(PaneInput::Resize { cols, rows }) => resize_screen(screen, cols, rows, events, id),
            Some(PaneInput::Bytes(_)) => {}
        }
    }
}

/// Feed the shell's output to the screen and the pane's input to the shell, until the
/// shell exits, its channel closes or the pane closes.
async fn run_shell<F, Fut>(
    id: usize,
    ch: Channel,
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
            msg = read.next() => match msg {
                Some(Output::Stdout(data)) | Some(Output::Stderr(data)) => {
                    feed(screen, &data);
                    let _ = events.try_send(PaneEvent::Output(id));
                }
                Some(Output::Exit(code)) => status = Some(code),
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
                // A failed write means the channel is going: its reader says how it ended.
                Some(PaneInput::Bytes(b)) => {
                    let _ = write.data(&b[..]).await;
                }
                Some(PaneInput::Resize { cols, rows }) => {
                    resize_screen(screen, cols, rows, events, id);
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
        let h = spawn(
            0,
            Reach::without_ssh().with_local_shell("sh"),
            NodeTarget::local(0, "l-0"),
            screen.clone(),
            etx,
        );
        h.input
            .send(PaneInput::Bytes(b"echo hello-$((6*7))\n".to_vec()))
            .await
            .unwrap();
        wait_for(&mut erx, &screen, "hello-42").await;
        // The prompt's output has come; then a resize alone (sh prints nothing on
        // SIGWINCH) still tells the cockpit to draw the rebuilt screen.
        tokio::time::sleep(Duration::from_millis(300)).await;
        while erx.try_recv().is_ok() {}
        h.input
            .send(PaneInput::Resize { cols: 50, rows: 7 })
            .await
            .unwrap();
        let e = tokio::time::timeout(Duration::from_secs(5), erx.recv())
            .await
            .expect("an event after the resize");
        assert_eq!(e, Some(PaneEvent::Output(0)));
        assert_eq!(size(&screen), (50, 7), "resized before it was said");
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
