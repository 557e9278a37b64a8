//! The k-way merge of sorted runs and the in-memory remainder: [`SortedRecords`] and
//! its grouping by key, [`GroupedRecords`].

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::fmt;
use std::iter::FusedIterator;

use crate::Result;

use super::buffer::Buffer;
use super::run_file::RunReader;
use super::KeyOrder;

/// The records of a [`SpillSorter`](super::SpillSorter) in key order, merged from its runs
/// as they are read.
///
/// Yields `Err` at most once, then ends. Dropping it removes the run files left.
pub struct SortedRecords {
    sources: Vec<Source>,
    heap: BinaryHeap<Head>,
    order: KeyOrder,
}

impl SortedRecords {
    pub(super) fn merge(mut sources: Vec<Source>, order: KeyOrder) -> Result<SortedRecords> {
        let mut heap = BinaryHeap::with_capacity(sources.len());
        for (source, input) in sources.iter_mut().enumerate() {
            match input.next_record()? {
                Some((key, value)) => heap.push(Head { key, value, source, order: order.clone() }),
                None => *input = Source::Done,
            }
        }
        Ok(SortedRecords { sources, heap, order })
    }

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
        let mut head = self.heap.pop()?;
        match self.sources[head.source].next_record() {
            Ok(Some((key, value))) => {
                let record = (
                    std::mem::replace(&mut head.key, key),
                    std::mem::replace(&mut head.value, value),
                );
                self.heap.push(head);
                Some(Ok(record))
            }
            Ok(None) => {
                self.sources[head.source] = Source::Done;
                Some(Ok((head.key, head.value)))
            }
            Err(e) => {
                self.heap.clear();
                self.sources.clear();
                Some(Err(e))
            }
        }
    }
}

impl FusedIterator for SortedRecords {}

impl fmt::Debug for SortedRecords {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let open = self.sources.iter().filter(|s| matches!(s, Source::Run(_))).count();
        f.debug_struct("SortedRecords")
            .field("open_runs", &open)
            .field("heads", &self.heap.len())
            .finish()
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
                Some(Ok((k, v))) if (self.records.order)(&k, &key) == Ordering::Equal => {
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

/// The smallest unread record of one merge source; the heap's greatest is the next out.
struct Head {
    key: Vec<u8>,
    value: Vec<u8>,
    source: usize,
    order: KeyOrder,
}

impl Ord for Head {
    fn cmp(&self, other: &Self) -> Ordering {
        // Reversed: smaller key first, then the earlier source (stability).
        (self.order)(&other.key, &self.key).then(other.source.cmp(&self.source))
    }
}

impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Head {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Head {}

/// One input of a merge.
pub(super) enum Source {
    Run(RunReader),
    /// The sorted in-memory buffer and the position of its next record.
    Memory(Buffer, usize),
    Done,
}

impl Source {
    pub(super) fn next_record(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        match self {
            Source::Run(run) => run.next_record(),
            Source::Memory(buffer, next) => Ok(buffer.get(*next).map(|(key, value)| {
                *next += 1;
                (key.to_vec(), value.to_vec())
            })),
            Source::Done => Ok(None),
        }
    }
}
