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

use std::marker::PhantomData;

use prost::Message;
use tonic::codec::{BufferSettings, Codec};
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
    type Decoder = ProstDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstEncoder::new(buffers())
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProstDecoder::new(buffers())
    }
}
