//! Words in messages: counts with the right plural ("1 node", "4 nodes"), and node names
//! compressed into ranges (`lab-[0-2,4]`).

/// `n` and `word`, with an `s` unless `n` is one.
/// The first `n` items, and how many more: `a, b and 3 more`.
pub fn shorten(items: &[String], n: usize) -> String {
    if items.len() <= n {
        items.join(", ")
    } else {
        format!("{} and {} more", items[..n].join(", "), items.len() - n)
    }
}

pub fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// `word` with its indefinite article, as it is read aloud: `an ssh fleet`, `a gcp
/// fleet`, `an apply` (an initialism whose first letter sounds like a vowel takes `an`).
pub fn a(word: &str) -> String {
    let lower = word.to_ascii_lowercase();
    let first = lower.chars().next().unwrap_or('x');
    // Letters read as a vowel sound when spelt out (ef, aitch, el, em, en, ar, ess, ex).
    let initialism = ["ssh", "http", "nfs", "mpi", "nic", "rdma", "ssd", "lb"]
        .iter()
        .any(|i| lower == *i || lower.starts_with(&format!("{i} ")));
    if "aeiou".contains(first) || (initialism && "fhlmnrsx".contains(first)) {
        format!("an {word}")
    } else {
        format!("a {word}")
    }
}

/// Compress node names for display, as pdsh's dshbak does: `lab-0 lab-1 lab-2 lab-4`
/// becomes `lab-[0-2,4]`. Names without a numeric suffix are listed as they are.
pub fn compress_names(names: &[String]) -> String {
    let mut groups: Vec<(String, Vec<u64>)> = Vec::new();
    let mut plain = Vec::new();
    for n in names {
        let digits = n.len() - n.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 || (digits > 1 && n[n.len() - digits..].starts_with('0')) {
            plain.push(n.clone());
            continue;
        }
        let (prefix, num) = n.split_at(n.len() - digits);
        // A suffix too long for u64 (a hostile or odd name) is listed as it is.
        let Ok(num) = num.parse::<u64>() else {
            plain.push(n.clone());
            continue;
        };
        match groups.iter_mut().find(|(p, _)| p == prefix) {
            Some((_, v)) => v.push(num),
            None => groups.push((prefix.to_string(), vec![num])),
        }
    }
    let mut out: Vec<String> = Vec::new();
    for (prefix, mut nums) in groups {
        nums.sort_unstable();
        nums.dedup();
        if nums.len() == 1 {
            out.push(format!("{prefix}{}", nums[0]));
            continue;
        }
        let mut ranges = Vec::new();
        let mut start = nums[0];
        let mut prev = nums[0];
        for &n in &nums[1..] {
            if n != prev + 1 {
                ranges.push(if start == prev {
                    start.to_string()
                } else {
                    format!("{start}-{prev}")
                });
                start = n;
            }
            prev = n;
        }
        ranges.push(if start == prev {
            start.to_string()
        } else {
            format!("{start}-{prev}")
        });
        out.push(format!("{prefix}[{}]", ranges.join(",")));
    }
    out.extend(plain);
    out.join(",")
}

/// Cut `s` to at most `width` characters, marking the cut with '…'.
pub fn truncate(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut out: String = s.chars().take(width - 1).collect();
    out.push('…');
    out
}

/// `text` in lines of at most `width` characters, broken between words (a word longer
/// than a line is broken inside it).
pub fn wrap_words(text: &str, width: usize) -> Vec<String> {
    let mut out = vec![];
    let mut line = String::new();
    for word in text.split_whitespace() {
        let mut word: Vec<char> = word.chars().collect();
        while word.len() > width {
            if !line.is_empty() {
                out.push(std::mem::take(&mut line));
            }
            out.push(word.drain(..width).collect());
        }
        let w: String = word.into_iter().collect();
        if !line.is_empty() && line.chars().count() + 1 + w.chars().count() > width {
            out.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&w);
    }
    if !line.is_empty() {
        out.push(line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn articles_follow_the_sound() {
        assert_eq!(a("ssh fleet"), "an ssh fleet");
        assert_eq!(a("gcp fleet"), "a gcp fleet");
        assert_eq!(a("gke fleet"), "a gke fleet");
        assert_eq!(a("local fleet"), "a local fleet");
        assert_eq!(a("apply"), "an apply");
    }

    #[test]
    fn one_is_singular() {
        assert_eq!(super::plural(1, "node"), "1 node");
        assert_eq!(super::plural(0, "row"), "0 rows");
        assert_eq!(super::plural(4, "node"), "4 nodes");
    }

    #[test]
    fn names_compress_like_dshbak() {
        let n = |v: &[&str]| compress_names(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(n(&["lab-0", "lab-1", "lab-2", "lab-4"]), "lab-[0-2,4]");
        assert_eq!(n(&["a-3"]), "a-3");
        assert_eq!(n(&["x-1", "y-2", "y-3", "bastion"]), "x-1,y-[2-3],bastion");
        assert_eq!(
            n(&["n-07", "n-08"]),
            "n-07,n-08",
            "zero-padded names are kept as written"
        );
        // A numeric suffix past u64 (hostile review D15 panicked here).
        let huge = "n-99999999999999999999999";
        assert_eq!(n(&[huge, "n-1"]), format!("n-1,{huge}"));
        let gke = "gke-c-pool-1-999999999999999999999999";
        assert_eq!(n(&[gke]), gke);
        // The largest suffix that fits still groups, without overflowing the range walk.
        let top = |k: u64| format!("n-{k}");
        assert_eq!(
            n(&[&top(u64::MAX), &top(u64::MAX - 1), &top(u64::MAX - 3)]),
            format!("n-[{},{}-{}]", u64::MAX - 3, u64::MAX - 1, u64::MAX)
        );
    }
}
