//! The operator client: `GET_FRAMEWORKS` and `TEARDOWN` through the v1
//! operator API (`POST /api/v1`), with the legacy `POST /master/teardown`
//! as fallback for masters without it (`docs/mesos-protocol.md#operator-api`, capture h).
//!
//! Both follow 307s to the leader (remembering it in the detector); 503s,
//! refused connections, timeouts and leaderless periods are retried with
//! capped, jittered backoff for `operator_retry_for`; other refusals (400,
//! 401, 403…) are returned at once with the master's text verbatim.

use bytes::Bytes;
use prost::Message;
use reqwest::StatusCode;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::backoff::Backoff;
use crate::mesos::client::{ClientConfig, Http, Request, SendError, error_text, read_limited};
use crate::mesos::detector::MasterDetector;
use crate::mesos::media::PROTOBUF;
use crate::mesos::v1;
use crate::mesos::v1::master::{Call, Response, call, response};

/// An agent as `GET_AGENTS` describes it (`deactivated`, `drain_info`).
pub type Agent = response::get_agents::Agent;

/// A framework as `GET_FRAMEWORKS` describes it.
pub type Framework = response::get_frameworks::Framework;

/// The master's text for a TEARDOWN of an unknown or already removed
/// framework (v1 and legacy alike; capture h).
pub const NO_SUCH_FRAMEWORK: &str = "No framework found with specified ID";

/// The text of the 400 a REACTIVATE_AGENT gets while the agent still drains
/// (`Master::Http::_reactivateAgent` in `src/master/http.cpp`).
pub const STILL_DRAINING: &str = "Agent is still in the DRAINING state";

/// Why an operator call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OperatorError {
    /// The master refused the call (400, 401, 403, 404, 405…); `body` is
    /// its text verbatim (truncated to `max_error_body_bytes`).
    #[error("master answered {status}: {body}")]
    Refused {
        /// HTTP status code.
        status: u16,
        /// Response body text.
        body: String,
    },
    /// Still failing when `operator_retry_for` ran out: 503s, other 5xx,
    /// refused connections, timeouts or no leader at all.
    #[error("gave up after {attempts} attempts: {last}")]
    Unavailable {
        /// Attempts made.
        attempts: u32,
        /// The last failure.
        last: String,
    },
    /// A 200 whose body was not the expected response.
    #[error("undecodable answer: {0}")]
    Decode(String),
    /// The cancellation token fired.
    #[error("cancelled")]
    Cancelled,
}

impl OperatorError {
    /// True for the 400 a TEARDOWN of an unknown or removed framework gets.
    pub fn is_no_such_framework(&self) -> bool {
        matches!(self, OperatorError::Refused { status: 400, body } if body.contains(NO_SUCH_FRAMEWORK))
    }

    /// True for the 400 a REACTIVATE_AGENT gets while the agent's drain at
    /// the master is still DRAINING (`Master::Http::_reactivateAgent` in
    /// `src/master/http.cpp`: "Agent is still in the DRAINING state").
    pub fn is_still_draining(&self) -> bool {
        matches!(self, OperatorError::Refused { status: 400, body } if body.contains(STILL_DRAINING))
    }
}

/// `GET_FRAMEWORKS`: active and inactive (disconnected or recovered)
/// frameworks, and completed ones still in the master's bounded cache.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Frameworks {
    /// Frameworks the master knows, connected or not.
    pub frameworks: Vec<Framework>,
    /// Removed frameworks (at most `--max_completed_frameworks`, 50).
    pub completed: Vec<Framework>,
}

impl Frameworks {
    /// Frameworks that are active (subscribed and not deactivated).
    pub fn active(&self) -> impl Iterator<Item = &Framework> {
        self.frameworks.iter().filter(|f| f.active)
    }

    /// Known frameworks that are not active (disconnected within their
    /// failover timeout, or recovered after a master failover).
    pub fn inactive(&self) -> impl Iterator<Item = &Framework> {
        self.frameworks.iter().filter(|f| !f.active)
    }

