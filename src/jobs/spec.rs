//! Job files: close to dstack's task format (`type: task`), so a dstack task file runs
//! unchanged, plus flightdeck's own fields (`fleet`, `nccl_profile`, `metrics`, `model`,
//! `gpu`, `gpus_per_node`, `stop_on_failure`).
//!
//! Every field dstack's task configuration has is accepted; those flightdeck does not act
//! on are reported as ignored. Anything else is an error at its line and column with a
//! "did you mean".

use crate::fleet::{Diagnostic, Severity};
use crate::yaml;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    #[serde(rename = "type")]
    pub kind: Option<TaskType>,
    pub name: Option<String>,
    /// The fleet to run on (flightdeck); dstack's `fleets` list is accepted too.
    pub fleet: Option<String>,
    pub fleets: Option<Vec<String>>,
    /// How many of the fleet's nodes (the first N); all of them when absent.
    pub nodes: Option<u32>,
    pub commands: Option<Vec<String>>,
    pub env: Option<EnvSpec>,
    pub working_dir: Option<String>,
    pub files: Option<Vec<FileSpec>>,
    pub nccl_profile: Option<NcclProfile>,
    /// Extra metric patterns: regexes with named groups (step, loss, step_time,
    /// tokens_per_s, tflops, mfu).
    pub metrics: Option<Vec<String>>,
    /// What the model costs, for MFU.
    pub model: Option<Model>,
    /// The GPU model (e.g. H200), for its peak rate in MFU; else the fleet's.
    pub gpu: Option<String>,
    /// Processes per node; else the node's GPU count (1 on a node without GPUs).
    pub gpus_per_node: Option<u32>,
    /// Stop every node as soon as one fails.
    pub stop_on_failure: Option<bool>,
    /// Seconds between TERM and KILL when stopping.
    pub stop_grace: Option<u32>,
    /// The container image the commands run in on Container-Optimized OS nodes (A3 High
    /// with TCPX), which have no Python or frameworks on the host; elsewhere the commands
    /// run on the host and this is not used.
    pub image: Option<String>,
    /// GKE: the Kubernetes service account the job's pods run as (for Workload
    /// Identity: the KSA bound to a Google service account).
    pub service_account: Option<String>,
    /// GKE: Kueue Topology Aware Scheduling (`preferred:` or `required:` a level).
    pub topology: Option<crate::fleet::spec::Topology>,
    // dstack task fields flightdeck accepts without acting on them.
    pub python: Option<serde_yaml::Value>,
    pub nvcc: Option<serde_yaml::Value>,
    pub resources: Option<serde_yaml::Value>,
    pub ports: Option<serde_yaml::Value>,
    pub setup: Option<serde_yaml::Value>,
    pub repos: Option<serde_yaml::Value>,
    pub volumes: Option<serde_yaml::Value>,
    pub max_duration: Option<serde_yaml::Value>,
    pub max_price: Option<serde_yaml::Value>,
    pub spot_policy: Option<serde_yaml::Value>,
    pub retry: Option<serde_yaml::Value>,
    pub backends: Option<serde_yaml::Value>,
    pub regions: Option<serde_yaml::Value>,
    pub instance_types: Option<serde_yaml::Value>,
    pub priority: Option<serde_yaml::Value>,
    pub utilization_policy: Option<serde_yaml::Value>,
    pub startup_order: Option<serde_yaml::Value>,
    pub stop_criteria: Option<serde_yaml::Value>,
    pub shell: Option<serde_yaml::Value>,
    pub user: Option<serde_yaml::Value>,
    pub privileged: Option<serde_yaml::Value>,
    pub single_branch: Option<serde_yaml::Value>,
    pub schedule: Option<serde_yaml::Value>,
    pub idle_duration: Option<serde_yaml::Value>,
    pub reservation: Option<serde_yaml::Value>,
    pub creation_policy: Option<serde_yaml::Value>,
    pub tags: Option<serde_yaml::Value>,
    pub docker: Option<serde_yaml::Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskType {
    Task,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NcclProfile {
    #[default]
    Auto,
    None,
    Tcpx,
    Tcpxo,
    Rdma,
}

/// `env` as dstack takes it: a list of `KEY=VALUE` (or bare `KEY`, taken from the
/// environment flightdeck runs in), or a mapping.
#[derive(Debug, Clone, PartialEq)]
pub enum EnvSpec {
    List(Vec<String>),
    Map(BTreeMap<String, EnvValue>),
}

// By hand rather than `untagged`: a wrong value is reported at its own line and column
// with what `env` takes ("data did not match any variant" told neither).
impl<'de> Deserialize<'de> for EnvSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = EnvSpec;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of `KEY=VALUE` (or `KEY`) strings, or a mapping of KEY: value")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<EnvSpec, A::Error> {
                Vec::<String>::deserialize(SeqAccessDeserializer::new(seq)).map(EnvSpec::List)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<EnvSpec, A::Error> {
                BTreeMap::<String, EnvValue>::deserialize(MapAccessDeserializer::new(map)).map(EnvSpec::Map)
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum EnvValue {
    Text(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    /// GKE: a key of a Secret that exists in the fleet's namespace.
    Secret(SecretRef),
}

/// `{secret: NAME, key: KEY}`: the value of key KEY of the Kubernetes Secret NAME.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretRef {
    pub secret: String,
    pub key: String,
}

// By hand rather than `untagged`: a wrong Secret reference is reported at its own line
// and column with its field ("did not match any variant" told neither).
impl<'de> Deserialize<'de> for EnvValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::value::MapAccessDeserializer;
        use serde::de::Error;
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = EnvValue;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(
                    "a value (text, a number, true or false) or a Secret's key `{secret: NAME, key: KEY}`",
                )
            }
            fn visit_str<E: Error>(self, v: &str) -> Result<EnvValue, E> {
                Ok(EnvValue::Text(v.to_string()))
            }
            fn visit_i64<E: Error>(self, v: i64) -> Result<EnvValue, E> {
                Ok(EnvValue::Int(v))
            }
            fn visit_u64<E: Error>(self, v: u64) -> Result<EnvValue, E> {
                i64::try_from(v)
                    .map(EnvValue::Int)
                    .or_else(|_| Ok(EnvValue::Text(v.to_string())))
            }
            fn visit_f64<E: Error>(self, v: f64) -> Result<EnvValue, E> {
                Ok(EnvValue::Float(v))
            }
            fn visit_bool<E: Error>(self, v: bool) -> Result<EnvValue, E> {
                Ok(EnvValue::Bool(v))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<EnvValue, A::Error> {
                SecretRef::deserialize(MapAccessDeserializer::new(map)).map(EnvValue::Secret)
            }
        }
        d.deserialize_any(V)
    }
}

