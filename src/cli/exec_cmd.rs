//! `flightdeck exec FLEET [--nodes 0,2] [--fanout N] [--collapse] [--json] -- CMD`:
//! the command on every node at once, output prefixed by node as it arrives (or grouped
//! by identical output with `--collapse`, like `pdsh | dshbak -c`), a summary of exit
//! codes, and the worst exit code as its own.

use super::{Cli, ExecArgs};
use crate::exec::{self, Event, NodeResult, Stream, Transport};
use crate::fleet::NodeTarget;
use crate::paths::Paths;
use crate::store::Store;
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

/// The nodes and transport of a fleet given by name (from the state) or by file.
pub fn resolve_fleet(
    fleet: &str,
    cli: &Cli,
    paths: &Paths,
) -> anyhow::Result<(String, Vec<NodeTarget>, Transport)> {
    let (state, recovery) = Store::new(&paths.state_dir).load()?;
    super::fleet_cmd::note_recovery(recovery);
    let (name, backend, nodes) = if let Some(r) = state.fleets.iter().find(|f| f.name == fleet) {
        (r.name.clone(), r.backend.clone(), r.nodes.clone())
    } else if std::path::Path::new(fleet).is_file() {
        let f = crate::fleet::load(std::path::Path::new(fleet))
            .map_err(|d| anyhow::anyhow!(d.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("\n")))?;
        (f.name.clone(), f.backend.as_str().to_string(), f.node_targets())
    } else {
        let names: Vec<&str> = state.fleets.iter().map(|f| f.name.as_str()).collect();
        let hint = crate::yaml::closest(fleet, names.iter().copied())
            .map(|h| format!("; did you mean `{h}`?"))
            .unwrap_or_default();
        anyhow::bail!("no fleet `{fleet}` in the state (apply it first, or give a fleet file){hint}");
    };
    let transport = match backend.as_str() {
        "local" => Transport::Local,
        "ssh" | "gcp" => {
            let (pool, resolver) = super::ssh_setup(cli);
            Transport::Ssh { pool, resolver }
        }
        other => anyhow::bail!("fleet `{name}` uses the {other} backend, which is not in this build yet"),
    };
    Ok((name, nodes, transport))
}

pub fn run(args: &ExecArgs, cli: &Cli, paths: &Paths) -> anyhow::Result<ExitCode> {
    let (_name, all, transport) = resolve_fleet(&args.fleet, cli, paths)?;
    let nodes: Vec<NodeTarget> = if args.nodes.is_empty() {
        all.clone()
    } else {
        for i in &args.nodes {
            if *i >= all.len() {
                anyhow::bail!(
                    "--nodes {i}: the fleet has nodes 0..{}",
                    all.len().saturating_sub(1)
                );
            }
        }
        all.iter()
            .filter(|n| args.nodes.contains(&n.index))
            .cloned()
            .collect()
    };
    let command = args.command.join(" ");
    let width = nodes.iter().map(|n| n.name.len()).max().unwrap_or(0);
    let by_index = |i: usize| {
        nodes
            .iter()
            .position(|n| n.index == i)
            .expect("event for a known node")
    };
    let rt = super::fleet_cmd::runtime()?;
    let (tx, mut rx) = tokio::sync::mpsc::channel(4096);
    let streaming = !args.collapse && !args.json;
    let mut out: Vec<(Vec<String>, Vec<String>)> = vec![(vec![], vec![]); nodes.len()];
    let mut results: Vec<Option<NodeResult>> = vec![None; nodes.len()];
    rt.block_on(async {
        let run = tokio::spawn(exec::run(
            transport,
            nodes.clone(),
            command.clone(),
            args.fanout,
            tx,
        ));
        let stdout = std::io::stdout();
        let stderr = std::io::stderr();
        while let Some(e) = rx.recv().await {
            match e {
                Event::Line { node, stream, text } => {
                    let k = by_index(node);
                    if streaming {
                        let prefix = format!("{:>width$}: ", nodes[k].name);
                        let _ = match stream {
                            Stream::Stdout => writeln!(stdout.lock(), "{prefix}{text}"),
                            Stream::Stderr => writeln!(stderr.lock(), "{prefix}{text}"),
                        };
                    }
                    match stream {
                        Stream::Stdout => out[k].0.push(text),
                        Stream::Stderr => out[k].1.push(text),
                    }
                }
                Event::Done { node, result } => {
                    let k = by_index(node);
                    if let (true, Some(err)) = (streaming, &result.error) {
                        let _ = writeln!(stderr.lock(), "{:>width$}: {err}", nodes[k].name);
                    }
                    results[k] = Some(result);
                }
            }
        }
        let _ = run.await;
    });
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
                host: n.host.clone(),
                exit_code: r.code,
                error: r.error.clone(),
                stdout: join_lines(&so),
                stderr: join_lines(&se),
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({ "command": command, "exit_code": worst, "nodes": doc })
            )?
        );
    } else {
        if args.collapse {
            print_collapsed(&nodes, &results, &out);
        }
        eprintln!("{}", summary(&nodes, &results));
    }
    Ok(ExitCode::from(worst.clamp(0, 255) as u8))
}

fn join_lines(lines: &[String]) -> String {
    let mut s = lines.join("\n");
    if !lines.is_empty() {
        s.push('\n');
    }
    s
}

/// Group nodes by identical output (stdout, stderr and error together), largest group last.
fn print_collapsed(nodes: &[NodeTarget], results: &[NodeResult], out: &[(Vec<String>, Vec<String>)]) {
    let mut groups: Vec<(Vec<String>, Vec<String>)> = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        let mut text: Vec<String> = out[i].0.clone();
        text.extend(out[i].1.iter().cloned());
        if let Some(e) = &results[i].error {
            text.push(format!("[{e}]"));
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
            exec::compress_names(&names),
            names.len(),
            if names.len() == 1 { "" } else { "s" }
        );
        let rule = "-".repeat(title.chars().count().min(72));
        let _ = writeln!(w, "{rule}\n{title}\n{rule}");
        for l in text {
            let _ = writeln!(w, "{l}");
        }
    }
}

/// `4 nodes: 3 exit 0, 1 exit 2 (lab-3)`.
pub fn summary(nodes: &[NodeTarget], results: &[NodeResult]) -> String {
    let mut codes: std::collections::BTreeMap<i32, Vec<String>> = Default::default();
    for (n, r) in nodes.iter().zip(results) {
        codes.entry(r.code).or_default().push(n.name.clone());
    }
    let parts: Vec<String> = codes
        .iter()
        .map(|(code, names)| {
            let what = if *code == exec::UNREACHABLE {
                "unreachable".to_string()
            } else {
                format!("exit {code}")
            };
            if *code == 0 {
                format!("{} {what}", names.len())
            } else {
                format!("{} {what} ({})", names.len(), exec::compress_names(names))
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
