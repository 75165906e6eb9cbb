//! Query strings: [`StrictQuery`], an extractor that refuses the
//! parameters its type does not take, where axum's `Query` ignores them (a
//! misspelt filter, `/api/v1/tasks?stat=TASK_FAILED`, would otherwise
//! answer every task as though it had filtered them); and [`bounded_uri`],
//! which answers an over-long URI with the usual problem document.

use axum::extract::{FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::de::{self, DeserializeOwned, Visitor};

use super::error::AppError;
use crate::scheduler::FieldError;

/// The longest URI (path and query) served: 8 KiB, as common front
/// proxies allow. (Past 64 KiB hyper answers 414 itself, before the
/// application sees the request; the server gives that answer a problem
/// document too, `server/refusals.rs`.)
pub const MAX_URI_BYTES: usize = 8 * 1024;

/// Middleware: a URI longer than [`MAX_URI_BYTES`] is 414, as a JSON
/// problem under `/api/` and an HTML page elsewhere, before any handler.
pub async fn bounded_uri(request: Request, next: Next) -> Response {
    let uri = request.uri();
    let length = uri.path_and_query().map_or(0, |p| p.as_str().len());
    if length <= MAX_URI_BYTES {
        return next.run(request).await;
    }
    let e = AppError::new(
        StatusCode::URI_TOO_LONG,
        "uri-too-long",
        "URI too long",
        format!(
            "the URI has {length} bytes; at most {MAX_URI_BYTES} are served (shorten the \
             query)"
        ),
    );
    if super::error::wants_json(uri) {
        e.into_response()
    } else {
        e.html().into_response()
    }
}

/// The query of a request as a `T` (a struct of named fields): 400 with one
/// field error per unknown parameter (`"field": "<parameter>"`, its message
/// listing the parameters `T` takes), else as axum's `Query` (400 for a
/// value that does not decode).
///
/// The rule of every JSON list endpoint (`GET /api/v1/…` without a path
/// parameter; `docs/api.md`): each takes its query as a `StrictQuery`,
/// [`NoQuery`] when it takes none. The HTML pages stay lenient.
#[derive(Debug, Clone)]
pub struct StrictQuery<T>(pub T);

/// The query of an endpoint that takes no parameters, for [`StrictQuery`]:
/// any parameter is refused.
#[derive(Debug, Clone, Copy, Default, serde::Deserialize)]
pub struct NoQuery {}

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for StrictQuery<T> {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, AppError> {
        let raw = parts.uri.query().unwrap_or("");
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(raw)
            .map_err(|e| AppError::bad_request(format!("the query does not decode: {e}")))?;
        let known = field_names::<T>();
        let mut unknown: Vec<FieldError> = Vec::new();
        for (name, _) in &pairs {
            if !known.contains(&name.as_str()) && !unknown.iter().any(|e| &e.field == name) {
                let message = if known.is_empty() {
                    "unknown parameter; this endpoint takes none".to_string()
                } else {
                    format!("unknown parameter; the parameters are {}", known.join(", "))
                };
                unknown.push(FieldError {
                    field: name.clone(),
                    message,
                });
            }
        }
        if !unknown.is_empty() {
            return Err(AppError::invalid(unknown));
        }
        decode(raw).map(StrictQuery)
    }
}

/// Decodes a query string as a `T`. A parameter given twice, or a value
/// that does not decode, is 400 with a field error naming the parameter
/// and the value, worded for people (RFC 9457 `errors[]`), not serde's
/// message alone.
pub fn decode<T: DeserializeOwned>(raw: &str) -> Result<T, AppError> {
    if let Some(name) = not_utf8(raw) {
        return Err(AppError::invalid(vec![FieldError {
            field: name,
            message: "is not UTF-8 once percent-decoded; encode text as UTF-8".into(),
        }]));
    }
    let pairs: Vec<(String, String)> = form_urlencoded::parse(raw.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let mut twice: Vec<FieldError> = Vec::new();
    for (i, (name, _)) in pairs.iter().enumerate() {
        if pairs[..i].iter().any(|(n, _)| n == name) && !twice.iter().any(|e| &e.field == name) {
            twice.push(FieldError {
                field: name.clone(),
                message: "given more than once; give it once".into(),
            });
        }
    }
    if !twice.is_empty() {
        return Err(AppError::invalid(twice));
    }
    let deserializer = serde_urlencoded::Deserializer::new(form_urlencoded::parse(raw.as_bytes()));
    serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let field = e.path().to_string();
        let value = pairs
            .iter()
            .find(|(n, _)| *n == field)
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        let inner = e.into_inner().to_string();
        let message = if inner.contains("invalid digit") || inner.contains("too large") {
            format!("{value:?} is not a whole number from 0 to {}", u64::MAX)
        } else if inner.contains("cannot parse integer from empty string") {
            "is empty; give a whole number".to_string()
        } else {
            format!("{value:?} is not a valid value ({inner})")
        };
        AppError::invalid(vec![FieldError { field, message }])
    })
}

