//! How the cockpit looks to an operator at 80x24, in a real terminal (tmux): colour depth,
//! the help overlay, the Offers filter's preview and footer, columns and names.

mod support;

use support::tmux::{self, Tmux};

macro_rules! require_tmux {
    () => {
        if !tmux::tmux_available() {
            panic!("tmux is not installed: run ./scripts/test.sh, which installs it");
        }
    };
}

/// The SGR parameter lists of every colour escape on `screen` (`ESC [ ... m`).
fn sgr(screen: &str) -> Vec<String> {
    screen
        .split('\u{1b}')
        .filter_map(|s| s.strip_prefix('['))
        .filter_map(|s| s.split_once('m').map(|(p, _)| p.to_string()))
        .filter(|p| p.chars().all(|c| c.is_ascii_digit() || c == ';'))
        .collect()
}

/// Whether one SGR list sets a 24-bit colour (`38;2;…`/`48;2;…`).
fn has_rgb(params: &[String]) -> bool {
    params.iter().any(|p| {
        let f: Vec<&str> = p.split(';').collect();
        f.windows(2)
            .any(|w| (w[0] == "38" || w[0] == "48") && w[1] == "2")
    })
}

/// The palette indices set with `38;5;N`/`48;5;N` (crossterm writes the 16 ANSI colours
/// so too, as 0..15).
fn palette(params: &[String]) -> Vec<u16> {
    let mut out = vec![];
    for p in params {
        let f: Vec<&str> = p.split(';').collect();
        for w in f.windows(3) {
            if (w[0] == "38" || w[0] == "48") && w[1] == "5" {
                out.extend(w[2].parse::<u16>().ok());
            }
        }
    }
    out
}

/// Whether any colour is set at all (a palette index or a classic `3x`/`9x` SGR).
fn any_colour(params: &[String]) -> bool {
    !palette(params).is_empty()
        || params.iter().any(|p| {
            p.split(';').any(|n| {
                n.parse::<u16>().is_ok_and(|n| {
                    (30..=37).contains(&n)
                        || (40..=47).contains(&n)
                        || (90..=97).contains(&n)
                        || (100..=107).contains(&n)
                })
            })
        })
}

fn offers_with_env(env: &[(&str, &str)]) -> (Tmux, Vec<String>) {
    let t = Tmux::start(&[], env, 80, 24);
    t.wait_text("Offers ·");
    // Something selected and a tab active: every role of the theme is on screen.
    t.keys(&["j"]);
    t.wait_text("Offers ·");
    let params = sgr(&t.screen_escapes());
    (t, params)
}

#[test]
fn colour_depth_follows_term_and_colorterm() {
    require_tmux!();
    // TERM=xterm without COLORTERM: the 16 ANSI colours only.
    let (_t, p) = offers_with_env(&[("TERM", "xterm")]);
    assert!(any_colour(&p), "the cockpit has colours: {p:?}");
    assert!(!has_rgb(&p), "no 24-bit colour with TERM=xterm: {p:?}");
    assert!(
        palette(&p).iter().all(|&i| i < 16),
        "only the 16 colours with TERM=xterm: {p:?}"
    );
    // A 256-colour TERM: the palette, no 24-bit.
    let (_t, p) = offers_with_env(&[("TERM", "xterm-256color")]);
    assert!(palette(&p).iter().any(|&i| i >= 16), "{p:?}");
    assert!(!has_rgb(&p), "{p:?}");
    // COLORTERM=truecolor: the theme's colours as written (the check sees them).
    let (_t, p) = offers_with_env(&[("TERM", "xterm-256color"), ("COLORTERM", "truecolor")]);
    assert!(has_rgb(&p), "{p:?}");
}

#[test]
fn config_color_depth_overrides_the_guess() {
    require_tmux!();
    // The config is written before flightdeck reads it: a shell starts it after.
    let t = Tmux::shell(&[("TERM", "xterm-256color"), ("COLORTERM", "truecolor")], 80, 24);
    support::tmux::write(&t.fd_home().join("config.yaml"), "color_depth: 16\n");
    t.run_flightdeck_line("");
    t.wait_text("Offers ·");
    t.keys(&["j"]);
    t.wait_text("Offers ·");
    let p = sgr(&t.screen_escapes());
    assert!(any_colour(&p), "{p:?}");
    assert!(!has_rgb(&p) && palette(&p).iter().all(|&i| i < 16), "{p:?}");
    t.keys(&["q"]);
    t.echo_exit_status();
    assert_eq!(t.wait_exit(), 0);
}

