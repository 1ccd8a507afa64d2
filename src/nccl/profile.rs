//! Which GPUDirect profile `auto` picks for a fleet, for NCCL runs and training jobs
//! alike: the fleet file's `network.gpudirect` when it names a flavour (`none` means
//! none), else the flavour of the machine type (the catalog's facts, else its name).

use super::GpuDirect;
use crate::fleet::FleetSpec;

/// Why `auto` picked what it picked, for the operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The fleet file's `network.gpudirect`.
    FleetNetwork,
    /// The flavour of the machine type.
    MachineType,
    /// Nothing said: NCCL's defaults.
    Unknown,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::FleetNetwork => "fleet network.gpudirect",
            Source::MachineType => "machine type",
            Source::Unknown => "machine type unknown",
        }
    }
}

/// The GPUDirect flavour of a machine type: the embedded catalog's, else what its name
/// says (a machine type the catalog does not list yet).
pub fn machine_flavour(machine_type: &str) -> GpuDirect {
    use crate::catalog::model::GpuDirect as Offered;
    let offered = crate::catalog::Catalog::embedded()
        .offers()
        .iter()
        .find(|o| o.machine_type == machine_type)
        .map(|o| o.gpudirect);
    match offered {
        Some(Offered::Tcpx) => GpuDirect::Tcpx,
        Some(Offered::Tcpxo) => GpuDirect::Tcpxo,
        Some(Offered::Rdma) => GpuDirect::Rdma,
        Some(Offered::None) => GpuDirect::None,
        None => GpuDirect::for_machine_type(machine_type),
    }
}

/// The profile `auto` picks: the fleet file's `network.gpudirect` when it is not `auto`,
/// else the flavour of `machine_type` (given, else the fleet's first instance type).
pub fn auto_profile(spec: Option<&FleetSpec>, machine_type: Option<&str>) -> (GpuDirect, Source) {
    use crate::fleet::GpuDirect as Wanted;
    let wanted = spec
        .and_then(|s| s.network.as_ref())
        .map(|n| n.gpudirect)
        .unwrap_or_default();
    let explicit = match wanted {
        Wanted::Auto => None,
        Wanted::None => Some(GpuDirect::None),
        Wanted::Tcpx => Some(GpuDirect::Tcpx),
        Wanted::Tcpxo => Some(GpuDirect::Tcpxo),
        Wanted::Rdma => Some(GpuDirect::Rdma),
    };
    if let Some(p) = explicit {
        return (p, Source::FleetNetwork);
    }
    let machine = machine_type
        .map(str::to_string)
        .or_else(|| first_instance_type(spec));
    match machine {
        Some(m) => (machine_flavour(&m), Source::MachineType),
        None => (GpuDirect::None, Source::Unknown),
    }
}

/// The fleet file's first instance type.
pub fn first_instance_type(spec: Option<&FleetSpec>) -> Option<String> {
    spec?.instance_types.as_ref()?.first().cloned()
}

/// A fleet's machine type (`given`, else its file's first instance type) and the profile
/// `auto` picks for it ([`auto_profile`]), with where that came from: what the doctor,
/// the cockpit's NCCL dialog and `nccl run` all start from.
pub fn machine_and_profile(
    spec: Option<&FleetSpec>,
    given: Option<String>,
) -> (Option<String>, GpuDirect, Source) {
    let machine_type = given.or_else(|| first_instance_type(spec));
    let (profile, source) = auto_profile(spec, machine_type.as_deref());
    (machine_type, profile, source)
}

/// What a fleet tells a job or a run: the profile `auto` picks ([`auto_profile`]) and
/// the GPU model (for its peak rate), from the fleet file's `resources.gpu`, else the
/// catalog's facts about its first instance type.
pub fn fleet_facts(spec: Option<&FleetSpec>) -> (GpuDirect, Option<String>) {
    let (profile, _) = auto_profile(spec, None);
    let gpu = spec
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.gpu.as_ref())
        .and_then(|g| g.names.first().cloned())
        .or_else(|| {
            let mt = first_instance_type(spec)?;
            crate::catalog::Catalog::embedded()
                .offers()
                .iter()
                .find(|o| o.machine_type == mt)
                .map(|o| o.gpu.clone())
        });
    (profile, gpu)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fleet(extra: &str) -> FleetSpec {
        let text = format!(
            "type: fleet\nname: lab\nnodes: 2\ninstance_types: [a3-megagpu-8g]\nbackends: [gcp]\nregions: [us-central1]\n{extra}"
        );
        crate::fleet::parse(std::path::Path::new("lab.yaml"), &text)
            .expect("a valid fleet file")
            .spec
    }

    #[test]
    fn explicit_gpudirect_wins_over_the_machine_type() {
        let auto = fleet("");
        assert_eq!(
            auto_profile(Some(&auto), None),
            (GpuDirect::Tcpxo, Source::MachineType)
        );
        // Validation refuses a flavour the machine type lacks; the choice itself still
        // puts an explicit flavour first.
        let mut rdma = fleet("");
        rdma.network = Some(crate::fleet::spec::Network {
            gpudirect: crate::fleet::spec::GpuDirect::Rdma,
            ..Default::default()
        });
        assert_eq!(
            auto_profile(Some(&rdma), None),
            (GpuDirect::Rdma, Source::FleetNetwork)
        );
        let none = fleet("network:\n  gpudirect: none\n");
        assert_eq!(
            auto_profile(Some(&none), Some("a3-highgpu-8g")),
            (GpuDirect::None, Source::FleetNetwork),
            "none means none, whatever the machine type"
        );
        // A machine type given (e.g. --machine-type) is used when the fleet says auto.
        assert_eq!(
            auto_profile(Some(&auto), Some("a3-highgpu-8g")),
            (GpuDirect::Tcpx, Source::MachineType)
        );
        assert_eq!(auto_profile(None, None), (GpuDirect::None, Source::Unknown));
        assert_eq!(fleet_facts(Some(&rdma)).0, GpuDirect::Rdma);
        assert!(fleet_facts(Some(&auto)).1.is_some(), "the GPU from the catalog");
    }
}
