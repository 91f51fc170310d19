//! Which tokens a memory holds (`sa_session_memory_positions`), against hand-computed windows.
mod common;

use sa::{Memory, Status, TokenizeFlags};

#[test]
fn dense_holds_every_position_and_streaming_its_sinks_and_window() {
    let model = common::model();
    let text = "The quick brown fox jumps over the lazy dog. ".repeat(8);
    let tokens = model.tokenize(&text, TokenizeFlags::ADD_SPECIAL).unwrap();
    let n = tokens.len() as u64;

    let mut dense = model.session(&common::cpu().memory(Memory::Dense)).unwrap();
    dense.prefill_all(&tokens).unwrap();
    let all: Vec<u64> = (0..n).collect();
    assert_eq!(dense.memory_positions(None, None).unwrap(), all);
    assert_eq!(dense.memory_positions(Some(0), Some(0)).unwrap(), all);

    // 8 sinks and a cache of 32: the first 8 positions and the newest 24.
    let (sinks, cache) = (8u64, 32u64);
    assert!(n > cache, "the prompt must overflow the window");
    let mut streaming = model
        .session(
            &common::cpu()
                .memory(Memory::Streaming)
                .cache_tokens(cache as usize)
                .n_sinks(sinks as usize),
        )
        .unwrap();
    streaming.prefill_all(&tokens).unwrap();
    let expected: Vec<u64> = (0..sinks).chain(n - (cache - sinks)..n).collect();
    let held = streaming.memory_positions(Some(1), None).unwrap();
    assert_eq!(held, expected);
    assert_eq!(held.len() as u64, streaming.stats().unwrap().n_kv_tokens);
    assert_eq!(streaming.memory_positions(None, None).unwrap(), expected);

    let err = streaming
        .memory_positions(Some(u32::MAX), None)
        .unwrap_err();
    assert_eq!(err.status(), Status::InvalidArg);
    assert!(err.message().contains("layer"), "{}", err.message());
}
