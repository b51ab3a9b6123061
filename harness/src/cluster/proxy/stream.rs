//! What the proxy reads in the traffic, with no I/O: which requests are writes
//! ([`is_write`]) and watches ([`watched_resource`]), and a watch answer cut into whole events
//! ([`Splitter`], by the [`Framing`] its content type says) with each event's type
//! ([`event_type`]). Start with [`Splitter`].

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, Uri, header};

/// Whether a request changes what the apiserver stores, leases (a leader's renewals) and
/// events (what a controller says it did) aside: what a crash "right after a write" follows.
pub fn is_write(method: &http::Method, uri: &Uri) -> bool {
    use http::Method;
    let mutating = [Method::POST, Method::PUT, Method::PATCH, Method::DELETE].contains(method);
    let bookkeeping = uri
        .path()
        .split('/')
        .any(|segment| segment == "leases" || segment == "events");
    mutating && !bookkeeping
}

/// The plural resource a watch request is for (`pods`, `clonesets`), or `None` when `uri` is
/// not a watch: a `watch` query parameter Go reads as true, or a `/watch/` path segment after
/// the group version.
pub fn watched_resource(uri: &Uri) -> Option<String> {
    let by_query = uri.query().is_some_and(|q| {
        q.split('&').any(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            k == "watch" && matches!(v, "1" | "t" | "T" | "true" | "TRUE" | "True")
        })
    });
    let segments: Vec<&str> = uri.path().trim_matches('/').split('/').collect();
    let rest = match segments.as_slice() {
        ["api", _, rest @ ..] | ["apis", _, _, rest @ ..] => rest,
        _ => return None,
    };
    let (by_path, rest) = match rest {
        ["watch", rest @ ..] => (true, rest),
        rest => (false, rest),
    };
    if !(by_query || by_path) {
        return None;
    }
    let resource = match rest {
        ["namespaces", _, resource, ..] | [resource, ..] => *resource,
        [] => return None,
    };
    (!resource.is_empty()).then(|| resource.to_string())
}

/// How a watch answer is cut into events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// One JSON value per event (`application/json`).
    Json,
    /// A 4-byte big-endian length, then the event (`application/vnd.kubernetes.protobuf`).
    Protobuf,
    /// Not cut: each chunk as it comes (any other content type, or a content encoding).
    Raw,
}

impl Framing {
    /// The framing of an answer with `headers`.
    pub fn of(headers: &HeaderMap) -> Self {
        let encoded = headers
            .get(header::CONTENT_ENCODING)
            .is_some_and(|e| e.as_bytes() != b"identity");
        let media = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .map(|m| m.trim().to_ascii_lowercase())
            .unwrap_or_default();
        match media.as_str() {
            _ if encoded => Self::Raw,
            "application/json" => Self::Json,
            "application/vnd.kubernetes.protobuf" => Self::Protobuf,
            _ => Self::Raw,
        }
    }
}

/// Cuts a watch answer, arriving in chunks of any size, into whole events.
#[derive(Debug)]
pub struct Splitter {
    framing: Framing,
    buf: BytesMut,
}

impl Splitter {
    /// A splitter for `framing`.
    pub fn new(framing: Framing) -> Self {
        Self {
            framing,
            buf: BytesMut::new(),
        }
    }

    /// Takes the next chunk; returns the events it completed, in order (a partial event is
    /// kept until the rest arrives). A JSON stream that is not JSON is forwarded as it comes
    /// from then on.
    pub fn push(&mut self, chunk: Bytes) -> Vec<Bytes> {
        if self.framing == Framing::Raw {
            return (!chunk.is_empty()).then_some(chunk).into_iter().collect();
        }
        self.buf.extend_from_slice(&chunk);
        let mut events = vec![];
        loop {
            match self.next_len() {
                Ok(Some(n)) => events.push(self.buf.split_to(n).freeze()),
                Ok(None) => break,
                Err(()) => {
                    self.framing = Framing::Raw;
                    events.extend(self.finish());
                    break;
                }
            }
        }
        events
    }

    /// The bytes of a partial event kept so far.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// At the end of the stream: what is left (a partial event), if anything.
    pub fn finish(&mut self) -> Option<Bytes> {
        (!self.buf.is_empty()).then(|| self.buf.split().freeze())
    }

