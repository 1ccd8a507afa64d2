//! Where flightdeck keeps its files.
//!
//! * config: `$XDG_CONFIG_HOME/flightdeck/` (default `~/.config/flightdeck/`), holding
//!   `config.yaml` and user themes in `themes/`;
//! * state: `$XDG_STATE_HOME/flightdeck/` (default `~/.local/state/flightdeck/`), holding
//!   the state store and `flightdeck.log`;
//! * `FLIGHTDECK_HOME` overrides both: config in `$FLIGHTDECK_HOME`, state in
//!   `$FLIGHTDECK_HOME/state`.
//!
//! Resolution is a pure function of the environment so it can be tested without touching
//! the process environment.

use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    pub config_dir: PathBuf,
    pub state_dir: PathBuf,
}

/// A directory only its owner may enter (0700), made with its parents; an existing one
/// with wider permissions is narrowed. State, logs, runs and the holder's socket live in
/// such directories, so they are checked as OpenSSH's StrictModes checks `~/.ssh`, and as
/// tmux checks its socket directory:
///
/// * the directory itself, and every one made here, must be a real directory (not a
///   symbolic link) owned by this user (the effective uid); it is opened without
///   following links before its mode is narrowed, so no planted link makes flightdeck
///   chmod someone else's directory;
/// * every directory above it must be owned by root or this user and writable by no one
///   else, except a root-owned sticky directory such as `/tmp` (nobody else may rename
///   or remove what is in it) and a group-writable one whose group is the owner's own
///   private group (Debian's OpenSSH allows that too); a symbolic link on the way must
///   be root's or this user's.
///
/// Anything else is refused with the directory, its owner and mode, and the fix.
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = if dir.is_absolute() {
        dir.to_path_buf()
    } else {
        std::env::current_dir()?.join(dir)
    };
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    // The longest part of the path that exists; the rest is made here.
    let mut existing = dir.clone();
    let mut missing: Vec<std::ffi::OsString> = vec![];
    loop {
        match std::fs::symlink_metadata(&existing) {
            Ok(_) => break,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let Some(name) = existing.file_name() else {
                    return Err(e);
                };
                missing.push(name.to_os_string());
                if !existing.pop() {
                    return Err(e);
                }
            }
            Err(e) => return Err(e),
        }
    }
    missing.reverse();
    // The directories above the first one that is flightdeck's own.
    let above = if missing.is_empty() {
        dir.parent().map(Path::to_path_buf)
    } else {
        Some(existing.clone())
    };
    if let Some(above) = &above {
        safe_ancestors(above, me)?;
    }
    if missing.is_empty() {
        own_dir(&dir, me)?;
    }
    let mut at = existing;
    for name in missing {
        at.push(name);
        match std::fs::DirBuilder::new().mode(0o700).create(&at) {
            Ok(()) => {}
            // Made meanwhile (another flightdeck, or someone planting a link): checked below.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        own_dir(&at, me)?;
    }
    Ok(())
}

fn refused(path: &Path, why: String) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::PermissionDenied,
        format!(
            "{}: {why}; refused, as OpenSSH refuses such a directory (StrictModes): set FLIGHTDECK_HOME or XDG_STATE_HOME to a directory of your own",
            path.display()
        ),
    )
}

