//! `flightdeck nccl parse FILE|- [--json]`: read nccl-tests output (a file, or stdin with
//! `-`) through the streaming parser and print an aligned table with a summary line, or
//! the JSON document of DESIGN.md.

use crate::nccl::{Parser, Report, Row};
use std::fs::File;
use std::io::{self, Read, Write};
use std::process::ExitCode;

/// Why `nccl parse` failed.
#[derive(Debug, thiserror::Error)]
pub enum NcclParseError {
    #[error("nccl parse: cannot read {name}")]
    Read {
        name: String,
        #[source]
        source: io::Error,
    },
    #[error("nccl parse: {name} is not nccl-tests output (no result rows and no column header found)")]
    NotNcclTests { name: String },
}

/// Run `nccl parse`.
pub fn parse(file: &str, json: bool) -> anyhow::Result<ExitCode> {
    let reports = read_reports(file)?;
    let text = if json {
        json_text(&reports)?
    } else {
        reports.iter().map(table).collect::<Vec<_>>().join("\n")
    };
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// Stream `file` (or stdin for `-`) through the parser; the tests it holds.
fn read_reports(file: &str) -> Result<Vec<Report>, NcclParseError> {
    let name = if file == "-" {
        "stdin".to_string()
    } else {
        file.to_string()
    };
    let read_error = |source| NcclParseError::Read {
        name: name.clone(),
        source,
    };
    let mut reader: Box<dyn Read> = if file == "-" {
        Box::new(io::stdin().lock())
    } else {
        Box::new(File::open(file).map_err(read_error)?)
    };
    let mut parser = Parser::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                parser.push_bytes(&buf[..n]);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(read_error(e)),
        }
    }
    parser.finish();
    let reports: Vec<Report> = parser
        .reports()
        .into_iter()
        .filter(Report::is_nccl_tests)
        .collect();
    if reports.is_empty() {
        return Err(NcclParseError::NotNcclTests { name });
    }
    Ok(reports)
}

/// One document for one test (the DESIGN.md contract); an array of them when the input
/// held several tests.
fn json_text(reports: &[Report]) -> serde_json::Result<String> {
    let mut text = match reports {
        [one] => serde_json::to_string_pretty(&one.document())?,
        many => serde_json::to_string_pretty(&many.iter().map(Report::document).collect::<Vec<_>>())?,
    };
    text.push('\n');
    Ok(text)
}

pub use crate::nccl::human_size;

/// A figure the way nccl-tests prints it: two decimals if they fit in `width`, then one,
/// then none.
fn figure(v: f64, width: usize) -> String {
    if !v.is_finite() {
        return v.to_string();
    }
    for decimals in [2, 1, 0] {
        let s = format!("{v:.decimals$}");
        if s.len() <= width {
            return s;
        }
    }
    format!("{v:.0}")
}

fn wrong_text(w: Option<f64>) -> String {
    match w {
        None => "N/A".to_string(),
        Some(v) if v.fract() == 0.0 => format!("{v:.0}"),
        Some(v) => format!("{v:e}"),
    }
}

const COLUMNS: [&str; 13] = [
    "size", "count", "type", "redop", "root", "time(us)", "algbw", "busbw", "wrong", "time(us)", "algbw",
    "busbw", "wrong",
];

fn cells(row: &Row) -> Vec<String> {
    let mut c = vec![
        human_size(row.size),
        row.count.to_string(),
        row.dtype.clone(),
        row.redop.clone(),
        row.root.map_or_else(|| "-".to_string(), |r| r.to_string()),
    ];
    for half in [&row.out_of_place, &row.in_place] {
        match half {
            Some(m) => c.extend([
                figure(m.time_us, 7),
                figure(m.algbw, 6),
                figure(m.busbw, 6),
                wrong_text(m.wrong),
            ]),
            None => c.extend(["-", "-", "-", "-"].map(String::from)),
        }
    }
    c
}

