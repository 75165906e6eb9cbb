//! The audit trail: who ran which action, when, why and how it went.
//!
//! Every action ([`super::actions`]) and every service change
//! ([`super::api`]) appends one [`AuditEntry`] to the coordinator's audit
//! log ([`Coordinator::append_audit`](crate::coordination::Coordinator::append_audit)):
//! `audit/entry-<seq>` znodes under the deployment's root, the newest
//! [`AUDIT_KEPT`] kept. Appends are fenced like the leader's other writes,
//! so only the leader records: an action refused on a follower leaves no
//! entry. An `abdicate` is recorded before the step-down (which ends the
//! term and so the right to append), the other actions after they ran.
//! The log is therefore
//! the same on every replica and survives failovers and restarts; the
//! `uninstall` job prints its last entries before deleting it with the
//! rest.
//!
//! *Who* is the name of the admin token presented (bearer or browser
//! session, [`Actor`]), or `local user` / `anonymous` without tokens; with
//! it the client's address and, for browser posts, its `User-Agent`.
//! *Why* is the optional `reason` the forms and the API accept, at most
//! [`MAX_REASON_CHARS`] characters (longer: 400, nothing done).
//!
//! `GET /audit` shows it with filters; `GET /api/v1/audit` is its JSON
//! twin. Both take `who`, `action`, `outcome` (`ok` or `failed`), `q` (a
//! substring of the reason, parameters or outcome) and `limit` (default
//! [`DEFAULT_LIMIT`], at most `AUDIT_KEPT`); entries are newest first.

use axum::http::{HeaderMap, header};
use serde::{Deserialize, Serialize};

use super::AppState;
use super::auth::{Actor, Peer};
use super::error::AppError;
use crate::coordination::{AUDIT_KEPT, CoordinationError};
use crate::scheduler::FieldError;

/// Longest `reason` accepted, characters.
pub const MAX_REASON_CHARS: usize = 1000;
/// `User-Agent` recorded up to this many characters.
pub const MAX_USER_AGENT_CHARS: usize = 256;
/// Entries listed unless `limit` says otherwise.
pub const DEFAULT_LIMIT: usize = 100;

/// One audit entry, as stored (JSON) and shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AuditEntry {
    /// Position in the log (the znode's sequence number); set when read.
    #[serde(default)]
    pub seq: u64,
    /// When it was asked for, seconds since the UNIX epoch.
    pub at: f64,
    /// Who: the admin token's name, `local user` or `anonymous`.
    pub who: String,
    /// How they proved it: `token`, `session`, `loopback`, `insecure`.
    pub method: String,
    /// The client's IP address (`unknown` without one; behind a reverse
    /// proxy, the proxy's).
    pub client: String,
    /// The browser's `User-Agent` (browser posts only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<String>,
    /// `api` or `browser`.
    pub via: String,
    /// `reconcile`, `kamikaze`, `teardown`, `abdicate`, `reregister`,
    /// `service.put`, `service.delete`.
    pub action: String,
    /// The action's parameters (a JSON object).
    pub params: serde_json::Value,
    /// Why, as the operator said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Whether it was carried out.
    pub ok: bool,
    /// The HTTP status answered.
    pub status: u16,
    /// What happened, one line.
    pub outcome: String,
    /// The replica that served it (its advertised URL).
    pub replica: String,
    /// The framework at the time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub framework_id: Option<String>,
}

/// Who asks and why: everything of an entry known before the action runs.
#[derive(Debug, Clone)]
pub struct Context {
    /// Who.
    pub actor: Actor,
    /// From where.
    pub peer: Peer,
    /// The browser's `User-Agent` (browser posts only).
    pub user_agent: Option<String>,
    /// `api` or `browser`.
    pub via: &'static str,
    /// Why.
    pub reason: Option<String>,
}

impl Context {
    /// The context of an API call by `actor` from `peer`.
    pub fn api(actor: Actor, peer: Peer, reason: Option<String>) -> Context {
        Context {
            actor,
            peer,
            user_agent: None,
            via: "api",
            reason,
        }
    }

