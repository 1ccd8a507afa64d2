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

use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    pub config_dir: PathBuf,
    pub state_dir: PathBuf,
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
