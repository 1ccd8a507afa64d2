//! `flightdeck offers`: GPU offers from the catalog in use, as an aligned table or one JSON
//! array; `--refresh` fetches a live catalog from Google's APIs first.
//!
//! Which catalog: the live one just fetched (`--refresh`), else the cached live catalog in
//! the state dir when it is newer than the embedded one, else the embedded catalog.
//!
//! stdout: the table (header row first) or the JSON array, nothing else. stderr: a line
//! naming the catalog's source, date and age (with `--json` only when it is not the
//! embedded catalog, or with `--refresh`), footnotes for unknown prices and flags, and
//! notes (offers left out for unknown prices, no matches).
//!
//! Exit 0; 2 for a bad filter (a usage error); 1 for a failed refresh.
//!
//! A failed `--refresh` (no credentials, 403, offline, a malformed reply) says why on
//! stderr, still lists the catalog that stays in use (cached or embedded, named with its age
//! on stderr) and exits 1. Why 1 and not 0: the operator asked for current prices and did not
//! get them; a script that passed `--refresh` must be able to tell stale prices from fresh
//! ones without parsing stderr (prices drive money decisions). Why still list: stdout keeps
//! its contract (one table or one JSON document of the catalog in use), so a person sees the
//! offers anyway and the cache is left as it was, for the next run and the cockpit.

use super::table::Col;
use super::{OfferSort, OffersArgs, Pricing as CliPricing};
use crate::catalog::live::{self, InUse, RefreshOptions};
use crate::catalog::{Catalog, Direction, Field, Filtered, Flag, Offer, Pricing, Query, QueryError};
use crate::paths::Paths;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;
use std::time::SystemTime;

impl From<CliPricing> for Pricing {
    fn from(p: CliPricing) -> Pricing {
        match p {
            CliPricing::OnDemand => Pricing::OnDemand,
            CliPricing::Spot => Pricing::Spot,
            CliPricing::Flex => Pricing::Flex,
        }
    }
}

/// The sort keys of `--sort`, most significant first.
pub fn sort_order(sort: OfferSort) -> Vec<(Field, Direction)> {
    let asc = Direction::Ascending;
    match sort {
        OfferSort::Price => vec![(Field::Price, asc)],
        OfferSort::GpuPrice => vec![(Field::GpuPrice, asc), (Field::Price, asc)],
        OfferSort::Gpus => vec![(Field::Gpus, asc), (Field::Price, asc)],
    }
}

