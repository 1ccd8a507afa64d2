//! Line-level helpers for nccl-tests logs: the prefixes launchers put before each line,
//! NCCL's own debug lines, and the tokens of a result row.
//!
//! Real logs rarely hold nccl-tests' output alone. `mpirun --tag-output` writes
//! `[1,0]<stdout>:` before every line, SkyPilot and Ray write `(head, rank=0, pid=123) `,
//! `srun --label` writes `0: `, `kubectl logs --prefix --timestamps` writes
//! `[pod/x/c] 2026-01-02T03:04:05.123Z `; with `NCCL_DEBUG=INFO` NCCL's lines
//! (`host:pid:tid [dev] NCCL INFO ...`) go to the same stdout, and since nccl-tests prints
//! a row in pieces (the size columns, then each half once measured), a debug line can land
//! in the middle of a row: `   1048576  262144  float  sum  -1vm:1486:1504 [1] NCCL INFO ...`.

/// `line` without the launcher prefixes it starts with (any number, in any order).
pub fn strip_launcher_prefixes(mut line: &str) -> &str {
    while let Some(rest) = strip_one_prefix(line) {
        line = rest;
    }
    line
}

fn strip_one_prefix(line: &str) -> Option<&str> {
    let rest = strip_tagged(line).or_else(|| {
        // Indented by another tool (a Markdown quote, a wrapper script): the tag after
        // the blanks.
        let indented = line.trim_start_matches([' ', '\t']);
        (indented.len() < line.len())
            .then(|| strip_tagged(indented))
            .flatten()
    })?;
    (rest.len() < line.len()).then_some(rest)
}

fn strip_tagged(line: &str) -> Option<&str> {
    strip_ompi_tag(line)
        .or_else(|| strip_paren_tag(line))
        .or_else(|| strip_bracket_tag(line))
        .or_else(|| strip_torch_rank(line))
        .or_else(|| strip_iso_timestamp(line))
        .or_else(|| strip_date_minutes(line))
        .or_else(|| strip_ctime(line))
        .or_else(|| strip_srun_label(line))
        .or_else(|| strip_host_label(line))
}

/// torchrun's `--tee`/`--log-dir` rank tags: `[rank13]:`, `[default0]:`, with or without
/// a space after.
fn strip_torch_rank(line: &str) -> Option<&str> {
    let rest = line.strip_prefix('[')?;
    let (tag, rest) = rest.split_once("]:")?;
    let digits = tag.strip_prefix("rank").or_else(|| tag.strip_prefix("default"))?;
    is_digits(digits).then(|| rest.strip_prefix(' ').unwrap_or(rest))
}

/// `2025-02-18 12:54 ` and `2025-02-18 12:54:22 `, `2025-02-18 12:54:22,123 ` (Python's
/// logging): a date and a time before the line. NCCL's own bracketed timestamp before a
/// WARN (`[2026-01-02 03:04:05] host:pid:tid`) is not one of these.
fn strip_date_minutes(line: &str) -> Option<&str> {
    let b = line.as_bytes();
    let dated = b.len() > 17
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b' '
        && b[11..13].iter().all(u8::is_ascii_digit)
        && b[13] == b':';
    if !dated {
        return None;
    }
    let rest = &line[11..];
    let end = rest.find(' ')?;
    let time = &rest[..end];
    time.bytes()
        .all(|c| c.is_ascii_digit() || matches!(c, b':' | b'.' | b','))
        .then(|| &rest[end + 1..])
}

/// Open MPI's `--timestamp-output`, glued to the tag that follows it: `Fri Aug 11
/// 12:31:45 2023[1,0]<stdout>:`.
fn strip_ctime(line: &str) -> Option<&str> {
    const DAYS: [&str; 7] = ["Mon ", "Tue ", "Wed ", "Thu ", "Fri ", "Sat ", "Sun "];
    if !DAYS.iter().any(|d| line.starts_with(d)) {
        return None;
    }
    // `Www Mmm dd hh:mm:ss yyyy`: 24 characters, the day of month space-padded.
    let b = line.as_bytes();
    let shaped = b.len() >= 24
        && b[13] == b':'
        && b[16] == b':'
        && b[19] == b' '
        && b[20..24].iter().all(u8::is_ascii_digit);
    shaped.then(|| line[24..].strip_prefix(' ').unwrap_or(&line[24..]))
}

