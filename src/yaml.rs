//! YAML loading with errors that point at the place: `FILE:LINE:COL: message`.
//!
//! Every YAML file flightdeck reads (config, themes, later fleets and jobs) goes through
//! [`from_str`], so every one of them reports bad input the same way: the file, the line
//! and column serde_yaml stopped at, the dotted path of the field, and for unknown
//! fields or names a "did you mean" when one of the expected names is close.

use serde::de::DeserializeOwned;
use std::fmt;
use std::path::{Path, PathBuf};

/// A YAML document that could not be read or did not have the expected shape.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct YamlError {
    pub file: PathBuf,
    /// 1-based; `None` when the error has no position (e.g. I/O).
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub message: String,
}

impl fmt::Display for YamlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.column) {
            (Some(l), Some(c)) => write!(f, "{}:{}:{}: {}", self.file.display(), l, c, self.message),
            _ => write!(f, "{}: {}", self.file.display(), self.message),
        }
    }
}

/// The largest YAML file flightdeck reads (fleets, jobs, config, themes are a few KiB).
pub const MAX_BYTES: u64 = 1 << 20;
/// The deepest nesting of flow collections (`[`, `{`) or block indentation (in levels of
/// two columns) a document may have; serde_yaml would take long to fail on more.
pub const MAX_DEPTH: usize = 64;

/// Parse `text` (the contents of `file`) into `T`.
///
/// A document that is empty or holds only comments parses as `T::default()`.
pub fn from_str<T: DeserializeOwned + Default>(file: &Path, text: &str) -> Result<T, YamlError> {
    if is_blank(text) {
        return Ok(T::default());
    }
    check_depth(file, text)?;
    serde_yaml::from_str(text).map_err(|e| convert(file, &e))
}

/// Parse `text` like [`from_str`], but when it does not fit `T`, find every misfit in
/// the file, not only serde's first: each error at its own line and column, in file order.
///
/// serde stops at the first error, so the file is tried again piece by piece: each
/// top-level entry alone (the other lines blanked, so lines and columns stay the file's),
/// and inside an entry that has an error, each of its entries alone, down a few levels. A
/// syntax error stops there: what follows it cannot be read.
pub fn from_str_all<T: DeserializeOwned + Default>(file: &Path, text: &str) -> Result<T, Vec<YamlError>> {
    // A file nested too deep is refused by its first too-deep place alone: handing it to
    // the YAML parser again (below) costs time that grows with the square of its depth
    // (hostile review 3: 7.5 s at 60,000 levels).
    check_depth(file, text).map_err(|e| vec![e])?;
    let first = match from_str::<T>(file, text) {
        Ok(v) => return Ok(v),
        Err(e) => e,
    };
    if first.line.is_none() || serde_yaml::from_str::<serde_yaml::Value>(text).is_err() {
        return Err(vec![first]);
    }
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Found {
        errors: vec![first],
        tries: PROBE_TRIES,
    };
    probe::<T>(file, &lines, &[], 0, lines.len(), 0, &mut found);
    let mut found = found.errors;
    found.sort_by_key(|e| (e.line, e.column));
    found.dedup();
    Err(found)
}

/// The deepest level [`from_str_all`] splits a file into.
const PROBE_LEVELS: usize = 4;
/// The most pieces [`from_str_all`] tries (each parse reads the whole, blanked, text): a
/// file of a thousand wrong entries gets its first errors quickly, not every one slowly.
const PROBE_TRIES: usize = 200;

/// The errors [`probe`] found, and how many more pieces it may try.
struct Found {
    errors: Vec<YamlError>,
    tries: usize,
}

