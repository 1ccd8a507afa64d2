//! `flightdeck exec FLEET [--nodes 0,2] [--fanout N] [--collapse] [--json] -- CMD`:
//! the command on every node at once, output prefixed by node as it arrives (or grouped
//! by identical output with `--collapse`, like `pdsh | dshbak -c`), a summary of exit
//! codes, and the worst exit code as its own.

use super::{Cli, ExecArgs};
use crate::exec::{self, Chunk, NodeResult, Stream};
use crate::fleet::NodeTarget;
use crate::paths::Paths;
use std::io::Write;
use std::process::ExitCode;

#[derive(serde::Serialize)]
struct NodeJson {
    node: String,
    host: String,
    exit_code: i32,
    error: Option<String>,
    stdout: String,
    stderr: String,
}

pub fn run(args: &ExecArgs, cli: &Cli, paths: &Paths) -> anyhow::Result<ExitCode> {
    let (_name, _, all, reach) = super::resolve_fleet_kind_now(&args.fleet, cli, paths)?;
    let nodes: Vec<NodeTarget> = if args.nodes.is_empty() {
        all.clone()
    } else {
        crate::fleet::select_nodes(&all, &args.nodes).map_err(|e| super::usage(format!("--nodes {e}")))?
    };
    if args.timeout == Some(0) {
        anyhow::bail!("--timeout 0: give the seconds a command may run, at least 1");
    }
    let command = args.command.join(" ");
    let width = nodes.iter().map(|n| n.name.len()).max().unwrap_or(0);
    let by_index = |i: usize| {
        nodes
            .iter()
            .position(|n| n.index == i)
            .expect("event for a known node")
    };
    let rt = super::runtime()?;
    let (tx, mut rx) = exec::channel(1024);
    let streaming = !args.collapse && !args.json;
    // Without streaming: each node's stdout and stderr, whole lines ending in `\n`.
    let mut out: Vec<(String, String)> = vec![(String::new(), String::new()); nodes.len()];
    let mut results: Vec<Option<NodeResult>> = vec![None; nodes.len()];
    // Debug pods this command makes on GKE nodes go at its end (or at Ctrl-C).
    let kube = reach.kube().clone();
    let finished = rt.block_on(crate::cloud::gke::exec::removing_debug_pods(&kube, async {
        // With --timeout the node stops the command itself: coreutils' timeout signals
        // its whole process group, so what the command started goes too (a TERM through
        // SSH reaches only the login shell). The channel is closed 10 s later should the
        // node not answer at all.
        let (remote, limit) = match args.timeout {
            None => (command.clone(), None),
            Some(s) => (
                format!(
                    "timeout -k 5 {s} \"${{SHELL:-sh}}\" -c {}",
                    crate::detach::quote(&command)
                ),
                Some(std::time::Duration::from_secs(s + 10)),
            ),
        };
        let jobs = nodes
            .iter()
            .map(|n| (n.clone(), remote.clone(), Vec::new()))
            .collect();
        let run = tokio::spawn(exec::run_each_with_input(reach, jobs, args.fanout, limit, tx));
        // Streamed output goes through one buffer, written out whenever no more output is
        // waiting (so it stays live) and before anything goes to stderr (so the two
        // interleave as they arrived).
        let stdout = std::io::stdout();
        let mut w = std::io::BufWriter::with_capacity(256 * 1024, stdout.lock());
        let stderr = std::io::stderr();
        let prefixes: Vec<String> = nodes.iter().map(|n| format!("{:>width$}: ", n.name)).collect();
        loop {
            let c = match rx.try_recv_chunk() {
                Some(c) => c,
                None => {
                    let _ = w.flush();
                    match rx.recv_chunk().await {
                        Some(c) => c,
                        None => break,
                    }
                }
            };
            match c {
                Chunk::Lines { node, stream, text } => {
                    let k = by_index(node);
                    if !streaming {
                        match stream {
                            Stream::Stdout => out[k].0.push_str(&text),
                            Stream::Stderr => out[k].1.push_str(&text),
                        }
                        continue;
                    }
                    if stream == Stream::Stderr {
                        let _ = w.flush();
                        let text = crate::term::visible::for_stderr(&text);
                        // stream
                        let _ = write_prefixed(&mut stderr.lock(), &prefixes[k], &text);
                    } else {
                        let text = crate::term::visible::for_stdout(&text);
                        // stream
                        let _ = write_prefixed(&mut w, &prefixes[k], &text);
                    }
                }
                Chunk::Done { node, result } => {
                    let k = by_index(node);
                    if let (true, Some(err)) = (streaming, &result.error) {
                        let _ = w.flush();
                        errln!("{}{err}", prefixes[k]);
                    }
                    results[k] = Some(result);
                }
            }
        }
        let _ = w.flush();
        drop(w);
        let _ = run.await;
    }));
    if finished.is_none() {
        errln!("interrupted");
        return Ok(ExitCode::from(130));
    }
    let results: Vec<NodeResult> = results
        .into_iter()
        .map(|r| {
            r.unwrap_or(NodeResult {
                code: exec::UNREACHABLE,
                error: Some("no result".into()),
            })
        })
        .collect();
    let worst = exec::worst(&results);
    if args.json {
        let doc: Vec<NodeJson> = nodes
            .iter()
            .zip(&results)
            .zip(out)
            .map(|((n, r), (so, se))| NodeJson {
                node: n.name.clone(),
                host: n.host().to_string(),
                exit_code: r.code,
                error: r.error.clone(),
                stdout: so,
                stderr: se,
            })
            .collect();
        let mut w = std::io::BufWriter::new(std::io::stdout().lock());
        serde_json::to_writer_pretty(
            &mut w,
            &serde_json::json!({ "command": command, "exit_code": worst, "nodes": doc }),
        )?;
        writeln!(w)?;
        w.flush()?;
    } else {
        if args.collapse {
            print_collapsed(&nodes, &results, &out);
        }
        errln!("{}", summary(&nodes, &results));
    }
    Ok(ExitCode::from(worst.clamp(0, 255) as u8))
}

