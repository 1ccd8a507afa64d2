//! The SSH testbed: N "nodes", each a network namespace running OpenSSH's sshd, with a
//! control NIC and K data NICs (veth pairs on one bridge per rail, like GCP's multi-NIC
//! VMs), and a bastion namespace that alone can reach them.
//!
//! ```text
//!  test process (root ns) ── 10.88.255.(4k+1)/30 ═ .(4k+2) ── bastion ns (sshd)
//!                                                               │ 10.88.0.254
//!           switch ns:  br0 (control 10.88.0.0/24)  br1..brK (rail r: 10.88.r.0/24; past
//!                                                     253 nodes a /22 each, [`data_addr`])
//!                          │                          │
//!  node i ns (sshd):  eth0 10.88.0.(i+1)      ethr 10.88.r.(i+1)
//! ```
//! Addresses stay inside 10.88.0.0/16, which exists only in these namespaces and the one
//! /30 link to the bastion; no traffic goes anywhere else. Host and user keys are
//! generated per testbed. Everything is torn down on drop (also when a test panics), and
//! leftovers of a killed run (names carry the pid) are removed at the next start.
//!
//! Needs root. Under CI (`CI` set) a testbed that cannot be built fails the test loudly;
//! elsewhere [`Testbed::new`] returns `None` after printing why, and the test returns.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct TbNode {
    pub name: String,
    pub ns: String,
    /// The address the bastion reaches this node's sshd on.
    pub addr: String,
    pub data_addrs: Vec<String>,
    pub host_key_pub: String,
    dir: PathBuf,
    sshd: Option<Child>,
    /// The node's own home for root (bind-mounted over /root for its sshd and sessions),
    /// when the testbed was built with private homes.
    pub home: Option<PathBuf>,
    /// The node's own system directories (see [`Testbed::new_machines`]): what the node
    /// writes to /etc, /var/lib, /usr/local, /opt, /usr/src, /run and /dev lands here.
    pub root: Option<PathBuf>,
}

/// The system directories a machine node has of its own, bind-mounted from its root.
pub const MACHINE_DIRS: [&str; 7] = ["etc", "var/lib", "usr/local", "opt", "usr/src", "run", "dev"];

/// Commands the bootstrap shims stand in for (tests/support/bootstrap_shims.sh).
pub const SHIMMED: [&str; 18] = [
    "cos-extensions",
    "docker",
    "curl",
    "gpg",
    "apt-get",
    "apt-mark",
    "dpkg",
    "dpkg-deb",
    "dkms",
    "modprobe",
    "udevadm",
    "update-initramfs",
    "ldconfig",
    "systemctl",
    "iptables",
    "git",
    "make",
    "gcloud",
];

pub struct Testbed {
    pub nodes: Vec<TbNode>,
    pub bastion: TbNode,
    /// The user's private key (authorized on every sshd).
    pub user_key: PathBuf,
    /// A known_hosts file with every sshd's host key (bastion and nodes).
    pub known_hosts: PathBuf,
    pub dir: tempfile::TempDir,
    prefix: String,
    switch: String,
}

