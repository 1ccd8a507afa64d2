//! Local pseudo-terminals for local nodes' shells (the local backend's panes): a login
//! shell on a new PTY, its master side read and written asynchronously, resized with
//! TIOCSWINSZ.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use tokio::io::unix::AsyncFd;

pub struct Pty {
    master: AsyncFd<OwnedFd>,
}

fn winsize(cols: u16, rows: u16) -> libc::winsize {
    libc::winsize {
        ws_row: rows.max(1),
        ws_col: cols.max(1),
        ws_xpixel: 0,
        ws_ypixel: 0,
    }
}

fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Start `program args` on a new PTY of `cols` x `rows`, as the leader of its own session
/// with the PTY as controlling terminal. Returns the master side and the child.
pub fn spawn(program: &str, args: &[&str], cols: u16, rows: u16) -> io::Result<(Pty, tokio::process::Child)> {
    let (mut master, mut slave): (RawFd, RawFd) = (-1, -1);
    let ws = winsize(cols, rows);
    // SAFETY: openpty writes two descriptors we then own; the termios pointer may be null.
    check(unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &ws,
        )
    })?;
    // SAFETY: both descriptors were just returned by openpty and are owned by nobody else.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        let flags = check(libc::fcntl(master.as_raw_fd(), libc::F_GETFL))?;
        check(libc::fcntl(
            master.as_raw_fd(),
            libc::F_SETFL,
            flags | libc::O_NONBLOCK,
        ))?;
        check(libc::fcntl(master.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC))?;
    }
    let mut cmd = std::process::Command::new(program);
    cmd.args(args)
        .env("TERM", "xterm-256color")
        .stdin(slave.try_clone()?)
        .stdout(slave.try_clone()?)
        .stderr(slave);
    // SAFETY: only async-signal-safe calls (setsid, ioctl) between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            check(libc::setsid())?;
            check(libc::ioctl(0, libc::TIOCSCTTY as _, 0))?;
            Ok(())
        });
    }
    let mut cmd = tokio::process::Command::from(cmd);
    cmd.kill_on_drop(true);
    let child = cmd.spawn()?;
    // SAFETY: `master` is an OwnedFd: its as_raw_fd() is the descriptor it owns and closes.
    let master = unsafe { AsyncFd::register(master) }.map_err(|e| e.into_parts().1)?;
    Ok((Pty { master }, child))
}

impl Pty {
    /// Read what the program wrote; `Ok(0)` when the PTY is closed (the program exited).
    pub async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let mut guard = self.master.readable().await?;
            match guard.try_io(|fd| {
                // SAFETY: reading into a buffer we own from a descriptor we own.
                let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            }) {
                Ok(Ok(n)) => return Ok(n),
                // EIO: the slave side is closed, i.e. the program and its children are gone.
                Ok(Err(e)) if e.raw_os_error() == Some(libc::EIO) => return Ok(0),
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => continue,
            }
        }
    }

    /// Write all of `data` to the program.
    pub async fn write_all(&self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let mut guard = self.master.writable().await?;
            match guard.try_io(|fd| {
                // SAFETY: writing from a buffer we own to a descriptor we own.
                let n = unsafe { libc::write(fd.as_raw_fd(), data.as_ptr().cast(), data.len()) };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            }) {
                Ok(Ok(n)) => data = &data[n..],
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => continue,
            }
        }
        Ok(())
    }

    /// Tell the program its window is now `cols` x `rows` (it gets SIGWINCH).
    pub fn resize(&self, cols: u16, rows: u16) -> io::Result<()> {
        let ws = winsize(cols, rows);
        // SAFETY: TIOCSWINSZ with a valid winsize on a descriptor we own.
        check(unsafe { libc::ioctl(self.master.get_ref().as_raw_fd(), libc::TIOCSWINSZ, &ws) }).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_shell_on_a_pty_echoes_and_sees_its_size() {
        let (pty, mut child) = spawn("sh", &[], 77, 19).unwrap();
        pty.write_all(b"stty size; echo done-$((40+2)); exit 7\n")
            .await
            .unwrap();
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = pty.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        let text = String::from_utf8_lossy(&out);
        assert!(text.contains("19 77"), "{text}");
        assert!(text.contains("done-42"), "{text}");
        assert_eq!(child.wait().await.unwrap().code(), Some(7));
    }

    #[tokio::test]
    async fn resize_reaches_the_program() {
        let (pty, mut child) = spawn("sh", &[], 80, 24).unwrap();
        pty.resize(100, 30).unwrap();
        pty.write_all(b"stty size; exit\n").await.unwrap();
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = pty.read(&mut buf).await {
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        assert!(String::from_utf8_lossy(&out).contains("30 100"));
        child.wait().await.unwrap();
    }
}
