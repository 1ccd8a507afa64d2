//! Owning the terminal: raw mode and the alternate screen on the way in, and restoring
//! them on every way out (quit, error, panic, Ctrl-Z).

use crossterm::cursor::{Hide, Show};
use crossterm::event::{
    DisableBracketedPaste, DisableMouseCapture, EnableBracketedPaste, EnableMouseCapture,
};
use crossterm::execute;
use crossterm::terminal::{disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;
use std::io::{self, Stdout};

pub type Tui = Terminal<CrosstermBackend<Stdout>>;

fn enter_modes() -> io::Result<()> {
    enable_raw_mode()?;
    execute!(
        io::stdout(),
        EnterAlternateScreen,
        Hide,
        EnableBracketedPaste,
        EnableMouseCapture
    )
}

/// Switch the terminal to raw mode and the alternate screen.
pub fn enter() -> io::Result<Tui> {
    install_panic_hook();
    if let Err(e) = enter_modes() {
        restore();
        return Err(e);
    }
    Terminal::new(CrosstermBackend::new(io::stdout()))
}

/// Leave raw mode and the alternate screen and show the cursor. Safe to call twice.
pub fn restore() {
    let _ = execute!(
        io::stdout(),
        DisableMouseCapture,
        DisableBracketedPaste,
        LeaveAlternateScreen,
        Show
    );
    let _ = disable_raw_mode();
}

/// Restores the terminal when dropped (quit and error paths).
pub struct RestoreGuard;

impl Drop for RestoreGuard {
    fn drop(&mut self) {
        restore();
    }
}

fn install_panic_hook() {
    use std::sync::Once;
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            tracing::error!("panic: {info}");
            previous(info);
        }));
    });
}

/// Whether a stop (ctrl-z) can hand the terminal to a shell that will resume us: not when
/// this process leads its session (nothing above it does job control, as under `ssh host
/// flightdeck`), nor when SIGTSTP is ignored (started by a shell without job control).
pub fn job_control() -> bool {
    // SAFETY: getpid/getsid take no pointers; sigaction with a null new action only reads
    // the current one into `old`, which we own.
    unsafe {
        if libc::getsid(0) == libc::getpid() {
            return false;
        }
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGTSTP, std::ptr::null(), &mut old) == 0
            && old.sa_sigaction == libc::SIG_IGN
        {
            return false;
        }
    }
    true
}

/// Ctrl-Z: give the terminal back to the shell and stop; on `fg`, take it again.
pub fn suspend<W: io::Write>(terminal: &mut Terminal<CrosstermBackend<W>>) -> io::Result<()> {
    restore();
    // SAFETY: raise() has no memory-safety preconditions; SIGTSTP stops the process
    // until the shell sends SIGCONT.
    unsafe {
        libc::raise(libc::SIGTSTP);
    }
    enter_modes()?;
    terminal.clear()
}
