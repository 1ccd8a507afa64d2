//! This machine as a node: a command is `sh -c` in a child process (stdin, stdout and
//! stderr piped), a shell is a login shell on a new PTY ([`super::pty`]). Both are killed
//! when their channel is closed, or dropped while they run.

use super::pty::{self, Pty};
use super::{BoxFuture, Channel, ChannelError, ChannelRead, ChannelWrite, Output, Signal};
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};

/// The exit status reported when a child's own could not be read (as ssh reports a
/// command it could not run).
const NO_STATUS: i32 = 255;

/// Run `command` with `sh -c` on this machine.
pub fn exec(command: &str) -> std::io::Result<Channel> {
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let pid = Arc::new(Pid::of(&child));
    let stdin = child.stdin.take();
    let reader = ProcessReader {
        stdout: child.stdout.take(),
        stderr: child.stderr.take(),
        out_buf: vec![0u8; 32 * 1024],
        err_buf: vec![0u8; 32 * 1024],
        child,
        pid: pid.clone(),
        done: false,
    };
    let writer = ProcessWriter {
        stdin: tokio::sync::Mutex::new(stdin),
        pid,
    };
    Ok(Channel::new(reader, writer))
}

/// A login shell (`program -l`) on a new PTY of `cols` x `rows`; its output comes as
/// stdout.
pub fn shell(program: &str, cols: u16, rows: u16) -> std::io::Result<Channel> {
    let (pty, child) = pty::spawn(program, &["-l"], cols, rows)?;
    let pty = Arc::new(pty);
    let pid = Arc::new(Pid::of(&child));
    let reader = PtyReader {
        pty: pty.clone(),
        child,
        buf: vec![0u8; 64 * 1024],
        pid: pid.clone(),
        done: false,
    };
    Ok(Channel::new(reader, PtyWriter { pty, pid }))
}

/// The login shell for a local node's panes: `$SHELL`, else `/bin/sh`.
pub fn login_shell() -> String {
    std::env::var("SHELL")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "/bin/sh".into())
}

/// A child's pid, for signals, until the child has been waited for (then the pid may
/// be another process's).
struct Pid {
    pid: Option<i32>,
    ended: std::sync::Mutex<bool>,
}

impl Pid {
    fn of(child: &Child) -> Pid {
        Pid {
            pid: child.id().and_then(|p| i32::try_from(p).ok()),
            ended: std::sync::Mutex::new(false),
        }
    }

    fn kill(&self, sig: i32) -> Result<(), ChannelError> {
        if sig == 0 {
            return Err(ChannelError::Unsupported("no such signal on this machine"));
        }
        let ended = self.ended.lock().unwrap_or_else(|e| e.into_inner());
        match self.pid {
            Some(pid) if !*ended => {
                // SAFETY: kill(2) on our own child, which has not been waited for (`ended`
                // is set, under this lock, once it has), so the pid is still its.
                if unsafe { libc::kill(pid, sig) } < 0 {
                    return Err(ChannelError::Failed(std::io::Error::last_os_error().to_string()));
                }
                Ok(())
            }
            _ => Err(ChannelError::Closed("the command")),
        }
    }

    fn end(&self) {
        *self.ended.lock().unwrap_or_else(|e| e.into_inner()) = true;
    }
}

/// A child's status as a shell reports it: its code, or 128+N for a signal N.
fn status_code(waited: std::io::Result<std::process::ExitStatus>) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    match waited {
        Ok(s) => s
            .code()
            .or_else(|| s.signal().map(|n| 128 + n))
            .unwrap_or(NO_STATUS),
        Err(_) => NO_STATUS,
    }
}

/// Wait for the child, mark its pid ended and report its status.
async fn exit(child: &mut Child, pid: &Pid) -> Output {
    let waited = child.wait().await;
    pid.end();
    Output::Exit(status_code(waited))
}

/// Read from `r` if it is there; pending for ever if not.
async fn read_from<R: AsyncRead + Unpin>(r: Option<&mut R>, buf: &mut [u8]) -> std::io::Result<usize> {
    match r {
        Some(r) => r.read(buf).await,
        None => std::future::pending().await,
    }
}

struct ProcessReader {
    child: Child,
    stdout: Option<ChildStdout>,
    stderr: Option<ChildStderr>,
    out_buf: Vec<u8>,
    err_buf: Vec<u8>,
    pid: Arc<Pid>,
    /// The exit status was reported.
    done: bool,
}

impl ChannelRead for ProcessReader {
    fn next(&mut self) -> BoxFuture<'_, Option<Output>> {
        Box::pin(async move {
            loop {
                if self.done {
                    return None;
                }
                if self.stdout.is_none() && self.stderr.is_none() {
                    self.done = true;
                    return Some(exit(&mut self.child, &self.pid).await);
                }
                let this = &mut *self;
                tokio::select! {
                    r = read_from(this.stdout.as_mut(), &mut this.out_buf), if this.stdout.is_some() => match r {
                        Ok(n) if n > 0 => return Some(Output::Stdout(this.out_buf[..n].to_vec())),
                        _ => this.stdout = None,
                    },
                    r = read_from(this.stderr.as_mut(), &mut this.err_buf), if this.stderr.is_some() => match r {
                        Ok(n) if n > 0 => return Some(Output::Stderr(this.err_buf[..n].to_vec())),
                        _ => this.stderr = None,
                    },
                }
            }
        })
    }
}

