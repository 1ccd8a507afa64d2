//! The Doctor view: a node × check matrix (one mark per cell, the worst finding) above the
//! problems, worst first, each cause followed by what follows from it; Enter shows the
//! selected finding's evidence and fix in place of the matrix.
//!
//! ```text
//! ┌ Doctor · lab · 4 nodes · 2 checks failed, 1 warned, 40 passed, 8 skipped · 23.4 s ┐
//! │node    gp ve nv ec xi ck pe pr ni rd gd en in sy nu tm re pl                   │
//! │lab-2   ✓  ✓  ✓  ✓  ✗  ✓  ✓  ✓  ✗  ·  ·  ✓  ✓  !  ·  ✓  ✗  ·                   │
//! │lab-0   ✓  ✓  ✓  ✓  ✓  ✓  ✓  ✓  ✓  ·  ·  ✓  ✓  !  ·  ✓  ✓  ·                   │
//! │✓ 30 pass  ! 2 warn  ✗ 2 fail  · 8 skipped  - not checked  ? names the columns│
//! ├ Problems (2) ─────────────────────────────────────────────────────────────────┤
//! │FAIL lab-2   nics    eth2 down                                                 │
//! │  └  lab-2   reach   eth2 unreachable: no reply on eth2 to or from its 3 peers   │
//! └───────────────────────────────────────────────────────────────────────────────┘
//! ```

use crate::doctor::{Finding, Outcome, CHECKS};
use crate::tui::doctor::DoctorView;
use crate::tui::state::State;
use crate::tui::theme::{Theme, Tone};
use crate::tui::widgets::shown;
use crate::words::truncate;
use crate::words::wrap_words;
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Widget};

/// The grid's column heads: every check's name when they fit in `width` after the
/// node names (`name_w`), else its two letters ([`crate::doctor::CheckDef::short`];
/// `?` lists them). Each with its column's width.
fn heads(name_w: usize, width: usize) -> Vec<(&'static str, usize)> {
    let full: usize = CHECKS.iter().map(|c| c.id.len() + 1).sum();
    if name_w + 1 + full <= width {
        CHECKS.iter().map(|c| (c.id, c.id.len())).collect()
    } else {
        CHECKS.iter().map(|c| (c.short, c.short.len())).collect()
    }
}

fn tone(o: Outcome) -> Tone {
    match o {
        Outcome::Pass => Tone::Pass,
        Outcome::Skip => Tone::Info,
        Outcome::Warn => Tone::Warn,
        Outcome::Fail => Tone::Fail,
    }
}

/// A cell's mark: nothing found yet is waiting while the doctor runs, and not checked
/// once it has ended (a node that never answered, a check that did not run on it).
fn mark(o: Option<Outcome>, running: bool) -> &'static str {
    match o {
        Some(Outcome::Pass) => "✓",
        Some(Outcome::Warn) => "!",
        Some(Outcome::Fail) => "✗",
        Some(Outcome::Skip) => "·",
        None if running => "…",
        None => "-",
    }
}

