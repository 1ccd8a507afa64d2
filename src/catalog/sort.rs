//! Sorting offers by any column, and grouping the zones of one machine type and region.
//!
//! Sorts are stable (equal keys keep their order, so a second sort by another column
//! breaks ties) and put unknown values last in both directions.

use super::model::{Offer, Pricing};
use super::query::{Field, Kind};
use std::cmp::Ordering;
use std::collections::HashMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Direction {
    #[default]
    Ascending,
    Descending,
}

impl Direction {
    pub fn reversed(self) -> Direction {
        match self {
            Direction::Ascending => Direction::Descending,
            Direction::Descending => Direction::Ascending,
        }
    }

    fn apply(self, o: Ordering) -> Ordering {
        match self {
            Direction::Ascending => o,
            Direction::Descending => o.reverse(),
        }
    }
}

/// Sort `indices` (into `offers`) by `field`; `pricing` chooses what `price` and
/// `gpuprice` mean. [`crate::catalog::Catalog::sort`] does the same faster for text
/// columns, from ranks it computes once.
pub fn sort(offers: &[Offer], indices: &mut [usize], field: Field, dir: Direction, pricing: Pricing) {
    match field.kind() {
        Kind::Number => sort_by_key(indices, dir, |i| field.number(&offers[i], pricing).map(float_key)),
        Kind::Text => indices.sort_by(|&a, &b| dir.apply(compare_text(field, &offers[a], &offers[b]))),
    }
}

/// The text columns, whose order a catalog keeps as ranks.
pub(crate) const TEXT_FIELDS: [Field; 5] = [
    Field::Machine,
    Field::Gpu,
    Field::GpuDirect,
    Field::Region,
    Field::Zone,
];

/// For each offer, its place in the order of `field` (equal values share a rank).
pub(crate) fn ranks(offers: &[Offer], field: Field) -> Vec<u32> {
    let mut order: Vec<usize> = (0..offers.len()).collect();
    order.sort_by(|&a, &b| compare_text(field, &offers[a], &offers[b]));
    let mut ranks = vec![0u32; offers.len()];
    let mut rank = 0u32;
    for (n, &i) in order.iter().enumerate() {
        if n > 0 && compare_text(field, &offers[order[n - 1]], &offers[i]) != Ordering::Equal {
            rank += 1;
        }
        ranks[i] = rank;
    }
    ranks
}

/// A `u64` that orders like the finite `f64` it comes from (and stays below `u64::MAX`).
pub(crate) fn float_key(x: f64) -> u64 {
    let bits = x.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

/// Sort `indices` by `key` (`None`: unknown, last in either direction), stably: each key
/// carries the index's current position, so the unstable sort of the pairs keeps ties in
/// their order. Pairs of integers sort much faster than offers compared field by field.
pub(crate) fn sort_by_key(indices: &mut [usize], dir: Direction, key: impl Fn(usize) -> Option<u64>) {
    let mut keyed: Vec<(u64, u32)> = indices
        .iter()
        .enumerate()
        .map(|(pos, &i)| {
            let k = match (key(i), dir) {
                (None, _) => u64::MAX,
                (Some(k), Direction::Ascending) => k.min(u64::MAX - 1),
                (Some(k), Direction::Descending) => (u64::MAX - 1) - k.min(u64::MAX - 1),
            };
            (k, pos as u32)
        })
        .collect();
    keyed.sort_unstable();
    let before: Vec<usize> = indices.to_vec();
    for (slot, (_, pos)) in indices.iter_mut().zip(keyed) {
        *slot = before[pos as usize];
    }
}

fn compare_text(field: Field, a: &Offer, b: &Offer) -> Ordering {
    match field {
        Field::Machine => natural(&a.machine_type, &b.machine_type),
        Field::Gpu => a
            .gpu
            .cmp(&b.gpu)
            .then(a.gpu_memory_gb.cmp(&b.gpu_memory_gb))
            .then(a.accelerator_type.cmp(&b.accelerator_type)),
        Field::GpuDirect => a.gpudirect.cmp(&b.gpudirect),
        Field::Region => natural(&a.region, &b.region),
        Field::Zone => natural(&a.zone, &b.zone),
        _ => Ordering::Equal,
    }
}

/// Compare with runs of digits as numbers: `g2-standard-8` < `g2-standard-12`.
pub fn natural(a: &str, b: &str) -> Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i].is_ascii_digit() && b[j].is_ascii_digit() {
            let si = i;
            while i < a.len() && a[i].is_ascii_digit() {
                i += 1;
            }
            let sj = j;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            let (x, y) = (trim_zeros(&a[si..i]), trim_zeros(&b[sj..j]));
            let o = x.len().cmp(&y.len()).then_with(|| x.cmp(y));
            if o != Ordering::Equal {
                return o;
            }
        } else {
            let o = a[i].cmp(&b[j]);
            if o != Ordering::Equal {
                return o;
            }
            i += 1;
            j += 1;
        }
    }
    (a.len() - i).cmp(&(b.len() - j))
}

