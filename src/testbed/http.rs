//! Response shapes shared by the testbed's endpoints, matching a real master
//! byte for byte where it matters (`docs/mesos-protocol.md#capture-a-subscribe`): error bodies are
//! `text/plain; charset=utf-8`; accepted calls are `202` with
//! `Content-Length: 0` and no `Content-Type`; redirects are protocol-relative.
//!
//! Sources in the Mesos tree: `src/master/http.cpp` (`Master::Http::scheduler`
//! and `Master::Http::api` for the 400/405/406/415 checks and texts,
//! `Master::Http::redirect` for 307), libprocess'
//! `3rdparty/libprocess/include/process/http.hpp` (response types and the
//! 405 body).
//!
//! A bottom room: it imports no other room, so the master's, the agents'
//! and the APIs' endpoints all use it. The leader gate and basic
//! authentication, which read the master's state, are in `api/`.

use axum::body::Body;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::mesos::json::JsonError;
use crate::mesos::media::{self, Encoding};

/// A plain-text answer, as libprocess writes error responses (the
/// `BadRequest`, `NotAcceptable`, … types of
/// `3rdparty/libprocess/include/process/http.hpp`).
pub(crate) fn text(status: StatusCode, body: impl Into<String>) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body.into(),
    )
        .into_response()
}

/// An empty answer (`202 Accepted` for calls, `200 OK` for teardowns).
pub(crate) fn empty(status: StatusCode) -> Response {
    Response::builder()
        .status(status)
        .header(header::CONTENT_LENGTH, "0")
        .body(Body::empty())
        .expect("static response parts are valid")
}

/// `405` with `Allow: POST` and libprocess' text: the `MethodNotAllowed`
/// response of `3rdparty/libprocess/include/process/http.hpp` builds the
/// body from the allowed methods and the one received.
pub(crate) fn method_not_allowed(method: &Method) -> Response {
    let mut response = text(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("405 Method Not Allowed. Expecting one of {{ 'POST' }}, but received '{method}'."),
    );
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("POST"));
    response
}

/// `307` to a protocol-relative location (`//host:port/path`), as
/// `Master::Http::redirect` (`src/master/http.cpp`) answers.
pub(crate) fn redirect(location: &str) -> Response {
    let mut response = empty(StatusCode::TEMPORARY_REDIRECT);
    if let Ok(value) = HeaderValue::from_str(location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}

/// A refusal in the master's words: a status and a plain-text body.
#[derive(Debug)]
pub(crate) struct Refusal(pub StatusCode, pub String);

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        text(self.0, self.1)
    }
}

/// Request encoding from `Content-Type`, or the master's 400 / 415
/// (`Master::Http::scheduler`, `src/master/http.cpp`).
pub(crate) fn request_encoding(headers: &axum::http::HeaderMap) -> Result<Encoding, Refusal> {
    let Some(value) = headers.get(header::CONTENT_TYPE) else {
        return Err(Refusal(
            StatusCode::BAD_REQUEST,
            "Expecting 'Content-Type' to be present".into(),
        ));
    };
    value
        .to_str()
        .ok()
        .and_then(Encoding::from_content_type)
        .ok_or_else(|| {
            Refusal(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!(
                    "Expecting 'Content-Type' of {} or {}",
                    media::JSON,
                    media::PROTOBUF
                ),
            )
        })
}

/// Response encoding from `Accept`, or the master's 406
/// (`Master::Http::scheduler`, `src/master/http.cpp`).
pub(crate) fn response_encoding(headers: &axum::http::HeaderMap) -> Result<Encoding, Refusal> {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    Encoding::negotiate(accept).ok_or_else(|| {
        Refusal(
            StatusCode::NOT_ACCEPTABLE,
            format!(
                "Expecting 'Accept' to allow '{}' or '{}'",
                media::PROTOBUF,
                media::JSON
            ),
        )
    })
}

