//! Unit tests of the nccl-tests parser: real recorded outputs (tests/fixtures/nccl) and
//! synthetic variants of them in every form real logs take.

use super::*;

const ALL_REDUCE: &str = include_str!("../../tests/fixtures/nccl/h200x2-all_reduce.txt");
const ALLTOALL: &str = include_str!("../../tests/fixtures/nccl/h200x2-alltoall.txt");
const DEBUG: &str = include_str!("../../tests/fixtures/nccl/h200x2-all_reduce-nccl-debug.txt");
const GKE: &str = include_str!("../../tests/fixtures/nccl/gke-b200-2node-all_gather.txt");

fn one(text: &str) -> Report {
    let mut reports = parse_text(text);
    assert_eq!(reports.len(), 1, "one test expected");
    reports.remove(0)
}

fn json(r: &Report) -> String {
    serde_json::to_string(&r.document()).unwrap()
}

fn m(time_us: f64, algbw: f64, busbw: f64, wrong: Option<f64>) -> Measurement {
    Measurement {
        time_us,
        algbw,
        busbw,
        wrong,
    }
}

/// Apply `f` to every line of `text`.
fn map_lines(text: &str, f: impl Fn(&str) -> String) -> String {
    text.lines().map(|l| f(l) + "\n").collect()
}

#[test]
fn real_all_reduce_output() {
    let r = one(ALL_REDUCE);
    assert_eq!(r.collective.as_deref(), Some("all_reduce"));
    assert_eq!(r.tests_version.as_deref(), Some("2.19.6"));
    assert_eq!(
        r.nccl_version.as_deref(),
        Some("2.28.9"),
        "decoded from nccl-library=22809"
    );
    assert_eq!((r.threads, r.gpus_per_thread), (Some(1), Some(2)));
    assert_eq!(r.ranks(), Some(2));
    assert_eq!(r.devices[1].name.as_deref(), Some("NVIDIA H200"));
    assert_eq!(r.devices[1].pci.as_deref(), Some("0000:00:07"));
    assert_eq!(r.devices[0].host.as_deref(), Some("vm"));
    assert_eq!(r.rows.len(), 31);
    let last = r.rows.last().unwrap();
    assert_eq!(
        (last.size, last.count, last.dtype.as_str(), last.redop.as_str()),
        (8589934592, 2147483648, "float", "sum")
    );
    assert_eq!(last.root, Some(-1));
    assert_eq!(last.out_of_place, Some(m(24704.0, 347.71, 347.71, Some(0.0))));
    assert_eq!(last.in_place, Some(m(24672.7, 348.16, 348.16, Some(0.0))));
    assert_eq!(r.avg_busbw, Some(112.161));
    assert_eq!(r.peak_busbw(), Some(347.71));
    assert_eq!(r.out_of_bounds, Some(OutOfBounds { count: 0, ok: true }));
    assert!(r.concluded && r.header_seen);
    assert_eq!(r.transport, None);
    assert_eq!(r.transport_summary(), None);
}

#[test]
fn rows_average_to_the_printed_avg_bus_bandwidth() {
    // nccl-tests averages busbw over both halves of every row: a check that no row or
    // column was dropped or shifted.
    for text in [ALL_REDUCE, ALLTOALL, DEBUG, GKE] {
        let r = one(text);
        let bws: Vec<f64> = r
            .rows
            .iter()
            .flat_map(|row| [&row.out_of_place, &row.in_place])
            .map(|m| m.as_ref().unwrap().busbw)
            .collect();
        let mean = bws.iter().sum::<f64>() / bws.len() as f64;
        let printed = r.avg_busbw.unwrap();
        assert!((mean - printed).abs() < 0.01, "mean {mean} vs printed {printed}");
    }
}

