//! The I/O edge: one sampler per node over one long-lived exec channel (SSH), or a local
//! `sh` for the local backend, its output parsed as it arrives and reported as
//! [`TelemetryEvent`]s on a channel. Each node runs in its own task; dropping the
//! [`Samplers`] stops them all (the remote loop ends at its next write to the closed
//! channel, within one interval).

use super::parse::{Hello, Item, Record, RecordParser};
use super::sampler::{self, Interval};
use crate::exec::Transport;
use crate::fleet::NodeTarget;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// What the samplers report.
#[derive(Debug, Clone)]
pub enum TelemetryEvent {
    /// A node's sampler started (again): its next record starts counting afresh.
    Hello { node: usize, hello: Hello },
    /// A sample. `arrived_unix_ns` only places a node whose clock counts from boot.
    Record {
        node: usize,
        record: Record,
        arrived_unix_ns: i64,
    },
    /// A line the sampler wrote on stderr.
    Stderr { node: usize, text: String },
    /// The node's sampler stopped or could not start; `retry_in` when it will try again.
    Down {
        node: usize,
        error: String,
        retry_in: Option<Duration>,
    },
}

/// How samplers behave.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub interval: Interval,
    /// Also sample GPU PCIe/NVLink throughput ([`sampler::Config::gpu_links`]).
    pub gpu_links: bool,
    /// Start a node's sampler again after it stops, waiting this long at first and twice
    /// as long each time up to `max_backoff` (`None`: report it down and stop).
    pub reconnect: Option<Duration>,
    pub max_backoff: Duration,
}

impl Options {
    pub fn once(interval: Interval) -> Options {
        Options {
            interval,
            gpu_links: false,
            reconnect: None,
            max_backoff: Duration::from_secs(30),
        }
    }

    pub fn live(interval: Interval) -> Options {
        Options {
            interval,
            gpu_links: false,
            reconnect: Some(Duration::from_secs(1)),
            max_backoff: Duration::from_secs(30),
        }
    }
}

/// The running samplers; dropping this stops them.
pub struct Samplers {
    tasks: Vec<JoinHandle<()>>,
}

impl Samplers {
    pub fn stop(self) {}
}

impl Drop for Samplers {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Start a sampler on every node. Events go to `tx` (whose fullness slows the readers
/// down rather than growing memory).
pub fn spawn(
    transport: Transport,
    nodes: Vec<NodeTarget>,
    options: Options,
    tx: mpsc::Sender<TelemetryEvent>,
) -> Samplers {
    let tasks = nodes
        .into_iter()
        .map(|node| {
            let (transport, tx) = (transport.clone(), tx.clone());
            tokio::spawn(async move { run_node(transport, node, options, tx).await })
        })
        .collect();
    Samplers { tasks }
}

fn unix_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

async fn run_node(
    transport: Transport,
    node: NodeTarget,
    options: Options,
    tx: mpsc::Sender<TelemetryEvent>,
) {
    let mut backoff = options.reconnect;
    let config = sampler::Config {
        interval: options.interval,
        gpu_links: options.gpu_links,
    };
    loop {
        let started = std::time::Instant::now();
        let result = match &transport {
            Transport::Local => run_local(node.index, config, &tx).await,
            Transport::Ssh { pool, resolver } => {
                let route = resolver.route(&node);
                match pool.exec_channel(&route, &sampler::remote_command(config)).await {
                    // The connection is the node's shared one (or the holder's): it stays
                    // while others use it.
                    Ok(ch) => run_ssh(ch, node.index, tx.clone()).await,
                    Err(e) => Err(e.to_string()),
                }
            }
        };
        let error = match result {
            Ok(()) => "the sampler stopped".to_string(),
            Err(e) => e,
        };
        if tx.is_closed() {
            return;
        }
        // A sampler that ran a good while resets the backoff.
        if started.elapsed() > Duration::from_secs(60) {
            backoff = options.reconnect;
        }
        let _ = tx
            .send(TelemetryEvent::Down {
                node: node.index,
                error,
                retry_in: backoff,
            })
            .await;
        let Some(wait) = backoff else { return };
        tokio::time::sleep(wait).await;
        backoff = Some((wait * 2).min(options.max_backoff));
    }
}

/// Parse a chunk and send what it completes. `Err` when the receiver is gone.
async fn forward(
    parser: &mut RecordParser,
    bytes: &[u8],
    node: usize,
    tx: &mpsc::Sender<TelemetryEvent>,
) -> Result<(), ()> {
    let mut items = Vec::new();
    parser.push(bytes, &mut items);
    let arrived = unix_ns();
    for it in items {
        let ev = match it {
            Item::Hello(hello) => TelemetryEvent::Hello { node, hello },
            Item::Record(record) => TelemetryEvent::Record {
                node,
                record,
                arrived_unix_ns: arrived,
            },
        };
        tx.send(ev).await.map_err(|_| ())?;
    }
    Ok(())
}

async fn stderr_lines(buf: &mut Vec<u8>, bytes: &[u8], node: usize, tx: &mpsc::Sender<TelemetryEvent>) {
    buf.extend_from_slice(bytes);
    while let Some(i) = buf.iter().position(|&b| b == b'\n') {
        let line: Vec<u8> = buf.drain(..=i).collect();
        let text = String::from_utf8_lossy(&line).trim_end().to_string();
        tracing::debug!(node, "sampler stderr: {text}");
        let _ = tx.send(TelemetryEvent::Stderr { node, text }).await;
    }
    if buf.len() > 4096 {
        buf.clear();
    }
}

/// Kills the local sampler's whole process group (its sleep and nvidia-smi readers).
struct GroupGuard(Option<u32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            // SAFETY: kill(2) with a negative pid signals the process group we created.
            unsafe {
                libc::kill(-(pid as i32), libc::SIGTERM);
            }
        }
    }
}

