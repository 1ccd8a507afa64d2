//! Pane terminals: a vt100 emulator per pane (shared with the task that feeds it, read
//! only while drawing), its rendering into ratatui, keys to terminal bytes, copy-mode
//! snapshots of the scrollback, and OSC 52 to put text on the operator's clipboard.

pub mod session;
pub mod visible;

use crate::config::ColorDepth;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use std::sync::{Arc, RwLock};

/// Scrollback lines kept per pane.
pub const SCROLLBACK: usize = 10_000;

/// A pane's terminal: the emulated screen (what is shown), and the scrollback as plain
/// text lines (what copy mode searches and yanks). vt100 0.15's own scrollback cannot be
/// read back past one screen and costs a full cell row per line, so the scrollback is
/// kept here instead: output bytes, escape sequences stripped, carriage returns and
/// backspaces applied, nothing logged while a full-screen program holds the alternate
/// screen. Bounded to [`SCROLLBACK`] lines.
///
/// vt100 does not reflow on resize (a narrower screen cuts its rows, a wider one keeps
/// them cut), so the normal screen's output is also kept as bytes, bounded to
/// [`REPLAY`], and a resize replays them into a parser of the new size: the lines wrap
/// to the new width as they did when printed, as tmux and terminal emulators reflow. A
/// full-screen program's alternate screen is not logged: it is resized as it is and
/// redraws itself on SIGWINCH; the normal screen under it is rebuilt when it ends.
pub struct PaneTerm {
    parser: vt100::Parser,
    log: LineLog,
    log_parser: vte::Parser,
    /// The normal screen's output bytes, the newest [`REPLAY`] of them (from a line start).
    raw: Vec<u8>,
    /// Where the newest escape sequence began in `raw`: entering the alternate screen
    /// takes its sequence out again.
    esc_at: usize,
    /// Resized while the alternate screen was shown: rebuild the normal one when it ends.
    reflow_due: bool,
}

/// The normal screen's output kept for reflowing it on resize (bytes).
pub const REPLAY: usize = 256 * 1024;

/// A pane's terminal, written by its session task, read-locked only while drawing.
pub type SharedScreen = Arc<RwLock<PaneTerm>>;

pub fn new_screen(rows: u16, cols: u16) -> SharedScreen {
    Arc::new(RwLock::new(PaneTerm::new(rows, cols)))
}

impl PaneTerm {
    pub fn new(rows: u16, cols: u16) -> PaneTerm {
        PaneTerm {
            parser: vt100::Parser::new(rows.max(1), cols.max(1), 0),
            log: LineLog::default(),
            log_parser: vte::Parser::new(),
            raw: vec![],
            esc_at: 0,
            reflow_due: false,
        }
    }

