//! The architecture rules of issue #26, checked on the source itself: this file is that
//! issue's "Done when". `cargo test --test architecture -- --nocapture` prints the findings.
//!
//! 1. `no_backend_decisions_outside_cloud`: outside `src/cloud/`, no production line decides
//!    on the backend: `backend *(==|!=) *"` or `kube.is_some()`.
//! 2. `import_circles_outside_tui_at_most_one`: of the file-level import circles (strongly
//!    connected components of two or more files, Kosaraju), at most one has a file outside
//!    `src/tui/`, and none lies wholly inside `src/tui/` (issue #29); a mixed one is
//!    outside.
//! 3. `the_cockpit_update_is_a_router`: `update::apply` in `src/tui/update.rs` is under 100
//!    lines (issue #29).
//!
//! How the source is read (std only, no parser crate):
//! * Production code only. Comments (doc comments too) and the contents of string, byte, raw
//!   (`r#".."#`) and char literals are blanked; a string keeps its two `"` so that rule 1
//!   still sees `backend == "`; lifetimes (`'a`) stay. Then every item under `#[cfg(test)]`
//!   (its attributes, then up to its `;` or closing `}`) is blanked, wherever it is, and a
//!   file declared by `#[cfg(test)] mod x;` (with or without `#[path]`) is left out. Blanking
//!   keeps bytes and lines in place, so hits report real lines.
//! * Module path of a file: `src/lib.rs`, `src/main.rs` → `crate` ([]); `src/a.rs` and
//!   `src/a/mod.rs` → [a]; `src/a/b.rs` → [a, b]. A module has a file if `src/<path>.rs` or
//!   `src/<path>/mod.rs` exists (src/lib.rs for []).
//! * First segment of a path: `crate`, `$crate` (in macros), `flightdeck` (main.rs) are the
//!   root; `super` the parent (super of [a, b] is [a]; of mod.rs's [a] it is []); `self` the
//!   file's module; a name declared by `mod x;` in the file is that child module; a name a
//!   `use` of the file bound to a module (`use crate::cloud::gke;`, `use crate::fleet::{self,
//!   Fleet}`, `use super::x as y`) is that module. Anything else (std, other crates, local
//!   types) is not followed.
//! * Edges: (a) every leaf of a `use` tree (`use a::{b::C, d, e::{self, F}}`), (b) every path
//!   in code that starts as above (`crate::cloud::gke::jobs::start(..)`, `gke::jobs::start`,
//!   `super::Foo`, `crate::outln!`), (c) a bare `name!` of a `macro_rules!` that an ancestor
//!   module's file defines (textual macro scope). A `pub use`/`pub(crate) use` re-export is
//!   no edge, unless the file's own code also uses the name. `mod x;` is no edge. Self-edges
//!   are dropped.
//! * A full path [s1..sn] lands on a file: take the longest prefix that is a module with a
//!   file; nothing left → that file. Else the next segment is an item: if that file defines
//!   it at top level (`fn struct enum trait type const static union mod`, `macro_rules!`) →
//!   that file; if it re-exports it (`pub use x::Name`, `pub use x::{Name, ..}`, `pub use
//!   x::N as Alias`) → follow the re-export (depth ≤ 8), so `super::X` in a child lands on
//!   the sibling that defines X; else → that module's file. A `crate::name!` macro not found
//!   that way goes to the file whose `macro_rules! name` defines it.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;

/// A module path, `["cloud", "gke"]`; `[]` is `crate`.
type ModPath = Vec<String>;

/// One production source file, cleaned and tokenized.
#[derive(Default)]
struct Src {
    rel: String,
    module: ModPath,
    raw: String,
    /// `raw` with comments, literal contents and `#[cfg(test)]` items blanked.
    code: String,
    toks: Vec<String>,
    children: HashMap<String, ModPath>,
    defined: HashSet<String>,
    macros: HashSet<String>,
    /// `use` leaves in order: (path as written, bound name or None for `*`, `pub`).
    uses: Vec<(ModPath, Option<String>, bool)>,
    /// Token indices inside `use` declarations.
    in_use: HashSet<usize>,
    aliases: HashMap<String, ModPath>,
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80
}

