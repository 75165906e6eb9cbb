//! [`Refusals`]: a connection on which hyper's own answers to a request
//! head it cannot take carry a problem document (RFC 9457), as every
//! answer of the application does.
//!
//! hyper refuses some requests before the application sees them, and
//! answers them itself with a bare status and an empty body
//! (`src/proto/h1/role.rs`, `Server::on_error`, in hyper 1.x): 414 for a
//! URI past its fixed limit (65,534 bytes; the application refuses from
//! [`MAX_URI_BYTES`](crate::web::query::MAX_URI_BYTES) on, with a problem
//! document), 431 for a head past its read buffer, 400 for a request line
//! or header that does not parse. It offers no hook for that answer, so
//! this wrapper recognises it on its way out — a write that is a whole
//! response head of one of those statuses with `content-length: 0` and no
//! `content-type`, which no handler writes (their errors all carry a
//! problem document or an HTML page) — and writes the same head with a
//! problem document instead. hyper closes the connection after it.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::http::StatusCode;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::web::error::Problem;
use crate::web::query::MAX_URI_BYTES;

/// Longest head of a hyper-made refusal looked at, in bytes (hyper's are
/// about 100: a status line, `connection: close`, `content-length: 0`, a
/// `date`).
const REFUSAL_HEAD_MAX: usize = 512;

/// A connection whose hyper-made refusals carry a problem document.
pub(super) struct Refusals<S> {
    inner: S,
    /// A replacement being written: its bytes, how many went out, and how
    /// many bytes of hyper's it stands for (reported written at the end).
    replacing: Option<(Vec<u8>, usize, usize)>,
}

impl<S> Refusals<S> {
    /// `inner`, its refusals rewritten.
    pub(super) fn new(inner: S) -> Refusals<S> {
        Refusals {
            inner,
            replacing: None,
        }
    }
}

/// The problem of a status hyper answers by itself.
fn problem(status: StatusCode) -> Option<Problem> {
    let (kind, title, detail) = match status {
        StatusCode::URI_TOO_LONG => (
            "uri-too-long",
            "URI too long",
            format!(
                "the URI is longer than the HTTP server reads (65534 bytes); at most \
                 {MAX_URI_BYTES} are served (shorten the query)"
            ),
        ),
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => (
            "headers-too-large",
            "Request header fields too large",
            "the request's head is larger than the HTTP server reads".to_string(),
        ),
        StatusCode::BAD_REQUEST => (
            "bad-request",
            "Bad request",
            "the request line or a header does not parse as HTTP/1.1".to_string(),
        ),
        _ => return None,
    };
    Some(Problem {
        kind: format!("urn:mesos-appliance:problem:{kind}"),
        title: title.to_string(),
        status: status.as_u16(),
        detail,
        leader_url: None,
        errors: Vec::new(),
    })
}

