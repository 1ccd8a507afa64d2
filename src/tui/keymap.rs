//! Key chords, the default bindings and user overrides from the config file.
//!
//! The config file binds actions to chords per context:
//! ```yaml
//! keys:
//!   global:
//!     quit: [q, ctrl-c]
//!     next_view: tab
//!   help:
//!     close: [esc, "?"]
//! ```
//! A user entry replaces that action's default chords in that context, and takes its
//! chords away from whatever default action had them. Unknown actions, actions that mean
//! nothing in a context, malformed chords and a chord given twice in one context are
//! errors at the offending key's line and column.

use super::action::{Action, Context};
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::str::FromStr;

/// A key with its modifiers, normalised so that equal presses compare equal:
/// character keys carry their case instead of SHIFT, and shift-tab is `BackTab`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Chord {
    pub code: KeyCode,
    pub mods: KeyModifiers,
}

impl Chord {
    pub fn new(code: KeyCode, mods: KeyModifiers) -> Self {
        let mut mods = mods & (KeyModifiers::CONTROL | KeyModifiers::ALT | KeyModifiers::SHIFT);
        let code = match code {
            // Terminals send ctrl-\ ctrl-] ctrl-^ ctrl-_ as 0x1c..0x1f, which crossterm
            // reports as ctrl-4..ctrl-7.
            KeyCode::Char(c @ '4'..='7') if mods.contains(KeyModifiers::CONTROL) => {
                KeyCode::Char(['\\', ']', '^', '_'][(c as u8 - b'4') as usize])
            }
            KeyCode::Char(c) => {
                if mods.contains(KeyModifiers::SHIFT) && c.is_ascii_lowercase() {
                    mods.remove(KeyModifiers::SHIFT);
                    KeyCode::Char(c.to_ascii_uppercase())
                } else {
                    mods.remove(KeyModifiers::SHIFT);
                    KeyCode::Char(c)
                }
            }
            KeyCode::BackTab => {
                mods.remove(KeyModifiers::SHIFT);
                KeyCode::BackTab
            }
            KeyCode::Tab if mods.contains(KeyModifiers::SHIFT) => {
                mods.remove(KeyModifiers::SHIFT);
                KeyCode::BackTab
            }
            other => other,
        };
        Chord { code, mods }
    }

    pub fn plain(c: char) -> Self {
        Chord::new(KeyCode::Char(c), KeyModifiers::NONE)
    }

    pub fn ctrl(c: char) -> Self {
        Chord::new(KeyCode::Char(c), KeyModifiers::CONTROL)
    }

    pub fn key(code: KeyCode) -> Self {
        Chord::new(code, KeyModifiers::NONE)
    }

    pub fn from_event(ev: &KeyEvent) -> Self {
        Chord::new(ev.code, ev.modifiers)
    }
}

const NAMED: &[(&str, KeyCode)] = &[
    ("esc", KeyCode::Esc),
    ("enter", KeyCode::Enter),
    ("tab", KeyCode::Tab),
    ("backtab", KeyCode::BackTab),
    ("backspace", KeyCode::Backspace),
    ("delete", KeyCode::Delete),
    ("insert", KeyCode::Insert),
    ("home", KeyCode::Home),
    ("end", KeyCode::End),
    ("pageup", KeyCode::PageUp),
    ("pagedown", KeyCode::PageDown),
    ("up", KeyCode::Up),
    ("down", KeyCode::Down),
    ("left", KeyCode::Left),
    ("right", KeyCode::Right),
    ("space", KeyCode::Char(' ')),
];

const ALIASES: &[(&str, &str)] = &[
    ("escape", "esc"),
    ("return", "enter"),
    ("del", "delete"),
    ("pgup", "pageup"),
    ("pgdn", "pagedown"),
];

