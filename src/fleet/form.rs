//! The recorded form of a fleet file (what `fleet apply` records and later commands run
//! from, [`super::applied`]) and the difference between two of them.

use super::spec::FleetSpec;
use serde_yaml::Value;

/// Top-level keys left out of the record: dstack fields flightdeck does not act on that
/// may hold secrets (`env: {HF_TOKEN: …}`); the state never holds a secret.
const NOT_RECORDED: &[&str] = &["env"];

/// Keys left out wherever they are: an inline private key (dstack's `ssh_key`).
const NEVER_RECORDED: &[&str] = &["ssh_key"];

/// The recorded form of a fleet file's `text`, once [`super::parse`] has accepted it as
/// `spec`: its YAML as data (comments and layout gone), without [`NOT_RECORDED`] and
/// [`NEVER_RECORDED`], with a GKE kubeconfig as the absolute path it was checked at.
pub fn applied_form(text: &str, spec: &FleetSpec) -> String {
    let mut v: Value = serde_yaml::from_str(text).unwrap_or(Value::Null);
    if let Value::Mapping(m) = &mut v {
        for k in NOT_RECORDED {
            m.remove(*k);
        }
        if let (Some(Value::Mapping(g)), Some(k)) = (
            m.get_mut("gke"),
            spec.gke.as_ref().and_then(|g| g.kubeconfig.as_ref()),
        ) {
            g.insert("kubeconfig".into(), Value::String(k.clone()));
        }
    }
    drop_everywhere(&mut v);
    serde_yaml::to_string(&v).unwrap_or_default()
}

fn drop_everywhere(v: &mut Value) {
    // A loop over a stack, not recursion: a deep file must not cost a deep stack.
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::Mapping(m) => {
                for k in NEVER_RECORDED {
                    m.remove(*k);
                }
                stack.extend(m.values_mut());
            }
            Value::Sequence(s) => stack.extend(s.iter_mut()),
            Value::Tagged(t) => stack.push(&mut t.value),
            _ => {}
        }
    }
}

/// A field whose value in the fleet file differs from what was applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldChange {
    /// `gke.debug_image`, `ssh_config.hosts`.
    pub path: String,
    /// The values, as one line of YAML; `None`: not set.
    pub applied: Option<String>,
    pub now: Option<String>,
}

impl std::fmt::Display for FieldChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |v: &Option<String>| v.as_deref().map(printable).unwrap_or_else(|| "(not set)".into());
        write!(f, "{}: {} → {}", self.path, show(&self.applied), show(&self.now))
    }
}

/// The fields that differ between two recorded forms, in the file's order.
pub fn changes(applied: &str, now: &str) -> Vec<FieldChange> {
    let a: Value = serde_yaml::from_str(applied).unwrap_or(Value::Null);
    let b: Value = serde_yaml::from_str(now).unwrap_or(Value::Null);
    let mut out = vec![];
    let mut stack = vec![(String::new(), Some(&a), Some(&b))];
    while let Some((path, a, b)) = stack.pop() {
        if a == b {
            continue;
        }
        match (a, b) {
            (Some(Value::Mapping(x)), Some(Value::Mapping(y))) => {
                let mut keys: Vec<&Value> = x.keys().collect();
                keys.extend(y.keys().filter(|k| !x.contains_key(*k)));
                // Reversed onto the stack so they come off in the file's order.
                for k in keys.into_iter().rev() {
                    let name = one_line(k);
                    let p = if path.is_empty() {
                        name
                    } else {
                        format!("{path}.{name}")
                    };
                    stack.push((p, x.get(k), y.get(k)));
                }
            }
            _ => out.push(FieldChange {
                path: if path.is_empty() {
                    "(the file)".into()
                } else {
                    path
                },
                applied: a.map(one_line),
                now: b.map(one_line),
            }),
        }
    }
    out
}

/// A value as one line: a scalar as itself, the rest as flow-ish YAML.
fn one_line(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        _ => serde_json::to_string(v).unwrap_or_default(),
    }
}

/// `s` for a message: control characters shown as escapes, at most 80 characters.
pub(super) fn printable(s: &str) -> String {
    let shown: String = s.chars().flat_map(char::escape_debug).take(80).collect();
    if s.chars().count() > 80 {
        format!("{shown}...")
    } else {
        shown
    }
}
