//! Kubernetes label selectors (`a=b,c!=d,e in (f,g),h notin (i),j,!k`): parsed to check a
//! fleet file's `gke.selector` where it is written, and matched against node labels.

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Term {
    Eq(String, String),
    Ne(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    Absent(String),
}

/// A label key: an optional DNS-subdomain prefix and `/`, then a name of at most 63
/// characters of alphanumerics, `-`, `_`, `.`, starting and ending alphanumeric.
fn valid_key(k: &str) -> bool {
    let (prefix, name) = match k.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|l| {
                !l.is_empty()
                    && l.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            })
    }) && valid_value(name)
        && !name.is_empty()
}

fn valid_value(v: &str) -> bool {
    v.len() <= 63
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && v.chars().next().is_none_or(|c| c.is_ascii_alphanumeric())
        && v.chars().last().is_none_or(|c| c.is_ascii_alphanumeric())
}

/// Split on commas outside parentheses.
fn split_terms(s: &str) -> Result<Vec<&str>, String> {
    let (mut depth, mut start, mut out) = (0i32, 0, vec![]);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return Err(format!("`{s}`: a `)` without its `(`"));
                }
            }
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(format!("`{s}`: a `(` without its `)`"));
    }
    out.push(&s[start..]);
    Ok(out)
}

pub fn parse(s: &str) -> Result<Vec<Term>, String> {
    let mut terms = vec![];
    for raw in split_terms(s)? {
        let t = raw.trim();
        if t.is_empty() {
            return Err(format!(
                "`{s}`: an empty requirement (two commas, or a trailing one)"
            ));
        }
        let key_ok = |k: &str| -> Result<String, String> {
            if valid_key(k) {
                Ok(k.to_string())
            } else {
                Err(format!(
                    "`{k}` is not a label key (expected e.g. `cloud.google.com/gke-nodepool`)"
                ))
            }
        };
        let value_ok = |v: &str| -> Result<String, String> {
            if valid_value(v) {
                Ok(v.to_string())
            } else {
                Err(format!(
                    "`{v}` is not a label value (at most 63 of letters, digits, `-`, `_`, `.`)"
                ))
            }
        };
        let set = |rest: &str| -> Result<Vec<String>, String> {
            let inner = rest
                .trim()
                .strip_prefix('(')
                .and_then(|r| r.strip_suffix(')'))
                .ok_or_else(|| format!("`{t}`: expected a set of values in parentheses, e.g. `(a,b)`"))?;
            inner.split(',').map(|v| value_ok(v.trim())).collect()
        };
        let term = if let Some(k) = t.strip_prefix('!') {
            Term::Absent(key_ok(k.trim())?)
        } else if let Some((k, v)) = t.split_once("!=") {
            Term::Ne(key_ok(k.trim())?, value_ok(v.trim())?)
        } else if let Some((k, v)) = t.split_once("==").or_else(|| t.split_once('=')) {
            Term::Eq(key_ok(k.trim())?, value_ok(v.trim())?)
        } else if let Some((k, rest)) = t.split_once(" notin ") {
            Term::NotIn(key_ok(k.trim())?, set(rest)?)
        } else if let Some((k, rest)) = t.split_once(" in ") {
            Term::In(key_ok(k.trim())?, set(rest)?)
        } else {
            Term::Exists(key_ok(t)?)
        };
        terms.push(term);
    }
    Ok(terms)
}

pub fn matches(terms: &[Term], labels: &BTreeMap<String, String>) -> bool {
    terms.iter().all(|t| match t {
        Term::Eq(k, v) => labels.get(k) == Some(v),
        Term::Ne(k, v) => labels.get(k) != Some(v),
        Term::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
        Term::NotIn(k, vs) => labels.get(k).is_none_or(|l| !vs.contains(l)),
        Term::Exists(k) => labels.contains_key(k),
        Term::Absent(k) => !labels.contains_key(k),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form_and_matches() {
        let t = parse("cloud.google.com/gke-nodepool in (a3u-flex, a3u-spot),gpu,!cordon,tier!=cpu").unwrap();
        assert_eq!(t.len(), 4);
        let mut l = BTreeMap::new();
        l.insert(
            "cloud.google.com/gke-nodepool".to_string(),
            "a3u-spot".to_string(),
        );
        l.insert("gpu".to_string(), "".to_string());
        assert!(matches(&t, &l));
        l.insert("cordon".to_string(), "x".to_string());
        assert!(!matches(&t, &l));
        assert_eq!(parse("a=b").unwrap(), vec![Term::Eq("a".into(), "b".into())]);
        assert_eq!(
            parse("a notin (x)").unwrap(),
            vec![Term::NotIn("a".into(), vec!["x".into()])]
        );
    }

    #[test]
    fn bad_selectors_say_what_is_wrong() {
        assert!(parse("a=b,,c").unwrap_err().contains("empty requirement"));
        assert!(parse("a in (b").unwrap_err().contains("without its `)`"));
        assert!(parse("Bad Key=x").unwrap_err().contains("not a label key"));
        assert!(parse("a=b c").unwrap_err().contains("not a label value"));
        assert!(parse("a in b").unwrap_err().contains("parentheses"));
    }
}
