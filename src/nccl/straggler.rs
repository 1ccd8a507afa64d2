//! The straggler finder's decisions: which groups of nodes to benchmark next, how to rank
//! nodes and links by busbw, and which node or link to name as the slow one.
//!
//! 1. **Singles**: every node alone (its GPUs over NVLink/PCIe), all in parallel. A node
//!    well below the others is slow inside.
//! 2. **Ring of pairs**: (0,1), (1,2) .. (n-1,0), in rounds of disjoint pairs so that no
//!    node is in two runs at once. A node whose every pair is slow is a suspect; a slow
//!    pair between two nodes that each have a fast pair is a slow link.
//! 3. **Bisection** of the suspects: the group, with a node known to be good, is run as
//!    one; a fast group clears its members (their slow pairs were links), a slow one is
//!    halved, until single nodes are confirmed slow.
//!
//! "Slow" is relative: below [`Finder::threshold`] (0.9) times the stage's [`base`] (the
//! upper median of the singles, a higher quantile of the pairs), so a fleet where most nodes are fine names the odd one out. A failed
//! run counts as slow. Pure: the caller runs the groups and feeds back their busbw.

use serde::Serialize;
use std::collections::BTreeMap;

/// Default share of the stage's upper median below which a figure is slow.
pub const THRESHOLD: f64 = 0.9;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    Singles,
    Ring,
    Bisect,
}

/// What to do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Run these groups (node indices, ascending), each as one benchmark, in parallel.
    Run {
        stage: Stage,
        groups: Vec<Vec<usize>>,
    },
    Done(Finding),
}

/// One benchmark's figure.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Measured {
    pub stage: Stage,
    pub nodes: Vec<usize>,
    /// Peak out-of-place busbw, GB/s; `None` when the run failed.
    pub busbw: Option<f64>,
    pub slow: bool,
}

/// A node or link named as slow, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Blame {
    pub nodes: Vec<usize>,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// Every run, in the order they were made.
    pub runs: Vec<Measured>,
    /// Single-node figures, slowest first.
    pub node_ranking: Vec<(usize, Option<f64>)>,
    /// Pair figures, slowest first.
    pub link_ranking: Vec<((usize, usize), Option<f64>)>,
    pub slow_nodes: Vec<Blame>,
    pub slow_links: Vec<Blame>,
    /// Suspects the finder could not split further (no good node to test them with).
    pub unresolved: Vec<usize>,
}

impl Finding {
    /// The one node to name: the first slow node, else none.
    pub fn named(&self) -> Option<usize> {
        self.slow_nodes.first().and_then(|b| b.nodes.first().copied())
    }
}

/// Rounds of the ring's pairs (i, i+1 mod n), each round's pairs disjoint: two rounds for
/// an even ring, three for an odd one; one pair for two nodes, none for fewer.
pub fn ring_rounds(n: usize) -> Vec<Vec<(usize, usize)>> {
    if n < 2 {
        return vec![];
    }
    if n == 2 {
        return vec![vec![(0, 1)]];
    }
    let pair = |i: usize| {
        let (a, b) = (i, (i + 1) % n);
        (a.min(b), a.max(b))
    };
    let mut rounds = vec![
        (0..n)
            .step_by(2)
            .filter(|i| i + 1 < n)
            .map(pair)
            .collect::<Vec<_>>(),
        (1..n).step_by(2).filter(|i| i + 1 < n).map(pair).collect(),
    ];
    if n % 2 == 1 {
        // The closing pair (n-1, 0) shares a node with a pair of each round.
        rounds.push(vec![pair(n - 1)]);
    } else {
        rounds[1].push(pair(n - 1));
    }
    rounds.retain(|r| !r.is_empty());
    rounds
}

/// The upper median: the middle of an odd count, the higher middle of an even one.
pub fn upper_median(values: &[f64]) -> Option<f64> {
    quantile(values, 1, 2)
}

