//! A host's labels.

use std::collections::BTreeMap;

/// Operator labels used by campaign selectors, e.g. `class = storage-gen3`.
pub type Labels = BTreeMap<String, String>;