impl EnvValue {
    fn text(&self) -> Option<String> {
        Some(match self {
            EnvValue::Text(s) => s.clone(),
            EnvValue::Int(i) => i.to_string(),
            EnvValue::Float(f) => f.to_string(),
            EnvValue::Bool(b) => b.to_string(),
            EnvValue::Secret(_) => return None,
        })
    }
}

/// Variables from Secrets' keys: (variable, Secret and key).
pub type SecretEnv = Vec<(String, SecretRef)>;

/// A GKE job pod's CPU and memory requests and its `/dev/shm` size (quantities).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requests {
    pub cpu: Option<String>,
    pub memory: Option<String>,
    pub shm: Option<String>,
}

/// A volume of a GKE job's pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VolumeSource {
    /// A Cloud Storage bucket through the GCS FUSE CSI driver (`gcs: BUCKET`), with
    /// its `mount_options` (gcsfuse's, comma-separated).
    Gcs {
        bucket: String,
        mount_options: Option<String>,
    },
    /// A PersistentVolumeClaim of the fleet's namespace (`pvc: CLAIM`).
    Pvc { claim: String },
}

/// A volume mounted at `path` in a GKE job's container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Volume {
    pub source: VolumeSource,
    pub path: String,
    pub read_only: bool,
}

/// A file or directory to upload: `local` (the same relative path on the node),
/// `local:remote`, or dstack's `{local_path, path}`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum FileSpec {
    Short(String),
    Long { local_path: String, path: String },
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Model {
    /// Training FLOPs per token (forward and backward).
    pub flops_per_token: Option<f64>,
    /// Parameter count; 6 x params FLOPs per token when `flops_per_token` is absent.
    pub params: Option<f64>,
}

impl Model {
    pub fn flops_per_token(&self) -> Option<f64> {
        self.flops_per_token.or(self.params.map(|p| 6.0 * p))
    }
}

/// A file to upload, resolved: where it is here, where it goes on the node (relative
/// paths are under the working directory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upload {
    pub local: PathBuf,
    pub remote: String,
}

/// A job file, read and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub file: PathBuf,
    pub name: String,
    pub fleet: String,
    pub spec: JobSpec,
    /// The environment, in file order, bare keys resolved.
    pub env: Vec<(String, String)>,
    /// GKE: variables from keys of existing Secrets (`KEY: {secret: NAME, key: K}`).
    pub secret_env: Vec<(String, SecretRef)>,
    /// GKE: `volumes:` of Cloud Storage buckets and PersistentVolumeClaims.
    pub volumes: Vec<Volume>,
    /// GKE: the pods' CPU and memory requests (Kubernetes quantities), from the
    /// least of `resources.cpu` and `resources.memory`.
    pub requests: Requests,
    /// `max_duration` in seconds (none for `off`): GKE's Jobs' activeDeadlineSeconds.
    pub max_duration: Option<u64>,
    /// What only a GKE fleet can run (Secrets, buckets, claims, a service account), at
    /// its place in the file: an SSH fleet refuses the job with these.
    pub gke_only: Vec<Diagnostic>,
    /// What a GKE fleet cannot run (dstack's own volumes, which are dstack's or a
    /// node's paths), at its place in the file: a GKE fleet refuses the job with these.
    pub not_on_gke: Vec<Diagnostic>,
    pub uploads: Vec<Upload>,
    pub patterns: Vec<super::metrics::Pattern>,
    pub warnings: Vec<Diagnostic>,
    /// `files:` whose local path is outside the job file's folder (itself, or through a
    /// link): not uploaded unless the operator says so (`job run --files-outside`), as a
    /// job file from a shared repository could otherwise carry any local file away.
    pub outside: Vec<Diagnostic>,
}

impl Job {
    pub fn profile(&self) -> NcclProfile {
        self.spec.nccl_profile.unwrap_or_default()
    }
    pub fn stop_on_failure(&self) -> bool {
        self.spec.stop_on_failure.unwrap_or(false)
    }
    pub fn stop_grace(&self) -> u32 {
        self.spec.stop_grace.unwrap_or(10)
    }
}

/// Why a runner refuses `job`: its findings, one a line (None when there are none).
pub fn refusal(job: &Job, found: &[Diagnostic], what: &str) -> Result<(), String> {
    if found.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = found.iter().map(|d| d.to_string()).collect();
    Err(format!("{}: {what}:\n{}", job.file.display(), lines.join("\n")))
}

/// Fields of dstack's task format flightdeck reads but does not act on.
const IGNORED: &[&str] = &[
    "python",
    "nvcc",
    "ports",
    "setup",
    "repos",
    "max_price",
    "spot_policy",
    "retry",
    "backends",
    "regions",
    "instance_types",
    "priority",
    "utilization_policy",
    "startup_order",
    "stop_criteria",
    "shell",
    "user",
    "privileged",
    "single_branch",
    "schedule",
    "idle_duration",
    "reservation",
    "creation_policy",
    "tags",
    "docker",
];

