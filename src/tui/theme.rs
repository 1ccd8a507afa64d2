//! Colour themes: `themes/*.yaml` with flat semantic roles, embedded in the binary,
//! plus user themes from `<config dir>/themes/NAME.yaml` (a user theme of the same name
//! as an embedded one wins). A theme file must give every role and nothing else; a bad
//! file is an error naming the file, line and key, never a silent fallback.
//!
//! `NO_COLOR` (set and non-empty) turns every theme monochrome: no colours at all, the
//! selection and the active tab in reverse video, titles and key hints in bold.

use crate::paths::Paths;
use crate::yaml::{self, YamlError};
use ratatui::style::{Color, Modifier, Style};
use serde::de::{self, Deserializer};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The themes shipped in the binary: (name, YAML source).
pub const EMBEDDED: &[(&str, &str)] = &[
    ("dark", include_str!("../../themes/dark.yaml")),
    ("light", include_str!("../../themes/light.yaml")),
    ("high-contrast", include_str!("../../themes/high-contrast.yaml")),
    ("colorblind", include_str!("../../themes/colorblind.yaml")),
];

pub const DEFAULT_THEME: &str = "dark";

/// How good or bad a thing is; one colour per tone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Info,
    Pass,
    Warn,
    Fail,
}

/// A theme file's roles, exactly as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThemeFile {
    /// One line shown in `:theme` completion.
    pub description: String,
    pub fg: ThemeColor,
    pub bg: ThemeColor,
    pub muted: ThemeColor,
    pub accent: ThemeColor,
    pub title: ThemeColor,
    pub border: ThemeColor,
    pub border_focused: ThemeColor,
    pub tab: ThemeColor,
    pub tab_active_fg: ThemeColor,
    pub tab_active_bg: ThemeColor,
    pub selection_fg: ThemeColor,
    pub selection_bg: ThemeColor,
    pub status_fg: ThemeColor,
    pub status_bg: ThemeColor,
    pub key: ThemeColor,
    pub info: ThemeColor,
    pub pass: ThemeColor,
    pub warn: ThemeColor,
    pub fail: ThemeColor,
    pub rx: ThemeColor,
    pub tx: ThemeColor,
    pub expected: ThemeColor,
    /// Colours of NIC (rail) series, cycled by NIC index.
    pub nic: Vec<ThemeColor>,
}

/// A colour as written in a theme: a name (`red`, `dark_gray`, `reset`), `#rrggbb`, or an
/// ANSI index 0..=255.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThemeColor(pub Color);

const COLOR_NAMES: &[(&str, Color)] = &[
    ("reset", Color::Reset),
    ("black", Color::Black),
    ("red", Color::Red),
    ("green", Color::Green),
    ("yellow", Color::Yellow),
    ("blue", Color::Blue),
    ("magenta", Color::Magenta),
    ("cyan", Color::Cyan),
    ("gray", Color::Gray),
    ("dark_gray", Color::DarkGray),
    ("light_red", Color::LightRed),
    ("light_green", Color::LightGreen),
    ("light_yellow", Color::LightYellow),
    ("light_blue", Color::LightBlue),
    ("light_magenta", Color::LightMagenta),
    ("light_cyan", Color::LightCyan),
    ("white", Color::White),
];

impl ThemeColor {
    pub fn parse(s: &str) -> Result<Self, String> {
        let t = s.trim();
        if let Some(hex) = t.strip_prefix('#') {
            if hex.len() == 6 && hex.chars().all(|c| c.is_ascii_hexdigit()) {
                let v = u32::from_str_radix(hex, 16).expect("checked hex");
                return Ok(ThemeColor(Color::Rgb((v >> 16) as u8, (v >> 8) as u8, v as u8)));
            }
            return Err(format!("`{s}` is not a #rrggbb colour"));
        }
        if let Ok(i) = t.parse::<u8>() {
            return Ok(ThemeColor(Color::Indexed(i)));
        }
        let lower = t.to_ascii_lowercase().replace(['-', ' '], "_");
        let lower = if lower == "grey" {
            "gray".to_string()
        } else {
            lower.replace("grey", "gray")
        };
        COLOR_NAMES
            .iter()
            .find(|(n, _)| *n == lower)
            .map(|(_, c)| ThemeColor(*c))
            .ok_or_else(|| {
                let hint = yaml::closest(&lower, COLOR_NAMES.iter().map(|(n, _)| *n))
                    .map(|h| format!("did you mean `{h}`? "))
                    .unwrap_or_default();
                format!(
                    "`{s}` is not a colour; {hint}expected a name ({}), #rrggbb or 0..255",
                    COLOR_NAMES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
                )
            })
    }
}

