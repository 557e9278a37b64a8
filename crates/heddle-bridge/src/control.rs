//! Control messages (`spec/bridge.md` §4), one enum per direction, written in the
//! canonical JSON form of rule B4 and read from any JSON object.
//!
//! ```
//! use heddle_bridge::control::{FilterMsg, HostMsg};
//! let bytes = HostMsg::PauseResume { paused: true }.to_json();
//! assert_eq!(bytes, br#"{"type":"PAUSE_RESUME","paused":true}"#);
//! let back = FilterMsg::from_json(br#"{ "paused": false, "type": "PAUSE_RESUME" }"#).unwrap();
//! assert_eq!(back, FilterMsg::PauseResume { paused: false });
//! ```

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The bridge protocol version this crate speaks.
pub const PROTOCOL_VERSION: u32 = 1;

/// A message from the host to the filter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum HostMsg {
    /// The answer to the filter's INITIALIZE: everything `init` and the channel need.
    Initialize {
        /// Protocol version.
        version: u32,
        /// The bridge id (`edge` of every later frame).
        bridge: u32,
        /// Task name.
        task: String,
        /// This instance's index.
        instance: u32,
        /// Instances of the task.
        parallelism: u32,
        /// Arguments for `init`.
        args: Vec<String>,
        /// Largest record either side may send, in bytes.
        max_record: u64,
        /// Largest payload of one frame; larger records are fragmented.
        frame_payload: u32,
        /// Records each side may have in flight (§5).
        credits: u32,
    },
    /// Pause (`true`) or resume the filter's processing of DATA.
    PauseResume {
        /// The state asked for.
        paused: bool,
    },
    /// A request for the filter's diagnostics.
    Status,
    /// End of input.
    Complete,
    /// Stop now, without `finalize`.
    Abort {
        /// Why.
        reason: String,
    },
    /// The host failed; it closes the channel.
    Error(ErrorBody),
    /// Move the bridge to a new channel (§6).
    ChangeBridgeType {
        /// The new channel's number.
        epoch: u32,
        /// `pipe`, `fifo`, `tcp` or `unix`.
        transport: String,
        /// Where it is (`""` for `pipe`).
        address: String,
    },
}

/// A message from the filter to the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FilterMsg {
    /// The filter's first frame on a new bridge.
    Initialize {
        /// Protocol version.
        version: u32,
        /// `HEDDLE_BRIDGE_TOKEN` from its environment.
        token: String,
        /// Its language.
        language: String,
    },
    /// `init` returned (`state` = `"started"`).
    StartStop {
        /// `started`.
        state: String,
    },
    /// Acknowledges the pause state now in force.
    PauseResume {
        /// The state.
        paused: bool,
    },
    /// Diagnostics.
    Status(FilterStatus),
    /// `finalize` ran; the filter's last frame.
    Complete {
        /// Records it processed.
        records_in: u64,
        /// Records it emitted.
        records_out: u64,
    },
    /// The filter stopped without finalizing.
    Abort {
        /// Why.
        reason: String,
    },
    /// The filter failed.
    Error(ErrorBody),
    /// Last frame on the old channel (no token) or first on the new one (with the token).
    ChangeBridgeType {
        /// The new channel's number.
        epoch: u32,
        /// The bridge's token, on the new channel only.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        token: Option<String>,
    },
}

/// The members of an `ERROR` message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// `VERSION`, `AUTH`, `PROTOCOL`, `RECORD_TOO_LARGE`, `INIT`, `PROCESS` or `FINALIZE`.
    pub code: String,
    /// What happened, in words.
    pub message: String,
    /// The input record that failed, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<u64>,
}

/// A filter's STATUS answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilterStatus {
    /// Records processed.
    pub records_in: u64,
    /// Records emitted.
    pub records_out: u64,
    /// Payload bytes received.
    pub bytes_in: u64,
    /// Payload bytes sent.
    pub bytes_out: u64,
    /// Open file descriptors.
    pub open_fds: u64,
    /// Resident memory.
    pub rss_bytes: u64,
    /// CPU time used, in microseconds.
    pub cpu_us: u64,
}

macro_rules! json_io {
    ($t:ty, $peer:literal) => {
        impl $t {
            /// The message in canonical JSON (`spec/bridge.md` B4).
            pub fn to_json(&self) -> Vec<u8> {
                // Serializing these plain enums cannot fail.
                serde_json::to_vec(self).unwrap_or_default()
            }

            /// Reads a message from any JSON object.
            ///
            /// # Errors
            /// [`Error::Protocol`] naming the text when it is not a known message.
            pub fn from_json(bytes: &[u8]) -> Result<Self> {
                serde_json::from_slice(bytes).map_err(|e| {
                    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(200)]);
                    Error::protocol(
                        "§4",
                        format!(
                            concat!("bad control message from the ", $peer, ": {} in {}"),
                            e, text
                        ),
                    )
                })
            }
        }
    };
}

json_io!(HostMsg, "host");
json_io!(FilterMsg, "filter");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_as_b4_says() {
        let m = FilterMsg::Abort { reason: "a\"b\\c\n\u{1}\u{7f}é".into() };
        assert_eq!(
            String::from_utf8(m.to_json()).unwrap(),
            "{\"type\":\"ABORT\",\"reason\":\"a\\\"b\\\\c\\n\\u0001\u{7f}é\"}"
        );
    }

    #[test]
    fn unknown_type_is_a_protocol_error() {
        let e = HostMsg::from_json(br#"{"type":"DANCE"}"#).unwrap_err();
        assert!(e.to_string().contains("DANCE"), "{e}");
    }
}
