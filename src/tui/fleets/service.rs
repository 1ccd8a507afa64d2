//! The Fleets view's services: plan, apply and delete a fleet with the code `flightdeck
//! fleet` runs (`crate::cloud::lifecycle`), every progress line streamed to the
//! provisioning log; read a fleet file into the editor and save it back.

use crate::cloud::{self, Backend};
use crate::paths::Paths;
use crate::reach::Reach;
use crate::store::Store;
use crate::tui::fleets::{Confirm, Op};
use crate::tui::services::ServiceEvent;
use crate::tui::state::Msg;
use std::path::Path;
use tokio::sync::mpsc;

fn load_fleet(file: &str) -> Result<crate::fleet::Fleet, String> {
    crate::fleet::load(Path::new(file))
        .map_err(|diags| diags.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("\n"))
}

fn backend(
    kind: crate::fleet::BackendKind,
    paths: &Paths,
    reach: &Reach,
    cancel: &cloud::Cancel,
) -> Result<Box<dyn Backend>, String> {
    let gcp = crate::config::Config::load(paths).map_err(|e| e.to_string())?.gcp;
    cloud::lifecycle::backend(kind, gcp, paths, || reach.clone(), cancel)
}

/// What applying `file` would do, against the state.
pub async fn plan(paths: &Paths, reach: &Reach, file: &str) -> Result<Confirm, String> {
    let fleet = load_fleet(file)?;
    let (state, _) = Store::new(&paths.state_dir).load().map_err(|e| e.to_string())?;
    let recorded = state.fleet(&fleet.name).ok();
    cloud::lifecycle::check_backend(&fleet, recorded)?;
    let backend = backend(fleet.backend, paths, reach, &cloud::Cancel::default())?;
    let plan = cloud::lifecycle::plan(backend.as_ref(), &fleet, recorded)?;
    // The plan (and its cost) is shown without credentials, as `fleet plan` is: the
    // dialog is also where an operator reads what a fleet would cost.
    Ok(Confirm {
        op: Op::Apply {
            file: file.to_string(),
            reviewed: fleet.applied.clone(),
        },
        plan,
    })
}

/// Lines of `progress` reach the cockpit in order, none dropped.
fn forwarder(tx: &mpsc::Sender<ServiceEvent>) -> mpsc::UnboundedSender<String> {
    let (ltx, mut lrx) = mpsc::unbounded_channel::<String>();
    let tx = tx.clone();
    tokio::spawn(async move {
        while let Some(line) = lrx.recv().await {
            if tx
                .send(ServiceEvent::Msg(Msg::Fleets(super::Msg::Log(line))))
                .await
                .is_err()
            {
                return;
            }
        }
    });
    ltx
}

/// Apply `file` if it still says what the plan showed (`reviewed`, its
/// [`crate::fleet::Fleet::applied`] then); returns the fleet's name and how it went.
pub async fn apply(
    paths: Paths,
    reach: Reach,
    file: String,
    reviewed: &str,
    lines: mpsc::UnboundedSender<String>,
    cancel: cloud::Cancel,
) -> (String, Result<String, String>) {
    let fleet = match load_fleet(&file) {
        Ok(f) => f,
        Err(e) => return (file, Err(e)),
    };
    let changed = crate::fleet::form::changes(reviewed, &fleet.applied);
    if !changed.is_empty() {
        let what: Vec<String> = changed.iter().map(|c| c.to_string()).collect();
        return (
            fleet.name,
            Err(format!(
                "{file} changed since its plan was shown ({}): nothing applied; plan it again",
                what.join("; ")
            )),
        );
    }
    let name = fleet.name.clone();
    let result = async {
        let backend = backend(fleet.backend, &paths, &reach, &cancel)?;
        let store = Store::new(&paths.state_dir);
        let progress = move |line: String| {
            let _ = lines.send(line);
        };
        let record = cloud::lifecycle::apply(&store, backend.as_ref(), &fleet, &progress).await?;
        let enabled = crate::config::Config::load(&paths)
            .ok()
            .and_then(|c| c.gcp)
            .and_then(|g| g.bootstrap)
            .unwrap_or(true);
        cloud::lifecycle::bootstrap_after_apply(enabled, &fleet, &record, reach, false, &progress)
            .await
            .map_err(|e| format!("fleet `{}`: the nodes are up, but {e}", record.name))?;
        Ok(format!(
            "fleet `{}`: {} ready; Enter opens their panes",
            record.name,
            crate::words::plural(record.nodes.len(), "node")
        ))
    }
    .await;
    (name, result)
}

/// Delete the recorded fleet `name`.
pub async fn delete(
    paths: Paths,
    reach: Reach,
    name: String,
    lines: mpsc::UnboundedSender<String>,
) -> Result<String, String> {
    let store = Store::new(&paths.state_dir);
    let (state, _) = store.load().map_err(|e| e.to_string())?;
    let record = state.fleet(&name).map_err(|e| e.to_string())?.clone();
    let backend = backend(record.backend, &paths, &reach, &cloud::Cancel::default())?;
    let progress = move |line: String| {
        let _ = lines.send(line);
    };
    cloud::lifecycle::delete(&store, backend.as_ref(), &record, &progress).await?;
    Ok(format!("fleet `{name}`: deleted"))
}

/// Run `Command::PlanFleet`, `ApplyFleet` or `DeleteFleet` in a task.
pub fn spawn_plan(tx: mpsc::Sender<ServiceEvent>, paths: Paths, reach: Reach, file: String) {
    tokio::spawn(async move {
        let result = plan(&paths, &reach, &file).await.map(Box::new);
        let _ = tx
            .send(ServiceEvent::Msg(Msg::Fleets(super::Msg::Planned(result))))
            .await;
    });
}