/// pdsh, clush and `kubectl logs --prefix` of old: `host-1: ` before each line. Only a
/// name shaped as a host's (letters, digits, `-`, `.`, `_`, and a digit, `-` or `.` in it),
/// so that `RuntimeError: ` and `Bootstrap : ` stay.
fn strip_host_label(line: &str) -> Option<&str> {
    let (label, rest) = line
        .split_once(": ")
        .or_else(|| line.strip_suffix(':').map(|l| (l, "")))?;
    let shaped = !label.is_empty()
        && label.len() <= 64
        && label.starts_with(|c: char| c.is_ascii_alphanumeric())
        && label
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
        && label.contains(|c: char| c.is_ascii_digit() || c == '-' || c == '.')
        && !label.ends_with("Error")
        && !label.ends_with("Exception")
        && !label.contains(".py")
        && !label.contains(".cu");
    shaped.then_some(rest)
}

/// Open MPI `--tag-output`: `[1,0]<stdout>:` (Open MPI 5 adds a space).
fn strip_ompi_tag(line: &str) -> Option<&str> {
    let rest = line.strip_prefix('[')?;
    let (ids, rest) = rest.split_once(']')?;
    let (job, rank) = ids.split_once(',')?;
    if !is_digits(job) || !is_digits(rank) {
        return None;
    }
    let rest = rest.strip_prefix('<')?;
    let (stream, rest) = rest.split_once(">:")?;
    if !stream.chars().all(|c| c.is_ascii_lowercase()) || stream.is_empty() {
        return None;
    }
    Some(rest.strip_prefix(' ').unwrap_or(rest))
}

/// SkyPilot / Ray: `(head, rank=0, pid=123) `, `(worker1, rank=1, pid=45, ip=10.0.0.2) `,
/// `(BenchmarkWorker pid=1876, ip=10.52.2.7) `.
fn strip_paren_tag(line: &str) -> Option<&str> {
    let rest = line.strip_prefix('(')?;
    let close = rest.find(')')?;
    let inner = &rest[..close];
    if close > 200 || !(inner.contains("rank=") || inner.contains("pid=") || inner.contains("ip=")) {
        return None;
    }
    let rest = &rest[close + 1..];
    Some(rest.strip_prefix(' ').unwrap_or(rest))
}

/// MPICH / Intel MPI `-prepend-rank`: `[0] `; `kubectl logs --prefix`: `[pod/name/container] `.
fn strip_bracket_tag(line: &str) -> Option<&str> {
    let rest = line.strip_prefix('[')?;
    let (inner, rest) = rest.split_once("] ")?;
    (is_digits(inner) || (inner.starts_with("pod/") && !inner.contains(char::is_whitespace))).then_some(rest)
}

/// `kubectl logs --timestamps` / `docker logs -t`: `2026-01-02T03:04:05.123456789Z `.
fn strip_iso_timestamp(line: &str) -> Option<&str> {
    let b = line.as_bytes();
    let shaped = b.len() > 20
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':';
    if !shaped {
        return None;
    }
    let end = line.find(' ')?;
    Some(&line[end + 1..])
}

/// `srun --label`: `0: `, ` 12: `.
fn strip_srun_label(line: &str) -> Option<&str> {
    let trimmed = line.trim_start_matches(' ');
    let (label, rest) = trimmed.split_once(": ")?;
    is_digits(label).then_some(rest)
}

pub fn is_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// A line NCCL printed with `NCCL_DEBUG` set: `host:pid:tid [dev] NCCL INFO message`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DebugLine<'a> {
    /// What came before NCCL's `host:pid:tid`: empty for a whole debug line; the start of
    /// a row when the debug line interrupted one. The last token of a row fragment is
    /// glued to the host name; see [`DebugLine::glued`].
    pub before: &'a str,
    /// The whitespace-free token that ends with the host name (`vm`, or `-1vm` when a row
    /// fragment ended with `-1`).
    pub glued: &'a str,
    /// INFO, WARN, TRACE or ABORT.
    pub level: &'a str,
    /// The text after `NCCL INFO `.
    pub message: &'a str,
}

const LEVELS: [&str; 4] = ["INFO", "WARN", "TRACE", "ABORT"];