pub fn render(state: &State, theme: &Theme, area: Rect, buf: &mut Buffer) {
    if area.is_empty() {
        return;
    }
    let v = &state.doctor;
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.border(true))
        .title(Span::styled(title(v, usize::from(area.width)), theme.title()))
        .style(theme.base());
    let inner = block.inner(area);
    block.render(area, buf);
    let Some(fleet) = v.fleet.as_deref() else {
        let hint = match crate::tui::shell::fleet::current(state) {
            Some(f) => format!(
                "r examines every node of {} ({}).",
                f.name,
                crate::words::plural(f.nodes.len(), "node")
            ),
            None => "Select a fleet in Fleets (2), then r here.".to_string(),
        };
        Paragraph::new(vec![
            Line::raw("The doctor checks every node at once: GPUs, driver and NCCL versions,"),
            Line::raw("NVLink, ECC, Xid, clocks, NICs and MTUs, RDMA, the GPUDirect stack, NCCL"),
            Line::raw("variables, TCP buffers, NUMA, clocks, reachability on every data NIC and"),
            Line::raw("placement, and names the cause first."),
            Line::raw(""),
            Line::styled(hint, theme.accent()),
        ])
        .render(inner, buf);
        return;
    };
    if let Some(e) = &v.error {
        Paragraph::new(vec![
            Line::styled(
                format!("The doctor could not examine {fleet}:"),
                theme.tone(Tone::Fail),
            ),
            Line::raw(shown(e).into_owned()),
            Line::raw(""),
            Line::styled("r tries again.", theme.accent()),
        ])
        .render(inner, buf);
        return;
    }
    let filter = state.filter();
    let rows = v.rows(filter);
    // The matrix: a header, a row per node shown, the legend.
    let nodes = ordered_nodes(v);
    let room = inner.height.saturating_sub(5) / 2;
    let shown = nodes.len().min(room.max(1) as usize);
    let matrix_h = (shown + 2 + usize::from(nodes.len() > shown)) as u16;
    let [top, rest] = Layout::vertical([Constraint::Length(matrix_h), Constraint::Min(1)]).areas(inner);
    if v.detail {
        if let Some((_, f)) = rows.get(v.selected) {
            render_detail(
                f,
                v,
                theme,
                Rect {
                    height: inner.height,
                    ..inner
                },
                buf,
            );
            return;
        }
    }
    render_matrix(v, &nodes[..shown], nodes.len(), theme, top, buf);
    render_list(v, &rows, theme, rest, buf);
}

/// The view's title in `width` columns: the fleet, its nodes, the checks counted as the
/// CLI counts them, the progress or the time; on a narrow screen the node count, then
/// the time give way first (the counts are what is read).
fn title(v: &DoctorView, width: usize) -> String {
    let Some(fleet) = v.fleet.as_deref() else {
        return " Doctor ".to_string();
    };
    let nodes = (!v.report.nodes.is_empty()).then(|| crate::words::plural(v.report.nodes.len(), "node"));
    // The findings counted as `flightdeck doctor` counts them (a check on a node, or on
    // the fleet, is one), so the view and the CLI say the same numbers.
    let counts = (!v.report.findings.is_empty())
        .then(|| crate::doctor::tally(v.report.findings.iter().map(|f| f.outcome)));
    let when = match (&v.progress, v.running) {
        (Some(p), true) => Some(p.clone()),
        (None, true) => Some("starting".to_string()),
        _ if v.report.elapsed_ms > 0 => Some(format!("{:.1} s", v.report.elapsed_ms as f64 / 1000.0)),
        _ => None,
    };
    let join = |parts: &[&Option<String>]| {
        let mut t = format!(" Doctor · {fleet}");
        for p in parts.iter().filter_map(|p| p.as_ref()) {
            t.push_str(&format!(" · {p}"));
        }
        t + " "
    };
    let choices = [
        join(&[&nodes, &counts, &when]),
        join(&[&counts, &when]),
        join(&[&counts]),
    ];
    let fits = |t: &String| t.chars().count() + 2 <= width;
    choices.iter().find(|t| fits(t)).unwrap_or(&choices[2]).clone()
}

/// Nodes worst first, then in their order.
fn ordered_nodes(v: &DoctorView) -> Vec<&str> {
    let worst = |n: &str| {
        v.report
            .findings
            .iter()
            .filter(|f| f.node.as_deref() == Some(n))
            .map(|f| f.outcome)
            .max()
            .unwrap_or(Outcome::Pass)
    };
    let mut nodes: Vec<&str> = v.report.nodes.iter().map(String::as_str).collect();
    nodes.sort_by_key(|n| std::cmp::Reverse(worst(n)));
    nodes
}

