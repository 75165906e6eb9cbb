//! RecordIO framing of Mesos event streams (`docs/recordio.md`).
//!
//! A record is its length in decimal ASCII, a `\n`, then exactly that many
//! bytes. Records are independent of HTTP chunk boundaries: one chunk may hold
//! many records and one record may span many chunks. The decoder never
//! allocates the announced size up front and refuses records larger than a
//! configured maximum, so a hostile or broken peer cannot exhaust memory.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

/// Default maximum record size: 16 MiB. A Mesos OFFERS event with hundreds of
/// offers is well under 1 MiB.
pub const DEFAULT_MAX_RECORD_BYTES: usize = 16 * 1024 * 1024;

/// The longest length header accepted: `u64::MAX` has 20 digits.
const MAX_HEADER_DIGITS: usize = 20;

/// Why a RecordIO stream could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum RecordIoError {
    /// The length header was empty (`"\n"`).
    #[error("RecordIO: empty record length")]
    EmptyLength,
    /// The length header held something other than decimal digits.
    #[error("RecordIO: record length is not a decimal number: {0:?}")]
    NonNumericLength(String),
    /// The length header had no `\n` within 20 bytes.
    #[error("RecordIO: record length header longer than {MAX_HEADER_DIGITS} bytes")]
    LengthHeaderTooLong,
    /// The announced record is larger than the configured maximum.
    #[error("RecordIO: record of {announced} bytes exceeds the limit of {limit} bytes")]
    RecordTooLarge {
        /// Announced length in bytes.
        announced: u64,
        /// Configured maximum in bytes.
        limit: usize,
    },
    /// The stream ended in the middle of a record.
    #[error("RecordIO: stream ended inside a record ({buffered} bytes buffered)")]
    Truncated {
        /// Bytes received of the unfinished record (header included).
        buffered: usize,
    },
    /// The underlying transport failed.
    #[error("RecordIO: transport error: {0}")]
    Io(#[from] std::io::Error),
}

/// A tokio-util codec for RecordIO: decodes to record payloads ([`Bytes`]) and
/// encodes payloads into records.
#[derive(Debug, Clone)]
pub struct RecordIoCodec {
    max_record_bytes: usize,
    /// Length of the record whose header was read but whose body is incomplete.
    pending: Option<usize>,
}

impl Default for RecordIoCodec {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_RECORD_BYTES)
    }
}

impl RecordIoCodec {
    /// A codec refusing records larger than `max_record_bytes` bytes.
    pub fn new(max_record_bytes: usize) -> Self {
        Self {
            max_record_bytes,
            pending: None,
        }
    }

    /// The configured maximum record size in bytes.
    pub fn max_record_bytes(&self) -> usize {
        self.max_record_bytes
    }

    fn read_header(&mut self, src: &mut BytesMut) -> Result<Option<usize>, RecordIoError> {
        let Some(newline) = src
            .iter()
            .take(MAX_HEADER_DIGITS + 1)
            .position(|b| *b == b'\n')
        else {
            if src.len() > MAX_HEADER_DIGITS {
                return Err(RecordIoError::LengthHeaderTooLong);
            }
            if let Some(bad) = src.iter().find(|b| !b.is_ascii_digit()) {
                return Err(RecordIoError::NonNumericLength(
                    String::from_utf8_lossy(&[*bad]).into_owned(),
                ));
            }
            return Ok(None);
        };
        let header = &src[..newline];
        if header.is_empty() {
            return Err(RecordIoError::EmptyLength);
        }
        if !header.iter().all(u8::is_ascii_digit) {
            return Err(RecordIoError::NonNumericLength(
                String::from_utf8_lossy(header).into_owned(),
            ));
        }
        // All digits and at most 20 of them: only u64 overflow can fail here.
        let announced: u64 = std::str::from_utf8(header)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or(RecordIoError::RecordTooLarge {
                announced: u64::MAX,
                limit: self.max_record_bytes,
            })?;
        if announced > self.max_record_bytes as u64 {
            return Err(RecordIoError::RecordTooLarge {
                announced,
                limit: self.max_record_bytes,
            });
        }
        src.advance(newline + 1);
        Ok(Some(announced as usize))
    }
}

impl Decoder for RecordIoCodec {
    type Item = Bytes;
    type Error = RecordIoError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Bytes>, RecordIoError> {
        let len = match self.pending {
            Some(len) => len,
            None => match self.read_header(src)? {
                Some(len) => len,
                None => return Ok(None),
            },
        };
        if src.len() < len {
            self.pending = Some(len);
            return Ok(None);
        }
        self.pending = None;
        Ok(Some(src.split_to(len).freeze()))
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<Bytes>, RecordIoError> {
        match self.decode(src)? {
            Some(record) => Ok(Some(record)),
            None if src.is_empty() && self.pending.is_none() => Ok(None),
            None => Err(RecordIoError::Truncated {
                buffered: src.len(),
            }),
        }
    }
}

impl<T: AsRef<[u8]>> Encoder<T> for RecordIoCodec {
    type Error = RecordIoError;

