#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kapi_fuzz_targets::apply::fields_v1(data));
