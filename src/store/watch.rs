//! Watching a directory for files written into it (inotify), without polling: nothing
//! runs while nothing changes. The state store writes `state.json.tmp` and renames it
//! over `state.json`, so a finished write is a rename into the directory (or a file
//! closed after writing, for writers that do not rename).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use tokio::io::unix::AsyncFd;

/// An inotify watch on one directory.
pub struct DirWatch {
    fd: AsyncFd<OwnedFd>,
}

impl DirWatch {
    pub fn new(dir: &Path) -> io::Result<DirWatch> {
        // SAFETY: inotify_init1 takes flags only; a negative return is an error.
        let raw = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a new descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let path = CString::new(dir.as_os_str().as_encoded_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in the path"))?;
        // SAFETY: the descriptor is open and the path is a valid C string.
        let wd = unsafe {
            libc::inotify_add_watch(
                fd.as_raw_fd(),
                path.as_ptr(),
                libc::IN_MOVED_TO | libc::IN_CLOSE_WRITE,
            )
        };
        if wd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the OwnedFd stays open, and the same descriptor, for as long as the
        // AsyncFd that owns it lives.
        let fd = unsafe { AsyncFd::register(fd) }?;
        Ok(DirWatch { fd })
    }

    /// Wait until `name` in the directory was renamed into place or closed after a write.
    pub async fn changed(&self, name: &str) -> io::Result<()> {
        loop {
            let mut guard = self.fd.readable().await?;
            match guard.try_io(|fd| read_names(fd.get_ref())) {
                Ok(Ok(names)) => {
                    if names.iter().any(|n| n == name) {
                        return Ok(());
                    }
                }
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => continue,
            }
        }
    }

    /// Throw away the events queued so far.
    pub fn drain(&self) {
        while let Ok(names) = read_names(self.fd.get_ref()) {
            if names.is_empty() {
                break;
            }
        }
    }
}

/// The names of the events readable now (empty at none; WouldBlock when there are none
/// and the caller should wait).
fn read_names(fd: &OwnedFd) -> io::Result<Vec<String>> {
    let mut buf = [0u8; 4096];
    // SAFETY: reading into a buffer we own, of its length.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let n = n as usize;
    let mut names = vec![];
    let header = std::mem::size_of::<libc::inotify_event>();
    let mut at = 0;
    while at + header <= n {
        // SAFETY: the kernel wrote a whole event header at `at` (checked against `n`);
        // read_unaligned because the buffer has no alignment guarantee.
        let ev: libc::inotify_event = unsafe { std::ptr::read_unaligned(buf[at..].as_ptr().cast()) };
        let len = ev.len as usize;
        let name = &buf[(at + header).min(n)..(at + header + len).min(n)];
        let name = name.split(|b| *b == 0).next().unwrap_or(&[]);
        names.push(String::from_utf8_lossy(name).into_owned());
        at += header + len;
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_file_renamed_into_the_directory_is_seen_and_others_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let w = DirWatch::new(dir.path()).unwrap();
        let wait = |name: &'static str| {
            let w = &w;
            async move { tokio::time::timeout(std::time::Duration::from_secs(5), w.changed(name)).await }
        };
        // Another file written: not what is waited for.
        std::fs::write(dir.path().join("other.txt"), "x").unwrap();
        std::fs::write(dir.path().join("state.json.tmp"), "{}").unwrap();
        std::fs::rename(dir.path().join("state.json.tmp"), dir.path().join("state.json")).unwrap();
        wait("state.json").await.expect("seen").unwrap();
        // Nothing more: waiting again times out.
        w.drain();
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(200), w.changed("state.json"))
                .await
                .is_err()
        );
    }
}
