//! Event-stream decoding: HTTP body chunks → RecordIO records → protobuf
//! `scheduler::Event`s. Chunk boundaries are unrelated to record boundaries
//! (`docs/mesos-protocol.md#recordio`); the record size limit bounds memory whatever the peer
//! announces. The benchmark `benches/event_decoding.rs` measures this path.

use bytes::Bytes;
use futures::{Stream, StreamExt, TryStreamExt};
use prost::Message;
use tokio_util::codec::FramedRead;
use tokio_util::io::StreamReader;

use super::errors::StreamError;
use crate::mesos::recordio::RecordIoCodec;
use crate::mesos::v1::scheduler::Event;

/// Decodes a byte stream (e.g. `reqwest::Response::bytes_stream()`) into
/// events, refusing records over `max_record_bytes`. Transport errors end
/// the stream as [`StreamError::Framing`] with an I/O cause; a stream that
/// stops inside a record is a truncation error.
pub fn event_stream<S, E>(
    bytes: S,
    max_record_bytes: usize,
) -> impl Stream<Item = Result<Event, StreamError>> + Send
where
    S: Stream<Item = Result<Bytes, E>> + Send,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let reader = StreamReader::new(bytes.map_err(std::io::Error::other));
    FramedRead::new(reader, RecordIoCodec::new(max_record_bytes))
        .map(|record| Ok(Event::decode(record?)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesos::recordio::{RecordIoError, encode_record};
    use crate::mesos::v1::scheduler::event;

    fn heartbeat() -> Vec<u8> {
        Event {
            r#type: Some(event::Type::Heartbeat as i32),
            ..Default::default()
        }
        .encode_to_vec()
    }

    #[tokio::test]
    async fn decodes_records_split_anywhere() {
        let mut wire = Vec::new();
        for _ in 0..3 {
            wire.extend_from_slice(&encode_record(&heartbeat()));
        }
        // One byte per chunk: the worst split.
        let chunks: Vec<Result<Bytes, std::io::Error>> = wire
            .iter()
            .map(|b| Ok(Bytes::copy_from_slice(&[*b])))
            .collect();
        let events: Vec<_> = event_stream(futures::stream::iter(chunks), 1024)
            .collect()
            .await;
        assert_eq!(events.len(), 3);
        for e in events {
            assert_eq!(e.unwrap().r#type(), event::Type::Heartbeat);
        }
    }

    #[tokio::test]
    async fn oversized_truncated_and_garbage_records_are_errors() {
        let big = futures::stream::iter([Ok::<_, std::io::Error>(Bytes::from_static(b"2000\n"))]);
        let got: Vec<_> = event_stream(big, 1000).collect().await;
        assert!(matches!(
            got[0],
            Err(StreamError::Framing(RecordIoError::RecordTooLarge { .. }))
        ));

        let cut = futures::stream::iter([Ok::<_, std::io::Error>(Bytes::from_static(b"5\nab"))]);
        let got: Vec<_> = event_stream(cut, 1000).collect().await;
        assert!(matches!(
            got[0],
            Err(StreamError::Framing(RecordIoError::Truncated { .. }))
        ));

        let garbage =
            futures::stream::iter([Ok::<_, std::io::Error>(encode_record(b"\xff\xff\xff"))]);
        let got: Vec<_> = event_stream(garbage, 1000).collect().await;
        assert!(matches!(got[0], Err(StreamError::Decode(_))));
    }
}
