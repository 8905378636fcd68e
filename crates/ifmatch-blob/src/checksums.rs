//! The checksums of an upload, computed while it streams to the object store: `Content-MD5`
//! (always: every blob keeps and serves its MD5, as Azure's do) and `x-ms-content-crc64` (when
//! the client sends one), so that a checksum the client sent is verified before anything is
//! committed (400 `Md5Mismatch`, `Crc64Mismatch`).

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use http_body::{Body, SizeHint};
use ifmatch_core::FramePoll;
use md5::{Digest, Md5};
use pin_project_lite::pin_project;

/// Azure's CRC64: CRC-64/NVME, sent as the base64 of its 8 bytes, least significant first.
static CRC64: crc::Crc<u64> = crc::Crc::<u64>::new(&crc::CRC_64_NVME);

/// The checksums of a body, base64, as the headers carry them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Checksums {
    pub(crate) md5: String,
    /// Only when asked for.
    pub(crate) crc64: Option<String>,
}

impl Checksums {
    /// The checksums of `bytes` (CRC64 included when `crc64`).
    pub(crate) fn of(bytes: &[u8], crc64: bool) -> Self {
        Self {
            md5: STANDARD.encode(Md5::digest(bytes)),
            crc64: crc64.then(|| STANDARD.encode(CRC64.checksum(bytes).to_le_bytes())),
        }
    }
}

pin_project! {
    /// Passes a body through unchanged; at its end, leaves its checksums in the cell
    /// [`ChecksumBody::new`] handed out.
    pub(crate) struct ChecksumBody<B> {
        #[pin]
        body: B,
        md5: Option<Md5>,
        crc64: Option<crc::Digest<'static, u64>>,
        done: Arc<Mutex<Option<Checksums>>>,
    }
}

impl<B> ChecksumBody<B> {
    /// `body`, and the cell that holds its checksums once it has ended (CRC64 when `crc64`).
    pub(crate) fn new(body: B, crc64: bool) -> (Self, Arc<Mutex<Option<Checksums>>>) {
        let done = Arc::new(Mutex::new(None));
        let body = Self {
            body,
            md5: Some(Md5::new()),
            crc64: crc64.then(|| CRC64.digest()),
            done: done.clone(),
        };
        (body, done)
    }
}

impl<B: Body<Data = Bytes>> Body for ChecksumBody<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> FramePoll<Self::Error> {
        let this = self.project();
        let polled = this.body.poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(md5), Some(data)) = (this.md5.as_mut(), frame.data_ref()) {
                    md5.update(data);
                    if let Some(crc64) = this.crc64.as_mut() {
                        crc64.update(data);
                    }
                }
            }
            Poll::Ready(None) => {
                if let Some(md5) = this.md5.take() {
                    let checksums = Checksums {
                        md5: STANDARD.encode(md5.finalize()),
                        crc64: this
                            .crc64
                            .take()
                            .map(|c| STANDARD.encode(c.finalize().to_le_bytes())),
                    };
                    *this.done.lock().unwrap_or_else(PoisonError::into_inner) = Some(checksums);
                }
            }
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        // Polled to its end, so that the checksums are taken even of an empty body.
        self.md5.is_none() && self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_check_values() {
        // CRC-64/NVME's check value over "123456789" (the CRC catalogue's, and what Azure's
        // SDKs compute), and RFC 1321's MD5 of "abc".
        let sums = Checksums::of(b"123456789", true);
        let crc = u64::from_le_bytes(
            STANDARD
                .decode(sums.crc64.unwrap())
                .unwrap()
                .try_into()
                .unwrap(),
        );
        assert_eq!(crc, 0xae8b_1486_0a79_9888);
        assert_eq!(
            Checksums::of(b"abc", false).md5,
            STANDARD.encode([
                0x90, 0x01, 0x50, 0x98, 0x3c, 0xd2, 0x4f, 0xb0, 0xd6, 0x96, 0x3f, 0x7d, 0x28, 0xe1,
                0x7f, 0x72
            ])
        );
    }
}