/// The first parameter of the query `raw` whose name or value is not
/// UTF-8 once percent-decoded (its name, as decoded with replacement
/// characters), which a plain decode would silently turn into U+FFFD.
fn not_utf8(raw: &str) -> Option<String> {
    let bad = |s: &str| {
        percent_encoding::percent_decode(s.replace('+', " ").as_bytes())
            .decode_utf8()
            .is_err()
    };
    raw.split('&').find_map(|pair| {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        (bad(name) || bad(value)).then(|| {
            form_urlencoded::parse(pair.as_bytes())
                .next()
                .map(|(n, _)| n.into_owned())
                .unwrap_or_default()
        })
    })
}

/// The field names serde's derive gives a struct `T` (empty for anything
/// else): asked of a deserializer that only records them.
pub fn field_names<T: DeserializeOwned>() -> &'static [&'static str] {
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(FieldNames(&mut fields));
    fields
}

struct FieldNames<'a>(&'a mut &'static [&'static str]);

impl<'de> de::Deserializer<'de> for FieldNames<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("not a struct"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = fields;
        Err(de::Error::custom("only the field names were asked for"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
        byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map
        enum identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    struct Chunk {
        offset: Option<u64>,
        #[allow(dead_code)]
        length: Option<u64>,
    }

    #[test]
    fn bad_values_and_repeats_name_the_parameter_in_plain_words() {
        let e = decode::<Chunk>("offset=abc").unwrap_err();
        assert_eq!(e.errors[0].field, "offset");
        assert!(
            e.errors[0]
                .message
                .contains("\"abc\" is not a whole number"),
            "{e:?}"
        );
        assert!(!e.detail.contains("Failed to deserialize"), "{e:?}");
        let e = decode::<Chunk>("offset=-1").unwrap_err();
        assert_eq!(e.errors[0].field, "offset");
        let e = decode::<Chunk>("offset=1&offset=2").unwrap_err();
        assert_eq!(e.errors[0].field, "offset");
        assert!(e.errors[0].message.contains("more than once"));
        assert_eq!(decode::<Chunk>("offset=7").unwrap().offset, Some(7));
        assert_eq!(decode::<Chunk>("").unwrap().offset, None);
    }

    #[derive(Debug, serde::Deserialize)]
    struct Why {
        reason: Option<String>,
    }

    #[test]
    fn bytes_that_are_not_utf8_are_refused_not_replaced() {
        for raw in ["reason=%FF%FE", "reason=ok%C3", "re%FFason=x"] {
            let e = decode::<Why>(raw).unwrap_err();
            assert_eq!(e.status.as_u16(), 400, "{raw}");
            assert!(e.errors[0].message.contains("UTF-8"), "{raw}: {e:?}");
        }
        assert_eq!(e_field("reason=%FF"), "reason");
        // Encoded UTF-8, a replacement character sent as such, and '+'.
        let why = decode::<Why>("reason=caf%C3%A9+%EF%BF%BD").unwrap();
        assert_eq!(why.reason.as_deref(), Some("café \u{FFFD}"));
    }

    fn e_field(raw: &str) -> String {
        decode::<Why>(raw).unwrap_err().errors[0].field.clone()
    }

    #[test]
    fn field_names_are_those_of_the_struct() {
        assert_eq!(
            field_names::<crate::web::views::EventQuery>(),
            ["kind", "limit"]
        );
        assert!(field_names::<String>().is_empty());
    }
}