    /// The context of a browser post by `actor` from `peer`, with its
    /// `User-Agent` (bounded).
    pub fn browser(
        actor: Actor,
        peer: Peer,
        headers: &HeaderMap,
        reason: Option<String>,
    ) -> Context {
        let user_agent = headers
            .get(header::USER_AGENT)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .map(|ua| ua.chars().take(MAX_USER_AGENT_CHARS).collect());
        Context {
            actor,
            peer,
            user_agent,
            via: "browser",
            reason,
        }
    }
}

/// A `reason` as given: trimmed, empty is none; 400 (a field error on
/// `reason`) above [`MAX_REASON_CHARS`].
pub fn check_reason(reason: Option<&str>) -> Result<Option<String>, AppError> {
    let Some(reason) = reason.map(str::trim).filter(|r| !r.is_empty()) else {
        return Ok(None);
    };
    let chars = reason.chars().count();
    if chars > MAX_REASON_CHARS {
        return Err(AppError::invalid(vec![FieldError {
            field: "reason".into(),
            message: format!(
                "at most {MAX_REASON_CHARS} characters (this one has {chars}); nothing was done"
            ),
        }]));
    }
    // Control characters (escape sequences, NUL), bidirectional
    // overrides and the Unicode line and paragraph separators could make
    // an entry display other than it reads; a reason is one line of plain
    // text.
    if let Some(c) = reason
        .chars()
        .find(|&c| c.is_control() || is_bidi_control(c) || matches!(c, '\u{2028}' | '\u{2029}'))
    {
        return Err(AppError::invalid(vec![FieldError {
            field: "reason".into(),
            message: format!(
                "plain text on one line: U+{:04X} is a control character; nothing was done",
                c as u32
            ),
        }]));
    }
    Ok(Some(reason.to_string()))
}

/// The Unicode bidirectional formatting characters (embeddings, overrides,
/// isolates and marks), which reorder how the text around them displays.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// How an action went, for its entry.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Carried out.
    pub ok: bool,
    /// HTTP status answered.
    pub status: u16,
    /// One line.
    pub summary: String,
}

impl Outcome {
    /// The outcome of a handler's `result`: `ok_status` and `summary()` when
    /// it succeeded; the error's status and `"<action> failed: <title>:
    /// <detail>"` when it did not.
    pub fn of<T>(
        action: &str,
        result: &Result<T, AppError>,
        ok_status: axum::http::StatusCode,
        summary: impl FnOnce() -> String,
    ) -> Self {
        match result {
            Ok(_) => Self {
                ok: true,
                status: ok_status.as_u16(),
                summary: summary(),
            },
            Err(e) => Self {
                ok: false,
                status: e.status.as_u16(),
                summary: format!("{action} failed: {}: {}", e.title, e.detail),
            },
        }
    }
}

/// [`record`]s the [`Outcome::of`] a handler's `result` (API and page
/// handlers of service and job changes share it).
pub async fn record_result<T>(
    state: &AppState,
    ctx: &Context,
    action: &str,
    params: serde_json::Value,
    result: &Result<T, AppError>,
    ok_status: axum::http::StatusCode,
    summary: impl FnOnce() -> String,
) -> bool {
    let outcome = Outcome::of(action, result, ok_status, summary);
    record(state, ctx, action, params, &outcome).await
}

/// Appends the entry for `action` (with `params`) asked in `ctx`, which
/// came to `outcome`, within the handler timeout; true when written. A
/// failure to record is logged, never answered: the action already ran (or,
/// for `abdicate`, runs regardless).
pub async fn record(
    state: &AppState,
    ctx: &Context,
    action: &str,
    params: serde_json::Value,
    outcome: &Outcome,
) -> bool {
    let s = state.handle.snapshot();
    let entry = AuditEntry {
        seq: 0,
        at: crate::util::unix_now_secs(),
        who: ctx.actor.name.clone(),
        method: ctx.actor.method.clone(),
        client: ctx.peer.to_string(),
        user_agent: ctx.user_agent.clone(),
        via: ctx.via.to_string(),
        action: action.to_string(),
        params,
        reason: ctx.reason.clone(),
        ok: outcome.ok,
        status: outcome.status,
        outcome: outcome.summary.clone(),
        replica: s.replica.advertised_url.clone(),
        framework_id: s.framework.id.clone(),
    };
    let value = serde_json::to_value(&entry).unwrap_or_default();
    let timeout = state.config.handler_timeout;
    match tokio::time::timeout(timeout, state.coordinator.append_audit(&value)).await {
        Ok(Ok(seq)) => {
            tracing::info!(seq, action, who = %entry.who, ok = entry.ok, "audited");
            state.events.nudge_audit();
            return true;
        }
        // Appends are fenced: a replica that does not lead records nothing
        // (the action was refused here and the leader's log is the record).
        Ok(Err(CoordinationError::NotLeader)) => {
            tracing::info!(
                action,
                "audit entry not written: this replica does not lead"
            )
        }
        Ok(Err(e)) => tracing::warn!(action, error = %e, "cannot write the audit entry"),
        Err(_) => tracing::warn!(action, "cannot write the audit entry: no answer in time"),
    }
    false
}