/// Each line of `text` (whole lines ending in `\n`) with `prefix` before it.
fn write_prefixed(w: &mut impl Write, prefix: &str, text: &str) -> std::io::Result<()> {
    let mut rest = text.as_bytes();
    while !rest.is_empty() {
        let end = memchr::memchr(b'\n', rest).map_or(rest.len(), |i| i + 1);
        // stream
        w.write_all(prefix.as_bytes())?;
        // stream
        w.write_all(&rest[..end])?;
        if rest[end - 1] != b'\n' {
            // stream
            w.write_all(b"\n")?;
        }
        rest = &rest[end..];
    }
    Ok(())
}

/// Group nodes by identical output (stdout, stderr and error together), largest group last.
fn print_collapsed(nodes: &[NodeTarget], results: &[NodeResult], out: &[(String, String)]) {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        let mut text = format!("{}{}", out[i].0, out[i].1);
        if let Some(e) = &results[i].error {
            text.push_str(&format!("[{}]\n", crate::term::visible::text(e)));
        }
        match groups.iter_mut().find(|(t, _)| *t == text) {
            Some((_, names)) => names.push(n.name.clone()),
            None => groups.push((text, vec![n.name.clone()])),
        }
    }
    groups.sort_by_key(|(_, names)| names.len());
    let stdout = std::io::stdout();
    let mut w = stdout.lock();
    for (text, names) in groups {
        let title = format!(
            "{} ({} node{})",
            crate::words::compress_names(&names),
            names.len(),
            if names.len() == 1 { "" } else { "s" }
        );
        let title = crate::term::visible::text(&title);
        let rule = "-".repeat(title.chars().count().min(72));
        // The nodes' output, a stream: as `exec` prints it (colour on a terminal, every
        // byte into a pipe).
        let text = crate::term::visible::for_stdout(&text);
        // stream
        let _ = write!(w, "{rule}\n{title}\n{rule}\n{text}");
    }
}

/// `4 nodes: 3 exit 0, 1 exit 2 (lab-3)`.
pub fn summary(nodes: &[NodeTarget], results: &[NodeResult]) -> String {
    // By code, and a node whose connection went mid-command apart from one never reached.
    let mut codes: std::collections::BTreeMap<(i32, bool), Vec<String>> = Default::default();
    for (n, r) in nodes.iter().zip(results) {
        let lost = r
            .error
            .as_deref()
            .is_some_and(|e| e.starts_with(exec::CONNECTION_LOST));
        codes.entry((r.code, lost)).or_default().push(n.name.clone());
    }
    let parts: Vec<String> = codes
        .iter()
        .map(|((code, lost), names)| {
            let what = if *lost {
                "connection lost, no exit status".to_string()
            } else if *code == exec::UNREACHABLE {
                "unreachable".to_string()
            } else if *code == exec::TIMED_OUT {
                "timed out".to_string()
            } else {
                format!("exit {code}")
            };
            if *code == 0 {
                format!("{} {what}", names.len())
            } else {
                format!("{} {what} ({})", names.len(), crate::words::compress_names(names))
            }
        })
        .collect();
    format!(
        "{} node{}: {}",
        nodes.len(),
        if nodes.len() == 1 { "" } else { "s" },
        parts.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_gets_the_prefix() {
        let mut w = Vec::new();
        write_prefixed(&mut w, "n-1: ", "a\n\nb\n").unwrap();
        write_prefixed(&mut w, "n-1: ", "no newline").unwrap();
        assert_eq!(
            String::from_utf8(w).unwrap(),
            "n-1: a\nn-1: \nn-1: b\nn-1: no newline\n"
        );
    }

    /// Hostile review 3, L5: nodes whose connection (the holder, killed) went while
    /// the command ran are not called unreachable.
    #[test]
    fn a_lost_connection_is_not_called_unreachable() {
        let nodes: Vec<NodeTarget> = (0..4).map(|i| NodeTarget::local(i, format!("lab-{i}"))).collect();
        let r = |code: i32, error: Option<&str>| NodeResult {
            code,
            error: error.map(str::to_string),
        };
        let results = [
            r(0, None),
            r(exec::UNREACHABLE, Some(exec::CONNECTION_LOST)),
            r(exec::UNREACHABLE, Some(exec::CONNECTION_LOST)),
            r(exec::UNREACHABLE, Some("connection refused")),
        ];
        assert_eq!(
            summary(&nodes, &results),
            "4 nodes: 1 exit 0, 1 unreachable (lab-3), 2 connection lost, no exit status (lab-[1-2])"
        );
    }
}
