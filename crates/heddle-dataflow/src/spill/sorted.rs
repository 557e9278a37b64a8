//! What a [`SpillSorter`](super::SpillSorter) hands back: its records in key order
//! ([`SortedRecords`]) and grouped by key ([`GroupedRecords`]), merged by the one
//! [`Merge`].

use std::cmp::Ordering;
use std::fmt;
use std::iter::FusedIterator;

use crate::Result;

use super::buffer::Buffer;
use super::merge::{Merge, RunFormat};
use super::run_file::RunWriter;
use super::KeyOrder;

/// Byte records ordered by their keys in a [`KeyOrder`], stored as they are.
#[derive(Clone)]
pub(super) struct ByteRecords(pub(super) KeyOrder);

impl RunFormat for ByteRecords {
    type Record = (Vec<u8>, Vec<u8>);

    fn cmp(&self, a: &Self::Record, b: &Self::Record) -> Ordering {
        (self.0)(&a.0, &b.0)
    }

    fn write(&mut self, (key, value): &Self::Record, out: &mut RunWriter) -> Result<()> {
        out.push(key, value)
    }

    fn read(&mut self, key: Vec<u8>, value: Vec<u8>) -> Result<Self::Record> {
        Ok((key, value))
    }
}

/// The sorted in-memory buffer of a sorter, record by record.
pub(super) struct BufferRecords {
    pub(super) buffer: Buffer,
    pub(super) next: usize,
}

impl Iterator for BufferRecords {
    type Item = (Vec<u8>, Vec<u8>);

    fn next(&mut self) -> Option<Self::Item> {
        let (key, value) = self.buffer.get(self.next)?;
        self.next += 1;
        Some((key.to_vec(), value.to_vec()))
    }
}

/// The records of a [`SpillSorter`](super::SpillSorter) in key order, merged from its runs
/// as they are read.
///
/// Yields `Err` at most once, then ends. Dropping it removes the run files left.
pub struct SortedRecords {
    pub(super) merge: Merge<ByteRecords, BufferRecords>,
}

impl SortedRecords {
    /// Groups the records by key: each key once, with all its values in push order.
    ///
    /// Keys are equal when the sorter's order says so; the first one pushed is reported.
    /// One key's values are held in memory together.
    pub fn group_by_key(self) -> GroupedRecords {
        GroupedRecords { records: self, pending: None }
    }
}

impl Iterator for SortedRecords {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.merge.next()
    }
}

impl FusedIterator for SortedRecords {}

impl fmt::Debug for SortedRecords {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SortedRecords").field("merge", &self.merge).finish()
    }
}

/// Each key of a [`SortedRecords`] once, with all its values in push order.
#[derive(Debug)]
pub struct GroupedRecords {
    records: SortedRecords,
    pending: Option<(Vec<u8>, Vec<u8>)>,
}

impl Iterator for GroupedRecords {
    type Item = Result<(Vec<u8>, Vec<Vec<u8>>)>;

    fn next(&mut self) -> Option<Self::Item> {
        let (key, first) = match self.pending.take() {
            Some(record) => record,
            None => match self.records.next()? {
                Ok(record) => record,
                Err(e) => return Some(Err(e)),
            },
        };
        let mut values = vec![first];
        loop {
            match self.records.next() {
                None => break,
                Some(Err(e)) => return Some(Err(e)),
                Some(Ok((k, v))) if (self.records.merge.format().0)(&k, &key).is_eq() => {
                    values.push(v)
                }
                Some(Ok(record)) => {
                    self.pending = Some(record);
                    break;
                }
            }
        }
        Some(Ok((key, values)))
    }
}

impl FusedIterator for GroupedRecords {}