/// Keywords that define a top-level item named by the next word.
const ITEMS: [&str; 9] = [
    "fn", "struct", "enum", "trait", "type", "const", "static", "union", "mod",
];

fn word(t: &str) -> bool {
    t.bytes()
        .next()
        .is_some_and(|c| is_ident(c) && !c.is_ascii_digit())
}

/// Spaces over `from..to`, newlines kept.
fn blank(out: &mut [u8], from: usize, to: usize) {
    let to = to.min(out.len());
    out[from..to]
        .iter_mut()
        .filter(|c| **c != b'\n')
        .for_each(|c| *c = b' ');
}

/// Comments blanked; a string literal becomes `"   "`, a char literal spaces; same length.
fn strip(src: &str) -> String {
    let b = src.as_bytes();
    let (mut out, mut i) = (b.to_vec(), 0);
    let at = |j: usize| b.get(j).copied().unwrap_or(0);
    let find = |from: usize, pat: &str| {
        src.get(from..)
            .and_then(|s| s.find(pat))
            .map_or(b.len(), |e| from + e + pat.len())
    };
    while i < b.len() {
        // r"..", r#".."#, br"..": an `r` that does not end a longer identifier.
        let raw = b[i] == b'r'
            && (i == 0 || !is_ident(b[i - 1]) || (b[i - 1] == b'b' && (i < 2 || !is_ident(b[i - 2]))));
        let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
        let end = match (b[i], at(i + 1)) {
            (b'/', b'/') => find(i, "\n"),
            (b'/', b'*') => {
                let (mut j, mut depth) = (i + 2, 1);
                while j < b.len() && depth > 0 {
                    match (b[j], at(j + 1)) {
                        (b'/', b'*') => (depth, j) = (depth + 1, j + 1),
                        (b'*', b'/') => (depth, j) = (depth - 1, j + 1),
                        _ => {}
                    }
                    j += 1;
                }
                j
            }
            (b'"', _) => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                j + 1
            }
            (b'r', _) if raw && at(i + 1 + hashes) == b'"' => {
                find(i + 2 + hashes, &format!("\"{}", "#".repeat(hashes)))
            }
            (b'\'', b'\\') => find(i + 3, "'"),
            // 'x' is a char; 'a (no closing quote after one char) a lifetime or label.
            (b'\'', _) if at(i + 1 + src[i + 1..].chars().next().map_or(1, char::len_utf8)) == b'\'' => {
                i + 2 + src[i + 1..].chars().next().map_or(1, char::len_utf8)
            }
            _ => {
                i += 1;
                continue;
            }
        };
        let end = end.min(b.len());
        blank(&mut out, i, end);
        if b[i] == b'"' || b[i] == b'r' {
            (out[i], out[end - 1]) = (b'"', b'"');
        }
        i = end;
    }
    String::from_utf8(out).expect("blanking keeps UTF-8")
}

/// Blanks every `#[cfg(test)]` item; returns the name (and `#[path]`) of each `mod x;` one.
fn cut_tests(code: &mut String, raw: &str) -> Vec<(String, Option<String>)> {
    let mut found = Vec::new();
    while let Some(p) = code.find("#[cfg(test)]") {
        let b = code.as_bytes();
        let (mut j, mut nest, mut braces) = (p + "#[cfg(test)]".len(), 0, 0);
        while j < b.len() {
            j += 1;
            match b[j - 1] {
                b'(' | b'[' => nest += 1,
                b')' | b']' => nest -= 1,
                b'{' => braces += 1,
                b'}' if braces == 1 => break,
                b'}' => braces -= 1,
                b';' if nest == 0 && braces == 0 => break,
                _ => {}
            }
        }
        let item = &code[p + "#[cfg(test)]".len()..j];
        let words: Vec<&str> = item
            .split(|c: char| !c.is_alphanumeric() && c != '_')
            .filter(|w| !w.is_empty())
            .collect();
        if let (true, [.., "mod", name]) = (item.ends_with(';'), &words[..]) {
            let path = raw[p..j].split("#[path").nth(1).and_then(|s| s.split('"').nth(1));
            found.push((name.to_string(), path.map(String::from)));
        }
        let mut bytes = std::mem::take(code).into_bytes();
        blank(&mut bytes, p, j);
        *code = String::from_utf8(bytes).unwrap();
    }
    found
}

