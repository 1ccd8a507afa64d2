//! What each node of a job runs: the environment multi-node frameworks expect (also
//! under dstack's and SkyPilot's names, so their task files run unchanged), the NCCL
//! profile, the job's own environment, then its commands, in its working directory.

use super::spec::{Job, Upload};
use crate::detach::quote;
use crate::fleet::NodeTarget;
use std::fmt::Write as _;

/// The rendezvous port when the job's environment does not set `MASTER_PORT`.
pub const DEFAULT_MASTER_PORT: u16 = 29500;

/// Where node `rank` of job `id` lives (relative to the login's home). One directory per
/// node, so nodes sharing a home directory (NFS) never share a run.
pub fn job_dir(id: &str, rank: usize) -> String {
    format!(".flightdeck/jobs/{id}/{rank}")
}

/// A job id: `<name>-<unix seconds>-<4 hex digits>`.
pub fn new_id(name: &str, now: u64) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let salt = (nanos ^ std::process::id().rotate_left(16)) & 0xffff;
    format!("{name}-{now}-{salt:04x}")
}

/// The address other nodes reach a node on.
pub fn node_ip(n: &NodeTarget) -> String {
    n.internal_ip.clone().unwrap_or_else(|| n.host().to_string())
}

/// The working directory as a shell word: absolute and `~/` paths as given, relative
/// ones (and the default) under the node's job directory.
fn workdir_word(job: &Job, id: &str, rank: usize) -> String {
    let base = format!("\"$HOME\"/{}", quote(&job_dir(id, rank)));
    match job.spec.working_dir.as_deref() {
        None | Some("") | Some(".") => base,
        Some(w) if w.starts_with('/') => quote(w),
        Some(w) if w.starts_with("~/") => format!("\"$HOME\"/{}", quote(&w[2..])),
        Some(w) => format!("{base}/{}", quote(w)),
    }
}

/// Where an upload goes on node `rank`: a (directory, path) pair for
/// [`crate::detach::upload_command`].
pub fn upload_target(job: &Job, id: &str, rank: usize, u: &Upload) -> (String, String) {
    let jd = job_dir(id, rank);
    if u.remote.starts_with('/') {
        return (jd, u.remote.clone());
    }
    if let Some(rest) = u.remote.strip_prefix("~/") {
        return (String::new(), rest.to_string());
    }
    match job.spec.working_dir.as_deref() {
        None | Some("") | Some(".") => (jd, u.remote.clone()),
        Some(w) if w.starts_with('/') => (w.to_string(), u.remote.clone()),
        Some(w) if w.starts_with("~/") => (w[2..].to_string(), u.remote.clone()),
        Some(w) => (format!("{jd}/{w}"), u.remote.clone()),
    }
}

/// The files to upload, expanded (directories walked), as (local file, path relative to
/// the upload's target). Sorted, so every node gets them in one order.
pub fn expand(u: &Upload) -> std::io::Result<Vec<(std::path::PathBuf, String)>> {
    fn walk(
        dir: &std::path::Path,
        rel: &str,
        out: &mut Vec<(std::path::PathBuf, String)>,
    ) -> std::io::Result<()> {
        let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let name = e.file_name().to_string_lossy().into_owned();
            let r = format!("{rel}/{name}");
            let kind = e.file_type()?;
            if kind.is_symlink() {
                // A link inside an uploaded folder could point anywhere on this machine.
                return Err(std::io::Error::other(format!(
                    "{} is a symbolic link: not uploaded (copy what it points to into the folder, or name it in files:)",
                    e.path().display()
                )));
            }
            if kind.is_dir() {
                walk(&e.path(), &r, out)?;
            } else {
                out.push((e.path(), r));
            }
        }
        Ok(())
    }
    let meta = std::fs::metadata(&u.local)?;
    let mut out = vec![];
    if meta.is_dir() {
        walk(&u.local, u.remote.trim_end_matches('/'), &mut out)?;
    } else {
        out.push((u.local.clone(), u.remote.clone()));
    }
    Ok(out)
}

