//! Published NCCL busbw figures per machine type (2 nodes x 8 GPUs unless noted), from
//! the anchors' documentation collected in shared/reference/anchors.md, and the figures
//! measured here on 2x H200 with NVLink. The expected curve and the verdict of an NCCL
//! run start from these; the Offers view shows them per machine type.

/// One published figure.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Baseline {
    pub machine_type: &'static str,
    pub fabric: &'static str,
    pub collective: &'static str,
    /// Message size of the figure, bytes.
    pub size: u64,
    /// Out-of-place busbw, GB/s.
    pub busbw: f64,
    pub nodes: u32,
    pub source: &'static str,
}

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

pub const PUBLISHED: &[Baseline] = &[
    Baseline {
        machine_type: "a3-highgpu-8g",
        fabric: "GPUDirect-TCPX (GCE, COS)",
        collective: "all_gather",
        size: 8 * GIB,
        busbw: 50.17,
        nodes: 2,
        source: "dstack docs, examples/clusters/gcp",
    },
    Baseline {
        machine_type: "a3-highgpu-8g",
        fabric: "GPUDirect-TCPX (GCE)",
        collective: "all_reduce",
        size: 2 * GIB,
        busbw: 65.72,
        nodes: 2,
        source: "SkyPilot examples/gcp_gpu_direct_tcpx (19.39 without TCPX)",
    },
    Baseline {
        machine_type: "a3-highgpu-8g",
        fabric: "GPUDirect-TCPX (GKE)",
        collective: "all_gather",
        size: 512 * MIB,
        busbw: 70.90,
        nodes: 2,
        source: "Cluster Toolkit gke-a3-highgpu test plan",
    },
    Baseline {
        machine_type: "a3-megagpu-8g",
        fabric: "GPUDirect-TCPXO (GCE)",
        collective: "all_gather",
        size: 8 * GIB,
        busbw: 188.54,
        nodes: 2,
        source: "dstack docs, examples/clusters/gcp",
    },
    Baseline {
        machine_type: "a3-megagpu-8g",
        fabric: "GPUDirect-TCPXO (GKE)",
        collective: "all_gather",
        size: 8 * GIB,
        busbw: 188.73,
        nodes: 2,
        source: "Cluster Toolkit gke-a3-megagpu",
    },
    Baseline {
        machine_type: "a3-ultragpu-8g",
        fabric: "RDMA over RoCE, gIB (GKE)",
        collective: "all_gather",
        size: 8 * GIB,
        busbw: 325.72,
        nodes: 2,
        source: "SkyPilot examples/gcp_gpu_direct_tcpx",
    },
    Baseline {
        machine_type: "a3-ultragpu-8g",
        fabric: "RDMA over RoCE, gIB (GKE, flex-start)",
        collective: "all_gather",
        size: 8 * GIB,
        busbw: 328.85,
        nodes: 2,
        source: "Cluster Toolkit dws-flex-start",
    },
    Baseline {
        machine_type: "a4-highgpu-8g",
        fabric: "RDMA over RoCE (GCE, spot)",
        collective: "all_reduce",
        size: 8 * GIB,
        busbw: 683.52,
        nodes: 2,
        source: "dstack docs, examples/clusters/gcp",
    },
];

/// The published figures for a machine type.
pub fn for_machine(machine_type: &str) -> Vec<&'static Baseline> {
    PUBLISHED
        .iter()
        .filter(|b| b.machine_type == machine_type)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_gpudirect_machine_has_a_figure_but_a4_all_gather() {
        for mt in [
            "a3-highgpu-8g",
            "a3-megagpu-8g",
            "a3-ultragpu-8g",
            "a4-highgpu-8g",
        ] {
            assert!(!for_machine(mt).is_empty(), "{mt}");
        }
        assert!(
            for_machine("a4-highgpu-8g")
                .iter()
                .all(|b| b.collective == "all_reduce"),
            "A4 all_gather is unpublished"
        );
        assert!(for_machine("g2-standard-4").is_empty());
    }
}
