//! A running command's channel, whoever carries it: a channel on a connection of this
//! process, or one a connection holder ([`super::mux`]) opened on its connection and
//! relays over its socket. Readers see stdout, stderr and the exit status; writers send
//! stdin, its end, a signal, or close.

use super::client::{signal_number, Connection};
use super::mux;
use std::sync::Arc;

/// What a command sends back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    Stdout(Vec<u8>),
    Stderr(Vec<u8>),
    /// The exit status; 128+N for a signal N, as a shell reports it.
    Exit(i32),
}

/// A command's channel, not yet split.
pub enum ExecChannel {
    /// A channel on this process's connection (held as long as the channel).
    Ssh {
        conn: Arc<Connection>,
        channel: russh::Channel<russh::client::Msg>,
    },
    /// A channel the connection holder opened, relayed over its socket.
    Mux(mux::Stream),
    /// A command in a pod of a GKE node, over the Kubernetes exec API.
    Kube(crate::cloud::gke::exec::KubeChannel),
}

impl ExecChannel {
    pub fn split(self) -> (ExecReader, ExecWriter) {
        match self {
            ExecChannel::Ssh { conn, channel } => {
                let (r, w) = channel.split();
                (ExecReader::Ssh { _conn: conn, read: r }, ExecWriter::Ssh(w))
            }
            ExecChannel::Mux(s) => {
                let (r, w) = s.split();
                (ExecReader::Mux(r), ExecWriter::Mux(w))
            }
            ExecChannel::Kube(k) => {
                let (r, w) = k.split();
                (ExecReader::Kube(r), ExecWriter::Kube(w))
            }
        }
    }

    /// Whether a connection holder carries it.
    pub fn via_holder(&self) -> bool {
        matches!(self, ExecChannel::Mux(_))
    }
}

pub enum ExecReader {
    Ssh {
        _conn: Arc<Connection>,
        read: russh::ChannelReadHalf,
    },
    Mux(mux::StreamReader),
    Kube(crate::cloud::gke::exec::KubeReader),
}

impl ExecReader {
    /// The next output; `None` once the channel is closed.
    pub async fn next(&mut self) -> Option<Output> {
        match self {
            ExecReader::Ssh { read, .. } => loop {
                match read.wait().await? {
                    russh::ChannelMsg::Data { data } => return Some(Output::Stdout(data.to_vec())),
                    russh::ChannelMsg::ExtendedData { data, ext: 1 } => {
                        return Some(Output::Stderr(data.to_vec()))
                    }
                    russh::ChannelMsg::ExitStatus { exit_status } => {
                        return Some(Output::Exit(exit_status as i32))
                    }
                    russh::ChannelMsg::ExitSignal { signal_name, .. } => {
                        return Some(Output::Exit(128 + signal_number(&signal_name) as i32))
                    }
                    _ => continue,
                }
            },
            ExecReader::Mux(r) => r.next().await,
            ExecReader::Kube(r) => r.next().await,
        }
    }
}

pub enum ExecWriter {
    Ssh(russh::ChannelWriteHalf<russh::client::Msg>),
    Mux(mux::StreamWriter),
    Kube(crate::cloud::gke::exec::KubeWriter),
}

impl ExecWriter {
    /// Bytes to the command's stdin.
    pub async fn data(&self, bytes: &[u8]) -> Result<(), String> {
        match self {
            ExecWriter::Ssh(w) => w.data(bytes).await.map_err(|e| e.to_string()),
            ExecWriter::Mux(w) => w.data(bytes).await,
            ExecWriter::Kube(w) => w.data(bytes).await,
        }
    }

    /// The end of the command's stdin.
    pub async fn eof(&self) -> Result<(), String> {
        match self {
            ExecWriter::Ssh(w) => w.eof().await.map_err(|e| e.to_string()),
            ExecWriter::Mux(w) => w.eof().await,
            ExecWriter::Kube(w) => w.eof().await,
        }
    }

    /// A signal to the command (OpenSSH passes signals on since 7.9).
    pub async fn signal(&self, sig: russh::Sig) -> Result<(), String> {
        match self {
            ExecWriter::Ssh(w) => w.signal(sig).await.map_err(|e| e.to_string()),
            ExecWriter::Mux(w) => w.signal(&sig).await,
            ExecWriter::Kube(w) => w.signal(sig).await,
        }
    }

    /// Close the channel: sshd closes the command's pipes.
    pub async fn close(&self) -> Result<(), String> {
        match self {
            ExecWriter::Ssh(w) => w.close().await.map_err(|e| e.to_string()),
            ExecWriter::Mux(w) => w.close().await,
            ExecWriter::Kube(w) => w.close().await,
        }
    }
}