/// Identifiers (`$crate`, `'a` included), `::`, string literals, single characters.
fn tokenize(code: &str) -> Vec<String> {
    let (b, mut out, mut i) = (code.as_bytes(), Vec::new(), 0);
    while i < b.len() {
        let start = i;
        i += 1;
        if b[start].is_ascii_whitespace() {
            continue;
        } else if is_ident(b[start]) || (matches!(b[start], b'$' | b'\'') && i < b.len() && is_ident(b[i])) {
            while i < b.len() && is_ident(b[i]) {
                i += 1;
            }
        } else if b[start] == b':' && b.get(i) == Some(&b':') {
            i += 1;
        } else if b[start] == b'"' {
            i = code[i..].find('"').map_or(b.len(), |e| i + e + 1);
        }
        out.push(code[start..i].to_string());
    }
    out
}

/// Parses the use tree at `t[*i]` under `path` into (path, bound name or None for `*`).
fn use_tree(t: &[&str], i: &mut usize, mut path: ModPath, out: &mut Vec<(ModPath, Option<String>)>) {
    while *i < t.len() {
        *i += 1;
        match t[*i - 1] {
            "::" => {}
            "*" => return out.push((path, None)),
            "{" => {
                while *i < t.len() && t[*i] != "}" {
                    use_tree(t, i, path.clone(), out);
                    *i += (t.get(*i) == Some(&",")) as usize;
                }
                *i += 1;
                return;
            }
            id => {
                // `self` inside braces names the prefix itself.
                let brace_self = id == "self" && !path.is_empty();
                if !brace_self {
                    path.push(id.to_string());
                }
                if t.get(*i) == Some(&"::") && !brace_self {
                    continue;
                }
                let mut name = path.last().cloned().unwrap_or_default();
                if t.get(*i) == Some(&"as") {
                    name = t.get(*i + 1).unwrap_or(&"_").to_string();
                    *i += 2;
                }
                return out.push((path, Some(name)));
            }
        }
    }
}

fn module_of(rel: &str) -> ModPath {
    let p = rel
        .strip_prefix("src/")
        .unwrap()
        .trim_end_matches(".rs")
        .trim_end_matches("/mod");
    let root = p == "lib" || p == "main";
    p.split('/').filter(|_| !root).map(String::from).collect()
}

fn walk(dir: &Path, root: &Path, out: &mut Vec<String>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            walk(&p, root, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/"));
        }
    }
}

struct Graph {
    files: Vec<Src>,
    index: HashMap<ModPath, usize>,
    /// (from, to) → the names that carry the edge.
    edges: BTreeMap<(usize, usize), BTreeSet<String>>,
}

