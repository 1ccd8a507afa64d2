//! What the services send the event loop, and what the inventories read: the one place
//! the features' services and the cockpit's share (`services/mod.rs`) both import.

use crate::paths::Paths;
use crate::store::FleetRecord;
use crate::tui::state::Msg;

/// What services report to the event loop.
pub enum ServiceEvent {
    Msg(Msg),
    /// The fleet record to open panes on was read from the store.
    OpenPanes(FleetRecord),
}

/// What the inventories read, with the config as it is now (it may change while the
/// cockpit runs).
pub fn inventory_context(paths: &Paths) -> crate::cloud::inventory::Context {
    crate::cloud::inventory::Context {
        state_dir: paths.state_dir.clone(),
        gcp: crate::config::Config::load(paths).ok().and_then(|c| c.gcp),
        kube: Default::default(),
    }
}
