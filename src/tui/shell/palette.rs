//! The `:` palette: its commands, and completions of what is typed (command names, view
//! names, fleets after `open `, theme names, paths after `apply ` and `run `). What a
//! command line does is `shell::command`.

use crate::tui::state::{Candidate, Overlay, Palette, State, View};
use tui_textarea::TextArea;

/// Commands the palette knows, besides the view names: (name, argument, what it does).
pub const PALETTE_COMMANDS: &[(&str, &str, &str)] = &[
    ("help", "", "show the key bindings"),
    (
        "open",
        "FLEET [SEL]",
        "a pane on every node (GKE: every pod SEL picks)",
    ),
    ("close", "", "close the open panes"),
    ("run", "FILE", "start the job of a job file on its fleet"),
    (
        "apply",
        "FILE",
        "apply a fleet file: its plan and cost per hour, then confirm",
    ),
    ("filter", "TEXT", "filter the current table"),
    ("nofilter", "", "clear the current table's filter"),
    ("theme", "NAME", "switch the colour theme"),
    ("messages", "", "every status message of this session, whole"),
    ("quit", "", "quit flightdeck (also :q)"),
];

/// Complete the palette's text again (after it changed).
pub fn refresh_candidates(state: &mut State) {
    let list = if let Overlay::Palette(p) = &state.overlay {
        completions(state, &p.input.lines().join(" "))
    } else {
        return;
    };
    if let Overlay::Palette(p) = &mut state.overlay {
        p.candidates = list;
        p.selected = None;
    }
}

/// Completions of a partly typed palette line: command names, then theme names after
/// `theme `. Prefix matches come first, then names that merely contain the text.
pub fn completions(state: &State, typed: &str) -> Vec<Candidate> {
    let typed = typed.trim_start();
    if let Some(arg) = typed.strip_prefix("open ") {
        return rank(
            state.fleets.iter().map(|f| {
                (
                    format!("open {}", f.name),
                    f.name.clone(),
                    format!(
                        "{} fleet, {}",
                        f.backend,
                        crate::words::plural(f.nodes.len(), "node")
                    ),
                )
            }),
            arg.trim(),
        );
    }
    for (cmd, what) in [("apply", "fleet file"), ("run", "job file")] {
        if let Some(arg) = typed.strip_prefix(cmd).and_then(|a| a.strip_prefix(' ')) {
            return path_candidates(cmd, arg.trim_start(), what);
        }
    }
    if let Some(arg) = typed.strip_prefix("theme ") {
        let arg = arg.trim();
        return rank(
            state
                .themes
                .iter()
                .map(|t| (format!("theme {t}"), t.clone(), format!("colour theme {t}"))),
            arg,
        );
    }
    let views = View::ALL.iter().map(|v| {
        (
            v.command().to_string(),
            v.command().to_string(),
            format!("go to the {} view", v.title()),
        )
    });
    let cmds = PALETTE_COMMANDS.iter().map(|(name, arg, about)| {
        let about = if arg.is_empty() {
            about.to_string()
        } else {
            format!("<{arg}> {about}")
        };
        (name.to_string(), name.to_string(), about)
    });
    rank(views.chain(cmds), typed.trim())
}

/// Paths for `:apply` and `:run`: the folders and YAML files in the folder typed so far
/// (relative to the working directory, `~/` for home) whose names start with what
/// follows its last `/`; folders end in `/`, so Tab goes on into them. Hidden entries
/// only when the name typed starts with a dot.
fn path_candidates(cmd: &str, arg: &str, what: &str) -> Vec<Candidate> {
    let (dir, prefix) = match arg.rfind('/') {
        Some(i) => (&arg[..=i], &arg[i + 1..]),
        None => ("", arg),
    };
    let on_disk = match dir.strip_prefix("~/") {
        Some(rest) => crate::paths::home_dir().map(|h| h.join(rest)),
        None if dir.is_empty() => Some(std::path::PathBuf::from(".")),
        None => Some(std::path::PathBuf::from(dir)),
    };
    let Some(Ok(entries)) = on_disk.map(std::fs::read_dir) else {
        return vec![];
    };
    let mut found: Vec<(bool, String)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.starts_with(prefix) || (name.starts_with('.') && !prefix.starts_with('.')) {
                return None;
            }
            let is_dir = e.path().is_dir();
            let yaml = name.ends_with(".yaml") || name.ends_with(".yml");
            (is_dir || yaml).then_some((is_dir, name))
        })
        .collect();
    // Files first (what the command takes), then folders, each by name.
    found.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    found
        .into_iter()
        .take(64)
        .map(|(is_dir, name)| Candidate {
            line: format!("{cmd} {dir}{name}{}", if is_dir { "/" } else { "" }),
            about: if is_dir {
                "folder".to_string()
            } else {
                what.to_string()
            },
        })
        .collect()
}

/// Keep the (line, key, about) entries whose key starts with, then contains, `typed`.
fn rank(entries: impl Iterator<Item = (String, String, String)>, typed: &str) -> Vec<Candidate> {
    let typed = typed.to_lowercase();
    let (mut prefix, mut inner) = (vec![], vec![]);
    for (line, key, about) in entries {
        let key = key.to_lowercase();
        if key.starts_with(&typed) {
            prefix.push(Candidate { line, about });
        } else if key.contains(&typed) {
            inner.push(Candidate { line, about });
        }
    }
    prefix.extend(inner);
    prefix
}

/// Move the palette's selection and put the selected candidate into the entry.
pub fn cycle(p: &mut Palette, forward: bool) {
    let n = p.candidates.len();
    if n == 0 {
        return;
    }
    let next = match (p.selected, forward) {
        (None, true) => 0,
        (None, false) => n - 1,
        (Some(i), true) => (i + 1) % n,
        (Some(i), false) => (i + n - 1) % n,
    };
    p.selected = Some(next);
    let mut line = p.candidates[next].line.clone();
    if PALETTE_COMMANDS
        .iter()
        .any(|(name, arg, _)| *name == line && !arg.is_empty())
    {
        line.push(' ');
    }
    p.input = TextArea::new(vec![line]);
    p.input.move_cursor(tui_textarea::CursorMove::End);
}
