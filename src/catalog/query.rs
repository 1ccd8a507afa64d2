//! The offers filter language, shared by the Offers view's filter bar and
//! `flightdeck offers --filter`.
//!
//! ```text
//! gpu=H100 gpus>=8 region=us-* spot<25 gpudirect=rdma zone=us-central1-a machine=a3-*
//! ```
//!
//! * A query is whitespace-separated terms; every term must hold (AND).
//! * `field OP value` with OP one of `=` `!=` `<` `<=` `>` `>=`. Text fields (`gpu`,
//!   `machine`, `region`, `zone`, `gpudirect`) take `=` and `!=`; `*` in their value is a
//!   glob (`region=us-*`). Numeric fields take all six (`gpus>=8`, `spot<25`).
//! * Names are case-insensitive; field names ignore `-` and `_` (`on-demand`, `gpu_price`).
//! * A bare word matches any text field containing it (`ultra`, `h200`), or any whole text
//!   field when it has a `*`.
//! * `gpu=` matches the model (`H100`) and the accelerator type with or without its vendor
//!   prefix and memory suffix (`nvidia-h100-mega-80gb`, `h100-mega-80gb`, `H100-MEGA`).
//! * A comparison with an unknown value (a price the catalog does not have) never matches,
//!   with `!=` too; [`Filtered::unknown`] counts the offers left out only for that reason.
//! * `price` and `gpuprice` are the price per machine-hour and per GPU-hour of the pricing
//!   chosen by the caller (on-demand, spot or flex).

use super::model::{Offer, Pricing};
use crate::yaml::closest;
use std::fmt;

/// A filterable and sortable column of an offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    Machine,
    Gpu,
    Gpus,
    GpuMemory,
    Vcpus,
    Ram,
    Network,
    GpuDirect,
    Region,
    Zone,
    OnDemand,
    Spot,
    Flex,
    /// The price under the chosen pricing.
    Price,
    /// The price per GPU-hour under the chosen pricing.
    GpuPrice,
}

/// Whether a field compares as text or as a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Text,
    Number,
}

impl Field {
    pub const ALL: [Field; 15] = [
        Field::Machine,
        Field::Gpu,
        Field::Gpus,
        Field::GpuMemory,
        Field::Vcpus,
        Field::Ram,
        Field::Network,
        Field::GpuDirect,
        Field::Region,
        Field::Zone,
        Field::OnDemand,
        Field::Spot,
        Field::Flex,
        Field::Price,
        Field::GpuPrice,
    ];

