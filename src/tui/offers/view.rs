//! The Offers view: the catalog as a sortable, filterable table with zones grouped per
//! machine type and region, a detail panel, and the fleet-file editor.
//!
//! ```text
//! ┌ Offers · SkyPilot catalog @017e2502 · 2026-11-22 · spot · by spot ↑ · 18 offers ──┐┌ a3-ultragpu-8g ─────┐
//! │ MACHINE         GPU         #  ZONE              ON-DEMAND   SPOT  $/GPU-H  ...  ││ 8x H200 141GB, RDMA │
//! │▌a3-ultragpu-8g  H200 141GB  8  us-central1-b +2      86.76  32.62     4.08       ││ NICs 2+8 MRDMA      │
//! │   us-central1-a                                      86.76  32.62     4.08       ││ busbw all_gather …  │
//! └ bad filter: unknown GPU `H10`; did you mean H100? ─────────────────────────────────┘└─────────────────────┘
//! ```

use crate::catalog::{Direction, Field, Offer, Pricing};
use crate::tui::offers::{fleet_yaml, OfferRow, OffersView, COLUMNS};
use crate::tui::state::State;
use crate::tui::theme::{Theme, Tone};
use crate::words::truncate;
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, Widget, Wrap};

fn money(p: Option<f64>) -> String {
    match p {
        Some(v) => format!("{v:.2}"),
        None => "?".into(),
    }
}

fn opt(v: Option<u32>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "?".into())
}

fn header(f: Field) -> &'static str {
    match f {
        Field::Machine => "MACHINE",
        Field::Gpu => "GPU",
        Field::Gpus => "#",
        Field::Zone => "ZONE",
        Field::Vcpus => "vCPU",
        Field::Ram => "RAM GB",
        Field::Network => "Gbps",
        Field::GpuDirect => "GPUDIRECT",
        Field::OnDemand => "ON-DEMAND",
        Field::Spot => "SPOT",
        Field::Flex => "FLEX",
        Field::GpuPrice => "$/GPU-H",
        _ => "",
    }
}

fn width(f: Field) -> u16 {
    match f {
        Field::Machine => 16,
        Field::Gpu => 11,
        Field::Gpus => 3,
        Field::Zone => 24,
        Field::Vcpus => 5,
        Field::Ram => 7,
        Field::Network => 5,
        Field::GpuDirect => 9,
        Field::OnDemand | Field::Spot | Field::Flex => 9,
        Field::GpuPrice => 8,
        _ => 8,
    }
}

fn cell(f: Field, o: &Offer, pricing: Pricing, zone: String) -> String {
    match f {
        Field::Machine => o.machine_type.clone(),
        Field::Gpu => o.gpu_label(),
        Field::Gpus => o.gpu_count.to_string(),
        Field::Zone => zone,
        Field::Vcpus => o.vcpus.to_string(),
        Field::Ram => o.ram_gb.to_string(),
        Field::Network => opt(o.network_gbps),
        Field::GpuDirect => o.gpudirect.label().to_string(),
        Field::OnDemand => money(o.on_demand),
        Field::Spot => money(o.spot),
        Field::Flex => money(o.flex),
        Field::GpuPrice => money(o.price_per_gpu(pricing)),
        _ => String::new(),
    }
}

fn numeric(f: Field) -> bool {
    !matches!(f, Field::Machine | Field::Gpu | Field::Zone | Field::GpuDirect)
}

/// Whether the catalog doubts the price in column `f` of `o` (the CLI's `od-low`,
/// `no-od`, `spot-high`, `spot>od` notes): such cells are marked `!`, `d` tells why.
fn doubtful(f: Field, o: &Offer, pricing: Pricing) -> bool {
    use crate::catalog::model::Flag;
    let on_demand = || o.flags.contains(Flag::OnDemandLowLevel) || o.flags.contains(Flag::NoPlainOnDemand);
    let spot = || o.flags.contains(Flag::SpotHighLevel) || o.flags.contains(Flag::SpotAboveOnDemand);
    match f {
        Field::OnDemand => on_demand(),
        Field::Spot => spot(),
        Field::Price | Field::GpuPrice => match pricing {
            Pricing::OnDemand => on_demand(),
            Pricing::Spot => spot(),
            Pricing::Flex => false,
        },
        _ => false,
    }
}

/// The price column of `pricing`.
fn price_column(pricing: Pricing) -> Field {
    match pricing {
        Pricing::OnDemand => Field::OnDemand,
        Pricing::Spot => Field::Spot,
        Pricing::Flex => Field::Flex,
    }
}

