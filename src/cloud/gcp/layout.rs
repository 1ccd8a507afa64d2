//! What each GPU machine type needs, as pure functions: its GPUDirect flavour, NIC layout,
//! boot image and disk type (compute-api.md §1, §6).
//!
//! | machine type                   | flavour | NICs (nic0 first)                          |
//! |--------------------------------|---------|--------------------------------------------|
//! | a3-highgpu-8g, a3-edgegpu-8g   | TCPX    | 1 gVNIC + 4 gVNIC data VPCs (MTU 8244)     |
//! | a3-megagpu-8g                  | TCPXO   | 1 gVNIC + 8 gVNIC data VPCs (MTU 8244)     |
//! | a3-ultragpu-8g, a4-highgpu-8g  | RDMA    | 2 gVNIC (2nd VPC MTU 8896) + 8 MRDMA, RoCE |
//! | a2-*, g2-*, n1-* (+GPUs)       | none    | 1                                          |
//!
//! `gpudirect: none` keeps only nic0.

use crate::catalog::GpuDirect;

/// MTU of the gVNIC data VPCs of TCPX / TCPXO (SKY, DST, CTK A3 blueprints).
pub const DATA_MTU: u32 = 8244;
/// MTU of A3 Ultra / A4's second host VPC and of RoCE VPCs (CTK).
pub const RDMA_MTU: u32 = 8896;

/// One NIC of an instance, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum NicRole {
    /// nic0: SSH, control traffic, the external IP.
    Primary,
    /// A gVNIC in data VPC `n` (1-based): TCPX/TCPXO data, or A3 Ultra / A4's second host NIC.
    Data(u8),
    /// An MRDMA NIC in subnet `n` (0-based) of the RoCE VPC.
    Rdma(u8),
}

/// What a machine type is created with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineProfile {
    pub flavour: GpuDirect,
    /// gVNIC data VPCs beyond nic0 (4, 8, 1 for RDMA's second host NIC).
    pub data_nics: u8,
    /// MRDMA NICs on the RoCE VPC.
    pub rdma_nics: u8,
    /// nic0 needs `nicType: GVNIC` (A3, A4).
    pub gvnic: bool,
    pub image: &'static str,
    pub disk_type: &'static str,
}

/// Ubuntu with NVIDIA's driver, from Google's accelerator image project (CTK blueprints).
pub const UBUNTU_ACCELERATOR: &str =
    "projects/ubuntu-os-accelerator-images/global/images/family/ubuntu-accelerator-2204-amd64-with-nvidia-580";
/// The same on 24.04 (CTK's A3 Mega base image).
pub const UBUNTU_ACCELERATOR_2404: &str =
    "projects/ubuntu-os-accelerator-images/global/images/family/ubuntu-accelerator-2404-amd64-with-nvidia-580";
/// Container-Optimized OS with `cos-extensions install gpu` for GPUDirect-TCPX: the
/// `cos-105-lts` family of Google's TCPX guide, so that a new fleet gets the family's
/// newest build rather than a pinned one that is deprecated under it (dstack and
/// SkyPilot pin `cos-105-17412-535-78`).
pub const COS_TCPX: &str = "projects/cos-cloud/global/images/family/cos-105-lts";

/// The machine type whose layout a type has: `-nolssd` variants (A3 Edge, A3 Ultra
/// without local SSD) have their base type's NICs, GPUs and disk.
pub fn base_type(machine_type: &str) -> &str {
    machine_type.strip_suffix("-nolssd").unwrap_or(machine_type)
}

/// The GPUDirect flavour a machine type supports.
pub fn flavour(machine_type: &str) -> GpuDirect {
    match base_type(machine_type) {
        "a3-highgpu-8g" | "a3-edgegpu-8g" => GpuDirect::Tcpx,
        "a3-megagpu-8g" => GpuDirect::Tcpxo,
        "a3-ultragpu-8g" | "a4-highgpu-8g" => GpuDirect::Rdma,
        _ => GpuDirect::None,
    }
}

/// The profile of a machine type with GPUDirect on (`flavour` as resolved) or off.
pub fn profile(machine_type: &str, flavour: GpuDirect) -> MachineProfile {
    let a3_or_a4 = machine_type.starts_with("a3-") || machine_type.starts_with("a4");
    let rdma_family = matches!(base_type(machine_type), "a3-ultragpu-8g" | "a4-highgpu-8g");
    let (data_nics, rdma_nics) = match flavour {
        GpuDirect::Tcpx => (4, 0),
        GpuDirect::Tcpxo => (8, 0),
        GpuDirect::Rdma => (1, 8),
        GpuDirect::None => (0, 0),
    };
    MachineProfile {
        flavour,
        data_nics,
        rdma_nics,
        gvnic: a3_or_a4,
        image: match flavour {
            GpuDirect::Tcpx => COS_TCPX,
            GpuDirect::Tcpxo => UBUNTU_ACCELERATOR_2404,
            _ => UBUNTU_ACCELERATOR,
        },
        disk_type: if rdma_family {
            "hyperdisk-balanced"
        } else {
            "pd-balanced"
        },
    }
}

/// The NICs in order.
pub fn nics(p: &MachineProfile) -> Vec<NicRole> {
    let mut v = vec![NicRole::Primary];
    v.extend((1..=p.data_nics).map(NicRole::Data));
    v.extend((0..p.rdma_nics).map(NicRole::Rdma));
    v
}