impl Graph {
    fn load(root: &Path) -> Graph {
        let mut rels = Vec::new();
        walk(&root.join("src"), root, &mut rels);
        rels.sort();
        let (mut files, mut test_files) = (Vec::new(), HashSet::new());
        for rel in rels {
            let raw = std::fs::read_to_string(root.join(&rel)).unwrap();
            let (mut code, module) = (strip(&raw), module_of(&rel));
            for (name, path) in cut_tests(&mut code, &raw) {
                let base: String = module.iter().fold("src".into(), |b, s| format!("{b}/{s}"));
                test_files.extend(match path {
                    Some(p) => vec![format!("{}/{p}", &rel[..rel.rfind('/').unwrap()])],
                    None => vec![format!("{base}/{name}.rs"), format!("{base}/{name}/mod.rs")],
                });
            }
            let toks = tokenize(&code);
            files.push(Src {
                rel,
                module,
                raw,
                code,
                toks,
                ..Src::default()
            });
        }
        files.retain(|f| !test_files.contains(&f.rel));
        let mut index = HashMap::new();
        for (i, f) in files.iter().enumerate().filter(|(_, f)| f.rel != "src/main.rs") {
            index.insert(f.module.clone(), i);
        }
        let is_name = |w: &str| word(w) && !ITEMS.contains(&w) && !["unsafe", "extern", "async"].contains(&w);
        for f in &mut files {
            let t: Vec<&str> = f.toks.iter().map(String::as_str).collect();
            let mut depth = 0;
            for i in 0..t.len() {
                let next = |k: usize| t.get(i + k).copied().unwrap_or("");
                match t[i] {
                    "{" | "(" | "[" => depth += 1,
                    "}" | ")" | "]" => depth -= 1,
                    "macro_rules" if next(1) == "!" => drop(f.macros.insert(next(2).to_string())),
                    "use" => {
                        let end = (i..t.len()).find(|&j| t[j] == ";").unwrap_or(t.len());
                        let public =
                            i > 0 && (t[i - 1] == "pub" || (t[i - 1] == ")" && i >= 4 && t[i - 4] == "pub"));
                        let mut leaves = Vec::new();
                        use_tree(&t[i + 1..end], &mut 0, vec![], &mut leaves);
                        f.uses.extend(leaves.into_iter().map(|(p, n)| (p, n, public)));
                        f.in_use.extend(i..=end);
                    }
                    _ => {}
                }
                let child = [f.module.clone(), vec![next(1).to_string()]].concat();
                if t[i] == "mod" && next(2) == ";" && index.contains_key(&child) {
                    f.children.insert(next(1).to_string(), child);
                }
                // `fn f`, `static mut X`; `const fn f` defines `f` at `fn`. Outside all brackets.
                let name = next(1 + (next(1) == "mut") as usize);
                if depth == 0 && ITEMS.contains(&t[i]) && is_name(name) {
                    f.defined.insert(name.to_string());
                }
            }
            f.defined.extend(f.macros.iter().cloned());
        }
        let mut g = Graph {
            files,
            index,
            edges: BTreeMap::new(),
        };
        // Module aliases; a few rounds, as one `use` may go through another file's alias.
        for _ in 0..3 {
            for f in 0..g.files.len() {
                for (path, name, _) in g.files[f].uses.clone() {
                    let module = g
                        .expand(f, &path)
                        .and_then(|full| g.resolve(&full, 0))
                        .and_then(|(_, m)| m);
                    if let (Some(m), Some(name)) = (module, name) {
                        g.files[f].aliases.insert(name, m);
                    }
                }
            }
        }
        (0..g.files.len()).for_each(|f| g.add_edges(f));
        g
    }

    /// The full module path of a path as written in file `f`, if it is internal.
    fn expand(&self, f: usize, p: &[String]) -> Option<ModPath> {
        let src = &self.files[f];
        let supers = p.iter().take_while(|s| *s == "super").count();
        let base = match p.first()?.as_str() {
            "crate" | "$crate" | "flightdeck" => vec![],
            "self" => src.module.clone(),
            "super" => src.module[..src.module.len().checked_sub(supers)?].to_vec(),
            name => src.children.get(name).or_else(|| src.aliases.get(name))?.clone(),
        };
        Some([base, p[supers.max(1)..].to_vec()].concat())
    }

