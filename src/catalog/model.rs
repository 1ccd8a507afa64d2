//! The offer model: one machine type with its GPUs, in one zone, with its prices.
//!
//! Every value that may be unknown is an `Option`: an unknown price is `None` here, `null`
//! in JSON and `?` in tables, never 0.

use serde::ser::SerializeSeq;
use serde::{Serialize, Serializer};
use std::fmt;

pub use crate::gpudirect::GpuDirect;

/// Which price an operator pays: on-demand, Spot, or flex-start (Dynamic Workload Scheduler).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Pricing {
    #[default]
    OnDemand,
    Spot,
    Flex,
}

impl Pricing {
    pub const ALL: [Pricing; 3] = [Pricing::OnDemand, Pricing::Spot, Pricing::Flex];

    /// `on-demand`, `spot`, `flex` (as on the command line and in JSON).
    pub fn name(self) -> &'static str {
        match self {
            Pricing::OnDemand => "on-demand",
            Pricing::Spot => "spot",
            Pricing::Flex => "flex",
        }
    }
}

impl fmt::Display for Pricing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A NIC type as the Compute Engine API spells it (`NetworkInterface.nicType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum NicType {
    #[serde(rename = "GVNIC")]
    Gvnic,
    #[serde(rename = "MRDMA")]
    Mrdma,
}

impl NicType {
    pub fn name(self) -> &'static str {
        match self {
            NicType::Gvnic => "GVNIC",
            NicType::Mrdma => "MRDMA",
        }
    }

    pub fn parse(s: &str) -> Option<NicType> {
        [NicType::Gvnic, NicType::Mrdma]
            .into_iter()
            .find(|n| n.name().eq_ignore_ascii_case(s))
    }
}

/// The NICs a machine type is created with: `host_nics` ordinary NICs (nic0 first), then
/// `gpu_nics` NICs dedicated to GPU-to-GPU traffic, each in its own VPC or subnet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct NicLayout {
    pub host_nics: u8,
    pub gpu_nics: u8,
    /// `None` when there are no GPU NICs.
    pub gpu_nic_type: Option<NicType>,
}

impl NicLayout {
    /// `1`, `1+4 GVNIC`, `2+8 MRDMA`.
    pub fn label(&self) -> String {
        match self.gpu_nic_type {
            Some(t) if self.gpu_nics > 0 => format!("{}+{} {}", self.host_nics, self.gpu_nics, t.name()),
            _ => self.host_nics.to_string(),
        }
    }
}

/// Something the catalog's data says about an offer that a buyer should know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flag {
    /// The host VM's price is not in the catalog; only the GPUs' part is known.
    HostPriceMissing,
    /// The catalog lists the machine type in this zone but has no GPU price there.
    GpuPriceMissing,
    /// The catalog has no Spot price for this offer's GPUs in this region.
    SpotPriceMissing,
    /// The on-demand price is on the lower of two price levels the catalog has.
    OnDemandLowLevel,
    /// The Spot price is on a level far above most regions.
    SpotHighLevel,
    /// The Spot price is higher than the on-demand price.
    SpotAboveOnDemand,
    /// Google does not sell this machine type plain on-demand.
    NoPlainOnDemand,
}

impl Flag {
    pub const ALL: [Flag; 7] = [
        Flag::HostPriceMissing,
        Flag::GpuPriceMissing,
        Flag::SpotPriceMissing,
        Flag::OnDemandLowLevel,
        Flag::SpotHighLevel,
        Flag::SpotAboveOnDemand,
        Flag::NoPlainOnDemand,
    ];

    /// The code in the data file and JSON.
    pub fn code(self) -> &'static str {
        match self {
            Flag::HostPriceMissing => "host_price_missing",
            Flag::GpuPriceMissing => "gpu_price_missing",
            Flag::SpotPriceMissing => "spot_price_missing",
            Flag::OnDemandLowLevel => "on_demand_low_level",
            Flag::SpotHighLevel => "spot_high_level",
            Flag::SpotAboveOnDemand => "spot_above_on_demand",
            Flag::NoPlainOnDemand => "no_plain_on_demand",
        }
    }

    /// A short tag for a table's notes column.
    pub fn tag(self) -> &'static str {
        match self {
            Flag::HostPriceMissing => "host?",
            Flag::GpuPriceMissing => "gpu?",
            Flag::SpotPriceMissing => "spot?",
            Flag::OnDemandLowLevel => "od-low",
            Flag::SpotHighLevel => "spot-high",
            Flag::SpotAboveOnDemand => "spot>od",
            Flag::NoPlainOnDemand => "no-od",
        }
    }

    /// One sentence for a footnote or a detail panel.
    pub fn description(self) -> &'static str {
        match self {
            Flag::HostPriceMissing => {
                "the host VM's price is not in the catalog (A4: GCP had no A4 SKU when it was \
                 built; N1 hosts of attached GPUs: not in its GPU subset), so the offer's \
                 price is unknown; the GPUs' part alone is known"
            }
            Flag::GpuPriceMissing => {
                "the catalog lists the machine type in this zone but has no GPU price there, \
                 so the offer's price is unknown"
            }
            Flag::SpotPriceMissing => "the catalog has no Spot price for these GPUs in this region",
            Flag::OnDemandLowLevel => {
                "the catalog has two on-demand price levels for this GPU or host and this one \
                 is the lower; its fetcher takes the first matching SKU, which can be a DWS or \
                 commitment SKU: check a live price"
            }
            Flag::SpotHighLevel => {
                "the Spot price is on a level far above most regions' (catalog says; check a \
                 live price)"
            }
            Flag::SpotAboveOnDemand => "the catalog's Spot price is higher than its on-demand price",
            Flag::NoPlainOnDemand => {
                "Google does not sell this machine type plain on-demand: reservations, \
                 flex-start or Spot (gpuhunt drops its on-demand offers)"
            }
        }
    }

    pub fn parse(code: &str) -> Option<Flag> {
        Flag::ALL.into_iter().find(|f| f.code() == code)
    }

    fn bit(self) -> u16 {
        1 << (self as u16)
    }
}

/// A set of [`Flag`]s; serialized as a list of codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Flags(u16);

impl Flags {
    pub fn insert(&mut self, f: Flag) {
        self.0 |= f.bit();
    }

    pub fn contains(self, f: Flag) -> bool {
        self.0 & f.bit() != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// In [`Flag::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = Flag> {
        Flag::ALL.into_iter().filter(move |f| self.contains(*f))
    }
}

