//! The Panes view's state and its pure logic: the grid layout (shared by the drawer and
//! by `update`, which must tell each pane its size), focus movement, broadcast targets,
//! and copy mode over a pane's scrollback snapshot.

pub mod act;
pub mod msg;
pub mod update;
pub mod view;

pub use act::{act, body, copy_key, key, layout, paste, sync_sizes, wheel};
pub use msg::Msg;
pub use update::update;

use crate::term::session::PaneState;
use crate::term::SharedScreen;
use ratatui::layout::Rect;

/// The smallest tile (border included) before the grid pages.
pub const MIN_TILE: (u16, u16) = (24, 5);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Broadcast {
    #[default]
    Off,
    All,
    Marked,
}

impl Broadcast {
    pub fn next(self) -> Broadcast {
        match self {
            Broadcast::Off => Broadcast::All,
            Broadcast::All => Broadcast::Marked,
            Broadcast::Marked => Broadcast::Off,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Broadcast::Off => "off",
            Broadcast::All => "all panes",
            Broadcast::Marked => "marked panes",
        }
    }
}

#[derive(Clone)]
pub struct PaneTile {
    pub id: usize,
    pub node: String,
    pub host: String,
    pub state: PaneState,
    pub marked: bool,
    pub screen: SharedScreen,
    /// The size last sent to the pane's session (columns, rows).
    pub size: (u16, u16),
}

impl std::fmt::Debug for PaneTile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PaneTile")
            .field("id", &self.id)
            .field("node", &self.node)
            .field("state", &self.state)
            .field("marked", &self.marked)
            .field("size", &self.size)
            .finish()
    }
}

/// Copy mode: a frozen snapshot of one pane's lines, a cursor, a selection and a search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyMode {
    pub pane: usize,
    pub lines: Vec<String>,
    pub cursor: usize,
    pub anchor: Option<usize>,
    pub search: Option<String>,
    /// The search being typed after `/`.
    pub typing: Option<String>,
}

impl CopyMode {
    pub fn new(pane: usize, lines: Vec<String>) -> CopyMode {
        let cursor = lines.len().saturating_sub(1);
        CopyMode {
            pane,
            lines,
            cursor,
            anchor: None,
            search: None,
            typing: None,
        }
    }

    /// The selected lines (anchor..=cursor), or the cursor's line.
    pub fn selection(&self) -> std::ops::RangeInclusive<usize> {
        let a = self.anchor.unwrap_or(self.cursor);
        a.min(self.cursor)..=a.max(self.cursor)
    }

    pub fn selected_text(&self) -> String {
        let r = self.selection();
        self.lines.get(r).map(|l| l.join("\n")).unwrap_or_default()
    }

    /// Move to the next (or previous) line containing the search, wrapping around.
    pub fn find(&mut self, forward: bool) -> bool {
        let Some(needle) = self.search.as_ref().map(|s| s.to_lowercase()) else {
            return false;
        };
        if needle.is_empty() || self.lines.is_empty() {
            return false;
        }
        let n = self.lines.len();
        for step in 1..=n {
            let i = if forward {
                (self.cursor + step) % n
            } else {
                (self.cursor + n - step % n) % n
            };
            if self.lines[i].to_lowercase().contains(&needle) {
                self.cursor = i;
                return true;
            }
        }
        false
    }
}

#[derive(Debug, Clone, Default)]
pub struct Panes {
    /// The fleet whose panes are open.
    pub fleet: Option<String>,
    pub tiles: Vec<PaneTile>,
    /// Index into `tiles`.
    pub focus: usize,
    pub zoom: bool,
    pub broadcast: Broadcast,
    /// Keys go to the pane(s).
    pub insert: bool,
    pub page: usize,
    pub copy: Option<CopyMode>,
    /// Other fleets' panes, their shells still running: opening another fleet's panes
    /// puts the shown ones here, and opening them again brings them back as they were.
    pub background: Vec<Panes>,
    /// Panes the wheel scrolled into their scrollback: pane id → rows above the bottom.
    pub scrolled: std::collections::HashMap<usize, usize>,
}

/// Where each tile goes: `(index into tiles, its rectangle)` for the tiles on the current
/// page, the number of columns of the grid, and the number of pages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grid {
    pub cells: Vec<(usize, Rect)>,
    pub columns: usize,
    pub pages: usize,
    pub per_page: usize,
}