impl FromStr for Chord {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "`{s}` is not a key chord (expected e.g. `q`, `G`, `ctrl-c`, `shift-tab`, `f5`, `pageup`)"
            )
        };
        if s.is_empty() {
            return Err(bad());
        }
        // The key is after the last '-', unless the key itself is '-'.
        let (mods_part, key) = if s == "-" {
            ("", "-")
        } else if let Some(prefix) = s.strip_suffix("--") {
            (prefix, "-")
        } else {
            match s.rsplit_once('-') {
                Some((m, k)) if !k.is_empty() => (m, k),
                Some(_) => return Err(bad()),
                None => ("", s),
            }
        };
        let mut mods = KeyModifiers::NONE;
        for m in mods_part.split('-').filter(|m| !m.is_empty()) {
            mods |= match m.to_ascii_lowercase().as_str() {
                "ctrl" | "c" | "control" => KeyModifiers::CONTROL,
                "alt" | "a" | "meta" | "m" => KeyModifiers::ALT,
                "shift" | "s" => KeyModifiers::SHIFT,
                _ => {
                    return Err(format!(
                        "`{s}`: unknown modifier `{m}` (expected ctrl, alt or shift)"
                    ))
                }
            };
        }
        let mut chars = key.chars();
        let code = match (chars.next(), chars.next()) {
            (Some(c), None) => KeyCode::Char(c),
            _ => {
                let lower = key.to_ascii_lowercase();
                let name = ALIASES
                    .iter()
                    .find(|(a, _)| *a == lower)
                    .map(|(_, n)| *n)
                    .unwrap_or(lower.as_str());
                if let Some((_, code)) = NAMED.iter().find(|(n, _)| *n == name) {
                    *code
                } else if let Some(n) = name.strip_prefix('f').and_then(|n| n.parse::<u8>().ok()) {
                    if (1..=12).contains(&n) {
                        KeyCode::F(n)
                    } else {
                        return Err(bad());
                    }
                } else {
                    return Err(bad());
                }
            }
        };
        // ctrl/alt with an upper-case letter means shift too; keep the letter's case.
        Ok(Chord::new(code, mods))
    }
}

impl fmt::Display for Chord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.mods.contains(KeyModifiers::CONTROL) {
            f.write_str("ctrl-")?;
        }
        if self.mods.contains(KeyModifiers::ALT) {
            f.write_str("alt-")?;
        }
        if self.mods.contains(KeyModifiers::SHIFT) {
            f.write_str("shift-")?;
        }
        match self.code {
            KeyCode::Char(' ') => f.write_str("space"),
            KeyCode::Char(c) => write!(f, "{c}"),
            KeyCode::BackTab => f.write_str("shift-tab"),
            KeyCode::F(n) => write!(f, "f{n}"),
            code => match NAMED.iter().find(|(_, c)| *c == code) {
                Some((name, _)) => f.write_str(name),
                None => write!(f, "{code:?}"),
            },
        }
    }
}

