//! The environment lines of the scripts flightdeck runs on nodes (NCCL runs, job
//! launches, the bootstrap, the pre-flight): the one place that writes `export`.
//!
//! The scripts run under bash with `set -u` ([`SHEBANG`], [`HEADER`]), because the
//! profiles Google ships with its plugins are bash (`[[ … =~ … ]]` in
//! google/nccl-plugin-gpudirect-tcpxo's `nccl-env-profile.sh`) and dash, Ubuntu's
//! `/bin/sh`, cannot run them (dstack's GCP example says the same: "Need to use bash
//! instead of default dash for nccl-env-profile.sh"). Three kinds of value:
//! - a literal, single-quoted: nothing in it is expanded on the node;
//! - an expression computed on the node (`$((2 * GPUS_PER_NODE))`), double-quoted;
//! - directories put first in a path list (`LD_LIBRARY_PATH`), with the node's earlier
//!   value kept after them and no empty entry when there was none (an empty entry in
//!   `LD_LIBRARY_PATH` is the current directory).
//!
//! A third-party profile is sourced with `set -u` lifted while it runs ([`source`]): in a
//! fresh SSH exec session `LD_LIBRARY_PATH` is unset, and Google's profile reads it.

/// The first line of every node script.
pub const SHEBANG: &str = "#!/usr/bin/env bash";

/// What a node script says after its comment line: stop on an unset variable.
pub const HEADER: &str = "set -u\n";

/// The command that runs a script read on stdin under bash (`bash -s`), or says that the
/// node has no bash and exits 127.
pub const BASH_STDIN: &str = "if command -v bash >/dev/null 2>&1; then exec bash -s; else echo \"flightdeck: bash not found on this node (flightdeck's node scripts are bash)\" >&2; exit 127; fi";

