//! `POST /api/v1/scheduler` (also `/master/api/v1/scheduler`): parsing,
//! validation and dispatch of scheduler calls, in the order a real master
//! checks them (`Master::Http::scheduler` in `src/master/http.cpp`,
//! `src/master/validation.cpp`,
//! `docs/mesos-protocol.md#status-codes-of-the-scheduler-endpoint` and captures l, n).

use axum::body::{Body, Bytes};
use axum::extract::{OriginalUri, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::mesos::media::STREAM_ID_HEADER;
use crate::mesos::v1::scheduler::{Call, call};
use crate::testbed::http::{self, empty, text};
use crate::testbed::master::App;
use crate::testbed::master::Master;

/// The handler; every call is recorded in the call log with its status,
/// and answered after the response latency fault, if any.
pub(crate) async fn scheduler(
    State(app): State<App>,
    method: Method,
    headers: HeaderMap,
    OriginalUri(uri): OriginalUri,
    body: Bytes,
) -> Response {
    // Parsing needs nothing of the master's: it is done before taking the
    // lock, so that concurrent calls do not wait for each other's decoding.
    let parsed = http::request_encoding(&headers).and_then(|e| http::decode::<Call>(e, &body));
    let (response, latency) = {
        let mut master = app.lock();
        let mut dropped = false;
        let (response, call) = handle(
            &mut master,
            &method,
            &headers,
            uri.path(),
            parsed,
            &mut dropped,
        );
        // A SUBSCRIBE carries no stream ID; the one its answer issued is
        // what identifies the subscription in the log.
        let stream_id = headers
            .get(STREAM_ID_HEADER)
            .or_else(|| response.headers().get(STREAM_ID_HEADER))
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let record = master.calls.record(
            "scheduler",
            call.as_ref().map(|c| c.r#type().as_str_name()),
            call.as_ref()
                .and_then(|c| c.framework_id.as_ref())
                .map(|f| f.value.clone()),
            stream_id,
            response.status().as_u16(),
            call.as_ref(),
        );
        record.dropped = dropped;
        (response, master.faults.response_latency)
    };
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    response
}

/// The checks in the master's order; `parsed` is the body decoded (or the
/// 400 / 415 for it), answered only after the checks that come first.
fn handle(
    master: &mut Master,
    method: &Method,
    headers: &HeaderMap,
    path: &str,
    parsed: Result<Call, http::Refusal>,
    dropped: &mut bool,
) -> (Response, Option<Call>) {
    let principal = match super::authenticate(master, headers, "mesos-master-scheduler") {
        Ok(principal) => principal,
        Err(refusal) => return (refusal.into_response(), None),
    };
    if let Some(response) = super::leader_gate(master, path) {
        return (response, None);
    }
    if method != Method::POST {
        return (http::method_not_allowed(method), None);
    }
    let call = match parsed {
        Ok(call) => call,
        Err(refusal) => return (refusal.into_response(), None),
    };
    if let Err(reason) = validate(&call, principal.as_deref()) {
        let response = text(
            StatusCode::BAD_REQUEST,
            format!("Failed to validate scheduler::Call: {reason}"),
        );
        return (response, Some(call));
    }
    let response = if call.r#type() == call::Type::Subscribe {
        subscribe(master, headers, &call)
    } else {
        dispatch(master, headers, &call, dropped)
    };
    (response, Some(call))
}

/// `scheduler::call::validate` (validation.cpp), returning the reason text.
fn validate(call: &Call, principal: Option<&str>) -> Result<(), String> {
    use call::Type as T;
    if call.r#type.is_none() {
        return Err("Expecting 'type' to be present".into());
    }
    if call.r#type() == T::Subscribe {
        let Some(subscribe) = &call.subscribe else {
            return Err("Expecting 'subscribe' to be present".into());
        };
        if subscribe.framework_info.id != call.framework_id {
            return Err("'framework_id' differs from 'subscribe.framework_info.id'".into());
        }
        if let (Some(authenticated), Some(declared)) =
            (principal, &subscribe.framework_info.principal)
            && authenticated != declared
        {
            return Err(format!(
                "Authenticated principal '{authenticated}' does not match principal '{declared}' set in `FrameworkInfo`"
            ));
        }
        return Ok(());
    }
    if call.framework_id.is_none() {
        return Err("Expecting 'framework_id' to be present".into());
    }
    let missing = |present: bool, field: &str| {
        if present {
            Ok(())
        } else {
            Err(format!("Expecting '{field}' to be present"))
        }
    };
    match call.r#type() {
        T::Accept => missing(call.accept.is_some(), "accept"),
        T::Decline => missing(call.decline.is_some(), "decline"),
        T::Kill => missing(call.kill.is_some(), "kill"),
        T::Shutdown => missing(call.shutdown.is_some(), "shutdown"),
        T::Reconcile => missing(call.reconcile.is_some(), "reconcile"),
        T::Message => missing(call.message.is_some(), "message"),
        T::Request => missing(call.request.is_some(), "request"),
        T::UpdateFramework => missing(call.update_framework.is_some(), "update_framework"),
        T::AcceptInverseOffers => missing(
            call.accept_inverse_offers.is_some(),
            "accept_inverse_offers",
        ),
        T::DeclineInverseOffers => missing(
            call.decline_inverse_offers.is_some(),
            "decline_inverse_offers",
        ),
        T::Acknowledge => {
            let Some(ack) = &call.acknowledge else {
                return Err("Expecting 'acknowledge' to be present".into());
            };
            // stout UUID::fromBytes: 16 bytes of a known UUID version.
            let version = ack.uuid.get(6).map(|b| b >> 4).unwrap_or(0);
            if ack.uuid.len() != 16 || !(1..=5).contains(&version) {
                return Err("Not a valid UUID".into());
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn subscribe(master: &mut Master, headers: &HeaderMap, call: &Call) -> Response {
    if headers.contains_key(STREAM_ID_HEADER) {
        return text(
            StatusCode::BAD_REQUEST,
            "Subscribe calls should not include the 'Mesos-Stream-Id' header",
        );
    }
    let encoding = match http::response_encoding(headers) {
        Ok(e) => e,
        Err(refusal) => return refusal.into_response(),
    };
    let subscribe = call.subscribe.clone().expect("validated");
    let (stream_id, stream) = master.subscribe(subscribe, encoding);
    let mut response = Response::new(Body::from_stream(stream));
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&stream_id) {
        headers.insert(STREAM_ID_HEADER, value);
    }
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(encoding.media_type()),
    );
    response
}

