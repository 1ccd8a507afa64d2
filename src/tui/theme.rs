//! Colour themes: `themes/*.yaml` with flat semantic roles, embedded in the binary,
//! plus user themes from `<config dir>/themes/NAME.yaml` (a user theme of the same name
//! as an embedded one wins). A theme file must give every role and nothing else; a bad
//! file is an error naming the file, line and key, never a silent fallback.
//!
//! `NO_COLOR` (set and non-empty) turns every theme monochrome: no colours at all, the
//! selection and the active tab in reverse video, titles and key hints in bold, and the
//! focused pane marked in its title ([`Theme::focus_marker`]).
//!
//! Colour depth ([`ColorDepth`]): `COLORTERM=truecolor`/`24bit` gets the theme's colours
//! as written; else `TERM` naming `256color` gets them mapped to the 256-colour palette;
//! else the 16 ANSI colours. The config file's `color_depth` overrides the guess. A theme
//! whose `selection_fg` and `selection_bg` are both `reset` selects by reverse video, and
//! so does every theme at 16 colours: tone colours (a failed run in red) stay readable
//! on the selected row.

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

pub use crate::config::ColorDepth;

/// The config file's `color_depth` (set once at startup), which wins over the guess
/// from the environment.
static DEPTH_SETTING: std::sync::OnceLock<ColorDepth> = std::sync::OnceLock::new();

impl ColorDepth {
    /// The depth `COLORTERM` and `TERM` name: `truecolor`/`24bit` in `COLORTERM` is
    /// 24-bit, `256color` in `TERM` is 256 colours, anything else 16 (what every colour
    /// terminal shows).
    pub fn detect(colorterm: Option<&str>, term: Option<&str>) -> ColorDepth {
        let ct = colorterm.unwrap_or("").to_ascii_lowercase();
        if ct == "truecolor" || ct == "24bit" {
            ColorDepth::TrueColor
        } else if term.unwrap_or("").to_ascii_lowercase().contains("256color") {
            ColorDepth::Ansi256
        } else {
            ColorDepth::Ansi16
        }
    }

    /// The config file's setting, kept for every theme loaded later (`:theme`).
    pub fn set_configured(depth: Option<ColorDepth>) {
        if let Some(d) = depth {
            let _ = DEPTH_SETTING.set(d);
        }
    }

    /// The depth in use: the config file's `color_depth`, else the environment's.
    pub fn current() -> ColorDepth {
        if let Some(d) = DEPTH_SETTING.get() {
            return *d;
        }
        let var = |k: &str| std::env::var(k).ok();
        ColorDepth::detect(var("COLORTERM").as_deref(), var("TERM").as_deref())
    }

    /// `c` as this depth can show it: RGB to the nearest palette entry, a 256-palette
    /// index to the nearest of the 16 at 16 colours; names and `reset` unchanged.
    pub fn map(self, c: Color) -> Color {
        match (self, c) {
            (ColorDepth::TrueColor, _) => c,
            (ColorDepth::Ansi256, Color::Rgb(r, g, b)) => Color::Indexed(nearest_256(r, g, b)),
            (ColorDepth::Ansi256, _) => c,
            (ColorDepth::Ansi16, Color::Rgb(r, g, b)) => nearest_16(r, g, b),
            (ColorDepth::Ansi16, Color::Indexed(i)) if i >= 16 => {
                let (r, g, b) = palette_rgb(i);
                nearest_16(r, g, b)
            }
            (ColorDepth::Ansi16, Color::Indexed(i)) => ANSI16[usize::from(i)].0,
            (ColorDepth::Ansi16, _) => c,
        }
    }
}

