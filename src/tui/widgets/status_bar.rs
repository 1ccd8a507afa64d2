//! The status bar: on the left a message (or the view and its filter), on the right key
//! hints generated from the keymap for the context that has the keys.

use crate::tui::action::Context;
use crate::tui::keymap::Keymap;
use crate::tui::state::{StatusMessage, View};
use crate::tui::theme::{Theme, Tone};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

pub struct StatusBar<'a> {
    pub theme: &'a Theme,
    pub keymap: &'a Keymap,
    pub context: Context,
    /// Whether the current view has a table (else the filter hint is left out).
    pub filterable: bool,
    /// The view shown (its own keys are hinted only there).
    pub view: View,
    pub message: Option<&'a StatusMessage>,
    /// Shown when there is no message.
    pub left: String,
}

/// Rows a warning or failure may take above the bar: why an apply failed, and its fix,
/// are read whole at 80 columns (quota, stockout and credential reasons run to 200
/// characters), not cut in the middle where the fix is.
pub const PROBLEM_ROWS: usize = 4;

impl StatusBar<'_> {
    /// How many rows the bar needs at `width`: one, or up to [`PROBLEM_ROWS`] for a
    /// warning or failure longer than a row (drawn over the bottom of the view, which
    /// keeps its size: panes are not resized by a message).
    pub fn rows(&self, width: u16) -> u16 {
        let Some(m) = self.message.filter(|m| matches!(m.tone, Tone::Warn | Tone::Fail)) else {
            return 1;
        };
        let room = usize::from(width).saturating_sub(2).max(1);
        crate::words::wrap_words(&one_line(&m.text), room)
            .len()
            .clamp(1, PROBLEM_ROWS) as u16
    }
}

impl Widget for StatusBar<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        if area.is_empty() {
            return;
        }
        buf.set_style(area, self.theme.status_bar());
        if area.height > 1 {
            if let Some(m) = self.message {
                // A problem over several rows: wrapped between words; what does not fit
                // keeps its end on the last row (the fix), `M` has it whole.
                let room = usize::from(area.width).saturating_sub(2).max(1);
                let mut rows = crate::words::wrap_words(&one_line(&m.text), room);
                let n = usize::from(area.height);
                if rows.len() > n {
                    let rest = rows.split_off(n - 1).join(" ");
                    rows.push(middle_cut(&rest, room));
                }
                let style = self.theme.tone(m.tone);
                for (i, row) in rows.iter().enumerate() {
                    let r = Rect {
                        y: area.y + i as u16,
                        height: 1,
                        ..area
                    };
                    Line::styled(format!(" {row}"), style).render(r, buf);
                }
                return;
            }
        }
        let width = usize::from(area.width);
        // Hints, dropped from the right until they leave room for some message text.
        let mut hints: Vec<(String, &str)> = self
            .keymap
            .hints_in(self.context, self.view)
            .into_iter()
            .filter(|(_, label)| self.filterable || *label != "filter")
            .collect();
        let hint_width = |h: &[(String, &str)]| {
            h.iter()
                .map(|(k, l)| k.chars().count() + l.len() + 3)
                .sum::<usize>()
        };
        // A warning or failure gets the whole bar.
        if self
            .message
            .is_some_and(|m| matches!(m.tone, Tone::Warn | Tone::Fail))
        {
            hints.clear();
        }
        // A message may carry what a node or an API said: shown, never acted on. Its
        // lines read as one (`fleet `local`; follow it with …`, not `local`follow`).
        let (text, style) = match self.message {
            Some(m) => (one_line(&m.text), self.theme.tone(m.tone)),
            None => (one_line(&self.left), self.theme.status_bar()),
        };
        let text = text.as_str();
        // Hints give way before the message (or the view's own line: its mode, filter,
        // broadcast): what happened is read once, the hints are always there (and `?`).
        // At 80 columns a run's start, a broadcast's target stay whole (ux walk 17).
        let left_min = (text.chars().count() + 2).clamp(12.min(width / 2), width);
        while !hints.is_empty() && hint_width(&hints) + left_min > width {
            hints.pop();
        }
        let hints_w = hint_width(&hints);
        let left_w = width.saturating_sub(hints_w + 1);
        // A problem's end often says what to do (a did-you-mean, a fix): it keeps its end;
        // other text keeps its start.
        let problem = self
            .message
            .is_some_and(|m| matches!(m.tone, Tone::Warn | Tone::Fail));
        let room = left_w.saturating_sub(1);
        let left = if problem {
            format!(" {}", middle_cut(text, room))
        } else {
            format!(" {}", crate::words::truncate(text, room))
        };
        let pad = width.saturating_sub(left.chars().count() + hints_w);
        let mut spans = vec![Span::styled(left, style), Span::raw(" ".repeat(pad))];
        for (key, label) in hints {
            spans.push(Span::styled(key, self.theme.key_hint()));
            spans.push(Span::styled(format!(" {label}  "), self.theme.status_bar()));
        }
        Line::from(spans).render(area, buf);
    }
}

/// A message's lines joined into one for the bar (`; ` between them, the indents gone),
/// each made safe to show.
fn one_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| super::shown(l).into_owned())
        .collect::<Vec<_>>()
        .join("; ")
}