/// Split a NCCL debug line; `None` for any other line. NCCL 2.3 and before printed no
/// `NCCL` before the level (`host:pid:tid [0] INFO NET : ...`, `host:pid:tid [0]
/// include/socket.h:360 WARN ...`): those are read where the host token stands before.
pub fn split_debug(line: &str) -> Option<DebugLine<'_>> {
    let (at, skip, level) = match find_level(line) {
        Some((at, level)) => (at, "NCCL ".len(), level),
        None => find_old_level(line)?,
    };
    let message = line[at + skip + level.len()..].trim_start();
    let head = line[..at].trim_end();
    // `host:pid:tid [dev]`, then (TRACE only) timing and file:line. Find `[dev]`'s start.
    let (before, glued) = match host_token(head) {
        Some(start) => {
            let token_end = head[start..]
                .find(char::is_whitespace)
                .map_or(head.len(), |e| start + e);
            let token = &head[start..token_end];
            let host_end = token.find(':').unwrap_or(token.len());
            (&head[..start], &token[..host_end])
        }
        None => (head, ""),
    };
    Some(DebugLine {
        before,
        glued,
        level,
        message,
    })
}

/// The first `NCCL <LEVEL>` marker standing as words.
fn find_level(line: &str) -> Option<(usize, &'static str)> {
    let mut from = 0;
    while let Some(i) = line[from..].find("NCCL ") {
        let at = from + i;
        let after = &line[at + 5..];
        let word_start = at == 0 || line.as_bytes()[at - 1].is_ascii_whitespace();
        if word_start {
            for level in LEVELS {
                if let Some(rest) = after.strip_prefix(level) {
                    if rest.is_empty() || rest.starts_with(char::is_whitespace) {
                        return Some((at, level));
                    }
                }
            }
        }
        from = at + 5;
    }
    None
}

/// NCCL 2.3's ` INFO ` / ` WARN ` with `host:pid:tid [dev]` (and a `file:line`) before it.
fn find_old_level(line: &str) -> Option<(usize, usize, &'static str)> {
    for level in ["INFO", "WARN"] {
        let key = format!(" {level} ");
        if let Some(i) = line.find(&key) {
            let head = &line[..i];
            if host_token(head).is_some() {
                return Some((i + 1, 0, level));
            }
        }
    }
    None
}

/// Where the `host:pid:tid` token starts in `head` (the text before `NCCL INFO`).
fn host_token(head: &str) -> Option<usize> {
    // Tokens are whitespace-separated; look for `x:digits:digits` followed by `[digits]`.
    // Offsets from the tokens' own positions: whitespace may be several bytes (U+3000),
    // so counting one byte per separator would land inside a character.
    let mut found = None;
    let base = head.as_ptr() as usize;
    let tokens: Vec<(usize, &str)> = head
        .split_whitespace()
        .map(|t| (t.as_ptr() as usize - base, t))
        .collect();
    for (i, (start, tok)) in tokens.iter().enumerate() {
        let next_is_dev = tokens
            .get(i + 1)
            .and_then(|(_, t)| t.strip_prefix('[')?.strip_suffix(']'))
            .is_some_and(is_digits);
        let mut parts = tok.rsplitn(3, ':');
        let (tid, pid, host) = (parts.next(), parts.next(), parts.next());
        if next_is_dev
            && tid.is_some_and(is_digits)
            && pid.is_some_and(is_digits)
            && host.is_some_and(|h| !h.is_empty())
        {
            found = Some(*start);
            break;
        }
    }
    found
}

/// The kind of value a row column holds, to split a value glued to a host name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    /// size, count, root: an integer.
    Int,
    /// time, bandwidths, #wrong: a number, or `N/A`.
    Number,
    /// data type, e.g. `float`.
    Type,
    /// reduction, e.g. `sum`.
    Redop,
}

const TYPE_NAMES: [&str; 14] = [
    "bfloat16", "f8e4m3", "f8e5m2", "uint64", "uint32", "uint8", "int64", "int32", "int8", "double", "float",
    "half", "char", "int",
];
const REDOP_NAMES: [&str; 7] = ["mulsum", "prod", "none", "sum", "max", "min", "avg"];