fn render_matrix(v: &DoctorView, nodes: &[&str], total: usize, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let name_w = nodes
        .iter()
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(4)
        .clamp(4, 16);
    let mut lines = vec![];
    let heads = heads(name_w, usize::from(area.width));
    let mut head = vec![Span::styled(
        format!("{:<w$} ", "node", w = name_w),
        theme.muted(),
    )];
    for (h, _) in &heads {
        head.push(Span::styled(format!("{h} "), theme.muted()));
    }
    lines.push(Line::from(head));
    for n in nodes {
        let mut spans = vec![Span::raw(format!("{:<w$} ", truncate(n, name_w), w = name_w))];
        for (c, (_, w)) in CHECKS.iter().zip(&heads) {
            let o = v.cell(n, c.id);
            let style = match o {
                Some(o) => theme.tone(tone(o)),
                None => theme.muted(),
            };
            // Under its head's first letter.
            spans.push(Span::styled(
                format!("{:<w$} ", mark(o, v.running), w = *w),
                style,
            ));
        }
        lines.push(Line::from(spans));
    }
    if total > nodes.len() {
        lines.push(Line::styled(
            format!("+{} more nodes (worst first above)", total - nodes.len()),
            theme.muted(),
        ));
    }
    let mut legend = legend(v);
    if heads.first().is_some_and(|(h, _)| *h != CHECKS[0].id) {
        legend.push_str("  ? names the columns");
    }
    lines.push(Line::styled(legend, theme.muted()));
    Paragraph::new(lines).render(area, buf);
}

/// The marks' legend, each with how many cells of the whole grid bear it (a fleet
/// finding marks every node's cell): what the eye adds up, where the title counts checks
/// as `flightdeck doctor` does.
fn legend(v: &DoctorView) -> String {
    let cells: Vec<Outcome> = v
        .report
        .nodes
        .iter()
        .flat_map(|n| CHECKS.iter().filter_map(move |c| v.cell(n, c.id)))
        .collect();
    let count = |o: Outcome| cells.iter().filter(|&&c| c == o).count();
    let mut out = format!(
        "✓ {} pass  ! {} warn  ✗ {} fail  · {} skipped",
        count(Outcome::Pass),
        count(Outcome::Warn),
        count(Outcome::Fail),
        count(Outcome::Skip)
    );
    out.push_str(if v.running {
        "  … waiting"
    } else {
        "  - not checked"
    });
    out
}

fn render_list(v: &DoctorView, rows: &[(usize, &Finding)], theme: &Theme, area: Rect, buf: &mut Buffer) {
    let word = if v.all { "Findings" } else { "Problems" };
    let block = Block::default()
        .borders(Borders::TOP)
        .border_style(theme.border(false))
        .title(Span::styled(format!(" {word} ({}) ", rows.len()), theme.title()));
    let inner = block.inner(area);
    block.render(area, buf);
    if rows.is_empty() {
        let text = if v.running {
            "none so far".to_string()
        } else if v.all {
            "no finding".to_string()
        } else {
            "no problem found (v lists every finding)".to_string()
        };
        Paragraph::new(Line::styled(text, theme.tone(Tone::Pass))).render(inner, buf);
        return;
    }
    let h = inner.height as usize;
    let first = v.selected.saturating_sub(h.saturating_sub(1));
    let node_w = rows
        .iter()
        .map(|(_, f)| f.node.as_deref().unwrap_or("fleet").chars().count())
        .max()
        .unwrap_or(5)
        .min(16);
    let mut lines = vec![];
    for (i, (depth, f)) in rows.iter().enumerate().skip(first).take(h) {
        let lead = if *depth == 0 {
            format!("{:<4} ", f.outcome.as_str().to_uppercase())
        } else {
            "  └  ".to_string()
        };
        let head = format!(
            "{lead}{:<nw$} {:<9} ",
            truncate(f.node.as_deref().unwrap_or("fleet"), node_w),
            f.check,
            nw = node_w
        );
        let rest = (inner.width as usize).saturating_sub(head.chars().count());
        let mut line = Line::from(vec![
            Span::styled(head, theme.tone(tone(f.outcome))),
            Span::raw(truncate(&shown(&f.what), rest)),
        ]);
        if i == v.selected {
            line = line.style(theme.accent().add_modifier(ratatui::style::Modifier::REVERSED));
        }
        lines.push(line);
    }
    Paragraph::new(lines).render(inner, buf);
}