    /// The known (not completed) framework with ID `id`.
    pub fn get(&self, id: &str) -> Option<&Framework> {
        self.frameworks.iter().find(|f| framework_id(f) == Some(id))
    }

    /// True if `id` is in the completed cache.
    pub fn is_completed(&self, id: &str) -> bool {
        self.completed.iter().any(|f| framework_id(f) == Some(id))
    }
}

/// The ID of a listed framework.
pub fn framework_id(framework: &Framework) -> Option<&str> {
    framework
        .framework_info
        .id
        .as_ref()
        .map(|id| id.value.as_str())
}

/// True when `framework` is named `name` and runs in `role` (its
/// `FrameworkInfo.role`, default `*`, or one of its `roles`): the frameworks
/// the `hard` strategy and `uninstall` tear down (`docs/deployment-strategies.md#hard`,
/// `#uninstall`).
#[allow(deprecated)] // FrameworkInfo.role is what non-MULTI_ROLE frameworks set
pub fn same_name_and_role(framework: &Framework, name: &str, role: &str) -> bool {
    let info = &framework.framework_info;
    info.name == name
        && (info.role.as_deref().unwrap_or("*") == role || info.roles.iter().any(|r| r == role))
}

/// A client of the master's operator API. Cheap to clone.
#[derive(Debug, Clone)]
pub struct OperatorClient {
    http: Http,
    detector: MasterDetector,
    config: ClientConfig,
    cancel: CancellationToken,
}

impl OperatorClient {
    /// An operator client sharing `detector` (e.g. the scheduler client's).
    /// Calls stop with [`OperatorError::Cancelled`] once `cancel` fires.
    ///
    /// # Panics
    /// If the TLS backend cannot initialise.
    pub fn new(config: &ClientConfig, detector: MasterDetector, cancel: CancellationToken) -> Self {
        Self {
            http: Http::new(config).expect("the HTTP client builds with static settings"),
            detector,
            config: config.clone(),
            cancel,
        }
    }

    /// An operator client with its own leader detection from `config.master`
    /// (for one-shot commands such as `uninstall`). Must run in a tokio runtime.
    pub fn start(config: &ClientConfig, cancel: CancellationToken) -> Self {
        let detector = MasterDetector::start(
            config.master.clone(),
            config.detector_options(),
            cancel.child_token(),
        );
        Self::new(config, detector, cancel)
    }

    /// The leader detection this client follows, to share with a
    /// [`crate::mesos::client::SchedulerClient::start_with_detector`].
    pub fn detector(&self) -> &MasterDetector {
        &self.detector
    }

    /// Lists active, inactive and completed frameworks.
    ///
    /// # Errors
    /// See [`OperatorError`].
    pub async fn get_frameworks(&self) -> Result<Frameworks, OperatorError> {
        let answer = self
            .get(call::Type::GetFrameworks, response::Type::GetFrameworks)
            .await?;
        let list = answer.get_frameworks.unwrap_or_default();
        Ok(Frameworks {
            frameworks: list.frameworks,
            completed: list.completed_frameworks,
        })
    }

    /// Lists the agents registered with the master (`GET_AGENTS`): not the
    /// unreachable or gone ones.
    ///
    /// # Errors
    /// See [`OperatorError`].
    pub async fn get_agents(&self) -> Result<Vec<Agent>, OperatorError> {
        let answer = self
            .get(call::Type::GetAgents, response::Type::GetAgents)
            .await?;
        Ok(answer.get_agents.unwrap_or_default().agents)
    }