pub fn spawn_apply(
    tx: mpsc::Sender<ServiceEvent>,
    paths: Paths,
    reach: Reach,
    file: String,
    reviewed: String,
    cancel: cloud::Cancel,
) {
    let lines = forwarder(&tx);
    tokio::spawn(async move {
        let (name, result) = apply(paths, reach, file, &reviewed, lines, cancel).await;
        // The log's last lines are in the forwarder's queue: let them go first.
        tokio::task::yield_now().await;
        let _ = tx
            .send(ServiceEvent::Msg(Msg::Fleets(super::Msg::Done { name, result })))
            .await;
    });
}

pub fn spawn_delete(tx: mpsc::Sender<ServiceEvent>, paths: Paths, reach: Reach, name: String) {
    let lines = forwarder(&tx);
    tokio::spawn(async move {
        let result = delete(paths, reach, name.clone(), lines).await;
        tokio::task::yield_now().await;
        let _ = tx
            .send(ServiceEvent::Msg(Msg::Fleets(super::Msg::Done { name, result })))
            .await;
    });
}

/// Read a fleet file for the editor.
pub fn spawn_edit(tx: mpsc::Sender<ServiceEvent>, path: String) {
    tokio::task::spawn_blocking(move || {
        let result = std::fs::read_to_string(&path)
            .map(|text| (path.clone(), text))
            .map_err(|e| format!("{path}: {e}"));
        let _ = tx.blocking_send(ServiceEvent::Msg(Msg::Fleets(super::Msg::FileOpened(result))));
    });
}

/// Write `text` over `path` if the file still holds `original`; atomically (a temporary
/// file renamed over it), so a crash leaves the old or the new text, never half.
pub fn save(path: &Path, text: &str, original: &str) -> Result<(), String> {
    let p = path.display();
    let now = std::fs::read_to_string(path).map_err(|e| format!("{p}: {e}"))?;
    if now != original {
        return Err(format!(
            "{p} changed on disk since it was opened; not saved (open it again with e)"
        ));
    }
    let tmp = path.with_extension("flightdeck-tmp");
    std::fs::write(&tmp, text).map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("{p}: {e}"))
}

pub fn spawn_save(tx: mpsc::Sender<ServiceEvent>, path: String, text: String, original: String) {
    tokio::task::spawn_blocking(move || {
        let result = save(Path::new(&path), &text, &original).map(|()| path);
        let _ = tx.blocking_send(ServiceEvent::Msg(Msg::Fleets(super::Msg::FileWritten(result))));
    });
}

#[cfg(test)]
mod tests {
    use super::save;

    /// What the operator confirmed is what is applied: a file changed between the plan
    /// and `y` is refused, and nothing is recorded.
    #[tokio::test]
    async fn apply_refuses_a_file_changed_since_its_plan() {
        let dir = tempfile::tempdir().unwrap();
        let paths = crate::paths::Paths {
            config_dir: dir.path().to_path_buf(),
            state_dir: dir.path().join("state"),
        };
        let f = dir.path().join("l.yaml");
        std::fs::write(&f, "type: fleet\nname: l\nbackends: [local]\n").unwrap();
        let reach = crate::reach::Reach::without_ssh();
        let file = f.display().to_string();
        let confirm = super::plan(&paths, &reach, &file).await.unwrap();
        let super::Op::Apply { reviewed, .. } = confirm.op else {
            panic!("{:?}", confirm.op)
        };
        std::fs::write(&f, "type: fleet\nname: l\nbackends: [local]\nnodes: 1\n").unwrap();
        let (lines, _rx) = tokio::sync::mpsc::unbounded_channel();
        let (name, r) = super::apply(
            paths.clone(),
            reach.clone(),
            file.clone(),
            &reviewed,
            lines,
            Default::default(),
        )
        .await;
        assert_eq!(name, "l");
        let e = r.unwrap_err();
        assert!(
            e.contains("changed since its plan was shown (nodes: (not set) → 1)"),
            "{e}"
        );
        let (state, _) = crate::store::Store::new(&paths.state_dir).load().unwrap();
        assert!(state.fleets.is_empty(), "nothing applied: {:?}", state.fleets);
        // Planned again, it applies, and records what the plan showed.
        let confirm = super::plan(&paths, &reach, &file).await.unwrap();
        let super::Op::Apply { reviewed, .. } = confirm.op else {
            unreachable!()
        };
        let (lines, _rx) = tokio::sync::mpsc::unbounded_channel();
        let (_, r) = super::apply(paths.clone(), reach, file, &reviewed, lines, Default::default()).await;
        r.unwrap();
        let (state, _) = crate::store::Store::new(&paths.state_dir).load().unwrap();
        assert_eq!(state.fleets[0].applied.as_deref(), Some(reviewed.as_str()));
    }

    #[test]
    fn save_writes_over_the_file_only_if_unchanged_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.yaml");
        std::fs::write(&p, "name: a\n").unwrap();
        save(&p, "name: b\n", "name: a\n").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "name: b\n");
        // Someone else changed it meanwhile: refused, their text kept.
        let e = save(&p, "name: c\n", "name: a\n").unwrap_err();
        assert!(e.contains("changed on disk"), "{e}");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "name: b\n");
        assert!(!p.with_extension("flightdeck-tmp").exists());
        // Gone: says so.
        std::fs::remove_file(&p).unwrap();
        assert!(save(&p, "x", "name: b\n").is_err());
    }
}
