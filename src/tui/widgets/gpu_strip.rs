//! The GPU strip of the NICs view: per GPU, a utilisation sparkline (0..100 %) and a
//! power sparkline (0..the power limit), with the latest figures.
//!
//! ```text
//! GPU0  util ▄▅▆▇██▄▅▆▇ 97%  power ▃▄▅▆▇▃▄▅▆▇ 650 W     (roomy: a row per GPU)
//! g0 ▅▆█▅▆█ 40% ▅▆▇▅▆▇ 200W  g1 ▆▇█▆▇█ 49% ▅▇▇▅▇▇ 275W (packed)
//! ```

use super::rate_chart::spark;
use crate::telemetry::series::{Metric, NodeSeries, SeriesKey};
use crate::tui::theme::Theme;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};

/// Utilisation and power sparklines per GPU: a row each when roomy, packed when not.
pub struct GpuStrip<'a> {
    pub node: &'a NodeSeries,
    pub gpus: &'a [u32],
    /// The window, `(from, to]` in store ms.
    pub from: u32,
    pub to: u32,
    /// A row per GPU (else several GPUs to a row, `per_row` of them).
    pub roomy: bool,
    pub per_row: usize,
    pub theme: &'a Theme,
}

impl Widget for GpuStrip<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let (t, node, gpus) = (self.theme, self.node, self.gpus);
        let (from, to, roomy) = (self.from, self.to, self.roomy);
        let per_row = self.per_row.max(1);
        let last = |g: u32, m: Metric, w: usize| -> (Vec<f32>, f64) {
            match node.series(&SeriesKey::gpu(g, m)) {
                Some(s) => {
                    let (values, stats) = s.summary(from, to, w);
                    (values, stats.current)
                }
                None => (vec![f32::NAN; w], f64::NAN),
            }
        };
        let limit = |g: u32| {
            node.gpus
                .get(&g)
                .and_then(|l| l.info.as_ref())
                .and_then(|i| i.power_limit_w)
                .unwrap_or(0.0)
        };
        let num = |x: f64, unit: &str| {
            if x.is_finite() {
                format!("{x:>3.0}{unit}")
            } else {
                format!("  -{unit}")
            }
        };
        let mut lines: Vec<Line> = Vec::new();
        if roomy {
            // GPU0 util ▁▂▅ 97%  power ▁▂▅ 650 W
            let w = usize::from(area.width).saturating_sub(30) / 2;
            for &g in gpus {
                let (u, uc) = last(g, Metric::GpuUtil, w);
                let (p, pc) = last(g, Metric::GpuPower, w);
                lines.push(Line::from(vec![
                    Span::styled(format!("GPU{g:<2} util "), t.muted()),
                    Span::styled(spark(&u, 100.0), t.rx()),
                    Span::raw(format!(" {}  ", num(uc, "%"))),
                    Span::styled("power ", t.muted()),
                    Span::styled(spark(&p, limit(g)), t.tx()),
                    Span::raw(format!(" {}", num(pc, " W"))),
                ]));
            }
        } else {
            // g0 ▂▃▅▇▇▇▇▇ 97% ▂▃▅▇▇▇▇▇ 650W, several to a row
            for chunk in gpus.chunks(per_row) {
                let mut spans = vec![];
                for &g in chunk {
                    let (u, uc) = last(g, Metric::GpuUtil, 6);
                    let (p, pc) = last(g, Metric::GpuPower, 6);
                    spans.push(Span::styled(format!("g{g:<2}"), t.muted()));
                    spans.push(Span::styled(spark(&u, 100.0), t.rx()));
                    spans.push(Span::raw(format!("{} ", num(uc, "%"))));
                    spans.push(Span::styled(spark(&p, limit(g)), t.tx()));
                    spans.push(Span::raw(format!(" {}  ", num(pc, "W"))));
                }
                lines.push(Line::from(spans));
            }
        }
        Paragraph::new(lines).render(area, buf);
    }
}