/// The default bindings, in the order help shows them.
fn default_table() -> Vec<(Context, Action, Vec<Chord>)> {
    use Action::*;
    use Context::{Confirmation, Copy, Editor, Global, Input, Pane, Question};
    const HELP: Context = Context::Help;
    let k = Chord::key;
    let p = Chord::plain;
    vec![
        (Global, Help, vec![p('?'), k(KeyCode::F(1))]),
        (Global, Palette, vec![p(':')]),
        (Global, Filter, vec![p('/')]),
        (Global, ClearFilter, vec![Chord::ctrl('l')]),
        (Global, NextView, vec![k(KeyCode::Tab)]),
        (Global, PrevView, vec![k(KeyCode::BackTab)]),
        (Global, ViewOffers, vec![p('1')]),
        (Global, ViewFleets, vec![p('2')]),
        (Global, ViewNodes, vec![p('3')]),
        (Global, ViewPanes, vec![p('4')]),
        (Global, ViewNccl, vec![p('5')]),
        (Global, ViewJobs, vec![p('6')]),
        (Global, ViewNics, vec![p('7')]),
        (Global, ViewDoctor, vec![p('8')]),
        (Global, Select, vec![k(KeyCode::Enter)]),
        (Global, Reload, vec![p('r')]),
        (Global, NicsMode, vec![p('v')]),
        (Global, Messages, vec![p('M')]),
        (Global, NextItem, vec![p('n')]),
        (Global, PrevItem, vec![p('N')]),
        (Global, PaneInsert, vec![p('i')]),
        (Global, PaneZoom, vec![p('z')]),
        (Global, PaneMark, vec![p('m')]),
        (Global, PaneBroadcast, vec![p('b')]),
        (Global, PaneCopy, vec![p('[')]),
        (Global, Detail, vec![p('d')]),
        (Global, Sort, vec![p('s')]),
        (Global, SortReverse, vec![p('S')]),
        (Global, Pricing, vec![p('p')]),
        (Global, WriteFleet, vec![p('w')]),
        (Global, JobStop, vec![p('x')]),
        (Global, Close, vec![k(KeyCode::Esc)]),
        (Global, Compare, vec![p('c')]),
        (Global, FleetApply, vec![p('a')]),
        (Global, FleetDelete, vec![p('D')]),
        (Global, FleetEdit, vec![p('e')]),
        (Global, NcclRun, vec![p('t')]),
        (Global, NcclRunAgain, vec![p('R')]),
        (Global, Up, vec![k(KeyCode::Up), p('k')]),
        (Global, Down, vec![k(KeyCode::Down), p('j')]),
        (Global, Top, vec![k(KeyCode::Home), p('g')]),
        (Global, Left, vec![k(KeyCode::Left), p('h')]),
        (Global, Right, vec![k(KeyCode::Right), p('l')]),
        (Global, Bottom, vec![k(KeyCode::End), p('G')]),
        (Global, PageUp, vec![k(KeyCode::PageUp), Chord::ctrl('b')]),
        (Global, PageDown, vec![k(KeyCode::PageDown), Chord::ctrl('f')]),
        (Global, Quit, vec![p('q'), Chord::ctrl('c')]),
        (Global, Suspend, vec![Chord::ctrl('z')]),
        (
            HELP,
            Close,
            vec![k(KeyCode::Esc), p('q'), p('?'), k(KeyCode::F(1))],
        ),
        (HELP, Up, vec![k(KeyCode::Up), p('k')]),
        (HELP, Down, vec![k(KeyCode::Down), p('j')]),
        (HELP, Top, vec![k(KeyCode::Home), p('g')]),
        (HELP, Bottom, vec![k(KeyCode::End), p('G')]),
        (HELP, PageUp, vec![k(KeyCode::PageUp), Chord::ctrl('b')]),
        (HELP, PageDown, vec![k(KeyCode::PageDown), Chord::ctrl('f')]),
        (HELP, Quit, vec![Chord::ctrl('c')]),
        (Input, Close, vec![k(KeyCode::Esc), Chord::ctrl('c')]),
        (Input, Confirm, vec![k(KeyCode::Enter)]),
        (Input, Complete, vec![k(KeyCode::Tab)]),
        (Input, CompletePrev, vec![k(KeyCode::BackTab)]),
        (Input, Up, vec![k(KeyCode::Up)]),
        (Input, Down, vec![k(KeyCode::Down)]),
        (Pane, Close, vec![Chord::ctrl(']')]),
        (Copy, Close, vec![k(KeyCode::Esc), p('q')]),
        (Copy, Up, vec![k(KeyCode::Up), p('k')]),
        (Copy, Down, vec![k(KeyCode::Down), p('j')]),
        (Copy, PageUp, vec![k(KeyCode::PageUp), Chord::ctrl('b')]),
        (Copy, PageDown, vec![k(KeyCode::PageDown), Chord::ctrl('f')]),
        (Copy, Top, vec![k(KeyCode::Home), p('g')]),
        (Copy, Bottom, vec![k(KeyCode::End), p('G')]),
        (Copy, Filter, vec![p('/')]),
        (Copy, SearchNext, vec![p('n')]),
        (Copy, SearchPrev, vec![p('N')]),
        (Copy, SelectStart, vec![p('v'), p(' ')]),
        (Copy, Yank, vec![p('y'), k(KeyCode::Enter)]),
        (Question, Confirm, vec![p('y')]),
        (Question, Close, vec![p('n'), k(KeyCode::Esc)]),
        (Question, AcceptAll, vec![p('a')]),
        (Confirmation, Confirm, vec![p('y')]),
        (Confirmation, Close, vec![p('n'), k(KeyCode::Esc)]),
        (Editor, Close, vec![k(KeyCode::Esc)]),
        (Editor, Confirm, vec![Chord::ctrl('s')]),
        (Editor, NextField, vec![k(KeyCode::Tab)]),
        (Editor, PrevField, vec![k(KeyCode::BackTab)]),
        (Editor, Left, vec![k(KeyCode::Left)]),
        (Editor, Right, vec![k(KeyCode::Right)]),
    ]
}

/// One row of the keymap: an action and its chords in one context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    pub context: Context,
    pub action: Action,
    pub chords: Vec<Chord>,
}