/// The 16 ANSI colours with xterm's default RGB values (xterm's `256colres.h`/
/// `XTerm-col.ad`), by index.
const ANSI16: [(Color, (u8, u8, u8)); 16] = [
    (Color::Black, (0, 0, 0)),
    (Color::Red, (205, 0, 0)),
    (Color::Green, (0, 205, 0)),
    (Color::Yellow, (205, 205, 0)),
    (Color::Blue, (0, 0, 238)),
    (Color::Magenta, (205, 0, 205)),
    (Color::Cyan, (0, 205, 205)),
    (Color::Gray, (229, 229, 229)),
    (Color::DarkGray, (127, 127, 127)),
    (Color::LightRed, (255, 0, 0)),
    (Color::LightGreen, (0, 255, 0)),
    (Color::LightYellow, (255, 255, 0)),
    (Color::LightBlue, (92, 92, 255)),
    (Color::LightMagenta, (255, 0, 255)),
    (Color::LightCyan, (0, 255, 255)),
    (Color::White, (255, 255, 255)),
];

/// The levels of the 6x6x6 colour cube of the 256-colour palette.
const CUBE: [u8; 6] = [0, 95, 135, 175, 215, 255];

/// The RGB of palette entry `i` (xterm's 256-colour palette).
fn palette_rgb(i: u8) -> (u8, u8, u8) {
    match i {
        0..=15 => ANSI16[usize::from(i)].1,
        16..=231 => {
            let n = i - 16;
            (
                CUBE[usize::from(n / 36)],
                CUBE[usize::from(n / 6 % 6)],
                CUBE[usize::from(n % 6)],
            )
        }
        _ => {
            let v = 8 + 10 * (i - 232);
            (v, v, v)
        }
    }
}

/// The RGB a colour shows as (names as xterm's defaults); `None` for `reset`.
pub fn rgb_of(c: Color) -> Option<(u8, u8, u8)> {
    match c {
        Color::Rgb(r, g, b) => Some((r, g, b)),
        Color::Indexed(i) => Some(palette_rgb(i)),
        Color::Reset => None,
        named => ANSI16.iter().find(|(n, _)| *n == named).map(|(_, rgb)| *rgb),
    }
}

fn distance(a: (u8, u8, u8), b: (u8, u8, u8)) -> i32 {
    // Weighted RGB distance (red and blue weighted by the mean red, "redmean").
    let rm = (i32::from(a.0) + i32::from(b.0)) / 2;
    let (dr, dg, db) = (
        i32::from(a.0) - i32::from(b.0),
        i32::from(a.1) - i32::from(b.1),
        i32::from(a.2) - i32::from(b.2),
    );
    (((512 + rm) * dr * dr) >> 8) + 4 * dg * dg + (((767 - rm) * db * db) >> 8)
}

/// The nearest entry of the cube and grey ramp (16..=255; the first 16 vary by terminal).
fn nearest_256(r: u8, g: u8, b: u8) -> u8 {
    (16..=255u8)
        .min_by_key(|&i| distance((r, g, b), palette_rgb(i)))
        .expect("a non-empty range")
}

/// The nearest of the 16 ANSI colours by hue and lightness (RGB distance to xterm's
/// saturated defaults would send soft theme colours to grey): greys (low saturation)
/// to black, dark gray, gray or white by lightness; other colours to the hue's colour,
/// its light variant when light.
fn nearest_16(r: u8, g: u8, b: u8) -> Color {
    let [rf, gf, bf] = [r, g, b].map(|c| f64::from(c) / 255.0);
    let (max, min) = (rf.max(gf).max(bf), rf.min(gf).min(bf));
    let (l, c) = ((max + min) / 2.0, max - min);
    let s = if c == 0.0 {
        0.0
    } else {
        c / (1.0 - (2.0 * l - 1.0).abs())
    };
    if s < 0.25 || c < 0.1 {
        let avg = (u16::from(r) + u16::from(g) + u16::from(b)) / 3;
        return match avg {
            0..=47 => Color::Black,
            48..=159 => Color::DarkGray,
            160..=234 => Color::Gray,
            _ => Color::White,
        };
    }
    let h = if max == rf {
        60.0 * ((gf - bf) / c).rem_euclid(6.0)
    } else if max == gf {
        60.0 * ((bf - rf) / c + 2.0)
    } else {
        60.0 * ((rf - gf) / c + 4.0)
    };
    const HUES: [(Color, Color); 6] = [
        (Color::Red, Color::LightRed),
        (Color::Yellow, Color::LightYellow),
        (Color::Green, Color::LightGreen),
        (Color::Cyan, Color::LightCyan),
        (Color::Blue, Color::LightBlue),
        (Color::Magenta, Color::LightMagenta),
    ];
    // Sectors of 60 degrees centred on each hue.
    let (dark, light) = HUES[((h + 30.0) / 60.0) as usize % 6];
    if l > 0.55 {
        light
    } else {
        dark
    }
}