/// The value at index `len * num / den` of the sorted finite values.
pub fn quantile(values: &[f64], num: usize, den: usize) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[(v.len() * num / den).min(v.len() - 1)])
}

/// The base a stage's figures are judged against: the upper median of single nodes
/// (one slow node is one figure of n); for pairs the two-thirds quantile, because one slow
/// node makes two pairs of the ring slow (two of three in a ring of three).
pub fn base(stage: Stage, values: &[f64]) -> Option<f64> {
    match stage {
        Stage::Singles => upper_median(values),
        Stage::Ring | Stage::Bisect => quantile(values, 2, 3),
    }
}

/// Which of `values` are slow: `None` (failed), or below `threshold` x the stage's
/// [`base`].
pub fn slow_flags(stage: Stage, values: &[Option<f64>], threshold: f64) -> Vec<bool> {
    let known: Vec<f64> = values.iter().flatten().copied().collect();
    let base = base(stage, &known);
    values
        .iter()
        .map(|v| match (v, base) {
            (None, _) => true,
            (Some(x), Some(b)) => *x < threshold * b,
            (Some(_), None) => false,
        })
        .collect()
}

#[derive(Debug, Clone)]
pub struct Finder {
    n: usize,
    pub threshold: f64,
    runs: Vec<Measured>,
    /// Figures by node set, so a group measured once is not run again.
    cache: BTreeMap<Vec<usize>, Option<f64>>,
    stage: Stage,
    ring: Vec<Vec<(usize, usize)>>,
    ring_done: usize,
    /// Groups of suspects still to test (bisection), and what was found.
    open: Vec<Vec<usize>>,
    good: Vec<usize>,
    confirmed: Vec<usize>,
    cleared: Vec<usize>,
    /// The base (upper median) of the pairs, against which bisection groups are judged.
    pair_base: Option<f64>,
    pending: Vec<Vec<usize>>,
    /// Bisection groups being run: (the group with its good node, its suspects).
    testing: Vec<(Vec<usize>, Vec<usize>)>,
    /// Suspects with no good node to test them against.
    unresolved_suspects: Vec<usize>,
}

impl Finder {
    pub fn new(n: usize) -> Finder {
        Finder {
            n,
            threshold: THRESHOLD,
            runs: vec![],
            cache: BTreeMap::new(),
            stage: Stage::Singles,
            ring: ring_rounds(n),
            ring_done: 0,
            open: vec![],
            good: vec![],
            confirmed: vec![],
            cleared: vec![],
            pair_base: None,
            pending: vec![],
            testing: vec![],
            unresolved_suspects: vec![],
        }
    }

    /// The next step. After a `Run`, feed every group's figure to [`Finder::record`].
    pub fn next_step(&mut self) -> Step {
        assert!(self.pending.is_empty(), "record the last step's figures first");
        loop {
            let groups: Vec<Vec<usize>> = match self.stage {
                Stage::Singles => {
                    if self.runs.is_empty() && self.n > 0 {
                        (0..self.n).map(|i| vec![i]).collect()
                    } else {
                        self.stage = Stage::Ring;
                        continue;
                    }
                }
                Stage::Ring => {
                    if self.ring_done < self.ring.len() {
                        let round = self.ring[self.ring_done].clone();
                        self.ring_done += 1;
                        round.into_iter().map(|(a, b)| vec![a, b]).collect()
                    } else {
                        self.start_bisection();
                        self.stage = Stage::Bisect;
                        continue;
                    }
                }
                Stage::Bisect => {
                    let g = self.bisection_round();
                    if g.is_empty() {
                        return Step::Done(self.finding());
                    }
                    g
                }
            };
            // Groups already measured are answered from the cache.
            let (known, new): (Vec<_>, Vec<_>) = groups.into_iter().partition(|g| self.cache.contains_key(g));
            for g in known {
                let bw = self.cache[&g];
                self.store(g, bw);
            }
            if new.is_empty() {
                continue;
            }
            self.pending = new.clone();
            return Step::Run {
                stage: self.stage,
                groups: new,
            };
        }
    }

