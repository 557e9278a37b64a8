//! Checks the Rust codec against the language-neutral golden vectors in `spec/vectors/`.
//!
//! Every valid vector must decode to the fields listed in `index.json` and re-encode byte
//! for byte; every invalid vector must fail with the error variant (and fields) it names.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use heddle_wire::{Codec, Error, Flags, Frame, FrameRef, Header, Kind, Limits};
use serde_json::{json, Value};

fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../spec/vectors")
}

fn index() -> Value {
    let path = vectors_dir().join("index.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("index.json is JSON")
}

fn limits(index: &Value) -> Limits {
    let l = &index["limits"];
    Limits {
        max_frame_payload: u32::try_from(l["max_frame_payload"].as_u64().unwrap()).unwrap(),
        max_message: l["max_message"].as_u64().unwrap(),
    }
}

fn vectors(index: &Value, valid: bool) -> impl Iterator<Item = &Value> {
    index["vectors"].as_array().expect("vectors array").iter().filter(move |v| v["valid"] == valid)
}

fn bytes_of(vector: &Value) -> Vec<u8> {
    let path = vectors_dir().join(vector["file"].as_str().unwrap());
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(
        bytes.len() as u64,
        vector["len"].as_u64().unwrap(),
        "{}: file length",
        vector["name"]
    );
    bytes
}

fn unhex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd hex length");
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// The header as the index spells it.
fn header_json(h: &Header) -> Value {
    json!({
        "kind": h.kind as u8,
        "flags": h.flags.bits(),
        "codec": h.codec.to_u8(),
        "key_len": h.key_len,
        "edge": h.edge,
        "tag": h.tag,
        "source": h.source,
        "target": h.target,
        "sequence": h.sequence,
        "msg_len": h.msg_len,
        "frag_len": h.frag_len,
    })
}

/// The error as the index spells it: variant name and fields.
fn error_json(e: &Error) -> (&'static str, Value) {
    match e {
        Error::Truncated { needed, available } => {
            ("Truncated", json!({ "needed": needed, "available": available }))
        }
        Error::BadMagic { found } => ("BadMagic", json!({ "found": found })),
        Error::UnsupportedVersion { found, supported } => {
            ("UnsupportedVersion", json!({ "found": found, "supported": supported }))
        }
        Error::UnknownKind(v) => ("UnknownKind", json!({ "value": v })),
        Error::UnknownCodec(v) => ("UnknownCodec", json!({ "value": v })),
        Error::Reserved { field, value } => ("Reserved", json!({ "field": field, "value": value })),
        Error::TooLarge { field, value, limit } => {
            ("TooLarge", json!({ "field": field, "value": value, "limit": limit }))
        }
        Error::Inconsistent(_) => ("Inconsistent", json!({})),
        other => panic!("error variant unknown to this test: {other:?}"),
    }
}

/// Which spec rule (spec/wire.md §6) an `Inconsistent` error reports.
fn inconsistent_rule(e: &Error) -> Option<&'static str> {
    let Error::Inconsistent(msg) = e else { return None };
    Some(match *msg {
        "frag_len is larger than msg_len" => "frag-exceeds-msg",
        "a whole-message frame must have frag_len == msg_len" => "whole-length",
        "only a first fragment may carry a key" => "key-not-first",
        "array msg_len is not a multiple of the element size" => "array-multiple",
        other => panic!("inconsistency unknown to this test: {other}"),
    })
}

