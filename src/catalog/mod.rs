//! GPU offers on Google Cloud: the embedded catalog, the offer model, the filter language
//! and sorting. Pure: no I/O besides the embedded data file, no terminal.
//!
//! * [`Catalog`]: offers with the catalog's `source` and `as_of` date.
//!   [`Catalog::embedded`] parses `gcp_offers.csv` (made by `scripts/build_catalog.py` from
//!   `data/gcp-gpu-vms.source.csv`) once; a live refresh builds another with
//!   [`Catalog::new`].
//! * [`model::Offer`]: one machine type with its GPUs in one zone; unknown values are `None`.
//! * [`query::Query`]: `gpu=H100 gpus>=8 region=us-* spot<25 gpudirect=rdma`;
//!   [`Catalog::query`] parses and checks names against the catalog ("did you mean H100?").
//! * [`sort::sort`]: by any [`query::Field`], stable, unknown values last.
//! * [`Catalog::select`]: filter and sort in one call, as the view does per keystroke.

pub mod live;
mod load;
pub mod model;
pub mod query;
pub mod sort;

pub use load::{CatalogError, COLUMNS};
pub use model::{Flag, Flags, GpuDirect, NicLayout, NicType, Offer, Pricing};
pub use query::{Field, Filtered, Query, QueryError};
pub use sort::{group_zones, Direction, ZoneGroup};

use crate::yaml::closest;
use std::collections::{BTreeSet, HashMap};
use std::sync::OnceLock;

/// The catalog data file, embedded in the binary.
pub const EMBEDDED_DATA: &str = include_str!("gcp_offers.csv");

/// A set of offers and where they come from.
#[derive(Debug, Clone)]
pub struct Catalog {
    source: String,
    as_of: String,
    offers: Vec<Offer>,
    by_id: HashMap<String, usize>,
    /// Names a `gpu=` term may use, as shown in suggestions (models first).
    gpu_names: Vec<String>,
    gpu_models: Vec<String>,
    machines: BTreeSet<String>,
    regions: BTreeSet<String>,
    zones: BTreeSet<String>,
    /// The order of each of [`sort::TEXT_FIELDS`], as a rank per offer.
    text_ranks: Vec<Vec<u32>>,
}

impl Catalog {
    /// `source`: where the offers come from, in words; `as_of`: the date (`YYYY-MM-DD`) the
    /// prices were taken from it.
    pub fn new(source: impl Into<String>, as_of: impl Into<String>, offers: Vec<Offer>) -> Catalog {
        let by_id = offers
            .iter()
            .enumerate()
            .map(|(i, o)| (o.id.clone(), i))
            .collect();
        let mut models = BTreeSet::new();
        let mut aliases = BTreeSet::new();
        for o in &offers {
            models.insert(o.gpu.clone());
            let [full, short, bare] = o.gpu_aliases();
            aliases.insert(bare.to_ascii_uppercase());
            aliases.insert(short.to_ascii_uppercase());
            aliases.insert(full.to_string());
        }
        let gpu_models: Vec<String> = models.into_iter().collect();
        let mut gpu_names = gpu_models.clone();
        for a in aliases {
            if !gpu_names.iter().any(|n| n.eq_ignore_ascii_case(&a)) {
                gpu_names.push(a);
            }
        }
        Catalog {
            text_ranks: sort::TEXT_FIELDS
                .iter()
                .map(|f| sort::ranks(&offers, *f))
                .collect(),
            machines: offers.iter().map(|o| o.machine_type.clone()).collect(),
            regions: offers.iter().map(|o| o.region.clone()).collect(),
            zones: offers.iter().map(|o| o.zone.clone()).collect(),
            source: source.into(),
            as_of: as_of.into(),
            offers,
            by_id,
            gpu_names,
            gpu_models,
        }
    }

