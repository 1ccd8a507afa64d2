//! The node script: one POSIX sh run per node (as the login user, reading /sys, /proc,
//! `nvidia-smi` and the kernel log; it changes nothing), printing each fact gathered as a
//! section between markers, and [`parse`] to read the sections back. The judging is
//! [`super::judge`]'s; the script only collects.

use crate::bootstrap::preflight;
use std::collections::BTreeMap;
use std::fmt::Write as _;

pub(crate) const MARK: &str = "@@fd-doctor";

/// The most of one section's output the doctor keeps. The largest real section, the
/// `nvidia-smi` banner of an 8-GPU node, is a few KiB (tests/fixtures/doctor: 2 KiB on
/// 2 GPUs; `topo -m` 0.6 KiB, `nvlink -s` 0.9 KiB), so this is some fifty times that.
/// The node script cuts each section there too (`head -c`), so a command that prints
/// without end (a runaway `nvidia-smi`) is stopped and the node's checks go on.
pub const SECTION_CAP: usize = 256 * 1024;

/// The most of a node's output the doctor reads: past it the node is judged from what
/// arrived and whatever else it sends is dropped, unread (a node that ignores the script
/// and floods).
pub const NODE_CAP: u64 = 4 * 1024 * 1024;

/// The kernel settings the `sysctl` section reads.
const SYSCTLS: [&str; 5] = [
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_mtu_probing",
];