#[test]
fn valid_vectors_decode_field_by_field_and_reencode_byte_for_byte() {
    let index = index();
    let limits = limits(&index);
    let mut seen = 0;
    for v in vectors(&index, true) {
        let name = v["name"].as_str().unwrap();
        let bytes = bytes_of(v);
        let (frame, used) =
            Frame::decode(&bytes, &limits).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(used, bytes.len(), "{name}: bytes used");
        assert_eq!(header_json(&frame.header), v["header"], "{name}: header fields");
        assert_eq!(frame.key, unhex(v["key_hex"].as_str().unwrap()), "{name}: key");
        assert_eq!(frame.payload, unhex(v["payload_hex"].as_str().unwrap()), "{name}: payload");
        assert_eq!(frame.header.frame_len(), bytes.len(), "{name}: frame_len");

        let (borrowed, used_ref) = FrameRef::decode(&bytes, &limits).unwrap();
        assert_eq!((borrowed.to_owned(), used_ref), (frame.clone(), used), "{name}: FrameRef");
        assert_eq!(frame.encode_to_vec(), bytes, "{name}: re-encode");
        assert_eq!(frame.header.to_bytes()[..], bytes[..48], "{name}: header re-encode");
        let mut written = Vec::new();
        frame.write_to(&mut written).unwrap();
        assert_eq!(written, bytes, "{name}: write_to");
        let read = Frame::read_from(&mut bytes.as_slice(), &limits).unwrap();
        assert_eq!(read, frame, "{name}: read_from");

        // Trailing bytes belong to the next frame and are not consumed.
        let mut two = bytes.clone();
        two.extend_from_slice(&bytes);
        assert_eq!(Frame::decode(&two, &limits).unwrap(), (frame, bytes.len()), "{name}: stream");
        seen += 1;
    }
    assert!(seen >= 12, "only {seen} valid vectors");
}

#[test]
fn invalid_vectors_fail_with_the_named_error() {
    let index = index();
    let limits = limits(&index);
    let mut seen = 0;
    for v in vectors(&index, false) {
        let name = v["name"].as_str().unwrap();
        let bytes = bytes_of(v);
        let err = FrameRef::decode(&bytes, &limits).expect_err(name);
        let expected = &v["error"];
        let (variant, fields) = error_json(&err);
        assert_eq!(variant, expected["variant"], "{name}: variant ({err})");
        if let Some(want) = expected.get("fields") {
            assert_eq!(&fields, want, "{name}: error fields ({err})");
        }
        if let Some(rule) = inconsistent_rule(&err) {
            assert_eq!(rule, expected["rule"], "{name}: rule ({err})");
        }
        assert_eq!(Frame::decode(&bytes, &limits).unwrap_err(), err, "{name}: Frame::decode");

        // A blocking reader sees the same failure: end of input for a truncated frame,
        // InvalidData wrapping the same error for anything else.
        let io = Frame::read_from(&mut bytes.as_slice(), &limits).expect_err(name);
        if matches!(err, Error::Truncated { .. }) {
            assert_eq!(io.kind(), ErrorKind::UnexpectedEof, "{name}: read_from");
        } else {
            assert_eq!(io.kind(), ErrorKind::InvalidData, "{name}: read_from");
            let inner = io.get_ref().and_then(|e| e.downcast_ref::<Error>());
            assert_eq!(inner, Some(&err), "{name}: read_from wraps the decode error");
        }
        seen += 1;
    }
    assert!(seen >= 10, "only {seen} invalid vectors");
}

#[test]
fn header_errors_do_not_depend_on_the_bytes_after_the_header() {
    // Header rules are checked before the frame length, so a decoder that has only the
    // 48 header bytes already reports them.
    let index = index();
    let limits = limits(&index);
    for v in vectors(&index, false) {
        let bytes = bytes_of(v);
        if bytes.len() < 48 || v["error"]["rule"] == "short-frame" {
            continue;
        }
        let whole = FrameRef::decode(&bytes, &limits).unwrap_err();
        assert_eq!(Header::decode(&bytes[..48], &limits).unwrap_err(), whole, "{}", v["name"]);
    }
}

#[test]
fn array_vectors_hold_the_listed_values() {
    let index = index();
    let limits = limits(&index);
    let mut seen = 0;
    for v in vectors(&index, true).filter(|v| v.get("values").is_some()) {
        let (frame, _) = Frame::decode(&bytes_of(v), &limits).unwrap();
        let values = v["values"]["values"].as_array().unwrap();
        match (frame.header.codec, v["values"]["dtype"].as_str().unwrap()) {
            (Codec::Array(heddle_wire::Dtype::F64), "f64") => {
                let got: Vec<f64> = frame
                    .payload
                    .chunks_exact(8)
                    .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
                    .collect();
                let want: Vec<f64> = values.iter().map(|x| x.as_f64().unwrap()).collect();
                assert_eq!(
                    got.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                    want.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
                );
            }
            (Codec::Array(heddle_wire::Dtype::I64), "i64") => {
                let got: Vec<i64> = frame
                    .payload
                    .chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
                    .collect();
                let want: Vec<i64> =
                    values.iter().map(|x| x.as_str().unwrap().parse().unwrap()).collect();
                assert_eq!(got, want);
            }
            (codec, dtype) => panic!("{}: codec {codec:?} with dtype {dtype}", v["name"]),
        }
        seen += 1;
    }
    assert_eq!(seen, 3);
}