/// The columns the applied filter compares (`spot<40`: SPOT; `price<5`: the pricing's
/// column), shown whatever the width so that the rows visibly meet the filter.
fn filtered_columns(v: &OffersView) -> Vec<Field> {
    let Ok(q) = v.catalog.query(&v.applied) else {
        return vec![];
    };
    q.fields()
        .into_iter()
        .map(|f| {
            if f == Field::Price {
                price_column(v.pricing)
            } else {
                f
            }
        })
        .filter(|f| !header(*f).is_empty())
        .collect()
}

/// The columns that fit in `w` cells, most important first kept; the column sorted by
/// and the columns the filter compares are always among them.
fn columns(w: u16, pricing: Pricing, sort: Field, filtered: &[Field]) -> Vec<Field> {
    let price = price_column(pricing);
    // Dropped right to left by priority when narrow.
    let mut priority = vec![Field::Machine, sort];
    priority.extend(filtered.iter().copied());
    priority.extend([
        Field::Zone,
        price,
        Field::GpuPrice,
        Field::Gpus,
        Field::Gpu,
        Field::GpuDirect,
        Field::OnDemand,
        Field::Spot,
        Field::Network,
        Field::Vcpus,
        Field::Ram,
        Field::Flex,
    ]);
    let mut keep: Vec<Field> = vec![];
    let mut used = 1u16;
    for f in priority {
        if keep.contains(&f) {
            continue;
        }
        if used + width(f) < w {
            used += width(f) + 1;
            keep.push(f);
        }
    }
    COLUMNS.iter().copied().filter(|f| keep.contains(f)).collect()
}

pub fn render(state: &State, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let v = &state.offers;
    let (table_area, detail_area) = split(v, area);
    render_table(v, theme, table_area, buf);
    if let (Some(d), Some(o)) = (detail_area, v.selected_offer()) {
        render_detail(o, v.pricing, theme, d, buf);
    }
    if let Some(e) = &state.editor {
        crate::tui::widgets::editor::render(e, theme, area, buf);
    }
}

/// The table's area and, with `d`, the detail's: beside it from 60 columns, else below
/// it from 16 rows.
/// Beside the table only where the table keeps its columns (at 80 columns a side panel
/// left the table 46 wide: the zone and the filtered SPOT column went, and one machine's
/// rows in three zones read the same); else under it.
fn split(v: &OffersView, area: Rect) -> (Rect, Option<Rect>) {
    if v.detail && area.width >= 120 {
        let [a, b] = Layout::horizontal([
            Constraint::Min(40),
            Constraint::Length((area.width / 3).clamp(34, 60)),
        ])
        .areas(area);
        (a, Some(b))
    } else if v.detail && area.height >= 16 {
        let [a, b] = Layout::vertical([Constraint::Min(6), Constraint::Length(area.height / 2)]).areas(area);
        (a, Some(b))
    } else {
        (area, None)
    }
}

/// Where the wheel moves the selection (`area`: the view's): the offers table, not the
/// detail beside it.
pub fn wheel_area(state: &State, area: Rect) -> Rect {
    split(&state.offers, area).0
}

