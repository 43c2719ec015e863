#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kapi_fuzz_targets::apply::server_side_apply(data));