fn run(cmd: &[&str]) -> Result<String, String> {
    let out = Command::new(cmd[0])
        .args(&cmd[1..])
        .output()
        .map_err(|e| format!("{cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn ns_run(ns: &str, cmd: &[&str]) -> Result<String, String> {
    let mut full = vec!["ip", "netns", "exec", ns];
    full.extend(cmd);
    run(&full)
}

/// A fresh ed25519 host key at `key` (and `key.pub`).
fn new_host_key(key: &Path) -> Result<String, String> {
    run(&[
        "ssh-keygen",
        "-q",
        "-t",
        "ed25519",
        "-N",
        "",
        "-f",
        key.to_str().unwrap(),
    ])
}

/// Node `i`'s address on rail `r` of a testbed of `n` nodes, with its prefix: 10.88.r.(i+1)/24
/// up to 253 nodes; past them each rail is a /22 of its own in 10.88.200.0/21 and up
/// (rail r: 10.88.(200 + 4(r-1)).0/22, node i its (i+1)th address), clear of the control
/// network's 10.88.0.0/24 and 10.88.100-103.0/24 and the bastions' 10.88.255.0/24.
fn data_addr(n: usize, r: usize, i: usize) -> String {
    if n <= 253 {
        return format!("10.88.{r}.{}/24", i + 1);
    }
    let at = i + 1;
    format!("10.88.{}.{}/22", 200 + 4 * (r - 1) + at / 256, at % 256)
}

/// Node `i`'s control address: 10.88.0.(i+1) for the first 253 nodes, then 10.88.100.x,
/// 10.88.101.x...
fn control_addr(i: usize) -> String {
    if i < 253 {
        format!("10.88.0.{}", i + 1)
    } else {
        format!("10.88.{}.{}", 100 + (i - 253) / 253, (i - 253) % 253 + 1)
    }
}

/// Kill every process in a network namespace (pkill would match other namespaces too).
fn kill_ns_processes(ns: &str) {
    if let Ok(pids) = run(&["ip", "netns", "pids", ns]) {
        for p in pids.split_whitespace() {
            let _ = run(&["kill", "-9", p]);
        }
    }
}

fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Remove namespaces left by testbeds whose process is gone.
fn clean_leftovers() {
    let Ok(list) = run(&["ip", "netns", "list"]) else {
        return;
    };
    for line in list.lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(rest) = name.strip_prefix("fdtb") else {
            continue;
        };
        let pid: u32 = rest.split('-').next().and_then(|p| p.parse().ok()).unwrap_or(0);
        if pid != 0 && !pid_alive(pid) {
            delete_ns(name);
        }
    }
}

fn delete_ns(name: &str) {
    kill_ns_processes(name);
    let _ = run(&["ip", "netns", "del", name]);
}

impl Testbed {
    /// Build a testbed of `n` nodes with `k` data NICs each, or explain why not.
    pub fn new(n: usize, k: usize) -> Option<Testbed> {
        Self::new_with(n, k, Homes::Host, false)
    }

    /// Like [`Testbed::new`], but each node is a machine of its own to install on: its
    /// sshd runs in a mount namespace where /etc (a copy of this machine's), /var/lib,
    /// /usr/local, /opt, /usr/src, /run and /dev (the few devices a login needs) are
    /// directories of the node ([`TbNode::root`]), and the commands that would reach
    /// outside (apt repositories, container pulls, kernel modules, udev, iptables) are
    /// the recording shims of tests/support/bootstrap_shims.sh in its /usr/local/bin.
    /// What a node installs survives a restart of its sshd, as a disk does.
    pub fn new_machines(n: usize, k: usize) -> Option<Testbed> {
        Self::new_with(n, k, Homes::Host, true)
    }

    /// Machines ([`Testbed::new_machines`]) that also have a home for root of their own
    /// ([`Testbed::new_private_homes`]): what flightdeck sets up between the nodes for
    /// mpirun (keys, known_hosts, authorized_keys) is per node, as on real machines.
    pub fn new_machines_with_homes(n: usize, k: usize) -> Option<Testbed> {
        Self::new_with(n, k, Homes::Private, true)
    }

    /// Machines ([`Testbed::new_machines`]) that share one home for root, a directory of
    /// the testbed bind-mounted over /root on every node: a home on NFS or Filestore, as
    /// Google's A4 and A3 Mega blueprints put /home (Cluster Toolkit's `homefs`). What one
    /// node writes under `~` the others see at once.
    pub fn new_machines_shared_home(n: usize, k: usize) -> Option<Testbed> {
        Self::new_with(n, k, Homes::Shared, true)
    }

    /// Like [`Testbed::new`], but each node has its own home for root (a directory of the
    /// testbed bind-mounted over /root in a mount namespace of its sshd), as separate
    /// machines have: what one node writes under `~` the others do not see, and
    /// `~/.ssh/authorized_keys` is read besides the testbed's user key.
    pub fn new_private_homes(n: usize, k: usize) -> Option<Testbed> {
        Self::new_with(n, k, Homes::Private, false)
    }

    fn new_with(n: usize, k: usize, homes: Homes, machines: bool) -> Option<Testbed> {
        match Self::build(n, k, homes, machines) {
            Ok(tb) => Some(tb),
            Err(why) => super::cannot_run(&format!(
                "the SSH testbed (root, ip netns and sshd) could not be built: {why}"
            )),
        }
    }

    fn build(n: usize, k: usize, homes: Homes, machines: bool) -> Result<Testbed, String> {
        assert!(n <= 4 * 253 && k <= 8, "testbed size");
        if unsafe_geteuid() != 0 {
            return Err("not running as root".into());
        }
        for tool in ["ip", "ssh-keygen"] {
            run(&["sh", "-c", &format!("command -v {tool}")]).map_err(|_| format!("{tool} not found"))?;
        }
        if !Path::new("/usr/sbin/sshd").exists() {
            return Err("/usr/sbin/sshd not found (apt-get install openssh-server)".into());
        }
        std::fs::create_dir_all("/run/sshd").map_err(|e| e.to_string())?;
        clean_leftovers();
        static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let prefix = format!("fdtb{}-{seq}", std::process::id());
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let switch = format!("{prefix}-sw");
        let mut tb = Testbed {
            nodes: vec![],
            bastion: TbNode {
                name: "bastion".into(),
                ns: format!("{prefix}-b"),
                addr: "10.88.255.2".into(),
                data_addrs: vec![],
                host_key_pub: String::new(),
                dir: dir.path().join("bastion"),
                sshd: None,
                home: None,
                root: None,
            },
            user_key: dir.path().join("id_ed25519"),
            known_hosts: dir.path().join("known_hosts"),
            dir,
            prefix: prefix.clone(),
            switch: switch.clone(),
        };
        // From here on, Drop cleans up whatever was made.
        run(&[
            "ssh-keygen",
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            "flightdeck-testbed",
            "-f",
            tb.user_key.to_str().unwrap(),
        ])?;
        std::fs::copy(
            tb.user_key.with_extension("pub"),
            tb.dir.path().join("authorized_keys"),
        )
        .map_err(|e| e.to_string())?;

        run(&["ip", "netns", "add", &switch])?;
        ns_run(&switch, &["ip", "link", "set", "lo", "up"])?;
        for r in 0..=k {
            let br = format!("br{r}");
            ns_run(&switch, &["ip", "link", "add", &br, "type", "bridge"])?;
            ns_run(&switch, &["ip", "link", "set", &br, "up"])?;
        }
        // The bastion: one leg to the test process, one on the control bridge.
        let b = tb.bastion.ns.clone();
        run(&["ip", "netns", "add", &b])?;
        ns_run(&b, &["ip", "link", "set", "lo", "up"])?;
        // Each testbed (several run at once) gets its own /30 in 10.88.255.0/24 for the
        // link from the test process to its bastion.
        let slot = {
            static ALLOC: std::sync::Mutex<()> = std::sync::Mutex::new(());
            let _guard = ALLOC.lock().unwrap_or_else(|p| p.into_inner());
            let used = run(&["ip", "-4", "-o", "addr", "show"])?;
            // Start from a slot picked by pid and sequence: concurrent processes rarely
            // race for the same one.
            let start = (std::process::id().wrapping_mul(7) + seq as u32) % 64;
            let slot = (0..64u32)
                .map(|k| (start + k) % 64)
                .find(|k| !used.contains(&format!("10.88.255.{}/30", 4 * k + 1)))
                .ok_or("no free /30 left in 10.88.255.0/24")?;
            let host_if = format!("fdtb{}x{seq}", std::process::id() % 100000);
            run(&[
                "ip", "link", "add", &host_if, "type", "veth", "peer", "name", "up0", "netns", &b,
            ])?;
            run(&[
                "ip",
                "addr",
                "add",
                &format!("10.88.255.{}/30", 4 * slot + 1),
                "dev",
                &host_if,
            ])?;
            run(&["ip", "link", "set", &host_if, "up"])?;
            slot
        };
        tb.bastion.addr = format!("10.88.255.{}", 4 * slot + 2);
        ns_run(
            &b,
            &[
                "ip",
                "addr",
                "add",
                &format!("{}/30", tb.bastion.addr),
                "dev",
                "up0",
            ],
        )?;
        ns_run(&b, &["ip", "link", "set", "up0", "up"])?;
        Self::attach(&switch, &b, "eth0", "bz0", "br0", "10.88.0.254/24")?;
        // The kernel's ARP table is one for every namespace: each node and the bastion
        // hold an entry for the other, and on each data rail a node holds one for every
        // peer it has talked to (the doctor's probe rounds: a new peer each round). Past
        // the default limits (512 soft, 1024 hard, shared by all) the kernel drops
        // entries ("neighbor table overflow" in dmesg) and a pair that was fine stops
        // answering: a 64-node fleet with 2 data NICs reached them in the doctor's rounds,
        // and its probes between two healthy nodes were lost. Raised to what the testbed
        // can need (16 peers a node on every network), never lowered.
        let need = (k + 1) * n.max(8);
        for (key, v) in [
            ("gc_thresh1", 4 * need),
            ("gc_thresh2", 8 * need),
            ("gc_thresh3", 16 * need),
        ] {
            let key = format!("/proc/sys/net/ipv4/neigh/default/{key}");
            let now: usize = std::fs::read_to_string(&key)
                .ok()
                .and_then(|t| t.trim().parse().ok())
                .unwrap_or(0);
            if now < v {
                std::fs::write(&key, v.to_string()).map_err(|e| format!("{key}: {e}"))?;
            }
        }
        // Past 253 nodes the control network goes on in 10.88.100.0/24, 10.88.101.0/24...
        // on the same bridge; the bastion has .254 in each.
        for j in 0..n.saturating_sub(1) / 253 {
            ns_run(
                &b,
                &[
                    "ip",
                    "addr",
                    "add",
                    &format!("10.88.{}.254/24", 100 + j),
                    "dev",
                    "eth0",
                ],
            )?;
        }
        for i in 0..n {
            let ns = format!("{prefix}-n{i}");
            run(&["ip", "netns", "add", &ns])?;
            ns_run(&ns, &["ip", "link", "set", "lo", "up"])?;
            let addr = control_addr(i);
            Self::attach(
                &switch,
                &ns,
                "eth0",
                &format!("c{i}"),
                "br0",
                &format!("{addr}/24"),
            )?;
            let mut data = vec![];
            for r in 1..=k {
                let a = data_addr(n, r, i);
                Self::attach(
                    &switch,
                    &ns,
                    &format!("eth{r}"),
                    &format!("d{i}r{r}"),
                    &format!("br{r}"),
                    &a,
                )?;
                let a = a.split('/').next().unwrap().to_string();
                data.push(a);
            }
            tb.nodes.push(TbNode {
                name: format!("node{i}"),
                ns,
                addr,
                data_addrs: data,
                host_key_pub: String::new(),
                dir: tb.dir.path().join(format!("node{i}")),
                sshd: None,
                home: match homes {
                    Homes::Host => None,
                    Homes::Private => Some(tb.dir.path().join(format!("node{i}/home"))),
                    Homes::Shared => Some(tb.dir.path().join("shared-home")),
                },
                root: machines.then(|| tb.dir.path().join(format!("node{i}/root"))),
            });
        }
        let auth = tb.dir.path().join("authorized_keys");
        let mut known = String::new();
        for node in tb.nodes.iter_mut().chain(std::iter::once(&mut tb.bastion)) {
            node.setup_sshd(&auth)?;
            known.push_str(&format!("{} {}\n", node.addr, node.host_key_pub));
        }
        std::fs::write(&tb.known_hosts, known).map_err(|e| e.to_string())?;
        for node in tb.nodes.iter_mut().chain(std::iter::once(&mut tb.bastion)) {
            node.start_sshd()?;
        }
        tb.bastion.wait_listening()?;
        for i in 0..tb.nodes.len() {
            tb.nodes[i].wait_listening()?;
        }
        Ok(tb)
    }

    /// A veth from `ns`'s `ifname` to bridge `br` in the switch namespace.
    fn attach(switch: &str, ns: &str, ifname: &str, peer: &str, br: &str, cidr: &str) -> Result<(), String> {
        ns_run(
            switch,
            &[
                "ip", "link", "add", peer, "type", "veth", "peer", "name", ifname, "netns", ns,
            ],
        )?;
        ns_run(switch, &["ip", "link", "set", peer, "master", br])?;
        ns_run(switch, &["ip", "link", "set", peer, "up"])?;
        ns_run(ns, &["ip", "addr", "add", cidr, "dev", ifname])?;
        ns_run(ns, &["ip", "link", "set", ifname, "up"])?;
        Ok(())
    }

    /// Rename node `i`'s NIC `from` to `to` (as an image names it: `enp6s0`, ...), with an
    /// MTU when given. Addresses stay. Before anything is connected to the node.
    pub fn rename_nic(&self, i: usize, from: &str, to: &str, mtu: Option<u32>) {
        self.node_run(i, &["ip", "link", "set", from, "down"]).unwrap();
        let mut cmd = vec!["ip", "link", "set", from, "name", to];
        let m = mtu.map(|m| m.to_string());
        if let Some(m) = &m {
            cmd.extend(["mtu", m.as_str()]);
        }
        self.node_run(i, &cmd).unwrap();
        self.node_run(i, &["ip", "link", "set", to, "up"]).unwrap();
    }

    /// Take `tool` (`ping`) away from machine node `i`, as a minimal image lacks it: in
    /// its sshd's mount namespace each system directory holding it gets an overlay that
    /// hides it (a whiteout), so `command -v` finds nothing in its sessions. Other nodes
    /// and this machine keep it.
    pub fn remove_command(&self, i: usize, tool: &str) {
        let node = &self.nodes[i];
        let pid = node.sshd.as_ref().expect("a running sshd").id().to_string();
        assert!(
            node.root.is_some(),
            "a machine node (its sshd has a mount namespace)"
        );
        for dir in ["/usr/bin", "/usr/sbin", "/bin", "/sbin"] {
            let path = Path::new(dir).join(tool);
            let real = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.into());
            if !path.exists() || real != Path::new(dir) {
                continue; // not there, or /bin -> usr/bin (the overlay of its target hides it)
            }
            let ov = node
                .dir
                .join(format!("ov-{}", dir.trim_start_matches('/').replace('/', "-")));
            let (up, work) = (ov.join("up"), ov.join("work"));
            std::fs::create_dir_all(&up).unwrap();
            std::fs::create_dir_all(&work).unwrap();
            run(&["mknod", up.join(tool).to_str().unwrap(), "c", "0", "0"]).unwrap();
            let opts = format!(
                "lowerdir={dir},upperdir={},workdir={}",
                up.display(),
                work.display()
            );
            run(&[
                "nsenter", "-t", &pid, "-m", "--", "mount", "-t", "overlay", "overlay", "-o", &opts, dir,
            ])
            .unwrap();
        }
    }

    /// Run `cmd` in machine node `i`'s mount namespace (its sshd's), where its sessions
    /// see what it mounts: a small tmpfs over /dev/shm, as a container's default.
    pub fn node_mount_ns(&self, i: usize, cmd: &[&str]) -> Result<String, String> {
        let node = &self.nodes[i];
        assert!(
            node.root.is_some(),
            "a machine node (its sshd has a mount namespace)"
        );
        let pid = node.sshd.as_ref().expect("a running sshd").id().to_string();
        let mut args = vec!["nsenter", "-t", &pid, "-m", "--"];
        args.extend_from_slice(cmd);
        run(&args)
    }

    /// Run a command inside node `i`'s namespace.
    pub fn node_run(&self, i: usize, cmd: &[&str]) -> Result<String, String> {
        ns_run(&self.nodes[i].ns, cmd)
    }

    pub fn kill_sshd(&mut self, i: usize) {
        self.nodes[i].stop_sshd();
    }

    /// Node `i` vanishes as a machine that dies without a word (a host failure, a VM
    /// gone): its links are cut first, so no FIN or RST reaches anyone, then every process
    /// in it is killed and its namespace removed. Its peers hear only silence.
    pub fn remove_node(&mut self, i: usize) {
        let k = self.nodes[i].data_addrs.len();
        let _ = ns_run(&self.switch, &["ip", "link", "del", &format!("c{i}")]);
        for r in 1..=k {
            let _ = ns_run(&self.switch, &["ip", "link", "del", &format!("d{i}r{r}")]);
        }
        self.nodes[i].stop_sshd();
        delete_ns(&self.nodes[i].ns);
    }

    /// The bastion drops: its sshd and every session through it are killed.
    pub fn kill_bastion(&mut self) {
        self.bastion.stop_sshd();
    }

    /// The bastion is back.
    pub fn start_bastion(&mut self) {
        self.bastion.start_sshd().unwrap();
        self.bastion.wait_listening().unwrap();
    }

    pub fn start_sshd(&mut self, i: usize) {
        self.nodes[i].start_sshd().unwrap();
        self.nodes[i].wait_listening().unwrap();
    }

    /// Set node `i`'s sshd `MaxSessions` (64 unless set; OpenSSH's default is 10) and
    /// restart it.
    pub fn set_max_sessions(&mut self, i: usize, n: u32) {
        let node = &mut self.nodes[i];
        node.stop_sshd();
        let cfg = node.dir.join("sshd_config");
        let text = std::fs::read_to_string(&cfg).unwrap();
        let text: String = text
            .lines()
            .map(|l| {
                if l.starts_with("MaxSessions ") {
                    format!("MaxSessions {n}\n")
                } else {
                    format!("{l}\n")
                }
            })
            .collect();
        std::fs::write(&cfg, text).unwrap();
        node.start_sshd().unwrap();
        node.wait_listening().unwrap();
    }

    /// Replace node `i`'s host key (as a reinstalled machine would have) and restart sshd.
    pub fn change_host_key(&mut self, i: usize) {
        self.change_host_key_to(i, "ed25519");
    }

    /// Give node `i` a new host key of type `kind` (`ed25519`, `ecdsa`, `rsa`) in place
    /// of its own, and restart its sshd.
    pub fn change_host_key_to(&mut self, i: usize, kind: &str) {
        let node = &mut self.nodes[i];
        node.stop_sshd();
        let key = node.dir.join("ssh_host_ed25519_key");
        let _ = std::fs::remove_file(&key);
        let _ = std::fs::remove_file(key.with_extension("pub"));
        run(&[
            "ssh-keygen",
            "-q",
            "-t",
            kind,
            "-N",
            "",
            "-f",
            key.to_str().unwrap(),
        ])
        .unwrap();
        node.start_sshd().unwrap();
        node.wait_listening().unwrap();
    }

    /// A fleet file for the testbed's nodes behind its bastion.
    /// Write [`Testbed::fleet_yaml`] as `<home>/<name>.yaml` and apply it with flightdeck
    /// (HOME = `home`, new host keys accepted); the fleet file's path.
    pub fn apply_fleet(&self, home: &Path, name: &str) -> PathBuf {
        let file = home.join(format!("{name}.yaml"));
        std::fs::write(&file, self.fleet_yaml(name)).unwrap();
        let ok = super::flightdeck(
            home,
            &[
                "fleet",
                "apply",
                file.to_str().unwrap(),
                "--yes",
                "--accept-new-host-keys",
            ],
        );
        assert!(ok.status.success(), "{}", super::text(&ok.stderr));
        file
    }

    pub fn fleet_yaml(&self, name: &str) -> String {
        let hosts: String = self.nodes.iter().map(|n| format!("    - {}\n", n.addr)).collect();
        format!(
            "type: fleet\nname: {name}\nplacement: cluster\nssh_config:\n  user: root\n  identity_file: {key}\n  proxy_jump:\n    hostname: {b}\n    user: root\n    identity_file: {key}\n  hosts:\n{hosts}",
            key = self.user_key.display(),
            b = self.bastion.addr,
        )
    }
}

