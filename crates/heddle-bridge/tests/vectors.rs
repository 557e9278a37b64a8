//! The Rust host against `spec/bridge/` (`spec/bridge.md` §9): every control message it
//! sends encodes to the vector's bytes, every message a filter sends decodes to the vector's
//! object, and every record decodes and re-encodes byte for byte.

use std::path::PathBuf;

use heddle_bridge::control::{FilterMsg, HostMsg};
use heddle_bridge::framing::{FrameReader, FrameWriter, Incoming};
use heddle_bridge::Record;
use heddle_wire::Codec;
use serde_json::Value;

fn spec() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../spec/bridge")
}

fn index() -> Value {
    serde_json::from_slice(&std::fs::read(spec().join("index.json")).unwrap()).unwrap()
}

fn read_one(bytes: &[u8], tag: u32, seq: u64) -> Incoming {
    let mut r = FrameReader::new(bytes, "peer", tag, seq, 1 << 30);
    let m = r.read_message().unwrap().unwrap();
    assert!(r.read_message().unwrap().is_none(), "one message per vector");
    m
}

#[test]
fn control_messages_match_byte_for_byte() {
    let idx = index();
    let list = idx["control"].as_array().unwrap();
    assert!(list.len() >= 15);
    for v in list {
        let bytes = std::fs::read(spec().join(v["file"].as_str().unwrap())).unwrap();
        let Incoming::Control(json) = read_one(&bytes, 0, 0) else { panic!("{v}") };
        let expected = serde_json::to_vec(&v["message"]).unwrap();
        let reencoded = if v["direction"] == "host" {
            let m = HostMsg::from_json(&json).unwrap();
            assert_eq!(m, HostMsg::from_json(&expected).unwrap());
            m.to_json()
        } else {
            let m = FilterMsg::from_json(&json).unwrap();
            assert_eq!(m, FilterMsg::from_json(&expected).unwrap());
            m.to_json()
        };
        let mut out = Vec::new();
        let mut w = FrameWriter::new(&mut out, v["edge"].as_u64().unwrap() as u32, 1 << 20);
        w.control(&reencoded).unwrap();
        w.flush().unwrap();
        drop(w);
        assert_eq!(out, bytes, "{}", v["name"]);
    }
}

#[test]
fn records_match_byte_for_byte() {
    let idx = index();
    for v in idx["records"].as_array().unwrap() {
        let bytes = std::fs::read(spec().join(v["file"].as_str().unwrap())).unwrap();
        if let Some(n) = v.get("credit") {
            assert_eq!(read_one(&bytes, 0, 0), Incoming::Credit(n.as_u64().unwrap() as u32));
            continue;
        }
        let (tag, seq) = (v["tag"].as_u64().unwrap() as u32, v["sequence"].as_u64().unwrap());
        let Incoming::Record(got_seq, r) = read_one(&bytes, tag, seq) else { panic!("{v}") };
        let want = Record {
            codec: Codec::from_u8(v["codec"].as_u64().unwrap() as u8).unwrap(),
            key: hex::decode(v["key_hex"].as_str().unwrap()).unwrap(),
            payload: hex::decode(v["payload_hex"].as_str().unwrap()).unwrap(),
        };
        assert_eq!((got_seq, &r), (seq, &want));
        let mut out = Vec::new();
        let mut w = FrameWriter::new(&mut out, 7, v["frame_payload"].as_u64().unwrap() as u32);
        w.record(tag, seq, &r).unwrap();
        w.flush().unwrap();
        drop(w);
        assert_eq!(out, bytes, "{}", v["name"]);
    }
}