/// `text` in `width` characters: whole when it fits, else its start and its end around
/// an ellipsis (the end of a message often holds what to do: a did-you-mean, a fix);
/// `M` shows it whole.
fn middle_cut(text: &str, width: usize) -> String {
    let n = text.chars().count();
    if n <= width {
        return text.to_string();
    }
    if width < 8 {
        return crate::words::truncate(text, width);
    }
    let head = (width - 1) * 2 / 5;
    let tail = width - 1 - head;
    let start: String = text.chars().take(head).collect();
    let end: String = text.chars().skip(n - tail).collect();
    format!("{start}…{end}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_messages_lines_are_joined_with_a_separator() {
        let m = "job j1 (`train`) is still running on fleet `local`\n  node 0: running\nfollow it with `flightdeck job logs j1`";
        assert_eq!(
            super::one_line(m),
            "job j1 (`train`) is still running on fleet `local`; node 0: running; follow it with `flightdeck job logs j1`"
        );
    }

    use super::*;
    use crate::tui::keymap::Keymap;

    fn bar(width: u16, message: Option<&StatusMessage>, left: &str, view: View) -> String {
        let theme = Theme::default_theme();
        let keymap = Keymap::defaults();
        let area = Rect::new(0, 0, width, 1);
        let mut buf = Buffer::empty(area);
        StatusBar {
            theme: &theme,
            keymap: &keymap,
            context: Context::Global,
            filterable: true,
            view,
            message,
            left: left.to_string(),
        }
        .render(area, &mut buf);
        (0..width).map(|x| buf[(x, 0)].symbol().to_string()).collect()
    }

    /// At 80 columns the walk's cut lines (`run nccl-… started; it …`, `broadcast: marked
    /// pan…`) are whole: the hints give way to what is to be read.
    #[test]
    fn long_status_lines_are_whole_at_80_columns() {
        let run = "run nccl-all_reduce-1795620596-d1e6 started; it runs on when flightdeck quits";
        let m = StatusMessage {
            text: run.into(),
            tone: Tone::Info,
        };
        let shown = bar(80, Some(&m), "", View::Nccl);
        assert!(shown.contains(run), "{shown}");
        let mode = "Panes four (4 nodes)  TYPING (C-a d stops)  broadcast: marked panes";
        let shown = bar(80, None, mode, View::Panes);
        assert!(shown.contains(mode), "{shown}");
        // A short line keeps the hints beside it.
        let shown = bar(80, None, "Fleets", View::Fleets);
        assert!(shown.contains("? help"), "{shown}");
        // Longer than the bar: an info message keeps its start, the log has it whole.
        let long = format!("{run}; {run}");
        let m = StatusMessage {
            text: long.clone(),
            tone: Tone::Info,
        };
        let shown = bar(80, Some(&m), "", View::Nccl);
        assert!(shown.starts_with(&format!(" {}", &run[..60])), "{shown}");
        assert!(shown.trim_end().ends_with('…'), "{shown}");
    }

    /// ux-walk-2 item 3: at 80 columns why an apply failed is read whole, the fix
    /// included, over up to four rows; a short one keeps one row.
    #[test]
    fn a_long_failure_takes_rows_and_keeps_its_fix() {
        let text = "apply fleets/a3-mega-tcpxo.yaml failed: no Google Cloud access token, nothing was changed: credentials: the GCE metadata server is not reachable; run `gcloud auth application-default login` or set GOOGLE_APPLICATION_CREDENTIALS to a service-account key file";
        let m = StatusMessage {
            text: text.into(),
            tone: Tone::Fail,
        };
        let theme = Theme::default_theme();
        let keymap = Keymap::defaults();
        let sb = |m| StatusBar {
            theme: &theme,
            keymap: &keymap,
            context: Context::Global,
            filterable: true,
            view: View::Fleets,
            message: Some(m),
            left: String::new(),
        };
        assert_eq!(sb(&m).rows(80), 4);
        let area = Rect::new(0, 0, 80, 4);
        let mut buf = Buffer::empty(area);
        sb(&m).render(area, &mut buf);
        let shown: String = (0..4)
            .map(|y| {
                (0..80)
                    .map(|x| buf[(x, y)].symbol())
                    .collect::<String>()
                    .trim()
                    .to_string()
            })
            .collect::<Vec<_>>()
            .join(" ");
        assert_eq!(shown, text);
        let short = StatusMessage {
            text: "apply failed: quota".into(),
            tone: Tone::Fail,
        };
        assert_eq!(sb(&short).rows(80), 1);
        assert_eq!(
            sb(&StatusMessage {
                text: text.into(),
                tone: Tone::Info
            })
            .rows(80),
            1
        );
    }

    #[test]
    fn a_long_message_keeps_its_start_and_its_end() {
        let m = "fleets/lab.yaml:5:7: ssh_config.hosts[0]: unknown field `usr`, expected one of `hostname`, `user`; did you mean `user`?";
        let cut = super::middle_cut(m, 60);
        assert_eq!(cut.chars().count(), 60);
        assert!(cut.starts_with("fleets/lab.yaml:5:7: ss"), "{cut}");
        assert!(cut.ends_with("did you mean `user`?"), "{cut}");
        assert_eq!(super::middle_cut("short", 60), "short");
    }
}
