//! Cloud Billing SKUs reduced to a price book: USD per vCPU-hour, per GiB-hour and per
//! GPU-hour, by machine family or accelerator type, capacity and region.
//!
//! Rules (../shared/reference/gcp/billing.md §3–§6, with the DWS pitfall of §3 fixed):
//! * only `resourceFamily == "Compute"` and `usageType` `OnDemand` or `Preemptible`
//!   (commitments are other usage types);
//! * descriptions with `Commitment`, `Reserved`, `Sole Tenancy`, `Custom`, `Premium` or
//!   `suspended` are not list prices of a predefined machine and are dropped;
//! * capacity: `DWS Calendar Mode` → calendar, `DWS Defined Duration` / `DWS Flex Start` →
//!   flex-start, else `Preemptible` → Spot, else on-demand. So a DWS SKU is never taken for
//!   the on-demand price (SkyPilot's first-match does that; see the README's oddities);
//! * what is priced, from the description without its capacity prefix (`Spot Preemptible`,
//!   `DWS …`) and its `attached to …` / `running in …` tail:
//!   - `… (1 gpu slice)`: a whole-machine price per GPU (A4 B200: vCPUs and RAM included);
//!   - `… GPU`: a GPU, matched to accelerator types by its words (`Nvidia Tesla A100 80GB`
//!     = `nvidia-a100-80gb`; `H100 80GB Mega`/`Plus` = `nvidia-h100-mega-80gb`);
//!   - `<Series> [Predefined] Instance Core|Ram`: a machine family's vCPU or GiB (`A3`,
//!     `A3Plus`, `N1`, `G2`);
//! * the price is the first tier of the first pricing info, in USD; units must be `h`
//!   (cores, GPUs, slices) or `GiBy.h` (RAM); a price of 0 is no price;
//! * a price applies to every region in `serviceRegions`; when two SKUs give one key
//!   different prices, the first stays and the conflict is counted.

use crate::cloud::gcp::billing::Sku;
use std::collections::HashMap;

/// How an hour is bought.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Capacity {
    OnDemand,
    Spot,
    /// DWS flex-start (`DWS Defined Duration` SKUs).
    Flex,
    /// DWS calendar mode (future reservations); not an offer column.
    Calendar,
}

/// What a SKU prices.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Item {
    /// A vCPU of a machine family (`a3`, `a3plus`, `n1`).
    Core(String),
    /// A GiB of RAM of a machine family.
    Ram(String),
    /// A GPU, by [`gpu_key`].
    Gpu(String),
    /// A whole machine per GPU, by [`gpu_key`].
    Slice(String),
}

/// One SKU, understood.
#[derive(Debug, Clone, PartialEq)]
pub struct Priced {
    pub item: Item,
    pub capacity: Capacity,
    /// USD per hour, per vCPU / GiB / GPU.
    pub usd: f64,
}

/// Counts of what the SKUs gave, for the refresh report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BookStats {
    pub skus: usize,
    /// SKUs that gave a price.
    pub used: usize,
    /// (key, region) pairs two SKUs priced differently (the first was kept).
    pub conflicts: usize,
}

/// USD per unit by (item, capacity, region).
#[derive(Debug, Clone, Default)]
pub struct PriceBook {
    prices: HashMap<(Item, Capacity, String), f64>,
    pub stats: BookStats,
}

impl PriceBook {
    pub fn add_skus(&mut self, skus: &[Sku]) {
        for s in skus {
            self.add_sku(s);
        }
    }

    pub fn add_sku(&mut self, sku: &Sku) {
        self.stats.skus += 1;
        let Some(p) = classify(sku) else { return };
        self.stats.used += 1;
        for region in &sku.service_regions {
            let key = (p.item.clone(), p.capacity, region.clone());
            match self.prices.get(&key) {
                Some(old) if (old - p.usd).abs() > 1e-9 => self.stats.conflicts += 1,
                Some(_) => {}
                None => {
                    self.prices.insert(key, p.usd);
                }
            }
        }
    }

