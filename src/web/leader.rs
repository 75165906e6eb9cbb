//! Reading the leader's JSON API from a follower, so that a follower's
//! charts and task logs are the leader's (the leader holds the history and
//! reaches the master). Bounded: the whole call within
//! [`WebConfig::handler_timeout`](super::WebConfig::handler_timeout), the
//! body at most [`MAX_LEADER_BODY`].

use futures::StreamExt;

use super::AppState;
use super::error::AppError;
use axum::http::StatusCode;

/// Largest body accepted from the leader.
pub const MAX_LEADER_BODY: usize = 16 * 1024 * 1024;

/// The leader's URL when another replica leads, `None` when this one does.
/// 503 when no leader is known.
pub fn other_leader(state: &AppState, path: &str) -> Result<Option<String>, AppError> {
    let s = state.handle.snapshot();
    if s.leadership.is_leader() {
        return Ok(None);
    }
    match s.leader_url() {
        Some(url) if url != s.replica.advertised_url => Ok(Some(url)),
        _ => Err(AppError::not_leader(None, path)),
    }
}

/// GETs `path_and_query` from the leader at `leader` and returns its
/// status and JSON body; a problem document is passed on as it is.
///
/// # Errors
/// 502 when the leader cannot be reached, answers too much or not JSON;
/// 504 when it does not answer in time.
pub async fn get_json(
    state: &AppState,
    leader: &str,
    path_and_query: &str,
) -> Result<(StatusCode, serde_json::Value), AppError> {
    let url = format!("{}{path_and_query}", leader.trim_end_matches('/'));
    let bad = |detail: String| {
        AppError::new(
            StatusCode::BAD_GATEWAY,
            "leader-unreachable",
            "The leader is unreachable",
            detail,
        )
    };
    let call = async {
        let response = state
            .http
            .get(&url)
            .header("accept", "application/json")
            .send()
            .await
            .map_err(|e| bad(format!("cannot reach the leader at {url}: {e}")))?;
        let status =
            StatusCode::from_u16(response.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
        let mut body = Vec::new();
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| bad(format!("reading {url}: {e}")))?;
            if body.len() + chunk.len() > MAX_LEADER_BODY {
                return Err(bad(format!(
                    "{url} answered more than {MAX_LEADER_BODY} bytes"
                )));
            }
            body.extend_from_slice(&chunk);
        }
        let value = serde_json::from_slice(&body)
            .map_err(|e| bad(format!("{url} answered something that is not JSON: {e}")))?;
        Ok((status, value))
    };
    let timeout = state.config.handler_timeout;
    tokio::time::timeout(timeout, call)
        .await
        .unwrap_or_else(|_| {
            Err(AppError::new(
                StatusCode::GATEWAY_TIMEOUT,
                "leader-timeout",
                "The leader did not answer in time",
                format!("{url} did not answer within {}s", timeout.as_secs_f64()),
            ))
        })
}

/// A problem document from the leader as an [`AppError`] of its status.
pub fn problem(status: StatusCode, body: &serde_json::Value) -> AppError {
    let detail = body["detail"]
        .as_str()
        .unwrap_or("the leader refused")
        .to_string();
    AppError::new(
        status,
        "leader-answer",
        "The leader answered an error",
        detail,
    )
}