/// WCAG 2 contrast ratio of two colours (1 to 21).
pub fn contrast(a: (u8, u8, u8), b: (u8, u8, u8)) -> f64 {
    fn lum((r, g, b): (u8, u8, u8)) -> f64 {
        let lin = |c: u8| {
            let c = f64::from(c) / 255.0;
            if c <= 0.04045 {
                c / 12.92
            } else {
                ((c + 0.055) / 1.055).powf(2.4)
            }
        };
        0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b)
    }
    let (x, y) = (lum(a), lum(b));
    (x.max(y) + 0.05) / (x.min(y) + 0.05)
}

/// A resolved theme: semantic styles for the views to use.
#[derive(Debug, Clone)]
pub struct Theme {
    pub name: String,
    pub monochrome: bool,
    /// How many colours the terminal shows; colours are mapped down to it.
    pub depth: ColorDepth,
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
            depth: ColorDepth::TrueColor,
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
        theme.depth = ColorDepth::current();
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

    /// A theme colour as the terminal can show it.
    fn c(&self, c: ThemeColor) -> Color {
        self.depth.map(c.0)
    }

    /// The same theme at another colour depth.
    /// The colours a program's screen in a pane is drawn with: this theme's depth, or
    /// none under `NO_COLOR`/monochrome.
    pub fn screen_colors(&self) -> Option<ColorDepth> {
        (!self.monochrome).then_some(self.depth)
    }

    pub fn with_depth(mut self, depth: ColorDepth) -> Theme {
        self.depth = depth;
        self
    }

    fn fg_style(&self, pick: impl Fn(&ThemeFile) -> ThemeColor, mono: Style) -> Style {
        match self.roles() {
            Some(r) => Style::new().fg(self.c(pick(r))),
            None => mono,
        }
    }

    /// The base text style (and background of the whole screen).
    pub fn base(&self) -> Style {
        match self.roles() {
            Some(r) => Style::new().fg(self.c(r.fg)).bg(self.c(r.bg)),
            None => Style::new(),
        }
    }