    /// The catalog built into the binary, parsed on first use.
    pub fn embedded() -> &'static Catalog {
        static CATALOG: OnceLock<Catalog> = OnceLock::new();
        CATALOG.get_or_init(|| {
            Catalog::parse(EMBEDDED_DATA).expect("the embedded catalog is checked by the catalog tests")
        })
    }

    /// Read a catalog data file (the format `scripts/build_catalog.py` writes).
    pub fn parse(text: &str) -> Result<Catalog, CatalogError> {
        let p = load::parse(text)?;
        Ok(Catalog::new(p.source, p.as_of, p.offers))
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn as_of(&self) -> &str {
        &self.as_of
    }

    pub fn offers(&self) -> &[Offer] {
        &self.offers
    }

    pub fn get(&self, id: &str) -> Option<&Offer> {
        self.position(id).map(|i| &self.offers[i])
    }

    /// The index of the offer with this id.
    pub fn position(&self, id: &str) -> Option<usize> {
        self.by_id.get(id).copied()
    }

    /// The GPU models, sorted: `A100`, `B200`, `H100`, ...
    pub fn gpu_models(&self) -> &[String] {
        &self.gpu_models
    }

    /// Parse a query and check its names against this catalog.
    pub fn query(&self, text: &str) -> Result<Query, QueryError> {
        let q = Query::parse(text)?;
        self.check(&q)?;
        Ok(q)
    }

    /// Check that every exact `gpu`, `machine`, `region` and `zone` value in the query names
    /// something in this catalog; otherwise point at it and suggest the nearest name.
    pub fn check(&self, q: &Query) -> Result<(), QueryError> {
        for t in q.name_terms() {
            let (what, known): (&str, Vec<&str>) = match t.field {
                Field::Gpu => ("GPU", self.gpu_names.iter().map(String::as_str).collect()),
                Field::Machine => ("machine type", self.machines.iter().map(String::as_str).collect()),
                Field::Region => ("region", self.regions.iter().map(String::as_str).collect()),
                Field::Zone => ("zone", self.zones.iter().map(String::as_str).collect()),
                _ => continue,
            };
            if known.iter().any(|k| k.eq_ignore_ascii_case(t.value)) {
                continue;
            }
            let hint = match closest(t.value, known.iter().copied()) {
                Some(s) => format!("did you mean {s}?"),
                None if t.field == Field::Gpu => format!("known GPUs: {}", self.gpu_models.join(", ")),
                None => format!("no {what} in the catalog is close; a `*` matches any text"),
            };
            return Err(QueryError {
                column: t.column,
                len: t.value.chars().count().max(1),
                message: format!("unknown {what} `{}`; {hint}", t.value),
            });
        }
        Ok(())
    }

    /// Sort `indices` (into [`Catalog::offers`]) by `field`: stable, unknown values last;
    /// `pricing` chooses what `price` and `gpuprice` mean.
    pub fn sort(&self, indices: &mut [usize], field: Field, dir: Direction, pricing: Pricing) {
        match sort::TEXT_FIELDS.iter().position(|f| *f == field) {
            Some(t) => {
                let ranks = &self.text_ranks[t];
                sort::sort_by_key(indices, dir, |i| Some(u64::from(ranks[i])));
            }
            None => sort::sort(&self.offers, indices, field, dir, pricing),
        }
    }

    /// Filter with `query` and sort by `order` (the first key decides, the next break
    /// ties; stable, unknown values last).
    pub fn select(&self, query: &Query, pricing: Pricing, order: &[(Field, Direction)]) -> Filtered {
        let mut f = query.filter(&self.offers, pricing);
        for (field, dir) in order.iter().rev() {
            self.sort(&mut f.indices, *field, *dir, pricing);
        }
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn embedded() -> &'static Catalog {
        Catalog::embedded()
    }

    #[test]
    fn the_embedded_catalog_parses_with_its_source_and_date() {
        let c = Catalog::parse(EMBEDDED_DATA).expect("embedded data file");
        assert_eq!(c.offers().len(), 911);
        assert!(
            c.source().contains("SkyPilot") && c.source().contains("017e2502"),
            "{}",
            c.source()
        );
        assert_eq!(c.as_of(), "2026-11-22");
        assert_eq!(
            c.gpu_models(),
            ["A100", "B200", "H100", "H200", "L4", "P100", "P4", "T4", "V100"]
        );
    }

    #[test]
    fn ids_are_unique_and_found() {
        let c = embedded();
        let ids: BTreeSet<&str> = c.offers().iter().map(|o| o.id.as_str()).collect();
        assert_eq!(ids.len(), c.offers().len());
        let o = c
            .get("a3-ultragpu-8g/us-central1-b")
            .expect("A3 Ultra in us-central1-b");
        assert_eq!(o.gpu, "H200");
        assert!(c.get("n1-highmem-8+nvidia-tesla-t4x2/us-central1-a").is_some());
        assert_eq!(c.get("a3-ultragpu-8g/mars-north1-a"), None);
    }

    #[test]
    fn known_values_from_the_source() {
        let c = embedded();
        // (id, on-demand, spot): host + GPU rows of the source, added.
        let cases: &[(&str, Option<f64>, Option<f64>)] = &[
            // The reference README's worked example: 0.73948 + 2.93391, 0.29576 + 1.1472.
            ("a2-highgpu-1g/us-central1-a", Some(3.67339), Some(1.44296)),
            ("a3-highgpu-8g/us-east4-a", Some(87.83247), Some(15.80912)),
            // SkyPilot's docs print $92.214 / $21.208 for this one.
            ("a3-megagpu-8g/us-central1-a", Some(92.21427), Some(21.20827)),
            ("a3-ultragpu-8g/us-central1-b", Some(86.75992), Some(32.61871)),
            // 3.52301 + 4.48032, 1.40966 + 1.7848.
            ("g2-standard-96/us-central1-a", Some(8.00333), Some(3.19446)),
            // No A4 host row: unknown, never 0.
            ("a4-highgpu-8g/us-central1-b", None, None),
            // No N1 host rows.
            ("n1-highmem-8+nvidia-tesla-v100x1/us-central1-a", None, None),
        ];
        for (id, od, spot) in cases {
            let o = c.get(id).unwrap_or_else(|| panic!("{id} missing"));
            assert_eq!((o.on_demand, o.spot), (*od, *spot), "{id}");
            assert_eq!(o.flex, None, "{id}: the source has no flex-start prices");
        }
        let a4 = c.get("a4-highgpu-8g/us-central1-b").unwrap();
        assert_eq!((a4.gpu_on_demand, a4.gpu_spot), (Some(90.216), None));
        assert!(a4.flags.contains(Flag::HostPriceMissing) && a4.flags.contains(Flag::SpotPriceMissing));
        assert_eq!((a4.vcpus, a4.ram_gb, a4.gpu_memory_gb), (224, 3968, Some(180)));
        assert_eq!(
            (a4.gpudirect, a4.network_gbps, a4.nics.label()),
            (GpuDirect::Rdma, Some(3600), "2+8 MRDMA".to_string())
        );
        let t4 = c.get("n1-highmem-8+nvidia-tesla-t4x2/us-central1-a").unwrap();
        assert_eq!(
            (t4.vcpus, t4.ram_gb, t4.gpus_attached, t4.network_gbps),
            (8, 52, true, None)
        );
    }

    #[test]
    fn every_price_is_positive_or_unknown_and_adds_up() {
        for o in embedded().offers() {
            let all = [
                o.on_demand,
                o.spot,
                o.flex,
                o.gpu_on_demand,
                o.gpu_spot,
                o.host_on_demand,
                o.host_spot,
            ];
            for p in all.into_iter().flatten() {
                assert!(p > 0.0 && p.is_finite(), "{}: {p}", o.id);
            }
            for (total, gpu, host) in [
                (o.on_demand, o.gpu_on_demand, o.host_on_demand),
                (o.spot, o.gpu_spot, o.host_spot),
            ] {
                match (gpu, host) {
                    (Some(g), Some(h)) => {
                        let t = total.unwrap_or_else(|| panic!("{}: parts known, total not", o.id));
                        assert!((t - (g + h)).abs() < 1e-4, "{}: {t} != {g} + {h}", o.id);
                    }
                    _ => assert_eq!(total, None, "{}: a part is unknown, so is the total", o.id),
                }
            }
            assert_eq!(
                o.flags.contains(Flag::HostPriceMissing),
                o.host_on_demand.is_none(),
                "{}",
                o.id
            );
        }
    }

    #[test]
    fn the_research_notes_oddities_are_flagged() {
        let c = embedded();
        let flagged = |id: &str, f: Flag| c.get(id).unwrap_or_else(|| panic!("{id}")).flags.contains(f);
        // H100 at 4.20076 $/GPU-h in us-central1 vs ~9.8-12.7 elsewhere.
        assert!(flagged("a3-highgpu-8g/us-central1-a", Flag::OnDemandLowLevel));
        assert!(!flagged("a3-highgpu-8g/us-east4-a", Flag::OnDemandLowLevel));
        // H100 spot above on-demand in asia-northeast1.
        assert!(flagged(
            "a3-highgpu-8g/asia-northeast1-b",
            Flag::SpotAboveOnDemand
        ));
        // H200 at two levels (36.60 vs 74.49 per 8 GPUs).
        assert!(flagged("a3-ultragpu-8g/europe-west4-a", Flag::OnDemandLowLevel));
        assert!(!flagged("a3-ultragpu-8g/us-central1-b", Flag::OnDemandLowLevel));
        // Not sold plain on-demand.
        assert!(flagged("a3-ultragpu-8g/us-central1-b", Flag::NoPlainOnDemand));
        assert!(!flagged("a3-megagpu-8g/us-central1-a", Flag::NoPlainOnDemand));
        let flagged_offers = c.offers().iter().filter(|o| !o.flags.is_empty()).count();
        assert!(flagged_offers < c.offers().len(), "not everything is odd");
    }

    #[test]
    fn query_checks_names_and_suggests() {
        let c = embedded();
        let cases: &[(&str, usize, usize, &str)] = &[
            ("gpu=H10", 5, 3, "unknown GPU `H10`; did you mean H100?"),
            ("gpus>=8 gpu=b20", 13, 3, "unknown GPU `b20`; did you mean B200?"),
            ("gpu=H100-MEGAA", 5, 10, "did you mean H100-MEGA?"),
            (
                "gpu=xyzzy",
                5,
                5,
                "unknown GPU `xyzzy`; known GPUs: A100, B200, H100, H200, L4, P100, P4, T4, V100",
            ),
            (
                "region=us-centrl1",
                8,
                10,
                "unknown region `us-centrl1`; did you mean us-central1?",
            ),
            (
                "zone=us-central1-z",
                6,
                13,
                "unknown zone `us-central1-z`; did you mean us-central1-",
            ),
            ("machine=a3-ultragpu-8", 9, 13, "did you mean a3-ultragpu-8g?"),
            ("region=atlantis", 8, 8, "no region in the catalog is close"),
        ];
        for (q, column, len, msg) in cases {
            let e = c.query(q).expect_err(q);
            assert!(e.message.contains(msg), "`{q}`: {}", e.message);
            assert_eq!((e.column, e.len), (*column, *len), "`{q}`");
        }
        for ok in [
            "gpu=H100",
            "gpu=h200",
            "gpu=H100-MEGA",
            "gpu=A100-80GB",
            "gpu=nvidia-b200",
            "gpu=T4",
            "gpu=Z*",
            "region=us-*",
            "zone=US-CENTRAL1-A",
            "machine=A3-ULTRAGPU-8G",
        ] {
            c.query(ok).unwrap_or_else(|e| panic!("`{ok}`: {e}"));
        }
    }

    #[test]
    fn catalog_sort_from_ranks_matches_the_plain_sort() {
        let c = embedded();
        for field in Field::ALL {
            for dir in [Direction::Ascending, Direction::Descending] {
                let mut fast: Vec<usize> = (0..c.offers().len()).rev().collect();
                let mut plain = fast.clone();
                c.sort(&mut fast, field, dir, Pricing::Spot);
                sort::sort(c.offers(), &mut plain, field, dir, Pricing::Spot);
                assert_eq!(fast, plain, "{field} {dir:?}");
            }
        }
    }

    #[test]
    fn select_filters_and_sorts_the_done_when_queries() {
        let c = embedded();
        let q = c.query("gpu=H200").unwrap();
        let f = c.select(&q, Pricing::OnDemand, &[(Field::Price, Direction::Ascending)]);
        assert_eq!(f.indices.len(), 18, "9 zones, with and without local SSD");
        assert!(f
            .indices
            .iter()
            .all(|&i| c.offers()[i].machine_type.starts_with("a3-ultragpu-8g")));
        let prices: Vec<f64> = f
            .indices
            .iter()
            .filter_map(|&i| c.offers()[i].on_demand)
            .collect();
        assert_eq!(prices.len(), 18);
        assert!(prices.windows(2).all(|w| w[0] <= w[1]), "{prices:?}");

        let q = c.query("gpu=B200").unwrap();
        let f = c.select(&q, Pricing::Spot, &[(Field::GpuPrice, Direction::Ascending)]);
        assert_eq!(f.indices.len(), 9);
        assert!(f
            .indices
            .iter()
            .all(|&i| c.offers()[i].machine_type == "a4-highgpu-8g" && c.offers()[i].spot.is_none()));

        let q = c.query("gpu=B200 spot<100").unwrap();
        let f = c.select(&q, Pricing::Spot, &[]);
        assert_eq!(
            (f.indices.len(), f.unknown),
            (0, 9),
            "every B200 spot price is unknown"
        );
        assert_eq!(f.unknown_fields.iter().collect::<Vec<_>>(), [Field::Spot]);

        let q = c.query("gpus>=8 gpudirect=rdma region=us-*").unwrap();
        let f = c.select(&q, Pricing::Spot, &[(Field::Price, Direction::Ascending)]);
        let first = &c.offers()[f.indices[0]];
        assert_eq!(first.gpu, "H200");
        assert!(f.indices.iter().all(|&i| c.offers()[i].region.starts_with("us-")));
    }
}