pub fn run(args: &OffersArgs) -> anyhow::Result<ExitCode> {
    // A filter that cannot parse fails before any network call.
    if let Some(text) = &args.filter {
        if let Err(e) = Query::parse(text) {
            errln!("flightdeck: {}", filter_error(text, &e));
            return Ok(ExitCode::from(2));
        }
    }
    let state_dir = Paths::from_env().ok().map(|p| p.state_dir);
    let mut in_use = live::startup(state_dir.as_deref());
    if let Some(w) = in_use.warning.take() {
        errln!("flightdeck: {w}");
    }
    let mut refresh_failed = false;
    if args.refresh {
        errln!("flightdeck: refreshing from Google's APIs (Cloud Billing Catalog, Compute Engine)...");
        match refresh(state_dir) {
            Ok(r) => {
                errln!("flightdeck: refreshed: {}", r.report);
                if let Some(w) = &r.cache_warning {
                    errln!("flightdeck: {w}");
                }
                in_use = InUse::live(r);
            }
            Err(e) => {
                refresh_failed = true;
                errln!("flightdeck: live refresh failed: {e}");
                errln!(
                    "flightdeck: the {} catalog stays in use and is listed below; exit status 1 \
                     because the refresh failed",
                    if matches!(in_use.origin, live::Origin::Cached { .. }) {
                        "cached"
                    } else {
                        "embedded"
                    }
                );
            }
        }
    }
    let catalog: &Catalog = &in_use.catalog;
    let query = match build_query(catalog, args) {
        Ok(q) => q,
        Err(message) => {
            errln!("flightdeck: {message}");
            return Ok(ExitCode::from(2));
        }
    };
    let pricing = Pricing::from(args.pricing);
    let selected = catalog.select(&query, pricing, &sort_order(args.sort));
    let offers: Vec<&Offer> = selected.indices.iter().map(|&i| &catalog.offers()[i]).collect();

    // What is written below may hold what the Compute and Billing APIs said (the live
    // catalog, also from its cache in the state dir): shown, never acted on.
    use crate::term::visible::text as shown;
    let mut out = std::io::stdout().lock();
    let mut err = std::io::stderr().lock();
    let described = in_use.describe(SystemTime::now());
    if args.json {
        if args.refresh || in_use.origin != live::Origin::Embedded {
            writeln!(err, "catalog: {}", shown(&described))?;
        }
        writeln!(out, "{}", shown(&json(&offers, pricing)?))?;
    } else {
        writeln!(
            err,
            "{} of {} offers · {} prices in USD/hour · catalog: {}",
            offers.len(),
            catalog.offers().len(),
            pricing,
            shown(&described),
        )?;
        write!(
            out,
            "{}",
            shown(&table(&offers, pricing, super::table::stdout_width()))
        )?;
        for line in footnotes(&offers, pricing) {
            writeln!(err, "{}", shown(&line))?;
        }
    }
    for line in notes(&selected, &query, &offers, pricing) {
        writeln!(err, "{}", shown(&line))?;
    }
    Ok(if refresh_failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Run [`live::refresh`] on a runtime of its own, caching into `state_dir`.
fn refresh(state_dir: Option<std::path::PathBuf>) -> Result<live::Refreshed, crate::cloud::gcp::GcpError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| crate::cloud::gcp::GcpError::Config(format!("cannot start the async runtime: {e}")))?;
    let opts = RefreshOptions {
        state_dir,
        ..RefreshOptions::default()
    };
    rt.block_on(live::refresh(&opts))
}

/// The query of `--filter` and the other filter flags together, checked against the
/// catalog. The error is the whole message to print.
pub fn build_query(catalog: &Catalog, args: &OffersArgs) -> Result<Query, String> {
    let mut query = match &args.filter {
        Some(text) => catalog.query(text).map_err(|e| filter_error(text, &e))?,
        None => Query::default(),
    };
    let mut flag = |flag: &str, field: &str, value: &str| -> Result<(), String> {
        if value.is_empty() || value.contains(char::is_whitespace) {
            return Err(format!("{flag} {value:?}: expected one word"));
        }
        let q = catalog
            .query(&format!("{field}={value}"))
            .map_err(|e| format!("{flag} {value}: {}", e.message))?;
        query = std::mem::take(&mut query).and(q);
        Ok(())
    };
    if let Some(v) = &args.gpu {
        flag("--gpu", "gpu", v)?;
    }
    if let Some(v) = args.gpus {
        flag("--gpus", "gpus", &v.to_string())?;
    }
    if let Some(v) = &args.region {
        flag("--region", "region", v)?;
    }
    if let Some(v) = &args.zone {
        flag("--zone", "zone", v)?;
    }
    if let Some(v) = args.max_price {
        let q = Query::parse(&format!("price<={v}"))
            .map_err(|_| format!("--max-price {v}: expected a price in USD per hour"))?;
        query = query.and(q);
    }
    Ok(query)
}

fn filter_error(text: &str, e: &QueryError) -> String {
    format!(
        "bad --filter at column {}: {}\n  {text}\n  {}",
        e.column,
        e.message,
        e.underline()
    )
}

/// A price cell: `?` when unknown, never 0.
fn money(p: Option<f64>) -> String {
    match p {
        Some(p) => format!("{p:.3}"),
        None => "?".into(),
    }
}

