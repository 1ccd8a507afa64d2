//! How far a long operation has got (apply, bootstrap, delete, gc): its messages are
//! lines of text, and a *tally* line among them says `done` of `total`. Tallies travel
//! on the same channel as the messages, so every sink of an operation's progress gets
//! them: the CLI shows them on a status line that keeps the elapsed time (on a
//! terminal), the cockpit as a gauge over the operation's log. Neither prints them as
//! text. A question on the terminal ([`pause`]) takes the status line off the screen
//! until it is answered, so the ticker never writes over it.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TALLY: &str = "@@fd-tally ";

/// The tally line for `done` of `total` (`what`: "nodes up", "resources deleted").
pub fn tally(done: usize, total: usize, what: &str) -> String {
    format!("{TALLY}{done}/{total} {what}")
}

/// A tally line's `(done, total, what)`; `None` for any other line.
pub fn parse_tally(line: &str) -> Option<(usize, usize, &str)> {
    let rest = line.strip_prefix(TALLY)?;
    let (counts, what) = rest.split_once(' ').unwrap_or((rest, ""));
    let (done, total) = counts.split_once('/')?;
    Some((done.parse().ok()?, total.parse().ok()?, what))
}

/// `0:42`, `12:03`, `1:02:03`.
pub fn elapsed(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

struct Shown {
    label: String,
    tally: Option<(usize, usize, String)>,
    start: Instant,
    /// A status line is on the screen (it is cleared before a message is printed).
    drawn: bool,
    /// Questions open on the terminal ([`pause`]): the status line is off the screen and
    /// messages wait in `held` until the last answer.
    paused: usize,
    held: Vec<String>,
    /// The operation ended ([`Line`] dropped): a late [`Paused`] draws nothing.
    ended: bool,
}

/// The status line on the screen now, for [`pause`] and [`note`] (one at a time: the CLI
/// runs one long operation per command).
static ACTIVE: Mutex<Option<Arc<Mutex<Shown>>>> = Mutex::new(None);

fn active() -> Option<Arc<Mutex<Shown>>> {
    ACTIVE.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// While a question waits for the operator's answer on the terminal: the status line is
/// cleared and not redrawn (the ticker would write over the question), and the
/// operation's messages are held back; both come back when the last [`Paused`] drops.
#[must_use = "the status line stays paused only while the guard lives"]
pub struct Paused(Option<Arc<Mutex<Shown>>>);

/// Pause the status line (if one runs) for a question on the terminal.
pub fn pause() -> Paused {
    let shown = active();
    if let Some(s) = &shown {
        let mut s = s.lock().unwrap_or_else(|e| e.into_inner());
        s.paused += 1;
        clear(&mut s);
    }
    Paused(shown)
}

impl Drop for Paused {
    fn drop(&mut self) {
        let Some(s) = self.0.take() else { return };
        let mut s = s.lock().unwrap_or_else(|e| e.into_inner());
        s.paused = s.paused.saturating_sub(1);
        if s.paused > 0 || s.ended {
            return;
        }
        let held = std::mem::take(&mut s.held);
        let mut err = std::io::stderr().lock();
        for line in held {
            let _ = writeln!(err, "{line}");
        }
        drop(err);
        if std::io::stderr().is_terminal() {
            draw(&mut s);
        }
    }
}

/// A message of no operation in particular (an accepted host key): above the status line
/// when one runs (held while a question is open), else a line on stderr.
pub fn note(line: &str) {
    match active() {
        Some(s) => {
            let mut s = s.lock().unwrap_or_else(|e| e.into_inner());
            if s.paused > 0 {
                s.held.push(line.to_string());
                return;
            }
            clear(&mut s);
            let _ = writeln!(std::io::stderr(), "{line}");
            if std::io::stderr().is_terminal() {
                draw(&mut s);
            }
        }
        None => {
            let _ = writeln!(std::io::stderr(), "{line}");
        }
    }
}

fn clear(s: &mut Shown) {
    if s.drawn {
        let _ = write!(std::io::stderr(), "\r\x1b[2K");
        let _ = std::io::stderr().flush();
        s.drawn = false;
    }
}

impl Shown {
    fn text(&self) -> String {
        let counts = self
            .tally
            .as_ref()
            .map_or(String::new(), |(d, t, w)| format!(" · {d}/{t} {w}"));
        format!("{}{counts} · {}", self.label, elapsed(self.start.elapsed()))
    }
}

/// The CLI's sink for an operation's progress: messages go to stderr as lines; on a
/// terminal, a last line shows the label, the tally and the elapsed time, redrawn each
/// second and cleared when it ends. Off a terminal only the messages are written.
pub struct Line {
    shown: Arc<Mutex<Shown>>,
    tty: bool,
    stop: Arc<AtomicBool>,
    ticker: Option<std::thread::JoinHandle<()>>,
}

impl Line {
    pub fn start(label: &str) -> Line {
        let tty = std::io::stderr().is_terminal();
        let shown = Arc::new(Mutex::new(Shown {
            label: label.to_string(),
            tally: None,
            start: Instant::now(),
            drawn: false,
            paused: 0,
            held: Vec::new(),
            ended: false,
        }));
        *ACTIVE.lock().unwrap_or_else(|e| e.into_inner()) = Some(shown.clone());
        let stop = Arc::new(AtomicBool::new(false));
        let ticker = tty.then(|| {
            let (shown, stop) = (shown.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let mut s = shown.lock().unwrap_or_else(|e| e.into_inner());
                    if s.paused == 0 {
                        draw(&mut s);
                    }
                    drop(s);
                    std::thread::sleep(Duration::from_millis(250));
                }
            })
        });
        Line {
            shown,
            tty,
            stop,
            ticker,
        }
    }

    /// One line of the operation's progress: a tally updates the status line, anything
    /// else is printed above it.
    pub fn print(&self, line: &str) {
        let mut s = self.shown.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((done, total, what)) = parse_tally(line) {
            s.tally = Some((done, total, what.to_string()));
            if self.tty && s.paused == 0 {
                draw(&mut s);
            }
            return;
        }
        if s.paused > 0 {
            s.held.push(line.to_string());
            return;
        }
        clear(&mut s);
        let _ = writeln!(std::io::stderr(), "{line}");
        if self.tty {
            draw(&mut s);
        }
    }
}