fn render_table(v: &OffersView, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let arrow = match v.dir {
        Direction::Ascending => "↑",
        Direction::Descending => "↓",
    };
    let shown: usize = v.groups.iter().map(|g| g.len()).sum();
    let mut title = vec![
        Span::styled(" Offers ", theme.title()),
        Span::styled(
            format!(
                "· {shown} · {} · by {} {arrow} ",
                v.pricing.name(),
                header(v.sort).to_lowercase()
            ),
            theme.accent(),
        ),
    ];
    // The query the rows answer, not what is being typed.
    if !v.applied.is_empty() {
        title.push(Span::styled(format!("· {} ", v.applied), theme.accent()));
    }
    // Where the prices come from and how old they are, as much as fits.
    let source = v.catalog.source();
    let short = source.split(" (").next().unwrap_or(source);
    title.push(Span::styled(
        format!("· {short}, {} ", v.catalog.as_of()),
        theme.muted(),
    ));
    let mut block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.border(true))
        .title(Line::from(title))
        .style(theme.base());
    if let Some(e) = &v.error {
        block = block.title_bottom(Line::styled(
            format!(" bad filter at column {}: {} ", e.column + 1, e.message),
            theme.tone(Tone::Fail),
        ));
    }
    let inner_w = area.width.saturating_sub(2);
    let filtered = filtered_columns(v);
    let cols = columns(inner_w, v.pricing, v.sort, &filtered);
    // While the typed filter has an error, the rows are the filter in force's: dimmed.
    let stale = v.error.is_some();
    // Free space goes to the machine type first (`a3-ultragpu-8g-nolssd` whole), then
    // the zone: the zone gives up what its usual width has beyond its longest text
    // (`europe-west4-a +3`) to the machine type before anything else does.
    let longest = |f: Field| {
        let l = v
            .rows
            .iter()
            .map(|r| {
                let o = v.row_offer(*r);
                match f {
                    Field::Machine => o.machine_type.chars().count(),
                    _ => o.zone.chars().count() + 4,
                }
            })
            .max()
            .unwrap_or(0);
        u16::try_from(l.max(header(f).chars().count())).unwrap_or(u16::MAX)
    };
    let used: u16 = cols.iter().map(|f| width(*f) + 1).sum();
    let mut free = inner_w.saturating_sub(used);
    let mut grown = std::collections::HashMap::new();
    let zone_need = longest(Field::Zone).min(width(Field::Zone));
    if cols.contains(&Field::Zone) {
        free += width(Field::Zone) - zone_need;
    }
    if cols.contains(&Field::Machine) {
        let give = longest(Field::Machine)
            .saturating_sub(width(Field::Machine))
            .min(free);
        free -= give;
        grown.insert(Field::Machine, width(Field::Machine) + give);
    }
    if cols.contains(&Field::Zone) {
        let most = longest(Field::Zone).max(width(Field::Zone));
        grown.insert(Field::Zone, zone_need + (most - zone_need).min(free));
    }
    let cw = |f: Field| grown.get(&f).copied().unwrap_or_else(|| width(f));
    let mut marked = false;
    let selected = v.selected_row();
    // Only the rows around the selection are built (thousands of rows, one screen).
    let visible = usize::from(area.height.saturating_sub(3)).max(1);
    let first = selected.map_or(0, |s| s.saturating_sub(visible.saturating_sub(1)));
    let offers = v.catalog.offers();
    let rows: Vec<Row> = v
        .rows
        .iter()
        .enumerate()
        .skip(first)
        .take(visible)
        .map(|(i, r)| {
            let (o, zone, member) = match *r {
                OfferRow::Group { group } => {
                    let g = &v.groups[group];
                    let o = &offers[g.first()];
                    let more = if g.len() > 1 {
                        format!(" +{}", g.len() - 1)
                    } else {
                        String::new()
                    };
                    (o, format!("{}{more}", o.zone), false)
                }
                OfferRow::Member { offer, .. } => (&offers[offer], format!("  {}", offers[offer].zone), true),
            };
            let style = if Some(i) == selected {
                theme.selection()
            } else if member {
                theme.muted()
            } else {
                theme.base()
            };
            let style = if stale {
                style.patch(theme.muted()).add_modifier(Modifier::DIM)
            } else {
                style
            };
            let cells: Vec<Cell> = cols
                .iter()
                .map(|f| {
                    let text = cell(*f, o, v.pricing, zone.clone());
                    let text = if member && *f == Field::Machine {
                        "  └".to_string()
                    } else {
                        text
                    };
                    let doubt = doubtful(*f, o, v.pricing);
                    let text = if doubt { format!("{text}!") } else { text };
                    marked |= doubt;
                    let text = truncate(&text, usize::from(cw(*f)));
                    let text = if numeric(*f) {
                        format!("{text:>w$}", w = usize::from(cw(*f)))
                    } else {
                        text
                    };
                    let unknown = text.trim() == "?";
                    Cell::from(text).style(if (unknown || doubt) && Some(i) != selected {
                        theme.tone(Tone::Warn)
                    } else {
                        Style::new()
                    })
                })
                .collect();
            Row::new(cells).style(style)
        })
        .collect();
    // Priced by flex-start with a catalog that has no flex-start price: a column of `?`
    // says nothing by itself (the CLI says the same on stderr).
    let no_flex = v.pricing == Pricing::Flex && v.catalog.offers().iter().all(|o| o.flex.is_none());
    if no_flex {
        block = block.title_bottom(Line::styled(
            crate::words::truncate(
                " the catalog has no flex-start (DWS) prices: p prices by on-demand ",
                usize::from(area.width).saturating_sub(2),
            ),
            theme.tone(Tone::Warn),
        ));
    } else if v.error.is_none() {
        let (left, right) = footer_notes(v.dropped_unknown, marked, usize::from(area.width));
        if let Some(l) = left {
            block = block.title_bottom(Line::styled(l, theme.tone(Tone::Warn)));
        }
        if let Some(r) = right {
            block = block.title_bottom(Line::styled(r, theme.tone(Tone::Warn)).right_aligned());
        }
    }
    let head = Row::new(
        cols.iter()
            .map(|f| {
                let h = header(*f);
                let text = if numeric(*f) {
                    format!("{h:>w$}", w = usize::from(cw(*f)))
                } else {
                    h.to_string()
                };
                // The sorted column in bold, the filtered ones underlined.
                let style = if *f == v.sort {
                    theme.accent().add_modifier(Modifier::BOLD)
                } else {
                    theme.muted()
                };
                let style = if filtered.contains(f) {
                    style.add_modifier(Modifier::UNDERLINED)
                } else {
                    style
                };
                Cell::from(text).style(style)
            })
            .collect::<Vec<_>>(),
    );
    let widths: Vec<Constraint> = cols.iter().map(|f| Constraint::Length(cw(*f))).collect();
    if v.rows.is_empty() {
        let msg = if v.error.is_some() {
            ""
        } else {
            "No offer matches the filter."
        };
        return Paragraph::new(msg).block(block).render(area, buf);
    }
    Table::new(rows, widths)
        .header(head)
        .block(block)
        .render(area, buf);
}

