//! `cargo fuzz run web_request`: see `mesos_appliance::fuzzing::web_request` for the input's
//! layout and the invariants checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mesos_appliance::fuzzing::web_request(data));