/// Lay out `n` tiles in `area`: the column count that gives the roundest readable tiles
/// (terminal cells are about twice as tall as wide), paging when even the smallest tiles
/// do not fit. `zoom` shows one tile over the whole area.
pub fn grid(area: Rect, n: usize, zoom: Option<usize>, page: usize) -> Grid {
    if n == 0 || area.is_empty() {
        return Grid {
            cells: vec![],
            columns: 1,
            pages: 1,
            per_page: 0,
        };
    }
    if let Some(z) = zoom {
        return Grid {
            cells: vec![(z.min(n - 1), area)],
            columns: 1,
            pages: 1,
            per_page: 1,
        };
    }
    let (w, h) = (usize::from(area.width), usize::from(area.height));
    let max_cols = (w / usize::from(MIN_TILE.0)).max(1);
    let max_rows = (h / usize::from(MIN_TILE.1)).max(1);
    let per_page = (max_cols * max_rows).min(n).max(1);
    let pages = n.div_ceil(per_page);
    let page = page.min(pages - 1);
    let on_page = (n - page * per_page).min(per_page);
    // Choose columns for the tiles on this page: fit, then roundest (w ≈ 2.5 h), with
    // empty slots counted against a layout.
    let mut best = (1usize, f64::MAX);
    for cols in 1..=on_page.min(max_cols) {
        let rows = on_page.div_ceil(cols);
        if rows > max_rows {
            continue;
        }
        let (tw, th) = (w as f64 / cols as f64, h as f64 / rows as f64);
        let empty = (cols * rows - on_page) as f64 / on_page as f64;
        let score = (tw / (2.5 * th)).ln().abs() + empty;
        if score < best.1 {
            best = (cols, score);
        }
    }
    let cols = best.0;
    let rows = on_page.div_ceil(cols);
    let mut cells = Vec::with_capacity(on_page);
    for k in 0..on_page {
        let (r, c) = (k / cols, k % cols);
        // Spread the remainder so tiles fill the area exactly.
        let x0 = area.x + (c * w / cols) as u16;
        let x1 = area.x + ((c + 1) * w / cols) as u16;
        let y0 = area.y + (r * h / rows) as u16;
        let y1 = area.y + ((r + 1) * h / rows) as u16;
        cells.push((page * per_page + k, Rect::new(x0, y0, x1 - x0, y1 - y0)));
    }
    Grid {
        cells,
        columns: cols,
        pages,
        per_page,
    }
}

/// The inside of a tile (its border removed): the size its terminal gets.
pub fn inner(r: Rect) -> Rect {
    Rect::new(
        r.x + 1,
        r.y + 1,
        r.width.saturating_sub(2),
        r.height.saturating_sub(2),
    )
}

impl Panes {
    /// Every pane: the shown fleet's, then the background's.
    pub fn all_tiles(&self) -> impl Iterator<Item = &PaneTile> {
        self.tiles
            .iter()
            .chain(self.background.iter().flat_map(|b| b.tiles.iter()))
    }

    /// The pane `id`, shown or in the background.
    pub fn tile_mut(&mut self, id: usize) -> Option<&mut PaneTile> {
        self.tiles
            .iter_mut()
            .chain(self.background.iter_mut().flat_map(|b| b.tiles.iter_mut()))
            .find(|t| t.id == id)
    }

    /// Whether `fleet`'s panes are open, shown or in the background.
    pub fn is_open(&self, fleet: &str) -> bool {
        self.fleet.as_deref() == Some(fleet)
            || self.background.iter().any(|b| b.fleet.as_deref() == Some(fleet))
    }

    /// How many of `fleet`'s panes hold a connected shell, shown or in the background.
    pub fn open_shells(&self, fleet: &str) -> usize {
        std::iter::once(self)
            .chain(self.background.iter())
            .filter(|p| p.fleet.as_deref() == Some(fleet))
            .flat_map(|p| p.tiles.iter())
            .filter(|t| matches!(t.state, crate::term::session::PaneState::Connected))
            .count()
    }

    /// Drop `fleet`'s panes, shown or in the background; whether it had any.
    pub fn close_fleet(&mut self, fleet: &str) -> bool {
        let had = self.is_open(fleet);
        self.background.retain(|b| b.fleet.as_deref() != Some(fleet));
        if self.fleet.as_deref() == Some(fleet) {
            let background = std::mem::take(&mut self.background);
            *self = Panes {
                background,
                ..Panes::default()
            };
        }
        had
    }

    /// Put the shown panes (when any) in the background, out of typing and copy mode.
    fn park(&mut self) {
        let mut background = std::mem::take(&mut self.background);
        let shown = std::mem::take(self);
        if !shown.tiles.is_empty() {
            background.push(Panes {
                insert: false,
                copy: None,
                ..shown
            });
        }
        self.background = background;
    }

    /// Show newly opened panes of `fleet`; the shown ones of another fleet go to the
    /// background, an older set of the same fleet's (whose sessions ended) is dropped.
    pub fn open(&mut self, fleet: String, tiles: Vec<PaneTile>, focus: Option<usize>) {
        if self.fleet.as_deref() == Some(fleet.as_str()) {
            self.tiles.clear();
        }
        self.park();
        let mut background = std::mem::take(&mut self.background);
        background.retain(|b| b.fleet.as_deref() != Some(fleet.as_str()));
        *self = Panes {
            fleet: Some(fleet),
            tiles,
            focus: focus.unwrap_or(0),
            zoom: focus.is_some(),
            background,
            ..Default::default()
        };
    }