    pub fn get(&self, item: &Item, capacity: Capacity, region: &str) -> Option<f64> {
        self.prices
            .get(&(item.clone(), capacity, region.to_string()))
            .copied()
    }

    pub fn is_empty(&self) -> bool {
        self.prices.is_empty()
    }

    /// USD per vCPU-hour for a machine type, from its most specific family that has a price
    /// (see [`families`]).
    pub fn core(&self, machine_type: &str, capacity: Capacity, region: &str) -> Option<f64> {
        families(machine_type)
            .into_iter()
            .find_map(|f| self.get(&Item::Core(f), capacity, region))
    }

    /// USD per GiB-hour, like [`PriceBook::core`].
    pub fn ram(&self, machine_type: &str, capacity: Capacity, region: &str) -> Option<f64> {
        families(machine_type)
            .into_iter()
            .find_map(|f| self.get(&Item::Ram(f), capacity, region))
    }

    /// USD per GPU-hour of an accelerator type (`nvidia-h100-80gb`).
    pub fn gpu(&self, accelerator_type: &str, capacity: Capacity, region: &str) -> Option<f64> {
        self.get(&Item::Gpu(gpu_key(accelerator_type)), capacity, region)
    }

    /// USD per GPU-hour of a whole machine sold by the GPU slice.
    pub fn slice(&self, accelerator_type: &str, capacity: Capacity, region: &str) -> Option<f64> {
        self.get(&Item::Slice(gpu_key(accelerator_type)), capacity, region)
    }
}

/// The billing families a machine type's cores and RAM may be priced under, most specific
/// first: `a3-megagpu-8g` → `a3plus`, `a3mega`, `a3`; `a3-ultragpu-8g` → `a3ultra`, `a3`;
/// `n1-highmem-8` → `n1highmem`, `n1`. Falling back to the series (`a3`) is what SkyPilot
/// does for every A3 type.
pub fn families(machine_type: &str) -> Vec<String> {
    let mut parts = machine_type.split('-');
    let series = parts.next().unwrap_or("").to_ascii_lowercase();
    let variant = parts.next().unwrap_or("").to_ascii_lowercase();
    let stem = variant.strip_suffix("gpu").unwrap_or(&variant);
    let mut out = Vec::new();
    if stem == "mega" {
        out.push(format!("{series}plus"));
    }
    if !stem.is_empty() {
        out.push(format!("{series}{stem}"));
    }
    out.push(series);
    out
}

/// The words of a GPU name, order-free: `nvidia-h100-mega-80gb`, `Nvidia H100 80GB Mega` and
/// `H100 80GB Plus` all give `80gb-h100-mega-nvidia`. `tesla` is dropped (`nvidia-tesla-a100`
/// = `Nvidia A100`), `plus` is `mega`, and `nvidia` is added when missing.
pub fn gpu_key(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    let mut words: Vec<&str> = lower
        .split(|c: char| c == '-' || c == '_' || c.is_whitespace())
        .filter(|w| !w.is_empty() && *w != "tesla")
        .map(|w| if w == "plus" { "mega" } else { w })
        .collect();
    if !words.contains(&"nvidia") {
        words.push("nvidia");
    }
    words.sort_unstable();
    words.dedup();
    words.join("-")
}

const DROP: [&str; 6] = [
    "commitment",
    "reserved",
    "sole tenancy",
    "custom",
    "premium",
    "suspended",
];

const PREFIXES: [&str; 6] = [
    "spot preemptible ",
    "preemptible ",
    "dws calendar mode ",
    "dws defined duration ",
    "dws flex start ",
    "flex start ",
];