/// Read, parse and check a job file. `lookup` resolves bare `env` keys (the process
/// environment in real use).
pub fn load(file: &Path, lookup: &dyn Fn(&str) -> Option<String>) -> Result<Job, Vec<Diagnostic>> {
    let text = yaml::read_text(file).map_err(|e| vec![Diagnostic::from(e)])?;
    parse(file, &text, lookup)
}

/// Parse and check job file text.
pub fn parse(
    file: &Path,
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Job, Vec<Diagnostic>> {
    let spec: JobSpec = yaml::from_str(file, text).map_err(|e| vec![Diagnostic::from(e)])?;
    let mut c = Checker {
        file,
        text,
        out: vec![],
        outside: vec![],
        gke_only: vec![],
        not_on_gke: vec![],
    };
    let job = c.check(spec, lookup);
    if c.out.iter().any(|d| d.severity == Severity::Error) {
        return Err(c.out);
    }
    let mut job = job.expect("no errors means a job");
    job.warnings = c.out;
    job.outside = c.outside;
    Ok(job)
}

struct Checker<'a> {
    file: &'a Path,
    text: &'a str,
    out: Vec<Diagnostic>,
    outside: Vec<Diagnostic>,
    gke_only: Vec<Diagnostic>,
    not_on_gke: Vec<Diagnostic>,
}

pub use crate::fleet::valid_subdomain;

/// A Secret's data key, as Kubernetes takes it (`IsConfigMapKey`: `[-._a-zA-Z0-9]+`,
/// at most 253, not `.` or `..`).
fn valid_secret_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 253
        && k != "."
        && k != ".."
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// A Cloud Storage bucket name (Google's naming rules: 3-63 characters, 222 with dots,
/// each dot-separated part at most 63; lowercase letters, digits, `-`, `_`, `.`; a
/// letter or digit at both ends).
fn valid_bucket(b: &str) -> bool {
    let max = if b.contains('.') { 222 } else { 63 };
    let ends = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    (3..=max).contains(&b.len())
        && b.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.'))
        && ends(b.chars().next())
        && ends(b.chars().last())
        && b.split('.').all(|p| !p.is_empty() && p.len() <= 63)
        && !b.starts_with("goog")
}

