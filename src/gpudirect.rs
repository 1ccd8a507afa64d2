//! The GPUDirect flavour: the one word for "which GPU-to-GPU network a machine has and
//! NCCL should use", shared by the catalog (what a machine type offers), fleet files
//! (`network.gpudirect`; `auto` is no value: the machine type's), NCCL runs and jobs (the
//! profile), the bootstrap and the doctor. NCCL's expectations of each flavour (the net
//! plugin, the transports it accepts) live beside the transport judge
//! (`nccl::transport`).

use serde::{Deserialize, Serialize};
use std::fmt;

/// The GPUDirect flavour of a machine type's GPU-to-GPU network, in order of capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuDirect {
    /// No GPUDirect networking (or a single-node shape).
    None,
    /// GPUDirect-TCPX: a3-highgpu-8g, a3-edgegpu-8g.
    Tcpx,
    /// GPUDirect-TCPXO (FasTrak): a3-megagpu-8g.
    Tcpxo,
    /// GPUDirect RDMA over RoCE (gIB plugin or NCCL's IB): a3-ultragpu-8g, a4-highgpu-8g, a4x.
    Rdma,
}

impl GpuDirect {
    pub const ALL: [GpuDirect; 4] = [
        GpuDirect::None,
        GpuDirect::Tcpx,
        GpuDirect::Tcpxo,
        GpuDirect::Rdma,
    ];

    /// The name in queries, JSON, the data file and run records: `none`, `tcpx`,
    /// `tcpxo`, `rdma`.
    pub fn name(self) -> &'static str {
        match self {
            GpuDirect::None => "none",
            GpuDirect::Tcpx => "tcpx",
            GpuDirect::Tcpxo => "tcpxo",
            GpuDirect::Rdma => "rdma",
        }
    }

    /// The label in tables: `-`, `TCPX`, `TCPXO`, `RDMA`.
    pub fn label(self) -> &'static str {
        match self {
            GpuDirect::None => "-",
            GpuDirect::Tcpx => "TCPX",
            GpuDirect::Tcpxo => "TCPXO",
            GpuDirect::Rdma => "RDMA",
        }
    }

    /// The flavour of a name as [`Self::name`] gives it; case-insensitive, trimmed.
    pub fn parse(name: &str) -> Option<GpuDirect> {
        GpuDirect::ALL
            .into_iter()
            .find(|g| g.name().eq_ignore_ascii_case(name.trim()))
    }

    /// The flavour Google documents for a Compute Engine machine type.
    pub fn for_machine_type(machine_type: &str) -> GpuDirect {
        let mt = machine_type.to_ascii_lowercase();
        if mt.starts_with("a3-highgpu-8g") || mt.starts_with("a3-edgegpu-8g") {
            GpuDirect::Tcpx
        } else if mt.starts_with("a3-megagpu-8g") {
            GpuDirect::Tcpxo
        } else if mt.starts_with("a3-ultragpu-8g")
            || mt.starts_with("a4-highgpu-8g")
            || mt.starts_with("a4x-")
        {
            GpuDirect::Rdma
        } else {
            GpuDirect::None
        }
    }
}

impl fmt::Display for GpuDirect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::GpuDirect;

    #[test]
    fn names_round_trip_and_serialise_as_named() {
        for g in GpuDirect::ALL {
            assert_eq!(GpuDirect::parse(g.name()), Some(g));
            assert_eq!(GpuDirect::parse(&g.name().to_uppercase()), Some(g));
            assert_eq!(serde_json::to_string(&g).unwrap(), format!("\"{}\"", g.name()));
        }
        assert_eq!(GpuDirect::parse("auto"), None);
        assert_eq!(GpuDirect::for_machine_type("a3-megagpu-8g"), GpuDirect::Tcpxo);
        assert_eq!(GpuDirect::for_machine_type("g2-standard-8"), GpuDirect::None);
    }
}