impl TbNode {
    /// A double of `n` RDMA devices (mlx5_0..) in a machine node's /sys/class/infiniband,
    /// each with its port 1 as the kernel shows a RoCE port that is up: `ports/1/state`
    /// `4: ACTIVE`, `ports/1/link_layer` `Ethernet`. The testbed has no RDMA NICs; this
    /// stands in for A3 Ultra / A4's eight MRDMA NICs.
    pub fn add_rdma_devices(&self, n: usize) {
        let root = self.root.as_ref().expect("a machine node");
        for i in 0..n {
            let port = root.join(format!("sys-class/infiniband/mlx5_{i}/ports/1"));
            std::fs::create_dir_all(&port).unwrap();
            std::fs::write(port.join("state"), "4: ACTIVE\n").unwrap();
            // As the kernel's ib sysfs has it beside `state` (the doctor reads both).
            std::fs::write(port.join("phys_state"), "5: LinkUp\n").unwrap();
            std::fs::write(port.join("link_layer"), "Ethernet\n").unwrap();
        }
    }

    /// Set port 1 of RDMA device `i` (of [`TbNode::add_rdma_devices`]) to `state`, as the
    /// kernel writes it (`1: DOWN`, `4: ACTIVE`).
    pub fn set_rdma_port_state(&self, i: usize, state: &str) {
        let root = self.root.as_ref().expect("a machine node");
        let file = root.join(format!("sys-class/infiniband/mlx5_{i}/ports/1/state"));
        assert!(file.exists(), "no RDMA device mlx5_{i}");
        std::fs::write(file, format!("{state}\n")).unwrap();
    }