impl<'de> Deserialize<'de> for ThemeColor {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = ThemeColor;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a colour: a name, #rrggbb or 0..255")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ThemeColor, E> {
                ThemeColor::parse(v).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ThemeColor, E> {
                u8::try_from(v)
                    .map(|i| ThemeColor(Color::Indexed(i)))
                    .map_err(|_| E::custom(format!("colour index {v} is out of range 0..255")))
            }
        }
        d.deserialize_any(V)
    }
}

/// A resolved theme: semantic styles for the views to use.
#[derive(Debug, Clone)]
pub struct Theme {
    pub name: String,
    pub monochrome: bool,
    roles: Option<ThemeFile>,
}

#[derive(Debug, thiserror::Error)]
pub enum ThemeError {
    #[error("unknown theme `{name}`; available: {}{hint}", available.join(", "))]
    Unknown {
        name: String,
        available: Vec<String>,
        hint: String,
    },
    #[error(transparent)]
    File(#[from] YamlError),
}

impl Theme {
    /// Parse a theme file's text. Empty files are errors (every role is required).
    pub fn parse(name: &str, file: &Path, text: &str) -> Result<Theme, YamlError> {
        let roles: ThemeFile = serde_yaml::from_str(text).map_err(|e| yaml::convert(file, &e))?;
        if roles.nic.is_empty() {
            return Err(YamlError {
                file: file.to_path_buf(),
                line: None,
                column: None,
                message: "nic: expected at least one colour".into(),
            });
        }
        Ok(Theme {
            name: name.to_string(),
            monochrome: false,
            roles: Some(roles),
        })
    }

    /// The embedded default theme.
    pub fn default_theme() -> Theme {
        Self::embedded(DEFAULT_THEME)
            .and_then(Result::ok)
            .expect("the embedded default theme parses")
    }

    /// An embedded theme by name.
    pub fn embedded(name: &str) -> Option<Result<Theme, YamlError>> {
        EMBEDDED
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(n, text)| Theme::parse(n, &PathBuf::from(format!("themes/{n}.yaml")), text))
    }

    /// Every theme name available: embedded ones and the user's, sorted, deduplicated.
    pub fn available(paths: &Paths) -> Vec<String> {
        let mut names: Vec<String> = EMBEDDED.iter().map(|(n, _)| n.to_string()).collect();
        if let Ok(dir) = std::fs::read_dir(paths.themes_dir()) {
            for entry in dir.flatten() {
                let p = entry.path();
                if p.extension().is_some_and(|e| e == "yaml") {
                    if let Some(stem) = p.file_stem().and_then(|s| s.to_str()) {
                        names.push(stem.to_string());
                    }
                }
            }
        }
        names.sort();
        names.dedup();
        names
    }

    /// Load a theme by name: the user's file if there is one, else the embedded theme.
    /// `monochrome` (from `NO_COLOR`) strips colours after the theme has been validated.
    pub fn load(name: &str, paths: &Paths, monochrome: bool) -> Result<Theme, ThemeError> {
        let user = paths.user_theme(name);
        let mut theme = if user.is_file() {
            let text = crate::yaml::read_text(&user)?;
            Theme::parse(name, &user, &text)?
        } else if let Some(t) = Theme::embedded(name) {
            t?
        } else {
            let available = Theme::available(paths);
            let hint = yaml::did_you_mean(name, available.iter().map(String::as_str));
            return Err(ThemeError::Unknown {
                name: name.to_string(),
                available,
                hint,
            });
        };
        theme.monochrome = monochrome;
        Ok(theme)
    }

    /// Whether `NO_COLOR` asks for no colour (set and not empty, per no-color.org).
    pub fn no_color_from_env() -> bool {
        std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
    }