/// What a SKU prices, or `None` when it is not a list price of a GPU machine's part.
pub fn classify(sku: &Sku) -> Option<Priced> {
    if sku.category.resource_family != "Compute" {
        return None;
    }
    let preemptible = match sku.category.usage_type.as_str() {
        "OnDemand" => false,
        "Preemptible" => true,
        _ => return None,
    };
    let d = sku.description.to_ascii_lowercase();
    if DROP.iter().any(|w| d.contains(w)) {
        return None;
    }
    let capacity = if d.contains("dws calendar mode") {
        Capacity::Calendar
    } else if d.contains("dws defined duration") || d.contains("dws flex start") || d.contains("flex start") {
        Capacity::Flex
    } else if preemptible {
        Capacity::Spot
    } else {
        Capacity::OnDemand
    };
    let mut text = d.as_str();
    while let Some(rest) = PREFIXES.iter().find_map(|p| text.strip_prefix(p)) {
        text = rest;
    }
    for tail in [" attached to ", " running in "] {
        if let Some(i) = text.find(tail) {
            text = &text[..i];
        }
    }
    let text = text.trim();
    let (price, unit) = sku.unit_price()?;
    if !(price.is_finite() && price > 0.0) {
        return None;
    }
    let item = if let Some(i) = text.find("(1 gpu slice)") {
        // `a4 nvidia b200 (1 gpu slice)`: the words from `nvidia` on name the GPU.
        let name = text[..i].trim();
        let name = name.find("nvidia").map_or(name, |j| &name[j..]);
        Item::Slice(gpu_key(name))
    } else if text.contains("rtx 6000") || text.contains("rtx pro 6000") {
        Item::Gpu(gpu_key("nvidia-rtx-pro-6000"))
    } else if let Some(name) = text.strip_suffix(" gpu") {
        Item::Gpu(gpu_key(name))
    } else if let Some(name) = text.strip_suffix(" core") {
        Item::Core(family(name)?)
    } else if let Some(name) = text.strip_suffix(" ram") {
        Item::Ram(family(name)?)
    } else {
        return None;
    };
    let unit_ok = match item {
        Item::Ram(_) => unit == "GiBy.h",
        _ => unit == "h",
    };
    unit_ok.then_some(Priced {
        item,
        capacity,
        usd: price,
    })
}

