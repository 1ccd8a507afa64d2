//! The oddity flags, computed in Rust the way `scripts/build_catalog.py` (`flag`) computes
//! them for the embedded catalog, so that a live catalog carries the same notes.
//!
//! * `host_price_missing` / `gpu_price_missing`: no price at all for the host's vCPUs and
//!   RAM / for the GPUs (a machine sold by the GPU slice has both in the slice price);
//! * `spot_price_missing`: the GPUs have a price, but no Spot one;
//! * `spot_above_on_demand`: Spot above on-demand (whole machine when both are known, else
//!   the GPUs' parts);
//! * `on_demand_low_level` / `spot_high_level`: per GPU type (per-GPU price) and per host
//!   machine type, by region: when the distinct prices have a jump of at least
//!   [`LEVEL_GAP`]×, the lower on-demand level is flagged, and the upper Spot level when it
//!   is the rarer one;
//! * `no_plain_on_demand`: a rule about machine types, not prices: gpuhunt's list of types
//!   Google sells only reserved, flex-start or Spot ([`no_plain_on_demand`]).
//!
//! The test `the_embedded_flags_are_recomputed_exactly` runs this over the embedded offers
//! and compares with what the script wrote.

use crate::catalog::model::{Flag, Flags, Offer};
use std::collections::{BTreeMap, BTreeSet};

/// Two price levels: a jump between sorted distinct per-unit prices of at least this factor.
pub const LEVEL_GAP: f64 = 1.5;

/// Machine types Google does not sell plain on-demand (gpuhunt `GCPProvider.filter`:
/// `a4x-*`, `a4-*`, `a3-ultragpu-*`, `a3-highgpu-{1,2,4}g`).
pub fn no_plain_on_demand(machine_type: &str) -> bool {
    ["a4x-", "a4-", "a3-ultragpu-"]
        .iter()
        .any(|p| machine_type.starts_with(p))
        || ["a3-highgpu-1g", "a3-highgpu-2g", "a3-highgpu-4g"].contains(&machine_type)
}

fn round5(x: f64) -> f64 {
    (x * 1e5).round() / 1e5
}

/// The parts the flags look at. For a machine sold by the GPU slice the whole price stands
/// for the GPUs' part and the host counts as priced.
struct Parts {
    has_host: bool,
    has_gpu: bool,
    gpu_od: Option<f64>,
    gpu_spot: Option<f64>,
    host_od: Option<f64>,
    host_spot: Option<f64>,
}

fn parts(o: &Offer, slice: bool) -> Parts {
    let gpu_od = o.gpu_on_demand.or(if slice { o.on_demand } else { None });
    let gpu_spot = o.gpu_spot.or(if slice { o.spot } else { None });
    Parts {
        has_host: slice || o.host_on_demand.is_some() || o.host_spot.is_some(),
        has_gpu: gpu_od.is_some() || gpu_spot.is_some() || (slice && o.flex.is_some()),
        gpu_od,
        gpu_spot,
        host_od: o.host_on_demand,
        host_spot: o.host_spot,
    }
}

/// Replace every offer's flags with the computed ones. `slice(o)`: the offer is priced by
/// the GPU slice (host included).
pub fn compute(offers: &mut [Offer], slice: impl Fn(&Offer) -> bool) {
    let parts: Vec<Parts> = offers.iter().map(|o| parts(o, slice(o))).collect();
    for (o, p) in offers.iter_mut().zip(&parts) {
        let mut f = Flags::default();
        if !p.has_host {
            f.insert(Flag::HostPriceMissing);
        }
        if !p.has_gpu {
            f.insert(Flag::GpuPriceMissing);
        }
        if p.has_gpu && p.gpu_spot.is_none() {
            f.insert(Flag::SpotPriceMissing);
        }
        if no_plain_on_demand(&o.machine_type) {
            f.insert(Flag::NoPlainOnDemand);
        }
        let (od, spot) = match (o.on_demand, o.spot) {
            (Some(a), Some(b)) => (Some(a), Some(b)),
            _ => (p.gpu_od, p.gpu_spot),
        };
        if let (Some(od), Some(spot)) = (od, spot) {
            if spot > od {
                f.insert(Flag::SpotAboveOnDemand);
            }
        }
        o.flags = f;
    }

    type ByGroup = BTreeMap<String, BTreeMap<String, f64>>;
    /// An offer's (group, per-unit price), if it has one.
    type UnitPrice<'a> = &'a dyn Fn(&Offer, &Parts) -> Option<(String, f64)>;
    let per_unit = |value: UnitPrice| -> ByGroup {
        let mut by: ByGroup = BTreeMap::new();
        for (o, p) in offers.iter().zip(&parts) {
            if let Some((group, v)) = value(o, p) {
                by.entry(group).or_default().insert(o.region.clone(), round5(v));
            }
        }
        by
    };
    let gpus = |o: &Offer| f64::from(o.gpu_count.max(1));
    let gpu_od = per_unit(&|o, p| p.gpu_od.map(|v| (o.accelerator_type.clone(), v / gpus(o))));
    let gpu_spot = per_unit(&|o, p| p.gpu_spot.map(|v| (o.accelerator_type.clone(), v / gpus(o))));
    let host_od = per_unit(&|o, p| p.host_od.map(|v| (o.machine_type.clone(), v)));
    let host_spot = per_unit(&|o, p| p.host_spot.map(|v| (o.machine_type.clone(), v)));
    let low = |by: &ByGroup| -> BTreeMap<String, BTreeSet<String>> {
        by.iter().map(|(g, v)| (g.clone(), split_levels(v).0)).collect()
    };
    let high = |by: &ByGroup| -> BTreeMap<String, BTreeSet<String>> {
        by.iter().map(|(g, v)| (g.clone(), odd_high(v))).collect()
    };
    let (low_gpu_od, low_host_od) = (low(&gpu_od), low(&host_od));
    let (high_gpu_spot, high_host_spot) = (high(&gpu_spot), high(&host_spot));
    let has =
        |m: &BTreeMap<String, BTreeSet<String>>, g: &str, r: &str| m.get(g).is_some_and(|s| s.contains(r));
    for (o, p) in offers.iter_mut().zip(&parts) {
        let r = o.region.as_str();
        if (p.gpu_od.is_some() && has(&low_gpu_od, &o.accelerator_type, r))
            || (p.host_od.is_some() && has(&low_host_od, &o.machine_type, r))
        {
            o.flags.insert(Flag::OnDemandLowLevel);
        }
        if (p.gpu_spot.is_some() && has(&high_gpu_spot, &o.accelerator_type, r))
            || (p.host_spot.is_some() && has(&high_host_spot, &o.machine_type, r))
        {
            o.flags.insert(Flag::SpotHighLevel);
        }
    }
}

