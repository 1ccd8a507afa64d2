//! Filter + sort per keystroke in the offers filter bar, on the embedded catalog (911
//! offers; target < 1 ms) and on a synthetic catalog of 100,000 offers (target < 10 ms).
//!
//! One keystroke = what the view does after each key: parse the query and check its names
//! against the catalog, then filter and sort (here by the spot price, cheapest first).
//! A prefix that does not parse (`gpu=H10`, `gpus>`) costs its error and keeps the last
//! good result.
//!
//! * `keystroke/<catalog>/<query>`: one keystroke ending in that query;
//! * `typing/<catalog>`: every prefix of a typed query, reported per keystroke;
//! * `sort-all/<catalog>/<column>`: the empty query, every offer sorted by a column;
//! * `load/...`: parsing the embedded file; building a 100k catalog (not per keystroke).
//!
//! Run: `cargo bench --bench catalog -- --warm-up-time 1 --measurement-time 3`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use flightdeck::catalog::{Catalog, Direction, Field, Filtered, Offer, Pricing};
use std::hint::black_box;

const TYPED: &str = "gpu=H100 gpus>=8 region=us-* spot<25 gpudirect=tcpxo";

/// The embedded offers repeated to `n`, each copy in its own zones and with prices moved
/// by up to 10%, so that ids are unique and sorts have work to do.
fn synthetic(n: usize) -> Catalog {
    let base = Catalog::embedded().offers();
    let offers = (0..n)
        .map(|i| {
            let mut o = base[i % base.len()].clone();
            let copy = i / base.len();
            o.zone = format!("{}-{copy}", o.zone);
            o.id = Offer::make_id(
                &o.machine_type,
                &o.zone,
                o.gpus_attached
                    .then_some((o.accelerator_type.as_str(), o.gpu_count)),
            );
            let f = 1.0 + ((i * 7919) % 1000) as f64 / 10_000.0;
            for p in [
                &mut o.on_demand,
                &mut o.spot,
                &mut o.gpu_on_demand,
                &mut o.gpu_spot,
            ] {
                *p = p.map(|x| x * f);
            }
            o
        })
        .collect();
    Catalog::new("synthetic", "2026-11-22", offers)
}

const ORDER: [(Field, Direction); 1] = [(Field::Price, Direction::Ascending)];

fn keystroke(catalog: &Catalog, text: &str, last: &mut Filtered) {
    if let Ok(q) = catalog.query(text) {
        *last = catalog.select(&q, Pricing::Spot, &ORDER);
    }
}

fn bench(c: &mut Criterion) {
    let catalogs = [
        ("embedded", Catalog::embedded().clone()),
        ("synthetic-100k", synthetic(100_000)),
    ];
    let queries = [
        ("empty", ""),
        ("gpu", "gpu=H100"),
        ("bare-word", "ultra"),
        ("five-terms", TYPED),
    ];

    let mut group = c.benchmark_group("keystroke");
    for (name, catalog) in &catalogs {
        for (qname, text) in queries {
            let mut last = Filtered::default();
            group.bench_function(BenchmarkId::new(*name, qname), |b| {
                b.iter(|| keystroke(black_box(catalog), black_box(text), &mut last))
            });
        }
    }
    group.finish();

    let mut group = c.benchmark_group("typing");
    let prefixes: Vec<&str> = (1..=TYPED.len()).map(|n| &TYPED[..n]).collect();
    group.throughput(Throughput::Elements(prefixes.len() as u64));
    for (name, catalog) in &catalogs {
        group.bench_function(*name, |b| {
            b.iter(|| {
                let mut last = Filtered::default();
                for p in &prefixes {
                    keystroke(black_box(catalog), p, &mut last);
                }
                last
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("sort-all");
    for (name, catalog) in &catalogs {
        let q = catalog.query("").unwrap();
        for field in [Field::Price, Field::Zone, Field::Machine] {
            group.bench_function(BenchmarkId::new(*name, field.name()), |b| {
                b.iter(|| catalog.select(black_box(&q), Pricing::Spot, &[(field, Direction::Ascending)]))
            });
        }
    }
    group.finish();
}

/// Parsing the embedded data file (once per process, on first use) and building a
/// 100,000-offer catalog (ranks for the text columns), e.g. after a live refresh.
fn load(c: &mut Criterion) {
    let mut group = c.benchmark_group("load");
    group.bench_function("embedded-parse", |b| {
        b.iter(|| Catalog::parse(black_box(flightdeck::catalog::EMBEDDED_DATA)).unwrap())
    });
    let offers = synthetic(100_000).offers().to_vec();
    group.sample_size(10);
    group.bench_function("synthetic-100k-new", |b| {
        b.iter(|| Catalog::new("synthetic", "2026-11-22", black_box(offers.clone())))
    });
    group.finish();
}

criterion_group!(benches, bench, load);
criterion_main!(benches);