    /// `DRAIN_AGENT` of `agent_id` (`include/mesos/v1/master/master.proto`
    /// `Call.DrainAgent`, `Master::Http::drainAgent` in
    /// `src/master/http.cpp`): no grace period override, not marked gone.
    /// The master answers 200 with no body.
    ///
    /// # Errors
    /// See [`OperatorError`]; an unknown agent is refused with 400.
    pub async fn drain_agent(&self, agent_id: &str) -> Result<(), OperatorError> {
        let call = Call {
            r#type: Some(call::Type::DrainAgent as i32),
            drain_agent: Some(call::DrainAgent {
                agent_id: v1::AgentId {
                    value: agent_id.to_string(),
                },
                max_grace_period: None,
                mark_gone: None,
            }),
            ..Default::default()
        };
        self.v1(call).await.map(|_| ())
    }

    /// `DEACTIVATE_AGENT` of `agent_id` (`Call.DeactivateAgent`,
    /// `Master::Http::deactivateAgent` in `src/master/http.cpp`): the
    /// master offers it to nobody until reactivated. 200 with no body.
    ///
    /// # Errors
    /// See [`OperatorError`].
    pub async fn deactivate_agent(&self, agent_id: &str) -> Result<(), OperatorError> {
        let call = Call {
            r#type: Some(call::Type::DeactivateAgent as i32),
            deactivate_agent: Some(call::DeactivateAgent {
                agent_id: v1::AgentId {
                    value: agent_id.to_string(),
                },
            }),
            ..Default::default()
        };
        self.v1(call).await.map(|_| ())
    }

    /// `REACTIVATE_AGENT` of `agent_id` (`Call.ReactivateAgent`,
    /// `Master::Http::reactivateAgent` and `_reactivateAgent` in
    /// `src/master/http.cpp`): the agent, deactivated or DRAINED, is
    /// offered again. 200 with no body; 400 "Agent is not deactivated" or
    /// "Agent is still in the DRAINING state".
    ///
    /// # Errors
    /// See [`OperatorError`].
    pub async fn reactivate_agent(&self, agent_id: &str) -> Result<(), OperatorError> {
        let call = Call {
            r#type: Some(call::Type::ReactivateAgent as i32),
            reactivate_agent: Some(call::ReactivateAgent {
                agent_id: v1::AgentId {
                    value: agent_id.to_string(),
                },
            }),
            ..Default::default()
        };
        self.v1(call).await.map(|_| ())
    }

