//! The one place the cockpit's state changes: `update(&mut State, Msg) -> Vec<Command>`.
//! No I/O, no clock, no terminal: tests drive whole flows by feeding messages.
//!
//! `apply` is a router: each feature's messages go to that feature's `update`, the
//! shell's own (input, the terminal, questions, the theme) to `tui::shell`.

use super::shell::{input, overlay, status};
use super::state::{Command, Msg, State};
use super::{doctor, fleets, jobs, nccl, nics, nodes, offers, panes};

pub use super::shell::act::act;
pub use super::shell::command::run_command;
pub use super::shell::overlay::context;
pub use super::shell::palette::{completions, PALETTE_COMMANDS};

/// Apply `msg` to the state: the one mutation point. A new status message also goes
/// into the message history (`M`), where a long one can be read whole.
pub fn update(state: &mut State, msg: Msg) -> Vec<Command> {
    let before = state.status.clone();
    let mut commands = apply(state, msg);
    commands.extend(jobs::poll(state));
    status::keep(state, before);
    commands
}

/// Route `msg`: one arm per feature, then the shell's own.
fn apply(state: &mut State, msg: Msg) -> Vec<Command> {
    match msg {
        Msg::Offers(m) => offers::update(state, m),
        Msg::Fleets(m) => fleets::update(state, m),
        Msg::Nodes(m) => nodes::update(state, m),
        Msg::Panes(m) => panes::update(state, m),
        Msg::Nccl(m) => nccl::update(state, m),
        Msg::Jobs(m) => jobs::update(state, m),
        Msg::Nics(m) => nics::update(state, m),
        Msg::Doctor(m) => doctor::update(state, m),
        Msg::Key(key) => input::key(state, key),
        Msg::Mouse(m) => input::mouse(state, m),
        Msg::Paste(text) => input::paste(state, text),
        Msg::Resize(w, h) => {
            state.size = (w, h);
            state.dirty = true;
            panes::sync_sizes(state)
        }
        Msg::Resumed => {
            state.dirty = true;
            vec![]
        }
        Msg::ThemeLoaded(result) => status::theme_loaded(state, result),
        Msg::HostKeyQuestion {
            id,
            host,
            fingerprint,
        } => overlay::host_key_question(state, id, host, fingerprint),
        Msg::PassphraseQuestion { id, key } => overlay::passphrase_question(state, id, key),
        Msg::StateChanged => vec![Command::ReloadState],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::help::view as help;
    use crate::tui::keymap::Keymap;
    use crate::tui::state::{Overlay, Palette, View};
    use crate::tui::theme::Tone;
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

    fn state() -> State {
        let mut s = State::new(
            Keymap::defaults(),
            vec!["dark".into(), "light".into()],
            "dark".into(),
        );
        s.dirty = false;
        s
    }

    fn press(s: &mut State, code: KeyCode) -> Vec<Command> {
        update(s, Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)))
    }

    fn ch(s: &mut State, c: char) -> Vec<Command> {
        press(s, KeyCode::Char(c))
    }

    fn typed(s: &mut State, text: &str) {
        for c in text.chars() {
            ch(s, c);
        }
    }

    #[test]
    fn apply_and_run_complete_paths() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display().to_string();
        std::fs::write(dir.path().join("a3-mega.yaml"), "").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "").unwrap();
        std::fs::write(dir.path().join(".hidden.yaml"), "").unwrap();
        std::fs::create_dir(dir.path().join("fleets")).unwrap();
        let s = state();
        let lines =
            |typed: &str| -> Vec<String> { completions(&s, typed).into_iter().map(|c| c.line).collect() };
        assert_eq!(
            lines(&format!("apply {d}/")),
            [format!("apply {d}/a3-mega.yaml"), format!("apply {d}/fleets/")]
        );
        assert_eq!(lines(&format!("run {d}/a")), [format!("run {d}/a3-mega.yaml")]);
        assert_eq!(
            lines(&format!("apply {d}/.h")),
            [format!("apply {d}/.hidden.yaml")]
        );
        assert!(lines(&format!("apply {d}/zz")).is_empty());
        assert_eq!(completions(&s, &format!("run {d}/a"))[0].about, "job file");
    }

    /// A click on a tab shows its view; the wheel moves the Offers selection as j / k.
    #[test]
    fn the_mouse_picks_tabs_and_the_wheel_scrolls() {
        use crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
        let mut s = state();
        s.size = (80, 24);
        let at = |kind, column, row| {
            Msg::Mouse(MouseEvent {
                kind,
                column,
                row,
                modifiers: KeyModifiers::NONE,
            })
        };
        // At 80 columns the tab bar drops the brand: " 1 Offers  2 Fleets  3 Nodes  4 Panes
        //  5 NCCL …": column 40 is NCCL.
        update(&mut s, at(MouseEventKind::Down(MouseButton::Left), 40, 0));
        assert_eq!(s.view, View::Nccl);
        update(&mut s, at(MouseEventKind::Down(MouseButton::Left), 3, 0));
        assert_eq!(s.view, View::Offers);
        let first = s.offers.selected.clone();
        update(&mut s, at(MouseEventKind::ScrollDown, 40, 10));
        assert_ne!(s.offers.selected, first, "moved");
        update(&mut s, at(MouseEventKind::ScrollUp, 40, 10));
        assert_eq!(s.offers.selected, first, "and back");
    }

    #[test]
    fn ctrl_z_without_job_control_says_why() {
        let mut s = state();
        let ctrl_z = |s: &mut State| {
            update(
                s,
                Msg::Key(KeyEvent::new(KeyCode::Char('z'), KeyModifiers::CONTROL)),
            )
        };
        assert_eq!(ctrl_z(&mut s), vec![Command::Suspend]);
        s.job_control = false;
        assert_eq!(ctrl_z(&mut s), vec![]);
        assert!(s
            .status
            .as_ref()
            .unwrap()
            .text
            .starts_with("ctrl-z: no shell to return to"));
    }

    /// The palette and filter take readline's keys: ctrl-w a word back, ctrl-a / ctrl-e
    /// the start / end, ctrl-u everything before the cursor.
    #[test]
    fn text_inputs_take_readline_keys() {
        let mut s = state();
        let ctrl = |s: &mut State, c: char| {
            update(
                s,
                Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)),
            )
        };
        ch(&mut s, ':');
        typed(&mut s, "theme lihgt");
        ctrl(&mut s, 'w');
        assert_eq!(palette(&s).input.lines()[0], "theme ");
        typed(&mut s, "light");
        ctrl(&mut s, 'a');
        typed(&mut s, "x");
        assert_eq!(palette(&s).input.lines()[0], "xtheme light");
        ctrl(&mut s, 'e');
        typed(&mut s, "y");
        assert_eq!(palette(&s).input.lines()[0], "xtheme lighty");
        ctrl(&mut s, 'u');
        assert_eq!(palette(&s).input.lines()[0], "");
    }

    fn palette(s: &State) -> &Palette {
        match &s.overlay {
            Overlay::Palette(p) => p,
            other => panic!("palette not open: {other:?}"),
        }
    }

    #[test]
    fn tab_digits_and_shift_tab_navigate_views() {
        let mut s = state();
        press(&mut s, KeyCode::Tab);
        assert_eq!(s.view, View::Fleets);
        assert!(s.dirty);
        press(&mut s, KeyCode::BackTab);
        press(&mut s, KeyCode::BackTab);
        assert_eq!(s.view, View::Doctor, "wraps around");
        ch(&mut s, '3');
        assert_eq!(s.view, View::Nodes);
    }

    #[test]
    fn help_opens_scrolls_and_closes() {
        let mut s = state();
        s.size = (80, 24);
        ch(&mut s, '?');
        assert!(matches!(s.overlay, Overlay::Help { scroll: 0 }));
        ch(&mut s, 'j');
        ch(&mut s, 'G');
        let max = help::max_scroll(&s.keymap, s.view, s.size);
        assert!(max > 0, "the help is longer than 80x24");
        assert!(matches!(s.overlay, Overlay::Help { scroll } if scroll == max));
        ch(&mut s, '1');
        assert_eq!(s.view, View::Offers, "view keys do nothing under help");
        press(&mut s, KeyCode::Esc);
        assert!(matches!(s.overlay, Overlay::None));
        ch(&mut s, '?');
        assert_eq!(
            ch(&mut s, 'q'),
            vec![],
            "q closes the help (as in htop and lazygit)"
        );
        assert!(matches!(s.overlay, Overlay::None));
    }

    #[test]
    fn quit_suspend_and_unbound_keys() {
        let mut s = state();
        assert_eq!(ch(&mut s, 'q'), vec![Command::Quit]);
        let ctrl = |c| Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL));
        assert_eq!(update(&mut s, ctrl('c')), vec![Command::Quit]);
        assert_eq!(update(&mut s, ctrl('z')), vec![Command::Suspend]);
        s.dirty = false;
        assert!(ch(&mut s, 'u').is_empty());
        assert!(!s.dirty, "an unbound key changes nothing on screen");
        ch(&mut s, '6');
        s.dirty = false;
        ch(&mut s, 'j');
        assert!(!s.dirty, "movement in a view without rows redraws nothing");
    }

    #[test]
    fn palette_completes_and_switches_view() {
        let mut s = state();
        ch(&mut s, ':');
        assert_eq!(
            palette(&s).candidates.len(),
            View::ALL.len() + PALETTE_COMMANDS.len()
        );
        typed(&mut s, "ni");
        let lines: Vec<&str> = palette(&s).candidates.iter().map(|c| c.line.as_str()).collect();
        assert_eq!(lines, vec!["nics"]);
        press(&mut s, KeyCode::Tab);
        assert_eq!(palette(&s).input.lines(), &["nics".to_string()]);
        press(&mut s, KeyCode::Enter);
        assert_eq!(s.view, View::Nics);
        assert!(matches!(s.overlay, Overlay::None));
    }

    #[test]
    fn palette_typed_command_unique_prefix_and_errors() {
        let mut s = state();
        ch(&mut s, ':');
        typed(&mut s, "nccl");
        press(&mut s, KeyCode::Enter);
        assert_eq!(s.view, View::Nccl);
        ch(&mut s, ':');
        typed(&mut s, "fle");
        press(&mut s, KeyCode::Enter);
        assert_eq!(s.view, View::Fleets, "a unique prefix runs the command");
        ch(&mut s, ':');
        typed(&mut s, "n");
        press(&mut s, KeyCode::Enter);
        let st = s.status.clone().unwrap();
        assert_eq!(st.tone, Tone::Fail);
        assert!(
            st.text.contains("ambiguous") && st.text.contains("nodes"),
            "{}",
            st.text
        );
        ch(&mut s, ':');
        typed(&mut s, "bogus");
        press(&mut s, KeyCode::Enter);
        assert!(s
            .status
            .as_ref()
            .unwrap()
            .text
            .contains("unknown command `bogus`"));
        ch(&mut s, 'u');
        assert!(s.status.is_some(), "an unbound key leaves the message");
        ch(&mut s, '1');
        assert!(s.status.is_none(), "the next action clears it");
        ch(&mut s, ':');
        typed(&mut s, "q");
        assert_eq!(press(&mut s, KeyCode::Enter), vec![Command::Quit]);
    }

    #[test]
    fn palette_tab_cycles_and_esc_cancels() {
        let mut s = state();
        ch(&mut s, ':');
        typed(&mut s, "n");
        let n = palette(&s).candidates.len();
        assert!(n >= 4, "nodes, nccl, nics, nofilter, ...");
        press(&mut s, KeyCode::Tab);
        let first = palette(&s).input.lines()[0].clone();
        press(&mut s, KeyCode::Tab);
        let second = palette(&s).input.lines()[0].clone();
        assert_ne!(first, second);
        assert_eq!(palette(&s).candidates.len(), n, "cycling keeps the list");
        press(&mut s, KeyCode::BackTab);
        assert_eq!(palette(&s).input.lines()[0], first);
        press(&mut s, KeyCode::Esc);
        assert!(matches!(s.overlay, Overlay::None));
        assert_eq!(s.view, View::Offers);
    }

    #[test]
    fn theme_command_completes_theme_names_and_asks_for_a_load() {
        let mut s = state();
        ch(&mut s, ':');
        typed(&mut s, "theme l");
        let lines: Vec<&str> = palette(&s).candidates.iter().map(|c| c.line.as_str()).collect();
        assert_eq!(lines, vec!["theme light"]);
        press(&mut s, KeyCode::Tab);
        assert_eq!(
            press(&mut s, KeyCode::Enter),
            vec![Command::LoadTheme("light".into())]
        );
        update(&mut s, Msg::ThemeLoaded(Ok("light".into())));
        assert_eq!(s.theme, "light");
        update(&mut s, Msg::ThemeLoaded(Err("themes/x.yaml:3:1: bad".into())));
        assert_eq!(s.status.as_ref().unwrap().tone, Tone::Fail);
        assert_eq!(s.theme, "light");
    }

    #[test]
    fn filter_edits_live_enter_keeps_esc_restores() {
        let mut s = state();
        ch(&mut s, '/');
        typed(&mut s, "gpu=H100");
        assert_eq!(s.filter(), "gpu=H100", "applied while typing");
        press(&mut s, KeyCode::Enter);
        assert!(matches!(s.overlay, Overlay::None));
        assert_eq!(s.filter(), "gpu=H100");
        ch(&mut s, '/');
        press(&mut s, KeyCode::Backspace);
        typed(&mut s, "0");
        assert_eq!(s.filter(), "gpu=H100");
        press(&mut s, KeyCode::Backspace);
        typed(&mut s, "x");
        assert_eq!(s.filter(), "gpu=H10x");
        press(&mut s, KeyCode::Esc);
        assert_eq!(s.filter(), "gpu=H100", "esc restores the filter from before");
        ch(&mut s, '2');
        assert_eq!(s.filter(), "", "filters are per view");
        ch(&mut s, '1');
        update(
            &mut s,
            Msg::Key(KeyEvent::new(KeyCode::Char('l'), KeyModifiers::CONTROL)),
        );
        assert_eq!(s.filter(), "");
    }

    #[test]
    fn slash_in_panes_finds_a_pane_and_keys_go_to_the_entry() {
        let mut s = state();
        ch(&mut s, '4');
        ch(&mut s, '/');
        assert!(
            matches!(s.overlay, Overlay::Filter(_)),
            "the Panes view's / finds a node's pane"
        );
        typed(&mut s, "x");
        update(
            &mut s,
            Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)),
        );
        assert_eq!(
            s.status.as_ref().unwrap().tone,
            Tone::Warn,
            "no pane matches (none open)"
        );
        ch(&mut s, '1');
        ch(&mut s, '/');
        typed(&mut s, "q2");
        assert_eq!(s.view, View::Offers, "digits and q are text inside the entry");
        assert_eq!(s.filter(), "q2");
        update(&mut s, Msg::Paste("a\nb".into()));
        assert_eq!(s.filter(), "q2a b", "pasted newlines become spaces");
    }

    #[test]
    fn resize_and_resume_redraw() {
        let mut s = state();
        update(&mut s, Msg::Resize(120, 40));
        assert_eq!(s.size, (120, 40));
        assert!(s.dirty);
        s.dirty = false;
        update(&mut s, Msg::Resumed);
        assert!(s.dirty);
    }

    #[test]
    fn custom_keymap_drives_update() {
        let overrides = crate::tui::keymap::Keymap::with_overrides(
            &crate::tui::keymap::parse_overrides(
                std::path::Path::new("config.yaml"),
                "keys:\n  global:\n    next_view: n\n    quit: ctrl-q\n",
            )
            .unwrap(),
        );
        let mut s = State::new(overrides, vec![], "dark".into());
        ch(&mut s, 'n');
        assert_eq!(s.view, View::Fleets);
        assert!(ch(&mut s, 'q').is_empty());
        let q = update(
            &mut s,
            Msg::Key(KeyEvent::new(KeyCode::Char('q'), KeyModifiers::CONTROL)),
        );
        assert_eq!(q, vec![Command::Quit]);
    }
}
