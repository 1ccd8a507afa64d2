//! How far a long operation has got (apply, bootstrap, delete, gc): its messages are
//! lines of text, and a *tally* line among them says `done` of `total`. Tallies travel
//! on the same channel as the messages, so every sink of an operation's progress gets
//! them: the CLI shows them on a status line that keeps the elapsed time (on a
//! terminal), the cockpit as a gauge over the operation's log. Neither prints them as
//! text.

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
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let ticker = tty.then(|| {
            let (shown, stop) = (shown.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    draw(&mut shown.lock().unwrap_or_else(|e| e.into_inner()));
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
            if self.tty {
                draw(&mut s);
            }
            return;
        }
        let mut err = std::io::stderr().lock();
        if s.drawn {
            let _ = write!(err, "\r\x1b[2K");
            s.drawn = false;
        }
        let _ = writeln!(err, "{line}");
        drop(err);
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
        let mut s = self.shown.lock().unwrap_or_else(|e| e.into_inner());
        if s.drawn {
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
            s.drawn = false;
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
        };
        assert_eq!(s.text(), "fleet apply mega · 1/2 nodes up · 0:00");
    }
}