    /// The file a full path lands on, and the module path if the path names a module.
    fn resolve(&self, p: &[String], depth: usize) -> Option<(usize, Option<ModPath>)> {
        let k = (0..=p.len()).rev().find(|k| self.index.contains_key(&p[..*k]))?;
        let m = self.index[&p[..k]];
        if k == p.len() {
            return Some((m, Some(p.to_vec())));
        }
        if !self.files[m].defined.contains(&p[k]) && depth < 8 {
            let reexport = self.files[m]
                .uses
                .iter()
                .find(|(_, n, public)| *public && n.as_ref() == Some(&p[k]));
            if let Some(full) = reexport.and_then(|(path, _, _)| self.expand(m, path)) {
                return self.resolve(&[full, p[k + 1..].to_vec()].concat(), depth + 1);
            }
        }
        Some((m, None))
    }

    fn edge(&mut self, from: usize, to: usize, label: String) {
        if from != to {
            self.edges.entry((from, to)).or_default().insert(label);
        }
    }

    fn add_edges(&mut self, f: usize) {
        let (toks, in_use) = (self.files[f].toks.clone(), self.files[f].in_use.clone());
        let free = |i: usize| !in_use.contains(&i) && (i == 0 || (toks[i - 1] != "." && toks[i - 1] != "::"));
        let used: HashSet<&str> = (0..toks.len())
            .filter(|&i| free(i))
            .map(|i| toks[i].as_str())
            .collect();
        for (path, name, public) in self.files[f].uses.clone() {
            let label = name.clone().unwrap_or_else(|| format!("{}::*", path.join("::")));
            let own_use = |n: &str| used.contains(n) && !self.files[f].defined.contains(n);
            if public && !name.as_deref().is_some_and(own_use) {
                continue; // a re-export only
            }
            let label = label + if public { " (pub use, used here)" } else { "" };
            if let Some((to, _)) = self.expand(f, &path).and_then(|full| self.resolve(&full, 0)) {
                self.edge(f, to, label);
            }
        }
        let mut i = 0;
        while i < toks.len() {
            let start = i;
            i += 1;
            if !free(start) || !(word(&toks[start]) || toks[start] == "$crate") {
                continue;
            }
            let mut segs = vec![toks[start].clone()];
            while i + 1 < toks.len() && toks[i] == "::" && word(&toks[i + 1]) {
                segs.push(toks[i + 1].clone());
                i += 2;
            }
            let is_macro = toks.get(i).is_some_and(|t| t == "!") && toks.get(i + 1).is_some_and(|t| t != "=");
            let last = segs.last().unwrap().clone();
            if segs.len() == 1 {
                // A bare `name!`: textual scope, a macro_rules! of an ancestor module's file.
                let m = &self.files[f].module;
                let mut owners = (0..m.len())
                    .rev()
                    .filter_map(|k| self.index.get(&m[..k]).copied());
                if let Some(o) = owners.find(|&o| is_macro && self.files[o].macros.contains(&last)) {
                    self.edge(f, o, format!("{last}!"));
                }
                continue;
            }
            let Some((mut to, _)) = self.expand(f, &segs).and_then(|full| self.resolve(&full, 0)) else {
                continue;
            };
            let defines = |o: &usize| self.files[*o].macros.contains(&last);
            if is_macro && !defines(&to) {
                to = (0..self.files.len()).find(defines).unwrap_or(to);
            }
            self.edge(f, to, segs.join("::") + if is_macro { "!" } else { "" });
        }
    }

    /// Strongly connected components of more than one file (Kosaraju), each sorted.
    fn circles(&self) -> Vec<Vec<usize>> {
        fn dfs(adj: &[Vec<usize>], v: usize, seen: &mut [bool], out: &mut Vec<usize>) {
            if !std::mem::replace(&mut seen[v], true) {
                adj[v].iter().for_each(|&w| dfs(adj, w, seen, out));
                out.push(v);
            }
        }
        let n = self.files.len();
        let (mut fwd, mut back) = (vec![vec![]; n], vec![vec![]; n]);
        for &(a, b) in self.edges.keys() {
            fwd[a].push(b);
            back[b].push(a);
        }
        let (mut order, mut seen) = (vec![], vec![false; n]);
        (0..n).for_each(|v| dfs(&fwd, v, &mut seen, &mut order));
        let (mut out, mut seen) = (vec![], vec![false; n]);
        for &v in order.iter().rev() {
            let mut comp = vec![];
            dfs(&back, v, &mut seen, &mut comp);
            comp.sort_by_key(|&f| &self.files[f].rel);
            if comp.len() > 1 {
                out.push(comp);
            }
        }
        out.sort_by_key(|c| &self.files[c[0]].rel);
        out
    }

