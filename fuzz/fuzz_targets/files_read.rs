//! `cargo fuzz run files_read`: see `mesos_appliance::fuzzing::files_read` for the input's
//! layout and the invariants checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mesos_appliance::fuzzing::files_read(data));
