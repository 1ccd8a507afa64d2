//! Node-to-node SSH for multi-node runs (mpirun starts its daemons on the other nodes
//! over SSH), set up by flightdeck through its own connections to the nodes:
//!
//! 1. every node makes its own key pair in `~/.flightdeck/ssh/` (the private key never
//!    leaves the node) and prints the public key, and the host keys its own sshd
//!    presents (`ssh-keyscan` of itself over loopback, else `/etc/ssh/*.pub`);
//! 2. every node gets every node's public key in `~/.ssh/authorized_keys` (tagged with the
//!    fleet, replaced on the next setup), a `known_hosts` of every node's host keys at the
//!    addresses the nodes reach each other on, and an ssh config with strict host key
//!    checking, batch mode and that key; `ssh -F ~/.flightdeck/ssh/config NODE` works.
//!
//! The host keys come over flightdeck's verified connections to each node, so the
//! nodes' known_hosts is as trustworthy as flightdeck's own. Pure: command texts and the
//! parsing of their output.

use super::runner::NODE_SSH_DIR;
use std::fmt::Write as _;

/// A node as the other nodes reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    pub name: String,
    pub addr: String,
    pub port: Option<u16>,
    pub user: Option<String>,
}

/// What step 1 found on a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeKeys {
    /// `ssh-ed25519 AAAA...` (no comment).
    pub public_key: String,
    /// The host keys, `type base64` each.
    pub host_keys: Vec<String>,
}

fn tag(fleet: &str) -> String {
    let safe: String = fleet
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("flightdeck-fleet:{safe}")
}

/// Shell lines that hold a lock on `$D/.setup.lock` until the script ends: both steps
/// run on every node at once, and nodes that share a home (NFS or Filestore /home, as
/// Google's A4 and A3 Mega blueprints have) share `~/.ssh` and `$D`, so each step's
/// reads and writes there are made one node at a time. `flock` where the node has it
/// (util-linux), else a `mkdir` lock removed on exit.
fn lock_lines() -> &'static str {
    "exec 9>>\"$D/.setup.lock\"\n\
     if command -v flock >/dev/null 2>&1; then\n\
     \x20 flock -w 120 9 || { echo 'flightdeck: another node sharing this home held the node-to-node SSH setup lock for 120 s' >&2; exit 1; }\n\
     else\n\
     \x20 i=0; until mkdir \"$D/.setup.lockd\" 2>/dev/null; do i=$((i+1)); [ $i -lt 1200 ] || { echo \"flightdeck: $D/.setup.lockd held for 120 s (remove it if no setup runs)\" >&2; exit 1; }; sleep 0.1; done\n\
     \x20 trap 'rmdir \"$D/.setup.lockd\"' EXIT\n\
     fi\n"
}

/// Step 1, on each node: the key pair, and the keys to share. On a shared home every
/// node finds the one pair the first made (under the lock).
pub fn collect_command(fleet: &str, port: Option<u16>) -> String {
    format!(
        "set -e\n\
         D=\"$HOME/{NODE_SSH_DIR}\"; mkdir -p \"$D\"; chmod 700 \"$D\"\n\
         {lock}\
         command -v ssh-keygen >/dev/null || {{ echo 'flightdeck: ssh-keygen not found on the node (install openssh-client)' >&2; exit 127; }}\n\
         [ -f \"$D/id_ed25519\" ] || ssh-keygen -q -t ed25519 -N '' -C '{tag}' -f \"$D/id_ed25519\" >/dev/null\n\
         echo \"pub $(cut -d' ' -f1,2 \"$D/id_ed25519.pub\")\"\n\
         K=$(ssh-keyscan -T 5 -p {port} 127.0.0.1 2>/dev/null | grep -v '^#' | cut -d' ' -f2,3 || true)\n\
         [ -n \"$K\" ] || K=$(cat /etc/ssh/ssh_host_*_key.pub 2>/dev/null | cut -d' ' -f1,2 || true)\n\
         printf '%s\\n' \"$K\" | sed -n 's/^\\(..*\\)$/host \\1/p'\n",
        tag = tag(fleet),
        port = port.unwrap_or(22),
        lock = lock_lines(),
    )
}

/// Read step 1's output.
pub fn parse_collect(out: &str) -> Result<NodeKeys, String> {
    let mut public_key = None;
    let mut host_keys = vec![];
    for line in out.lines() {
        if let Some(k) = line.strip_prefix("pub ") {
            public_key = Some(k.trim().to_string());
        } else if let Some(k) = line.strip_prefix("host ") {
            let k = k.trim();
            if k.split_whitespace().count() == 2 && !host_keys.iter().any(|h| h == k) {
                host_keys.push(k.to_string());
            }
        }
    }
    let public_key = public_key
        .filter(|k| k.split_whitespace().count() == 2)
        .ok_or("no public key printed")?;
    if host_keys.is_empty() {
        return Err("no host key found (ssh-keyscan of itself failed and /etc/ssh has none)".into());
    }
    Ok(NodeKeys {
        public_key,
        host_keys,
    })
}

