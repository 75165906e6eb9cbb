//! A server-sent-events parser for `ctl events`, as the HTML standard's
//! "Interpreting an event stream" says (html.spec.whatwg.org,
//! server-sent events §9.2.6): lines end with CRLF, LF or CR; a line
//! starting with `:` is a comment (keep-alives); `field: value` with one
//! leading space stripped from the value; `data` lines are joined with
//! `\n`; `id` sets the last event ID (kept across events, ignored when it
//! holds NUL); a blank line dispatches the event, none when it has no
//! data; the type defaults to `message`. Bounded: a line longer than
//! [`MAX_LINE`] or an event's data longer than [`MAX_DATA`] is an error,
//! so a broken server cannot fill the memory.

/// Longest line, bytes.
pub const MAX_LINE: usize = 1024 * 1024;
/// Longest data of one event, bytes.
pub const MAX_DATA: usize = 4 * 1024 * 1024;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The last event ID when it was dispatched (`None` before any `id`).
    pub id: Option<String>,
    /// The event type (`message` when not given).
    pub event: String,
    /// The data lines joined with `\n`.
    pub data: String,
}

/// The parser's state between chunks.
#[derive(Debug, Default)]
pub struct SseParser {
    buf: Vec<u8>,
    event: Option<String>,
    data: String,
    has_data: bool,
    last_id: Option<String>,
}

impl SseParser {
    /// A parser that starts with `last_id` as its last event ID (after a
    /// reconnection).
    pub fn resuming(last_id: Option<String>) -> SseParser {
        SseParser {
            last_id,
            ..SseParser::default()
        }
    }

    /// The last event ID seen (for `Last-Event-ID` on reconnection).
    pub fn last_id(&self) -> Option<&str> {
        self.last_id.as_deref()
    }

    /// Feeds `bytes`; returns the events completed by them.
    ///
    /// # Errors
    /// A line or an event's data past its bound.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, String> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        let mut start = 0;
        loop {
            let rest = &self.buf[start..];
            let Some(end) = rest.iter().position(|&b| b == b'\n' || b == b'\r') else {
                break;
            };
            let skip = if rest[end] == b'\r' {
                match rest.get(end + 1) {
                    Some(b'\n') => 2,
                    Some(_) => 1,
                    // A CR at the end of the chunk: an LF may follow.
                    None => break,
                }
            } else {
                1
            };
            let line = String::from_utf8_lossy(&rest[..end]).into_owned();
            start += end + skip;
            if let Some(event) = self.line(&line)? {
                out.push(event);
            }
        }
        self.buf.drain(..start);
        if self.buf.len() > MAX_LINE {
            return Err(format!(
                "a line of the event stream exceeds {MAX_LINE} bytes"
            ));
        }
        Ok(out)
    }

    fn line(&mut self, line: &str) -> Result<Option<SseEvent>, String> {
        if line.is_empty() {
            let event = self.event.take();
            if !self.has_data {
                return Ok(None);
            }
            self.has_data = false;
            return Ok(Some(SseEvent {
                id: self.last_id.clone(),
                event: event.unwrap_or_else(|| "message".into()),
                data: std::mem::take(&mut self.data),
            }));
        }
        if line.starts_with(':') {
            return Ok(None);
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = Some(value.to_string()),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
                if self.data.len() > MAX_DATA {
                    return Err(format!("an event's data exceeds {MAX_DATA} bytes"));
                }
            }
            "id" if !value.contains('\0') => self.last_id = Some(value.to_string()),
            _ => {}
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(p: &mut SseParser, chunks: &[&str]) -> Vec<SseEvent> {
        chunks
            .iter()
            .flat_map(|c| p.feed(c.as_bytes()).unwrap())
            .collect()
    }

    #[test]
    fn events_split_anywhere_come_out_whole() {
        let text = ": keep-alive\n\nid: 7\nevent: task\ndata: {\"a\":1}\ndata: two\n\r\ndata:x\r\rdata: y\r\n\r\n";
        let whole = all(&mut SseParser::default(), &[text]);
        assert_eq!(
            whole,
            [
                SseEvent {
                    id: Some("7".into()),
                    event: "task".into(),
                    data: "{\"a\":1}\ntwo".into()
                },
                SseEvent {
                    id: Some("7".into()),
                    event: "message".into(),
                    data: "x".into()
                },
                SseEvent {
                    id: Some("7".into()),
                    event: "message".into(),
                    data: "y".into()
                },
            ]
        );
        for cut in 0..text.len() {
            let (a, b) = text.split_at(cut);
            assert_eq!(
                all(&mut SseParser::default(), &[a, b]),
                whole,
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn no_data_no_event_and_ids_resume() {
        let mut p = SseParser::resuming(Some("41".into()));
        assert!(all(&mut p, &["event: ping\n\n", "id\n\n"]).is_empty());
        assert_eq!(p.last_id(), Some(""));
        let mut p = SseParser::resuming(Some("41".into()));
        let e = all(&mut p, &["data: a\n\n"]);
        assert_eq!(e[0].id.as_deref(), Some("41"));
    }

    #[test]
    fn lines_and_data_are_bounded() {
        let mut p = SseParser::default();
        assert!(p.feed(&vec![b'a'; MAX_LINE + 1]).is_err());
        let mut p = SseParser::default();
        let line = format!("data: {}\n", "a".repeat(MAX_LINE - 10));
        let mut result = Ok(Vec::new());
        for _ in 0..5 {
            result = p.feed(line.as_bytes());
            if result.is_err() {
                break;
            }
        }
        assert!(result.is_err());
    }
}
