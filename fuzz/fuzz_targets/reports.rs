#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    mailroom_actors::fuzzing::reports(data);
});
