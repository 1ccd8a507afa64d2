//! What runs is what was applied. `fleet apply` records the fleet file in the state as
//! flightdeck read it ([`super::form::applied_form`]); every later command on the fleet (exec, the
//! doctor, NCCL runs, jobs, status, gc) runs from that record ([`applied`]), never from
//! the file as it is now, which anyone with write access to its folder (a teammate, a
//! `git pull`) may have changed since. A file that differs is a change: `fleet plan`
//! lists it field by field ([`drift`]) and `fleet apply` records it, as Terraform does.

use super::form::{changes, FieldChange};
use super::{Fleet, FleetSpec};
use crate::store::FleetRecord;
use std::path::Path;

/// The fleet a record says was applied. `Ok(None)`: the record predates this (an older
/// flightdeck recorded only the file's path); apply records it.
pub fn applied(record: &FleetRecord) -> Result<Option<Fleet>, String> {
    let Some(text) = &record.applied else {
        return Ok(None);
    };
    let file = record
        .file
        .clone()
        .unwrap_or_else(|| format!("{}.yaml", record.name).into());
    super::parse(&file, text).map(Some).map_err(|d| {
        format!(
            "fleet `{}`: what was applied no longer validates: {}",
            record.name,
            d.iter()
                .filter(|d| d.severity == super::Severity::Error)
                .map(|d| d.message.clone())
                .collect::<Vec<_>>()
                .join("; ")
        )
    })
}

/// The fleet a command runs on: what `record` says was applied, else (not applied)
/// `fleet_arg` when that is a fleet file, as it reads now. `None` when there is none, it
/// does not load, or the record predates [`applied`].
pub fn applied_or_file(record: Option<&FleetRecord>, fleet_arg: &str) -> Option<Fleet> {
    match record {
        Some(r) => applied(r).ok().flatten(),
        None => Path::new(fleet_arg)
            .is_file()
            .then(|| super::load(Path::new(fleet_arg)).ok())
            .flatten(),
    }
}

/// The recorded fleet's spec (for its GPUDirect flavour, machine type, GKE block); for
/// a record that predates [`applied`], none: what the file says now was not reviewed.
pub fn applied_spec(record: &FleetRecord) -> Option<FleetSpec> {
    applied(record).ok().flatten().map(|f| f.spec)
}

/// How the fleet file differs from what `record` applied: `Ok(vec![])` when it does
/// not; `Err` when it cannot be told (the file is gone or no longer loads, or the record
/// predates [`applied`]), saying which.
pub fn drift(record: &FleetRecord) -> Result<Vec<FieldChange>, String> {
    let Some(text) = &record.applied else {
        return Err(format!(
            "fleet `{}` was applied by an older flightdeck that did not record its file; `flightdeck fleet apply` records it",
            record.name
        ));
    };
    let Some(file) = &record.file else {
        return Ok(vec![]);
    };
    let now = super::load(file).map_err(|d| {
        format!(
            "{} no longer loads ({}); what was applied runs",
            file.display(),
            d.iter()
                .find(|d| d.severity == super::Severity::Error)
                .map(|d| d.message.clone())
                .unwrap_or_default()
        )
    })?;
    Ok(changes(text, &now.applied))
}

