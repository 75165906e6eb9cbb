//! The operator API's maintenance calls: GET_MAINTENANCE_SCHEDULE,
//! GET_MAINTENANCE_STATUS, UPDATE_MAINTENANCE_SCHEDULE, START_MAINTENANCE and
//! STOP_MAINTENANCE (`Master::Http::getMaintenanceSchedule`,
//! `getMaintenanceStatus`, `updateMaintenanceSchedule`, `startMaintenance`,
//! `stopMaintenance` in `src/master/http.cpp`, apache/mesos). The updates
//! answer 200 with an empty body, or 400 with the validation error as the
//! body (capture v); the rules are in `master/maintenance.rs`.

use axum::http::StatusCode;
use axum::response::Response;

use super::operator_api::answer_with;
use crate::mesos::media::Encoding;
use crate::mesos::v1::master::{Call, Response as OperatorResponse, call, response};
use crate::testbed::http::{empty, text};
use crate::testbed::master::Master;

/// Answers one of the maintenance calls.
pub(super) fn handle(master: &mut Master, call: &Call, accept: Encoding) -> Response {
    let missing = |field: &str| {
        text(
            StatusCode::BAD_REQUEST,
            format!("Failed to validate master::Call: Expecting '{field}' to be present"),
        )
    };
    let outcome = |result: Result<(), String>| match result {
        Ok(()) => empty(StatusCode::OK),
        Err(reason) => text(StatusCode::BAD_REQUEST, reason),
    };
    match call.r#type() {
        call::Type::GetMaintenanceSchedule => {
            let answer = OperatorResponse {
                r#type: Some(response::Type::GetMaintenanceSchedule as i32),
                get_maintenance_schedule: Some(response::GetMaintenanceSchedule {
                    schedule: master.maintenance_schedule(),
                }),
                ..Default::default()
            };
            answer_with(accept, &answer)
        }
        call::Type::GetMaintenanceStatus => {
            let answer = OperatorResponse {
                r#type: Some(response::Type::GetMaintenanceStatus as i32),
                get_maintenance_status: Some(response::GetMaintenanceStatus {
                    status: master.maintenance_status(),
                }),
                ..Default::default()
            };
            answer_with(accept, &answer)
        }
        call::Type::UpdateMaintenanceSchedule => match &call.update_maintenance_schedule {
            None => missing("update_maintenance_schedule"),
            Some(update) => outcome(master.update_maintenance_schedule(update.schedule.clone())),
        },
        call::Type::StartMaintenance => match &call.start_maintenance {
            None => missing("start_maintenance"),
            Some(start) => outcome(master.start_maintenance(&start.machines)),
        },
        call::Type::StopMaintenance => match &call.stop_maintenance {
            None => missing("stop_maintenance"),
            Some(stop) => outcome(master.stop_maintenance(&stop.machines)),
        },
        _ => empty(StatusCode::NOT_IMPLEMENTED),
    }
}