    pub fn description(&self) -> &str {
        self.roles.as_ref().map(|r| r.description.as_str()).unwrap_or("")
    }

    fn roles(&self) -> Option<&ThemeFile> {
        if self.monochrome {
            None
        } else {
            self.roles.as_ref()
        }
    }

    fn fg_style(&self, pick: impl Fn(&ThemeFile) -> ThemeColor, mono: Style) -> Style {
        match self.roles() {
            Some(r) => Style::new().fg(pick(r).0),
            None => mono,
        }
    }

    /// The base text style (and background of the whole screen).
    pub fn base(&self) -> Style {
        match self.roles() {
            Some(r) => Style::new().fg(r.fg.0).bg(r.bg.0),
            None => Style::new(),
        }
    }

    pub fn muted(&self) -> Style {
        self.fg_style(|r| r.muted, Style::new().add_modifier(Modifier::DIM))
    }

    pub fn accent(&self) -> Style {
        self.fg_style(|r| r.accent, Style::new().add_modifier(Modifier::BOLD))
    }

    pub fn title(&self) -> Style {
        self.fg_style(|r| r.title, Style::new())
            .add_modifier(Modifier::BOLD)
    }

    pub fn border(&self, focused: bool) -> Style {
        match (self.roles(), focused) {
            (Some(r), true) => Style::new().fg(r.border_focused.0),
            (Some(r), false) => Style::new().fg(r.border.0),
            (None, true) => Style::new().add_modifier(Modifier::BOLD),
            (None, false) => Style::new(),
        }
    }

    pub fn tab(&self, active: bool) -> Style {
        match (self.roles(), active) {
            (Some(r), true) => Style::new()
                .fg(r.tab_active_fg.0)
                .bg(r.tab_active_bg.0)
                .add_modifier(Modifier::BOLD),
            (Some(r), false) => Style::new().fg(r.tab.0),
            (None, true) => Style::new().add_modifier(Modifier::REVERSED | Modifier::BOLD),
            (None, false) => Style::new(),
        }
    }

    pub fn selection(&self) -> Style {
        match self.roles() {
            Some(r) => Style::new().fg(r.selection_fg.0).bg(r.selection_bg.0),
            None => Style::new().add_modifier(Modifier::REVERSED),
        }
    }

    pub fn status_bar(&self) -> Style {
        match self.roles() {
            Some(r) => Style::new().fg(r.status_fg.0).bg(r.status_bg.0),
            None => Style::new(),
        }
    }

    pub fn key_hint(&self) -> Style {
        self.fg_style(|r| r.key, Style::new())
            .add_modifier(Modifier::BOLD)
    }

    pub fn tone(&self, tone: Tone) -> Style {
        match tone {
            Tone::Info => self.fg_style(|r| r.info, Style::new()),
            Tone::Pass => self.fg_style(|r| r.pass, Style::new()),
            Tone::Warn => self.fg_style(|r| r.warn, Style::new().add_modifier(Modifier::BOLD)),
            Tone::Fail => self.fg_style(
                |r| r.fail,
                Style::new().add_modifier(Modifier::BOLD | Modifier::UNDERLINED),
            ),
        }
    }

    pub fn rx(&self) -> Style {
        self.fg_style(|r| r.rx, Style::new())
    }

    pub fn tx(&self) -> Style {
        self.fg_style(|r| r.tx, Style::new().add_modifier(Modifier::DIM))
    }

    pub fn expected(&self) -> Style {
        self.fg_style(|r| r.expected, Style::new().add_modifier(Modifier::DIM))
    }