/// The script for a node; `preflight` is the GPUDirect flavour's pre-flight script (its
/// output becomes the `gpudirect` section) when the fleet has one.
pub fn script(preflight: Option<&str>) -> String {
    let mut s = String::from("#!/bin/sh\n# flightdeck doctor: what this node looks like (reads only)\n");
    // Every mark carries the node's uptime (`/proc/uptime`, read by the shell itself: no
    // process started), so where the script's time goes is known per section
    // ([`Reader::timing`]); `-` where there is no /proc.
    let _ = writeln!(s, "t() {{ u=-; {{ read -r u _ </proc/uptime; }} 2>/dev/null; }}");
    let _ = writeln!(s, "b() {{ t; echo \"{MARK} begin $1 $u\"; }}");
    let _ = writeln!(s, "e() {{ t; echo \"{MARK} end $1 $2 $u\"; }}");
    // A section whose command could print without end (nvidia-smi, `ip` over the
    // kernel's tables) has its output cut at the cap on the node (the command then stops
    // on SIGPIPE), and `after` says where a section's output ended, cut or not: a section
    // without its `end` before its `after` was cut. Sections whose output is bounded by
    // what they read (the shell's loops over /sys, one `awk` of a file or of the kernel
    // log keeping its last 64 lines, a line per library found) are not piped: a pipe is
    // a subshell and a `head` per section, a quarter of the script's CPU on a node
    // (measured: 90 ms with every section piped, 65 ms without), which on nodes that
    // share cores adds up; past [`SECTION_CAP`] this machine cuts them as it reads.
    let _ = writeln!(
        s,
        "cap() {{ if command -v head >/dev/null 2>&1; then head -c {}; else cat; fi; }}",
        SECTION_CAP + 128
    );
    let _ = writeln!(s, "a() {{ echo; echo \"{MARK} after $1\"; }}");
    let section = |s: &mut String, name: &str, body: &str| {
        let _ = writeln!(s, "b {name}; {{ {body}\n}} 2>&1 | cap; a {name}");
    };
    let small = |s: &mut String, name: &str, body: &str| {
        let _ = writeln!(s, "b {name}; {{ {body}\n}} 2>&1 </dev/null; a {name}");
    };
    // The time first: the clock offset is judged by when this line arrives.
    s.push_str("b time; date +%s%N; e time 0\n");
    s.push_str(
        "PATH=\"$PATH:/var/lib/nvidia/bin:/usr/local/nvidia/bin:/home/kubernetes/bin/nvidia/bin:/usr/sbin:/sbin\"\n",
    );
    // The OS's ids and name, read once (the tools' install command and `versions` use them).
    s.push_str("ID= ID_LIKE= PRETTY_NAME=; [ -r /etc/os-release ] && . /etc/os-release\n");
    // What the reachability probes need comes first (the tools, the NICs, their
    // addresses and routes, the RDMA ports, NCCL's settings), then `net-ready`: the probe
    // rounds start once every node is past it, while the slower checks (nvidia-smi, the
    // kernel log, the versions) still run ([`super::run::examine`]).
    // The tools the fleet checks run on the node (a check whose tool is missing is not
    // run, and says so), and the OS's ids for the command that installs them.
    small(
        &mut s,
        "tools",
        "for x in ping timeout ps; do if command -v $x >/dev/null 2>&1; then echo \"$x yes\"; else echo \"$x no\"; fi; done; \
         [ -r /etc/os-release ] && echo \"osid ${ID:-} ${ID_LIKE:-}\"; e tools 0;",
    );
    // NICs: name, state, MTU, speed, NUMA node of its device, and `bridge` for a bridge
    // (whatever its name: a bridge is never a data NIC). Read by the shell (`read`: no
    // process a file); a file it cannot read (a virtual NIC's speed) is `-`.
    small(
        &mut s,
        "nics",
        "for d in /sys/class/net/*; do [ -e \"$d\" ] || continue; n=${d##*/}; k=-; [ -d \"$d/bridge\" ] && k=bridge; \
         { read -r o <\"$d/operstate\"; } 2>/dev/null || o=-; { read -r m <\"$d/mtu\"; } 2>/dev/null || m=-; \
         { read -r sp <\"$d/speed\"; } 2>/dev/null || sp=-; { read -r nu <\"$d/device/numa_node\"; } 2>/dev/null || nu=-; \
         printf '%s %s %s %s %s %s\\n' \"$n\" \"${o:--}\" \"${m:--}\" \"${sp:--}\" \"${nu:--}\" $k; done; e nics 0;",
    );
    section(&mut s, "addrs", "ip -o -4 addr show 2>&1; e addrs $?;");
    section(&mut s, "route", "ip route show default 2>&1; e route $?;");
    // Every IPv4 route of every table: the subnets a NIC reaches (GCP gives a NIC a /32
    // address and its subnet as a route), the only addresses the reach probe pings.
    section(
        &mut s,
        "routes",
        "ip -o -4 route show table all 2>&1; e routes $?;",
    );
    // RDMA ports: device, port, state, physical state, netdev, NUMA node (read by the
    // shell: no process a port).
    small(
        &mut s,
        "rdma",
        "for p in /sys/class/infiniband/*/ports/*; do [ -e \"$p/state\" ] || continue; \
         d=${p%/ports/*}; st=; ph=; nd=; nu=-; \
         { read -r st <\"$p/state\"; read -r ph <\"$p/phys_state\"; } 2>/dev/null; \
         case $st in *' '*) st=\"${st%% *}${st#* }\";; esac; case $ph in *' '*) ph=\"${ph%% *}${ph#* }\";; esac; \
         for x in \"$d\"/device/net/*; do [ -e \"$x\" ] && nd=${x##*/}; break; done; \
         { read -r nu <\"$d/device/numa_node\"; } 2>/dev/null; \
         printf '%s %s %s %s %s %s\\n' \"${d##*/}\" \"${p##*/}\" \"$st\" \"$ph\" \"$nd\" \"$nu\"; done; \
         set -- /sys/class/infiniband/*; [ -e \"$1\" ] || shift $#; echo \"devices $#\"; e rdma 0;",
    );
    small(
        &mut s,
        "nccl-env",
        "set --; for f in /etc/nccl.conf \"$HOME/.nccl.conf\"; do [ -r \"$f\" ] && set -- \"$@\" \"$f\"; done; \
         awk 'BEGIN { for (k in ENVIRON) if (k ~ /^NCCL_/ || k == \"CUDA_VISIBLE_DEVICES\") print \"env \" k \"=\" ENVIRON[k] } { print FILENAME \" \" $0 }' \"$@\" </dev/null; e nccl-env 0;",
    );
    // What NCCL needs at init (super::nccl_init): /dev/shm's size and room in KiB, or
    // why there is none; the session's locked-memory limit; the user's id.
    small(
        &mut s,
        "nccl-res",
        "if [ ! -d /dev/shm ]; then echo 'shm missing'; elif [ ! -w /dev/shm ]; then echo 'shm unwritable'; \
         else df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 { print \"shm \" $2 \" \" $4 }'; fi; \
         echo \"memlock $(ulimit -l 2>/dev/null)\"; echo \"uid $(id -u)\"; e nccl-res 0;",
    );
    s.push_str("b net-ready; e net-ready 0\n");
    // The kernel's TCP buffer and MTU probing settings, one awk (not the shell's `read`:
    // dash reads a byte at a time, and a /proc/sys number ends at the first byte).
    small(
        &mut s,
        "sysctl",
        &format!(
            "awk 'BEGIN {{ n = split(\"{}\", k, \" \"); for (i = 1; i <= n; i++) {{ f = \"/proc/sys/\" k[i]; gsub(/\\./, \"/\", f); \
             v = \"\"; if ((getline v < f) <= 0) v = \"\"; close(f); print k[i] \" = \" v }} }}'; e sysctl 0;",
            SYSCTLS.join(" ")
        ),
    );
    // Versions: the NCCL libraries the loader finds and the ones GPUDirect installs, their
    // versions (from the file name, else the version string inside), and the plugins.
    // The pip wheel's (`nvidia-nccl-cu*`: nvidia/nccl/lib in a site-packages) is looked
    // for in the python3 on PATH's prefix (a venv, conda) and the system's, by name: no
    // python is started.
    small(
        &mut s,
        "versions",
        "kr=; { read -r kr </proc/sys/kernel/osrelease; } 2>/dev/null || kr=$(uname -r); echo \"kernel $kr\"; \
         [ -r /etc/os-release ] && echo \"os $PRETTY_NAME\"; \
         py=$(command -v python3 2>/dev/null); py=${py%/bin/python3}; \
         set --; for f in $(ldconfig -p 2>/dev/null | awk '/libnccl\\.so/ {print $NF}') /var/lib/tcpx/lib64/libnccl.so.2 /var/lib/tcpxo/lib64/libnccl.so.2 \
         /usr/local/gib/lib64/libnccl.so.2 ${py:+$py/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2} \
         /usr/local/lib/python3*/dist-packages/nvidia/nccl/lib/libnccl.so.2 /usr/lib/python3/dist-packages/nvidia/nccl/lib/libnccl.so.2 \
         \"$HOME\"/.local/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2; do [ -e \"$f\" ] || continue; r=$(readlink -f \"$f\"); \
         case \" $* \" in *\" $r \"*) continue;; esac; set -- \"$@\" \"$r\"; \
         v=${r##*libnccl.so.}; case \"$v\" in *.*.*) ;; *) v=$(grep -a -o -m 1 -E '[0-9]+\\.[0-9]+\\.[0-9]+\\+cuda[0-9]+\\.[0-9]+' \"$r\" | head -n 1);; esac; \
         echo \"nccl $r ${v:-unknown}\"; done; \
         for f in /var/lib/tcpx/lib64/libnccl-net.so /var/lib/tcpxo/lib64/libnccl-net.so /usr/local/gib/lib64/libnccl-net.so; do \
         [ -e \"$f\" ] && echo \"plugin $f $(sha256sum < \"$f\" | cut -c1-12)\"; done; e versions 0;",
    );
    // The kernel log since boot: dmesg (as root or where dmesg_restrict is off), sudo, or
    // the journal, streamed through one awk (not held in a shell variable); only the
    // NVIDIA driver's lines travel (the last 64). No line at all: not readable.
    small(
        &mut s,
        "xid",
        "{ dmesg 2>/dev/null || sudo -n dmesg 2>/dev/null || journalctl -k -b -q --no-pager 2>/dev/null; } | \
         awk '/NVRM: Xid|fallen off the bus/ { l[n++ % 64] = $0 } END { if (NR == 0) { print \"kernel log: not readable (dmesg, sudo -n dmesg and journalctl -k all failed)\"; exit 1 } \
         for (i = (n > 64 ? n - 64 : 0); i < n; i++) print l[i % 64] }'; e xid $?;",
    );
    s.push_str("if command -v nvidia-smi >/dev/null 2>&1; then\n");
    section(&mut s, "smi", "nvidia-smi 2>&1; e smi $?;");
    section(
        &mut s,
        "gpus",
        &format!(
            "nvidia-smi --query-gpu={} --format=csv 2>&1; e gpus $?;",
            super::gpu::QUERY_FIELDS
        ),
    );
    section(&mut s, "topo", "nvidia-smi topo -m 2>&1; e topo $?;");
    section(&mut s, "nvlink", "nvidia-smi nvlink -s 2>&1; e nvlink $?;");
    // The compute processes on the GPUs (`--query-compute-apps`, the fields of
    // `nvidia-smi --help-query-compute-apps`), each with its session, user, age and
    // command from `ps`, and flightdeck's detached work still running in the login's
    // home (`~/.flightdeck/jobs/ID/RANK/pid`, `~/.flightdeck/runs/ID/pid`: the session
    // leader of each, [`crate::detach`]), to tell a job's processes from a stray one.
    // nvidia-smi's output is cut at the cap as every section's (one that prints without
    // end is stopped), and a cut one is a failed one.
    section(
        &mut s,
        "procs",
        &format!(
            "q=$({{ nvidia-smi --query-compute-apps={} --format=csv,noheader 2>&1; echo \"@rc=$?\"; }} | cap); \
             case \"$q\" in *'@rc=0') ok=1; q=${{q%@rc=0}};; *) ok=0; q=${{q%@rc=*}};; esac; \
             if [ $ok = 1 ]; then case $q in *[0-9]*) \
             printf '%s\\n' \"$q\" | grep -v '^ *$' | sed 's/^/app /'; \
             for p in $(printf '%s\\n' \"$q\" | cut -s -d, -f2); do case $p in *[!0-9]*|'') continue;; esac; \
             ps -o pid=,sid=,user=,etimes=,args= -p $p 2>/dev/null | sed 's/^ */ps /'; \
             tr '\\0' '\\n' < /proc/$p/environ 2>/dev/null | awk -v p=$p '/^FLIGHTDECK_(JOB|RUN)_ID=/ {{ print \"env \" p \" \" $0 }}'; done; \
             for f in \"$HOME\"/.flightdeck/jobs/*/*/pid \"$HOME\"/.flightdeck/runs/*/pid; do [ -f \"$f\" ] && [ ! -f \"${{f%/pid}}/exit_code\" ] && echo \"fd ${{f%/pid}} $(cat \"$f\")\"; done;; esac; \
             e procs 0; else printf '%s\\n' \"$q\"; e procs 1; fi;",
            super::gpu::APPS_FIELDS
        ),
    );
    s.push_str("else b smi; echo 'nvidia-smi: not found'; e smi 127; fi\n");
    if let Some(p) = preflight {
        // The pre-flight's own checks, as the NCCL runs' pre-flight makes them.
        section(&mut s, "gpudirect", &format!("\n{p}\ne gpudirect 0;"));
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

/// Where a node's output was cut.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cuts {
    /// Sections cut here at [`SECTION_CAP`]: name, bytes more not read.
    pub sections: Vec<(String, u64)>,
    /// Sections the node script cut at the cap (the rest was never sent).
    pub on_node: Vec<String>,
    /// The node's output passed [`NODE_CAP`]: bytes dropped unread after it.
    pub node: Option<u64>,
}

impl Cuts {
    pub fn is_empty(&self) -> bool {
        self.sections.is_empty() && self.on_node.is_empty() && self.node.is_none()
    }

    /// The cuts of `section`, as evidence lines.
    pub fn of(&self, section: &str) -> Vec<String> {
        let kib = SECTION_CAP / 1024;
        if self.on_node.iter().any(|s| s == section) {
            return vec![format!(
                "{section}: output cut at {kib} KiB on the node … the rest not read"
            )];
        }
        self.sections
            .iter()
            .filter(|(s, _)| s == section)
            .map(|(_, n)| format!("{section}: output cut at {kib} KiB … {n} bytes more not read"))
            .collect()
    }

    /// The sections cut, here or on the node, in the order they came.
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = vec![];
        for s in self.sections.iter().map(|(s, _)| s).chain(&self.on_node) {
            if !names.contains(&s.as_str()) {
                names.push(s);
            }
        }
        names
    }

    /// Every cut, as evidence lines.
    pub fn lines(&self) -> Vec<String> {
        let mut out: Vec<String> = self.names().iter().flat_map(|s| self.of(s)).collect();
        if let Some(n) = self.node {
            out.push(format!(
                "the node's output passed {} MiB … {n} bytes more not read",
                NODE_CAP / (1024 * 1024)
            ));
        }
        out
    }
}