    /// A machine node's GPUs: the nvidia-smi double (tests/support/nvidia_smi_double.sh)
    /// with the outputs recorded on 2x H200 in its /var/lib/fd-shim/nvidia-smi/, and the
    /// kernel log double (dmesg_double.sh). What the double prints is [`TbNode::gpu_file`]
    /// and [`TbNode::plant_dmesg`] away from a fault.
    pub fn add_gpu_double(&self) {
        use std::os::unix::fs::PermissionsExt;
        let root = self.root.as_ref().expect("a machine node");
        let dir = root.join("var/lib/fd-shim/nvidia-smi");
        std::fs::create_dir_all(&dir).unwrap();
        let rec = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/doctor/h200x2");
        for f in [
            "nvidia-smi.txt",
            "nvidia-smi-q.txt",
            "topo-m.txt",
            "nvlink-s.txt",
            "query-gpu.csv",
        ] {
            std::fs::copy(rec.join(f), dir.join(f)).unwrap();
        }
        for (name, text) in [
            ("nvidia-smi", include_str!("nvidia_smi_double.sh")),
            ("dmesg", include_str!("dmesg_double.sh")),
        ] {
            let bin = root.join("usr/local/bin").join(name);
            std::fs::write(&bin, text).unwrap();
            std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }

    /// The path of one of the nvidia-smi double's recordings on this node, to edit.
    pub fn gpu_file(&self, name: &str) -> PathBuf {
        self.root
            .as_ref()
            .expect("a machine node")
            .join("var/lib/fd-shim/nvidia-smi")
            .join(name)
    }

    /// A compute process on the node's GPU `gpu` (an index of the recording), as the
    /// nvidia-smi double's `--query-compute-apps` lists it: `pid` holding `mib` MiB.
    /// The process itself is the caller's (a real one, so `ps` on the node shows it).
    pub fn plant_gpu_process(&self, gpu: usize, pid: u32, name: &str, mib: u64) {
        let csv = std::fs::read_to_string(self.gpu_file("query-gpu.csv")).unwrap();
        let uuid = csv
            .lines()
            .skip(1)
            .nth(gpu)
            .and_then(|l| l.split(',').nth(2))
            .map(str::trim)
            .expect("the GPU in the recording")
            .to_string();
        let file = self.gpu_file("compute-apps.csv");
        let mut text = std::fs::read_to_string(&file).unwrap_or_default();
        text.push_str(&format!("{uuid}, {pid}, {name}, {mib} MiB\n"));
        std::fs::write(file, text).unwrap();
    }

    /// The node's double of `name` (`nvidia-smi`, `dmesg`: [`TbNode::add_gpu_double`])
    /// made slow: it waits `secs` before it answers, and while it waits it writes `seen`
    /// (a file) once a `ping` runs in the node's network namespace (the doctor's probes;
    /// other testbeds' pings are in theirs).
    pub fn slow_double(&self, name: &str, secs: u32, seen: &Path) {
        let root = self.root.as_ref().expect("a machine node");
        let bin = root.join("usr/local/bin").join(name);
        let text = std::fs::read_to_string(&bin).expect("the double installed");
        let (shebang, rest) = text.split_once('\n').expect("a script");
        let steps = secs * 10;
        std::fs::write(
            &bin,
            format!(
                "{shebang}\ni=0; while [ $i -lt {steps} ]; do for p in $(pgrep -x ping); do [ /proc/$p/ns/net -ef /proc/$$/ns/net ] && : > '{}'; done; sleep 0.1; i=$((i + 1)); done\n{rest}",
                seen.display()
            ),
        )
        .unwrap();
    }

    /// The node's double of `name` ([`TbNode::add_gpu_double`]) made to wait `secs`, then
    /// run `then` (a shell command, as root on the node), before it answers: a fault or
    /// a load that lasts as long as the node's script does.
    pub fn double_after(&self, name: &str, secs: u32, then: &str) {
        let root = self.root.as_ref().expect("a machine node");
        let bin = root.join("usr/local/bin").join(name);
        let text = std::fs::read_to_string(&bin).expect("the double installed");
        let (shebang, rest) = text.split_once('\n').expect("a script");
        std::fs::write(&bin, format!("{shebang}\nsleep {secs}\n{then}\n{rest}")).unwrap();
    }

    /// Lines the node's kernel log shows (through the dmesg double).
    pub fn plant_dmesg(&self, text: &str) {
        let root = self.root.as_ref().expect("a machine node");
        std::fs::write(root.join("var/lib/fd-shim/dmesg.txt"), text).unwrap();
    }

    fn setup_sshd(&mut self, authorized: &Path) -> Result<(), String> {
        std::fs::create_dir_all(&self.dir).map_err(|e| e.to_string())?;
        let key = self.dir.join("ssh_host_ed25519_key");
        new_host_key(&key)?;
        if let Some(home) = &self.home {
            std::fs::create_dir_all(home).map_err(|e| e.to_string())?;
        }
        if let Some(root) = &self.root {
            make_machine_root(root)?;
        }
        // With a private home, also the home's own authorized_keys, as a machine's sshd.
        let own = if self.home.is_some() {
            " .ssh/authorized_keys"
        } else {
            ""
        };
        let config = format!(
            "Port 22\nListenAddress 0.0.0.0\nHostKey {key}\nPidFile none\nUsePAM no\nPermitRootLogin prohibit-password\n\
             PubkeyAuthentication yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
             AuthorizedKeysFile {auth}{own}\nStrictModes no\nAllowTcpForwarding yes\nX11Forwarding no\nPrintMotd no\n\
             PrintLastLog no\nLogLevel ERROR\nMaxSessions 64\nMaxStartups 200\n",
            key = key.display(),
            auth = authorized.display()
        );
        std::fs::write(self.dir.join("sshd_config"), config).map_err(|e| e.to_string())?;
        let public = std::fs::read_to_string(key.with_extension("pub")).map_err(|e| e.to_string())?;
        // "ssh-ed25519 AAAA... comment" -> "ssh-ed25519 AAAA..."
        self.host_key_pub = public.split_whitespace().take(2).collect::<Vec<_>>().join(" ");
        Ok(())
    }

    fn start_sshd(&mut self) -> Result<(), String> {
        let cfg = self.dir.join("sshd_config");
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.ns]);
        // A node with a home or a root of its own runs its sshd in a mount namespace of
        // its own, after the mounts.
        let mounts = match (&self.home, &self.root) {
            (home, Some(root)) => Some(machine_mounts(root, home.as_deref(), &cfg)),
            (Some(home), None) => Some(format!(
                "mount --bind '{}' /root && exec /usr/sbin/sshd -D -e -f '{}'",
                home.display(),
                cfg.display()
            )),
            (None, None) => None,
        };
        match &mounts {
            Some(script) => cmd.args([
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                script,
            ]),
            None => cmd.args(["/usr/sbin/sshd", "-D", "-e", "-f", cfg.to_str().unwrap()]),
        };
        // sshd's own messages (LogLevel ERROR) go to a file of the node, for failures.
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("sshd.log"))
            .map_err(|e| e.to_string())?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| e.to_string())?;
        self.sshd = Some(child);
        Ok(())
    }

    fn stop_sshd(&mut self) {
        if let Some(mut c) = self.sshd.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        // Sessions sshd forked outlive the listener: end every process of this node.
        kill_ns_processes(&self.ns);
    }

    fn wait_listening(&mut self) -> Result<(), String> {
        let start = Instant::now();
        loop {
            let ss = ns_run(&self.ns, &["ss", "-Hltn", "sport = :22"]).unwrap_or_default();
            if !ss.trim().is_empty() {
                return Ok(());
            }
            if let Some(c) = self.sshd.as_mut() {
                if let Ok(Some(status)) = c.try_wait() {
                    return Err(format!("sshd in {} exited: {status}", self.ns));
                }
            }
            if start.elapsed() > Duration::from_secs(10) {
                return Err(format!("sshd in {} is not listening after 10 s", self.ns));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        for node in self.nodes.iter_mut().chain(std::iter::once(&mut self.bastion)) {
            if let Some(mut c) = node.sshd.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        for node in &self.nodes {
            delete_ns(&node.ns);
        }
        delete_ns(&self.bastion.ns);
        delete_ns(&self.switch);
        let _ = &self.prefix;
    }
}

/// Whose home root's sessions on the nodes have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Homes {
    /// This machine's /root (no mount).
    Host,
    /// One directory per node, over /root.
    Private,
    /// One directory for every node, over /root.
    Shared,
}

/// The repository name of the TCPX plugin image (src/bootstrap/steps.rs), under which the
/// docker shim finds the image's files.
pub const TCPX_PLUGIN_REPO: &str = "gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev";

/// The TCPX plugin image's own binaries directory on machine node `root` (in its
/// container's PATH, not the node's).
pub fn tcpx_image_bin(root: &Path) -> PathBuf {
    root.join(format!(
        "usr/local/share/fd-shim/images/{TCPX_PLUGIN_REPO}/usr/local/bin"
    ))
}

/// A machine node's root: a copy of /etc, empty system directories, the shims.
fn make_machine_root(root: &Path) -> Result<(), String> {
    for d in MACHINE_DIRS {
        std::fs::create_dir_all(root.join(d)).map_err(|e| format!("{}: {e}", root.join(d).display()))?;
    }
    run(&["cp", "-a", "/etc/.", root.join("etc").to_str().unwrap()])?;
    std::fs::create_dir_all(root.join("run/sshd")).map_err(|e| e.to_string())?;
    let bin = root.join("usr/local/bin");
    std::fs::create_dir_all(&bin).map_err(|e| e.to_string())?;
    use std::os::unix::fs::PermissionsExt;
    let shim = bin.join("fdshim");
    std::fs::write(&shim, include_str!("bootstrap_shims.sh")).map_err(|e| e.to_string())?;
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).map_err(|e| e.to_string())?;
    for name in SHIMMED {
        std::os::unix::fs::symlink("fdshim", bin.join(name)).map_err(|e| e.to_string())?;
    }
    // What the shims install as Google's files: the TCPXO installer's real profile, and
    // the stand-in of gIB's set_nccl_env.sh (tests/fixtures/reference/stand-in).
    let share = root.join("usr/local/share/fd-shim");
    std::fs::create_dir_all(&share).map_err(|e| e.to_string())?;
    for (name, text) in [
        (
            "nccl-env-profile.sh",
            include_str!(
                "../fixtures/reference/nccl-plugin-gpudirect-tcpxo/tcpxo_scripts/nccl-env-profile.sh"
            ),
        ),
        (
            "set_nccl_env.sh",
            include_str!("../fixtures/reference/stand-in/set_nccl_env.sh"),
        ),
    ] {
        std::fs::write(share.join(name), text).map_err(|e| e.to_string())?;
    }
    // The TCPX plugin image's filesystem, as far as the docker shim runs it: the
    // Dockerfile it was built from (its ENTRYPOINT) and that entrypoint, Google's own
    // (tests/fixtures/reference/nccl-plugin-gpudirecttcpx). Tests add the image's binaries
    // under its usr/local/bin.
    let image = root.join(format!("usr/local/share/fd-shim/images/{TCPX_PLUGIN_REPO}"));
    std::fs::create_dir_all(image.join("scripts")).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(image.join("usr/local/bin")).map_err(|e| e.to_string())?;
    std::fs::write(
        image.join("Dockerfile"),
        include_str!("../fixtures/reference/nccl-plugin-gpudirecttcpx/Dockerfile"),
    )
    .map_err(|e| e.to_string())?;
    let entry = image.join("scripts/container_entry.sh");
    std::fs::write(
        &entry,
        include_str!("../fixtures/reference/nccl-plugin-gpudirecttcpx/scripts/container_entry.sh"),
    )
    .map_err(|e| e.to_string())?;
    std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o755)).map_err(|e| e.to_string())?;
    // The shims' records, which the unprivileged nccl-tests build appends to as well.
    let records = root.join("var/lib/fd-shim");
    std::fs::create_dir_all(&records).map_err(|e| e.to_string())?;
    for name in ["calls.log", "uids.log"] {
        std::fs::write(records.join(name), "").map_err(|e| e.to_string())?;
        std::fs::set_permissions(records.join(name), std::fs::Permissions::from_mode(0o666))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The shell that mounts a machine node's directories in its mount namespace, then
/// runs its sshd. /dev is the node's directory with this machine's null, zero, random,
/// urandom, tty and pts bound in (a login needs them); the rest is the node's.
fn machine_mounts(root: &Path, home: Option<&Path>, cfg: &Path) -> String {
    let r = root.display();
    let mut s = String::from("set -e\n");
    for d in ["null", "zero", "full", "random", "urandom", "tty"] {
        s.push_str(&format!(
            "[ -e '{r}/dev/{d}' ] || : > '{r}/dev/{d}'; mount --bind /dev/{d} '{r}/dev/{d}'\n"
        ));
    }
    s.push_str(&format!(
        "mkdir -p '{r}/dev/pts' '{r}/dev/shm'; mount --bind /dev/pts '{r}/dev/pts'; ln -sfn pts/ptmx '{r}/dev/ptmx'\n"
    ));
    for d in MACHINE_DIRS {
        let flag = if d == "dev" { "--rbind" } else { "--bind" };
        s.push_str(&format!("mount {flag} '{r}/{d}' /{d}\n"));
    }
    // /sys/class of its own: the namespace's net, and an infiniband folder where a test
    // may put a double of MRDMA devices (TbNode::add_rdma_devices).
    s.push_str(&format!(
        "mkdir -p '{r}/sys-class/net' '{r}/sys-class/infiniband'; mount --bind /sys/class/net '{r}/sys-class/net'; mount --rbind '{r}/sys-class' /sys/class\n"
    ));
    if let Some(h) = home {
        s.push_str(&format!("mount --bind '{}' /root\n", h.display()));
    }
    s.push_str(&format!("exec /usr/sbin/sshd -D -e -f '{}'\n", cfg.display()));
    s
}

/// Node `i` of a testbed with 8 data NICs named as on an A3 Mega's Ubuntu image: control
/// `enp0s12`, data `enp6s0`.. with the data VPCs' MTU 8244.
pub fn a3_mega_nics(tb: &Testbed, i: usize) {
    let names = [
        "enp6s0", "enp7s0", "enp13s0", "enp14s0", "enp134s0", "enp135s0", "enp141s0", "enp142s0",
    ];
    tb.rename_nic(i, "eth0", "enp0s12", None);
    for (k, n) in names.iter().enumerate() {
        tb.rename_nic(i, &format!("eth{}", k + 1), n, Some(8244));
    }
}

/// Machine node `i` says it runs Container-Optimized OS (its /etc/os-release), as the
/// image flightdeck provisions for TCPX does.
pub fn mark_cos(tb: &Testbed, i: usize) {
    let root = tb.nodes[i].root.as_ref().expect("a machine node");
    // (Debian's /etc/os-release is a link into /usr/lib, which the node shares.)
    let _ = std::fs::remove_file(root.join("etc/os-release"));
    std::fs::write(
        root.join("etc/os-release"),
        "NAME=\"Container-Optimized OS\"\nID=cos\nVERSION_ID=105\n",
    )
    .unwrap();
}

/// Node `i` as an A3 High on COS: its /etc/os-release says COS (as on the image flightdeck
/// provisions for TCPX), and its NICs are `eth0`, data `eth1..eth4` at MTU 8244.
pub fn a3_high_nics(tb: &Testbed, i: usize) {
    if tb.nodes[i].root.is_some() {
        mark_cos(tb, i);
    }
    for k in 1..=4 {
        tb.node_run(i, &["ip", "link", "set", &format!("eth{k}"), "mtu", "8244"])
            .unwrap();
    }
}

/// Node `i` as an A3 Ultra / A4 on Ubuntu: gVNICs `enp0s19` and `enp192s20`, and the
/// double of its eight MRDMA devices.
pub fn a3_ultra_nics(tb: &Testbed, i: usize) {
    tb.rename_nic(i, "eth0", "enp0s19", None);
    tb.rename_nic(i, "eth1", "enp192s20", Some(8896));
    tb.nodes[i].add_rdma_devices(8);
}

fn unsafe_geteuid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}
