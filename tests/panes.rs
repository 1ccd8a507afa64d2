//! Pane sessions against the testbed: a shell per node through the bastion, broadcast
//! typing, a node's sshd killed and brought back (its pane reconnects, the others keep
//! working), and hostile output that must not break a pane.

mod support;

use flightdeck::fleet;
use flightdeck::reach::Reach;
use flightdeck::ssh::client::{NoPrompt, SshOptions};
use flightdeck::ssh::known_hosts::HostKeyPolicy;
use flightdeck::ssh::pool::{Pool, Resolver};
use flightdeck::term::session::{self, PaneEvent, PaneHandle, PaneInput, PaneState};
use flightdeck::term::{self, SharedScreen};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use support::testbed::Testbed;
use tokio::sync::mpsc;

struct Panes {
    handles: Vec<PaneHandle>,
    screens: Vec<SharedScreen>,
    states: Vec<PaneState>,
    events: mpsc::Receiver<PaneEvent>,
}

impl Panes {
    fn open(tb: &Testbed) -> Panes {
        let opts = SshOptions {
            known_hosts: vec![tb.known_hosts.clone()],
            policy: HostKeyPolicy::Refuse,
            prompter: Arc::new(NoPrompt),
            use_agent: false,
            agent_socket: None,
            keys: Default::default(),
        };
        let reach = Reach::new(Pool::new(opts), Arc::new(Resolver::new(tb.dir.path())));
        let nodes = fleet::parse(Path::new("tb.yaml"), &tb.fleet_yaml("tb"))
            .unwrap()
            .node_targets();
        let (tx, events) = mpsc::channel(4096);
        let mut handles = vec![];
        let mut screens = vec![];
        for (i, n) in nodes.iter().enumerate() {
            let screen = term::new_screen(24, 100);
            handles.push(session::spawn(
                i,
                reach.clone(),
                n.clone(),
                screen.clone(),
                tx.clone(),
            ));
            screens.push(screen);
        }
        let states = vec![PaneState::Connecting; nodes.len()];
        Panes {
            handles,
            screens,
            states,
            events,
        }
    }

    fn text(&self, i: usize) -> String {
        term::snapshot_lines(&self.screens[i]).join("\n")
    }

    /// Take events until `done` holds, or panic with every pane's state and text.
    async fn until(&mut self, what: &str, done: impl Fn(&Panes) -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while !done(self) {
            match tokio::time::timeout_at(deadline, self.events.recv()).await {
                Ok(Some(PaneEvent::State(i, s))) => self.states[i] = s,
                Ok(Some(PaneEvent::Output(_))) => {}
                _ => {
                    let dump: Vec<String> = (0..self.screens.len())
                        .map(|i| format!("pane {i} {:?}:\n{}", self.states[i], self.text(i)))
                        .collect();
                    panic!("timed out waiting for {what}\n{}", dump.join("\n---\n"));
                }
            }
        }
    }

    async fn type_all(&self, text: &str) {
        for h in &self.handles {
            h.input
                .send(PaneInput::Bytes(text.as_bytes().to_vec()))
                .await
                .unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broadcast_reaches_all_and_a_dropped_node_reconnects() {
    let Some(mut tb) = Testbed::new(8, 0) else { return };
    let mut p = Panes::open(&tb);
    p.until("every pane connected", |p| {
        p.states.iter().all(|s| *s == PaneState::Connected)
    })
    .await;
    p.type_all("echo marker-$((6*7))-$(ip -4 -o addr show eth0 | awk '{print $4}')\n")
        .await;
    p.until("the echo on every pane", |p| {
        (0..8).all(|i| p.text(i).contains(&format!("marker-42-{}/24", tb.nodes[i].addr)))
    })
    .await;

    tb.kill_sshd(3);
    p.until("pane 3 lost", |p| {
        matches!(p.states[3], PaneState::Lost(_) | PaneState::Reconnecting { .. })
    })
    .await;
    // The others keep working meanwhile.
    p.handles[5]
        .input
        .send(PaneInput::Bytes(b"echo still-alive\n".to_vec()))
        .await
        .unwrap();
    p.until("pane 5 answering", |p| p.text(5).contains("still-alive"))
        .await;
    assert!(
        p.states
            .iter()
            .enumerate()
            .all(|(i, s)| i == 3 || *s == PaneState::Connected),
        "{:?}",
        p.states
    );

    tb.start_sshd(3);
    p.until("pane 3 back", |p| p.states[3] == PaneState::Connected)
        .await;
    p.handles[3]
        .input
        .send(PaneInput::Bytes(b"echo back-again\n".to_vec()))
        .await
        .unwrap();
    p.until("pane 3 answering", |p| p.text(3).contains("back-again"))
        .await;
    // The pane says its shell is a new one, in its own scrollback.
    let lines = flightdeck::term::snapshot_lines(&p.screens[3]);
    assert!(
        lines
            .iter()
            .any(|l| l.contains("[flightdeck] connection lost") && l.contains("the next shell is a new one")),
        "{lines:?}"
    );
    for h in &p.handles {
        h.input.send(PaneInput::Close).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_utf8_and_a_megabyte_line_do_not_break_a_pane() {
    let Some(tb) = Testbed::new(1, 0) else { return };
    let mut p = Panes::open(&tb);
    p.until("connected", |p| p.states[0] == PaneState::Connected)
        .await;
    p.type_all("head -c 1000000 /dev/zero | tr '\\0' x; printf '\\377\\376\\n'; echo after-$((1+1))\n")
        .await;
    p.until("the pane still answering", |p| p.text(0).contains("after-2"))
        .await;
    let lines = term::snapshot_lines(&p.screens[0]);
    assert!(
        lines.iter().all(|l| l.len() <= flightdeck::exec::MAX_LINE),
        "scrollback lines are capped"
    );
    // Resize reaches the remote shell.
    p.handles[0]
        .input
        .send(PaneInput::Resize { cols: 77, rows: 11 })
        .await
        .unwrap();
    p.type_all("stty size\n").await;
    p.until("the new size", |p| p.text(0).contains("11 77")).await;
}
