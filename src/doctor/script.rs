//! The node script: one POSIX sh run per node (as the login user, reading /sys, /proc,
//! `nvidia-smi` and the kernel log; it changes nothing), printing each fact gathered as a
//! section between markers, and [`parse`] to read the sections back. The judging is
//! [`super::judge`]'s; the script only collects.

use crate::bootstrap::preflight;
use std::collections::BTreeMap;
use std::fmt::Write as _;

const MARK: &str = "@@fd-doctor";

/// The script for a node; `preflight` is the GPUDirect flavour's pre-flight script (its
/// output becomes the `gpudirect` section) when the fleet has one.
pub fn script(preflight: Option<&str>) -> String {
    let mut s = String::from("#!/bin/sh\n# flightdeck doctor: what this node looks like (reads only)\n");
    let _ = writeln!(s, "b() {{ echo \"{MARK} begin $1\"; }}");
    let _ = writeln!(s, "e() {{ echo \"{MARK} end $1 $2\"; }}");
    // The time first: the clock offset is judged by when this line arrives.
    s.push_str("b time; date +%s%N; e time 0\n");
    s.push_str(
        "PATH=\"$PATH:/var/lib/nvidia/bin:/usr/local/nvidia/bin:/home/kubernetes/bin/nvidia/bin:/usr/sbin:/sbin\"\n",
    );
    let _ = writeln!(
        s,
        "if command -v nvidia-smi >/dev/null 2>&1; then\n\
         b smi; nvidia-smi 2>&1; e smi $?\n\
         b gpus; nvidia-smi --query-gpu={q} --format=csv 2>&1; e gpus $?\n\
         b topo; nvidia-smi topo -m 2>&1; e topo $?\n\
         b nvlink; nvidia-smi nvlink -s 2>&1; e nvlink $?\n\
         else b smi; echo 'nvidia-smi: not found'; e smi 127; fi",
        q = super::gpu::QUERY_FIELDS
    );
    // The kernel log since boot: dmesg (as root or where dmesg_restrict is off), sudo, or
    // the journal; only the NVIDIA driver's lines travel.
    s.push_str(
        "b xid; k=$(dmesg 2>/dev/null) || k=$(sudo -n dmesg 2>/dev/null) || k=$(journalctl -k -b -q --no-pager 2>/dev/null) || k=''; \
         if [ -z \"$k\" ]; then echo 'kernel log: not readable (dmesg, sudo -n dmesg and journalctl -k all failed)'; e xid 1; \
         else printf '%s\\n' \"$k\" | grep -E 'NVRM: Xid|fallen off the bus' | tail -n 64; e xid 0; fi\n",
    );
    // NICs: name, state, MTU, speed, NUMA node of its device.
    s.push_str(
        "b nics; for d in /sys/class/net/*; do n=${d##*/}; \
         printf '%s %s %s %s %s\\n' \"$n\" \"$(cat $d/operstate 2>/dev/null || echo -)\" \"$(cat $d/mtu 2>/dev/null || echo -)\" \
         \"$(cat $d/speed 2>/dev/null || echo -)\" \"$(cat $d/device/numa_node 2>/dev/null || echo -)\"; done; e nics 0\n",
    );
    s.push_str("b addrs; ip -o -4 addr show 2>&1; e addrs $?\n");
    s.push_str("b route; ip route show default 2>&1; e route $?\n");
    // RDMA ports: device, port, state, physical state, netdev, NUMA node.
    s.push_str(
        "b rdma; for p in /sys/class/infiniband/*/ports/*; do [ -e \"$p/state\" ] || continue; \
         dev=$(basename \"$(dirname \"$(dirname \"$p\")\")\"); \
         printf '%s %s %s %s %s %s\\n' \"$dev\" \"${p##*/}\" \"$(cat $p/state | tr -d ' ')\" \"$(cat $p/phys_state | tr -d ' ')\" \
         \"$(ls /sys/class/infiniband/$dev/device/net 2>/dev/null | head -n 1)\" \"$(cat /sys/class/infiniband/$dev/device/numa_node 2>/dev/null || echo -)\"; done; \
         echo \"devices $(ls /sys/class/infiniband 2>/dev/null | wc -l)\"; e rdma 0\n",
    );
    s.push_str(
        "b sysctl; for k in net.core.rmem_max net.core.wmem_max net.ipv4.tcp_rmem net.ipv4.tcp_wmem net.ipv4.tcp_mtu_probing; do \
         printf '%s = %s\\n' \"$k\" \"$(cat /proc/sys/$(echo $k | tr . /) 2>/dev/null)\"; done; e sysctl 0\n",
    );
    s.push_str(
        "b nccl-env; env | grep '^NCCL_' | sed 's/^/env /'; for f in /etc/nccl.conf \"$HOME/.nccl.conf\"; do \
         [ -r \"$f\" ] && sed \"s|^|$f |\" \"$f\"; done; e nccl-env 0\n",
    );
    // Versions: the NCCL libraries the loader finds and the ones GPUDirect installs, their
    // versions (from the file name, else the version string inside), and the plugins.
    s.push_str(
        "b versions; echo \"kernel $(uname -r)\"; [ -r /etc/os-release ] && . /etc/os-release && echo \"os $PRETTY_NAME\"; \
         py=$(python3 -c \"import importlib.util as u; s=u.find_spec('nvidia.nccl'); print(list(s.submodule_search_locations)[0])\" 2>/dev/null); \
         for f in $(ldconfig -p 2>/dev/null | awk '/libnccl\\.so/ {print $NF}') /var/lib/tcpx/lib64/libnccl.so.2 /var/lib/tcpxo/lib64/libnccl.so.2 \
         /usr/local/gib/lib64/libnccl.so.2 ${py:+$py/lib/libnccl.so.2}; do [ -e \"$f\" ] || continue; r=$(readlink -f \"$f\"); \
         v=${r##*libnccl.so.}; case \"$v\" in *.*.*) ;; *) v=$(grep -a -o -m 1 -E '[0-9]+\\.[0-9]+\\.[0-9]+\\+cuda[0-9]+\\.[0-9]+' \"$r\" | head -n 1);; esac; \
         echo \"nccl $r ${v:-unknown}\"; done; \
         for f in /var/lib/tcpx/lib64/libnccl-net.so /var/lib/tcpxo/lib64/libnccl-net.so /usr/local/gib/lib64/libnccl-net.so; do \
         [ -e \"$f\" ] && echo \"plugin $f $(sha256sum < \"$f\" | cut -c1-12)\"; done; e versions 0\n",
    );
    if let Some(p) = preflight {
        // The pre-flight's own checks, as the NCCL runs' pre-flight makes them.
        let _ = write!(s, "b gpudirect\n{p}\ne gpudirect 0\n");
    }
    s
}