/// Reassembles one message from its fragments following spec/wire.md §5.
fn reassemble(frames: &[Frame]) -> (Vec<u8>, Vec<u8>) {
    let (first, rest) = frames.split_first().expect("at least one fragment");
    assert!(first.header.flags.is_first(), "a message starts with a FIRST fragment");
    let mut payload = first.payload.clone();
    for (i, f) in rest.iter().enumerate() {
        let (a, b) = (&first.header, &f.header);
        assert!(!b.flags.is_first(), "FIRST inside an open message");
        assert_eq!(
            (a.kind, a.codec, a.edge, a.tag, a.source, a.target, a.sequence, a.msg_len),
            (b.kind, b.codec, b.edge, b.tag, b.source, b.target, b.sequence, b.msg_len),
            "fragments of one message share their identifying fields"
        );
        assert!(f.key.is_empty());
        payload.extend_from_slice(&f.payload);
        assert!(payload.len() as u64 <= a.msg_len, "fragments exceed msg_len");
        assert_eq!(b.flags.is_last(), i == rest.len() - 1, "LAST exactly on the final fragment");
    }
    assert!(frames.last().unwrap().header.flags.is_last());
    assert_eq!(payload.len() as u64, first.header.msg_len, "fragments sum to msg_len");
    (first.key.clone(), payload)
}

#[test]
fn fragment_vectors_reassemble_into_the_listed_message() {
    let index = index();
    let limits = limits(&index);
    let by_name = |name: &str| {
        let v = index["vectors"].as_array().unwrap().iter().find(|v| v["name"] == name).unwrap();
        Frame::decode(&bytes_of(v), &limits).unwrap().0
    };
    let messages = index["messages"].as_array().unwrap();
    assert!(!messages.is_empty());
    for m in messages {
        let frames: Vec<Frame> = m["fragments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| by_name(n.as_str().unwrap()))
            .collect();
        assert_eq!(frames.first().unwrap().header.flags, Flags::FIRST);
        assert_eq!(frames[1].header.flags, Flags::MIDDLE);
        let (key, payload) = reassemble(&frames);
        assert_eq!(key, unhex(m["key_hex"].as_str().unwrap()), "{}", m["name"]);
        assert_eq!(payload, unhex(m["payload_hex"].as_str().unwrap()), "{}", m["name"]);
    }
}

#[test]
fn every_kind_has_a_valid_vector_and_every_file_is_indexed() {
    let index = index();
    let mut kinds: Vec<u8> =
        vectors(&index, true).map(|v| v["header"]["kind"].as_u64().unwrap() as u8).collect();
    kinds.sort_unstable();
    kinds.dedup();
    assert_eq!(kinds, (1..=9).collect::<Vec<u8>>());
    for k in kinds {
        Kind::from_u8(k).unwrap();
    }

    let listed: Vec<&str> =
        index["vectors"].as_array().unwrap().iter().map(|v| v["file"].as_str().unwrap()).collect();
    for entry in std::fs::read_dir(vectors_dir()).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if let Some(stem) = name.strip_suffix(".bin") {
            assert!(listed.contains(&name.as_str()), "{name} is not in index.json");
            assert!(vectors_dir().join(format!("{stem}.txt")).exists(), "{stem}.txt missing");
        }
    }
    for file in listed {
        assert!(vectors_dir().join(file).exists(), "{file} listed but missing");
        assert_eq!(
            file.starts_with("invalid_"),
            index["vectors"]
                .as_array()
                .unwrap()
                .iter()
                .any(|v| v["file"] == file && v["valid"] == false)
        );
    }
}