/// The resolved key bindings.
#[derive(Debug, Clone)]
pub struct Keymap {
    rows: Vec<Binding>,
    index: HashMap<(Context, Chord), Action>,
}

impl Keymap {
    pub fn defaults() -> Self {
        Self::from_rows(
            default_table()
                .into_iter()
                .map(|(context, action, chords)| Binding {
                    context,
                    action,
                    chords,
                })
                .collect(),
        )
    }

    fn from_rows(rows: Vec<Binding>) -> Self {
        let mut index = HashMap::new();
        for b in &rows {
            for c in &b.chords {
                index.insert((b.context, *c), b.action);
            }
        }
        Keymap { rows, index }
    }

    /// The defaults with the user's overrides applied.
    pub fn with_overrides(overrides: &KeyOverrides) -> Self {
        let mut rows: Vec<Binding> = Self::defaults().rows;
        for (&context, entries) in &overrides.0 {
            for (action, chords) in entries {
                for b in rows
                    .iter_mut()
                    .filter(|b| b.context == context && b.action != *action)
                {
                    b.chords.retain(|c| !chords.contains(c));
                }
                match rows
                    .iter_mut()
                    .find(|b| b.context == context && b.action == *action)
                {
                    Some(b) => b.chords = chords.clone(),
                    None => rows.push(Binding {
                        context,
                        action: *action,
                        chords: chords.clone(),
                    }),
                }
            }
        }
        Self::from_rows(rows)
    }

    /// The action bound to a key event in `context`, if any. Key releases are ignored.
    pub fn lookup(&self, context: Context, ev: &KeyEvent) -> Option<Action> {
        if ev.kind == KeyEventKind::Release {
            return None;
        }
        self.index.get(&(context, Chord::from_event(ev))).copied()
    }

    /// All bindings, in help order.
    pub fn bindings(&self) -> &[Binding] {
        &self.rows
    }

    /// The chords of `action` in `context`.
    pub fn chords(&self, context: Context, action: Action) -> &[Chord] {
        self.rows
            .iter()
            .find(|b| b.context == context && b.action == action)
            .map(|b| b.chords.as_slice())
            .unwrap_or(&[])
    }

    /// Status-bar hints for `context`: (first chord, short label) for each hinted action
    /// that has a chord, in keymap order. Closing is hinted in layers (help, inputs,
    /// questions), not on the cockpit itself where only an opened item closes.
    pub fn hints(&self, context: Context) -> Vec<(String, &'static str)> {
        self.rows
            .iter()
            .filter(|b| b.context == context)
            .filter(|b| !(context == Context::Global && b.action == Action::Close))
            .filter_map(|b| Some((b.chords.first()?.to_string(), b.action.hint()?)))
            .collect()
    }

    /// Status-bar hints for `context` while `view` is shown ([`Action::hint_in`]).
    /// Closing is hinted in layers (help, inputs, questions, confirmations) and in the Jobs view, where
    /// it closes the opened job; elsewhere on the cockpit there is nothing to close.
    pub fn hints_in(&self, context: Context, view: super::state::View) -> Vec<(String, &'static str)> {
        self.rows
            .iter()
            .filter(|b| b.context == context)
            .filter(|b| {
                !(context == Context::Global && b.action == Action::Close && view != super::state::View::Jobs)
            })
            .filter_map(|b| Some((b.chords.first()?.to_string(), b.action.hint_in(context, view)?)))
            .collect()
    }
}

/// The config file's `keys:` section, read and checked (errors at FILE:LINE:COL, as
/// the rest of the file's); a missing file or section is no override. The config module
/// only keeps the section: its words (contexts, actions, chords) are the cockpit's.
pub fn load_overrides(file: &std::path::Path) -> Result<KeyOverrides, crate::yaml::YamlError> {
    if !file.exists() {
        return Ok(KeyOverrides::default());
    }
    parse_overrides(file, &crate::yaml::read_text(file)?)
}

/// The `keys:` section of config text `text` (read from `file`), checked.
pub fn parse_overrides(file: &std::path::Path, text: &str) -> Result<KeyOverrides, crate::yaml::YamlError> {
    #[derive(Default, Deserialize)]
    struct KeysOnly {
        #[serde(default)]
        keys: KeyOverrides,
    }
    crate::yaml::from_str::<KeysOnly>(file, text).map(|k| k.keys)
}