/// The text inside the help overlay's frame on `screen`, rows joined by spaces (the
/// view behind it left out).
fn overlay_text(screen: &str) -> String {
    let lines: Vec<Vec<char>> = screen.lines().map(|l| l.chars().collect()).collect();
    let Some(top) = lines
        .iter()
        .position(|l| l.iter().collect::<String>().contains("┌ Help:"))
    else {
        return String::new();
    };
    let head: String = lines[top].iter().collect();
    let x0 = head[..head.find("┌ Help:").unwrap()].chars().count();
    let x1 = lines[top].iter().rposition(|c| *c == '┐').unwrap();
    lines[top + 1..]
        .iter()
        .take_while(|l| l.get(x0) == Some(&'│'))
        .map(|l| l[x0 + 1..x1.min(l.len())].iter().collect::<String>())
        .collect::<Vec<_>>()
        .join(" ")
}

fn squeeze(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn help_at_80x24_is_the_views_own_wrapped_scrollable_and_q_closes_it() {
    require_tmux!();
    let t = Tmux::start(&[], &[], 80, 24);
    t.wait_text("Offers ·");
    t.keys(&["6"]);
    t.wait_text("Jobs");
    t.keys(&["?"]);
    // The position note is the overlay's last row: with it on screen the frame is whole.
    let screen = t.wait_for("the help with its position note", |s| {
        s.contains("Help: Jobs view first") && s.contains("(j/k scroll)")
    });
    let first = squeeze(&overlay_text(&screen));
    // The view's own keys first, in its own words.
    assert!(first.starts_with("Jobs view"), "{screen}");
    assert!(
        first.contains("v wrap long log lines or cut them at the edge"),
        "{screen}"
    );
    assert!(screen.contains("rows 1–"), "says there is more: {screen}");
    // Scroll page by page to the end: every description reads whole (wrapped, not cut).
    let mut seen = first.clone();
    let note = |s: &str| {
        s.find(" rows ")
            .map(|i| s[i..].lines().next().unwrap_or("").to_string())
            .unwrap_or_default()
    };
    let mut last = note(&screen);
    for _ in 0..20 {
        let at_end = last
            .split(" of ")
            .nth(1)
            .and_then(|t| t.split(' ').next())
            .is_some_and(|total| last.contains(&format!("–{total} of")));
        if at_end {
            break;
        }
        t.keys(&["C-f"]);
        // Wait for the next page's note: the frame drawn after the key, whole.
        let screen = t.wait_for("the next page of the help", |s| {
            let n = note(s);
            !n.is_empty() && n != last
        });
        last = note(&screen);
        seen.push(' ');
        seen.push_str(&squeeze(&overlay_text(&screen)));
    }
    let seen = squeeze(&seen);
    for whole in [
        "Doctor view: every check on every node of the fleet",
        "suspend to the shell (resume with fg)",
        "every status message of this session, whole (the newest last)",
    ] {
        assert!(seen.contains(whole), "{whole:?} not whole in:\n{seen}");
    }
    // q closes the help; flightdeck goes on.
    t.keys(&["q"]);
    t.wait_gone("Help: Jobs view first");
    std::thread::sleep(std::time::Duration::from_millis(200));
    let screen = t.screen();
    assert!(
        !screen.contains(tmux::EXIT_MARKER),
        "q in the help quit flightdeck:\n{screen}"
    );
    assert!(screen.contains("Jobs"), "{screen}");
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(), 0);
}

#[test]
fn offers_preview_keeps_the_filter_in_force_and_footer_notes_fit_at_80() {
    require_tmux!();
    let t = Tmux::start(&[], &[], 80, 24);
    let before = t.wait_text("Offers ·");
    let count = |s: &str| {
        s.split("Offers · ")
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or_else(|| panic!("no count in the title:\n{s}"))
    };
    let all = count(&before);
    // A typo: the table keeps the rows in force (all offers), not `gpu`'s.
    t.keys(&["/"]);
    t.type_text("gpu=H1OO");
    let screen = t.wait_text("did you mean H100?");
    assert_eq!(count(&screen), all, "{screen}");
    t.keys(&["Escape"]);
    t.wait_gone("did you mean");
    // A Spot filter at 80 columns: the SPOT column is shown, and both notes of the
    // bottom border read whole.
    t.keys(&["/"]);
    t.type_text("gpu=H200 spot<40");
    t.keys(&["Enter"]);
    let screen = t.wait_text("filter: gpu=H200 spot<40");
    let header = screen
        .lines()
        .find(|l| l.contains("MACHINE"))
        .unwrap_or_else(|| panic!("{screen}"));
    assert!(header.contains("SPOT"), "{screen}");
    let bottom = screen
        .lines()
        .find(|l| l.starts_with('└'))
        .unwrap_or_else(|| panic!("{screen}"));
    assert!(
        bottom.contains("offers left out: their price is unknown"),
        "{bottom}"
    );
    assert!(bottom.contains("d tells why"), "{bottom}");
    assert!(bottom.contains("! "), "{bottom}");
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(), 0);
}