/// Try each entry of `lines[start..end]` alone (with the `header` lines of its parents),
/// adding the errors not yet in `found`, and go into the entries that have one.
fn probe<T: DeserializeOwned + Default>(
    file: &Path,
    lines: &[&str],
    header: &[usize],
    start: usize,
    end: usize,
    level: usize,
    found: &mut Found,
) {
    let entries = entries(lines, start, end);
    // With its siblings blanked, a mapping misses the fields they held: such a "missing
    // field" is the blanking's, not the file's (the whole mapping, tried a level up, says
    // so when it is the file's).
    let siblings_blanked = level > 0 && entries.len() > 1;
    let mut item = 0;
    for (s, e) in entries {
        if found.tries == 0 {
            return;
        }
        found.tries -= 1;
        // A list item tried alone is item 0 of its list: the message says its own index.
        let index = lines[s].trim_start().starts_with('-').then(|| {
            item += 1;
            item - 1
        });
        let masked: String = lines
            .iter()
            .enumerate()
            .map(|(i, l)| {
                if header.contains(&i) || (s..e).contains(&i) {
                    *l
                } else {
                    ""
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        let Err(mut err) = from_str::<T>(file, &masked) else {
            continue;
        };
        if let Some(k) = index.filter(|&k| k > 0) {
            // Its parents are mappings (list items are not gone into), so the first `[0]`
            // of the field's path is this list's.
            let path_end = err.message.find(": ").unwrap_or(0);
            if let Some(p) = err.message[..path_end].find("[0]") {
                err.message.replace_range(p..p + 3, &format!("[{k}]"));
            }
        }
        if err.line.is_none() || (siblings_blanked && err.message.contains("missing field")) {
            continue;
        }
        if !found.errors.contains(&err) {
            found.errors.push(err);
        }
        // Go into a block (`key:` with its entries below), not into a list item whose
        // first entry shares the dash's line.
        let opens_block = lines[s].trim_end().ends_with(':') && !lines[s].trim_start().starts_with('-');
        if level + 1 < PROBE_LEVELS && opens_block && e > s + 1 {
            let mut h = header.to_vec();
            h.push(s);
            probe::<T>(file, lines, &h, s + 1, e, level + 1, found);
        }
    }
}

/// The entries of a block of YAML lines: each starts at a line of the block's least
/// indentation and holds the deeper lines (and comments, blank lines) after it; a `- `
/// item at a key's own indentation belongs to that key (`hosts:` then `- a` below it).
fn entries(lines: &[&str], start: usize, end: usize) -> Vec<(usize, usize)> {
    let indent = |l: &str| l.len() - l.trim_start_matches(' ').len();
    let content = |l: &str| {
        let t = l.trim();
        !t.is_empty() && !t.starts_with('#') && t != "---"
    };
    let Some(least) = lines[start..end]
        .iter()
        .filter(|l| content(l))
        .map(|l| indent(l))
        .min()
    else {
        return vec![];
    };
    let mut out: Vec<(usize, usize)> = vec![];
    for (i, l) in lines.iter().enumerate().take(end).skip(start) {
        if !content(l) || indent(l) > least {
            continue;
        }
        let item = l.trim_start().starts_with('-');
        if let Some(last) = out.last() {
            let opener = lines[last.0];
            if item && !opener.trim_start().starts_with('-') && indent(opener) == least {
                continue;
            }
        }
        if let Some(last) = out.last_mut() {
            last.1 = i;
        }
        out.push((i, end));
    }
    out
}

/// Read a YAML file's text: at most [`MAX_BYTES`] (a device or a huge file is refused
/// without reading it all), UTF-8; errors name the file.
pub fn read_text(file: &Path) -> Result<String, YamlError> {
    use std::io::Read;
    let err = |message: String| YamlError {
        file: file.to_path_buf(),
        line: None,
        column: None,
        message,
    };
    let f = std::fs::File::open(file).map_err(|e| err(format!("cannot read: {e}")))?;
    let mut bytes = vec![];
    f.take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| err(format!("cannot read: {e}")))?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(err(format!(
            "larger than {} KiB: not a file flightdeck reads (fleet, job, config and theme files are small)",
            MAX_BYTES / 1024
        )));
    }
    String::from_utf8(bytes).map_err(|e| {
        err(format!(
            "not UTF-8 text (at byte {})",
            e.utf8_error().valid_up_to()
        ))
    })
}

/// Read and parse a file; I/O errors name the file.
pub fn from_file<T: DeserializeOwned + Default>(file: &Path) -> Result<T, YamlError> {
    let text = read_text(file)?;
    from_str(file, &text)
}

/// Refuse a document nested deeper than [`MAX_DEPTH`], at the place it gets too deep.
pub fn check_depth(file: &Path, text: &str) -> Result<(), YamlError> {
    let too_deep = |line: usize, column: usize| YamlError {
        file: file.to_path_buf(),
        line: Some(line),
        column: Some(column),
        message: format!("nested deeper than {MAX_DEPTH} levels: not a file flightdeck reads"),
    };
    let mut depth = 0usize;
    for (n, l) in text.lines().enumerate() {
        let indent = l.len() - l.trim_start_matches(' ').len();
        if indent / 2 > MAX_DEPTH {
            return Err(too_deep(n + 1, indent + 1));
        }
        let mut quote: Option<char> = None;
        let mut prev = ' ';
        for (col, c) in l.chars().enumerate() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), _) => {}
                (None, '#') if prev == ' ' || col == 0 => break,
                (None, '"' | '\'')
                    if prev == ' '
                        || prev == '['
                        || prev == '{'
                        || prev == ','
                        || prev == ':'
                        || col == 0 =>
                {
                    quote = Some(c)
                }
                (None, '[' | '{') => {
                    depth += 1;
                    if depth > MAX_DEPTH {
                        return Err(too_deep(n + 1, col + 1));
                    }
                }
                (None, ']' | '}') => depth = depth.saturating_sub(1),
                _ => {}
            }
            prev = c;
        }
    }
    Ok(())
}