/// The default bindings as a commented `keys:` section of the config file (for
/// `flightdeck config default`).
pub fn default_bindings_text() -> String {
    use std::fmt::Write as _;
    let mut s = String::from("# keys:\n");
    let km = Keymap::defaults();
    for ctx in Context::ALL {
        let _ = writeln!(s, "#   {}:", ctx.name());
        for b in km.bindings().iter().filter(|b| b.context == ctx) {
            let chords: Vec<String> = b.chords.iter().map(|c| yaml_scalar(&c.to_string())).collect();
            let _ = writeln!(s, "#     {}: [{}]", b.action.name(), chords.join(", "));
        }
    }
    s
}

/// Quote a chord when YAML would not read it back as the same plain string.
fn yaml_scalar(s: &str) -> String {
    let plain = s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') && s.parse::<f64>().is_err();
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "''"))
    }
}

/// The `keys:` section of the config file, as written (validated while parsing).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyOverrides(pub BTreeMap<Context, Vec<(Action, Vec<Chord>)>>);

impl<'de> Deserialize<'de> for KeyOverrides {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Outer;
        impl<'de> Visitor<'de> for Outer {
            type Value = KeyOverrides;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map of contexts (global, help, input) to action bindings")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<KeyOverrides, A::Error> {
                let mut out = BTreeMap::new();
                while let Some(context) = map.next_key::<Context>()? {
                    let entries = map.next_value_seed(ContextSeed(context))?;
                    out.insert(context, entries);
                }
                Ok(KeyOverrides(out))
            }
        }
        d.deserialize_map(Outer)
    }
}

/// Parses one context's `action: chords` map, checking each chord as it is read so that
/// an error points at the chord itself.
struct ContextSeed(Context);

impl<'de> DeserializeSeed<'de> for ContextSeed {
    type Value = Vec<(Action, Vec<Chord>)>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ContextSeed {
    type Value = Vec<(Action, Vec<Chord>)>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "a map of actions to key chords for the `{}` context",
            self.0.name()
        )
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut seen: HashMap<Chord, Action> = HashMap::new();
        let mut out: Vec<(Action, Vec<Chord>)> = Vec::new();
        while let Some(action) = map.next_key_seed(ActionSeed(self.0))? {
            if out.iter().any(|(a, _)| *a == action) {
                return Err(de::Error::custom(format!("`{}` is bound twice", action.name())));
            }
            let chords = map.next_value_seed(ChordsSeed {
                action,
                seen: &mut seen,
            })?;
            out.push((action, chords));
        }
        Ok(out)
    }
}

struct ActionSeed(Context);

impl<'de> DeserializeSeed<'de> for ActionSeed {
    type Value = Action;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Action, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for ActionSeed {
    type Value = Action;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an action name")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Action, E> {
        let allowed: Vec<String> = Action::ALL
            .into_iter()
            .filter(|a| a.allowed_in(self.0))
            .map(Action::name)
            .collect();
        match Action::from_name(v) {
            Some(a) if a.allowed_in(self.0) => Ok(a),
            Some(_) => Err(E::custom(format!(
                "action `{v}` means nothing in the `{}` context; expected one of {}",
                self.0.name(),
                allowed.join(", ")
            ))),
            None => {
                let hint = crate::yaml::did_you_mean(v, allowed.iter().map(String::as_str));
                Err(E::custom(format!(
                    "unknown action `{v}` in the `{}` context; expected one of {}{hint}",
                    self.0.name(),
                    allowed.join(", ")
                )))
            }
        }
    }
}

struct ChordsSeed<'a> {
    action: Action,
    seen: &'a mut HashMap<Chord, Action>,
}

impl ChordsSeed<'_> {
    fn add<E: de::Error>(&mut self, v: &str) -> Result<Chord, E> {
        let chord: Chord = v.parse().map_err(E::custom)?;
        if let Some(prev) = self.seen.insert(chord, self.action) {
            return Err(E::custom(format!(
                "duplicate chord `{chord}` for `{}`: already bound to `{}` in this context",
                self.action.name(),
                prev.name()
            )));
        }
        Ok(chord)
    }
}

