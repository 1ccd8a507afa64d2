//! ~/.ssh/config and known_hosts.
#![no_main]
use libfuzzer_sys::fuzz_target;

const KEY: &str = "AAAAC3NzaC1lZDI1NTE5AAAAIMJ2m3mOI0dyYsL8H9ZIhaaH1jb6pmSnkuqLK4glV3dJ";

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let cfg = flightdeck::ssh::config::SshConfig::parse(&text);
    for host in ["10.0.0.1", "gpu-7", "bastion.example.com"] {
        let _ = cfg.resolve(host);
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("known_hosts");
    std::fs::write(&file, data).unwrap();
    let key = flightdeck::ssh::known_hosts::parse_key(KEY);
    for (host, port) in [("10.0.0.1", 22), ("gpu-7", 2222)] {
        let _ = flightdeck::ssh::known_hosts::check(std::slice::from_ref(&file), host, port, &key);
    }
});
