//! The Offers view's state (its share of `update` is update.rs): the catalog filtered by the view's
//! query (the `/` filter, in the catalog's query language), sorted by any column, zones
//! of one machine type and region grouped (expandable), a detail panel; `w` opens the
//! fleet-file editor (`widgets::editor`) on a fleet file for the selected offer.

pub mod msg;
pub mod update;
pub mod view;

pub use msg::Msg;
pub use update::{act, sync_filter, update};

use crate::catalog::{group_zones, Catalog, Direction, Field, Offer, Pricing, QueryError, ZoneGroup};
use std::collections::HashSet;
use std::sync::Arc;

/// The sortable columns, in the order `s` cycles through them (and the table shows them).
pub const COLUMNS: [Field; 12] = [
    Field::Machine,
    Field::Gpu,
    Field::Gpus,
    Field::Zone,
    Field::Vcpus,
    Field::Ram,
    Field::Network,
    Field::GpuDirect,
    Field::OnDemand,
    Field::Spot,
    Field::Flex,
    Field::GpuPrice,
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OfferRow {
    /// A machine type in a region: its first zone, standing for all.
    Group { group: usize },
    /// One zone of an expanded group.
    Member { group: usize, offer: usize },
}

#[derive(Debug, Clone)]
pub struct OffersView {
    pub catalog: Arc<Catalog>,
    pub pricing: Pricing,
    pub sort: Field,
    pub dir: Direction,
    pub groups: Vec<ZoneGroup>,
    pub rows: Vec<OfferRow>,
    /// Groups shown expanded, by the id of their first offer.
    pub expanded: HashSet<String>,
    /// The selected offer, by id (a group row stands for its first offer).
    pub selected: Option<String>,
    /// The filter's error (the last good result stays shown).
    pub error: Option<QueryError>,
    /// The query the rows shown answer (the last one without an error).
    pub applied: String,
    /// Offers left out only because a compared price was unknown.
    pub dropped_unknown: usize,
    pub detail: bool,
}

impl OffersView {
    pub fn new(catalog: Arc<Catalog>) -> OffersView {
        let mut v = OffersView {
            catalog,
            pricing: Pricing::OnDemand,
            sort: Field::OnDemand,
            dir: Direction::Ascending,
            groups: vec![],
            rows: vec![],
            expanded: HashSet::new(),
            selected: None,
            error: None,
            applied: String::new(),
            dropped_unknown: 0,
            detail: false,
        };
        v.apply("");
        v
    }

    /// The filter being typed: `text`'s rows, or while it has an error the rows of
    /// `in_force` (the filter applied before the entry opened), shown dimmed with the
    /// error, never those of a valid prefix of what is being typed.
    pub fn preview(&mut self, text: &str, in_force: &str) {
        if let Err(e) = self.catalog.query(text) {
            if self.applied != in_force.trim() {
                self.apply(in_force);
            }
            self.error = Some(e);
            return;
        }
        self.apply(text);
    }

    /// Select the offer `id` when the rows hold it (its zone row, or its group's row
    /// when the group is folded); else the selection stays as it is.
    pub fn select_id(&mut self, id: &str) {
        let catalog = self.catalog.clone();
        let offers = catalog.offers();
        if self
            .groups
            .iter()
            .any(|g| g.members.iter().any(|&m| offers[m].id == id))
        {
            self.selected = Some(id.to_string());
            self.rebuild();
        }
    }

    /// Re-run the query; on a bad query keep the last good rows and show the error.
    pub fn apply(&mut self, text: &str) {
        let q = match self.catalog.query(text) {
            Ok(q) => q,
            Err(e) => {
                self.error = Some(e);
                return;
            }
        };
        self.error = None;
        self.applied = text.trim().to_string();
        let order = [(self.sort, self.dir), (Field::Price, Direction::Ascending)];
        let filtered = self.catalog.select(&q, self.pricing, &order);
        self.dropped_unknown = filtered.unknown;
        self.groups = group_zones(self.catalog.offers(), &filtered.indices);
        self.rebuild();
    }

    fn rebuild(&mut self) {
        let offers = self.catalog.offers();
        self.rows.clear();
        for (g, group) in self.groups.iter().enumerate() {
            self.rows.push(OfferRow::Group { group: g });
            if group.len() > 1 && self.expanded.contains(&offers[group.first()].id) {
                self.rows.extend(
                    group
                        .members
                        .iter()
                        .map(|&o| OfferRow::Member { group: g, offer: o }),
                );
            }
        }
        let ids: Vec<&str> = self.rows.iter().map(|r| self.row_offer(*r).id.as_str()).collect();
        if !self.selected.as_deref().is_some_and(|s| ids.contains(&s)) {
            // Keep the selection on its group when the zone row went away.
            let group_first = self.selected.as_deref().and_then(|s| {
                self.groups
                    .iter()
                    .find(|g| g.members.iter().any(|&m| offers[m].id == s))
                    .map(|g| offers[g.first()].id.clone())
            });
            self.selected = group_first.or_else(|| ids.first().map(|s| s.to_string()));
        }
    }

    pub fn row_offer(&self, row: OfferRow) -> &Offer {
        let offers = self.catalog.offers();
        match row {
            OfferRow::Group { group } => &offers[self.groups[group].first()],
            OfferRow::Member { offer, .. } => &offers[offer],
        }
    }

    pub fn selected_row(&self) -> Option<usize> {
        let s = self.selected.as_deref()?;
        // A member row wins over its group's row when both carry the id.
        let member = self
            .rows
            .iter()
            .position(|r| matches!(r, OfferRow::Member { .. }) && self.row_offer(*r).id == s);
        member.or_else(|| self.rows.iter().position(|r| self.row_offer(*r).id == s))
    }

    pub fn selected_offer(&self) -> Option<&Offer> {
        self.selected.as_deref().and_then(|s| self.catalog.get(s))
    }

    fn select_row(&mut self, i: usize) {
        if let Some(r) = self.rows.get(i) {
            self.selected = Some(self.row_offer(*r).id.clone());
        }
    }
}

/// A fleet file for `offer`: dstack's format, two nodes in compact placement, the
/// offer's machine type, zone, GPUs and GPUDirect flavour.
pub fn fleet_yaml(offer: &Offer, pricing: Pricing) -> (String, String) {
    let gpu = offer
        .gpu
        .to_lowercase()
        .replace(|c: char| !c.is_ascii_alphanumeric(), "");
    let mut name = format!("{gpu}x{}-{}", offer.gpu_count, offer.zone);
    name.truncate(40);
    let name = name.trim_end_matches('-').to_string();
    let spot = match pricing {
        Pricing::Spot => "spot",
        _ => "on-demand",
    };
    let gpudirect = match offer.gpudirect {
        crate::catalog::GpuDirect::None => "none",
        _ => "auto",
    };
    let text = format!(
        "# {machine} in {zone}: {gpus}x {gpu} ({label}), written by flightdeck from the offers catalog.\n\
         type: fleet\n\
         name: {name}\n\
         nodes: 2\n\
         placement: cluster\n\
         backends: [gcp]\n\
         regions: [{region}]\n\
         availability_zones: [{zone}]\n\
         instance_types: [{machine}]\n\
         spot_policy: {spot}\n\
         resources:\n  gpu: {gpu_up}:{gpus}\n\
         network:\n  gpudirect: {gpudirect}  # {label} on this machine type\n",
        machine = offer.machine_type,
        zone = offer.zone,
        region = offer.region,
        gpus = offer.gpu_count,
        gpu = offer.gpu_label(),
        gpu_up = offer.gpu,
        label = offer.gpudirect.label(),
    );
    (name, text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::keymap::Keymap;
    use crate::tui::state::{Command, State};
    use crate::tui::state::{Msg, Overlay};
    use crate::tui::theme::Tone;
    use crate::tui::update::update;
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

    fn state() -> State {
        let mut s = State::new(Keymap::defaults(), vec![], "dark".into());
        s.size = (160, 48);
        s
    }

    fn keys(s: &mut State, text: &str) -> Vec<Command> {
        let mut out = vec![];
        for c in text.chars() {
            let code = match c {
                '\n' => KeyCode::Enter,
                c => KeyCode::Char(c),
            };
            out.extend(update(s, Msg::Key(KeyEvent::new(code, KeyModifiers::NONE))));
        }
        out
    }

    #[test]
    fn filtering_sorting_and_grouping() {
        let mut s = state();
        let all = s.offers.groups.len();
        assert!(
            all > 50 && s.offers.rows.len() == all,
            "collapsed groups, one row each"
        );
        keys(&mut s, "/gpu=H200\n");
        assert!(s.offers.error.is_none());
        let machines: HashSet<&str> = s
            .offers
            .rows
            .iter()
            .map(|r| s.offers.row_offer(*r).machine_type.as_str())
            .collect();
        assert!(machines.contains("a3-ultragpu-8g"), "{machines:?}");
        assert!(
            machines.iter().all(|m| m.starts_with("a3-ultragpu-8g")),
            "{machines:?}"
        );
        // Sorted by on-demand price, cheapest first, unknown last.
        let prices: Vec<f64> = s
            .offers
            .rows
            .iter()
            .filter_map(|r| s.offers.row_offer(*r).on_demand)
            .collect();
        assert!(prices.windows(2).all(|w| w[0] <= w[1]), "{prices:?}");
        // p: spot pricing, and the sort follows it.
        keys(&mut s, "p");
        assert_eq!((s.offers.pricing, s.offers.sort), (Pricing::Spot, Field::Spot));
        keys(&mut s, "S");
        let spot: Vec<f64> = s
            .offers
            .rows
            .iter()
            .filter_map(|r| s.offers.row_offer(*r).spot)
            .collect();
        assert!(
            spot.windows(2).all(|w| w[0] >= w[1]),
            "descending after S: {spot:?}"
        );
    }

    /// At 80 columns the machine type is whole (`a3-ultragpu-8g-nolssd`): the zone,
    /// whose usual width is more than its longest zone needs, gives way first.
    #[test]
    fn at_80_columns_the_machine_type_is_whole() {
        let mut s = state();
        keys(&mut s, "/gpu=H200\n");
        let area = ratatui::layout::Rect::new(0, 0, 80, 22);
        let mut buf = ratatui::buffer::Buffer::empty(area);
        view::render(&s, &crate::tui::theme::Theme::default_theme(), area, &mut buf);
        let rows: Vec<String> = (0..22)
            .map(|y| (0..80).map(|x| buf[(x, y)].symbol()).collect())
            .collect();
        let t = rows.join("\n");
        assert!(t.contains("│a3-ultragpu-8g-nolssd "), "{t}");
        assert!(!t.contains("a3-ultragpu-8g-n…"), "{t}");
        // The zones still whole, the prices still shown.
        assert!(t.contains("europe-west4-a") && t.contains("$/GPU-H"), "{t}");
    }

    /// A query with an error is never applied, Enter or not: the rows and the title stay
    /// those of the last good query, the entry stays open with the error, and unknown
    /// names get the nearest known one.
    #[test]
    fn an_invalid_query_is_never_applied() {
        let mut s = state();
        keys(&mut s, "/gpu=H1OO\n");
        let e = s.offers.error.clone().expect("H1OO is no GPU");
        assert!(e.message.contains("did you mean H100?"), "{}", e.message);
        assert!(matches!(s.overlay, Overlay::Filter(_)), "Enter does not close it");
        // What shows is the filter in force when the entry opened (none; the view dims
        // it), not a valid prefix of what is typed (`gpu`, a bare word, on the way).
        assert_eq!(s.offers.applied, "");
        let fresh = OffersView::new(s.offers.catalog.clone());
        assert_eq!(s.offers.rows, fresh.rows);
        // Fixed, it applies and Enter closes the entry.
        for _ in 0..2 {
            update(
                &mut s,
                Msg::Key(KeyEvent::new(KeyCode::Backspace, KeyModifiers::NONE)),
            );
        }
        keys(&mut s, "00\n");
        assert!(s.offers.error.is_none());
        assert!(matches!(s.overlay, Overlay::None));
        assert_eq!(s.offers.applied, "gpu=H100");
        let h100 = s.offers.rows.clone();
        // `gpu=H100zzz`: refused; Esc puts the last good query back.
        keys(&mut s, "/zzz\n");
        assert!(s.offers.error.as_ref().unwrap().message.contains("H100zzz"));
        assert_eq!((s.offers.applied.as_str(), &s.offers.rows), ("gpu=H100", &h100));
        update(&mut s, Msg::Key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE)));
        assert!(s.offers.error.is_none());
        assert_eq!(s.filter(), "gpu=H100");
    }

    /// Sorting by any column with unknown values puts them last in both directions, in
    /// every pricing (13 spot prices and most flex prices of the embedded catalog are
    /// unknown): what the rows show first is always a known figure.
    #[test]
    fn unknown_values_sort_last_both_ways() {
        let mut s = state();
        for _ in Pricing::ALL {
            for _ in 0..COLUMNS.len() {
                let field = s.offers.sort;
                for dir in ["ascending", "descending"] {
                    let v = &s.offers;
                    let offers = v.catalog.offers();
                    let known: Vec<bool> = v
                        .rows
                        .iter()
                        .filter_map(|r| match r {
                            OfferRow::Group { group } => Some(&offers[v.groups[*group].first()]),
                            _ => None,
                        })
                        .map(|o| {
                            field.kind() != crate::catalog::query::Kind::Number
                                || field.number(o, v.pricing).is_some()
                        })
                        .collect();
                    let first_unknown = known.iter().position(|k| !k).unwrap_or(known.len());
                    assert!(
                        known[first_unknown..].iter().all(|k| !k),
                        "{field:?} {dir}, pricing {}: a known value after an unknown one",
                        v.pricing.name()
                    );
                    keys(&mut s, "S");
                }
                keys(&mut s, "s");
            }
            keys(&mut s, "p");
        }
    }

    /// ux-walk-2 item 9: Esc out of a typed filter puts the selection back where it was
    /// (the live preview of `gpu` had moved it 30 rows); Esc closes the `d` panel; priced
    /// by flex-start with no flex-start price in the catalog, the table says so.
    #[test]
    fn esc_restores_the_selection_and_closes_the_panel() {
        let mut s = state();
        keys(&mut s, "/gpu=H200\n");
        keys(&mut s, "jj");
        let was = s.offers.selected.clone();
        assert!(
            was.as_deref().is_some_and(|id| id.starts_with("a3-ultragpu")),
            "{was:?}"
        );
        keys(&mut s, "/");
        for c in "\u{8}\u{8}\u{8}\u{8}\u{8}1OO".chars() {
            let code = if c == '\u{8}' {
                KeyCode::Backspace
            } else {
                KeyCode::Char(c)
            };
            update(&mut s, Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)));
        }
        assert_ne!(s.offers.selected, was, "the preview moved it");
        update(&mut s, Msg::Key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE)));
        assert_eq!(s.filter(), "gpu=H200");
        assert_eq!(s.offers.selected, was);
        keys(&mut s, "d");
        assert!(s.offers.detail);
        update(&mut s, Msg::Key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE)));
        assert!(!s.offers.detail, "Esc backs out of d");
        keys(&mut s, "pp");
        assert_eq!(s.offers.pricing, Pricing::Flex);
        let theme = crate::tui::theme::Theme::default_theme();
        let area = ratatui::layout::Rect::new(0, 0, 80, 24);
        let mut buf = ratatui::buffer::Buffer::empty(area);
        crate::tui::offers::view::render(&s, &theme, area, &mut buf);
        let text: String = (0..24)
            .map(|y| (0..80).map(|x| buf[(x, y)].symbol()).collect::<String>() + "\n")
            .collect();
        assert!(text.contains("no flex-start (DWS) prices"), "{text}");
    }

    #[test]
    fn esc_in_the_editor_asks_before_throwing_changes_away() {
        let mut s = state();
        let esc = |s: &mut State| update(s, Msg::Key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE)));
        keys(&mut s, "w");
        assert!(s.editor.is_some());
        esc(&mut s);
        assert!(s.editor.is_none(), "nothing changed: closed at once");
        keys(&mut s, "wx");
        esc(&mut s);
        let Overlay::Ask(a) = &s.overlay else {
            panic!("no question: {:?}", s.overlay)
        };
        assert_eq!(a.what, crate::tui::state::AskFor::DiscardEdits);
        keys(&mut s, "n");
        assert!(matches!(s.overlay, Overlay::None));
        let editor = s.editor.as_ref().expect("kept");
        assert!(editor.input.lines()[0].starts_with('x'), "the change is kept");
        esc(&mut s);
        keys(&mut s, "y");
        assert!(s.editor.is_none());
    }

    #[test]
    fn a_bad_query_keeps_the_last_good_rows_and_suggests() {
        let mut s = state();
        keys(&mut s, "/gpu=H100\n");
        let rows = s.offers.rows.clone();
        keys(&mut s, "/");
        update(
            &mut s,
            Msg::Key(KeyEvent::new(KeyCode::Backspace, KeyModifiers::NONE)),
        );
        let e = s.offers.error.clone().expect("gpu=H10 is unknown");
        assert!(e.message.contains("did you mean H100?"), "{}", e.message);
        assert_eq!(s.offers.rows, rows, "the last good result stays");
        keys(&mut s, "0\n");
        assert!(s.offers.error.is_none());
    }

    #[test]
    fn groups_expand_and_selection_is_kept_by_id() {
        let mut s = state();
        keys(&mut s, "/machine=a3-megagpu-8g\n");
        let g = s
            .offers
            .groups
            .iter()
            .position(|g| g.len() > 1)
            .expect("a region with several zones");
        let first = s.offers.catalog.offers()[s.offers.groups[g].first()].id.clone();
        s.offers.selected = Some(first.clone());
        let before = s.offers.rows.len();
        keys(&mut s, "\n");
        assert_eq!(s.offers.rows.len(), before + s.offers.groups[g].len(), "expanded");
        keys(&mut s, "j");
        let second = s.offers.selected.clone().unwrap();
        assert_ne!(second, first);
        // Resorting keeps the same offer selected.
        keys(&mut s, "s");
        assert_eq!(s.offers.selected.as_deref(), Some(second.as_str()));
        keys(&mut s, "\n");
        assert_eq!(s.offers.rows.len(), before, "collapsed again");
        assert_eq!(
            s.offers.selected.as_deref(),
            Some(first.as_str()),
            "selection moves to the group row"
        );
    }

    #[test]
    fn r_asks_for_a_live_refresh_and_its_result_replaces_the_catalog() {
        let mut s = state();
        keys(&mut s, "/gpu=H200\n");
        assert_eq!(keys(&mut s, "r"), vec![Command::RefreshOffers]);
        update(
            &mut s,
            Msg::Offers(super::Msg::Refreshed(Err("no credentials".into()))),
        );
        assert!(s
            .status
            .as_ref()
            .unwrap()
            .text
            .contains("the catalog shown stays"));
        let rows = s.offers.rows.len();
        let live = Catalog::parse(crate::catalog::EMBEDDED_DATA).unwrap();
        update(
            &mut s,
            Msg::Offers(super::Msg::Refreshed(Ok((Box::new(live), "13 offers".into())))),
        );
        assert_eq!(
            s.offers.rows.len(),
            rows,
            "the filter is applied to the new catalog"
        );
        assert_eq!(s.status.as_ref().unwrap().tone, Tone::Pass);
    }

    #[test]
    fn write_a_fleet_file_with_live_validation() {
        let mut s = state();
        keys(&mut s, "/gpu=H200 zone=us-central1-b\n");
        keys(&mut s, "w");
        let e = s.editor.as_ref().expect("editor open");
        assert_eq!(e.path, "fleets/h200x8-us-central1-b.yaml");
        assert_eq!(e.problem, None, "the generated file validates");
        assert!(e
            .input
            .lines()
            .iter()
            .any(|l| l == "instance_types: [a3-ultragpu-8g]"));
        // Break it: the editor says what and where.
        update(&mut s, Msg::Key(KeyEvent::new(KeyCode::Down, KeyModifiers::NONE)));
        for c in "bogus: 1\n".chars() {
            let code = if c == '\n' {
                KeyCode::Enter
            } else {
                KeyCode::Char(c)
            };
            update(&mut s, Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)));
        }
        let problem = s.editor.as_ref().unwrap().problem.clone().expect("invalid now");
        assert!(problem.contains(":2:1: unknown field `bogus`"), "{problem}");
        let save = KeyEvent::new(KeyCode::Char('s'), KeyModifiers::CONTROL);
        assert!(
            update(&mut s, Msg::Key(save)).is_empty(),
            "an invalid file is not written"
        );
        assert!(s.status.as_ref().unwrap().text.starts_with("not written:"));
        // Undo the damage and write.
        let undo = KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL);
        for _ in 0..12 {
            update(&mut s, Msg::Key(undo));
        }
        assert_eq!(s.editor.as_ref().unwrap().problem, None);
        let cmds = update(&mut s, Msg::Key(save));
        match &cmds[..] {
            [Command::WriteFile { path, text }] => {
                assert_eq!(path, "fleets/h200x8-us-central1-b.yaml");
                assert!(text.contains("gpu: H200:8"));
            }
            other => panic!("{other:?}"),
        }
    }
}
