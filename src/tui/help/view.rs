//! The `?` help overlay, generated from the keymap (and the palette's command list), so
//! it always shows the keys that really work.
//!
//! ```text
//! ┌ Help: Offers view first (q or esc closes) ────┐
//! │Offers view                                    │
//! │  enter      expand a group of machines, or    │
//! │             show the offer's detail           │
//! │ ...                                           │
//! │Every view                                     │
//! │  ?, f1      show this help                    │
//! │ ...                       rows 1–20 of 140 ───┘
//! ```

use crate::tui::action::{Action, Context};
use crate::tui::keymap::Keymap;
use crate::tui::state::View;
use crate::tui::theme::Theme;
use crate::tui::update::PALETTE_COMMANDS;
use crate::tui::widgets::centered;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Widget};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HelpLine {
    Section(String),
    Entry { keys: String, what: String },
    Blank,
}

/// A view's own keys and what each does there, in the order the overlay lists them
/// (the keys come from the keymap: a rebound key shows as rebound).
pub fn view_keys(view: View) -> &'static [(Action, &'static str)] {
    use Action::*;
    match view {
        View::Offers => &[
            (Select, "expand a group of machines, or show the offer's detail"),
            (Detail, "show or hide the detail panel (why a price is marked !)"),
            (Sort, "sort by the next column"),
            (SortReverse, "reverse the sort order"),
            (Pricing, "price by on-demand, spot or flex-start"),
            (
                WriteFleet,
                "write a fleet file for the selected offer (an editor opens)",
            ),
            (Reload, "refresh prices from Google's APIs"),
        ],
        View::Fleets => &[
            (Select, "open a shell on every node of the fleet (Panes view)"),
            (
                FleetApply,
                "apply the fleet's file: its plan and $/h, then confirm",
            ),
            (FleetDelete, "delete the fleet: what goes, then confirm"),
            (FleetEdit, "edit the fleet's file (validated as you type)"),
            (JobStop, "stop a running apply or delete"),
            (Detail, "show or hide the detail panel"),
            (Reload, "read the fleets again"),
        ],
        View::Nodes => &[
            (Select, "open the node's shell, zoomed"),
            (Detail, "show or hide the node's detail panel"),
        ],
        View::Panes => &[
            (Select, "type into the focused pane"),
            (
                PaneInsert,
                "type into the focused pane (or all, when broadcasting)",
            ),
            (PaneBroadcast, "broadcast typing: off, all panes, marked panes"),
            (PaneMark, "mark the focused pane for broadcast"),
            (PaneZoom, "zoom the focused pane / back to the grid"),
            (
                PaneCopy,
                "copy mode: scroll, search and yank the pane's scrollback",
            ),
            (Left, "focus the pane to the left"),
            (Right, "focus the pane to the right"),
            (Reload, "restart an exited pane's shell"),
        ],
        View::Nccl => &[
            (
                NcclRun,
                "start an NCCL run: fleet, sizes, iterations, data type, engine, GPUDirect profile",
            ),
            (
                NcclRunAgain,
                "run the selected run again: its settings and environment in the dialog",
            ),
            (Select, "follow the selected run: its chart and verdict"),
            (
                Compare,
                "mark the run for a side-by-side comparison (two at a time)",
            ),
            (Close, "close the followed run"),
            (Reload, "read the fleets again"),
        ],
        View::Jobs => &[
            (Select, "follow the selected job's log"),
            (JobStop, "stop the job on every node (press twice)"),
            (Close, "close the followed log"),
            (NicsMode, "wrap long log lines or cut them at the edge"),
            (NextItem, "next node's log"),
            (PrevItem, "previous node's log"),
            (Reload, "read the jobs again"),
        ],
        View::Nics => &[
            (Select, "start sampling the fleet's NICs"),
            (NicsMode, "per node, per rail, fleet total (cycles)"),
            (NextItem, "next node (per node, fleet) or next rail (per rail)"),
            (PrevItem, "previous node or rail"),
            (PaneZoom, "time span 1 min .. 1 h"),
            (PaneMark, "pause / resume the charts"),
            (Reload, "start sampling again"),
        ],
        View::Doctor => &[
            (Reload, "examine the fleet again"),
            (Select, "a finding's evidence (or examine, before the first run)"),
            (Detail, "show or hide the finding's evidence"),
            (NicsMode, "every finding or only the problems"),
            (NextItem, "next finding"),
            (PrevItem, "previous finding"),
            (Close, "close the evidence"),
        ],
    }
}