/// The environment flightdeck gives node `rank`, before the NCCL profile and the job's
/// own `env` (which win). `GPUS_PER_NODE` and the totals derived from it are computed on
/// the node unless the job fixes them, so they are shell expressions here.
pub fn node_env(job: &Job, id: &str, nodes: &[NodeTarget], rank: usize) -> Vec<(String, String)> {
    let ips: Vec<String> = nodes.iter().map(node_ip).collect();
    let master = ips.first().cloned().unwrap_or_default();
    let port = job
        .env
        .iter()
        .find(|(k, _)| k == "MASTER_PORT")
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| DEFAULT_MASTER_PORT.to_string());
    let n = nodes.len().to_string();
    let r = rank.to_string();
    let ip_lines = ips.join("\n");
    let gpus = "$GPUS_PER_NODE".to_string();
    let world = "$WORLD_SIZE".to_string();
    let mut v: Vec<(&str, String)> = vec![
        ("FLIGHTDECK_JOB", job.name.clone()),
        ("FLIGHTDECK_JOB_ID", id.to_string()),
        ("FLIGHTDECK_NODE_IPS", ip_lines.clone()),
        ("MASTER_ADDR", master.clone()),
        ("MASTER_PORT", port),
        ("NNODES", n.clone()),
        ("NODE_RANK", r.clone()),
        ("GPUS_PER_NODE", gpus.clone()),
        ("WORLD_SIZE", world.clone()),
        // dstack (mkdocs/docs/reference/env.md).
        ("DSTACK_RUN_NAME", job.name.clone()),
        ("DSTACK_MASTER_NODE_IP", master),
        ("DSTACK_NODES_IPS", ip_lines.clone()),
        ("DSTACK_NODE_RANK", r.clone()),
        ("DSTACK_NODES_NUM", n.clone()),
        ("DSTACK_GPUS_PER_NODE", gpus.clone()),
        ("DSTACK_GPUS_NUM", world),
        // SkyPilot (distributed-jobs.rst): node IPs head first, one per line.
        ("SKYPILOT_TASK_ID", id.to_string()),
        ("SKYPILOT_NODE_RANK", r),
        ("SKYPILOT_NODE_IPS", ip_lines),
        ("SKYPILOT_NUM_NODES", n),
        ("SKYPILOT_NUM_GPUS_PER_NODE", gpus),
    ];
    v.retain(|(k, _)| *k != "MASTER_PORT" || !job.env.iter().any(|(jk, _)| jk == k));
    v.into_iter().map(|(k, val)| (k.to_string(), val)).collect()
}

/// Values that are shell expressions (computed on the node), not literals.
fn is_expression(v: &str) -> bool {
    v == "$GPUS_PER_NODE" || v == "$WORLD_SIZE"
}

/// The script node `rank` runs (through [`crate::detach::launch_command`]).
pub fn node_script(job: &Job, id: &str, nodes: &[NodeTarget], rank: usize, profile: &[String]) -> String {
    use crate::shellenv::{export, Value};
    let mut s = format!(
        "{}\n# written by flightdeck: node {rank} of {} of job {} ({id})\n{}",
        crate::shellenv::SHEBANG,
        crate::words::plural(nodes.len(), "node"),
        job.name,
        crate::shellenv::HEADER,
    );
    match job.spec.gpus_per_node {
        Some(g) => {
            let _ = writeln!(s, "GPUS_PER_NODE={g}");
        }
        None => {
            s.push_str("GPUS_PER_NODE=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)\n");
            s.push_str("[ \"${GPUS_PER_NODE:-0}\" -ge 1 ] 2>/dev/null || GPUS_PER_NODE=1\n");
        }
    }
    let _ = writeln!(s, "WORLD_SIZE=$(({} * GPUS_PER_NODE))", nodes.len());
    for (k, v) in node_env(job, id, nodes, rank) {
        let value = if is_expression(&v) {
            Value::Expr(&v)
        } else {
            Value::Literal(&v)
        };
        let _ = writeln!(s, "{}", export(&k, value));
    }
    if !profile.is_empty() {
        s.push_str("# NCCL profile\n");
        for line in profile.iter().chain(&crate::nccl::runner::tidy_lines(profile)) {
            let _ = writeln!(s, "{line}");
        }
    }
    if !job.env.is_empty() {
        s.push_str("# the job's env\n");
        for (k, v) in &job.env {
            let _ = writeln!(s, "{}", export(k, Value::Literal(v)));
        }
    }
    let wd = workdir_word(job, id, rank);
    s.push_str("FD_JOB_DIR=$(pwd)\n");
    // The commands report their start from where they run (inside the container on COS):
    // a clean exit without it is a job that never ran (crate::detach::NEVER_STARTED).
    s.push_str(&crate::detach::expect_start_line(JOB_DIR_WORD));
    let _ = writeln!(s, "mkdir -p {wd} && cd {wd} || exit 126");
    // On Container-Optimized OS the commands run in the job's image (bootstrap::cos).
    let mut names: Vec<String> = node_env(job, id, nodes, rank)
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    names.push("GPUS_PER_NODE".into());
    names.push("WORLD_SIZE".into());
    names.extend(crate::nccl::runner::profile_names(profile));
    names.extend(job.env.iter().map(|(k, _)| k.clone()));
    names.retain(|k| k != "PATH");
    names.sort();
    names.dedup();
    let image = job.spec.image.as_deref().map(quote).unwrap_or_default();
    s.push_str(&crate::bootstrap::cos::container_lines(&names, &image));
    if job.spec.image.is_none() {
        s.push_str(
            "[ -z \"$FD_IN\" ] || { echo \"flightdeck: this node runs Container-Optimized OS, with no Python or frameworks on the host: give the job an image: (a container with its framework)\" >&2; exit 127; }\n",
        );
    }
    // The commands, as one script: bash when the node has it (task files use bashisms),
    // stopping at the first failing command like dstack's runner.
    let mut commands = String::new();
    for c in job.spec.commands.iter().flatten() {
        commands.push_str(c);
        if !c.ends_with('\n') {
            commands.push('\n');
        }
    }
    // A delimiter no command line equals: no line of the job ends the document early.
    s.push_str("cat > \"$FD_JOB_DIR/commands.sh\" ");
    s.push_str(&crate::detach::heredoc("COMMANDS", &commands));
    let started = crate::detach::reporting_start(JOB_DIR_WORD);
    let _ = writeln!(
        s,
        "exec $FD_IN {started} sh -c 'if command -v bash >/dev/null 2>&1; then exec bash -e \"$0\"; else exec sh -e \"$0\"; fi' \"$FD_JOB_DIR/commands.sh\""
    );
    s
}