/// A node's sections: name -> (output, exit status of the section's command).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sections(pub BTreeMap<String, (String, i32)>);

impl Sections {
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(|(t, _)| t.as_str())
    }
    pub fn status(&self, name: &str) -> Option<i32> {
        self.0.get(name).map(|(_, c)| *c)
    }
}

/// The sections of a node's output; a section without its end (the node went away) keeps
/// what arrived, with status -1.
pub fn parse(out: &str) -> Sections {
    let mut map = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    for line in out.lines() {
        if let Some(rest) = line.strip_prefix(MARK).and_then(|r| r.strip_prefix(' ')) {
            let mut p = rest.split(' ');
            match (p.next(), p.next()) {
                (Some("begin"), Some(name)) => {
                    if let Some((n, t)) = current.take() {
                        map.insert(n, (t, -1));
                    }
                    current = Some((name.to_string(), String::new()));
                }
                (Some("end"), Some(name)) => {
                    let code = p.next().and_then(|c| c.parse().ok()).unwrap_or(-1);
                    if let Some((n, t)) = current.take() {
                        if n == name {
                            map.insert(n, (t, code));
                        } else {
                            map.insert(n, (t, -1));
                        }
                    }
                }
                _ => {}
            }
            continue;
        }
        if let Some((_, t)) = current.as_mut() {
            t.push_str(line);
            t.push('\n');
        }
    }
    if let Some((n, t)) = current {
        map.insert(n, (t, -1));
    }
    Sections(map)
}

/// The GPUDirect section's checks.
pub fn gpudirect_checks(s: &Sections) -> Option<Vec<preflight::Check>> {
    s.get("gpudirect").map(preflight::parse)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_runs_here_and_its_sections_read_back() {
        let out = crate::bootstrap::tests::sh_stdin(&script(Some("echo '@@fd-preflight ok file / present'")));
        let s = parse(&String::from_utf8_lossy(&out.stdout));
        for name in [
            "time",
            "smi",
            "xid",
            "nics",
            "addrs",
            "route",
            "rdma",
            "sysctl",
            "nccl-env",
            "versions",
            "gpudirect",
        ] {
            assert!(s.0.contains_key(name), "section {name} missing: {:?}", s.0.keys());
        }
        assert!(s.get("nics").unwrap().lines().any(|l| l.starts_with("lo ")));
        assert!(s.get("time").unwrap().trim().parse::<u128>().is_ok());
        assert!(s.get("sysctl").unwrap().contains("net.core.rmem_max = "));
        assert_eq!(gpudirect_checks(&s).unwrap().len(), 1);
    }

    #[test]
    fn a_cut_off_section_keeps_what_arrived() {
        let s = parse("@@fd-doctor begin a\nx\n@@fd-doctor end a 0\n@@fd-doctor begin b\ny\n");
        assert_eq!(s.0["a"], ("x\n".into(), 0));
        assert_eq!(s.0["b"], ("y\n".into(), -1));
    }
}