    /// The figures of the groups of the last `Run`, in any order. A group left out
    /// counts as failed.
    pub fn record(&mut self, figures: &[(Vec<usize>, Option<f64>)]) {
        for g in std::mem::take(&mut self.pending) {
            let bw = figures.iter().find(|(n, _)| *n == g).and_then(|(_, b)| *b);
            self.cache.insert(g.clone(), bw);
            self.store(g, bw);
        }
        if self.stage == Stage::Singles || (self.stage == Stage::Ring && self.ring_done == self.ring.len()) {
            self.reflag();
        }
    }

    fn store(&mut self, nodes: Vec<usize>, busbw: Option<f64>) {
        let slow = match self.stage {
            Stage::Bisect => match (busbw, self.pair_base) {
                (None, _) => true,
                (Some(x), Some(b)) => x < self.threshold * b,
                (Some(_), None) => false,
            },
            _ => false,
        };
        if self.stage == Stage::Bisect {
            self.judge_group(&nodes, slow);
        }
        self.runs.push(Measured {
            stage: self.stage,
            nodes,
            busbw,
            slow,
        });
    }

    /// Flag the singles and the pairs against their stage's upper median.
    fn reflag(&mut self) {
        for stage in [Stage::Singles, Stage::Ring] {
            let idx: Vec<usize> = (0..self.runs.len())
                .filter(|i| self.runs[*i].stage == stage)
                .collect();
            let values: Vec<Option<f64>> = idx.iter().map(|i| self.runs[*i].busbw).collect();
            for (i, f) in idx.iter().zip(slow_flags(stage, &values, self.threshold)) {
                self.runs[*i].slow = f;
            }
            if stage == Stage::Ring {
                let known: Vec<f64> = values.iter().flatten().copied().collect();
                self.pair_base = base(Stage::Ring, &known);
            }
        }
    }

    fn pairs(&self) -> impl Iterator<Item = &Measured> {
        self.runs.iter().filter(|m| m.stage == Stage::Ring)
    }

    /// Suspects: nodes whose every ring pair is slow. Good: nodes with a fast pair.
    fn start_bisection(&mut self) {
        let mut suspects = vec![];
        let mut good = vec![];
        for node in 0..self.n {
            let mine: Vec<&Measured> = self.pairs().filter(|m| m.nodes.contains(&node)).collect();
            if mine.is_empty() {
                continue;
            }
            if mine.iter().all(|m| m.slow) {
                suspects.push(node);
            } else {
                good.push(node);
            }
        }
        self.good = good;
        if !suspects.is_empty() && !self.good.is_empty() {
            self.open = vec![suspects];
        } else {
            // Nothing to test them against (every pair slow or failed).
            self.unresolved_suspects = suspects;
        }
    }

    /// One round of bisection: each open group with a distinct good node.
    fn bisection_round(&mut self) -> Vec<Vec<usize>> {
        let mut groups = vec![];
        let mut rest = vec![];
        let mut goods = self.good.clone().into_iter();
        for g in std::mem::take(&mut self.open) {
            match goods.next() {
                Some(good) => {
                    let mut with = g.clone();
                    with.push(good);
                    with.sort_unstable();
                    self.testing.push((with.clone(), g));
                    groups.push(with);
                }
                None => rest.push(g),
            }
        }
        self.open = rest;
        groups
    }

    /// A bisection group's figure: fast clears its suspects, slow confirms a single one
    /// or halves the group.
    fn judge_group(&mut self, with: &[usize], slow: bool) {
        let Some(pos) = self.testing.iter().position(|(w, _)| w == with) else {
            return;
        };
        let (_, suspects) = self.testing.remove(pos);
        if !slow {
            self.cleared.extend(&suspects);
        } else if suspects.len() == 1 {
            self.confirmed.push(suspects[0]);
        } else {
            let mid = suspects.len() / 2;
            self.open.push(suspects[..mid].to_vec());
            self.open.push(suspects[mid..].to_vec());
        }
    }