/// A warning for a command about to run on `record`'s fleet, when its file changed
/// since apply: which fields, and that what was applied runs.
pub fn drift_warning(record: &FleetRecord) -> Option<String> {
    match drift(record) {
        Ok(c) if c.is_empty() => None,
        Ok(c) => {
            let file = record
                .file
                .as_deref()
                .map(Path::display)
                .map(|d| d.to_string())
                .unwrap_or_default();
            Some(format!(
                "fleet `{}`: {file} changed since it was applied ({}); running what was applied: `flightdeck fleet plan {file}` shows the change, `fleet apply` makes it",
                record.name,
                c.iter().map(|c| c.path.as_str()).collect::<Vec<_>>().join(", "),
            ))
        }
        Err(e) => Some(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(dir: &Path, text: &str) -> Fleet {
        let f = dir.join("f.yaml");
        std::fs::write(&f, text).unwrap();
        super::super::load(&f).unwrap_or_else(|d| panic!("{d:?}"))
    }

    fn record(f: &Fleet) -> FleetRecord {
        FleetRecord {
            name: f.name.clone(),
            backend: f.backend,
            file: Some(f.file.clone()),
            nodes: vec![],
            resources: vec![],
            created_at: 1,
            applied: Some(f.applied.clone()),
        }
    }

    const GKE: &str = "type: fleet\nname: team\n# the team's cluster\ngke:\n  context: team\n  kubeconfig: kc\n  node_pools: [pool-1]\nenv:\n  HF_TOKEN: hf_SECRET\n";

    const KC: &str = "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: team, context: {cluster: c, user: u}}]\n";

    #[test]
    fn the_record_keeps_what_runs_and_no_secret() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("kc"), KC).unwrap();
        let f = parsed(tmp.path(), GKE);
        assert!(!f.applied.contains("hf_SECRET"), "{}", f.applied);
        assert!(!f.applied.contains("the team's cluster"), "comments are not data");
        // The kubeconfig as the absolute path it was checked at.
        let kc = tmp.path().join("kc").canonicalize().unwrap();
        assert!(f.applied.contains(&kc.display().to_string()), "{}", f.applied);
        // Read back, it is the same fleet, whatever the file says now.
        let r = record(&f);
        std::fs::write(&f.file, GKE.replace("pool-1", "pool-evil")).unwrap();
        let back = applied(&r).unwrap().unwrap();
        assert_eq!(back.spec.gke, f.spec.gke);
        assert_eq!(back.name, "team");
    }

    #[test]
    fn an_edit_is_listed_field_by_field_and_a_comment_is_not_an_edit() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("kc"), KC).unwrap();
        let f = parsed(tmp.path(), GKE);
        let r = record(&f);
        assert_eq!(drift(&r), Ok(vec![]));
        assert_eq!(drift_warning(&r), None);
        std::fs::write(&f.file, format!("{GKE}# a new comment\n")).unwrap();
        assert_eq!(drift(&r), Ok(vec![]));
        // A changed secret is not recorded, so not a change either.
        std::fs::write(&f.file, GKE.replace("hf_SECRET", "hf_OTHER")).unwrap();
        assert_eq!(drift(&r), Ok(vec![]));
        let edited = GKE.replace(
            "node_pools: [pool-1]",
            "node_pools: [pool-1]\n  debug_image: evil/steal\n  namespace: kube-system",
        );
        std::fs::write(&f.file, edited).unwrap();
        let c = drift(&r).unwrap();
        let shown: Vec<String> = c.iter().map(|c| c.to_string()).collect();
        assert_eq!(
            shown,
            [
                "gke.debug_image: (not set) → evil/steal",
                "gke.namespace: (not set) → kube-system"
            ]
        );
        let w = drift_warning(&r).unwrap();
        assert!(
            w.contains("gke.debug_image, gke.namespace") && w.contains("running what was applied"),
            "{w}"
        );
        std::fs::write(&f.file, "type: fleet\nname: [").unwrap();
        assert!(
            drift(&r).unwrap_err().contains("no longer loads"),
            "{:?}",
            drift(&r)
        );
    }

    #[test]
    fn an_inline_private_key_is_never_recorded() {
        let tmp = tempfile::tempdir().unwrap();
        let f = parsed(
            tmp.path(),
            "type: fleet\nname: s\nssh_config:\n  user: u\n  ssh_key: {private: PRIVATE_KEY}\n  hosts:\n    - hostname: h1\n      ssh_key: {private: HOST_KEY}\n",
        );
        assert!(
            !f.applied.contains("PRIVATE_KEY") && !f.applied.contains("HOST_KEY"),
            "{}",
            f.applied
        );
        assert!(f.applied.contains("h1"), "{}", f.applied);
    }

    #[test]
    fn a_record_of_an_older_flightdeck_says_so() {
        let tmp = tempfile::tempdir().unwrap();
        let f = parsed(tmp.path(), "type: fleet\nname: l\nbackends: [local]\n");
        let mut r = record(&f);
        r.applied = None;
        assert_eq!(applied(&r).unwrap().map(|f| f.name), None);
        assert!(drift_warning(&r).unwrap().contains("older flightdeck"));
    }

    #[test]
    fn values_that_differ_inside_lists_are_shown_whole() {
        let c = changes("a:\n  b: [1, 2]\n", "a:\n  b: [1, 3]\nc: x\n");
        let shown: Vec<String> = c.iter().map(|c| c.to_string()).collect();
        assert_eq!(shown, ["a.b: [1,2] → [1,3]", "c: (not set) → x"]);
    }
}