/// Split `glued` (a row value followed directly by a host name) into the value, given the
/// kind of value expected there. The host name must start with a letter.
pub fn split_glued(glued: &str, kind: ValueKind) -> Option<&str> {
    let len = match kind {
        ValueKind::Int => {
            let sign = usize::from(glued.starts_with('-'));
            sign + glued[sign..].bytes().take_while(u8::is_ascii_digit).count()
        }
        ValueKind::Number => {
            if glued.starts_with("N/A") {
                3
            } else {
                number_prefix_len(glued)
            }
        }
        ValueKind::Type => TYPE_NAMES.iter().find(|n| glued.starts_with(*n))?.len(),
        ValueKind::Redop => REDOP_NAMES.iter().find(|n| glued.starts_with(*n))?.len(),
    };
    let (value, host) = glued.split_at(len);
    let value_ok = match kind {
        ValueKind::Int => value.parse::<i64>().is_ok(),
        ValueKind::Number => value == "N/A" || value.parse::<f64>().is_ok(),
        ValueKind::Type | ValueKind::Redop => !value.is_empty(),
    };
    (value_ok && host.starts_with(|c: char| c.is_ascii_alphabetic())).then_some(value)
}

/// Length of the longest prefix of `s` shaped like a printf'd number: `-12.5`, `1.2e+03`.
fn number_prefix_len(s: &str) -> usize {
    let b = s.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'-' || b[i] == b'+') {
        i += 1;
    }
    let digits_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    if i < b.len() && b[i] == b'.' {
        i += 1;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
    }
    if i == digits_start {
        return 0;
    }
    // An exponent only when a sign and digit follow `e` (`1e+06`), so `1envoy` stays a host.
    if i + 2 < b.len() && (b[i] == b'e' || b[i] == b'E') && (b[i + 1] == b'+' || b[i + 1] == b'-') {
        let mut j = i + 2;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        if j > i + 2 {
            i = j;
        }
    }
    i
}

/// Whether a row token is a printed figure: a number or `N/A`.
pub fn is_value_token(t: &str) -> bool {
    t == "N/A"
        || (t.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '+' || c == '.')
            && t.parse::<f64>().is_ok())
        || matches!(t, "nan" | "-nan" | "inf" | "-inf")
}