/// Environment variable names: a letter or `_`, then letters, digits, `_`.
fn valid_env_name(k: &str) -> bool {
    let b = k.as_bytes();
    !b.is_empty()
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

/// Where `key:` is written inside the mapping that starts at `base` (a list item's
/// first key, or a key whose value is a flow mapping `{…}`): on its first line after
/// `base`, or on the lines indented under it. [`crate::yaml::locate`] finds block keys
/// only.
fn locate_sub(text: &str, base: (usize, usize), key: &str) -> Option<(usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let (bl, bc) = base;
    let first = lines.get(bl - 1)?;
    let pat = format!("{key}:");
    let mut from = bc - 1;
    while let Some(i) = first.get(from..).and_then(|r| r.find(&pat)) {
        let at = from + i;
        let before = first[..at].chars().last();
        if at == bc - 1 || matches!(before, Some(' ' | '{' | ',')) {
            return Some((bl, at + 1));
        }
        from = at + 1;
    }
    for (n, line) in lines.iter().enumerate().skip(bl) {
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let indent = line.len() - trimmed.len();
        if indent < bc - 1 || (indent == bc - 1 && trimmed.starts_with('-')) {
            break;
        }
        if trimmed.starts_with(&pat) {
            return Some((n + 1, indent + 1));
        }
    }
    None
}

impl Checker<'_> {
    fn push(&mut self, severity: Severity, path: &[&str], message: String) {
        self.out
            .push(Diagnostic::at(self.file, self.text, severity, path, message));
    }

    /// An error at `key` inside the mapping at `parent` (a list item or a flow
    /// mapping), or at the parent where the key is not found.
    fn error_in(&mut self, parent: &[&str], key: &str, message: impl Into<String>) {
        let mut d = Diagnostic::at(self.file, self.text, Severity::Error, parent, message.into());
        if let (Some(l), Some(c)) = (d.line, d.column) {
            if let Some((l, c)) = locate_sub(self.text, (l, c), key) {
                (d.line, d.column) = (Some(l), Some(c));
            }
        }
        let field = parent.join(".");
        d.message = format!(
            "{field}.{key}{}",
            d.message.strip_prefix(field.as_str()).unwrap_or(&d.message)
        );
        self.out.push(d);
    }

    fn error(&mut self, path: &[&str], message: impl Into<String>) {
        self.push(Severity::Error, path, message.into());
    }

    fn check(&mut self, spec: JobSpec, lookup: &dyn Fn(&str) -> Option<String>) -> Option<Job> {
        if spec.kind.is_none() {
            self.error(&["type"], "missing: a job file starts with `type: task`");
        }
        let name = match &spec.name {
            None => {
                self.error(
                    &["name"],
                    "missing: name the job (lowercase letters, digits and hyphens)",
                );
                None
            }
            Some(n) if !crate::fleet::valid_fleet_name(n) => {
                self.error(
                    &["name"],
                    format!("`{n}` is not a valid job name: expected a lowercase letter, then lowercase letters, digits or hyphens, at most 40, not ending in a hyphen"),
                );
                None
            }
            Some(n) => Some(n.clone()),
        };
        let fleet = match (&spec.fleet, &spec.fleets) {
            (Some(f), None) => Some(f.clone()),
            (None, Some(list)) if list.len() == 1 => Some(list[0].clone()),
            (None, Some(list)) => {
                self.error(
                    &["fleets"],
                    format!(
                        "expected exactly one fleet, got {}: a job runs on one fleet",
                        list.len()
                    ),
                );
                None
            }
            (Some(_), Some(_)) => {
                self.error(&["fleets"], "give `fleet` or `fleets`, not both");
                None
            }
            (None, None) => {
                self.error(&["fleet"], "missing: which fleet the job runs on (`fleet: NAME`)");
                None
            }
        };
        if spec.nodes == Some(0) {
            self.error(&["nodes"], "expected at least 1 node");
        }
        match &spec.commands {
            None => self.error(&["commands"], "missing: the commands each node runs"),
            Some(c) if c.is_empty() || c.iter().all(|l| l.trim().is_empty()) => {
                self.error(&["commands"], "expected at least one command")
            }
            _ => {}
        }
        if spec.gpus_per_node == Some(0) {
            self.error(&["gpus_per_node"], "expected at least 1");
        }
        let (env, secret_env) = self.env(&spec, lookup);
        let uploads = self.uploads(&spec);
        let volumes = self.volumes(&spec);
        let requests = self.requests(&spec);
        if let Some(t) = &spec.topology {
            match t.annotation() {
                Err(e) => self.error(&["topology"], e),
                Ok(_) => self.gke_only(&["topology"], "Kueue's topology is for GKE fleets' pods"),
            }
        }
        let max_duration = match &spec.max_duration {
            None | Some(serde_yaml::Value::Bool(false)) => None,
            Some(serde_yaml::Value::String(s)) if s == "off" => None,
            Some(v) => match serde_yaml::from_value::<crate::fleet::spec::RunDuration>(v.clone()) {
                Ok(d) if d.0 > 0 => Some(d.0),
                _ => {
                    self.error(
                        &["max_duration"],
                        "expected a duration like 2h, 90m, 3d or seconds, or `off`",
                    );
                    None
                }
            },
        };
        if let Some(sa) = &spec.service_account {
            if !valid_subdomain(sa) {
                self.error(
                    &["service_account"],
                    format!("`{sa}` is not a Kubernetes service account name: lowercase letters, digits, `-` and `.`, at most 253"),
                );
            } else {
                self.gke_only(
                    &["service_account"],
                    "a Kubernetes service account is for GKE fleets' pods",
                );
            }
        }
        let mut patterns = vec![];
        for (i, p) in spec.metrics.iter().flatten().enumerate() {
            match super::metrics::Pattern::new(p) {
                Ok(pat) => patterns.push(pat),
                Err(e) => {
                    let idx = i.to_string();
                    self.error(&["metrics", &idx], e)
                }
            }
        }
        if let Some(m) = &spec.model {
            if m.flops_per_token.is_some_and(|f| f.is_nan() || f <= 0.0)
                || m.params.is_some_and(|p| p.is_nan() || p <= 0.0)
            {
                self.error(&["model"], "expected positive numbers");
            }
        }
        if let Some(g) = &spec.gpu {
            if super::metrics::peak_tflops(g).is_none() {
                self.push(
                    Severity::Warning,
                    &["gpu"],
                    format!(
                        "no peak rate known for `{g}` (known: {}): MFU will not be computed",
                        super::metrics::PEAKS
                            .iter()
                            .map(|p| p.0)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                );
            }
        }
        if let Some(w) = &spec.working_dir {
            if w.split('/').any(|p| p == "..") {
                self.error(
                    &["working_dir"],
                    format!("`{w}`: expected a path on the node without `..` (it would leave the job's directory)"),
                );
            }
        }
        for field in IGNORED {
            if yaml::locate(self.text, &[field]).is_some() {
                self.push(
                    Severity::Warning,
                    &[field],
                    "a dstack field flightdeck does not act on; ignored".into(),
                );
            }
        }
        Some(Job {
            file: self.file.to_path_buf(),
            name: name?,
            fleet: fleet?,
            spec,
            env,
            secret_env,
            volumes,
            uploads,
            patterns,
            warnings: vec![],
            outside: vec![],
            requests,
            max_duration,
            gke_only: std::mem::take(&mut self.gke_only),
            not_on_gke: std::mem::take(&mut self.not_on_gke),
        })
    }

    /// dstack's `resources` as a GKE pod's requests: the least CPU and memory asked
    /// for, and `shm_size`; the GPUs are the job's `gpus_per_node`.
    fn requests(&mut self, spec: &JobSpec) -> Requests {
        let Some(v) = &spec.resources else {
            return Requests::default();
        };
        match serde_yaml::from_value::<crate::fleet::spec::Resources>(v.clone()) {
            Ok(r) => {
                let mib = |gb: f64| format!("{}Mi", (gb * 1024.0).round() as u64);
                Requests {
                    cpu: r
                        .cpu
                        .and_then(|c| c.min)
                        .filter(|c| *c > 0)
                        .map(|c| c.to_string()),
                    memory: r.memory.and_then(|m| m.min_gb).filter(|m| *m > 0.0).map(mib),
                    shm: r
                        .shm_size
                        .and_then(|m| m.min_gb.or(m.max_gb))
                        .filter(|m| *m > 0.0)
                        .map(mib),
                }
            }
            Err(e) => {
                self.error(&["resources"], format!("{e}"));
                Requests::default()
            }
        }
    }

    fn gke_only(&mut self, path: &[&str], why: &str) {
        let d = Diagnostic::at(
            self.file,
            self.text,
            Severity::Error,
            path,
            format!("{why}: this fleet is not a GKE fleet"),
        );
        self.gke_only.push(d);
    }

    fn not_on_gke(&mut self, path: &[&str], why: String) {
        let d = Diagnostic::at(self.file, self.text, Severity::Error, path, why);
        self.not_on_gke.push(d);
    }

    /// `volumes:`: flightdeck's GKE volumes (`gcs: BUCKET` or `pvc: CLAIM`, with
    /// `path` and `read_only`), and dstack's own forms (a network volume's `name`, a
    /// node's `instance_path`, or `SOURCE:PATH`), which SSH fleets ignore, as before, and
    /// GKE fleets refuse.
    fn volumes(&mut self, spec: &JobSpec) -> Vec<Volume> {
        use serde_yaml::Value as Y;
        let mut out = vec![];
        let Some(v) = &spec.volumes else {
            return out;
        };
        let Y::Sequence(items) = v else {
            self.error(
                &["volumes"],
                "expected a list of volumes (`- gcs: BUCKET` or `- pvc: CLAIM`, with `path:`)",
            );
            return out;
        };
        let dstack =
            "a dstack volume (dstack's network volume or a node's path): flightdeck does not act on it";
        for (i, item) in items.iter().enumerate() {
            let idx = i.to_string();
            let m = match item {
                Y::String(s) => {
                    self.push(
                        Severity::Warning,
                        &["volumes", &idx],
                        format!("{dstack} on SSH fleets; ignored"),
                    );
                    self.not_on_gke(&["volumes", &idx], format!("`{s}`: {dstack}; on GKE give `gcs: BUCKET` (Cloud Storage through GCS FUSE) or `pvc: CLAIM` (a PersistentVolumeClaim) with `path:`"));
                    continue;
                }
                Y::Mapping(m) => m,
                _ => {
                    self.error(
                        &["volumes", &idx],
                        "expected a volume: `gcs: BUCKET` or `pvc: CLAIM`, with `path:`",
                    );
                    continue;
                }
            };
            let text = |k: &str| m.get(k).and_then(|v| v.as_str()).map(str::to_string);
            let mut ok = true;
            for (k, v) in m {
                let k = k.as_str().unwrap_or("");
                let known = [
                    "gcs",
                    "pvc",
                    "path",
                    "read_only",
                    "mount_options",
                    "name",
                    "instance_path",
                    "optional",
                ];
                if !known.contains(&k) {
                    self.error_in(&["volumes", &idx], k, format!("unknown field `{k}`, expected one of `gcs`, `pvc`, `path`, `read_only`, `mount_options` (or dstack's `name`, `instance_path`, `optional`)"));
                    ok = false;
                } else if k == "read_only" || k == "optional" {
                    if !v.is_bool() {
                        self.error_in(&["volumes", &idx], k, "expected true or false");
                        ok = false;
                    }
                } else if k != "name" && !v.is_string() {
                    self.error_in(&["volumes", &idx], k, "expected a string");
                    ok = false;
                }
            }
            if !ok {
                continue;
            }
            let source = match (text("gcs"), text("pvc")) {
                (Some(_), Some(_)) => {
                    self.error_in(&["volumes", &idx], "pvc", "give `gcs` or `pvc`, not both");
                    continue;
                }
                (None, None) => {
                    if m.contains_key("name") || m.contains_key("instance_path") {
                        self.push(
                            Severity::Warning,
                            &["volumes", &idx],
                            format!("{dstack} on SSH fleets; ignored"),
                        );
                        self.not_on_gke(&["volumes", &idx], format!("{dstack}; on GKE give `gcs: BUCKET` (Cloud Storage through GCS FUSE) or `pvc: CLAIM` (a PersistentVolumeClaim)"));
                    } else {
                        self.error(&["volumes", &idx], "missing: `gcs: BUCKET` or `pvc: CLAIM`");
                    }
                    continue;
                }
                (Some(bucket), None) => {
                    if !valid_bucket(&bucket) {
                        self.error_in(&["volumes", &idx], "gcs", format!("`{bucket}` is not a Cloud Storage bucket name: 3 to 63 (222 with dots) lowercase letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit"));
                        continue;
                    }
                    let mount_options = text("mount_options");
                    if let Some(o) = &mount_options {
                        if o.is_empty() || o.chars().any(|c| c.is_whitespace() || c.is_control()) {
                            self.error_in(&["volumes", &idx], "mount_options", format!("`{o}`: expected gcsfuse's options, comma-separated, without spaces (`implicit-dirs,file-cache:max-size-mb:-1`)"));
                            continue;
                        }
                    }
                    VolumeSource::Gcs {
                        bucket,
                        mount_options,
                    }
                }
                (None, Some(claim)) => {
                    if !valid_subdomain(&claim) {
                        self.error_in(&["volumes", &idx], "pvc", format!("`{claim}` is not a PersistentVolumeClaim name: lowercase letters, digits, `-` and `.`, at most 253"));
                        continue;
                    }
                    if m.contains_key("mount_options") {
                        self.error_in(
                            &["volumes", &idx],
                            "mount_options",
                            "`mount_options` are GCS FUSE's (`gcs:`): a claim's come from its StorageClass",
                        );
                        continue;
                    }
                    VolumeSource::Pvc { claim }
                }
            };
            for k in ["name", "instance_path", "optional"] {
                if m.contains_key(k) {
                    self.error_in(&["volumes", &idx], k, format!("`{k}` is dstack's: a `gcs`/`pvc` volume has `path`, `read_only` and (GCS) `mount_options`"));
                    ok = false;
                }
            }
            let path = match text("path") {
                None => {
                    self.error(
                        &["volumes", &idx],
                        "missing: `path`, where the volume is mounted in the container",
                    );
                    continue;
                }
                Some(p)
                    if !p.starts_with('/')
                        || p.split('/').any(|c| c == "..")
                        || p == "/"
                        || p.contains(':') =>
                {
                    self.error_in(
                        &["volumes", &idx],
                        "path",
                        format!(
                            "`{p}`: expected an absolute path in the container, not `/`, without `..` or `:`"
                        ),
                    );
                    continue;
                }
                Some(p) => p,
            };
            if out.iter().any(|v: &Volume| v.path == path) || path == "/dev/shm" {
                self.error_in(&["volumes", &idx], "path", format!("`{path}` is mounted already"));
                continue;
            }
            if !ok {
                continue;
            }
            let what = match &source {
                VolumeSource::Gcs { .. } => "a Cloud Storage volume (GCS FUSE) is for GKE fleets' pods",
                VolumeSource::Pvc { .. } => "a PersistentVolumeClaim is for GKE fleets' pods",
            };
            self.gke_only(&["volumes", &idx], what);
            out.push(Volume {
                source,
                path,
                read_only: m.get("read_only").and_then(|v| v.as_bool()).unwrap_or(false),
            });
        }
        out
    }

    fn env(
        &mut self,
        spec: &JobSpec,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> (Vec<(String, String)>, SecretEnv) {
        let mut out: Vec<(String, String)> = vec![];
        let mut secrets = vec![];
        if let Some(EnvSpec::Map(m)) = &spec.env {
            for (k, v) in m {
                let EnvValue::Secret(r) = v else { continue };
                if !valid_subdomain(&r.secret) {
                    self.error_in(
                        &["env", k],
                        "secret",
                        format!(
                            "`{}` is not a Secret name: lowercase letters, digits, `-` and `.`, at most 253",
                            r.secret
                        ),
                    );
                } else if !valid_secret_key(&r.key) {
                    self.error_in(
                        &["env", k],
                        "key",
                        format!(
                            "`{}` is not a Secret key: letters, digits, `-`, `_` and `.`",
                            r.key
                        ),
                    );
                } else if !valid_env_name(k) {
                    // Reported below with the other names.
                } else {
                    self.gke_only(&["env", k], "a Secret's key is read in GKE fleets' pods");
                    secrets.push((k.clone(), r.clone()));
                }
            }
        }
        let items: Vec<(String, Option<String>, String)> = match &spec.env {
            None => vec![],
            Some(EnvSpec::List(l)) => l
                .iter()
                .enumerate()
                .map(|(i, item)| match item.split_once('=') {
                    Some((k, v)) => (k.to_string(), Some(v.to_string()), i.to_string()),
                    None => (item.clone(), None, i.to_string()),
                })
                .collect(),
            Some(EnvSpec::Map(m)) => m
                .iter()
                .filter_map(|(k, v)| match v.text() {
                    Some(t) => Some((k.clone(), Some(t), k.clone())),
                    // A Secret's key with a bad name is reported as the others are.
                    None if !valid_env_name(k) => Some((k.clone(), Some(String::new()), k.clone())),
                    None => None,
                })
                .collect(),
        };
        for (k, v, at) in items {
            if !valid_env_name(&k) {
                self.error(
                    &["env", &at],
                    format!(
                        "`{k}` is not a variable name: expected a letter or _, then letters, digits or _"
                    ),
                );
                continue;
            }
            let v = match v.or_else(|| lookup(&k)) {
                Some(v) => v,
                None => {
                    self.error(
                        &["env", &at],
                        format!("`{k}` has no value here and is not set in flightdeck's environment"),
                    );
                    continue;
                }
            };
            match out.iter_mut().find(|(ek, _)| *ek == k) {
                Some(e) => e.1 = v,
                None => out.push((k, v)),
            }
        }
        (out, secrets)
    }

    fn uploads(&mut self, spec: &JobSpec) -> Vec<Upload> {
        let base = self.file.parent().unwrap_or(Path::new("."));
        let base = if base.as_os_str().is_empty() {
            Path::new(".")
        } else {
            base
        };
        let base_real = base.canonicalize().ok();
        let mut out = vec![];
        for (i, f) in spec.files.iter().flatten().enumerate() {
            let (local, remote) = match f {
                FileSpec::Short(s) => match s.split_once(':') {
                    Some((l, r)) => (l.to_string(), r.to_string()),
                    None => (s.clone(), s.clone()),
                },
                FileSpec::Long { local_path, path } => (local_path.clone(), path.clone()),
            };
            let idx = i.to_string();
            let local_path = base.join(&local);
            if !local_path.exists() {
                self.error(
                    &["files", &idx],
                    format!("`{local}` does not exist (looked for {})", local_path.display()),
                );
                continue;
            }
            let inside = match (local_path.canonicalize(), &base_real) {
                (Ok(p), Some(b)) => p.starts_with(b),
                _ => false,
            };
            if !inside {
                self.outside.push(Diagnostic::at(
                    self.file,
                    self.text,
                    Severity::Error,
                    &["files", &idx],
                    format!(
                        "`{local}` is outside the job file's folder {} (a job file could carry any local file off this machine): `flightdeck job run --files-outside` takes it",
                        base.display()
                    ),
                ));
            }
            if remote.is_empty() || remote.split('/').any(|p| p == "..") {
                self.error(
                    &["files", &idx],
                    format!("`{remote}`: expected a path on the node without `..`"),
                );
                continue;
            }
            let remote =
                if remote.starts_with('/') || remote.starts_with("~/") || !Path::new(&local).is_absolute() {
                    remote
                } else {
                    // An absolute local path with no remote of its own goes under its name.
                    Path::new(&local)
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or(remote)
                };
            out.push(Upload {
                local: local_path,
                remote,
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn errors(text: &str) -> Vec<String> {
        match parse(Path::new("job.yaml"), text, &no_env) {
            Ok(_) => vec![],
            Err(d) => d
                .into_iter()
                .filter(|d| d.severity == Severity::Error)
                .map(|d| d.to_string())
                .collect(),
        }
    }

    #[test]
    fn a_dstack_task_file_parses() {
        let text = "type: task\nname: train-gpt\nfleets: [h200]\nnodes: 2\npython: \"3.12\"\n\
                    env:\n  - HF_TOKEN=abc\n  - NCCL_DEBUG=INFO\ncommands:\n  - pip install torch\n  - torchrun --nnodes=$DSTACK_NODES_NUM train.py\n\
                    resources:\n  gpu: H200:8\n  shm_size: 24GB\n";
        let job = parse(Path::new("job.yaml"), text, &no_env).unwrap();
        assert_eq!(job.name, "train-gpt");
        assert_eq!(job.fleet, "h200");
        assert_eq!(job.spec.nodes, Some(2));
        assert_eq!(
            job.env,
            vec![
                ("HF_TOKEN".into(), "abc".into()),
                ("NCCL_DEBUG".into(), "INFO".into())
            ]
        );
        let warned: Vec<String> = job.warnings.iter().map(|d| d.to_string()).collect();
        assert!(
            warned
                .iter()
                .any(|w| w.starts_with("job.yaml:5:1: warning: python:")),
            "{warned:?}"
        );
        // dstack's resources are a GKE pod's requests.
        assert_eq!(job.requests.shm.as_deref(), Some("24576Mi"));
    }

    #[test]
    fn env_as_map_and_bare_keys() {
        let text = "type: task\nname: j\nfleet: f\ncommands: [x]\nenv:\n  A: 1\n  B: true\n  C: text\n";
        let job = parse(Path::new("j.yaml"), text, &no_env).unwrap();
        assert_eq!(
            job.env,
            vec![
                ("A".into(), "1".into()),
                ("B".into(), "true".into()),
                ("C".into(), "text".into())
            ]
        );
        let text = "type: task\nname: j\nfleet: f\ncommands: [x]\nenv:\n  - TOKEN\n";
        let lookup = |k: &str| (k == "TOKEN").then(|| "s3cret".to_string());
        let job = parse(Path::new("j.yaml"), text, &lookup).unwrap();
        assert_eq!(job.env, vec![("TOKEN".into(), "s3cret".into())]);
        assert_eq!(
            errors(text),
            vec!["job.yaml:6:5: env.0: `TOKEN` has no value here and is not set in flightdeck's environment"]
        );
    }

    #[test]
    fn errors_point_at_the_field() {
        // A wrong env is placed at its value and says what env takes.
        let e = errors("type: task\nname: j\nfleet: f\nenv: 5\ncommands: [x]\n");
        assert_eq!(
            e,
            vec!["job.yaml:4:6: env: expected a list of `KEY=VALUE` (or `KEY`) strings, or a mapping of KEY: value, found the number 5"]
        );
        let e = errors("type: task\nname: j\nfleet: f\nenv:\n  - A=1\n  - [x]\ncommands: [x]\n");
        assert_eq!(e, vec!["job.yaml:6:5: env[1]: expected a text, found a list"]);
        // A fleet file given to `job run`, and a command YAML read as a mapping.
        let e = errors("type: fleet\nname: f\n");
        assert_eq!(
            e,
            vec!["job.yaml:1:7: type: this is a fleet file (`type: fleet`); a task file (`type: task`) is read here"]
        );
        let e = errors("type: task\nname: j\nfleet: f\ncommands:\n  - echo a: b\n");
        assert!(e[0].ends_with("put it in quotes"), "{e:?}");
        let e = errors("type: task\nname: j\nfleet: f\ncomands: [x]\n");
        assert!(
            e[0].starts_with("job.yaml:4:1: unknown field `comands`, expected one of `type`"),
            "{e:?}"
        );
        assert!(e[0].ends_with("; did you mean `commands`?"), "{e:?}");
        let e = errors("type: task\nname: J_1\nfleet: f\n");
        assert_eq!(e.len(), 2, "{e:?}");
        assert!(
            e[0].starts_with("job.yaml:2:1: name: `J_1` is not a valid job name"),
            "{e:?}"
        );
        assert_eq!(
            e[1],
            "job.yaml:1:1: commands: missing: the commands each node runs"
        );
        assert_eq!(
            errors("type: task\nname: j\nfleet: f\ncommands: [x]\nnccl_profile: tcpz\n")[0],
            "job.yaml:5:15: nccl_profile: unknown value `tcpz`, expected one of `auto`, `none`, `tcpx`, `tcpxo`, `rdma`; did you mean `tcpx`?"
        );
        assert_eq!(
            errors("type: task\nname: j\nfleets: [a, b]\ncommands: [x]\n"),
            vec!["job.yaml:3:1: fleets: expected exactly one fleet, got 2: a job runs on one fleet"]
        );
        assert_eq!(
            errors("type: task\nname: j\nfleet: f\ncommands: [x]\nenv: [\"1X=2\"]\n"),
            vec!["job.yaml:5:7: env.0: `1X` is not a variable name: expected a letter or _, then letters, digits or _"]
        );
        let e =
            errors("type: task\nname: j\nfleet: f\ncommands: [x]\nmetrics:\n  - 'loss=(?P<los>[0-9.]+)'\n");
        assert_eq!(e.len(), 1);
        assert!(e[0].starts_with("job.yaml:6:5: metrics.0: "), "{e:?}");
        assert!(e[0].contains("did you mean `loss`"), "{e:?}");
        assert!(
            errors("type: task\nname: j\nfleet: f\ncommands: [x]\nfiles: [nowhere.py]\n")[0]
                .starts_with("job.yaml:5:9: files.0: `nowhere.py` does not exist")
        );
    }

    #[test]
    fn uploads_resolve_against_the_job_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("train.py"), "print(1)\n").unwrap();
        let file = dir.path().join("job.yaml");
        let text = "type: task\nname: j\nfleet: f\ncommands: [x]\nfiles:\n  - train.py\n  - train.py:/tmp/t.py\n  - local_path: train.py\n    path: sub/t.py\n";
        let job = parse(&file, text, &no_env).unwrap();
        let remotes: Vec<&str> = job.uploads.iter().map(|u| u.remote.as_str()).collect();
        assert_eq!(remotes, ["train.py", "/tmp/t.py", "sub/t.py"]);
        assert!(job.uploads.iter().all(|u| u.local == dir.path().join("train.py")));
        let bad = "type: task\nname: j\nfleet: f\ncommands: [x]\nfiles: ['train.py:../x']\n";
        assert!(parse(&file, bad, &no_env).is_err());
        assert!(job.outside.is_empty());
    }

    #[test]
    fn working_dir_stays_in_and_files_outside_the_folder_are_marked() {
        let e = errors("type: task\nname: j\nfleet: f\ncommands: [x]\nworking_dir: ../../../../x\n");
        assert_eq!(
            e,
            vec!["job.yaml:5:1: working_dir: `../../../../x`: expected a path on the node without `..` (it would leave the job's directory)"]
        );
        let top = tempfile::tempdir().unwrap();
        let dir = top.path().join("repo");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(top.path().join("secret"), "s").unwrap();
        std::fs::write(dir.join("ok.py"), "print(1)\n").unwrap();
        // A link in the folder to a file outside it counts as outside too.
        std::os::unix::fs::symlink(top.path().join("secret"), dir.join("link")).unwrap();
        let file = dir.join("job.yaml");
        let text = "type: task\nname: j\nfleet: f\ncommands: [x]\nfiles:\n  - ok.py\n  - ../secret:secret\n  - link\n";
        let job = parse(&file, text, &no_env).unwrap();
        let outside: Vec<String> = job.outside.iter().map(|d| d.to_string()).collect();
        assert_eq!(outside.len(), 2, "{outside:?}");
        assert!(
            outside[0].contains("job.yaml:7:5: files.1: `../secret` is outside the job file's folder"),
            "{outside:?}"
        );
        assert!(outside[1].contains("files.2: `link` is outside"), "{outside:?}");
    }

    /// Secret keys, buckets, claims and the service account parse for GKE, and a wrong
    /// one is reported at its place with what it takes.
    #[test]
    fn gke_data_and_credentials_parse_and_bad_ones_are_placed() {
        let base = "type: task\nname: j\nfleet: f\ncommands: [x]\n";
        let ok = format!("{base}service_account: ksa\nenv:\n  HF_TOKEN: {{secret: hf, key: token}}\n  A: 1\nvolumes:\n  - gcs: my-bucket\n    path: /data\n    read_only: true\n  - pvc: claim-1\n    path: /ckpt\n");
        let job = parse(Path::new("j.yaml"), &ok, &no_env).unwrap();
        assert_eq!(job.env, vec![("A".into(), "1".into())]);
        assert_eq!(
            job.secret_env,
            vec![(
                "HF_TOKEN".into(),
                SecretRef {
                    secret: "hf".into(),
                    key: "token".into()
                }
            )]
        );
        assert_eq!(job.volumes.len(), 2);
        assert!(job.volumes[0].read_only && !job.volumes[1].read_only);
        let only: Vec<String> = job.gke_only.iter().map(|d| d.to_string()).collect();
        assert_eq!(only.len(), 4, "{only:?}");
        assert!(
            only[0].starts_with("j.yaml:7:3: env.HF_TOKEN: a Secret's key"),
            "{only:?}"
        );
        assert!(job.not_on_gke.is_empty());
        for (extra, want) in [
            (
                "env:\n  T: {secret: hf, keys: t}\n",
                "job.yaml:6:19: env.T: unknown field `keys`, expected `secret` or `key`; did you mean `key`?",
            ),
            (
                "env:\n  T: {secret: Hf_x, key: t}\n",
                "job.yaml:6:7: env.T.secret: `Hf_x` is not a Secret name",
            ),
            (
                "env:\n  T: {secret: hf, key: 'a b'}\n",
                "job.yaml:6:19: env.T.key: `a b` is not a Secret key",
            ),
            (
                "volumes:\n  - gcs: My_Bucket\n    path: /d\n",
                "job.yaml:6:5: volumes.0.gcs: `My_Bucket` is not a Cloud Storage bucket name",
            ),
            (
                "volumes:\n  - gcs: b-1\n    path: data\n",
                "job.yaml:7:5: volumes.0.path: `data`: expected an absolute path",
            ),
            (
                "volumes:\n  - pvc: c\n",
                "job.yaml:6:5: volumes.0: missing: `path`",
            ),
            (
                "volumes:\n  - pvc: c\n    path: /c\n    size: 1\n",
                "job.yaml:8:5: volumes.0.size: unknown field `size`",
            ),
            (
                "service_account: My SA\n",
                "job.yaml:5:1: service_account: `My SA` is not a Kubernetes service account name",
            ),
        ] {
            let e = errors(&format!("{base}{extra}"));
            assert!(e.len() == 1 && e[0].starts_with(want), "{extra}: {e:?}");
        }
        // dstack's volumes: ignored on SSH fleets (a warning), refused on GKE.
        let job = parse(
            Path::new("j.yaml"),
            &format!("{base}volumes:\n  - /mnt/data:/data\n"),
            &no_env,
        )
        .unwrap();
        assert_eq!(job.not_on_gke.len(), 1);
        assert!(job
            .warnings
            .iter()
            .any(|w| w.to_string().contains("volumes.0: a dstack volume")));
    }
}