fn opt(v: Option<u32>) -> String {
    v.map_or_else(|| "?".into(), |v| v.to_string())
}

/// The columns, for `pricing`: on a narrow terminal the machine's sizes go first, then
/// the prices not asked for, GPUDirect, the notes (their meaning is on stderr) and the
/// GPU count; the machine, GPU, zone, the asked-for price and its per-GPU price stay.
fn columns(pricing: Pricing) -> [Col; 13] {
    let price = |head, p: Pricing, n| {
        let c = Col::right(head);
        if p == pricing {
            c
        } else {
            c.drop(n)
        }
    };
    [
        Col::left("MACHINE TYPE"),
        Col::left("GPU"),
        // The machine type's name says it too (a3-highgpu-8g).
        Col::right("GPUS").drop(7),
        Col::left("ZONE"),
        Col::right("VCPUS").drop(1),
        Col::right("RAM GB").drop(1),
        Col::right("GBPS").drop(2),
        Col::left("GPUDIRECT").drop(5),
        price("ON-DEMAND", Pricing::OnDemand, 4),
        price("SPOT", Pricing::Spot, 4),
        price("FLEX", Pricing::Flex, 3),
        Col::right("$/GPU-H"),
        Col::left("NOTES").drop(6).shrink(),
    ]
}

/// The aligned table: a header row, then one row per offer, fitting `width` when given
/// ([`super::table`]). `$/GPU-H` is for `pricing`.
pub fn table(offers: &[&Offer], pricing: Pricing, width: Option<usize>) -> String {
    let rows: Vec<Vec<String>> = offers
        .iter()
        .map(|o| {
            let notes: Vec<&str> = o.flags.iter().map(Flag::tag).collect();
            vec![
                o.machine_type.clone(),
                o.gpu_label(),
                o.gpu_count.to_string(),
                o.zone.clone(),
                o.vcpus.to_string(),
                o.ram_gb.to_string(),
                opt(o.network_gbps),
                o.gpudirect.label().to_string(),
                money(o.on_demand),
                money(o.spot),
                money(o.flex),
                money(o.price_per_gpu(pricing)),
                notes.join(","),
            ]
        })
        .collect();
    super::table::render(&columns(pricing), &rows, width)
}

fn range(values: impl Iterator<Item = Option<f64>>) -> String {
    let known: Vec<f64> = values.flatten().collect();
    let (Some(lo), Some(hi)) = (
        known.iter().copied().reduce(f64::min),
        known.iter().copied().reduce(f64::max),
    ) else {
        return "?".into();
    };
    if (hi - lo).abs() < 5e-4 {
        format!("{lo:.3}")
    } else {
        format!("{lo:.3}–{hi:.3}")
    }
}

