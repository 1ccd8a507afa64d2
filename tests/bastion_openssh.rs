//! The testbed itself, checked with OpenSSH's own client: nodes are reachable through
//! the bastion only, every NIC is up, and teardown leaves nothing behind.

mod support;

use std::process::Command;
use support::testbed::Testbed;

/// OpenSSH's client through the bastion (ProxyCommand).
fn ssh(tb: &Testbed, args: &[&str]) -> std::process::Output {
    let key = tb.user_key.display().to_string();
    let kh = tb.known_hosts.display().to_string();
    let mut cmd = Command::new("ssh");
    cmd.args(["-F", "/dev/null", "-i", &key, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes"])
        .args(["-o", &format!("UserKnownHostsFile={kh}"), "-o", "ConnectTimeout=20"])
        .args(["-o", &format!("ProxyCommand=ssh -F /dev/null -i {key} -o BatchMode=yes -o UserKnownHostsFile={kh} -W %h:%p root@{}", tb.bastion.addr)]);
    cmd.args(args);
    cmd.output().unwrap()
}

#[test]
fn nodes_are_reachable_through_the_bastion_only() {
    let Some(tb) = Testbed::new(3, 2) else { return };
    for (i, node) in tb.nodes.iter().enumerate() {
        let out = ssh(
            &tb,
            &[
                &format!("root@{}", node.addr),
                "ip -o -4 addr show | awk '{print $2, $4}'",
            ],
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "node {i} via bastion {}: {}",
            tb.bastion.addr,
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains(&format!("eth0 {}/24", node.addr)), "{text}");
        assert!(text.contains(&format!("eth2 10.88.2.{}/24", i + 1)), "{text}");
    }
    // Rails connect nodes to each other: node0 pings node2 on rail 1.
    tb.node_run(0, &["ping", "-c1", "-W2", "10.88.1.3"]).unwrap();
    // The test process has no route to the nodes, only to the bastion.
    let direct = Command::new("ping")
        .args(["-c1", "-W1", &tb.nodes[0].addr])
        .output()
        .unwrap();
    assert!(!direct.status.success(), "nodes must not be reachable directly");
    let names: Vec<String> = tb.nodes.iter().map(|n| n.ns.clone()).collect();
    drop(tb);
    let left = String::from_utf8_lossy(
        &Command::new("ip")
            .args(["netns", "list"])
            .output()
            .unwrap()
            .stdout,
    )
    .into_owned();
    for n in names {
        assert!(!left.contains(&n), "{n} left behind: {left}");
    }
}