/// The 400 body for a request that did not parse into message `name`
/// (`Call` for both APIs), in the master's words (`src/master/http.cpp`;
/// the JSON syntax error text comes from stout's `JSON::parse`,
/// `3rdparty/stout/include/stout/json.hpp`).
pub(crate) fn parse_error(
    name: &str,
    encoding: Encoding,
    body: &[u8],
    error: Option<JsonError>,
) -> Refusal {
    let message = match (encoding, error) {
        (Encoding::Protobuf, _) | (_, None) => format!("Failed to parse body into {name} protobuf"),
        (Encoding::Json, Some(JsonError::Syntax { line, column, .. })) => {
            // picojson (used by stout) reports the line and the input from the
            // error position to the end of that line; we cut that excerpt
            // short, so that a huge body is not echoed back.
            let near = body
                .split(|b| *b == b'\n')
                .nth(line.saturating_sub(1))
                .map(|l| excerpt(l.get(column..).unwrap_or(&[]), NEAR_LIMIT))
                .unwrap_or_default();
            format!("Failed to parse body into JSON: syntax error at line {line} near: {near}")
        }
        (Encoding::Json, Some(JsonError::Convert(e))) => {
            format!("Failed to convert JSON into {name} protobuf: {e}")
        }
    };
    Refusal(StatusCode::BAD_REQUEST, message)
}

/// Longest excerpt of the input after "near: " in a JSON syntax error, in bytes.
pub(crate) const NEAR_LIMIT: usize = 100;

/// At most `limit` bytes of `bytes` as text, cut at a character boundary
/// (invalid UTF-8 shows as U+FFFD).
fn excerpt(bytes: &[u8], limit: usize) -> String {
    let mut cut = &bytes[..bytes.len().min(limit)];
    if cut.len() < bytes.len()
        && let Err(e) = std::str::from_utf8(cut)
        && e.error_len().is_none()
    {
        // The limit fell inside a character: leave it out.
        cut = &cut[..e.valid_up_to()];
    }
    String::from_utf8_lossy(cut).into_owned()
}

/// Decodes a call body: protobuf (a message missing `required` fields does
/// not parse, as protobuf's ParseFromString fails on them) or Mesos JSON.
pub(crate) fn decode<M: prost::Message + prost::Name + Default>(
    encoding: Encoding,
    body: &[u8],
) -> Result<M, Refusal> {
    match encoding {
        Encoding::Protobuf => crate::mesos::json::decode_complete(body)
            .ok_or_else(|| parse_error("Call", encoding, body, None)),
        Encoding::Json => crate::mesos::json::from_slice(body)
            .map_err(|e| parse_error("Call", encoding, body, Some(e))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpts_are_bounded_and_cut_between_characters() {
        assert_eq!(excerpt(b"", 100), "");
        assert_eq!(excerpt(b"abc", 100), "abc");
        assert_eq!(excerpt(&[b'x'; 500], 100), "x".repeat(100));
        // 'é' is two bytes: the 100th byte would split the 50th one.
        let text = format!("a{}", "é".repeat(100));
        let cut = excerpt(text.as_bytes(), 100);
        assert_eq!(cut, format!("a{}", "é".repeat(49)));
        assert!(cut.len() <= 100);
        // Invalid bytes inside the excerpt still show.
        assert_eq!(excerpt(b"a\xffb", 100), "a\u{fffd}b");
    }

    #[test]
    fn a_huge_malformed_body_is_not_echoed() {
        let body = format!("{{\"type\": {}", "x".repeat(1_000_000));
        let error =
            crate::mesos::json::from_slice::<crate::mesos::v1::scheduler::Call>(body.as_bytes())
                .unwrap_err();
        let Refusal(status, text) =
            parse_error("Call", Encoding::Json, body.as_bytes(), Some(error));
        assert_eq!(status, StatusCode::BAD_REQUEST);
        let prefix = "Failed to parse body into JSON: syntax error at line 1 near: ";
        assert!(text.starts_with(prefix), "{text}");
        assert!(
            text.len() <= prefix.len() + NEAR_LIMIT,
            "{} bytes",
            text.len()
        );
    }
}