/// What `?` means for the offers shown, and what their flags say.
pub fn footnotes(offers: &[&Offer], pricing: Pricing) -> Vec<String> {
    let mut lines = Vec::new();
    let unknown = offers
        .iter()
        .any(|o| o.on_demand.is_none() || o.spot.is_none() || o.flex.is_none());
    if unknown {
        lines.push("? = unknown: the catalog does not have that price (never read it as 0).".to_string());
    }
    // Offers without a host price, by kind: what the GPUs alone cost.
    let mut partial: BTreeMap<(String, String, u32), Vec<&Offer>> = BTreeMap::new();
    for o in offers.iter().filter(|o| o.flags.contains(Flag::HostPriceMissing)) {
        partial
            .entry((o.machine_type.clone(), o.gpu_label(), o.gpu_count))
            .or_default()
            .push(o);
    }
    const LIMIT: usize = 6;
    for ((machine, gpu, n), group) in partial.iter().take(LIMIT) {
        lines.push(format!(
            "  {machine} with {n}x {gpu}: host price not in the catalog; the GPUs alone cost \
             {} on-demand, {} spot $/h ({} zones)",
            range(group.iter().map(|o| o.gpu_on_demand)),
            range(group.iter().map(|o| o.gpu_spot)),
            group.len()
        ));
    }
    if partial.len() > LIMIT {
        lines.push(format!(
            "  ... and {} more kinds without a host price (--json has gpu_on_demand, gpu_spot)",
            partial.len() - LIMIT
        ));
    }
    if offers.iter().any(|o| o.flex.is_some()) {
        if offers.iter().any(|o| o.flex.is_none()) {
            lines.push("  flex: some offers have no flex-start (DWS) price in the catalog".to_string());
        }
    } else if !offers.is_empty() {
        lines.push(format!(
            "  flex: the catalog has no flex-start (DWS) prices{}",
            if pricing == Pricing::Flex {
                ", so every flex price and $/GPU-h is unknown"
            } else {
                ""
            }
        ));
    }
    let mut shown: Vec<Flag> = Flag::ALL
        .into_iter()
        .filter(|f| offers.iter().any(|o| o.flags.contains(*f)))
        .collect();
    shown.retain(|f| *f != Flag::HostPriceMissing || partial.is_empty());
    if !shown.is_empty() || !partial.is_empty() {
        lines.push("NOTES:".to_string());
    }
    if !partial.is_empty() {
        lines.push(format!(
            "  {}: {}",
            Flag::HostPriceMissing.tag(),
            Flag::HostPriceMissing.description()
        ));
    }
    for f in shown {
        lines.push(format!("  {}: {}", f.tag(), f.description()));
    }
    lines
}

/// Offers left out for unknown values, offers listed last for an unknown price, and an
/// empty result.
pub fn notes(selected: &Filtered, query: &Query, offers: &[&Offer], pricing: Pricing) -> Vec<String> {
    let mut lines = Vec::new();
    let unpriced = offers.iter().filter(|o| o.price(pricing).is_none()).count();
    if unpriced > 0 {
        lines.push(format!(
            "note: {unpriced} of {} offers listed have no known {pricing} price (shown as ?, \
             null in JSON); sorting by price puts them last",
            offers.len()
        ));
    }
    if selected.unknown > 0 {
        let fields: Vec<String> = selected
            .unknown_fields
            .iter()
            .map(|f| f.describe(pricing))
            .collect();
        lines.push(format!(
            "note: {} offer{} left out because {} {} unknown (a comparison with an unknown \
             value never matches)",
            selected.unknown,
            if selected.unknown == 1 { "" } else { "s" },
            if selected.unknown == 1 { "its" } else { "their" },
            fields.join(" or ") + if fields.len() == 1 { " is" } else { " are" },
        ));
    }
    if selected.indices.is_empty() {
        lines.push(if query.is_empty() {
            "note: the catalog has no offers".to_string()
        } else {
            "note: no offers match".to_string()
        });
    }
    lines
}

#[derive(Serialize)]
struct JsonOffer<'a> {
    #[serde(flatten)]
    offer: &'a Offer,
    /// The pricing `price` and `price_per_gpu` are for.
    pricing: Pricing,
    price: Option<f64>,
    price_per_gpu: Option<f64>,
}

fn round5(x: f64) -> f64 {
    (x * 1e5).round() / 1e5
}

