//! External sorting with disk spill for batch dataflow operations.
