//! Dataflow operations between sets of tasks (Twister:Net): streaming and batch.