/// One JSON array: every field of each offer, plus the price and price per GPU-hour of
/// `pricing`. Unknown values are `null`.
pub fn json(offers: &[&Offer], pricing: Pricing) -> serde_json::Result<String> {
    let items: Vec<JsonOffer> = offers
        .iter()
        .map(|o| JsonOffer {
            offer: o,
            pricing,
            price: o.price(pricing),
            price_per_gpu: o.price_per_gpu(pricing).map(round5),
        })
        .collect();
    serde_json::to_string_pretty(&items)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pick(ids: &[&str]) -> Vec<&'static Offer> {
        let c = Catalog::embedded();
        ids.iter()
            .map(|id| c.get(id).unwrap_or_else(|| panic!("{id}")))
            .collect()
    }

    /// ux-walk-2 item 5: on an 80-column terminal every offer of the catalog fits, with
    /// the asked-for price and the zone kept; piped, every column is written.
    #[test]
    fn on_an_80_column_terminal_the_table_fits() {
        let c = Catalog::embedded();
        let offers: Vec<&Offer> = c.offers().iter().collect();
        for pricing in Pricing::ALL {
            let t = table(&offers, pricing, Some(80));
            let wide = t.lines().filter(|l| l.chars().count() > 80).collect::<Vec<_>>();
            assert!(wide.is_empty(), "{pricing:?}: {wide:#?}");
            let head = t.lines().next().unwrap();
            assert!(head.contains("ZONE") && head.contains("$/GPU-H"), "{head}");
            let asked = ["ON-DEMAND", "SPOT", "FLEX"][pricing as usize];
            assert!(head.contains(asked), "{pricing:?}: {head}");
            assert!(t.contains("(left out at 80 columns: GPUS, VCPUS, RAM GB"), "{t}");
        }
        let all = table(&offers, Pricing::Spot, None);
        assert!(all.lines().next().unwrap().contains("VCPUS"), "{all}");
        assert!(all.lines().any(|l| l.chars().count() > 80), "piped: whole");
    }

    #[test]
    fn table_is_aligned_and_shows_unknown_as_question_marks() {
        let offers = pick(&["a3-ultragpu-8g/us-central1-b", "a4-highgpu-8g/us-east4-b"]);
        let t = table(&offers, Pricing::Spot, None);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(
            lines[0].starts_with("MACHINE TYPE    GPU         GPUS  ZONE"),
            "{t}"
        );
        assert!(
            lines[1].contains("a3-ultragpu-8g  H200 141GB     8  us-central1-b")
                && lines[1].contains("86.760")
                && lines[1].contains("32.619")
                && lines[1].contains("4.077"),
            "{t}"
        );
        assert!(
            lines[2].contains("a4-highgpu-8g") && lines[2].contains("host?"),
            "{t}"
        );
        // Right-aligned price columns end at the same place in every row.
        let col = |line: &str, cell: &str| line.find(cell).map(|p| p + cell.len());
        assert_eq!(col(lines[0], "ON-DEMAND"), col(lines[1], "86.760"), "{t}");
        let a4_cells: Vec<&str> = lines[2].split_whitespace().collect();
        assert_eq!(&a4_cells[9..13], ["?", "?", "?", "?"], "{t}");
    }

    #[test]
    fn footnotes_explain_what_is_unknown() {
        let offers = pick(&["a4-highgpu-8g/us-east4-b", "a4-highgpu-8g/us-central1-b"]);
        let notes = footnotes(&offers, Pricing::Spot).join("\n");
        assert!(notes.contains("? = unknown"), "{notes}");
        assert!(
            notes.contains(
                "a4-highgpu-8g with 8x B200 180GB: host price not in the catalog; the GPUs alone cost \
                 90.216 on-demand, 64.440 spot $/h (2 zones)"
            ),
            "{notes}"
        );
        assert!(notes.contains("spot?: the catalog has no Spot price"), "{notes}");
        let none = footnotes(&[], Pricing::OnDemand);
        assert!(none.is_empty(), "{none:?}");
    }

    #[test]
    fn json_has_snake_case_fields_and_null_prices() {
        let offers = pick(&["a4-highgpu-8g/us-east4-b"]);
        let v: serde_json::Value = serde_json::from_str(&json(&offers, Pricing::Spot).unwrap()).unwrap();
        let o = &v[0];
        assert_eq!(o["machine_type"], "a4-highgpu-8g");
        assert_eq!(o["gpu_count"], 8);
        assert!(o["on_demand"].is_null() && o["spot"].is_null() && o["price"].is_null());
        assert_eq!(o["gpu_spot"], 64.44);
        assert_eq!(o["pricing"], "spot");
        assert_eq!(o["flags"][0], "host_price_missing");
    }
}
