//! Compute inventory + price book → offers, the way the embedded catalog is built
//! (`scripts/build_catalog.py`), from Google's own lists:
//!
//! * **Bundled GPUs** (A2, A3, A4, G2, ...): every machine type whose `accelerators` is not
//!   empty, in every usable zone. Price = vCPUs × core + GiB × RAM of its family + count ×
//!   the GPU's price, per capacity; or count × the slice price where the GPU is sold by the
//!   slice (A4: host included). A part without a price makes the total unknown.
//! * **Attached GPUs** (T4, V100, P100, P4 on N1): accelerator types no machine type bundles,
//!   in counts 1, 2, 4, … up to `maximumCardsPerInstance`, on the smallest
//!   n1-standard/highmem/highcpu of the zone with SkyPilot's vCPUs for that count and ≥ 4 GiB
//!   per vCPU (the script's `n1_host`). The N1 host price comes from the `N1 Predefined`
//!   SKUs, which the embedded catalog lacks.
//! * Facts the APIs do not give (GPU model name and memory, network bandwidth, GPUDirect
//!   flavour, NIC layout) come from the embedded catalog for the types it knows
//!   ([`Knowledge`]); for a type it does not know: the model from the accelerator name, the
//!   memory from an `NNgb` suffix, no GPUDirect, one NIC, bandwidth unknown.
//! * Prices are rounded to 5 decimals like the embedded catalog; unknown stays `None`.

use super::prices::{Capacity, PriceBook};
use crate::catalog::model::{GpuDirect, NicLayout, Offer};
use crate::catalog::Catalog;
use crate::cloud::gcp::compute::{region_of_zone, AcceleratorType, ByZone, MachineType, Zone};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// What Compute says exists.
#[derive(Debug, Clone, Default)]
pub struct Inventory {
    pub zones: Vec<Zone>,
    pub machine_types: ByZone<MachineType>,
    pub accelerator_types: ByZone<AcceleratorType>,
}

/// Per-type facts the APIs do not give, taken from a catalog (the embedded one).
#[derive(Debug, Clone, Default)]
pub struct Knowledge {
    /// accelerator type → (GPU model, memory per GPU in GB).
    gpus: HashMap<String, (String, Option<u32>)>,
    /// machine type → (network Gbps, GPUDirect, NICs).
    machines: HashMap<String, (Option<u32>, GpuDirect, NicLayout)>,
}

impl Knowledge {
    pub fn from_catalog(c: &Catalog) -> Knowledge {
        let mut k = Knowledge::default();
        for o in c.offers() {
            k.gpus
                .entry(o.accelerator_type.clone())
                .or_insert_with(|| (o.gpu.clone(), o.gpu_memory_gb));
            if !o.gpus_attached {
                k.machines
                    .entry(o.machine_type.clone())
                    .or_insert((o.network_gbps, o.gpudirect, o.nics));
            }
        }
        k
    }

    fn gpu(&self, accelerator_type: &str) -> (String, Option<u32>) {
        match self.gpus.get(accelerator_type) {
            Some(g) => g.clone(),
            None => (model_of(accelerator_type), memory_of(accelerator_type)),
        }
    }

    fn machine(&self, machine_type: &str) -> (Option<u32>, GpuDirect, NicLayout) {
        self.machines.get(machine_type).copied().unwrap_or(SINGLE_NIC)
    }
}

const SINGLE_NIC: (Option<u32>, GpuDirect, NicLayout) = (
    None,
    GpuDirect::None,
    NicLayout {
        host_nics: 1,
        gpu_nics: 0,
        gpu_nic_type: None,
    },
);

/// `nvidia-tesla-t4` → `T4`; `nvidia-h100-mega-80gb` → `H100-MEGA`; `nvidia-rtx-pro-6000` →
/// `RTX-PRO-6000`.
pub fn model_of(accelerator_type: &str) -> String {
    let s = accelerator_type
        .strip_prefix("nvidia-")
        .unwrap_or(accelerator_type);
    let s = s.strip_prefix("tesla-").unwrap_or(s);
    let words: Vec<&str> = s.split('-').filter(|w| memory_word(w).is_none()).collect();
    words.join("-").to_ascii_uppercase()
}