    fn finding(&self) -> Finding {
        let singles: Vec<&Measured> = self.runs.iter().filter(|m| m.stage == Stage::Singles).collect();
        let mut node_ranking: Vec<(usize, Option<f64>)> =
            singles.iter().map(|m| (m.nodes[0], m.busbw)).collect();
        node_ranking.sort_by(|a, b| rank_cmp(a.1, b.1).then(a.0.cmp(&b.0)));
        let mut link_ranking: Vec<((usize, usize), Option<f64>)> = self
            .pairs()
            .map(|m| ((m.nodes[0], m.nodes[1]), m.busbw))
            .collect();
        link_ranking.sort_by(|a, b| rank_cmp(a.1, b.1).then(a.0.cmp(&b.0)));
        let mut slow_nodes: Vec<Blame> = vec![];
        let base = upper_median(&singles.iter().filter_map(|m| m.busbw).collect::<Vec<_>>());
        for m in singles.iter().filter(|m| m.slow) {
            let reason = match (m.busbw, base) {
                (Some(x), Some(b)) => format!(
                    "alone, {x} GB/s is {:.0}% of the nodes' median {b} GB/s",
                    x / b * 100.0
                ),
                _ => "its single-node run failed".to_string(),
            };
            slow_nodes.push(Blame {
                nodes: m.nodes.clone(),
                reason,
            });
        }
        for &k in &self.confirmed {
            let reason =
                "every ring pair with it is slow, and so is a run of it with a good node".to_string();
            match slow_nodes.iter_mut().find(|b| b.nodes == [k]) {
                Some(b) => b.reason = format!("{}; {reason}", b.reason),
                None => slow_nodes.push(Blame {
                    nodes: vec![k],
                    reason,
                }),
            }
        }
        // The slowest first.
        let single = |k: usize| singles.iter().find(|m| m.nodes[0] == k).and_then(|m| m.busbw);
        slow_nodes.sort_by(|a, b| rank_cmp(single(a.nodes[0]), single(b.nodes[0])));
        let blamed = |k: usize| self.confirmed.contains(&k) || self.unresolved_suspects.contains(&k);
        let mut slow_links = vec![];
        for m in self.pairs().filter(|m| m.slow) {
            let (a, b) = (m.nodes[0], m.nodes[1]);
            if blamed(a) || blamed(b) {
                continue;
            }
            let pb = self.pair_base.unwrap_or(f64::NAN);
            slow_links.push(Blame {
                nodes: vec![a, b],
                reason: match m.busbw {
                    Some(x) => format!(
                        "{x} GB/s is {:.0}% of the pairs' usual {pb} GB/s, while both nodes are fast with others",
                        x / pb * 100.0
                    ),
                    None => "the pair's run failed, while both nodes ran with others".into(),
                },
            });
        }
        Finding {
            runs: self.runs.clone(),
            node_ranking,
            link_ranking,
            slow_nodes,
            slow_links,
            unresolved: self.unresolved_suspects.clone(),
        }
    }
}