/// A node's output read into sections as it arrives, in bounded memory: at most
/// [`SECTION_CAP`] of each section is kept (the rest counted), and nothing once the
/// node's output passed [`NODE_CAP`]. Lines outside sections are counted, not kept.
#[derive(Debug, Default)]
pub struct Reader {
    map: BTreeMap<String, (String, i32)>,
    current: Option<(String, String)>,
    cuts: Cuts,
    /// Bytes of output read so far.
    read: u64,
    /// The node's uptime at each section's begin, and each ended section's (name, begin,
    /// end), in seconds, as the marks carry them.
    begun: Option<(String, f64)>,
    times: Vec<(String, f64, f64)>,
}

impl Reader {
    /// Whether the node's output passed [`NODE_CAP`] (nothing more is kept).
    pub fn full(&self) -> bool {
        self.read > NODE_CAP
    }

    /// Where the node script's time went: each section's time on the node (from its
    /// begin to its end, in ms, by the node's uptime at 10 ms resolution) in the order
    /// they ran, and the whole script's (from the first mark to the last end).
    pub fn timing(&self) -> (Vec<(String, u64)>, Option<u64>) {
        let ms = |s: f64| (s * 1000.0).round().max(0.0) as u64;
        let each = self
            .times
            .iter()
            .map(|(n, b, e)| (n.clone(), ms(e - b)))
            .collect();
        let whole = match (
            self.times.first(),
            self.times.iter().map(|t| t.2).reduce(f64::max),
        ) {
            (Some(first), Some(last)) => Some(ms(last - first.1)),
            _ => None,
        };
        (each, whole)
    }