/// The job's directory on the node as its script sees it (mounted at the same path in a
/// COS container).
const JOB_DIR_WORD: &str = "\"$FD_JOB_DIR\"";

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn job(extra: &str) -> Job {
        let text = format!("type: task\nname: tiny\nfleet: lab\ncommands:\n  - echo \"rank $NODE_RANK of $NNODES via $MASTER_ADDR:$MASTER_PORT gpus $GPUS_PER_NODE world $WORLD_SIZE\"\n  - echo \"$DSTACK_NODES_IPS\" | tr '\\n' ,; echo\n  - echo \"$SKYPILOT_NUM_NODES $SKYPILOT_NODE_RANK $TOKEN\"\n  - pwd\n{extra}");
        super::super::spec::parse(Path::new("j.yaml"), &text, &|_| None).unwrap()
    }

    fn nodes(n: usize) -> Vec<NodeTarget> {
        crate::fleet::lab_nodes(n)
    }

    /// Run a node script here as node `rank` would, in a temporary home; its output and
    /// its job directory.
    fn run_here(
        script: &str,
        id: &str,
        rank: usize,
    ) -> (std::process::Output, std::path::PathBuf, tempfile::TempDir) {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join(job_dir(id, rank));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("run.sh"), script).unwrap();
        let out = std::process::Command::new("sh")
            .arg("run.sh")
            .current_dir(&dir)
            .env("HOME", home.path())
            .output()
            .unwrap();
        (out, dir, home)
    }

    /// Run the script's commands here (as node 1 of 3) and read what they printed.
    #[test]
    fn the_script_gives_every_name_the_frameworks_read() {
        let j = job("gpus_per_node: 4\nenv:\n  TOKEN: \"it's secret\"\n  MASTER_PORT: 29999\n");
        let script = node_script(&j, "tiny-1-abcd", &nodes(3), 1, &["export NCCL_NET='gIB'".into()]);
        let (out, dir, _home) = run_here(&script, "tiny-1-abcd", 1);
        let text = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0], "rank 1 of 3 via 10.0.0.1:29999 gpus 4 world 12",
            "{text}"
        );
        assert_eq!(lines[1], "10.0.0.1,10.0.0.2,10.0.0.3,");
        assert_eq!(lines[2], "3 1 it's secret");
        assert_eq!(Path::new(lines[3]), dir.canonicalize().unwrap());
        assert!(script.contains("export NCCL_NET='gIB'"));
        // The job's env comes after the profile, so it wins.
        assert!(script.find("NCCL_NET").unwrap() < script.find("TOKEN").unwrap());
    }

    #[test]
    fn a_failing_command_stops_the_script() {
        let text = "type: task\nname: t\nfleet: f\ncommands:\n  - echo a\n  - \"false\"\n  - echo b\n";
        let j = super::super::spec::parse(Path::new("j.yaml"), text, &|_| None).unwrap();
        let script = node_script(&j, "t-1-0000", &nodes(1), 0, &[]);
        let (out, _, _home) = run_here(&script, "t-1-0000", 0);
        assert_eq!(String::from_utf8_lossy(&out.stdout), "a\n");
        assert_eq!(out.status.code(), Some(1));
    }

    #[test]
    fn uploads_go_under_the_working_dir() {
        let j = job("working_dir: src\n");
        let u = |r: &str| Upload {
            local: "x".into(),
            remote: r.into(),
        };
        assert_eq!(
            upload_target(&j, "i", 2, &u("train.py")),
            (".flightdeck/jobs/i/2/src".into(), "train.py".into())
        );
        assert_eq!(
            upload_target(&j, "i", 2, &u("/opt/t.py")),
            (".flightdeck/jobs/i/2".into(), "/opt/t.py".into())
        );
        assert_eq!(
            upload_target(&j, "i", 0, &u("~/t.py")),
            ("".into(), "t.py".into())
        );
        let j = job("working_dir: /work\n");
        assert_eq!(
            upload_target(&j, "i", 0, &u("t.py")),
            ("/work".into(), "t.py".into())
        );
    }

    #[test]
    fn directories_expand_in_order() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("pkg/sub")).unwrap();
        std::fs::write(d.path().join("pkg/b.py"), "b").unwrap();
        std::fs::write(d.path().join("pkg/a.py"), "a").unwrap();
        std::fs::write(d.path().join("pkg/sub/c.py"), "c").unwrap();
        let files = expand(&Upload {
            local: d.path().join("pkg"),
            remote: "code/".into(),
        })
        .unwrap();
        let rel: Vec<&str> = files.iter().map(|f| f.1.as_str()).collect();
        assert_eq!(rel, ["code/a.py", "code/b.py", "code/sub/c.py"]);
    }
}