impl Drop for ProcessReader {
    fn drop(&mut self) {
        // The child is killed as it drops (`kill_on_drop`): no signal for its pid after.
        self.pid.end();
    }
}

struct ProcessWriter {
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    pid: Arc<Pid>,
}

impl ChannelWrite for ProcessWriter {
    fn data<'a>(&'a self, bytes: &'a [u8]) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(async move {
            let mut stdin = self.stdin.lock().await;
            let w = stdin.as_mut().ok_or(ChannelError::Closed("stdin"))?;
            w.write_all(bytes)
                .await
                .map_err(|e| ChannelError::Failed(e.to_string()))
        })
    }

    fn eof(&self) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(async move {
            self.stdin.lock().await.take();
            Ok(())
        })
    }

    /// The signal to the `sh` running the command, as sshd signals a session's command.
    fn signal(&self, sig: Signal) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(async move { self.pid.kill(sig.number()) })
    }

    fn resize(&self, _cols: u16, _rows: u16) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(async { Ok(()) })
    }

    /// The command is killed (a process has no channel of its own to close).
    fn close(&self) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(async move {
            self.stdin.lock().await.take();
            match self.pid.kill(libc::SIGKILL) {
                Err(ChannelError::Closed(_)) => Ok(()),
                r => r,
            }
        })
    }
}

struct PtyReader {
    pty: Arc<Pty>,
    child: Child,
    buf: Vec<u8>,
    pid: Arc<Pid>,
    done: bool,
}

impl ChannelRead for PtyReader {
    fn next(&mut self) -> BoxFuture<'_, Option<Output>> {
        Box::pin(async move {
            if self.done {
                return None;
            }
            match self.pty.read(&mut self.buf).await {
                Ok(n) if n > 0 => Some(Output::Stdout(self.buf[..n].to_vec())),
                // The PTY closed: the shell and its children are gone.
                _ => {
                    self.done = true;
                    Some(exit(&mut self.child, &self.pid).await)
                }
            }
        })
    }
}

impl Drop for PtyReader {
    fn drop(&mut self) {
        self.pid.end();
    }
}

struct PtyWriter {
    pty: Arc<Pty>,
    pid: Arc<Pid>,
}

impl ChannelWrite for PtyWriter {
    fn data<'a>(&'a self, bytes: &'a [u8]) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(async move {
            self.pty
                .write_all(bytes)
                .await
                .map_err(|e| ChannelError::Failed(e.to_string()))
        })
    }

    fn eof(&self) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(async {
            Err(ChannelError::Unsupported(
                "a terminal's input ends with its EOF character, which is the typist's",
            ))
        })
    }

    fn signal(&self, sig: Signal) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(async move { self.pid.kill(sig.number()) })
    }

    fn resize(&self, cols: u16, rows: u16) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(async move {
            self.pty
                .resize(cols, rows)
                .map_err(|e| ChannelError::Failed(e.to_string()))
        })
    }

    /// The shell is killed.
    fn close(&self) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(async move {
            match self.pid.kill(libc::SIGKILL) {
                Err(ChannelError::Closed(_)) => Ok(()),
                r => r,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn drain(ch: Channel, input: &[u8]) -> (Vec<u8>, Vec<u8>, Option<i32>) {
        let (mut r, w) = ch.split();
        w.data(input).await.unwrap();
        w.eof().await.unwrap();
        let (mut out, mut err, mut code) = (vec![], vec![], None);
        while let Some(o) = r.next().await {
            match o {
                Output::Stdout(b) => out.extend(b),
                Output::Stderr(b) => err.extend(b),
                Output::Exit(c) => code = Some(c),
            }
        }
        (out, err, code)
    }

    #[tokio::test]
    async fn a_command_reads_stdin_and_reports_both_streams_and_its_status() {
        let ch = exec("cat; echo oops >&2; exit 3").unwrap();
        let (out, err, code) = drain(ch, b"hello\n").await;
        assert_eq!(
            (&out[..], &err[..], code),
            (&b"hello\n"[..], &b"oops\n"[..], Some(3))
        );
    }

    #[tokio::test]
    async fn a_signal_or_a_close_ends_the_command() {
        let ch = exec("sleep 30").unwrap();
        let (mut r, w) = ch.split();
        w.signal(Signal::Term).await.unwrap();
        assert_eq!(r.next().await, Some(Output::Exit(128 + 15)));
        assert_eq!(r.next().await, None);
        assert!(w.signal(Signal::Term).await.is_err(), "no signal once it ended");
        let ch = exec("sleep 30").unwrap();
        let (mut r, w) = ch.split();
        w.close().await.unwrap();
        assert_eq!(r.next().await, Some(Output::Exit(128 + 9)));
    }

    #[tokio::test]
    async fn a_shell_on_a_pty_sees_its_size_and_exits() {
        let ch = shell("sh", 70, 11).unwrap();
        let (mut r, w) = ch.split();
        w.resize(50, 7).await.unwrap();
        w.data(b"stty size; exit 5\n").await.unwrap();
        let mut out = vec![];
        let code = loop {
            match r.next().await {
                Some(Output::Stdout(b)) => out.extend(b),
                Some(Output::Exit(c)) => break c,
                other => panic!("{other:?}"),
            }
        };
        assert!(String::from_utf8_lossy(&out).contains("7 50"));
        assert_eq!(code, 5);
    }
}
