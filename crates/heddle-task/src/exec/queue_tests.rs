//! Unit tests of the queues' part in unaligned checkpoints: an inbox that stops aligning
//! and copies what is in flight, and an outbox whose barrier overtakes its records.

use std::sync::{Arc, Mutex};

use super::inbox::Inbox;
use super::outputs::{EdgeOutput, Outbox, TaskOutput};
use crate::checkpoint::Codec;

fn inbox(slots: usize) -> Inbox<u64> {
    let mut inbox = Inbox::default();
    inbox.codec = Some(Codec::of());
    for _ in 0..slots {
        inbox.add_slot();
    }
    inbox
}

fn decode(bytes: &[u8]) -> Vec<u64> {
    Codec::<u64>::of().decode_all(bytes).unwrap()
}

#[test]
fn an_unaligned_inbox_copies_its_queue_and_the_slow_input_until_its_barrier() {
    let mut ib = inbox(2);
    ib.push(0, 1);
    ib.push(1, 2);
    ib.barrier(0, 7);
    assert_eq!(ib.aligned(), None, "input 1 has not delivered the barrier");
    assert!(ib.blocked(0));
    let (id, queue) = ib.go_unaligned(None).expect("a barrier under way");
    assert_eq!((id, decode(&queue.unwrap())), (7, vec![1, 2]));
    assert!(!ib.blocked(0), "input 0 goes on past its barrier");
    ib.push(0, 10); // after the barrier on input 0: not copied
    ib.push(1, 3); // before the barrier on input 1: copied
    assert!(ib.captured().is_none(), "input 1 still owes its barrier");
    ib.barrier(1, 7);
    assert_eq!(decode(&ib.captured().unwrap().unwrap()), vec![3]);
    assert_eq!(ib.items, [1, 2, 10, 3], "every record is still executed");
    assert!(!ib.capturing() && ib.aligned().is_none());
}

#[test]
fn with_every_input_ended_the_queue_is_all_an_unaligned_checkpoint_copies() {
    let mut ib = inbox(2);
    ib.push(0, 4);
    ib.end(0);
    ib.push(1, 5);
    ib.end(1);
    assert!(ib.go_unaligned(None).is_none(), "no checkpoint due");
    let (id, queue) = ib.go_unaligned(Some(3)).expect("checkpoint 3 is due");
    assert_eq!((id, decode(&queue.unwrap())), (3, vec![4, 5]));
    assert_eq!(decode(&ib.captured().unwrap().unwrap()), Vec::<u64>::new());
}

#[test]
fn without_a_codec_an_inbox_stays_aligned() {
    let mut ib = Inbox::<u64>::default();
    ib.add_slot();
    ib.add_slot();
    ib.barrier(0, 1);
    assert!(ib.go_unaligned(None).is_none());
    assert!(ib.blocked(0));
}

#[test]
fn an_overtaking_barrier_leaves_first_and_keeps_a_copy_of_what_it_passed() {
    let outbox = Arc::new(Mutex::new(Outbox::new(Some(Codec::<u64>::of()))));
    let port = EdgeOutput(outbox.clone());
    port.push(&mut vec![1, 2, 3]);
    port.barrier(9, false);
    assert!(!port.barrier_left(9));
    let mut o = outbox.lock().unwrap();
    assert_eq!(o.due_barrier(), None, "in order: the records go first");
    o.overtake();
    assert_eq!(o.due_barrier(), Some(9), "overtaking: the barrier goes first");
    assert_eq!((o.pop(), o.pop(), o.pop(), o.pop()), (Some(1), Some(2), Some(3), None));
    drop(o);
    assert!(port.barrier_left(9));
    assert_eq!(decode(&port.overtaken(9).unwrap().unwrap()), vec![1, 2, 3]);
    assert!(port.overtaken(9).is_none(), "taken once");
    port.restore(&{
        let mut b = Vec::new();
        Codec::<u64>::of().encode_all(&[7, 8], &mut b).unwrap();
        b
    })
    .unwrap();
    assert_eq!(outbox.lock().unwrap().items, [7, 8]);
}
