//! Field errors: what validation reports about a spec, one entry per
//! problem, naming the field by its JSON path.

use serde::Serialize;

/// One problem with a field of a spec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error, utoipa::ToSchema)]
#[error("{field}: {message}")]
pub struct FieldError {
    /// The field, e.g. `cpus` or `constraints[1]`.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}
