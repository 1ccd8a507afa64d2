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
/// with wider permissions is narrowed. State, logs and runs live in such directories.
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let meta = std::fs::metadata(dir)?;
    if meta.permissions().mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
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
}