    /// The canonical name in queries.
    pub fn name(self) -> &'static str {
        self.names()[0]
    }

    /// Accepted names, normalized (lower case, no `-` or `_`); the first is canonical.
    fn names(self) -> &'static [&'static str] {
        match self {
            Field::Machine => &["machine", "machinetype", "type", "mt"],
            Field::Gpu => &["gpu", "model"],
            Field::Gpus => &["gpus", "count", "gpucount", "ngpus"],
            Field::GpuMemory => &["gpumem", "gpumemory", "vram"],
            Field::Vcpus => &["vcpus", "vcpu", "cpus", "cpu"],
            Field::Ram => &["ram", "mem", "memory"],
            Field::Network => &["gbps", "network", "net", "bandwidth", "bw"],
            Field::GpuDirect => &["gpudirect", "gd"],
            Field::Region => &["region"],
            Field::Zone => &["zone", "az"],
            Field::OnDemand => &["ondemand", "od"],
            Field::Spot => &["spot"],
            Field::Flex => &["flex", "flexstart", "dws"],
            Field::Price => &["price"],
            Field::GpuPrice => &["gpuprice", "pergpu"],
        }
    }

    /// Case-insensitive, ignoring `-` and `_`, aliases accepted.
    pub fn parse(s: &str) -> Option<Field> {
        let norm: String = s
            .chars()
            .filter(|c| *c != '-' && *c != '_')
            .map(|c| c.to_ascii_lowercase())
            .collect();
        Field::ALL
            .into_iter()
            .find(|f| f.names().contains(&norm.as_str()))
    }

    pub fn kind(self) -> Kind {
        match self {
            Field::Machine | Field::Gpu | Field::GpuDirect | Field::Region | Field::Zone => Kind::Text,
            _ => Kind::Number,
        }
    }

    pub fn is_price(self) -> bool {
        matches!(
            self,
            Field::OnDemand | Field::Spot | Field::Flex | Field::Price | Field::GpuPrice
        )
    }

    /// The value of a numeric field; `None` when unknown (or for a text field).
    pub fn number(self, o: &Offer, pricing: Pricing) -> Option<f64> {
        match self {
            Field::Gpus => Some(f64::from(o.gpu_count)),
            Field::GpuMemory => o.gpu_memory_gb.map(f64::from),
            Field::Vcpus => Some(f64::from(o.vcpus)),
            Field::Ram => Some(f64::from(o.ram_gb)),
            Field::Network => o.network_gbps.map(f64::from),
            Field::OnDemand => o.on_demand,
            Field::Spot => o.spot,
            Field::Flex => o.flex,
            Field::Price => o.price(pricing),
            Field::GpuPrice => o.price_per_gpu(pricing),
            Field::Machine | Field::Gpu | Field::GpuDirect | Field::Region | Field::Zone => None,
        }
    }

    /// What the field is, in words: `spot price`, `price per GPU-hour (on-demand)`.
    pub fn describe(self, pricing: Pricing) -> String {
        match self {
            Field::Machine => "machine type".into(),
            Field::Gpu => "GPU".into(),
            Field::Gpus => "GPU count".into(),
            Field::GpuMemory => "GPU memory".into(),
            Field::Vcpus => "vCPUs".into(),
            Field::Ram => "RAM".into(),
            Field::Network => "network bandwidth".into(),
            Field::GpuDirect => "GPUDirect flavour".into(),
            Field::Region => "region".into(),
            Field::Zone => "zone".into(),
            Field::OnDemand => "on-demand price".into(),
            Field::Spot => "spot price".into(),
            Field::Flex => "flex-start price".into(),
            Field::Price => format!("{pricing} price"),
            Field::GpuPrice => format!("{pricing} price per GPU-hour"),
        }
    }

    fn bit(self) -> u32 {
        1 << (self as u32)
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Op {
    pub fn symbol(self) -> &'static str {
        match self {
            Op::Eq => "=",
            Op::Ne => "!=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        }
    }

    fn holds(self, ord: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::*;
        match self {
            Op::Eq => ord == Equal,
            Op::Ne => ord != Equal,
            Op::Lt => ord == Less,
            Op::Le => ord != Greater,
            Op::Gt => ord == Greater,
            Op::Ge => ord != Less,
        }
    }
}

/// A query that cannot be used: where (1-based column, in characters, and the length of
/// the bad part) and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("column {column}: {message}")]
pub struct QueryError {
    pub column: usize,
    pub len: usize,
    pub message: String,
}

impl QueryError {
    fn new(column: usize, len: usize, message: impl Into<String>) -> QueryError {
        QueryError {
            column,
            len: len.max(1),
            message: message.into(),
        }
    }

    /// A line of spaces and carets that underlines the bad part of the query.
    pub fn underline(&self) -> String {
        format!("{}{}", " ".repeat(self.column - 1), "^".repeat(self.len))
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Cond {
    /// `pattern` is lower case; `glob` when it holds a `*`.
    Text {
        field: Field,
        negate: bool,
        pattern: String,
        glob: bool,
    },
    Number {
        field: Field,
        op: Op,
        value: f64,
    },
    Bare {
        word: String,
        glob: bool,
    },
}

/// One term of a query, with where it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct Term {
    /// 1-based column of the term's value (of the word, for a bare word).
    column: usize,
    cond: Cond,
}

/// A text term whose value names something that must exist in the catalog (see
/// [`crate::catalog::Catalog::check`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NameTerm<'a> {
    pub field: Field,
    /// As written (original case).
    pub value: &'a str,
    pub column: usize,
}

/// A parsed query. The empty query matches every offer.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Query {
    terms: Vec<Term>,
    /// The values as written, for error messages (parallel to `terms`).
    written: Vec<String>,
}

