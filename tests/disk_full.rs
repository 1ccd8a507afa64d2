//! The fault matrix's "disk full while saving the state": the state dir on a tmpfs of
//! 256 KiB, filled; a save fails with an error naming the file, leaves no temporary file
//! behind, and the state on disk is the last good one. Needs root (to mount the tmpfs),
//! like the SSH testbed; elsewhere it says why it did not run.

mod support;

use flightdeck::store::{FleetRecord, Store};

#[test]
fn a_full_disk_fails_the_save_and_keeps_the_last_good_state() {
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("small");
    std::fs::create_dir_all(&mnt).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs", mnt.to_str().unwrap()])
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        support::cannot_run("mounting a tmpfs needs root");
    }
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let _guard = Unmount(mnt.clone());
    let state_dir = mnt.join("state");
    let store = Store::new(&state_dir);
    let record = |name: &str| FleetRecord {
        name: name.into(),
        backend: flightdeck::fleet::BackendKind::Local,
        file: None,
        nodes: vec![],
        resources: vec![],
        created_at: 0,
        applied: None,
    };
    store.update(|s| s.fleets.push(record("kept"))).unwrap();
    // Fill the disk.
    let filler = mnt.join("filler");
    let _ = std::fs::write(&filler, vec![0u8; 300 * 1024]);
    let big = "x".repeat(200 * 1024);
    let err = store
        .update(|s| s.fleets.push(record(&format!("big{big}"))))
        .expect_err("no room: the save fails");
    assert!(err.to_string().contains("state.json.tmp"), "{err}");
    assert!(
        !state_dir.join("state.json.tmp").exists(),
        "no temporary file left"
    );
    let (state, _) = store.load().unwrap();
    assert_eq!(state.fleets.len(), 1);
    assert_eq!(state.fleets[0].name, "kept");
}