/// Filters of `/audit` and `/api/v1/audit` (see the module doc); any other
/// parameter is refused (400), so a misspelt filter never passes as none.
#[derive(Debug, Clone, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(default, deny_unknown_fields)]
pub struct AuditQuery {
    /// Only entries by this name.
    pub who: Option<String>,
    /// Only this action.
    pub action: Option<String>,
    /// `ok` or `failed`.
    pub outcome: Option<String>,
    /// A substring of the reason, parameters or outcome (any case).
    pub q: Option<String>,
    /// How many, newest first.
    pub limit: Option<usize>,
}

/// `/api/v1/audit` and the audit page.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct AuditView {
    /// Matching entries, newest first.
    pub entries: Vec<AuditEntry>,
    /// Why the log could not be read (ZooKeeper), if it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The names and actions seen, for the filter menus.
    pub names: Vec<String>,
    /// Actions seen.
    pub actions: Vec<String>,
    /// The filters applied.
    #[serde(skip)]
    pub query: AuditQuery,
}

/// The `outcome` filter of the audit trail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OutcomeFilter {
    /// Entries whose action succeeded.
    Ok,
    /// Entries whose action failed.
    Failed,
}

impl OutcomeFilter {
    /// `ok`, `failed` or nothing (no filter); 400 else.
    fn parse(value: Option<&str>) -> Result<Option<OutcomeFilter>, AppError> {
        match value {
            None => Ok(None),
            Some("ok") => Ok(Some(OutcomeFilter::Ok)),
            Some("failed") => Ok(Some(OutcomeFilter::Failed)),
            Some(_) => Err(AppError::bad_request("outcome must be ok or failed")),
        }
    }

    /// Whether an entry with this `ok` passes the filter.
    fn admits(self, ok: bool) -> bool {
        ok == (self == OutcomeFilter::Ok)
    }
}