/// The result of evaluating a query against one offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Truth {
    Yes,
    No,
    /// No term failed, but some compared an unknown value: the set of those fields.
    Unknown(UnknownFields),
}

/// A set of fields whose values were unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UnknownFields(u32);

impl UnknownFields {
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn contains(self, f: Field) -> bool {
        self.0 & f.bit() != 0
    }

    pub fn iter(self) -> impl Iterator<Item = Field> {
        Field::ALL.into_iter().filter(move |f| self.contains(*f))
    }
}

/// Offers that matched a query, as indices into the slice that was filtered.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Filtered {
    pub indices: Vec<usize>,
    /// Offers left out only because a compared value was unknown.
    pub unknown: usize,
    /// The fields whose unknown values left those offers out.
    pub unknown_fields: UnknownFields,
}

impl Query {
    /// The fields the query's terms compare (a bare word names none), in query order.
    pub fn fields(&self) -> Vec<Field> {
        let mut out = Vec::new();
        for t in &self.terms {
            if let Cond::Text { field, .. } | Cond::Number { field, .. } = t.cond {
                if !out.contains(&field) {
                    out.push(field);
                }
            }
        }
        out
    }

    /// Parse a query; the error points at the first bad term.
    pub fn parse(text: &str) -> Result<Query, QueryError> {
        let mut q = Query::default();
        for (column, token) in tokens(text) {
            let (term, written) = parse_term(token, column)?;
            q.terms.push(term);
            q.written.push(written);
        }
        Ok(q)
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Both queries' terms (used to add command-line flags to a `--filter`).
    pub fn and(mut self, other: Query) -> Query {
        self.terms.extend(other.terms);
        self.written.extend(other.written);
        self
    }

    /// Whether the query compares a price (so unknown prices may leave offers out).
    pub fn has_price_term(&self) -> bool {
        self.terms
            .iter()
            .any(|t| matches!(t.cond, Cond::Number { field, .. } if field.is_price()))
    }

    /// The exact (non-glob) values of `gpu`, `machine`, `region` and `zone` terms.
    pub fn name_terms(&self) -> impl Iterator<Item = NameTerm<'_>> {
        self.terms
            .iter()
            .zip(&self.written)
            .filter_map(|(t, w)| match &t.cond {
                Cond::Text {
                    field: field @ (Field::Gpu | Field::Machine | Field::Region | Field::Zone),
                    glob: false,
                    ..
                } => Some(NameTerm {
                    field: *field,
                    value: w.as_str(),
                    column: t.column,
                }),
                _ => None,
            })
    }

    pub fn eval(&self, o: &Offer, pricing: Pricing) -> Truth {
        let mut unknown = UnknownFields::default();
        for t in &self.terms {
            match t.cond.eval(o, pricing) {
                Some(true) => {}
                Some(false) => return Truth::No,
                None => {
                    if let Cond::Number { field, .. } = t.cond {
                        unknown.0 |= field.bit();
                    }
                }
            }
        }
        if unknown.is_empty() {
            Truth::Yes
        } else {
            Truth::Unknown(unknown)
        }
    }

    pub fn matches(&self, o: &Offer, pricing: Pricing) -> bool {
        self.eval(o, pricing) == Truth::Yes
    }

