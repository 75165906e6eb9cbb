//! Exhaustive models of the coordination protocol, checked with
//! `stateright` in `cargo test --test model` (`docs/election-model.md`).
//!
//! A model is an abstraction of the code, not the code: each step names the
//! function it stands for, and a change to the protocol in
//! `src/coordination/zookeeper/` must change the model with it.

mod election;