/// The aligned table and the summary line of one test.
pub fn table(report: &Report) -> String {
    let body: Vec<Vec<String>> = report.rows.iter().map(cells).collect();
    let mut widths: Vec<usize> = COLUMNS.iter().map(|h| h.len()).collect();
    for row in &body {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let gap = "  ";
    let line = |cells: &[String]| -> String {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:>w$}"))
            .collect();
        padded.join(gap).trim_end().to_string() + "\n"
    };
    let span = |from: usize, to: usize| widths[from..to].iter().sum::<usize>() + gap.len() * (to - from - 1);
    let prefix = span(0, 5);
    let (oop, ip) = (span(5, 9), span(9, 13));
    let mut out = format!(
        "{:prefix$}{gap}{:^oop$}{gap}{:^ip$}",
        "", "out-of-place", "in-place"
    )
    .trim_end()
    .to_string();
    out.push('\n');
    out.push_str(&line(&COLUMNS.map(String::from)));
    for row in &body {
        out.push_str(&line(row));
    }
    out.push('\n');
    out.push_str(&summary(report));
    out.push('\n');
    out
}

/// `collective all_reduce, ranks 2, NCCL 2.28.9, transport NVLink P2P, avg busbw ...`.
pub fn summary(report: &Report) -> String {
    let unknown = || "unknown".to_string();
    let mut parts = vec![
        format!("collective {}", report.collective.clone().unwrap_or_else(unknown)),
        format!("ranks {}", report.ranks().map_or_else(unknown, |r| r.to_string())),
        format!("NCCL {}", report.nccl_version.clone().unwrap_or_else(unknown)),
        format!(
            "transport {}",
            match (&report.transport, report.transport_summary()) {
                (_, Some(t)) => t,
                (None, None) => "unknown (no NCCL_DEBUG=INFO lines)".to_string(),
                (Some(_), None) => unknown(),
            }
        ),
        format!(
            "avg busbw {}",
            report.avg_busbw.map_or_else(unknown, |b| format!("{b} GB/s"))
        ),
        format!(
            "peak busbw {}",
            report.peak_row().map_or_else(unknown, |r| {
                let bw = r.out_of_place.as_ref().map_or(f64::NAN, |m| m.busbw);
                format!("{bw} GB/s at {}", human_size(r.size))
            })
        ),
        format!("{} rows", report.rows.len()),
    ];
    if let Some(oob) = report.out_of_bounds.filter(|o| !o.ok || o.count > 0) {
        parts.push(format!("OUT OF BOUNDS VALUES {} FAILED", oob.count));
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_sizes() {
        for (bytes, want) in [
            (0, "0B"),
            (8, "8B"),
            (1000, "1000B"),
            (1024, "1K"),
            (1536, "1.5K"),
            (8 << 20, "8M"),
            (1 << 30, "1G"),
            (8589934592, "8G"),
            (3 << 40, "3T"),
            ((1 << 20) + 1, "1M"),
        ] {
            assert_eq!(human_size(bytes), want, "{bytes}");
        }
    }

    #[test]
    fn figures_as_nccl_tests_prints_them() {
        assert_eq!(figure(13.34, 7), "13.34");
        assert_eq!(figure(24704.0, 7), "24704.0");
        assert_eq!(figure(1412.5, 7), "1412.50");
        assert_eq!(figure(123456.0, 7), "123456");
        assert_eq!(figure(347.71, 6), "347.71");
        assert_eq!(figure(0.0, 6), "0.00");
        assert_eq!(wrong_text(None), "N/A");
        assert_eq!(wrong_text(Some(0.0)), "0");
        assert_eq!(wrong_text(Some(2e-7)), "2e-7");
    }

    #[test]
    fn table_is_aligned() {
        let text = include_str!("../../tests/fixtures/nccl/h200x2-alltoall.txt");
        let reports = crate::nccl::parse_text(text);
        let t = table(&reports[0]);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].contains("out-of-place") && lines[0].contains("in-place"));
        assert!(lines[1].trim_start().starts_with("size"));
        // Every row line ends at the same column as the header.
        let width = lines[1].len();
        for l in &lines[2..33] {
            assert_eq!(l.len(), width, "{l}");
        }
        assert!(lines[32].trim_start().starts_with("8G"));
        assert!(lines[32].ends_with("N/A"));
        assert_eq!(
            lines[34],
            "collective alltoall, ranks 2, NCCL 2.28.9, transport unknown (no NCCL_DEBUG=INFO lines), \
             avg busbw 103.213 GB/s, \
             peak busbw 338.58 GB/s at 8G, 31 rows"
        );
    }
}