    /// Show `fleet`'s panes from the background, as they were; the shown ones go there.
    /// False when `fleet` has none open.
    pub fn bring_forward(&mut self, fleet: &str) -> bool {
        if self.fleet.as_deref() == Some(fleet) {
            return true;
        }
        let Some(i) = self
            .background
            .iter()
            .position(|b| b.fleet.as_deref() == Some(fleet))
        else {
            return false;
        };
        let shown = self.background.remove(i);
        self.park();
        let background = std::mem::take(&mut self.background);
        *self = Panes { background, ..shown };
        true
    }

    /// The panes keys go to: with broadcast, all or the marked ones (the focused one when
    /// none is marked); else the focused one.
    pub fn targets(&self) -> Vec<usize> {
        let live = |t: &&PaneTile| matches!(t.state, PaneState::Connected);
        match self.broadcast {
            Broadcast::Off => self.tiles.get(self.focus).map(|t| vec![t.id]).unwrap_or_default(),
            Broadcast::All => self.tiles.iter().filter(live).map(|t| t.id).collect(),
            Broadcast::Marked => {
                let marked: Vec<usize> = self
                    .tiles
                    .iter()
                    .filter(|t| t.marked)
                    .filter(live)
                    .map(|t| t.id)
                    .collect();
                if marked.is_empty() {
                    self.tiles.get(self.focus).map(|t| vec![t.id]).unwrap_or_default()
                } else {
                    marked
                }
            }
        }
    }

    /// The nodes of the panes keys would go to that `g` does not show.
    pub fn hidden_targets(&self, g: &Grid) -> Vec<String> {
        if self.broadcast == Broadcast::Off {
            return vec![];
        }
        let targets = self.targets();
        self.tiles
            .iter()
            .enumerate()
            .filter(|(i, t)| targets.contains(&t.id) && !g.cells.iter().any(|(c, _)| c == i))
            .map(|(_, t)| t.node.clone())
            .collect()
    }

    pub fn index_of(&self, id: usize) -> Option<usize> {
        self.tiles.iter().position(|t| t.id == id)
    }