fn dispatch(master: &mut Master, headers: &HeaderMap, call: &Call, dropped: &mut bool) -> Response {
    let framework_id = call.framework_id.as_ref().expect("validated").value.clone();
    let Some(framework) = master.frameworks.get(&framework_id) else {
        return text(StatusCode::BAD_REQUEST, "Framework cannot be found");
    };
    let Some(sub) = &framework.sub else {
        return text(StatusCode::FORBIDDEN, "Framework is not subscribed");
    };
    let Some(given) = headers.get(STREAM_ID_HEADER) else {
        return text(
            StatusCode::BAD_REQUEST,
            "All non-subscribe calls should include the 'Mesos-Stream-Id' header",
        );
    };
    let given = String::from_utf8_lossy(given.as_bytes());
    if given != sub.stream_id {
        return text(
            StatusCode::BAD_REQUEST,
            format!(
                "The stream ID '{given}' included in this request didn't match the stream ID currently associated with framework ID {framework_id}"
            ),
        );
    }

    use call::Type as T;
    let fid = framework_id.as_str();
    // Lost after the checks that answer something else than 202: the
    // scheduler sees its call accepted and nothing happens.
    if crate::testbed::master::faults::LOSABLE_CALLS.contains(&call.r#type())
        && master.faults.take_dropped_call(call.r#type().as_str_name())
    {
        tracing::info!(call_type = call.r#type().as_str_name(), framework_id = %fid, "fault: call dropped");
        *dropped = true;
        return empty(StatusCode::ACCEPTED);
    }
    match call.r#type() {
        T::Teardown => {
            master.remove_framework(fid);
        }
        T::Accept => master.accept(fid, call.accept.clone().expect("validated")),
        T::Decline => {
            let decline = call.decline.as_ref().expect("validated");
            master.decline(fid, &decline.offer_ids, decline.filters.as_ref());
        }
        T::Revive => master.revive(fid),
        T::Suppress => master.suppress(fid),
        T::Kill => master.kill(fid, call.kill.as_ref().expect("validated")),
        T::Shutdown => master.shutdown_executor(fid, call.shutdown.as_ref().expect("validated")),
        T::Acknowledge => master.acknowledge(fid, call.acknowledge.as_ref().expect("validated")),
        T::Reconcile => master.reconcile(fid, &call.reconcile.as_ref().expect("validated").tasks),
        T::Message => master.message(fid, call.message.as_ref().expect("validated")),
        // The default allocator ignores REQUEST.
        T::Request => {}
        // Inverse offers: `master/maintenance.rs`.
        T::AcceptInverseOffers => {
            let answer = call.accept_inverse_offers.as_ref().expect("validated");
            master.answer_inverse_offers(
                fid,
                &answer.inverse_offer_ids,
                answer.filters.as_ref(),
                true,
            );
        }
        T::DeclineInverseOffers => {
            let answer = call.decline_inverse_offers.as_ref().expect("validated");
            master.answer_inverse_offers(
                fid,
                &answer.inverse_offer_ids,
                answer.filters.as_ref(),
                false,
            );
        }
        T::UpdateFramework => {
            let update = call.update_framework.as_ref().expect("validated");
            if let Some(framework) = master.frameworks.get_mut(fid) {
                let mut info = update.framework_info.clone();
                info.user = framework.info.user.clone();
                info.checkpoint = framework.info.checkpoint;
                info.id = framework.info.id.clone();
                framework.info = info;
                framework.suppressed = !update.suppressed_roles.is_empty();
            }
            return empty(StatusCode::OK);
        }
        T::Unknown => return empty(StatusCode::NOT_IMPLEMENTED),
        T::AcknowledgeOperationStatus | T::ReconcileOperations | T::Subscribe => {
            return text(
                StatusCode::NOT_IMPLEMENTED,
                "Operation feedback is not simulated by mesos-testbed",
            );
        }
    }
    empty(StatusCode::ACCEPTED)
}