    /// Whether section `name` has ended (its `end` read).
    pub fn ended(&self, name: &str) -> bool {
        self.map.contains_key(name)
    }

    /// The sections ended so far.
    pub fn so_far(&self) -> Sections {
        Sections(self.map.clone())
    }

    /// Read `text`, whole lines.
    pub fn push(&mut self, text: &str) {
        if self.full() {
            *self.cuts.node.get_or_insert(0) += text.len() as u64;
            return;
        }
        for line in text.lines() {
            let size = line.len() as u64 + 1;
            if self.full() {
                *self.cuts.node.get_or_insert(0) += size;
                continue;
            }
            self.read += size;
            if self.full() {
                // The line that passed the cap is not kept either.
                *self.cuts.node.get_or_insert(0) += size;
                continue;
            }
            self.line(line);
        }
    }

    fn close(&mut self, code: i32) {
        if let Some((n, t)) = self.current.take() {
            self.map.insert(n, (t, code));
        }
    }

    fn line(&mut self, line: &str) {
        if let Some(rest) = line.strip_prefix(MARK).and_then(|r| r.strip_prefix(' ')) {
            let mut p = rest.split(' ');
            match (p.next(), p.next()) {
                (Some("begin"), Some(name)) => {
                    self.close(-1);
                    self.current = Some((name.to_string(), String::new()));
                    self.begun = p.next().and_then(uptime).map(|t| (name.to_string(), t));
                }
                (Some("end"), Some(name)) => {
                    let code = p.next().and_then(|c| c.parse().ok()).unwrap_or(-1);
                    let same = self.current.as_ref().is_some_and(|(n, _)| n == name);
                    if let (Some((begun, at)), Some(end)) = (&self.begun, p.next().and_then(uptime)) {
                        if begun == name && self.times.len() < 64 {
                            self.times.push((name.to_string(), *at, end));
                        }
                    }
                    self.close(if same { code } else { -1 });
                }
                // Its output ended before its `end`: the node script's cap cut it.
                (Some("after"), Some(name)) if self.current.as_ref().is_some_and(|(n, _)| n == name) => {
                    self.close(-1);
                    if !self.cuts.on_node.iter().any(|s| s == name) {
                        self.cuts.on_node.push(name.to_string());
                    }
                }
                _ => {}
            }
            return;
        }
        let Some((name, t)) = self.current.as_mut() else {
            return;
        };
        let cut = self.cuts.sections.iter_mut().find(|(s, _)| s == name);
        let size = line.len() + 1;
        match cut {
            Some((_, n)) => *n += size as u64,
            None if t.len() + size > SECTION_CAP => {
                self.cuts.sections.push((name.clone(), size as u64));
            }
            None => {
                t.push_str(line);
                t.push('\n');
            }
        }
    }