/// A value of an exported variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    /// Taken as it is: nothing in it is expanded on the node.
    Literal(&'a str),
    /// A shell expression expanded on the node (`$GPUS_PER_NODE`, `$((2 * GPUS))`): it
    /// must not hold a double quote or a backquote.
    Expr(&'a str),
    /// Colon-separated directories put first in the variable's earlier value, which is
    /// kept after them (nothing after them when it was unset or empty).
    Prepend(&'a str),
}

/// Whether `name` can be a shell variable's name.
pub fn is_name(name: &str) -> bool {
    let mut c = name.chars();
    matches!(c.next(), Some(f) if f == '_' || f.is_ascii_alphabetic())
        && c.all(|ch| ch == '_' || ch.is_ascii_alphanumeric())
}

/// Whether `w` needs no quoting anywhere: letters, digits, `.`, `_`, `-` (interface
/// names, versions).
pub fn is_plain_word(w: &str) -> bool {
    !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Single-quote `s` for the shell.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The line that exports `name` with `value`.
///
/// Panics on a name that is not a variable name or an expression holding `"` or a
/// backquote: both come from flightdeck's own code, never from input (a job's env names
/// are checked when its file is read).
pub fn export(name: &str, value: Value) -> String {
    assert!(is_name(name), "not a variable name: {name:?}");
    match value {
        Value::Literal(v) => format!("export {name}={}", quote(v)),
        Value::Expr(e) => {
            assert!(!e.contains(['"', '`']), "an expression with a quote: {e:?}");
            format!("export {name}=\"{e}\"")
        }
        Value::Prepend(dirs) => format!("export {name}={}\"${{{name}:+:${name}}}\"", quote(dirs)),
    }
}

/// The line that sources the profile at `path` when the node has it, with `set -u`
/// lifted while it runs and put back after.
pub fn source(path: &str) -> String {
    let p = quote(path);
    format!("if [ -f {p} ]; then set +u; . {p}; set -u; fi")
}

/// The line that takes empty entries out of the path list `name` (an empty entry in
/// `LD_LIBRARY_PATH` or `PATH` is the current directory), as a third-party profile that
/// prepends to an unset variable leaves them (`"$DIR:${LD_LIBRARY_PATH}"`), and every
/// entry but the first of one directory (a profile and flightdeck's own line both
/// prepending the plugin's directory): order kept, in the shell alone (no sed or awk,
/// which a Container-Optimized OS host may lack).
pub fn tidy_path(name: &str) -> String {
    assert!(is_name(name), "not a variable name: {name:?}");
    format!(
        "case \"${{{name}:-}}\" in *:*) fd_o=; fd_s=$IFS; IFS=:; for fd_e in ${name}; do case \":$fd_o:\" in *\":$fd_e:\"*) ;; *) [ -z \"$fd_e\" ] || fd_o=${{fd_o:+$fd_o:}}$fd_e ;; esac; done; IFS=$fd_s; {name}=$fd_o; unset fd_o fd_e fd_s ;; esac"
    )
}

/// The names the lines export, in order (`export K=…`, `export K="…"`).
pub fn exported_names(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .filter_map(|l| l.trim_start().strip_prefix("export "))
        .filter_map(|l| l.split_once('='))
        .map(|(k, _)| k.trim().to_string())
        .filter(|k| is_name(k))
        .collect()
}

/// The value the lines last give `key` (`export K='V'`, `export K="V"` or `K=V`), with
/// its outer quotes taken off; expansions in it are left as written.
pub fn exported_value(lines: &[String], key: &str) -> Option<String> {
    lines.iter().rev().find_map(|l| {
        let l = l.trim().strip_prefix("export ").unwrap_or(l.trim());
        let v = l.strip_prefix(key)?.strip_prefix('=')?;
        Some(v.trim_matches(|c| c == '\'' || c == '"').to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run `script` under bash with a clean environment plus `env`, printing `$name`.
    fn bash(lines: &[String], env: &[(&str, &str)], name: &str) -> (i32, String, String) {
        let mut script = String::from(HEADER);
        for l in lines {
            script.push_str(l);
            script.push('\n');
        }
        script.push_str(&format!("printf '%s' \"${name}\"\n"));
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(script)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .envs(env.iter().copied())
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    #[test]
    fn prepend_keeps_the_earlier_value_and_adds_no_empty_entry() {
        let line = export("LD_LIBRARY_PATH", Value::Prepend("/usr/local/gib/lib64"));
        assert_eq!(
            line,
            "export LD_LIBRARY_PATH='/usr/local/gib/lib64'\"${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\""
        );
        let l = [line];
        assert_eq!(
            bash(&l, &[], "LD_LIBRARY_PATH").1,
            "/usr/local/gib/lib64",
            "unset under set -u"
        );
        assert_eq!(
            bash(&l, &[("LD_LIBRARY_PATH", "")], "LD_LIBRARY_PATH").1,
            "/usr/local/gib/lib64"
        );
        assert_eq!(
            bash(
                &l,
                &[("LD_LIBRARY_PATH", "/usr/local/cuda/lib64")],
                "LD_LIBRARY_PATH"
            )
            .1,
            "/usr/local/gib/lib64:/usr/local/cuda/lib64"
        );
    }

    #[test]
    fn literals_stay_literal_and_expressions_expand() {
        let evil = "a'b $(touch /nonexistent/x) ${HOME} `id`";
        let (code, out, _) = bash(&[export("V", Value::Literal(evil))], &[], "V");
        assert_eq!((code, out.as_str()), (0, evil));
        let lines = [
            "GPUS=4".to_string(),
            export("WORLD", Value::Expr("$((2 * GPUS))")),
        ];
        assert_eq!(bash(&lines, &[], "WORLD").1, "8");
        assert_eq!(
            exported_names(&[
                export("A", Value::Literal("1")),
                source("/p.sh"),
                export("B", Value::Prepend("/x")),
                "export  nonsense".into(),
            ]),
            ["A", "B"]
        );
    }

    /// No code but this module writes an `export` line into a node script: every `.rs`
    /// file under src/, up to its tests, has no string that starts one.
    #[test]
    fn only_this_module_writes_export() {
        fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for e in std::fs::read_dir(dir).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(&p, out);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    out.push(p);
                }
            }
        }
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = vec![];
        walk(&src, &mut files);
        assert!(files.len() > 50, "{}", files.len());
        for f in files.iter().filter(|f| !f.ends_with("shellenv.rs")) {
            let text = std::fs::read_to_string(f).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            for (i, line) in code.lines().enumerate() {
                if line.trim_start().starts_with("//") {
                    continue;
                }
                for pat in ["\"export ", "\\nexport ", "; export ", "\"export{"] {
                    assert!(
                        !line.contains(pat),
                        "{}:{}: an `export` written outside shellenv: {line}",
                        f.display(),
                        i + 1
                    );
                }
            }
        }
    }

    #[test]
    fn tidy_path_takes_out_empty_and_repeated_entries() {
        for (before, after) in [
            ("/a:", "/a"),
            (":/a::/b:", "/a:/b"),
            ("/a:/b", "/a:/b"),
            ("", ""),
            // gpudirect review N7: the plugin's directory three times.
            (
                "/var/lib/tcpxo/lib64:/var/lib/tcpxo/lib64:/usr/lib:/var/lib/tcpxo/lib64",
                "/var/lib/tcpxo/lib64:/usr/lib",
            ),
            ("/b:/a:/b", "/b:/a"),
        ] {
            let (code, out, err) = bash(&[tidy_path("P")], &[("P", before)], "P");
            assert_eq!((code, out.as_str()), (0, after), "{before}: {err}");
        }
        let (code, out, _) = bash(&[tidy_path("P")], &[], "{P-unset}");
        assert_eq!((code, out.as_str()), (0, "unset"), "an unset P stays unset");
    }

    /// A profile that reads an unset variable and uses bash's `[[`: sourced under the
    /// header's `set -u` it runs, and `set -u` holds again after it.
    #[test]
    fn a_hostile_profile_is_sourced_and_set_u_comes_back() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("profile.sh");
        std::fs::write(
            &p,
            "if [[ \"x\" =~ ^x$ ]]; then export FROM_PROFILE=yes; fi\nexport LD_LIBRARY_PATH=\"/plug:${LD_LIBRARY_PATH}\"\n",
        )
        .unwrap();
        let lines = [source(p.to_str().unwrap()), "echo \"$NOT_SET\"".into()];
        let (code, _, err) = bash(&lines, &[], "FROM_PROFILE");
        assert_ne!(code, 0, "set -u is back after the profile: {err}");
        assert!(err.contains("NOT_SET"), "{err}");
        let (code, out, err) = bash(&[source(p.to_str().unwrap())], &[], "FROM_PROFILE");
        assert_eq!((code, out.as_str()), (0, "yes"), "{err}");
        let (_, out, _) = bash(&[source("/nonexistent/profile.sh")], &[], "PATH");
        assert_eq!(out, "/usr/bin:/bin", "a missing profile is skipped");
    }
}