/// The answer to write instead of `written`, when `written` is one of
/// hyper's bare refusals (see the module doc).
fn replacement(written: &[u8]) -> Option<Vec<u8>> {
    // Every write of the connection passes here: a body, or a head that is
    // not a 4xx, or one too long to be hyper's bare refusal (a status line,
    // `content-length: 0`, `date`), is let through before any parsing.
    if written.len() > REFUSAL_HEAD_MAX || !written.starts_with(b"HTTP/1.1 4") {
        return None;
    }
    let head = std::str::from_utf8(written).ok()?;
    let head = head.strip_suffix("\r\n\r\n")?;
    let code = head.strip_prefix("HTTP/1.1 ")?.get(..3)?;
    let status = StatusCode::from_bytes(code.as_bytes()).ok()?;
    let problem = problem(status)?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next()?;
    let fields: Vec<&str> = lines.collect();
    let named = |name: &str, line: &str| {
        line.split_once(':')
            .is_some_and(|(n, _)| n.trim().eq_ignore_ascii_case(name))
    };
    let empty = fields.iter().any(|l| {
        named("content-length", l) && l.split_once(':').is_some_and(|(_, v)| v.trim() == "0")
    });
    if !empty || fields.iter().any(|l| named("content-type", l)) {
        return None;
    }
    let body = serde_json::to_vec(&problem).ok()?;
    let mut out = Vec::with_capacity(written.len() + body.len() + 64);
    out.extend_from_slice(status_line.as_bytes());
    out.extend_from_slice(b"\r\n");
    for line in fields.iter().filter(|l| !named("content-length", l)) {
        out.extend_from_slice(line.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"content-type: application/problem+json\r\n");
    out.extend_from_slice(format!("content-length: {}\r\n\r\n", body.len()).as_bytes());
    out.extend_from_slice(&body);
    Some(out)
}

impl<S: AsyncWrite + Unpin> Refusals<S> {
    /// Writes the replacement under way; `Ready(Ok(n))` with the bytes of
    /// hyper's it stands for once all of it is out.
    fn poll_replacing(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        while let Some((bytes, sent, claimed)) = &mut self.replacing {
            if *sent == bytes.len() {
                let claimed = *claimed;
                self.replacing = None;
                return Poll::Ready(Ok(claimed));
            }
            match Pin::new(&mut self.inner).poll_write(cx, &bytes[*sent..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => *sent += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(0))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Refusals<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Refusals<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        // After `Pending` hyper writes the same bytes again.
        if this.replacing.is_none() {
            match replacement(buf) {
                Some(bytes) => this.replacing = Some((bytes, 0, buf.len())),
                None => return Pin::new(&mut this.inner).poll_write(cx, buf),
            }
        }
        this.poll_replacing(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let mut full = bufs.iter().filter(|b| !b.is_empty());
        let only = match (full.next(), full.next()) {
            (Some(one), None) => Some(one),
            _ => None,
        };
        if this.replacing.is_none() {
            match only.and_then(|one| replacement(one)) {
                Some(bytes) => {
                    let claimed = only.map_or(0, |one| one.len());
                    this.replacing = Some((bytes, 0, claimed));
                }
                None => return Pin::new(&mut this.inner).poll_write_vectored(cx, bufs),
            }
        }
        this.poll_replacing(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const BARE: &[u8] =
        b"HTTP/1.1 414 URI Too Long\r\nconnection: close\r\ncontent-length: 0\r\n\r\n";

    #[test]
    fn a_bare_refusal_gets_a_problem_document_and_nothing_else_changes() {
        let out = String::from_utf8(replacement(BARE).expect("replaced")).unwrap();
        let (head, body) = out.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 414 URI Too Long\r\nconnection: close\r\n"));
        assert!(head.contains("content-type: application/problem+json"));
        assert!(head.ends_with(&format!("content-length: {}", body.len())));
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["type"], "urn:mesos-appliance:problem:uri-too-long");
        // The application's answers pass as they are: with a body, a
        // type, another status, or not a whole head.
        for kept in [
            &b"HTTP/1.1 414 URI Too Long\r\ncontent-type: application/problem+json\r\ncontent-length: 0\r\n\r\n"[..],
            b"HTTP/1.1 414 URI Too Long\r\ncontent-length: 12\r\n\r\n",
            b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
            b"HTTP/1.1 204 No Content\r\n\r\n",
            b"HTTP/1.1 414 URI Too Long\r\ncontent-length: 0\r\n",
            b"{\"tasks\": []}",
        ] {
            assert_eq!(replacement(kept), None, "{}", String::from_utf8_lossy(kept));
        }
    }

    #[tokio::test]
    async fn the_replacement_goes_out_whole_through_a_narrow_pipe() {
        let (near, mut far) = tokio::io::duplex(7);
        let writer = tokio::spawn(async move {
            let mut conn = Refusals::new(near);
            conn.write_all(BARE).await.unwrap();
            conn.shutdown().await.unwrap();
        });
        let mut got = Vec::new();
        far.read_to_end(&mut got).await.unwrap();
        writer.await.unwrap();
        assert_eq!(got, replacement(BARE).unwrap());
    }
}
