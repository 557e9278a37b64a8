//! Property tests: valid frames round-trip, and hostile bytes never panic the decoder,
//! never yield a frame whose lengths disagree with its header, and never make it allocate
//! past the validated lengths.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::{ErrorKind, Read};

use heddle_wire::{Codec, Error, Flags, Frame, FrameRef, Header, Kind, Limits, HEADER_LEN};
use proptest::prelude::*;

// ---- allocation probe: the largest single allocation made by the current thread ----------

struct LargestAllocation;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
}

// SAFETY: forwards every call to the system allocator unchanged; only records sizes.
unsafe impl GlobalAlloc for LargestAllocation {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        System.realloc(ptr, layout, new_size)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static ALLOCATOR: LargestAllocation = LargestAllocation;

/// Runs `f` and returns its result with the largest allocation it made on this thread.
fn largest_allocation<T>(f: impl FnOnce() -> T) -> (T, usize) {
    LARGEST.with(|l| l.set(0));
    let out = f();
    (out, LARGEST.with(Cell::get))
}

// ---- strategies ---------------------------------------------------------------------------

fn kind() -> impl Strategy<Value = Kind> {
    (1u8..=7).prop_map(|b| Kind::from_u8(b).unwrap())
}

fn codec() -> impl Strategy<Value = Codec> {
    prop_oneof![(0u8..=5), (0x10u8..=0x19)].prop_map(|b| Codec::from_u8(b).unwrap())
}

fn flags() -> impl Strategy<Value = Flags> {
    prop_oneof![Just(Flags::WHOLE), Just(Flags::FIRST), Just(Flags::MIDDLE), Just(Flags::LAST)]
}

/// Any frame a correct encoder may produce.
fn valid_frame() -> impl Strategy<Value = Frame> {
    let ids = (any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>(), any::<u64>());
    let body = (
        proptest::collection::vec(any::<u8>(), 0..40),
        proptest::collection::vec(any::<u8>(), 0..300),
        0u64..(1 << 20),
    );
    (kind(), flags(), codec(), ids, body).prop_map(
        |(kind, flags, codec, ids, (key, mut payload, extra))| {
            let elem = match codec {
                Codec::Array(d) => d.size() as u64,
                _ => 1,
            };
            let mut h = Header::new(kind);
            h.flags = flags;
            h.codec = codec;
            (h.edge, h.tag, h.source, h.target, h.sequence) = ids;
            if flags == Flags::WHOLE {
                payload.truncate(payload.len() - payload.len() % elem as usize);
                h.msg_len = payload.len() as u64;
            } else {
                let m = payload.len() as u64 + extra;
                h.msg_len = m.div_ceil(elem) * elem;
            }
            h.frag_len = payload.len() as u32;
            let frame = Frame { header: h, key: Vec::new(), payload };
            if flags.is_first() {
                frame.with_key(key)
            } else {
                frame
            }
        },
    )
}

fn small_limits() -> Limits {
    Limits { max_frame_payload: 1024, max_message: 4096 }
}

/// Checks everything a successful decode promises about the bytes it was given.
fn check_decoded(buf: &[u8], limits: &Limits) -> Result<(), TestCaseError> {
    let header = Header::decode(buf, limits);
    match FrameRef::decode(buf, limits) {
        Ok((f, used)) => {
            let h = f.header;
            prop_assert_eq!(header.as_ref(), Ok(&h));
            prop_assert_eq!(f.key.len(), usize::from(h.key_len));
            prop_assert_eq!(f.payload.len(), h.frag_len as usize);
            prop_assert_eq!(used, HEADER_LEN + f.key.len() + f.payload.len());
            prop_assert!(used <= buf.len());
            prop_assert!(h.frag_len <= limits.max_frame_payload && h.msg_len <= limits.max_message);
            prop_assert!(u64::from(h.frag_len) <= h.msg_len);
            prop_assert!(h.key_len == 0 || h.flags.is_first());
            prop_assert!(h.validate(limits).is_ok());
            // Whatever decodes re-encodes to exactly the bytes it came from.
            let owned = f.to_owned();
            prop_assert_eq!(&owned.encode_to_vec()[..], &buf[..used]);
            prop_assert_eq!(Frame::decode(buf, limits), Ok((owned.clone(), used)));
            prop_assert_eq!(Frame::read_from(&mut &buf[..], limits).ok(), Some(owned));
        }
        Err(e) => {
            prop_assert_eq!(Frame::decode(buf, limits).unwrap_err(), e.clone());
            if let Err(he) = header {
                prop_assert_eq!(he, e.clone());
            } else {
                // The header was fine, so the only possible failure is a short buffer.
                prop_assert!(
                    matches!(e, Error::Truncated { needed, available } if needed > available),
                    "{:?}",
                    e
                );
            }
            prop_assert!(Frame::read_from(&mut &buf[..], limits).is_err());
        }
    }
    Ok(())
}

/// Bytes that start like a version-1 header, so mutations reach the deeper checks.
fn plausible_header() -> impl Strategy<Value = Vec<u8>> {
    (proptest::collection::vec(any::<u8>(), 45..200), 0u8..10, 0u8..0x20).prop_map(
        |(mut rest, kind, codec)| {
            rest[0] = kind;
            rest[2] = codec;
            let mut v = vec![0x48, 0x44, 1];
            v.append(&mut rest);
            v
        },
    )
}

/// A reader that hands out `prefix` and then an endless run of one byte, counting reads.
struct Hostile<'a> {
    prefix: &'a [u8],
    fill: u8,
    served: usize,
}