fn nonempty(v: &Option<String>) -> Option<&str> {
    v.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

impl AuditView {
    /// Reads the log (within the handler timeout) and applies `query`.
    pub async fn load(state: &AppState, query: AuditQuery) -> Result<AuditView, AppError> {
        let outcome = OutcomeFilter::parse(nonempty(&query.outcome))?;
        let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
        if limit == 0 || limit > AUDIT_KEPT {
            return Err(AppError::bad_request(format!(
                "limit must be from 1 to {AUDIT_KEPT}"
            )));
        }
        let timeout = state.config.handler_timeout;
        let read = tokio::time::timeout(timeout, state.coordinator.audit_log(AUDIT_KEPT)).await;
        let (log, error) = match read {
            Ok(Ok(log)) => (log, None),
            Ok(Err(e)) => (Vec::new(), Some(format!("cannot read the audit log: {e}"))),
            Err(_) => (
                Vec::new(),
                Some(format!(
                    "cannot read the audit log: no answer within {timeout:?}"
                )),
            ),
        };
        let all: Vec<AuditEntry> = log
            .into_iter()
            .rev()
            .filter_map(|(seq, v)| {
                let mut e: AuditEntry = serde_json::from_value(v).ok()?;
                e.seq = seq;
                Some(e)
            })
            .collect();
        let mut names: Vec<String> = all.iter().map(|e| e.who.clone()).collect();
        names.sort();
        names.dedup();
        let mut actions: Vec<String> = all.iter().map(|e| e.action.clone()).collect();
        actions.sort();
        actions.dedup();
        let who = nonempty(&query.who);
        let action = nonempty(&query.action);
        let needle = nonempty(&query.q).map(str::to_lowercase);
        let entries = all
            .into_iter()
            .filter(|e| who.is_none_or(|w| e.who == w))
            .filter(|e| action.is_none_or(|a| e.action == a))
            .filter(|e| outcome.is_none_or(|o| o.admits(e.ok)))
            .filter(|e| {
                needle.as_deref().is_none_or(|n| {
                    let hay = format!(
                        "{} {} {}",
                        e.reason.as_deref().unwrap_or(""),
                        e.params,
                        e.outcome
                    );
                    hay.to_lowercase().contains(n)
                })
            })
            .take(limit)
            .collect();
        Ok(AuditView {
            entries,
            error,
            names,
            actions,
            query,
        })
    }

    /// The filter `name` as given, or empty.
    pub fn filter(&self, name: &str) -> &str {
        let q = &self.query;
        let v = match name {
            "who" => &q.who,
            "action" => &q.action,
            "outcome" => &q.outcome,
            _ => &q.q,
        };
        nonempty(v).unwrap_or("")
    }

    /// `selected` when filter `name` is `value`.
    pub fn selected(&self, name: &str, value: &str) -> &'static str {
        if self.filter(name) == value {
            "selected"
        } else {
            ""
        }
    }

    /// The query string of the filters applied (for the JSON link).
    pub fn query_string(&self) -> String {
        let q = &self.query;
        let pairs: Vec<(&str, &str)> = [
            ("who", &q.who),
            ("action", &q.action),
            ("outcome", &q.outcome),
            ("q", &q.q),
        ]
        .into_iter()
        .filter_map(|(k, v)| nonempty(v).map(|v| (k, v)))
        .collect();
        if pairs.is_empty() {
            return String::new();
        }
        format!(
            "?{}",
            serde_urlencoded::to_string(pairs).unwrap_or_default()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outcome_takes_the_status_of_the_result() {
        let created: Result<(), AppError> = Ok(());
        let o = Outcome::of("job.put", &created, axum::http::StatusCode::CREATED, || {
            "job j created".into()
        });
        assert!(o.ok);
        assert_eq!((o.status, o.summary.as_str()), (201, "job j created"));
        let missing: Result<(), AppError> = Err(AppError::not_found("no job \"j\""));
        let o = Outcome::of("job.kill", &missing, axum::http::StatusCode::OK, || {
            unreachable!("no summary of a failure")
        });
        assert!(!o.ok);
        assert_eq!(o.status, 404);
        assert!(o.summary.starts_with("job.kill failed: "), "{}", o.summary);
        assert!(o.summary.ends_with("no job \"j\""), "{}", o.summary);
    }

    #[test]
    fn reasons_are_bounded_and_trimmed() {
        assert_eq!(check_reason(None).unwrap(), None);
        assert_eq!(check_reason(Some("  ")).unwrap(), None);
        assert_eq!(
            check_reason(Some(" rolling the agents "))
                .unwrap()
                .as_deref(),
            Some("rolling the agents")
        );
        let ok = "é".repeat(MAX_REASON_CHARS);
        assert!(check_reason(Some(&ok)).is_ok());
        let e = check_reason(Some(&"x".repeat(100 * 1024))).unwrap_err();
        assert_eq!(e.status.as_u16(), 400);
        assert_eq!(e.errors[0].field, "reason");
        assert!(e.errors[0].message.contains("102400"), "{:?}", e.errors);
        for hostile in [
            "a\u{0}b",
            "red \u{1b}[31m",
            "two\nlines",
            "\u{202E}txt.exe",
            "line\u{2028}separator",
            "paragraph\u{2029}separator",
        ] {
            let e = check_reason(Some(hostile)).unwrap_err();
            assert_eq!(e.status.as_u16(), 400, "{hostile:?}");
            assert!(
                e.errors[0].message.contains("control character"),
                "{:?}",
                e.errors
            );
        }
        assert!(check_reason(Some("naïve café — ok ✓")).is_ok());
    }
}