fn is_blank(text: &str) -> bool {
    text.lines().all(|l| {
        let t = l.trim();
        t.is_empty() || t.starts_with('#') || t == "---"
    })
}

/// Turn a serde_yaml error into a [`YamlError`], moving serde_yaml's
/// " at line L column C" suffix into fields and adding a suggestion.
pub fn convert(file: &Path, e: &serde_yaml::Error) -> YamlError {
    let mut message = e.to_string();
    let (line, column) = match e.location() {
        Some(loc) => {
            let suffix = format!(" at line {} column {}", loc.line(), loc.column());
            if let Some(pos) = message.find(&suffix) {
                message.replace_range(pos..pos + suffix.len(), "");
            }
            (Some(loc.line()), Some(loc.column()))
        }
        None => (None, None),
    };
    let hint = hint_suffix(suggestion(&message).as_deref());
    let mut message = plain_words(&message);
    message.push_str(&hint);
    YamlError {
        file: file.to_path_buf(),
        line,
        column,
        message,
    }
}

/// serde's words said in the operator's: "invalid type: map, expected a string" becomes
/// "expected a text, found a mapping" (with why a command with `: ` in it is one), "unknown
/// variant" an "unknown value", and a file of the wrong kind (`type: fleet` where a task is
/// read) says so. The field path before the message is kept.
pub fn plain_words(message: &str) -> String {
    let (path, body) = match message
        .find(": invalid type: ")
        .or_else(|| message.find(": unknown variant `"))
    {
        Some(p) => (&message[..p + 2], &message[p + 2..]),
        None => ("", message),
    };
    if let Some(rest) = body.strip_prefix("invalid type: ") {
        let Some((found, expected)) = rest.split_once(", expected ") else {
            return message.to_string();
        };
        let found_words = match found {
            "map" => "a mapping (`key: value`)".to_string(),
            "sequence" => "a list".to_string(),
            "unit value" => "nothing".to_string(),
            f => {
                let (kind, value) = f.split_once(' ').unwrap_or((f, ""));
                match kind {
                    "string" => format!("the text {value}"),
                    "integer" | "floating" => format!(
                        "the number {}",
                        value.trim_start_matches("point ").trim_matches('`')
                    ),
                    "boolean" => value.to_string(),
                    _ => f.to_string(),
                }
            }
        };
        let expected_words = match expected {
            "u8" | "u16" | "u32" | "u64" | "usize" => "a whole number (0 or more)",
            "i8" | "i16" | "i32" | "i64" | "isize" => "a whole number",
            "f32" | "f64" => "a number",
            "a string" => "a text",
            "a sequence" => "a list",
            "a boolean" => "`true` or `false`",
            "a map" => "a mapping (`key: value`)",
            e => e,
        };
        let why = if found == "map" && expected == "a string" {
            "; a value with `: ` in it reads as a mapping: put it in quotes"
        } else {
            ""
        };
        return format!("{path}expected {expected_words}, found {found_words}{why}");
    }
    if let Some(rest) = body.strip_prefix("unknown variant `") {
        if let Some((wrong, expected)) = rest.split_once("`, expected `") {
            let kinds = ["fleet", "task"];
            let expected = expected.trim_end_matches('`');
            if path == "type: " && kinds.contains(&wrong) && kinds.contains(&expected) {
                return format!(
                    "type: this is a {wrong} file (`type: {wrong}`); a {expected} file (`type: {expected}`) is read here"
                );
            }
        }
        return format!("{path}unknown value `{rest}");
    }
    message.to_string()
}

