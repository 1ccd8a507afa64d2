//! Questions on the operator's terminal for headless commands: unknown host keys
//! (y / N / a = accept all for this run) and key passphrases (read without echo). When
//! stdin is not a terminal nobody can answer, and the answer is no. While a question is
//! open, the status line of a long operation is off the screen ([`crate::progress::pause`]).

use crate::ssh::client::{BoxFuture, Prompter};
use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::Mutex;

#[derive(Default)]
pub struct TtyPrompter {
    /// One question at a time, even when many nodes connect at once.
    turn: Mutex<()>,
    accept_all: AtomicBool,
}

fn read_line() -> Option<String> {
    let mut s = String::new();
    std::io::stdin().lock().read_line(&mut s).ok()?;
    Some(s.trim().to_string())
}

/// Read a line with the terminal's echo off.
fn read_secret() -> Option<String> {
    use std::os::fd::AsRawFd;
    let fd = std::io::stdin().as_raw_fd();
    // SAFETY: termios calls on stdin's descriptor with a zeroed struct filled by tcgetattr.
    let mut term: libc::termios = unsafe { std::mem::zeroed() };
    let have = unsafe { libc::tcgetattr(fd, &mut term) } == 0;
    let saved = term;
    if have {
        term.c_lflag &= !libc::ECHO;
        unsafe { libc::tcsetattr(fd, libc::TCSANOW, &term) };
    }
    let line = read_line();
    if have {
        unsafe { libc::tcsetattr(fd, libc::TCSANOW, &saved) };
        errln!();
    }
    line
}

impl Prompter for TtyPrompter {
    fn confirm_host_key<'a>(&'a self, host: &'a str, fingerprint: &'a str) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            if !std::io::stdin().is_terminal() {
                return false;
            }
            let _turn = self.turn.lock().await;
            if self.accept_all.load(Ordering::SeqCst) {
                crate::progress::note(&crate::term::visible::text(&format!(
                    "{host}: accepted new host key {fingerprint}"
                )));
                return true;
            }
            let (host, fp) = (host.to_string(), fingerprint.to_string());
            let answer = tokio::task::spawn_blocking(move || {
                // The status line's ticker would write over the question.
                let _quiet = crate::progress::pause();
                err!("{host}: unknown host key {fp}.\nAccept and remember it? [y]es / [N]o / [a]ll new keys this run: ");
                let _ = std::io::stderr().flush();
                read_line()
            })
            .await
            .ok()
            .flatten()
            .unwrap_or_default()
            .to_ascii_lowercase();
            match answer.as_str() {
                "y" | "yes" => true,
                "a" | "all" => {
                    self.accept_all.store(true, Ordering::SeqCst);
                    true
                }
                _ => false,
            }
        })
    }

    fn passphrase<'a>(&'a self, key: &'a Path) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move {
            if !std::io::stdin().is_terminal() {
                return None;
            }
            let _turn = self.turn.lock().await;
            let key = key.display().to_string();
            tokio::task::spawn_blocking(move || {
                let _quiet = crate::progress::pause();
                err!("Passphrase for {key}: ");
                let _ = std::io::stderr().flush();
                read_secret().filter(|p| !p.is_empty())
            })
            .await
            .ok()
            .flatten()
        })
    }
}

/// Ask a yes/no question on the terminal (default no). Not a terminal: no.
pub fn confirm(question: &str) -> bool {
    if !std::io::stdin().is_terminal() {
        return false;
    }
    let _quiet = crate::progress::pause();
    err!("{question} [y/N] ");
    let _ = std::io::stderr().flush();
    matches!(
        read_line().as_deref().map(str::to_ascii_lowercase).as_deref(),
        Some("y" | "yes")
    )
}
