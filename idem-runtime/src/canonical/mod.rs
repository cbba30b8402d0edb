//! Canonical JSON: RFC 8785 (JCS) with exact integers, the text an
//! operation's arguments are hashed in.
//!
//! `primitives` holds what JCS says of strings, numbers and member order;
//! `value` writes a `serde_json::Value` (the reference); `ser` writes a
//! typed `Serialize` value straight, and must produce the same bytes.

mod primitives;
mod ser;
mod value;

pub use self::value::canonical_json;
pub(crate) use self::value::write_value;

/// Appends the canonical form of a typed value to `out`: written straight
/// from its `Serialize` (no `Value` in between) where the direct writer
/// covers it, else through `serde_json::to_value`.
pub(crate) fn write_typed<T: serde::Serialize + ?Sized>(
    out: &mut Vec<u8>,
    value: &T,
) -> Result<(), serde_json::Error> {
    let start = out.len();
    if ser::write_canonical(value, out).is_err() {
        out.truncate(start);
        write_value(out, &serde_json::to_value(value)?);
    }
    Ok(())
}

/// Runs `f` on an empty byte buffer this thread reuses (the hot path
/// derives a key per call).
pub(crate) fn with_buffer<R>(f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
    thread_local! {
        static BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    BUFFER.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buffer) => {
            buffer.clear();
            let out = f(&mut buffer);
            // Do not keep a huge argument's buffer alive.
            if buffer.capacity() > 1 << 16 {
                *buffer = Vec::with_capacity(256);
            }
            out
        }
        // Re-entered from `f` (a `Serialize` impl deriving a key): a buffer
        // of its own.
        Err(_) => f(&mut Vec::new()),
    })
}
