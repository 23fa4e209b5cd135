//! Arbitrary bytes, in chunks whose lengths the first byte picks, into the
//! frame decoder: it must never panic and never hold more than it was fed.
#![no_main]

use cosched_proto::wire::{FrameDecoder, MAX_FRAME_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&chunk_seed, bytes)) = data.split_first() else {
        return;
    };
    let chunk_len = usize::from(chunk_seed).max(1);
    let mut decoder = FrameDecoder::new();
    let mut fed = 0;
    for chunk in bytes.chunks(chunk_len) {
        fed += chunk.len();
        for result in decoder.push(chunk) {
            if let Err(error) = result {
                let _ = error.reason();
            }
        }
        assert!(decoder.buffered_len() <= fed.min(MAX_FRAME_LEN));
    }
    let _ = decoder.finish();
});