    /// What marks the focused pane in its title: a `▶` where colour cannot (`NO_COLOR`,
    /// where a bold border looks like any other in many terminals), nothing else.
    pub fn focus_marker(&self) -> &'static str {
        if self.monochrome {
            "▶ "
        } else {
            ""
        }
    }

    /// How series `i` of a chart is drawn, and the mark its legend shows. With colour
    /// every series is braille (fine lines told apart by colour); under `NO_COLOR` each
    /// has its own mark (braille, `•`, `▀`, `█`) so measured and expected curves, or two
    /// nodes, can be told apart without colour.
    pub fn series_mark(&self, i: usize) -> (ratatui::symbols::Marker, &'static str) {
        use ratatui::symbols::Marker;
        const MARKS: [(Marker, &str); 4] = [
            (Marker::Braille, "⣀"),
            (Marker::Dot, "•"),
            (Marker::HalfBlock, "▀"),
            (Marker::Block, "█"),
        ];
        if self.monochrome {
            MARKS[i % MARKS.len()]
        } else {
            (Marker::Braille, "")
        }
    }

    /// A legend entry for series `i`: its name, with its mark under `NO_COLOR`.
    pub fn series_name(&self, i: usize, name: &str) -> String {
        match self.series_mark(i).1 {
            "" => name.to_string(),
            mark => format!("{mark} {name}"),
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
            (Some(r), true) => Style::new().fg(self.c(r.border_focused)),
            (Some(r), false) => Style::new().fg(self.c(r.border)),
            (None, true) => Style::new().add_modifier(Modifier::BOLD),
            (None, false) => Style::new(),
        }
    }

    pub fn tab(&self, active: bool) -> Style {
        match (self.roles(), active) {
            (Some(r), true) => Style::new()
                .fg(self.c(r.tab_active_fg))
                .bg(self.c(r.tab_active_bg))
                .add_modifier(Modifier::BOLD),
            (Some(r), false) => Style::new().fg(self.c(r.tab)),
            (None, true) => Style::new().add_modifier(Modifier::REVERSED | Modifier::BOLD),
            (None, false) => Style::new(),
        }
    }

    /// The selected row. A bar of the theme's selection colours, chosen so that every
    /// tone and the accent stay readable on it (at least 3:1, tested); reverse video
    /// where the theme asks for it (both selection roles `reset`), without colour, and at
    /// 16 colours (where a dark bar maps to black or a tone's own colour).
    pub fn selection(&self) -> Style {
        let reverse = Style::new().add_modifier(Modifier::REVERSED);
        match self.roles() {
            Some(r) if r.selection_fg.0 == Color::Reset && r.selection_bg.0 == Color::Reset => reverse,
            Some(_) if self.depth == ColorDepth::Ansi16 => reverse,
            Some(r) => Style::new().fg(self.c(r.selection_fg)).bg(self.c(r.selection_bg)),
            None => reverse,
        }
    }

    pub fn status_bar(&self) -> Style {
        match self.roles() {
            Some(r) => Style::new().fg(self.c(r.status_fg)).bg(self.c(r.status_bg)),
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
            Some(r) => Style::new().fg(self.c(r.nic[i % r.nic.len()])),
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
        // At 24-bit colour, whatever this test's terminal is (else mapped down).
        let t = Theme::load("dark", &paths, false)
            .unwrap()
            .with_depth(ColorDepth::TrueColor);
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
            assert!(
                t.selection().add_modifier.contains(Modifier::REVERSED) || t.selection().bg != t.base().bg,
                "{name}: selection visible"
            );
        }
    }

    #[test]
    fn colour_depth_follows_colorterm_then_term() {
        use ColorDepth::*;
        assert_eq!(ColorDepth::detect(Some("truecolor"), Some("xterm")), TrueColor);
        assert_eq!(ColorDepth::detect(Some("24bit"), None), TrueColor);
        assert_eq!(ColorDepth::detect(None, Some("xterm-256color")), Ansi256);
        assert_eq!(ColorDepth::detect(Some(""), Some("screen-256color")), Ansi256);
        assert_eq!(ColorDepth::detect(None, Some("xterm")), Ansi16);
        assert_eq!(ColorDepth::detect(None, Some("linux")), Ansi16);
        assert_eq!(ColorDepth::detect(None, None), Ansi16);
    }

    #[test]
    fn colours_map_down_to_the_depth() {
        use ColorDepth::*;
        let rgb = Color::Rgb(0xe0, 0x6c, 0x75);
        assert_eq!(TrueColor.map(rgb), rgb);
        // The 256 palette: cube entries and the grey ramp, exact where they match.
        assert_eq!(Ansi256.map(Color::Rgb(255, 0, 0)), Color::Indexed(196));
        assert_eq!(Ansi256.map(Color::Rgb(0x3a, 0x3a, 0x3a)), Color::Indexed(237));
        assert_eq!(Ansi256.map(Color::Rgb(95, 135, 175)), Color::Indexed(67));
        // 16 colours: hues to their ANSI colour, greys to greys.
        assert_eq!(Ansi16.map(rgb), Color::LightRed);
        assert_eq!(Ansi16.map(Color::Rgb(0x98, 0xc3, 0x79)), Color::LightGreen);
        assert_eq!(Ansi16.map(Color::Rgb(0x61, 0xaf, 0xef)), Color::LightCyan);
        assert_eq!(Ansi16.map(Color::Rgb(0x05, 0x50, 0xae)), Color::Blue);
        assert_eq!(Ansi16.map(Color::Rgb(0xcf, 0x22, 0x2e)), Color::Red);
        assert_eq!(Ansi16.map(Color::Rgb(0xe5, 0xc0, 0x7b)), Color::LightYellow);
        assert_eq!(Ansi16.map(Color::Rgb(0xc5, 0xcd, 0xd9)), Color::Gray);
        assert_eq!(Ansi16.map(Color::Rgb(0x6c, 0x7a, 0x89)), Color::DarkGray);
        assert_eq!(Ansi16.map(Color::Rgb(0x26, 0x2b, 0x35)), Color::Black);
        assert_eq!(Ansi16.map(Color::Indexed(196)), Color::Red);
        assert_eq!(Ansi16.map(Color::Indexed(1)), Color::Red);
        assert_eq!(Ansi16.map(Color::Reset), Color::Reset);
        assert_eq!(Ansi16.map(Color::Yellow), Color::Yellow);
        // Every style of every theme, at each depth, uses only colours that depth has.
        for (name, _) in EMBEDDED {
            for depth in [Ansi256, Ansi16] {
                let t = Theme::embedded(name).unwrap().unwrap().with_depth(depth);
                let mut styles = vec![
                    t.base(),
                    t.muted(),
                    t.accent(),
                    t.title(),
                    t.border(true),
                    t.border(false),
                    t.tab(true),
                    t.tab(false),
                    t.selection(),
                    t.status_bar(),
                    t.key_hint(),
                    t.rx(),
                    t.tx(),
                    t.expected(),
                ];
                styles.extend([Tone::Info, Tone::Pass, Tone::Warn, Tone::Fail].map(|x| t.tone(x)));
                styles.extend((0..8).map(|i| t.nic(i)));
                for c in styles.iter().flat_map(|s| [s.fg, s.bg]).flatten() {
                    let ok = !matches!((depth, c), (_, Color::Rgb(..)) | (Ansi16, Color::Indexed(_)));
                    assert!(ok, "{name} at {depth:?}: {c:?}");
                }
            }
        }
    }

    #[test]
    fn every_tone_is_readable_on_the_selection() {
        for (name, _) in EMBEDDED {
            for depth in [ColorDepth::TrueColor, ColorDepth::Ansi256, ColorDepth::Ansi16] {
                let t = Theme::embedded(name).unwrap().unwrap().with_depth(depth);
                let sel = t.selection();
                if sel.add_modifier.contains(Modifier::REVERSED) {
                    // Reverse video swaps a cell's own colours: as readable as unselected.
                    assert_eq!((sel.fg, sel.bg), (None, None), "{name} at {depth:?}");
                    continue;
                }
                let bar = rgb_of(sel.bg.expect("a selection bar has a background")).unwrap();
                let text = rgb_of(sel.fg.expect("and a foreground")).unwrap();
                let c = contrast(text, bar);
                assert!(c >= 4.5, "{name} at {depth:?}: selected text {c:.1}:1");
                let mut on_bar = vec![("accent", t.accent())];
                for (n, tone) in [
                    ("info", Tone::Info),
                    ("pass", Tone::Pass),
                    ("warn", Tone::Warn),
                    ("fail", Tone::Fail),
                ] {
                    on_bar.push((n, t.tone(tone)));
                }
                for (what, style) in on_bar {
                    let fg = rgb_of(style.fg.unwrap()).unwrap();
                    let c = contrast(fg, bar);
                    assert!(c >= 3.0, "{name} at {depth:?}: {what} on the selection {c:.1}:1");
                }
            }
        }
        // The check can fail: the old dark bar made a failed run red on green.
        let c = contrast((0xe0, 0x6c, 0x75), (0x98, 0xc3, 0x79));
        assert!(c < 3.0, "{c}");
    }

    #[test]
    fn no_color_marks_focus_with_text() {
        let dir = tempfile::tempdir().unwrap();
        let mono = Theme::load("dark", &paths_in(dir.path()), true).unwrap();
        assert_eq!(mono.focus_marker(), "▶ ");
        assert_eq!(Theme::default_theme().focus_marker(), "");
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