    /// A component's files, then each edge inside it with the names that carry it.
    fn describe(&self, comp: &[usize]) -> String {
        let rel = |f: usize| &self.files[f].rel;
        let mut s: String = comp.iter().map(|&f| format!("    {}\n", rel(f))).collect();
        for (&(a, b), names) in &self.edges {
            if comp.contains(&a) && comp.contains(&b) {
                let names = names.iter().cloned().collect::<Vec<_>>().join(", ");
                s += &format!("    {} -> {}: {names}\n", rel(a), rel(b));
            }
        }
        s
    }
}

fn graph() -> Graph {
    Graph::load(Path::new(env!("CARGO_MANIFEST_DIR")))
}

/// `backend *(==|!=) *"` or `kube.is_some()` in a line of cleaned code.
fn decides_backend(code: &str) -> bool {
    let op = |rest: &str| {
        let rest = rest.trim_start_matches(' ');
        let rest = rest.strip_prefix("==").or_else(|| rest.strip_prefix("!="));
        rest.is_some_and(|r| r.trim_start_matches(' ').starts_with('"'))
    };
    let typed = |rest: &str| {
        let rest = rest.trim_start_matches(' ');
        let rest = rest.strip_prefix("==").or_else(|| rest.strip_prefix("!="));
        rest.is_some_and(|r| {
            let r = r.trim_start_matches(' ');
            let r = r.strip_prefix("crate::fleet::").unwrap_or(r);
            r.starts_with("BackendKind::")
        })
    };
    code.contains("kube.is_some()")
        || code
            .match_indices("backend")
            .any(|(i, _)| op(&code[i + 7..]) || typed(&code[i + 7..]))
}

/// The files that may branch on the backend family: the family itself and the fleet
/// file's checks (`src/fleet/`), the lifecycle and inventory factories and the backends
/// (`src/cloud/`), and one factory per capability elsewhere.
const FACTORIES: &[&str] = &["src/jobs/mod.rs", "src/nccl/mod.rs", "src/nccl/profile.rs"];

/// A `BackendKind::X` match arm (`BackendKind::X =>`, `| BackendKind::X`) or `matches!`.
fn matches_backend_kind(code: &str) -> bool {
    code.match_indices("BackendKind::").any(|(i, _)| {
        let after = &code[i + "BackendKind::".len()..];
        let name_end = after
            .find(|c: char| !c.is_ascii_alphanumeric())
            .unwrap_or(after.len());
        let rest = after[name_end..].trim_start();
        rest.starts_with("=>") || rest.starts_with('|') || code[..i].trim_end().ends_with('|')
    }) || (code.contains("matches!") && code.contains("BackendKind::"))
}

/// A new backend family is a new `BackendKind` variant: the compiler then points at the
/// factories' `match`es, and only there (issue #26, "Done when").
#[test]
fn backend_kind_is_matched_only_in_factories() {
    let g = graph();
    let mut hits = Vec::new();
    for f in g.files.iter() {
        let allowed = f.rel.starts_with("src/cloud/")
            || f.rel.starts_with("src/fleet/")
            || FACTORIES.contains(&f.rel.as_str());
        if allowed {
            continue;
        }
        for (n, (code, raw)) in f.code.lines().zip(f.raw.lines()).enumerate() {
            if matches_backend_kind(code) {
                hits.push(format!("{}:{}: {}", f.rel, n + 1, raw.trim()));
            }
        }
    }
    let hits = hits.join("\n");
    assert!(
        hits.is_empty(),
        "BackendKind matched outside the factories:\n{hits}"
    );
}