/// `path` is flightdeck's own directory: not a link, a directory, this user's; narrowed to
/// 0700 through a descriptor opened without following links.
fn own_dir(path: &Path, me: u32) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let meta = std::fs::symlink_metadata(path)?;
    if meta.file_type().is_symlink() {
        return Err(refused(
            path,
            "is a symbolic link (flightdeck makes its directories itself, never through a link)".into(),
        ));
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) || e.raw_os_error() == Some(libc::ENOTDIR) {
                refused(path, "is not a directory".into())
            } else {
                e
            }
        })?;
    let m = f.metadata()?;
    if m.uid() != me {
        return Err(refused(
            path,
            format!("is owned by uid {}, not by you (uid {me})", m.uid()),
        ));
    }
    if m.mode() & 0o077 != 0 {
        // SAFETY: fchmod on a descriptor we hold open.
        if unsafe { libc::fchmod(f.as_raw_fd(), 0o700) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Every directory from `/` down to `dir` (which exists): owned by root or `me`, writable
/// by no one else (see [`private_dir`]); links on the way root's or `me`'s.
fn safe_ancestors(dir: &Path, me: u32) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    // Links on the literal path: made by root or this user only.
    let mut at = PathBuf::new();
    for c in dir.components() {
        at.push(c);
        let m = std::fs::symlink_metadata(&at)?;
        if m.file_type().is_symlink() && m.uid() != 0 && m.uid() != me {
            return Err(refused(
                &at,
                format!(
                    "is a symbolic link of uid {}, neither yours (uid {me}) nor root's",
                    m.uid()
                ),
            ));
        }
    }
    // Then every directory where the links lead.
    let real = std::fs::canonicalize(dir)?;
    let mut at = PathBuf::new();
    for c in real.components() {
        at.push(c);
        let m = std::fs::metadata(&at)?;
        if m.uid() != 0 && m.uid() != me {
            return Err(refused(
                &at,
                format!(
                    "is owned by uid {}, neither by you (uid {me}) nor by root",
                    m.uid()
                ),
            ));
        }
        let mode = m.mode();
        let sticky = mode & 0o1000 != 0 && m.uid() == 0;
        if mode & 0o002 != 0 && !sticky {
            return Err(refused(
                &at,
                format!("is writable by everyone (mode {:04o})", mode & 0o7777),
            ));
        }
        if mode & 0o020 != 0 && !sticky && !private_group(m.gid(), m.uid()) {
            return Err(refused(
                &at,
                format!(
                    "is writable by its group (gid {}, mode {:04o}), which is not its owner's own",
                    m.gid(),
                    mode & 0o7777
                ),
            ));
        }
    }
    Ok(())
}

/// Whether group `gid` has exactly one member, the user `uid` (a user private group), as
/// Debian's OpenSSH decides that a group-writable file or directory is safe.
pub fn private_group(gid: u32, uid: u32) -> bool {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: the passwd and group database calls return pointers into static storage,
    // read at once under the lock above; nothing else in flightdeck iterates them.
    unsafe {
        let gr = libc::getgrgid(gid);
        if gr.is_null() {
            return false;
        }
        let mut members = 0;
        libc::setpwent();
        loop {
            let pw = libc::getpwent();
            if pw.is_null() {
                break;
            }
            if (*pw).pw_gid == gid {
                members += 1;
                if (*pw).pw_uid != uid {
                    libc::endpwent();
                    return false;
                }
            }
        }
        libc::endpwent();
        let gr = libc::getgrgid(gid);
        let owner = libc::getpwuid(uid);
        if gr.is_null() || owner.is_null() {
            return false;
        }
        let mem = (*gr).gr_mem;
        if !mem.is_null() && !(*mem).is_null() {
            members += 1;
            let first = std::ffi::CStr::from_ptr(*mem);
            let name = std::ffi::CStr::from_ptr((*owner).pw_name);
            if first != name || !(*mem.add(1)).is_null() {
                return false;
            }
        }
        members > 0
    }
}

/// A file for flightdeck's own writing: created 0600, never through a symbolic link (a
/// link planted at its name makes the open fail instead of writing over its target).
pub fn private_file(append: bool) -> std::fs::OpenOptions {
    use std::os::unix::fs::OpenOptionsExt;
    let mut o = std::fs::OpenOptions::new();
    o.create(true).mode(0o600).custom_flags(libc::O_NOFOLLOW);
    if append {
        o.append(true);
    } else {
        o.read(true).write(true);
    }
    o
}

/// The login's home: `HOME` when set and not empty, else the password database's entry
/// (an empty HOME must not make the working directory everybody's `~`).
pub fn home_dir() -> Option<PathBuf> {
    if let Some(h) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        return Some(PathBuf::from(h));
    }
    // SAFETY: getpwuid returns a pointer into static storage, read at once; no other
    // thread of flightdeck calls it.
    unsafe {
        let pw = libc::getpwuid(libc::getuid());
        if pw.is_null() || (*pw).pw_dir.is_null() {
            return None;
        }
        let dir = std::ffi::CStr::from_ptr((*pw).pw_dir)
            .to_string_lossy()
            .into_owned();
        (!dir.is_empty()).then(|| PathBuf::from(dir))
    }
}