    /// The offers that match, in their order.
    pub fn filter(&self, offers: &[Offer], pricing: Pricing) -> Filtered {
        let mut out = Filtered::default();
        if self.terms.is_empty() {
            out.indices = (0..offers.len()).collect();
            return out;
        }
        for (i, o) in offers.iter().enumerate() {
            match self.eval(o, pricing) {
                Truth::Yes => out.indices.push(i),
                Truth::No => {}
                Truth::Unknown(f) => {
                    out.unknown += 1;
                    out.unknown_fields.0 |= f.0;
                }
            }
        }
        out
    }
}

impl Cond {
    /// `None`: the compared value is unknown.
    fn eval(&self, o: &Offer, pricing: Pricing) -> Option<bool> {
        match self {
            Cond::Text {
                field,
                negate,
                pattern,
                glob,
            } => {
                let hit = |s: &str| text_matches(pattern, *glob, s);
                let found = match field {
                    Field::Gpu => hit(&o.gpu) || o.gpu_aliases().into_iter().any(hit),
                    Field::Machine => hit(&o.machine_type),
                    Field::Region => hit(&o.region),
                    Field::Zone => hit(&o.zone),
                    Field::GpuDirect => hit(o.gpudirect.name()),
                    _ => false,
                };
                Some(found != *negate)
            }
            Cond::Number { field, op, value } => {
                let v = field.number(o, pricing)?;
                Some(op.holds(v.total_cmp(value)))
            }
            Cond::Bare { word, glob } => {
                let hit = |s: &str| {
                    if *glob {
                        glob_matches(word.as_bytes(), s.as_bytes())
                    } else {
                        contains_ignore_case(s, word)
                    }
                };
                Some(
                    hit(&o.machine_type)
                        || hit(&o.gpu)
                        || hit(&o.accelerator_type)
                        || hit(&o.region)
                        || hit(&o.zone)
                        || hit(o.gpudirect.name()),
                )
            }
        }
    }
}

/// Whitespace-separated tokens with their 1-based character columns.
fn tokens(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start: Option<(usize, usize)> = None; // (byte, column)
    for (col0, (byte, c)) in text.char_indices().enumerate() {
        if c.is_whitespace() {
            if let Some((b, col)) = start.take() {
                out.push((col, &text[b..byte]));
            }
        } else if start.is_none() {
            start = Some((byte, col0 + 1));
        }
    }
    if let Some((b, col)) = start {
        out.push((col, &text[b..]));
    }
    out
}

fn is_op_char(c: char) -> bool {
    matches!(c, '=' | '!' | '<' | '>')
}

fn field_list() -> String {
    Field::ALL.iter().map(|f| f.name()).collect::<Vec<_>>().join(", ")
}