    /// The length of the first whole event in the buffer; `Err` if it is not of the framing.
    fn next_len(&self) -> Result<Option<usize>, ()> {
        match self.framing {
            Framing::Raw => Ok(None),
            Framing::Protobuf => {
                let Some(len) = self.buf.first_chunk::<4>() else {
                    return Ok(None);
                };
                let n = 4 + u32::from_be_bytes(*len) as usize;
                Ok((self.buf.len() >= n).then_some(n))
            }
            Framing::Json => {
                let mut values = serde_json::Deserializer::from_slice(&self.buf)
                    .into_iter::<serde::de::IgnoredAny>();
                match values.next() {
                    None => return Ok(None),
                    Some(Err(e)) if e.is_eof() => return Ok(None),
                    Some(Err(_)) => return Err(()),
                    Some(Ok(_)) => {}
                }
                let end = values.byte_offset();
                // The whitespace after the value, through its newline, goes with it.
                for (i, b) in self.buf[end..].iter().enumerate() {
                    match b {
                        b'\n' => return Ok(Some(end + i + 1)),
                        b' ' | b'\t' | b'\r' => {}
                        _ => return Ok(Some(end + i)),
                    }
                }
                Ok(None)
            }
        }
    }
}

/// The `type` of a watch event (`ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK`, `ERROR`), when the
/// framing has events and the event can be read.
pub fn event_type(framing: Framing, event: &[u8]) -> Option<String> {
    match framing {
        Framing::Raw => None,
        Framing::Json => {
            #[derive(serde::Deserialize)]
            struct Head {
                #[serde(rename = "type")]
                kind: String,
            }
            serde_json::from_slice::<Head>(event).ok().map(|h| h.kind)
        }
        // A `metav1.WatchEvent` message: field 1 is its type.
        Framing::Protobuf => protobuf_string_field(event.get(4..)?, 1),
    }
}