/// The nodes' known_hosts: every host key of every node at its address.
pub fn known_hosts(peers: &[(Peer, NodeKeys)]) -> String {
    let mut s = String::new();
    for (p, k) in peers {
        let host = match p.port {
            Some(port) if port != 22 => format!("[{}]:{port}", p.addr),
            _ => p.addr.clone(),
        };
        for key in &k.host_keys {
            let _ = writeln!(s, "{host} {key}");
        }
    }
    s
}

/// The ssh config the nodes (and mpirun) use to reach each other.
pub fn ssh_config(fleet: &str, peers: &[Peer]) -> String {
    let mut s = format!("# written by flightdeck for fleet {fleet}: node-to-node SSH (mpirun)\n");
    for p in peers.iter().filter(|p| p.port.is_some_and(|x| x != 22)) {
        let _ = writeln!(s, "Host {}\n  Port {}", p.addr, p.port.unwrap_or(22));
    }
    let addrs: Vec<&str> = peers.iter().map(|p| p.addr.as_str()).collect();
    let _ = writeln!(
        s,
        "Host {}\n  IdentityFile ~/{NODE_SSH_DIR}/id_ed25519\n  IdentitiesOnly yes\n  UserKnownHostsFile ~/{NODE_SSH_DIR}/known_hosts\n  GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking yes\n  BatchMode yes\n  ConnectTimeout 10",
        addrs.join(" ")
    );
    if let Some(u) = peers.iter().find_map(|p| p.user.as_deref()) {
        let _ = writeln!(s, "  User {u}");
    }
    s
}