    /// The sections read; a section without its end (the node went away, or its output
    /// was cut) keeps what arrived, with status -1.
    pub fn finish(mut self) -> (Sections, Cuts) {
        self.close(-1);
        if let Some((t, _)) = self.map.get_mut("topo") {
            *t = topo_bounded(t);
        }
        (Sections(self.map), self.cuts)
    }
}

/// A mark's uptime (`/proc/uptime`'s first number, seconds): a plain decimal, else none.
fn uptime(t: &str) -> Option<f64> {
    if t.is_empty() || t.len() > 24 || !t.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    t.parse().ok().filter(|v: &f64| v.is_finite())
}

/// The most lines of `topo -m` read, and the longest: a real matrix of an 8-GPU node
/// with its NICs is some 30 lines of 200 bytes; a 16-GPU one with 32 NICs lines of 300.
const TOPO_LINES: usize = 128;
const TOPO_LINE: usize = 1024;

/// `topo -m` as the parser reads it: the first [`TOPO_LINES`] lines no longer than
/// [`TOPO_LINE`] (a longer one is left out). The parser keeps a string per cell; this
/// bounds them to about 64 thousand, whatever the node printed.
fn topo_bounded(text: &str) -> String {
    let mut out = String::new();
    for l in text.lines().take(TOPO_LINES) {
        if l.len() <= TOPO_LINE {
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

/// The sections of a node's output ([`Reader`]'s bounds apply).
pub fn parse(out: &str) -> Sections {
    let mut r = Reader::default();
    r.push(out);
    r.finish().0
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
            "nccl-res",
            "versions",
            "gpudirect",
        ] {
            assert!(s.0.contains_key(name), "section {name} missing: {:?}", s.0.keys());
        }
        // This machine's /dev/shm, read as the check reads it.
        let res = super::super::nccl_init::parse_resources(s.get("nccl-res").unwrap());
        assert!(
            res.shm.is_some() || res.shm_problem.is_some(),
            "{:?}",
            s.get("nccl-res")
        );
        assert!(res.memlock.is_some(), "{:?}", s.get("nccl-res"));
        assert!(s.get("nics").unwrap().lines().any(|l| l.starts_with("lo ")));
        assert!(s.get("time").unwrap().trim().parse::<u128>().is_ok());
        assert!(s.get("sysctl").unwrap().contains("net.core.rmem_max = "));
        assert_eq!(gpudirect_checks(&s).unwrap().len(), 1);
    }

    /// The script under `sh -s` with `bin` first on PATH.
    fn run_with(bin: &std::path::Path) -> (String, std::time::Duration) {
        use std::io::Write;
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
        let t = std::time::Instant::now();
        let mut child = std::process::Command::new("sh")
            .arg("-s")
            .env("PATH", path)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(script(None).as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        (String::from_utf8_lossy(&out.stdout).into_owned(), t.elapsed())
    }

    #[test]
    fn each_section_is_timed_on_the_node() {
        let out = crate::bootstrap::tests::sh_stdin(&script(None));
        let mut r = Reader::default();
        r.push(&String::from_utf8_lossy(&out.stdout));
        let (each, whole) = r.timing();
        let names: Vec<&str> = each.iter().map(|(n, _)| n.as_str()).collect();
        for name in [
            "time",
            "tools",
            "nics",
            "addrs",
            "rdma",
            "nccl-env",
            "net-ready",
            "sysctl",
            "versions",
            "xid",
        ] {
            assert!(names.contains(&name), "{name} not timed: {names:?}");
        }
        let sum: u64 = each.iter().map(|(_, ms)| ms).sum();
        assert!(
            whole.unwrap() >= sum.saturating_sub(each.len() as u64 * 10),
            "{whole:?} {each:?}"
        );
        // Marks without times (an older script, a node without /proc) time nothing.
        let mut r = Reader::default();
        r.push("@@fd-doctor begin a\nx\n@@fd-doctor end a 0\n@@fd-doctor begin b -\n@@fd-doctor end b 0 -\n");
        assert_eq!(r.timing(), (vec![], None));
        let mut r = Reader::default();
        r.push("@@fd-doctor begin a 100.25\n@@fd-doctor end a 0 100.75\n@@fd-doctor begin b 101.00\n@@fd-doctor end b 0 103.5\n");
        assert_eq!(
            r.timing(),
            (vec![("a".into(), 500), ("b".into(), 2500)], Some(3250))
        );
        let (s, _) = r.finish();
        assert_eq!(s.status("b"), Some(0));
    }

    /// The pip wheel's NCCL (`nvidia-nccl-cu12`) is found by its path in the python3 on
    /// PATH's prefix, without starting python (a python3 here records being run).
    #[test]
    fn versions_find_the_wheels_nccl_without_python() {
        use std::os::unix::fs::PermissionsExt;
        let venv = tempfile::tempdir().unwrap();
        let bin = venv.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let ran = venv.path().join("python-ran");
        let py = bin.join("python3");
        std::fs::write(&py, format!("#!/bin/sh\n: > '{}'\nexit 1\n", ran.display())).unwrap();
        std::fs::set_permissions(&py, std::fs::Permissions::from_mode(0o755)).unwrap();
        let lib = venv.path().join("lib/python3.12/site-packages/nvidia/nccl/lib");
        std::fs::create_dir_all(&lib).unwrap();
        std::fs::write(
            lib.join("libnccl.so.2"),
            b"\x7fELF junk NCCL version 2.21.5+cuda12.4 more",
        )
        .unwrap();
        let (out, _) = run_with(&bin);
        let s = parse(&out);
        let want = format!("nccl {} 2.21.5+cuda12.4", lib.join("libnccl.so.2").display());
        assert!(
            s.get("versions").unwrap().lines().any(|l| l == want),
            "{want} not in {:?}",
            s.get("versions")
        );
        assert!(!ran.exists(), "python3 was run");
    }

    /// A GPU process with an NCCL run's id in its environment (a rank mpirun started on
    /// this node: no session of a run here) is the run's.
    #[test]
    fn a_rank_of_a_run_is_known_by_its_environment() {
        use std::os::unix::fs::PermissionsExt;
        let mut rank = std::process::Command::new("sleep")
            .arg("30")
            .env("FLIGHTDECK_RUN_ID", "nccl-all_reduce-1-abcd")
            .spawn()
            .unwrap();
        let bin = tempfile::tempdir().unwrap();
        let smi = bin.path().join("nvidia-smi");
        std::fs::write(
            &smi,
            format!(
                "#!/bin/sh\ncase \"$1\" in --query-compute-apps=*) echo 'GPU-1, {}, 1024 MiB';; *) echo \"$*\";; esac\n",
                rank.id()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&smi, std::fs::Permissions::from_mode(0o755)).unwrap();
        let (out, _) = run_with(bin.path());
        rank.kill().unwrap();
        rank.wait().unwrap();
        let s = parse(&out);
        let procs = super::super::gpu::parse_procs(s.get("procs").unwrap());
        assert_eq!(procs.len(), 1, "{:?}", s.get("procs"));
        assert_eq!(
            procs[0].owner.as_deref(),
            Some("run nccl-all_reduce-1-abcd"),
            "{procs:?}"
        );
    }

    #[test]
    fn a_runaway_nvidia_smi_is_cut_on_the_node_and_the_checks_go_on() {
        use std::os::unix::fs::PermissionsExt;
        let bin = tempfile::tempdir().unwrap();
        let smi = bin.path().join("nvidia-smi");
        // Endless for the banner, one line for the rest.
        std::fs::write(
            &smi,
            "#!/bin/sh\nif [ $# -eq 0 ]; then exec yes 'GPU flood 0123456789abcdef'; fi\necho \"$*\"\n",
        )
        .unwrap();
        std::fs::set_permissions(&smi, std::fs::Permissions::from_mode(0o755)).unwrap();
        let (out, took) = run_with(bin.path());
        assert!(took < std::time::Duration::from_secs(20), "{took:?}");
        let mut r = Reader::default();
        r.push(&out);
        assert!(!r.full());
        let (s, cuts) = r.finish();
        assert!(cuts.on_node.contains(&"smi".to_string()), "{cuts:?}");
        assert!(s.get("smi").unwrap().len() <= SECTION_CAP);
        assert_eq!(s.status("smi"), Some(-1));
        assert_eq!(s.status("gpus"), Some(0), "the next sections ran");
        assert!(s.get("sysctl").unwrap().contains("net.core.rmem_max = "));
        assert!(cuts
            .lines()
            .iter()
            .any(|l| l == "smi: output cut at 256 KiB on the node … the rest not read"));
    }

    #[test]
    fn sections_and_the_node_are_read_in_bounded_memory() {
        let line = format!("{}\n", "x".repeat(999));
        let mut r = Reader::default();
        r.push("@@fd-doctor begin smi\n");
        for _ in 0..1000 {
            r.push(&line);
        }
        r.push("@@fd-doctor end smi 0\n@@fd-doctor begin gpus\nGPU 0\n@@fd-doctor end gpus 0\n");
        assert!(!r.full());
        let (s, cuts) = r.finish();
        assert_eq!(s.get("smi").unwrap().len(), 262 * 1000);
        assert_eq!(s.status("smi"), Some(0));
        assert_eq!(s.get("gpus"), Some("GPU 0\n"));
        assert_eq!(cuts.sections, vec![("smi".to_string(), 738_000)]);
        assert_eq!(
            cuts.of("smi"),
            vec!["smi: output cut at 256 KiB … 738000 bytes more not read"]
        );

        // A node past the cap: nothing more kept, what came after counted.
        let mut r = Reader::default();
        r.push("@@fd-doctor begin a\n");
        let chunk = line.repeat(64);
        for _ in 0..200 {
            r.push(&chunk);
        }
        assert!(r.full());
        let (s, cuts) = r.finish();
        assert!(s.get("a").unwrap().len() <= SECTION_CAP);
        let read = 200 * 64 * 1000 + 20;
        assert!(cuts.node.unwrap() >= read - NODE_CAP - 64_000, "{cuts:?}");
        assert!(cuts
            .lines()
            .last()
            .unwrap()
            .starts_with("the node's output passed 4 MiB … "));
    }

    #[test]
    fn the_topo_matrix_the_parser_sees_is_bounded() {
        let n = 3000;
        let header: String = (0..n).map(|i| format!("\tGPU{i}")).collect();
        let mut text = format!("@@fd-doctor begin topo\n{header}\n");
        for i in 0..200 {
            text.push_str(&format!("GPU{i}{}\n", "\tNV18".repeat(n)));
        }
        text.push_str("@@fd-doctor end topo 0\n");
        let s = parse(&text);
        let t = s.get("topo").unwrap();
        assert!(t.len() <= TOPO_LINES * (TOPO_LINE + 1), "{}", t.len());
        assert!(t.lines().all(|l| l.len() <= TOPO_LINE));
        assert!(
            super::super::gpu::parse_topo(t).is_none(),
            "no header line survives: no matrix"
        );
        // A real matrix passes whole.
        let real = include_str!("../../tests/fixtures/doctor/h200x2/topo-m.txt");
        let real: String = real.lines().map(|l| format!("{l}\n")).collect();
        assert_eq!(topo_bounded(&real), real);
    }

    #[test]
    fn a_cut_off_section_keeps_what_arrived() {
        let s = parse("@@fd-doctor begin a\nx\n@@fd-doctor end a 0\n@@fd-doctor begin b\ny\n");
        assert_eq!(s.0["a"], ("x\n".into(), 0));
        assert_eq!(s.0["b"], ("y\n".into(), -1));
    }
}
