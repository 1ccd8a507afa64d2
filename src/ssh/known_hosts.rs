//! known_hosts verification, as OpenSSH does it: host patterns (several per line,
//! `*`/`?`, `!negation`, `[host]:port`), hashed entries (`|1|salt|hash`), `@revoked`
//! markers, several files: a host's UserKnownHostsFile files, then its
//! GlobalKnownHostsFile files (`/etc/ssh/ssh_known_hosts{,2}` unless the config names
//! others), each resolved per host and per jump host as `ssh -G` does. A key recorded in
//! any of them is known (a key in a global file is trusted as the user's own); new keys
//! are written only to the first UserKnownHostsFile, never to a global file.
//!
//! A host listed with a different key, of its type or another (an ECDSA key where an
//! ed25519 one is recorded), has a *changed* key, which is always refused, whatever the
//! policy (OpenSSH: "REMOTE HOST IDENTIFICATION HAS CHANGED"). With
//! `StrictHostKeyChecking no` OpenSSH still connects to such a host, with password and
//! keyboard-interactive authentication turned off; flightdeck authenticates with keys
//! only and then sends the host its commands and their stdin (scripts, a job's
//! environment), which that would not protect, so it refuses. A revoked key is refused;
//! a host not listed at all is unknown, and the policy decides ([`effective`]).

use super::config::glob;
use data_encoding::BASE64;
use hmac::{Hmac, KeyInit, Mac};
use russh::keys::{HashAlg, PublicKey};
use sha1::Sha1;
use std::io::Write;
use std::path::{Path, PathBuf};

/// What to do with a host whose key is not in known_hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HostKeyPolicy {
    /// Ask the operator (TUI prompt or terminal question); refuse when nobody can answer.
    Ask,
    /// Record the key and go on (`--accept-new-host-keys`, `StrictHostKeyChecking accept-new`).
    AcceptNew,
    /// Refuse unknown hosts.
    Refuse,
}

/// The policy for one host: its StrictHostKeyChecking when the config sets one, else
/// the session's (`--accept-new-host-keys`, or asking). `yes` is never loosened: the
/// flag answers the question `ask` would put, it does not overrule a host the config
/// marks strict (stricter than `ssh -o StrictHostKeyChecking=accept-new`, which would).
pub fn effective(config: Option<super::config::Strict>, session: HostKeyPolicy) -> HostKeyPolicy {
    use super::config::Strict;
    match config {
        Some(Strict::Yes) => HostKeyPolicy::Refuse,
        Some(Strict::AcceptNew) | Some(Strict::No) => HostKeyPolicy::AcceptNew,
        Some(Strict::Ask) | None => session,
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Known,
    Unknown,
    Changed {
        file: PathBuf,
        line: usize,
        known_fingerprint: String,
    },
    Revoked {
        file: PathBuf,
        line: usize,
    },
}

/// The form a host takes in known_hosts: `host`, or `[host]:port` off port 22.
pub fn host_entry(host: &str, port: u16) -> String {
    if port == 22 {
        host.to_string()
    } else {
        format!("[{host}]:{port}")
    }
}

pub fn fingerprint(key: &PublicKey) -> String {
    key.fingerprint(HashAlg::Sha256).to_string()
}

fn hashed_matches(entry: &str, name: &str) -> bool {
    let mut parts = entry.split('|').skip(2);
    let (Some(salt), Some(hash)) = (parts.next(), parts.next()) else {
        return false;
    };
    let (Ok(salt), Ok(hash)) = (BASE64.decode(salt.as_bytes()), BASE64.decode(hash.as_bytes())) else {
        return false;
    };
    let Ok(mac) = <Hmac<Sha1> as KeyInit>::new_from_slice(&salt) else {
        return false;
    };
    mac.chain_update(name.as_bytes()).verify_slice(&hash).is_ok()
}

fn patterns_match(patterns: &str, name: &str) -> bool {
    let mut matched = false;
    for p in patterns.split(',') {
        if p.starts_with("|1|") {
            matched |= hashed_matches(p, name);
        } else if let Some(neg) = p.strip_prefix('!') {
            if glob(neg, name, true) {
                return false;
            }
        } else if glob(p, name, true) {
            matched = true;
        }
    }
    matched
}

/// Check `key` for `host:port` against the given known_hosts files (missing files are
/// empty).
pub fn check(files: &[PathBuf], host: &str, port: u16, key: &PublicKey) -> Verdict {
    check_name(files, &host_entry(host, port), key)
}

/// Check `key` for the known_hosts name `name` (`host`, `[host]:port`, or a
/// HostKeyAlias) against `files`, in order.
pub fn check_name(files: &[PathBuf], name: &str, key: &PublicKey) -> Verdict {
    let name = name.to_string();
    let mut changed = None;
    let mut known = false;
    for file in files {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut fields = line.split_whitespace();
            let mut first = fields.next().unwrap_or("");
            let marker = if first.starts_with('@') {
                let m = first;
                first = fields.next().unwrap_or("");
                Some(m)
            } else {
                None
            };
            let (Some(_kind), Some(b64)) = (fields.next(), fields.next()) else {
                continue;
            };
            if !patterns_match(first, &name) {
                continue;
            }
            let Ok(recorded) = russh::keys::parse_public_key_base64(b64) else {
                continue;
            };
            match marker {
                Some("@revoked") if recorded == *key => {
                    return Verdict::Revoked {
                        file: file.clone(),
                        line: n + 1,
                    }
                }
                Some(_) => continue,
                None if recorded == *key => known = true,
                None if changed.is_none() => {
                    changed = Some(Verdict::Changed {
                        file: file.clone(),
                        line: n + 1,
                        known_fingerprint: format!("{} {}", recorded.algorithm(), fingerprint(&recorded)),
                    })
                }
                None => {}
            }
        }
    }
    if known {
        Verdict::Known
    } else {
        changed.unwrap_or(Verdict::Unknown)
    }
}

