//! A kubeconfig as flightdeck reads it (`cloud::gke::cluster::load_kubeconfig`): the file
//! is written to a private folder (so the owner and mode checks pass) and read for the
//! context `fuzz`; the plugins it names are judged against each opt-in and summarised,
//! as `fleet plan` shows them. Nothing is ever run.
#![no_main]
use flightdeck::cloud::gke::cluster::load_kubeconfig;
use flightdeck::node::kube::PluginOptIn;
use libfuzzer_sys::fuzz_target;
use std::os::unix::fs::PermissionsExt;

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let path = dir.path().join("kubeconfig");
    std::fs::write(&path, data).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    for own in [false, true] {
        if let Ok(k) = load_kubeconfig(&path, own, "fuzz") {
            // No opt-in, the usual one, and each of the file's own plugins allowed by its
            // whole command line.
            let mut opts = vec![
                PluginOptIn::default(),
                PluginOptIn {
                    lines: vec!["gke-gcloud-auth-plugin".into()],
                },
            ];
            opts.push(PluginOptIn {
                lines: k.plugins.iter().map(|p| p.command_line()).collect(),
            });
            for opt in &opts {
                let _ = k.permit(opt);
                let _ = k.summary(opt);
            }
        }
    }
});