/// Whether a token can be a data type or reduction name column.
pub fn is_name_token(t: &str) -> bool {
    t.starts_with(|c: char| c.is_ascii_alphabetic())
        && t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wide_whitespace_before_the_host_is_no_panic() {
        // U+3000 (three bytes) between tokens: found by fuzzing (nccl_output), it put a
        // token's offset inside the character.
        let line = "8\u{3000}16 vm:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM";
        let d = split_debug(line).expect("a debug line");
        assert_eq!(d.glued, "vm");
        assert_eq!(d.before, "8\u{3000}16 ");
    }

    #[test]
    fn launcher_prefixes_are_stripped() {
        let row = "           8             2     float     sum      -1    13.34";
        let cases = [
            "[1,0]<stdout>:",
            "[1,0]<stdout>: ",
            "[36112,12]<stderr>:",
            "(head, rank=0, pid=123) ",
            "(worker1, rank=1, pid=4567, ip=10.0.0.2) ",
            "(BenchmarkWorker pid=1876, ip=10.52.2.7) ",
            "[0] ",
            "0: ",
            "  12: ",
            "[pod/nccl-0/nccl] ",
            "2026-01-02T03:04:05.123456789Z ",
            "(head, rank=0, pid=123) [1,0]<stdout>:",
            "[pod/nccl-0/nccl] 2026-01-02T03:04:05Z [1,0]<stdout>:",
            // Indented by another tool, Open MPI's --timestamp-output glued to its tag,
            // torchrun's rank tags, a date to the minute, pdsh's host label.
            "    [1,0]<stdout>:",
            "Fri Aug 11 12:31:45 2023[1,0]<stdout>:",
            "[rank13]:",
            "[default0]: ",
            " 2025-02-18 12:54 [rank13]:",
            "2024-05-01 10:11:12,345 ",
            "rdma-test-gpu-worker-1: ",
            "node-1: [1,0]<stdout>:",
        ];
        for prefix in cases {
            let line = format!("{prefix}{row}");
            let stripped = strip_launcher_prefixes(&line);
            // Open MPI 5 puts a space after the tag; one taken from the row does no harm.
            assert!(row.ends_with(stripped), "prefix {prefix:?}: {stripped:?}");
            assert_eq!(stripped.trim_start(), row.trim_start(), "prefix {prefix:?}");
        }
        for untouched in [
            row,
            "# Avg bus bandwidth    : 90.4437",
            "vm:1486:1498 [1] NCCL INFO NET/IB : No device found.",
            "[2026-01-02 03:04:05] vm:1:2 [0] NCCL WARN x",
            "(no tag here) text",
            "RuntimeError: NCCL error",
            "torch.distributed.DistBackendError: NCCL error in: x",
            "Bootstrap : no socket interface found",
            "warning: something",
        ] {
            assert_eq!(strip_launcher_prefixes(untouched), untouched);
        }
    }

    #[test]
    fn debug_lines_split() {
        let d = split_debug("vm:1486:1498 [1] NCCL INFO NET/IB : No device found.").unwrap();
        assert_eq!((d.before, d.glued, d.level), ("", "vm", "INFO"));
        assert_eq!(d.message, "NET/IB : No device found.");

        let d = split_debug("[2026-01-02 03:04:05] node-1:9:10 [3] NCCL WARN NET/Socket : oops").unwrap();
        assert_eq!(
            (d.glued, d.level, d.message),
            ("node-1", "WARN", "NET/Socket : oops")
        );
        assert_eq!(d.before.trim(), "[2026-01-02 03:04:05]");

        let line =
            "     1048576        262144     float     sum      -1vm:1486:1504 [1] NCCL INFO Channel 00/0 : x";
        let d = split_debug(line).unwrap();
        assert_eq!(d.before, "     1048576        262144     float     sum      ");
        assert_eq!(d.glued, "-1vm");
        assert_eq!(split_glued(d.glued, ValueKind::Int), Some("-1"));

        assert!(split_debug("# NCCL version 2.28.9+cuda13.0").is_none());
        assert!(split_debug("           8             2     float     sum      -1    13.34").is_none());
        // NCCL 2.3 and before: no `NCCL` before the level.
        let d = split_debug(
            "gpu-1:18553:18611 [0] include/socket.h:360 WARN Call to connect failed : Connection timed out",
        )
        .unwrap();
        assert_eq!((d.glued, d.level), ("gpu-1", "WARN"));
        assert_eq!(d.message, "Call to connect failed : Connection timed out");
        let d = split_debug("gpu-1:18553:18553 [0] INFO NET : Using interface enp3s0").unwrap();
        assert_eq!(
            (d.glued, d.level, d.message),
            ("gpu-1", "INFO", "NET : Using interface enp3s0")
        );
        assert!(split_debug("some INFO text without a host").is_none());
        // Without a host, the whole head is `before`: the parser ignores it.
        let d = split_debug("NCCL INFO NET/GPUDirectTCPX ver. 3.1.8.").unwrap();
        assert_eq!(
            (d.before, d.glued, d.message),
            ("", "", "NET/GPUDirectTCPX ver. 3.1.8.")
        );
    }

    #[test]
    fn glued_values_split_by_kind() {
        let cases: &[(&str, ValueKind, Option<&str>)] = &[
            ("-1vm", ValueKind::Int, Some("-1")),
            ("1048576gke-node", ValueKind::Int, Some("1048576")),
            ("16.96vm", ValueKind::Number, Some("16.96")),
            ("21395node", ValueKind::Number, Some("21395")),
            ("1e+06vm", ValueKind::Number, Some("1e+06")),
            ("0envoy", ValueKind::Number, Some("0")),
            ("N/Avm", ValueKind::Number, Some("N/A")),
            ("floatvm", ValueKind::Type, Some("float")),
            ("bfloat16a3", ValueKind::Type, Some("bfloat16")),
            ("sumvm", ValueKind::Redop, Some("sum")),
            ("nonehost", ValueKind::Redop, Some("none")),
            ("vm", ValueKind::Int, None),
            ("12", ValueKind::Int, None),
            ("-1-host", ValueKind::Int, None),
            ("xyzvm", ValueKind::Type, None),
        ];
        for (glued, kind, want) in cases {
            assert_eq!(split_glued(glued, *kind), *want, "{glued} as {kind:?}");
        }
    }

    #[test]
    fn value_tokens() {
        for t in ["0", "13.34", "-1", "1e+06", "21395", "N/A", "nan", ".5"] {
            assert!(is_value_token(t), "{t}");
        }
        for t in [
            "float",
            "sum",
            "2026-01-02",
            "12:00:00",
            "N/",
            "#wrong",
            "infinity-x",
        ] {
            assert!(!is_value_token(t), "{t}");
        }
    }
}