/// `1`, `1+4 GVNIC`, `2+8 MRDMA` (as the catalog labels layouts).
pub fn nics_label(p: &MachineProfile) -> String {
    match p.flavour {
        GpuDirect::None => "1".into(),
        GpuDirect::Rdma => format!("{}+{} MRDMA", 1 + p.data_nics, p.rdma_nics),
        _ => format!("1+{} GVNIC", p.data_nics),
    }
}

/// The flavour to use for `wanted` on `machine_type`, or why it cannot be had.
/// `wanted` is `network.gpudirect`: `None` (auto) takes the machine type's flavour.
pub fn resolve(wanted: Option<GpuDirect>, machine_type: &str) -> Result<GpuDirect, String> {
    let has = flavour(machine_type);
    let want = match wanted {
        None => return Ok(has),
        Some(GpuDirect::None) => return Ok(GpuDirect::None),
        Some(w) => w,
    };
    if want == has {
        return Ok(has);
    }
    let offers = match has {
        GpuDirect::None => "no GPUDirect networking".to_string(),
        other => format!("GPUDirect-{}", other.label()),
    };
    let which = match want {
        GpuDirect::Tcpx => "a3-highgpu-8g or a3-edgegpu-8g",
        GpuDirect::Tcpxo => "a3-megagpu-8g",
        _ => "a3-ultragpu-8g or a4-highgpu-8g",
    };
    Err(format!(
        "{machine_type} has {offers}, not {}: use `auto`{}, `none`, or a machine type with it ({which})",
        want.label(),
        if has == GpuDirect::None {
            String::new()
        } else {
            format!(", `{}`", has.name())
        }
    ))
}

/// A name from `prefix` and a place (region or zone) that fits GCE's 63 characters: the
/// place itself when it fits, else a 4-hex digest of it.
pub fn placed_name(prefix: &str, place: &str) -> String {
    let full = format!("{prefix}-{place}");
    if full.len() <= 63 {
        return full;
    }
    let mut h: u32 = 0x811c_9dc5;
    for b in place.bytes() {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    format!("{prefix}-{:04x}", h & 0xffff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_per_machine_type() {
        let cases = [
            ("a3-highgpu-8g", "1+4 GVNIC", 5, COS_TCPX),
            ("a3-edgegpu-8g", "1+4 GVNIC", 5, COS_TCPX),
            ("a3-megagpu-8g", "1+8 GVNIC", 9, UBUNTU_ACCELERATOR_2404),
            ("a3-ultragpu-8g", "2+8 MRDMA", 10, UBUNTU_ACCELERATOR),
            ("a4-highgpu-8g", "2+8 MRDMA", 10, UBUNTU_ACCELERATOR),
            // -nolssd: the base type's layout, never the one-NIC default.
            ("a3-edgegpu-8g-nolssd", "1+4 GVNIC", 5, COS_TCPX),
            ("a3-ultragpu-8g-nolssd", "2+8 MRDMA", 10, UBUNTU_ACCELERATOR),
            ("a2-highgpu-8g", "1", 1, UBUNTU_ACCELERATOR),
            ("g2-standard-8", "1", 1, UBUNTU_ACCELERATOR),
        ];
        for (mt, label, count, image) in cases {
            let p = profile(mt, flavour(mt));
            assert_eq!(nics_label(&p), label, "{mt}");
            assert_eq!(nics(&p).len(), count, "{mt}");
            assert_eq!(p.image, image, "{mt}");
        }
        let a4 = profile("a4-highgpu-8g", GpuDirect::Rdma);
        assert_eq!(a4.disk_type, "hyperdisk-balanced");
        assert_eq!(
            profile("a3-ultragpu-8g-nolssd", GpuDirect::Rdma).disk_type,
            "hyperdisk-balanced"
        );
        assert_eq!(
            nics(&a4)[..3],
            [NicRole::Primary, NicRole::Data(1), NicRole::Rdma(0)]
        );
        let off = profile("a3-megagpu-8g", GpuDirect::None);
        assert_eq!(nics(&off), vec![NicRole::Primary]);
        assert!(off.gvnic, "A3 keeps gVNIC on nic0");
    }

    #[test]
    fn gpudirect_resolution() {
        assert_eq!(resolve(None, "a3-megagpu-8g"), Ok(GpuDirect::Tcpxo));
        assert_eq!(
            resolve(Some(GpuDirect::None), "a3-megagpu-8g"),
            Ok(GpuDirect::None)
        );
        assert_eq!(
            resolve(Some(GpuDirect::Rdma), "a4-highgpu-8g"),
            Ok(GpuDirect::Rdma)
        );
        assert_eq!(resolve(None, "g2-standard-8"), Ok(GpuDirect::None));
        let e = resolve(Some(GpuDirect::Tcpx), "a3-megagpu-8g").unwrap_err();
        assert!(
            e.starts_with("a3-megagpu-8g has GPUDirect-TCPXO, not TCPX"),
            "{e}"
        );
        assert!(e.contains("`tcpxo`"), "{e}");
        let e = resolve(Some(GpuDirect::Rdma), "g2-standard-8").unwrap_err();
        assert!(
            e.contains("no GPUDirect networking") && e.contains("a4-highgpu-8g"),
            "{e}"
        );
    }

    #[test]
    fn names_fit() {
        assert_eq!(placed_name("demo-data-1", "us-east4"), "demo-data-1-us-east4");
        let long = placed_name(&"a".repeat(40), "northamerica-northeast1-a");
        assert!(long.len() <= 63 && long.starts_with(&"a".repeat(40)), "{long}");
        assert_eq!(long, placed_name(&"a".repeat(40), "northamerica-northeast1-a"));
    }
}
