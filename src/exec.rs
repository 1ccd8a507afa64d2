//! Fan-out: run one command on many nodes at once (each over its channel from
//! [`Reach`]: a local process, SSH, the Kubernetes exec API), with a concurrency cap,
//! streaming each node's output as it arrives.
//!
//! The output of a node reaches the sink line by line (a line is capped at
//! [`MAX_LINE`] bytes; a longer run without a newline is cut into pieces), so a node that
//! prints invalid UTF-8 or a megabyte without a newline cannot stall or break the others.

use crate::fleet::NodeTarget;
use crate::node::{Output, Signal};
use crate::reach::Reach;
use std::sync::Arc;
use tokio::sync::{mpsc, Semaphore};

/// The longest piece of output delivered as one line.
pub const MAX_LINE: usize = 64 * 1024;

/// The exit status reported for a node that could not be reached (as ssh does).
pub const UNREACHABLE: i32 = 255;

/// The error of a node that was reached and ran the command, whose connection (or the
/// connection holder carrying it) went before the exit status came: not "unreachable".
pub const CONNECTION_LOST: &str = "the connection closed before the command reported its exit status";

/// The exit status reported for a command stopped at its time limit (as `timeout` does).
pub const TIMED_OUT: i32 = 124;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// What a fan-out reports as it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Line {
        node: usize,
        stream: Stream,
        text: String,
    },
    Done {
        node: usize,
        result: NodeResult,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeResult {
    /// Exit status (128+N for signal N); [`UNREACHABLE`] when the node could not run it.
    pub code: i32,
    /// Why the node could not run the command, if it could not.
    pub error: Option<String>,
}

/// What travels from the nodes' tasks to the receiver: whole lines of one node's stream
/// as one text (so a node printing short lines costs one hand-over per chunk of output,
/// not one per line), or the end of a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Chunk {
    /// Complete lines, each ending in `\n` (a `\r` before it dropped, invalid UTF-8
    /// replaced by U+FFFD, runs longer than [`MAX_LINE`] cut into lines).
    Lines {
        node: usize,
        stream: Stream,
        text: String,
    },
    Done {
        node: usize,
        result: NodeResult,
    },
}

/// The sending side of a fan-out's events.
pub type EventSender = mpsc::Sender<Chunk>;

/// The receiving side: events one line at a time ([`Events::recv`]) or whole chunks
/// ([`Events::recv_chunk`]), in the order they were sent.
pub struct Events {
    rx: mpsc::Receiver<Chunk>,
    /// The lines chunk being handed out line by line, and how far.
    current: Option<(usize, Stream, String, usize)>,
}

/// A channel for a fan-out's events holding up to `chunks` unread chunks.
pub fn channel(chunks: usize) -> (EventSender, Events) {
    let (tx, rx) = mpsc::channel(chunks);
    (tx, Events { rx, current: None })
}

impl Events {
    /// The next event; `None` when every sender is gone and all was read.
    pub async fn recv(&mut self) -> Option<Event> {
        loop {
            if let Some(e) = self.next_line() {
                return Some(e);
            }
            let chunk = self.rx.recv().await?;
            if let Some(done) = self.open(chunk) {
                return Some(done);
            }
        }
    }

    /// The next event if one has arrived already.
    pub fn try_recv(&mut self) -> Option<Event> {
        loop {
            if let Some(e) = self.next_line() {
                return Some(e);
            }
            let chunk = self.rx.try_recv().ok()?;
            if let Some(done) = self.open(chunk) {
                return Some(done);
            }
        }
    }

    /// The next chunk (the rest of one partly read by [`Events::recv`] first).
    pub async fn recv_chunk(&mut self) -> Option<Chunk> {
        match self.rest() {
            Some(c) => Some(c),
            None => self.rx.recv().await,
        }
    }

    /// The next chunk if one has arrived already.
    pub fn try_recv_chunk(&mut self) -> Option<Chunk> {
        self.rest().or_else(|| self.rx.try_recv().ok())
    }

    /// Start handing out a lines chunk; a `Done` is returned as its event.
    fn open(&mut self, chunk: Chunk) -> Option<Event> {
        match chunk {
            Chunk::Lines { node, stream, text } => {
                self.current = Some((node, stream, text, 0));
                None
            }
            Chunk::Done { node, result } => Some(Event::Done { node, result }),
        }
    }