/// Slowest (or failed) first.
fn rank_cmp(a: Option<f64>, b: Option<f64>) -> std::cmp::Ordering {
    match (a, b) {
        (None, None) => std::cmp::Ordering::Equal,
        (None, _) => std::cmp::Ordering::Less,
        (_, None) => std::cmp::Ordering::Greater,
        (Some(x), Some(y)) => x.total_cmp(&y),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drive a finder over `n` nodes where a group's busbw is `bw(group)`.
    type Steps = Vec<(Stage, Vec<Vec<usize>>)>;

    fn drive(n: usize, bw: impl Fn(&[usize]) -> Option<f64>) -> (Finding, Steps) {
        let mut f = Finder::new(n);
        let mut steps = vec![];
        loop {
            match f.next_step() {
                Step::Run { stage, groups } => {
                    // No node is in two groups of one step.
                    let mut seen: Vec<usize> = groups.iter().flatten().copied().collect();
                    let len = seen.len();
                    seen.sort_unstable();
                    seen.dedup();
                    assert_eq!(seen.len(), len, "{groups:?}");
                    let figures: Vec<(Vec<usize>, Option<f64>)> =
                        groups.iter().map(|g| (g.clone(), bw(g))).collect();
                    f.record(&figures);
                    steps.push((stage, groups));
                }
                Step::Done(found) => return (found, steps),
            }
        }
    }

    /// Nodes in `slow_nodes` halve any group they are in; links in `slow_links` too.
    fn fleet(
        slow_nodes: &'static [usize],
        slow_links: &'static [(usize, usize)],
    ) -> impl Fn(&[usize]) -> Option<f64> {
        move |g: &[usize]| {
            let base = if g.len() == 1 { 340.0 } else { 180.0 };
            let node = g.iter().any(|k| slow_nodes.contains(k));
            let link = slow_links.iter().any(|(a, b)| g.contains(a) && g.contains(b));
            Some(if node || link { base * 0.5 } else { base })
        }
    }

    #[test]
    fn ring_rounds_cover_the_ring_with_disjoint_pairs() {
        assert!(ring_rounds(1).is_empty());
        assert_eq!(ring_rounds(2), vec![vec![(0, 1)]]);
        assert_eq!(ring_rounds(3), vec![vec![(0, 1)], vec![(1, 2)], vec![(0, 2)]]);
        assert_eq!(ring_rounds(4), vec![vec![(0, 1), (2, 3)], vec![(1, 2), (0, 3)]]);
        for n in 3..12 {
            let rounds = ring_rounds(n);
            assert_eq!(rounds.len(), if n % 2 == 0 { 2 } else { 3 }, "{n}");
            let mut all: Vec<(usize, usize)> = rounds.iter().flatten().copied().collect();
            all.sort_unstable();
            let mut want: Vec<(usize, usize)> =
                (0..n).map(|i| (i.min((i + 1) % n), i.max((i + 1) % n))).collect();
            want.sort_unstable();
            assert_eq!(all, want, "{n}");
        }
    }

    #[test]
    fn medians_and_flags() {
        assert_eq!(upper_median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(upper_median(&[1.0, 4.0]), Some(4.0));
        assert_eq!(upper_median(&[]), None);
        assert_eq!(
            slow_flags(Stage::Singles, &[Some(100.0), Some(95.0), Some(80.0), None], 0.9),
            vec![false, false, true, true]
        );
        assert_eq!(slow_flags(Stage::Singles, &[Some(5.0)], 0.9), vec![false]);
        // One slow node of three makes two of the ring's three pairs slow.
        assert_eq!(
            slow_flags(Stage::Ring, &[Some(180.0), Some(90.0), Some(90.0)], 0.9),
            vec![false, true, true]
        );
    }

    #[test]
    fn a_slow_node_is_named_by_singles_ring_and_bisection() {
        for n in [3, 4, 5, 8] {
            let (f, steps) = drive(n, fleet(&[2], &[]));
            assert_eq!(f.named(), Some(2), "{n}: {f:?}");
            assert_eq!(f.slow_nodes.len(), 1, "{n}: {:?}", f.slow_nodes);
            assert!(f.slow_nodes[0]
                .reason
                .contains("alone, 170 GB/s is 50% of the nodes' median 340 GB/s"));
            assert!(
                f.slow_nodes[0].reason.contains("every ring pair with it is slow"),
                "{n}"
            );
            assert!(f.slow_links.is_empty(), "{n}: {:?}", f.slow_links);
            assert_eq!(f.node_ranking[0], (2, Some(170.0)));
            assert!(f.link_ranking[0].0 .0 == 2 || f.link_ranking[0].0 .1 == 2);
            assert_eq!(steps[0], (Stage::Singles, (0..n).map(|i| vec![i]).collect()));
        }
    }

    #[test]
    fn a_node_slow_only_between_nodes_is_found_by_pairs() {
        // Node 3's NIC: fine alone, slow in every pair.
        let bw = |g: &[usize]| {
            Some(if g.len() > 1 && g.contains(&3) {
                60.0
            } else if g.len() == 1 {
                340.0
            } else {
                180.0
            })
        };
        let (f, steps) = drive(6, bw);
        assert_eq!(f.named(), Some(3));
        assert_eq!(
            f.slow_nodes[0].reason,
            "every ring pair with it is slow, and so is a run of it with a good node"
        );
        // The bisection ran 3 with a good node that is not one of its ring neighbours.
        let last = steps.last().unwrap();
        assert_eq!(last.0, Stage::Bisect);
        assert_eq!(last.1, vec![vec![0, 3]]);
    }

    #[test]
    fn a_slow_link_is_not_blamed_on_its_nodes() {
        let (f, _) = drive(5, fleet(&[], &[(1, 2)]));
        assert_eq!(f.named(), None);
        assert!(f.slow_nodes.is_empty());
        assert_eq!(f.slow_links.len(), 1);
        assert_eq!(f.slow_links[0].nodes, vec![1, 2]);
        assert!(f.slow_links[0]
            .reason
            .contains("while both nodes are fast with others"));
    }

    #[test]
    fn bisection_splits_a_group_of_suspects() {
        // Nodes 2 and 3 slow between nodes: pairs (1,2) (2,3) (3,4) slow; 2 and 3 suspects.
        let bw = |g: &[usize]| {
            Some(if g.len() == 1 {
                340.0
            } else if g.contains(&2) || g.contains(&3) {
                60.0
            } else {
                180.0
            })
        };
        let (f, steps) = drive(7, bw);
        let mut named: Vec<usize> = f.slow_nodes.iter().map(|b| b.nodes[0]).collect();
        named.sort_unstable();
        assert_eq!(named, vec![2, 3]);
        let bisect: Vec<&Vec<Vec<usize>>> = steps
            .iter()
            .filter(|s| s.0 == Stage::Bisect)
            .map(|s| &s.1)
            .collect();
        assert_eq!(
            bisect[0],
            &vec![vec![0, 2, 3]],
            "the group of suspects with a good node"
        );
        assert_eq!(
            bisect[1],
            &vec![vec![0, 2], vec![1, 3]],
            "then its halves, each with its own good node"
        );
        // Only 2 is slow: the group is slow, then 3 is cleared.
        let only2 = |g: &[usize]| {
            Some(if g.len() == 1 {
                340.0
            } else if g.contains(&2) {
                60.0
            } else {
                180.0
            })
        };
        let (f, _) = drive(7, only2);
        assert_eq!(
            f.slow_nodes.iter().map(|b| b.nodes[0]).collect::<Vec<_>>(),
            vec![2]
        );
    }

    #[test]
    fn failures_count_as_slow_and_uniform_fleets_name_no_one() {
        let (f, _) = drive(4, |g: &[usize]| if g == [1] { None } else { Some(100.0) });
        assert_eq!(f.named(), Some(1));
        assert_eq!(f.slow_nodes[0].reason, "its single-node run failed");
        let (f, steps) = drive(4, fleet(&[], &[]));
        assert_eq!((f.named(), f.slow_links.len()), (None, 0));
        assert_eq!(steps.len(), 3, "singles and two ring rounds, no bisection");
        let (f, steps) = drive(1, fleet(&[], &[]));
        assert_eq!((f.named(), steps.len(), f.link_ranking.len()), (None, 1, 0));
        // Every pair failing leaves the nodes unresolved, named as such.
        let (f, _) = drive(3, |g: &[usize]| if g.len() > 1 { None } else { Some(1.0) });
        assert_eq!(f.unresolved, vec![0, 1, 2]);
    }
}