/// `80gb` → 80.
fn memory_word(w: &str) -> Option<u32> {
    w.strip_suffix("gb").and_then(|n| n.parse().ok())
}

/// The `NNgb` word of an accelerator type.
pub fn memory_of(accelerator_type: &str) -> Option<u32> {
    accelerator_type.split('-').find_map(memory_word)
}

/// SkyPilot's vCPUs for N1 hosts of attached GPUs (`_NUM_ACC_TO_NUM_CPU`), by GPU model;
/// counts not listed are not offered.
fn n1_vcpus(model: &str, count: u32) -> Option<u32> {
    let table: &[(u32, u32)] = match model {
        "V100" | "P100" => &[(1, 8), (2, 16), (4, 32), (8, 64)],
        "T4" => &[(1, 4), (2, 8), (4, 48)],
        _ => &[(1, 8), (2, 16), (4, 32), (8, 64), (16, 128)],
    };
    table.iter().find(|(n, _)| *n == count).map(|(_, c)| *c)
}

fn gib(m: &MachineType) -> f64 {
    m.memory_mb as f64 / 1024.0
}

fn price(x: Option<f64>) -> Option<f64> {
    x.map(|v| (v * 1e5).round() / 1e5)
        .filter(|v| v.is_finite() && *v > 0.0)
}

/// Offers and what could not be made into one.
#[derive(Debug, Clone, Default)]
pub struct Built {
    pub offers: Vec<Offer>,
    /// Offer ids priced by the GPU slice (for the flags).
    pub sliced: BTreeSet<String>,
    /// Zones left out as not usable (`DOWN`, deprecated).
    pub zones_down: Vec<String>,
}

pub fn build(inv: &Inventory, book: &PriceBook, know: &Knowledge) -> Built {
    let mut out = Built::default();
    let mut region: HashMap<&str, String> = HashMap::new();
    let mut down: BTreeSet<&str> = BTreeSet::new();
    for z in &inv.zones {
        if z.is_usable() {
            region.insert(z.name.as_str(), z.region_name());
        } else {
            down.insert(z.name.as_str());
        }
    }
    out.zones_down = down.iter().map(|z| z.to_string()).collect();
    let region_of = |zone: &str| -> String {
        region
            .get(zone)
            .cloned()
            .unwrap_or_else(|| region_of_zone(zone).to_string())
    };
    let usable_zone = |zone: &str| !down.contains(zone);

    // Bundled GPUs.
    let mut bundled: BTreeSet<&str> = BTreeSet::new();
    let mut n1: BTreeMap<&str, Vec<&MachineType>> = BTreeMap::new();
    for (zone, m) in &inv.machine_types.items {
        if !m.is_usable() || !usable_zone(zone) {
            continue;
        }
        if let Some(a) = m.accelerators.first() {
            bundled.insert(a.guest_accelerator_type.as_str());
            if a.guest_accelerator_count == 0 || m.guest_cpus == 0 {
                continue;
            }
            let r = region_of(zone);
            let (offer, sliced) = offer(
                know,
                book,
                m,
                &a.guest_accelerator_type,
                a.guest_accelerator_count,
                false,
                zone,
                &r,
            );
            if sliced {
                out.sliced.insert(offer.id.clone());
            }
            out.offers.push(offer);
        } else if is_n1_host(&m.name) {
            n1.entry(zone.as_str()).or_default().push(m);
        }
    }

    // Attached GPUs on N1 hosts.
    for (zone, a) in &inv.accelerator_types.items {
        if !a.is_usable()
            || !usable_zone(zone)
            || bundled.contains(a.name.as_str())
            || a.name.ends_with("-vws")
        {
            continue;
        }
        let Some(hosts) = n1.get(zone.as_str()) else {
            continue;
        };
        let (model, _) = know.gpu(&a.name);
        let r = region_of(zone);
        let mut count = 1;
        while count <= a.maximum_cards_per_instance {
            if let Some(cpus) = n1_vcpus(&model, count) {
                let host = hosts
                    .iter()
                    .filter(|h| h.guest_cpus >= cpus && gib(h) >= 4.0 * f64::from(cpus))
                    .min_by(|x, y| {
                        (x.guest_cpus, x.memory_mb, &x.name).cmp(&(y.guest_cpus, y.memory_mb, &y.name))
                    });
                if let Some(h) = host {
                    out.offers
                        .push(offer(know, book, h, &a.name, count, true, zone, &r).0);
                }
            }
            count *= 2;
        }
    }
    out.offers.sort_by(|a, b| {
        (&a.machine_type, &a.accelerator_type, a.gpu_count, &a.zone).cmp(&(
            &b.machine_type,
            &b.accelerator_type,
            b.gpu_count,
            &b.zone,
        ))
    });
    out.offers.dedup_by(|a, b| a.id == b.id);
    out
}