impl Paths {
    /// Resolve from the process environment.
    pub fn from_env() -> anyhow::Result<Self> {
        Self::resolve(|k| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from))
    }

    /// Resolve from a lookup function (`FLIGHTDECK_HOME`, `XDG_CONFIG_HOME`,
    /// `XDG_STATE_HOME`, `HOME`).
    pub fn resolve(var: impl Fn(&str) -> Option<PathBuf>) -> anyhow::Result<Self> {
        if let Some(home) = var("FLIGHTDECK_HOME") {
            return Ok(Self {
                state_dir: home.join("state"),
                config_dir: home,
            });
        }
        let home = || {
            var("HOME").ok_or_else(|| {
                anyhow::anyhow!("cannot place config and state: set HOME, XDG_CONFIG_HOME/XDG_STATE_HOME or FLIGHTDECK_HOME")
            })
        };
        let config_base = match var("XDG_CONFIG_HOME") {
            Some(p) => p,
            None => home()?.join(".config"),
        };
        let state_base = match var("XDG_STATE_HOME") {
            Some(p) => p,
            None => home()?.join(".local/state"),
        };
        Ok(Self {
            config_dir: config_base.join("flightdeck"),
            state_dir: state_base.join("flightdeck"),
        })
    }

    pub fn config_file(&self) -> PathBuf {
        self.config_dir.join("config.yaml")
    }

    pub fn themes_dir(&self) -> PathBuf {
        self.config_dir.join("themes")
    }

    pub fn log_file(&self) -> PathBuf {
        self.state_dir.join("flightdeck.log")
    }

    pub fn user_theme(&self, name: &str) -> PathBuf {
        self.themes_dir().join(format!("{name}.yaml"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<PathBuf> {
        let m: HashMap<String, PathBuf> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), PathBuf::from(v)))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn xdg_defaults_from_home() {
        let p = Paths::resolve(env(&[("HOME", "/home/op")])).unwrap();
        assert_eq!(
            p.config_file(),
            PathBuf::from("/home/op/.config/flightdeck/config.yaml")
        );
        assert_eq!(
            p.log_file(),
            PathBuf::from("/home/op/.local/state/flightdeck/flightdeck.log")
        );
    }

    #[test]
    fn xdg_variables_win_over_home() {
        let p = Paths::resolve(env(&[
            ("HOME", "/h"),
            ("XDG_CONFIG_HOME", "/c"),
            ("XDG_STATE_HOME", "/s"),
        ]))
        .unwrap();
        assert_eq!(p.config_dir, PathBuf::from("/c/flightdeck"));
        assert_eq!(p.state_dir, PathBuf::from("/s/flightdeck"));
        assert_eq!(
            p.user_theme("mine"),
            PathBuf::from("/c/flightdeck/themes/mine.yaml")
        );
    }

    #[test]
    fn flightdeck_home_overrides_both() {
        let p = Paths::resolve(env(&[
            ("HOME", "/h"),
            ("XDG_CONFIG_HOME", "/c"),
            ("FLIGHTDECK_HOME", "/fd"),
        ]))
        .unwrap();
        assert_eq!(p.config_file(), PathBuf::from("/fd/config.yaml"));
        assert_eq!(p.state_dir, PathBuf::from("/fd/state"));
    }

    #[test]
    fn no_home_is_an_error() {
        assert!(Paths::resolve(env(&[])).is_err());
    }

    fn mode(p: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
    }

    fn chmod(p: &Path, m: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    }

    fn lchown(p: &Path, uid: u32) {
        std::os::unix::fs::lchown(p, Some(uid), Some(uid)).unwrap();
    }

    fn is_root() -> bool {
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() == 0 }
    }

    /// The state directory is made 0700 with its parents, narrowed when wider, and used
    /// under a root-owned sticky directory such as /tmp.
    #[test]
    fn private_dirs_are_made_and_narrowed() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("a/b/state");
        private_dir(&dir).unwrap();
        for p in [t.path().join("a"), t.path().join("a/b"), dir.clone()] {
            assert_eq!(mode(&p), 0o700, "{}", p.display());
        }
        chmod(&dir, 0o755);
        private_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        // A world-writable directory on the way is refused, unless sticky and root's.
        let open = t.path().join("open");
        std::fs::create_dir(&open).unwrap();
        chmod(&open, 0o777);
        let e = private_dir(&open.join("state")).unwrap_err();
        assert!(e.to_string().contains("writable by everyone"), "{e}");
        assert!(!open.join("state").exists());
        if is_root() {
            chmod(&open, 0o1777);
            private_dir(&open.join("state")).unwrap();
        }
    }

    /// D8 (hostile review 2026-11-25, M4): a link planted where the state directory goes,
    /// or a directory of another user there or above it, is refused, and the link's
    /// target is left as it was (root used to chmod it 0700 and write into it).
    #[test]
    fn a_planted_link_or_another_users_directory_is_refused_and_left_alone() {
        let t = tempfile::tempdir().unwrap();
        let victim = t.path().join("victimdir");
        std::fs::create_dir(&victim).unwrap();
        chmod(&victim, 0o755);
        let home = t.path().join("hrlink");
        std::fs::create_dir(&home).unwrap();
        std::os::unix::fs::symlink(&victim, home.join("state")).unwrap();
        if is_root() {
            // Planted by another user (uid 65534 plays hrevil).
            lchown(&home.join("state"), 65534);
        }
        let e = private_dir(&home.join("state")).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied);
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(mode(&victim), 0o755, "the link's target is not touched");
        if !is_root() {
            return;
        }
        // Below the link too: nothing is made through it.
        assert!(private_dir(&home.join("state/sub")).is_err());
        assert!(!victim.join("sub").exists());
        // Another user's directory, where the state directory is or above it.
        let theirs = t.path().join("hrshared");
        std::fs::create_dir_all(theirs.join("state")).unwrap();
        chmod(&theirs.join("state"), 0o755);
        lchown(&theirs.join("state"), 65534);
        let e = private_dir(&theirs.join("state")).unwrap_err();
        assert!(e.to_string().contains("owned by uid 65534"), "{e}");
        assert_eq!(mode(&theirs.join("state")), 0o755, "not narrowed: not ours");
        lchown(&theirs, 65534);
        let e = private_dir(&theirs.join("mine")).unwrap_err();
        assert!(e.to_string().contains("neither by you"), "{e}");
        assert!(!theirs.join("mine").exists());
        // A link of another user on the way (in a sticky /tmp-like directory).
        let sticky = t.path().join("sticky");
        std::fs::create_dir(&sticky).unwrap();
        chmod(&sticky, 0o1777);
        let mine = t.path().join("mine");
        std::fs::create_dir(&mine).unwrap();
        std::os::unix::fs::symlink(&mine, sticky.join("fd")).unwrap();
        lchown(&sticky.join("fd"), 65534);
        let e = private_dir(&sticky.join("fd/state")).unwrap_err();
        assert!(e.to_string().contains("symbolic link of uid 65534"), "{e}");
        // The same link made by this user is followed.
        lchown(&sticky.join("fd"), 0);
        private_dir(&sticky.join("fd/state")).unwrap();
        assert_eq!(mode(&mine.join("state")), 0o700);
    }
}