    pub fn process(&mut self, bytes: &[u8]) {
        self.parser.process(bytes);
        for &b in bytes {
            let was = self.log.alternate;
            if b == 0x1b {
                self.esc_at = self.raw.len();
            }
            self.log_parser.advance(&mut self.log, b);
            match (was, self.log.alternate) {
                (false, false) => self.raw.push(b),
                (false, true) => self.raw.truncate(self.esc_at),
                _ => {}
            }
        }
        if self.raw.len() > 2 * REPLAY {
            // Keep the newest REPLAY bytes, from the start of a line.
            let from = self.raw.len() - REPLAY;
            let from = self.raw[from..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(from, |i| from + i + 1);
            self.raw.drain(..from);
            self.esc_at = 0;
        }
        if self.reflow_due && !self.log.alternate {
            self.reflow_due = false;
            let (rows, cols) = self.parser.screen().size();
            self.rebuild(rows, cols);
        }
    }

    /// A new parser of `rows` x `cols` that has seen the normal screen's kept output,
    /// with the input modes (application cursor, bracketed paste, mouse) of the old one.
    fn rebuild(&mut self, rows: u16, cols: u16) {
        let modes = self.parser.screen().input_mode_formatted();
        let mut parser = vt100::Parser::new(rows, cols, 0);
        parser.process(&self.raw);
        parser.process(&modes);
        self.parser = parser;
    }

    pub fn screen(&self) -> &vt100::Screen {
        self.parser.screen()
    }

    /// Resize the screen. The normal screen is rebuilt at the new size from its kept
    /// output (reflowed: the lines wrap to the new width, a taller screen shows older
    /// lines again, and the bottom, where the cursor is, stays in view, as in tmux). A
    /// full-screen program's screen is resized as it is and left to redraw itself.
    pub fn set_size(&mut self, rows: u16, cols: u16) {
        let (rows, cols) = (rows.max(1), cols.max(1));
        if self.parser.screen().size() == (rows, cols) {
            return;
        }
        if self.log.alternate {
            self.parser.set_size(rows, cols);
            self.reflow_due = true;
        } else {
            self.rebuild(rows, cols);
        }
    }

    /// The rows of the scrollback view `offset` rows above the bottom, `height` of them:
    /// the pane's lines (as copy mode has them) wrapped to `width`, and how many rows
    /// they make in all. For the wheel over a pane.
    pub fn scrolled_rows(&self, width: u16, height: u16, offset: usize) -> (Vec<String>, usize) {
        let lines = self.lines();
        let width = usize::from(width.max(1));
        let mut rows: Vec<String> = lines.iter().flat_map(|l| wrap_chars(l, width)).collect();
        let total = rows.len();
        let end = total.saturating_sub(offset);
        let start = end.saturating_sub(usize::from(height));
        rows.truncate(end);
        (rows.split_off(start), total)
    }

    /// Every line of the pane for copy mode: the scrollback log and the line being
    /// written; while a full-screen program runs, its screen.
    pub fn lines(&self) -> Vec<String> {
        if self.log.alternate {
            let (_, cols) = self.parser.screen().size();
            let mut rows: Vec<String> = self.parser.screen().rows(0, cols).collect();
            while rows.last().is_some_and(|l| l.trim().is_empty()) {
                rows.pop();
            }
            return rows;
        }
        let mut out: Vec<String> = self.log.lines.iter().cloned().collect();
        if !self.log.current.is_empty() {
            out.push(self.log.current.clone());
        }
        out
    }
}

/// `line` in rows of `width` characters (tabs as four spaces); an empty line is one row.
pub fn wrap_chars(line: &str, width: usize) -> Vec<String> {
    let chars: Vec<char> = line.replace('\t', "    ").chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    chars.chunks(width.max(1)).map(|c| c.iter().collect()).collect()
}

/// The plain-text log of a byte stream (a vte performer).
#[derive(Default)]
struct LineLog {
    lines: std::collections::VecDeque<String>,
    current: String,
    /// A carriage return was seen: the next character starts the line again.
    cr: bool,
    alternate: bool,
}

impl vte::Perform for LineLog {
    fn print(&mut self, c: char) {
        if self.alternate {
            return;
        }
        if self.cr {
            self.current.clear();
            self.cr = false;
        }
        if self.current.len() < crate::exec::MAX_LINE {
            self.current.push(c);
        }
    }

    fn execute(&mut self, byte: u8) {
        if self.alternate {
            return;
        }
        match byte {
            b'\n' => {
                self.lines.push_back(std::mem::take(&mut self.current));
                self.cr = false;
                while self.lines.len() > SCROLLBACK {
                    self.lines.pop_front();
                }
            }
            b'\r' => self.cr = true,
            0x08 => {
                self.current.pop();
            }
            b'\t' => self.print('\t'),
            _ => {}
        }
    }