fn is_n1_host(name: &str) -> bool {
    ["n1-standard-", "n1-highmem-", "n1-highcpu-"]
        .iter()
        .any(|p| name.strip_prefix(p).is_some_and(|n| n.parse::<u32>().is_ok()))
}

/// One offer, and whether it is priced by the GPU slice.
#[allow(clippy::too_many_arguments)]
fn offer(
    know: &Knowledge,
    book: &PriceBook,
    m: &MachineType,
    accelerator_type: &str,
    count: u32,
    attached: bool,
    zone: &str,
    region: &str,
) -> (Offer, bool) {
    let (model, memory) = know.gpu(accelerator_type);
    let (gbps, gpudirect, nics) = if attached {
        SINGLE_NIC
    } else {
        know.machine(&m.name)
    };
    let n = f64::from(count);
    let host = |cap| -> Option<f64> {
        Some(
            book.core(&m.name, cap, region)? * f64::from(m.guest_cpus)
                + book.ram(&m.name, cap, region)? * gib(m),
        )
    };
    let gpu = |cap| book.gpu(accelerator_type, cap, region).map(|p| p * n);
    let slice = |cap| book.slice(accelerator_type, cap, region).map(|p| p * n);
    let mut sliced = false;
    let mut total = |cap| -> Option<f64> {
        if let Some(s) = slice(cap) {
            sliced = true;
            return Some(s);
        }
        Some(host(cap)? + gpu(cap)?)
    };
    let (on_demand, spot, flex) = (
        price(total(Capacity::OnDemand)),
        price(total(Capacity::Spot)),
        price(total(Capacity::Flex)),
    );
    let part = |p: Option<f64>, cap| if slice(cap).is_some() { None } else { price(p) };
    let o = Offer {
        id: Offer::make_id(&m.name, zone, attached.then_some((accelerator_type, count))),
        machine_type: m.name.clone(),
        gpu: model,
        accelerator_type: accelerator_type.to_string(),
        gpu_count: count,
        gpus_attached: attached,
        gpu_memory_gb: memory,
        vcpus: m.guest_cpus,
        ram_gb: gib(m).round() as u32,
        network_gbps: gbps,
        gpudirect,
        nics,
        region: region.to_string(),
        zone: zone.to_string(),
        on_demand,
        spot,
        flex,
        gpu_on_demand: part(gpu(Capacity::OnDemand), Capacity::OnDemand),
        gpu_spot: part(gpu(Capacity::Spot), Capacity::Spot),
        host_on_demand: part(host(Capacity::OnDemand), Capacity::OnDemand),
        host_spot: part(host(Capacity::Spot), Capacity::Spot),
        flags: Default::default(),
    };
    (o, sliced)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_memory_of_unknown_accelerators() {
        assert_eq!(model_of("nvidia-tesla-t4"), "T4");
        assert_eq!(model_of("nvidia-h100-mega-80gb"), "H100-MEGA");
        assert_eq!(model_of("nvidia-gb200"), "GB200");
        assert_eq!(memory_of("nvidia-h200-141gb"), Some(141));
        assert_eq!(memory_of("nvidia-b200"), None);
        let k = Knowledge::from_catalog(Catalog::embedded());
        assert_eq!(k.gpu("nvidia-h100-mega-80gb"), ("H100".to_string(), Some(80)));
        assert_eq!(k.gpu("nvidia-b200"), ("B200".to_string(), Some(180)));
        assert_eq!(k.machine("a3-megagpu-8g").1, GpuDirect::Tcpxo);
        assert_eq!(k.machine("a9-futuregpu-8g"), SINGLE_NIC);
        assert!(is_n1_host("n1-highmem-8") && !is_n1_host("n1-megamem-96x") && !is_n1_host("n2-standard-8"));
    }
}