/// For serde's "unknown field `x`, expected one of `a`, `b`" (and "unknown variant"),
/// the expected name closest to `x`, when it is close enough to be a likely typo.
pub fn suggestion(message: &str) -> Option<String> {
    let start = message
        .find("unknown field `")
        .map(|p| p + "unknown field `".len())
        .or_else(|| {
            message
                .find("unknown variant `")
                .map(|p| p + "unknown variant `".len())
        })?;
    let rest = &message[start..];
    let end = rest.find('`')?;
    let wrong = &rest[..end];
    let expected = &rest[end + 1..];
    let candidates: Vec<&str> = expected
        .split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, s)| s)
        .collect();
    closest(wrong, candidates.iter().copied())
}

/// "; did you mean `x`?" naming the candidate nearest to `wrong` (see [`closest`]), or "" when
/// none is close: the suffix every "unknown name" message ends with.
pub fn did_you_mean<'a>(wrong: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    hint_suffix(closest(wrong, candidates).as_deref())
}

fn hint_suffix(hint: Option<&str>) -> String {
    hint.map(|h| format!("; did you mean `{h}`?")).unwrap_or_default()
}

/// The candidate nearest to `wrong` by edit distance, if within a third of its length (at
/// least 1). Case is ignored, and so are look-alikes typed for digits (`O` for `0`, `l` or
/// `I` for `1`: `H1OO` is `H100`).
pub fn closest<'a>(wrong: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let limit = (wrong.chars().count() / 3).max(1);
    let fold = |s: &str| -> String {
        s.to_lowercase()
            .chars()
            .map(|c| match c {
                'o' => '0',
                'l' | 'i' => '1',
                c => c,
            })
            .collect()
    };
    let wrong = fold(wrong);
    candidates
        .into_iter()
        .map(|c| (edit_distance(&wrong, &fold(c)), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c.to_string())
}

/// Edit distance counting a swap of two neighbouring characters as one edit
/// (optimal string alignment), so `lihgt` is one edit from `light`.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

/// Where the key at `path` (a chain of block-mapping keys, e.g. `["ssh_config", "hosts"]`)
/// is written in `text`, as 1-based (line, column) of the key. For checks that span
/// fields and so happen after parsing, when serde has no position to give. Handles the
/// block style fleet and config files use (`key:` lines, `- key:` list items); returns
/// `None` for paths it cannot find, e.g. in flow style.
pub fn locate(text: &str, path: &[&str]) -> Option<(usize, usize)> {
    locate_block(text, path).or_else(|| locate_in_flow(text, path))
}

