//! The bottom layer of reaching a node: what a running command's channel is, whoever
//! carries it. A [`Channel`] is read for the command's stdout, stderr and exit status
//! ([`Output`]) and written for its stdin, the end of its stdin, a signal, a resize of
//! its terminal and a close. Three families carry one:
//!
//! * [`local`]: a process on this machine (`sh -c`), or a login shell on a local PTY;
//! * `ssh::stream`: an SSH channel on a connection of this process, and `ssh::mux`: a
//!   channel a connection holder opened and relays over its socket;
//! * `cloud::gke::exec`: a command in a pod over the Kubernetes exec API.
//!
//! Each implements [`ChannelRead`] and [`ChannelWrite`]; they depend on this module,
//! never the reverse. `crate::reach` picks the family by the node's address.
//! [`kube`] holds the plain data of a Kubernetes node's address.

pub mod kube;
pub mod local;
pub mod pty;

use std::future::Future;
use std::pin::Pin;

/// A future a trait object can return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a command sends back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    Stdout(Vec<u8>),
    Stderr(Vec<u8>),
    /// The exit status; 128+N for a signal N, as a shell reports it.
    Exit(i32),
}

/// A signal for a command, by its name without `SIG` (SSH's names, RFC 4254 6.10).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signal {
    Abrt,
    Alrm,
    Fpe,
    Hup,
    Ill,
    Int,
    Kill,
    Pipe,
    Quit,
    Segv,
    Term,
    Usr1,
    /// Any other name (`WINCH`, `USR2`): passed on as it is.
    Other(String),
}

impl Signal {
    /// The name without `SIG`: `TERM`.
    pub fn name(&self) -> &str {
        match self {
            Signal::Abrt => "ABRT",
            Signal::Alrm => "ALRM",
            Signal::Fpe => "FPE",
            Signal::Hup => "HUP",
            Signal::Ill => "ILL",
            Signal::Int => "INT",
            Signal::Kill => "KILL",
            Signal::Pipe => "PIPE",
            Signal::Quit => "QUIT",
            Signal::Segv => "SEGV",
            Signal::Term => "TERM",
            Signal::Usr1 => "USR1",
            Signal::Other(n) => n,
        }
    }

    pub fn from_name(name: &str) -> Signal {
        match name {
            "ABRT" => Signal::Abrt,
            "ALRM" => Signal::Alrm,
            "FPE" => Signal::Fpe,
            "HUP" => Signal::Hup,
            "ILL" => Signal::Ill,
            "INT" => Signal::Int,
            "KILL" => Signal::Kill,
            "PIPE" => Signal::Pipe,
            "QUIT" => Signal::Quit,
            "SEGV" => Signal::Segv,
            "TERM" => Signal::Term,
            "USR1" => Signal::Usr1,
            other => Signal::Other(other.to_string()),
        }
    }

    /// The signal's number on Linux; 0 for a name without one here.
    pub fn number(&self) -> i32 {
        match self {
            Signal::Hup => 1,
            Signal::Int => 2,
            Signal::Quit => 3,
            Signal::Ill => 4,
            Signal::Abrt => 6,
            Signal::Fpe => 8,
            Signal::Kill => 9,
            Signal::Usr1 => 10,
            Signal::Segv => 11,
            Signal::Pipe => 13,
            Signal::Alrm => 14,
            Signal::Term => 15,
            Signal::Other(_) => 0,
        }
    }
}

/// Why writing to a channel failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChannelError {
    /// The command's stdin, or the whole channel, is closed.
    #[error("{0} is closed")]
    Closed(&'static str),
    /// The carrier has no such thing (the Kubernetes exec API carries no signals).
    #[error("{0}")]
    Unsupported(&'static str),
    /// The carrier failed (its own words).
    #[error("{0}")]
    Failed(String),
}

/// The reading half of a command's channel.
pub trait ChannelRead: Send {
    /// The next output; `None` once the channel is closed. An [`Output::Exit`] comes
    /// after the command's last output, when its carrier reports one.
    fn next(&mut self) -> BoxFuture<'_, Option<Output>>;
}

/// The writing half of a command's channel.
pub trait ChannelWrite: Send + Sync {
    /// Bytes to the command's stdin (its terminal, for a shell).
    fn data<'a>(&'a self, bytes: &'a [u8]) -> BoxFuture<'a, Result<(), ChannelError>>;
    /// The end of the command's stdin.
    fn eof(&self) -> BoxFuture<'_, Result<(), ChannelError>>;
    /// A signal to the command.
    fn signal(&self, sig: Signal) -> BoxFuture<'_, Result<(), ChannelError>>;
    /// The command's terminal is now `cols` x `rows` (nothing without a terminal).
    fn resize(&self, cols: u16, rows: u16) -> BoxFuture<'_, Result<(), ChannelError>>;
    /// Close the channel: the command's pipes close (a local command is killed).
    fn close(&self) -> BoxFuture<'_, Result<(), ChannelError>>;
}

/// A running command's channel, not yet split.
pub struct Channel {
    read: Box<dyn ChannelRead>,
    write: Box<dyn ChannelWrite>,
}

impl Channel {
    pub fn new(read: impl ChannelRead + 'static, write: impl ChannelWrite + 'static) -> Channel {
        Channel {
            read: Box::new(read),
            write: Box::new(write),
        }
    }

    /// The reading and the writing half, to use at once.
    pub fn split(self) -> (Box<dyn ChannelRead>, Box<dyn ChannelWrite>) {
        (self.read, self.write)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_keep_their_names() {
        for s in [Signal::Term, Signal::Kill, Signal::Other("WINCH".into())] {
            assert_eq!(Signal::from_name(s.name()), s);
        }
        assert_eq!(Signal::Term.name(), "TERM");
        assert_eq!(Signal::Kill.number(), 9);
    }
}