/// The layers a view opens, listed after the cockpit's keys.
fn layers(view: View) -> Vec<Context> {
    let mut out = vec![Context::Help, Context::Input];
    match view {
        View::Panes => out.extend([Context::Pane, Context::Copy]),
        View::Fleets => out.extend([Context::Confirmation, Context::Question, Context::Editor]),
        View::Offers | View::Nccl => out.push(Context::Editor),
        View::Nodes => out.extend([Context::Pane, Context::Question]),
        View::Jobs | View::Nics | View::Doctor => {}
    }
    out
}

/// Keys whose meaning depends on the view: listed in a view's own section, not among the
/// cockpit's.
fn view_specific(action: Action) -> bool {
    use Action::*;
    matches!(
        action,
        Select
            | Reload
            | Close
            | Left
            | Right
            | PaneInsert
            | PaneZoom
            | PaneMark
            | PaneBroadcast
            | PaneCopy
            | Detail
            | Sort
            | SortReverse
            | Pricing
            | WriteFleet
            | JobStop
            | Compare
            | NicsMode
            | NextItem
            | PrevItem
            | FleetApply
            | FleetDelete
            | FleetEdit
            | NcclRun
            | NcclRunAgain
    )
}

fn keys_of(chords: &[crate::tui::keymap::Chord]) -> String {
    if chords.is_empty() {
        "(unbound)".to_string()
    } else {
        chords
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The overlay's lines for `view`: the view's own keys first, then the cockpit's (every
/// view), the layers this view opens (inputs, dialogs), then the palette commands.
pub fn lines(keymap: &Keymap, view: View) -> Vec<HelpLine> {
    let mut out = vec![HelpLine::Section(format!("{} view", view.title()))];
    for (action, what) in view_keys(view) {
        let chords = keymap.chords(Context::Global, *action);
        if chords.is_empty() {
            continue;
        }
        out.push(HelpLine::Entry {
            keys: keys_of(chords),
            what: what.to_string(),
        });
    }
    if view == View::Doctor {
        // The grid's columns: their two letters when the names do not fit, and what
        // each check looks at.
        out.push(HelpLine::Blank);
        out.push(HelpLine::Section("Doctor columns (the checks)".to_string()));
        for c in crate::doctor::CHECKS {
            out.push(HelpLine::Entry {
                keys: format!("{} {}", c.short, c.id),
                what: c.explain.to_string(),
            });
        }
    }
    out.push(HelpLine::Blank);
    out.push(HelpLine::Section("Every view".to_string()));
    for b in keymap
        .bindings()
        .iter()
        .filter(|b| b.context == Context::Global && !view_specific(b.action))
    {
        out.push(HelpLine::Entry {
            keys: keys_of(&b.chords),
            what: b.action.description().to_string(),
        });
    }
    out.push(HelpLine::Blank);
    for ctx in layers(view) {
        out.push(HelpLine::Section(ctx.title().to_string()));
        for b in keymap.bindings().iter().filter(|b| b.context == ctx) {
            out.push(HelpLine::Entry {
                keys: keys_of(&b.chords),
                what: b.action.description().to_string(),
            });
        }
        out.push(HelpLine::Blank);
    }
    out.push(HelpLine::Section("Palette commands".to_string()));
    let views: Vec<&str> = View::ALL.iter().map(|v| v.command()).collect();
    out.push(HelpLine::Entry {
        keys: ":VIEW".into(),
        what: format!("go to a view: {}", views.join(", ")),
    });
    for (name, arg, about) in PALETTE_COMMANDS {
        let keys = if arg.is_empty() {
            format!(":{name}")
        } else {
            format!(":{name} {arg}")
        };
        out.push(HelpLine::Entry {
            keys,
            what: about.to_string(),
        });
    }
    out
}

/// The widest the keys column gets; longer key lists wrap.
const KEYS_WIDTH: usize = 22;

/// `text` in lines of at most `width` characters, broken between words; one empty line
/// for empty text.
fn word_wrap(text: &str, width: usize) -> Vec<String> {
    let out = crate::words::wrap_words(text, width.max(1));
    if out.is_empty() {
        vec![String::new()]
    } else {
        out
    }
}

/// One screen row of the overlay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HelpRow {
    Section(String),
    Entry { keys: String, what: String },
    Blank,
}

/// The overlay's rows at an inner width of `width`: each entry's keys in a column (wrapped
/// at the commas when too long) and its description wrapped beside them, nothing cut.
pub fn rows(keymap: &Keymap, view: View, width: usize) -> Vec<HelpRow> {
    let all = lines(keymap, view);
    let key_w = all
        .iter()
        .filter_map(|l| match l {
            HelpLine::Entry { keys, .. } => Some(keys.chars().count()),
            _ => None,
        })
        .max()
        .unwrap_or(0)
        .min(KEYS_WIDTH)
        .min(width / 3);
    // Two spaces before the keys, two between keys and text.
    let what_w = width.saturating_sub(key_w + 4).max(8);
    let mut out = Vec::new();
    for l in all {
        match l {
            HelpLine::Section(s) => out.extend(word_wrap(&s, width).into_iter().map(HelpRow::Section)),
            HelpLine::Blank => out.push(HelpRow::Blank),
            HelpLine::Entry { keys, what } => {
                let keys = word_wrap(&keys, key_w.max(1));
                let what = word_wrap(&what, what_w);
                for i in 0..keys.len().max(what.len()) {
                    out.push(HelpRow::Entry {
                        keys: keys.get(i).cloned().unwrap_or_default(),
                        what: what.get(i).cloned().unwrap_or_default(),
                    });
                }
            }
        }
    }
    out
}

/// The first row shown may go up to this (the last page full) for a screen of `size`.
pub fn max_scroll(keymap: &Keymap, view: View, size: (u16, u16)) -> usize {
    let body = Rect::new(0, 0, size.0, size.1.saturating_sub(2));
    let area = overlay_rect(body, HELP_WIDTH);
    let inner_w = usize::from(area.width.saturating_sub(2));
    let inner_h = usize::from(area.height.saturating_sub(2));
    rows(keymap, view, inner_w).len().saturating_sub(inner_h)
}

/// The widest the help overlay gets.
const HELP_WIDTH: u16 = 110;

pub struct HelpOverlay<'a> {
    pub keymap: &'a Keymap,
    /// The view shown under the overlay: its keys come first.
    pub view: View,
    pub scroll: usize,
    pub theme: &'a Theme,
}