/// Step 2, on each node: authorized_keys, known_hosts and config. Prints `installed`.
/// The config's paths are made absolute and its `User` is the node's login: on
/// Container-Optimized OS mpirun runs as root inside a container, where ssh would
/// otherwise look in root's home and log in as root.
pub fn install_command(fleet: &str, peers: &[(Peer, NodeKeys)]) -> String {
    let t = tag(fleet);
    let mut auth = String::new();
    for (p, k) in peers {
        let _ = writeln!(auth, "{} {t}:{}", k.public_key, p.name);
    }
    let plain: Vec<Peer> = peers.iter().map(|(p, _)| p.clone()).collect();
    format!(
        "set -e\n\
         D=\"$HOME/{NODE_SSH_DIR}\"; A=\"$HOME/.ssh/authorized_keys\"\n\
         mkdir -p \"$HOME/.ssh\" \"$D\"; chmod 700 \"$HOME/.ssh\" \"$D\"\n\
         {lock}\
         touch \"$A\"; T=$(mktemp \"$A.XXXXXX\")\n\
         {{ grep -v ' {t}:' \"$A\" || true; cat {auth}}} > \"$T\"\n\
         chmod 600 \"$T\"; mv \"$T\" \"$A\"\n\
         cat > \"$D/known_hosts\" {known}\
         sed \"s|~/|$HOME/|g\" > \"$D/config\" {config}\
         grep -q '^  User ' \"$D/config\" || printf '  User %s\\n' \"$(id -un)\" >> \"$D/config\"\n\
         chmod 600 \"$D/known_hosts\" \"$D/config\"\n\
         echo installed\n",
        lock = lock_lines(),
        auth = crate::detach::heredoc("AUTH", &auth),
        known = crate::detach::heredoc("KNOWN", &known_hosts(peers)),
        config = crate::detach::heredoc("CONFIG", &ssh_config(fleet, &plain)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(i: usize, port: Option<u16>) -> (Peer, NodeKeys) {
        (
            Peer {
                name: format!("lab-{i}"),
                addr: format!("10.0.0.{}", i + 1),
                port,
                user: Some("ops".into()),
            },
            NodeKeys {
                public_key: format!("ssh-ed25519 USER{i}"),
                host_keys: vec![format!("ssh-ed25519 HOST{i}")],
            },
        )
    }

    #[test]
    fn collect_output_is_read_or_refused() {
        let k =
            parse_collect("pub ssh-ed25519 AAA\nhost ssh-ed25519 H1\nhost ssh-rsa H2\nhost ssh-ed25519 H1\n")
                .unwrap();
        assert_eq!(k.public_key, "ssh-ed25519 AAA");
        assert_eq!(k.host_keys, vec!["ssh-ed25519 H1", "ssh-rsa H2"]);
        assert!(parse_collect("host ssh-ed25519 H1\n")
            .unwrap_err()
            .contains("public key"));
        assert!(parse_collect("pub ssh-ed25519 AAA\n")
            .unwrap_err()
            .contains("host key"));
    }

    #[test]
    fn known_hosts_and_config_name_every_node() {
        let peers = vec![peer(0, None), peer(1, Some(2222))];
        assert_eq!(
            known_hosts(&peers),
            "10.0.0.1 ssh-ed25519 HOST0\n[10.0.0.2]:2222 ssh-ed25519 HOST1\n"
        );
        let c = ssh_config("lab", &peers.iter().map(|p| p.0.clone()).collect::<Vec<_>>());
        assert!(c.contains("Host 10.0.0.2\n  Port 2222\n"), "{c}");
        assert!(c.contains("Host 10.0.0.1 10.0.0.2\n"), "{c}");
        assert!(
            c.contains("StrictHostKeyChecking yes") && c.contains("BatchMode yes") && c.contains("User ops")
        );
        // The port block comes first: OpenSSH keeps the first value it reads.
        assert!(c.find("Port 2222").unwrap() < c.find("IdentityFile").unwrap());
    }

    /// Nodes that share a home run both steps at once: every one succeeds, all print the
    /// one key pair, and authorized_keys holds each node's line once (N2 of the GPUDirect
    /// review: a fixed temporary name and a concurrent ssh-keygen failed 8 of 9 times).
    #[test]
    fn both_steps_at_once_on_one_home_all_succeed() {
        let home = tempfile::tempdir().unwrap();
        let peers: Vec<_> = (0..4).map(|i| peer(i, None)).collect();
        for round in 0..3 {
            let spawn = |cmd: String| {
                std::process::Command::new("sh")
                    .arg("-c")
                    .arg(cmd)
                    .env("HOME", home.path())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            };
            let collect: Vec<_> = (0..8).map(|_| spawn(collect_command("lab", Some(1)))).collect();
            let keys: Vec<String> = collect
                .into_iter()
                .map(|c| {
                    let out = c.wait_with_output().unwrap();
                    assert!(
                        out.status.success(),
                        "round {round}: {}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                    let out = String::from_utf8_lossy(&out.stdout).into_owned();
                    out.lines()
                        .find_map(|l| l.strip_prefix("pub "))
                        .unwrap_or_default()
                        .to_string()
                })
                .collect();
            assert!(
                keys.iter()
                    .all(|k| k == &keys[0] && k.starts_with("ssh-ed25519 ")),
                "{keys:?}"
            );
            let install: Vec<_> = (0..8).map(|_| spawn(install_command("lab", &peers))).collect();
            for c in install {
                let out = c.wait_with_output().unwrap();
                assert!(
                    out.status.success(),
                    "round {round}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            let auth = std::fs::read_to_string(home.path().join(".ssh/authorized_keys")).unwrap();
            assert_eq!(auth.lines().count(), 4, "{auth}");
            let left: Vec<_> = std::fs::read_dir(home.path().join(".ssh"))
                .unwrap()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n != "authorized_keys")
                .collect();
            assert!(left.is_empty(), "no temporary file is left: {left:?}");
        }
    }

    /// The install command under sh, twice: the fleet's keys replace themselves, other
    /// lines of authorized_keys stay.
    #[test]
    fn install_is_idempotent_and_keeps_other_keys() {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join(".ssh")).unwrap();
        std::fs::write(
            home.path().join(".ssh/authorized_keys"),
            "ssh-ed25519 MINE me@laptop\n",
        )
        .unwrap();
        let sh = |cmd: &str| {
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(cmd)
                .env("HOME", home.path())
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let peers = vec![peer(0, None), peer(1, None)];
        assert_eq!(sh(&install_command("lab", &peers)), "installed\n");
        assert_eq!(sh(&install_command("lab", &peers)), "installed\n");
        let auth = std::fs::read_to_string(home.path().join(".ssh/authorized_keys")).unwrap();
        assert_eq!(
            auth,
            "ssh-ed25519 MINE me@laptop\nssh-ed25519 USER0 flightdeck-fleet:lab:lab-0\nssh-ed25519 USER1 flightdeck-fleet:lab:lab-1\n"
        );
        let known = std::fs::read_to_string(home.path().join(".flightdeck/ssh/known_hosts")).unwrap();
        assert_eq!(known, known_hosts(&peers));
        // Collecting makes a key pair once and prints its public half.
        let first = sh(&collect_command("lab", Some(1)));
        let second = sh(&collect_command("lab", Some(1)));
        let pub1 = first.lines().find(|l| l.starts_with("pub ")).unwrap().to_string();
        assert!(pub1.starts_with("pub ssh-ed25519 "), "{first}");
        assert_eq!(second.lines().find(|l| l.starts_with("pub ")).unwrap(), pub1);
    }
}