fn trim_zeros(d: &[u8]) -> &[u8] {
    let n = d.iter().take_while(|c| **c == b'0').count();
    &d[n.min(d.len().saturating_sub(1))..]
}

/// The zones of one offer kind (machine type, GPUs) in one region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneGroup {
    /// Indices into the offers, in the order they were given; the first stands for the group.
    pub members: Vec<usize>,
}

impl ZoneGroup {
    pub fn first(&self) -> usize {
        self.members[0]
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }
}

/// Group `indices` by machine type, accelerator, GPU count and region, in the order each
/// group first appears (so a sorted list stays sorted by its groups' first members).
pub fn group_zones(offers: &[Offer], indices: &[usize]) -> Vec<ZoneGroup> {
    let mut groups: Vec<ZoneGroup> = Vec::new();
    let mut by_key: HashMap<(&str, &str, u32, &str), usize> = HashMap::new();
    for &i in indices {
        let o = &offers[i];
        let key = (
            o.machine_type.as_str(),
            o.accelerator_type.as_str(),
            o.gpu_count,
            o.region.as_str(),
        );
        match by_key.get(&key) {
            Some(&g) => groups[g].members.push(i),
            None => {
                by_key.insert(key, groups.len());
                groups.push(ZoneGroup { members: vec![i] });
            }
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::model::{Flags, GpuDirect, NicLayout};

    fn offer(machine: &str, zone: &str, od: Option<f64>, gbps: Option<u32>, gd: GpuDirect) -> Offer {
        Offer {
            id: Offer::make_id(machine, zone, None),
            machine_type: machine.into(),
            gpu: "H100".into(),
            accelerator_type: "nvidia-h100-80gb".into(),
            gpu_count: 8,
            gpus_attached: false,
            gpu_memory_gb: Some(80),
            vcpus: 208,
            ram_gb: 1872,
            network_gbps: gbps,
            gpudirect: gd,
            nics: NicLayout {
                host_nics: 1,
                gpu_nics: 0,
                gpu_nic_type: None,
            },
            region: zone.rsplit_once('-').unwrap().0.into(),
            zone: zone.into(),
            on_demand: od,
            spot: None,
            flex: None,
            gpu_on_demand: None,
            gpu_spot: None,
            host_on_demand: None,
            host_spot: None,
            flags: Flags::default(),
        }
    }

    fn offers() -> Vec<Offer> {
        vec![
            offer(
                "g2-standard-12",
                "us-east1-b",
                Some(3.0),
                Some(16),
                GpuDirect::None,
            ), // 0
            offer(
                "a4-highgpu-8g",
                "us-central1-b",
                None,
                Some(3600),
                GpuDirect::Rdma,
            ), // 1
            offer("g2-standard-8", "us-central1-a", Some(1.0), None, GpuDirect::None), // 2
            offer(
                "a3-megagpu-8g",
                "us-central1-a",
                Some(3.0),
                Some(1800),
                GpuDirect::Tcpxo,
            ), // 3
            offer(
                "a3-megagpu-8g",
                "us-central1-c",
                Some(2.0),
                Some(1800),
                GpuDirect::Tcpxo,
            ), // 4
            offer(
                "a3-highgpu-8g",
                "europe-west4-b",
                None,
                Some(1000),
                GpuDirect::Tcpx,
            ), // 5
        ]
    }

    fn sorted(field: Field, dir: Direction) -> Vec<usize> {
        let all = offers();
        let mut idx: Vec<usize> = (0..all.len()).collect();
        sort(&all, &mut idx, field, dir, Pricing::OnDemand);
        idx
    }

    #[test]
    fn every_column_sorts_stably_with_unknowns_last() {
        use Direction::*;
        let cases: &[(Field, Direction, &[usize])] = &[
            // Equal prices (0 and 3) keep their order; unknown (1, 5) last, in order.
            (Field::OnDemand, Ascending, &[2, 4, 0, 3, 1, 5]),
            (Field::OnDemand, Descending, &[0, 3, 4, 2, 1, 5]),
            (Field::Price, Ascending, &[2, 4, 0, 3, 1, 5]),
            (Field::GpuPrice, Ascending, &[2, 4, 0, 3, 1, 5]),
            (Field::Spot, Ascending, &[0, 1, 2, 3, 4, 5]),
            (Field::Network, Ascending, &[0, 5, 3, 4, 1, 2]),
            (Field::Network, Descending, &[1, 3, 4, 5, 0, 2]),
            (Field::Gpus, Descending, &[0, 1, 2, 3, 4, 5]),
            (Field::Machine, Ascending, &[5, 3, 4, 1, 2, 0]),
            (Field::Machine, Descending, &[0, 2, 1, 3, 4, 5]),
            (Field::Zone, Ascending, &[5, 2, 3, 1, 4, 0]),
            (Field::Region, Ascending, &[5, 1, 2, 3, 4, 0]),
            (Field::GpuDirect, Descending, &[1, 3, 4, 5, 0, 2]),
        ];
        for (field, dir, want) in cases {
            assert_eq!(sorted(*field, *dir), *want, "{field} {dir:?}");
        }
        for field in Field::ALL {
            let mut idx = sorted(field, Direction::Ascending);
            idx.sort();
            assert_eq!(idx, [0, 1, 2, 3, 4, 5], "{field} keeps every offer");
        }
    }

    #[test]
    fn a_second_sort_breaks_ties_of_the_first() {
        let all = offers();
        let mut idx: Vec<usize> = (0..all.len()).collect();
        sort(
            &all,
            &mut idx,
            Field::OnDemand,
            Direction::Ascending,
            Pricing::OnDemand,
        );
        sort(
            &all,
            &mut idx,
            Field::Machine,
            Direction::Ascending,
            Pricing::OnDemand,
        );
        assert_eq!(
            idx,
            [5, 4, 3, 1, 2, 0],
            "a3-megagpu-8g zones by price within the type"
        );
    }

    #[test]
    fn float_keys_order_like_the_floats() {
        let xs = [
            -1e9,
            -2.5,
            -0.0,
            0.0,
            1e-9,
            0.22,
            15.80912,
            86.75992,
            1e300,
            f64::MAX,
        ];
        for w in xs.windows(2) {
            assert!(float_key(w[0]) <= float_key(w[1]), "{} {}", w[0], w[1]);
            assert!(float_key(w[1]) < u64::MAX);
        }
        let mut idx = vec![0, 1, 2, 3];
        let keys = [Some(5), None, Some(5), Some(1)];
        sort_by_key(&mut idx, Direction::Descending, |i| keys[i]);
        assert_eq!(idx, [0, 2, 3, 1], "ties stay in order, unknown last");
    }

    #[test]
    fn natural_order() {
        let cases = [
            ("g2-standard-8", "g2-standard-12", Ordering::Less),
            ("g2-standard-96", "g2-standard-12", Ordering::Greater),
            ("a2-highgpu-1g", "a2-highgpu-1g", Ordering::Equal),
            ("us-east1", "us-east4", Ordering::Less),
            ("a3", "a3-highgpu", Ordering::Less),
            ("x007", "x7", Ordering::Equal),
            ("x0", "x00", Ordering::Equal),
        ];
        for (a, b, want) in cases {
            assert_eq!(natural(a, b), want, "{a} vs {b}");
        }
    }

    #[test]
    fn zones_group_by_type_and_region_in_first_seen_order() {
        let all = offers();
        let groups = group_zones(&all, &[4, 0, 3, 2, 5]);
        let members: Vec<Vec<usize>> = groups.iter().map(|g| g.members.clone()).collect();
        assert_eq!(members, [vec![4, 3], vec![0], vec![2], vec![5]]);
        assert_eq!((groups[0].first(), groups[0].len()), (4, 2));
        assert!(group_zones(&all, &[]).is_empty());
    }
}
