//! The protobuf codec of every generated client and server: prost's, with
//! smaller buffers.
//!
//! tonic gives every call (here: every agent session, on both ends) an encode
//! and a decode buffer of 8 KiB up front. A session's messages are mostly a
//! few dozen bytes (heartbeats, acknowledgements, job orders), so at ten
//! thousand sessions those buffers alone were about 320 MB of allocations
//! between the two ends. [`LeanCodec`] starts them at [`BUFFER_BYTES`]; a larger message
//! (a result with its samples, up to the services' message limits) grows the
//! buffer as it arrives, as with the default, so nothing is refused for size.
//!
//! A message that does not decode (a string that is not UTF-8, a truncated
//! field) is its sender's mistake and is answered `INVALID_ARGUMENT` naming
//! the field ([`LeanDecoder`]), not prost's `INTERNAL`, which reads as the
//! receiver's own fault.

use std::marker::PhantomData;

use prost::Message;
use tonic::Status;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder};
use tonic_prost::{ProstDecoder, ProstEncoder};

/// Bytes each call's encode and decode buffers start with.
pub const BUFFER_BYTES: usize = 512;
/// Encoded messages gathered before they are handed to HTTP/2 at once (tonic's default).
const YIELD_THRESHOLD: usize = 32 * 1024;

/// prost's codec with [`BUFFER_BYTES`] buffers (see the module doc).
#[derive(Debug, Clone)]
pub struct LeanCodec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for LeanCodec<T, U> {
    fn default() -> Self {
        LeanCodec(PhantomData)
    }
}

fn buffers() -> BufferSettings {
    BufferSettings::new(BUFFER_BYTES, YIELD_THRESHOLD)
}

impl<T, U> Codec for LeanCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = LeanDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstEncoder::new(buffers())
    }

    fn decoder(&mut self) -> Self::Decoder {
        LeanDecoder(ProstDecoder::new(buffers()))
    }
}

/// prost's decoder, answering a message that does not decode with
/// `INVALID_ARGUMENT` and prost's reason (which names the field).
#[derive(Debug)]
pub struct LeanDecoder<U>(ProstDecoder<U>);

impl<U: Message + Default> Decoder for LeanDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        self.0
            .decode(src)
            .map_err(|e| Status::invalid_argument(format!("a message that does not decode: {}", e.message())))
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.0.buffer_settings()
    }
}
