//! Words in messages: counts with the right plural ("1 node", "4 nodes").

/// `n` and `word`, with an `s` unless `n` is one.
pub fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_is_singular() {
        assert_eq!(super::plural(1, "node"), "1 node");
        assert_eq!(super::plural(0, "row"), "0 rows");
        assert_eq!(super::plural(4, "node"), "4 nodes");
    }
}
