//! The config file, `config.yaml` in the config dir (see `paths.rs`).
//!
//! Every field is optional; a missing file means the defaults. Unknown fields are errors
//! with FILE:LINE:COL and a "did you mean". `flightdeck config default` prints
//! [`default_text`], a commented file that parses to the defaults.

use crate::paths::Paths;
use crate::yaml::{self, YamlError};
use serde::Deserialize;
use std::path::Path;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Theme name: embedded (dark, light, high-contrast, colorblind) or a user theme.
    pub theme: Option<String>,
    /// How many colours the terminal shows (`truecolor`, `256`, `16`); unset: guessed
    /// from `COLORTERM` and `TERM`.
    pub color_depth: Option<ColorDepth>,
    /// Log level for the log file: error, warn, info, debug or trace.
    pub log_level: Option<LogLevel>,
    /// Key binding overrides per context: the cockpit's keymap reads and checks them
    /// (`tui::keymap::load_overrides`, with FILE:LINE:COL); here they are only kept.
    #[serde(default)]
    pub keys: Option<serde_yaml::Value>,
    /// The GCP backend: dstack's gcp backend fields plus SSH settings
    /// (see `cloud::gcp::settings`).
    pub gcp: Option<crate::cloud::gcp::settings::GcpSettings>,
    /// GKE: what the operator allows kubeconfigs that fleet files name to run.
    pub gke: Option<GkeConfig>,
    /// The connection holder: `on` (default) uses one when it runs (the cockpit, or
    /// `flightdeck mux`), `auto` also starts `flightdeck mux` when none runs, `off` never
    /// uses one.
    #[serde(default)]
    pub mux: MuxMode,
    /// How long a background holder stays without a command before it exits.
    pub mux_persist: Option<Span>,
}

/// The operator's GKE settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GkeConfig {
    /// Credential plugins a kubeconfig that a fleet file names may run on this machine,
    /// each its whole command line as `fleet plan` and `fleet validate` write it
    /// (`gke-gcloud-auth-plugin`, `sh -c 'echo token'`). Your own kubeconfig
    /// (`$KUBECONFIG`, `~/.kube/config`) runs its plugins as kubectl does.
    #[serde(default)]
    pub allow_exec_plugins: Vec<String>,
    /// Files outside its own folder that a kubeconfig a fleet file names may read and
    /// send to its server (`tokenFile`; `client-certificate`, `client-key`,
    /// `certificate-authority`), as absolute paths.
    #[serde(default)]
    pub allow_kubeconfig_files: Vec<String>,
}

/// How many colours the terminal shows (the cockpit's theme maps its colours down to it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColorDepth {
    /// 24-bit colour: `#rrggbb` as written.
    TrueColor,
    /// The xterm 256-colour palette.
    Ansi256,
    /// The 16 ANSI colours (the terminal's own palette).
    Ansi16,
}

impl std::str::FromStr for ColorDepth {
    type Err = String;
    fn from_str(s: &str) -> Result<ColorDepth, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "truecolor" | "24bit" | "24" => Ok(ColorDepth::TrueColor),
            "256" => Ok(ColorDepth::Ansi256),
            "16" => Ok(ColorDepth::Ansi16),
            _ => Err(format!(
                "`{s}` is not a colour depth; expected truecolor (or 24bit), 256 or 16"
            )),
        }
    }
}

