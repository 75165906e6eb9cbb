//! A small server-sent-events reader for tests: frames a byte stream (a
//! `reqwest` response or an axum body) into events, as the WHATWG HTML
//! spec's "event stream interpretation" does (fields `id`, `event`, `data`,
//! `retry`; lines starting with `:` are comments; a blank line ends an
//! event).

use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};

/// One event as read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SseEvent {
    /// `id:`, when given.
    pub id: Option<String>,
    /// `event:` (`message` when absent).
    pub event: String,
    /// `data:` lines joined with `\n`.
    pub data: String,
    /// Comment lines (keep-alives), without the colon.
    pub comments: Vec<String>,
}

impl SseEvent {
    /// The data as JSON (`Null` when it is not JSON).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.data).unwrap_or_default()
    }

    /// True for a block with no `event:` and no `data:` (a comment or a
    /// `retry:` alone).
    pub fn is_comment(&self) -> bool {
        self.event == "message" && self.data.is_empty()
    }
}

/// What [`SseReader::next`] got.
#[derive(Debug)]
pub enum Read {
    /// An event (comments are skipped).
    Event(SseEvent),
    /// The stream ended.
    End,
    /// Nothing within the wait.
    Timeout,
}

type Bytestream = Pin<Box<dyn Stream<Item = Result<Bytes, String>> + Send>>;

/// Reads events off a byte stream.
pub struct SseReader {
    stream: Bytestream,
    buffer: Vec<u8>,
    ended: bool,
}

impl SseReader {
    /// Over a `reqwest` response's body.
    pub fn from_response(response: reqwest::Response) -> SseReader {
        SseReader::new(
            response
                .bytes_stream()
                .map(|c| c.map_err(|e| e.to_string())),
        )
    }

    /// Over an axum body.
    pub fn from_body(body: axum::body::Body) -> SseReader {
        SseReader::new(
            body.into_data_stream()
                .map(|c| c.map_err(|e| e.to_string())),
        )
    }

    fn new(stream: impl Stream<Item = Result<Bytes, String>> + Send + 'static) -> SseReader {
        SseReader {
            stream: Box::pin(stream),
            buffer: Vec::new(),
            ended: false,
        }
    }

    /// The next block (comments included), `None` at the end.
    async fn block(&mut self) -> Option<SseEvent> {
        loop {
            // The server ends lines with `\n` alone (axum does).
            if let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
                let block = String::from_utf8_lossy(&self.buffer[..end]).into_owned();
                self.buffer.drain(..end + 2);
                return Some(parse(&block));
            }
            if self.ended {
                return None;
            }
            match self.stream.next().await {
                Some(Ok(chunk)) => self.buffer.extend_from_slice(&chunk),
                Some(Err(_)) | None => self.ended = true,
            }
        }
    }

    /// The next event within `wait`, skipping comments.
    pub async fn next(&mut self, wait: Duration) -> Read {
        let read = async {
            loop {
                match self.block().await {
                    Some(e) if e.is_comment() => continue,
                    Some(e) => return Read::Event(e),
                    None => return Read::End,
                }
            }
        };
        tokio::time::timeout(wait, read)
            .await
            .unwrap_or(Read::Timeout)
    }

    /// The next event within `wait`; panics at the end or after `wait`.
    pub async fn expect(&mut self, wait: Duration, what: &str) -> SseEvent {
        match self.next(wait).await {
            Read::Event(e) => e,
            other => panic!("{what}: {other:?} instead of an event"),
        }
    }

    /// The first event within `wait` for which `pred` holds; the events
    /// skipped are returned too. Panics after `wait` or at the end.
    pub async fn until(
        &mut self,
        wait: Duration,
        what: &str,
        mut pred: impl FnMut(&SseEvent) -> bool,
    ) -> (SseEvent, Vec<SseEvent>) {
        let deadline = tokio::time::Instant::now() + wait;
        let mut skipped = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.next(left).await {
                Read::Event(e) if pred(&e) => return (e, skipped),
                Read::Event(e) => skipped.push(e),
                other => panic!("{what}: {other:?}; skipped {skipped:#?}"),
            }
        }
    }
}

fn parse(block: &str) -> SseEvent {
    let mut event = SseEvent {
        event: "message".into(),
        ..SseEvent::default()
    };
    let mut data: Vec<&str> = Vec::new();
    for line in block.split('\n') {
        if let Some(comment) = line.strip_prefix(':') {
            event.comments.push(comment.trim_start().to_string());
            continue;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "id" => event.id = Some(value.to_string()),
            "event" => event.event = value.to_string(),
            "data" => data.push(value),
            _ => {}
        }
    }
    event.data = data.join("\n");
    event
}