async fn run_local(
    node: usize,
    config: sampler::Config,
    tx: &mpsc::Sender<TelemetryEvent>,
) -> Result<(), String> {
    let argv = sampler::local_argv(config);
    let mut child = tokio::process::Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start sh: {e}"))?;
    let _guard = GroupGuard(child.id());
    let mut out = child.stdout.take().expect("piped stdout");
    let mut err = child.stderr.take().expect("piped stderr");
    let mut parser = RecordParser::new();
    let (mut bo, mut be) = (vec![0u8; 64 * 1024], vec![0u8; 4096]);
    let mut err_buf = Vec::new();
    let mut err_open = true;
    loop {
        tokio::select! {
            r = out.read(&mut bo) => match r {
                Ok(0) => break,
                Ok(n) => if forward(&mut parser, &bo[..n], node, tx).await.is_err() { return Ok(()) },
                Err(e) => return Err(format!("reading the sampler: {e}")),
            },
            r = err.read(&mut be), if err_open => match r {
                Ok(0) | Err(_) => err_open = false,
                Ok(n) => stderr_lines(&mut err_buf, &be[..n], node, tx).await,
            },
        }
    }
    let status = child.wait().await.map_err(|e| e.to_string())?;
    Err(format!("the sampler exited ({status})"))
}

async fn run_ssh(
    ch: crate::ssh::stream::ExecChannel,
    node: usize,
    tx: mpsc::Sender<TelemetryEvent>,
) -> Result<(), String> {
    use crate::ssh::stream::Output;
    let tx = &tx;
    let mut parser = RecordParser::new();
    let mut err_buf = Vec::new();
    let mut status = None;
    let (mut ch, write) = ch.split();
    while let Some(out) = ch.next().await {
        match out {
            Output::Stdout(data) => {
                let gone = forward(&mut parser, &data, node, tx).await.is_err();
                if gone {
                    let _ = write.close().await;
                    return Ok(());
                }
            }
            Output::Stderr(data) => stderr_lines(&mut err_buf, &data, node, tx).await,
            Output::Exit(s) => status = Some(s),
        }
    }
    Err(match status {
        Some(s) => format!("the sampler exited with status {s}"),
        None => "the connection closed".to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local_node() -> NodeTarget {
        NodeTarget {
            index: 3,
            name: "l-3".into(),
            host: "localhost".into(),
            port: None,
            user: None,
            identity_file: None,
            proxy_jump: None,
            internal_ip: None,
            kube: None,
        }
    }

    /// The local backend: a hello, then records one interval apart by the node's clock,
    /// each stamped with its arrival; dropping the samplers ends the stream.
    #[tokio::test]
    async fn local_sampler_streams_records() {
        let (tx, mut rx) = mpsc::channel(64);
        let interval = Interval::from_millis(100).unwrap();
        let samplers = spawn(Transport::Local, vec![local_node()], Options::once(interval), tx);
        let mut hello = None;
        let mut records = Vec::new();
        while records.len() < 3 {
            match tokio::time::timeout(Duration::from_secs(10), rx.recv()).await {
                Ok(Some(TelemetryEvent::Hello { node, hello: h })) => {
                    assert_eq!(node, 3);
                    hello = Some(h);
                }
                Ok(Some(TelemetryEvent::Record {
                    node,
                    record,
                    arrived_unix_ns,
                })) => {
                    assert_eq!(node, 3);
                    assert!(hello.is_some(), "the hello comes first");
                    assert!((arrived_unix_ns - record.t_ns).abs() < 5_000_000_000);
                    records.push(record);
                }
                Ok(Some(TelemetryEvent::Stderr { .. })) => {}
                other => panic!("unexpected: {other:?}"),
            }
        }
        assert_eq!(hello.unwrap().interval_ms, 100);
        assert_eq!(records.iter().map(|r| r.seq).collect::<Vec<_>>(), [1, 2, 3]);
        let dt = (records[2].t_ns - records[0].t_ns) as f64 / 2e6;
        assert!((50.0..400.0).contains(&dt), "{dt} ms between records");
        assert!(records[0].nics.iter().any(|n| n.name == "lo"));
        drop(samplers);
        // The task is gone: its sender with it.
        let end = tokio::time::timeout(Duration::from_secs(5), async {
            while rx.recv().await.is_some() {}
        })
        .await;
        assert!(end.is_ok(), "the stream did not end");
    }
}