impl FromIterator<Flag> for Flags {
    fn from_iter<I: IntoIterator<Item = Flag>>(iter: I) -> Self {
        let mut flags = Flags::default();
        for f in iter {
            flags.insert(f);
        }
        flags
    }
}

impl Serialize for Flags {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(None)?;
        for f in self.iter() {
            seq.serialize_element(f.code())?;
        }
        seq.end()
    }
}

/// One GPU offer: a machine type with its GPUs in one zone. Prices are USD per hour for the
/// whole machine (host and GPUs); `gpu_*` and `host_*` are the two parts where the source
/// prices them separately.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Offer {
    /// Stable id: `machine_type/zone`, or `machine_type+accelerator_typexN/zone` for GPUs
    /// attached to a general-purpose host (see [`Offer::make_id`]).
    pub id: String,
    /// GCE machine type, e.g. `a3-ultragpu-8g`, `n1-highmem-8`.
    pub machine_type: String,
    /// GPU model, e.g. `H100`, `H200`, `B200`, `A100`, `L4`.
    pub gpu: String,
    /// GCE accelerator type, e.g. `nvidia-h100-mega-80gb` (tells A100 40/80 GB and H100
    /// High/Mega apart).
    pub accelerator_type: String,
    pub gpu_count: u32,
    /// The GPUs are attached to a general-purpose host (`guestAccelerators`, N1) rather than
    /// bundled with the machine type.
    pub gpus_attached: bool,
    /// Memory per GPU.
    pub gpu_memory_gb: Option<u32>,
    pub vcpus: u32,
    /// Host memory as GCE reports it (`memoryMb / 1024`).
    pub ram_gb: u32,
    /// Maximum network bandwidth of the machine type, all NICs together.
    pub network_gbps: Option<u32>,
    pub gpudirect: GpuDirect,
    pub nics: NicLayout,
    pub region: String,
    pub zone: String,
    pub on_demand: Option<f64>,
    pub spot: Option<f64>,
    pub flex: Option<f64>,
    pub gpu_on_demand: Option<f64>,
    pub gpu_spot: Option<f64>,
    pub host_on_demand: Option<f64>,
    pub host_spot: Option<f64>,
    pub flags: Flags,
}