fn render_detail(f: &Finding, v: &DoctorView, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let w = area.width.max(10) as usize;
    let mut lines = vec![Line::from(vec![
        Span::styled(
            format!(
                "{} {} ",
                f.outcome.as_str().to_uppercase(),
                f.node.as_deref().unwrap_or("fleet")
            ),
            theme.tone(tone(f.outcome)),
        ),
        Span::styled(f.check, theme.title()),
    ])];
    for l in wrap_words(&shown(&f.what), w) {
        lines.push(Line::raw(l));
    }
    if let Some(c) = &f.follows {
        lines.push(Line::styled(format!("follows from: {c}"), theme.tone(Tone::Warn)));
    }
    let key = f.key();
    let after: Vec<String> = v
        .report
        .findings
        .iter()
        .filter(|x| x.follows.as_deref() == Some(key.as_str()))
        .map(|x| {
            let what = shown(&x.what);
            format!("{} {}: {what}", x.node.as_deref().unwrap_or("fleet"), x.check)
        })
        .collect();
    for a in after {
        lines.push(Line::styled(
            truncate(&format!("leads to: {a}"), w),
            theme.muted(),
        ));
    }
    if !f.fix.is_empty() {
        lines.push(Line::styled("Fix", theme.title()));
        for l in wrap_words(&f.fix, w.saturating_sub(2)) {
            lines.push(Line::styled(format!("  {l}"), theme.accent()));
        }
    }
    if let Some(def) = crate::doctor::check_def(f.check) {
        lines.push(Line::styled(
            truncate(&format!("{}: {}", def.id, def.explain), w),
            theme.muted(),
        ));
    }
    if !f.evidence.is_empty() {
        lines.push(Line::styled("Evidence", theme.title()));
        for e in &f.evidence {
            lines.push(Line::raw(truncate(&format!("  {}", shown(e)), w)));
        }
    }
    Paragraph::new(lines).render(area, buf);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two walks' disagreements: the title counted findings while the matrix shows a
    /// mark per node and check; then the title counted marks and disagreed with the CLI.
    /// Now the title counts checks in the CLI's words (`doctor::tally`), the legend
    /// counts the marks beside each mark.
    #[test]
    fn the_title_counts_as_the_cli_and_the_legend_counts_the_marks() {
        let v = DoctorView {
            fleet: Some("lab".into()),
            report: crate::tui::doctor::tests::report(),
            ..DoctorView::default()
        };
        let mut marks = std::collections::BTreeMap::<Outcome, usize>::new();
        for n in &v.report.nodes {
            for c in CHECKS {
                if let Some(o) = v.cell(n, c.id) {
                    *marks.entry(o).or_default() += 1;
                }
            }
        }
        let n = |o: Outcome| marks.get(&o).copied().unwrap_or(0);
        // lab-2's nics fail and reach fail, lab-0's sysctl warning; gpus and nics pass
        // elsewhere, and the fleet's reach pass marks lab-0 and lab-1.
        assert_eq!((n(Outcome::Fail), n(Outcome::Warn), n(Outcome::Pass)), (2, 1, 7));
        assert!(
            legend(&v).starts_with("✓ 7 pass  ! 1 warn  ✗ 2 fail  · 0 skipped"),
            "{}",
            legend(&v)
        );
        let cli = crate::doctor::tally(v.report.findings.iter().map(|f| f.outcome));
        assert!(
            title(&v, 200).contains(&format!(" · {cli}")),
            "{}",
            title(&v, 200)
        );
        assert!(title(&v, 60).contains(&format!(" · {cli}")), "{}", title(&v, 60));
        assert!(cli.contains("checks failed"), "{cli}");
    }

    /// ux-walk-2 item 10: every check has its column (the grid had 17 heads for 18
    /// checks), full names when they fit, two unique letters otherwise.
    #[test]
    fn every_check_has_a_column_named_when_it_fits() {
        let short = heads(8, 80);
        assert_eq!(short.len(), CHECKS.len());
        let mut letters: Vec<&str> = short.iter().map(|(h, _)| *h).collect();
        letters.sort_unstable();
        letters.dedup();
        assert_eq!(letters.len(), CHECKS.len(), "unique: {letters:?}");
        let full = heads(8, 200);
        assert_eq!(full[5].0, "clocks");
        assert_eq!(full[15].0, "clock");
    }
}
