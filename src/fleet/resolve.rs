//! One fleet lookup for both front ends: a fleet by its recorded name, or by its file.

use crate::store::{FleetRecord, State};
use std::path::Path;

/// The fleet `name_or_file` names: the state's record of that name, else the fleet file
/// at that path: the record of its fleet when that is applied, else a record of its
/// nodes, nothing applied; else why neither, with the closest recorded name.
pub fn resolve(name_or_file: &str, state: &State) -> Result<FleetRecord, String> {
    let unknown = match state.fleet(name_or_file) {
        Ok(r) => return Ok(r.clone()),
        Err(e) => e,
    };
    let path = Path::new(name_or_file);
    if !path.is_file() {
        return Err(format!(
            "no fleet `{name_or_file}` in the state (apply it first, or give a fleet file){}",
            unknown.hint
        ));
    }
    let f = super::load(path).map_err(|d| d.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("\n"))?;
    // An applied fleet named by its file is what was applied, not the file as it is now
    // ([`super::applied`]).
    if let Ok(r) = state.fleet(&f.name) {
        return Ok(r.clone());
    }
    Ok(FleetRecord {
        name: f.name.clone(),
        backend: f.backend,
        file: Some(f.file.clone()),
        nodes: f.node_targets(),
        resources: vec![],
        created_at: 0,
        applied: Some(f.applied.clone()),
    })
}
