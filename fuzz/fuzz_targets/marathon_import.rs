//! `cargo fuzz run marathon_import`: see `mesos_appliance::fuzzing::marathon_import` for the
//! input and the invariants checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mesos_appliance::fuzzing::marathon_import(data));