/// The area of a full-height overlay over `body`: centred, at most `max_w` wide.
fn overlay_rect(body: Rect, max_w: u16) -> Rect {
    let h = if body.height >= 10 {
        body.height - 2
    } else {
        body.height
    };
    centered(
        body,
        body.width.saturating_sub(4).max(body.width.min(20)).min(max_w),
        h,
    )
}

/// The area of a full-height overlay over `body` (the help, the messages): centred, at
/// most `max_w` wide, cleared; `None` when nothing fits.
fn overlay_area(body: Rect, max_w: u16, buf: &mut Buffer) -> Option<Rect> {
    let area = overlay_rect(body, max_w);
    if area.is_empty() {
        return None;
    }
    Clear.render(area, buf);
    Some(area)
}

impl Widget for HelpOverlay<'_> {
    fn render(self, body: Rect, buf: &mut Buffer) {
        let Some(area) = overlay_area(body, HELP_WIDTH, buf) else {
            return;
        };
        let inner_w = usize::from(area.width.saturating_sub(2));
        let all = rows(self.keymap, self.view, inner_w);
        let key_w = all
            .iter()
            .filter_map(|l| match l {
                HelpRow::Entry { keys, .. } => Some(keys.chars().count()),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        let inner_h = usize::from(area.height.saturating_sub(2));
        let max_scroll = all.len().saturating_sub(inner_h);
        let scroll = self.scroll.min(max_scroll);
        // Where the overlay is, and that there is more, in its frame.
        let position = if max_scroll > 0 {
            format!(
                " rows {}–{} of {} (j/k scroll) ",
                scroll + 1,
                (scroll + inner_h).min(all.len()),
                all.len()
            )
        } else {
            String::new()
        };
        let block = Block::default()
            .borders(Borders::ALL)
            .border_style(self.theme.border(true))
            .title(Span::styled(
                format!(" Help: {} view first (q or esc closes) ", self.view.title()),
                self.theme.title(),
            ))
            .title_bottom(Line::styled(position, self.theme.muted()).right_aligned())
            .style(self.theme.base());
        let text: Vec<Line> = all
            .iter()
            .skip(scroll)
            .take(inner_h)
            .map(|l| match l {
                HelpRow::Section(s) => Line::styled(s.clone(), self.theme.title()),
                HelpRow::Entry { keys, what } => Line::from(vec![
                    Span::styled(format!("  {keys:<key_w$}  "), self.theme.key_hint()),
                    Span::styled(what.clone(), self.theme.base()),
                ]),
                HelpRow::Blank => Line::raw(""),
            })
            .collect();
        Paragraph::new(text).block(block).render(area, buf);
    }
}

/// The message history (`M`, `:messages`): every status message of the session, whole and
/// wrapped, the newest last; `scroll` is the first message shown (clamped so that the
/// last page is full).
pub fn messages(
    all: &std::collections::VecDeque<crate::tui::state::StatusMessage>,
    scroll: usize,
    theme: &Theme,
    body: Rect,
    buf: &mut Buffer,
) {
    let Some(area) = overlay_area(body, 120, buf) else {
        return;
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.border(true))
        .title(Span::styled(
            format!(" Messages ({}, newest last; esc closes) ", all.len()),
            theme.title(),
        ))
        .style(theme.base());
    let inner = block.inner(area);
    block.render(area, buf);
    if all.is_empty() {
        Paragraph::new(Line::styled("No messages yet.", theme.muted())).render(inner, buf);
        return;
    }
    // Each message wrapped at the edge; the last page kept full.
    let w = usize::from(inner.width);
    // A message may carry what a node or an API said: shown, never acted on.
    let rows = |m: &crate::tui::state::StatusMessage| {
        crate::tui::widgets::hard_wrap(&crate::tui::widgets::shown(&m.text), w)
    };
    let mut first = all.len();
    let mut used = 0;
    while first > 0 && used + rows(&all[first - 1]).len() <= usize::from(inner.height) {
        used += rows(&all[first - 1]).len();
        first -= 1;
    }
    let start = scroll.min(first);
    let lines: Vec<Line> = all
        .iter()
        .skip(start)
        .flat_map(|m| {
            rows(m)
                .into_iter()
                .map(move |r| Line::styled(r, theme.tone(m.tone)))
        })
        .collect();
    Paragraph::new(lines).render(inner, buf);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_views_keys_come_first_then_the_cockpits() {
        let km = Keymap::defaults();
        for view in View::ALL {
            let l = lines(&km, view);
            assert_eq!(l[0], HelpLine::Section(format!("{} view", view.title())));
            let every = l
                .iter()
                .position(|x| *x == HelpLine::Section("Every view".into()))
                .expect("a section for every view");
            // The view's section holds its own words, not the global table's.
            assert!(every > 2, "{view:?}: {l:?}");
            // Only the Doctor's own section of its grid's columns stands between.
            let own = HelpLine::Section("Doctor columns (the checks)".into());
            assert!(l[1..every]
                .iter()
                .all(|x| !matches!(x, HelpLine::Section(_)) || (view == View::Doctor && *x == own)));
        }
        // ux-walk-2 item 10: `?` in the Doctor view names every column of its grid.
        let doctor = lines(&km, View::Doctor);
        for c in crate::doctor::CHECKS {
            let keys = format!("{} {}", c.short, c.id);
            assert!(
                doctor
                    .iter()
                    .any(|l| matches!(l, HelpLine::Entry { keys: k, .. } if *k == keys)),
                "{keys}"
            );
        }
        let offers = lines(&km, View::Offers);
        assert_eq!(
            offers[1],
            HelpLine::Entry {
                keys: "enter".into(),
                what: "expand a group of machines, or show the offer's detail".into()
            }
        );
        // A key shared by views says what it does in this one, and only once.
        let jobs = lines(&km, View::Jobs);
        let v_lines: Vec<_> = jobs
            .iter()
            .filter(|l| matches!(l, HelpLine::Entry { keys, .. } if keys == "v"))
            .collect();
        assert_eq!(v_lines.len(), 1, "{v_lines:?}");
        assert!(
            matches!(v_lines[0], HelpLine::Entry { what, .. } if what.starts_with("wrap long log lines"))
        );
    }

    #[test]
    fn nothing_is_cut_at_80_or_160_columns() {
        let km = Keymap::defaults();
        for (w, h) in [(80u16, 24u16), (160, 48)] {
            let area = overlay_rect(Rect::new(0, 0, w, h - 2), HELP_WIDTH);
            let inner = usize::from(area.width - 2);
            for view in View::ALL {
                let rows = rows(&km, view, inner);
                let key_w = rows
                    .iter()
                    .filter_map(|r| match r {
                        HelpRow::Entry { keys, .. } => Some(keys.chars().count()),
                        _ => None,
                    })
                    .max()
                    .unwrap();
                for r in &rows {
                    let n = match r {
                        HelpRow::Section(s) => s.chars().count(),
                        HelpRow::Entry { what, .. } => key_w + 4 + what.chars().count(),
                        HelpRow::Blank => 0,
                    };
                    assert!(n <= inner, "{w}x{h} {view:?}: {r:?} is wider than {inner}");
                }
                // Every description and key list reads whole from its rows.
                let joined = |pick: &dyn Fn(&HelpRow) -> String| {
                    rows.iter()
                        .map(|r| pick(r) + " ")
                        .collect::<String>()
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" ")
                };
                let whats = joined(&|r| match r {
                    HelpRow::Entry { what, .. } => what.clone(),
                    _ => "|".into(),
                });
                let keys = joined(&|r| match r {
                    HelpRow::Entry { keys, .. } => keys.clone(),
                    _ => "|".into(),
                });
                let norm = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
                for l in lines(&km, view) {
                    if let HelpLine::Entry { what, keys: k } = l {
                        assert!(whats.contains(&norm(&what)), "{w}x{h} {view:?}: {what:?} cut");
                        assert!(keys.contains(&norm(&k)), "{w}x{h} {view:?}: {k:?} cut");
                    }
                }
            }
        }
    }

    #[test]
    fn word_wrap_breaks_at_spaces() {
        assert_eq!(word_wrap("one two three", 7), vec!["one two", "three"]);
        assert_eq!(word_wrap("abcdefghij", 4), vec!["abcd", "efgh", "ij"]);
        assert_eq!(word_wrap("", 4), vec![""]);
    }
}