    fn csi_dispatch(&mut self, params: &vte::Params, intermediates: &[u8], _ignore: bool, action: char) {
        // DECSET/DECRST 1049, 1047, 47: the alternate screen.
        if intermediates == b"?" && (action == 'h' || action == 'l') {
            let alt = params.iter().any(|p| matches!(p.first(), Some(1049 | 1047 | 47)));
            if alt {
                self.alternate = action == 'h';
            }
        }
    }
}

fn color(c: vt100::Color, depth: ColorDepth) -> Option<Color> {
    match c {
        vt100::Color::Default => None,
        vt100::Color::Idx(i) => Some(depth.map(Color::Indexed(i))),
        vt100::Color::Rgb(r, g, b) => Some(depth.map(Color::Rgb(r, g, b))),
    }
}

/// Draw `screen` into `area` (top-left aligned, clipped). `colors`: the terminal's colour
/// depth, which the program's colours are mapped down to (a 24-bit colour from a shell in
/// a pane reaches a 256-colour terminal as its nearest palette entry, as the cockpit's own
/// do); `None` (monochrome, `NO_COLOR`) drops colours and keeps only attributes. Returns
/// where the cursor is, if visible in `area`.
pub fn render_screen(
    screen: &vt100::Screen,
    area: Rect,
    buf: &mut Buffer,
    colors: Option<ColorDepth>,
) -> Option<(u16, u16)> {
    let (rows, cols) = screen.size();
    for r in 0..rows.min(area.height) {
        for c in 0..cols.min(area.width) {
            let Some(cell) = screen.cell(r, c) else { continue };
            if cell.is_wide_continuation() {
                continue;
            }
            let mut style = Style::new();
            if let Some(depth) = colors {
                if let Some(fg) = color(cell.fgcolor(), depth) {
                    style = style.fg(fg);
                }
                if let Some(bg) = color(cell.bgcolor(), depth) {
                    style = style.bg(bg);
                }
            }
            let mut m = Modifier::empty();
            if cell.bold() {
                m |= Modifier::BOLD;
            }
            if cell.italic() {
                m |= Modifier::ITALIC;
            }
            if cell.underline() {
                m |= Modifier::UNDERLINED;
            }
            if cell.inverse() {
                m |= Modifier::REVERSED;
            }
            style = style.add_modifier(m);
            let text = cell.contents();
            let bc = &mut buf[(area.x + c, area.y + r)];
            bc.set_symbol(if text.is_empty() { " " } else { &text });
            bc.set_style(style);
        }
    }
    let (cr, cc) = screen.cursor_position();
    (!screen.hide_cursor() && screen.scrollback() == 0 && cr < area.height && cc < area.width)
        .then_some((area.x + cc, area.y + cr))
}

/// The bytes a terminal sends for a key press (xterm conventions). `app_cursor` is the
/// screen's application-cursor mode (DECCKM), which changes the arrow keys.
pub fn key_to_bytes(key: &KeyEvent, app_cursor: bool) -> Vec<u8> {
    let alt = key.modifiers.contains(KeyModifiers::ALT);
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    let mut out = Vec::new();
    if alt {
        out.push(0x1b);
    }
    let csi = |s: &str| format!("\x1b[{s}").into_bytes();
    let arrow = |c: char| {
        if app_cursor {
            format!("\x1bO{c}").into_bytes()
        } else {
            format!("\x1b[{c}").into_bytes()
        }
    };
    let bytes: Vec<u8> = match key.code {
        KeyCode::Char(c) if ctrl => match c.to_ascii_lowercase() {
            c @ 'a'..='z' => vec![c as u8 - b'a' + 1],
            ' ' | '@' | '2' => vec![0],
            '[' | '3' => vec![0x1b],
            '\\' | '4' => vec![0x1c],
            ']' | '5' => vec![0x1d],
            '^' | '6' => vec![0x1e],
            '_' | '7' | '-' => vec![0x1f],
            '?' | '8' => vec![0x7f],
            other => other.to_string().into_bytes(),
        },
        KeyCode::Char(c) => c.to_string().into_bytes(),
        KeyCode::Enter => vec![b'\r'],
        KeyCode::Tab => vec![b'\t'],
        KeyCode::BackTab => csi("Z"),
        KeyCode::Backspace => vec![0x7f],
        KeyCode::Esc => vec![0x1b],
        KeyCode::Up => arrow('A'),
        KeyCode::Down => arrow('B'),
        KeyCode::Right => arrow('C'),
        KeyCode::Left => arrow('D'),
        KeyCode::Home => arrow('H'),
        KeyCode::End => arrow('F'),
        KeyCode::Insert => csi("2~"),
        KeyCode::Delete => csi("3~"),
        KeyCode::PageUp => csi("5~"),
        KeyCode::PageDown => csi("6~"),
        KeyCode::F(n) => match n {
            1 => b"\x1bOP".to_vec(),
            2 => b"\x1bOQ".to_vec(),
            3 => b"\x1bOR".to_vec(),
            4 => b"\x1bOS".to_vec(),
            5 => csi("15~"),
            6 => csi("17~"),
            7 => csi("18~"),
            8 => csi("19~"),
            9 => csi("20~"),
            10 => csi("21~"),
            11 => csi("23~"),
            12 => csi("24~"),
            _ => vec![],
        },
        _ => vec![],
    };
    if bytes.is_empty() {
        return vec![];
    }
    out.extend(bytes);
    out
}

/// Every line of a pane, for copy mode (see [`PaneTerm::lines`]).
pub fn snapshot_lines(screen: &SharedScreen) -> Vec<String> {
    screen.read().unwrap_or_else(|e| e.into_inner()).lines()
}

/// The OSC 52 sequence that sets the clipboard of the terminal flightdeck runs in (and,
/// through SSH and tmux with `set-clipboard on`, the operator's own).
pub fn osc52(text: &str) -> String {
    format!("\x1b]52;c;{}\x07", data_encoding::BASE64.encode(text.as_bytes()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn shrinking_keeps_the_newest_lines_in_view() {
        // `clear; seq 1 15` on a 24-row pane, then the pane shrinks to 8 rows (unzoom).
        let mut t = PaneTerm::new(24, 80);
        let mut out = String::from("\x1b[H\x1b[2J");
        for i in 1..=15 {
            out.push_str(&format!("{i}\r\n"));
        }
        out.push_str("$ ");
        t.process(out.as_bytes());
        t.set_size(8, 80);
        let rows: Vec<String> = t.screen().rows(0, 80).collect();
        assert_eq!(rows, ["9", "10", "11", "12", "13", "14", "15", "$ "]);
        assert_eq!(
            t.screen().cursor_position(),
            (7, 2),
            "the cursor after the prompt"
        );
        // Growing again pulls the lines above back into view, as tmux does; the log has
        // every line once.
        t.set_size(24, 80);
        assert_eq!(t.screen().rows(0, 80).next().unwrap(), "1");
        assert_eq!(t.screen().cursor_position(), (15, 2));
        let log = t.lines();
        assert_eq!(log.iter().filter(|l| *l == "9").count(), 1, "{log:?}");
        // Output that fits stays put: a shrink above the cursor changes nothing.
        let mut small = PaneTerm::new(24, 80);
        small.process(b"a\r\nb\r\n$ ");
        small.set_size(8, 80);
        assert_eq!(
            small.screen().rows(0, 80).take(3).collect::<Vec<_>>(),
            ["a", "b", "$ "]
        );
    }

    use super::*;

    /// Issue 29 (UX walk ranked 6): a 150-character line printed at 160 columns, the pane
    /// narrowed to 80 and widened again: the whole line both times, wrapped then whole.
    #[test]
    fn resizing_reflows_the_normal_screen() {
        let mut t = PaneTerm::new(46, 158);
        let line: String = (0..150).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
        t.process(format!("$ echo long\r\n\x1b[32m{line}\x1b[0m\r\n$ ").as_bytes());
        t.set_size(22, 78);
        let rows: Vec<String> = t.screen().rows(0, 78).collect();
        assert_eq!(rows[1], line[..78], "{rows:?}");
        assert_eq!(rows[2], line[78..], "the rest on the next row, not cut");
        assert_eq!(rows[3], "$ ");
        assert_eq!(t.screen().cursor_position(), (3, 2));
        assert_eq!(
            t.screen().cell(1, 0).unwrap().fgcolor(),
            vt100::Color::Idx(2),
            "colours kept"
        );
        t.set_size(46, 158);
        let rows: Vec<String> = t.screen().rows(0, 158).collect();
        assert_eq!(rows[1], line, "whole again at the wider size");
        assert_eq!(rows[2], "$ ");
        // More lines than a small screen holds: the bottom stays, growing brings the
        // top back.
        let mut t = PaneTerm::new(10, 40);
        for i in 0..30 {
            t.process(format!("row-{i}\r\n").as_bytes());
        }
        t.set_size(5, 40);
        assert_eq!(t.screen().rows(0, 40).next().unwrap(), "row-26");
        t.set_size(10, 40);
        assert_eq!(t.screen().rows(0, 40).next().unwrap(), "row-21");
        // The input modes a program set survive the rebuild.
        t.process(b"\x1b[?1h\x1b[?2004h");
        t.set_size(8, 30);
        assert!(t.screen().application_cursor() && t.screen().bracketed_paste());
    }

    /// A full-screen program's screen is resized as it is (it redraws itself); the
    /// normal screen under it is reflowed when it ends, and its output is not replayed.
    #[test]
    fn the_alternate_screen_is_left_to_its_program_and_the_normal_one_reflowed_after() {
        let mut t = PaneTerm::new(10, 60);
        let line = "x".repeat(55);
        t.process(format!("{line}\r\n$ vim\r\n").as_bytes());
        t.process(b"\x1b[?1049h\x1b[Hvim screen");
        t.set_size(10, 30);
        assert!(t.screen().alternate_screen());
        assert_eq!(t.screen().rows(0, 30).next().unwrap(), "vim screen");
        t.process(b"\x1b[?1049l$ ");
        let rows: Vec<String> = t.screen().rows(0, 30).collect();
        assert_eq!(rows[0], "x".repeat(30));
        assert_eq!(rows[1], "x".repeat(25));
        assert_eq!(rows[2], "$ vim");
        assert!(!rows.iter().any(|r| r.contains("vim screen")), "{rows:?}");
        assert!(
            !t.raw.windows(4).any(|w| w == b"1049"),
            "no alternate screen kept"
        );
    }

    #[test]
    fn the_scrollback_view_wraps_lines_to_the_pane() {
        let mut t = PaneTerm::new(4, 10);
        for i in 0..6 {
            t.process(format!("{i}-{}\r\n", "y".repeat(12)).as_bytes());
        }
        let (rows, total) = t.scrolled_rows(10, 3, 0);
        assert_eq!(total, 12, "six lines of 14 characters, two rows each");
        assert_eq!(rows, ["yyyy", "5-yyyyyyyy", "yyyy"]);
        let (rows, _) = t.scrolled_rows(10, 3, 10);
        assert_eq!(rows, ["0-yyyyyyyy", "yyyy"]);
    }

    fn k(code: KeyCode, m: KeyModifiers) -> Vec<u8> {
        key_to_bytes(&KeyEvent::new(code, m), false)
    }

    #[test]
    fn keys_become_terminal_bytes() {
        assert_eq!(k(KeyCode::Char('a'), KeyModifiers::NONE), b"a");
        assert_eq!(k(KeyCode::Char('c'), KeyModifiers::CONTROL), vec![3]);
        assert_eq!(k(KeyCode::Char('x'), KeyModifiers::ALT), b"\x1bx");
        assert_eq!(k(KeyCode::Enter, KeyModifiers::NONE), b"\r");
        assert_eq!(k(KeyCode::Up, KeyModifiers::NONE), b"\x1b[A");
        assert_eq!(
            key_to_bytes(&KeyEvent::new(KeyCode::Up, KeyModifiers::NONE), true),
            b"\x1bOA"
        );
        assert_eq!(k(KeyCode::F(5), KeyModifiers::NONE), b"\x1b[15~");
        assert_eq!(k(KeyCode::Char('é'), KeyModifiers::NONE), "é".as_bytes());
        assert!(k(KeyCode::CapsLock, KeyModifiers::NONE).is_empty());
    }

    #[test]
    fn screen_renders_colours_and_cursor() {
        let s = new_screen(3, 10);
        s.write().unwrap().process(b"\x1b[31mred\x1b[0m ok\r\n\x1b[1mB");
        let mut buf = Buffer::empty(Rect::new(0, 0, 12, 4));
        let cur = render_screen(
            s.read().unwrap().screen(),
            Rect::new(1, 1, 10, 3),
            &mut buf,
            Some(ColorDepth::TrueColor),
        );
        assert_eq!(buf[(1, 1)].symbol(), "r");
        assert_eq!(buf[(1, 1)].fg, Color::Indexed(1));
        assert_eq!(buf[(5, 1)].symbol(), "o");
        assert!(buf[(1, 2)].modifier.contains(Modifier::BOLD));
        assert_eq!(cur, Some((2, 2)));
        let mut mono = Buffer::empty(Rect::new(0, 0, 12, 4));
        render_screen(
            s.read().unwrap().screen(),
            Rect::new(1, 1, 10, 3),
            &mut mono,
            None,
        );
        assert_eq!(mono[(1, 1)].fg, Color::Reset);
        // Clipped, never out of bounds.
        let mut tiny = Buffer::empty(Rect::new(0, 0, 2, 1));
        render_screen(
            s.read().unwrap().screen(),
            Rect::new(0, 0, 2, 1),
            &mut tiny,
            Some(ColorDepth::TrueColor),
        );
        assert_eq!(tiny[(1, 0)].symbol(), "e");
    }

    /// A program's colours in a pane are mapped down to the terminal's depth, as the
    /// cockpit's own are: 24-bit to the 256-colour palette or the 16, a 256-palette index
    /// to the 16; kept as sent at 24-bit.
    #[test]
    fn a_panes_colours_follow_the_terminals_depth() {
        let s = new_screen(1, 10);
        s.write()
            .unwrap()
            .process(b"\x1b[38;2;255;0;0;48;5;237mA\x1b[0m\x1b[38;5;196mB");
        let at = |depth: ColorDepth| {
            let mut buf = Buffer::empty(Rect::new(0, 0, 10, 1));
            render_screen(
                s.read().unwrap().screen(),
                Rect::new(0, 0, 10, 1),
                &mut buf,
                Some(depth),
            );
            (buf[(0, 0)].fg, buf[(0, 0)].bg, buf[(1, 0)].fg)
        };
        assert_eq!(
            at(ColorDepth::TrueColor),
            (Color::Rgb(255, 0, 0), Color::Indexed(237), Color::Indexed(196))
        );
        assert_eq!(
            at(ColorDepth::Ansi256),
            (Color::Indexed(196), Color::Indexed(237), Color::Indexed(196))
        );
        let (fg, bg, b) = at(ColorDepth::Ansi16);
        for c in [fg, bg, b] {
            assert!(
                !matches!(c, Color::Rgb(..) | Color::Indexed(_)),
                "{c:?} is not one of the 16"
            );
        }
    }

    #[test]
    fn scrollback_is_bounded() {
        let s = new_screen(3, 20);
        for i in 0..SCROLLBACK + 50 {
            s.write().unwrap().process(format!("{i}\n").as_bytes());
        }
        let lines = snapshot_lines(&s);
        assert_eq!(lines.len(), SCROLLBACK);
        assert_eq!(lines[0], "50");
    }

    #[test]
    fn snapshot_walks_the_scrollback() {
        let s = new_screen(3, 20);
        for i in 0..10 {
            s.write().unwrap().process(format!("line {i}\r\n").as_bytes());
        }
        s.write()
            .unwrap()
            .process(b"\x1b[32mgreen\x1b[0m 50%\r100%\x08!\r\npartial");
        let lines = snapshot_lines(&s);
        assert_eq!(lines.first().map(String::as_str), Some("line 0"));
        assert_eq!(lines[9], "line 9");
        assert_eq!(
            lines[10], "100!",
            "escapes stripped, \\r restarts the line, backspace erases"
        );
        assert_eq!(lines[11], "partial");
        assert_eq!(lines.len(), 12);
        // A full-screen program: its screen is the snapshot, and nothing is logged.
        s.write()
            .unwrap()
            .process(b"\x1b[?1049h\x1b[Hvim screen\r\n~\r\n");
        assert_eq!(snapshot_lines(&s), vec!["vim screen", "~"]);
        s.write().unwrap().process(b"\x1b[?1049l\r\nback\r\n");
        let lines = snapshot_lines(&s);
        assert_eq!(lines.last().map(String::as_str), Some("back"));
        assert!(!lines.iter().any(|l| l.contains("vim")));
    }

    #[test]
    fn osc52_encodes() {
        assert_eq!(osc52("hi"), "\x1b]52;c;aGk=\x07");
    }
}