/// `a3 instance` → `a3`; `n1 predefined instance` → `n1`; `a3plus instance` → `a3plus`;
/// `a3 ultra instance` → `a3ultra`. `None` for names that are not a series.
fn family(name: &str) -> Option<String> {
    let words: Vec<&str> = name
        .split_whitespace()
        .filter(|w| *w != "instance" && *w != "predefined" && *w != "vm")
        .collect();
    let f = words.concat();
    let ok = f.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && f.chars().all(|c| c.is_ascii_alphanumeric())
        && f.chars().any(|c| c.is_ascii_digit());
    ok.then_some(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloud::gcp::billing::{Category, Money, PricingExpression, PricingInfo, TierRate};

    fn sku(desc: &str, group: &str, usage: &str, unit: &str, usd: f64, regions: &[&str]) -> Sku {
        Sku {
            sku_id: "X".into(),
            description: desc.into(),
            category: Category {
                service_display_name: "Compute Engine".into(),
                resource_family: "Compute".into(),
                resource_group: group.into(),
                usage_type: usage.into(),
            },
            service_regions: regions.iter().map(|r| r.to_string()).collect(),
            pricing_info: vec![PricingInfo {
                effective_time: String::new(),
                pricing_expression: PricingExpression {
                    usage_unit: unit.into(),
                    tiered_rates: vec![TierRate {
                        start_usage_amount: 0.0,
                        unit_price: Money {
                            currency_code: "USD".into(),
                            units: usd.trunc() as i64,
                            nanos: ((usd - usd.trunc()) * 1e9).round() as i32,
                        },
                    }],
                },
            }],
        }
    }

    #[test]
    fn classify_descriptions() {
        let gpu = |k: &str| Some(Item::Gpu(gpu_key(k)));
        // (description, resource group, usage type, unit, what it prices, capacity)
        type Case<'a> = (&'a str, &'a str, &'a str, &'a str, Option<Item>, Capacity);
        let cases: &[Case] = &[
            (
                "Nvidia H100 80GB GPU running in Americas",
                "GPU",
                "OnDemand",
                "h",
                gpu("nvidia-h100-80gb"),
                Capacity::OnDemand,
            ),
            (
                "Nvidia H100 80GB GPU attached to Spot Preemptible VMs running in Americas",
                "GPU",
                "Preemptible",
                "h",
                gpu("nvidia-h100-80gb"),
                Capacity::Spot,
            ),
            (
                "Spot Preemptible Nvidia L4 GPU running in Iowa",
                "GPU",
                "Preemptible",
                "h",
                gpu("nvidia-l4"),
                Capacity::Spot,
            ),
            (
                "Nvidia Tesla A100 80GB GPU running in Americas",
                "GPU",
                "OnDemand",
                "h",
                gpu("nvidia-a100-80gb"),
                Capacity::OnDemand,
            ),
            (
                "Nvidia Tesla A100 GPU running in Americas",
                "GPU",
                "OnDemand",
                "h",
                gpu("nvidia-tesla-a100"),
                Capacity::OnDemand,
            ),
            (
                "Nvidia H100 80GB Plus GPU running in Americas",
                "GPU",
                "OnDemand",
                "h",
                gpu("nvidia-h100-mega-80gb"),
                Capacity::OnDemand,
            ),
            (
                "Nvidia Tesla A100 GPU attached to DWS Defined Duration VMs running in Americas",
                "GPU",
                "OnDemand",
                "h",
                gpu("nvidia-tesla-a100"),
                Capacity::Flex,
            ),
            (
                "Spot Preemptible A4 Nvidia B200 (1 gpu slice) running in Americas",
                "GPU",
                "Preemptible",
                "h",
                Some(Item::Slice(gpu_key("nvidia-b200"))),
                Capacity::Spot,
            ),
            (
                "DWS Calendar Mode A4 Nvidia B200 (1 gpu slice) running in Americas",
                "GPU",
                "OnDemand",
                "h",
                Some(Item::Slice(gpu_key("nvidia-b200"))),
                Capacity::Calendar,
            ),
            (
                "A3 Instance Core running in Americas",
                "CPU",
                "OnDemand",
                "h",
                Some(Item::Core("a3".into())),
                Capacity::OnDemand,
            ),
            (
                "Spot Preemptible A3Plus Instance Ram running in Americas",
                "RAM",
                "Preemptible",
                "GiBy.h",
                Some(Item::Ram("a3plus".into())),
                Capacity::Spot,
            ),
            (
                "N1 Predefined Instance Core running in Americas",
                "N1Standard",
                "OnDemand",
                "h",
                Some(Item::Core("n1".into())),
                Capacity::OnDemand,
            ),
            (
                "G2 Instance Ram running in Americas",
                "RAM",
                "OnDemand",
                "GiBy.h",
                Some(Item::Ram("g2".into())),
                Capacity::OnDemand,
            ),
            // Dropped.
            (
                "Commitment v1: A3 Cpu in Americas for 1 Year",
                "CPU",
                "Commit1Yr",
                "h",
                None,
                Capacity::OnDemand,
            ),
            (
                "Custom Instance Core running in Americas",
                "CPU",
                "OnDemand",
                "h",
                None,
                Capacity::OnDemand,
            ),
            (
                "Sole Tenancy Instance Core running in Americas",
                "CPU",
                "OnDemand",
                "h",
                None,
                Capacity::OnDemand,
            ),
            (
                "G2 Instance Ram running in Americas",
                "RAM",
                "OnDemand",
                "GiBy.mo",
                None,
                Capacity::OnDemand,
            ),
            (
                "Network Internet Egress",
                "PremiumInternetEgress",
                "OnDemand",
                "GiBy",
                None,
                Capacity::OnDemand,
            ),
        ];
        for (desc, group, usage, unit, item, cap) in cases {
            let got = classify(&sku(desc, group, usage, unit, 1.25, &["us-central1"]));
            match item {
                Some(i) => {
                    let p = got.unwrap_or_else(|| panic!("{desc}: not classified"));
                    assert_eq!((&p.item, p.capacity, p.usd), (i, *cap, 1.25), "{desc}");
                }
                None => assert_eq!(got, None, "{desc}"),
            }
        }
        let mut storage = sku(
            "SSD backed Local Storage",
            "LocalSSD",
            "OnDemand",
            "GiBy.mo",
            0.08,
            &["x"],
        );
        storage.category.resource_family = "Storage".into();
        assert_eq!(classify(&storage), None);
        assert_eq!(
            classify(&sku("A3 Instance Core", "CPU", "OnDemand", "h", 0.0, &["x"])),
            None,
            "0 is no price"
        );
    }

    #[test]
    fn gpu_keys_and_families() {
        assert_eq!(gpu_key("nvidia-h100-mega-80gb"), gpu_key("Nvidia H100 80GB Mega"));
        assert_eq!(gpu_key("nvidia-h100-mega-80gb"), gpu_key("h100 80gb plus"));
        assert_ne!(gpu_key("nvidia-h100-80gb"), gpu_key("nvidia-h100-mega-80gb"));
        assert_eq!(gpu_key("nvidia-a100-80gb"), gpu_key("Nvidia Tesla A100 80GB"));
        assert_ne!(gpu_key("nvidia-tesla-a100"), gpu_key("nvidia-a100-80gb"));
        assert_eq!(families("a3-megagpu-8g"), ["a3plus", "a3mega", "a3"]);
        assert_eq!(families("a3-ultragpu-8g"), ["a3ultra", "a3"]);
        assert_eq!(families("n1-highmem-8"), ["n1highmem", "n1"]);
        assert_eq!(families("g2-standard-4"), ["g2standard", "g2"]);
    }

    #[test]
    fn book_by_region_with_fallback_and_conflicts() {
        let mut b = PriceBook::default();
        b.add_skus(&[
            sku(
                "A3 Instance Core running in Americas",
                "CPU",
                "OnDemand",
                "h",
                0.025,
                &["us-central1", "us-east4"],
            ),
            sku(
                "A3Plus Instance Core running in Americas",
                "CPU",
                "OnDemand",
                "h",
                0.03,
                &["us-central1"],
            ),
            sku(
                "Nvidia H100 80GB GPU running in Americas",
                "GPU",
                "OnDemand",
                "h",
                9.79,
                &["us-central1"],
            ),
            sku(
                "Nvidia H100 80GB GPU running in Iowa",
                "GPU",
                "OnDemand",
                "h",
                9.5,
                &["us-central1"],
            ),
            sku(
                "Nvidia H100 80GB GPU attached to DWS Defined Duration VMs",
                "GPU",
                "OnDemand",
                "h",
                4.2,
                &["us-central1"],
            ),
        ]);
        assert_eq!(
            b.core("a3-highgpu-8g", Capacity::OnDemand, "us-east4"),
            Some(0.025)
        );
        assert_eq!(
            b.core("a3-megagpu-8g", Capacity::OnDemand, "us-central1"),
            Some(0.03)
        );
        assert_eq!(
            b.core("a3-megagpu-8g", Capacity::OnDemand, "us-east4"),
            Some(0.025),
            "series fallback"
        );
        assert_eq!(b.core("a3-highgpu-8g", Capacity::Spot, "us-east4"), None);
        assert_eq!(
            b.gpu("nvidia-h100-80gb", Capacity::OnDemand, "us-central1"),
            Some(9.79),
            "first kept"
        );
        assert_eq!(
            b.gpu("nvidia-h100-80gb", Capacity::Flex, "us-central1"),
            Some(4.2)
        );
        assert_eq!(
            b.stats,
            BookStats {
                skus: 5,
                used: 5,
                conflicts: 1
            }
        );
    }
}