    /// Move the focus by (dx, dy) in a grid of `columns`, keeping the page in step.
    pub fn move_focus(&mut self, dx: isize, dy: isize, columns: usize, per_page: usize) {
        let n = self.tiles.len();
        if n == 0 {
            return;
        }
        let cols = columns.max(1) as isize;
        let per_page = per_page.max(1);
        let page_start = (self.focus / per_page) * per_page;
        let k = (self.focus - page_start) as isize;
        let (r, c) = (k / cols, k % cols);
        let target = if dy != 0 {
            page_start as isize + (r + dy) * cols + c
        } else {
            page_start as isize + r * cols + (c + dx).clamp(0, cols - 1)
        };
        // Past the page's edge: move to the neighbouring page.
        let target = target.clamp(0, n as isize - 1) as usize;
        self.focus = target;
        self.page = self.focus / per_page;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grids_fit_and_fill() {
        let area = Rect::new(0, 1, 160, 46);
        for n in [1usize, 2, 3, 4, 8, 9, 16, 32] {
            let g = grid(area, n, None, 0);
            assert_eq!(g.cells.len(), n, "{n} fit on one page of 160x46");
            let covered: u32 = g
                .cells
                .iter()
                .map(|(_, r)| u32::from(r.width) * u32::from(r.height))
                .sum();
            let full = u32::from(area.width) * u32::from(area.height);
            if n % g.columns == 0 {
                assert_eq!(covered, full, "{n} tiles fill the area");
            }
            for (_, r) in &g.cells {
                assert!(r.width >= MIN_TILE.0 && r.height >= MIN_TILE.1, "{n}: {r:?}");
                assert!(r.right() <= area.right() && r.bottom() <= area.bottom());
            }
        }
        assert_eq!(grid(area, 4, None, 0).columns, 2, "four panes in a 2x2 grid");
    }

    #[test]
    fn sixty_four_nodes_page() {
        let area = Rect::new(0, 0, 120, 40);
        let g = grid(area, 64, None, 0);
        assert_eq!(g.per_page, 5 * 8);
        assert_eq!(g.pages, 2);
        let last = grid(area, 64, None, 1);
        assert_eq!(last.cells.len(), 24);
        assert_eq!(last.cells[0].0, 40);
        assert_eq!(grid(area, 64, Some(63), 0).cells, vec![(63, area)]);
        assert!(grid(Rect::new(0, 0, 0, 0), 3, None, 0).cells.is_empty());
        assert_eq!(
            grid(Rect::new(0, 0, 10, 3), 3, None, 0).cells.len(),
            1,
            "tiny areas page one tile at a time"
        );
    }

    #[test]
    fn copy_mode_search_and_selection() {
        let lines: Vec<String> = ["a", "error one", "b", "Error two", "c"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let mut c = CopyMode::new(0, lines);
        assert_eq!(c.cursor, 4);
        c.search = Some("error".into());
        assert!(c.find(true));
        assert_eq!(c.cursor, 1, "wraps to the first match");
        assert!(c.find(true));
        assert_eq!(c.cursor, 3, "case-insensitive");
        assert!(c.find(false));
        assert_eq!(c.cursor, 1);
        c.anchor = Some(3);
        assert_eq!(c.selected_text(), "error one\nb\nError two");
        c.search = Some("zzz".into());
        assert!(!c.find(true));
    }
}

#[cfg(test)]
mod flow_tests {
    use super::*;
    use crate::fleet::NodeTarget;
    use crate::fleet::{Address, SshAddress};
    use crate::store::FleetRecord;
    use crate::tui::action::Context;
    use crate::tui::keymap::Keymap;
    use crate::tui::state::{Command, State};
    use crate::tui::state::{Msg, Overlay, View};
    use crate::tui::update::update;
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

    fn node(i: usize) -> NodeTarget {
        NodeTarget {
            index: i,
            name: format!("lab-{i}"),
            internal_ip: None,
            address: Address::Ssh(SshAddress {
                host: format!("10.0.0.{}", i + 1),
                port: None,
                user: Some("root".into()),
                identity_file: None,
                proxy_jump: None,
            }),
        }
    }

    fn fleet(name: &str, n: usize) -> FleetRecord {
        FleetRecord {
            name: name.into(),
            backend: crate::fleet::BackendKind::Ssh,
            file: None,
            nodes: (0..n).map(node).collect(),
            resources: vec![],
            created_at: 0,
            applied: None,
        }
    }

    fn tiles(n: usize) -> Vec<PaneTile> {
        (0..n)
            .map(|i| PaneTile {
                id: 100 + i,
                node: format!("lab-{i}"),
                host: format!("10.0.0.{}", i + 1),
                state: PaneState::Connected,
                marked: false,
                screen: crate::term::new_screen(24, 80),
                size: (80, 24),
            })
            .collect()
    }

    /// A cockpit with `n` panes of fleet `lab` open.
    fn with_panes(n: usize) -> State {
        let mut s = state();
        update(
            &mut s,
            Msg::Panes(crate::tui::panes::Msg::Opened {
                fleet: "lab".into(),
                tiles: tiles(n),
            }),
        );
        s
    }

    fn state() -> State {
        let mut s = State::new(Keymap::defaults(), vec![], "dark".into());
        s.size = (120, 40);
        s
    }

    fn press(s: &mut State, code: KeyCode, m: KeyModifiers) -> Vec<Command> {
        update(s, Msg::Key(KeyEvent::new(code, m)))
    }

    fn ch(s: &mut State, c: char) -> Vec<Command> {
        press(s, KeyCode::Char(c), KeyModifiers::NONE)
    }

    #[test]
    fn slash_finds_a_nodes_pane_among_a_thousand_and_goes_to_its_page() {
        let mut s = with_panes(1024);
        s.view = View::Panes;
        let per_page = layout(&s).per_page;
        assert!(layout(&s).pages > 1 && per_page < 1024);
        for c in "/lab-700".chars() {
            ch(&mut s, c);
        }
        press(&mut s, KeyCode::Enter, KeyModifiers::NONE);
        assert_eq!(s.panes.focus, 700);
        assert_eq!(s.panes.page, 700 / per_page);
        let g = layout(&s);
        assert!(g.cells.iter().any(|(i, _)| *i == 700), "its page is shown");
        assert_eq!(s.panes.tiles.len(), 1024, "every pane stays");
        for c in ":filter nope\n".chars() {
            if c == '\n' {
                press(&mut s, KeyCode::Enter, KeyModifiers::NONE);
            } else {
                ch(&mut s, c);
            }
        }
        assert_eq!(s.panes.focus, 700, "nothing matched: the focus stays");
        assert!(
            s.status
                .as_ref()
                .is_some_and(|m| m.text.contains("no pane's node matches")),
            "{:?}",
            s.status
        );
    }

    #[test]
    fn fleets_view_selects_by_name_and_opens_panes() {
        let mut s = state();
        update(
            &mut s,
            Msg::Fleets(crate::tui::fleets::Msg::Loaded(Ok(vec![
                fleet("alpha", 2),
                fleet("lab", 4),
            ]))),
        );
        assert_eq!(s.fleet_selected.as_deref(), Some("alpha"));
        ch(&mut s, '2');
        ch(&mut s, 'j');
        assert_eq!(s.fleet_selected.as_deref(), Some("lab"));
        // A reload that reorders the fleets keeps the selection on `lab`.
        update(
            &mut s,
            Msg::Fleets(crate::tui::fleets::Msg::Loaded(Ok(vec![
                fleet("lab", 4),
                fleet("zeta", 1),
                fleet("alpha", 2),
            ]))),
        );
        assert_eq!(s.fleet_selected.as_deref(), Some("lab"));
        assert_eq!(
            press(&mut s, KeyCode::Enter, KeyModifiers::NONE),
            vec![Command::OpenPanes("lab".into())]
        );
        assert_eq!(ch(&mut s, 'r'), vec![Command::LoadFleets]);
        // The filter narrows the list and moves the selection onto what is left.
        ch(&mut s, '/');
        for c in "zet".chars() {
            ch(&mut s, c);
        }
        press(&mut s, KeyCode::Enter, KeyModifiers::NONE);
        assert_eq!(s.fleet_selected.as_deref(), Some("zeta"));
    }

    /// The Nodes view: j/k pick a node, d shows its details, Enter opens the fleet's
    /// panes with that node's zoomed (or focuses it when they are open already).
    #[test]
    fn nodes_view_enter_opens_the_selected_nodes_pane() {
        let mut s = state();
        update(
            &mut s,
            Msg::Fleets(crate::tui::fleets::Msg::Loaded(Ok(vec![fleet("lab", 4)]))),
        );
        ch(&mut s, '3');
        ch(&mut s, 'j');
        ch(&mut s, 'j');
        assert_eq!(s.nodes.selected.as_deref(), Some("lab-2"));
        ch(&mut s, 'd');
        assert!(s.nodes.detail);
        assert_eq!(
            press(&mut s, KeyCode::Enter, KeyModifiers::NONE),
            vec![Command::OpenPanes("lab".into())]
        );
        update(
            &mut s,
            Msg::Panes(crate::tui::panes::Msg::Opened {
                fleet: "lab".into(),
                tiles: tiles(4),
            }),
        );
        assert_eq!(s.view, View::Panes);
        assert_eq!((s.panes.focus, s.panes.zoom), (2, true));
        // Open already: back in Nodes, another node, Enter asks for the fleet's panes
        // again; the services answer that they are open (the same shells), and the Panes
        // feature focuses the node's.
        ch(&mut s, '3');
        ch(&mut s, 'k');
        assert_eq!(
            press(&mut s, KeyCode::Enter, KeyModifiers::NONE),
            vec![Command::OpenPanes("lab".into())]
        );
        let cmds = update(
            &mut s,
            Msg::Panes(crate::tui::panes::Msg::Shown { fleet: "lab".into() }),
        );
        assert!(
            cmds.iter().all(|c| matches!(c, Command::PaneResize { .. })),
            "{cmds:?}"
        );
        assert_eq!((s.view, s.panes.focus, s.panes.zoom), (View::Panes, 1, true));
    }

    #[test]
    fn a_click_on_a_tile_focuses_its_pane() {
        use crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
        let mut s = with_panes(4);
        let r = layout(&s).cells[3].1;
        update(
            &mut s,
            Msg::Mouse(MouseEvent {
                kind: MouseEventKind::Down(MouseButton::Left),
                column: r.x + r.width / 2,
                row: r.y + r.height / 2,
                modifiers: KeyModifiers::NONE,
            }),
        );
        assert_eq!(s.panes.focus, 3);
    }

    #[test]
    fn opened_panes_get_their_tile_sizes_and_typing_goes_to_them() {
        let mut s = state();
        let cmds = update(
            &mut s,
            Msg::Panes(crate::tui::panes::Msg::Opened {
                fleet: "lab".into(),
                tiles: tiles(4),
            }),
        );
        assert_eq!(s.view, View::Panes);
        // 120x40 terminal: body 120x38, four tiles 2x2 of 60x19, inner 58x17.
        assert_eq!(cmds.len(), 4);
        assert!(
            cmds.contains(&Command::PaneResize {
                id: 100,
                cols: 58,
                rows: 17
            }),
            "{cmds:?}"
        );
        assert!(ch(&mut s, 'x').is_empty(), "not typing yet");
        ch(&mut s, 'l');
        assert_eq!(s.panes.focus, 1);
        ch(&mut s, 'j');
        assert_eq!(s.panes.focus, 3);
        ch(&mut s, 'i');
        assert!(s.panes.insert);
        assert_eq!(
            ch(&mut s, 'q'),
            vec![Command::PaneInput {
                ids: vec![103],
                bytes: b"q".to_vec()
            }]
        );
        let ctrl_c = press(&mut s, KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(
            ctrl_c,
            vec![Command::PaneInput {
                ids: vec![103],
                bytes: vec![3]
            }],
            "ctrl-c goes to the shell"
        );
        // ctrl-] (as crossterm reports it: ctrl-5) stops typing.
        press(&mut s, KeyCode::Char('5'), KeyModifiers::CONTROL);
        assert!(!s.panes.insert);
        // Zoom gives the focused pane the whole body.
        let cmds = ch(&mut s, 'z');
        assert_eq!(
            cmds,
            vec![Command::PaneResize {
                id: 103,
                cols: 118,
                rows: 36
            }]
        );
        let back = ch(&mut s, 'z');
        assert_eq!(
            back,
            vec![Command::PaneResize {
                id: 103,
                cols: 58,
                rows: 17
            }]
        );
        // A terminal resize reaches every pane.
        let cmds = update(&mut s, Msg::Resize(100, 30));
        assert_eq!(cmds.len(), 4);
    }

    #[test]
    fn broadcast_into_panes_not_on_screen_asks_first_and_quit_asks_with_shells_open() {
        let mut s = with_panes(4);
        // All four on screen: broadcast starts typing at once.
        ch(&mut s, 'b');
        ch(&mut s, 'i');
        assert!(s.panes.insert);
        press(&mut s, KeyCode::Char(']'), KeyModifiers::CONTROL);
        // Zoomed: three of the four are hidden; i asks, n keeps out of insert.
        ch(&mut s, 'z');
        ch(&mut s, 'i');
        let Overlay::Ask(a) = &s.overlay else {
            panic!("no question: {:?}", s.overlay)
        };
        assert_eq!(a.what, crate::tui::state::AskFor::TypeIntoHidden);
        assert!(
            a.lines[0].contains("sends keys to 4 panes; 3 not on screen (zoomed): lab-1, lab-2, lab-3"),
            "{:?}",
            a.lines
        );
        ch(&mut s, 'n');
        assert!(matches!(s.overlay, Overlay::None));
        assert!(!s.panes.insert);
        // y types into all of them.
        ch(&mut s, 'i');
        ch(&mut s, 'y');
        assert!(s.panes.insert);
        assert_eq!(
            ch(&mut s, 'e'),
            vec![Command::PaneInput {
                ids: vec![100, 101, 102, 103],
                bytes: b"e".to_vec()
            }]
        );
        press(&mut s, KeyCode::Char(']'), KeyModifiers::CONTROL);
        // Broadcast off: the zoomed pane alone, no question.
        ch(&mut s, 'b');
        ch(&mut s, 'b');
        assert_eq!(s.panes.broadcast, Broadcast::Off);
        ch(&mut s, 'i');
        assert!(s.panes.insert && matches!(s.overlay, Overlay::None));
        press(&mut s, KeyCode::Char(']'), KeyModifiers::CONTROL);
        // q with four shells open asks; n stays, y quits.
        assert_eq!(ch(&mut s, 'q'), vec![]);
        let Overlay::Ask(a) = &s.overlay else {
            panic!("quit did not ask")
        };
        assert!(a.lines[0].starts_with("4 shells open in panes"), "{:?}", a.lines);
        ch(&mut s, 'n');
        assert!(matches!(s.overlay, Overlay::None));
        ch(&mut s, 'q');
        assert_eq!(ch(&mut s, 'y'), vec![Command::Quit]);
        // With every shell ended, q quits at once.
        for id in 100..104 {
            update(
                &mut s,
                Msg::Panes(crate::tui::panes::Msg::Event(
                    crate::term::session::PaneEvent::State(id, PaneState::Exited(Some(0))),
                )),
            );
        }
        assert_eq!(ch(&mut s, 'q'), vec![Command::Quit]);
    }

    #[test]
    fn broadcast_to_all_and_to_marked() {
        let mut s = with_panes(4);
        ch(&mut s, 'b');
        assert_eq!(s.panes.broadcast, Broadcast::All);
        ch(&mut s, 'i');
        assert_eq!(
            ch(&mut s, 'e'),
            vec![Command::PaneInput {
                ids: vec![100, 101, 102, 103],
                bytes: b"e".to_vec()
            }]
        );
        // A lost pane is skipped by the broadcast.
        update(
            &mut s,
            Msg::Panes(crate::tui::panes::Msg::Event(
                crate::term::session::PaneEvent::State(101, PaneState::Lost("x".into())),
            )),
        );
        assert_eq!(
            ch(&mut s, 'e'),
            vec![Command::PaneInput {
                ids: vec![100, 102, 103],
                bytes: b"e".to_vec()
            }]
        );
        press(&mut s, KeyCode::Char(']'), KeyModifiers::CONTROL);
        ch(&mut s, 'm');
        ch(&mut s, 'l');
        ch(&mut s, 'l');
        ch(&mut s, 'j');
        ch(&mut s, 'm');
        ch(&mut s, 'b');
        assert_eq!(s.panes.broadcast, Broadcast::Marked);
        ch(&mut s, 'i');
        assert_eq!(
            ch(&mut s, 'e'),
            vec![Command::PaneInput {
                ids: vec![100, 103],
                bytes: b"e".to_vec()
            }]
        );
        let pasted = update(&mut s, Msg::Paste("ls\nps".into()));
        assert_eq!(
            pasted,
            vec![Command::PaneInput {
                ids: vec![100, 103],
                bytes: b"ls\rps".to_vec()
            }]
        );
    }

    #[test]
    fn copy_mode_searches_selects_and_yanks() {
        let mut s = state();
        update(
            &mut s,
            Msg::Panes(crate::tui::panes::Msg::Opened {
                fleet: "lab".into(),
                tiles: tiles(2),
            }),
        );
        assert_eq!(ch(&mut s, '['), vec![Command::SnapshotPane(100)]);
        let lines: Vec<String> = (0..50).map(|i| format!("line {i}")).collect();
        update(
            &mut s,
            Msg::Panes(crate::tui::panes::Msg::Snapshot { id: 100, lines }),
        );
        assert_eq!(crate::tui::update::context(&s), Context::Copy);
        ch(&mut s, '/');
        for c in "line 1".chars() {
            ch(&mut s, c);
        }
        press(&mut s, KeyCode::Enter, KeyModifiers::NONE);
        assert_eq!(
            s.panes.copy.as_ref().unwrap().cursor,
            1,
            "wrapped to the first match"
        );
        ch(&mut s, 'n');
        assert_eq!(s.panes.copy.as_ref().unwrap().cursor, 10);
        ch(&mut s, 'v');
        ch(&mut s, 'j');
        ch(&mut s, 'j');
        assert_eq!(
            ch(&mut s, 'y'),
            vec![Command::Yank("line 10\nline 11\nline 12".into())]
        );
        assert!(s.panes.copy.is_none());
        assert!(s.status.as_ref().unwrap().text.contains("copied 3 lines"));
    }

    /// ux-walk-2 item 1: `a` answers every host already waiting, not one per press, and
    /// the questions still on their way are answered without a dialog.
    #[test]
    fn accept_all_answers_every_waiting_host_key() {
        let mut s = state();
        for id in 20..24 {
            update(
                &mut s,
                Msg::HostKeyQuestion {
                    id,
                    host: format!("root@h{id}"),
                    fingerprint: "SHA256:c".into(),
                },
            );
        }
        let yes = |id| Command::AnswerHostKey {
            id,
            accept: true,
            all: true,
        };
        assert_eq!(ch(&mut s, 'a'), vec![yes(20), yes(21), yes(22), yes(23)]);
        assert!(matches!(s.overlay, Overlay::None), "no question left to ask");
        assert!(s.status.as_ref().unwrap().text.contains("4 hosts"));
        let late = Msg::HostKeyQuestion {
            id: 30,
            host: "root@h30".into(),
            fingerprint: "SHA256:d".into(),
        };
        assert_eq!(
            update(&mut s, late),
            vec![yes(30)],
            "asked before the answer arrived"
        );
        assert!(matches!(s.overlay, Overlay::None));
    }

    #[test]
    fn host_key_questions_queue_and_answer() {
        let mut s = state();
        update(
            &mut s,
            Msg::HostKeyQuestion {
                id: 7,
                host: "root@h1".into(),
                fingerprint: "SHA256:a".into(),
            },
        );
        update(
            &mut s,
            Msg::HostKeyQuestion {
                id: 8,
                host: "root@h2".into(),
                fingerprint: "SHA256:b".into(),
            },
        );
        assert!(matches!(&s.overlay, Overlay::HostKey { id: 7, .. }));
        assert_eq!(
            ch(&mut s, 'n'),
            vec![Command::AnswerHostKey {
                id: 7,
                accept: false,
                all: false
            }]
        );
        assert!(
            matches!(&s.overlay, Overlay::HostKey { id: 8, .. }),
            "the next question follows"
        );
        assert_eq!(
            ch(&mut s, 'a'),
            vec![Command::AnswerHostKey {
                id: 8,
                accept: true,
                all: true
            }]
        );
        assert!(matches!(s.overlay, Overlay::None));
        update(
            &mut s,
            Msg::PassphraseQuestion {
                id: 9,
                key: "/k".into(),
            },
        );
        for c in "s3cret".chars() {
            ch(&mut s, c);
        }
        let answer = press(&mut s, KeyCode::Enter, KeyModifiers::NONE);
        assert_eq!(
            answer,
            vec![Command::AnswerPassphrase {
                id: 9,
                passphrase: Some(crate::tui::state::Secret("s3cret".into()))
            }]
        );
        assert!(!format!("{answer:?}").contains("s3cret"), "never in Debug output");
    }

    /// Issue 29 (UX walk ranked 4): another fleet's panes put these in the background,
    /// shells running; opening them again shows the same ones, marks and states kept.
    #[test]
    fn another_fleets_panes_keep_these_in_the_background() {
        let mut s = with_panes(4);
        let screen = s.panes.tiles[0].screen.clone();
        ch(&mut s, 'm');
        let ops: Vec<PaneTile> = tiles(2)
            .into_iter()
            .map(|t| PaneTile {
                id: t.id + 100,
                node: t.node.replace("lab", "ops"),
                ..t
            })
            .collect();
        update(
            &mut s,
            Msg::Panes(crate::tui::panes::Msg::Opened {
                fleet: "ops".into(),
                tiles: ops,
            }),
        );
        assert_eq!(s.panes.fleet.as_deref(), Some("ops"));
        assert_eq!(s.panes.tiles.len(), 2);
        assert_eq!(s.panes.background.len(), 1);
        assert!(s.panes.is_open("lab") && s.panes.is_open("ops"));
        assert!(
            s.status
                .as_ref()
                .is_some_and(|m| m.text.starts_with("lab's 4 panes go on in the background")),
            "{:?}",
            s.status
        );
        // A background pane's state changes are kept.
        update(
            &mut s,
            Msg::Panes(crate::tui::panes::Msg::Event(
                crate::term::session::PaneEvent::State(101, PaneState::Lost("x".into())),
            )),
        );
        // q counts every open shell, shown or not.
        ch(&mut s, 'q');
        let Overlay::Ask(a) = &s.overlay else {
            panic!("quit did not ask")
        };
        assert!(a.lines[0].starts_with("5 shells open in panes"), "{:?}", a.lines);
        ch(&mut s, 'n');
        // Back to lab: the same panes, not new ones.
        let cmds = update(
            &mut s,
            Msg::Panes(crate::tui::panes::Msg::Shown { fleet: "lab".into() }),
        );
        assert!(
            cmds.iter().all(|c| matches!(c, Command::PaneResize { .. })),
            "{cmds:?}"
        );
        assert_eq!(s.panes.fleet.as_deref(), Some("lab"));
        assert_eq!(
            s.panes.tiles.iter().map(|t| t.id).collect::<Vec<_>>(),
            vec![100, 101, 102, 103]
        );
        assert!(std::sync::Arc::ptr_eq(&s.panes.tiles[0].screen, &screen));
        assert!(s.panes.tiles[0].marked);
        assert_eq!(s.panes.tiles[1].state, PaneState::Lost("x".into()));
        assert_eq!(s.panes.background[0].fleet.as_deref(), Some("ops"));
        assert_eq!(s.view, View::Panes);
        // Reopened with new sessions (a pod selector): the old set of lab goes.
        update(
            &mut s,
            Msg::Panes(crate::tui::panes::Msg::Opened {
                fleet: "lab".into(),
                tiles: tiles(1),
            }),
        );
        assert_eq!(s.panes.tiles.len(), 1);
        assert_eq!(s.panes.background.len(), 1, "ops only");
    }

    /// Issue 29 (UX walk ranked 8): the wheel over a pane scrolls its scrollback, three
    /// rows a notch, and leaves it at the bottom; the focus stays.
    #[test]
    fn the_wheel_scrolls_the_pane_under_the_pointer() {
        use crossterm::event::{MouseEvent, MouseEventKind};
        let mut s = with_panes(4);
        let history: String = (1..=100).map(|i| format!("line {i}\r\n")).collect();
        s.panes.tiles[3]
            .screen
            .write()
            .unwrap()
            .process(history.as_bytes());
        let r = layout(&s).cells[3].1;
        let wheel = |s: &mut State, kind, row| {
            update(
                s,
                Msg::Mouse(MouseEvent {
                    kind,
                    column: r.x + r.width / 2,
                    row,
                    modifiers: KeyModifiers::NONE,
                }),
            )
        };
        let mid = r.y + r.height / 2;
        assert!(wheel(&mut s, MouseEventKind::ScrollUp, mid).is_empty());
        assert_eq!(s.panes.focus, 0, "the focus stays");
        assert_eq!(s.panes.scrolled.get(&103), Some(&3));
        wheel(&mut s, MouseEventKind::ScrollUp, mid);
        assert_eq!(s.panes.scrolled.get(&103), Some(&6));
        // The drawn pane shows the older lines and where it is.
        let theme = crate::tui::theme::Theme::default_theme();
        let mut buf = ratatui::buffer::Buffer::empty(Rect::new(0, 0, 120, 40));
        super::view::render(&s, &theme, body(s.size), &mut buf);
        let text: String = (r.y..r.bottom())
            .map(|y| (r.x..r.right()).map(|x| buf[(x, y)].symbol()).collect::<String>() + "\n")
            .collect();
        assert!(text.contains("[6/"), "{text}");
        assert!(text.contains("line 94") && !text.contains("line 100"), "{text}");
        // Down to the bottom: live again.
        wheel(&mut s, MouseEventKind::ScrollDown, mid);
        wheel(&mut s, MouseEventKind::ScrollDown, mid);
        assert!(s.panes.scrolled.is_empty());
        assert_eq!(s.panes.focus, 0);
        // Typing into a scrolled pane shows its bottom.
        wheel(&mut s, MouseEventKind::ScrollUp, mid);
        s.panes.focus = 3;
        ch(&mut s, 'i');
        ch(&mut s, 'x');
        assert!(s.panes.scrolled.is_empty());
        // Over the tab bar the wheel moves nothing.
        press(&mut s, KeyCode::Char(']'), KeyModifiers::CONTROL);
        s.panes.focus = 0;
        wheel(&mut s, MouseEventKind::ScrollDown, 0);
        assert_eq!((s.panes.focus, s.panes.scrolled.len()), (0, 0));
    }

    #[test]
    fn paging_sixty_four_panes() {
        let mut s = state();
        s.size = (100, 32);
        update(
            &mut s,
            Msg::Panes(crate::tui::panes::Msg::Opened {
                fleet: "big".into(),
                tiles: tiles(64),
            }),
        );
        let g = layout(&s);
        assert!(g.pages > 1);
        press(&mut s, KeyCode::PageDown, KeyModifiers::NONE);
        assert_eq!(s.panes.page, 1);
        assert_eq!(s.panes.focus, g.per_page);
        ch(&mut s, 'G');
        assert_eq!(s.panes.focus, 63);
        assert_eq!(s.panes.page, g.pages - 1);
    }
}