impl<'de> Deserialize<'de> for ColorDepth {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = ColorDepth;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a colour depth: truecolor, 256 or 16")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ColorDepth, E> {
                v.parse().map_err(E::custom)
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<ColorDepth, E> {
                v.to_string().parse().map_err(E::custom)
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<ColorDepth, E> {
                v.to_string().parse().map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MuxMode {
    Off,
    #[default]
    On,
    Auto,
}

/// The default of `mux_persist`.
pub const MUX_PERSIST: std::time::Duration = std::time::Duration::from_secs(600);

impl Config {
    pub fn mux_persist(&self) -> std::time::Duration {
        self.mux_persist.map_or(MUX_PERSIST, |s| s.0)
    }
}

/// A length of time written as `90s`, `10m`, `2h` or a number of seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span(pub std::time::Duration);

impl std::str::FromStr for Span {
    type Err = String;
    fn from_str(s: &str) -> Result<Span, String> {
        let t = s.trim();
        let (num, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()));
        let n: u64 = num
            .parse()
            .map_err(|_| format!("`{s}`: expected a length of time such as 90s, 10m or 2h"))?;
        let secs = match unit.trim() {
            "" | "s" => n,
            "m" => n * 60,
            "h" => n * 3600,
            other => return Err(format!("`{s}`: unknown unit `{other}` (s, m or h)")),
        };
        Ok(Span(std::time::Duration::from_secs(secs)))
    }
}

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Span, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Span;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a length of time such as 90s, 10m or 2h")
            }
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Span, E> {
                Ok(Span(std::time::Duration::from_secs(n)))
            }
            fn visit_str<E: serde::de::Error>(self, t: &str) -> Result<Span, E> {
                t.parse().map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

impl LogLevel {
    pub fn filter(self) -> tracing::level_filters::LevelFilter {
        use tracing::level_filters::LevelFilter;
        match self {
            LogLevel::Error => LevelFilter::ERROR,
            LogLevel::Warn => LevelFilter::WARN,
            LogLevel::Info => LevelFilter::INFO,
            LogLevel::Debug => LevelFilter::DEBUG,
            LogLevel::Trace => LevelFilter::TRACE,
        }
    }
}

impl Config {
    /// Load the config file; a missing file is the default config.
    pub fn load(paths: &Paths) -> Result<Config, YamlError> {
        Self::load_file(&paths.config_file())
    }

    pub fn load_file(file: &Path) -> Result<Config, YamlError> {
        if !file.exists() {
            return Ok(Config::default());
        }
        yaml::from_file(file)
    }
}

/// A commented config file whose every setting is the default, with the default key
/// bindings listed: `bindings` is the cockpit's commented `keys:` listing
/// (`tui::keymap::default_bindings_text`, generated from the keymap so it never drifts).
pub fn default_text(bindings: &str) -> String {
    let mut s = String::new();
    s.push_str(
        "# flightdeck configuration.\n\
         # Place: $XDG_CONFIG_HOME/flightdeck/config.yaml (or $FLIGHTDECK_HOME/config.yaml).\n\
         # Every setting is optional; uncomment to change one.\n\
         \n\
         # Colour theme: dark (default), light, high-contrast, colorblind, or the name of a\n\
         # user theme in themes/NAME.yaml beside this file. --theme overrides it; NO_COLOR\n\
         # turns any theme monochrome.\n\
         # theme: dark\n\
         \n\
         # How many colours the terminal shows: truecolor (24bit), 256 or 16. Unset, it is\n\
         # guessed: COLORTERM=truecolor or 24bit gives truecolor, a TERM with 256color\n\
         # gives 256, anything else 16.\n\
         # color_depth: truecolor\n\
         \n\
         # Level of the log file in the state dir (error, warn, info, debug, trace).\n\
         # --log-level overrides it.\n\
         # log_level: info\n\
         \n\
         # The connection holder (as OpenSSH's ControlMaster): one connection per node kept\n\
         # by the cockpit while it runs, or by a background `flightdeck mux`; exec, nics,\n\
         # job, nccl and doctor open channels on it. on: use one that runs; auto: also\n\
         # start `flightdeck mux` when none runs; off: never.\n\
         # mux: on\n\
         # How long `flightdeck mux` stays without a command before it exits.\n\
         # mux_persist: 10m\n\
         \n\
         # GKE: credential plugins a kubeconfig that a fleet file names may run on this\n\
         # machine, each its whole command line as `fleet plan` shows it (a fleet file\n\
         # cannot allow its own). Your own kubeconfig's run as kubectl runs them.\n\
         # gke:\n\
         #   allow_exec_plugins: [gke-gcloud-auth-plugin]\n\
         #   # files outside its folder such a kubeconfig may read and send (tokenFile,\n\
         #   # client certificate and key, CA), as absolute paths\n\
         #   allow_kubeconfig_files: []\n\
         \n\
         # The GCP backend (dstack's gcp backend fields, plus SSH settings for new VMs).\n\
         # gcp:\n\
         #   project_id: my-project\n\
         #   creds: {type: default}      # or {type: service_account, filename: ~/sa.json}\n\
         #   regions: [us-central1]\n\
         #   vpc_name: default\n\
         #   extra_vpcs: []              # data VPCs, in NIC order (TCPX 4, TCPXO 8)\n\
         #   roce_vpcs: []               # the RoCE VPC of MRDMA NICs (A3 Ultra, A4)\n\
         #   vm_service_account: sa@my-project.iam.gserviceaccount.com\n\
         #   ssh_user: ubuntu\n\
         #   ssh_public_key: ~/.ssh/id_ed25519.pub\n\
         #   health_check_secs: 60       # the cockpit checks for preempted nodes; 0: off\n\
         #   bootstrap: true             # GPUDirect bootstrap of new nodes after fleet apply\n\
         \n\
         # Key bindings per context. An entry replaces that action's default keys; a key\n\
         # given here is taken away from any other action of the same context.\n\
         # Chords: q, G, ctrl-c, alt-x, shift-tab, esc, enter, tab, space, up, pageup, f1...\n",
    );
    s.push_str(bindings);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_text_uncommented_parses_to_the_defaults() {
        let text = default_text("# keys:\n#   global:\n#     quit: [q]\n");
        // Uncomment every setting line (not the prose) and parse it.
        let uncommented: String = text
            .lines()
            .filter_map(|l| l.strip_prefix("# "))
            .filter(|l| {
                l.starts_with("theme:")
                    || l.starts_with("color_depth:")
                    || l.starts_with("log_level:")
                    || l.starts_with("gcp:")
                    || l.starts_with("gke:")
                    || l.starts_with("keys:")
                    || l.starts_with("  ")
            })
            .map(|l| format!("{l}\n"))
            .collect();
        let cfg: Config = yaml::from_str(Path::new("default.yaml"), &uncommented)
            .unwrap_or_else(|e| panic!("{e}\n{uncommented}"));
        assert_eq!(cfg.theme.as_deref(), Some("dark"));
        assert_eq!(
            cfg.gke.as_ref().map(|g| g.allow_exec_plugins.clone()),
            Some(vec!["gke-gcloud-auth-plugin".to_string()])
        );
        assert_eq!(cfg.color_depth, Some(ColorDepth::TrueColor));
        assert_eq!(cfg.log_level, Some(LogLevel::Info));
        assert!(cfg.keys.is_some());
        assert_eq!(
            cfg.gcp.as_ref().and_then(|g| g.project_id.as_deref()),
            Some("my-project")
        );
        // As shipped (all commented) it is the empty default config.
        let cfg: Config = yaml::from_str(Path::new("default.yaml"), &text).unwrap();
        assert!(cfg.theme.is_none() && cfg.keys.is_none());
    }

    #[test]
    fn unknown_setting_is_located_with_a_suggestion() {
        let e = yaml::from_str::<Config>(Path::new("config.yaml"), "theme: light\nlog_levle: debug\n")
            .unwrap_err();
        assert_eq!(e.to_string().split(": ").next(), Some("config.yaml:2:1"));
        assert!(e.message.contains("did you mean `log_level`?"), "{e}");
        let e = yaml::from_str::<Config>(Path::new("config.yaml"), "log_level: loud\n").unwrap_err();
        assert!(e.message.contains("unknown value `loud`"), "{e}");
    }

    #[test]
    fn color_depth_takes_names_and_numbers() {
        for (text, depth) in [
            ("color_depth: 256\n", ColorDepth::Ansi256),
            ("color_depth: '16'\n", ColorDepth::Ansi16),
            ("color_depth: 24bit\n", ColorDepth::TrueColor),
            ("color_depth: truecolor\n", ColorDepth::TrueColor),
        ] {
            let cfg: Config = yaml::from_str(Path::new("config.yaml"), text).unwrap();
            assert_eq!(cfg.color_depth, Some(depth), "{text}");
        }
        let e = yaml::from_str::<Config>(Path::new("config.yaml"), "color_depth: 88\n").unwrap_err();
        assert!(
            e.message.contains("expected truecolor (or 24bit), 256 or 16"),
            "{e}"
        );
    }

    #[test]
    fn missing_file_is_default() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = Config::load_file(&dir.path().join("nope.yaml")).unwrap();
        assert!(cfg.theme.is_none());
    }

    #[test]
    fn mux_settings_read_and_a_bad_time_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("config.yaml");
        std::fs::write(&f, "mux: auto\nmux_persist: 90s\n").unwrap();
        let c = Config::load_file(&f).unwrap();
        assert_eq!(
            (c.mux, c.mux_persist()),
            (MuxMode::Auto, std::time::Duration::from_secs(90))
        );
        std::fs::write(&f, "mux_persist: 600\n").unwrap();
        assert_eq!(Config::load_file(&f).unwrap().mux_persist().as_secs(), 600);
        assert_eq!(Config::default().mux, MuxMode::On);
        assert_eq!(Config::default().mux_persist(), MUX_PERSIST);
        assert_eq!("2h".parse::<Span>().unwrap().0.as_secs(), 7200);
        std::fs::write(&f, "mux: sometimes\n").unwrap();
        let e = Config::load_file(&f).unwrap_err().to_string();
        assert!(e.contains(":1:") && e.contains("sometimes"), "{e}");
        std::fs::write(&f, "mux: on\nmux_persist: ten\n").unwrap();
        let e = Config::load_file(&f).unwrap_err().to_string();
        assert!(
            e.contains(":2:") && e.contains("expected a length of time"),
            "{e}"
        );
    }
}