impl<'de> DeserializeSeed<'de> for ChordsSeed<'_> {
    type Value = Vec<Chord>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<Chord>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ChordsSeed<'_> {
    type Value = Vec<Chord>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key chord or a list of key chords")
    }
    fn visit_str<E: de::Error>(mut self, v: &str) -> Result<Vec<Chord>, E> {
        Ok(vec![self.add(v)?])
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Vec<Chord>, E> {
        self.visit_str(&v.to_string())
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Vec<Chord>, E> {
        self.visit_str(&v.to_string())
    }
    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Vec<Chord>, A::Error> {
        let mut out = Vec::new();
        while let Some(chord) = seq.next_element_seed(ChordSeed(&mut self))? {
            out.push(chord);
        }
        Ok(out)
    }
}

struct ChordSeed<'a, 'b>(&'a mut ChordsSeed<'b>);

impl<'de> DeserializeSeed<'de> for ChordSeed<'_, '_> {
    type Value = Chord;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Chord, D::Error> {
        d.deserialize_any(self)
    }
}

impl Visitor<'_> for ChordSeed<'_, '_> {
    type Value = Chord;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key chord such as `q` or `ctrl-c`")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Chord, E> {
        self.0.add(v)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Chord, E> {
        self.0.add(&v.to_string())
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Chord, E> {
        self.0.add(&v.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn ev(code: KeyCode, mods: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, mods)
    }

    #[derive(Debug, Default, Deserialize)]
    struct Doc {
        #[serde(default)]
        keys: KeyOverrides,
    }

    fn parse(text: &str) -> Result<KeyOverrides, crate::yaml::YamlError> {
        crate::yaml::from_str::<Doc>(Path::new("config.yaml"), text).map(|d| d.keys)
    }

    /// The listing `config default` prints, uncommented, reads back as the default keymap
    /// (it is generated from the keymap, so it never drifts from it).
    #[test]
    fn default_bindings_text_uncommented_parses_to_the_default_keymap() {
        let text = crate::config::default_text(&default_bindings_text());
        let uncommented: String = text
            .lines()
            .filter_map(|l| l.strip_prefix("# "))
            .filter(|l| l.starts_with("keys:") || (l.starts_with("  ") && !l.trim_start().starts_with('#')))
            .filter(|l| !l.contains("project_id") && !l.starts_with("  creds"))
            .map(|l| format!("{l}\n"))
            .collect();
        let keys: String = uncommented
            .split_inclusive('\n')
            .skip_while(|l| !l.starts_with("keys:"))
            .collect();
        let km = Keymap::with_overrides(
            &parse_overrides(Path::new("default.yaml"), &keys).unwrap_or_else(|e| panic!("{e}\n{keys}")),
        );
        assert_eq!(km.bindings(), Keymap::defaults().bindings());
        assert_eq!(parse(&text).unwrap(), KeyOverrides::default());
    }

    #[test]
    fn chords_parse_and_print() {
        for (text, shown) in [
            ("q", "q"),
            ("G", "G"),
            ("shift-g", "G"),
            ("ctrl-c", "ctrl-c"),
            ("C-c", "ctrl-c"),
            ("shift-tab", "shift-tab"),
            ("backtab", "shift-tab"),
            ("esc", "esc"),
            ("Escape", "esc"),
            ("pgdn", "pagedown"),
            ("f12", "f12"),
            ("-", "-"),
            ("alt--", "alt--"),
            ("space", "space"),
            ("?", "?"),
        ] {
            let c: Chord = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(c.to_string(), shown, "{text}");
            assert_eq!(shown.parse::<Chord>().unwrap(), c, "{shown} round trip");
        }
        for bad in ["", "f13", "hyper-x", "ctrl-", "pagedn"] {
            assert!(bad.parse::<Chord>().is_err(), "{bad} should not parse");
        }
    }

    #[test]
    fn events_normalise_like_chords() {
        let km = Keymap::defaults();
        let g = |code, mods| km.lookup(Context::Global, &ev(code, mods));
        assert_eq!(g(KeyCode::Char('G'), KeyModifiers::SHIFT), Some(Action::Bottom));
        assert_eq!(g(KeyCode::BackTab, KeyModifiers::SHIFT), Some(Action::PrevView));
        assert_eq!(g(KeyCode::Char('c'), KeyModifiers::CONTROL), Some(Action::Quit));
        assert_eq!(
            g(KeyCode::Char('z'), KeyModifiers::CONTROL),
            Some(Action::Suspend)
        );
        assert_eq!(g(KeyCode::Char('7'), KeyModifiers::NONE), Some(Action::ViewNics));
        let ctrl5 = ev(KeyCode::Char('5'), KeyModifiers::CONTROL);
        assert_eq!(
            km.lookup(Context::Pane, &ctrl5),
            Some(Action::Close),
            "0x1d arrives as ctrl-5"
        );
        assert_eq!(g(KeyCode::Char('u'), KeyModifiers::NONE), None);
        let mut release = ev(KeyCode::Char('q'), KeyModifiers::NONE);
        release.kind = KeyEventKind::Release;
        assert_eq!(km.lookup(Context::Global, &release), None);
    }

    #[test]
    fn defaults_have_no_conflicts() {
        for ctx in Context::ALL {
            let mut seen = HashMap::new();
            for b in Keymap::defaults().bindings().iter().filter(|b| b.context == ctx) {
                assert!(b.action.allowed_in(ctx), "{:?} in {:?}", b.action, ctx);
                for c in &b.chords {
                    if let Some(prev) = seen.insert(*c, b.action) {
                        panic!("{c} bound to {prev:?} and {:?} in {ctx:?}", b.action);
                    }
                }
            }
        }
    }

    #[test]
    fn overrides_replace_and_steal_chords() {
        let o = parse("keys:\n  global:\n    help: [h, '?']\n    quit: x\n").unwrap();
        let km = Keymap::with_overrides(&o);
        let g = |c: char| km.lookup(Context::Global, &ev(KeyCode::Char(c), KeyModifiers::NONE));
        assert_eq!(g('h'), Some(Action::Help));
        assert_eq!(g('x'), Some(Action::Quit));
        assert_eq!(g('q'), None, "quit's default chord is replaced");
        assert_eq!(km.chords(Context::Global, Action::Quit), &[Chord::plain('x')]);
        // Other contexts keep their keys: the help still quits on ctrl-c, and q closes it.
        assert_eq!(
            km.lookup(Context::Help, &ev(KeyCode::Char('c'), KeyModifiers::CONTROL)),
            Some(Action::Quit)
        );
        assert_eq!(
            km.lookup(Context::Help, &ev(KeyCode::Char('q'), KeyModifiers::NONE)),
            Some(Action::Close)
        );
    }

    #[test]
    fn stolen_chord_leaves_its_old_action() {
        let o = parse("keys:\n  global:\n    help: j\n").unwrap();
        let km = Keymap::with_overrides(&o);
        assert_eq!(
            km.chords(Context::Global, Action::Down),
            &[Chord::key(KeyCode::Down)]
        );
    }

    #[test]
    fn unknown_action_names_file_line_and_key() {
        let e = parse("keys:\n  global:\n    quit: q\n    hlep: h\n").unwrap_err();
        assert_eq!((e.line, e.column), (Some(4), Some(5)), "{e}");
        assert!(e.message.contains("unknown action `hlep`"), "{e}");
        assert!(e.message.contains("did you mean `help`?"), "{e}");
        assert!(e.to_string().starts_with("config.yaml:4:5: keys.global"), "{e}");
    }

    #[test]
    fn duplicate_chord_points_at_the_second_use() {
        let e = parse("keys:\n  global:\n    quit: [q, x]\n    help:\n      - h\n      - x\n").unwrap_err();
        assert_eq!((e.line, e.column), (Some(6), Some(9)), "{e}");
        assert!(
            e.message
                .contains("duplicate chord `x` for `help`: already bound to `quit`"),
            "{e}"
        );
    }

    #[test]
    fn bad_chord_and_bad_context_are_located() {
        let e = parse("keys:\n  global:\n    quit: ctrl-\n").unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");
        assert!(e.message.contains("`ctrl-` is not a key chord"), "{e}");
        let e = parse("keys:\n  globl:\n    quit: q\n").unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");
        assert!(e.message.contains("did you mean `global`?"), "{e}");
        let e = parse("keys:\n  input:\n    quit: q\n").unwrap_err();
        assert_eq!((e.line, e.column), (Some(3), Some(5)), "{e}");
        assert!(e.message.contains("means nothing in the `input` context"), "{e}");
    }

    #[test]
    fn hints_follow_the_keymap() {
        let o = parse("keys:\n  global:\n    help: h\n").unwrap();
        let hints = Keymap::with_overrides(&o).hints(Context::Global);
        assert_eq!(hints[0], ("h".to_string(), "help"));
        assert!(hints.contains(&("q".to_string(), "quit")));
    }
}
