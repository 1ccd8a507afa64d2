//! The fleet-file editor: YAML validated as it is typed, opened on a new file for an
//! offer (the Offers view's `w`) or on a recorded fleet's file (the Fleets view's `e`).
//! Drawn over either view by `offers::view::render_editor`; its keys are
//! `fleets::update::editor_key`.

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

    pub(super) fn validate(&mut self) {
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
