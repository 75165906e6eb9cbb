//! Live pages: `GET /api/v1/stream` is a server-sent-event stream with one
//! `snapshot` event per new scheduler snapshot (at most one per
//! [`MIN_INTERVAL`]), data `{"at", "role", "state", "tasks", "loading"}`
//! (`loading`: the task records are not all read yet, so `tasks` is not
//! their count; [`crate::scheduler::Snapshot::loading`]). `app.js`
//! re-fetches the page it shows on each event and swaps its `#live` part;
//! when the stream breaks it shows "scheduler unreachable" and reconnects
//! with back-off. When the server shuts down the stream ends with one
//! `shutdown` event, data `{"reason"}` ([`SHUTDOWN_REASON`]), which the
//! page shows instead of a bare "lost the live stream".

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::{Stream, StreamExt};
use serde::Serialize;

use super::AppState;

/// Shortest time between two events on one stream.
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// The `reason` of the `shutdown` event that ends every stream of a
/// replica that stops (SIGTERM, SIGINT, a fence, `uninstall`).
pub const SHUTDOWN_REASON: &str = "this replica is shutting down; another replica serves the \
                                   dashboard (a follower links to the leader)";

#[derive(Serialize)]
struct Pulse<'a> {
    at: f64,
    role: &'a str,
    state: &'a str,
    tasks: usize,
    loading: bool,
}

/// `GET /api/v1/stream`: see the module doc.
#[utoipa::path(
    get,
    path = "/api/v1/stream",
    tag = "events",
    responses((status = 200, description = "Server-sent events: `snapshot` events, one per snapshot (at most one a second); when the replica shuts down, one `shutdown` event with data `{\"reason\"}`, then the end", body = String, content_type = "text/event-stream"), crate::web::error::responses::Unavailable)
)]
pub async fn stream(
    State(state): State<AppState>,
) -> (
    [(&'static str, &'static str); 1],
    Sse<impl Stream<Item = Result<Event, Infallible>>>,
) {
    let rx = state.handle.subscribe();
    let events = futures::stream::unfold((rx, true), |(mut rx, first)| async move {
        if !first {
            tokio::time::sleep(MIN_INTERVAL).await;
            if rx.changed().await.is_err() {
                // The core is gone: keep the stream (and its keep-alives)
                // open; the page still shows the last snapshot.
                futures::future::pending::<()>().await;
            }
        }
        let s = rx.borrow_and_update().clone();
        let pulse = Pulse {
            at: s.at,
            role: s.leadership.role(),
            state: s.framework.state.as_str(),
            tasks: s.tasks.len(),
            loading: s.loading,
        };
        let event = Event::default()
            .event("snapshot")
            .json_data(&pulse)
            .unwrap_or_else(|_| Event::default().event("snapshot"));
        Some((Ok(event), (rx, false)))
    })
    .take_until(state.shutdown.clone().cancelled_owned())
    // Only a stream that ended by the shutdown gets here: one whose
    // client went is dropped.
    .chain(futures::stream::once(async {
        let data = serde_json::json!({ "reason": SHUTDOWN_REASON });
        Ok(Event::default().event("shutdown").data(data.to_string()))
    }));
    // Proxies such as nginx would buffer the stream otherwise.
    (
        [("x-accel-buffering", "no")],
        Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))),
    )
}