    fn next_line(&mut self) -> Option<Event> {
        let (node, stream, text, pos) = self.current.as_mut()?;
        if *pos >= text.len() {
            self.current = None;
            return None;
        }
        let end = memchr::memchr(b'\n', &text.as_bytes()[*pos..]).map_or(text.len(), |i| *pos + i);
        let line = text[*pos..end].to_string();
        *pos = end + 1;
        Some(Event::Line {
            node: *node,
            stream: stream.clone(),
            text: line,
        })
    }

    fn rest(&mut self) -> Option<Chunk> {
        let (node, stream, text, pos) = self.current.take()?;
        (pos < text.len()).then(|| Chunk::Lines {
            node,
            stream,
            text: text[pos..].to_string(),
        })
    }
}

/// Splits a byte stream into lines, keeping the partial tail.
#[derive(Default)]
struct LineSplitter {
    buf: Vec<u8>,
}

impl LineSplitter {
    /// Split `data`, appending each line it completes to `out`, ending in `\n`.
    fn push(&mut self, mut data: &[u8], out: &mut Vec<u8>) {
        while !data.is_empty() {
            let room = MAX_LINE - self.buf.len();
            let window = &data[..room.min(data.len())];
            match memchr::memchr(b'\n', window) {
                Some(i) => {
                    if self.buf.is_empty() {
                        out.extend_from_slice(trim_cr(&window[..i]));
                    } else {
                        self.buf.extend_from_slice(&window[..i]);
                        out.extend_from_slice(trim_cr(&self.buf));
                        self.buf.clear();
                    }
                    out.push(b'\n');
                    data = &data[i + 1..];
                }
                None => {
                    self.buf.extend_from_slice(window);
                    data = &data[window.len()..];
                    if self.buf.len() >= MAX_LINE {
                        out.extend_from_slice(&self.buf);
                        out.push(b'\n');
                        self.buf.clear();
                    }
                }
            }
        }
    }

    /// The partial last line, if any, as a line.
    fn finish(&mut self, out: &mut Vec<u8>) {
        if !self.buf.is_empty() {
            out.extend_from_slice(trim_cr(&self.buf));
            out.push(b'\n');
            self.buf.clear();
        }
    }
}

/// Bytes as text without a copy when they are valid UTF-8; invalid bytes become U+FFFD.
fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

fn trim_cr(b: &[u8]) -> &[u8] {
    b.strip_suffix(b"\r").unwrap_or(b)
}

/// Run `command` on every node (at most `fanout` at once), reporting events on `tx`.
/// Returns when every node is done.
pub async fn run(reach: Reach, nodes: Vec<NodeTarget>, command: String, fanout: usize, tx: EventSender) {
    let jobs = nodes.into_iter().map(|n| (n, command.clone())).collect();
    run_each(reach, jobs, fanout, tx).await
}

/// Run a command of its own on each node (at most `fanout` at once).
pub async fn run_each(reach: Reach, jobs: Vec<(NodeTarget, String)>, fanout: usize, tx: EventSender) {
    let jobs = jobs.into_iter().map(|(n, c)| (n, c, Vec::new())).collect();
    run_each_with_input(reach, jobs, fanout, None, tx).await
}

