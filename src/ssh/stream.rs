//! A channel on a connection of this process as a node channel ([`crate::node::Channel`]):
//! its reader sees stdout, stderr and the exit status; its writer sends stdin, its end,
//! a signal, a window change, or closes. (A channel a connection holder relays is
//! [`super::mux`]'s.)

use super::client::{signal_number, Connection};
use crate::node::{BoxFuture, Channel, ChannelError, ChannelRead, ChannelWrite, Output, Signal};
use std::sync::Arc;

/// `channel`, opened on `conn`, as a node channel; the connection is held as long as
/// the channel's reader.
pub fn channel(conn: Arc<Connection>, channel: russh::Channel<russh::client::Msg>) -> Channel {
    let (read, write) = channel.split();
    Channel::new(SshReader { _conn: conn, read }, SshWriter(write))
}

struct SshReader {
    _conn: Arc<Connection>,
    read: russh::ChannelReadHalf,
}

impl ChannelRead for SshReader {
    fn next(&mut self) -> BoxFuture<'_, Option<Output>> {
        Box::pin(async move {
            loop {
                match self.read.wait().await? {
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
            }
        })
    }
}

struct SshWriter(russh::ChannelWriteHalf<russh::client::Msg>);

fn failed(e: russh::Error) -> ChannelError {
    ChannelError::Failed(e.to_string())
}

/// SSH's signal for `sig`.
fn ssh_signal(sig: &Signal) -> russh::Sig {
    use russh::Sig;
    match sig {
        Signal::Abrt => Sig::ABRT,
        Signal::Alrm => Sig::ALRM,
        Signal::Fpe => Sig::FPE,
        Signal::Hup => Sig::HUP,
        Signal::Ill => Sig::ILL,
        Signal::Int => Sig::INT,
        Signal::Kill => Sig::KILL,
        Signal::Pipe => Sig::PIPE,
        Signal::Quit => Sig::QUIT,
        Signal::Segv => Sig::SEGV,
        Signal::Term => Sig::TERM,
        Signal::Usr1 => Sig::USR1,
        Signal::Other(name) => Sig::Custom(name.clone()),
    }
}

impl ChannelWrite for SshWriter {
    fn data<'a>(&'a self, bytes: &'a [u8]) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(async move { self.0.data(bytes).await.map_err(failed) })
    }

    fn eof(&self) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(async move { self.0.eof().await.map_err(failed) })
    }

    /// OpenSSH passes signals on since 7.9 (not to a root login's session: see
    /// `exec::limited`).
    fn signal(&self, sig: Signal) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(async move { self.0.signal(ssh_signal(&sig)).await.map_err(failed) })
    }

    fn resize(&self, cols: u16, rows: u16) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(async move {
            self.0
                .window_change(u32::from(cols), u32::from(rows), 0, 0)
                .await
                .map_err(failed)
        })
    }

    /// sshd closes the command's pipes.
    fn close(&self) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(async move { self.0.close().await.map_err(failed) })
    }
}
