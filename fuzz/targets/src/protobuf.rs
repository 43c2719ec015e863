//! Protobuf bodies (`application/vnd.kubernetes.protobuf`): the `k8s\0` envelope with the
//! object inside, and the raw `WatchEvent` messages of watch streams.

use kapi_protobuf_codec::Codec;
use serde_json::Value;

/// An enveloped object. Asserts: what decodes re-encodes, and the re-encoding decodes to the
/// same JSON (kapi stores what it decoded and serves it back as protobuf).
pub fn protobuf_object(data: &[u8]) {
    let codec = Codec::global();
    let Ok(value) = codec.decode(data) else { return };
    round_trip(codec, &value);
}

/// One raw `WatchEvent` (a frame without its length prefix), as a client-go decoder of a
/// protobuf watch stream reads it. Asserts: the event's object, framed again by kapi's
/// encoder, decodes to the same event.
pub fn protobuf_watch(data: &[u8]) {
    let codec = Codec::global();
    let Ok(event) = codec.decode_watch_event(data) else { return };
    let (Some(Value::String(event_type)), Some(object)) = (event.get("type"), event.get("object")) else { return };
    if !object.get("kind").is_some_and(Value::is_string) {
        // A RawExtension that is not an enveloped object: nothing kapi would frame.
        return;
    }
    let encoded = round_trip(codec, object);
    let frame = codec.watch_frame(event_type, &encoded);
    let length = u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
    assert_eq!(length, frame.len() - 4, "frame length prefix");
    let again = codec.decode_watch_event(&frame[4..]).expect("kapi's own watch frame decodes");
    assert_eq!(again.get("type"), event.get("type"));
    assert_eq!(again.get("object"), Some(object), "watch frame round trip changed the object");
}

/// Encodes a decoded object and decodes it again; returns the encoding. Kinds the codec
/// decodes but does not encode are none: decoding chose the message from the same schema.
fn round_trip(codec: &Codec, value: &Value) -> Vec<u8> {
    let encoded = match codec.encode(value) {
        Ok(bytes) => bytes,
        Err(e) => panic!("a decoded object does not encode: {e}; object: {value}"),
    };
    let again = codec.decode(&encoded).expect("kapi's own encoding decodes");
    assert_eq!(&again, value, "protobuf round trip changed the object");
    encoded.to_vec()
}
