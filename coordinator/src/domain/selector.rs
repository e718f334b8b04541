//! Which hosts a campaign runs on: labels, arch, CPU model and names. Pure
//! functions over the stored facts, so they are tested without a database.

use serde::{Deserialize, Serialize};

use crate::domain::labels::Labels;

/// A host selector as stored with a campaign. Every non-empty criterion must
/// hold; within one criterion any listed value may match. Empty = every host.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Selector {
    #[serde(default)]
    pub labels: Labels,
    #[serde(default)]
    pub arch: Vec<String>,
    /// Case-insensitive substrings of the CPU model name.
    #[serde(default)]
    pub cpu_model: Vec<String>,
    #[serde(default)]
    pub host_names: Vec<String>,
}

/// The facts of a host a selector looks at.
#[derive(Clone, Debug)]
pub struct Candidate<'a> {
    pub name: &'a str,
    pub labels: &'a Labels,
    pub arch: Option<&'a str>,
    pub cpu_model_name: Option<&'a str>,
}

impl Selector {
    pub fn matches(&self, host: &Candidate<'_>) -> bool {
        let labels = self.labels.iter().all(|(k, v)| host.labels.get(k) == Some(v));
        let arch = self.arch.is_empty() || host.arch.is_some_and(|a| self.arch.iter().any(|w| w == a));
        let cpu = self.cpu_model.is_empty()
            || host.cpu_model_name.is_some_and(|m| {
                let m = m.to_lowercase();
                self.cpu_model.iter().any(|w| m.contains(&w.to_lowercase()))
            });
        let name = self.host_names.is_empty() || self.host_names.iter().any(|n| n == host.name);
        labels && arch && cpu && name
    }

    /// Parses one `--select` term: `arch=…`, `cpu-model=…`, `host=…`, or `LABEL=VALUE`.
    pub fn add_term(&mut self, term: &str) -> Result<(), String> {
        let (key, value) = term
            .split_once('=')
            .filter(|(k, v)| !k.is_empty() && !v.is_empty())
            .ok_or_else(|| format!("--select {term:?}: expected KEY=VALUE (arch=, cpu-model=, host= or a label)"))?;
        match key {
            "arch" => self.arch.push(value.to_string()),
            "cpu-model" => self.cpu_model.push(value.to_string()),
            "host" => self.host_names.push(value.to_string()),
            label => {
                self.labels.insert(label.to_string(), value.to_string());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn every_criterion_must_hold_and_any_value_within_one() {
        let rack_b7 = labels(&[("rack", "b7"), ("class", "storage")]);
        let host = Candidate {
            name: "st-01",
            labels: &rack_b7,
            arch: Some("aarch64"),
            cpu_model_name: Some("Neoverse-N1"),
        };
        let sel = |terms: &[&str]| {
            let mut s = Selector::default();
            for t in terms {
                s.add_term(t).unwrap();
            }
            s.matches(&host)
        };
        assert!(sel(&[]));
        assert!(sel(&["arch=aarch64"]));
        assert!(sel(&["arch=x86_64", "arch=aarch64"]));
        assert!(!sel(&["arch=x86_64"]));
        assert!(sel(&["rack=b7", "cpu-model=neoverse"]));
        assert!(!sel(&["rack=b8"]));
        assert!(!sel(&["rack=b7", "host=st-02"]));
        assert!(sel(&["host=st-01"]));
        let unknown_arch = Candidate {
            arch: None,
            ..host.clone()
        };
        let mut s = Selector::default();
        s.add_term("arch=aarch64").unwrap();
        assert!(!s.matches(&unknown_arch), "unknown facts never match a criterion");
    }

    #[test]
    fn malformed_terms_are_named() {
        let mut s = Selector::default();
        for bad in ["arch", "=x", "arch="] {
            let e = s.add_term(bad).unwrap_err();
            assert!(e.contains("--select"), "{e}");
        }
    }
}
