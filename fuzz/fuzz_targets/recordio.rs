//! `cargo fuzz run recordio`: see `mesos_appliance::fuzzing::recordio` for the input's
//! layout and the invariants checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mesos_appliance::fuzzing::recordio(data));