/// The bottom border's two notes for a table `width` wide: `left` out offers and the
/// `!` legend, shortened (the long forms first) so that they never overlap; the legend
/// goes last when even the short forms do not fit.
fn footer_notes(left_out: usize, marked: bool, width: usize) -> (Option<String>, Option<String>) {
    let lefts = [
        format!(" {left_out} offers left out: their price is unknown "),
        format!(" {left_out} left out: price unknown "),
        format!(" {left_out} left out "),
    ];
    let rights = [
        " ! a price the catalog doubts: d tells why ",
        " ! doubtful price: d tells why ",
        " ! d: why ",
    ];
    // Two corners and one border cell between the notes.
    let room = width.saturating_sub(3);
    let len = |s: &str| s.chars().count();
    match (left_out > 0, marked) {
        (false, false) => (None, None),
        (true, false) => (lefts.iter().find(|l| len(l) <= room + 1).cloned(), None),
        (false, true) => (
            None,
            rights.iter().find(|r| len(r) <= room + 1).map(|r| r.to_string()),
        ),
        (true, true) => {
            for l in &lefts {
                for r in &rights {
                    if len(l) + len(r) <= room {
                        return (Some(l.clone()), Some(r.to_string()));
                    }
                }
            }
            (lefts.iter().find(|l| len(l) <= room + 1).cloned(), None)
        }
    }
}

fn render_detail(o: &Offer, pricing: Pricing, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let mut lines = vec![
        Line::styled(
            format!("{}x {} in {}", o.gpu_count, o.gpu_label(), o.zone),
            theme.title(),
        ),
        Line::raw(format!(
            "{} vCPUs, {} GB RAM, {} Gbps",
            o.vcpus,
            o.ram_gb,
            opt(o.network_gbps)
        )),
        Line::raw(format!(
            "GPUDirect: {}   NICs: {}",
            match o.gpudirect.label() {
                "-" => "none",
                l => l,
            },
            o.nics.label()
        )),
        Line::raw(""),
        Line::styled("Prices, USD per hour", theme.title()),
        Line::raw(format!(
            "on-demand {}   spot {}   flex {}",
            money(o.on_demand),
            money(o.spot),
            money(o.flex)
        )),
        Line::raw(format!(
            "{}: {} per GPU-hour (GPUs {}, host {})",
            pricing.name(),
            money(o.price_per_gpu(pricing)),
            money(o.gpu_part(pricing)),
            money(match pricing {
                Pricing::OnDemand => o.host_on_demand,
                Pricing::Spot => o.host_spot,
                Pricing::Flex => None,
            })
        )),
    ];
    for f in o.flags.iter() {
        lines.push(Line::styled(
            format!("! {}", f.description()),
            theme.tone(Tone::Warn),
        ));
    }
    lines.push(Line::raw(""));
    lines.push(Line::styled("Published NCCL busbw (2 nodes)", theme.title()));
    let published = crate::nccl::baseline::for_machine(&o.machine_type);
    if published.is_empty() {
        lines.push(Line::styled(
            "none published for this machine type",
            theme.muted(),
        ));
    }
    for b in published {
        lines.push(Line::raw(format!(
            "{} {}: {:.2} GB/s, {}",
            b.collective,
            crate::nccl::human_size(b.size),
            b.busbw,
            b.fabric
        )));
    }
    lines.push(Line::raw(""));
    lines.push(Line::styled("Fleet file (w writes it to fleets/)", theme.title()));
    let (_, yaml) = fleet_yaml(o, pricing);
    lines.extend(yaml.lines().map(|l| Line::styled(l.to_string(), theme.muted())));
    Paragraph::new(lines)
        .block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(theme.border(false))
                .title(Span::styled(format!(" {} ", o.machine_type), theme.title()))
                .style(theme.base()),
        )
        .wrap(Wrap { trim: false })
        .render(area, buf);
}