impl Read for Hostile<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = if self.prefix.is_empty() {
            buf.fill(self.fill);
            buf.len()
        } else {
            self.prefix.read(buf)?
        };
        self.served += n;
        Ok(n)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn valid_frames_round_trip(frame in valid_frame()) {
        let bytes = frame.encode_to_vec();
        prop_assert_eq!(bytes.len(), frame.header.frame_len());
        prop_assert_eq!(
            Frame::decode(&bytes, &Limits::default()),
            Ok((frame.clone(), bytes.len()))
        );
        let (r, used) = FrameRef::decode(&bytes, &Limits::default()).unwrap();
        prop_assert_eq!(
            (r.header, r.key, r.payload, used),
            (frame.header, &frame.key[..], &frame.payload[..], bytes.len())
        );
        prop_assert_eq!(
            Frame::read_from(&mut bytes.as_slice(), &Limits::default()).unwrap(),
            frame.clone()
        );
        let mut written = Vec::new();
        frame.write_to(&mut written).unwrap();
        prop_assert_eq!(written, bytes);
    }

    #[test]
    fn every_prefix_of_a_valid_frame_is_truncated(
        frame in valid_frame(),
        cut in any::<prop::sample::Index>(),
    ) {
        let bytes = frame.encode_to_vec();
        let cut = cut.index(bytes.len());
        match FrameRef::decode(&bytes[..cut], &Limits::default()) {
            Err(Error::Truncated { needed, available }) => {
                prop_assert_eq!(available, cut);
                prop_assert!(needed > cut && needed <= bytes.len());
            }
            other => prop_assert!(false, "prefix of {} bytes: {:?}", cut, other),
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(buf in proptest::collection::vec(any::<u8>(), 0..256)) {
        check_decoded(&buf, &Limits::default())?;
        check_decoded(&buf, &small_limits())?;
    }

    #[test]
    fn plausible_headers_never_panic(buf in plausible_header()) {
        check_decoded(&buf, &Limits::default())?;
        check_decoded(&buf, &small_limits())?;
    }

    #[test]
    fn mutated_valid_frames_never_panic_or_lie(
        frame in valid_frame(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        resize in proptest::option::of(0usize..400),
    ) {
        let mut buf = frame.encode_to_vec();
        for (at, byte) in edits {
            let i = at.index(buf.len());
            buf[i] = byte;
        }
        if let Some(n) = resize {
            buf.resize(n, 0xA5);
        }
        check_decoded(&buf, &Limits::default())?;
        check_decoded(&buf, &small_limits())?;
    }

    #[test]
    fn read_from_never_allocates_past_the_limit(
        frag_len in prop_oneof![any::<u32>(), 0u32..2048],
        msg_len in prop_oneof![any::<u64>(), 0u64..8192],
        key_len in any::<u16>(),
        flags in 0u8..4,
        fill in any::<u8>(),
    ) {
        let limits = small_limits();
        let mut h = Header::new(Kind::Data);
        h.flags = [Flags::MIDDLE, Flags::FIRST, Flags::LAST, Flags::WHOLE][usize::from(flags)];
        (h.frag_len, h.msg_len, h.key_len) = (frag_len, msg_len, key_len);
        let head = h.to_bytes();
        let mut reader = Hostile { prefix: &head, fill, served: 0 };
        let (result, largest) = largest_allocation(|| Frame::read_from(&mut reader, &limits));
        match result {
            Ok(frame) => {
                // Accepted: the header passed the limits and the allocations match it exactly.
                prop_assert!(frag_len <= limits.max_frame_payload && msg_len <= limits.max_message);
                prop_assert_eq!(frame.payload.len(), frag_len as usize);
                prop_assert_eq!(frame.key.len(), usize::from(key_len));
                prop_assert!(
                    largest <= usize::from(key_len).max(frag_len as usize).max(64),
                    "largest {}",
                    largest
                );
                prop_assert_eq!(reader.served, h.frame_len());
            }
            Err(e) => {
                // Refused from the header alone: nothing past it was read or allocated.
                prop_assert_eq!(e.kind(), ErrorKind::InvalidData);
                prop_assert_eq!(reader.served, HEADER_LEN);
                prop_assert!(largest <= 256, "largest allocation {} for a refused header", largest);
                let inner = e.get_ref().and_then(|x| x.downcast_ref::<Error>()).cloned();
                prop_assert_eq!(inner, Header::decode(&head, &limits).err());
                if frag_len > limits.max_frame_payload {
                    let err = Header::decode(&head, &limits);
                    prop_assert!(
                        matches!(err, Err(Error::TooLarge { field: "frag_len", .. })),
                        "{:?}",
                        err
                    );
                }
            }
        }
    }
}

#[test]
fn huge_declared_lengths_are_refused_before_any_payload_is_read() {
    let limits = small_limits();
    for (frag_len, msg_len, field) in [
        (u32::MAX, u64::MAX, "frag_len"),
        (limits.max_frame_payload + 1, u64::from(limits.max_frame_payload) + 1, "frag_len"),
        (0, u64::MAX, "msg_len"),
        (16, limits.max_message + 1, "msg_len"),
    ] {
        let mut h = Header::new(Kind::Data);
        h.flags = Flags::FIRST;
        (h.frag_len, h.msg_len) = (frag_len, msg_len);
        let head = h.to_bytes();
        let mut reader = Hostile { prefix: &head, fill: 0, served: 0 };
        let (result, largest) = largest_allocation(|| Frame::read_from(&mut reader, &limits));
        let err = result.unwrap_err();
        let inner = err.get_ref().and_then(|e| e.downcast_ref::<Error>()).unwrap();
        assert!(matches!(inner, Error::TooLarge { field: f, .. } if *f == field), "{inner}");
        assert_eq!(reader.served, HEADER_LEN);
        assert!(largest <= 256, "largest allocation {largest}");
    }
}

#[test]
fn accepted_frame_at_the_limit_allocates_only_what_it_declares() {
    let limits = small_limits();
    let mut h = Header::new(Kind::Data);
    (h.frag_len, h.msg_len) = (limits.max_frame_payload, u64::from(limits.max_frame_payload));
    let head = h.to_bytes();
    let mut reader = Hostile { prefix: &head, fill: 7, served: 0 };
    let (frame, largest) = largest_allocation(|| Frame::read_from(&mut reader, &limits).unwrap());
    assert_eq!(frame.payload, vec![7; 1024]);
    assert_eq!(largest, 1024);
}