fn parse_term(token: &str, column: usize) -> Result<(Term, String), QueryError> {
    let chars = |s: &str| s.chars().count();
    let Some(op_at) = token.find(is_op_char) else {
        let word = token.to_ascii_lowercase();
        let glob = word.contains('*');
        return Ok((
            Term {
                column,
                cond: Cond::Bare { word, glob },
            },
            token.to_string(),
        ));
    };
    let name = &token[..op_at];
    let rest = &token[op_at..];
    let op_column = column + chars(name);
    let op_run: String = rest.chars().take_while(|c| is_op_char(*c)).collect();
    let op = match op_run.as_str() {
        "=" | "==" => Op::Eq,
        "!=" => Op::Ne,
        "<" => Op::Lt,
        "<=" => Op::Le,
        ">" => Op::Gt,
        ">=" => Op::Ge,
        bad => {
            return Err(QueryError::new(
                op_column,
                chars(bad),
                format!("`{bad}` is not an operator; expected one of = != < <= > >="),
            ))
        }
    };
    if name.is_empty() {
        return Err(QueryError::new(
            column,
            chars(&op_run),
            format!(
                "expected a field name before `{op_run}` (fields: {})",
                field_list()
            ),
        ));
    }
    let field = Field::parse(name).ok_or_else(|| {
        // After `<`, `>`, `<=` or `>=` only a numeric field makes sense.
        let ordering = !matches!(op, Op::Eq | Op::Ne);
        let names = Field::ALL
            .iter()
            .filter(|f| !ordering || f.kind() == Kind::Number)
            .map(|f| f.name());
        let hint = match closest(name, names) {
            Some(s) => format!("did you mean `{s}`?"),
            None => format!("fields: {}", field_list()),
        };
        QueryError::new(column, chars(name), format!("unknown field `{name}`; {hint}"))
    })?;
    let value = &rest[op_run.len()..];
    let value_column = op_column + chars(&op_run);
    if value.is_empty() {
        let expected = match field.kind() {
            Kind::Number => "a number",
            Kind::Text => "a value",
        };
        return Err(QueryError::new(
            value_column,
            1,
            format!("expected {expected} after `{name}{op_run}`"),
        ));
    }
    let cond = match field.kind() {
        Kind::Number => {
            let digits = value.strip_prefix('$').unwrap_or(value);
            match digits.parse::<f64>() {
                Ok(v) if v.is_finite() => Cond::Number { field, op, value: v },
                _ => {
                    return Err(QueryError::new(
                        value_column,
                        chars(value),
                        format!("expected a number after `{name}{op_run}`, found `{value}`"),
                    ))
                }
            }
        }
        Kind::Text => {
            if !matches!(op, Op::Eq | Op::Ne) {
                return Err(QueryError::new(
                    op_column,
                    chars(&op_run),
                    format!("`{}` compares with = or != only", field.name()),
                ));
            }
            let pattern = value.to_ascii_lowercase();
            let glob = pattern.contains('*');
            if field == Field::GpuDirect && !glob && super::model::GpuDirect::parse(value).is_none() {
                let names = super::model::GpuDirect::ALL.map(|g| g.name());
                let hint = crate::yaml::did_you_mean(value, names);
                return Err(QueryError::new(
                    value_column,
                    chars(value),
                    format!("unknown GPUDirect flavour `{value}`: expected none, tcpx, tcpxo or rdma{hint}"),
                ));
            }
            Cond::Text {
                field,
                negate: op == Op::Ne,
                pattern,
                glob,
            }
        }
    };
    Ok((
        Term {
            column: value_column,
            cond,
        },
        value.to_string(),
    ))
}

/// `pattern` is lower case.
fn text_matches(pattern: &str, glob: bool, s: &str) -> bool {
    if glob {
        glob_matches(pattern.as_bytes(), s.as_bytes())
    } else {
        pattern.eq_ignore_ascii_case(s)
    }
}

/// `*` matches any run of bytes; everything else matches itself, ASCII case-insensitively.
/// `pattern` is lower case. Linear backtracking over the last `*`.
pub fn glob_matches(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<usize> = None;
    let mut mark = 0;
    while t < text.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            star = Some(p);
            mark = t;
            p += 1;
        } else if p < pattern.len() && pattern[p] == text[t].to_ascii_lowercase() {
            p += 1;
            t += 1;
        } else if let Some(s) = star {
            p = s + 1;
            mark += 1;
            t = mark;
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|b| *b == b'*')
}

