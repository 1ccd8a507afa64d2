//! The list views as an operator sees them at 80x24 (issue 29, the UX walk's point 10
//! and point 7): the real binary in tmux. `d` shows the selected row's every field whole
//! where the table cuts it (Fleets, Jobs); the wheel scrolls the list under the pointer,
//! not the detail panel, and nothing over the tab bar or the status line.

mod support;

use support::tmux::{self, Tmux};

macro_rules! require_tmux {
    () => {
        if !tmux::tmux_available() {
            panic!("tmux is not installed: run ./scripts/test.sh, which installs it");
        }
    };
}

/// A fleet name of 40 characters, longer than the Fleets table gives it at 80 columns.
const LONG: &str = "walk-fleet-with-a-forty-character-name-1";

/// The rows of the `d` panel: from its top border (titled `title`) to the status line,
/// without the borders.
fn panel(screen: &str, title: &str) -> Vec<String> {
    let rows: Vec<&str> = screen.lines().collect();
    let top = rows
        .iter()
        .rposition(|r| r.starts_with('┌') && r.contains(&format!(" {title} ")))
        .unwrap_or_else(|| panic!("no panel titled {title}:\n{screen}"));
    rows[top + 1..]
        .iter()
        .take_while(|r| r.starts_with('│'))
        .map(|r| {
            r.trim_start_matches('│')
                .trim_end()
                .trim_end_matches('│')
                .to_string()
        })
        .collect()
}

/// A field's value in a panel: its first row after the name, and the rows under it that
/// have no name of their own, joined as they wrapped (at the value column, 14).
fn field(rows: &[String], name: &str) -> String {
    let at = rows
        .iter()
        .position(|r| r.starts_with(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no field {name}: {rows:#?}"));
    let mut out = rows[at]
        .chars()
        .skip(14)
        .collect::<String>()
        .trim_end()
        .to_string();
    for r in &rows[at + 1..] {
        if !r.starts_with("              ") {
            break;
        }
        out.push(' ');
        out.push_str(r.trim());
    }
    out
}

/// Point 10: at 80x24 the Fleets table cuts a 40-character name and the file's path; `d`
/// shows the selected fleet's name, kind, nodes with hosts, file and creation whole, and
/// the Jobs view's `d` a job's whole id, file and each node's state.
#[test]
fn d_shows_the_selected_fleet_and_job_whole_at_80x24() {
    require_tmux!();
    assert_eq!(LONG.len(), 40);
    let t = Tmux::start(&[], &[("SHELL", "/bin/sh")], 80, 24);
    t.wait_text("? help");
    let file = t.apply_local_named(LONG);
    t.keys(&["2", "r"]);
    let screen = t.wait_text("Fleets (1)");
    assert!(
        !screen.contains(LONG),
        "the table cuts the name at 80 columns:\n{screen}"
    );
    t.keys(&["d"]);
    let screen = t.wait_for("the fleet's panel", |s| s.contains("created (UTC)"));
    let rows = panel(&screen, LONG);
    assert_eq!(field(&rows, "name"), LONG, "{screen}");
    assert_eq!(field(&rows, "kind"), "local", "{screen}");
    // The file's whole path, wrapped at the panel's edge (a path has no spaces).
    assert_eq!(field(&rows, "file").replace(' ', ""), file, "{screen}");
    let nodes = field(&rows, "nodes");
    assert_eq!(nodes, format!("1: {LONG}-0 localhost"), "{screen}");
    assert!(!rows.iter().any(|r| r.contains('…')), "nothing cut:\n{screen}");
    // `d` again hides it.
    t.keys(&["d"]);
    t.wait_gone("created (UTC)");

    // A job on it with a long name: its id is longer than the Jobs table gives it.
    let name = "a-training-job-with-a-long-name-for-walk";
    let job = t.fd_home().parent().unwrap().join("job.yaml");
    tmux::write(
        &job,
        &format!("type: task\nname: {name}\nfleet: {LONG}\ncommands:\n  - sleep 15\n"),
    );
    t.flightdeck(&["job", "run", job.to_str().unwrap(), "--detach"]);
    t.keys(&["6", "r"]);
    t.wait_text("Jobs (1)");
    t.keys(&["d"]);
    let screen = t.wait_for("the job's panel", |s| s.contains("exit codes"));
    let rows = panel(&screen, name);
    let id = field(&rows, "id");
    let tail = id
        .strip_prefix(&format!("{name}-"))
        .unwrap_or_else(|| panic!("{id}\n{screen}"));
    assert!(
        !tail.is_empty() && tail.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'),
        "the whole id: {id}\n{screen}"
    );
    assert_eq!(field(&rows, "file"), job.display().to_string(), "{screen}");
    assert_eq!(field(&rows, "fleet"), LONG, "{screen}");
    let per_node: Vec<&String> = rows.iter().filter(|r| r.starts_with("node ")).collect();
    assert_eq!(per_node.len(), 1, "a row per node: {screen}");
    assert!(per_node[0].contains(&format!("{LONG}-0: running")), "{screen}");
    assert!(!rows.iter().any(|r| r.contains('…')), "nothing cut:\n{screen}");
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(), 0);
}

/// The fleet the Fleets view's `d` panel shows (its title).
fn panel_title(screen: &str) -> String {
    screen
        .lines()
        .rfind(|r| r.starts_with('┌'))
        .map(|r| {
            r.trim_start_matches("┌ ")
                .split(' ')
                .next()
                .unwrap_or("")
                .to_string()
        })
        .unwrap_or_default()
}

/// Point 7: in the Fleets view the wheel moves the selection over the table only: over
/// the `d` panel, the tab bar and the status line it does nothing (SGR wheel events, as
/// a terminal sends them with mouse reporting on).
#[test]
fn the_wheel_scrolls_the_list_under_the_pointer() {
    require_tmux!();
    let t = Tmux::start(&[], &[("SHELL", "/bin/sh")], 80, 24);
    t.wait_text("? help");
    // Five fleets: had the wheel moved over the panel, the tab bar or the status line,
    // the selection would be at the last (wheel-e), not three down from the first.
    for name in ["wheel-a", "wheel-b", "wheel-c", "wheel-d", "wheel-e"] {
        t.apply_local_named(name);
    }
    t.keys(&["2", "r"]);
    t.wait_text("Fleets (5)");
    t.keys(&["g", "d"]);
    let screen = t.wait_for("the panel", |s| s.contains("created (UTC)"));
    assert_eq!(panel_title(&screen), "wheel-a", "{screen}");
    // Wheel down (button 65) over the panel (row 20 of 24), the tab bar (row 1) and the
    // status line (row 24): nothing moves.
    for row in [20, 1, 24] {
        t.type_text(&format!("\x1b[<65;30;{row}M"));
    }
    // Then over the table (row 4): three rows down, the last fleet.
    t.type_text("\x1b[<65;30;4M");
    let screen = t.wait_for("the wheel over the table", |s| panel_title(s) == "wheel-d");
    assert!(screen.contains("created (UTC)"), "{screen}");
    // Up over the table: back to the first.
    t.type_text("\x1b[<64;30;4M");
    t.wait_for("the wheel up over the table", |s| panel_title(s) == "wheel-a");
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(), 0);
}