fn draw(s: &mut Shown) {
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "\r\x1b[2K{}", s.text());
    let _ = err.flush();
    s.drawn = true;
}

impl Drop for Line {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
        let mut active = ACTIVE.lock().unwrap_or_else(|e| e.into_inner());
        if active.as_ref().is_some_and(|a| Arc::ptr_eq(a, &self.shown)) {
            *active = None;
        }
        drop(active);
        let mut s = self.shown.lock().unwrap_or_else(|e| e.into_inner());
        s.ended = true;
        clear(&mut s);
        // Messages held for a question that never got its answer are not lost.
        for line in std::mem::take(&mut s.held) {
            let _ = writeln!(std::io::stderr(), "{line}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tallies_round_trip_and_other_lines_are_not_tallies() {
        assert_eq!(parse_tally(&tally(3, 8, "nodes up")), Some((3, 8, "nodes up")));
        assert_eq!(parse_tally("  instance a: created"), None);
        assert_eq!(parse_tally("@@fd-tally x/8 nodes"), None);
        assert_eq!(elapsed(Duration::from_secs(42)), "0:42");
        assert_eq!(elapsed(Duration::from_secs(3723)), "1:02:03");
    }

    #[test]
    fn the_status_text_has_the_label_the_tally_and_the_time() {
        let s = Shown {
            label: "fleet apply mega".into(),
            tally: Some((1, 2, "nodes up".into())),
            start: Instant::now(),
            drawn: false,
            paused: 0,
            held: Vec::new(),
            ended: false,
        };
        assert_eq!(s.text(), "fleet apply mega · 1/2 nodes up · 0:00");
    }
}