/// [`locate`] for a path whose end is inside a one-line flow mapping (`gke: {context: a,
/// allow_exec_plugin: sh}`): the key in that line, else the nearest written parent.
fn locate_in_flow(text: &str, path: &[&str]) -> Option<(usize, usize)> {
    for i in (1..path.len()).rev() {
        let Some((l, c)) = locate_block(text, &path[..i]) else {
            continue;
        };
        let line = text.lines().nth(l - 1)?;
        let mut from = c - 1 + line.get(c - 1..)?.find(':')? + 1;
        let mut at = (l, c);
        for key in &path[i..] {
            match flow_key(line, from, key) {
                Some(pos) => {
                    at = (l, pos + 1);
                    from = pos + key.len();
                }
                None => break,
            }
        }
        return Some(at);
    }
    None
}

/// The byte offset in `line`, at or after `from`, of `key:` as a key of a flow mapping
/// (after `{` or `,`).
fn flow_key(line: &str, from: usize, key: &str) -> Option<usize> {
    let hay = line.get(from..)?;
    let mut search = 0;
    while let Some(p) = hay[search..].find(key) {
        let i = search + p;
        let before = hay[..i].trim_end().chars().last();
        let quoted = hay[..i].ends_with('"') || hay[..i].ends_with('\'');
        let rest = hay[i + key.len()..].trim_start_matches(['"', '\'']);
        if matches!(before, Some('{' | ',' | '"' | '\'')) && rest.trim_start().starts_with(':') {
            return Some(from + i - usize::from(quoted));
        }
        search = i + key.len();
    }
    None
}

fn locate_block(text: &str, path: &[&str]) -> Option<(usize, usize)> {
    let mut stack: Vec<(usize, String)> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with("---") {
            continue;
        }
        let mut indent = line.len() - trimmed.len();
        let mut rest = trimmed;
        while let Some(r) = rest.strip_prefix("- ") {
            indent += 2;
            rest = r.trim_start();
        }
        let Some((key, _)) = rest.split_once(':') else {
            continue;
        };
        let key = key.trim().trim_matches(|c| c == '"' || c == '\'');
        if key.is_empty() || key.contains(' ') {
            continue;
        }
        while stack.last().is_some_and(|(i, _)| *i >= indent) {
            stack.pop();
        }
        stack.push((indent, key.to_string()));
        if stack.len() == path.len() && stack.iter().zip(path).all(|((_, k), p)| k == p) {
            return Some((n + 1, indent + 1));
        }
    }
    None
}