/// `needle` is lower case.
fn contains_ignore_case(hay: &str, needle: &str) -> bool {
    let (h, n) = (hay.as_bytes(), needle.as_bytes());
    let Some((&first, rest)) = n.split_first() else {
        return true;
    };
    if h.len() < n.len() {
        return false;
    }
    (0..=h.len() - n.len())
        .any(|i| h[i].to_ascii_lowercase() == first && h[i + 1..i + n.len()].eq_ignore_ascii_case(rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::model::{Flags, GpuDirect, NicLayout};

    fn offer(
        machine: &str,
        gpu: &str,
        acc: &str,
        n: u32,
        zone: &str,
        od: Option<f64>,
        spot: Option<f64>,
    ) -> Offer {
        let region = zone.rsplit_once('-').unwrap().0.to_string();
        Offer {
            id: Offer::make_id(machine, zone, None),
            machine_type: machine.into(),
            gpu: gpu.into(),
            accelerator_type: acc.into(),
            gpu_count: n,
            gpus_attached: false,
            gpu_memory_gb: Some(80),
            vcpus: 208,
            ram_gb: 1872,
            network_gbps: if machine.starts_with("a3-ultra") {
                Some(3600)
            } else {
                None
            },
            gpudirect: if machine.starts_with("a3-ultra") {
                GpuDirect::Rdma
            } else if machine.starts_with("a3-mega") {
                GpuDirect::Tcpxo
            } else {
                GpuDirect::None
            },
            nics: NicLayout {
                host_nics: 1,
                gpu_nics: 0,
                gpu_nic_type: None,
            },
            region,
            zone: zone.into(),
            on_demand: od,
            spot,
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
                "a3-ultragpu-8g",
                "H200",
                "nvidia-h200-141gb",
                8,
                "us-central1-b",
                Some(86.76),
                Some(32.62),
            ),
            offer(
                "a3-megagpu-8g",
                "H100",
                "nvidia-h100-mega-80gb",
                8,
                "us-central1-a",
                Some(92.21),
                Some(21.21),
            ),
            offer(
                "a3-highgpu-1g",
                "H100",
                "nvidia-h100-80gb",
                1,
                "europe-west4-b",
                Some(14.0),
                None,
            ),
            offer(
                "a4-highgpu-8g",
                "B200",
                "nvidia-b200",
                8,
                "us-east1-b",
                None,
                None,
            ),
            offer(
                "g2-standard-4",
                "L4",
                "nvidia-l4",
                1,
                "asia-east1-a",
                Some(0.7),
                Some(0.3),
            ),
        ]
    }

    fn ids(q: &str, pricing: Pricing) -> Vec<String> {
        let all = offers();
        let f = Query::parse(q)
            .unwrap_or_else(|e| panic!("{q}: {e}"))
            .filter(&all, pricing);
        f.indices.iter().map(|&i| all[i].machine_type.clone()).collect()
    }

    #[test]
    fn filters() {
        let od = Pricing::OnDemand;
        let cases: &[(&str, Pricing, &[&str])] = &[
            (
                "",
                od,
                &[
                    "a3-ultragpu-8g",
                    "a3-megagpu-8g",
                    "a3-highgpu-1g",
                    "a4-highgpu-8g",
                    "g2-standard-4",
                ],
            ),
            ("gpu=H100", od, &["a3-megagpu-8g", "a3-highgpu-1g"]),
            ("GPU=h100", od, &["a3-megagpu-8g", "a3-highgpu-1g"]),
            ("gpu=H100-MEGA", od, &["a3-megagpu-8g"]),
            ("gpu=nvidia-h200-141gb", od, &["a3-ultragpu-8g"]),
            ("gpu=H1*", od, &["a3-megagpu-8g", "a3-highgpu-1g"]),
            (
                "gpu!=H100",
                od,
                &["a3-ultragpu-8g", "a4-highgpu-8g", "g2-standard-4"],
            ),
            (
                "gpus>=8",
                od,
                &["a3-ultragpu-8g", "a3-megagpu-8g", "a4-highgpu-8g"],
            ),
            ("gpus<8", od, &["a3-highgpu-1g", "g2-standard-4"]),
            ("gpus=1 region=europe-*", od, &["a3-highgpu-1g"]),
            (
                "region=us-*",
                od,
                &["a3-ultragpu-8g", "a3-megagpu-8g", "a4-highgpu-8g"],
            ),
            ("zone=us-central1-a", od, &["a3-megagpu-8g"]),
            (
                "machine=a3-*",
                od,
                &["a3-ultragpu-8g", "a3-megagpu-8g", "a3-highgpu-1g"],
            ),
            ("machine=*-8g gpudirect=rdma", od, &["a3-ultragpu-8g"]),
            ("gpudirect!=none", od, &["a3-ultragpu-8g", "a3-megagpu-8g"]),
            ("gd=TCPX*", od, &["a3-megagpu-8g"]),
            ("spot<25", od, &["a3-megagpu-8g", "g2-standard-4"]),
            ("on-demand>=86.76", od, &["a3-ultragpu-8g", "a3-megagpu-8g"]),
            ("od>86.76", od, &["a3-megagpu-8g"]),
            ("price<=$14", od, &["a3-highgpu-1g", "g2-standard-4"]),
            ("price<=14", Pricing::Spot, &["g2-standard-4"]),
            (
                "gpuprice<5",
                Pricing::Spot,
                &["a3-ultragpu-8g", "a3-megagpu-8g", "g2-standard-4"],
            ),
            ("gbps>=3600", od, &["a3-ultragpu-8g"]),
            ("ultra", od, &["a3-ultragpu-8g"]),
            ("H100 gpus=8", od, &["a3-megagpu-8g"]),
            ("east", od, &["a4-highgpu-8g", "g2-standard-4"]),
            ("*-8g", od, &["a3-ultragpu-8g", "a3-megagpu-8g", "a4-highgpu-8g"]),
            ("flex<1000", od, &[]),
            ("price<1000", Pricing::Flex, &[]),
        ];
        for (q, pricing, want) in cases {
            assert_eq!(ids(q, *pricing), *want, "query `{q}` ({pricing})");
        }
    }

    #[test]
    fn unknown_values_never_match_and_are_counted() {
        let all = offers();
        let cases: &[(&str, Pricing, usize, &[Field])] = &[
            ("spot<100", Pricing::OnDemand, 2, &[Field::Spot]),
            ("spot!=1", Pricing::OnDemand, 2, &[Field::Spot]),
            ("price<100", Pricing::OnDemand, 1, &[Field::Price]),
            ("gpus=8 price<100", Pricing::OnDemand, 1, &[Field::Price]),
            // Left out by another term first: not counted as unknown.
            ("gpus=1 spot<100", Pricing::OnDemand, 1, &[Field::Spot]),
            ("gpu=L4 spot<100", Pricing::OnDemand, 0, &[]),
            (
                "gpuprice<100 spot<100",
                Pricing::Spot,
                2,
                &[Field::Spot, Field::GpuPrice],
            ),
            ("gbps>0", Pricing::OnDemand, 4, &[Field::Network]),
            ("gpus>0", Pricing::OnDemand, 0, &[]),
        ];
        for (q, pricing, unknown, fields) in cases {
            let f = Query::parse(q).unwrap().filter(&all, *pricing);
            assert_eq!(f.unknown, *unknown, "`{q}`");
            assert_eq!(f.unknown_fields.iter().collect::<Vec<_>>(), *fields, "`{q}`");
        }
        let b200 = &all[3];
        let q = Query::parse("price<100").unwrap();
        assert!(matches!(q.eval(b200, Pricing::OnDemand), Truth::Unknown(_)));
        assert!(!q.matches(b200, Pricing::OnDemand));
        assert!(q.has_price_term() && !Query::parse("gpus=8").unwrap().has_price_term());
    }

    #[test]
    fn errors_point_at_the_bad_term() {
        // (query, column, length, message fragment)
        let cases: &[(&str, usize, usize, &str)] = &[
            (
                "gpus>>8",
                5,
                2,
                "`>>` is not an operator; expected one of = != < <= > >=",
            ),
            ("gpu=H100 gpus=>8", 14, 2, "`=>` is not an operator"),
            ("gpu=H100 gpus!8", 14, 1, "`!` is not an operator"),
            ("=H100", 1, 1, "expected a field name before `=`"),
            (
                "gpu=H100 gpuz>=8",
                10,
                4,
                "unknown field `gpuz`; did you mean `gpus`?",
            ),
            (
                "colour=red",
                1,
                6,
                "unknown field `colour`; fields: machine, gpu, gpus",
            ),
            ("gpu=", 5, 1, "expected a value after `gpu=`"),
            ("gpus>=", 7, 1, "expected a number after `gpus>=`"),
            (
                "gpus>=eight",
                7,
                5,
                "expected a number after `gpus>=`, found `eight`",
            ),
            (
                "  spot<cheap",
                8,
                5,
                "expected a number after `spot<`, found `cheap`",
            ),
            ("region<us", 7, 1, "`region` compares with = or != only"),
            (
                "gpudirect=rdm",
                11,
                3,
                "unknown GPUDirect flavour `rdm`: expected none, tcpx, tcpxo or rdma; did you mean `rdma`?",
            ),
            ("price<inf", 7, 3, "expected a number"),
            ("zone=ü gpus>x", 13, 1, "found `x`"),
        ];
        for (q, column, len, msg) in cases {
            let e = Query::parse(q).expect_err(q);
            assert!(e.message.contains(msg), "`{q}`: {}", e.message);
            assert_eq!((e.column, e.len), (*column, *len), "`{q}`: {e}");
        }
        let e = Query::parse("gpus>>8").unwrap_err();
        assert_eq!(
            e.to_string(),
            "column 5: `>>` is not an operator; expected one of = != < <= > >="
        );
        assert_eq!(e.underline(), "    ^^");
    }

    #[test]
    fn field_names_and_name_terms() {
        for f in Field::ALL {
            assert_eq!(Field::parse(f.name()), Some(f));
            assert_eq!(Field::parse(&f.name().to_uppercase()), Some(f));
        }
        assert_eq!(Field::parse("on_demand"), Some(Field::OnDemand));
        assert_eq!(Field::parse("GPU-Price"), Some(Field::GpuPrice));
        assert_eq!(Field::parse("machine_type"), Some(Field::Machine));
        let q = Query::parse("gpu=H10 region=us-* zone=europe-west4-b ultra machine=A3-HIGHGPU-1G").unwrap();
        let names: Vec<_> = q.name_terms().map(|t| (t.field, t.value, t.column)).collect();
        assert_eq!(
            names,
            [
                (Field::Gpu, "H10", 5),
                (Field::Zone, "europe-west4-b", 26),
                (Field::Machine, "A3-HIGHGPU-1G", 55)
            ]
        );
        let both = Query::parse("gpu=H100")
            .unwrap()
            .and(Query::parse("gpus=8").unwrap());
        let all = offers();
        let one = Query::parse("gpu=H100 gpus=8").unwrap();
        assert_eq!(
            both.filter(&all, Pricing::OnDemand),
            one.filter(&all, Pricing::OnDemand)
        );
        assert_eq!(both.filter(&all, Pricing::OnDemand).indices, [1]);
    }

    #[test]
    fn globs() {
        let cases: &[(&str, &str, bool)] = &[
            ("us-*", "us-central1", true),
            ("us-*", "US-CENTRAL1", true),
            ("us-*", "europe-west4", false),
            ("*", "", true),
            ("*-8g", "a3-ultragpu-8g", true),
            ("*-8g", "a3-ultragpu-8g-nolssd", false),
            ("a3-*-8g*", "a3-ultragpu-8g-nolssd", true),
            ("a*a*a", "aaa", true),
            ("a*a*a", "aa", false),
            ("us-central1-?", "us-central1-a", false),
            ("", "", true),
            ("", "x", false),
        ];
        for (p, t, want) in cases {
            assert_eq!(glob_matches(p.as_bytes(), t.as_bytes()), *want, "{p} ~ {t}");
        }
        assert!(contains_ignore_case("a3-UltraGPU-8g", "ultra"));
        assert!(!contains_ignore_case("a3", "a3-"));
    }
}
