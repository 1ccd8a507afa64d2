//! Which NICs carry the job's traffic: data NICs (rails), the control NIC, and the rest.
//!
//! The automatic rule, from the names and the node's layout (its default route, its RDMA
//! ports), first match wins:
//! 1. a name the caller listed (`data`, `control`, `other` patterns; `*` matches any
//!    text) gets that role;
//! 2. `lo` and virtual interfaces (docker, veth, bridges, tunnels, CNI, ifb, ...) are
//!    **other**;
//! 3. a netdev that belongs to an RDMA port is **other**: RDMA traffic bypasses the
//!    netdev's counters and shows on the port (GCP A3 Ultra / A4: MRDMA NICs);
//! 4. RDMA ports are **data**;
//! 5. the NIC of the default route is **control** (GCP: nic0, the first gVNIC); without a
//!    default route, `eth0` is (the SSH testbed: eth0 control, eth1..K data);
//! 6. on a node with RDMA ports, the remaining NICs are **control** as well (A3 Ultra/A4:
//!    the second gVNIC carries host traffic, the GPUs talk over MRDMA);
//! 7. the remaining NICs are **data** (A3 High/Mega: the 4 or 8 gVNICs for TCPX/TCPXO).
//!
//! A rail is a data NIC's label: the same name on every node (GCP gives every node of a
//! machine type the same names), or the same RDMA port.

use super::rate::Device;

/// A NIC's part in the node's traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Carries the collective's traffic; checked for imbalance.
    Data,
    /// Management, SSH, host traffic.
    Control,
    /// Loopback, virtual, the netdev side of an RDMA port.
    Other,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Data => "data",
            Role::Control => "control",
            Role::Other => "other",
        }
    }
}

/// What the rule needs to know about a node besides the NIC's name.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeLayout<'a> {
    /// The interface of the default route.
    pub default_route: Option<&'a str>,
    /// The netdevs of the node's RDMA ports.
    pub rdma_netdevs: &'a [String],
    /// Does the node have RDMA ports?
    pub has_rdma: bool,
}

/// Name prefixes of virtual interfaces.
const VIRTUAL: &[&str] = &[
    "lo",
    "docker",
    "veth",
    "br-",
    "virbr",
    "cni",
    "flannel",
    "cali",
    "cilium",
    "lxc",
    "tun",
    "tap",
    "vxlan",
    "genev",
    "kube-",
    "weave",
    "wg",
    "ifb",
    "dummy",
    "tailscale",
    "zt",
    "nodelocaldns",
    "vnet",
    "gke",
];

/// The classification rule with the caller's overrides.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Classifier {
    pub data: Vec<String>,
    pub control: Vec<String>,
    pub other: Vec<String>,
}

/// `*` matches any text (also none); everything else matches itself.
pub fn glob(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || name.len() < first.len() + last.len() || !name.ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for p in &parts[1..parts.len() - 1] {
        match rest.find(p) {
            Some(i) => rest = &rest[i + p.len()..],
            None => return false,
        }
    }
    true
}

impl Classifier {
    /// The automatic rule, no overrides.
    pub fn auto() -> Classifier {
        Classifier::default()
    }

    fn listed(patterns: &[String], device: &Device) -> bool {
        patterns.iter().any(|p| match device {
            Device::Nic { name } => glob(p, name),
            Device::Rdma { device: name, .. } => glob(p, &device.label()) || glob(p, name),
        })
    }

    /// The role of `device` on a node laid out as `layout`.
    pub fn role(&self, device: &Device, layout: &NodeLayout<'_>) -> Role {
        if Self::listed(&self.data, device) {
            return Role::Data;
        }
        if Self::listed(&self.control, device) {
            return Role::Control;
        }
        if Self::listed(&self.other, device) {
            return Role::Other;
        }
        let name = match device {
            Device::Rdma { .. } => return Role::Data,
            Device::Nic { name } => name.as_str(),
        };
        if name == "lo" || VIRTUAL.iter().any(|p| name.starts_with(p)) {
            return Role::Other;
        }
        if layout.rdma_netdevs.iter().any(|n| n == name) {
            return Role::Other;
        }
        let control = match layout.default_route {
            Some(r) => r == name,
            None => name == "eth0",
        };
        if control || layout.has_rdma {
            return Role::Control;
        }
        Role::Data
    }
}

/// Names in the order people number them: runs of digits compare by value (`eth2` before
/// `eth10`, `enp6s0` before `enp13s0`), the rest by character.
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let (mut x, mut y) = (a.as_bytes(), b.as_bytes());
    loop {
        match (x.first(), y.first()) {
            (None, None) => return a.cmp(b),
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(c), Some(d)) if c.is_ascii_digit() && d.is_ascii_digit() => {
                let n = x.iter().take_while(|c| c.is_ascii_digit()).count();
                let m = y.iter().take_while(|c| c.is_ascii_digit()).count();
                let (p, q) = (&x[..n], &y[..m]);
                let trim = |s: &[u8]| -> usize { s.iter().take_while(|&&c| c == b'0').count() };
                let (p, q) = (&p[trim(p)..], &q[trim(q)..]);
                let o = p.len().cmp(&q.len()).then_with(|| p.cmp(q));
                if o != Ordering::Equal {
                    return o;
                }
                x = &x[n..];
                y = &y[m..];
            }
            (Some(c), Some(d)) => {
                if c != d {
                    return c.cmp(d);
                }
                x = &x[1..];
                y = &y[1..];
            }
        }
    }
}