    fn encode(&mut self, payload: T, dst: &mut BytesMut) -> Result<(), RecordIoError> {
        let payload = payload.as_ref();
        if payload.len() > self.max_record_bytes {
            return Err(RecordIoError::RecordTooLarge {
                announced: payload.len() as u64,
                limit: self.max_record_bytes,
            });
        }
        dst.reserve(payload.len() + MAX_HEADER_DIGITS + 1);
        dst.put_slice(payload.len().to_string().as_bytes());
        dst.put_u8(b'\n');
        dst.put_slice(payload);
        Ok(())
    }
}

/// Frames one payload as a RecordIO record (`"<len>\n<payload>"`).
pub fn encode_record(payload: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(payload.len() + MAX_HEADER_DIGITS + 1);
    out.put_slice(payload.len().to_string().as_bytes());
    out.put_u8(b'\n');
    out.put_slice(payload);
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decode_all(
        codec: &mut RecordIoCodec,
        chunks: &[&[u8]],
    ) -> Result<Vec<Bytes>, RecordIoError> {
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for chunk in chunks {
            buf.extend_from_slice(chunk);
            while let Some(record) = codec.decode(&mut buf)? {
                out.push(record);
            }
        }
        while let Some(record) = codec.decode_eof(&mut buf)? {
            out.push(record);
        }
        Ok(out)
    }

    #[test]
    fn decodes_the_mesos_heartbeat_example() {
        let mut codec = RecordIoCodec::default();
        let got = decode_all(&mut codec, &[b"20\n{\"type\":\"HEARTBEAT\"}"]).unwrap();
        assert_eq!(got, vec![Bytes::from_static(b"{\"type\":\"HEARTBEAT\"}")]);
    }

    #[test]
    fn many_records_in_one_chunk_and_one_record_over_many_chunks() {
        let mut codec = RecordIoCodec::default();
        let got = decode_all(&mut codec, &[b"2\nab3\nxyz1", b"\nq", b"4\n", b"12", b"34"]).unwrap();
        assert_eq!(got, vec!["ab", "xyz", "q", "1234"]);
    }

    #[test]
    fn zero_length_record_is_an_empty_payload() {
        let mut codec = RecordIoCodec::default();
        assert_eq!(
            decode_all(&mut codec, &[b"0\n2\nok"]).unwrap(),
            vec!["", "ok"]
        );
    }

    #[test]
    fn oversized_record_is_refused_before_its_body_arrives() {
        let mut codec = RecordIoCodec::new(10);
        let err = decode_all(&mut codec, &[b"11\n"]).unwrap_err();
        assert!(matches!(
            err,
            RecordIoError::RecordTooLarge {
                announced: 11,
                limit: 10
            }
        ));
        let mut codec = RecordIoCodec::new(10);
        let err = decode_all(&mut codec, &[b"99999999999999999999\n"]).unwrap_err();
        assert!(matches!(err, RecordIoError::RecordTooLarge { .. }));
    }

    #[test]
    fn bad_headers_are_errors() {
        let mut codec = RecordIoCodec::default();
        assert!(matches!(
            decode_all(&mut codec, &[b"\nabc"]),
            Err(RecordIoError::EmptyLength)
        ));
        let mut codec = RecordIoCodec::default();
        assert!(matches!(
            decode_all(&mut codec, &[b"1x\nabc"]),
            Err(RecordIoError::NonNumericLength(_))
        ));
        let mut codec = RecordIoCodec::default();
        assert!(matches!(
            decode_all(&mut codec, &[b"-1\n"]),
            Err(RecordIoError::NonNumericLength(_))
        ));
        // A non-digit is reported before the newline arrives.
        let mut codec = RecordIoCodec::default();
        assert!(matches!(
            decode_all(&mut codec, &[b"{\"type\""]),
            Err(RecordIoError::NonNumericLength(_))
        ));
        let mut codec = RecordIoCodec::default();
        assert!(matches!(
            decode_all(&mut codec, &[b"123456789012345678901"]),
            Err(RecordIoError::LengthHeaderTooLong)
        ));
    }

    #[test]
    fn truncated_stream_is_an_error() {
        let mut codec = RecordIoCodec::default();
        assert!(matches!(
            decode_all(&mut codec, &[b"5\nab"]),
            Err(RecordIoError::Truncated { buffered: 2 })
        ));
        let mut codec = RecordIoCodec::default();
        assert!(matches!(
            decode_all(&mut codec, &[b"12"]),
            Err(RecordIoError::Truncated { .. })
        ));
    }

    #[test]
    fn encoder_round_trips() {
        let mut codec = RecordIoCodec::default();
        let mut buf = BytesMut::new();
        codec.encode(b"hello", &mut buf).unwrap();
        codec.encode(b"", &mut buf).unwrap();
        assert_eq!(&buf[..], b"5\nhello0\n");
        assert_eq!(encode_record(b"hi"), Bytes::from_static(b"2\nhi"));
        let mut small = RecordIoCodec::new(3);
        assert!(small.encode(b"four", &mut buf).is_err());
    }

    proptest! {
        /// Any split of any sequence of records decodes to the same records.
        #[test]
        fn any_split_points_decode_identically(
            records in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..12),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..20),
        ) {
            let mut wire = Vec::new();
            for r in &records {
                wire.extend_from_slice(&encode_record(r));
            }
            let mut points: Vec<usize> = cuts.iter().map(|i| i.index(wire.len() + 1)).collect();
            points.sort_unstable();
            let mut chunks: Vec<&[u8]> = Vec::new();
            let mut start = 0;
            for p in points {
                chunks.push(&wire[start..p]);
                start = p;
            }
            chunks.push(&wire[start..]);
            let mut codec = RecordIoCodec::new(1024);
            let got = decode_all(&mut codec, &chunks).unwrap();
            let want: Vec<Bytes> = records.into_iter().map(Bytes::from).collect();
            prop_assert_eq!(got, want);
        }
    }
}