/// Where item `index` (0-based) of the list at `path` is written: the value after its
/// `- ` in block style, or the element in a one-line flow list (`key: [a, b]`).
pub fn locate_item(text: &str, path: &[&str], index: usize) -> Option<(usize, usize)> {
    let (kl, kc) = locate(text, path)?;
    let lines: Vec<&str> = text.lines().collect();
    let key_line = lines[kl - 1];
    let after = key_line[kc - 1..].split_once(':')?.1;
    let start = key_line.len() - after.len();
    if let Some(open) = after.find('[') {
        // Flow style: count top-level commas.
        let mut depth = 0;
        let mut item = 0;
        for (i, ch) in after[open + 1..].char_indices() {
            let at = start + open + 1 + i;
            match ch {
                '[' | '{' => depth += 1,
                ']' | '}' if depth == 0 => break,
                ']' | '}' => depth -= 1,
                ',' if depth == 0 => {
                    item += 1;
                    continue;
                }
                _ => {}
            }
            if item == index && !ch.is_whitespace() {
                return Some((kl, at + 1));
            }
        }
        return None;
    }
    let mut seen = 0;
    for (n, line) in lines.iter().enumerate().skip(kl) {
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let indent = line.len() - trimmed.len();
        if indent < kc - 1 || (indent == kc - 1 && !trimmed.starts_with('-')) {
            break;
        }
        if indent <= kc + 1 && trimmed.starts_with('-') {
            if seen == index {
                let value = trimmed[1..].trim_start();
                return Some((n + 1, line.len() - value.len() + 1));
            }
            seen += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hostile review 3, L5: an error inside a one-line flow mapping points at its key,
    /// not at FILE:1:1.
    #[test]
    fn keys_of_a_flow_mapping_are_located() {
        let text = "type: fleet\nname: g\ngke: {context: team, node_pools: [p], allow_exec_plugin: sh}\n";
        assert_eq!(locate(text, &["gke", "allow_exec_plugin"]), Some((3, 39)));
        assert_eq!(locate(text, &["gke", "context"]), Some((3, 7)));
        // A key not written: the nearest parent that is.
        assert_eq!(locate(text, &["gke", "namespace"]), Some((3, 1)));
        assert_eq!(locate("a: {b: {c: 1}}\n", &["a", "b", "c"]), Some((1, 9)));
        assert_eq!(locate("a: {\"b\": 1}\n", &["a", "b"]), Some((1, 5)));
    }

    /// Hostile review 3: a file nested 60,000 deep is refused at its first too-deep
    /// place, once: never handed to the YAML parser (whose cost grows with the square of
    /// the depth; BENCHMARKS.md has the times).
    #[test]
    fn a_deep_file_is_refused_once_at_its_first_too_deep_place() {
        let text = format!("type: fleet\nenv: {}{}\n", "[".repeat(60_000), "]".repeat(60_000));
        let errs = from_str_all::<serde_yaml::Value>(Path::new("f.yaml"), &text).unwrap_err();
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!((errs[0].line, errs[0].column), (Some(2), Some(6 + MAX_DEPTH)));
        assert!(
            errs[0].message.starts_with("nested deeper than"),
            "{}",
            errs[0].message
        );
    }

    #[test]
    fn huge_and_deep_documents_are_refused_quickly() {
        let e = read_text(Path::new("/dev/zero")).unwrap_err();
        assert!(
            e.to_string().starts_with("/dev/zero: larger than 1024 KiB"),
            "{e}"
        );
        let deep = format!("a: {}1{}\n", "[".repeat(100_000), "]".repeat(100_000));
        let e = from_str::<std::collections::BTreeMap<String, serde_yaml::Value>>(Path::new("d.yaml"), &deep)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "d.yaml:1:68: nested deeper than 64 levels: not a file flightdeck reads"
        );
        // Brackets in quotes and comments do not count.
        let ok = format!("a: '{}'\n# {}\nb: [[1]]\n", "[".repeat(100), "{".repeat(100));
        assert!(
            from_str::<std::collections::BTreeMap<String, serde_yaml::Value>>(Path::new("o.yaml"), &ok)
                .is_ok()
        );
    }
    use serde::Deserialize;

    #[derive(Debug, Default, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Doc {
        #[allow(dead_code)]
        name: Option<String>,
        #[allow(dead_code)]
        count: Option<u32>,
    }

    #[test]
    fn list_items_are_found() {
        let text = "env:\n  - A=1\n  - B\nfiles: [a.py, 'b c.py', x]\nnext:\n- one\n- two\n";
        assert_eq!(locate_item(text, &["env"], 0), Some((2, 5)));
        assert_eq!(locate_item(text, &["env"], 1), Some((3, 5)));
        assert_eq!(locate_item(text, &["env"], 2), None);
        assert_eq!(locate_item(text, &["files"], 0), Some((4, 9)));
        assert_eq!(locate_item(text, &["files"], 1), Some((4, 15)));
        assert_eq!(locate_item(text, &["files"], 2), Some((4, 25)));
        assert_eq!(locate_item(text, &["next"], 1), Some((7, 3)));
    }

    /// A large file of wrong entries is not parsed once per entry: at most
    /// [`PROBE_TRIES`] pieces are tried, each error still at its place.
    #[test]
    fn many_wrong_entries_are_reported_quickly() {
        let text: String = (0..20_000).map(|i| format!("wrong{i}: 1\n")).collect();
        let t = std::time::Instant::now();
        let errs = from_str_all::<Doc>(Path::new("m.yaml"), &text).unwrap_err();
        assert!(
            t.elapsed() < std::time::Duration::from_secs(30),
            "{:?}",
            t.elapsed()
        );
        assert_eq!(errs.len(), PROBE_TRIES);
        assert_eq!((errs[1].line, errs[1].column), (Some(2), Some(1)));
        assert!(
            errs[1].message.starts_with("unknown field `wrong1`"),
            "{}",
            errs[1]
        );
    }

    #[test]
    fn unknown_field_has_position_and_suggestion() {
        let e = from_str::<Doc>(Path::new("a.yaml"), "name: x\ncuont: 3\n").unwrap_err();
        assert_eq!((e.line, e.column), (Some(2), Some(1)));
        assert!(e.message.contains("unknown field `cuont`"), "{e}");
        assert!(e.message.ends_with("did you mean `count`?"), "{e}");
        assert!(e.to_string().starts_with("a.yaml:2:1: "), "{e}");
        assert!(!e.to_string().contains(" at line "), "{e}");
    }

    #[test]
    fn wrong_type_names_the_field() {
        let e = from_str::<Doc>(Path::new("b.yaml"), "name: x\ncount: many\n").unwrap_err();
        assert_eq!(e.line, Some(2));
        assert_eq!(
            e.message,
            "count: expected a whole number (0 or more), found the text \"many\""
        );
    }

    #[test]
    fn serde_words_become_the_operators() {
        let p = |m: &str| plain_words(m);
        assert_eq!(
            p("commands[0]: invalid type: map, expected a string"),
            "commands[0]: expected a text, found a mapping (`key: value`); a value with `: ` in it reads as a mapping: put it in quotes"
        );
        assert_eq!(
            p("hosts: invalid type: map, expected a sequence"),
            "hosts: expected a list, found a mapping (`key: value`)"
        );
        assert_eq!(
            p("x: invalid type: floating point `1.5`, expected u32"),
            "x: expected a whole number (0 or more), found the number 1.5"
        );
        assert_eq!(
            p("type: unknown variant `fleet`, expected `task`"),
            "type: this is a fleet file (`type: fleet`); a task file (`type: task`) is read here"
        );
        assert_eq!(
            p("mode: unknown variant `x`, expected one of `a`, `b`"),
            "mode: unknown value `x`, expected one of `a`, `b`"
        );
        assert_eq!(
            p("unknown field `x`, expected `a`"),
            "unknown field `x`, expected `a`"
        );
    }

    #[test]
    fn blank_and_comment_only_documents_are_default() {
        assert!(from_str::<Doc>(Path::new("c"), "").is_ok());
        assert!(from_str::<Doc>(Path::new("c"), "# only\n\n  # comments\n").is_ok());
    }

    #[test]
    fn locate_finds_nested_keys() {
        let text = "# c\ntype: fleet\nssh_config:\n  user: u\n  hosts:\n    - hostname: a\n      port: 22\nname: x\n";
        assert_eq!(locate(text, &["type"]), Some((2, 1)));
        assert_eq!(locate(text, &["ssh_config", "hosts"]), Some((5, 3)));
        assert_eq!(
            locate(text, &["ssh_config", "hosts", "port"]),
            Some((7, 7)),
            "list items flatten"
        );
        assert_eq!(locate(text, &["ssh_config", "hosts", "hostname"]), Some((6, 7)));
        assert_eq!(locate(text, &["name"]), Some((8, 1)));
        assert_eq!(locate(text, &["user"]), None);
    }

    #[test]
    fn no_suggestion_when_nothing_is_close() {
        assert_eq!(
            suggestion("unknown field `zzzzzz`, expected `name` or `count`"),
            None
        );
        assert_eq!(closest("thme", ["theme", "keys"]), Some("theme".into()));
    }

    #[test]
    fn did_you_mean_is_a_suffix_or_nothing() {
        assert_eq!(did_you_mean("thme", ["theme", "keys"]), "; did you mean `theme`?");
        assert_eq!(did_you_mean("zzzzzz", ["theme", "keys"]), "");
        assert_eq!(did_you_mean("x", []), "");
    }
}
