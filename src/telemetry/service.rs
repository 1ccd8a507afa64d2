//! The I/O edge: one sampler per node over one long-lived channel to it ([`Reach`]: SSH,
//! the Kubernetes exec API, or a local `sh`), its output parsed as it arrives and
//! reported as [`TelemetryEvent`]s on a channel. Each node runs in its own task; dropping
//! the [`Samplers`] stops them all (the channel is dropped: a local sampler is killed, a
//! remote one ends at its next write to the closed channel, within one interval).

use super::parse::{Hello, Item, Record, RecordParser};
use super::sampler::{self, Interval};
use crate::fleet::NodeTarget;
use crate::node::{Channel, Output};
use crate::reach::Reach;
use std::time::Duration;
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
    reach: Reach,
    nodes: Vec<NodeTarget>,
    options: Options,
    tx: mpsc::Sender<TelemetryEvent>,
) -> Samplers {
    let tasks = nodes
        .into_iter()
        .map(|node| {
            let (reach, tx) = (reach.clone(), tx.clone());
            tokio::spawn(async move { run_node(reach, node, options, tx).await })
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

async fn run_node(reach: Reach, node: NodeTarget, options: Options, tx: mpsc::Sender<TelemetryEvent>) {
    let mut backoff = options.reconnect;
    let config = sampler::Config {
        interval: options.interval,
        gpu_links: options.gpu_links,
        // A GKE node's debug pod sees the job pods' NICs only in their namespaces.
        pod_nics: matches!(node.address, crate::fleet::Address::Kube { .. }),
    };
    loop {
        let started = std::time::Instant::now();
        let result = match reach.exec(&node, &sampler::command(config)).await {
            // An SSH connection is the node's shared one (or the holder's): it stays while
            // others use it.
            Ok(ch) => run_channel(ch, node.index, tx.clone()).await,
            Err(e) => Err(e.to_string()),
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

async fn run_channel(ch: Channel, node: usize, tx: mpsc::Sender<TelemetryEvent>) -> Result<(), String> {
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
        NodeTarget::local(3, "l-3")
    }

    /// The local backend: a hello, then records one interval apart by the node's clock,
    /// each stamped with its arrival; dropping the samplers ends the stream.
    #[tokio::test]
    async fn local_sampler_streams_records() {
        let (tx, mut rx) = mpsc::channel(64);
        let interval = Interval::from_millis(100).unwrap();
        let samplers = spawn(
            Reach::without_ssh(),
            vec![local_node()],
            Options::once(interval),
            tx,
        );
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