    /// A read-only call of `kind` without fields, whose answer must be of
    /// type `expected`.
    async fn get(
        &self,
        kind: call::Type,
        expected: response::Type,
    ) -> Result<Response, OperatorError> {
        let call = Call {
            r#type: Some(kind as i32),
            ..Default::default()
        };
        let body = self.v1(call).await?;
        let answer = Response::decode(body).map_err(|e| OperatorError::Decode(e.to_string()))?;
        if answer.r#type() != expected {
            return Err(OperatorError::Decode(format!(
                "expected {}, got type {:?}",
                expected.as_str_name(),
                answer.r#type
            )));
        }
        Ok(answer)
    }

    /// Tears a framework down: the master kills its tasks and refuses its ID
    /// from then on. Uses the v1 `TEARDOWN`; a master that does not know that
    /// API (404, 405, 501) is asked `POST /master/teardown` instead.
    ///
    /// # Errors
    /// An unknown or already removed framework is
    /// `Refused { status: 400, body: "No framework found with specified ID" }`
    /// ([`OperatorError::is_no_such_framework`]); see [`OperatorError`].
    pub async fn teardown(&self, framework_id: &str) -> Result<(), OperatorError> {
        let call = Call {
            r#type: Some(call::Type::Teardown as i32),
            teardown: Some(call::Teardown {
                framework_id: v1::FrameworkId {
                    value: framework_id.to_string(),
                },
            }),
            ..Default::default()
        };
        match self.v1(call).await {
            Ok(_) => Ok(()),
            Err(OperatorError::Refused {
                status: 404 | 405 | 501,
                body,
            }) => {
                tracing::info!(%body, "v1 operator TEARDOWN unavailable; using /master/teardown");
                self.teardown_legacy(framework_id).await
            }
            Err(e) => Err(e),
        }
    }

    /// Tears a framework down through the legacy `POST /master/teardown`
    /// (form body `frameworkId=<id>`; 200 with an empty body on success).
    ///
    /// # Errors
    /// As [`teardown`](Self::teardown).
    pub async fn teardown_legacy(&self, framework_id: &str) -> Result<(), OperatorError> {
        let form = serde_urlencoded::to_string([("frameworkId", framework_id)]).unwrap_or_default();
        self.exchange(
            "/master/teardown",
            "application/x-www-form-urlencoded",
            None,
            Bytes::from(form),
        )
        .await
        .map(|_| ())
    }

    async fn v1(&self, call: Call) -> Result<Bytes, OperatorError> {
        self.exchange(
            "/api/v1",
            PROTOBUF,
            Some(PROTOBUF),
            Bytes::from(call.encode_to_vec()),
        )
        .await
    }

    /// POSTs until a 200 (its body) or a refusal, retrying what may pass.
    async fn exchange(
        &self,
        path: &str,
        content_type: &str,
        accept: Option<&str>,
        body: Bytes,
    ) -> Result<Bytes, OperatorError> {
        let deadline = Instant::now() + self.config.operator_retry_for;
        let mut backoff = Backoff::jittered(self.config.backoff_min, self.config.backoff_max);
        let mut leader = self.detector.leader();
        let request = Request {
            path,
            content_type,
            accept,
            stream_id: None,
            body,
            long_lived: false,
        };
        let mut attempts = 0;
        loop {
            attempts += 1;
            // The watch guard must not live across an await (the future
            // would not be Send): take the address out in this block.
            let master = {
                let found = tokio::select! {
                    _ = self.cancel.cancelled() => return Err(OperatorError::Cancelled),
                    found = tokio::time::timeout_at(deadline, leader.wait_for(Option::is_some)) => found,
                };
                match found {
                    Ok(Ok(current)) => current.clone().expect("waited for Some"),
                    _ => {
                        let last = match self.detector.problem() {
                            Some(why) => format!("no leading master: {why}"),
                            None => "no leading master".into(),
                        };
                        return Err(OperatorError::Unavailable { attempts, last });
                    }
                }
            };
            let answer = tokio::select! {
                _ = self.cancel.cancelled() => return Err(OperatorError::Cancelled),
                answer = self.http.post(&master, &request, |l| self.detector.hint(l.clone())) => answer,
            };
            let last = match answer {
                Ok(answer) if answer.response.status() == StatusCode::OK => {
                    return read_limited(answer.response, self.config.max_record_bytes)
                        .await
                        .map_err(|_| {
                            OperatorError::Decode(format!(
                                "answer over {} bytes",
                                self.config.max_record_bytes
                            ))
                        });
                }
                Ok(answer) => {
                    let status = answer.response.status();
                    let text = error_text(answer.response, self.http.max_error_body()).await;
                    if !(status.is_server_error() && status != StatusCode::NOT_IMPLEMENTED) {
                        return Err(OperatorError::Refused {
                            status: status.as_u16(),
                            body: text,
                        });
                    }
                    format!("{} answered {status}: {text}", answer.master)
                }
                Err(error @ SendError::Redirect(_)) | Err(error @ SendError::Transport(_)) => {
                    format!("{master}: {error}")
                }
                Err(error @ SendError::Connect(_)) | Err(error @ SendError::Timeout) => {
                    format!("{master}: {error}")
                }
            };
            self.detector.redetect();
            let delay = backoff.next_delay();
            if Instant::now() + delay >= deadline {
                return Err(OperatorError::Unavailable { attempts, last });
            }
            tracing::warn!(%last, retry_in = ?delay, "operator call failed; retrying");
            tokio::select! {
                _ = self.cancel.cancelled() => return Err(OperatorError::Cancelled),
                _ = tokio::time::sleep(delay) => {}
            }
        }
    }
}
