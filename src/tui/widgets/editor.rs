//! The fleet-file editor: YAML validated as it is typed, opened on a new file for an
//! offer (the Offers view's `w`) or on a recorded fleet's file (the Fleets view's `e`).
//! A widget both views share (its state and [`render`]); its keys are
//! `fleets::update::editor_key`.

use crate::tui::theme::{Theme, Tone};
use crate::tui::widgets::dialog_area;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Widget};
use tui_textarea::TextArea;

/// Writing a fleet file: YAML in an editor, validated as it is typed.
#[derive(Debug, Clone)]
pub struct FleetEditor {
    pub input: TextArea<'static>,
    /// Where it will be written (relative to the working directory).
    pub path: String,
    /// The first problem with the text, or None when it validates.
    pub problem: Option<String>,
    /// An existing file opened for editing: its text as read. Saving writes over the file
    /// only while it still holds this text on disk (else it is refused). None: a new file,
    /// never written over an existing one.
    pub original: Option<String>,
    /// The text when the editor opened, to tell whether anything changed.
    pub opened_with: String,
}

impl FleetEditor {
    /// An editor on `text`, validated; `original`: the file's text as read (None: a new
    /// file).
    pub fn new(path: String, text: &str, original: Option<String>) -> FleetEditor {
        let mut input = TextArea::new(text.lines().map(str::to_string).collect());
        input.move_cursor(tui_textarea::CursorMove::Top);
        let mut editor = FleetEditor {
            input,
            path,
            problem: None,
            original,
            opened_with: text.to_string(),
        };
        editor.validate();
        editor
    }

    /// The text differs from what the editor opened with.
    pub fn changed(&self) -> bool {
        self.input.lines().join("\n").trim_end() != self.opened_with.trim_end()
    }

    pub(crate) fn validate(&mut self) {
        let text = self.input.lines().join("\n");
        self.problem = match crate::fleet::parse(std::path::Path::new(&self.path), &text) {
            Ok(_) => None,
            Err(d) => d
                .into_iter()
                .find(|d| d.severity == crate::fleet::Severity::Error)
                .map(|d| d.to_string()),
        };
    }
}

/// Draw the editor centred over `area`: the file's path, the text, and whether it
/// validates (or its first problem) on the bottom rule.
pub fn render(e: &FleetEditor, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let Some(r) = dialog_area(area, buf) else {
        return;
    };
    let status = match &e.problem {
        None => Line::styled(" valid · ctrl-s writes · esc cancels ", theme.tone(Tone::Pass)),
        Some(p) => Line::styled(format!(" {p} "), theme.tone(Tone::Fail)),
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.border(true))
        .title(Span::styled(format!(" {} ", e.path), theme.title()))
        .title_bottom(status)
        .style(theme.base());
    let inner = block.inner(r);
    block.render(r, buf);
    let mut ta = e.input.clone();
    ta.set_style(theme.base());
    ta.set_cursor_line_style(Style::new());
    ta.set_cursor_style(theme.base().add_modifier(Modifier::REVERSED));
    Widget::render(&ta, inner, buf);
}