/// Like [`run_each`], each command reading its bytes on stdin, then end of file. What a
/// command reads on stdin never appears in a process list on the node, as its command
/// line does: scripts with secrets in their environment, and files, travel this way.
/// A command still running after `limit` is stopped (TERM, then its channel closed; a
/// local one is killed) and reported as [`TIMED_OUT`], like pdsh's `-u`.
pub async fn run_each_with_input(
    reach: Reach,
    jobs: Vec<(NodeTarget, String, Vec<u8>)>,
    fanout: usize,
    limit: Option<std::time::Duration>,
    tx: EventSender,
) {
    let sem = Arc::new(Semaphore::new(fanout.max(1)));
    let mut tasks = Vec::new();
    for (node, command, input) in jobs {
        let (reach, tx, sem) = (reach.clone(), tx.clone(), sem.clone());
        tasks.push(tokio::spawn(async move {
            let _permit = sem.acquire_owned().await.expect("semaphore open");
            let index = node.index;
            let result = run_node(&reach, &node, &command, input, limit, &tx).await;
            let _ = tx.send(Chunk::Done { node: index, result }).await;
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
}

/// Send the lines gathered in `out` (emptying it), if any.
async fn send_lines(tx: &EventSender, node: usize, stream: Stream, out: &mut Vec<u8>) {
    if out.is_empty() {
        return;
    }
    let text = text(std::mem::take(out));
    let _ = tx.send(Chunk::Lines { node, stream, text }).await;
}

/// The result of a command stopped at its time limit.
fn timed_out(limit: std::time::Duration) -> NodeResult {
    NodeResult {
        code: TIMED_OUT,
        error: Some(format!("timed out after {limit:?}")),
    }
}

/// How much longer than a node's own limit the channel is given before it is closed.
const NODE_LIMIT_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// `command` run under coreutils' `timeout` on the node (TERM at `limit`, KILL 5 s later)
/// where the node has it. The channel's TERM alone is not enough: OpenSSH refuses to
/// signal a root login's session ("session signalling requires privilege separation":
/// sshd skips post-auth privilege separation for root), and closing the channel stops
/// only a command that writes.
fn limited(command: &str, limit: std::time::Duration) -> String {
    let q = crate::detach::quote(command);
    format!(
        "if command -v timeout >/dev/null 2>&1; then exec timeout -k 5 {:.3} sh -c {q}; else exec sh -c {q}; fi",
        limit.as_secs_f64()
    )
}

async fn run_node(
    reach: &Reach,
    node: &NodeTarget,
    command: &str,
    input: Vec<u8>,
    limit: Option<std::time::Duration>,
    tx: &EventSender,
) -> NodeResult {
    // The limit is kept on the node too (`limited`); the channel's own, a little later,
    // is the backstop.
    let command = match limit {
        Some(l) => limited(command, l),
        None => command.to_string(),
    };
    let node_limit = limit;
    let limit = limit.map(|l| l + NODE_LIMIT_GRACE);
    let ch = match reach.exec(node, &command).await {
        Ok(c) => c,
        Err(e) => {
            // The holder went after the request: the command may have run; the node
            // was reached, so its result is a lost connection, the holder's words after.
            let lost = matches!(
                e,
                crate::reach::ReachError::Ssh(crate::ssh::client::SshError::HolderLost { .. })
            );
            return NodeResult {
                code: UNREACHABLE,
                error: Some(if lost {
                    format!("{CONNECTION_LOST}: {e}")
                } else {
                    e.to_string()
                }),
            };
        }
    };
    let (mut so, mut se) = (LineSplitter::default(), LineSplitter::default());
    let mut status = None;
    let mut lines = Vec::new();
    // Stdin is written alongside the reading (a command may print before it has read all),
    // then closed, so a command reading stdin sees its end rather than waiting forever.
    let (mut ch, write) = ch.split();
    let feed = async {
        if !input.is_empty() {
            let _ = write.data(&input[..]).await;
        }
        let _ = write.eof().await;
    };
    let reading = async {
        while let Some(out) = ch.next().await {
            let stream = match out {
                Output::Stdout(data) => {
                    so.push(&data, &mut lines);
                    Stream::Stdout
                }
                Output::Stderr(data) => {
                    se.push(&data, &mut lines);
                    Stream::Stderr
                }
                Output::Exit(code) => {
                    status = Some(code);
                    continue;
                }
            };
            send_lines(tx, node.index, stream, &mut lines).await;
        }
    };
    let work = async { tokio::join!(feed, reading) };
    let stopped = match limit {
        Some(l) => tokio::time::timeout(l, work).await.is_err(),
        None => {
            work.await;
            false
        }
    };
    if stopped {
        // TERM to the command (OpenSSH passes signals on since 7.9), and the channel
        // closed: sshd closes the command's pipes, and its session counts no more (a
        // local command is killed).
        let _ = write.signal(Signal::Term).await;
        let _ = write.close().await;
    }
    so.finish(&mut lines);
    send_lines(tx, node.index, Stream::Stdout, &mut lines).await;
    se.finish(&mut lines);
    send_lines(tx, node.index, Stream::Stderr, &mut lines).await;
    if let (true, Some(l)) = (stopped, node_limit) {
        return timed_out(l);
    }
    match (status, node_limit) {
        // The node's `timeout` stopped it.
        (Some(TIMED_OUT), Some(l)) => timed_out(l),
        (Some(code), _) => NodeResult { code, error: None },
        (None, _) => NodeResult {
            code: UNREACHABLE,
            error: Some(CONNECTION_LOST.into()),
        },
    }
}

/// Run one command per node and collect (exit code, stdout, stderr) in the jobs' order;
/// a node that could not run it has [`UNREACHABLE`] and the reason in its stderr.
pub async fn collect(reach: Reach, jobs: Vec<(NodeTarget, String)>) -> Vec<(i32, String, String)> {
    collect_with_input(reach, jobs.into_iter().map(|(n, c)| (n, c, Vec::new())).collect()).await
}

/// Like [`collect`], each command reading its bytes on stdin ([`run_each_with_input`]).
pub async fn collect_with_input(
    reach: Reach,
    jobs: Vec<(NodeTarget, String, Vec<u8>)>,
) -> Vec<(i32, String, String)> {
    collect_within(reach, jobs, None).await
}

/// Like [`collect_with_input`], each command stopped after `limit` ([`TIMED_OUT`]).
pub async fn collect_within(
    reach: Reach,
    jobs: Vec<(NodeTarget, String, Vec<u8>)>,
    limit: Option<std::time::Duration>,
) -> Vec<(i32, String, String)> {
    let order: Vec<usize> = jobs.iter().map(|(n, _, _)| n.index).collect();
    let (tx, mut rx) = channel(1024);
    let h = tokio::spawn(run_each_with_input(reach, jobs, 64, limit, tx));
    let mut out: Vec<(i32, String, String)> = vec![(UNREACHABLE, String::new(), String::new()); order.len()];
    while let Some(c) = rx.recv_chunk().await {
        let (Chunk::Lines { node, .. } | Chunk::Done { node, .. }) = &c;
        let Some(k) = order.iter().position(|i| i == node) else {
            continue;
        };
        match c {
            Chunk::Lines { stream, text, .. } => match stream {
                Stream::Stdout => out[k].1.push_str(&text),
                Stream::Stderr => out[k].2.push_str(&text),
            },
            Chunk::Done { result, .. } => {
                out[k].0 = result.code;
                if let Some(err) = result.error {
                    out[k].2.push_str(&err);
                }
            }
        }
    }
    let _ = h.await;
    out
}

/// The worst (highest) exit status; 0 for no nodes.
pub fn worst(results: &[NodeResult]) -> i32 {
    results.iter().map(|r| r.code).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(chunks: &[&[u8]]) -> Vec<String> {
        let mut s = LineSplitter::default();
        let mut out = vec![];
        for c in chunks {
            s.push(c, &mut out);
        }
        s.finish(&mut out);
        text(out).split_terminator('\n').map(str::to_string).collect()
    }

    #[test]
    fn splitting_handles_partial_lines_crlf_and_bad_utf8() {
        assert_eq!(lines(&[b"a\nb", b"c\r\n", b"tail"]), vec!["a", "bc", "tail"]);
        assert_eq!(lines(&[b"\xff\xfeok\n"]), vec!["\u{fffd}\u{fffd}ok"]);
        let big = vec![b'x'; MAX_LINE * 2 + 10];
        let out = lines(&[&big]);
        assert_eq!(
            out.iter().map(|l| l.len()).collect::<Vec<_>>(),
            vec![MAX_LINE, MAX_LINE, 10]
        );
    }

    #[test]
    fn lines_cut_inside_a_character_and_empty_lines() {
        // A run cut at MAX_LINE inside a two-byte character: each half is replaced.
        let mut run = vec![b'a'; MAX_LINE - 1];
        run.extend_from_slice("é\n\n".as_bytes());
        let out = lines(&[&run[..10], &run[10..]]);
        assert_eq!(out.len(), 3);
        assert!(out[0].ends_with('\u{fffd}') && out[0].len() == MAX_LINE - 1 + 3);
        assert_eq!((out[1].as_str(), out[2].as_str()), ("\u{fffd}", ""));
    }

    #[tokio::test]
    async fn a_command_past_its_limit_is_stopped() {
        let (tx, mut rx) = channel(16);
        let jobs = vec![(
            local_node(0),
            "echo early; sleep 5; echo late".to_string(),
            vec![],
        )];
        let limit = Some(std::time::Duration::from_millis(300));
        tokio::spawn(run_each_with_input(Reach::without_ssh(), jobs, 1, limit, tx));
        let mut events = vec![];
        while let Some(e) = rx.recv().await {
            events.push(e);
        }
        assert_eq!(
            events,
            vec![
                Event::Line {
                    node: 0,
                    stream: Stream::Stdout,
                    text: "early".into()
                },
                Event::Done {
                    node: 0,
                    result: NodeResult {
                        code: TIMED_OUT,
                        error: Some("timed out after 300ms".into())
                    }
                }
            ]
        );
    }

    #[tokio::test]
    async fn input_reaches_stdin_and_ends() {
        let big: Vec<u8> = (0..300_000).map(|i| (i % 251) as u8).collect();
        let out = collect_with_input(
            Reach::without_ssh(),
            vec![
                (local_node(0), "wc -c; cat >/dev/null; echo done".into(), big),
                (local_node(1), "cat; echo".into(), vec![]),
            ],
        )
        .await;
        assert_eq!(out[0], (0, "300000\ndone\n".into(), String::new()));
        // No input: stdin is at its end at once, so `cat` does not wait.
        assert_eq!(out[1], (0, "\n".into(), String::new()));
    }

    #[tokio::test]
    async fn events_come_line_by_line_or_chunk_by_chunk_in_order() {
        let (tx, mut rx) = channel(8);
        let lines = |node, text: &str| Chunk::Lines {
            node,
            stream: Stream::Stdout,
            text: text.into(),
        };
        tx.send(lines(0, "a\nb\nc\n")).await.unwrap();
        tx.send(Chunk::Done {
            node: 0,
            result: NodeResult { code: 3, error: None },
        })
        .await
        .unwrap();
        tx.send(lines(1, "x\n")).await.unwrap();
        drop(tx);
        let line = |node, text: &str| Event::Line {
            node,
            stream: Stream::Stdout,
            text: text.into(),
        };
        assert_eq!(rx.recv().await, Some(line(0, "a")));
        // A chunk read after part of it went line by line is its rest.
        assert_eq!(rx.try_recv_chunk(), Some(lines(0, "b\nc\n")));
        assert!(matches!(rx.recv().await, Some(Event::Done { node: 0, result }) if result.code == 3));
        assert_eq!(rx.try_recv(), Some(line(1, "x")));
        assert_eq!(rx.recv().await, None);
        assert_eq!(rx.recv_chunk().await, None);
    }

    fn local_node(i: usize) -> NodeTarget {
        NodeTarget::local(i, format!("l-{i}"))
    }

    #[tokio::test]
    async fn local_fanout_reports_lines_and_codes() {
        let (tx, mut rx) = channel(1024);
        let nodes = (0..3).map(local_node).collect();
        let cmd = "echo out; echo err >&2; printf 'no newline'; exit 3".to_string();
        let h = tokio::spawn(run(Reach::without_ssh(), nodes, cmd, 2, tx));
        let mut events = vec![];
        while let Some(e) = rx.recv().await {
            events.push(e);
        }
        h.await.unwrap();
        for i in 0..3 {
            let mine: Vec<&Event> = events
                .iter()
                .filter(|e| matches!(e, Event::Line { node, .. } | Event::Done { node, .. } if *node == i))
                .collect();
            assert!(mine.contains(&&Event::Line {
                node: i,
                stream: Stream::Stdout,
                text: "out".into()
            }));
            assert!(mine.contains(&&Event::Line {
                node: i,
                stream: Stream::Stderr,
                text: "err".into()
            }));
            assert!(mine.contains(&&Event::Line {
                node: i,
                stream: Stream::Stdout,
                text: "no newline".into()
            }));
            assert_eq!(
                mine.last(),
                Some(&&Event::Done {
                    node: i,
                    result: NodeResult { code: 3, error: None }
                })
            );
        }
    }
}