impl Offer {
    /// The id of an offer; `attached` names the accelerator type and count of GPUs attached
    /// to a general-purpose host, whose machine type alone does not tell offers apart.
    pub fn make_id(machine_type: &str, zone: &str, attached: Option<(&str, u32)>) -> String {
        match attached {
            Some((acc, n)) => format!("{machine_type}+{acc}x{n}/{zone}"),
            None => format!("{machine_type}/{zone}"),
        }
    }

    /// The machine's price per hour under `pricing`.
    pub fn price(&self, pricing: Pricing) -> Option<f64> {
        match pricing {
            Pricing::OnDemand => self.on_demand,
            Pricing::Spot => self.spot,
            Pricing::Flex => self.flex,
        }
    }

    /// The price per GPU-hour under `pricing`.
    pub fn price_per_gpu(&self, pricing: Pricing) -> Option<f64> {
        match self.price(pricing) {
            Some(p) if self.gpu_count > 0 => Some(p / f64::from(self.gpu_count)),
            _ => None,
        }
    }

    /// The GPUs' part of the price under `pricing`, where the source prices them separately.
    pub fn gpu_part(&self, pricing: Pricing) -> Option<f64> {
        match pricing {
            Pricing::OnDemand => self.gpu_on_demand,
            Pricing::Spot => self.gpu_spot,
            Pricing::Flex => None,
        }
    }

    /// `H100 80GB`, or the model alone when the memory is unknown.
    pub fn gpu_label(&self) -> String {
        match self.gpu_memory_gb {
            Some(m) => format!("{} {m}GB", self.gpu),
            None => self.gpu.clone(),
        }
    }

    /// The names a `gpu=` query term matches besides the model: the accelerator type
    /// (`nvidia-h100-mega-80gb`), without its vendor prefix (`h100-mega-80gb`,
    /// `t4` for `nvidia-tesla-t4`) and without its memory suffix (`h100-mega`, so SkyPilot's
    /// `H100-MEGA` and `A100-80GB` work too). Slices, no allocation.
    pub fn gpu_aliases(&self) -> [&str; 3] {
        let full = self.accelerator_type.as_str();
        let short = full.strip_prefix("nvidia-").unwrap_or(full);
        let short = short.strip_prefix("tesla-").unwrap_or(short);
        [full, short, strip_memory_suffix(short)]
    }
}

