//! The task system: users describe a graph of tasks; Heddle places task instances on
//! workers, moves data between them with dataflow operations, and runs them when their
//! input arrives — in batch or streaming mode — while tasks may still call BSP collectives.

pub mod ports;
