//! The Offers view's share of `update`: its actions (move, expand, sort, pricing, a fleet
//! file for the selected offer, a live refresh) and the messages of its services.

use super::{fleet_yaml, Msg, OfferRow, COLUMNS};
use crate::catalog::{Field, Pricing};
use crate::tui::action::Action;
use crate::tui::state::{Command, Overlay, State, StatusMessage, View};
use crate::tui::theme::Tone;
use crate::tui::widgets::editor::FleetEditor;

/// A message of the offers' services.
pub fn update(state: &mut State, msg: Msg) -> Vec<Command> {
    match msg {
        Msg::Refreshed(result) => {
            state.status = Some(match result {
                Ok((catalog, report)) => {
                    state.offers.catalog = std::sync::Arc::new(*catalog);
                    sync_filter(state);
                    StatusMessage {
                        text: format!("prices refreshed: {report}"),
                        tone: Tone::Pass,
                    }
                }
                Err(e) => StatusMessage {
                    text: format!("live refresh failed (the catalog shown stays): {e}"),
                    tone: Tone::Fail,
                },
            });
            state.dirty = true;
            vec![]
        }
    }
}

/// Global-context actions while the Offers view is shown. `None`: not an offers action.
pub fn act(state: &mut State, action: Action) -> Option<Vec<Command>> {
    let page = usize::from(state.size.1.saturating_sub(6)).max(1);
    let filter = state.filters[View::Offers.index()].clone();
    let v = &mut state.offers;
    let at = v.selected_row().unwrap_or(0);
    let last = v.rows.len().saturating_sub(1);
    match action {
        Action::Up => v.select_row(at.saturating_sub(1)),
        Action::Down => v.select_row((at + 1).min(last)),
        Action::PageUp => v.select_row(at.saturating_sub(page)),
        Action::PageDown => v.select_row((at + page).min(last)),
        Action::Top => v.select_row(0),
        Action::Bottom => v.select_row(last),
        Action::Select => {
            let Some(row) = v.rows.get(at).copied() else {
                return Some(vec![]);
            };
            let group = match row {
                OfferRow::Group { group } | OfferRow::Member { group, .. } => group,
            };
            if v.groups[group].len() > 1 {
                let key = v.catalog.offers()[v.groups[group].first()].id.clone();
                if !v.expanded.remove(&key) {
                    v.expanded.insert(key);
                }
                v.rebuild();
            } else {
                v.detail = !v.detail;
            }
        }
        Action::Detail => v.detail = !v.detail,
        // Esc backs out of the `d` panel, as it does of a follow or evidence.
        Action::Close if v.detail => v.detail = false,
        Action::Sort => {
            let i = COLUMNS
                .iter()
                .position(|f| *f == v.sort)
                .map_or(0, |i| (i + 1) % COLUMNS.len());
            v.sort = COLUMNS[i];
            v.apply(&filter);
        }
        Action::SortReverse => {
            v.dir = v.dir.reversed();
            v.apply(&filter);
        }
        Action::Pricing => {
            let i = Pricing::ALL
                .iter()
                .position(|p| *p == v.pricing)
                .map_or(0, |i| (i + 1) % Pricing::ALL.len());
            v.pricing = Pricing::ALL[i];
            // Sorting by a price follows the pricing.
            if matches!(v.sort, Field::OnDemand | Field::Spot | Field::Flex) {
                v.sort = match v.pricing {
                    Pricing::OnDemand => Field::OnDemand,
                    Pricing::Spot => Field::Spot,
                    Pricing::Flex => Field::Flex,
                };
            }
            v.apply(&filter);
        }
        Action::WriteFleet => {
            let Some(offer) = v.selected_offer() else {
                return Some(vec![]);
            };
            let (name, text) = fleet_yaml(offer, v.pricing);
            state.editor = Some(FleetEditor::new(format!("fleets/{name}.yaml"), &text, None));
        }
        Action::Reload => {
            state.status = Some(StatusMessage {
                text: "refreshing prices from Google's APIs (Cloud Billing Catalog, Compute Engine)…".into(),
                tone: Tone::Info,
            });
            return Some(vec![Command::RefreshOffers]);
        }
        _ => return None,
    }
    Some(vec![])
}

/// Keep the view in step with its filter text (called when the filter changes).
pub fn sync_filter(state: &mut State) {
    let text = state.filters[View::Offers.index()].clone();
    match &state.overlay {
        Overlay::Filter(f) => state.offers.preview(&text, &f.previous),
        _ => state.offers.apply(&text),
    }
}