/// `(low keys, high keys)` when the values have two levels, else both empty. The cut is at
/// the largest ratio between neighbouring distinct values (the later one on a tie, as
/// Python's `max` over `(ratio, index)` picks).
fn split_levels(values: &BTreeMap<String, f64>) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut distinct: Vec<f64> = values.values().copied().collect();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup();
    if distinct.len() < 2 {
        return Default::default();
    }
    let mut best = (f64::MIN, 0usize);
    for j in 0..distinct.len() - 1 {
        let ratio = distinct[j + 1] / distinct[j];
        if ratio >= best.0 {
            best = (ratio, j);
        }
    }
    if best.0 < LEVEL_GAP {
        return Default::default();
    }
    let cut = distinct[best.1];
    let (low, high): (Vec<_>, Vec<_>) = values.iter().partition(|(_, v)| **v <= cut);
    (
        low.into_iter().map(|(k, _)| k.clone()).collect(),
        high.into_iter().map(|(k, _)| k.clone()).collect(),
    )
}

/// The upper level's keys when it is the rarer one.
fn odd_high(values: &BTreeMap<String, f64>) -> BTreeSet<String> {
    let (low, high) = split_levels(values);
    if high.len() < low.len() {
        high
    } else {
        BTreeSet::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;

    #[test]
    fn the_embedded_flags_are_recomputed_exactly() {
        let c = Catalog::embedded();
        let mut offers: Vec<Offer> = c.offers().to_vec();
        for o in &mut offers {
            o.flags = Flags::default();
        }
        compute(&mut offers, |_| false);
        let mut diffs = Vec::new();
        for (mine, script) in offers.iter().zip(c.offers()) {
            if mine.flags != script.flags {
                let codes = |f: Flags| f.iter().map(Flag::code).collect::<Vec<_>>().join("|");
                diffs.push(format!(
                    "{}: rust {} script {}",
                    mine.id,
                    codes(mine.flags),
                    codes(script.flags)
                ));
            }
        }
        assert!(diffs.is_empty(), "{} differ:\n{}", diffs.len(), diffs.join("\n"));
        let flagged = offers.iter().filter(|o| !o.flags.is_empty()).count();
        assert!(
            flagged > 100,
            "the embedded catalog has many flagged offers: {flagged}"
        );
    }

    #[test]
    fn levels() {
        let m = |pairs: &[(&str, f64)]| -> BTreeMap<String, f64> {
            pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
        };
        let v = m(&[("a", 4.2), ("b", 9.8), ("c", 10.1), ("d", 12.7)]);
        let (low, high) = split_levels(&v);
        assert_eq!(low.into_iter().collect::<Vec<_>>(), ["a"]);
        assert_eq!(high.len(), 3);
        assert!(odd_high(&v).is_empty(), "the upper level is the common one");
        let v = m(&[("a", 2.0), ("b", 2.1), ("c", 7.0)]);
        assert_eq!(odd_high(&v).into_iter().collect::<Vec<_>>(), ["c"]);
        assert_eq!(split_levels(&m(&[("a", 1.0), ("b", 1.4)])), Default::default());
        assert_eq!(split_levels(&m(&[("a", 1.0)])), Default::default());
    }

    #[test]
    fn no_plain_on_demand_matches_the_embedded_flags() {
        for o in Catalog::embedded().offers() {
            assert_eq!(
                no_plain_on_demand(&o.machine_type),
                o.flags.contains(Flag::NoPlainOnDemand),
                "{}",
                o.id
            );
        }
        assert!(no_plain_on_demand("a4x-highgpu-4g"));
    }
}
