//! The straggler finder and multi-node nccl-tests on testbed nodes (sshd in network
//! namespaces, each node with its own home). What is a double: nccl-tests and mpirun
//! (tests/support/nccl_double.rs: a recorded real run replayed, one node slowed through a
//! file keyed by its own address; the mpirun double reaches every host over SSH as
//! mpirun does, but starts no ranks). What is real: flightdeck's launches, the
//! node-to-node SSH it sets up (keys, authorized_keys, known_hosts, strict host key
//! checking, used by the mpirun double between the nodes), the runs, parser, history and
//! the finder's decisions.

mod support;

use support::testbed::Testbed;
use support::{flightdeck, nccl_double, text};

#[test]
fn the_finder_names_the_slowed_node() {
    let Some(tb) = Testbed::new_private_homes(3, 0) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "tb");
    let dir = nccl_double::install(&home.path().join("nt"), "0.01");
    // Node 1 (tb-1) runs 2.5 times slower, alone and in any group.
    std::fs::write(dir.join(format!("slow.{}", tb.nodes[1].addr)), "2.5\n").unwrap();
    let d = dir.to_str().unwrap();
    let mpirun = dir.join("mpirun");
    let out = flightdeck(
        home.path(),
        &[
            "nccl",
            "stragglers",
            "tb",
            "--nccl-tests-dir",
            d,
            "--mpirun",
            mpirun.to_str().unwrap(),
            "-g",
            "2",
            "--json",
        ],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "a slow node exits 1: {err}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {err}"));
    assert_eq!(doc["named"], "tb-1", "{doc:#}");
    assert_eq!(doc["node_ranking"][0]["node"], "tb-1");
    assert_eq!(
        doc["node_ranking"][0]["busbw"], 139.08,
        "347.71 / 2.5 as the double prints it"
    );
    assert_eq!(doc["node_ranking"][1]["busbw"], 347.71);
    // The two pairs with tb-1 are the slowest links; the pair without it is fast.
    for k in 0..2 {
        let pair = doc["link_ranking"][k]["nodes"].as_array().unwrap();
        assert!(pair.contains(&"tb-1".into()), "{doc:#}");
        assert_eq!(doc["link_ranking"][k]["busbw"], 139.08);
    }
    assert_eq!(
        doc["link_ranking"][2]["nodes"],
        serde_json::json!(["tb-0", "tb-2"])
    );
    assert_eq!(doc["link_ranking"][2]["busbw"], 347.71);
    assert!(doc["slow_links"].as_array().unwrap().is_empty());
    let reason = doc["slow_nodes"][0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("alone, 139.08 GB/s is 40% of the nodes' median 347.71 GB/s"),
        "{reason}"
    );
    assert!(reason.contains("every ring pair with it is slow"), "{reason}");
    // Stages in order: three single nodes at once, the ring's pairs, the bisection.
    let stages: Vec<&str> = doc["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["stage"].as_str().unwrap())
        .collect();
    assert_eq!(
        &stages[..6],
        &["singles", "singles", "singles", "ring", "ring", "ring"]
    );
    assert!(stages[6..].iter().all(|s| *s == "bisect"));
    // Every run is in the history, with its purpose.
    let hist = flightdeck(home.path(), &["nccl", "history", "--json"]);
    let hist: serde_json::Value = serde_json::from_slice(&hist.stdout).unwrap();
    let purposes: Vec<&str> = hist
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["purpose"].as_str())
        .collect();
    assert_eq!(purposes.len(), 6, "{purposes:?}");
    assert!(
        purposes.contains(&"stragglers, ring of pairs: tb-1 tb-2"),
        "{purposes:?}"
    );
    // The pairs went through mpirun on the pair's first node, which reached both hosts.
    assert!(err.contains("setting up SSH between the 3 nodes"), "{err}");
}

#[test]
fn nodes_reach_each_other_with_strict_host_keys_and_mpirun_spans_them() {
    let Some(tb) = Testbed::new_private_homes(2, 0) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "tb");
    let dir = nccl_double::install(&home.path().join("nt"), "0");
    let mpirun = dir.join("mpirun");
    let out = flightdeck(
        home.path(),
        &[
            "nccl",
            "run",
            "tb",
            "--nccl-tests-dir",
            dir.to_str().unwrap(),
            "--mpirun",
            mpirun.to_str().unwrap(),
            "-g",
            "2",
            "--json",
        ],
    );
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        doc["rows"].as_array().unwrap().len(),
        31,
        "rows tagged [1,0]<stdout>: parse"
    );
    assert_eq!(doc["run"]["nodes"], serde_json::json!(["tb-0", "tb-1"]));
    assert_eq!(
        doc["run"]["exit_codes"].as_array().unwrap().len(),
        1,
        "only the head runs a script"
    );
    // The head's script: a hostfile of both nodes, mpirun with rank-tagged output.
    let id = doc["run"]["id"].as_str().unwrap();
    let head_home = tb.nodes[0].home.clone().unwrap();
    let run_dir = head_home.join(format!(".flightdeck/runs/{id}"));
    let hostfile = std::fs::read_to_string(run_dir.join("hostfile")).unwrap();
    assert_eq!(
        hostfile,
        format!("{} slots=2\n{} slots=2\n", tb.nodes[0].addr, tb.nodes[1].addr)
    );
    let log = std::fs::read_to_string(run_dir.join("out.log")).unwrap();
    assert!(
        log.contains("--tag-output --hostfile hostfile -np 4 --map-by ppr:2:node"),
        "{log}"
    );
    assert!(log.contains("mpirun double: 4 ranks on 2 hosts"), "{log}");
    // Each node reaches the other with flightdeck's config, host keys checked.
    for (from, to) in [(0, 1), (1, 0)] {
        let cmd = format!(
            "ssh -F .flightdeck/ssh/config {} echo reached-from-{from}",
            tb.nodes[to].addr
        );
        let out = flightdeck(
            home.path(),
            &["exec", "tb", "--nodes", &from.to_string(), "--", &cmd],
        );
        assert!(
            text(&out.stdout).contains(&format!("reached-from-{from}")),
            "{}",
            text(&out.stderr)
        );
    }
    // Strict: a host whose key is not in the nodes' known_hosts is refused.
    let cmd = format!(
        "ssh -F .flightdeck/ssh/config -o UserKnownHostsFile=/dev/null {} true",
        tb.nodes[1].addr
    );
    let out = flightdeck(home.path(), &["exec", "tb", "--nodes", "0", "--", &cmd]);
    assert!(!out.status.success());
    let said = text(&out.stdout) + &text(&out.stderr);
    assert!(said.contains("Host key verification failed"), "{}", said);
    // The private keys stayed on their nodes; authorized_keys names the fleet's keys.
    let auth = std::fs::read_to_string(head_home.join(".ssh/authorized_keys")).unwrap();
    assert_eq!(
        auth.lines()
            .filter(|l| l.contains("flightdeck-fleet:tb:"))
            .count(),
        2,
        "{auth}"
    );
    let key0 = std::fs::read_to_string(head_home.join(".flightdeck/ssh/id_ed25519")).unwrap();
    let key1 = std::fs::read_to_string(
        tb.nodes[1]
            .home
            .clone()
            .unwrap()
            .join(".flightdeck/ssh/id_ed25519"),
    )
    .unwrap();
    assert_ne!(key0, key1, "each node has its own key pair");
    assert!(
        !std::fs::read_to_string(home.path().join(".local/state/flightdeck/state.json"))
            .unwrap()
            .contains("PRIVATE KEY")
    );
}