/// [`natural_cmp`] of two devices: NICs before RDMA ports, then by label.
pub fn device_cmp(a: &Device, b: &Device) -> std::cmp::Ordering {
    let kind = |d: &Device| matches!(d, Device::Rdma { .. });
    kind(a)
        .cmp(&kind(b))
        .then_with(|| natural_cmp(&a.label(), &b.label()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roles(
        c: &Classifier,
        names: &[&str],
        route: Option<&str>,
        rdma: &[(&str, &str)],
    ) -> Vec<(String, Role)> {
        let netdevs: Vec<String> = rdma.iter().map(|(_, n)| n.to_string()).collect();
        let layout = NodeLayout {
            default_route: route,
            rdma_netdevs: &netdevs,
            has_rdma: !rdma.is_empty(),
        };
        let mut devices: Vec<Device> = names.iter().map(|n| Device::nic(n)).collect();
        devices.extend(rdma.iter().map(|(d, _)| Device::rdma(d, 1)));
        devices.iter().map(|d| (d.label(), c.role(d, &layout))).collect()
    }

    fn of(v: &[(String, Role)], role: Role) -> Vec<String> {
        v.iter()
            .filter(|(_, r)| *r == role)
            .map(|(n, _)| n.clone())
            .collect()
    }

    #[test]
    fn layouts_of_the_testbed_and_gcp() {
        use Role::*;
        let c = Classifier::auto();
        // The SSH testbed: no default route, eth0 control, eth1..3 data.
        let tb = roles(&c, &["lo", "eth0", "eth1", "eth2", "eth3"], None, &[]);
        assert_eq!(of(&tb, Data), ["eth1", "eth2", "eth3"]);
        assert_eq!(of(&tb, Control), ["eth0"]);
        assert_eq!(of(&tb, Other), ["lo"]);
        // This VM: eth0 with the default route, two ifb devices.
        let vm = roles(&c, &["lo", "ifb0", "ifb1", "eth0"], Some("eth0"), &[]);
        assert_eq!(of(&vm, Control), ["eth0"]);
        assert!(of(&vm, Data).is_empty());
        // a3-megagpu-8g (TCPXO): control enp0s12, 8 data gVNICs, docker.
        let data = [
            "enp6s0", "enp7s0", "enp13s0", "enp14s0", "enp134s0", "enp135s0", "enp141s0", "enp142s0",
        ];
        let mut names = vec!["lo", "enp0s12", "docker0", "veth12ab"];
        names.extend(data);
        let mega = roles(&c, &names, Some("enp0s12"), &[]);
        assert_eq!(of(&mega, Data), data);
        assert_eq!(of(&mega, Control), ["enp0s12"]);
        // a3-ultragpu-8g / a4-highgpu-8g: 2 gVNICs + 8 MRDMA (RoCE) NICs.
        let rdma: Vec<(String, String)> = (0..8)
            .map(|i| (format!("mlx5_{i}"), format!("gpu{i}rdma0")))
            .collect();
        let rdma_ref: Vec<(&str, &str)> = rdma.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        let mut names = vec!["lo", "enp0s19", "enp192s20"];
        names.extend(rdma_ref.iter().map(|(_, n)| *n));
        let ultra = roles(&c, &names, Some("enp0s19"), &rdma_ref);
        assert_eq!(of(&ultra, Control), ["enp0s19", "enp192s20"]);
        assert_eq!(of(&ultra, Data).len(), 8);
        assert!(of(&ultra, Data)
            .iter()
            .all(|n| n.starts_with("mlx5_") && n.ends_with("/1")));
        assert_eq!(of(&ultra, Other).len(), 9, "lo and the 8 RDMA netdevs");
    }

    #[test]
    fn callers_override_by_name() {
        let c = Classifier {
            data: vec!["eth0".into(), "mlx5_3".into()],
            control: vec!["eth[12]".into(), "eth2".into()],
            other: vec!["eth3*".into()],
        };
        let r = roles(
            &c,
            &["eth0", "eth2", "eth3", "eth30", "eth4"],
            None,
            &[("mlx5_3", "ib0")],
        );
        assert_eq!(
            r,
            vec![
                ("eth0".to_string(), Role::Data),
                ("eth2".to_string(), Role::Control),
                ("eth3".to_string(), Role::Other),
                ("eth30".to_string(), Role::Other),
                ("eth4".to_string(), Role::Control),
                ("mlx5_3/1".to_string(), Role::Data),
            ],
            "eth4: a node with RDMA ports keeps its other NICs for control"
        );
    }

    #[test]
    fn natural_order() {
        let mut v = vec![
            "eth10", "eth2", "enp13s0", "enp6s0", "eth1", "enp142s0", "eth02", "lo",
        ];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(
            v,
            ["enp6s0", "enp13s0", "enp142s0", "eth1", "eth02", "eth2", "eth10", "lo"]
        );
        let mut d = [
            Device::rdma("mlx5_10", 1),
            Device::nic("eth1"),
            Device::rdma("mlx5_2", 1),
        ];
        d.sort_by(device_cmp);
        let labels: Vec<String> = d.iter().map(Device::label).collect();
        assert_eq!(labels, ["eth1", "mlx5_2/1", "mlx5_10/1"]);
    }

    #[test]
    fn globs() {
        for (p, n, m) in [
            ("eth*", "eth10", true),
            ("eth*", "eth", true),
            ("*", "x", true),
            ("en*s0", "enp6s0", true),
            ("en*s0", "enp6s1", false),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "acb", false),
            ("eth1", "eth10", false),
            ("ab*ba", "aba", false),
        ] {
            assert_eq!(glob(p, n), m, "{p} ~ {n}");
        }
    }
}