#[test]
fn no_backend_decisions_outside_cloud() {
    let g = graph();
    let mut hits = Vec::new();
    for f in g.files.iter().filter(|f| !f.rel.starts_with("src/cloud/")) {
        for (n, (code, raw)) in f.code.lines().zip(f.raw.lines()).enumerate() {
            if decides_backend(code) {
                hits.push(format!("{}:{}: {}", f.rel, n + 1, raw.trim()));
            }
        }
    }
    println!("backend decisions outside src/cloud/: {}", hits.len());
    hits.iter().for_each(|h| println!("  {h}"));
    let hits = hits.join("\n");
    assert!(
        hits.is_empty(),
        "backend decisions outside src/cloud/ (issue #26):\n{hits}"
    );
}

#[test]
fn import_circles_outside_tui_at_most_one() {
    let g = graph();
    let circles = g.circles();
    let in_tui = |c: &&Vec<usize>| c.iter().all(|&f| g.files[f].rel.starts_with("src/tui/"));
    let (tui, outside): (Vec<&Vec<usize>>, Vec<_>) = circles.iter().partition(in_tui);
    let mut report = String::new();
    for (what, list) in [("outside src/tui/", &outside), ("inside src/tui/", &tui)] {
        for (k, c) in list.iter().enumerate() {
            report += &format!("circle {} {what} ({} files):\n{}", k + 1, c.len(), g.describe(c));
        }
    }
    let (files, edges, n) = (g.files.len(), g.edges.len(), outside.len());
    println!("architecture: {files} production files, {edges} file edges");
    println!("{n} circles outside src/tui/, {} inside:\n{report}", tui.len());
    assert!(
        n <= 1,
        "{n} import circles reach outside src/tui/, at most 1 may (issue #26):\n{report}"
    );
    assert!(
        tui.is_empty(),
        "{} import circles inside src/tui/, none may (issue #29: a feature's mod.rs holds its state, \
         which the root state holds; what changes the state imports the root):\n{report}",
        tui.len()
    );
}

/// The cockpit's `update::apply` is a router (issue #29): one arm per feature's messages
/// and the shell's own, each a call or a line or two, well under 100 lines.
#[test]
fn the_cockpit_update_is_a_router() {
    let src = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/tui/update.rs"))
        .expect("src/tui/update.rs");
    let start = src.find("\nfn apply(").expect("update.rs has `fn apply(`");
    let len = src[start + 1..]
        .lines()
        .position(|l| l == "}")
        .expect("apply's closing brace at column 0")
        + 1;
    println!("update::apply: {len} lines");
    assert!(
        len < 100,
        "update::apply is {len} lines; a router is well under 100"
    );
}

/// The cockpit's features read the shell (`src/tui/shell/`) and the shared widgets, not
/// one another (issue #29): no file of one feature's folder names another feature's
/// items. Tests are left out (they build messages of any feature).
#[test]
fn no_cockpit_feature_imports_another() {
    const FEATURES: [&str; 9] = [
        "offers", "fleets", "nodes", "panes", "nccl", "jobs", "nics", "doctor", "help",
    ];
    let g = graph();
    let feature = |f: usize| {
        let rel = &g.files[f].rel;
        FEATURES
            .iter()
            .find(|n| rel.starts_with(&format!("src/tui/{n}/")))
            .copied()
    };
    let mut hits = Vec::new();
    for (&(a, b), names) in &g.edges {
        if let (Some(fa), Some(fb)) = (feature(a), feature(b)) {
            if fa != fb {
                let names = names.iter().cloned().collect::<Vec<_>>().join(", ");
                hits.push(format!("{} -> {}: {names}", g.files[a].rel, g.files[b].rel));
            }
        }
    }
    println!("feature-to-feature uses: {}", hits.len());
    hits.iter().for_each(|h| println!("  {h}"));
    assert!(
        hits.is_empty(),
        "features import one another (move what they share to src/tui/shell/ or src/tui/widgets/):\n{}",
        hits.join("\n")
    );
}