/// A public key from its base64 (the second field of a known_hosts line).
///
/// # Panics
/// On text that is not a key: for fixed keys (tests, fuzz targets).
pub fn parse_key(b64: &str) -> PublicKey {
    russh::keys::parse_public_key_base64(b64).expect("a public key in base64")
}

/// Append `host:port key` to `file` (created with its directory, mode 0600).
pub fn learn(file: &Path, host: &str, port: u16, key: &PublicKey) -> std::io::Result<()> {
    learn_name(file, &host_entry(host, port), key, false)
}

/// `name` as ssh hashes it under HashKnownHosts: `|1|` base64 of a random 20-byte salt,
/// `|`, base64 of HMAC-SHA1 of the name keyed by the salt.
pub fn hashed_name(name: &str) -> std::io::Result<String> {
    let mut salt = [0u8; 20];
    std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom")?, &mut salt)?;
    let mut mac = <Hmac<Sha1> as KeyInit>::new_from_slice(&salt).map_err(std::io::Error::other)?;
    mac.update(name.as_bytes());
    Ok(format!(
        "|1|{}|{}",
        BASE64.encode(&salt),
        BASE64.encode(&mac.finalize().into_bytes())
    ))
}

/// Append `name key` to `file` (created with its directory, mode 0600); the name hashed
/// ([`hashed_name`]) when `hash` (HashKnownHosts yes).
pub fn learn_name(file: &Path, name: &str, key: &PublicKey, hash: bool) -> std::io::Result<()> {
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let openssh = key.to_openssh().map_err(std::io::Error::other)?;
    let mut parts = openssh.split_whitespace();
    let (kind, b64) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let mut opts = std::fs::OpenOptions::new();
    opts.create(true).append(true);
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(file)?;
    // Held while we look and append: two connections to one host (a pane and the NICs
    // view, or two nodes behind one alias) accepted at once would each append the same
    // line. Under the lock the second finds the first's and writes nothing.
    // SAFETY: flock on a descriptor this function owns; released when `f` closes.
    if unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&f), libc::LOCK_EX) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if check_name(&[file.to_path_buf()], name, key) == Verdict::Known {
        return Ok(());
    }
    // Hashed (HashKnownHosts yes) only once the line is to be written.
    let hashed;
    let name = if hash {
        hashed = hashed_name(name)?;
        hashed.as_str()
    } else {
        name
    };
    // One write of the whole line: nodes learned in parallel (an apply, a first exec)
    // append at once, and `writeln!` would write the line in pieces that interleave
    // with theirs (a garbled known_hosts, keys lost: a later run found them "unknown").
    let line = format!("{name} {kind} {b64}\n");
    f.write_all(line.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ED_A: &str = "AAAAC3NzaC1lZDI1NTE5AAAAIMJ2m3mOI0dyYsL8H9ZIhaaH1jb6pmSnkuqLK4glV3dJ";
    const ED_B: &str = "AAAAC3NzaC1lZDI1NTE5AAAAIKcyeFHnF8r9cI2SFRA9ZbW1dZqgQOewZL0vxQJmBNGo";

    fn key(b64: &str) -> PublicKey {
        russh::keys::parse_public_key_base64(b64).unwrap()
    }

    fn file(text: &str) -> (tempfile::TempDir, Vec<PathBuf>) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("known_hosts");
        std::fs::write(&p, text).unwrap();
        (d, vec![p])
    }

    /// Many nodes learned at once (threads appending together) leave one whole line each.
    #[test]
    fn parallel_learning_keeps_every_line_whole() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("known_hosts");
        let threads: Vec<_> = (0..32)
            .map(|i| {
                let p = p.clone();
                std::thread::spawn(move || {
                    for j in 0..20 {
                        learn(&p, &format!("10.{i}.0.{j}"), 22, &key(ED_A)).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(text.lines().count(), 640);
        for i in 0..32 {
            for j in 0..20 {
                assert_eq!(
                    check(std::slice::from_ref(&p), &format!("10.{i}.0.{j}"), 22, &key(ED_A)),
                    Verdict::Known
                );
            }
        }
    }

    #[test]
    fn known_unknown_changed() {
        let (_d, f) = file(&format!(
            "# c\n10.0.0.1,gpu-* ssh-ed25519 {ED_A}\n[10.0.0.2]:2222 ssh-ed25519 {ED_A} c\n"
        ));
        assert_eq!(check(&f, "10.0.0.1", 22, &key(ED_A)), Verdict::Known);
        assert_eq!(check(&f, "gpu-7", 22, &key(ED_A)), Verdict::Known);
        assert_eq!(check(&f, "10.0.0.2", 2222, &key(ED_A)), Verdict::Known);
        assert_eq!(
            check(&f, "10.0.0.2", 22, &key(ED_A)),
            Verdict::Unknown,
            "the port is part of the name"
        );
        match check(&f, "10.0.0.1", 22, &key(ED_B)) {
            Verdict::Changed {
                line,
                known_fingerprint,
                ..
            } => {
                assert_eq!(line, 2);
                assert_eq!(
                    known_fingerprint,
                    format!("ssh-ed25519 {}", fingerprint(&key(ED_A)))
                );
            }
            v => panic!("{v:?}"),
        }
        // A key of another type where an ed25519 one is recorded is a changed host too
        // (it used to count as unknown, and --accept-new-host-keys appended it).
        let ecdsa = key("AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBEmKSENjQEezOmxkZMy7opKgwFB9nkt5YRrYMjNuG5N87uRgg6CLrbo5wAdT/y6v0mKV0U2w0WZ2YB/++Tpockg=");
        assert!(matches!(
            check(&f, "10.0.0.1", 22, &ecdsa),
            Verdict::Changed { line: 2, .. }
        ));
    }

    #[test]
    fn hashed_negated_and_revoked() {
        // |1|salt|hash of "10.9.9.9" with HMAC-SHA1, made here to not depend on ssh-keygen.
        let salt = b"0123456789abcdefghij";
        let mac = <Hmac<Sha1> as KeyInit>::new_from_slice(salt)
            .unwrap()
            .chain_update(b"10.9.9.9")
            .finalize()
            .into_bytes();
        let hashed = format!("|1|{}|{}", BASE64.encode(salt), BASE64.encode(&mac));
        let (_d, f) = file(&format!(
            "{hashed} ssh-ed25519 {ED_A}\n10.1.*,!10.1.0.5 ssh-ed25519 {ED_A}\n@revoked * ssh-ed25519 {ED_B}\n"
        ));
        assert_eq!(check(&f, "10.9.9.9", 22, &key(ED_A)), Verdict::Known);
        assert_eq!(check(&f, "10.9.9.8", 22, &key(ED_A)), Verdict::Unknown);
        assert_eq!(check(&f, "10.1.2.3", 22, &key(ED_A)), Verdict::Known);
        assert_eq!(check(&f, "10.1.0.5", 22, &key(ED_A)), Verdict::Unknown);
        assert!(matches!(
            check(&f, "anything", 22, &key(ED_B)),
            Verdict::Revoked { line: 3, .. }
        ));
    }

    #[test]
    fn learn_then_known() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sub/known_hosts");
        learn(&p, "10.0.0.9", 2200, &key(ED_B)).unwrap();
        assert_eq!(
            check(std::slice::from_ref(&p), "10.0.0.9", 2200, &key(ED_B)),
            Verdict::Known
        );
        assert!(std::fs::read_to_string(&p)
            .unwrap()
            .starts_with("[10.0.0.9]:2200 ssh-ed25519 AAAA"));
    }

    /// ux-walk-2 item 1: a key accepted twice for one host (two connections asking at
    /// once) is written once, hashed or not.
    #[test]
    fn a_key_learned_twice_is_written_once() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("known_hosts");
        for hash in [false, true, false] {
            learn_name(&p, &host_entry("10.0.0.9", 22), &key(ED_B), hash).unwrap();
        }
        learn_name(&p, &host_entry("10.0.0.8", 22), &key(ED_B), true).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
    }

    /// Hostile review 3, L2: under HashKnownHosts yes a new key is recorded under a hashed
    /// name, as ssh records it: the host is not in the file in clear, flightdeck knows it
    /// again, and so does OpenSSH's own lookup (`ssh-keygen -F`).
    #[test]
    fn a_key_learned_under_hash_known_hosts_is_hashed_as_ssh_hashes_it() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("known_hosts");
        learn_name(&p, &host_entry("10.0.0.9", 2200), &key(ED_B), true).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.starts_with("|1|") && !text.contains("10.0.0.9"), "{text}");
        assert_eq!(
            check(std::slice::from_ref(&p), "10.0.0.9", 2200, &key(ED_B)),
            Verdict::Known
        );
        assert_eq!(
            check(std::slice::from_ref(&p), "10.0.0.8", 2200, &key(ED_B)),
            Verdict::Unknown
        );
        let found = std::process::Command::new("ssh-keygen")
            .args(["-F", "[10.0.0.9]:2200", "-f"])
            .arg(&p)
            .output()
            .expect("ssh-keygen (openssh-client) runs");
        assert!(
            found.status.success() && String::from_utf8_lossy(&found.stdout).contains("ssh-ed25519"),
            "ssh-keygen -F: {}{}",
            String::from_utf8_lossy(&found.stdout),
            String::from_utf8_lossy(&found.stderr)
        );
    }
}
