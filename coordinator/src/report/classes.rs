//! The fleet's machine classes as the report groups hosts: one row per class
//! ([`crate::analysis::class::MachineClass`]), emulated and simulated hosts in
//! rows of their own (their timings are not performance and must not move a
//! real class's median), and the assignment of hosts to rows that the stored
//! class cells are computed under ([`super::view_summaries`]).

use std::collections::BTreeMap;

use sqlx::PgPool;

use super::matrix::{self, ClassGroup};
use super::view_summaries::Assignment;
use crate::store::Result;

/// A class row of the fleet: one machine class, its emulated or simulated
/// hosts apart (their timings are not performance and must not move a real
/// class's median).
#[derive(Debug, Clone, PartialEq)]
pub struct ClassRow {
    /// The class key, with `-emulated` / `-simulated` for marked hosts.
    pub id: String,
    /// [`crate::analysis::class::MachineClass::key`].
    pub key: String,
    /// Class label (agent text: escaped by the template).
    pub label: String,
    pub emulated: bool,
    pub simulated: bool,
    /// Ascending.
    pub host_ids: Vec<i64>,
}

/// The class rows of `groups`, by label then id.
pub fn class_rows(groups: &[ClassGroup]) -> Vec<ClassRow> {
    let mut rows: BTreeMap<String, ClassRow> = BTreeMap::new();
    for g in groups {
        let class = g.class();
        let key = class.key();
        let (emulated, simulated) = (g.emulated(), g.simulated());
        let id = format!(
            "{key}{}{}",
            if emulated { "-emulated" } else { "" },
            if simulated { "-simulated" } else { "" }
        );
        rows.entry(id.clone())
            .or_insert_with(|| ClassRow {
                id,
                key,
                label: class.label(),
                emulated,
                simulated,
                host_ids: Vec::new(),
            })
            .host_ids
            .extend(&g.host_ids);
    }
    let mut rows: Vec<ClassRow> = rows.into_values().collect();
    for r in &mut rows {
        r.host_ids.sort_unstable();
    }
    rows.sort_by(|a, b| (&a.label, &a.id).cmp(&(&b.label, &b.id)));
    rows
}

/// Which class row each host is in, as the class cells are stored under.
pub fn assignment(classes: &[ClassRow]) -> Assignment {
    Assignment::new(classes.iter().map(|r| (r.id.as_str(), r.host_ids.as_slice())))
}

/// The fleet's class rows now, and the assignment they make.
pub async fn current(pool: &PgPool) -> Result<(Vec<ClassRow>, Assignment)> {
    let classes = class_rows(&matrix::class_groups(pool).await?);
    let assignment = assignment(&classes);
    Ok((classes, assignment))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A group of hosts of one CPU model, marked emulated by label when asked.
    pub(crate) fn group(ids: &[i64], model: &str, emulated: bool) -> ClassGroup {
        ClassGroup {
            host_ids: ids.to_vec(),
            emulated_label: emulated.then(|| "qemu".to_string()),
            simulated_label: None,
            arch: Some("x86_64".into()),
            cpu_vendor: Some("GenuineIntel".into()),
            cpu_model_name: Some(model.into()),
            features_usable: Some(vec!["aes".into(), "pclmulqdq".into()]),
            build_flavour: Some("accelerated".into()),
            hypervisor: None,
            cpuinfo_foreign: None,
        }
    }

    #[test]
    fn groups_of_one_class_make_one_row_and_marked_hosts_their_own() {
        let rows = class_rows(&[
            group(&[3, 1], "Xeon Gold", false),
            // The same class with its model spelled with more spaces: one row.
            group(&[2], "Xeon  Gold", false),
            group(&[4], "Xeon Gold", true),
            group(&[5], "EPYC", false),
        ]);
        let summary: Vec<(&str, bool, &[i64])> = rows
            .iter()
            .map(|r| (r.label.split(" · ").nth(1).unwrap(), r.emulated, r.host_ids.as_slice()))
            .collect();
        assert_eq!(
            summary,
            [
                ("EPYC", false, &[5][..]),
                ("Xeon Gold", false, &[1, 2, 3][..]),
                ("Xeon Gold", true, &[4][..])
            ]
        );
        assert_eq!(rows[1].key, rows[2].key);
        assert_eq!(rows[2].id, format!("{}-emulated", rows[2].key));
    }
}
