//! The Nodes view: the nodes of the fleet with open panes, or of the selected fleet
//! (a GKE fleet's pools, nodes and Kueue workloads).

pub mod msg;
pub mod update;
pub mod view;

pub use msg::Msg;
pub use update::{act, update};
pub use view::{listed_nodes, node_view};

/// The Nodes view's state: the selected node and each GKE fleet's last snapshot.
#[derive(Debug, Clone, Default)]
pub struct NodesView {
    /// The selected node (by name), and whether its details show.
    pub selected: Option<String>,
    pub detail: bool,
    /// Each GKE fleet's last snapshot (pools, nodes, Kueue), or why it could not be read.
    pub gke: std::collections::BTreeMap<String, Result<Box<crate::cloud::gke::view::Snapshot>, String>>,
}

#[cfg(test)]
mod tests {
    use crate::store::FleetRecord;
    use crate::tui::keymap::Keymap;
    use crate::tui::state::{Command, Msg, State, View};
    use crate::tui::update::update;
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

    fn key(s: &mut State, c: KeyCode) -> Vec<Command> {
        update(s, Msg::Key(KeyEvent::new(c, KeyModifiers::NONE)))
    }

    #[test]
    fn the_nodes_view_pages_through_1024_nodes_and_draws_only_the_page() {
        let nodes: Vec<crate::fleet::NodeTarget> = (0..1024)
            .map(|i| crate::fleet::NodeTarget {
                index: i,
                name: format!("big-{i}"),
                internal_ip: None,
                address: crate::fleet::Address::Ssh(crate::fleet::SshAddress {
                    host: format!("10.1.{}.{}", i / 256, i % 256),
                    port: None,
                    user: Some("root".into()),
                    identity_file: None,
                    proxy_jump: None,
                }),
            })
            .collect();
        let mut s = State::new(Keymap::defaults(), vec![], "dark".into());
        s.view = View::Fleets;
        let record = FleetRecord {
            name: "big".into(),
            backend: crate::fleet::BackendKind::Ssh,
            file: None,
            nodes,
            resources: vec![],
            created_at: 0,
            applied: None,
        };
        update(
            &mut s,
            Msg::Fleets(crate::tui::fleets::Msg::Loaded(Ok(vec![record]))),
        );
        update(&mut s, Msg::Resize(100, 30));
        s.view = View::Nodes;
        let theme = crate::tui::theme::Theme::default_theme();
        let screen = |s: &State| {
            let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(100, 30)).unwrap();
            t.draw(|f| crate::tui::views::draw(s, &theme, f)).unwrap();
            let b = t.backend().buffer().clone();
            (0..b.area.height)
                .map(|y| (0..b.area.width).map(|x| b[(x, y)].symbol()).collect::<String>())
                .collect::<Vec<_>>()
                .join("\n")
        };
        // 30 rows: tab bar and status bar, borders and header: 25 nodes a page.
        let first = screen(&s);
        assert!(first.contains("rows 1–25 of 1024"), "{first}");
        assert!(first.contains("big-24 ") && !first.contains("big-25 "), "{first}");
        key(&mut s, KeyCode::PageDown);
        assert_eq!(s.nodes.selected.as_deref(), Some("big-25"));
        let second = screen(&s);
        assert!(
            second.contains("rows 26–50 of 1024") && second.contains("big-25 "),
            "{second}"
        );
        key(&mut s, KeyCode::End);
        assert!(screen(&s).contains("rows 1001–1024 of 1024"));
        key(&mut s, KeyCode::PageUp);
        assert_eq!(s.nodes.selected.as_deref(), Some("big-998"));
        // With the `d` panel open a page is the rows shown above it.
        key(&mut s, KeyCode::Home);
        key(&mut s, KeyCode::Char('d'));
        let with_panel = screen(&s);
        let k: usize = with_panel
            .split("rows 1–")
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{with_panel}"));
        assert!(k < 25, "{with_panel}");
        key(&mut s, KeyCode::PageDown);
        assert_eq!(s.nodes.selected, Some(format!("big-{k}")), "{with_panel}");
        let next = screen(&s);
        assert!(next.contains(&format!("rows {}–", k + 1)), "{next}");
        key(&mut s, KeyCode::Char('d'));
        // The filter narrows to a page of its own.
        for c in "/big-51".chars() {
            key(&mut s, KeyCode::Char(c));
        }
        key(&mut s, KeyCode::Enter);
        let filtered = screen(&s);
        assert!(
            filtered.contains("big-511 ") && !filtered.contains("rows "),
            "{filtered}"
        );
    }
}