    /// The colour of NIC `i`'s series (cycled).
    pub fn nic(&self, i: usize) -> Style {
        match self.roles() {
            Some(r) => Style::new().fg(r.nic[i % r.nic.len()].0),
            None => Style::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths_in(dir: &Path) -> Paths {
        Paths {
            config_dir: dir.to_path_buf(),
            state_dir: dir.join("state"),
        }
    }

    #[test]
    fn every_embedded_theme_parses_and_is_named_in_themes_dir() {
        for (name, _) in EMBEDDED {
            let t = Theme::embedded(name).unwrap().unwrap_or_else(|e| panic!("{e}"));
            assert!(!t.description().is_empty());
            let on_disk =
                std::fs::read_to_string(format!("{}/themes/{name}.yaml", env!("CARGO_MANIFEST_DIR")))
                    .unwrap();
            assert!(!on_disk.is_empty());
        }
        assert_eq!(Theme::default_theme().name, "dark");
    }

    #[test]
    fn colours_parse() {
        assert_eq!(ThemeColor::parse("#ff8000").unwrap().0, Color::Rgb(255, 128, 0));
        assert_eq!(ThemeColor::parse("dark-grey").unwrap().0, Color::DarkGray);
        assert_eq!(ThemeColor::parse("208").unwrap().0, Color::Indexed(208));
        assert!(ThemeColor::parse("#ff80").is_err());
        assert!(ThemeColor::parse("bleu")
            .unwrap_err()
            .contains("did you mean `blue`?"));
    }

    fn with_line_replaced(key: &str, replacement: &str) -> String {
        EMBEDDED[0]
            .1
            .lines()
            .map(|l| {
                if l.starts_with(&format!("{key}:")) {
                    replacement.to_string()
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn line_of(text: &str, needle: &str) -> usize {
        text.lines().position(|l| l.starts_with(needle)).unwrap() + 1
    }

    #[test]
    fn bad_colour_names_file_line_and_key() {
        let text = with_line_replaced("rx", "rx: blu");
        let e = Theme::parse("mine", Path::new("/cfg/themes/mine.yaml"), &text).unwrap_err();
        assert_eq!(e.line, Some(line_of(&text, "rx:")), "{e}");
        assert!(e.to_string().starts_with("/cfg/themes/mine.yaml:"), "{e}");
        assert!(
            e.message
                .starts_with("rx: `blu` is not a colour; did you mean `blue`?"),
            "{e}"
        );
    }

    #[test]
    fn unknown_and_missing_roles_are_errors() {
        let text = with_line_replaced("rx", "rxx: blue");
        let e = Theme::parse("mine", Path::new("mine.yaml"), &text).unwrap_err();
        assert!(e.message.contains("unknown field `rxx`"), "{e}");
        assert!(e.message.contains("did you mean `rx`?"), "{e}");
        let text = with_line_replaced("tx", "");
        let e = Theme::parse("mine", Path::new("mine.yaml"), &text).unwrap_err();
        assert!(e.message.contains("missing field `tx`"), "{e}");
    }

    #[test]
    fn user_theme_wins_and_bad_user_theme_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let paths = paths_in(dir.path());
        std::fs::create_dir_all(paths.themes_dir()).unwrap();
        std::fs::write(
            paths.user_theme("dark"),
            with_line_replaced("rx", "rx: '#010203'"),
        )
        .unwrap();
        let t = Theme::load("dark", &paths, false).unwrap();
        assert_eq!(t.rx().fg, Some(Color::Rgb(1, 2, 3)));
        std::fs::write(paths.user_theme("broken"), "fg: [1\n").unwrap();
        let e = Theme::load("broken", &paths, false).unwrap_err().to_string();
        assert!(e.contains("broken.yaml:"), "{e}");
        assert!(Theme::available(&paths).contains(&"broken".to_string()));
        let e = Theme::load("lihgt", &paths, false).unwrap_err().to_string();
        assert!(e.contains("did you mean `light`?"), "{e}");
    }

    #[test]
    fn monochrome_has_no_colour_and_selects_by_reverse_video() {
        let dir = tempfile::tempdir().unwrap();
        let t = Theme::load("dark", &paths_in(dir.path()), true).unwrap();
        for s in [
            t.base(),
            t.selection(),
            t.tab(true),
            t.rx(),
            t.tx(),
            t.tone(Tone::Fail),
            t.nic(3),
            t.border(true),
        ] {
            assert_eq!((s.fg, s.bg), (None, None));
        }
        assert!(t.selection().add_modifier.contains(Modifier::REVERSED));
        assert!(t.tab(true).add_modifier.contains(Modifier::REVERSED));
        assert_ne!(
            t.tone(Tone::Pass),
            t.tone(Tone::Fail),
            "pass and fail stay distinguishable"
        );
    }

    #[test]
    fn colour_pairs_differ_in_every_theme() {
        for (name, _) in EMBEDDED {
            let t = Theme::embedded(name).unwrap().unwrap();
            assert_ne!(t.rx().fg, t.tx().fg, "{name}: rx/tx");
            assert_ne!(t.tone(Tone::Pass).fg, t.tone(Tone::Fail).fg, "{name}: pass/fail");
            assert_ne!(t.selection().bg, t.base().bg, "{name}: selection visible");
        }
    }

    /// Simulated colour-vision deficiency (Machado et al. 2009, severity 1) in linear
    /// RGB, then CIE76 distance in L*a*b*: how far apart two colours look.
    fn cvd_distance(a: Color, b: Color, matrix: Option<[[f64; 3]; 3]>) -> f64 {
        fn lin(c: u8) -> f64 {
            let c = f64::from(c) / 255.0;
            if c <= 0.04045 {
                c / 12.92
            } else {
                ((c + 0.055) / 1.055).powf(2.4)
            }
        }
        fn lab(c: [f64; 3]) -> [f64; 3] {
            let [r, g, b] = c;
            let x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047;
            let y = 0.2126 * r + 0.7152 * g + 0.0722 * b;
            let z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883;
            let f = |t: f64| {
                if t > 0.008856 {
                    t.cbrt()
                } else {
                    7.787 * t + 16.0 / 116.0
                }
            };
            [116.0 * f(y) - 16.0, 500.0 * (f(x) - f(y)), 200.0 * (f(y) - f(z))]
        }
        let see = |c: Color| {
            let Color::Rgb(r, g, b) = c else {
                panic!("expected an RGB colour, got {c:?}")
            };
            let v = [lin(r), lin(g), lin(b)];
            let v = match matrix {
                None => v,
                Some(m) => {
                    [0, 1, 2].map(|i| (m[i][0] * v[0] + m[i][1] * v[1] + m[i][2] * v[2]).clamp(0.0, 1.0))
                }
            };
            lab(v)
        };
        let (p, q) = (see(a), see(b));
        ((p[0] - q[0]).powi(2) + (p[1] - q[1]).powi(2) + (p[2] - q[2]).powi(2)).sqrt()
    }

    #[test]
    fn colorblind_theme_pairs_stay_apart_under_every_deficiency() {
        const PROTAN: [[f64; 3]; 3] = [
            [0.152286, 1.052583, -0.204868],
            [0.114503, 0.786281, 0.099216],
            [-0.003882, -0.048116, 1.051998],
        ];
        const DEUTAN: [[f64; 3]; 3] = [
            [0.367322, 0.860646, -0.227968],
            [0.280085, 0.672501, 0.047413],
            [-0.011820, 0.042940, 0.968881],
        ];
        const TRITAN: [[f64; 3]; 3] = [
            [1.255528, -0.076749, -0.178779],
            [-0.078411, 0.930809, 0.147602],
            [0.004733, 0.691367, 0.303900],
        ];
        let t = Theme::embedded("colorblind").unwrap().unwrap();
        let pairs = [
            ("rx/tx", t.rx().fg.unwrap(), t.tx().fg.unwrap()),
            (
                "pass/fail",
                t.tone(Tone::Pass).fg.unwrap(),
                t.tone(Tone::Fail).fg.unwrap(),
            ),
        ];
        for (name, a, b) in pairs {
            for (vision, m) in [
                ("normal", None),
                ("protanopia", Some(PROTAN)),
                ("deuteranopia", Some(DEUTAN)),
                ("tritanopia", Some(TRITAN)),
            ] {
                let d = cvd_distance(a, b, m);
                assert!(d >= 40.0, "{name} under {vision}: delta E {d:.0} < 40");
            }
        }
        // The check can fail: the dark theme's green/red pass/fail collapses under deuteranopia.
        let dark = Theme::default_theme();
        let d = cvd_distance(
            dark.tone(Tone::Pass).fg.unwrap(),
            dark.tone(Tone::Fail).fg.unwrap(),
            Some(DEUTAN),
        );
        assert!(d < 40.0, "{d}");
    }
}
