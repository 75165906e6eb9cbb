//! A spec that passed its validation: the one the core accepts.

use std::ops::Deref;

use super::errors::FieldError;
use super::service::ServiceSpec;

/// A [`ServiceSpec`] whose [`ServiceSpec::validate`] found nothing wrong.
///
/// The web layer (or a services file's loader) validates once, where it can
/// answer the operator with every field error; the scheduler core takes only
/// this type ([`crate::scheduler::Request::PutService`]), so it neither
/// validates a second time nor can be handed an unchecked spec.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidServiceSpec(ServiceSpec);

impl ValidServiceSpec {
    /// Validates `spec`.
    ///
    /// # Errors
    /// Every field error [`ServiceSpec::validate`] finds.
    pub fn new(spec: ServiceSpec) -> Result<ValidServiceSpec, Vec<FieldError>> {
        let errors = spec.validate();
        if errors.is_empty() {
            Ok(ValidServiceSpec(spec))
        } else {
            Err(errors)
        }
    }

    /// The spec.
    pub fn into_inner(self) -> ServiceSpec {
        self.0
    }
}

impl Deref for ValidServiceSpec {
    type Target = ServiceSpec;

    fn deref(&self) -> &ServiceSpec {
        &self.0
    }
}

impl TryFrom<ServiceSpec> for ValidServiceSpec {
    type Error = Vec<FieldError>;

    fn try_from(spec: ServiceSpec) -> Result<ValidServiceSpec, Vec<FieldError>> {
        ValidServiceSpec::new(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str) -> ServiceSpec {
        serde_json::from_value(serde_json::json!({
            "name": name, "command": "sleep 1", "cpus": 0.1, "mem": 32, "instances": 1
        }))
        .unwrap()
    }

    #[test]
    fn only_a_spec_without_field_errors_is_valid() {
        let valid = ValidServiceSpec::new(spec("web")).unwrap();
        assert_eq!(valid.name, "web");
        assert_eq!(valid.into_inner(), spec("web"));
        let errors = ValidServiceSpec::new(spec("no spaces allowed")).unwrap_err();
        assert!(errors.iter().any(|e| e.field == "name"), "{errors:?}");
    }
}