#[test]
fn na_wrong_is_none_and_prints_null() {
    let r = one(ALLTOALL);
    assert_eq!(r.collective.as_deref(), Some("alltoall"));
    assert_eq!(r.rows.len(), 31);
    assert_eq!((r.rows[0].size, r.rows[0].count), (0, 0));
    assert_eq!(r.rows[0].redop, "none");
    assert!(r
        .rows
        .iter()
        .all(|row| row.in_place.as_ref().unwrap().wrong.is_none()));
    assert!(r
        .rows
        .iter()
        .all(|row| row.out_of_place.as_ref().unwrap().wrong == Some(0.0)));
    let doc = json(&r);
    assert!(
        doc.contains(r#""in_place":{"time_us":0.56,"algbw":0.0,"busbw":0.0,"wrong":null}"#),
        "{doc}"
    );
    assert!(doc.contains(r#""wrong":0}"#), "{doc}");
}

#[test]
fn debug_fixture_version_transport_and_rows() {
    let r = one(DEBUG);
    assert_eq!(r.nccl_version.as_deref(), Some("2.28.9+cuda13.0"));
    assert_eq!(r.rows.len(), 4);
    assert_eq!(r.rows[0].size, 1048576);
    assert_eq!(r.rows[3].out_of_place.as_ref().unwrap().busbw, 269.57);
    assert_eq!(r.avg_busbw, Some(166.116));
    assert_eq!(r.transport_summary().as_deref(), Some("NVLink P2P"));
    let t = r.transport.as_ref().unwrap();
    assert_eq!((t.nodes, t.nranks), (Some(1), Some(2)));
    assert_eq!(t.selected_net, Some(super::super::Net::Socket));
    assert_eq!(t.inter_node_net(), None, "one node: the network carried nothing");
}

/// NCCL 2.27.7 failing with `NCCL_NET=gIB` and no gIB (composed from its source
/// strings, tests/fixtures/nccl/composed): the banner is read, its WARN lines (a blank
/// line, then a `[date time]` timestamp before the host) are debug lines, not rows, and
/// the plugin NCCL could not find is recorded.
#[test]
fn a_run_that_died_before_its_first_row() {
    let r = one(include_str!(
        "../../tests/fixtures/nccl/composed/nccl2.27.7-rdma-no-gib-all_reduce.txt"
    ));
    assert_eq!(r.collective.as_deref(), Some("all_reduce"));
    assert_eq!(r.nccl_version.as_deref(), Some("2.27.7+cuda12.9"));
    assert_eq!((r.rows.len(), r.header_seen, r.concluded), (0, false, false));
    assert_eq!(r.ranks(), Some(2));
    let t = r.transport.as_ref().unwrap();
    assert_eq!(t.no_plugin_found.as_deref(), Some("libnccl-net.so"));
    assert_eq!(
        t.net_error.as_deref(),
        Some("Failed to initialize any NET plugin")
    );
    assert_eq!((t.plugin.as_deref(), t.selected_net.as_ref()), (None, None));
    assert_eq!(r.transport_summary(), None);
}

/// The same failure recorded for real: `flightdeck nccl run local --profile rdma
/// --no-preflight --env NCCL_SOCKET_IFNAME=lo -g 1` on 1x H100 without gIB (NCCL 2.28.9,
/// nccl-tests v2.19.6; RELIABILITY.md). NCCL's own words are the cause, and the plugin it
/// could not find is recorded.
#[test]
fn a_run_without_gib_recorded_on_an_h100() {
    let text = include_str!("../../tests/fixtures/nccl/h100x1-nccl2.28.9-rdma-profile-no-gib.txt");
    let r = one(text);
    assert_eq!(r.nccl_version.as_deref(), Some("2.28.9+cuda13.0"));
    assert_eq!(r.rows.len(), 0);
    let t = r.transport.as_ref().unwrap();
    assert_eq!(t.no_plugin_found.as_deref(), Some("libnccl-net.so"));
    assert_eq!(
        t.net_error.as_deref(),
        Some("Failed to initialize any NET plugin")
    );
    assert_eq!(
        super::super::remote::failure_cause(text.lines()).as_deref(),
        Some("NCCL WARN Failed to initialize any NET plugin")
    );
}

#[test]
fn gke_fixture_has_no_banner() {
    let r = one(GKE);
    assert_eq!(r.nccl_version.as_deref(), Some("2.26.6+cuda12.8"));
    // No banner names it: the table does (a count per rank, no reduction, the in-place
    // half checked).
    assert_eq!(
        (r.collective.as_deref(), r.collective_from),
        (Some("all_gather"), Some("the table"))
    );
    assert_eq!(r.ranks(), None);
    assert_eq!(r.rows.len(), 24);
    assert_eq!(
        r.rows[23].out_of_place,
        Some(m(21395.0, 401.49, 376.40, Some(0.0)))
    );
    assert_eq!(r.peak_busbw(), Some(376.4));
    assert_eq!(r.avg_busbw, Some(135.094));
}

#[test]
fn document_matches_design_keys_and_order() {
    let doc = json(&one(DEBUG));
    let expected_start = concat!(
        r#"{"collective":"all_reduce","nccl_version":"2.28.9+cuda13.0","ranks":2,"rows":[{"size":1048576,"#,
        r#""count":262144,"type":"float","redop":"sum","root":-1,"#,
        r#""out_of_place":{"time_us":16.96,"algbw":61.83,"busbw":61.83,"wrong":0},"#,
        r#""in_place":{"time_us":15.38,"algbw":68.19,"busbw":68.19,"wrong":0}},"#
    );
    assert!(doc.starts_with(expected_start), "{doc}");
    assert!(
        doc.ends_with(concat!(
            r#""avg_busbw":166.116,"peak_busbw":269.57,"transport":"NVLink P2P","kind":"nccl-tests","#,
            r#""tests_version":"2.19.6","collective_from":"banner","collective_choices":null,"hosts":1,"#,
            r#""finished":true,"cause":null,"#,
            r#""net":{"plugin":null,"plugin_lib":null,"no_plugin_found":"libnccl-net.so","net_error":null,"#,
            r#""selected":"NET/Socket","gdr":false}}"#
        )),
        "{doc}"
    );
}

#[test]
fn launcher_prefixes_give_the_same_report() {
    let plain = json(&one(ALL_REDUCE));
    let prefixes = [
        "[1,0]<stdout>:",
        "[1,0]<stdout>: ",
        "(head, rank=0, pid=123) ",
        "(worker1, rank=1, pid=4567, ip=10.0.0.2) ",
        "0: ",
        "[0] ",
        "[pod/nccl-test-0/nccl] 2026-11-22T01:02:03.456789Z ",
        "(head, rank=0, pid=123) [1,0]<stdout>:",
    ];
    for prefix in prefixes {
        let text = map_lines(ALL_REDUCE, |l| format!("{prefix}{l}"));
        assert_eq!(json(&one(&text)), plain, "prefix {prefix:?}");
    }
    // The debug fixture too: the transport survives the prefixes.
    let plain = json(&one(DEBUG));
    let text = map_lines(DEBUG, |l| format!("[1,0]<stdout>:{l}"));
    assert_eq!(json(&one(&text)), plain);
}

#[test]
fn old_header_forms() {
    let body = "           8             2     float     sum      -1    13.34    0.00    0.00       0    13.87    0.00    0.00       0\n";
    let expected_row = Row {
        size: 8,
        count: 2,
        dtype: "float".into(),
        redop: "sum".into(),
        root: Some(-1),
        out_of_place: Some(m(13.34, 0.0, 0.0, Some(0.0))),
        in_place: Some(m(13.87, 0.0, 0.0, Some(0.0))),
    };
    let no_root_row = Row {
        root: None,
        ..expected_row.clone()
    };
    // (header lines, row line, expected row)
    let cases: Vec<(&str, String, Row)> = vec![
        (
            "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\n",
            body.into(),
            expected_row.clone(),
        ),
        (
            "        size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\n",
            body.into(),
            expected_row.clone(),
        ),
        (
            "#       size         count      type   redop    root     time   algbw   busbw  wrong     time   algbw   busbw  wrong\n",
            body.into(),
            expected_row.clone(),
        ),
        (
            // 2.0 - 2.12: no root column, max error printed as %5.0le.
            "#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n",
            "           8             2     float     sum    13.34    0.00    0.00  0e+00    13.87    0.00    0.00  0e+00\n".into(),
            no_root_row.clone(),
        ),
        (
            // 2017: `bytes N type op`, `res`, N/A printed after a tab.
            "#      bytes             N    type      op     time  algbw  busbw      res     time  algbw  busbw      res\n",
            "           8             2   float     sum    13.34   0.00   0.00  0e+00    13.87   0.00   0.00 \tN/A\n".into(),
            Row {
                in_place: Some(m(13.87, 0.0, 0.0, None)),
                ..no_root_row.clone()
            },
        ),
        (
            // 2024-25 side work: a copybw column in each half.
            "#       size         count      type   redop    root     time   algbw   busbw copybw #wrong     time   algbw   busbw copybw #wrong\n",
            "           8             2     float     sum      -1    13.34    0.00    0.00   1.50      0    13.87    0.00    0.00   1.60      0\n".into(),
            expected_row.clone(),
        ),
        (
            // 2.19 per-iteration report.
            "#       size         count      type   redop    root     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%\n",
            "           8             2     float     sum      -1    13.34    0.00    0.00       0    12.00    15.00    15.00     3.10    13.87    0.00    0.00       0    12.50    16.00    16.00     2.20\n".into(),
            expected_row.clone(),
        ),
        (
            // -S 1: a timestamp after the in-place half.
            "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong           timestamp\n",
            "           8             2     float     sum      -1    13.34    0.00    0.00       0    13.87    0.00    0.00       0 2026-11-22 01:02:03\n".into(),
            expected_row.clone(),
        ),
        (
            // cputime instead of time (-C 1).
            "#       size         count      type   redop    root  cputime   algbw   busbw  #wrong  cputime   algbw   busbw  #wrong\n",
            body.into(),
            expected_row.clone(),
        ),
        (
            // Trace replay: only the in-place half.
            "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\n",
            "           8             2     float     sum      -1                                    13.87    0.00    0.00       0\n".into(),
            Row {
                out_of_place: None,
                ..expected_row.clone()
            },
        ),
        (
            // No header at all (log cut): the row alone, with and without root.
            "",
            body.into(),
            expected_row.clone(),
        ),
        (
            "",
            "           8             2     float     sum    13.34    0.00    0.00       0    13.87    0.00    0.00       0\n".into(),
            no_root_row.clone(),
        ),
        (
            // Broadcast: a real root.
            "",
            "           8             2     float    none       0    13.34    0.00    0.00       0    13.87    0.00    0.00       0\n".into(),
            Row {
                redop: "none".into(),
                root: Some(0),
                ..expected_row.clone()
            },
        ),
    ];
    for (header, row_line, want) in cases {
        let text = format!("# nThread 1 nGpus 2\n{header}{row_line}# Avg bus bandwidth    : 0.1\n");
        let r = one(&text);
        assert_eq!(r.rows, vec![want], "header {header:?}\nrow {row_line:?}");
        assert_eq!(r.header_seen, !header.is_empty());
        assert!(r.is_nccl_tests());
    }
}

#[test]
fn unhashed_old_banner_lines() {
    // Before 2.11 the config line and the footer had no `#`.
    let text = "nThread 1 nGpus 8 minBytes 8 maxBytes 128 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n\
                #   Rank  0 Pid  12 on     node-a device  0 [0x07] Tesla V100-SXM2-16GB\n\
                #   Rank  1 on node-a device  1 [0x08] Tesla V100-SXM2-16GB\n\
                #\n\
                #                                                     out-of-place                       in-place\n\
                #       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n\
                #        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n\
                           8             2   float     sum    10.00    0.00    0.00  2e-07    10.10    0.00    0.00  0e+00\n\
                 Out of bounds values : 0 OK\n\
                 Avg bus bandwidth    : 0.00 \n";
    let r = one(text);
    assert_eq!((r.threads, r.gpus_per_thread), (Some(1), Some(8)));
    assert_eq!(r.ranks(), Some(2));
    assert_eq!(r.devices[0].name.as_deref(), Some("Tesla V100-SXM2-16GB"));
    assert_eq!(r.devices[0].pci.as_deref(), Some("0x07"));
    assert_eq!(r.rows.len(), 1);
    assert_eq!(r.rows[0].out_of_place.as_ref().unwrap().wrong, Some(2e-7));
    assert_eq!(r.out_of_bounds, Some(OutOfBounds { count: 0, ok: true }));
    assert_eq!(r.avg_busbw, Some(0.0));
    let doc = json(&r);
    assert!(
        doc.contains(r#""wrong":2e-7"#) && doc.contains(r#""root":null"#),
        "{doc}"
    );
}

#[test]
fn chunks_of_any_size_give_the_same_report() {
    for text in [ALL_REDUCE, DEBUG, GKE] {
        let whole = one(text);
        for size in [1, 2, 3, 5, 7, 13, 64, 100, 4096] {
            let mut p = Parser::new();
            let mut rows = 0;
            for chunk in text.as_bytes().chunks(size) {
                rows += p
                    .push_bytes(chunk)
                    .iter()
                    .filter(|e| matches!(e, Event::Row(_)))
                    .count();
            }
            p.finish();
            assert_eq!(rows, whole.rows.len(), "chunk size {size}");
            assert_eq!(p.report(), whole, "chunk size {size}");
        }
    }
}

#[test]
fn a_row_split_across_chunks_is_delivered_when_its_newline_arrives() {
    let mut p = Parser::new();
    p.push_str("#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\n");
    assert!(p
        .push_str("     1048576        262144     float     sum")
        .is_empty());
    assert!(p.push_str("      -1    16.96   61.83   61.8").is_empty());
    let events = p.push_str("3       0    15.38   68.19   68.19       0\n   4194304");
    assert_eq!(events.len(), 1);
    match &events[0] {
        Event::Row(row) => {
            assert_eq!(row.size, 1048576);
            assert_eq!(row.out_of_place.as_ref().unwrap().busbw, 61.83);
        }
        other => panic!("expected a row, got {other:?}"),
    }
    assert_eq!(
        p.report().rows.len(),
        1,
        "the partial second row is not a row yet"
    );
    let events = p.finish();
    assert!(events.is_empty(), "an incomplete last line is not a row");
}

#[test]
fn utf8_split_inside_a_character() {
    let text = "# nThread 1 nGpus 1\n#  Rank  0 Group  0 Pid 1 on höst device  0 [0000:00:06] NVIDIA H200\n";
    let mut p = Parser::new();
    for b in text.as_bytes() {
        p.push_bytes(std::slice::from_ref(b));
    }
    assert_eq!(p.report().devices[0].host.as_deref(), Some("höst"));
}

#[test]
fn events_arrive_in_print_order() {
    let mut p = Parser::new();
    let mut kinds = Vec::new();
    for line in ALL_REDUCE.lines() {
        for e in p.push_line(line) {
            kinds.push(match e {
                Event::TestsVersion(_) => "tests_version",
                Event::NcclVersion(_) => "nccl_version",
                Event::Collective(_) => "collective",
                Event::Config { .. } => "config",
                Event::Device(_) => "device",
                Event::Header => "header",
                Event::Row(_) => "row",
                Event::OutOfBounds(_) => "oob",
                Event::AvgBusBw(_) => "avg",
                Event::Concluded => "concluded",
                Event::Transport(_) => "transport",
                Event::TestStarted => "test_started",
            });
        }
    }
    kinds.dedup();
    assert_eq!(
        kinds,
        [
            "tests_version",
            "nccl_version",
            "collective",
            "config",
            "device",
            "header",
            "row",
            "oob",
            "avg",
            "concluded"
        ]
    );
}

#[test]
fn debug_lines_interrupting_a_row() {
    let header = "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\n";
    let want = Row {
        size: 1048576,
        count: 262144,
        dtype: "float".into(),
        redop: "sum".into(),
        root: Some(-1),
        out_of_place: Some(m(16.96, 61.83, 61.83, Some(0.0))),
        in_place: Some(m(15.38, 68.19, 68.19, Some(0.0))),
    };
    let info = "vm:1486:1504 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/CUMEM\n";
    let cases = [
        // After the size columns (the first measurement connects lazily).
        format!("     1048576        262144     float     sum      -1{info}    16.96   61.83   61.83       0    15.38   68.19   68.19       0\n"),
        // Two debug lines in a row.
        format!("     1048576        262144     float     sum      -1{info}{info}    16.96   61.83   61.83       0    15.38   68.19   68.19       0\n"),
        // After the size columns and again between the halves.
        format!("     1048576        262144     float     sum      -1{info}    16.96   61.83   61.83       0{info}    15.38   68.19   68.19       0\n"),
        // Between the halves.
        format!("     1048576        262144     float     sum      -1    16.96   61.83   61.83       0{info}    15.38   68.19   68.19       0\n"),
        // Inside the size columns, after the type.
        format!("     1048576        262144     float{info}     sum      -1    16.96   61.83   61.83       0    15.38   68.19   68.19       0\n"),
        // A WARN line with NCCL 2.26's timestamp.
        "     1048576        262144     float     sum      -1[2026-11-22 01:02:03] vm:1486:1504 [1] NCCL WARN something\n    16.96   61.83   61.83       0    15.38   68.19   68.19       0\n".to_string(),
        // With launcher tags on every line.
        format!("[1,0]<stdout>:     1048576        262144     float     sum      -1{info}[1,0]<stdout>:    16.96   61.83   61.83       0    15.38   68.19   68.19       0\n"),
    ];
    for case in cases {
        let r = one(&format!("{header}{case}"));
        assert_eq!(r.rows, vec![want.clone()], "{case}");
        assert!(r.transport.is_some(), "the debug line was read: {case}");
    }
}

#[test]
fn debug_lines_outside_the_table_are_not_fragments() {
    // A host name starting with digits, before the table: no fragment is kept.
    let text = "1node:1:2 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n\
                #       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\n\
                           8             2     float     sum      -1    13.34    0.00    0.00       0    13.87    0.00    0.00       0\n";
    let r = one(text);
    assert_eq!(r.nccl_version.as_deref(), Some("2.21.5+cuda12.4"));
    assert_eq!(r.rows.len(), 1);
    assert_eq!(r.rows[0].size, 8);
}

#[test]
fn several_tests_in_one_stream() {
    let gather = include_str!("../../tests/fixtures/nccl/h200x2-all_gather.txt");
    let reports = parse_text(&format!("{ALL_REDUCE}{gather}"));
    assert_eq!(reports.len(), 2);
    assert_eq!(reports[0].collective.as_deref(), Some("all_reduce"));
    assert_eq!(reports[1].collective.as_deref(), Some("all_gather"));
    assert_eq!((reports[0].rows.len(), reports[1].rows.len()), (31, 31));
    assert_eq!(reports[1].avg_busbw, Some(90.4437));
    assert_eq!(reports[1].ranks(), Some(2));

    let mut p = Parser::new();
    p.push_str(ALL_REDUCE);
    let events = p.push_str(gather.lines().next().unwrap());
    assert!(events.is_empty(), "the banner line is not complete yet");
    assert_eq!(p.push_str("\n").first(), Some(&Event::TestStarted));
}

#[test]
fn collective_from_a_command_line() {
    let text =
        format!("+ mpirun -np 16 --hostfile h /opt/nccl-tests/build/all_gather_perf_mpi -b 1K -e 8G\n{GKE}");
    let r = one(&text);
    assert_eq!(r.collective.as_deref(), Some("all_gather"));
    // Words that only look like one are not taken.
    assert_eq!(r.collective_from, Some("command line"));
    let r = one(&format!("./run_perf_tests.sh --fast\n{GKE}"));
    assert_eq!(r.collective_from, Some("the table"));
}

#[test]
fn not_nccl_tests_output() {
    for text in [
        "",
        "hello\nworld\n",
        "# just a comment\n",
        "Traceback (most recent call last):\n  File \"x.py\"\n",
    ] {
        let r = one(text);
        assert!(!r.is_nccl_tests(), "{text:?}");
        assert!(r.rows.is_empty());
    }
    // A header with no rows (the run died) is nccl-tests output.
    let r = one("#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\n");
    assert!(r.is_nccl_tests());
}

#[test]
fn failed_checks_and_odd_numbers() {
    let text = "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\n\
                \x20      1024           256     float     sum      -1    13.50    0.08    0.08   1e+06    13.16    0.08    0.08       3\n\
                # Out of bounds values : 7 FAILED\n\
                # Avg bus bandwidth    : 0.08 FAILED\n";
    let r = one(text);
    assert_eq!(r.rows[0].out_of_place.as_ref().unwrap().wrong, Some(1e6));
    assert_eq!(r.rows[0].in_place.as_ref().unwrap().wrong, Some(3.0));
    assert_eq!(r.out_of_bounds, Some(OutOfBounds { count: 7, ok: false }));
    assert_eq!(r.avg_busbw, Some(0.08));
    assert!(json(&r).contains(r#""wrong":1000000}"#));
}

#[test]
fn version_codes_decode() {
    assert_eq!(decode_version_code(22809).as_deref(), Some("2.28.9"));
    assert_eq!(decode_version_code(21903).as_deref(), Some("2.19.3"));
    assert_eq!(decode_version_code(2708).as_deref(), Some("2.7.8"));
    assert_eq!(decode_version_code(0), None);
    // An explicit `NCCL version` line wins over the banner's code, whichever comes first.
    let text = "# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809\nvm:1:1 [0] NCCL INFO NCCL version 2.28.9+cuda13.0\n";
    assert_eq!(one(text).nccl_version.as_deref(), Some("2.28.9+cuda13.0"));
    let text =
        "NCCL version 2.28.9+cuda13.0\n# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809\n";
    assert_eq!(one(text).nccl_version.as_deref(), Some("2.28.9+cuda13.0"));
}

#[test]
fn a_log_of_any_length_is_read_in_bounded_memory() {
    // 3000 tests one after another (about 100k rows, 15 MB), then one test whose table
    // never ends: what the parser keeps stays under its caps, and every row still
    // streams out as an event.
    let mut p = Parser::new();
    let mut rows_seen = 0usize;
    for _ in 0..3000 {
        rows_seen += p
            .push_str(ALL_REDUCE)
            .iter()
            .filter(|e| matches!(e, Event::Row(_)))
            .count();
    }
    let one_test_rows = one(ALL_REDUCE).rows.len();
    assert_eq!(rows_seen, 3000 * one_test_rows);
    let reports = p.reports();
    assert!(reports.len() <= MAX_REPORTS + 1, "{}", reports.len());
    let row = ALL_REDUCE
        .lines()
        .find(|l| l.trim_start().starts_with("8589934592"))
        .expect("a row of the fixture");
    let endless = format!("{row}\n").repeat(MAX_ROWS + 500);
    p.push_str(&endless);
    let last = p.report();
    assert_eq!(last.rows.len(), MAX_ROWS);
}

#[test]
fn fuzz_found_inputs_parse_without_panic() {
    // Inputs the fuzz targets found crashing, kept as regression tests.
    let wide = include_bytes!("../../tests/fixtures/fuzz/nccl_output-wide-space.bin");
    let mut p = Parser::new();
    p.push_bytes(wide);
    p.finish();
    let _ = p.reports();
}

/// Every layout nccl-tests printed since 1.0 (tests/fixtures/nccl/layouts, written to
/// each version's printf formats): every data row read, none lost, and the collective of
/// each file (named in its file name) as the banner or the table gives it.
#[test]
fn every_layout_since_1_0_keeps_its_rows() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/nccl/layouts");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "{files:?}");
    for path in files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        // A data row starts with blanks and a size: count them as a person would.
        let printed = text
            .lines()
            .filter(|l| {
                l.starts_with(' ')
                    && l.split_whitespace()
                        .next()
                        .is_some_and(|w| w.parse::<u64>().is_ok())
            })
            .count();
        let r = one(&text);
        assert_eq!(r.rows.len(), printed, "{name}: rows");
        assert!(r.finished(), "{name}: the footer");
        let want = name
            .trim_end_matches(".txt")
            .rsplit('-')
            .next()
            .unwrap()
            .to_string();
        match (&r.collective, &r.collective_choices) {
            (Some(c), _) => assert_eq!(c, &want, "{name}: from {:?}", r.collective_from),
            (None, Some(choices)) => assert!(choices.contains(&want), "{name}: {choices}"),
            (None, None) => panic!("{name}: no collective"),
        }
        let sizes: Vec<u64> = r.rows.iter().map(|row| row.size).collect();
        assert!(
            sizes.windows(2).all(|w| w[0] <= w[1]),
            "{name}: sizes in order {sizes:?}"
        );
        assert!(
            r.rows.iter().all(|row| row.in_place.is_some()),
            "{name}: every row measured"
        );
    }
}

#[test]
fn old_rows_without_a_reduction_or_with_a_root_and_no_reduction() {
    // nccl-tests 2.0 broadcast (root, no redop), 2.9 alltoall (blank redop), 2.0
    // all_gather (neither), as their printf formats print them.
    let rows = [
        ("           8             2   float       0    26.30    0.00    0.00  0e+00    26.72    0.00    0.00  0e+00", "none", Some(0)),
        ("           0             0   float             3.92    0.00    0.00  0e+00     3.84    0.00    0.00  0e+00", "none", None),
        ("        1024            32   float    44.21    0.02    0.02  0e+00    44.11    0.02    0.02  0e+00", "none", None),
        ("        1024           256   float     sum    44.21    0.02    0.04  1e-07    44.11    0.02    0.04  1e-07", "sum", None),
    ];
    for (line, redop, root) in rows {
        let row = parse_row(line, None).unwrap_or_else(|| panic!("{line}"));
        assert_eq!((row.redop.as_str(), row.root), (redop, root), "{line}");
        assert!(row.out_of_place.is_some() && row.in_place.is_some(), "{line}");
    }
}

#[test]
fn ranks_hosts_and_the_network_behind_shm() {
    // A rank list cut off after two of 16 ranks: NCCL's own count wins.
    let text = "#  Rank  0 Group  0 Pid 1 on a device  0 [0000:01:00] NVIDIA H100\n\
                #  Rank  1 Group  0 Pid 2 on a device  1 [0000:02:00] NVIDIA H100\n\
                a:1:3 [0] NCCL INFO comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0\n";
    assert_eq!(one(text).ranks(), Some(16));

    // Two nodes both called localhost: device 0 twice under one name is two nodes.
    let mut list = String::new();
    for (rank, dev) in (0..16).map(|r| (r, r % 8)) {
        list.push_str(&format!(
            "#  Rank {rank:2} Group  0 Pid {} on localhost device {dev} [0000:0{dev}:00] NVIDIA H200\n",
            100 + rank
        ));
    }
    let r = one(&list);
    assert_eq!(
        super::super::expect::machine_from_devices(&r),
        Some(("8xH200".to_string(), 2))
    );

    // SHM channels within each node, and `Using network Socket` between them: two hosts
    // in the debug lines make the Socket network the inter-node one.
    let log = "n1:1:2 [0] NCCL INFO Using network Socket\n\
               n1:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct\n\
               n2:5:6 [0] NCCL INFO Channel 00 : 2[0] -> 3[1] via SHM/direct/direct\n";
    let r = one(log);
    assert_eq!(r.hosts, vec!["n1".to_string(), "n2".to_string()]);
    assert_eq!(r.transport_summary().as_deref(), Some("SHM + NET/Socket"));
    // One host: the network carries nothing.
    let one_host = "n1:1:2 [0] NCCL INFO Using network Socket\nn1:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct\n";
    assert_eq!(one(one_host).transport_summary().as_deref(), Some("SHM"));
}

#[test]
fn a_crashed_run_is_read_for_what_it_has() {
    // The recorded H200 run, cut after its fifth row, with NCCL's WARN and nccl-tests'
    // failure line as a socket error prints them.
    let head: Vec<&str> = DEBUG.lines().collect();
    let last_row = head
        .iter()
        .rposition(|l| l.trim_start().starts_with("4194304"))
        .unwrap();
    let mut text = head[..=last_row].join("\n");
    text.push_str("\nvm:1486:1504 [1] misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer vm<53218>\n");
    text.push_str(
        "vm: Test NCCL failure common.cu:1096 'remote process exited or there was a network error / '\n",
    );
    let r = one(&text);
    assert!(!r.finished());
    assert_eq!(r.rows.len(), 2);
    assert_eq!(r.collective.as_deref(), Some("all_reduce"));
    assert_eq!(r.ranks(), Some(2));
    assert_eq!(
        r.cause.as_deref(),
        Some("NCCL WARN socketProgress: Connection closed by remote peer vm<53218>")
    );
    let u = r.unfinished().unwrap();
    assert!(u.starts_with("the run did not finish: it stopped after 2 rows (the last at 4M); cause: NCCL WARN socketProgress"), "{u}");
    // The complete run has no cause and finished.
    let full = one(DEBUG);
    assert!(full.finished() && full.cause.is_none() && full.unfinished().is_none());
}

/// Hostile variants of every public log (bytes flipped, lines cut, prefixes repeated)
/// parse without a panic and in bounded memory, as does a line of a million prefixes
/// (the fuzz target `nccl_output` seeds from the same logs; BENCHMARKS.md times a
/// 100 MB log).
#[test]
fn hostile_variants_of_the_public_logs_parse() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/nccl/public");
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_none_or(|x| x != "txt") {
            continue;
        }
        let text = std::fs::read(&path).unwrap();
        for _ in 0..20 {
            let mut b = text.clone();
            for _ in 0..(1 + next() % 16) {
                let at = (next() as usize) % b.len().max(1);
                match next() % 4 {
                    0 if at < b.len() => b[at] = next() as u8,
                    0 => {}
                    1 => b.truncate(at),
                    2 => b
                        .splice(at..at, b"[1,0]<stdout>:[rank0]:node-1: ".iter().copied())
                        .for_each(drop),
                    _ => b.splice(at..at, "\u{3000}NCCL WARN \n".bytes()).for_each(drop),
                }
            }
            let mut p = Parser::new();
            for chunk in b.chunks(1 + (next() as usize) % 4096) {
                p.push_bytes(chunk);
            }
            p.finish();
            let reports = p.reports();
            assert!(reports.len() <= MAX_REPORTS + 1);
            for r in &reports {
                assert!(r.rows.len() <= MAX_ROWS && r.hosts.len() <= MAX_HOSTS);
                let _ = r.unfinished();
                let _ = infer_collective(r);
            }
        }
    }
    // One line of prefixes, a megabyte long: cut at MAX_LINE_BYTES, read in one pass.
    let line = "0: ".repeat(350_000) + "       8             2     float     sum      -1    13.34    0.00    0.00       0    13.87    0.00    0.00       0\n";
    let mut p = Parser::new();
    p.push_str(&line);
    p.finish();
    assert!(p.reports().iter().all(|r| r.rows.len() <= 1));
}

/// Logs of NCCL failing at init, recorded on 1x H200 (NCCL 2.28.9, nccl-tests 2.19.6,
/// torch 2.11; 2026-11-29) under the settings the doctor's `nccl-env` check names:
/// `NCCL_SOCKET_IFNAME=eth9` (nccl-tests exit 3, torchrun exit 1), `CUDA_VISIBLE_DEVICES=5`
/// (exit 2), `NCCL_NET=IB` with no RDMA device (exit 3). Each is read for its cause, which
/// is the error the doctor's finding quotes.
#[test]
fn init_failures_recorded_on_an_h200() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/nccl/");
    let read = |f: &str| one(&std::fs::read_to_string(format!("{dir}{f}")).unwrap());
    for (file, kind, cause) in [
        (
            "h200x1-nccl2.28.9-socket-ifname-eth9.txt",
            "nccl-tests",
            "NCCL WARN Bootstrap : no socket interface found",
        ),
        (
            "h200x1-nccl2.28.9-torch-socket-ifname-eth9.txt",
            "PyTorch",
            "NCCL WARN Bootstrap : no socket interface found",
        ),
        (
            "h200x1-nccl2.28.9-cuda-visible-devices-5.txt",
            "nccl-tests",
            "Test CUDA failure util.cu:674 'no CUDA-capable device is detected'",
        ),
        (
            "h200x1-nccl2.28.9-nccl-net-ib-no-rdma.txt",
            "nccl-tests",
            "NCCL WARN Failed to initialize any NET plugin",
        ),
    ] {
        let r = read(file);
        assert_eq!(r.kind(), kind, "{file}");
        assert_eq!(r.cause.as_deref(), Some(cause), "{file}");
        assert!(!r.finished() && r.rows.is_empty(), "{file}");
        assert!(
            r.nccl_version.as_deref().is_some_and(|v| v.starts_with("2.28.9")),
            "{file}: {:?}",
            r.nccl_version
        );
    }
    // The doctor's findings quote the errors NCCL printed.
    let nics = crate::doctor::net::parse_nics("lo unknown 65536 - - \n", "", "");
    let node = crate::doctor::nccl_init::Node {
        nics: &nics,
        rdma_ports: &[],
        rdma_devices: 0,
        gpus: &[],
    };
    let (_, ifname) = crate::doctor::nccl_init::setting("NCCL_SOCKET_IFNAME", "eth9", node).unwrap();
    assert!(
        ifname.contains("`Bootstrap : no socket interface found`"),
        "{ifname}"
    );
    let (_, net) = crate::doctor::nccl_init::setting("NCCL_NET", "IB", node).unwrap();
    assert!(net.contains("`Failed to initialize any NET plugin`"), "{net}");
}