/// The first string field `number` of a protobuf message.
fn protobuf_string_field(mut msg: &[u8], number: u64) -> Option<String> {
    fn varint(msg: &mut &[u8]) -> Option<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&b, rest) = msg.split_first()?;
            *msg = rest;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }
    while !msg.is_empty() {
        let key = varint(&mut msg)?;
        match key & 7 {
            0 => {
                varint(&mut msg)?;
            }
            1 => msg = msg.get(8..)?,
            2 => {
                let n = usize::try_from(varint(&mut msg)?).ok()?;
                let value = msg.get(..n)?;
                if key >> 3 == number {
                    return String::from_utf8(value.to_vec()).ok();
                }
                msg = &msg[n..];
            }
            5 => msg = msg.get(4..)?,
            _ => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split_every_way(framing: Framing, stream: &[u8]) -> Vec<Vec<Bytes>> {
        // Every split of the stream into two chunks, and one byte at a time.
        let mut ways = vec![];
        for cut in 0..=stream.len() {
            let mut s = Splitter::new(framing);
            let mut events = s.push(Bytes::copy_from_slice(&stream[..cut]));
            events.extend(s.push(Bytes::copy_from_slice(&stream[cut..])));
            assert_eq!(s.pending(), 0, "cut at {cut}");
            ways.push(events);
        }
        let mut s = Splitter::new(framing);
        let mut events = vec![];
        for b in stream {
            events.extend(s.push(Bytes::copy_from_slice(&[*b])));
        }
        ways.push(events);
        ways
    }

    #[test]
    fn a_write_is_a_change_to_what_is_stored_leases_and_events_aside() {
        let is = |m: &str, path: &str| is_write(&m.parse().unwrap(), &path.parse().unwrap());
        assert!(is("POST", "/api/v1/namespaces/x/pods"));
        assert!(is(
            "PUT",
            "/apis/apps.kruise.io/v1alpha1/namespaces/x/clonesets/c/status"
        ));
        assert!(is("PATCH", "/api/v1/namespaces/x/persistentvolumeclaims/d"));
        assert!(is("DELETE", "/api/v1/namespaces/x/pods/p"));
        assert!(!is("GET", "/api/v1/namespaces/x/pods/p"));
        assert!(!is(
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/kruise-system/leases/kruise-manager"
        ));
        assert!(!is("POST", "/api/v1/namespaces/x/events"));
        assert!(!is("PATCH", "/apis/events.k8s.io/v1/namespaces/x/events/e"));
    }

    #[test]
    fn json_events_are_whole_lines_across_any_chunk_boundary() {
        let a = r#"{"type":"ADDED","object":{"kind":"ConfigMap","data":{"k":"a}\"{"}}}"#;
        let b = r#"{"type":"MODIFIED","object":{"kind":"ConfigMap"}}"#;
        let stream = format!("{a}\n{b}\n");
        for events in split_every_way(Framing::Json, stream.as_bytes()) {
            assert_eq!(events, [format!("{a}\n"), format!("{b}\n")]);
        }
    }

    #[test]
    fn a_json_event_waits_for_its_newline_and_values_without_one_still_split() {
        let mut s = Splitter::new(Framing::Json);
        assert!(
            s.push(Bytes::from_static(b"{\"type\":\"ADDED\"}"))
                .is_empty()
        );
        assert_eq!(s.pending(), 16);
        assert_eq!(
            s.push(Bytes::from_static(b"\n")),
            ["{\"type\":\"ADDED\"}\n"]
        );
        let events = s.push(Bytes::from_static(b"{\"a\":1}{\"b\":2}\n"));
        assert_eq!(events, ["{\"a\":1}", "{\"b\":2}\n"]);
    }

    #[test]
    fn a_stream_that_is_not_json_is_forwarded_as_it_comes() {
        let mut s = Splitter::new(Framing::Json);
        assert_eq!(
            s.push(Bytes::from_static(b"{\"a\":1}\nnot json")),
            ["{\"a\":1}\n", "not json"]
        );
        assert_eq!(s.push(Bytes::from_static(b" more")), [" more"]);
    }

    fn frame(body: &[u8]) -> Vec<u8> {
        let mut f = (body.len() as u32).to_be_bytes().to_vec();
        f.extend_from_slice(body);
        f
    }

    #[test]
    fn protobuf_frames_split_across_any_chunk_boundary_and_a_partial_frame_waits() {
        let (a, b, empty) = (frame(b"first event"), frame(&[0u8; 300]), frame(b""));
        let stream = [a.clone(), b.clone(), empty.clone()].concat();
        for events in split_every_way(Framing::Protobuf, &stream) {
            assert_eq!(events, [a.as_slice(), b.as_slice(), empty.as_slice()]);
        }
        let mut s = Splitter::new(Framing::Protobuf);
        assert!(s.push(Bytes::copy_from_slice(&b[..200])).is_empty());
        assert_eq!(s.pending(), 200);
        assert_eq!(s.finish().unwrap().len(), 200);
    }

    #[test]
    fn raw_streams_pass_chunk_by_chunk() {
        let mut s = Splitter::new(Framing::Raw);
        assert_eq!(s.push(Bytes::from_static(b"abc")), ["abc"]);
        assert!(s.push(Bytes::new()).is_empty());
        assert_eq!(s.pending(), 0);
    }

    #[test]
    fn event_types_are_read_from_json_and_protobuf() {
        assert_eq!(
            event_type(Framing::Json, br#"{"object":{"type":"x"},"type":"ERROR"}"#).as_deref(),
            Some("ERROR")
        );
        // WatchEvent{type: "MODIFIED" (1), object: {raw: ...} (2)}, object first.
        let mut msg = vec![0x12, 3, 0x0a, 1, b'x'];
        msg.extend([0x0a, 8]);
        msg.extend(b"MODIFIED");
        assert_eq!(
            event_type(Framing::Protobuf, &frame(&msg)).as_deref(),
            Some("MODIFIED")
        );
        assert_eq!(
            event_type(Framing::Protobuf, &frame(&[0x0a, 9, b'x'])),
            None
        );
        assert_eq!(event_type(Framing::Raw, b"{\"type\":\"ADDED\"}"), None);
    }

    #[test]
    fn watches_are_recognized_by_query_or_path_and_named_by_resource() {
        let r = |u: &str| watched_resource(&u.parse().unwrap());
        assert_eq!(r("/api/v1/pods?watch=true").as_deref(), Some("pods"));
        assert_eq!(
            r("/api/v1/namespaces/ns/configmaps?fieldSelector=metadata.name%3Dx&watch=1")
                .as_deref(),
            Some("configmaps")
        );
        assert_eq!(
            r("/apis/apps.kruise.io/v1alpha1/namespaces/ns/clonesets?allowWatchBookmarks=true&watch=true")
                .as_deref(),
            Some("clonesets")
        );
        assert_eq!(
            r("/api/v1/watch/namespaces/ns/pods/p").as_deref(),
            Some("pods")
        );
        assert_eq!(
            r("/api/v1/namespaces?watch=true").as_deref(),
            Some("namespaces")
        );
        assert_eq!(
            r("/api/v1/namespaces/ns?watch=t").as_deref(),
            Some("namespaces")
        );
        assert_eq!(r("/api/v1/pods?watch=false"), None);
        assert_eq!(r("/api/v1/namespaces/ns/pods"), None);
        assert_eq!(r("/apis/apps/v1/deployments?watchy=true"), None);
        assert_eq!(r("/version?watch=true"), None);
    }

    #[test]
    fn framing_follows_the_content_type() {
        let of = |ct: &str, enc: Option<&str>| {
            let mut h = HeaderMap::new();
            h.insert(header::CONTENT_TYPE, ct.parse().unwrap());
            if let Some(e) = enc {
                h.insert(header::CONTENT_ENCODING, e.parse().unwrap());
            }
            Framing::of(&h)
        };
        assert_eq!(of("application/json", None), Framing::Json);
        assert_eq!(of("application/json;stream=watch", None), Framing::Json);
        assert_eq!(
            of("application/vnd.kubernetes.protobuf;stream=watch", None),
            Framing::Protobuf
        );
        assert_eq!(of("application/cbor-seq", None), Framing::Raw);
        assert_eq!(of("application/json", Some("gzip")), Framing::Raw);
        assert_eq!(Framing::of(&HeaderMap::new()), Framing::Raw);
    }
}