/// `h100-mega-80gb` -> `h100-mega`; `b200` stays.
fn strip_memory_suffix(s: &str) -> &str {
    if let Some(pos) = s.rfind('-') {
        let tail = &s.as_bytes()[pos + 1..];
        if tail.len() > 2 {
            let (digits, unit) = tail.split_at(tail.len() - 2);
            if unit.eq_ignore_ascii_case(b"gb") && digits.iter().all(u8::is_ascii_digit) {
                return &s[..pos];
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer() -> Offer {
        Offer {
            id: Offer::make_id("a3-megagpu-8g", "us-central1-a", None),
            machine_type: "a3-megagpu-8g".into(),
            gpu: "H100".into(),
            accelerator_type: "nvidia-h100-mega-80gb".into(),
            gpu_count: 8,
            gpus_attached: false,
            gpu_memory_gb: Some(80),
            vcpus: 208,
            ram_gb: 1872,
            network_gbps: Some(1800),
            gpudirect: GpuDirect::Tcpxo,
            nics: NicLayout {
                host_nics: 1,
                gpu_nics: 8,
                gpu_nic_type: Some(NicType::Gvnic),
            },
            region: "us-central1".into(),
            zone: "us-central1-a".into(),
            on_demand: Some(92.21427),
            spot: Some(21.20827),
            flex: None,
            gpu_on_demand: Some(82.75421),
            gpu_spot: Some(19.0328),
            host_on_demand: Some(9.46006),
            host_spot: Some(2.17547),
            flags: Flags::default(),
        }
    }

    #[test]
    fn prices_per_pricing_and_per_gpu() {
        let o = offer();
        let cases = [
            (
                Pricing::OnDemand,
                Some(92.21427),
                Some(92.21427 / 8.0),
                Some(82.75421),
            ),
            (Pricing::Spot, Some(21.20827), Some(21.20827 / 8.0), Some(19.0328)),
            (Pricing::Flex, None, None, None),
        ];
        for (pricing, price, per_gpu, part) in cases {
            assert_eq!(o.price(pricing), price, "{pricing}");
            assert_eq!(o.price_per_gpu(pricing), per_gpu, "{pricing}");
            assert_eq!(o.gpu_part(pricing), part, "{pricing}");
        }
        let mut none = offer();
        none.gpu_count = 0;
        assert_eq!(none.price_per_gpu(Pricing::OnDemand), None, "no division by zero");
    }

    #[test]
    fn ids_aliases_and_labels() {
        let o = offer();
        assert_eq!(o.id, "a3-megagpu-8g/us-central1-a");
        assert_eq!(
            Offer::make_id("n1-highmem-8", "us-central1-a", Some(("nvidia-tesla-t4", 2))),
            "n1-highmem-8+nvidia-tesla-t4x2/us-central1-a"
        );
        assert_eq!(
            o.gpu_aliases(),
            ["nvidia-h100-mega-80gb", "h100-mega-80gb", "h100-mega"]
        );
        let cases = [
            ("nvidia-tesla-t4", ["nvidia-tesla-t4", "t4", "t4"]),
            ("nvidia-a100-80gb", ["nvidia-a100-80gb", "a100-80gb", "a100"]),
            ("nvidia-b200", ["nvidia-b200", "b200", "b200"]),
            ("nvidia-h200-141gb", ["nvidia-h200-141gb", "h200-141gb", "h200"]),
            (
                "nvidia-rtx-pro-6000",
                ["nvidia-rtx-pro-6000", "rtx-pro-6000", "rtx-pro-6000"],
            ),
        ];
        for (acc, want) in cases {
            let mut x = offer();
            x.accelerator_type = acc.into();
            assert_eq!(x.gpu_aliases(), want, "{acc}");
        }
        assert_eq!(o.gpu_label(), "H100 80GB");
        assert_eq!(o.nics.label(), "1+8 GVNIC");
        let single = NicLayout {
            host_nics: 1,
            gpu_nics: 0,
            gpu_nic_type: None,
        };
        assert_eq!(single.label(), "1");
    }

    #[test]
    fn names_parse_back() {
        for g in GpuDirect::ALL {
            assert_eq!(GpuDirect::parse(g.name()), Some(g));
            assert_eq!(GpuDirect::parse(&g.name().to_uppercase()), Some(g));
        }
        assert_eq!(GpuDirect::parse("rdm"), None);
        for f in Flag::ALL {
            assert_eq!(Flag::parse(f.code()), Some(f));
        }
        assert_eq!(NicType::parse("mrdma"), Some(NicType::Mrdma));
    }

    #[test]
    fn flags_serialize_as_codes_in_order() {
        let flags: Flags = [Flag::NoPlainOnDemand, Flag::HostPriceMissing]
            .into_iter()
            .collect();
        assert!(flags.contains(Flag::HostPriceMissing) && !flags.contains(Flag::SpotHighLevel));
        assert_eq!(
            serde_json::to_string(&flags).unwrap(),
            r#"["host_price_missing","no_plain_on_demand"]"#
        );
        assert!(Flags::default().is_empty());
    }

    #[test]
    fn offer_json_uses_snake_case_and_null_for_unknown() {
        let v = serde_json::to_value(offer()).unwrap();
        assert_eq!(v["machine_type"], "a3-megagpu-8g");
        assert_eq!(v["gpudirect"], "tcpxo");
        assert_eq!(v["nics"]["gpu_nic_type"], "GVNIC");
        assert_eq!(v["on_demand"], 92.21427);
        assert!(v["flex"].is_null());
        assert_eq!(serde_json::to_value(Pricing::OnDemand).unwrap(), "on-demand");
    }
}
